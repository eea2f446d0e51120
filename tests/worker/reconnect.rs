//! Reconnect: the SDK's replay after a dropped connection, and engine restarts. For a restart
//! the fake goes away and comes back on the same port ([`FakeEngine::go_away`],
//! [`FakeEngine::come_back`]) and forgets what a real engine keeps in memory only: the
//! configuration schemas of its modelled configuration worker, the bindings of other workers
//! (which bind again as they come back), its reattach tokens.

use super::*;
use fake_engine::ConnectionInfo;

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
    let sent = |c: &ConnectionInfo, kind: &str, id: &str| {
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

// ---------------------------------------------------------------------------------------------
// Engine restarts
// ---------------------------------------------------------------------------------------------

/// The seed of the restart tests: the filter on, so turning it off is a visible tunable change.
const RESTART_SEED: &str = "filter_unregistered: true\nregistry_cache_ttl_ms: 60000\n";
/// A subscriber whose worker does not come back after the restarts.
const GONE: &str = "gone::fn";

/// The worker over a fake running the configuration worker model, with `env` for the worker.
async fn start_modelled(seed: Option<&str>, env: &[(&str, &str)]) -> Harness {
    start_over(true, seed, env).await
}

/// The worker over a fake with or without a configuration worker.
async fn start_over(configuration: bool, seed: Option<&str>, env: &[(&str, &str)]) -> Harness {
    let engine = FakeEngine::start().await;
    fake_installed(&engine, Installed::Mailer);
    if configuration {
        engine.model_configuration_worker();
    }
    let harness = Harness::launch(engine, Arc::default(), &[], seed, env);
    if configuration {
        harness.wait_up().await;
    } else {
        harness.ok("ready", harness.engine.wait_ready(WAIT).await);
        for id in manifest_function_ids() {
            harness.ok(&id, harness.engine.wait_function(&id, WAIT).await);
        }
    }
    harness
}

/// When the last frame matching `wanted` arrived on `c`.
fn last_at(c: &ConnectionInfo, wanted: impl Fn(&Value) -> bool) -> Option<Instant> {
    c.frames
        .iter()
        .zip(&c.received_at)
        .filter(|(f, _)| wanted(f))
        .map(|(_, at)| *at)
        .last()
}

fn calls_to(f: &Value, function_id: &str) -> bool {
    f["type"] == "invokefunction" && f["function_id"] == function_id
}

/// The time from the fake accepting `c` to the worker being set up on it again: every
/// function and trigger type, `engine::workers::register`, the configuration binding, the
/// entry registered, and the stored configuration read after that. `None` until all are there.
fn setup_time(c: &ConnectionInfo) -> Option<Duration> {
    let accepted = c.accepted_at;
    let mut last = accepted;
    for id in manifest_function_ids() {
        last = last.max(last_at(c, |f| {
            f["type"] == "registerfunction" && f["id"] == id.as_str()
        })?);
    }
    for trigger_type in TRIGGER_TYPES {
        last = last.max(last_at(c, |f| {
            f["type"] == "registertriggertype" && f["id"] == trigger_type
        })?);
    }
    last = last.max(last_at(c, |f| calls_to(f, fake_engine::WORKERS_REGISTER))?);
    last = last.max(last_at(c, |f| {
        f["type"] == "registertrigger" && f["trigger_type"] == "configuration"
    })?);
    let registered = c
        .frames
        .iter()
        .zip(&c.received_at)
        .find(|(f, _)| calls_to(f, "configuration::register"))
        .map(|(_, at)| *at)?;
    let read = c
        .frames
        .iter()
        .zip(&c.received_at)
        .map(|(f, at)| (f, *at))
        .find(|(f, at)| calls_to(f, "configuration::get") && *at >= registered)
        .map(|(_, at)| at)?;
    Some(last.max(registered).max(read) - accepted)
}

/// Waits until the fake's connection `conn` carries the worker's whole setup; returns the
/// time it took from the accept (see [`setup_time`]).
async fn wait_set_up(h: &Harness, conn: u64) -> Duration {
    let deadline = Instant::now() + WAIT;
    loop {
        let connections = h.engine.connections();
        if let Some(took) = connections
            .iter()
            .find(|c| c.id == conn && c.open)
            .and_then(setup_time)
        {
            return took;
        }
        assert!(
            Instant::now() < deadline,
            "connection {conn} was not set up within {WAIT:?}:\n{}\nworker stderr:\n{}",
            connections_summary(&h.engine),
            h.worker.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `connection` object of `directory::index::status` once the worker's setup run for
/// connection `n` is done.
async fn setup_done(h: &Harness, n: u64) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = h.call("directory::index::status", json!({})).await;
        let connection = status["connection"].clone();
        if connection["setup"]["connection"] == n && connection["setup"]["state"] == "done" {
            return connection;
        }
        assert!(
            Instant::now() < deadline,
            "the worker's setup of connection {n} did not finish: {connection:#}\nstderr:\n{}",
            h.worker.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn step<'a>(connection: &'a Value, name: &str) -> &'a Value {
    connection["setup"]["steps"]
        .as_array()
        .expect("setup steps")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name}: {connection:#}"))
}

/// Answers that no restart may change (no write or configuration change is made between two
/// takes): successes and an error, each as its JSON or its `code: message`.
async fn probes(h: &Harness) -> Vec<String> {
    let calls = [
        ("directory::skills::get", json!({"id": "hello"})),
        ("directory::skills::get", json!({"id": "mailer/guide"})),
        ("directory::skills::get", json!({"id": "no-such-skill"})),
        ("directory::system-prompts::list", json!({})),
        ("directory::agents::list", json!({})),
    ];
    let mut answers = Vec::new();
    for (function_id, data) in calls {
        let answer = match h.engine.invoke(function_id, data.clone()).await {
            Ok(value) => value.to_string(),
            Err(e) => format!("{}: {}", e.code, e.message),
        };
        answers.push(format!("{function_id} {data} -> {answer}"));
    }
    answers
}

/// The stored configuration value.
fn stored_value(h: &Harness) -> Value {
    h.engine
        .configuration_entry(WORKER_NAME)
        .expect("a stored configuration entry")
        .value
}

/// The stored value with `filter_unregistered` set to `on`.
fn with_filter(h: &Harness, on: bool) -> Value {
    let mut value = stored_value(h);
    value["filter_unregistered"] = json!(on);
    value
}

/// Waits until skills of the namespace `ghost` (no such worker) are listed exactly when the
/// filter is off.
async fn wait_filter(h: &Harness, on: bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let listed = h.skill_ids().await.contains(&"ghost/guide".to_string());
        if listed != on {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "filter_unregistered never became {on}\nstderr:\n{}",
            h.worker.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How the connection is lost in one round.
#[derive(Clone, Copy, Debug)]
enum Disruption {
    /// The engine is away longer than the SDK's retry delay, and the stored configuration is
    /// edited meanwhile.
    AwayWithAnEdit,
    /// The engine goes away while a write is on its way to the worker.
    DuringAWrite,
    /// The engine goes away while the worker is reading a configuration change.
    DuringAConfigurationChange,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_each_engine_restart_everything_is_set_up_again() {
    let h = start_modelled(Some(RESTART_SEED), &[]).await;
    let mut filter = true;
    wait_filter(&h, filter).await;
    for (id, function_id) in [("alive", SUBSCRIBER), ("gone", GONE)] {
        h.engine
            .subscribe(id, SKILLS_ON_CHANGE, function_id, json!({}), None)
            .await
            .unwrap_or_else(|e| panic!("subscribe {id}: {e}"));
    }
    assert!(
        h.engine
            .configuration_set(WORKER_NAME, stored_value(&h))
            .is_ok(),
        "set works before any restart"
    );

    let rounds = [
        Disruption::AwayWithAnEdit,
        Disruption::DuringAWrite,
        Disruption::DuringAConfigurationChange,
    ];
    for (n, disruption) in rounds.into_iter().enumerate() {
        let round = n as u64 + 1;
        let connection = round + 1;
        let before = probes(&h).await;
        let mut write_answer = None;
        match disruption {
            Disruption::AwayWithAnEdit => {
                h.engine.go_away().await.expect("go away");
                // Past the SDK's 2 s retry delay: at least one connect is refused.
                tokio::time::sleep(Duration::from_millis(2_500)).await;
                filter = !filter;
                h.engine
                    .configuration_store(WORKER_NAME, with_filter(&h, filter));
            }
            Disruption::DuringAWrite => {
                let write = h.engine.invoke(
                    "directory::skills::create",
                    json!({"id": "during", "content": "# During\n\nA write.\n"}),
                );
                let away = async {
                    tokio::task::yield_now().await;
                    h.engine.go_away().await.expect("go away")
                };
                let (answer, _) = tokio::join!(write, away);
                write_answer = Some(answer);
            }
            Disruption::DuringAConfigurationChange => {
                h.engine.hold_configuration_reads(true);
                filter = !filter;
                h.engine
                    .configuration_set(WORKER_NAME, with_filter(&h, filter))
                    .expect("configuration::set");
                eventually("the worker reading the change", || {
                    h.engine.held_configuration_reads() > 0
                })
                .await;
                h.engine.go_away().await.expect("go away");
                h.engine.hold_configuration_reads(false);
            }
        }
        assert!(
            h.engine
                .configuration_set(WORKER_NAME, stored_value(&h))
                .is_err(),
            "the restarted engine has no schema until the worker registers it"
        );
        h.engine.come_back().await.expect("come back");

        // The subscriber that is still alive binds again as its own worker comes back.
        let (took, bound) = tokio::join!(
            wait_set_up(&h, connection),
            h.engine
                .subscribe("alive", SKILLS_ON_CHANGE, SUBSCRIBER, json!({}), None)
        );
        bound.unwrap_or_else(|e| panic!("round {round}: alive binds again: {e}"));
        eprintln!("round {round} ({disruption:?}): set up {took:?} after the engine accepted");
        let status = setup_done(&h, connection).await;

        // The stored configuration was read again and applies (an edit made while away, or the
        // change that was in flight).
        wait_filter(&h, filter).await;
        if let Some(answer) = write_answer {
            let landed = h.path("skills/during.md").is_file();
            let got = h
                .engine
                .invoke("directory::skills::get", json!({"id": "during"}))
                .await;
            assert_eq!(got.is_ok(), landed, "{got:?}");
            if answer.is_ok() {
                assert!(landed, "an answered write is on disk");
            }
            assert!(
                h.path("skills").read_dir().expect("skills").all(|e| {
                    !e.expect("entry")
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".tmp")
                }),
                "no temporary file left"
            );
        } else {
            assert_eq!(
                probes(&h).await,
                before,
                "round {round}: answers after the return"
            );
        }

        // The configuration can be set again, and a tunable change applies.
        filter = !filter;
        h.engine
            .configuration_set(WORKER_NAME, with_filter(&h, filter))
            .unwrap_or_else(|e| panic!("round {round}: configuration::set after the return: {e}"));
        wait_filter(&h, filter).await;

        // Events reach the subscriber that came back, once, and never the one that did not.
        let fires_before = h.fires().len();
        let gone_before = gone_fires(&h);
        let id = format!("after-{round}");
        h.call(
            "directory::skills::create",
            json!({"id": id, "content": "# After\n\nText.\n"}),
        )
        .await;
        h.wait_fires(fires_before + 1).await;
        tokio::time::sleep(SETTLE).await;
        let fires = h.fires();
        assert_eq!(fires.len(), fires_before + 1, "round {round}: {fires:?}");
        assert_eq!(
            fires.last().expect("a fire").data,
            json!({"op": "create", "namespace": id, "id": id})
        );
        assert_eq!(
            gone_fires(&h),
            gone_before,
            "round {round}: nothing to {GONE}"
        );

        // The status tells the story.
        assert_eq!(status["state"], "connected", "{status:#}");
        assert_eq!(status["connections"], connection);
        assert_eq!(status["reconnections"], round);
        assert_eq!(status["detection"], "sdk_events");
        assert_timestamp(&status["connected_since"], "connected_since");
        assert_timestamp(&status["last_error"]["at"], "last_error.at");
        if matches!(disruption, Disruption::AwayWithAnEdit) {
            let message = status["last_error"]["message"].as_str().unwrap_or_default();
            assert!(message.starts_with("failed to connect"), "{status:#}");
        }
        let counts = |name: &str| step(&status, name)["counts"].clone();
        assert_eq!(counts("configuration.register")["done"], connection);
        assert_eq!(counts("configuration.read")["done"], connection);
        assert_eq!(
            counts("configuration.bind"),
            json!({"done": 1, "replayed": round, "skipped": 0, "failed": 0}),
            "bound once, then replayed by the SDK"
        );
        assert_eq!(
            counts("console.assets"),
            json!({"done": 1, "replayed": round, "skipped": 0, "failed": 0})
        );
        assert_eq!(
            counts("caches"),
            json!({"done": round, "replayed": 0, "skipped": 1, "failed": 0})
        );
        assert_eq!(step(&status, "configuration.register")["outcome"], "done");
    }
    assert_eq!(h.engine.restarts(), 3);
    // One live binding per kind of binding the worker made, whatever the number of returns.
    let configuration_bindings = h
        .engine
        .worker_triggers()
        .into_values()
        .filter(|t| t.trigger_type == "configuration")
        .count();
    assert_eq!(configuration_bindings, 1);
    h.stop().await;
}

fn gone_fires(h: &Harness) -> usize {
    h.engine
        .fires()
        .iter()
        .filter(|f| f.function_id == GONE)
        .count()
}

/// A drop the SDK recovers from within its retry delay is seen too, whatever the log level
/// (the worker's layer filters for itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_drop_and_return_is_seen_at_any_log_level() {
    let h = start_modelled(None, &[("RUST_LOG", "warn")]).await;
    h.engine.close_connection().await.expect("close");
    wait_set_up(&h, 2).await;
    let status = setup_done(&h, 2).await;
    assert_eq!(status["reconnections"], 1, "{status:#}");
    assert_eq!(status["detection"], "sdk_events");
    // The SDK logs the drop ("websocket receive error: …", "send failed; …") or, when the
    // close was clean, says nothing and the worker notes it at the return.
    let message = status["last_error"]["message"].as_str().unwrap_or_default();
    assert!(
        message == "the connection closed (the engine went away or closed it)"
            || message.starts_with("websocket receive error")
            || message.starts_with("send failed"),
        "{status:#}"
    );
    assert_timestamp(&status["last_error"]["at"], "last_error.at");
    // Said at `warn`, so an operator running at that level sees it.
    h.worker
        .wait_stderr("the iii engine connection was lost and is back", WAIT)
        .await;
    let registers = h
        .engine
        .calls()
        .iter()
        .filter(|c| c.function_id == "configuration::register")
        .map(|c| c.connection)
        .collect::<Vec<_>>();
    assert_eq!(registers, [1, 2], "registered once per connection");
    assert!(
        h.engine
            .configuration_set(WORKER_NAME, stored_value(&h))
            .is_ok()
    );
    h.stop().await;
}

/// A topology stored while the engine was away is refused on the return like a live change:
/// "restart required", and the whole previous configuration kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_stored_while_away_is_refused_on_the_return() {
    let h = start_modelled(Some(RESTART_SEED), &[]).await;
    h.engine.go_away().await.expect("go away");
    let mut moved = stored_value(&h);
    moved["skills_folder"] = json!("elsewhere");
    moved["filter_unregistered"] = json!(false);
    h.engine.configuration_store(WORKER_NAME, moved);
    h.engine.come_back().await.expect("come back");
    wait_set_up(&h, 2).await;
    let status = setup_done(&h, 2).await;
    let read = step(&status, "configuration.read");
    assert_eq!(read["outcome"], "failed", "{status:#}");
    let detail = read["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("restart required") && detail.contains("skills_folder"),
        "{detail}"
    );
    h.worker.wait_stderr("restart required", WAIT).await;
    assert_eq!(
        own(h.skill_ids().await),
        ["hello", "mailer/guide", "mailer"],
        "the filter stays on and skills still come from the original folder"
    );
    h.stop().await;
}

/// The installed-workers answer is asked again after a return, although its TTL (a minute
/// here) has not run out: workers may have been added while the engine was away. Without a
/// configuration worker, so that no configuration change clears it instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_workers_are_asked_again_after_a_return() {
    let h = start_over(false, Some(RESTART_SEED), &[]).await;
    setup_done(&h, 1).await;
    assert!(!h.skill_ids().await.contains(&"ghost/guide".to_string()));
    h.engine.respond(
        "worker::list",
        json!({"workers": [{"name": "mailer"}, {"name": "ghost"}]}),
    );
    assert!(
        !h.skill_ids().await.contains(&"ghost/guide".to_string()),
        "still the cached answer"
    );
    h.engine.go_away().await.expect("go away");
    h.engine.come_back().await.expect("come back");
    eventually("the second connection ready", || {
        h.engine
            .connections()
            .iter()
            .any(|c| c.id == 2 && c.open && c.ready.is_some())
    })
    .await;
    let status = setup_done(&h, 2).await;
    assert_eq!(step(&status, "caches")["outcome"], "done", "{status:#}");
    assert_eq!(
        step(&status, "configuration.register")["outcome"],
        "skipped",
        "no configuration worker"
    );
    assert!(h.skill_ids().await.contains(&"ghost/guide".to_string()));
    h.stop().await;
}

/// The figure of issue 17: how long after the engine's return (the fake accepting the new
/// connection) the worker is fully set up again. `RECONNECT_ROUNDS` returns (default 3);
/// `RECONNECT_STEPS=1` prints the worker's setup steps of each return, `RECONNECT_TIMELINE=1`
/// every frame of each new connection with its arrival time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_time_after_an_engine_return() {
    let rounds: u64 = std::env::var("RECONNECT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let h = start_modelled(Some(RESTART_SEED), &[]).await;
    let mut times = Vec::new();
    for round in 1..=rounds {
        h.engine.go_away().await.expect("go away");
        h.engine.come_back().await.expect("come back");
        let took = wait_set_up(&h, round + 1).await;
        let status = setup_done(&h, round + 1).await;
        eprintln!(
            "return {round}: set up {took:?} after the accept (the worker's own setup run: {} ms)",
            status["setup"]["duration_ms"]
        );
        if std::env::var_os("RECONNECT_TIMELINE").is_some() {
            let c = h
                .engine
                .connections()
                .into_iter()
                .find(|c| c.id == round + 1)
                .expect("conn");
            for (f, at) in c.frames.iter().zip(&c.received_at) {
                let offset = (*at - c.accepted_at).as_secs_f64() * 1e3;
                let what = f.get("function_id").or(f.get("id")).unwrap_or(&Value::Null);
                eprintln!("  {offset:>8.3} ms {} {what}", f["type"]);
            }
        }
        if std::env::var_os("RECONNECT_STEPS").is_some() {
            for step in status["setup"]["steps"].as_array().expect("steps") {
                eprintln!(
                    "  {} {} {} ms",
                    step["name"], step["outcome"], step["duration_ms"]
                );
            }
        }
        times.push(took);
    }
    times.sort();
    eprintln!(
        "setup after an engine return, {rounds} returns: min {:?}, median {:?}, max {:?}",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1]
    );
    assert!(
        times.iter().all(|t| *t < Duration::from_secs(2)),
        "{times:?}"
    );
    h.stop().await;
}
