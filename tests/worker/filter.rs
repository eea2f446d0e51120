//! Filter_unregistered through worker::list.

use super::*;

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

/// An engine without the worker daemon has no `worker::list`. The worker does not ask it
/// again every few seconds (each time an error in the engine's log): the answer holds for the
/// cache's TTL, and it is asked again as soon as the engine announces new functions, which a
/// daemon starting would bring.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_worker_list_is_asked_again_when_functions_change() {
    // No boot reconcile of worker bundles, whose own retries (the contract's, for a daemon
    // that starts after the worker) would count here.
    let h = Harness::start(Installed::Error, Some("auto_download: false\n")).await;
    let asked = || {
        h.engine
            .calls()
            .iter()
            .filter(|c| c.function_id == "worker::list")
            .count()
    };
    h.skill_ids().await;
    let first = asked();
    assert!(first >= 1, "asked once at least");
    // Longer than the 5 s a failure that may pass is kept for.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(2_200)).await;
        h.skill_ids().await;
    }
    assert_eq!(asked(), first, "not asked again within the TTL");
    // The push's handler (this fake has no function catalog to refresh it from, so its own
    // answer is an error; the forgetting comes first).
    let _ = h
        .engine
        .invoke("directory::on-functions-change", json!({}))
        .await;
    h.skill_ids().await;
    assert_eq!(asked(), first + 1, "asked again once functions changed");
    h.stop().await;
}

/// A hundred calls that find the installed set out of date while `worker::list` is slow ask it
/// once between them: the others wait for that answer. Each used to send its own, so a daemon
/// that was already slow got a hundred more requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_find_the_installed_set_stale_ask_worker_list_once() {
    let h = Harness::start(
        Installed::Mailer,
        Some("auto_download: false\nregistry_cache_ttl_ms: 1000\n"),
    )
    .await;
    h.skill_ids().await;
    h.engine.never_answer("worker::list");
    // Past the TTL: the next calls must ask again.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let asked = || {
        h.engine
            .calls()
            .iter()
            .filter(|c| c.function_id == "worker::list")
            .count()
    };
    let before = asked();
    let gets = (0..100).map(|_| h.call("directory::skills::get", json!({"id": "mailer/guide"})));
    for guide in futures_util::future::join_all(gets).await {
        assert_eq!(guide["id"], "mailer/guide");
    }
    assert_eq!(asked() - before, 1, "worker::list asked once for 100 calls");
    h.stop().await;
}
