//! Every call gets an answer: a soak of mixed calls (reads, misses, lists, status, refused
//! requests) through the fake engine, many in flight at once, on one connection. It counts the
//! calls sent and the calls answered (each answer checked against what that call must answer)
//! and fails on any call left without an answer, a wrong answer, or a reconnection.
//!
//! `SOAK_OTEL=1` turns the SDK's telemetry on (spans to the fake's `/otel` socket), as a
//! deployed worker runs. `SOAK_CALLS` sets the size (20,000 by default, a few seconds); the million calls of the issue
//! run with `cargo test --test worker soak -- --ignored` (or `SOAK_CALLS=1000000`).

use futures_util::StreamExt;

use super::*;

/// Calls in flight at once.
const IN_FLIGHT: usize = 48;
/// Longer than any call takes on a loaded machine: a call without an answer by then is lost.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// What a call of the mix must answer.
enum Expect {
    /// An answer for which the check holds.
    Ok(fn(&Value) -> bool),
    /// An error whose message starts with this (after `handler error: `).
    Err(&'static str),
}

fn mix() -> Vec<(&'static str, Value, Expect)> {
    let long_id = "a".repeat(5_000);
    vec![
        (
            "directory::skills::get",
            json!({"id": "mailer/guide"}),
            Expect::Ok(|v| v["id"] == "mailer/guide"),
        ),
        (
            "directory::skills::get",
            json!({"id": "nope"}),
            Expect::Err("D110 not_found: skill \"nope\" does not exist."),
        ),
        (
            "directory::skills::list",
            json!({}),
            Expect::Ok(|v| v["skills"].as_array().is_some_and(|s| s.len() >= 3)),
        ),
        (
            "directory::skills::list",
            json!({"prefix": "mailer/", "include_description": false}),
            Expect::Ok(|v| v["skills"].as_array().is_some_and(|s| !s.is_empty())),
        ),
        (
            "directory::index::status",
            json!({}),
            Expect::Ok(|v| v["revision"].is_u64()),
        ),
        (
            "directory::system-prompts::list",
            json!({}),
            Expect::Ok(|v| v["prompts"].is_array()),
        ),
        (
            "directory::agents::list",
            json!({}),
            Expect::Ok(|v| v["agents"].is_array()),
        ),
        (
            "directory::skills::index",
            json!({}),
            Expect::Ok(|v| v["body"].is_string()),
        ),
        (
            "directory::skills::get",
            json!(["mailer/guide"]),
            Expect::Err("D117 invalid_input: the request must be a JSON object"),
        ),
        (
            "directory::agents::get",
            json!({"id": long_id}),
            Expect::Err("D412 invalid_input: `id` is 5000 bytes long"),
        ),
        (
            UI_CONTENT,
            json!({"path": "nope.js"}),
            Expect::Err("unknown UI asset path \"nope.js\""),
        ),
    ]
}

/// What a soak saw.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    sent: u64,
    answered: u64,
    lost: u64,
    wrong: u64,
}

async fn soak(calls: u64) {
    // `SOAK_OTEL=1`: with the SDK's telemetry on, as a deployed worker runs.
    let otel = std::env::var("SOAK_OTEL").is_ok_and(|v| v == "1");
    let env: &[(&str, &str)] = if otel {
        &[("OTEL_ENABLED", "true")]
    } else {
        &[]
    };
    let h = Harness::start_with_env(Installed::Mailer, None, &[], None, env).await;
    // A million calls' frames would otherwise all be kept.
    h.engine.keep_history(false);
    let connections = h.engine.connections().len();
    let mix = mix();
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut first_failures: Vec<String> = Vec::new();
    let engine = &h.engine;
    let mix = &mix;
    let mut outcomes = futures_util::stream::iter(0..calls)
        .map(|n| async move {
            let (function, request, expect) = &mix[(n as usize) % mix.len()];
            let answer = engine
                .invoke_with(function, request.clone(), None, CALL_TIMEOUT)
                .await;
            (n, *function, answer, expect)
        })
        .buffer_unordered(IN_FLIGHT);
    while let Some((n, function, answer, expect)) = outcomes.next().await {
        tally.sent += 1;
        let verdict = match (&answer, expect) {
            (Err(e), _) if e.code == fake_engine::FAKE_TIMEOUT => Err("lost"),
            (Err(e), _) if e.code == fake_engine::FAKE_NOT_CONNECTED => Err("lost"),
            (Ok(value), Expect::Ok(check)) if check(value) => Ok(()),
            (Err(e), Expect::Err(start))
                if e.code == "invocation_failed"
                    && e.message
                        .strip_prefix("handler error: ")
                        .is_some_and(|m| m.starts_with(start)) =>
            {
                Ok(())
            }
            _ => Err("wrong"),
        };
        match verdict {
            Ok(()) => tally.answered += 1,
            Err(what) => {
                if what == "lost" {
                    tally.lost += 1;
                } else {
                    tally.answered += 1;
                    tally.wrong += 1;
                }
                if first_failures.len() < 10 {
                    first_failures.push(format!("call {n} {function}: {what}: {answer:?}"));
                }
            }
        }
        if tally.sent % 100_000 == 0 {
            eprintln!(
                "soak: {} calls sent, {} answered, {} lost ({:.1?})",
                tally.sent,
                tally.answered,
                tally.lost,
                started.elapsed()
            );
        }
    }
    drop(outcomes);
    let elapsed = started.elapsed();
    eprintln!(
        "soak: {} calls sent, {} answered ({} wrong), {} lost, in {elapsed:.1?} ({:.0} calls/s, {IN_FLIGHT} in flight, telemetry {})",
        tally.sent,
        tally.answered,
        tally.wrong,
        tally.lost,
        tally.sent as f64 / elapsed.as_secs_f64(),
        if otel { "on" } else { "off" }
    );
    assert_eq!(
        (tally.sent, tally.answered, tally.lost, tally.wrong),
        (calls, calls, 0, 0),
        "first failures: {first_failures:#?}"
    );
    let now = h.engine.connections();
    assert_eq!(
        now.len(),
        connections,
        "the worker reconnected during the soak"
    );
    assert!(now.iter().all(|c| c.open), "a connection was dropped");
    h.stop().await;
}

fn calls_from_env(default: u64) -> u64 {
    std::env::var("SOAK_CALLS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_every_call_gets_an_answer() {
    soak(calls_from_env(20_000)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a million calls: minutes; run with --ignored"]
async fn soak_a_million_calls_every_call_gets_an_answer() {
    soak(1_000_000).await;
}
