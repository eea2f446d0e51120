//! The worker binary on the wire (the loopback fake engine) with the loopback registry: the
//! download and registry functions, their change events, auto-download on a worker add, the
//! boot reconcile, and the registry cache cleared by a configuration change.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::fake_engine::{ErrorBody, FakeEngine, Fire};
use crate::worker_process::WorkerProcess;
use test_support::loopback::git::{Behaviour, GitServer, Repo};
use test_support::loopback::registry::{FakeRegistry, Reply};

const WAIT: Duration = Duration::from_secs(15);
/// Longer than a watcher burst plus a fan-out: "nothing more fired" is checked after it.
const SETTLE: Duration = Duration::from_millis(1_200);
const SUBSCRIBER: &str = "sub::fn";
const ON_WORKER_ADDED: &str = "directory::__on_worker_added";
const NEW_FUNCTIONS: [&str; 6] = [
    "directory::skills::download",
    "directory::skills::download_from_repo",
    "directory::skills::download_from_registry",
    "directory::registry::workers::list",
    "directory::registry::workers::info",
    ON_WORKER_ADDED,
];

struct Harness {
    engine: FakeEngine,
    registry: FakeRegistry,
    tree: tempfile::TempDir,
    stored: Arc<Mutex<Option<Value>>>,
    worker: WorkerProcess,
}

impl Drop for Harness {
    /// The tests end without a `stop`: the worker is asked to shut down (SIGTERM) before it is
    /// killed.
    fn drop(&mut self) {
        self.worker.terminate();
    }
}

/// What to lay out and answer before the worker starts.
struct Start<'a> {
    auto_download: bool,
    installed: Value,
    files: &'a [(&'a str, &'a str)],
    prepare: &'a dyn Fn(&FakeRegistry),
    /// A CA file git trusts (`GIT_SSL_CAINFO` in the worker's environment).
    git_ca: Option<&'a Path>,
    /// More environment for the worker.
    env: &'a [(&'a str, &'a str)],
}

impl Default for Start<'_> {
    fn default() -> Self {
        Start {
            auto_download: false,
            installed: json!({"workers": [{"name": "mailer"}]}),
            files: &[],
            prepare: &|_| {},
            git_ca: None,
            env: &[],
        }
    }
}

impl Harness {
    async fn start(options: Start<'_>) -> Harness {
        let engine = FakeEngine::start().await;
        engine.respond("worker::list", options.installed.clone());
        let stored = engine.canned_configuration_worker();
        let registry = FakeRegistry::start();
        (options.prepare)(&registry);
        let tree = tempfile::tempdir().expect("temp");
        for dir in ["skills/iii", "agents"] {
            fs::create_dir_all(tree.path().join(dir)).expect("mkdir");
        }
        for (rel, text) in options.files {
            let path = tree.path().join(rel);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, text).expect("write");
        }
        let seed = tree.path().join("seed.yaml");
        fs::write(
            &seed,
            format!(
                "registry_url: {}\nauto_download: {}\ndownload_timeout_ms: 5000\n",
                registry.url(),
                options.auto_download
            ),
        )
        .expect("seed");
        let worker = spawn(
            engine.url(),
            tree.path(),
            &seed,
            options.git_ca,
            options.env,
        );
        let h = Harness {
            engine,
            registry,
            tree,
            stored,
            worker,
        };
        h.ok("ready", h.engine.wait_ready(WAIT).await);
        for id in NEW_FUNCTIONS {
            h.ok(id, h.engine.wait_function(id, WAIT).await);
        }
        // The configuration boot ends with the `configuration` binding.
        h.ok(
            "configuration bound",
            h.engine
                .wait_worker_trigger(|t| t.trigger_type == "configuration", WAIT)
                .await,
        );
        h
    }

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

    async fn subscribe_all(&self) {
        for (i, trigger_type) in [
            "directory::skills::on-change",
            "directory::system-prompts::on-change",
            "directory::agents::on-change",
        ]
        .iter()
        .enumerate()
        {
            self.engine
                .subscribe(
                    &format!("sub-{i}"),
                    trigger_type,
                    SUBSCRIBER,
                    json!({}),
                    None,
                )
                .await
                .unwrap_or_else(|e| panic!("subscribe {trigger_type}: {e}"));
        }
    }

    fn fires(&self) -> Vec<Value> {
        self.engine
            .fires()
            .into_iter()
            .filter(|f: &Fire| f.function_id == SUBSCRIBER)
            .map(|f| f.data)
            .collect()
    }

    /// Waits until `check` holds on the tree.
    async fn wait_disk(&self, what: &str, check: impl Fn(&Path) -> bool) {
        self.wait_for(what, || check(self.tree.path())).await;
    }

    /// Waits until `check` holds.
    async fn wait_for(&self, what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + WAIT;
        while !check() {
            assert!(
                Instant::now() < deadline,
                "{what} never happened; worker stderr:\n{}",
                self.worker.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn spawn(
    url: &str,
    compose: &Path,
    seed: &Path,
    git_ca: Option<&Path>,
    more: &[(&str, &str)],
) -> WorkerProcess {
    let mut env = vec![
        ("RUST_LOG", Some("info,iii_directory=debug")),
        ("NO_PROXY", Some("127.0.0.1,localhost")),
    ];
    if let Some(ca) = git_ca {
        env.push((
            "GIT_SSL_CAINFO",
            Some(ca.to_str().expect("a UTF-8 CA path")),
        ));
    }
    env.extend(more.iter().map(|&(key, value)| (key, Some(value))));
    WorkerProcess::spawn(url, compose, Some(seed), &env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_surface_lists_the_download_and_registry_functions() {
    let h = Harness::start(Start::default()).await;
    let functions = h.engine.functions();
    for id in NEW_FUNCTIONS {
        let f = &functions[id];
        let internal = f.metadata.as_ref().and_then(|m| m["internal"].as_bool()) == Some(true);
        assert_eq!(internal, id == ON_WORKER_ADDED, "{id}");
    }
    let required =
        |id: &str| functions[id].request_format.as_ref().expect("request")["required"].clone();
    assert_eq!(required("directory::skills::download"), json!([]));
    assert_eq!(
        required("directory::skills::download_from_repo"),
        json!(["repo", "skill"])
    );
    assert_eq!(
        required("directory::skills::download_from_registry"),
        json!(["worker"])
    );
    assert_eq!(
        required("directory::registry::workers::info"),
        json!(["name"])
    );
    assert!(
        h.engine
            .worker_triggers()
            .values()
            .all(|t| t.trigger_type != "worker"),
        "auto_download off: no worker binding"
    );
    h.registry.bundle("mailer", &[("index.md", "# Mailer\n")]);
    assert_eq!(
        h.call(ON_WORKER_ADDED, json!({"worker": "mailer"})).await,
        json!({"ok": true})
    );
    assert!(
        h.registry.requests().is_empty(),
        "auto_download off: nothing downloaded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_over_the_wire_fires_one_event_per_family_and_no_external_echo() {
    let h = Harness::start(Start::default()).await;
    h.subscribe_all().await;
    h.registry.bundle(
        "mailer",
        &[
            ("index.md", "# Mailer\n\nSends mail.\n"),
            ("agents/captain.md", "---\nname: Captain\n---\nShip it.\n"),
        ],
    );
    let response = h
        .call(
            "directory::skills::download_from_registry",
            json!({"worker": "mailer"}),
        )
        .await;
    assert_eq!(response["skills_written"], json!(["index.md"]));
    assert_eq!(response["agents_written"], json!(["captain"]));
    let got = h
        .call("directory::skills::get", json!({"id": "mailer"}))
        .await;
    assert_eq!(got["title"], "Mailer");
    tokio::time::sleep(SETTLE).await;
    let payload = json!({"op": "download", "namespace": "mailer", "source": "registry"});
    assert_eq!(
        h.fires(),
        [payload.clone(), payload],
        "skills and agents, nothing else"
    );

    let err = h
        .call_err("directory::skills::download", json!({"worker": "ghost"}))
        .await;
    assert!(
        err.message
            .contains("D310 not_found: registry worker \"ghost\""),
        "{err}"
    );
    assert!(!err.message.contains(&h.registry.url()), "{err}");
}

/// `registry::workers::info` answers the pre-install card the `iii-runtime` prompt describes:
/// the worker, functions and triggers by name and description, and the skills tree; `readme`
/// adds the README, `schemas` the schemas and metadata, and both give the whole record, every
/// field 1.2.8 answered. One registry fetch serves every form (the record is cached whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_info_is_a_compact_card_unless_asked_for_more() {
    let h = Harness::start(Start::default()).await;
    let functions = json!([
        {
            "name": "resend::send", "description": "Send an email.",
            "request_schema": {"type": "object", "properties": {"to": {"type": "string"}}},
            "response_schema": {"type": "object"},
            "metadata": {"internal": false},
        },
        {"name": "resend::flush", "metadata": {"internal": true}},
    ]);
    let triggers = json!([{
        "name": "resend::delivered", "description": "A message was delivered.",
        "invocation_schema": {"type": "object"}, "return_schema": {"type": "null"},
        "metadata": {},
    }]);
    let readme = "# Resend\n\n".to_string() + &"A long README. ".repeat(400);
    h.registry.json(
        "/w/resend",
        json!({
            "worker": {"name": "resend", "version": "2.0.0", "description": "Email.", "readme": readme},
            "functions": functions,
            "triggers": triggers,
        }),
    );
    h.registry.json(
        "/w/resend/skills",
        json!({"skills": [{"path": "index.md", "content": "x"}], "prompts": [{"name": "p", "description": "d"}]}),
    );
    let info = |extra: Value| {
        let mut request = json!({"name": "resend"});
        for (k, v) in extra.as_object().expect("an object") {
            request[k] = v.clone();
        }
        h.call("directory::registry::workers::info", request)
    };

    let card = info(json!({})).await;
    assert_eq!(
        keys(&card),
        ["api_reference", "skills_tree", "worker"],
        "{card}"
    );
    assert_eq!(card["worker"]["version"], "2.0.0");
    assert_eq!(
        card["api_reference"],
        json!({
            "functions": [
                {"name": "resend::send", "description": "Send an email."},
                {"name": "resend::flush", "description": null},
            ],
            "triggers": [{"name": "resend::delivered", "description": "A message was delivered."}],
        })
    );
    assert_eq!(
        card["skills_tree"],
        json!({"skills": [{"path": "index.md"}], "prompts": [{"name": "p", "description": "d"}]})
    );
    let whole = info(json!({"readme": true, "schemas": true})).await;
    assert!(
        card.to_string().len() * 5 < whole.to_string().len(),
        "the card is a fraction of the whole record: {} against {} bytes",
        card.to_string().len(),
        whole.to_string().len()
    );

    let with_readme = info(json!({"readme": true})).await;
    assert_eq!(with_readme["readme"], readme.as_str());
    assert_eq!(with_readme["api_reference"], card["api_reference"]);

    let with_schemas = info(json!({"schemas": true})).await;
    assert!(with_schemas.get("readme").is_none(), "{with_schemas}");
    let send = &with_schemas["api_reference"]["functions"][0];
    assert_eq!(send["request_schema"], functions[0]["request_schema"]);
    assert_eq!(send["response_schema"], json!({"type": "object"}));
    assert_eq!(send["metadata"], json!({"internal": false}));
    assert_eq!(
        with_schemas["api_reference"]["functions"][1]["metadata"],
        json!({"internal": true})
    );
    assert_eq!(
        with_schemas["api_reference"]["triggers"][0]["return_schema"],
        json!({"type": "null"})
    );

    // Both: everything 1.2.8 answered, as it answered it.
    assert_eq!(
        whole,
        json!({
            "worker": {
                "name": "resend", "description": "Email.", "type": null, "version": "2.0.0",
                "repo": null, "config": {}, "supported_targets": [], "total_downloads": 0,
                "dependencies": [], "author": null,
            },
            "readme": readme,
            "api_reference": {
                "functions": [
                    {
                        "name": "resend::send", "description": "Send an email.",
                        "request_schema": functions[0]["request_schema"],
                        "response_schema": {"type": "object"}, "metadata": {"internal": false},
                    },
                    {
                        "name": "resend::flush", "description": null, "request_schema": null,
                        "response_schema": null, "metadata": {"internal": true},
                    },
                ],
                "triggers": triggers,
            },
            "skills_tree": {"skills": [{"path": "index.md"}], "prompts": [{"name": "p", "description": "d"}]},
        })
    );
    assert_eq!(
        h.registry.hits("/w/resend").len(),
        1,
        "one fetch, cut four ways"
    );
}

/// An object's keys, sorted.
fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_proxy_answers_and_a_configuration_change_clears_its_cache() {
    let h = Harness::start(Start::default()).await;
    h.registry.json("/w", json!({"workers": [{"name": "resend", "version": "1.2.3"}], "pagination": {"next_cursor": null, "has_more": false, "page_size": 1}}));
    h.registry.json(
        "/w/resend",
        json!({"name": "resend", "readme": "# R", "functions": [], "triggers": []}),
    );
    h.registry.json(
        "/w/resend/skills",
        json!({"skills": [{"path": "index.md", "content": "x"}]}),
    );
    let list = h
        .call(
            "directory::registry::workers::list",
            json!({"search": "email"}),
        )
        .await;
    assert_eq!(list["workers"][0]["version"], "1.2.3");
    assert_eq!(
        h.registry.hits("/w")[0].param("search").as_deref(),
        Some("email")
    );
    for _ in 0..2 {
        let info = h
            .call(
                "directory::registry::workers::info",
                json!({"name": "resend", "readme": true}),
            )
            .await;
        assert_eq!(info["readme"], "# R");
    }
    assert_eq!(h.registry.hits("/w/resend").len(), 1, "cached");
    let err = h
        .call_err(
            "directory::registry::workers::info",
            json!({"name": "Bad Name"}),
        )
        .await;
    assert!(err.message.contains("D311 invalid_input"), "{err}");

    // A configuration change (any tunable field) forgets cached answers.
    let mut value = h
        .stored
        .lock()
        .expect("stored")
        .clone()
        .expect("stored value");
    value["hint_min_workers"] = json!(5);
    *h.stored.lock().expect("stored") = Some(value);
    assert_eq!(
        h.call("directory::on-config-change", json!({})).await,
        json!({"ok": true})
    );
    h.call(
        "directory::registry::workers::info",
        json!({"name": "resend"}),
    )
    .await;
    assert_eq!(
        h.registry.hits("/w/resend").len(),
        2,
        "asked again after the change"
    );
}

/// A registry that does not answer is reported as the contract says (`D320 registry_error:
/// could not reach the registry`), within the call deadline: `download_timeout_ms` (60 s by
/// default, 5 s here) outlasted the deadline (25 s by default, 2 s here), so the worker's
/// watchdog answered first, `D122 timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_does_not_answer_is_d320_within_the_call_deadline() {
    let h = Harness::start(Start {
        prepare: &|r| {
            let silent = Reply::Slow(
                Duration::from_secs(30),
                Box::new(Reply::Json(200, json!({"workers": []}))),
            );
            r.reply("/w", silent.clone());
            r.reply("/w/resend", silent.clone());
            r.reply("/w/resend/skills", silent);
        },
        env: &[("III_DIRECTORY_CALL_DEADLINE_MS", "2000")],
        ..Start::default()
    })
    .await;
    for (function, request) in [
        ("directory::registry::workers::list", json!({})),
        (
            "directory::registry::workers::info",
            json!({"name": "resend"}),
        ),
    ] {
        let err = h.call_err(function, request).await;
        assert!(
            err.message
                .starts_with("handler error: D320 registry_error: could not reach the registry."),
            "{function}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_add_downloads_its_skills_once_and_marks_them() {
    let h = Harness::start(Start {
        auto_download: true,
        installed: json!({"workers": []}),
        prepare: &|r| {
            r.bundle("iii", &[("SKILL.md", "# iii engine\n")]);
            r.bundle(
                "mailer",
                &[("index.md", "# Mailer\n"), ("guide.md", "# Guide\n")],
            );
        },
        ..Start::default()
    })
    .await;
    let binding = h.ok(
        "worker binding",
        h.engine
            .wait_worker_trigger(|t| t.trigger_type == "worker", WAIT)
            .await,
    );
    assert_eq!(binding.function_id, ON_WORKER_ADDED);
    assert_eq!(
        binding.config,
        json!({"operations": ["add"], "stages": ["done"]})
    );
    h.subscribe_all().await;

    let answer = h
        .call(
            ON_WORKER_ADDED,
            json!({"operation": "add", "worker": "mailer", "stage": "done"}),
        )
        .await;
    assert_eq!(answer, json!({"ok": true}));
    assert!(h.path("skills/mailer/guide.md").is_file());
    let marker: Value = serde_json::from_str(
        &fs::read_to_string(h.path("skills/mailer/.iii-skill-complete")).expect("marker"),
    )
    .expect("json");
    assert_eq!(
        marker,
        json!({"worker": "mailer", "source": "registry", "tag_or_version": "latest", "schema": 1})
    );
    let request = &h.registry.hits("/w/mailer/skills")[0];
    assert_eq!(request.param("version").as_deref(), Some("latest"));
    tokio::time::sleep(SETTLE).await;
    let payload = json!({"op": "download", "namespace": "mailer", "source": "registry"});
    assert!(h.fires().contains(&payload), "{:?}", h.fires());

    // Always {ok: true}: no name, a name that cannot be a worker, nothing published.
    for input in [
        json!({}),
        json!({"worker": "../../etc"}),
        json!({"worker": "ghost"}),
        json!({"junk": 1}),
    ] {
        assert_eq!(h.call(ON_WORKER_ADDED, input).await, json!({"ok": true}));
    }
    assert!(!h.path("skills/ghost").exists());
    assert!(h.registry.hits("/w/../../etc/skills").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_reconcile_fetches_the_engine_skill_then_unmarked_workers_without_overrides() {
    let h = Harness::start(Start {
        auto_download: true,
        installed: json!({"workers": [
            {"name": "mailer"},
            {"name": "pinned", "version": "1.2.3"},
            {"name": "overridden"},
            {"name": "finished"},
            {"name": "Not Valid"},
            {"name": "unpublished"},
        ]}),
        files: &[
            ("skills/iii/overridden/index.md", "# local override\n"),
            ("skills/finished/index.md", "# downloaded before\n"),
            (
                "skills/finished/.iii-skill-complete",
                "{\"worker\":\"finished\",\"source\":\"registry\",\"tag_or_version\":\"latest\",\"schema\":1}",
            ),
        ],
        prepare: &|r| {
            r.bundle("iii", &[("SKILL.md", "# The iii engine\n")]);
            r.bundle("mailer", &[("index.md", "# Mailer\n")]);
            r.bundle("pinned", &[("index.md", "# Pinned\n")]);
            r.bundle("overridden", &[("index.md", "# must not land\n")]);
            r.bundle("finished", &[("index.md", "# must not land\n")]);
        },
        git_ca: None,
        env: &[],
    })
    .await;
    h.wait_disk("the boot reconcile", |base| {
        base.join("skills/pinned/.iii-skill-complete").is_file()
    })
    .await;
    // The default layout: `<skills_folder>/iii` is `local_skills_folder`, so the engine skill
    // lands one level down, where both roots read it as namespace `iii`.
    h.wait_disk("the engine skill", |base| {
        base.join("skills/iii/iii/SKILL.md").is_file()
    })
    .await;
    assert!(h.path("skills/iii/.iii-skill-complete").is_file());
    assert!(h.path("skills/mailer/.iii-skill-complete").is_file());
    assert_eq!(
        h.registry.hits("/w/pinned/skills")[0]
            .param("version")
            .as_deref(),
        Some("1.2.3")
    );
    // The last worker of the reconcile; the ones before it were asked (or skipped) already.
    h.wait_for("the unpublished worker asked for", || {
        !h.registry.hits("/w/unpublished/skills").is_empty()
    })
    .await;
    let asked: Vec<String> = h.registry.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        asked[0], "/w/iii/skills",
        "the engine skill first: {asked:?}"
    );
    for skipped in ["/w/overridden/skills", "/w/finished/skills"] {
        assert!(
            !asked.iter().any(|p| p == skipped),
            "{skipped} asked: {asked:?}"
        );
    }
    assert!(!asked.iter().any(|p| p.contains("Not")), "{asked:?}");
    assert!(
        asked.iter().any(|p| p == "/w/unpublished/skills"),
        "{asked:?}"
    );
    assert!(!h.path("skills/unpublished").exists());
    assert!(!h.path("skills/overridden").exists());
    assert_eq!(
        fs::read_to_string(h.path("skills/finished/index.md")).expect("kept"),
        "# downloaded before\n"
    );
    let got = h.call("directory::skills::get", json!({"id": "iii"})).await;
    assert_eq!(got["title"], "The iii engine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repo_download_over_the_wire_with_git_trusting_the_loopback_certificate() {
    let repos = tempfile::tempdir().expect("temp");
    let server = GitServer::start(repos.path(), Behaviour::Serve);
    let repo = Repo::init(repos.path(), "skills");
    repo.write(
        "skills/frontend-design/index.md",
        "# Frontend design\n\nGrids.\n",
    )
    .write(
        "skills/frontend-design/system-prompts/designer.md",
        "---\ndescription: Designs.\n---\nYou design.\n",
    );
    repo.publish("v1");
    let h = Harness::start(Start {
        git_ca: Some(&server.ca_file),
        ..Start::default()
    })
    .await;
    h.subscribe_all().await;
    let url = server.url("skills");
    let response = h
        .call(
            "directory::skills::download",
            json!({"repo": url, "skill": "frontend-design"}),
        )
        .await;
    assert_eq!(
        response,
        json!({
            "namespace": "frontend-design",
            "skills_written": ["index.md"],
            "system_prompts_written": ["designer"],
            "agents_written": [],
            "source": {"kind": "repo", "repo": url, "skill": "frontend-design", "branch": "main"},
            "kept_local": [],
            "review": {"executables": [], "scripts": [], "hidden": [], "large": []},
        })
    );
    let prompt = h
        .call(
            "directory::system-prompts::get",
            json!({"name": "designer"}),
        )
        .await;
    assert_eq!(prompt["description"], "Designs.");
    tokio::time::sleep(SETTLE).await;
    let payload = json!({"op": "download", "namespace": "frontend-design", "source": "repo"});
    assert_eq!(h.fires(), [payload.clone(), payload]);
    let err = h
        .call_err(
            "directory::skills::download_from_repo",
            json!({"repo": url, "skill": "frontend-design", "branch": "gone"}),
        )
        .await;
    assert!(
        err.message.contains("git clone --branch gone exited with"),
        "{err}"
    );
}

/// Adding a worker (auto-download on, the default) can no more replace or shadow what is not
/// the bundle's own than an explicit download: the user's profile, the user's prompt from
/// another namespace, a reserved namespace. Each add answers `{ok: true}` and writes nothing,
/// not even a completion marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_add_never_clobbers_what_is_not_its_own() {
    const PROFILE: &str = "---\nname: Mine\n---\nThe user's.\n";
    const PROMPT: &str = "---\ndescription: The user's reviewer.\n---\nMine.\n";
    let h = Harness::start(Start {
        auto_download: true,
        installed: json!({"workers": []}),
        files: &[
            ("agents/mine.md", PROFILE),
            ("skills/system-prompts/reviewer.md", PROMPT),
        ],
        prepare: &|r| {
            let evil = "---\nname: Evil\ndescription: Evil.\n---\nEvil.\n";
            r.bundle(
                "profiles",
                &[("index.md", "# x\n"), ("agents/mine.md", evil)],
            );
            r.bundle("bundled", &[("index.md", "# x\n"), ("agents/iii.md", evil)]);
            r.bundle(
                "aaa",
                &[
                    ("index.md", "# x\n"),
                    (
                        "system-prompts/reviewer.md",
                        "---\ndescription: Evil.\n---\nEvil.\n",
                    ),
                ],
            );
            r.bundle("system-prompts", &[("reviewer.md", evil)]);
        },
        ..Start::default()
    })
    .await;
    h.ok(
        "worker binding",
        h.engine
            .wait_worker_trigger(|t| t.trigger_type == "worker", WAIT)
            .await,
    );
    let before = crate::common::tree_state(h.tree.path());
    for worker in ["profiles", "bundled", "aaa", "system-prompts"] {
        let answer = h
            .call(
                ON_WORKER_ADDED,
                json!({"operation": "add", "worker": worker, "stage": "done"}),
            )
            .await;
        assert_eq!(answer, json!({"ok": true}));
    }
    assert_eq!(crate::common::tree_state(h.tree.path()), before);
    // Each was fetched and refused on what it would replace, not left unasked.
    for worker in ["profiles", "bundled", "aaa"] {
        assert!(
            !h.registry.hits(&format!("/w/{worker}/skills")).is_empty(),
            "{worker} was never fetched"
        );
    }
    assert!(h.registry.hits("/w/system-prompts/skills").is_empty());
    let agent = h
        .call("directory::agents::get", json!({"id": "mine"}))
        .await;
    assert_eq!(agent["name"], "Mine");
    let agent = h.call("directory::agents::get", json!({"id": "iii"})).await;
    assert_eq!(agent["builtin"], true);
    let prompt = h
        .call(
            "directory::system-prompts::get",
            json!({"name": "reviewer"}),
        )
        .await;
    assert_eq!(prompt["description"], "The user's reviewer.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_add_is_locked_and_the_bundles_functions_compare_the_disk_with_the_lock() {
    let h = Harness::start(Start {
        auto_download: true,
        installed: json!({"workers": []}),
        prepare: &|r| {
            r.bundle("iii", &[("SKILL.md", "# iii engine\n")]);
            r.bundle(
                "mailer",
                &[("index.md", "# Mailer\n"), ("guide.md", "# Guide\n")],
            );
        },
        ..Start::default()
    })
    .await;
    h.ok(
        "worker binding",
        h.engine
            .wait_worker_trigger(|t| t.trigger_type == "worker", WAIT)
            .await,
    );
    let added = json!({"operation": "add", "worker": "mailer", "stage": "done"});
    assert_eq!(h.call(ON_WORKER_ADDED, added).await, json!({"ok": true}));
    let lock: Value = serde_json::from_str(
        &fs::read_to_string(h.path("skills/iii-bundles.lock.json")).expect("the lock"),
    )
    .expect("json");
    let entry = &lock["bundles"]["mailer"];
    assert_eq!(entry["source"]["version"], "1.0.0");
    assert_eq!(entry["files"].as_array().map(Vec::len), Some(2));

    let listed = h.call("directory::skills::bundles::list", json!({})).await;
    let mailer = listed["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .find(|b| b["namespace"] == "mailer")
        .expect("mailer listed")
        .clone();
    assert_eq!(mailer["state"], "clean");
    assert_eq!(mailer["files"], 2);

    fs::write(h.path("skills/mailer/guide.md"), "# Guide, mine\n").expect("edit");
    fs::write(h.path("skills/mailer/notes.md"), "# My notes\n").expect("add");
    let got = h
        .call(
            "directory::skills::bundles::get",
            json!({"namespace": "mailer"}),
        )
        .await;
    assert_eq!(got["state"], "modified");
    assert_eq!(got["modified"], json!(["guide.md"]));
    assert_eq!(got["untracked"], json!(["notes.md"]));
    assert_eq!(got["missing"], json!([]));
    assert_eq!(
        got["detail"],
        json!([
            {"path": "guide.md", "route": "skills", "state": "modified"},
            {"path": "index.md", "route": "skills", "state": "clean"},
        ])
    );
    fs::remove_file(h.path("skills/mailer/index.md")).expect("remove");
    let verified = h
        .call("directory::skills::bundles::verify", json!({}))
        .await;
    assert_eq!(verified["ok"], false);
    let bad = &verified["bundles"][0];
    assert_eq!(bad["namespace"], "mailer");
    assert_eq!(bad["state"], "missing");
    assert_eq!(bad["missing"], json!(["index.md"]));

    let err = h
        .call_err(
            "directory::skills::bundles::get",
            json!({"namespace": "ghost"}),
        )
        .await;
    assert!(
        err.message
            .contains("D334 not_found: bundle \"ghost\" is not in the bundles lock"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("directory::skills::bundles::list"),
        "{}",
        err.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_update_and_apply_over_the_wire_merge_a_local_edit_and_refuse_a_stale_plan() {
    let h = Harness::start(Start::default()).await;
    let v = |n: u32, last: &str| {
        vec![
            (
                "SKILL.md".to_string(),
                format!("# Mailer\n\nfirst\nmiddle\n{last}\n"),
            ),
            ("guide.md".to_string(), format!("# Guide v{n}\n")),
        ]
    };
    h.registry.publish("mailer", "1.0.0", &v(1, "last"));
    h.call(
        "directory::skills::download_from_registry",
        json!({"worker": "mailer"}),
    )
    .await;
    fs::write(
        h.path("skills/mailer/SKILL.md"),
        "# Mailer\n\nfirst, mine\nmiddle\nlast\n",
    )
    .expect("edit");
    h.registry
        .publish("mailer", "2.0.0", &v(2, "last, upstream"));

    let plan_id = "directory::skills::bundles::plan-update";
    let planned = h.call(plan_id, json!({"namespace": "mailer"})).await;
    assert_eq!(planned["to"]["version"], "2.0.0", "{planned}");
    assert_eq!(planned["summary"]["merges"], 1);
    // A file changed after the plan: D336 with a fresh plan, nothing written.
    fs::write(h.path("skills/mailer/guide.md"), "# Guide, mine\n").expect("edit");
    let stale = h
        .call_err(
            "directory::skills::bundles::apply",
            json!({"plan_id": planned["plan_id"]}),
        )
        .await;
    assert!(
        stale.message.contains("D336 conflict:"),
        "{}",
        stale.message
    );
    let fresh: Value = serde_json::from_str(
        stale
            .message
            .split_once("A fresh plan: ")
            .expect("a fresh plan")
            .1,
    )
    .expect("json");
    let applied = h
        .call(
            "directory::skills::bundles::apply",
            json!({"plan_id": fresh["plan_id"], "on_conflict": "merge"}),
        )
        .await;
    assert_eq!(applied["merged"], json!(["SKILL.md"]), "{applied}");
    assert_eq!(applied["conflicts"][0]["path"], "guide.md");
    assert_eq!(
        fs::read_to_string(h.path("skills/mailer/SKILL.md")).expect("merged"),
        "# Mailer\n\nfirst, mine\nmiddle\nlast, upstream\n"
    );
    assert_eq!(
        fs::read_to_string(h.path("skills/mailer/guide.md.upstream")).expect("beside"),
        "# Guide v2\n"
    );
    let unknown = h
        .call_err(
            "directory::skills::bundles::apply",
            json!({"plan_id": "plan-0"}),
        )
        .await;
    assert!(
        unknown.message.contains("D337 not_found:"),
        "{}",
        unknown.message
    );
    let bad = h
        .call_err(
            "directory::skills::bundles::apply",
            json!({"plan_id": "plan-0", "on_conflict": "ours"}),
        )
        .await;
    assert!(!bad.message.is_empty());
}
