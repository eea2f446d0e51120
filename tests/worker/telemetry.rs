//! Telemetry: the worker's trace spans reach the engine without the calls' payloads.

use super::*;

/// With OpenTelemetry on (the SDK's default), the SDK copies each call's request and answer into
/// its trace spans: for a whole list, megabytes per call. The worker leaves them out unless the
/// operator set `III_DISABLE_TRACE_PAYLOADS` (`0` keeps them, which shows the search below can
/// find an answer in the spans).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_spans_leave_the_answers_out_unless_the_operator_keeps_them() {
    const MARKER: &str = "marker-in-the-answer-7f3a";
    const SPAN: &[u8] = b"execute directory::skills::list";
    for keep in [None, Some("0")] {
        let engine = FakeEngine::start().await;
        fake_installed(&engine, Installed::Mailer);
        let stored = engine.canned_configuration_worker();
        let tree = fixture_tree();
        write_file(
            tree.path(),
            "skills/marked.md",
            &format!("# {MARKER}\n\nText.\n"),
        );
        let worker = WorkerProcess::spawn(
            engine.url(),
            tree.path(),
            None,
            &[
                ("HTTPS_PROXY", Some(NO_REGISTRY)),
                ("https_proxy", Some(NO_REGISTRY)),
                ("OTEL_ENABLED", Some("true")),
                ("III_DISABLE_TRACE_PAYLOADS", keep),
            ],
        );
        let h = Harness {
            engine,
            tree,
            worker,
            stored,
        };
        h.wait_up().await;
        let list = h.call("directory::skills::list", json!({})).await;
        assert!(list.to_string().contains(MARKER), "{list}");

        eventually("the list call's span at the engine", || {
            h.engine.telemetry_holding(SPAN).1 > 0
        })
        .await;
        if keep.is_some() {
            eventually("the answer in a span", || {
                h.engine.telemetry_holding(MARKER.as_bytes()).1 > 0
            })
            .await;
        } else {
            // Spans are flushed every 100 ms: a later frame would hold it if any did.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (frames, holding) = h.engine.telemetry_holding(MARKER.as_bytes());
            assert!(frames > 0);
            assert_eq!(
                holding, 0,
                "the answer went into {holding} of {frames} frames"
            );
        }
        h.stop().await;
    }
}
