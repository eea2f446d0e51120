//! The worker's memory stays flat (issue 15): the real `iii-directory` binary serving a
//! generated tree through the loopback fake engine, warmed up with a few rounds of mixed calls,
//! then 200 more (`skills::list`, `skills::get` of a skill that exists and of one that does
//! not, `skills::update`, `skills::index`, in turn). Its resident set after each 20 calls stays
//! within 10% of the one after the warm-up: nothing a call leaves behind accumulates (copies of
//! the list answer, per-call value trees, allocator arenas of the blocking pool).
//!
//! The figure at 50,000 skills is the benchmark suite's `memory` section.

use test_support::{fake_engine, worker_process};

use std::time::Duration;

use fake_engine::FakeEngine;
use serde_json::{Value, json};
use test_support::generate::{TreeSpec, write_tree};
use worker_process::WorkerProcess;

const TREE_SKILLS: usize = 2_000;
const WARM_UP_CALLS: usize = 50;
const CALLS: usize = 200;
/// The resident set is sampled after every this many calls.
const SAMPLE_EVERY: usize = 20;
/// Growth over the warmed-up resident set allowed at any sample.
const FLAT_WITHIN: f64 = 0.10;
const UP_WITHIN: Duration = Duration::from_secs(120);
const CALL_LIMIT: Duration = Duration::from_secs(60);

struct Bus {
    runtime: tokio::runtime::Runtime,
    engine: FakeEngine,
    worker: WorkerProcess,
}

impl Bus {
    fn call(&self, function_id: &str, request: Value) -> Result<Value, String> {
        self.runtime
            .block_on(
                self.engine
                    .invoke_with(function_id, request, None, CALL_LIMIT),
            )
            .map_err(|e| format!("{function_id}: {} {}", e.code, e.message))
    }

    /// Call `n` of the mix: list, get hit, get miss, update, index.
    fn mixed(&self, n: usize, ids: &[String]) {
        let id = &ids[n * 7919 % ids.len()];
        let result = match n % 5 {
            0 => self.call("directory::skills::list", json!({})).map(drop),
            1 => self
                .call("directory::skills::get", json!({ "id": id }))
                .map(drop),
            2 => {
                let miss = self.call(
                    "directory::skills::get",
                    json!({ "id": format!("{id}-missing-{n}") }),
                );
                assert!(miss.as_ref().is_err_and(|e| e.contains("D110")), "{miss:?}");
                Ok(())
            }
            3 => {
                let content = format!("---\ntitle: Memory probe {n}\n---\n# Probe\n\nCall {n}.\n");
                self.call(
                    "directory::skills::update",
                    json!({ "id": id, "content": content }),
                )
                .map(drop)
            }
            _ => self.call("directory::skills::index", json!({})).map(drop),
        };
        self.worker.expect(&format!("call {n}"), result);
    }
}

#[test]
fn the_workers_resident_set_stays_flat_over_mixed_calls() {
    let tree = tempfile::tempdir().expect("temp dir");
    write_tree(
        tree.path(),
        &TreeSpec {
            skills: TREE_SKILLS,
            seed: 15,
            corpus: None,
        },
    )
    .expect("generate the tree");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let engine = runtime.block_on(FakeEngine::start());
    // The answers are large and many: the fake keeps none of them.
    engine.keep_history(false);
    // No installed-workers set: nothing is hidden.
    engine.respond_error("worker::list", "function_not_found", "no worker daemon");
    engine.canned_configuration_worker();
    let worker = WorkerProcess::spawn(
        engine.url(),
        tree.path(),
        None,
        &[("RUST_LOG", Some("warn"))],
    );
    let bus = Bus {
        runtime,
        engine,
        worker,
    };
    let registered = bus.runtime.block_on(
        bus.engine
            .wait_function("directory::skills::update", UP_WITHIN),
    );
    bus.worker.expect("the worker registers", registered);
    // The worker answers once its boot reconcile is done: list until the tree is served.
    let deadline = std::time::Instant::now() + UP_WITHIN;
    let ids: Vec<String> = loop {
        let ids: Vec<String> = bus
            .call("directory::skills::list", json!({}))
            .map(|list| {
                list["skills"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|row| row["id"].as_str())
                    .filter(|id| id.contains('/') && !id.starts_with("iii"))
                    .filter(|id| !id.starts_with("agent-skill"))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if ids.len() >= TREE_SKILLS / 2 {
            break ids;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never served the tree\nworker stderr:\n{}",
            bus.worker.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    for n in 0..WARM_UP_CALLS {
        bus.mixed(n, &ids);
    }
    let warm = bus.worker.memory_bytes("VmRSS");
    assert!(warm > 0, "no VmRSS for the worker");
    let mut samples = Vec::new();
    for n in WARM_UP_CALLS..WARM_UP_CALLS + CALLS {
        bus.mixed(n, &ids);
        if (n + 1 - WARM_UP_CALLS) % SAMPLE_EVERY == 0 {
            samples.push(bus.worker.memory_bytes("VmRSS"));
        }
    }
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    let shown: Vec<String> = samples.iter().map(|s| format!("{:.1}", mib(*s))).collect();
    println!(
        "worker RSS after warm-up {:.1} MiB; every {SAMPLE_EVERY} calls: {} MiB; peak {:.1} MiB",
        mib(warm),
        shown.join(", "),
        mib(bus.worker.memory_bytes("VmHWM"))
    );
    // The lists above (2,000 rows) were built in the worker's answer arena (`src/arena.rs`),
    // reused round after round: the last one is still the library's own answer, row for row.
    let wire = bus
        .call("directory::skills::list", json!({}))
        .expect("a whole list");
    let index = tempfile::tempdir().expect("temp dir");
    let mut config = iii_directory::config::Config::for_root(tree.path());
    config.paths.index_path = index.path().join("index.redb");
    let directory = iii_directory::Directory::open(config).expect("the library on the tree");
    directory.reconcile().expect("index the tree");
    let library = directory
        .read_json(iii_directory::ReadFunction::SkillsList, &json!({}), None)
        .expect("the library's list");
    let library: Value = serde_json::from_str(&library).expect("JSON");
    let rows = wire["skills"].as_array().map_or(0, Vec::len);
    assert!(
        rows >= TREE_SKILLS / 2,
        "a list long enough for the arena: {rows} rows"
    );
    assert_eq!(
        wire["skills"], library["skills"],
        "the wire's list is the library's"
    );

    let most = samples.iter().copied().max().unwrap_or(warm);
    assert!(
        most as f64 <= warm as f64 * (1.0 + FLAT_WITHIN),
        "the worker's RSS grew from {:.1} MiB to {:.1} MiB over {CALLS} calls (samples: {})",
        mib(warm),
        mib(most),
        shown.join(", ")
    );
}
