//! The fake engine against the real `iii-sdk`: registration, invocation both ways, a custom
//! trigger type, fires, canned answers, timeouts and a reconnect with replay.

use test_support::fake_engine;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_engine::{FakeEngine, WORKERS_REGISTER};
use iii_sdk::protocol::{RegisterTriggerInput, TriggerRequest};
use iii_sdk::runtime::WorkerMetadata;
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};
use iii_sdk::{
    Error, IIIClient, InitOptions, RegisterFunction, RegisterTriggerType, TriggerAction,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);
const TRIGGER_TYPE: &str = "selftest::tick";

type BoxFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>>;

/// A provider that records what the engine binds and unbinds, and refuses `{"bad": true}`.
#[derive(Clone, Default)]
struct Recorder {
    registered: Arc<Mutex<Vec<TriggerConfig>>>,
    unregistered: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn registered_ids(&self) -> Vec<String> {
        let seen = self.registered.lock().unwrap();
        seen.iter().map(|c| c.id.clone()).collect()
    }

    fn unregistered_ids(&self) -> Vec<String> {
        self.unregistered.lock().unwrap().clone()
    }
}

// `TriggerHandler` is an `#[async_trait]` trait; this is its expansion, written out because
// the crate does not depend on `async-trait` itself.
impl TriggerHandler for Recorder {
    fn register_trigger<'life0, 'async_trait>(
        &'life0 self,
        config: TriggerConfig,
    ) -> BoxFuture<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            if config.config.get("bad") == Some(&json!(true)) {
                return Err(Error::Handler("bad config".into()));
            }
            self.registered.lock().unwrap().push(config);
            Ok(())
        })
    }

    fn unregister_trigger<'life0, 'async_trait>(
        &'life0 self,
        config: TriggerConfig,
    ) -> BoxFuture<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            self.unregistered.lock().unwrap().push(config.id);
            Ok(())
        })
    }
}

fn connect(engine: &FakeEngine) -> IIIClient {
    let mut options = InitOptions {
        metadata: Some(WorkerMetadata {
            name: "selftest".into(),
            ..Default::default()
        }),
        // `OtelConfig` lives in `iii-helpers`, which iii-sdk does not re-export and this crate
        // does not depend on; build it through inference and set the field in place.
        otel: Some(Default::default()),
        ..Default::default()
    };
    if let Some(otel) = options.otel.as_mut() {
        otel.enabled = Some(false);
    }
    iii_sdk::register_worker(engine.url(), options)
}

fn request(function_id: &str, payload: Value, timeout_ms: Option<u64>) -> TriggerRequest {
    TriggerRequest {
        function_id: function_id.into(),
        payload,
        action: None,
        timeout_ms,
    }
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn fake_engine_against_the_real_sdk() {
    let engine = FakeEngine::start().await;
    assert!(engine.url().starts_with("ws://127.0.0.1:"));
    let iii = connect(&engine);

    let request_schema = json!({
        "type": "object",
        "properties": {"msg": {"type": "string"}},
        "required": ["msg"],
    });
    iii.register_function(
        "selftest::echo",
        RegisterFunction::new_async(|v: Value| async move { Ok::<_, Error>(json!({"echo": v})) })
            .description("Echoes its input")
            .request_format(request_schema.clone()),
    );
    iii.register_function(
        "selftest::not-found",
        RegisterFunction::new_async(|_: Value| async move {
            Err::<Value, _>(Error::Remote {
                code: "NOT_FOUND".into(),
                message: "nothing here".into(),
                stacktrace: None,
            })
        }),
    );
    iii.register_function(
        "selftest::boom",
        RegisterFunction::new_async(|_: Value| async move {
            Err::<Value, _>(Error::Handler("boom".into()))
        }),
    );
    let recorder = Recorder::default();
    iii.register_trigger_type(RegisterTriggerType::new(
        TRIGGER_TYPE,
        "Ticks for the self-test",
        recorder.clone(),
    ));
    iii.register_trigger(RegisterTriggerInput::new(
        "engine::functions-available",
        "selftest::echo",
        json!({}),
    ))
    .expect("bind engine::functions-available");

    // Ready, with the metadata the SDK sends.
    let ready = engine.wait_ready(WAIT).await.expect("worker ready");
    assert_eq!(ready["name"], "selftest");
    assert_eq!(ready["runtime"], "rust");
    assert!(ready["pid"].is_u64(), "{ready}");
    let first = engine.connections()[0].clone();
    assert_eq!(first.path, "/");
    assert_eq!(first.sent[0]["type"], "workerregistered");

    // Registrations.
    let echo = engine
        .wait_function("selftest::echo", WAIT)
        .await
        .expect("echo registered");
    assert_eq!(echo.description.as_deref(), Some("Echoes its input"));
    assert_eq!(echo.request_format, Some(request_schema));
    assert_eq!(
        echo.response_format.as_ref().and_then(|s| s.get("title")),
        Some(&json!("AnyValue")),
        "a Value handler gets the trivial AnyValue schema: {:?}",
        echo.response_format
    );
    engine.wait_function("selftest::boom", WAIT).await.unwrap();
    let tick = engine
        .wait_trigger_type(TRIGGER_TYPE, WAIT)
        .await
        .expect("trigger type registered");
    assert_eq!(tick.description, "Ticks for the self-test");
    let binding = engine
        .wait_worker_trigger(|t| t.trigger_type == "engine::functions-available", WAIT)
        .await
        .expect("worker binding");
    assert_eq!(binding.function_id, "selftest::echo");
    assert_eq!(engine.registration_count("selftest::echo"), 1);

    // Engine -> worker invocations.
    assert_eq!(
        engine
            .invoke("selftest::echo", json!({"msg": "hi"}))
            .await
            .unwrap(),
        json!({"echo": {"msg": "hi"}})
    );
    let err = engine
        .invoke("selftest::not-found", json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("NOT_FOUND", "nothing here")
    );
    let err = engine
        .invoke("selftest::boom", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code, "invocation_failed");
    assert_eq!(err.message, "handler error: boom");
    assert!(
        err.stacktrace.is_some(),
        "non-Remote errors carry a backtrace"
    );
    let err = engine
        .invoke("selftest::nope", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code, "function_not_found");

    // The engine binds subscribers to the worker's trigger type.
    engine
        .subscribe(
            "sub-1",
            TRIGGER_TYPE,
            "sub::fn",
            json!({"every": "1s"}),
            Some(json!({"tenant": "acme"})),
        )
        .await
        .expect("binding acked");
    {
        let seen = recorder.registered.lock().unwrap();
        let config = seen
            .iter()
            .find(|c| c.id == "sub-1")
            .expect("handler saw sub-1");
        assert_eq!(config.function_id, "sub::fn");
        assert_eq!(config.config, json!({"every": "1s"}));
        assert_eq!(config.metadata, Some(json!({"tenant": "acme"})));
    }
    let err = engine
        .subscribe(
            "sub-bad",
            TRIGGER_TYPE,
            "sub::fn",
            json!({"bad": true}),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, "trigger_registration_failed");
    assert!(err.message.contains("bad config"), "{err}");

    // The worker fires a subscriber.
    let fired = iii
        .trigger(
            TriggerRequest {
                function_id: "sub::fn".into(),
                payload: json!({"n": 1}),
                action: Some(TriggerAction::Void),
                timeout_ms: None,
            }
            .metadata(json!({"tenant": "acme"})),
        )
        .await
        .expect("void trigger");
    assert_eq!(fired, Value::Null);
    let fire = engine
        .wait_fire(|f| f.function_id == "sub::fn", WAIT)
        .await
        .expect("fire recorded");
    assert_eq!(fire.data, json!({"n": 1}));
    assert_eq!(fire.action, Some(json!({"type": "void"})));
    assert_eq!(fire.metadata, Some(json!({"tenant": "acme"})));
    assert!(
        engine
            .fires()
            .iter()
            .all(|f| f.function_id != WORKERS_REGISTER)
    );

    // Worker -> engine calls: canned value, closure, canned error, unknown, routed, silent.
    engine.respond("engine::functions::list", json!({"functions": []}));
    let listed = iii
        .trigger(request("engine::functions::list", json!({}), Some(5_000)))
        .await
        .unwrap();
    assert_eq!(listed, json!({"functions": []}));
    let call = engine
        .wait_call(|c| c.function_id == "engine::functions::list", WAIT)
        .await
        .unwrap();
    assert_eq!(call.namespace.as_deref(), Some("default"));

    engine.respond_with("math::double", |v| match v["n"].as_i64() {
        Some(n) => Ok(json!(n * 2)),
        None => Err(("BAD_INPUT".into(), "n must be an integer".into())),
    });
    let doubled = iii
        .trigger(request("math::double", json!({"n": 21}), Some(5_000)))
        .await
        .unwrap();
    assert_eq!(doubled, json!(42));
    match iii
        .trigger(request("math::double", json!({}), Some(5_000)))
        .await
    {
        Err(Error::Remote { code, .. }) => assert_eq!(code, "BAD_INPUT"),
        other => panic!("expected BAD_INPUT, got {other:?}"),
    }

    engine.respond_error(
        "configuration::get",
        "NOT_FOUND",
        "configuration 'x' not found",
    );
    match iii
        .trigger(request(
            "configuration::get",
            json!({"id": "x"}),
            Some(5_000),
        ))
        .await
    {
        Err(Error::Remote { code, message, .. }) => {
            assert_eq!(code, "NOT_FOUND");
            assert_eq!(message, "configuration 'x' not found");
        }
        other => panic!("expected NOT_FOUND, got {other:?}"),
    }
    match iii
        .trigger(request("nope::fn", json!({}), Some(5_000)))
        .await
    {
        Err(Error::Remote { code, message, .. }) => {
            assert_eq!(code, "function_not_found");
            assert_eq!(message, "Function nope::fn not found");
        }
        other => panic!("expected function_not_found, got {other:?}"),
    }
    // A call to a function the worker registered is routed back to it.
    let routed = iii
        .trigger(request(
            "selftest::echo",
            json!({"msg": "loop"}),
            Some(5_000),
        ))
        .await
        .unwrap();
    assert_eq!(routed, json!({"echo": {"msg": "loop"}}));

    engine.never_answer("slow::fn");
    let started = tokio::time::Instant::now();
    let silent = iii.trigger(request("slow::fn", json!({}), Some(300))).await;
    assert!(matches!(silent, Err(Error::Timeout)), "{silent:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(engine.calls().iter().any(|c| c.function_id == "slow::fn"));

    // Unbinding reaches the provider's handler.
    engine.unsubscribe("sub-1", TRIGGER_TYPE).unwrap();
    eventually("unregister_trigger(sub-1)", || {
        recorder.unregistered_ids() == ["sub-1"]
    })
    .await;

    // A binding made now is parked across the reconnect and delivered again.
    engine
        .subscribe("sub-2", TRIGGER_TYPE, "sub::fn", json!({}), None)
        .await
        .expect("sub-2 acked");

    // Reconnect: reattach first, then the replay, then the worker is ready again.
    assert_eq!(engine.close_connection().await, Ok(1));
    assert!(
        engine.functions().is_empty(),
        "a disconnect drops what the worker owned"
    );
    engine
        .wait_for(
            |frames| {
                frames
                    .iter()
                    .filter(|f| f["type"] == "registerfunction" && f["id"] == "selftest::echo")
                    .count()
                    == 2
            },
            WAIT,
        )
        .await
        .expect("registrations replayed");
    let ready = engine.wait_ready(WAIT).await.expect("ready again");
    assert_eq!(ready["name"], "selftest");
    assert_eq!(engine.registration_count("selftest::echo"), 2);
    assert_eq!(engine.registration_count("selftest::boom"), 2);

    let reattach = engine.reattaches().pop().expect("a reattach frame");
    assert_eq!(reattach.previous_worker_id, first.worker_id);
    assert_eq!(
        reattach.reattach_token.as_deref(),
        Some(first.reattach_token.as_str())
    );
    assert!(reattach.matched);
    let second = engine.connections().pop().unwrap();
    assert_eq!(second.id, reattach.connection);
    assert_eq!(
        second.frames[0]["type"], "reattach",
        "reattach precedes the replay"
    );
    eventually("sub-2 delivered again", || {
        recorder
            .registered_ids()
            .iter()
            .filter(|id| *id == "sub-2")
            .count()
            == 2
    })
    .await;
    assert_eq!(
        engine
            .invoke("selftest::echo", json!({"msg": "again"}))
            .await
            .unwrap(),
        json!({"echo": {"msg": "again"}})
    );

    // clear() forgets history but keeps live state.
    engine.clear();
    assert_eq!(engine.registration_count("selftest::echo"), 0);
    assert!(engine.frames().is_empty() && engine.fires().is_empty());
    assert!(engine.functions().contains_key("selftest::echo"));

    // OTel was off, so no /otel socket; shutting the worker down closes its socket.
    assert_eq!(engine.otel_connections(), 0);
    tokio::task::spawn_blocking(move || iii.shutdown())
        .await
        .unwrap();
    eventually("the worker socket to close", || {
        engine.connections().iter().all(|c| !c.open)
    })
    .await;
    assert!(engine.functions().is_empty());
    let err = engine
        .invoke("selftest::echo", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code, "function_not_found");
}

#[tokio::test]
async fn fake_engine_errors_instead_of_hanging() {
    let engine = FakeEngine::start().await;
    let short = Duration::from_millis(100);
    let err = engine.wait_ready(short).await.unwrap_err();
    assert!(err.contains("engine::workers::register"), "{err}");
    let err = engine
        .invoke_with("x::y", json!({}), None, short)
        .await
        .unwrap_err();
    assert_eq!(err.code, "function_not_found");
    let err = engine
        .subscribe_with_timeout("s", "no::type", "f", json!({}), None, short)
        .await
        .unwrap_err();
    assert_eq!(err.code, fake_engine::FAKE_TIMEOUT);
    assert!(engine.close_connection().await.is_err());
    assert!(engine.unsubscribe("s", "no::type").is_err());
    assert!(engine.send_to_worker(json!({"type": "ping"})).is_err());
}

#[tokio::test]
async fn otel_socket_is_accepted_and_drained() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;

    let engine = FakeEngine::start().await;
    let (mut otel, _) = tokio_tungstenite::connect_async(format!("{}/otel", engine.url()))
        .await
        .expect("connect /otel");
    otel.send(Message::Binary(b"OTLP{}".to_vec().into()))
        .await
        .unwrap();
    eventually("the /otel socket", || engine.otel_connections() == 1).await;
    assert!(
        engine.connections().is_empty(),
        "/otel is not a worker session"
    );
    assert!(engine.frames().is_empty());
}

fn connect_as(engine: &FakeEngine, name: &str) -> IIIClient {
    let mut options = InitOptions {
        metadata: Some(WorkerMetadata {
            name: name.into(),
            ..Default::default()
        }),
        otel: Some(Default::default()),
        ..Default::default()
    };
    if let Some(otel) = options.otel.as_mut() {
        otel.enabled = Some(false);
    }
    iii_sdk::register_worker(engine.url(), options)
}

/// A binding made by one connection (here before any provider exists) is forwarded to the
/// connection that provides its type; the provider's fires reach the subscriber's function; a
/// refusal goes back to the subscriber; unbinding and disconnecting reach the provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_made_by_one_connection_reaches_the_provider_on_another() {
    let engine = FakeEngine::start().await;
    let subscriber = connect_as(&engine, "selftest-subscriber");
    let (tx, mut received) = tokio::sync::mpsc::unbounded_channel();
    subscriber.register_function(
        "sub::got",
        RegisterFunction::new_async(move |payload: Value| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(payload);
                Ok::<_, Error>(json!(null))
            }
        }),
    );
    let first = subscriber
        .register_trigger(RegisterTriggerInput::new(
            TRIGGER_TYPE,
            "sub::got",
            json!({"k": 1}),
        ))
        .expect("bind");
    engine
        .wait_worker_trigger(|t| t.function_id == "sub::got", WAIT)
        .await
        .expect("the binding is recorded");

    // The provider comes later: the parked binding is delivered when it registers the type.
    let provider = connect_as(&engine, "selftest-provider");
    let recorder = Recorder::default();
    provider.register_trigger_type(RegisterTriggerType::new(
        TRIGGER_TYPE,
        "Ticks for the self-test",
        recorder.clone(),
    ));
    eventually("the provider to get the binding", || {
        recorder.registered_ids().len() == 1
    })
    .await;
    let bound = recorder.registered.lock().unwrap()[0].clone();
    assert_eq!(bound.function_id, "sub::got");
    assert_eq!(bound.config, json!({"k": 1}));

    // The provider fires; the subscriber's function runs.
    provider
        .trigger(TriggerRequest {
            function_id: "sub::got".into(),
            payload: json!({"n": 1}),
            action: Some(TriggerAction::Void),
            timeout_ms: None,
        })
        .await
        .expect("fire");
    let got = tokio::time::timeout(WAIT, received.recv())
        .await
        .expect("the fire arrives")
        .expect("a payload");
    assert_eq!(got, json!({"n": 1}));

    // A refused binding: the error goes back to the connection that made it.
    let _refused = subscriber
        .register_trigger(RegisterTriggerInput::new(
            TRIGGER_TYPE,
            "sub::got",
            json!({"bad": true}),
        ))
        .expect("bind");
    let subscriber_conn = engine
        .connections()
        .into_iter()
        .find(|c| {
            c.ready
                .as_ref()
                .is_some_and(|r| r["name"] == "selftest-subscriber")
        })
        .expect("the subscriber's connection")
        .id;
    eventually("the refusal to reach the subscriber", || {
        engine.connections().iter().any(|c| {
            c.id == subscriber_conn
                && c.sent.iter().any(|f| {
                    f["type"] == "triggerregistrationresult"
                        && f["error"]["code"] == "trigger_registration_failed"
                })
        })
    })
    .await;

    // Unbinding, then disconnecting, reach the provider.
    first.unregister();
    eventually("the provider to hear of the unbinding", || {
        recorder.unregistered_ids() == vec![bound.id.clone()]
    })
    .await;
    let _third = subscriber
        .register_trigger(RegisterTriggerInput::new(
            TRIGGER_TYPE,
            "sub::got",
            json!({"k": 3}),
        ))
        .expect("bind");
    eventually("the third binding", || recorder.registered_ids().len() == 2).await;
    let third_id = recorder.registered_ids()[1].clone();
    tokio::task::spawn_blocking(move || subscriber.shutdown())
        .await
        .unwrap();
    eventually("the provider to hear of the disconnect", || {
        recorder.unregistered_ids().contains(&third_id)
    })
    .await;
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap();
}

/// A call held back (`hold_calls`) waits unanswered, never reaching the connection that
/// registered the function, until `release_calls` routes it; the next call goes straight
/// through. What the browser test uses to land another writer's write before an update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_is_routed_only_when_released() {
    let engine = FakeEngine::start().await;
    let provider = connect_as(&engine, "selftest-provider");
    let (tx, mut ran) = tokio::sync::mpsc::unbounded_channel();
    provider.register_function(
        "prov::echo",
        RegisterFunction::new_async(move |payload: Value| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(payload.clone());
                Ok::<_, Error>(payload)
            }
        }),
    );
    engine
        .wait_function("prov::echo", WAIT)
        .await
        .expect("registered");
    let caller = Arc::new(connect_as(&engine, "selftest-caller"));
    engine.hold_calls("prov::echo");
    let call = {
        let caller = caller.clone();
        tokio::spawn(async move {
            caller
                .trigger(request("prov::echo", json!({"n": 1}), Some(10_000)))
                .await
        })
    };
    eventually("the call to be held", || {
        engine.held_calls("prov::echo") == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(ran.try_recv().is_err(), "a held call reaches nobody");
    assert!(!call.is_finished(), "a held call is not answered");
    assert_eq!(engine.release_calls("prov::echo"), 1);
    let answer = call.await.expect("join").expect("answered once released");
    assert_eq!(answer, json!({"n": 1}));
    assert_eq!(ran.recv().await, Some(json!({"n": 1})));
    assert_eq!(engine.held_calls("prov::echo"), 0);
    let again = caller
        .trigger(request("prov::echo", json!({"n": 2}), Some(10_000)))
        .await
        .expect("no longer held");
    assert_eq!(again, json!({"n": 2}));
}
