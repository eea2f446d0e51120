//! Wire tests of the worker's side of the console's injectable UI: `iii-directory::ui-content`
//! and the `console:script` / `console:style` triggers (`../shared/spec/console-ui.md` §1–2),
//! with the real binary against the loopback fake engine. One test plays the console over a
//! plain WebSocket (provider of the two trigger types), as the console worker would; one runs
//! the development mode (`III_DIRECTORY_UI_DIR`) and edits a file under it.

use test_support::{fake_engine, worker_process};

use std::fs;
use std::path::Path;
use std::time::Duration;

use fake_engine::{FakeEngine, WorkerTrigger};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use worker_process::WorkerProcess;

const WAIT: Duration = Duration::from_secs(15);
const UI_CONTENT: &str = "iii-directory::ui-content";
const SCRIPT: (&str, &str, &str, &str) = (
    "console:script",
    "iii-directory/page.js",
    "page.js",
    "text/javascript; charset=utf-8",
);
const STYLE: (&str, &str, &str, &str) = (
    "console:style",
    "iii-directory/styles.css",
    "styles.css",
    "text/css; charset=utf-8",
);

fn compiled(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ui").join(file);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A Compose folder with one skill and an empty agents folder.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::create_dir_all(dir.path().join("skills")).expect("mkdir");
    fs::create_dir_all(dir.path().join("agents")).expect("mkdir");
    fs::write(dir.path().join("skills/hello.md"), "# Hello\n\nHi.\n").expect("write");
    dir
}

struct Running {
    engine: FakeEngine,
    worker: WorkerProcess,
    _tree: tempfile::TempDir,
}

impl Running {
    async fn start(env: &[(&str, Option<&str>)]) -> Running {
        let engine = FakeEngine::start().await;
        let tree = tree();
        let worker = WorkerProcess::spawn(engine.url(), tree.path(), None, env);
        let running = Running {
            engine,
            worker,
            _tree: tree,
        };
        running.ok(running.engine.wait_function(UI_CONTENT, WAIT).await);
        running
    }

    fn ok<T>(&self, waited: Result<T, String>) -> T {
        self.worker.expect("waiting on the engine", waited)
    }

    async fn content(&self, path: &str) -> Value {
        let answer = self
            .engine
            .invoke(UI_CONTENT, json!({ "path": path }))
            .await;
        self.worker.expect(&format!("ui-content {path}"), answer)
    }

    /// The worker's binding on `trigger_type` whose id is not in `except`.
    async fn asset_trigger(&self, trigger_type: &str, except: &[&str]) -> WorkerTrigger {
        self.ok(self
            .engine
            .wait_worker_trigger(
                |t| t.trigger_type == trigger_type && !except.contains(&t.id.as_str()),
                WAIT,
            )
            .await)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_content_serves_both_assets_with_their_content_types() {
    let r = Running::start(&[]).await;
    let function = &r.engine.functions()[UI_CONTENT];
    assert_eq!(function.metadata, Some(json!({ "internal": true })));
    let request = function.request_format.as_ref().expect("request schema");
    assert_eq!(request["required"], json!(["path"]), "{request}");

    for (_, path, file, content_type) in [SCRIPT, STYLE] {
        let answer = r.content(path).await;
        assert_eq!(
            answer,
            json!({ "content": compiled(file), "content_type": content_type }),
            "{path}"
        );
    }
    let page = compiled("page.js");
    assert!(
        page.contains("export default function setup(host)"),
        "the script is the page module"
    );

    let err = r
        .engine
        .invoke(UI_CONTENT, json!({ "path": "iii-directory/nope.js" }))
        .await
        .expect_err("an unknown path is an error");
    assert_eq!(err.code, "invocation_failed", "{err}");
    for needle in [
        "\"iii-directory/nope.js\"",
        "iii-directory/page.js",
        "iii-directory/styles.css",
    ] {
        assert!(err.message.contains(needle), "{needle} in {err}");
    }
    let err = r
        .engine
        .invoke(UI_CONTENT, json!({}))
        .await
        .expect_err("a request without path is an error");
    assert!(err.message.contains("path must be a string"), "{err}");
    r.worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_asset_triggers_are_the_workers_own_with_exactly_the_path_config() {
    let r = Running::start(&[]).await;
    for (trigger_type, path, _, _) in [SCRIPT, STYLE] {
        let trigger = r.asset_trigger(trigger_type, &[]).await;
        assert_eq!(trigger.function_id, UI_CONTENT);
        assert_eq!(trigger.config, json!({ "path": path }));
        assert_eq!(trigger.metadata, None);
    }
    let console_triggers: Vec<WorkerTrigger> = r
        .engine
        .worker_triggers()
        .into_values()
        .filter(|t| t.trigger_type.starts_with("console:"))
        .collect();
    assert_eq!(
        console_triggers.len(),
        2,
        "one trigger per asset: {console_triggers:?}"
    );
    r.worker.stop().await;
}

/// A minimal console: a WebSocket connection to the fake engine speaking the worker protocol.
struct Console {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl Console {
    async fn connect(url: &str) -> Console {
        let (socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("connect to the fake engine");
        Console { socket }
    }

    async fn send(&mut self, frame: Value) {
        self.socket
            .send(Message::Text(frame.to_string().into()))
            .await
            .expect("send a frame");
    }

    /// The next text frame whose `type` is `kind`.
    async fn next(&mut self, kind: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let frame = tokio::time::timeout_at(deadline, self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("no {kind} frame within {WAIT:?}"))
                .expect("the socket stays open")
                .expect("a frame");
            if let Message::Text(text) = frame {
                let value: Value = serde_json::from_str(&text).expect("JSON frame");
                if value["type"] == kind {
                    return value;
                }
            }
        }
    }
}

/// The console connects after the worker: the engine hands it the worker's parked asset
/// triggers, the console acks them and fetches each asset through the trigger's function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_that_connects_later_gets_the_triggers_and_fetches_the_assets() {
    let r = Running::start(&[]).await;
    r.asset_trigger(STYLE.0, &[]).await;
    let mut console = Console::connect(r.engine.url()).await;
    for (trigger_type, _, _, _) in [SCRIPT, STYLE] {
        console
            .send(json!({ "type": "registertriggertype", "id": trigger_type, "description": "console assets" }))
            .await;
    }
    // Both parked bindings arrive when the types are registered; then each is acked and used.
    let bindings = [
        console.next("registertrigger").await,
        console.next("registertrigger").await,
    ];
    let mut fetched = Vec::new();
    for (n, binding) in bindings.into_iter().enumerate() {
        assert_eq!(binding["function_id"], UI_CONTENT);
        console
            .send(json!({
                "type": "triggerregistrationresult", "id": binding["id"],
                "trigger_type": binding["trigger_type"], "function_id": binding["function_id"],
            }))
            .await;
        let invocation = format!("00000000-0000-4000-8000-00000000000{n}");
        console
            .send(json!({
                "type": "invokefunction", "invocation_id": invocation,
                "function_id": binding["function_id"], "data": binding["config"],
            }))
            .await;
        let result = console.next("invocationresult").await;
        assert_eq!(result["invocation_id"], invocation.as_str());
        fetched.push((
            binding["trigger_type"].as_str().expect("type").to_string(),
            binding["config"].clone(),
            result["result"].clone(),
        ));
    }
    fetched.sort_by(|a, b| a.0.cmp(&b.0));
    for ((trigger_type, config, result), (expected_type, path, file, content_type)) in
        fetched.into_iter().zip([SCRIPT, STYLE])
    {
        assert_eq!(trigger_type, expected_type);
        assert_eq!(config, json!({ "path": path }));
        assert_eq!(result["content"], compiled(file).as_str());
        assert_eq!(result["content_type"], content_type);
    }
    r.worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn development_mode_serves_the_folder_and_announces_a_change_new_first() {
    let folder = tempfile::tempdir().expect("temp dir");
    fs::write(
        folder.path().join("page.js"),
        "export default function setup() {}\n",
    )
    .expect("write");
    fs::write(
        folder.path().join("styles.css"),
        "[data-iii-ui=\"iii-directory\"] .dir { color: red; }\n",
    )
    .expect("write");
    let dir = folder.path().to_str().expect("utf-8 path");
    let r = Running::start(&[("III_DIRECTORY_UI_DIR", Some(dir))]).await;
    assert_eq!(
        r.content(SCRIPT.1).await["content"],
        "export default function setup() {}\n"
    );
    let first = r.asset_trigger(SCRIPT.0, &[]).await;
    let style = r.asset_trigger(STYLE.0, &[]).await;

    let edited = "export default function setup() { return () => {}; }\n";
    fs::write(folder.path().join("page.js"), edited).expect("edit page.js");
    let second = r.asset_trigger(SCRIPT.0, &[first.id.as_str()]).await;
    assert_eq!(second.function_id, UI_CONTENT);
    assert_eq!(second.config, json!({ "path": SCRIPT.1 }));
    r.ok(r
        .engine
        .wait_for(
            |frames| {
                frames
                    .iter()
                    .any(|f| f["type"] == "unregistertrigger" && f["id"] == first.id.as_str())
            },
            WAIT,
        )
        .await);
    let frames = r.engine.frames();
    let at = |kind: &str, id: &str| {
        frames
            .iter()
            .position(|f| f["type"] == kind && f["id"] == id)
            .unwrap_or_else(|| panic!("no {kind} {id}"))
    };
    assert!(
        at("registertrigger", &second.id) < at("unregistertrigger", &first.id),
        "the new trigger comes before the old one goes"
    );
    assert_eq!(r.content(SCRIPT.1).await["content"], edited);
    let triggers = r.engine.worker_triggers();
    assert!(!triggers.contains_key(&first.id));
    assert!(
        triggers.contains_key(&style.id),
        "an unchanged asset keeps its trigger"
    );
    r.worker.stop().await;
}
