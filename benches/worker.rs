//! `directory::skills::list` through the engine's wire protocol (the real worker binary talking
//! to the loopback fake engine) beside the same call in-process, in one run.
//!
//! ```sh
//! cargo bench --bench worker                  # 10,000 skills, 50 calls each
//! ```

mod common;
#[path = "../tests/fake_engine/mod.rs"]
mod fake_engine;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{env_usize, measure, ms, tree};
use fake_engine::FakeEngine;
use iii_directory::config::Config;
use iii_directory::{Directory, ReadFunction};
use serde_json::json;

fn main() {
    let skills = env_usize("BENCH_SKILLS", 10_000);
    let iterations = env_usize("BENCH_ITERATIONS", 50);
    let base = tree(skills);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let engine = runtime.block_on(FakeEngine::start());
    // No installed-workers set (the call fails): nothing is hidden, as in-process with `None`.
    engine.respond_error("worker::list", "function_not_found", "no worker daemon");
    engine.respond_error("configuration::get", "NOT_FOUND", "no entry");
    engine.respond("configuration::register", json!({}));
    let mut worker = Command::new(env!("CARGO_BIN_EXE_iii-directory"))
        .args(["--url", engine.url()])
        .env("III_COMPOSE_DIR", &base)
        .env("OTEL_ENABLED", "false")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start the worker");
    let started = Instant::now();
    runtime
        .block_on(engine.wait_function("directory::skills::list", Duration::from_secs(120)))
        .expect("the worker registers");
    println!(
        "tree: {skills} skills; worker up (boot reconcile included) in {} ms",
        started.elapsed().as_millis()
    );

    let wire = measure(iterations, || {
        let rows = runtime
            .block_on(engine.invoke("directory::skills::list", json!({})))
            .expect("list over the wire");
        std::hint::black_box(rows);
    });
    let follower =
        Directory::open_read_only(Config::for_root(&base)).expect("follow the worker's index");
    let in_process = measure(iterations, || {
        std::hint::black_box(
            follower
                .read_json(ReadFunction::SkillsList, &json!({}), None)
                .expect("list"),
        );
    });
    let count = runtime
        .block_on(engine.invoke("directory::skills::list", json!({})))
        .map(|v| v["skills"].as_array().map_or(0, Vec::len))
        .unwrap_or(0);
    println!(
        "{:<52} {:>10} {:>10}",
        "skills::list, all rows (ms)", "p50", "p99"
    );
    println!(
        "{:<52} {:>10} {:>10}",
        format!("through the engine socket ({count} rows)"),
        ms(wire.p50),
        ms(wire.p99)
    );
    println!(
        "{:<52} {:>10} {:>10}",
        "in-process (JSON text, read-only follower)",
        ms(in_process.p50),
        ms(in_process.p99)
    );
    println!(
        "wire / in-process: {:.1}×",
        wire.p50.as_secs_f64() / in_process.p50.as_secs_f64()
    );
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(worker.id().to_string())
        .status();
    let _ = worker.wait();
}
