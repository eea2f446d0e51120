//! Wire tests of the `iii-directory` worker: the real binary, started as a child process and
//! connected to the loopback fake engine (`test_support::fake_engine`), driven only through
//! the wire.
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
//!
//! Beside them, modules with a harness of their own: the console's injectable UI on the wire
//! (`console`) and in headless Chromium (`browser`), live UIs polling a busy tree
//! (`load_deltas`), the worker's memory over many calls (`memory`), what only a real engine
//! shows (`real_engine_only`), and the fake engine's own checks against the SDK
//! (`fake_engine_selftest`). `cargo test --test worker <module>::` runs one module.

use test_support::{engine_client, fake_engine, worker_process};

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fake_engine::{ErrorBody, FakeEngine, Fire};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::time::Instant;
use worker_process::WorkerProcess;

/// How long a wait on the wire may take before the test fails: generous, since it only runs out
/// when something is wrong, and a loaded 2-core machine can take seconds to start a worker.
const WAIT: Duration = Duration::from_secs(30);
/// The real-engine tests (`real_engine`, `real_engine_only`) each start a directory worker on
/// the one engine `III_ENGINE_URL` names, where two would register the same functions: they
/// take turns.
static REAL_ENGINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
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
/// The console page's assets (internal; `console` checks it on the wire).
const UI_CONTENT: &str = "iii-directory::ui-content";
/// The console page's dry run (internal).
const UI_CHECK: &str = "iii-directory::ui-check";

/// Every function with the keys its request and response schemas require (README contract;
/// the three lists answer one of three shapes, checked apart: the whole list's are given here).
const DOCUMENTED: &[(&str, &[&str], &[&str])] = &[
    ("directory::skills::list", &[], &["skills"]),
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
        "directory::skills::search",
        &["query"],
        &["mode", "results"],
    ),
    (
        "directory::skills::catalog",
        &[],
        &["format", "count", "left_out", "max_bytes"],
    ),
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
    (
        "directory::search_functions",
        &["capabilities"],
        &["guidance", "workers", "latency_ms"],
    ),
    ("directory::on-functions-change", &[], &["ok"]),
    (
        "directory::pre-generate",
        &["session_id", "turn_id", "step", "generate"],
        &["decision", "annotations"],
    ),
    ("directory::hint-preview", &[], &["agent_trigger", "native"]),
    ("directory::skills::download", &[], DOWNLOAD_RESPONSE),
    (
        "directory::skills::download_from_repo",
        &["repo", "skill"],
        DOWNLOAD_RESPONSE,
    ),
    (
        "directory::skills::download_from_registry",
        &["worker"],
        DOWNLOAD_RESPONSE,
    ),
    (
        "directory::registry::workers::list",
        &[],
        &["workers", "pagination"],
    ),
    (
        "directory::registry::workers::info",
        &["name"],
        &["worker", "api_reference", "skills_tree"],
    ),
    (ON_WORKER_ADDED, &[], &["ok"]),
    (UI_CONTENT, &["path"], &["content", "content_type"]),
    (
        UI_CHECK,
        &["family", "id", "content"],
        &["family", "id", "frontmatter", "refused"],
    ),
    ("directory::skills::bundles::list", &[], &["bundles"]),
    (
        "directory::skills::bundles::get",
        &["namespace"],
        BUNDLE_STATUS,
    ),
    (
        "directory::skills::bundles::verify",
        &[],
        &["ok", "checked", "bundles"],
    ),
    // One bundle's outcome, or every bundle's (`restored`, `failed`).
    ("directory::skills::bundles::restore", &[], &[]),
    (
        "directory::skills::bundles::check-updates",
        &[],
        &["bundles"],
    ),
    (
        "directory::skills::bundles::plan-update",
        &["namespace"],
        &[
            "plan_id",
            "namespace",
            "expires_at",
            "expires_in_ms",
            "from",
            "to",
            "summary",
            "files",
            "review",
        ],
    ),
    (
        "directory::skills::bundles::apply",
        &["plan_id"],
        &[
            "plan_id",
            "namespace",
            "written",
            "removed",
            "kept_local",
            "merged",
            "conflicts",
            "upstream_copies_removed",
            "source",
        ],
    ),
];

/// A bundle's status against the lock (README, "The bundles lock").
const BUNDLE_STATUS: &[&str] = &[
    "namespace",
    "state",
    "source",
    "landed_at",
    "files",
    "modified",
    "missing",
    "untracked",
    "upstream_copies",
    "stale_upstream_copies",
    "recorded",
];

/// The internal functions (`metadata.internal`), with the metadata each registers.
const INTERNAL: &[(&str, &str)] = &[
    (ON_CONFIG_CHANGE, r#"{"internal":true}"#),
    ("directory::on-functions-change", r#"{"internal":true}"#),
    (
        "directory::pre-generate",
        r#"{"internal":true,"trace_hidden":true}"#,
    ),
    ("directory::hint-preview", r#"{"internal":true}"#),
    (ON_WORKER_ADDED, r#"{"internal":true}"#),
    (UI_CONTENT, r#"{"internal":true}"#),
    (UI_CHECK, r#"{"internal":true}"#),
];

/// The downloads' response keys (README Quickstart).
const DOWNLOAD_RESPONSE: &[&str] = &[
    "namespace",
    "skills_written",
    "system_prompts_written",
    "agents_written",
    "source",
];
const ON_WORKER_ADDED: &str = "directory::__on_worker_added";

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

/// HTTPS through a closed loopback port: auto_download is on by default, and its boot
/// reconcile must never reach the public registry from a test.
const NO_REGISTRY: &str = "http://127.0.0.1:9";

/// The worker binary against `url`, with `env` set last (so it wins).
fn spawn_worker(
    url: &str,
    compose: &Path,
    config: Option<&Path>,
    env: &[(&str, &str)],
) -> WorkerProcess {
    let mut all = vec![
        ("HTTPS_PROXY", Some(NO_REGISTRY)),
        ("https_proxy", Some(NO_REGISTRY)),
    ];
    all.extend(env.iter().map(|&(key, value)| (key, Some(value))));
    WorkerProcess::spawn(url, compose, config, &all)
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
    worker: WorkerProcess,
    /// The value the fake configuration worker holds for `iii-directory`.
    stored: Arc<Mutex<Option<Value>>>,
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
        Harness::start_with_env(installed, seed, files, stored_value, &[]).await
    }

    /// [`Harness::start_with`] with more environment for the worker.
    async fn start_with_env(
        installed: Installed,
        seed: Option<&str>,
        files: &[(&str, &str)],
        stored_value: Option<Value>,
        env: &[(&str, &str)],
    ) -> Harness {
        let engine = FakeEngine::start().await;
        fake_installed(&engine, installed);
        let stored = engine.canned_configuration_worker();
        *stored.lock().expect("stored") = stored_value;
        let harness = Harness::launch(engine, stored, files, seed, env);
        harness.wait_up().await;
        harness
    }

    /// The worker started over `engine` on the fixture tree with `files` added, `seed` as its
    /// `--config` and `env`; not waited for. `stored` is the value the fake configuration
    /// worker holds, if it runs one.
    fn launch(
        engine: FakeEngine,
        stored: Arc<Mutex<Option<Value>>>,
        files: &[(&str, &str)],
        seed: Option<&str>,
        env: &[(&str, &str)],
    ) -> Harness {
        let tree = fixture_tree();
        for (rel, text) in files {
            write_file(tree.path(), rel, text);
        }
        let seed_path = seed.map(|text| {
            let path = tree.path().join("seed.yaml");
            fs::write(&path, text).expect("write the seed");
            path
        });
        let worker = spawn_worker(engine.url(), tree.path(), seed_path.as_deref(), env);
        Harness {
            engine,
            tree,
            worker,
            stored,
        }
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
        self.worker.expect(what, waited)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tree.path().join(rel)
    }

    async fn call(&self, function_id: &str, data: Value) -> Value {
        let what = format!("{function_id} {data} failed");
        self.worker
            .expect(&what, self.engine.invoke(function_id, data).await)
    }

    async fn call_err(&self, function_id: &str, data: Value) -> ErrorBody {
        self.engine.invoke_err(function_id, data).await
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

/// The ids of the fixture's own skills (the bundled `iii-directory` docs left out).
fn own(ids: Vec<String>) -> Vec<String> {
    ids.into_iter()
        .filter(|id| id != "iii-directory" && !id.starts_with("iii-directory/"))
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

mod catalog;
mod configuration;
mod connection;
mod errors;
mod events;
mod filter;
mod fresh;
mod functions;
mod globals;
mod real_engine;
mod reconnect;
mod registration;
mod soak;
mod telemetry;

// With a harness of their own (each was a test binary before).
mod browser;
mod console;
mod fake_engine_selftest;
mod load_deltas;
mod memory;
mod real_engine_only;
