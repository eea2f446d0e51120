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

/// An answer longer than the engine carries in one frame (16 MiB) is refused with D120 before
/// the worker builds it. Sent, it would end the connection (the fake drops it, as the engine
/// does), and the SDK would send it again on every reconnection: the worker would never come
/// back. The connection stays up, and the narrower lists the error suggests still answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_longer_than_the_engine_carries_is_refused_and_the_worker_stays_connected() {
    // 70 skills with descriptions of 250,000 bytes: a whole list of about 17.5 MB.
    let description = "d".repeat(250_000);
    let files: Vec<(String, String)> = (0..70)
        .map(|i| {
            let text = format!("---\ndescription: {description}\n---\n# Large {i}\n");
            (format!("skills/large-{i:02}.md"), text)
        })
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let h = Harness::start_with(Installed::Mailer, None, &files, None).await;
    let connections = h.engine.connections().len();

    let err = h.call_err("directory::skills::list", json!({})).await;
    assert_eq!(err.code, "invocation_failed", "{err}");
    const REFUSED: &str = "handler error: D120 too_large: the answer is ";
    assert!(err.message.starts_with(REFUSED), "{err}");
    assert!(
        err.message.contains(
            "more than the 16760832 the iii engine carries in one message. Next: call directory::skills::list to ask for less"
        ),
        "{err}"
    );
    let len: usize = err.message[REFUSED.len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the answer's length");
    assert!(len > fake_engine::MAX_FRAME_BYTES, "{len}");

    let without = h
        .call(
            "directory::skills::list",
            json!({ "include_description": false }),
        )
        .await;
    let rows = without["skills"].as_array().expect("rows");
    assert!(rows.len() >= 70, "{}", rows.len());
    let some = h
        .call("directory::skills::list", json!({ "prefix": "large-0" }))
        .await;
    assert_eq!(some["skills"].as_array().expect("rows").len(), 10);
    assert_eq!(
        some["skills"][0]["description"].as_str().map(str::len),
        Some(250_000)
    );

    let now = h.engine.connections();
    assert_eq!(now.len(), connections, "the worker reconnected");
    assert!(now.iter().all(|c| c.open), "a connection was dropped");
    h.stop().await;
}
