//! The console page in a real browser: headless Chromium (Debian's `chromium`, driven by
//! `playwright-core`) loads a harness page that plays the iii console (`tests/browser/`), and
//! the page talks to the real worker binary through the loopback fake engine.
//!
//! This test starts the fake engine, the worker on a generated tree of 10,000 skills (plus a
//! few fixtures), and a loopback HTTP server for the harness and React's ES modules (built
//! from the npm packages by esbuild at test time), then runs `tests/browser/run.mjs`, which
//! does what a person would and prints the figures: setup to first rows, filter keystroke to
//! repaint, external edit to screen; and the Bundles tab over a bundle it downloads from the
//! loopback registry stand-in (status, check for updates, plan, a stale and an unknown plan,
//! apply, a settled conflict's copy removed). It needs Node.js, `npm ci --prefix tests/browser` and
//! `/usr/bin/chromium` (or `CHROMIUM`); without them it says so on one line and passes as
//! skipped. `.ci/run` installs them. `BROWSER_SKILLS` changes the tree size.

use test_support::{fake_engine, worker_process};

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fake_engine::FakeEngine;
use serde_json::Value;
use test_support::generate::{TreeSpec, write_tree};
use test_support::loopback::registry::FakeRegistry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use worker_process::WorkerProcess;

/// Skills in the generated tree (the size).
const DEFAULT_SKILLS: usize = 10_000;
/// The worker indexes the whole tree before it registers (an unoptimized build is slow).
const WORKER_UP_WITHIN: Duration = Duration::from_secs(180);
/// The whole browser run, well under CI's budget.
const RUN_WITHIN: Duration = Duration::from_secs(300);
const UI_CONTENT: &str = "iii-directory::ui-content";
const SETUP_HINT: &str =
    "apt-get install -y chromium && npm ci --prefix tests/browser (what .ci/run does)";

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn browser_dir() -> PathBuf {
    manifest_dir().join("tests/browser")
}

/// Writes straight to stderr, past the test harness's capture, so the line shows in CI logs.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// What is missing to run the test, if anything.
fn missing_prerequisite(chromium: &Path) -> Option<String> {
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !node.is_ok_and(|s| s.success()) {
        return Some("node is not installed".into());
    }
    for package in ["playwright-core", "react", "react-dom", "esbuild"] {
        if !browser_dir()
            .join("node_modules")
            .join(package)
            .join("package.json")
            .is_file()
        {
            return Some(format!("tests/browser/node_modules/{package} is missing"));
        }
    }
    if !chromium.is_file() {
        return Some(format!("{} is missing", chromium.display()));
    }
    None
}

/// The generated tree plus the fixtures the run needs: the markdown showcase, an `extends`
/// chain, and a profile whose parent does not exist.
fn lay_out_tree(base: &Path, skills: usize) {
    write_tree(
        base,
        &TreeSpec {
            skills,
            seed: 7,
            corpus: None,
        },
    )
    .expect("generate the tree");
    let showcase = fs::read_to_string(browser_dir().join("showcase.md")).expect("showcase.md");
    for (rel, text) in [
        ("skills/fixtures/showcase.md", showcase.as_str()),
        (
            "agents/chain-a.md",
            "---\nname: Chain A\nextends: iii\n---\nFirst link.\n",
        ),
        (
            "agents/chain-b.md",
            "---\nname: Chain B\nextends: chain-a\n---\nSecond link.\n",
        ),
        (
            "agents/chain-c.md",
            "---\nname: Chain C\nextends: chain-b\nmodel: some-model\n---\nThird link.\n",
        ),
        (
            ".agents/skills/agent-tool/SKILL.md",
            "---\nname: agent-tool\ndescription: A skill another tool installed and owns.\n---\nRead-only here.\n",
        ),
        (
            "agents/broken-x.md",
            "---\nname: Broken\nextends: nowhere-y\n---\nAlone.\n",
        ),
    ] {
        let path = base.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, text).expect("write a fixture");
    }
}

/// React as ES modules, built from `tests/browser/node_modules` by esbuild.
fn build_vendor(out: &Path) {
    let output = Command::new("node")
        .arg(browser_dir().join("build-vendor.mjs"))
        .arg(out)
        .output()
        .expect("run build-vendor.mjs");
    assert!(
        output.status.success(),
        "build-vendor.mjs failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// A loopback HTTP server for the harness page and the vendor modules (GET only)
// ---------------------------------------------------------------------------------------------

/// The file for a request path, with its content type; `None` for anything else.
fn route(path: &str, vendor: &Path) -> Option<(PathBuf, &'static str)> {
    const JS: &str = "text/javascript; charset=utf-8";
    match path {
        "/" => Some((
            browser_dir().join("harness.html"),
            "text/html; charset=utf-8",
        )),
        "/harness.js" => Some((browser_dir().join("harness.js"), JS)),
        _ => {
            let name = path.strip_prefix("/vendor/")?;
            let plain = name.ends_with(".mjs")
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-' || b == b'.');
            plain.then(|| (vendor.join(name), JS))
        }
    }
}

/// The registry worker whose bundle the run downloads, then updates from the page.
const BUNDLE_WORKER: &str = "mailer";

/// `mailer`'s bundle at `version` (1.0.0 or 2.0.0). 2.0.0 changes a line of SKILL.md, both.md
/// and merge.md, removes gone.md and adds an executable script; run.mjs edits notes.md,
/// both.md (the same line: a conflict) and merge.md (another line: a clean merge) in between.
fn bundle_files(version: &str) -> Option<Vec<(String, String)>> {
    let mut files = vec![
        (
            "SKILL.md",
            "---\ntitle: Mailer\ndescription: Sends mail.\n---\n# Mailer\n\nline 1\nline 2\nline 3\n",
        ),
        ("notes.md", "# Notes\n\nnote 1\nnote 2\n"),
        ("both.md", "# Both\n\nboth 1\nboth 2\nboth 3\n"),
        (
            "merge.md",
            "# Merge\n\nmerge 1\nmerge 2\nmerge 3\nmerge 4\nmerge 5\n",
        ),
        ("gone.md", "# Gone\n"),
    ];
    let changed = |text: &str, line: &str| text.replace(line, &format!("{line}, from 2.0.0"));
    let files: Vec<(String, String)> = match version {
        "1.0.0" => files
            .drain(..)
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect(),
        "2.0.0" => files
            .drain(..)
            .filter(|(p, _)| *p != "gone.md")
            .map(|(p, t)| {
                let t = match p {
                    "SKILL.md" => changed(t, "line 3"),
                    "both.md" => changed(t, "both 1"),
                    "merge.md" => changed(t, "merge 5"),
                    _ => t.to_string(),
                };
                (p.to_string(), t)
            })
            .chain([(
                "scripts/send.sh".to_string(),
                "#!/bin/sh\necho sent\n".to_string(),
            )])
            .collect(),
        _ => return None,
    };
    Some(files)
}

/// What the run can ask of the test through `/control/…`: stop the worker and start it again
/// under the open page (the worker gone and back, as a person sees it), publish a version of
/// [`BUNDLE_WORKER`]'s bundle on the loopback registry stand-in, and hold back the page's calls
/// to a function in the engine (`hold/<function>`, `held/<function>` answers how many wait,
/// `release/<function>` routes them), so that a write on disk can land between two calls.
struct Control {
    engine: Arc<FakeEngine>,
    engine_url: String,
    tree: PathBuf,
    seed: PathBuf,
    worker: tokio::sync::Mutex<Option<WorkerProcess>>,
    registry: FakeRegistry,
}

impl Control {
    fn spawn(&self) -> WorkerProcess {
        WorkerProcess::spawn(&self.engine_url, &self.tree, Some(&self.seed), &[])
    }

    /// Answers a control request: `(status, body)`.
    async fn handle(&self, path: &str) -> (&'static str, String) {
        let mut worker = self.worker.lock().await;
        match path {
            "/control/worker/stop" => {
                if let Some(running) = worker.take() {
                    running.stop().await;
                }
                ("200 OK", "stopped\n".into())
            }
            "/control/worker/start" => {
                if worker.is_none() {
                    *worker = Some(self.spawn());
                }
                ("200 OK", "started\n".into())
            }
            _ if path.starts_with("/control/hold/") => {
                self.engine.hold_calls(&path["/control/hold/".len()..]);
                ("200 OK", "holding\n".into())
            }
            _ if path.starts_with("/control/held/") => {
                let held = self.engine.held_calls(&path["/control/held/".len()..]);
                ("200 OK", format!("{held}\n"))
            }
            _ if path.starts_with("/control/release/") => {
                let released = self
                    .engine
                    .release_calls(&path["/control/release/".len()..]);
                ("200 OK", format!("{released}\n"))
            }
            _ if path.starts_with("/control/registry/publish/") => {
                let version = &path["/control/registry/publish/".len()..];
                match bundle_files(version) {
                    Some(files) => {
                        self.registry.publish(BUNDLE_WORKER, version, &files);
                        ("200 OK", "published\n".into())
                    }
                    None => ("404 Not Found", "no such version\n".into()),
                }
            }
            _ => ("404 Not Found", "not found\n".into()),
        }
    }

    async fn stderr(&self) -> String {
        self.worker
            .lock()
            .await
            .as_ref()
            .map(WorkerProcess::stderr)
            .unwrap_or_default()
    }
}

async fn serve_one(mut stream: TcpStream, vendor: PathBuf, control: Arc<Control>) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut words = text.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
    let path = target.split('?').next().unwrap_or("/");
    if method == "POST" && path.starts_with("/control/") {
        let (status, body) = control.handle(path).await;
        let header = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(header.as_bytes()).await;
        let _ = stream.write_all(body.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }
    let found = (method == "GET")
        .then(|| route(path, &vendor))
        .flatten()
        .and_then(|(file, kind)| fs::read(file).ok().map(|body| (body, kind)));
    let (status, kind, body) = match found {
        Some((body, kind)) => ("200 OK", kind, body),
        None => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            b"not found\n".to_vec(),
        ),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(header.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
}

/// Binds `127.0.0.1:0` and serves until the test ends; returns the base URL.
async fn start_http(vendor: PathBuf, control: Arc<Control>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind http");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_one(stream, vendor.clone(), control.clone()));
        }
    });
    format!("http://127.0.0.1:{port}")
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// Runs `run.mjs` to its end (or [`RUN_WITHIN`]); returns (success, stdout, stderr). Its
/// stderr goes through a file, so that a run stopped at the deadline still says how far it got.
async fn run_browser(envs: Vec<(&'static str, String)>, log: &Path) -> (bool, String, String) {
    let mut command = Command::new("node");
    command
        .arg(browser_dir().join("run.mjs"))
        .current_dir(browser_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(fs::File::create(log).expect("create the run.mjs log"));
    for (key, value) in envs {
        command.env(key, value);
    }
    let child = command.spawn().expect("start node run.mjs");
    let pid = child.id();
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    match tokio::time::timeout(RUN_WITHIN, waiting).await {
        Ok(joined) => {
            let output = joined.expect("join").expect("wait for node");
            (
                output.status.success(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                fs::read_to_string(log).unwrap_or_default(),
            )
        }
        Err(_) => {
            // Our own child, by its pid.
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!(
                "run.mjs did not finish within {RUN_WITHIN:?}; it said:\n{}",
                fs::read_to_string(log).unwrap_or_default()
            );
        }
    }
}

fn ms(value: &Value) -> String {
    value
        .as_f64()
        .map(|v| format!("{v:.1} ms"))
        .unwrap_or_else(|| "?".into())
}

fn describe(figures: &Value, skills: usize) -> String {
    let key = &figures["filter_keystroke_ms"];
    let edit = &figures["external_edit_to_screen_ms"];
    let profile = if cfg!(debug_assertions) {
        "test profile"
    } else {
        "release"
    };
    format!(
        "browser figures ({skills} generated skills, {} rows listed, worker built in the {profile}): \
         setup → first rows on screen {}; filter keystroke → repaint median {} (max {}, {} keystrokes); \
         save → saved on screen median {} (max {}, {} saves); \
         external edit on disk → on screen median {} (max {}, {} edits); skills::list calls per change {} \
         (the first answer, the whole list, is {} bytes and took {}; a refresh after a change is {} bytes and took {}); {} list rows in the DOM",
        figures["rows"],
        ms(&figures["setup_to_first_rows_ms"]),
        ms(&key["median"]),
        ms(&key["max"]),
        key["samples"],
        ms(&figures["save_ms"]["median"]),
        ms(&figures["save_ms"]["max"]),
        figures["save_ms"]["samples"],
        ms(&edit["median"]),
        ms(&edit["max"]),
        edit["samples"],
        figures["list_calls_per_change"],
        figures["first_list_answer_bytes"],
        ms(&figures["first_list_call_ms"]),
        figures["list_answer_bytes"],
        ms(&figures["refresh_list_call_ms"]),
        figures["rows_in_dom"],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_page_in_chromium() {
    let chromium = PathBuf::from(std::env::var("CHROMIUM").unwrap_or("/usr/bin/chromium".into()));
    if let Some(missing) = missing_prerequisite(&chromium) {
        say(&format!(
            "browser test skipped: {missing}; to run it: {SETUP_HINT}"
        ));
        return;
    }
    let skills = std::env::var("BROWSER_SKILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_SKILLS);

    let work = tempfile::tempdir().expect("temp dir");
    let tree = work.path().join("compose");
    lay_out_tree(&tree, skills);
    let seed = work.path().join("seed.yaml");
    // The registry stand-in publishes the bundle the run downloads and updates (answers not
    // cached, so that check-updates sees a version published a moment ago).
    let registry = FakeRegistry::start();
    registry.publish(
        BUNDLE_WORKER,
        "1.0.0",
        &bundle_files("1.0.0").expect("1.0.0"),
    );
    // Every generated namespace listed and writable, whatever the engine says is installed.
    fs::write(
        &seed,
        format!(
            "filter_unregistered: false\nregistry_url: {}/\nregistry_cache_ttl_ms: 0\n",
            registry.url()
        ),
    )
    .expect("write the seed");
    let vendor = work.path().join("vendor");
    build_vendor(&vendor);

    let engine = Arc::new(FakeEngine::start().await);
    // The engine's configuration worker, for the settings form.
    engine.model_configuration_worker();
    // The run moves many full lists (megabytes each): route them, do not keep copies.
    engine.keep_history(false);
    let control = Arc::new(Control {
        engine: engine.clone(),
        engine_url: engine.url().to_string(),
        tree: tree.clone(),
        seed: seed.clone(),
        worker: tokio::sync::Mutex::new(None),
        registry,
    });
    let worker = control.spawn();
    let registered = engine.wait_function(UI_CONTENT, WORKER_UP_WITHIN).await;
    worker.expect("the worker registers", registered);
    *control.worker.lock().await = Some(worker);
    let http = start_http(vendor, control.clone()).await;
    let out = manifest_dir().join("target/browser-test");

    let harness = format!("{http}/?engine={}", engine.url());
    let (ok, stdout, stderr) = run_browser(
        vec![
            ("HARNESS_URL", harness),
            ("CONTROL_URL", http.clone()),
            ("TREE_DIR", tree.display().to_string()),
            ("OUT_DIR", out.display().to_string()),
            ("CHROMIUM", chromium.display().to_string()),
            ("SKILLS", skills.to_string()),
        ],
        &work.path().join("run.stderr"),
    )
    .await;
    assert!(
        ok,
        "the browser run failed\n--- run.mjs stderr ---\n{stderr}\n--- run.mjs stdout ---\n{stdout}\n--- worker stderr ---\n{}",
        control.stderr().await
    );
    let figures: Value = stdout
        .lines()
        .find_map(|line| line.strip_prefix("FIGURES "))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_else(|| panic!("run.mjs printed no figures:\n{stdout}\n{stderr}"));
    fs::write(out.join("figures.json"), format!("{figures:#}\n")).expect("write figures.json");
    say(&describe(&figures, skills));
    // The profile form's edit, as a diff of the file (its body untouched).
    let diff: Vec<&str> = figures["profile_form_diff"]
        .as_array()
        .map(|lines| lines.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(!diff.is_empty(), "the profile form changed nothing");
    say(&format!(
        "the profile form's edit of agents/chain-b.md:\n    {}",
        diff.join("\n    ")
    ));

    // What the run left on disk: its last external write, and no created file.
    let showcase =
        fs::read_to_string(tree.join("skills/fixtures/showcase.md")).expect("the showcase");
    assert!(
        showcase.contains("title: Changed under the draft"),
        "{showcase}"
    );
    assert!(!tree.join("skills/fixtures/made-in-browser.md").exists());
    // The bundle the page updated: at 2.0.0 in the lock, the merge landed, the settled
    // conflict's upstream copy gone.
    let lock: Value = serde_json::from_str(
        &fs::read_to_string(tree.join("skills/iii-bundles.lock.json")).expect("the lock"),
    )
    .expect("lock JSON");
    assert_eq!(lock["bundles"][BUNDLE_WORKER]["source"]["version"], "2.0.0");
    let merged = fs::read_to_string(tree.join("skills/mailer/merge.md")).expect("merge.md");
    assert!(merged.contains("merge 1, mine") && merged.contains("merge 5, from 2.0.0"));
    assert!(!tree.join("skills/mailer/both.md.upstream").exists());
    assert!(!tree.join("skills/mailer/gone.md").exists());
    for shot in ["light.png", "dark.png"] {
        let bytes = fs::read(out.join(shot)).expect("a screenshot");
        assert!(
            bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
            "{shot}"
        );
    }
    let worker = control.worker.lock().await.take();
    worker
        .expect("the run leaves the worker running")
        .stop()
        .await;
}
