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
