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
