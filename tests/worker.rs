//! Wire tests of the `iii-directory` worker: the real binary, started as a child process and
//! connected to the loopback fake engine (`tests/fake_engine`), driven only through the wire.
//!
//! Each test lays out a temporary Compose folder (`III_COMPOSE_DIR`), gives the fake its canned
//! answers (`worker::list`, the configuration worker), starts the worker, waits until it has
//! registered its whole surface and finished its configuration boot, and stops it with SIGTERM,
//! expecting a clean exit within 5 s.
//!
//! Tests marked `#[ignore = "BUG: …"]` pin down worker bugs found here: they fail today and
//! should pass once the bug is fixed (`cargo test --test worker -- --ignored`).
//!
//! `against_a_real_engine` runs the registration, read and change-event checks against a real
//! iii engine when `III_ENGINE_URL` is set; without it, it says so and returns.

mod fake_engine;

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fake_engine::{ErrorBody, FakeEngine, Fire};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::time::Instant;

/// How long a wait on the wire may take before the test fails.
const WAIT: Duration = Duration::from_secs(10);
/// How long a clean shutdown after SIGTERM may take (contract of these tests).
const STOP_WITHIN: Duration = Duration::from_secs(5);
/// Longer than the watcher's burst window (50 ms quiet, 500 ms at most) plus a fan-out, so
/// "nothing more fired" is checked after anything that could fire has.
const SETTLE: Duration = Duration::from_millis(1_200);

const WORKER_NAME: &str = "iii-directory";
const SUBSCRIBER: &str = "sub::fn";
const SKILLS_ON_CHANGE: &str = "directory::skills::on-change";
const PROMPTS_ON_CHANGE: &str = "directory::system-prompts::on-change";
const AGENTS_ON_CHANGE: &str = "directory::agents::on-change";
const TRIGGER_TYPES: [&str; 3] = [SKILLS_ON_CHANGE, PROMPTS_ON_CHANGE, AGENTS_ON_CHANGE];
const ON_CONFIG_CHANGE: &str = "directory::on-config-change";
/// The console page's assets (internal; `tests/console.rs` checks it on the wire).
const UI_CONTENT: &str = "iii-directory::ui-content";

/// Every function with the keys its request and response schemas require (README contract;
/// `skills::list` answers one of two shapes and is checked apart).
const DOCUMENTED: &[(&str, &[&str], &[&str])] = &[
    ("directory::skills::list", &[], &[]),
    (
        "directory::skills::get",
        &["id"],
        &[
            "id",
            "title",
            "type",
            "function_id",
            "disable_model_invocation",
            "path",
            "body",
            "modified_at",
        ],
    ),
    ("directory::skills::index", &[], &["body", "workers_count"]),
    (
        "directory::skills::create",
        &["id", "content"],
        &["id", "title", "type", "function_id", "bytes", "modified_at"],
    ),
    (
        "directory::skills::update",
        &["id", "content"],
        &["id", "title", "type", "function_id", "bytes", "modified_at"],
    ),
    ("directory::skills::delete", &["id"], &["id"]),
    ("directory::system-prompts::list", &[], &["prompts"]),
    (
        "directory::system-prompts::get",
        &["name"],
        &["name", "description", "body", "modified_at"],
    ),
    (
        "directory::system-prompts::create",
        &["name", "content"],
        &["name", "description", "bytes", "modified_at"],
    ),
    (
        "directory::system-prompts::update",
        &["name", "content"],
        &["name", "description", "bytes", "modified_at"],
    ),
    ("directory::system-prompts::delete", &["name"], &["name"]),
    ("directory::agents::list", &[], &["agents"]),
    (
        "directory::agents::get",
        &["id"],
        &[
            "id",
            "name",
            "description",
            "system_prompt",
            "skills",
            "unknown_skills",
            "modified_at",
        ],
    ),
    (
        "directory::agents::create",
        &["id", "content"],
        &["id", "name", "description", "logo", "bytes", "modified_at"],
    ),
    (
        "directory::agents::update",
        &["id", "content"],
        &["id", "name", "description", "logo", "bytes", "modified_at"],
    ),
    ("directory::agents::delete", &["id"], &["id"]),
    (
        "directory::index::status",
        &[],
        &["revision", "counts", "skipped"],
    ),
    (
        "directory::engine::functions::info",
        &["function_id"],
        &["function_id", "registered_triggers"],
    ),
    (ON_CONFIG_CHANGE, &[], &["ok"]),
    (UI_CONTENT, &["path"], &["content", "content_type"]),
];

// ---------------------------------------------------------------------------------------------
// The fixture tree
// ---------------------------------------------------------------------------------------------

const MAILER_GUIDE: &str =
    "---\ntitle: Mailer guide\ndescription: How to send mail.\n---\n# Guide\n\nSend mail.\n";
const MAILER_INDEX: &str = "---\ntype: index\n---\n# Mailer\n\nThe mailer worker.\n";
const GHOST_GUIDE: &str = "# Ghost guide\n\nBoo.\n";
const HELLO: &str = "# Hello\n\nHi there.\n";
/// Not a valid skill id: the index skips it, and `index::status` says why.
const BAD_NAME: &str = "skills/Bad Name.md";

/// A Compose folder: skills in the installed namespace `mailer` (with its overview), in the
/// namespace `ghost` (no such worker), one top-level skill, one skipped file, and an empty
/// agents folder.
fn fixture_tree() -> TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (rel, text) in [
        ("skills/mailer/guide.md", MAILER_GUIDE),
        ("skills/mailer/index.md", MAILER_INDEX),
        ("skills/ghost/guide.md", GHOST_GUIDE),
        ("skills/hello.md", HELLO),
        (BAD_NAME, "x\n"),
    ] {
        write_file(dir.path(), rel, text);
    }
    fs::create_dir_all(dir.path().join("agents")).expect("mkdir agents");
    dir
}

fn write_file(base: &Path, rel: &str, text: &str) {
    let path = base.join(rel);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

/// An edit behind the worker's back, made whole at once: written beside the tree's roots
/// (nothing watches the Compose folder itself), then renamed into place, so the watcher
/// never sees a half-written file however slow the machine.
fn edit_externally(base: &Path, rel: &str, text: &str) {
    let staging = base.join(format!(".staging-{}", rel.replace('/', "-")));
    fs::write(&staging, text).expect("write the staged file");
    let path = base.join(rel);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::rename(&staging, path).expect("rename into place");
}

// ---------------------------------------------------------------------------------------------
// The worker process
// ---------------------------------------------------------------------------------------------

/// The worker binary, running.
struct Worker {
    child: Child,
    log: PathBuf,
    _logs: TempDir,
}

impl Worker {
    fn spawn(url: &str, compose: &Path, config: Option<&Path>) -> Worker {
        let logs = tempfile::tempdir().expect("temp dir");
        let log = logs.path().join("stderr.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_iii-directory"));
        command.arg("--url").arg(url);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let child = command
            .env("III_COMPOSE_DIR", compose)
            .env("OTEL_ENABLED", "false")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("III_URL")
            .env_remove("III_WORKER_NAME")
            .env_remove("III_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("create the stderr log"))
            .spawn()
            .expect("start the iii-directory binary");
        Worker {
            child,
            log,
            _logs: logs,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the worker's stderr contains `needle`; returns the whole stderr.
    async fn wait_stderr(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.stderr();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "the worker's stderr never said {needle:?} within {timeout:?}; it said:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGTERM and expects a successful exit within [`STOP_WITHIN`].
    async fn stop(mut self) {
        let pid = self.pid().to_string();
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(&pid)
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + STOP_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the worker") {
                assert!(
                    status.success(),
                    "the worker exited with {status} after SIGTERM; stderr:\n{}",
                    self.stderr()
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the worker did not exit within {STOP_WITHIN:?} of SIGTERM; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // A test that failed before `stop`: end the child it started, by its own handle.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `iii-directory --manifest`, parsed (run once per test binary).
fn manifest() -> &'static Value {
    static MANIFEST: OnceLock<Value> = OnceLock::new();
    MANIFEST.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let output = Command::new(env!("CARGO_BIN_EXE_iii-directory"))
            .arg("--manifest")
            .env("III_COMPOSE_DIR", dir.path())
            .env("NO_COLOR", "1")
            .output()
            .expect("run iii-directory --manifest");
        assert!(
            output.status.success(),
            "--manifest failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("--manifest prints JSON")
    })
}

fn manifest_function_ids() -> Vec<String> {
    manifest()["functions"]
        .as_array()
        .expect("manifest functions")
        .iter()
        .map(|f| f["id"].as_str().expect("function id").to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The harness: fake engine, tree, worker
// ---------------------------------------------------------------------------------------------

/// What `worker::list` answers.
#[derive(Clone, Copy)]
enum Installed {
    /// `{"workers":[{"name":"mailer"}]}`.
    Mailer,
    /// An error: the worker must fail open.
    Error,
}

struct Harness {
    engine: FakeEngine,
    tree: TempDir,
    worker: Worker,
    /// The value the fake configuration worker holds for `iii-directory`.
    stored: Arc<Mutex<Option<Value>>>,
}

/// The configuration worker: `get` answers NOT_FOUND until a value is stored, then the value;
/// `register` stores `initial_value` when nothing is stored yet (as the engine does) and
/// echoes its input.
fn fake_configuration(engine: &FakeEngine) -> Arc<Mutex<Option<Value>>> {
    let stored = Arc::new(Mutex::new(None::<Value>));
    let for_get = stored.clone();
    engine.respond_with("configuration::get", move |data| {
        let value = for_get.lock().expect("stored").clone();
        match value {
            Some(value) => Ok(json!({ "id": data["id"], "value": value })),
            None => Err((
                "NOT_FOUND".to_string(),
                format!("configuration {} not found", data["id"]),
            )),
        }
    });
    let for_register = stored.clone();
    engine.respond_with("configuration::register", move |data| {
        let mut value = for_register.lock().expect("stored");
        if value.is_none()
            && let Some(initial) = data.get("initial_value")
        {
            *value = Some(initial.clone());
        }
        Ok(data)
    });
    stored
}

fn fake_installed(engine: &FakeEngine, installed: Installed) {
    match installed {
        Installed::Mailer => engine.respond("worker::list", json!({"workers":[{"name":"mailer"}]})),
        Installed::Error => engine.respond_error(
            "worker::list",
            "function_not_found",
            "Function worker::list not found",
        ),
    }
}

impl Harness {
    /// Starts the fake, the worker (with `seed` as `--config` when given), and waits until the
    /// worker is fully up.
    async fn start(installed: Installed, seed: Option<&str>) -> Harness {
        Harness::start_with(installed, seed, &[], None).await
    }

    /// [`Harness::start`] with more files in the tree, and a value already stored in the
    /// configuration worker, before the worker starts.
    async fn start_with(
        installed: Installed,
        seed: Option<&str>,
        files: &[(&str, &str)],
        stored_value: Option<Value>,
    ) -> Harness {
        let engine = FakeEngine::start().await;
        fake_installed(&engine, installed);
        let stored = fake_configuration(&engine);
        *stored.lock().expect("stored") = stored_value;
        let tree = fixture_tree();
        for (rel, text) in files {
            write_file(tree.path(), rel, text);
        }
        let seed_path = seed.map(|text| {
            let path = tree.path().join("seed.yaml");
            fs::write(&path, text).expect("write the seed");
            path
        });
        let worker = Worker::spawn(engine.url(), tree.path(), seed_path.as_deref());
        let harness = Harness {
            engine,
            tree,
            worker,
            stored,
        };
        harness.wait_up().await;
        harness
    }

    /// Ready, every manifest function and trigger type registered, and the configuration boot
    /// finished (its last step is the `configuration` binding).
    async fn wait_up(&self) {
        let e = &self.engine;
        let fail = |what: String| panic!("{what}\nworker stderr:\n{}", self.worker.stderr());
        if let Err(err) = e.wait_ready(WAIT).await {
            fail(err);
        }
        for id in manifest_function_ids() {
            if let Err(err) = e.wait_function(&id, WAIT).await {
                fail(err);
            }
        }
        for trigger_type in TRIGGER_TYPES {
            if let Err(err) = e.wait_trigger_type(trigger_type, WAIT).await {
                fail(err);
            }
        }
        if let Err(err) = e
            .wait_worker_trigger(|t| t.trigger_type == "configuration", WAIT)
            .await
        {
            fail(err);
        }
    }

    /// The value of a fake-engine wait, or a failure that shows the worker's stderr too.
    fn ok<T>(&self, what: &str, waited: Result<T, String>) -> T {
        waited.unwrap_or_else(|e| panic!("{what}: {e}\nworker stderr:\n{}", self.worker.stderr()))
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tree.path().join(rel)
    }

    async fn call(&self, function_id: &str, data: Value) -> Value {
        match self.engine.invoke(function_id, data.clone()).await {
            Ok(value) => value,
            Err(err) => panic!(
                "{function_id} {data} failed: {err}\nworker stderr:\n{}",
                self.worker.stderr()
            ),
        }
    }

    async fn call_err(&self, function_id: &str, data: Value) -> ErrorBody {
        match self.engine.invoke(function_id, data.clone()).await {
            Ok(value) => panic!("{function_id} {data} should fail, answered {value}"),
            Err(err) => err,
        }
    }

    async fn skill_ids(&self) -> Vec<String> {
        ids(&self.call("directory::skills::list", json!({})).await)
    }

    /// Fires to [`SUBSCRIBER`] so far.
    fn fires(&self) -> Vec<Fire> {
        self.engine
            .fires()
            .into_iter()
            .filter(|f| f.function_id == SUBSCRIBER)
            .collect()
    }

    async fn wait_fires(&self, count: usize) -> Vec<Fire> {
        eventually(&format!("{count} fire(s) to {SUBSCRIBER}"), || {
            self.fires().len() >= count
        })
        .await;
        self.fires()
    }

    async fn subscribe_all(&self) {
        for (n, trigger_type) in TRIGGER_TYPES.iter().enumerate() {
            self.engine
                .subscribe(
                    &format!("sub-{n}"),
                    trigger_type,
                    SUBSCRIBER,
                    json!({}),
                    Some(json!({ "m": n + 1 })),
                )
                .await
                .unwrap_or_else(|e| panic!("subscribe to {trigger_type}: {e}"));
        }
    }

    async fn stop(self) {
        self.worker.stop().await;
    }
}

fn ids(list: &Value) -> Vec<String> {
    list["skills"]
        .as_array()
        .unwrap_or_else(|| panic!("a skills list: {list}"))
        .iter()
        .map(|row| row["id"].as_str().expect("row id").to_string())
        .collect()
}

/// The ids of the fixture's own skills (the bundled `directory` docs left out).
fn own(ids: Vec<String>) -> Vec<String> {
    ids.into_iter()
        .filter(|id| id != "directory" && !id.starts_with("directory/"))
        .collect()
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A non-empty RFC 3339 UTC timestamp.
fn assert_timestamp(value: &Value, what: &str) {
    let text = value.as_str().unwrap_or_else(|| panic!("{what}: {value}"));
    assert!(
        text.len() >= 20 && text.as_bytes()[10] == b'T' && text.ends_with("+00:00"),
        "{what} is not an RFC 3339 UTC timestamp: {text:?}"
    );
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .cloned()
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// 1. Registration
// ---------------------------------------------------------------------------------------------

/// The `required` keys of an object schema (which must be `type: object`, list each required
/// key in `properties`, and not be the SDK's trivial `{"title":"AnyValue"}`).
fn required_of(schema: &Value, what: &str) -> BTreeSet<String> {
    assert_ne!(
        schema.get("title"),
        Some(&json!("AnyValue")),
        "{what} is the trivial schema"
    );
    assert_eq!(
        schema["type"], "object",
        "{what} is not an object: {schema}"
    );
    let required: BTreeSet<String> = schema["required"]
        .as_array()
        .unwrap_or_else(|| panic!("{what} has no required list: {schema}"))
        .iter()
        .map(|k| k.as_str().expect("key").to_string())
        .collect();
    for key in &required {
        assert!(
            schema["properties"].get(key).is_some(),
            "{what} requires {key} but does not describe it: {schema}"
        );
    }
    required
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_every_manifest_function_with_its_schemas_and_the_trigger_types() {
    let h = Harness::start(Installed::Mailer, None).await;
    let manifest = manifest();
    assert_eq!(manifest["name"], WORKER_NAME);

    let documented: BTreeSet<String> = DOCUMENTED.iter().map(|d| d.0.to_string()).collect();
    let listed: BTreeSet<String> = manifest_function_ids().into_iter().collect();
    assert_eq!(
        listed, documented,
        "the manifest lists the documented surface"
    );
    let registered: BTreeSet<String> = h.engine.functions().keys().cloned().collect();
    assert_eq!(
        registered, documented,
        "the wire carries exactly that surface"
    );

    let functions = h.engine.functions();
    for entry in manifest["functions"].as_array().expect("functions") {
        let id = entry["id"].as_str().expect("id");
        let f = &functions[id];
        assert_eq!(
            f.description.as_deref(),
            entry["description"].as_str(),
            "{id}: description"
        );
        assert!(
            f.description.as_deref().is_some_and(|d| d.len() > 20),
            "{id}: a real description"
        );
        let request = f.request_format.as_ref().expect("request_format");
        let response = f.response_format.as_ref().expect("response_format");
        assert_eq!(request, &entry["request_format"], "{id}: request_format");
        assert_eq!(response, &entry["response_format"], "{id}: response_format");

        let (_, request_keys, response_keys) =
            DOCUMENTED.iter().find(|d| d.0 == id).expect("documented");
        assert_eq!(
            required_of(request, &format!("{id} request")),
            set(request_keys),
            "{id}: required request keys"
        );
        if id == "directory::skills::list" {
            let shapes = response["oneOf"].as_array().expect("list answers oneOf");
            let required: Vec<BTreeSet<String>> = shapes
                .iter()
                .map(|s| required_of(s, "skills::list response"))
                .collect();
            assert_eq!(
                required,
                vec![set(&["skills"]), set(&["unchanged", "revision"])]
            );
        } else {
            assert_eq!(
                required_of(response, &format!("{id} response")),
                set(response_keys),
                "{id}: required response keys"
            );
        }

        let internal = id == ON_CONFIG_CHANGE || id == UI_CONTENT;
        assert_eq!(
            entry["internal"],
            json!(internal),
            "{id}: manifest internal"
        );
        let expected_metadata = internal.then(|| json!({ "internal": true }));
        assert_eq!(f.metadata, expected_metadata, "{id}: metadata");
    }

    let trigger_types = h.engine.trigger_types();
    assert_eq!(
        trigger_types.keys().cloned().collect::<BTreeSet<_>>(),
        set(&TRIGGER_TYPES)
    );
    for entry in manifest["trigger_types"].as_array().expect("trigger_types") {
        let id = entry["id"].as_str().expect("id");
        assert_eq!(
            trigger_types[id].description, entry["description"],
            "{id}: description"
        );
    }

    let ready = h.engine.ready().expect("engine::workers::register");
    assert_eq!(ready["name"], WORKER_NAME);
    assert_eq!(ready["runtime"], "rust");
    assert_eq!(ready["pid"], json!(h.worker.pid()));
    h.stop().await;
}

/// The manifest advertises each trigger type's payload (`call_request_format`); the engine
/// should get the same schema, so `engine::triggers::info` can show subscribers what they
/// receive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_types_are_registered_with_their_payload_schema() {
    let h = Harness::start(Installed::Mailer, None).await;
    let trigger_types = h.engine.trigger_types();
    for entry in manifest()["trigger_types"]
        .as_array()
        .expect("trigger_types")
    {
        let id = entry["id"].as_str().expect("id");
        assert_eq!(
            trigger_types[id].call_request_format.as_ref(),
            Some(&entry["call_request_format"]),
            "{id}: call_request_format"
        );
    }
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 2. Each function and its result
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_answer_with_their_documented_shapes() {
    let h = Harness::start(Installed::Mailer, None).await;
    let row_keys = set(&[
        "id",
        "title",
        "type",
        "function_id",
        "disable_model_invocation",
        "description",
        "bytes",
        "modified_at",
    ]);

    // skills::list: rows sorted by on-disk id (`mailer/index` shows as `mailer`).
    let list = h.call("directory::skills::list", json!({})).await;
    assert_eq!(keys(&list), set(&["skills"]));
    assert_eq!(own(ids(&list)), ["hello", "mailer/guide", "mailer"]);
    let rows = list["skills"].as_array().expect("rows");
    for row in rows {
        assert_eq!(keys(row), row_keys, "{row}");
    }
    let guide = rows
        .iter()
        .find(|r| r["id"] == "mailer/guide")
        .expect("mailer/guide");
    assert_timestamp(&guide["modified_at"], "mailer/guide modified_at");
    let mut without_time = guide.clone();
    without_time["modified_at"] = json!("");
    assert_eq!(
        without_time,
        json!({
            "id": "mailer/guide", "title": "Mailer guide", "type": null, "function_id": null,
            "disable_model_invocation": false, "description": "How to send mail.",
            "bytes": MAILER_GUIDE.len(), "modified_at": "",
        })
    );

    // skills::get, without and with raw.
    let got = h
        .call("directory::skills::get", json!({"id": "mailer/guide"}))
        .await;
    assert_timestamp(&got["modified_at"], "get modified_at");
    let mut expected = json!({
        "id": "mailer/guide", "title": "Mailer guide", "type": null, "function_id": null,
        "disable_model_invocation": false,
        "path": h.path("skills/mailer/guide.md").display().to_string(),
        "body": "# Guide\n\nSend mail.\n", "modified_at": got["modified_at"],
    });
    assert_eq!(got, expected);
    let raw = h
        .call(
            "directory::skills::get",
            json!({"id": "iii://mailer/guide", "raw": true}),
        )
        .await;
    expected["raw"] = json!(MAILER_GUIDE);
    assert_eq!(raw, expected);
    // The engine adds `_caller_worker_id` to calls from other workers: it is ignored.
    let from_a_worker = h
        .call(
            "directory::skills::get",
            json!({"id": "mailer/guide", "raw": true, "_caller_worker_id": "w-1"}),
        )
        .await;
    assert_eq!(from_a_worker, expected);

    // skills::index: one entry per worker overview.
    let index = h.call("directory::skills::index", json!({})).await;
    assert_eq!(keys(&index), set(&["body", "workers_count"]));
    let body = index["body"].as_str().expect("body");
    assert!(body.starts_with("# Skills index\n"), "{body}");
    assert!(
        body.contains("\n## Mailer\n\nThe mailer worker.\n"),
        "{body}"
    );
    assert_eq!(
        index["workers_count"],
        json!(body.matches("\n## ").count()),
        "{body}"
    );

    // system prompts: the bundled iii-runtime.
    let prompts = h.call("directory::system-prompts::list", json!({})).await;
    let runtime = prompts["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .find(|p| p["name"] == "iii-runtime")
        .expect("iii-runtime listed")
        .clone();
    assert_eq!(runtime["builtin"], true);
    assert_eq!(runtime["modified_at"], "");
    let prompt = h
        .call(
            "directory::system-prompts::get",
            json!({"name": "iii-runtime"}),
        )
        .await;
    assert_eq!(
        keys(&prompt),
        set(&["name", "description", "body", "modified_at", "builtin"])
    );
    assert_eq!(prompt["name"], "iii-runtime");
    assert_eq!(prompt["description"], runtime["description"]);
    assert!(prompt["body"].as_str().is_some_and(|b| b.len() > 100));
    assert_eq!(prompt["builtin"], true);

    // agents: the bundled iii.
    let agents = h.call("directory::agents::list", json!({})).await;
    let iii = agents["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["id"] == "iii")
        .expect("iii listed")
        .clone();
    assert_eq!(
        (&iii["name"], &iii["builtin"]),
        (&json!("iii"), &json!(true))
    );
    let agent = h.call("directory::agents::get", json!({"id": "iii"})).await;
    for key in [
        "id",
        "name",
        "description",
        "system_prompt",
        "skills",
        "unknown_skills",
        "modified_at",
    ] {
        assert!(agent.get(key).is_some(), "agents::get lacks {key}: {agent}");
    }
    assert_eq!(agent["id"], "iii");
    assert_eq!(agent["description"], iii["description"]);
    assert!(
        agent["system_prompt"]
            .as_str()
            .is_some_and(|p| p.len() > 100)
    );
    assert!(agent["skills"].is_array() && agent["unknown_skills"].is_array());
    assert_eq!(agent["modified_at"], "");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_of_each_family_answer_and_land_on_disk() {
    let h = Harness::start(Installed::Mailer, None).await;

    // Skills.
    let v1 = "---\ntitle: New doc\n---\nFirst.\n";
    let v2 = "---\ntitle: New doc, again\ntype: guide\n---\nSecond.\n";
    let created = h
        .call(
            "directory::skills::create",
            json!({"id": "mailer/new-doc", "content": v1}),
        )
        .await;
    assert_timestamp(&created["modified_at"], "create modified_at");
    assert_eq!(
        created,
        json!({"id": "mailer/new-doc", "title": "New doc", "type": null, "function_id": null,
               "bytes": v1.len(), "modified_at": created["modified_at"]})
    );
    let file = h.path("skills/mailer/new-doc.md");
    assert_eq!(fs::read_to_string(&file).expect("created file"), v1);
    let updated = h
        .call(
            "directory::skills::update",
            json!({"id": "mailer/new-doc", "content": v2}),
        )
        .await;
    assert_eq!(
        updated,
        json!({"id": "mailer/new-doc", "title": "New doc, again", "type": "guide",
               "function_id": null, "bytes": v2.len(), "modified_at": updated["modified_at"]})
    );
    assert_eq!(fs::read_to_string(&file).expect("updated file"), v2);
    let deleted = h
        .call("directory::skills::delete", json!({"id": "mailer/new-doc"}))
        .await;
    assert_eq!(deleted, json!({"id": "mailer/new-doc"}));
    assert!(!file.exists());

    // System prompts.
    let p1 = "---\ndescription: Talk like a pirate.\n---\nArr.\n";
    let p2 = "---\ndescription: Talk like a polite pirate.\n---\nArr, please.\n";
    let created = h
        .call(
            "directory::system-prompts::create",
            json!({"name": "pirate", "content": p1}),
        )
        .await;
    assert_timestamp(&created["modified_at"], "prompt create modified_at");
    assert_eq!(
        created,
        json!({"name": "pirate", "description": "Talk like a pirate.", "bytes": p1.len(),
               "modified_at": created["modified_at"]})
    );
    let file = h.path("skills/system-prompts/pirate.md");
    assert_eq!(fs::read_to_string(&file).expect("prompt file"), p1);
    let updated = h
        .call(
            "directory::system-prompts::update",
            json!({"name": "pirate", "content": p2}),
        )
        .await;
    assert_eq!(
        updated,
        json!({"name": "pirate", "description": "Talk like a polite pirate.", "bytes": p2.len(),
               "modified_at": updated["modified_at"]})
    );
    assert_eq!(fs::read_to_string(&file).expect("prompt file"), p2);
    let deleted = h
        .call(
            "directory::system-prompts::delete",
            json!({"name": "pirate"}),
        )
        .await;
    assert_eq!(deleted, json!({"name": "pirate"}));
    assert!(!file.exists());

    // Agent profiles.
    let a1 = "---\nname: Captain\ndescription: Steers.\n---\nYou steer.\n";
    let a2 = "---\nname: Captain\ndescription: Steers well.\nlogo: \"⚓\"\n---\nYou steer well.\n";
    let created = h
        .call(
            "directory::agents::create",
            json!({"id": "captain", "content": a1}),
        )
        .await;
    assert_timestamp(&created["modified_at"], "agent create modified_at");
    assert_eq!(
        created,
        json!({"id": "captain", "name": "Captain", "description": "Steers.", "logo": null,
               "bytes": a1.len(), "modified_at": created["modified_at"]})
    );
    let file = h.path("agents/captain.md");
    assert_eq!(fs::read_to_string(&file).expect("agent file"), a1);
    let updated = h
        .call(
            "directory::agents::update",
            json!({"id": "captain", "content": a2}),
        )
        .await;
    assert_eq!(
        updated,
        json!({"id": "captain", "name": "Captain", "description": "Steers well.", "logo": "⚓",
               "bytes": a2.len(), "modified_at": updated["modified_at"]})
    );
    assert_eq!(fs::read_to_string(&file).expect("agent file"), a2);
    let deleted = h
        .call("directory::agents::delete", json!({"id": "captain"}))
        .await;
    assert_eq!(deleted, json!({"id": "captain"}));
    assert!(!file.exists());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_status_reports_revision_counts_skips_and_the_watcher() {
    let h = Harness::start(Installed::Mailer, None).await;
    let status = h.call("directory::index::status", json!({})).await;
    assert_eq!(
        keys(&status),
        set(&[
            "revision",
            "index_path",
            "files",
            "counts",
            "skipped",
            "last_reconcile",
            "watcher"
        ])
    );
    assert!(
        status["revision"].as_u64().is_some_and(|r| r > 0),
        "{status}"
    );
    assert_eq!(
        status["index_path"],
        h.path("data/iii-directory/index.redb")
            .display()
            .to_string()
    );
    // The five files of the tree (the skipped one included).
    assert_eq!(status["files"], 5, "{status}");
    // Skills rows: the fixture's four (ghost too: the filter applies at read time) and the
    // bundled `directory` docs; prompts and agents: the bundled two each.
    let bundled_docs = bundled_skill_count(&h).await;
    assert_eq!(
        status["counts"],
        json!({"skills": 4 + bundled_docs, "system_prompts": 2, "agents": 2})
    );
    let skipped = status["skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 1, "{status}");
    assert_eq!(skipped[0]["root"], "skills_folder");
    assert_eq!(skipped[0]["path"], h.path(BAD_NAME).display().to_string());
    assert!(
        skipped[0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("invalid id \"Bad Name\"")),
        "{status}"
    );
    assert_eq!(keys(&status["last_reconcile"]), set(&["at", "duration_ms"]));
    assert_timestamp(&status["last_reconcile"]["at"], "last_reconcile.at");
    let watcher = &status["watcher"];
    assert_eq!(watcher["degraded"], false, "{status}");
    assert_eq!(watcher["problems"], json!([]));
    let watched: BTreeSet<String> = watcher["watched"]
        .as_array()
        .expect("watched")
        .iter()
        .map(|w| w.as_str().expect("folder").to_string())
        .collect();
    // `skills/iii` (local_skills_folder) is created and covered by the recursive watch of
    // `skills`; `.agents/skills` does not exist, so it is neither created nor watched.
    let expected: BTreeSet<String> = ["skills", "agents"]
        .iter()
        .map(|rel| h.path(rel).display().to_string())
        .collect();
    assert_eq!(watched, expected, "{status}");
    assert!(h.path("skills/iii").is_dir());
    assert!(!h.path(".agents/skills").exists());
    h.stop().await;
}

/// How many bundled `directory` docs `skills::list` serves (they ship in the binary).
async fn bundled_skill_count(h: &Harness) -> usize {
    let all = h.skill_ids().await;
    all.len() - own(all.clone()).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_list_if_revision_answers_unchanged_until_a_write() {
    let h = Harness::start(Installed::Mailer, None).await;
    let first = h
        .call("directory::skills::list", json!({"if_revision": 0}))
        .await;
    assert_eq!(keys(&first), set(&["skills", "revision"]));
    let revision = first["revision"].as_u64().expect("revision");
    assert!(revision > 0);
    // The list revision folds in what decides visibility, so it is its own number, not the
    // index revision that status reports.
    let status = h.call("directory::index::status", json!({})).await;
    assert!(status["revision"].as_u64().expect("index revision") >= 1);
    assert_eq!(
        ids(&first),
        h.skill_ids().await,
        "the same rows as without if_revision"
    );

    let again = h
        .call("directory::skills::list", json!({"if_revision": revision}))
        .await;
    assert_eq!(again, json!({"unchanged": true, "revision": revision}));

    h.call(
        "directory::skills::create",
        json!({"id": "fresh", "content": "# Fresh\n\nNew.\n"}),
    )
    .await;
    let after = h
        .call("directory::skills::list", json!({"if_revision": revision}))
        .await;
    let newer = after["revision"].as_u64().expect("a new revision");
    assert!(newer > revision, "{after}");
    assert!(ids(&after).contains(&"fresh".to_string()), "{after}");
    h.stop().await;
}

/// `if_revision` is a cache token: when the rows a caller would get change, so must the
/// answer, even if no file changed (here `filter_unregistered` is switched off live).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_list_if_revision_sees_a_visibility_change() {
    let h = Harness::start(Installed::Mailer, None).await;
    let first = h
        .call("directory::skills::list", json!({"if_revision": 0}))
        .await;
    let revision = first["revision"].as_u64().expect("revision");
    assert!(!ids(&first).contains(&"ghost/guide".to_string()));

    let mut value = h.stored.lock().expect("stored").clone().expect("a value");
    value["filter_unregistered"] = json!(false);
    *h.stored.lock().expect("stored") = Some(value);
    assert_eq!(
        h.call(ON_CONFIG_CHANGE, json!({})).await,
        json!({"ok": true})
    );
    assert!(h.skill_ids().await.contains(&"ghost/guide".to_string()));

    let again = h
        .call("directory::skills::list", json!({"if_revision": revision}))
        .await;
    assert!(
        ids_or_empty(&again).contains(&"ghost/guide".to_string()),
        "the caller's rows (without ghost/guide) are stale, yet the answer is {again}"
    );
    h.stop().await;
}

fn ids_or_empty(list: &Value) -> Vec<String> {
    if list.get("skills").is_some() {
        ids(list)
    } else {
        Vec::new()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_functions_info_is_proxied_to_the_engine() {
    let h = Harness::start(Installed::Mailer, None).await;
    let request_schema =
        json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]});
    let response_schema = json!({"type": "object", "properties": {"id": {"type": "string"}}});
    h.engine.respond(
        "engine::functions::info",
        json!({
            "function_id": "mailer::send", "namespace": "default", "worker_name": "mailer",
            "description": "Send an email", "request_schema": request_schema,
            "response_schema": response_schema, "metadata": {"tier": "gold"},
            "registered_triggers": [{"id": "t1", "trigger_type": "http",
                                     "config": {"api_path": "send"}, "extra": 1}],
        }),
    );
    let info = h
        .call(
            "directory::engine::functions::info",
            json!({"function_id": "mailer::send"}),
        )
        .await;
    assert_eq!(
        info,
        json!({
            "function_id": "mailer::send", "worker_name": "mailer",
            "description": "Send an email", "request_schema": request_schema,
            "response_schema": response_schema, "metadata": {"tier": "gold"},
            "registered_triggers": [{"id": "t1", "trigger_type": "http",
                                     "config": {"api_path": "send"}}],
        })
    );
    let call = h.ok(
        "the proxied call",
        h.engine
            .wait_call(|c| c.function_id == "engine::functions::info", WAIT)
            .await,
    );
    assert_eq!(call.data, json!({"function_id": "mailer::send"}));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_functions_info_passes_the_engines_error_on() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.engine.respond_error(
        "engine::functions::info",
        "NOT_FOUND",
        "function mailer::nope not found",
    );
    let err = h
        .call_err(
            "directory::engine::functions::info",
            json!({"function_id": "mailer::nope"}),
        )
        .await;
    assert_eq!(err.code, "invocation_failed", "{err}");
    assert!(
        err.message
            .starts_with("handler error: engine::functions::info proxy:")
            && err.message.contains("function mailer::nope not found"),
        "{err}"
    );
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Coded errors
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_errors_arrive_as_invocation_failed_with_their_code() {
    let h = Harness::start(Installed::Mailer, None).await;

    let err = h
        .call_err("directory::skills::get", json!({"id": "nope"}))
        .await;
    assert_eq!(err.code, "invocation_failed", "{err}");
    assert!(
        err.message
            .starts_with("handler error: D110 not_found: skill \"nope\" does not exist."),
        "{err}"
    );

    let err = h
        .call_err("directory::skills::get", json!({"id": "database::execute"}))
        .await;
    assert_eq!(err.code, "invocation_failed", "{err}");
    assert!(
        err.message.starts_with(
            "handler error: D112 invalid_input: \"database::execute\" looks like a FUNCTION id"
        ),
        "{err}"
    );

    let err = h.call_err("directory::skills::get", json!({"id": 5})).await;
    assert_eq!(err.code, "invocation_failed", "{err}");
    assert!(
        err.message.starts_with("handler error: invalid request:"),
        "{err}"
    );

    let err = h
        .call_err("directory::engine::functions::info", json!({}))
        .await;
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        (
            "invocation_failed",
            "handler error: function_id must be non-empty"
        )
    );
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 4. filter_unregistered through worker::list
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_unregistered_hides_namespaces_that_are_not_installed_workers() {
    let h = Harness::start(Installed::Mailer, None).await;
    let listed = own(h.skill_ids().await);
    assert_eq!(listed, ["hello", "mailer/guide", "mailer"]);
    let call = h.ok(
        "worker::list asked",
        h.engine
            .wait_call(|c| c.function_id == "worker::list", WAIT)
            .await,
    );
    assert_eq!(call.data, json!({}));
    let err = h
        .call_err("directory::skills::get", json!({"id": "ghost/guide"}))
        .await;
    assert!(
        err.message.starts_with("handler error: D110 not_found"),
        "{err}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_fails_open_when_worker_list_fails() {
    let h = Harness::start(Installed::Error, None).await;
    let listed = own(h.skill_ids().await);
    assert_eq!(listed, ["ghost/guide", "hello", "mailer/guide", "mailer"]);
    assert!(
        h.engine
            .calls()
            .iter()
            .any(|c| c.function_id == "worker::list")
    );
    let ghost = h
        .call("directory::skills::get", json!({"id": "ghost/guide"}))
        .await;
    assert_eq!(ghost["title"], "Ghost guide");
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Change events
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_write_fires_one_change_event_to_the_subscribers_of_its_family() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;

    let skill = "# Doc\n\nText.\n";
    let prompt = "---\ndescription: A prompt.\n---\nBe brief.\n";
    let agent = "---\nname: Captain\n---\nYou steer.\n";
    // (function, request, payload delivered, metadata of the family's subscription)
    let writes = [
        (
            "directory::skills::create",
            json!({"id": "mailer/doc", "content": skill}),
            json!({"op": "create", "namespace": "mailer", "id": "mailer/doc"}),
            1,
        ),
        (
            "directory::skills::update",
            json!({"id": "mailer/doc", "content": skill}),
            json!({"op": "update", "namespace": "mailer", "id": "mailer/doc"}),
            1,
        ),
        (
            "directory::skills::delete",
            json!({"id": "mailer/doc"}),
            json!({"op": "delete", "namespace": "mailer", "id": "mailer/doc"}),
            1,
        ),
        (
            "directory::system-prompts::create",
            json!({"name": "brief", "content": prompt}),
            json!({"op": "create", "name": "brief"}),
            2,
        ),
        (
            "directory::system-prompts::update",
            json!({"name": "brief", "content": prompt}),
            json!({"op": "update", "name": "brief"}),
            2,
        ),
        (
            "directory::system-prompts::delete",
            json!({"name": "brief"}),
            json!({"op": "delete", "name": "brief"}),
            2,
        ),
        (
            "directory::agents::create",
            json!({"id": "captain", "content": agent}),
            json!({"op": "create", "name": "captain"}),
            3,
        ),
        (
            "directory::agents::update",
            json!({"id": "captain", "content": agent}),
            json!({"op": "update", "name": "captain"}),
            3,
        ),
        (
            "directory::agents::delete",
            json!({"id": "captain"}),
            json!({"op": "delete", "name": "captain"}),
            3,
        ),
    ];
    for (n, (function, request, _, _)) in writes.iter().enumerate() {
        h.call(function, request.clone()).await;
        // One at a time, so the order of the fires is the order of the writes.
        h.wait_fires(n + 1).await;
    }
    tokio::time::sleep(SETTLE).await;

    let fires = h.fires();
    let seen: Vec<(Value, Option<Value>)> = fires
        .iter()
        .map(|f| (f.data.clone(), f.metadata.clone()))
        .collect();
    let expected: Vec<(Value, Option<Value>)> = writes
        .iter()
        .map(|(_, _, payload, m)| (payload.clone(), Some(json!({ "m": m }))))
        .collect();
    assert_eq!(
        seen, expected,
        "exactly one fire per write, no external echo"
    );
    for fire in &fires {
        assert_eq!(fire.action, Some(json!({"type": "void"})), "{fire:?}");
        assert_eq!(fire.namespace, None, "{fire:?}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_go_to_the_subscribers_namespace() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.engine
        .send_to_worker(json!({
            "type": "registertrigger", "id": "sub-ns", "trigger_type": SKILLS_ON_CHANGE,
            "function_id": "tenant::on-change", "config": {}, "metadata": {"who": "tenant"},
            "namespace": "tenant",
        }))
        .expect("send the binding");
    eventually("the ack of sub-ns", || {
        h.engine
            .registration_results()
            .iter()
            .any(|r| r.id == "sub-ns" && r.error.is_none())
    })
    .await;
    h.call(
        "directory::skills::create",
        json!({"id": "tenant-doc", "content": "# T\n\nText.\n"}),
    )
    .await;
    let fire = h.ok(
        "a fire to the tenant's function",
        h.engine
            .wait_fire(|f| f.function_id == "tenant::on-change", WAIT)
            .await,
    );
    assert_eq!(
        fire.data,
        json!({"op": "create", "namespace": "tenant-doc", "id": "tenant-doc"})
    );
    assert_eq!(fire.namespace.as_deref(), Some("tenant"));
    assert_eq!(fire.metadata, Some(json!({"who": "tenant"})));
    assert_eq!(fire.action, Some(json!({"type": "void"})));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_edit_fires_one_external_event() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;
    edit_externally(
        h.tree.path(),
        "skills/outside.md",
        "# Outside\n\nWritten by hand.\n",
    );
    let fire = h.ok(
        "an external fire",
        h.engine
            .wait_fire(|f| f.function_id == SUBSCRIBER, WAIT)
            .await,
    );
    assert_eq!(fire.data, json!({"op": "external"}));
    assert_eq!(
        fire.metadata,
        Some(json!({"m": 1})),
        "the skills subscription"
    );
    assert_eq!(fire.action, Some(json!({"type": "void"})));
    tokio::time::sleep(SETTLE).await;
    assert_eq!(h.fires().len(), 1, "one burst, one event: {:?}", h.fires());
    assert!(h.skill_ids().await.contains(&"outside".to_string()));
    h.stop().await;
}

/// `agents_skills_folder` inside `agents_folder`: the agents folder is watched without
/// recursion, so it does not cover the agents skills root, which must be watched itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_skills_root_inside_the_agents_folder_is_watched() {
    let seed = "agents_skills_folder: agents/skills\n";
    let h = Harness::start_with(
        Installed::Mailer,
        Some(seed),
        &[("agents/skills/tool/SKILL.md", "# Tool\n\nA tool skill.\n")],
        None,
    )
    .await;
    assert!(h.skill_ids().await.contains(&"tool".to_string()));
    h.subscribe_all().await;
    edit_externally(
        h.tree.path(),
        "agents/skills/other/SKILL.md",
        "# Other\n\nAnother tool skill.\n",
    );
    let fire = h
        .engine
        .wait_fire(|f| f.function_id == SUBSCRIBER, Duration::from_secs(3))
        .await;
    let fire = match fire {
        Ok(fire) => fire,
        Err(e) => {
            let status = h.call("directory::index::status", json!({})).await;
            panic!(
                "no external event for a new agents skill; watcher: {}\n{e}",
                status["watcher"]
            );
        }
    };
    assert_eq!(fire.data, json!({"op": "external"}));
    assert_eq!(fire.metadata, Some(json!({"m": 1})));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_unsubscribe_nothing_more_fires() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;
    h.call(
        "directory::skills::create",
        json!({"id": "before", "content": "# B\n\nText.\n"}),
    )
    .await;
    assert_eq!(h.wait_fires(1).await.len(), 1);

    for (n, trigger_type) in TRIGGER_TYPES.iter().enumerate() {
        h.engine
            .unsubscribe(&format!("sub-{n}"), trigger_type)
            .expect("unsubscribe");
    }
    // No ack comes for an unbinding. The worker handles frames in order, so once a later
    // call is answered the unbindings have been seen; a short pause covers the rest.
    h.call("directory::index::status", json!({})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.call(
        "directory::skills::create",
        json!({"id": "after", "content": "# A\n\nText.\n"}),
    )
    .await;
    h.call(
        "directory::system-prompts::create",
        json!({"name": "after", "content": "---\ndescription: D.\n---\nBody.\n"}),
    )
    .await;
    h.call(
        "directory::agents::create",
        json!({"id": "after", "content": "---\nname: After\n---\nBody.\n"}),
    )
    .await;
    edit_externally(h.tree.path(), "skills/outside.md", "# Outside\n\nText.\n");
    edit_externally(
        h.tree.path(),
        "agents/outside.md",
        "---\nname: O\n---\nBody.\n",
    );
    tokio::time::sleep(SETTLE).await;
    assert_eq!(
        h.fires().len(),
        1,
        "fires after unsubscribe: {:?}",
        h.fires()
    );
    // The edits were seen (so silence is the unsubscribe, not a deaf watcher).
    assert!(h.skill_ids().await.contains(&"outside".to_string()));
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 6. Reconnect
// ---------------------------------------------------------------------------------------------

/// Each connection the fake saw: open or not, and the types of the frames it received.
fn connections_summary(engine: &FakeEngine) -> String {
    engine
        .connections()
        .iter()
        .map(|c| {
            let types: Vec<String> = c
                .frames
                .iter()
                .map(|f| {
                    let kind = f["type"].as_str().unwrap_or("?");
                    match f.get("id").or_else(|| f.get("function_id")) {
                        Some(Value::String(id)) => format!("{kind}({id})"),
                        _ => kind.to_string(),
                    }
                })
                .collect();
            format!(
                "connection {} (open: {}): {}",
                c.id,
                c.open,
                types.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_disconnect_it_reattaches_and_registers_everything_again() {
    let h = Harness::start(Installed::Mailer, None).await;
    let first = h.engine.connections()[0].clone();
    assert_eq!(h.engine.close_connection().await, Ok(1));
    let started = Instant::now();

    // `engine::workers::register` ends the SDK's replay, so once the new connection is ready,
    // everything it replays has arrived.
    h.ok("ready again", h.engine.wait_ready(WAIT).await);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "reconnected after {:?}",
        started.elapsed()
    );
    let connections = h.engine.connections();
    let summary = connections_summary(&h.engine);
    assert_eq!(connections.len(), 2, "{summary}");
    let (old, new) = (&connections[0], &connections[1]);
    let sent = |c: &fake_engine::ConnectionInfo, kind: &str, id: &str| {
        c.frames
            .iter()
            .filter(|f| f["type"] == kind && f["id"] == id)
            .count()
    };
    for id in manifest_function_ids() {
        assert_eq!(
            sent(new, "registerfunction", &id),
            1,
            "{id} once on the new connection; {summary}"
        );
        // Twice in all, unless the SDK raced on the first connection (registrations made while
        // it connects can go out both directly and in its replay).
        assert!(sent(old, "registerfunction", &id) >= 1, "{id}; {summary}");
        assert_eq!(
            h.engine.registration_count(&id),
            sent(old, "registerfunction", &id) + 1,
            "{id}; {summary}"
        );
    }
    for trigger_type in TRIGGER_TYPES {
        assert_eq!(
            sent(new, "registertriggertype", trigger_type),
            1,
            "{trigger_type} registered again; {summary}"
        );
    }
    assert_eq!(
        h.engine.trigger_types().len(),
        3,
        "the trigger types live again"
    );
    let rebound: Vec<&Value> = new
        .frames
        .iter()
        .filter(|f| f["type"] == "registertrigger" && f["trigger_type"] == "configuration")
        .collect();
    assert_eq!(
        rebound.len(),
        1,
        "the configuration binding is replayed; {summary}"
    );
    assert_eq!(rebound[0]["function_id"], ON_CONFIG_CHANGE);

    let reattach = h.engine.reattaches().pop().expect("a reattach");
    assert_eq!(reattach.previous_worker_id, first.worker_id);
    assert_eq!(
        reattach.reattach_token.as_deref(),
        Some(first.reattach_token.as_str())
    );
    assert!(reattach.matched);
    assert_eq!(new.id, reattach.connection);
    assert_eq!(new.frames[0]["type"], "reattach", "reattach comes first");

    let got = h
        .call("directory::skills::get", json!({"id": "hello"}))
        .await;
    assert_eq!(got["title"], "Hello");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_bound_before_a_reconnect_gets_each_event_once() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;
    h.engine.close_connection().await.expect("close");
    // The fake delivers the binding again when the type is registered again.
    eventually("sub-0 delivered and acked again", || {
        h.engine
            .registration_results()
            .iter()
            .filter(|r| r.id == "sub-0" && r.error.is_none())
            .count()
            == 2
    })
    .await;
    h.ok("ready again", h.engine.wait_ready(WAIT).await);
    h.call(
        "directory::skills::create",
        json!({"id": "once", "content": "# Once\n\nText.\n"}),
    )
    .await;
    h.wait_fires(1).await;
    tokio::time::sleep(SETTLE).await;
    let fires = h.fires();
    assert_eq!(fires.len(), 1, "{fires:?}");
    assert_eq!(
        fires[0].data,
        json!({"op": "create", "namespace": "once", "id": "once"})
    );
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 7. Configuration
// ---------------------------------------------------------------------------------------------

const SEED: &str = "\
filter_unregistered: true
registry_cache_ttl_ms: 1234
hint_min_workers: 3
";

/// The full settings the seed stands for: the defaults with its three keys.
fn seed_settings() -> Value {
    iii_directory::config::Settings {
        filter_unregistered: true,
        registry_cache_ttl_ms: 1234,
        hint_min_workers: 3,
        ..Default::default()
    }
    .to_json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_is_registered_with_the_seed_and_bound_to_updates() {
    let h = Harness::start(Installed::Mailer, Some(SEED)).await;
    let gets = h
        .engine
        .calls()
        .into_iter()
        .filter(|c| c.function_id == "configuration::get")
        .count();
    assert!(gets >= 2, "get before register, and get to apply");
    let register = h.ok(
        "configuration::register",
        h.engine
            .wait_call(|c| c.function_id == "configuration::register", WAIT)
            .await,
    );
    let data = &register.data;
    assert_eq!(data["id"], WORKER_NAME);
    assert_eq!(data["name"], WORKER_NAME);
    assert!(data["description"].as_str().is_some_and(|d| !d.is_empty()));
    let initial = &data["initial_value"];
    assert_eq!(initial, &seed_settings());
    assert_eq!(initial["registry_cache_ttl_ms"], 1234);
    assert_eq!(initial["hint_min_workers"], 3);
    assert_eq!(initial["skills_folder"], "skills", "defaults fill the rest");
    let schema = &data["schema"];
    assert_eq!(schema["type"], "object", "{schema}");
    assert_eq!(
        schema["example"],
        iii_directory::config::Settings::default().to_json(),
        "the defaults are the schema's example"
    );
    for key in keys(initial) {
        assert!(
            schema["properties"].get(&key).is_some(),
            "the schema describes {key}: {schema}"
        );
    }

    let bindings: Vec<_> = h
        .engine
        .worker_triggers()
        .into_values()
        .filter(|t| t.trigger_type == "configuration")
        .collect();
    assert_eq!(bindings.len(), 1, "{bindings:?}");
    assert_eq!(bindings[0].function_id, ON_CONFIG_CHANGE);
    assert_eq!(
        bindings[0].config,
        json!({"configuration_id": WORKER_NAME, "event_types": ["configuration:updated"]})
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_without_a_seed_offers_the_defaults() {
    let h = Harness::start(Installed::Mailer, None).await;
    let register = h.ok(
        "configuration::register",
        h.engine
            .wait_call(|c| c.function_id == "configuration::register", WAIT)
            .await,
    );
    assert_eq!(
        register.data["initial_value"],
        iii_directory::config::Settings::default().to_json()
    );
    h.stop().await;
}

/// The update event the configuration worker sends (the worker ignores it and re-fetches).
fn updated_event(old: &Value, new: &Value) -> Value {
    json!({
        "type": "configuration", "event_type": "configuration:updated", "id": WORKER_NAME,
        "name": WORKER_NAME, "description": "", "schema": {}, "old_value": old, "new_value": new,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_update_applies_tunables_live() {
    let h = Harness::start(Installed::Mailer, Some(SEED)).await;
    assert!(!h.skill_ids().await.contains(&"ghost/guide".to_string()));

    let old = h.stored.lock().expect("stored").clone().expect("stored");
    let mut new = old.clone();
    new["filter_unregistered"] = json!(false);
    *h.stored.lock().expect("stored") = Some(new.clone());
    h.engine.clear();
    assert_eq!(
        h.call(ON_CONFIG_CHANGE, updated_event(&old, &new)).await,
        json!({"ok": true})
    );
    assert!(
        h.engine
            .calls()
            .iter()
            .any(|c| c.function_id == "configuration::get"),
        "the worker re-fetches the value"
    );
    assert_eq!(
        own(h.skill_ids().await),
        ["ghost/guide", "hello", "mailer/guide", "mailer"]
    );
    h.stop().await;
}

/// A value already stored wins over the `--config` seed: it is not offered again, and it is
/// what applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_configuration_wins_over_the_seed() {
    let mut stored = seed_settings();
    stored["filter_unregistered"] = json!(false);
    let h = Harness::start_with(Installed::Mailer, Some(SEED), &[], Some(stored.clone())).await;
    let register = h.ok(
        "configuration::register",
        h.engine
            .wait_call(|c| c.function_id == "configuration::register", WAIT)
            .await,
    );
    assert_eq!(
        register.data.get("initial_value"),
        None,
        "{}",
        register.data
    );
    assert_eq!(h.stored.lock().expect("stored").clone(), Some(stored));
    assert_eq!(
        own(h.skill_ids().await),
        ["ghost/guide", "hello", "mailer/guide", "mailer"],
        "the stored filter_unregistered: false applies"
    );
    h.stop().await;
}

/// Topology is fixed while the worker runs, and "restart required" says a restart applies it:
/// so a topology already stored when the worker starts must be the one it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_topology_applies_at_boot() {
    let mut stored = iii_directory::config::Settings::default().to_json();
    stored["skills_folder"] = json!("stored-skills");
    let h = Harness::start_with(
        Installed::Mailer,
        None,
        &[("stored-skills/from-store.md", "# From store\n\nText.\n")],
        Some(stored),
    )
    .await;
    let listed = own(h.skill_ids().await);
    assert_eq!(
        listed,
        ["from-store"],
        "skills from the stored skills_folder; stderr:\n{}",
        h.worker.stderr()
    );
    assert!(!h.worker.stderr().contains("restart required"));
    h.stop().await;
}

/// A reload forgets the cached `worker::list` answer (its TTL here is a minute), so a worker
/// installed since shows at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_update_forgets_the_cached_installed_workers() {
    let h = Harness::start(Installed::Mailer, Some(SEED)).await;
    assert!(!h.skill_ids().await.contains(&"ghost/guide".to_string()));
    h.engine.respond(
        "worker::list",
        json!({"workers": [{"name": "mailer"}, {"name": "ghost"}]}),
    );
    assert!(
        !h.skill_ids().await.contains(&"ghost/guide".to_string()),
        "still the cached set"
    );
    let value = h.stored.lock().expect("stored").clone().expect("stored");
    let mut new = value.clone();
    new["registry_cache_ttl_ms"] = json!(60_000);
    *h.stored.lock().expect("stored") = Some(new.clone());
    h.call(ON_CONFIG_CHANGE, updated_event(&value, &new)).await;
    assert_eq!(
        own(h.skill_ids().await),
        ["ghost/guide", "hello", "mailer/guide", "mailer"]
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_change_is_refused_and_the_whole_configuration_kept() {
    let h = Harness::start(Installed::Mailer, Some(SEED)).await;
    // First a live change, so "kept" is observable: ghost becomes visible.
    let seeded = h.stored.lock().expect("stored").clone().expect("stored");
    let mut open = seeded.clone();
    open["filter_unregistered"] = json!(false);
    *h.stored.lock().expect("stored") = Some(open.clone());
    h.call(ON_CONFIG_CHANGE, updated_event(&seeded, &open))
        .await;
    assert!(h.skill_ids().await.contains(&"ghost/guide".to_string()));

    // Then a topology change together with a tunable one: both refused.
    let mut moved = open.clone();
    moved["skills_folder"] = json!("elsewhere");
    moved["filter_unregistered"] = json!(true);
    *h.stored.lock().expect("stored") = Some(moved.clone());
    assert_eq!(
        h.call(ON_CONFIG_CHANGE, updated_event(&open, &moved)).await,
        json!({"ok": true})
    );
    let stderr = h.worker.wait_stderr("restart required", WAIT).await;
    assert!(stderr.contains("skills_folder"), "{stderr}");
    assert_eq!(
        own(h.skill_ids().await),
        ["ghost/guide", "hello", "mailer/guide", "mailer"],
        "filter_unregistered stays off, skills still come from the original folder"
    );
    h.call(
        "directory::skills::create",
        json!({"id": "still-here", "content": "# Still\n\nHere.\n"}),
    )
    .await;
    assert!(h.path("skills/still-here.md").is_file());
    assert!(!h.path("elsewhere").exists());
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 8. No engine
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_engine_it_says_once_that_it_waits_and_stops_cleanly() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = format!("ws://127.0.0.1:{port}");
    let tree = fixture_tree();
    let worker = Worker::spawn(&url, tree.path(), None);
    let needle = "waiting for the iii engine";
    let stderr = worker.wait_stderr(needle, Duration::from_secs(5)).await;
    let line = stderr
        .lines()
        .find(|l| l.contains(needle))
        .expect("the line");
    assert!(line.contains(&url), "the address is named: {line}");
    // Another retry period (2 s) later it has not said it again.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let stderr = worker.stderr();
    assert_eq!(stderr.matches(needle).count(), 1, "{stderr}");
    worker.stop().await;
}

// ---------------------------------------------------------------------------------------------
// End to end against a real engine (opt-in)
// ---------------------------------------------------------------------------------------------

mod real_engine {
    use super::*;
    use iii_sdk::protocol::{RegisterTriggerInput, TriggerRequest};
    use iii_sdk::runtime::WorkerMetadata;
    use iii_sdk::{IIIClient, InitOptions, RegisterFunction};
    use tokio::sync::mpsc;

    pub fn client(url: &str, name: String) -> IIIClient {
        let mut options = InitOptions {
            metadata: Some(WorkerMetadata {
                name,
                ..Default::default()
            }),
            otel: Some(Default::default()),
            ..Default::default()
        };
        if let Some(otel) = options.otel.as_mut() {
            otel.enabled = Some(false);
        }
        iii_sdk::register_worker(url, options)
    }

    pub async fn call(iii: &IIIClient, function_id: &str, payload: Value) -> Value {
        try_call(iii, function_id, payload.clone())
            .await
            .unwrap_or_else(|e| panic!("{function_id} {payload}: {e}"))
    }

    pub async fn try_call(
        iii: &IIIClient,
        function_id: &str,
        payload: Value,
    ) -> Result<Value, iii_sdk::Error> {
        iii.trigger(TriggerRequest {
            function_id: function_id.into(),
            payload,
            action: None,
            timeout_ms: Some(10_000),
        })
        .await
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_a_real_engine() {
    let Ok(url) = std::env::var("III_ENGINE_URL") else {
        println!("skipped: set III_ENGINE_URL=ws://… to run against a real engine");
        return;
    };
    let tree = fixture_tree();
    let worker = Worker::spawn(&url, tree.path(), None);
    let pid = std::process::id();
    let iii = real_engine::client(&url, format!("iii-directory-e2e-{pid}"));

    // Up: the status answers once the engine has applied the worker's registrations.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match real_engine::try_call(&iii, "directory::index::status", json!({})).await {
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
        let info =
            real_engine::call(&iii, "engine::functions::info", json!({"function_id": id})).await;
        assert_eq!(info["description"], entry["description"], "{id}");
        assert_eq!(info["request_schema"], entry["request_format"], "{id}");
        assert_eq!(info["response_schema"], entry["response_format"], "{id}");
        if id == ON_CONFIG_CHANGE {
            assert_eq!(info["metadata"]["internal"], true, "{id}");
        }
    }
    for trigger_type in TRIGGER_TYPES {
        let info =
            real_engine::call(&iii, "engine::triggers::info", json!({"id": trigger_type})).await;
        assert_eq!(info["id"], trigger_type);
    }
    let workers = real_engine::call(&iii, "engine::workers::list", json!({})).await;
    assert!(
        workers["workers"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["name"] == WORKER_NAME)),
        "{workers}"
    );

    // 2. Reads.
    let list = real_engine::call(&iii, "directory::skills::list", json!({})).await;
    // Whether `mailer` and `ghost` show depends on that engine's `worker::list`; `hello` has
    // no namespace and always shows.
    assert!(ids(&list).contains(&"hello".to_string()), "{list}");
    let got = real_engine::call(&iii, "directory::skills::get", json!({"id": "hello"})).await;
    assert_eq!(got["body"], HELLO);
    let prompt = real_engine::call(
        &iii,
        "directory::system-prompts::get",
        json!({"name": "iii-runtime"}),
    )
    .await;
    assert_eq!(prompt["builtin"], true);
    let agent = real_engine::call(&iii, "directory::agents::get", json!({"id": "iii"})).await;
    assert_eq!(agent["id"], "iii");
    let status = real_engine::call(&iii, "directory::index::status", json!({})).await;
    assert!(status["revision"].as_u64().is_some_and(|r| r > 0));

    // 5. Change events to a subscriber of our own.
    let subscriber = format!("e2e-{pid}::on-change");
    let mut events = real_engine::subscribe(&iii, &subscriber);
    // Bindings reach the provider asynchronously, with no ack to the subscriber.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let id = format!("e2e-{pid}");
    real_engine::call(
        &iii,
        "directory::skills::create",
        json!({"id": id, "content": "# E2E\n\nText.\n"}),
    )
    .await;
    let (payload, metadata) = real_engine::next_event(&mut events, "create").await;
    assert_eq!(
        (&payload["namespace"], &payload["id"]),
        (&json!(id), &json!(id))
    );
    assert_eq!(metadata, Some(json!({"m": 1})));
    real_engine::call(&iii, "directory::skills::delete", json!({"id": id})).await;
    real_engine::next_event(&mut events, "delete").await;
    edit_externally(
        tree.path(),
        &format!("skills/{id}-ext.md"),
        "# Ext\n\nText.\n",
    );
    let (_, metadata) = real_engine::next_event(&mut events, "external").await;
    assert_eq!(metadata, Some(json!({"m": 1})));

    tokio::task::spawn_blocking(move || iii.shutdown())
        .await
        .expect("client shutdown");
    worker.stop().await;
}
