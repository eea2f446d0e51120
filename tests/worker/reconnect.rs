//! Reconnect.

use super::*;

/// Each connection the fake saw: open or not, and the types of the frames it received.
fn connections_summary(engine: &FakeEngine) -> String {
    engine
        .connections()
        .iter()
        .map(|c| {
            let types: Vec<String> = c
                .frames
                .iter()
                .map(|f| {
                    let kind = f["type"].as_str().unwrap_or("?");
                    match f.get("id").or_else(|| f.get("function_id")) {
                        Some(Value::String(id)) => format!("{kind}({id})"),
                        _ => kind.to_string(),
                    }
                })
                .collect();
            format!(
                "connection {} (open: {}): {}",
                c.id,
                c.open,
                types.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_disconnect_it_reattaches_and_registers_everything_again() {
    let h = Harness::start(Installed::Mailer, None).await;
    let first = h.engine.connections()[0].clone();
    assert_eq!(h.engine.close_connection().await, Ok(1));
    let started = Instant::now();

    // `engine::workers::register` ends the SDK's replay, so once the new connection is ready,
    // everything it replays has arrived.
    h.ok("ready again", h.engine.wait_ready(WAIT).await);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "reconnected after {:?}",
        started.elapsed()
    );
    let connections = h.engine.connections();
    let summary = connections_summary(&h.engine);
    assert_eq!(connections.len(), 2, "{summary}");
    let (old, new) = (&connections[0], &connections[1]);
    let sent = |c: &fake_engine::ConnectionInfo, kind: &str, id: &str| {
        c.frames
            .iter()
            .filter(|f| f["type"] == kind && f["id"] == id)
            .count()
    };
    for id in manifest_function_ids() {
        assert_eq!(
            sent(new, "registerfunction", &id),
            1,
            "{id} once on the new connection; {summary}"
        );
        // Twice in all, unless the SDK raced on the first connection (registrations made while
        // it connects can go out both directly and in its replay).
        assert!(sent(old, "registerfunction", &id) >= 1, "{id}; {summary}");
        assert_eq!(
            h.engine.registration_count(&id),
            sent(old, "registerfunction", &id) + 1,
            "{id}; {summary}"
        );
    }
    for trigger_type in TRIGGER_TYPES {
        assert_eq!(
            sent(new, "registertriggertype", trigger_type),
            1,
            "{trigger_type} registered again; {summary}"
        );
    }
    assert_eq!(
        h.engine.trigger_types().len(),
        3,
        "the trigger types live again"
    );
    let rebound: Vec<&Value> = new
        .frames
        .iter()
        .filter(|f| f["type"] == "registertrigger" && f["trigger_type"] == "configuration")
        .collect();
    assert_eq!(
        rebound.len(),
        1,
        "the configuration binding is replayed; {summary}"
    );
    assert_eq!(rebound[0]["function_id"], ON_CONFIG_CHANGE);

    let reattach = h.engine.reattaches().pop().expect("a reattach");
    assert_eq!(reattach.previous_worker_id, first.worker_id);
    assert_eq!(
        reattach.reattach_token.as_deref(),
        Some(first.reattach_token.as_str())
    );
    assert!(reattach.matched);
    assert_eq!(new.id, reattach.connection);
    assert_eq!(new.frames[0]["type"], "reattach", "reattach comes first");

    let got = h
        .call("directory::skills::get", json!({"id": "hello"}))
        .await;
    assert_eq!(got["title"], "Hello");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_bound_before_a_reconnect_gets_each_event_once() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;
    h.engine.close_connection().await.expect("close");
    // The fake delivers the binding again when the type is registered again.
    eventually("sub-0 delivered and acked again", || {
        h.engine
            .registration_results()
            .iter()
            .filter(|r| r.id == "sub-0" && r.error.is_none())
            .count()
            == 2
    })
    .await;
    h.ok("ready again", h.engine.wait_ready(WAIT).await);
    h.call(
        "directory::skills::create",
        json!({"id": "once", "content": "# Once\n\nText.\n"}),
    )
    .await;
    h.wait_fires(1).await;
    tokio::time::sleep(SETTLE).await;
    let fires = h.fires();
    assert_eq!(fires.len(), 1, "{fires:?}");
    assert_eq!(
        fires[0].data,
        json!({"op": "create", "namespace": "once", "id": "once"})
    );
    h.stop().await;
}
