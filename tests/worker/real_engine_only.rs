//! What only a real iii engine can show, run when `III_ENGINE_URL` names one (else it says so
//! and passes): bindings on trigger types another worker owns, handed over when that worker
//! registers the type (`console:script`, `console:style`, and the `worker` type the engine's
//! worker daemon provides); and the `engine::functions-available` push that refreshes the
//! function-search catalog. The fake engine only imitates these.
//!
//! ```sh
//! iii --config <loopback config>      # an engine on, say, ws://127.0.0.1:49150
//! III_ENGINE_URL=ws://127.0.0.1:49150 cargo test --test worker real_engine_only:: -- --nocapture
//! ```
//!
//! Use a freshly started engine with an empty configuration store: an `iii-directory` entry
//! stored by an earlier worker (another tree, say) is what a worker serves, its `--config` only a
//! seed, so this test's worker would serve that tree instead of its own.
//!
//! This test plays the console and the worker daemon itself: it registers their trigger types
//! and checks what the engine hands over and what the worker does with it.

use std::time::Duration;

use async_trait::async_trait;
use iii_sdk::protocol::{TriggerAction, TriggerRequest};
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};
use iii_sdk::{IIIClient, RegisterFunction, RegisterTriggerType};
use serde_json::{Value, json};
use test_support::engine_client::{client, try_call};
use test_support::loopback::registry::FakeRegistry;
use test_support::worker_process::WorkerProcess;
use tokio::sync::mpsc;
use tokio::time::Instant;

const WAIT: Duration = Duration::from_secs(30);

async fn call(iii: &IIIClient, function_id: &str, payload: Value) -> Result<Value, String> {
    try_call(iii, function_id, payload)
        .await
        .map_err(|e| e.to_string())
}

/// A trigger type provider that hands every binding it receives to the test.
struct Provider(mpsc::UnboundedSender<TriggerConfig>);

#[async_trait]
impl TriggerHandler for Provider {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), iii_sdk::Error> {
        let _ = self.0.send(config);
        Ok(())
    }

    async fn unregister_trigger(&self, _: TriggerConfig) -> Result<(), iii_sdk::Error> {
        Ok(())
    }
}

fn provide(iii: &IIIClient, trigger_type: &str) -> mpsc::UnboundedReceiver<TriggerConfig> {
    let (tx, rx) = mpsc::unbounded_channel();
    iii.register_trigger_type(RegisterTriggerType::new(
        trigger_type,
        "played by the real-engine test",
        Provider(tx),
    ));
    rx
}

async fn binding_to(
    rx: &mut mpsc::UnboundedReceiver<TriggerConfig>,
    function_id: &str,
) -> TriggerConfig {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(config)) if config.function_id == function_id => return config,
            Ok(Some(_)) => continue,
            _ => panic!("no binding to {function_id} within {WAIT:?}"),
        }
    }
}

/// Polls `check` until it answers `Some`, or fails saying what was awaited.
async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_only_a_real_engine_shows() {
    let Ok(url) = std::env::var("III_ENGINE_URL") else {
        println!("skipped: set III_ENGINE_URL=ws://… to run against a real engine");
        return;
    };
    let _turn = super::REAL_ENGINE.lock().await;
    let pid = std::process::id();
    let registry = FakeRegistry::start();
    registry.bundle("mailer", &[("SKILL.md", "# Mailer\n\nSends mail.\n")]);
    let tree = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(tree.path().join("skills")).expect("mkdir");
    let seed = tree.path().join("seed.yaml");
    std::fs::write(
        &seed,
        format!(
            "registry_url: {}\nfilter_unregistered: false\nauto_download: true\n",
            registry.url()
        ),
    )
    .expect("seed");
    let client_name = format!("iii-directory-real-engine-{pid}");
    let iii = client(&url, client_name.clone());
    // The console's and the worker daemon's trigger types, as those workers would register
    // them; the worker binds to them before or after, and the engine hands the bindings over.
    let mut console_scripts = provide(&iii, "console:script");
    let mut console_styles = provide(&iii, "console:style");
    let mut worker_events = provide(&iii, "worker");
    let worker = WorkerProcess::spawn(&url, tree.path(), Some(&seed), &[("HTTPS_PROXY", None)]);

    // Ours is the worker answering (another iii-directory on that engine would refuse ours).
    let index_path = tree.path().display().to_string();
    eventually("this test's worker answering on the engine", || {
        let (iii, index_path) = (&iii, index_path.clone());
        async move {
            let status = call(iii, "directory::index::status", json!({}))
                .await
                .ok()?;
            status["index_path"]
                .as_str()?
                .starts_with(&index_path)
                .then_some(())
        }
    })
    .await;

    // A configuration stored by an earlier run wins over the seed: set the tunables this test
    // needs once the worker has registered its entry (auto_download is on by default).
    let settings = json!({
        "id": "iii-directory",
        "value": { "registry_url": registry.url(), "filter_unregistered": false },
    });
    eventually(
        "the worker's configuration entry accepts the test's settings",
        || {
            let (iii, settings) = (&iii, settings.clone());
            async move { call(iii, "configuration::set", settings).await.ok() }
        },
    )
    .await;

    // The console's asset triggers reach the console with exactly `{path}`, and the assets
    // they name are served.
    for (rx, path, content_type) in [
        (
            &mut console_scripts,
            "iii-directory/page.js",
            "text/javascript; charset=utf-8",
        ),
        (
            &mut console_styles,
            "iii-directory/styles.css",
            "text/css; charset=utf-8",
        ),
    ] {
        let binding = binding_to(rx, "iii-directory::ui-content").await;
        assert_eq!(binding.config, json!({ "path": path }));
        let asset = call(&iii, "iii-directory::ui-content", json!({ "path": path }))
            .await
            .expect("ui-content");
        assert_eq!(asset["content_type"], content_type);
        assert!(asset["content"].as_str().is_some_and(|c| c.len() > 100));
    }

    // The worker-added binding reaches the daemon's type with the contract's config; an `add`
    // event at stage `done` downloads that worker's skills.
    let binding = binding_to(&mut worker_events, "directory::__on_worker_added").await;
    assert_eq!(
        binding.config,
        json!({ "operations": ["add"], "stages": ["done"] })
    );
    let event = json!({
        "operation": "add", "worker": "mailer", "stage": "done",
        "timestamp_ms": 0, "caller_mode": "cli",
    });
    iii.trigger(TriggerRequest {
        function_id: binding.function_id.clone(),
        payload: event,
        action: Some(TriggerAction::Void),
        timeout_ms: None,
    })
    .await
    .expect("fire worker added");
    let overview = eventually("the added worker's skills downloaded and served", || {
        let iii = &iii;
        async move {
            call(iii, "directory::skills::get", json!({ "id": "mailer" }))
                .await
                .ok()
        }
    })
    .await;
    assert_eq!(overview["title"], "Mailer");
    assert!(
        tree.path()
            .join("skills/mailer/.iii-skill-complete")
            .is_file()
    );

    // A function registered now reaches the search catalog through the engine's
    // `engine::functions-available` push (the engine polls every 5 s). One whose id has no
    // namespace is grouped under the worker the engine says registered it: this client.
    let fax = format!("fax{pid}::send_fax");
    let page = format!("page{pid}");
    for (id, description) in [
        (&fax, "Send a fax to a phone number."),
        (&page, "Page the engineer on call about an outage."),
    ] {
        iii.register_function(
            id,
            RegisterFunction::new_async(|_: Value| async { Ok::<_, iii_sdk::Error>(json!({})) })
                .description(description),
        );
    }
    let found = eventually("the new functions found by search", || {
        let (iii, fax, page, client_name) = (&iii, &fax, &page, &client_name);
        async move {
            let answer = call(
                iii,
                "directory::search_functions",
                json!({ "capabilities": ["send a fax to a phone number", "page the engineer on call"] }),
            )
            .await
            .ok()?;
            let workers = answer["workers"].as_array()?;
            let listed = |namespace: &str, id: &str| {
                workers.iter().any(|w| {
                    w["namespace"] == namespace
                        && w["functions"]
                            .as_array()
                            .is_some_and(|f| f.iter().any(|f| f["function_id"] == id))
                })
            };
            (listed(&format!("fax{pid}"), fax) && listed(client_name, page)).then_some(answer)
        }
    })
    .await;
    println!("search after the push: {found}");

    tokio::task::spawn_blocking(move || iii.shutdown())
        .await
        .expect("client shutdown");
    worker.stop().await;
}
