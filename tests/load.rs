//! Load: 32 concurrent callers issue a mix of list, get, create, update and delete over all
//! three families, on a generated tree of 3,000 skills, for a sustained period, while an
//! editor thread rewrites files behind the library's back (so the watcher is always busy).
//! Two modes: in process (one `Arc<Directory>` shared by the callers, with its watcher), and
//! through the engine's wire protocol (the real `iii-directory` binary against the loopback
//! fake engine). Checks: no error other than the ones the contract calls for in a race
//! (counted apart, by code), no deadlock (every call bounded, a global deadline), bounded
//! memory (RSS sampled over the run), and at the end the index equals a fresh one. Prints
//! ops/s and p50/p95/p99 per operation.
//!
//! A test binary of its own, not a module of `library` or `worker`: the in-process mode samples
//! this process's RSS, which the other tests of a shared binary would move, and both modes
//! want the machine to themselves ([`SERIAL`] keeps them apart from each other).
//!
//! The defaults fit CI (`LOAD_SECONDS`, 4 per mode). A longer run:
//!
//! ```sh
//! LOAD_SECONDS=120 cargo test --release --test load -- --nocapture --test-threads=1
//! ```

use test_support::{common, fake_engine, worker_process};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_engine::FakeEngine;
use iii_directory::{Directory, ReadFunction, WriteFunction};
use iii_directory::{WatchOptions, Watcher};
use serde_json::{Value, json};
use test_support::generate::{Rng, TreeSpec, write_tree};
use worker_process::WorkerProcess;

const CALLERS: usize = 32;
const TREE_SKILLS: usize = 3_000;
/// The ids the callers write: small spaces, so creates, updates and deletes race.
const LOAD_SKILLS: usize = 48;
const LOAD_PROMPTS: usize = 8;
const LOAD_AGENTS: usize = 8;
/// The longest a single call may take before the run counts as a deadlock.
const CALL_LIMIT: Duration = Duration::from_secs(60);
/// How long after the callers stop the index may take to show the last external edits.
const SETTLE: Duration = Duration::from_secs(30);
/// RSS may grow after the warm-up by at most this factor plus [`RSS_SLACK`] (allocator arenas
/// for 32 threads, redb's page cache filling up).
const RSS_FACTOR: f64 = 1.5;
const RSS_SLACK: u64 = 48 << 20;

/// The two load tests run one after the other, so each has the machine to itself.
static SERIAL: Mutex<()> = Mutex::new(());

fn load_seconds() -> u64 {
    std::env::var("LOAD_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

// ---------------------------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------------------------

/// One operation kind of the mix, with its weight and the error codes the contract calls for
/// when it races another caller (a create of an id that now exists, a get, update or delete
/// of one just deleted).
struct Kind {
    label: &'static str,
    weight: usize,
    allowed: &'static [&'static str],
}

const MIX: &[Kind] = &[
    Kind {
        label: "skills::get tree",
        weight: 24,
        allowed: &[],
    },
    Kind {
        label: "skills::get load",
        weight: 8,
        allowed: &["D110"],
    },
    Kind {
        label: "skills::list prefix",
        weight: 13,
        allowed: &[],
    },
    Kind {
        label: "skills::list",
        weight: 3,
        allowed: &[],
    },
    Kind {
        label: "skills::create",
        weight: 9,
        allowed: &["D114"],
    },
    Kind {
        label: "skills::update",
        weight: 10,
        allowed: &["D110"],
    },
    Kind {
        label: "skills::delete",
        weight: 3,
        allowed: &["D110"],
    },
    Kind {
        label: "system-prompts::list",
        weight: 4,
        allowed: &[],
    },
    Kind {
        label: "system-prompts::get",
        weight: 4,
        allowed: &["D210"],
    },
    Kind {
        label: "system-prompts::create",
        weight: 4,
        allowed: &["D214"],
    },
    Kind {
        label: "system-prompts::update",
        weight: 3,
        allowed: &["D210"],
    },
    Kind {
        label: "system-prompts::delete",
        weight: 1,
        allowed: &["D210"],
    },
    Kind {
        label: "agents::list",
        weight: 3,
        allowed: &[],
    },
    Kind {
        label: "agents::get",
        weight: 3,
        allowed: &["D410"],
    },
    Kind {
        label: "agents::create",
        weight: 3,
        allowed: &["D414"],
    },
    Kind {
        label: "agents::update",
        weight: 2,
        allowed: &["D410"],
    },
    Kind {
        label: "agents::delete",
        weight: 1,
        allowed: &["D410"],
    },
];

fn pick_kind(rng: &mut Rng) -> &'static Kind {
    let total: usize = MIX.iter().map(|k| k.weight).sum();
    let mut n = rng.below(total);
    for kind in MIX {
        if n < kind.weight {
            return kind;
        }
        n -= kind.weight;
    }
    unreachable!("weights sum to total")
}

fn body(token: &str, rng: &mut Rng) -> String {
    let mut text = format!("# {token}\n\n");
    let size = [200, 1_000, 5_000][rng.below(3)];
    while text.len() < size {
        text.push_str(&format!("{token}: a line of load.\n"));
    }
    text
}

/// The function id and request of one call of `kind`.
fn request(kind: &Kind, rng: &mut Rng, tree_ids: &[String], token: &str) -> (&'static str, Value) {
    let load_skill = format!("load/k{}", rng.below(LOAD_SKILLS));
    let prompt = format!("lp{}", rng.below(LOAD_PROMPTS));
    let agent = format!("la{}", rng.below(LOAD_AGENTS));
    let content = body(token, rng);
    match kind.label {
        "skills::get tree" => (
            "directory::skills::get",
            json!({ "id": tree_ids[rng.below(tree_ids.len())] }),
        ),
        "skills::get load" => ("directory::skills::get", json!({ "id": load_skill })),
        "skills::list prefix" => {
            let id = &tree_ids[rng.below(tree_ids.len())];
            let ns = id.split('/').next().unwrap_or_default();
            (
                "directory::skills::list",
                json!({ "prefix": format!("{ns}/") }),
            )
        }
        "skills::list" => ("directory::skills::list", json!({})),
        "skills::create" => (
            "directory::skills::create",
            json!({ "id": load_skill, "content": content }),
        ),
        "skills::update" => (
            "directory::skills::update",
            json!({ "id": load_skill, "content": content }),
        ),
        "skills::delete" => ("directory::skills::delete", json!({ "id": load_skill })),
        "system-prompts::list" => ("directory::system-prompts::list", json!({})),
        "system-prompts::get" => ("directory::system-prompts::get", json!({ "name": prompt })),
        "system-prompts::create" | "system-prompts::update" => (
            if kind.label.ends_with("create") {
                "directory::system-prompts::create"
            } else {
                "directory::system-prompts::update"
            },
            json!({
                "name": prompt,
                "content": format!("---\ndescription: D {token}\n---\n{content}"),
            }),
        ),
        "system-prompts::delete" => (
            "directory::system-prompts::delete",
            json!({ "name": prompt }),
        ),
        "agents::list" => ("directory::agents::list", json!({})),
        "agents::get" => ("directory::agents::get", json!({ "id": agent })),
        "agents::create" | "agents::update" => (
            if kind.label.ends_with("create") {
                "directory::agents::create"
            } else {
                "directory::agents::update"
            },
            json!({
                "id": agent,
                "content": format!("---\nname: N {token}\nextends: iii\n---\n{content}"),
            }),
        ),
        "agents::delete" => ("directory::agents::delete", json!({ "id": agent })),
        other => unreachable!("unknown kind {other}"),
    }
}

/// How the callers reach the directory.
trait Api: Send + Sync {
    /// One call; an error is the message the caller would see.
    fn call(&self, function_id: &str, request: &Value) -> Result<Value, String>;
}

/// The `Dnnn` code a message starts with.
fn code_of(message: &str) -> Option<&str> {
    let code = message.get(..4)?;
    (code.starts_with('D') && code[1..].bytes().all(|b| b.is_ascii_digit())).then_some(code)
}

/// What one caller measured.
#[derive(Default)]
struct Tally {
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    /// Contract errors of a race, by operation and code.
    expected: BTreeMap<String, usize>,
    unexpected: Vec<String>,
}

/// Progress of the callers, for the watchdog: when each one's call in flight began (0 = none),
/// in microseconds since the run's start.
struct InFlight {
    started: Instant,
    since: Vec<AtomicU64>,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            started: Instant::now(),
            since: (0..CALLERS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn begin(&self, caller: usize) {
        let now = self.started.elapsed().as_micros() as u64 + 1;
        self.since[caller].store(now, Ordering::Relaxed);
    }

    fn end(&self, caller: usize) {
        self.since[caller].store(0, Ordering::Relaxed);
    }

    /// The caller stuck in one call for longer than `limit`, if any.
    fn stuck(&self, limit: Duration) -> Option<(usize, Duration)> {
        let now = self.started.elapsed().as_micros() as u64 + 1;
        self.since.iter().enumerate().find_map(|(i, since)| {
            let since = since.load(Ordering::Relaxed);
            let held = Duration::from_micros(now.saturating_sub(since));
            (since != 0 && held > limit).then_some((i, held))
        })
    }
}

fn caller(
    api: &dyn Api,
    n: usize,
    tree_ids: &[String],
    until: Instant,
    in_flight: &InFlight,
) -> Tally {
    let mut rng = Rng::new(0x10AD + n as u64);
    let mut tally = Tally::default();
    let mut i = 0;
    while Instant::now() < until {
        // Each caller starts on a kind of its own, then the next ones, before the weighted mix:
        // every kind is called even when a loaded machine allows each caller only a few calls.
        let kind = match MIX.get(i) {
            Some(_) => &MIX[(n + i) % MIX.len()],
            None => pick_kind(&mut rng),
        };
        i += 1;
        let token = format!("c{n}-{i}");
        let (function, request) = request(kind, &mut rng, tree_ids, &token);
        in_flight.begin(n);
        let started = Instant::now();
        let result = api.call(function, &request);
        let took = started.elapsed();
        in_flight.end(n);
        tally.latencies.entry(kind.label).or_default().push(took);
        if let Err(message) = result {
            match code_of(&message) {
                Some(code) if kind.allowed.contains(&code) => {
                    *tally
                        .expected
                        .entry(format!("{} {code}", kind.label))
                        .or_default() += 1;
                }
                _ => tally
                    .unexpected
                    .push(format!("{} {request}: {message}", kind.label)),
            }
        }
    }
    tally
}

/// Rewrites tree skills behind the directory's back until `stop`: each edit is written
/// beside the roots and renamed into place, so no reader ever sees half a file.
fn editor(base: PathBuf, files: Vec<PathBuf>, stop: Arc<AtomicBool>) -> usize {
    let staging = base.join(".staging");
    fs::create_dir_all(&staging).expect("staging folder");
    let mut rng = Rng::new(0xED17);
    let mut edits = 0;
    while !stop.load(Ordering::Relaxed) {
        let path = &files[rng.below(files.len())];
        let mut text = fs::read_to_string(path).expect("read a tree file");
        text.push_str(&format!("\nEdited {edits}.\n"));
        let temp = staging.join("edit.md");
        fs::write(&temp, text).expect("stage an edit");
        fs::rename(&temp, path).expect("rename the edit into place");
        edits += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    edits
}

/// The resident set of process `pid` (`self` for this one), in bytes.
fn rss(pid: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Run {
    tally: Tally,
    elapsed: Duration,
    edits: usize,
    rss: Vec<u64>,
}

/// Runs the 32 callers against `api` for the configured time, with the editor and a
/// watchdog; `rss_of` is the process whose memory is sampled; `housekeeping` runs with each
/// sample.
fn run_load(
    api: Arc<dyn Api>,
    base: &Path,
    tree_ids: &[String],
    rss_of: &str,
    housekeeping: &dyn Fn(),
) -> Run {
    let seconds = load_seconds();
    let tree_files: Vec<PathBuf> = tree_ids
        .iter()
        .take(200)
        .map(|id| base.join("skills").join(format!("{id}.md")))
        .filter(|p| p.is_file())
        .collect();
    assert!(!tree_files.is_empty(), "no tree file to edit");
    let stop = Arc::new(AtomicBool::new(false));
    let editor = {
        let (base, stop) = (base.to_path_buf(), stop.clone());
        std::thread::spawn(move || editor(base, tree_files, stop))
    };
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let deadline = until + CALL_LIMIT + Duration::from_secs(10);
    let in_flight = Arc::new(InFlight::new());
    let tree_ids: Arc<Vec<String>> = Arc::new(tree_ids.to_vec());
    let handles: Vec<_> = (0..CALLERS)
        .map(|n| {
            let (api, ids, in_flight) = (api.clone(), tree_ids.clone(), in_flight.clone());
            std::thread::spawn(move || caller(&*api, n, &ids, until, &in_flight))
        })
        .collect();
    let mut samples = Vec::new();
    while !handles.iter().all(|h| h.is_finished()) {
        samples.push(rss(rss_of));
        housekeeping();
        if let Some((caller, held)) = in_flight.stuck(CALL_LIMIT) {
            panic!("caller {caller} has been in one call for {held:?}: deadlock?");
        }
        assert!(
            Instant::now() < deadline,
            "the callers did not finish by the deadline: deadlock?"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let edits = editor.join().expect("the editor");
    let mut tally = Tally::default();
    for handle in handles {
        let t = handle.join().expect("a caller panicked");
        for (label, mut l) in t.latencies {
            tally.latencies.entry(label).or_default().append(&mut l);
        }
        for (key, n) in t.expected {
            *tally.expected.entry(key).or_default() += n;
        }
        tally.unexpected.extend(t.unexpected);
    }
    Run {
        tally,
        elapsed,
        edits,
        rss: samples,
    }
}

/// Prints the figures and checks errors and memory.
fn report(mode: &str, run: &mut Run, load_before: &str) {
    let total: usize = run.tally.latencies.values().map(Vec::len).sum();
    let secs = run.elapsed.as_secs_f64();
    println!(
        "load [{mode}]: {CALLERS} callers, {total} calls in {secs:.1}s = {:.0} ops/s; {} external edits; load average before {load_before}, after {}",
        total as f64 / secs,
        run.edits,
        loadavg()
    );
    println!(
        "  {:<24} {:>7} {:>8} {:>9} {:>9} {:>9}",
        "operation", "calls", "ops/s", "p50 ms", "p95 ms", "p99 ms"
    );
    for (label, l) in run.tally.latencies.iter_mut() {
        l.sort();
        println!(
            "  {label:<24} {:>7} {:>8.1} {:>9.2} {:>9.2} {:>9.2}",
            l.len(),
            l.len() as f64 / secs,
            ms(percentile(l, 0.50)),
            ms(percentile(l, 0.95)),
            ms(percentile(l, 0.99)),
        );
    }
    println!("  contract errors of races: {:?}", run.tally.expected);
    let samples = &run.rss;
    let warm = samples.get(samples.len() / 4).copied().unwrap_or_default();
    let peak = samples.iter().max().copied().unwrap_or_default();
    let last = samples.last().copied().unwrap_or_default();
    println!(
        "  RSS: after warm-up {} MiB, peak {} MiB, final {} MiB ({} samples)",
        warm >> 20,
        peak >> 20,
        last >> 20,
        samples.len()
    );
    assert!(
        run.tally.unexpected.is_empty(),
        "{} unexpected errors, first ones: {:#?}",
        run.tally.unexpected.len(),
        &run.tally.unexpected[..run.tally.unexpected.len().min(10)]
    );
    for kind in MIX {
        assert!(
            run.tally
                .latencies
                .get(kind.label)
                .is_some_and(|l| !l.is_empty()),
            "no {} call was made",
            kind.label
        );
    }
    assert!(warm > 0, "no RSS sample");
    let bound = (warm as f64 * RSS_FACTOR) as u64 + RSS_SLACK;
    assert!(
        last <= bound && peak <= bound,
        "RSS grew from {warm} after warm-up to peak {peak}, final {last} (bound {bound})"
    );
}

/// A generated tree of [`TREE_SKILLS`] skills under `base`, and its skill ids.
fn generate(base: &Path) -> Vec<String> {
    write_tree(
        base,
        &TreeSpec {
            skills: TREE_SKILLS,
            seed: 42,
            corpus: None,
        },
    )
    .expect("generate the tree");
    // The callers' own documents exist at the start, and creates outweigh deletes, so most
    // updates and deletes find their target (a miss is a contract error, but computing its
    // suggestions costs a scan of every id).
    for i in 0..LOAD_SKILLS {
        write_doc(base, &format!("skills/load/k{i}.md"), "# Load\n\nSeed.\n");
    }
    for i in 0..LOAD_PROMPTS {
        let text = "---\ndescription: Seed.\n---\nSeed.\n";
        write_doc(base, &format!("skills/system-prompts/lp{i}.md"), text);
    }
    for i in 0..LOAD_AGENTS {
        write_doc(
            base,
            &format!("agents/la{i}.md"),
            "---\nname: Seed\n---\nSeed.\n",
        );
    }
    // Tree skills the callers get by id: files directly under `skills_folder` (the local and
    // agents skills roots shadow or add some; those are left out).
    let mut ids = Vec::new();
    let root = base.join("skills");
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(&root).expect("under root");
            if path.is_dir() {
                let top = rel.components().next().map(|c| c.as_os_str().to_owned());
                if top.is_some_and(|t| t != "iii" && t != "load") {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "md")
                && !rel.to_string_lossy().contains("system-prompts")
            {
                ids.push(rel.with_extension("").to_string_lossy().into_owned());
            }
        }
    }
    ids.sort();
    ids
}

fn write_doc(base: &Path, rel: &str, text: &str) {
    let path = base.join(rel);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

/// The tree ids the index serves (shadowed namespaces and skipped files left out).
fn served(directory: &Directory, candidates: Vec<String>) -> Vec<String> {
    let listed: BTreeSet<String> = common::skill_ids(directory).into_iter().collect();
    candidates
        .into_iter()
        .filter(|id| listed.contains(id))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// In process
// ---------------------------------------------------------------------------------------------

struct InProcess(Arc<Directory>);

impl Api for InProcess {
    fn call(&self, function_id: &str, request: &Value) -> Result<Value, String> {
        let result = if let Some(f) = ReadFunction::from_id(function_id) {
            self.0.read(f, request, None)
        } else if let Some(f) = WriteFunction::from_id(function_id) {
            self.0.write(f, request, None)
        } else {
            panic!("unknown function {function_id}")
        };
        result.map_err(|e| e.to_string())
    }
}

#[test]
fn load_in_process() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let tree = common::Tree::new();
    let boot = Instant::now();
    let candidates = generate(tree.base());
    let directory = Arc::new(tree.open());
    let tree_ids = served(&directory, candidates);
    println!(
        "load [in process]: tree of {} served skills built in {:.1}s",
        tree_ids.len(),
        boot.elapsed().as_secs_f64()
    );
    let watcher = Watcher::start(directory.clone(), WatchOptions::default());
    let load_before = loadavg();
    let api: Arc<dyn Api> = Arc::new(InProcess(directory.clone()));
    let mut run = run_load(api, tree.base(), &tree_ids, "self", &|| {});
    report("in process", &mut run, &load_before);

    // The watcher catches up with the last edits on its own; then the index equals a fresh
    // one of the same disk.
    let fresh = common::fresh_index(directory.config());
    let want = common::dump(&fresh);
    let deadline = Instant::now() + SETTLE;
    loop {
        let got = common::dump(&directory);
        if got == want {
            break;
        }
        let differ: Vec<&String> = want
            .keys()
            .chain(got.keys())
            .filter(|k| want.get(*k) != got.get(*k))
            .take(5)
            .collect();
        assert!(
            Instant::now() < deadline,
            "the index never matched a fresh one; first differences at {differ:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    watcher.stop();
}

// ---------------------------------------------------------------------------------------------
// Through the fake engine
// ---------------------------------------------------------------------------------------------

struct Wire {
    engine: Arc<FakeEngine>,
    runtime: tokio::runtime::Handle,
}

impl Api for Wire {
    fn call(&self, function_id: &str, request: &Value) -> Result<Value, String> {
        let engine = self.engine.clone();
        self.runtime
            .block_on(engine.invoke_with(function_id, request.clone(), None, CALL_LIMIT))
            .map_err(|e| {
                if e.code == fake_engine::FAKE_TIMEOUT {
                    panic!("{function_id} got no answer within {CALL_LIMIT:?}: deadlock?");
                }
                // A handler's error comes back as `invocation_failed`, "handler error: <ours>".
                match e.message.strip_prefix("handler error: ") {
                    Some(ours) if e.code == "invocation_failed" => ours.to_string(),
                    _ => format!("{} {}", e.code, e.message),
                }
            })
    }
}

#[test]
fn load_through_the_fake_engine() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let tree = common::Tree::new();
    let boot = Instant::now();
    let candidates = generate(tree.base());
    // Every namespace is an installed worker, so `filter_unregistered` hides nothing.
    let installed: BTreeSet<String> = candidates
        .iter()
        .filter_map(|id| id.split('/').next())
        .chain(["load"])
        .map(str::to_string)
        .collect();
    let engine = Arc::new(runtime.block_on(FakeEngine::start()));
    let workers: Vec<Value> = installed.iter().map(|n| json!({ "name": n })).collect();
    engine.respond("worker::list", json!({ "workers": workers }));
    engine.canned_configuration_worker();
    let worker = WorkerProcess::spawn(
        engine.url(),
        tree.base(),
        None,
        &[("RUST_LOG", Some("warn"))],
    );
    let stderr = || worker.stderr();
    let up = Duration::from_secs(120);
    let functions = MIX.iter().map(|k| {
        format!(
            "directory::{}",
            k.label.split(' ').next().unwrap_or_default()
        )
    });
    runtime.block_on(async {
        if let Err(e) = engine.wait_ready(up).await {
            panic!("{e}\nworker stderr:\n{}", stderr());
        }
        for id in functions {
            if let Err(e) = engine.wait_function(&id, up).await {
                panic!("{e}\nworker stderr:\n{}", stderr());
            }
        }
    });
    let wire = Wire {
        engine: engine.clone(),
        runtime: runtime.handle().clone(),
    };
    // The worker answers once its boot reconcile is done: list until the tree is served.
    let deadline = Instant::now() + up;
    let listed = loop {
        let list = wire.call("directory::skills::list", &json!({}));
        let count = list
            .as_ref()
            .map_or(0, |l| l["skills"].as_array().map_or(0, Vec::len));
        if count >= TREE_SKILLS {
            break list.expect("counted");
        }
        assert!(
            Instant::now() < deadline,
            "the worker never served the tree: {list:?}\nworker stderr:\n{}",
            stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let served: BTreeSet<&str> = listed["skills"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    let tree_ids: Vec<String> = candidates
        .into_iter()
        .filter(|id| served.contains(id.as_str()))
        .collect();
    println!(
        "load [fake engine]: worker up with {} served skills in {:.1}s",
        tree_ids.len(),
        boot.elapsed().as_secs_f64()
    );
    let pid = worker.pid().to_string();
    let load_before = loadavg();
    let api: Arc<dyn Api> = Arc::new(wire);
    // The fake keeps every frame it sees: forget them as the run goes.
    let housekeeping_engine = engine.clone();
    let mut run = run_load(api.clone(), tree.base(), &tree_ids, &pid, &move || {
        housekeeping_engine.clear()
    });
    report("fake engine", &mut run, &load_before);

    // The worker's watcher catches up; then its answers equal a fresh index's.
    let fresh = common::fresh_index(&tree.config());
    let wire_dump = || {
        let mut out = BTreeMap::new();
        for f in [
            "directory::skills::list",
            "directory::system-prompts::list",
            "directory::agents::list",
        ] {
            out.insert(f.to_string(), api.call(f, &json!({})));
        }
        out
    };
    let want: BTreeMap<String, Result<Value, String>> = [
        ReadFunction::SkillsList,
        ReadFunction::SystemPromptsList,
        ReadFunction::AgentsList,
    ]
    .into_iter()
    .map(|f| {
        let answer = fresh
            .read(f, &json!({}), Some(&installed))
            .map_err(|e| e.to_string());
        (f.id().to_string(), answer)
    })
    .collect();
    let deadline = Instant::now() + SETTLE;
    loop {
        let got = wire_dump();
        if got == want {
            break;
        }
        let differ: Vec<&String> = want
            .keys()
            .filter(|k| want.get(*k) != got.get(*k))
            .collect();
        assert!(
            Instant::now() < deadline,
            "the worker's index never matched a fresh one: {differ:?}\nworker stderr:\n{}",
            stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let text = stderr();
    assert!(!text.contains("panicked"), "the worker panicked:\n{text}");
    drop(worker);
}
