//! The registry client and `directory::registry::workers::{list,info}` against the loopback
//! registry: request shapes, parse tolerance, the answers' shapes, the errors, the cache.

use std::time::Duration;

use iii_directory::registry::functions;
use serde_json::{Value, json};

use crate::Setup;
use test_support::loopback::registry::Reply;

fn resend() -> Value {
    json!({
        "name": "resend", "description": "Send email", "type": "binary", "version": "1.2.3",
        "repo": "https://github.com/x/resend", "config": {"api_key": "string"},
        "supported_targets": ["linux-x64"], "total_downloads": 42,
        "dependencies": [{"name": "http", "version": "^1"}],
        "author": {"name": "R", "pfp": null, "verified": true},
        "extra": "ignored",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_forwards_search_and_cursor_and_answers_the_contract_shape() {
    let s = Setup::new();
    s.server.json(
        "/w",
        json!({
            "workers": [resend(), {"name": "mailgun"}, {"no": "name"}],
            "pagination": {"next_cursor": "next-page", "has_more": true, "page_size": 2},
        }),
    );
    let page = functions::list(&s.registry, &json!({"search": " email ", "cursor": "c1"}))
        .await
        .expect("list");
    let hits = s.server.hits("/w");
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].param("search").as_deref(), Some("email"));
    assert_eq!(hits[0].param("cursor").as_deref(), Some("c1"));
    let agent = hits[0].header("user-agent").expect("user agent");
    assert_eq!(
        agent,
        format!("iii-directory/{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        page["pagination"],
        json!({"next_cursor": "next-page", "has_more": true, "page_size": 2})
    );
    let workers = page["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 2, "the row without a name is dropped");
    assert_eq!(
        workers[0],
        json!({
            "name": "resend", "description": "Send email", "type": "binary", "version": "1.2.3",
            "repo": "https://github.com/x/resend", "config": {"api_key": "string"},
            "supported_targets": ["linux-x64"], "total_downloads": 42,
            "dependencies": [{"name": "http", "version": "^1"}],
            "author": {"name": "R", "pfp": null, "verified": true},
        })
    );
    assert_eq!(workers[1]["version"], Value::Null);
    assert_eq!(workers[1]["author"], Value::Null);

    // Blank values are not sent.
    s.server.clear();
    functions::list(&s.registry, &json!({"search": "  "}))
        .await
        .expect("list");
    assert_eq!(s.server.hits("/w")[0].query, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_list_and_a_list_without_pagination() {
    let s = Setup::new();
    s.server.json("/w", json!({"workers": []}));
    let page = functions::list(&s.registry, &json!({}))
        .await
        .expect("list");
    assert_eq!(
        page,
        json!({"workers": [], "pagination": {"next_cursor": null, "has_more": false, "page_size": 0}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_errors_are_d320_without_the_url_or_body() {
    let s = Setup::new();
    for (reply, expected) in [
        (
            Reply::Raw(502, b"upstream secret body".to_vec()),
            "D320 registry_error: registry returned HTTP 502. Next: retry shortly.",
        ),
        (
            Reply::Raw(200, b"<html>not json".to_vec()),
            "D320 registry_error: could not decode the registry response.",
        ),
        (
            Reply::Json(404, json!({})),
            "D320 registry_error: registry returned HTTP 404. Next: retry shortly.",
        ),
    ] {
        s.server.reply("/w", reply);
        let err = functions::list(&s.registry, &json!({}))
            .await
            .expect_err("refused")
            .to_string();
        assert_eq!(err, expected);
        assert!(
            !err.contains("127.0.0.1") && !err.contains("secret"),
            "{err}"
        );
    }
    let wrong = functions::list(&s.registry, &json!({"search": 3}))
        .await
        .expect_err("type");
    assert!(wrong.to_string().starts_with("invalid request"), "{wrong}");
}

fn serve_info(s: &Setup, name: &str) {
    s.server.json(
        &format!("/w/{name}"),
        json!({
            "worker": {"name": name, "version": "2.0.0", "description": "Cached worker"},
            "readme": "# Readme\n\nWords.",
            "functions": [{"name": format!("{name}::send"), "description": "Send", "request_schema": {"type": "object"}, "response_schema": null, "metadata": {}}],
            "triggers": [{"name": format!("{name}::on-sent"), "invocation_schema": {}, "return_schema": {}}],
        }),
    );
    s.server.json(
        &format!("/w/{name}/skills"),
        json!({"skills": [{"path": "index.md", "content": "# body not returned"}], "prompts": []}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_merges_both_legs_and_defaults_to_latest() {
    let s = Setup::new();
    serve_info(&s, "mailer");
    // The whole record (both parts asked for), as 1.2.8 answered it by default.
    let info = functions::info(
        &s.registry,
        &json!({"name": " mailer ", "readme": true, "schemas": true}),
    )
    .await
    .expect("info");
    assert_eq!(info["worker"]["name"], "mailer");
    assert_eq!(info["worker"]["version"], "2.0.0");
    assert_eq!(info["worker"]["description"], "Cached worker");
    assert_eq!(info["readme"], "# Readme\n\nWords.");
    assert_eq!(
        info["api_reference"]["functions"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        info["api_reference"]["functions"][0],
        json!({"name": "mailer::send", "description": "Send", "request_schema": {"type": "object"}, "response_schema": null, "metadata": {}})
    );
    assert_eq!(
        info["api_reference"]["triggers"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        info["skills_tree"],
        json!({"skills": [{"path": "index.md"}], "prompts": []})
    );
    for path in ["/w/mailer", "/w/mailer/skills"] {
        let hits = s.server.hits(path);
        assert_eq!(hits.len(), 1, "{path}");
        assert_eq!(
            hits[0].param("version").as_deref(),
            Some("latest"),
            "{path}"
        );
    }
    s.server.clear();
    functions::info(&s.registry, &json!({"name": "mailer", "version": "2.0.0"}))
        .await
        .expect("info");
    assert_eq!(
        s.server.hits("/w/mailer")[0].param("version").as_deref(),
        Some("2.0.0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_errors() {
    let s = Setup::new();
    let err = |r: Result<Value, iii_directory::Error>| r.expect_err("refused").to_string();
    assert_eq!(
        err(functions::info(&s.registry, &json!({"name": "  "})).await),
        "name must be non-empty"
    );
    assert!(
        err(functions::info(
            &s.registry,
            &json!({"name": "x", "version": "1", "tag": "t"})
        )
        .await)
        .contains("either version OR tag")
    );
    let bad = err(functions::info(&s.registry, &json!({"name": "../../admin"})).await);
    assert!(bad.starts_with("D311 invalid_input: worker name"), "{bad}");
    assert!(
        s.server.requests().is_empty(),
        "nothing is requested for an invalid name"
    );

    // 404 on both legs, then on one leg only.
    assert_eq!(
        err(functions::info(&s.registry, &json!({"name": "missing"})).await),
        "D310 not_found: registry worker \"missing@latest\" does not exist. Next: call directory::registry::workers::list to browse worker names."
    );
    s.server.json("/w/half", json!({"name": "half"}));
    assert!(
        err(functions::info(&s.registry, &json!({"name": "half", "tag": "beta"})).await)
            .starts_with("D310 not_found: registry worker \"half@beta\"")
    );
    s.server.json("/w/down", json!({"name": "down"}));
    s.server
        .reply("/w/down/skills", Reply::Raw(500, b"boom".to_vec()));
    let down = err(functions::info(&s.registry, &json!({"name": "down"})).await);
    assert_eq!(
        down,
        "D320 registry_error: registry returned HTTP 500. Next: retry shortly, or call directory::registry::workers::list to browse worker names."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_info_calls_are_one_request_per_leg_until_the_cache_is_cleared() {
    let s = Setup::new();
    serve_info(&s, "cached");
    let first = functions::info(&s.registry, &json!({"name": "cached"}))
        .await
        .expect("first");
    let second = functions::info(&s.registry, &json!({"name": "cached"}))
        .await
        .expect("second");
    assert_eq!(first, second);
    assert_eq!(s.server.hits("/w/cached").len(), 1);
    assert_eq!(s.server.hits("/w/cached/skills").len(), 1);
    // Another release is another entry.
    functions::info(&s.registry, &json!({"name": "cached", "version": "2.0.0"}))
        .await
        .expect("v");
    assert_eq!(s.server.hits("/w/cached").len(), 2);
    // Lists too.
    s.server.json("/w", json!({"workers": []}));
    functions::list(&s.registry, &json!({"search": "a"}))
        .await
        .expect("list");
    functions::list(&s.registry, &json!({"search": "a"}))
        .await
        .expect("list");
    assert_eq!(s.server.hits("/w").len(), 1);
    // Cleared (as a configuration change does): asked again.
    s.registry.clear_cache();
    functions::info(&s.registry, &json!({"name": "cached"}))
        .await
        .expect("third");
    assert_eq!(s.server.hits("/w/cached").len(), 3);
    // Failures are never cached.
    s.server.reply("/w/flaky", Reply::Raw(500, Vec::new()));
    s.server.json("/w/flaky/skills", json!({"skills": []}));
    assert!(
        functions::info(&s.registry, &json!({"name": "flaky"}))
            .await
            .is_err()
    );
    s.server.json("/w/flaky", json!({"name": "flaky"}));
    functions::info(&s.registry, &json!({"name": "flaky"}))
        .await
        .expect("recovered");
}

/// Identical calls made at once, before the cache holds their answer, share one request per
/// leg, failures included: each used to send its own, and the skills leg of each took one of
/// the few turns a read carrying files gets (`admission`), so twenty identical `info` calls to
/// a slow registry queued behind each other, and past the call deadline were refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_at_once_share_one_request() {
    let s = Setup::new();
    serve_info(&s, "slow");
    let slow = |path: &str| {
        s.server.reply(
            path,
            Reply::Slow(
                Duration::from_millis(300),
                Box::new(Reply::Json(200, json!({"workers": []}))),
            ),
        )
    };
    slow("/w");
    let (info, list) = (json!({"name": "slow"}), json!({"search": "x"}));
    let infos = (0..20).map(|_| functions::info(&s.registry, &info));
    let lists = (0..20).map(|_| functions::list(&s.registry, &list));
    let (infos, lists) = tokio::join!(
        futures_util::future::join_all(infos),
        futures_util::future::join_all(lists)
    );
    assert!(infos.iter().all(Result::is_ok) && lists.iter().all(Result::is_ok));
    assert_eq!(s.server.hits("/w/slow").len(), 1);
    assert_eq!(s.server.hits("/w/slow/skills").len(), 1);
    assert_eq!(s.server.hits("/w").len(), 1);

    // A failure is shared too, and not kept: the next call asks again.
    s.server.reply(
        "/w/down",
        Reply::Slow(
            Duration::from_millis(300),
            Box::new(Reply::Raw(503, Vec::new())),
        ),
    );
    s.server.json("/w/down/skills", json!({"skills": []}));
    let down = json!({"name": "down"});
    let downs = (0..20).map(|_| functions::info(&s.registry, &down));
    for down in futures_util::future::join_all(downs).await {
        let err = down.expect_err("503").to_string();
        assert!(err.contains("registry returned HTTP 503"), "{err}");
    }
    assert_eq!(s.server.hits("/w/down").len(), 1);
    let _ = functions::info(&s.registry, &json!({"name": "down"})).await;
    assert_eq!(s.server.hits("/w/down").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ttl_and_the_url_are_read_live() {
    let s = Setup::with(|c| c.settings.registry_cache_ttl_ms = 0);
    serve_info(&s, "live");
    for _ in 0..2 {
        functions::info(&s.registry, &json!({"name": "live"}))
            .await
            .expect("info");
    }
    assert_eq!(s.server.hits("/w/live").len(), 2, "ttl 0: no cache");

    // A new registry_url applies to the next request.
    let other = test_support::loopback::registry::FakeRegistry::start();
    other.json("/w", json!({"workers": [{"name": "elsewhere"}]}));
    let mut settings = s.directory.settings();
    settings.registry_url = other.url();
    s.directory.apply_settings(settings).expect("tunable");
    let page = functions::list(&s.registry, &json!({}))
        .await
        .expect("list");
    assert_eq!(page["workers"][0]["name"], "elsewhere");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_registry_times_out_as_unreachable() {
    let s = Setup::with(|c| c.settings.download_timeout_ms = 300);
    s.server.reply(
        "/w",
        Reply::Slow(
            Duration::from_secs(3),
            Box::new(Reply::Json(200, json!({"workers": []}))),
        ),
    );
    let started = std::time::Instant::now();
    let err = functions::list(&s.registry, &json!({}))
        .await
        .expect_err("timeout");
    assert_eq!(
        err.to_string(),
        "D320 registry_error: could not reach the registry. Next: retry shortly."
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_unreachable() {
    let s = Setup::with(|c| c.settings.registry_url = "http://127.0.0.1:9".into());
    let err = functions::list(&s.registry, &json!({}))
        .await
        .expect_err("refused");
    assert!(
        err.to_string().contains("could not reach the registry"),
        "{err}"
    );
}

/// A worker's record or a page of workers over 4 MiB is refused unread past the cap: decoded,
/// such an answer took tens of times its size in memory and held the worker's other calls.
/// The skills leg, which carries file contents, still reads as a bundle does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_record_over_four_mib_is_refused_unread() {
    let s = Setup::new();
    let functions: Vec<Value> = (0..40_000)
        .map(|i| json!({"name": format!("huge::f{i}"), "description": "x".repeat(100)}))
        .collect();
    s.server
        .json("/w/huge", json!({"name": "huge", "functions": functions}));
    s.server
        .bundle("huge", &[("skills/SKILL.md", "# Huge\n\nBody.\n")]);
    let refused = functions::info(&s.registry, &json!({"name": "huge"}))
        .await
        .expect_err("too large")
        .to_string();
    assert!(
        refused.starts_with("D320 registry_error: registry response is larger than 4194304 bytes"),
        "{refused}"
    );
    let workers: Vec<Value> = (0..40_000)
        .map(|i| json!({"name": format!("w{i}"), "description": "x".repeat(100)}))
        .collect();
    s.server.json("/w", json!({"workers": workers}));
    let refused = functions::list(&s.registry, &json!({}))
        .await
        .expect_err("too large")
        .to_string();
    assert!(refused.contains("larger than 4194304 bytes"), "{refused}");
}
