//! The real `iii-directory` binary: `skills::list` and `skills::get` over the wire (through the
//! loopback fake engine) beside the minimal worker's floor and in-process, and a cold
//! `iii-directory reindex --from-scratch --no-embed` (the files, no skill embeddings) with its
//! peak memory. (The worker's own memory is `memory.rs`.) Runs on the suite's own copy of the
//! tree with its own index file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use iii_directory::config::Config;
use iii_directory::{Directory, ReadFunction};
use serde_json::{Value, json};
use test_support::fake_engine::FakeEngine;

use crate::Settings;
use crate::floor_worker;
use crate::measure::{Reaped, Sample, measure, measure_pair, status_mib};
use crate::results::{Check, Cmp, Figure};

const BINARY: &str = env!("CARGO_BIN_EXE_iii-directory");
/// How long the worker may take to boot and register.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);
/// At most this many timed `skills::list` calls over the wire.
const WIRE_LIST_RUNS: usize = 15;
/// A full `list` over the wire within this many times the minimal worker's (issue 15)…
const WIRE_LIST_MAX_OVER_FLOOR: f64 = 1.1;
/// … and an unchanged `if_revision` answer within this many times the cheapest call.
const WIRE_UNCHANGED_MAX_OVER_FLOOR: f64 = 1.2;
/// The size issue 15 measured the wire at.
const WIRE_TARGET_SKILLS: usize = 10_000;
/// How often a short-lived process's peak memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// A configuration seed for a worker: the tree's default folders, the index file
/// `<name>.redb` in the work folder. Returns the seed's path and the index's.
pub fn write_config(work: &Path, name: &str) -> (PathBuf, PathBuf) {
    let path = work.join(format!("{name}.yaml"));
    let index = work.join(format!("{name}.redb"));
    std::fs::write(
        &path,
        format!(
            "index_path: {}\n",
            serde_json::to_string(&index.display().to_string()).expect("path")
        ),
    )
    .expect("write the worker configuration");
    (path, index)
}

/// The real binary on `tree` with the seed `config`, logging errors only (or what
/// `BENCH_WORKER_LOG` asks for).
pub fn command(tree: &Path, config: &Path) -> Command {
    let mut command = Command::new(BINARY);
    command
        .arg("--config")
        .arg(config)
        .env("III_COMPOSE_DIR", tree)
        .env("OTEL_ENABLED", "false")
        .env(
            "RUST_LOG",
            std::env::var("BENCH_WORKER_LOG").unwrap_or_else(|_| "error".into()),
        )
        .stdout(Stdio::null());
    command
}

/// A runtime and a fake engine for the real binary: no worker daemon (`worker::list` fails, so
/// nothing is hidden, as in process with `None`) and no stored configuration.
pub fn engine_for_worker() -> (tokio::runtime::Runtime, FakeEngine) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let engine = runtime.block_on(FakeEngine::start());
    engine.respond_error("worker::list", "function_not_found", "no worker daemon");
    engine.respond_error("configuration::get", "NOT_FOUND", "no entry");
    engine.respond("configuration::register", json!({}));
    (runtime, engine)
}

/// Runs `child` to its end, sampling its peak RSS; returns the wall time and the last peak seen.
fn wait_sampling(mut child: Child, start: Instant) -> (Duration, f64, std::process::Output) {
    let pid = child.id();
    let mut peak = 0.0f64;
    loop {
        if let Some(hwm) = status_mib(pid, "VmHWM") {
            peak = peak.max(hwm);
        }
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    let wall = start.elapsed();
    let output = child.wait_with_output().expect("output");
    (wall, peak, output)
}

pub fn figures(settings: &Settings, tree: &Path, work: &Path) -> Vec<Figure> {
    let (config, index) = write_config(work, "worker");
    let mut out = Vec::new();

    // Cold reindex by the command line.
    let start = Instant::now();
    let child = command(tree, &config)
        .args(["reindex", "--from-scratch", "--no-embed", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start iii-directory reindex");
    let (wall, peak, output) = wait_sampling(child, start);
    assert!(output.status.success(), "iii-directory reindex failed");
    let report: Value = serde_json::from_slice(&output.stdout).expect("reindex --json");
    out.push(
        Figure::new(
            "cli_reindex",
            "cold reindex, `iii-directory reindex --from-scratch --no-embed`",
            "ms",
            wall.as_secs_f64() * 1e3,
        )
        .note(format!(
            "process wall time (its own report: {} ms for {} files); peak RSS {peak:.1} MiB (sampled every {} ms)",
            report["duration_ms"],
            report["files"],
            SAMPLE_EVERY.as_millis()
        )),
    );
    out.push(Figure::new(
        "cli_reindex_rss",
        "peak RSS, cold `reindex` process",
        "MiB",
        peak,
    ));

    // The worker, booting on the index just built.
    let (runtime, engine) = engine_for_worker();
    let start = Instant::now();
    let mut worker = Reaped(
        command(tree, &config)
            .args(["--url", engine.url()])
            .spawn()
            .expect("start the worker"),
    );
    runtime
        .block_on(engine.wait_function("directory::skills::list", BOOT_TIMEOUT))
        .expect("the worker registers");
    let boot = start.elapsed();
    let (whole, first) = WholeList::fetch(&runtime, &engine, BOOT_TIMEOUT);
    let ids: Vec<String> = first["skills"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect();
    let mut i = 0;
    let get = measure(1, settings.iterations * 3, || {
        i = (i + 7919) % ids.len();
        let answer = runtime
            .block_on(engine.invoke("directory::skills::get", json!({ "id": ids[i] })))
            .expect("get over the wire");
        std::hint::black_box(answer);
    });
    let wire = wire_floor(settings, &runtime, &engine, work, whole, first);
    let pid = worker.0.id();
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let _ = worker.0.wait();

    // In-process over the same index, for the wire's overhead.
    let mut follower_config = Config::for_root(tree);
    follower_config.paths.index_path = index;
    let follower = Directory::open(follower_config).expect("open the worker's index");
    let local = measure(1, settings.iterations, || {
        std::hint::black_box(
            follower
                .read_json(ReadFunction::SkillsList, &whole.request(), None)
                .expect("list"),
        );
    });

    let over_floor = wire.list.p50 / wire.floor_list.p50;
    out.push(
        Figure::timing(
            "wire_list",
            &format!(
                "skills::list over the engine socket ({} rows{})",
                ids.len(),
                whole.said()
            ),
            &wire.list,
        )
        .floor("minimal worker, same list", wire.floor_list.p50)
        .check(
            15,
            WIRE_TARGET_SKILLS,
            Check {
                what: "p50 over the floor",
                measured: over_floor,
                cmp: Cmp::AtMost,
                limit: WIRE_LIST_MAX_OVER_FLOOR,
                unit: "×",
            },
        )
        .note(format!(
            "in-process read_json of the same list {:.2} ms",
            local.p50
        )),
    );
    let over_ping = wire.unchanged.p50 / wire.ping.p50;
    out.push(
        Figure::timing(
            "wire_unchanged",
            "skills::list {if_revision}, unchanged, over the engine socket",
            &wire.unchanged,
        )
        .floor("minimal worker answering {}", wire.ping.p50)
        .check(
            15,
            WIRE_TARGET_SKILLS,
            Check {
                what: "p50 over the floor",
                measured: over_ping,
                cmp: Cmp::AtMost,
                limit: WIRE_UNCHANGED_MAX_OVER_FLOOR,
                unit: "×",
            },
        ),
    );
    out.push(
        Figure::timing("wire_get", "skills::get over the engine socket", &get).note(format!(
            "fake engine on loopback; includes the engine's own framing; boot to registered {} ms",
            boot.as_millis()
        )),
    );
    out
}

/// The wire figures beside their floor, each call timed alternately with the minimal worker's
/// (`floor_worker.rs`) through the same engine: the directory's full list beside the same list
/// answered from memory, its unchanged `if_revision` answer beside `{}`.
struct WireFloor {
    list: Sample,
    floor_list: Sample,
    unchanged: Sample,
    ping: Sample,
}

fn wire_floor(
    settings: &Settings,
    runtime: &tokio::runtime::Runtime,
    engine: &FakeEngine,
    work: &Path,
    whole: WholeList,
    answer: Value,
) -> WireFloor {
    let call = |function: &str, request: Value| {
        runtime
            .block_on(engine.invoke(function, request))
            .unwrap_or_else(|e| panic!("{function} over the wire: {e:?}"))
    };
    // The floor answers the very list the worker gave.
    let stored = work.join("floor-list.json");
    std::fs::write(&stored, serde_json::to_vec(&answer).expect("serialize")).expect("store");
    drop(answer);
    let _floor = floor_worker::start(engine.url(), &stored);
    runtime
        .block_on(engine.wait_function(floor_worker::LIST, BOOT_TIMEOUT))
        .expect("the floor worker registers");

    // Large answers are slow over the wire: a few calls are enough for the median.
    let (list, floor_list) = measure_pair(
        1,
        settings.iterations.min(WIRE_LIST_RUNS),
        || {
            std::hint::black_box(call("directory::skills::list", whole.request()));
        },
        || {
            std::hint::black_box(call(floor_worker::LIST, json!({})));
        },
    );

    // A plain list carries no revision; one asked about a revision no index has tells it.
    let mut any_revision = whole.request();
    any_revision["if_revision"] = json!(0);
    let revision = call("directory::skills::list", any_revision)["revision"].clone();
    // Asked with the list's own filters: a revision is the list's as those filters scope it.
    let mut if_revision = whole.request();
    if_revision["if_revision"] = revision;
    assert_eq!(
        call("directory::skills::list", if_revision.clone())["unchanged"],
        true,
        "an unchanged list answers unchanged"
    );
    // Calls of about 0.1 ms: many pairs, so that the median of each side holds still.
    let (unchanged, ping) = measure_pair(
        10,
        settings.iterations * 10,
        || {
            std::hint::black_box(call("directory::skills::list", if_revision.clone()));
        },
        || {
            std::hint::black_box(call(floor_worker::PING, json!({})));
        },
    );
    WireFloor {
        list,
        floor_list,
        unchanged,
        ping,
    }
}

/// The whole list as the console page asks for it: with descriptions, or without them when
/// that is longer than the engine carries in one message (refused with D120, see
/// `src/worker/wire.rs`), as the page then asks.
#[derive(Clone, Copy)]
pub enum WholeList {
    WithDescriptions,
    WithoutDescriptions,
}

impl WholeList {
    /// Asks for the whole list: which one the worker answered, and its answer.
    pub fn fetch(
        runtime: &tokio::runtime::Runtime,
        engine: &FakeEngine,
        timeout: Duration,
    ) -> (WholeList, Value) {
        let call = |list: WholeList| {
            runtime.block_on(engine.invoke_with(
                "directory::skills::list",
                list.request(),
                None,
                timeout,
            ))
        };
        match call(WholeList::WithDescriptions) {
            Ok(answer) => (WholeList::WithDescriptions, answer),
            Err(e) if e.message.contains("D120 too_large") => {
                let answer = call(WholeList::WithoutDescriptions).expect("list");
                (WholeList::WithoutDescriptions, answer)
            }
            Err(e) => panic!("list: {e}"),
        }
    }

    pub fn request(self) -> Value {
        match self {
            WholeList::WithDescriptions => json!({}),
            WholeList::WithoutDescriptions => json!({ "include_description": false }),
        }
    }

    /// What a figure's text adds about the list.
    pub fn said(self) -> &'static str {
        match self {
            WholeList::WithDescriptions => "",
            WholeList::WithoutDescriptions => {
                " without descriptions (with them, the list is longer than the 16 MiB the engine \
                 carries in one message, and refused with D120)"
            }
        }
    }
}
