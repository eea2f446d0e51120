//! Wire tests of function search: the real `iii-directory` binary against the loopback fake
//! engine (`test_support::fake_engine`). The fake plays the engine's `engine::functions::list` and
//! `engine::functions::info` from a catalog the test edits, and the configuration worker from a
//! value the test edits.
//!
//! Covered: the catalog fetched at boot and after an `engine::functions-available` push
//! (`directory::on-functions-change`), a failing `functions::info` keeping the old catalog,
//! session memory keyed by the caller's baggage `iii.session.id`, each gate of the
//! pre-generate hint, the hook bound and unbound as `inject_hint` changes, `hint-preview`, and
//! the `iii-directory search` command.

use test_support::common::result_ids;
use test_support::{fake_engine, worker_process};

use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_engine::{ErrorBody, FakeEngine};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::time::Instant;
use worker_process::WorkerProcess;

const WAIT: Duration = Duration::from_secs(10);
const SEARCH: &str = "directory::search_functions";
const ON_FUNCTIONS_CHANGE: &str = "directory::on-functions-change";
const PRE_GENERATE: &str = "directory::pre-generate";
const HINT_PREVIEW: &str = "directory::hint-preview";
const ON_CONFIG_CHANGE: &str = "directory::on-config-change";
const HOOK: &str = "harness::hook::pre-generate";
const PUSH: &str = "engine::functions-available";
const WORKERS_PUSH: &str = "engine::workers-available";

/// A function as `engine::functions::info` describes it.
fn function(id: &str, description: &str, args: &[&str]) -> Value {
    let properties: serde_json::Map<String, Value> = args
        .iter()
        .map(|a| (a.to_string(), json!({ "type": "string" })))
        .collect();
    json!({
        "function_id": id,
        "description": description,
        "request_schema": { "type": "object", "properties": properties },
    })
}

fn base_catalog() -> Vec<Value> {
    vec![
        function(
            "mailer::send",
            "Send an email message over SMTP.",
            &["to", "subject", "body"],
        ),
        function(
            "storage::put",
            "Store a file in a bucket.",
            &["bucket", "key", "content"],
        ),
        function(
            "storage::get",
            "Read a stored file from a bucket.",
            &["bucket", "key"],
        ),
        function(
            "queue::enqueue",
            "Put a job on a named queue.",
            &["queue", "payload"],
        ),
        function(
            "engine::functions::list",
            "List functions registered with the engine.",
            &[],
        ),
        json!({ "function_id": "mailer::internal::flush", "description": "Flush the outbox.", "metadata": { "internal": true } }),
    ]
}

/// The engine side the test controls: the catalog and whether `functions::info` answers.
#[derive(Clone)]
struct Engine {
    catalog: Arc<Mutex<Vec<Value>>>,
    info_fails: Arc<Mutex<bool>>,
    config: Arc<Mutex<Value>>,
}

impl Engine {
    fn install(fake: &FakeEngine, config: Value) -> Engine {
        let engine = Engine {
            catalog: Arc::new(Mutex::new(base_catalog())),
            info_fails: Arc::new(Mutex::new(false)),
            config: Arc::new(Mutex::new(config)),
        };
        let catalog = engine.catalog.clone();
        fake.respond_with("engine::functions::list", move |_| {
            let functions: Vec<Value> = catalog
                .lock()
                .expect("catalog")
                .iter()
                .map(
                    |f| json!({ "function_id": f["function_id"], "description": f["description"] }),
                )
                .collect();
            Ok(json!({ "functions": functions }))
        });
        let catalog = engine.catalog.clone();
        let info_fails = engine.info_fails.clone();
        fake.respond_with("engine::functions::info", move |data| {
            if *info_fails.lock().expect("flag") {
                return Err(("invocation_failed".into(), "info is down".into()));
            }
            let wanted: Vec<String> =
                serde_json::from_value(data["function_ids"].clone()).unwrap_or_default();
            let functions: Vec<Value> = catalog
                .lock()
                .expect("catalog")
                .iter()
                .filter(|f| wanted.iter().any(|w| f["function_id"] == json!(w)))
                .cloned()
                .collect();
            Ok(json!({ "functions": functions }))
        });
        let config = engine.config.clone();
        fake.respond_with("configuration::get", move |data| {
            Ok(json!({ "id": data["id"], "value": config.lock().expect("config").clone() }))
        });
        fake.respond_with("configuration::register", Ok);
        fake.respond("worker::list", json!({ "workers": [] }));
        engine
    }

    fn set_catalog(&self, functions: Vec<Value>) {
        *self.catalog.lock().expect("catalog") = functions;
    }

    fn set(&self, key: &str, value: Value) {
        self.config.lock().expect("config")[key] = value;
    }
}

struct Harness {
    fake: FakeEngine,
    engine: Engine,
    worker: WorkerProcess,
    _tree: TempDir,
}

impl Harness {
    /// The worker up, its catalog fetched (a search finds `mailer::send`).
    async fn start(config: Value) -> Harness {
        Harness::start_with(config, &[]).await
    }

    /// [`Harness::start`] over a skills folder holding `skills` (`(id, content)`).
    async fn start_with(config: Value, skills: &[(&str, &str)]) -> Harness {
        Harness::start_env(config, skills, &[]).await
    }

    /// [`Harness::start_with`], the worker's environment with `env` on top.
    async fn start_env(
        config: Value,
        skills: &[(&str, &str)],
        env: &[(&str, Option<&str>)],
    ) -> Harness {
        Harness::start_prepared(config, skills, env, |_| {}).await
    }

    /// The worker up while the engine answers `engine::functions::list` with an error (so the
    /// boot's catalog fetch fails), its search registered.
    async fn start_while_the_engine_cannot_list(config: Value) -> Harness {
        let h = Harness::spawn(
            config,
            &[],
            &[],
            |_| {},
            |fake| {
                fake.respond_error("engine::functions::list", "timeout", "the engine is busy");
            },
        )
        .await;
        h.ok(SEARCH, h.fake.wait_function(SEARCH, WAIT).await);
        h
    }

    /// [`Harness::start_env`], with `prepare` given the Compose folder before the worker starts.
    async fn start_prepared(
        config: Value,
        skills: &[(&str, &str)],
        env: &[(&str, Option<&str>)],
        prepare: impl FnOnce(&Path),
    ) -> Harness {
        let h = Harness::spawn(config, skills, env, prepare, |_| {}).await;
        for id in [SEARCH, ON_FUNCTIONS_CHANGE, PRE_GENERATE, HINT_PREVIEW] {
            h.ok(id, h.fake.wait_function(id, WAIT).await);
        }
        h.ok(
            "the push binding",
            h.fake
                .wait_worker_trigger(|t| t.trigger_type == PUSH, WAIT)
                .await,
        );
        h.eventually("the boot catalog", || async {
            ids(&h.search(&["send an email"]).await) == ["mailer::send"]
        })
        .await;
        h
    }

    /// The worker spawned over a Compose folder with a skills folder holding `skills` (which
    /// `prepare` sees first), beside a fake engine given `config` and then `engine`; returns
    /// once the worker is ready.
    async fn spawn(
        config: Value,
        skills: &[(&str, &str)],
        env: &[(&str, Option<&str>)],
        prepare: impl FnOnce(&Path),
        engine: impl FnOnce(&FakeEngine),
    ) -> Harness {
        let fake = FakeEngine::start().await;
        let installed = Engine::install(&fake, config);
        engine(&fake);
        let tree = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(tree.path().join("skills")).expect("mkdir");
        for (id, content) in skills {
            write_skill(tree.path(), id, content);
        }
        prepare(tree.path());
        let worker = WorkerProcess::spawn(fake.url(), tree.path(), None, env);
        let h = Harness {
            fake,
            engine: installed,
            worker,
            _tree: tree,
        };
        h.ok("ready", h.fake.wait_ready(WAIT).await);
        h
    }

    fn ok<T>(&self, what: &str, waited: Result<T, String>) -> T {
        self.worker.expect(what, waited)
    }

    async fn call(&self, function_id: &str, data: Value) -> Value {
        let what = format!("{function_id} {data}");
        self.worker
            .expect(&what, self.fake.invoke(function_id, data).await)
    }

    async fn call_err(&self, function_id: &str, data: Value) -> ErrorBody {
        self.fake.invoke_err(function_id, data).await
    }

    async fn search(&self, capabilities: &[&str]) -> Value {
        self.call(SEARCH, json!({ "capabilities": capabilities }))
            .await
    }

    async fn search_in_session(&self, session: &str, capabilities: &[&str]) -> Value {
        let data = json!({ "capabilities": capabilities });
        let answer = self
            .fake
            .invoke_with_baggage(SEARCH, data, &format!("iii.session.id={session}"))
            .await;
        self.worker.expect(&format!("search in {session}"), answer)
    }

    async fn eventually<F, Fut>(&self, what: &str, check: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = bool>,
    {
        self.eventually_within(WAIT, what, check).await
    }

    async fn eventually_within<F, Fut>(&self, wait: Duration, what: &str, check: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = bool>,
    {
        let deadline = Instant::now() + wait;
        while !check().await {
            assert!(
                Instant::now() < deadline,
                "never: {what}\nworker stderr:\n{}",
                self.worker.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The hook binding the worker holds, if any.
    fn hook_binding(&self) -> Option<fake_engine::WorkerTrigger> {
        self.fake
            .worker_triggers()
            .into_values()
            .find(|t| t.trigger_type == HOOK)
    }

    async fn stop(self) {
        self.worker.stop().await;
    }
}

fn write_skill(tree: &Path, id: &str, content: &str) {
    let file = tree.join("skills").join(format!("{id}.md"));
    std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
    std::fs::write(file, content).expect("write skill");
}

/// Every candidate id of an answer, in order.
fn ids(answer: &Value) -> Vec<String> {
    answer["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|w| w["functions"].as_array().cloned().unwrap_or_default())
        .map(|f| f["function_id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The search settings of a test; no model (the hybrid tests below set their own).
fn settings(inject_hint: bool, hint_min_workers: u64) -> Value {
    json!({
        "inject_hint": inject_hint,
        "hint_min_workers": hint_min_workers,
        "registry_search": false,
        "search_model_download": false,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_that_adds_and_removes_functions_changes_the_next_answer() {
    let h = Harness::start(settings(false, 2)).await;
    let push = h
        .fake
        .worker_triggers()
        .into_values()
        .find(|t| t.trigger_type == PUSH)
        .expect("bound");
    assert_eq!(push.function_id, ON_FUNCTIONS_CHANGE);
    assert_eq!(push.config, json!({}));
    // A worker connecting or leaving refreshes the catalog too (a redeployed worker's new
    // descriptions change no function id, so the first push stays silent about them).
    let workers = h
        .fake
        .worker_triggers()
        .into_values()
        .find(|t| t.trigger_type == WORKERS_PUSH)
        .expect("bound");
    assert_eq!(workers.function_id, ON_FUNCTIONS_CHANGE);
    assert_eq!(workers.config, json!({}));

    let first = h.search(&["send an email", "store a file"]).await;
    assert_eq!(ids(&first), ["mailer::send", "storage::put"]);
    assert_eq!(
        first["workers"][0],
        json!({ "namespace": "mailer", "functions": [{ "function_id": "mailer::send", "description": "Send an email message over SMTP." }] })
    );
    assert!(first.get("installable").is_none());
    assert!(first["latency_ms"].is_number());
    // Never the engine's own functions, internal ones, or the search.
    let catalog_words = h.search(&["list functions registered engine"]).await;
    assert!(ids(&catalog_words).is_empty(), "{catalog_words}");
    assert!(ids(&h.search(&["flush the outbox"]).await).is_empty());

    let mut functions = base_catalog();
    functions.retain(|f| f["function_id"] != "mailer::send");
    functions.push(function(
        "resend::emails::send",
        "Send a transactional email through Resend. Any size.",
        &["from", "to", "subject", "html"],
    ));
    h.engine.set_catalog(functions);
    // Until the push, the indexed catalog answers.
    assert_eq!(ids(&h.search(&["send an email"]).await), ["mailer::send"]);
    h.fake.clear();
    let ack = h
        .call(
            ON_FUNCTIONS_CHANGE,
            json!({ "event": "functions_changed", "functions": [] }),
        )
        .await;
    assert_eq!(ack, json!({ "ok": true }));
    let info_calls: Vec<_> = h
        .fake
        .calls()
        .into_iter()
        .filter(|c| c.function_id == "engine::functions::info")
        .collect();
    assert_eq!(info_calls.len(), 1, "one batch for a small catalog");
    let asked: Vec<String> =
        serde_json::from_value(info_calls[0].data["function_ids"].clone()).unwrap_or_default();
    assert!(
        !asked.iter().any(|id| id.starts_with("engine::")),
        "{asked:?}"
    );

    let after = h.search(&["send an email", "store a file"]).await;
    assert_eq!(ids(&after), ["resend::emails::send", "storage::put"]);
    assert_eq!(
        after["workers"][0]["functions"][0]["description"],
        "Send a transactional email through Resend."
    );
    h.stop().await;
}

/// The ids the worker asked `engine::functions::info` for since the last `clear`.
fn info_asked(h: &Harness) -> Vec<String> {
    h.fake
        .calls()
        .into_iter()
        .filter(|c| c.function_id == "engine::functions::info")
        .flat_map(|c| serde_json::from_value::<Vec<String>>(c.data["function_ids"].clone()))
        .flatten()
        .collect()
}

/// Has the fake engine answer `engine::functions::list` as the real one does (each function's
/// worker and namespace named, internal ones left out) and `engine::workers::list` with each
/// worker's connection id; the connections of `mailer` and `storage` can be changed.
fn answer_as_the_real_engine(h: &Harness) -> Arc<Mutex<(&'static str, &'static str)>> {
    let catalog = h.engine.catalog.clone();
    h.fake.respond_with("engine::functions::list", move |_| {
        let functions: Vec<Value> = catalog
            .lock()
            .expect("catalog")
            .iter()
            .filter(|f| f["metadata"]["internal"] != json!(true))
            .map(|f| {
                let id = f["function_id"].as_str().unwrap_or_default();
                json!({
                    "function_id": id,
                    "namespace": "default",
                    "worker_name": id.split("::").next(),
                    "description": f["description"],
                })
            })
            .collect();
        Ok(json!({ "functions": functions }))
    });
    let connections = Arc::new(Mutex::new(("mailer-1", "storage-1")));
    let current = connections.clone();
    h.fake.respond_with("engine::workers::list", move |_| {
        let (mailer, storage) = *current.lock().expect("connections");
        Ok(json!({ "workers": [
            { "name": "mailer", "namespace": "default", "id": mailer },
            { "name": "storage", "namespace": "default", "id": storage },
            { "name": "queue", "namespace": "default", "id": "queue-1" },
        ]}))
    });
    connections
}

/// The periodic fetch asks only for what may have changed, but every tenth round for every
/// contract: a schema changed on the same connection under the same description is seen
/// within ten rounds, and an idle worker does not read every schema each minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_fetch_asks_for_every_contract_one_round_in_ten() {
    let h = Harness::start_env(
        settings(false, 2),
        &[],
        &[("III_DIRECTORY_CATALOG_RECHECK_MS", Some("100"))],
    )
    .await;
    answer_as_the_real_engine(&h);
    let mut functions = base_catalog();
    functions[1] = function(
        "storage::put",
        "Store a file in a bucket.",
        &["bucket", "key", "content", "content_type"],
    );
    h.engine.set_catalog(functions);
    h.fake.clear();
    h.eventually("storage::put asked for again", || async {
        info_asked(&h).iter().any(|id| id == "storage::put")
    })
    .await;
    // Over two seconds (about twenty rounds), about two ask for every contract; every round
    // would make twenty.
    h.fake.clear();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let asked = info_asked(&h);
    assert!(
        asked.len() <= 4 * 4,
        "{} contracts asked for in two seconds: {asked:?}",
        asked.len()
    );
    h.stop().await;
}

/// A push asks the engine for the contracts of the functions whose list entry changed or
/// whose worker connected again, and keeps the others: every short-lived client fires pushes,
/// and at thousands of functions asking for every contract reads a hundred megabytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_asks_only_for_the_contracts_that_may_have_changed() {
    let h = Harness::start(settings(false, 2)).await;
    let connections = answer_as_the_real_engine(&h);
    let push = async || {
        h.fake.clear();
        let ack = h
            .call(ON_FUNCTIONS_CHANGE, json!({ "event": "worker_connected" }))
            .await;
        assert_eq!(ack, json!({ "ok": true }));
        let mut asked = info_asked(&h);
        asked.sort();
        asked
    };
    assert_eq!(push().await.len(), 4, "nothing known before the first push");
    assert!(push().await.is_empty(), "a client came and went");

    let mut functions = base_catalog();
    functions[0] = function(
        "mailer::send",
        "Deliver a letter by electronic post.",
        &["to", "subject", "body"],
    );
    h.engine.set_catalog(functions.clone());
    assert_eq!(push().await, ["mailer::send"]);
    let answer = h.search(&["deliver a letter by electronic post"]).await;
    assert_eq!(
        answer["workers"][0]["functions"][0]["description"],
        "Deliver a letter by electronic post."
    );

    // The storage worker redeployed (a new argument, the same descriptions): its contracts
    // are asked for again.
    functions[1] = function(
        "storage::put",
        "Store a file in a bucket.",
        &["bucket", "key", "content", "content_type"],
    );
    h.engine.set_catalog(functions);
    *connections.lock().expect("connections") = ("mailer-1", "storage-2");
    assert_eq!(push().await, ["storage::get", "storage::put"]);
    h.stop().await;
}

/// The engine's pub/sub registers `publish` without a namespace; its `functions::info` entry
/// names the worker (`worker_name`), which the answer groups it under.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_without_a_namespace_is_answered_under_its_worker() {
    let h = Harness::start(settings(false, 2)).await;
    assert!(ids(&h.search(&["publish an event"]).await).is_empty());
    let mut functions = base_catalog();
    let mut publish = function("publish", "Publishes an event", &["topic", "data"]);
    publish["worker_name"] = json!("iii-pubsub");
    functions.push(publish);
    h.engine.set_catalog(functions);
    h.call(ON_FUNCTIONS_CHANGE, json!({ "event": "functions_changed" }))
        .await;
    let answer = h.search(&["publish an event", "send an email"]).await;
    assert_eq!(
        answer["workers"],
        json!([
            { "namespace": "iii-pubsub", "functions": [{ "function_id": "publish", "description": "Publishes an event" }] },
            { "namespace": "mailer", "functions": [{ "function_id": "mailer::send", "description": "Send an email message over SMTP." }] },
        ])
    );
    h.stop().await;
}

/// Until the worker holds the engine's catalog, a search does not answer that nothing is
/// installed: it fetches the catalog first, and says why when the engine cannot list it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_before_the_first_catalog_fetches_it_first() {
    let h = Harness::start_while_the_engine_cannot_list(settings(false, 2)).await;
    h.ok(
        "the boot fetch",
        h.fake
            .wait_call(|c| c.function_id == "engine::functions::list", WAIT)
            .await,
    );
    let error = h
        .call_err(SEARCH, json!({ "capabilities": ["send an email"] }))
        .await;
    assert!(
        error.message.contains("catalog_fetch_failed")
            && error.message.contains("the engine is busy"),
        "{error}"
    );
    // The engine lists its functions again: the next search fetches them, with no push.
    Engine::install(&h.fake, settings(false, 2));
    assert_eq!(ids(&h.search(&["send an email"]).await), ["mailer::send"]);
    h.stop().await;
}

/// A function registered again with a new description changes no function id, so the engine
/// pushes nothing; the worker's periodic fetch (`III_DIRECTORY_CATALOG_RECHECK_MS`) finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_description_without_a_push_is_found_by_the_periodic_fetch() {
    let h = Harness::start_env(
        settings(false, 2),
        &[],
        &[("III_DIRECTORY_CATALOG_RECHECK_MS", Some("200"))],
    )
    .await;
    let mut functions = base_catalog();
    functions[0] = function(
        "mailer::send",
        "Deliver a letter by electronic post.",
        &["to", "subject", "body"],
    );
    h.engine.set_catalog(functions);
    h.eventually("the new description", || async {
        let answer = h.search(&["deliver a letter by electronic post"]).await;
        answer["workers"][0]["functions"][0]["description"]
            == json!("Deliver a letter by electronic post.")
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_functions_info_keeps_the_old_catalog() {
    let h = Harness::start(settings(false, 2)).await;
    let mut functions = base_catalog();
    functions.retain(|f| f["function_id"] != "mailer::send");
    h.engine.set_catalog(functions);
    *h.engine.info_fails.lock().expect("flag") = true;
    let error = h
        .call_err(ON_FUNCTIONS_CHANGE, json!({ "event": "functions_changed" }))
        .await;
    assert!(
        error
            .message
            .contains("catalog_fetch_failed: catalog info failed for every function"),
        "{error}"
    );
    assert_eq!(ids(&h.search(&["send an email"]).await), ["mailer::send"]);

    // A malformed listing is refused the same way.
    h.fake
        .respond("engine::functions::list", json!({ "unexpected": true }));
    let error = h.call_err(ON_FUNCTIONS_CHANGE, json!({})).await;
    assert!(
        error
            .message
            .contains("catalog list response was malformed"),
        "{error}"
    );
    assert_eq!(ids(&h.search(&["send an email"]).await), ["mailer::send"]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_memory_follows_the_callers_baggage() {
    let h = Harness::start(settings(false, 2)).await;
    let first = h.search_in_session("s-1", &["send an email"]).await;
    assert_eq!(ids(&first), ["mailer::send"]);
    let second = h
        .search_in_session("s-1", &["send an email", "store a file"])
        .await;
    assert_eq!(ids(&second), ["storage::put"]);
    let guidance = second["guidance"].as_str().unwrap_or_default();
    assert!(
        guidance.contains("Already provided earlier in this session (candidates unchanged — reuse the earlier result): mailer::send."),
        "{guidance}"
    );
    // Another session, and a call without baggage, get everything.
    let other = h
        .search_in_session("s-2", &["send an email", "store a file"])
        .await;
    assert_eq!(ids(&other), ["mailer::send", "storage::put"]);
    for _ in 0..2 {
        let anonymous = h.search(&["send an email", "store a file"]).await;
        assert_eq!(ids(&anonymous), ["mailer::send", "storage::put"]);
    }
    // Everything repeated: all of it again.
    let again = h.search_in_session("s-1", &["store a file"]).await;
    assert_eq!(ids(&again), ["storage::put"]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_errors_arrive_with_the_contract_texts() {
    let h = Harness::start(settings(false, 2)).await;
    for (data, text) in [
        (
            json!({ "capabilities": [] }),
            "provide at least one capability",
        ),
        (
            json!({ "capabilities": ["a", "b", "c", "d", "e", "f", "g"] }),
            "provide at most 6 capabilities",
        ),
        (
            json!({ "capabilities": ["send mail", "  "] }),
            "capabilities must not be blank",
        ),
    ] {
        let error = h.call_err(SEARCH, data).await;
        assert_eq!(error.code, "invocation_failed");
        assert_eq!(error.message, format!("handler error: {text}"));
    }
    assert!(
        h.call_err(SEARCH, json!({ "query": "send mail" }))
            .await
            .message
            .contains("capabilities")
    );
    h.stop().await;
}

fn tools(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({ "name": n, "description": "d", "parameters": { "type": "object" } }))
        .collect()
}

fn generation(turn: &str, step: u64, tools_on_surface: &[&str], messages: Vec<Value>) -> Value {
    json!({
        "session_id": "hs-1", "turn_id": turn, "step": step, "depth": 0,
        "generate": {
            "system_prompt": "Base prompt.",
            "messages": messages,
            "functions_generation": 4,
            "tools": tools(tools_on_surface),
        },
    })
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": [{ "type": "text", "text": text }], "timestamp": 1 })
}

fn result(function_id: &str) -> Value {
    json!({ "role": "function_result", "function_call_id": "c", "function_id": function_id, "content": [], "details": {}, "is_error": false, "timestamp": 2 })
}

const WIDE: &[&str] = &[
    SEARCH,
    "mailer::send",
    "storage::put",
    "queue::enqueue",
    "engine::functions::info",
];

/// The reason a generation was skipped, or `None` when the hint went in.
async fn hook(h: &Harness, request: Value) -> Option<String> {
    let answer = h.call(PRE_GENERATE, request).await;
    assert_eq!(answer["decision"], "continue");
    let data = &answer["annotations"]["directory"]["data"];
    match data["outcome"].as_str() {
        Some("hint_injected") => {
            let prompt = answer["mutations"]["system_prompt"]
                .as_str()
                .unwrap_or_default();
            assert!(
                prompt.starts_with("Base prompt.\n\n<discovery_assist functions_generation=4>"),
                "{prompt}"
            );
            None
        }
        _ => Some(data["reason"].as_str().unwrap_or_default().to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_hint_gate_through_the_wire() {
    let h = Harness::start(settings(true, 3)).await;
    let task = || vec![user("email the quarterly report to the team")];
    assert_eq!(
        hook(
            &h,
            generation("t0", 0, &["mailer::send", "storage::put"], task())
        )
        .await
        .as_deref(),
        Some("search_unavailable")
    );
    let mut searched = task();
    searched.push(result(SEARCH));
    assert_eq!(
        hook(&h, generation("t0", 0, WIDE, searched))
            .await
            .as_deref(),
        Some("already_searched")
    );
    // hint_min_workers is 3 (from the configuration): two workers are too narrow.
    assert_eq!(
        hook(
            &h,
            generation("t0", 0, &[SEARCH, "mailer::send", "storage::put"], task())
        )
        .await
        .as_deref(),
        Some("narrow_surface")
    );
    let mut operating = task();
    operating.push(result("storage::put"));
    assert_eq!(
        hook(&h, generation("t0", 0, WIDE, operating))
            .await
            .as_deref(),
        Some("already_operating")
    );
    assert_eq!(
        hook(
            &h,
            generation("t0", 0, WIDE, vec![user("call `mailer::send` please")])
        )
        .await
        .as_deref(),
        Some("task_guided")
    );
    // Every gate clear: the hint, once per turn.
    assert_eq!(hook(&h, generation("t1", 1, WIDE, task())).await, None);
    assert_eq!(
        hook(&h, generation("t1", 1, WIDE, task())).await,
        None,
        "a replay of the same step"
    );
    assert_eq!(
        hook(&h, generation("t1", 2, WIDE, task())).await.as_deref(),
        Some("hint_already_sent")
    );
    assert_eq!(hook(&h, generation("t2", 3, WIDE, task())).await, None);

    let preview = h.call(HINT_PREVIEW, json!({})).await;
    for mode in ["agent_trigger", "native"] {
        let text = preview[mode].as_str().unwrap_or_default();
        assert!(
            text.starts_with("<discovery_assist functions_generation=0>"),
            "{mode}: {text}"
        );
    }
    assert!(
        preview["agent_trigger"]
            .as_str()
            .is_some_and(|t| t.contains("\"payload\": {\"capabilities\""))
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hook_is_bound_only_while_inject_hint_is_on() {
    let h = Harness::start(settings(false, 2)).await;
    assert!(h.hook_binding().is_none(), "off by default");

    h.engine.set("inject_hint", json!(true));
    assert_eq!(
        h.call(ON_CONFIG_CHANGE, json!({})).await,
        json!({ "ok": true })
    );
    let bound = h.ok(
        "the hook binding",
        h.fake
            .wait_worker_trigger(|t| t.trigger_type == HOOK, WAIT)
            .await,
    );
    assert_eq!(bound.function_id, PRE_GENERATE);
    assert_eq!(
        bound.config,
        json!({ "priority": 100, "timeout_ms": 5000, "on_error": "fail_open" })
    );
    // A reload that keeps it on binds nothing more.
    h.call(ON_CONFIG_CHANGE, json!({})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let hooks = h
        .fake
        .frames()
        .iter()
        .filter(|f| f["type"] == "registertrigger" && f["trigger_type"] == HOOK)
        .count();
    assert_eq!(hooks, 1);

    h.engine.set("inject_hint", json!(false));
    h.call(ON_CONFIG_CHANGE, json!({})).await;
    h.eventually("the hook unbound", || async { h.hook_binding().is_none() })
        .await;
    assert!(
        h.fake
            .unregistered_triggers()
            .iter()
            .any(|u| u.id == bound.id)
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_hint_on_at_boot_binds_the_hook_at_boot() {
    let h = Harness::start(settings(true, 2)).await;
    let bound = h.ok(
        "the hook binding",
        h.fake
            .wait_worker_trigger(|t| t.trigger_type == HOOK, WAIT)
            .await,
    );
    assert_eq!(bound.function_id, PRE_GENERATE);
    h.stop().await;
}

fn cli(args: &[&str], url: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iii-directory"))
        .args(args)
        .arg("--url")
        .arg(url)
        .env("OTEL_ENABLED", "false")
        .env("NO_COLOR", "1")
        .env_remove("III_URL")
        .env_remove("RUST_LOG")
        .output()
        .expect("run iii-directory search")
}

async fn cli_async(args: &'static [&'static str], url: String) -> Output {
    tokio::task::spawn_blocking(move || cli(args, &url))
        .await
        .expect("cli task")
}

/// [`cli_async`] for a command that must succeed: its stdout.
async fn cli_stdout(args: &'static [&'static str], url: String) -> String {
    let out = cli_async(args, url).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_command_prints_workers_and_functions() {
    let h = Harness::start(settings(false, 2)).await;
    let url = h.fake.url().to_string();
    let json = cli_stdout(
        &["search", "send an email", "store a file", "--json"],
        url.clone(),
    )
    .await;
    let answer: Value = serde_json::from_str(&json).expect("--json prints JSON");
    assert_eq!(ids(&answer), ["mailer::send", "storage::put"]);

    let text = cli_stdout(&["search", "send an email", "store a file"], url.clone()).await;
    let mailer = text.find("mailer").expect("the mailer worker");
    let send = text.find("mailer::send").expect("mailer::send");
    let storage = text.find("storage::put").expect("storage::put");
    assert!(mailer <= send && send < storage, "{text}");
    assert!(text.contains("Send an email message over SMTP."), "{text}");

    let out = cli_async(&["search", "a", "b", "c", "d", "e", "f", "g"], url).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("provide at most 6 capabilities"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_command_says_when_no_worker_or_no_engine_answers() {
    let fake = FakeEngine::start().await;
    let out = cli_async(&["search", "send an email"], fake.url().to_string()).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no iii-directory worker"), "{stderr}");

    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let out = cli_async(
        &["search", "send an email"],
        format!("ws://127.0.0.1:{closed}"),
    )
    .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no iii engine answered"), "{stderr}");

    // What the worker would refuse is refused at once, with no engine to ask.
    for (args, refusal) in [
        (
            &["search", "a", "b", "c", "d", "e", "f", "g"][..],
            "provide at most 6 capabilities",
        ),
        (&["search", "   "][..], "capabilities must not be blank"),
    ] {
        let started = Instant::now();
        let out = cli_async(args, format!("ws://127.0.0.1:{closed}")).await;
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(refusal), "{stderr}");
        assert!(!stderr.contains("no iii engine"), "{stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "waited for an engine"
        );
    }
}

const SKILLS_SEARCH: &str = "directory::skills::search";

/// Skills for the skill-search wire tests. `mailer` is not an installed worker (the fake's
/// `worker::list` is empty), so `filter_unregistered` hides `mailer/deliverability`.
const SKILLS: &[(&str, &str)] = &[
    (
        "email-etiquette",
        "---\ndescription: Write a clear, polite email to a customer and send it.\n---\n# Email etiquette\n\nKeep the subject short.\n",
    ),
    (
        "bulk-email-blast",
        "---\ndescription: Send an email blast to every customer at once.\ndisable-model-invocation: true\n---\n# Bulk email\n\nOnly a human starts this.\n",
    ),
    (
        "mailer/deliverability",
        "---\ndescription: Improve email deliverability when you send email.\n---\n# Deliverability\n\nSPF, DKIM.\n",
    ),
    (
        "queue-design",
        "---\ndescription: Design a job queue with retries and dead letters.\n---\n# Queues\n\nBackoff.\n",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_search_ranks_with_lists_visibility_and_reads_fresh() {
    let h = Harness::start_with(settings(false, 2), SKILLS).await;
    h.ok(
        "skills::search",
        h.fake.wait_function(SKILLS_SEARCH, WAIT).await,
    );
    let answer = h
        .call(
            SKILLS_SEARCH,
            json!({ "query": "send an email to a customer" }),
        )
        .await;
    assert_eq!(answer["mode"], "lexical");
    // The hidden namespace never shows; the row that disables model invocation is marked.
    assert_eq!(result_ids(&answer), ["email-etiquette", "bulk-email-blast"]);
    let rows = answer["results"].as_array().expect("rows");
    assert_eq!(rows[0]["title"], "Email etiquette");
    assert_eq!(
        rows[0]["description"],
        "Write a clear, polite email to a customer and send it."
    );
    assert_eq!(rows[0]["type"], Value::Null);
    assert_eq!(rows[0]["disable_model_invocation"], false);
    assert_eq!(rows[1]["disable_model_invocation"], true);
    assert!(rows[0]["score"].as_f64().expect("score") >= rows[1]["score"].as_f64().expect("score"));
    // limit and prefix.
    let one = h
        .call(
            SKILLS_SEARCH,
            json!({ "query": "send an email", "limit": 1 }),
        )
        .await;
    assert_eq!(result_ids(&one).len(), 1);
    let prefixed = h
        .call(
            SKILLS_SEARCH,
            json!({ "query": "send an email", "prefix": "bulk" }),
        )
        .await;
    assert_eq!(result_ids(&prefixed), ["bulk-email-blast"]);
    // A task no skill serves answers nothing.
    let none = h
        .call(SKILLS_SEARCH, json!({ "query": "bake sourdough bread" }))
        .await;
    assert_eq!(result_ids(&none), Vec::<String>::new());
    // Fresh reads: a skill written now is found by the next call.
    write_skill(
        h._tree.path(),
        "sourdough",
        "---\ndescription: Bake sourdough bread with a starter.\n---\n# Sourdough\n",
    );
    let fresh = h
        .call(SKILLS_SEARCH, json!({ "query": "bake sourdough bread" }))
        .await;
    assert_eq!(result_ids(&fresh), ["sourdough"]);
    // A blank query is refused.
    let refused = h.call_err(SKILLS_SEARCH, json!({ "query": "  " })).await;
    assert!(
        refused.message.contains("query must not be blank"),
        "{refused:?}"
    );
    // index::status says how search ranks.
    let status = h.call("directory::index::status", json!({})).await;
    assert_eq!(
        status["search"],
        json!({ "mode": "lexical", "model": null, "state": "absent", "embedded": 0, "pending": 5 })
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_functions_names_the_skills_of_each_capability() {
    let h = Harness::start_with(settings(false, 2), SKILLS).await;
    let answer = h
        .search(&[
            "send an email to a customer",
            "store a file",
            "summarize the provided text",
        ])
        .await;
    // The function answer keeps its shape.
    assert_eq!(ids(&answer), ["mailer::send", "storage::put"]);
    // Skills: only the capability a skill serves, without the row that disables model
    // invocation or the hidden namespace.
    assert_eq!(
        answer["skills"],
        json!([{
            "capability": "send an email to a customer",
            "skills": [{
                "id": "email-etiquette",
                "title": "Email etiquette",
                "description": "Write a clear, polite email to a customer and send it.",
            }],
        }])
    );
    // A capability that is only a JSON key searches for nothing, and the others keep their
    // skills.
    let with_key = h
        .search(&["send an email to a customer", "\"recipient\":"])
        .await;
    assert_eq!(with_key["skills"], answer["skills"], "{with_key}");
    // The guidance says what the field is for; an answer without it says nothing of skills.
    let guidance = answer["guidance"].as_str().unwrap_or_default();
    assert!(
        guidance.ends_with("beside or instead of the functions."),
        "{guidance}"
    );
    // A capability the search reads otherwise (JSON values, spaces around) is named as asked,
    // so that a caller matches each entry to its capability.
    let asked = "  {\"to\": \"a customer\", \"do\": \"send an email to a customer\"}";
    let keyed = h.search(&[asked]).await;
    assert_eq!(keyed["skills"][0]["capability"], asked, "{keyed}");
    // No capability a skill serves: no `skills` field at all.
    let plain = h.search(&["store a file"]).await;
    assert!(plain.get("skills").is_none(), "{plain}");
    assert!(
        !plain["guidance"]
            .as_str()
            .unwrap_or_default()
            .contains("`skills`"),
        "{plain}"
    );
    // The command line prints them under the functions.
    let text = cli_stdout(
        &["search", "send an email to a customer", "store a file"],
        h.fake.url().to_string(),
    )
    .await;
    let functions = text.find("mailer::send").expect("the function");
    let heading = text
        .find("skills for \"send an email to a customer\"")
        .expect("the skills heading");
    let skill = text.find("email-etiquette").expect("the skill");
    assert!(functions < heading && heading < skill, "{text}");
    assert!(
        text.contains("Write a clear, polite email to a customer and send it."),
        "{text}"
    );
    assert!(!text.contains("skills for \"store a file\""), "{text}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_named_each_skill_once() {
    let h = Harness::start_with(settings(false, 2), SKILLS).await;
    let email = "send an email to a customer";
    let queue = "design a job queue with retries";
    let first = h.search_in_session("s-1", &[email]).await;
    assert_eq!(
        first["skills"][0]["skills"][0]["id"], "email-etiquette",
        "{first}"
    );
    // Later in the session: only the new skill, and the guidance names the one left out.
    let second = h.search_in_session("s-1", &[email, queue]).await;
    assert_eq!(
        second["skills"],
        json!([{
            "capability": queue,
            "skills": [{
                "id": "queue-design",
                "title": "Queues",
                "description": "Design a job queue with retries and dead letters.",
            }],
        }]),
        "{second}"
    );
    let guidance = second["guidance"].as_str().unwrap_or_default();
    assert!(
        guidance.ends_with("if you no longer have it): email-etiquette."),
        "{guidance}"
    );
    // Another session, and a call without baggage, are named everything.
    for answer in [
        h.search_in_session("s-2", &[email, queue]).await,
        h.search(&[email, queue]).await,
    ] {
        assert_eq!(
            answer["skills"].as_array().map(Vec::len),
            Some(2),
            "{answer}"
        );
    }
    // Nothing new: all of it again (the caller most likely lost the earlier answer).
    let again = h.search_in_session("s-1", &[email]).await;
    assert_eq!(again["skills"], first["skills"], "{again}");
    assert!(
        !again["guidance"]
            .as_str()
            .unwrap_or_default()
            .contains("earlier in this session for these capabilities"),
        "{again}"
    );
    h.stop().await;
}

/// The model's state in `index::status`'s `search`.
async fn search_status(h: &Harness) -> Value {
    h.call("directory::index::status", json!({})).await["search"].clone()
}

/// A worker fetching the model from `url` (a loopback server), with `env` beside it.
async fn downloading_from(url: &str, env: &[(&str, &str)]) -> Harness {
    downloading_over(url, env, |_| {}).await
}

/// [`downloading_from`], with `prepare` given the Compose folder before the worker starts.
async fn downloading_over(url: &str, env: &[(&str, &str)], prepare: impl FnOnce(&Path)) -> Harness {
    let mut config = settings(false, 2);
    config["search_model_download"] = json!(true);
    let mut vars = vec![("III_DIRECTORY_MODEL_URL", Some(url))];
    vars.extend(env.iter().map(|&(name, value)| (name, Some(value))));
    Harness::start_prepared(config, SKILLS, &vars, prepare).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_model_downloads_search_is_lexical_and_the_status_says_so() {
    // A model server that takes the request and never answers.
    let stalled = test_support::loopback::http::Server::start(|stream| {
        std::thread::sleep(Duration::from_secs(30));
        drop(stream);
    });
    let h = downloading_from(&stalled.url(), &[]).await;
    h.eventually("downloading", || async {
        search_status(&h).await["state"] == "downloading"
    })
    .await;
    let status = search_status(&h).await;
    assert_eq!(
        status,
        json!({ "mode": "lexical", "model": "all-MiniLM-L6-v2", "state": "downloading", "embedded": 0, "pending": 4 })
    );
    let answer = h
        .call(SKILLS_SEARCH, json!({ "query": "send an email" }))
        .await;
    assert_eq!(answer["mode"], "lexical");
    assert_eq!(
        result_ids(&answer).first().map(String::as_str),
        Some("email-etiquette")
    );
    assert!(h.worker.stderr().contains("fetching the search model"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_download_is_in_the_status_with_its_reason() {
    let mut config = settings(false, 2);
    config["search_model_download"] = json!(true);
    // The harness's default: the download goes to a closed loopback port.
    let h = Harness::start_with(config, SKILLS).await;
    h.eventually("failed", || async {
        search_status(&h).await["state"] == "failed"
    })
    .await;
    let status = search_status(&h).await;
    assert_eq!(status["mode"], "lexical");
    let error = status["error"].as_str().expect("a reason");
    assert!(error.contains("127.0.0.1:9"), "{error}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_that_failed_for_a_passing_reason_is_tried_again() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // A model server that answers 500 (its upstream down): a passing failure, unlike a wrong
    // hash. The worker must not stay lexical until a restart.
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let down = test_support::loopback::http::Server::start(move |mut stream| {
        if test_support::loopback::http::read_request(&mut stream).is_ok() {
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = test_support::loopback::http::write_response(&mut stream, 500, &[], b"down");
        }
    });
    let h = downloading_from(&down.url(), &[("III_DIRECTORY_MODEL_RETRY_MS", "100")]).await;
    h.eventually("failed", || async {
        search_status(&h).await["state"] == "failed"
    })
    .await;
    h.eventually("a second attempt", || async {
        asked.load(Ordering::SeqCst) >= 2
    })
    .await;
    // Meanwhile search answers by its words.
    let answer = h
        .call(SKILLS_SEARCH, json!({ "query": "send an email" }))
        .await;
    assert_eq!(answer["mode"], "lexical");
    h.stop().await;
}

/// A server that sends its body a byte at a time, slowly enough that no read times out, is
/// given up on at the attempt's deadline, and the next attempt asks for the rest of the file (a
/// range from what arrived), not the whole of it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_that_trickles_is_given_up_at_its_deadline_and_resumed() {
    use std::io::Write;
    use test_support::loopback::http;
    let ranges = Arc::new(Mutex::new(Vec::<Option<String>>::new()));
    let asked = ranges.clone();
    let trickle = http::Server::start(move |mut stream| {
        let Ok(request) = http::read_request(&mut stream) else {
            return;
        };
        asked
            .lock()
            .expect("ranges")
            .push(request.header("range").map(str::to_string));
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 612\r\nConnection: close\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        // A byte every 50 ms, until the worker hangs up.
        while stream.write_all(b"{").and_then(|()| stream.flush()).is_ok() {
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let h = downloading_from(
        &trickle.url(),
        &[
            ("III_DIRECTORY_MODEL_ATTEMPT_MS", "2500"),
            ("III_DIRECTORY_MODEL_RETRY_MS", "100"),
        ],
    )
    .await;
    h.eventually("a second attempt", || async {
        ranges.lock().expect("ranges").len() >= 2
    })
    .await;
    let asked = ranges.lock().expect("ranges").clone();
    assert_eq!(asked[0], None, "the first attempt asks for the whole file");
    let resumed = asked[1]
        .as_deref()
        .expect("the second attempt asks for a range");
    let from: u64 = resumed
        .strip_prefix("bytes=")
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a range from what arrived: {resumed}"));
    assert!(from > 0, "{resumed}");
    let status = search_status(&h).await;
    assert_eq!(status["mode"], "lexical");
    h.stop().await;
}

/// Skills a paraphrase shares no word with (see `tests/search/hybrid.rs`).
const PARAPHRASED: &[(&str, &str)] = &[
    (
        "invoice-reminders",
        "---\ndescription: Chase customers who have not paid their bills.\n---\n# Invoice reminders\n\nSend polite payment reminders for overdue invoices.\n",
    ),
    (
        "garden-planner",
        "---\ndescription: Plan vegetable beds and planting dates.\n---\n# Garden planner\n\nWhich seeds to sow in which month.\n",
    ),
];

/// Where the worker lands the model it fetches, in the Compose folder `tree`.
fn fetched_copy(tree: &Path) -> std::path::PathBuf {
    tree.join("data/iii-directory/models")
        .join(iii_directory::embed::fetch::Source::pinned().folder)
}

/// A fetched copy damaged since it landed: every file at its pinned size (so it counts as
/// complete), zeros in place of its bytes.
fn land_a_damaged_copy(tree: &Path) {
    let folder = fetched_copy(tree);
    std::fs::create_dir_all(&folder).expect("mkdir");
    for file in iii_directory::embed::fetch::Source::pinned().files {
        let zeros = std::fs::File::create(folder.join(&file.name)).expect("create");
        zeros.set_len(file.size).expect("size");
    }
}

/// With downloads off, a fetched copy damaged since it landed is removed, and the status says
/// what brings the model back, rather than promising a restart that would change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_fetched_copy_is_removed_and_the_status_says_how_to_fetch_it_again() {
    let mut place = None;
    let h = Harness::start_prepared(settings(false, 2), SKILLS, &[], |tree| {
        land_a_damaged_copy(tree);
        place = Some(fetched_copy(tree));
    })
    .await;
    let folder = place.expect("the copy's folder");
    h.eventually("failed", || async {
        search_status(&h).await["state"] == "failed"
    })
    .await;
    let status = search_status(&h).await;
    assert_eq!(status["mode"], "lexical", "{status}");
    let error = status["error"].as_str().expect("a reason");
    assert!(
        error.contains("was damaged") && error.contains("search_model_download on"),
        "{error}"
    );
    assert!(!folder.exists(), "the damaged copy is removed");
    assert!(
        h.worker
            .stderr()
            .contains("config.json, tokenizer.json, model.safetensors")
    );
    h.stop().await;
}

/// A loopback server of the model's files from `model`, noting each file asked for in `asked`;
/// `before_weights` runs before the weights are served (the other files fetched by then).
fn model_server(
    model: std::path::PathBuf,
    asked: Arc<Mutex<Vec<String>>>,
    before_weights: impl Fn() + Send + Sync + 'static,
) -> test_support::loopback::http::Server {
    use test_support::loopback::http;
    http::Server::start(move |mut stream| {
        let Ok(request) = http::read_request(&mut stream) else {
            return;
        };
        let name = request
            .path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        asked.lock().expect("asked").push(name.clone());
        if name == "model.safetensors" {
            before_weights();
        }
        match std::fs::read(model.join(&name)) {
            Ok(body) => http::write_response(&mut stream, 200, &[], &body),
            Err(_) => http::write_response(&mut stream, 404, &[], b"no such file"),
        }
        .ok();
    })
}

/// With downloads on, the damaged copy is fetched again (all of it) and loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_fetched_copy_is_fetched_again_when_downloads_are_on() {
    let Some(model) = test_support::common::model_dir() else {
        return;
    };
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let server = model_server(model, asked.clone(), || {});
    let h = downloading_over(&server.url(), &[], land_a_damaged_copy).await;
    h.eventually_within(Duration::from_secs(120), "ready", || async {
        search_status(&h).await["state"] == "ready"
    })
    .await;
    let mut asked = asked.lock().expect("asked").clone();
    asked.sort();
    assert_eq!(
        asked,
        ["config.json", "model.safetensors", "tokenizer.json"],
        "the whole copy is fetched again, once"
    );
    assert!(h.worker.stderr().contains("fetching it again"));
    h.stop().await;
}

/// A copy fetched again that does not load either is not fetched a third time, and the status
/// says so (it stayed `loading`, with nothing in the log). Here a file checked on arrival is
/// damaged before the copy lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_fetched_again_that_does_not_load_is_a_failure_not_a_loop() {
    let Some(model) = test_support::common::model_dir() else {
        return;
    };
    let staged = Arc::new(Mutex::new(None::<std::path::PathBuf>));
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let damage = staged.clone();
    let server = model_server(model, asked.clone(), move || {
        if let Some(config) = damage.lock().expect("staged").as_ref() {
            std::fs::write(config, "x".repeat(612)).expect("damage the staged file");
        }
    });
    let h = downloading_over(&server.url(), &[], |tree| {
        land_a_damaged_copy(tree);
        let folder = iii_directory::embed::fetch::Source::pinned().folder;
        let staging = tree.join(format!("data/iii-directory/models/.{folder}.partial"));
        *staged.lock().expect("staged") = Some(staging.join("config.json"));
    })
    .await;
    h.eventually_within(Duration::from_secs(120), "failed", || async {
        search_status(&h).await["state"] == "failed"
    })
    .await;
    let status = search_status(&h).await;
    assert_eq!(status["mode"], "lexical", "{status}");
    assert!(
        h.worker
            .stderr()
            .contains("cannot load the search model fetched again")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        asked.lock().expect("asked").len(),
        3,
        "fetched once more, not again"
    );
    h.stop().await;
}

/// `search_model_path` naming the folder the worker would fetch into is the operator's folder:
/// a copy there that does not load is reported, never hashed against the pins nor removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_model_folder_is_never_removed() {
    let folder = iii_directory::embed::fetch::Source::pinned().folder;
    let mut config = settings(false, 2);
    config["search_model_path"] = json!(format!("data/iii-directory/models/{folder}"));
    let mut place = None;
    let h = Harness::start_prepared(config, SKILLS, &[], |tree| {
        land_a_damaged_copy(tree);
        place = Some(fetched_copy(tree));
    })
    .await;
    h.eventually("failed", || async {
        search_status(&h).await["state"] == "failed"
    })
    .await;
    assert!(
        place
            .expect("the folder")
            .join("model.safetensors")
            .exists()
    );
    assert!(
        h.worker
            .stderr()
            .contains("until the worker restarts with the model's files in place")
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_model_skill_search_and_search_functions_rank_hybrid() {
    let Some(model) = test_support::common::model_dir() else {
        return;
    };
    let mut config = settings(false, 2);
    config["search_model_path"] = json!(model.display().to_string());
    let h = Harness::start_with(config, PARAPHRASED).await;
    // Loading and embedding two skills and five functions in a debug build: seconds.
    h.eventually_within(Duration::from_secs(120), "hybrid", || async {
        search_status(&h).await["mode"] == "hybrid"
    })
    .await;
    assert_eq!(
        search_status(&h).await,
        json!({ "mode": "hybrid", "model": "all-MiniLM-L6-v2", "state": "ready", "embedded": 2, "pending": 0 })
    );
    let paraphrase = "nudge people who still owe me money";
    let answer = h.call(SKILLS_SEARCH, json!({ "query": paraphrase })).await;
    assert_eq!(answer["mode"], "hybrid");
    assert_eq!(result_ids(&answer), ["invoice-reminders"], "{answer}");
    let none = h
        .call(SKILLS_SEARCH, json!({ "query": "bake sourdough bread" }))
        .await;
    assert_eq!(result_ids(&none), Vec::<String>::new());
    // search_functions: the skills lane finds the paraphrased skill, and the function lane a
    // function whose words the capability does not use, once the catalog is embedded.
    h.eventually_within(Duration::from_secs(60), "a dense function hit", || async {
        ids(&h.search(&["deliver a note to someone's inbox"]).await)
            .contains(&"mailer::send".to_string())
    })
    .await;
    let answer = h.search(&[paraphrase]).await;
    assert_eq!(
        answer["skills"],
        json!([{
            "capability": paraphrase,
            "skills": [{
                "id": "invoice-reminders",
                "title": "Invoice reminders",
                "description": "Chase customers who have not paid their bills.",
            }],
        }])
    );
    h.stop().await;
}

/// The worker's settings with the model loaded from `III_DIRECTORY_SEARCH_MODEL`; `None` (the
/// test skips) without it.
fn with_the_model() -> Option<Value> {
    let model = test_support::common::model_dir()?;
    let mut config = settings(false, 2);
    config["search_model_path"] = json!(model.display().to_string());
    Some(config)
}

/// A capability only the dense lane serves (no word in common with `mailer::send`).
const INBOX: &str = "deliver a note to someone's inbox";

/// The catalog can arrive by a search (the boot's fetch failed, the model loaded meanwhile):
/// the lane embeds it as it embeds a pushed one. It kept the empty catalog it connected with,
/// and every later refresh found the catalog unchanged, so search stayed lexical for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_a_search_loaded_first_is_embedded_too() {
    let Some(config) = with_the_model() else {
        return;
    };
    let h = Harness::start_while_the_engine_cannot_list(config.clone()).await;
    h.eventually_within(Duration::from_secs(120), "the model ready", || async {
        search_status(&h).await["state"] == "ready"
    })
    .await;
    // The engine answers again; the first search fetches the catalog itself.
    Engine::install(&h.fake, config);
    assert_eq!(ids(&h.search(&["send an email"]).await), ["mailer::send"]);
    h.eventually_within(Duration::from_secs(60), "a dense hit", || async {
        ids(&h.search(&[INBOX]).await).contains(&"mailer::send".to_string())
    })
    .await;
    h.stop().await;
}

/// A function whose description changed is ranked by its words alone until its new text is
/// embedded, as a new function is, never by its old description's vector; the functions whose
/// text did not change keep their vectors meanwhile. The old vector answered for it until
/// every text of the new catalog was embedded (minutes for a large one in a debug build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_description_is_not_ranked_by_its_old_vector() {
    let Some(config) = with_the_model() else {
        return;
    };
    let h = Harness::start(config).await;
    let keep = "keep a document somewhere safe";
    h.eventually_within(Duration::from_secs(60), "dense hits", || async {
        ids(&h.search(&[INBOX]).await).contains(&"mailer::send".to_string())
            && ids(&h.search(&[keep]).await).contains(&"storage::put".to_string())
    })
    .await;
    let mut functions = base_catalog();
    functions[0] = function(
        "mailer::send",
        "Resize an image to a thumbnail.",
        &["image"],
    );
    // Enough new texts that the lane is still embedding them while the test looks (which the
    // log confirms below: no second pass has ended).
    let passes = |h: &Harness| {
        h.worker
            .stderr()
            .matches("function search texts embedded")
            .count()
    };
    h.eventually("the first catalog's pass logged", || async {
        passes(&h) > 0
    })
    .await;
    let before = passes(&h);
    functions.extend((0..1000).map(|i| {
        function(
            &format!("ledger{}::entry{i}", i % 5),
            &format!("Record ledger entry number {i} for the accounts of branch {i}."),
            &["entry"],
        )
    }));
    h.engine.set_catalog(functions);
    h.call(ON_FUNCTIONS_CHANGE, json!({})).await;
    h.eventually_within(Duration::from_secs(10), "the old vector left", || async {
        !ids(&h.search(&[INBOX]).await).contains(&"mailer::send".to_string())
    })
    .await;
    assert!(
        ids(&h.search(&[keep]).await).contains(&"storage::put".to_string()),
        "an unchanged function keeps its vector while the new texts are embedded"
    );
    assert_eq!(
        passes(&h),
        before,
        "the new catalog is still being embedded"
    );
    h.stop().await;
}
