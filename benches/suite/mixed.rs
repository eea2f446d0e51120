//! Mixed load (issue 31): the calls of real traffic interleaved rather than one function at a
//! time. A round is "update one skill, then one each of `get` hit, `get` miss, `index`, prefix
//! `list`, `agents::get`", repeated; another round is a whole `list`, then a `get`. Each call's
//! p50 and p99 in the rounds stand beside its steady-state twin: the same call repeated alone,
//! timed in the same run. Both in the library (`Directory::read_json` / `write`) and over the
//! engine socket (the real binary behind the loopback fake engine), where the trivial call of
//! the minimal worker on the same SDK (`floor_worker.rs`) is measured too, as is that worker's
//! `{}` right after it answered the same whole list (what the SDK alone makes the next call
//! wait), and the worker's peak RSS through the whole run is read at its end. Edits the suite's own copy of the tree,
//! with its own index file.

use std::path::Path;
use std::time::{Duration, Instant};

use iii_directory::config::Config;
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::{Value, json};
use test_support::engine_client;
use test_support::fake_engine::FakeEngine;

use crate::Settings;
use crate::floor_worker;
use crate::latency::body_of;
use crate::measure::{Reaped, Sample, status_mib};
use crate::results::{Check, Cmp, Figure};
use crate::worker::{WholeList, command, engine_for_worker, write_config};

/// The tree size issue 31 states its targets for.
const LARGE: usize = 50_000;
/// A read in the mixed rounds: at most this many times its steady-state p50…
const READ_MAX_OVER_STEADY: f64 = 1.5;
/// … or its steady-state p50 plus this (ms), whichever is larger.
const READ_MAX_PLUS_MS: f64 = 1.0;
/// A miss in the mixed rounds (the first read after a write that needs the miss postings).
const MISS_MAX_MS: f64 = 1.0;
/// `update` over the socket: at most the library's p50 plus the trivial call plus this (ms).
const WIRE_UPDATE_PLUS_MS: f64 = 2.0;
/// A `get` after a whole `list`: at most a `get` alone plus this (ms).
const GET_AFTER_LIST_PLUS_MS: f64 = 1.0;
/// The worker's peak RSS through the mixed run (MiB).
const RSS_MAX_MIB: f64 = 150.0;
/// Rounds that start with a whole list (the list is slow at 50k: a few are enough).
const LIST_ROUNDS: usize = 15;
/// How long the worker may take to boot, and one call.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// The agent with an `extends` chain in generated trees, and the one small trees have.
const AGENTS_WITH_CHAIN: [&str; 2] = ["agent-3", "agent-0"];

/// The calls of a mixed round, in order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Update,
    Get,
    Miss,
    Index,
    Prefix,
    Agent,
}

const ROUND: [Kind; 6] = [
    Kind::Update,
    Kind::Get,
    Kind::Miss,
    Kind::Index,
    Kind::Prefix,
    Kind::Agent,
];

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Update => "update",
            Kind::Get => "get",
            Kind::Miss => "miss",
            Kind::Index => "index",
            Kind::Prefix => "prefix",
            Kind::Agent => "agent",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Update => "skills::update",
            Kind::Get => "skills::get, hit",
            Kind::Miss => "skills::get, miss (D110)",
            Kind::Index => "skills::index",
            Kind::Prefix => "skills::list, prefix",
            Kind::Agent => "agents::get (extends)",
        }
    }

    fn function(self) -> &'static str {
        match self {
            Kind::Update => WriteFunction::SkillsUpdate.id(),
            Kind::Get | Kind::Miss => ReadFunction::SkillsGet.id(),
            Kind::Index => ReadFunction::SkillsIndex.id(),
            Kind::Prefix => ReadFunction::SkillsList.id(),
            Kind::Agent => ReadFunction::AgentsGet.id(),
        }
    }
}

/// What the calls ask for: skills to update (id, original text), ids to get, ids that miss,
/// a namespace prefix, an agent with a chain.
struct Plan {
    updates: Vec<(String, String)>,
    hits: Vec<String>,
    misses: Vec<String>,
    prefix: String,
    agent: String,
    /// Counts the calls, so each asks for another id and each write writes a new title.
    turn: usize,
}

impl Plan {
    fn of(directory: &Directory, want: usize) -> Plan {
        let all = directory
            .read(ReadFunction::SkillsList, &json!({}), None)
            .expect("list");
        let ids: Vec<String> = all["skills"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["id"].as_str().expect("id").to_string())
            .collect();
        let get = |id: &str| {
            directory
                .read(ReadFunction::SkillsGet, &json!({ "id": id }), None)
                .ok()
        };
        // Skills the worker serves from their own file (not shadowed, not bundled), none a
        // worker overview (rewriting one would change `index`'s answer).
        let mut updates = Vec::new();
        let mut i = 0;
        while updates.len() < want && i < ids.len() * 2 {
            let id = &ids[(i * 7919) % ids.len()];
            i += 1;
            if !id.contains('/') || id.ends_with("/index") || updates.iter().any(|(u, _)| u == id) {
                continue;
            }
            let Some(path) = get(id).and_then(|v| v["path"].as_str().map(str::to_string)) else {
                continue;
            };
            if let Ok(text) = std::fs::read_to_string(&path)
                && path.contains("/skills/")
            {
                updates.push((id.clone(), text));
            }
        }
        assert!(!updates.is_empty(), "no skill to update");
        let hits: Vec<String> = (0..want.max(1))
            .map(|k| ids[(k * 104_729 + 17) % ids.len()].clone())
            .collect();
        let misses: Vec<String> = ids
            .iter()
            .step_by(ids.len().div_ceil(want.max(1)).max(1))
            .map(|id| format!("{id}{}", id.chars().last().unwrap_or('x')))
            .filter(|id| get(id).is_none())
            .collect();
        assert!(!misses.is_empty(), "no missing ids to ask for");
        let prefix = ids
            .iter()
            .find_map(|id| id.split_once('/').map(|(ns, _)| format!("{ns}/")))
            .expect("a namespaced skill");
        let agent = AGENTS_WITH_CHAIN
            .into_iter()
            .find(|a| {
                directory
                    .read(ReadFunction::AgentsGet, &json!({ "id": a }), None)
                    .is_ok()
            })
            .expect("a generated agent with an extends chain")
            .to_string();
        Plan {
            updates,
            hits,
            misses,
            prefix,
            agent,
            turn: 0,
        }
    }

    /// The next request of this kind.
    fn request(&mut self, kind: Kind) -> Value {
        self.turn += 1;
        let t = self.turn;
        match kind {
            Kind::Update => {
                let (id, text) = &self.updates[t % self.updates.len()];
                let content = format!(
                    "---\ntitle: mixed probe {} {t}\n---\n{}",
                    std::process::id(),
                    body_of(text)
                );
                json!({ "id": id, "content": content })
            }
            Kind::Get => json!({ "id": self.hits[t % self.hits.len()] }),
            Kind::Miss => json!({ "id": self.misses[t % self.misses.len()] }),
            Kind::Index => json!({}),
            Kind::Prefix => json!({ "prefix": self.prefix }),
            Kind::Agent => json!({ "id": self.agent }),
        }
    }
}

/// Where the calls go: the library in this process, or the worker over the engine socket.
trait Calls {
    /// One call; whether it answered (a miss is an error answer).
    fn call(&self, function: &str, request: Value) -> bool;
}

impl Calls for Directory {
    fn call(&self, function: &str, request: Value) -> bool {
        if let Some(read) = ReadFunction::from_id(function) {
            return std::hint::black_box(self.read_json(read, &request, None)).is_ok();
        }
        let write = WriteFunction::from_id(function).expect("a function of the contract");
        self.write(write, &request, None)
            .unwrap_or_else(|e| panic!("{function}: {e}"));
        true
    }
}

struct Wire {
    runtime: tokio::runtime::Runtime,
    engine: FakeEngine,
}

/// The worker behind a real iii engine (`BENCH_ENGINE_URL`), called by an SDK client of it.
struct RealWire {
    runtime: tokio::runtime::Runtime,
    client: iii_sdk::IIIClient,
}

impl Calls for RealWire {
    fn call(&self, function: &str, request: Value) -> bool {
        let answer =
            self.runtime
                .block_on(engine_client::try_call(&self.client, function, request));
        std::hint::black_box(answer).is_ok()
    }
}

impl Calls for Wire {
    fn call(&self, function: &str, request: Value) -> bool {
        let answer =
            self.runtime.block_on(
                self.engine
                    .invoke_with(function, request, None, CALL_TIMEOUT),
            );
        std::hint::black_box(answer).is_ok()
    }
}

/// One timed call of `kind`; panics if a hit misses or a miss hits.
fn timed(calls: &dyn Calls, plan: &mut Plan, kind: Kind) -> Duration {
    let request = plan.request(kind);
    let start = Instant::now();
    let answered = calls.call(kind.function(), request);
    let took = start.elapsed();
    assert_eq!(
        answered,
        kind != Kind::Miss,
        "{} answered wrong",
        kind.name()
    );
    took
}

/// Each kind alone (its steady state), then the mixed rounds, then the rounds that start with
/// a whole list: (steady, mixed) per kind, the get after a list, and the list's own times.
struct Measured {
    steady: Vec<(Kind, Sample)>,
    mixed: Vec<(Kind, Sample)>,
    after_list: Sample,
    list: Sample,
}

impl Measured {
    fn steady(&self, kind: Kind) -> Sample {
        self.steady
            .iter()
            .find(|(k, _)| *k == kind)
            .expect("kind")
            .1
    }
}

fn measure_calls(
    settings: &Settings,
    calls: &dyn Calls,
    plan: &mut Plan,
    whole: Value,
) -> Measured {
    let runs = settings.iterations;
    let steady = ROUND
        .iter()
        .map(|&kind| {
            for _ in 0..3 {
                timed(calls, plan, kind);
            }
            let times = (0..runs).map(|_| timed(calls, plan, kind)).collect();
            (kind, Sample::of(times))
        })
        .collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); ROUND.len()];
    for _ in 0..runs {
        for (i, &kind) in ROUND.iter().enumerate() {
            times[i].push(timed(calls, plan, kind));
        }
    }
    let mixed = ROUND
        .iter()
        .zip(times)
        .map(|(&kind, t)| (kind, Sample::of(t)))
        .collect();
    let list_function = ReadFunction::SkillsList.id();
    let mut after = Vec::new();
    let mut lists = Vec::new();
    for _ in 0..runs.min(LIST_ROUNDS) {
        let start = Instant::now();
        assert!(calls.call(list_function, whole.clone()), "whole list");
        lists.push(start.elapsed());
        after.push(timed(calls, plan, Kind::Get));
    }
    Measured {
        steady,
        mixed,
        after_list: Sample::of(after),
        list: Sample::of(lists),
    }
}

/// The figures of one place (`lib` or `wire`).
fn place_figures(place: &str, said: &str, m: &Measured) -> Vec<Figure> {
    let mut out = Vec::new();
    for (kind, sample) in &m.mixed {
        let steady = m.steady(*kind);
        let mut figure = Figure::timing(
            &format!("mixed_{place}_{}", kind.key()),
            &format!("{}, mixed, {said}", kind.name()),
            sample,
        )
        .twin(&steady);
        if *kind != Kind::Update {
            let limit = (steady.p50 * READ_MAX_OVER_STEADY).max(steady.p50 + READ_MAX_PLUS_MS);
            figure = figure.check(
                31,
                LARGE,
                Check {
                    what: "p50 ≤ max(1.5× steady, steady + 1 ms)",
                    measured: sample.p50,
                    cmp: Cmp::AtMost,
                    limit,
                    unit: "ms",
                },
            );
        }
        if *kind == Kind::Miss && place == "lib" {
            figure = figure.check(
                31,
                LARGE,
                Check {
                    what: "p50",
                    measured: sample.p50,
                    cmp: Cmp::AtMost,
                    limit: MISS_MAX_MS,
                    unit: "ms",
                },
            );
        }
        out.push(figure);
    }
    let get = m.steady(Kind::Get);
    out.push(
        Figure::timing(
            &format!("mixed_{place}_after_list"),
            &format!("skills::get after a whole list, {said}"),
            &m.after_list,
        )
        .twin(&get)
        .check(
            31,
            LARGE,
            Check {
                what: "p50 over a get alone",
                measured: m.after_list.p50 - get.p50,
                cmp: Cmp::AtMost,
                limit: GET_AFTER_LIST_PLUS_MS,
                unit: "ms",
            },
        )
        .note(format!(
            "each after a whole list ({} p50, {} rounds)",
            crate::results::show(m.list.p50, "ms"),
            m.list.runs
        )),
    );
    out
}

/// What the SDK's connection task does with a whole list's value besides sending it
/// (`iii-sdk` 0.23, `send_ws`): writes it out as JSON text, and frees it once sent, timed here
/// on the same value (the answer as the engine passed it on).
struct SdkWork {
    write: Sample,
    free: Sample,
}

impl SdkWork {
    const RUNS: usize = 5;

    fn of(answer: Value) -> SdkWork {
        let (mut write, mut free) = (Vec::new(), Vec::new());
        for _ in 0..SdkWork::RUNS {
            let value = answer.clone();
            let start = Instant::now();
            std::hint::black_box(serde_json::to_string(&value).expect("serialize"));
            write.push(start.elapsed());
            let start = Instant::now();
            drop(std::hint::black_box(value));
            free.push(start.elapsed());
        }
        SdkWork {
            write: Sample::of(write),
            free: Sample::of(free),
        }
    }
}

pub fn figures(settings: &Settings, tree: &Path, work: &Path) -> Vec<Figure> {
    let (config_file, index) = write_config(work, "mixed");
    let mut config = Config::for_root(tree);
    config.paths.index_path = index;
    let _ = iii_directory::remove_index(&config.paths.index_path);
    let directory = Directory::open(config).expect("open the mixed index");
    directory.reconcile().expect("index the tree");
    let mut plan = Plan::of(&directory, settings.iterations.max(20));

    // In the library.
    eprintln!("mixed load, library");
    let lib = measure_calls(settings, &directory, &mut plan, json!({}));
    drop(directory);
    let mut out = place_figures("lib", "library", &lib);

    // Over the engine socket, on the same index (the worker's boot is a warm one).
    eprintln!("mixed load, engine socket");
    let (runtime, engine) = engine_for_worker();
    engine.keep_history(false);
    let worker = Reaped(
        command(tree, &config_file)
            .args(["--url", engine.url()])
            .stderr(std::fs::File::create(work.join("mixed-worker.log")).expect("log file"))
            .spawn()
            .expect("start the worker"),
    );
    runtime
        .block_on(engine.wait_function("directory::skills::list", BOOT_TIMEOUT))
        .expect("the worker registers");
    let (whole, first) = WholeList::fetch(&runtime, &engine, CALL_TIMEOUT);
    // The floor answers the very list the worker gave (`floor::list`), and `{}` (`floor::ping`).
    let stored = work.join("mixed-floor.json");
    std::fs::write(&stored, serde_json::to_vec(&first).expect("serialize"))
        .expect("store the floor's answer");
    let sdk = SdkWork::of(first);
    let _floor = floor_worker::start(engine.url(), &stored);
    runtime
        .block_on(engine.wait_function(floor_worker::PING, BOOT_TIMEOUT))
        .expect("the floor worker registers");
    let wire = Wire { runtime, engine };
    let whole_request = whole.request();
    let ping = crate::measure::measure(10, settings.iterations * 3, || {
        assert!(wire.call(floor_worker::PING, json!({})), "ping");
    });
    let measured = measure_calls(settings, &wire, &mut plan, whole.request());
    let peak = status_mib(worker.0.id(), "VmHWM").unwrap_or(f64::NAN);
    drop(worker);
    // The same rounds on the minimal worker: its whole list, then its trivial call.
    let mut floor_lists = Vec::new();
    let floor_after: Vec<Duration> = (0..settings.iterations.min(LIST_ROUNDS))
        .map(|_| {
            let start = Instant::now();
            assert!(wire.call(floor_worker::LIST, json!({})), "floor list");
            floor_lists.push(start.elapsed());
            let start = Instant::now();
            assert!(wire.call(floor_worker::PING, json!({})), "ping");
            start.elapsed()
        })
        .collect();
    let floor_after = Sample::of(floor_after);
    let floor_lists = Sample::of(floor_lists);
    let mut wire_figures = place_figures("wire", "engine socket", &measured);
    let lib_update = lib.steady(Kind::Update).p50;
    let limit = lib_update + ping.p50 + WIRE_UPDATE_PLUS_MS;
    if let Some(update) = wire_figures
        .iter_mut()
        .find(|f| f.key == "mixed_wire_update")
    {
        let mixed = measured.mixed[0].1.p50;
        let steady = measured.steady(Kind::Update).p50;
        *update = update
            .clone()
            .check(
                31,
                LARGE,
                Check {
                    what: "steady p50 ≤ library p50 + trivial call + 2 ms",
                    measured: steady,
                    cmp: Cmp::AtMost,
                    limit,
                    unit: "ms",
                },
            )
            .note(format!(
                "library update p50 {} (steady), trivial call {}; mixed p50 {} over the socket",
                crate::results::show(lib_update, "ms"),
                crate::results::show(ping.p50, "ms"),
                crate::results::show(mixed, "ms"),
            ));
    }
    out.extend(wire_figures);
    out.push(Figure::timing(
        "mixed_wire_ping",
        "trivial call (minimal worker answering {}), engine socket",
        &ping,
    ));
    out.push(
        Figure::timing(
            "mixed_floor_after_list",
            "trivial call right after the minimal worker's own whole list, engine socket",
            &floor_after,
        )
        .twin(&ping)
        .note(format!(
            "the minimal worker on the same SDK answers the worker's whole list{} ({} p50, {} \
             rounds), then {{}}: what the SDK alone makes the next call wait. The SDK's \
             connection task writes the answer's value out as text before sending it ({} here \
             for the same value) and frees it after ({}), one call at a time",
            whole.said(),
            crate::results::show(floor_lists.p50, "ms"),
            floor_lists.runs,
            crate::results::show(sdk.write.p50, "ms"),
            crate::results::show(sdk.free.p50, "ms"),
        )),
    );
    out.push(
        Figure::new(
            "mixed_rss",
            "peak RSS, worker through the mixed run",
            "MiB",
            peak,
        )
        .check(
            31,
            LARGE,
            Check {
                what: "peak",
                measured: peak,
                cmp: Cmp::Below,
                limit: RSS_MAX_MIB,
                unit: "MiB",
            },
        )
        .note(format!(
            "VmHWM of the worker after its boot, the steady calls, {} mixed rounds and {} rounds \
             that start with a whole list{}",
            settings.iterations,
            measured.list.runs,
            whole.said()
        )),
    );
    if let Ok(url) = std::env::var("BENCH_ENGINE_URL") {
        eprintln!("mixed load, real iii engine at {url}");
        out.extend(real_engine(
            settings,
            &url,
            tree,
            work,
            &config_file,
            &mut plan,
            whole_request,
        ));
    }
    out
}

/// The same rounds through a real iii engine at `url` (`BENCH_ENGINE_URL`, not set in CI):
/// the worker binary connects to it, and an SDK client of the same engine calls it, with the
/// same targets as over the fake engine.
fn real_engine(
    settings: &Settings,
    url: &str,
    tree: &Path,
    work: &Path,
    config_file: &Path,
    plan: &mut Plan,
    whole: Value,
) -> Vec<Figure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let worker = Reaped(
        command(tree, config_file)
            .args(["--url", url])
            .stderr(std::fs::File::create(work.join("mixed-real-worker.log")).expect("log file"))
            .spawn()
            .expect("start the worker"),
    );
    let client = runtime.block_on(async { engine_client::client(url, "bench-mixed".into()) });
    let real = RealWire { runtime, client };
    let deadline = Instant::now() + BOOT_TIMEOUT;
    while !real.call("directory::skills::index", json!({})) {
        assert!(
            Instant::now() < deadline,
            "the worker never answered through {url}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let measured = measure_calls(settings, &real, plan, whole);
    let peak = status_mib(worker.0.id(), "VmHWM").unwrap_or(f64::NAN);
    drop(worker);
    // The minimal worker on the same engine: its trivial call alone, and right after it
    // answered the same whole list (what the engine and the SDK alone make that call wait).
    let _floor = floor_worker::start(url, &work.join("mixed-floor.json"));
    while !real.call(floor_worker::PING, json!({})) {
        assert!(
            Instant::now() < deadline,
            "the minimal worker never answered through {url}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let ping = crate::measure::measure(10, settings.iterations * 3, || {
        assert!(real.call(floor_worker::PING, json!({})), "ping");
    });
    let floor_after: Vec<Duration> = (0..settings.iterations.min(LIST_ROUNDS))
        .map(|_| {
            assert!(real.call(floor_worker::LIST, json!({})), "floor list");
            let start = Instant::now();
            assert!(real.call(floor_worker::PING, json!({})), "ping");
            start.elapsed()
        })
        .collect();
    let mut out = place_figures("real", "real iii engine", &measured);
    out.push(Figure::timing(
        "mixed_real_ping",
        "trivial call (minimal worker answering {}), real iii engine",
        &ping,
    ));
    out.push(
        Figure::timing(
            "mixed_real_floor_after_list",
            "trivial call right after the minimal worker's own whole list, real iii engine",
            &Sample::of(floor_after),
        )
        .twin(&ping),
    );
    out.push(
        Figure::new(
            "mixed_real_rss",
            "peak RSS, worker through the mixed run, real iii engine",
            "MiB",
            peak,
        )
        .note(format!("the engine at {url}")),
    );
    out
}
