//! End to end against a real engine (opt-in).

use super::*;

use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::{IIIClient, RegisterFunction};
use tokio::sync::mpsc;

use crate::engine_client::{client, try_call};

pub async fn call(iii: &IIIClient, function_id: &str, payload: Value) -> Value {
    try_call(iii, function_id, payload.clone())
        .await
        .unwrap_or_else(|e| panic!("{function_id} {payload}: {e}"))
}

/// Registers a subscriber function and binds it to every on-change type; events arrive as
/// `(payload, metadata)`.
pub fn subscribe(
    iii: &IIIClient,
    function_id: &str,
) -> mpsc::UnboundedReceiver<(Value, Option<Value>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    iii.register_function(
        function_id,
        RegisterFunction::new_async(move |payload: Value, metadata: Option<Value>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((payload, metadata));
                Ok::<_, iii_sdk::Error>(json!({}))
            }
        }),
    );
    for (n, trigger_type) in TRIGGER_TYPES.iter().enumerate() {
        iii.register_trigger(
            RegisterTriggerInput::new(*trigger_type, function_id, json!({}))
                .with_metadata(json!({ "m": n + 1 })),
        )
        .unwrap_or_else(|e| panic!("bind {trigger_type}: {e}"));
    }
    rx
}

/// The next event whose payload has this `op`, ignoring the engine's extra keys.
pub async fn next_event(
    rx: &mut mpsc::UnboundedReceiver<(Value, Option<Value>)>,
    op: &str,
) -> (Value, Option<Value>) {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(event)) if event.0["op"] == op => return event,
            Ok(Some(_)) => continue,
            _ => panic!("no {op} event within {WAIT:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_a_real_engine() {
    let Ok(url) = std::env::var("III_ENGINE_URL") else {
        println!("skipped: set III_ENGINE_URL=ws://… to run against a real engine");
        return;
    };
    let _turn = REAL_ENGINE.lock().await;
    let tree = fixture_tree();
    let worker = spawn_worker(&url, tree.path(), None, &[]);
    let pid = std::process::id();
    let iii = client(&url, format!("iii-directory-e2e-{pid}"));

    // Up: the status answers once the engine has applied the worker's registrations.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match try_call(&iii, "directory::index::status", json!({})).await {
            Ok(_) => break,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "the worker never answered on {url}: {e}\nstderr:\n{}",
                    worker.stderr()
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }

    // 1. Registration, as the engine reports it.
    for entry in manifest()["functions"].as_array().expect("functions") {
        let id = entry["id"].as_str().expect("id");
        let info = call(&iii, "engine::functions::info", json!({"function_id": id})).await;
        assert_eq!(info["description"], entry["description"], "{id}");
        assert_eq!(info["request_schema"], entry["request_format"], "{id}");
        assert_eq!(info["response_schema"], entry["response_format"], "{id}");
        if id == ON_CONFIG_CHANGE {
            assert_eq!(info["metadata"]["internal"], true, "{id}");
        }
    }
    for trigger_type in TRIGGER_TYPES {
        let info = call(&iii, "engine::triggers::info", json!({"id": trigger_type})).await;
        assert_eq!(info["id"], trigger_type);
    }
    let workers = call(&iii, "engine::workers::list", json!({})).await;
    assert!(
        workers["workers"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["name"] == WORKER_NAME)),
        "{workers}"
    );

    // 2. Reads.
    let list = call(&iii, "directory::skills::list", json!({})).await;
    // Whether `mailer` and `ghost` show depends on that engine's `worker::list`; `hello` has
    // no namespace and always shows.
    assert!(ids(&list).contains(&"hello".to_string()), "{list}");
    let got = call(&iii, "directory::skills::get", json!({"id": "hello"})).await;
    assert_eq!(got["body"], HELLO);
    let prompt = call(
        &iii,
        "directory::system-prompts::get",
        json!({"name": "iii-runtime"}),
    )
    .await;
    assert_eq!(prompt["builtin"], true);
    let agent = call(&iii, "directory::agents::get", json!({"id": "iii"})).await;
    assert_eq!(agent["id"], "iii");
    let status = call(&iii, "directory::index::status", json!({})).await;
    assert!(status["revision"].as_u64().is_some_and(|r| r > 0));

    // 5. Change events to a subscriber of our own.
    let subscriber = format!("e2e-{pid}::on-change");
    let mut events = subscribe(&iii, &subscriber);
    // Bindings reach the provider asynchronously, with no ack to the subscriber.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let id = format!("e2e-{pid}");
    call(
        &iii,
        "directory::skills::create",
        json!({"id": id, "content": "# E2E\n\nText.\n"}),
    )
    .await;
    let (payload, metadata) = next_event(&mut events, "create").await;
    assert_eq!(
        (&payload["namespace"], &payload["id"]),
        (&json!(id), &json!(id))
    );
    assert_eq!(metadata, Some(json!({"m": 1})));
    call(&iii, "directory::skills::delete", json!({"id": id})).await;
    next_event(&mut events, "delete").await;
    edit_externally(
        tree.path(),
        &format!("skills/{id}-ext.md"),
        "# Ext\n\nText.\n",
    );
    let (_, metadata) = next_event(&mut events, "external").await;
    assert_eq!(metadata, Some(json!({"m": 1})));

    tokio::task::spawn_blocking(move || iii.shutdown())
        .await
        .expect("client shutdown");
    worker.stop().await;
}
