//! Configuration.

use super::*;

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

/// The value the fake configuration worker holds.
fn stored_value(h: &Harness) -> Value {
    h.stored.lock().expect("stored").clone().expect("stored")
}

/// Stores `new` in place of the held value and announces it, as the configuration worker does
/// after a `set`; the hook's answer.
async fn store_and_announce(h: &Harness, new: &Value) -> Value {
    let old = h.stored.lock().expect("stored").replace(new.clone());
    let old = old.expect("stored");
    h.call(ON_CONFIG_CHANGE, updated_event(&old, new)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_update_applies_tunables_live() {
    let h = Harness::start(Installed::Mailer, Some(SEED)).await;
    assert!(!h.skill_ids().await.contains(&"ghost/guide".to_string()));

    let mut new = stored_value(&h);
    new["filter_unregistered"] = json!(false);
    h.engine.clear();
    assert_eq!(store_and_announce(&h, &new).await, json!({"ok": true}));
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
    // The note beside the index carries the live settings, for the commands beside the worker.
    let note: Value = serde_json::from_str(
        &fs::read_to_string(h.path("data/iii-directory/index.redb.holder")).expect("the note"),
    )
    .expect("JSON");
    assert_eq!(note["role"], "worker", "{note}");
    assert_eq!(
        note["config"]["settings"]["filter_unregistered"], false,
        "{note}"
    );
    assert_eq!(
        note["config"]["base"],
        h.tree.path().display().to_string(),
        "{note}"
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
    let mut new = stored_value(&h);
    new["registry_cache_ttl_ms"] = json!(60_000);
    store_and_announce(&h, &new).await;
    assert_eq!(
        own(h.skill_ids().await),
        ["ghost/guide", "hello", "mailer/guide", "mailer"]
    );
    h.stop().await;
}

/// A reload lets a `worker::list` still under way go: the calls after it ask anew, rather than
/// wait out that request's timeout for an answer it may never bring and take the set from
/// before the reload (the same reset runs when the engine connection comes back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_update_does_not_wait_for_a_stalled_worker_list() {
    let h = Harness::start(
        Installed::Mailer,
        Some(&SEED.replace("registry_cache_ttl_ms: 1234", "registry_cache_ttl_ms: 1000")),
    )
    .await;
    h.skill_ids().await;
    h.engine.never_answer("worker::list");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    h.engine.clear();
    let stalled = h.call("directory::skills::list", json!({}));
    let reload = async {
        h.ok(
            "the stalled worker::list",
            h.engine
                .wait_call(|c| c.function_id == "worker::list", WAIT)
                .await,
        );
        h.engine.forget_response("worker::list");
        h.engine.respond(
            "worker::list",
            json!({"workers": [{"name": "mailer"}, {"name": "ghost"}]}),
        );
        let mut new = stored_value(&h);
        new["registry_cache_ttl_ms"] = json!(60_000);
        store_and_announce(&h, &new).await;
        let started = Instant::now();
        let ids = own(h.skill_ids().await);
        (ids, started.elapsed())
    };
    let (_, (ids, took)) = tokio::join!(stalled, reload);
    assert_eq!(ids, ["ghost/guide", "hello", "mailer/guide", "mailer"]);
    assert!(took < Duration::from_secs(3), "waited {took:?}");
    // The stalled request has failed since: what it brings (the set from before the reload)
    // replaces nothing.
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
    let mut open = stored_value(&h);
    open["filter_unregistered"] = json!(false);
    store_and_announce(&h, &open).await;
    assert!(h.skill_ids().await.contains(&"ghost/guide".to_string()));

    // Then a topology change together with a tunable one: both refused.
    let mut moved = open.clone();
    moved["skills_folder"] = json!("elsewhere");
    moved["filter_unregistered"] = json!(true);
    assert_eq!(store_and_announce(&h, &moved).await, json!({"ok": true}));
    let stderr = h.worker.wait_stderr("restart required", WAIT).await;
    assert!(stderr.contains("skills_folder"), "{stderr}");
    // The status says so too (the console's settings form shows it), naming what else waits.
    let refused = refusals(&h).await;
    assert!(
        refused.iter().any(|what| what.contains("skills_folder")
            && what.contains("the other values changed with it")),
        "{refused:?}"
    );
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

// Issue 33: what a stored configuration may do. Any caller on the bus can `configuration::set`
// a value, which the configuration worker stores; the next start reads it.

/// The refusals `index::status` shows (`configuration.refused[].what`).
async fn refusals(h: &Harness) -> Vec<String> {
    let status = h.call("directory::index::status", json!({})).await;
    status["configuration"]["refused"]
        .as_array()
        .unwrap_or_else(|| panic!("configuration.refused in the status: {status}"))
        .iter()
        .map(|r| r["what"].as_str().expect("what").to_string())
        .collect()
}

/// A number of the `--config` seed brought into its range is said in the status while the seed
/// is served (it was only in the log); once a stored value is served, the seed's warnings are
/// not its own, and the log says the file differs from what is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_warnings_are_in_the_status_while_the_seed_is_served() {
    let seed = "hint_min_workers: 99999\n";
    let h = Harness::start(Installed::Mailer, Some(seed)).await;
    let refused = refusals(&h).await;
    assert!(
        refused.iter().any(|r| r.starts_with("--config seed: ")
            && r.contains("\"hint_min_workers\" is 99999, out of its range")),
        "{refused:?}"
    );
    // A value applied live: what was said of the seed is forgotten, what is said of the value
    // applied is kept.
    let mut applied = stored_value(&h);
    applied["hint_min_workers"] = json!(100000);
    applied["filter_unregistered"] = json!(false);
    assert_eq!(store_and_announce(&h, &applied).await, json!({"ok": true}));
    let refused = refusals(&h).await;
    assert!(
        !refused.iter().any(|r| r.contains("--config seed")),
        "{refused:?}"
    );
    assert!(
        refused.iter().any(|r| r.starts_with("configuration: ")
            && r.contains("\"hint_min_workers\" is 100000, out of its range")),
        "{refused:?}"
    );
    h.stop().await;

    let stored = iii_directory::config::Settings::default().to_json();
    let h = Harness::start_with(Installed::Mailer, Some(seed), &[], Some(stored)).await;
    let refused = refusals(&h).await;
    assert!(
        !refused.iter().any(|r| r.contains("--config seed")),
        "{refused:?}"
    );
    assert!(
        h.worker.stderr().contains(
            "serving the configuration stored in the engine, which differs from the --config file"
        ),
        "{}",
        h.worker.stderr()
    );
    h.stop().await;
}

/// A stored `skills_folder: "/"` walked the whole filesystem at the next start, and a create
/// under `tmp/` wrote into the system's `/tmp`. Now the worker starts on its defaults, says why
/// in the status and the log, and serves and writes its own tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_skills_folder_at_the_filesystem_root_is_refused_at_boot() {
    let mut stored = iii_directory::config::Settings::default().to_json();
    stored["skills_folder"] = json!("/");
    let mut h = Harness::start_with(Installed::Mailer, None, &[], Some(stored)).await;
    assert_eq!(
        own(h.skill_ids().await),
        ["hello", "mailer/guide", "mailer"],
        "the defaults' tree is served; stderr:\n{}",
        h.worker.stderr()
    );
    let refused = refusals(&h).await;
    assert!(
        refused
            .iter()
            .any(|r| r.contains("skills_folder") && r.contains("filesystem root")),
        "{refused:?}"
    );
    assert!(
        h.worker
            .stderr()
            .contains("stored configuration refused at boot")
    );
    let id = format!("mailer/issue33-{}", std::process::id());
    h.call(
        "directory::skills::create",
        json!({"id": id, "content": "# Mine\n\nBody.\n"}),
    )
    .await;
    assert!(h.path(&format!("skills/{id}.md")).is_file());
    assert!(!Path::new(&format!("/{id}.md")).exists(), "nothing under /");
    assert!(h.worker.try_wait().is_none(), "the worker is still running");
    h.stop().await;
}

/// The user-global agents folder is written to (`agents::update` and `::delete` act on its
/// profiles in place), so a stored one in a system folder is refused at boot like any other
/// writable root: the worker serves its defaults and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_global_agents_folder_in_a_system_folder_is_refused_at_boot() {
    let mut stored = iii_directory::config::Settings::default().to_json();
    stored["global_agents_folder"] = json!("/etc");
    let mut h = Harness::start_with(Installed::Mailer, None, &[], Some(stored)).await;
    let refused = refusals(&h).await;
    assert!(
        refused
            .iter()
            .any(|r| r.contains("global_agents_folder") && r.contains("system folder")),
        "{refused:?}"
    );
    assert_eq!(
        own(h.skill_ids().await),
        ["hello", "mailer/guide", "mailer"],
        "the defaults' tree is served; stderr:\n{}",
        h.worker.stderr()
    );
    assert!(h.worker.try_wait().is_none(), "the worker is still running");
    h.stop().await;
}

/// A stored value that does not parse was said twice: refused at boot, then rejected again
/// (the boot's refusal replaced by "keeping the current configuration") when the first
/// connection read the same value. It is said once, as refused at boot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_value_that_does_not_parse_is_said_once() {
    let mut stored = iii_directory::config::Settings::default().to_json();
    stored["skills_folder"] = json!(5);
    let h = Harness::start_with(Installed::Mailer, None, &[], Some(stored)).await;
    assert_eq!(
        own(h.skill_ids().await),
        ["hello", "mailer/guide", "mailer"],
        "the defaults' tree is served"
    );
    let refused = refusals(&h).await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("refused at boot"), "{refused:?}");
    // (The connection's setup still says its step failed: that is the step's outcome.)
    let stderr = h.worker.stderr();
    assert!(
        !stderr.contains("keeping the current configuration"),
        "the same value was said again:\n{stderr}"
    );
    h.stop().await;
}

/// A stored `index_path` at a user's file made the next start replace it (and add
/// `<file>.texts`). Now the worker refuses it, leaves the file byte for byte, starts on its
/// defaults, and does the same at every later start (no restart loop, no damage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_index_path_at_a_users_file_is_refused_across_restarts() {
    let engine = FakeEngine::start().await;
    fake_installed(&engine, Installed::Mailer);
    let stored = engine.canned_configuration_worker();
    let tree = fixture_tree();
    let notes = "my notes, not an index\n".repeat(300);
    write_file(tree.path(), "notes.txt", &notes);
    let mut value = iii_directory::config::Settings::default().to_json();
    value["index_path"] = json!(tree.path().join("notes.txt"));
    *stored.lock().expect("stored") = Some(value);
    let (mut engine, mut tree) = (engine, tree);
    for start in ["first start", "second start"] {
        let worker = spawn_worker(engine.url(), tree.path(), None, &[]);
        let h = Harness {
            engine,
            tree,
            worker,
            stored: stored.clone(),
        };
        h.wait_up().await;
        assert_eq!(
            own(h.skill_ids().await),
            ["hello", "mailer/guide", "mailer"],
            "{start}: served from the default index"
        );
        let refused = refusals(&h).await;
        assert!(
            refused
                .iter()
                .any(|r| r.contains("index_path") && r.contains("notes.txt")),
            "{start}: {refused:?}"
        );
        assert_eq!(
            fs::read_to_string(h.path("notes.txt")).expect("read"),
            notes,
            "{start}"
        );
        assert!(!h.path("notes.txt.texts").exists(), "{start}");
        assert!(h.path("data/iii-directory/index.redb").is_file(), "{start}");
        let Harness {
            engine: e,
            tree: t,
            worker,
            ..
        } = h;
        worker.stop().await;
        (engine, tree) = (e, t);
    }
}

/// An `index_path` inside a root (a skill's file) is refused the same way, with the skill kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_index_path_inside_a_root_is_refused_at_boot() {
    let mut stored = iii_directory::config::Settings::default().to_json();
    stored["index_path"] = json!("skills/mailer/guide.md");
    let h = Harness::start_with(Installed::Mailer, None, &[], Some(stored)).await;
    let refused = refusals(&h).await;
    assert!(
        refused
            .iter()
            .any(|r| r.contains("index_path") && r.contains("skills_folder")),
        "{refused:?}"
    );
    assert_eq!(
        fs::read_to_string(h.path("skills/mailer/guide.md")).expect("read"),
        MAILER_GUIDE
    );
    assert!(own(h.skill_ids().await).contains(&"mailer/guide".to_string()));
    h.stop().await;
}

/// Floors apply to stored values (which may predate the schema): `safety_net_interval_ms: 1`
/// becomes 1000, said in the status; a live value of `skills_folder: "/"` is rejected at once
/// (not only at the next start); and the registered schema carries the bounds the
/// configuration worker refuses hostile values with at `set`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_numbers_get_their_floors_and_unsafe_live_values_are_rejected() {
    let mut stored = iii_directory::config::Settings::default().to_json();
    stored["safety_net_interval_ms"] = json!(1);
    let h = Harness::start_with(Installed::Mailer, None, &[], Some(stored.clone())).await;
    let refused = refusals(&h).await;
    assert!(
        refused
            .iter()
            .any(|r| r.contains("safety_net_interval_ms") && r.contains("using 1000")),
        "{refused:?}"
    );
    let register = h.ok(
        "configuration::register",
        h.engine
            .wait_call(|c| c.function_id == "configuration::register", WAIT)
            .await,
    );
    let schema = &register.data["schema"]["properties"];
    assert_eq!(
        schema["safety_net_interval_ms"]["anyOf"][1]["minimum"], 1000,
        "{schema}"
    );
    assert_eq!(schema["registry_url"]["format"], "uri");

    let mut rooted = stored.clone();
    rooted["skills_folder"] = json!("/");
    store_and_announce(&h, &rooted).await;
    let refused = refusals(&h).await;
    assert!(
        refused
            .iter()
            .any(|r| r.contains("rejected") && r.contains("filesystem root")),
        "{refused:?}"
    );
    // A good value applied since supersedes the rejection ("the next start refuses it too" is
    // no longer true); what its own apply says stays.
    store_and_announce(&h, &stored).await;
    let refused = refusals(&h).await;
    assert!(
        !refused.iter().any(|r| r.contains("filesystem root")),
        "{refused:?}"
    );
    assert!(
        refused.iter().any(|r| r.contains("safety_net_interval_ms")),
        "{refused:?}"
    );
    let mut file_registry = stored.clone();
    file_registry["registry_url"] = json!("file:///etc/passwd");
    store_and_announce(&h, &file_registry).await;
    let refused = refusals(&h).await;
    assert!(
        refused.iter().any(|r| r.contains("registry_url")),
        "{refused:?}"
    );
    // A value that does not parse, announced again (as at each connection): said once.
    let mut unparsable = stored.clone();
    unparsable["skills_folder"] = json!(5);
    store_and_announce(&h, &unparsable).await;
    store_and_announce(&h, &unparsable).await;
    let refused = refusals(&h).await;
    let rejections = refused
        .iter()
        .filter(|r| r.starts_with("configuration rejected"))
        .count();
    assert_eq!(rejections, 1, "{refused:?}");
    let logged = h
        .worker
        .stderr()
        .matches("\"skills_folder\" must be a non-empty string")
        .count();
    assert_eq!(logged, 1, "{}", h.worker.stderr());
    assert_eq!(
        own(h.skill_ids().await),
        ["hello", "mailer/guide", "mailer"]
    );
    h.stop().await;
}

/// A stored path written from the home folder, served by a worker started without one (a
/// service without HOME): resolved as the contract says, under a folder called `~`, and said in
/// the status and the log (it was silent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_home_path_without_a_home_folder_is_said() {
    let mut stored = iii_directory::config::Settings::default().to_json();
    stored["agents_folder"] = json!("~/agents");
    let env = [("HOME", ""), ("USERPROFILE", "")];
    let h = Harness::start_with_env(Installed::Mailer, None, &[], Some(stored), &env).await;
    let refused = refusals(&h).await;
    assert!(
        refused.iter().any(|r| r.starts_with(
            "stored configuration: agents_folder `~/agents` names a folder called `~`"
        )),
        "{refused:?}"
    );
    assert!(
        h.worker.stderr().contains("set HOME"),
        "{}",
        h.worker.stderr()
    );
    h.stop().await;
}
