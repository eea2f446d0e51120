//! `check-updates` (issue 29): a tag whose bundle changed is `update-available`, a pinned
//! version is `pinned`, answers are cached, and a registry that hangs costs its bundle an
//! `unknown` within the bound while the others answer. (A repository's branch: `from_repo.rs`.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::loopback::registry::Reply;

use iii_directory::download::DownloadFunction::FromRegistry;
use iii_directory::download::updates;

use crate::Setup;

async fn check(s: &Setup, request: Value) -> Value {
    updates::check_updates(
        &s.directory.settings(),
        &s.directory.config().paths.bundles_lock,
        &s.registry,
        &request,
    )
    .await
    .expect("check-updates")
}

fn state_of<'a>(answer: &'a Value, namespace: &str) -> &'a Value {
    answer["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .find(|b| b["namespace"] == namespace)
        .expect("checked")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_that_moved_is_an_update_and_a_pinned_version_is_pinned() {
    let s = Setup::with(|c| c.settings.registry_cache_ttl_ms = 0);
    s.server.bundle("mailer", &[("SKILL.md", "# v1\n")]);
    s.server.bundle("pinned", &[("SKILL.md", "# pinned\n")]);
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("mailer");
    s.download(
        FromRegistry,
        json!({"worker": "pinned", "version": "1.0.0"}),
    )
    .await
    .expect("pinned");
    let first = check(&s, json!({})).await;
    assert_eq!(state_of(&first, "mailer")["state"], "current");
    assert_eq!(state_of(&first, "pinned")["state"], "pinned");
    s.server.bundle("mailer", &[("SKILL.md", "# v2\n")]);
    let second = check(&s, json!({"namespace": "mailer"})).await;
    let mailer = state_of(&second, "mailer");
    assert_eq!(mailer["state"], "update-available");
    assert_ne!(mailer["upstream"]["digest"], mailer["locked"]["digest"]);
    assert_eq!(second["bundles"].as_array().map(Vec::len), Some(1));
    // A bundle the lock does not hold is refused, as `get` refuses it.
    let error = updates::check_updates(
        &s.directory.settings(),
        &s.directory.config().paths.bundles_lock,
        &s.registry,
        &json!({"namespace": "nope"}),
    )
    .await
    .expect_err("not locked");
    assert!(
        error
            .to_string()
            .starts_with("D334 not_found: bundle \"nope\" is not in the bundles lock;"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_cached_for_the_registry_ttl() {
    let s = Setup::new();
    s.server.bundle("cached", &[("SKILL.md", "# v1\n")]);
    s.download(FromRegistry, json!({"worker": "cached"}))
        .await
        .expect("download");
    s.server.clear();
    for _ in 0..3 {
        let answer = check(&s, json!({})).await;
        assert_eq!(state_of(&answer, "cached")["state"], "current");
    }
    assert_eq!(
        s.server.hits("/w/cached/skills").len(),
        1,
        "one request, then the cache"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_registry_marks_its_bundle_unknown_within_the_bound() {
    let s = Setup::with(|c| {
        c.settings.download_timeout_ms = 1_000;
        c.settings.registry_cache_ttl_ms = 0;
    });
    s.server.bundle("quick", &[("SKILL.md", "# quick\n")]);
    s.server.bundle("slow", &[("SKILL.md", "# slow\n")]);
    for worker in ["quick", "slow"] {
        s.download(FromRegistry, json!({"worker": worker}))
            .await
            .expect(worker);
    }
    s.server.reply(
        "/w/slow/skills",
        Reply::Slow(
            Duration::from_secs(20),
            Box::new(Reply::Json(200, json!({"skills": []}))),
        ),
    );
    let started = Instant::now();
    let answer = check(&s, json!({})).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2_500), "{took:?}");
    assert_eq!(state_of(&answer, "quick")["state"], "current");
    let slow = state_of(&answer, "slow");
    assert_eq!(slow["state"], "unknown");
    assert!(
        slow["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{slow}"
    );
    println!("check-updates with a hanging registry answered in {took:?}");
}

/// Other bytes under the locked version (a published version changed) are an update, and the
/// answer says why, as the version alone looks current; a new version carries no such reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_bytes_under_the_locked_version_are_named() {
    let s = Setup::with(|c| c.settings.registry_cache_ttl_ms = 0);
    let publish = |version: &str, text: &str| {
        s.server.publish(
            "republished",
            version,
            &[("SKILL.md".to_string(), text.to_string())],
        )
    };
    publish("1.0.0", "# v1\n");
    s.download(FromRegistry, json!({"worker": "republished"}))
        .await
        .expect("download");
    publish("1.0.0", "# v1, changed\n");
    let answer = check(&s, json!({})).await;
    let row = state_of(&answer, "republished");
    assert_eq!(row["state"], "update-available", "{row}");
    assert_eq!(row["upstream"]["version"], "1.0.0", "{row}");
    assert!(
        row["reason"]
            .as_str()
            .is_some_and(|r| r.contains("a published version was changed")),
        "{row}"
    );
    publish("2.0.0", "# v2\n");
    let answer = check(&s, json!({})).await;
    let row = state_of(&answer, "republished");
    assert_eq!(row["state"], "update-available", "{row}");
    assert_eq!(row["reason"], Value::Null, "{row}");
}
