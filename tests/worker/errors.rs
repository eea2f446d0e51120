//! Coded errors.

use super::*;

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
    // No backtrace: no frames, no build paths (the SDK would capture and symbolize one).
    assert_eq!(err.stacktrace.as_deref().unwrap_or(""), "", "{err:?}");

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
    assert_eq!(err.stacktrace.as_deref().unwrap_or(""), "", "{err:?}");

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
