//! The worker process's memory (issue 15): the real `iii-directory` binary serving the tree
//! through the loopback fake engine. It boots on an up-to-date index, then serves rounds of
//! 20 full `skills::list` (without descriptions where the engine could not carry them), 20
//! `skills::get` misses (D110) and 20 `skills::update` calls; the
//! figure is its peak RSS (`VmHWM`) after the first round, and whether that peak stays flat
//! (within 10%) over two more rounds of the same calls: the resident set right after a round
//! rises and falls with the answers in flight (freed buffers go back to the system), the peak
//! grows only if something accumulates. Runs on the suite's own copy of the tree, with its own
//! index file. Beside it, the floor: the minimal worker (`floor_worker.rs`) answering as many
//! of the same full lists from memory, since the SDK alone holds an answer three times over
//! while it sends it (the value a handler returns, its JSON text, the WebSocket frame).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use iii_directory::Directory;
use iii_directory::config::Config;
use serde_json::{Value, json};

use crate::Settings;
use crate::floor_worker;
use crate::measure::status_mib;
use crate::results::{Check, Cmp, Figure};
use crate::worker::{WholeList, command, engine_for_worker, write_config};

/// Peak RSS of the worker serving 50,000 skills stays under this (MiB), issues 5 and 15.
const RSS_50K_MAX_MIB: f64 = 150.0;
/// RSS after each later round within this fraction of the RSS after the first (issue 15).
const FLAT_WITHIN: f64 = 0.10;
const LARGE: usize = 50_000;
/// The calls of one round, per kind (issue 15).
const CALLS_PER_KIND: usize = 20;
/// Rounds after the first, for flatness.
const MORE_ROUNDS: usize = 2;
/// How long the worker may take to boot and register.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long after the last round the resident set is read again, at rest.
const AT_REST_AFTER: Duration = Duration::from_secs(2);
/// The longest one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The worker process, stopped (SIGTERM, then waited for) when dropped, also when a round
/// panics.
struct Worker(std::process::Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

/// The peak RSS (`VmHWM`) and the RSS of the worker after each round.
struct Rounds {
    peaks: Vec<f64>,
    rss: Vec<f64>,
    boot: Duration,
    /// The worker's RSS when it had booted, before any call.
    booted: f64,
    /// Its RSS a while after the last round (see `src/worker/trim.rs`).
    at_rest: f64,
    /// The peak RSS of the minimal worker (`floor_worker.rs`) after as many of the same full
    /// lists, answered from memory: what the SDK alone costs for such answers.
    floor: f64,
    /// The whole list the rounds asked for, and its length as JSON.
    list: WholeList,
    list_bytes: usize,
}

pub fn figures(settings: &Settings, tree: &Path, work: &Path) -> Vec<Figure> {
    let (config_file, index) = write_config(work, "memory");
    // The index the worker boots on, brought up to date in this process first: the worker's
    // boot is then a warm one, as a restarted worker's is.
    let mut config = Config::for_root(tree);
    config.paths.index_path = index;
    Directory::open(config)
        .expect("open the worker's index")
        .reconcile()
        .expect("index the tree");

    let rounds = serve_rounds(tree, &config_file, work);
    let peak = rounds.peaks[0];
    let growth = rounds.peaks.last().map_or(0.0, |last| last / peak - 1.0);
    let show = |mib: &[f64]| -> String {
        let shown: Vec<String> = mib.iter().map(|r| format!("{r:.1}")).collect();
        shown.join(", ")
    };
    vec![
        Figure::new(
            "worker_rss",
            "peak RSS, worker serving the tree",
            "MiB",
            peak,
        )
        .floor("minimal worker, same full lists", rounds.floor)
        .target(5, "<150 MiB", LARGE, peak < RSS_50K_MAX_MIB)
        .check(
            15,
            LARGE,
            Check {
                what: "peak",
                measured: peak,
                cmp: Cmp::Below,
                limit: RSS_50K_MAX_MIB,
                unit: "MiB",
            },
        )
        .check(
            15,
            LARGE,
            Check {
                what: "peak's growth over 2 more rounds",
                measured: growth * 100.0,
                cmp: Cmp::AtMost,
                limit: FLAT_WITHIN * 100.0,
                unit: "%",
            },
        )
        .note(format!(
            "VmHWM after a warm boot and {CALLS_PER_KIND} full lists{} ({:.1} MB each), {CALLS_PER_KIND} \
             misses and {CALLS_PER_KIND} updates through the fake engine; VmHWM after that round and \
             {MORE_ROUNDS} more: {} MiB ({:+.1}%); VmRSS after each: {} MiB; VmRSS at boot \
             {:.1} MiB, {:.1} MiB at rest ({} s after the last round); the minimal worker on the same SDK answering {CALLS_PER_KIND} of the same \
             full lists from memory peaks at {:.1} MiB; boot to registered {} ms; {} skills",
            rounds.list.said(),
            rounds.list_bytes as f64 / 1e6,
            show(&rounds.peaks),
            growth * 100.0,
            show(&rounds.rss),
            rounds.booted,
            rounds.at_rest,
            AT_REST_AFTER.as_secs(),
            rounds.floor,
            rounds.boot.as_millis(),
            settings.skills
        )),
    ]
}

/// Boots the worker, serves the rounds, and stops it.
fn serve_rounds(tree: &Path, config: &Path, work: &Path) -> Rounds {
    let (runtime, engine) = engine_for_worker();
    // Large answers: keeping copies of every frame would only cost this process memory.
    engine.keep_history(false);
    let start = Instant::now();
    let worker = command(tree, config)
        .args(["--url", engine.url()])
        .stderr(
            std::fs::File::create(work.join("memory-worker.log")).expect("the worker's log file"),
        )
        .spawn()
        .expect("start the worker");
    let worker = Worker(worker);
    runtime
        .block_on(engine.wait_function("directory::skills::list", BOOT_TIMEOUT))
        .expect("the worker registers");
    let boot = start.elapsed();
    let pid = worker.0.id();
    let booted = status_mib(pid, "VmRSS").unwrap_or(f64::NAN);

    let call = |function: &str, data: Value| {
        runtime.block_on(engine.invoke_with(function, data, None, CALL_TIMEOUT))
    };
    let (list, first) = WholeList::fetch(&runtime, &engine, CALL_TIMEOUT);
    let stored = work.join("memory-floor-list.json");
    let list_bytes = serde_json::to_vec(&first).expect("serialize");
    std::fs::write(&stored, &list_bytes).expect("store");
    let list_bytes = list_bytes.len();
    let ids: Vec<String> = first["skills"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .filter(|id| id.contains('/') && !id.starts_with("agent-skill") && !id.starts_with("iii"))
        .collect();
    drop(first);
    assert!(ids.len() >= CALLS_PER_KIND, "too few skills to update");
    let mut rss = Vec::new();
    let mut peaks = Vec::new();
    for round in 0..=MORE_ROUNDS {
        for i in 0..CALLS_PER_KIND {
            let rows = call("directory::skills::list", list.request()).expect("list over the wire");
            std::hint::black_box(rows);
            let miss = call(
                "directory::skills::get",
                json!({ "id": format!("no-such-namespace-{round}/missing-{i}") }),
            );
            assert!(miss.is_err(), "a missing skill is a D110 error");
            let id = &ids[(round * CALLS_PER_KIND + i) * 7919 % ids.len()];
            let content = format!(
                "---\ntitle: memory probe {round} {i}\n---\n# Probe\n\nRewritten by the memory figure.\n"
            );
            call(
                "directory::skills::update",
                json!({ "id": id, "content": content }),
            )
            .expect("update over the wire");
        }
        peaks.push(status_mib(pid, "VmHWM").unwrap_or(f64::NAN));
        rss.push(status_mib(pid, "VmRSS").unwrap_or(f64::NAN));
    }
    std::thread::sleep(AT_REST_AFTER);
    let at_rest = status_mib(pid, "VmRSS").unwrap_or(f64::NAN);
    drop(worker);

    let floor = floor_worker::start(engine.url(), &stored);
    runtime
        .block_on(engine.wait_function(floor_worker::LIST, BOOT_TIMEOUT))
        .expect("the floor worker registers");
    for _ in 0..CALLS_PER_KIND {
        std::hint::black_box(call(floor_worker::LIST, json!({})).expect("the floor's list"));
    }
    let floor_peak = status_mib(floor.0.id(), "VmHWM").unwrap_or(f64::NAN);
    Rounds {
        peaks,
        rss,
        boot,
        booted,
        at_rest,
        floor: floor_peak,
        list,
        list_bytes,
    }
}
