//! Live UIs on a busy tree (issue 16), through the loopback fake engine and the real worker
//! binary: 8 pollers refreshing `skills::list` every 100 ms, 8 agents calling `skills::get`
//! back to back, and 2 writers updating a skill every 250 ms each; run twice, once with the
//! pollers on `since_revision` (deltas) and once on `if_revision` alone (every changed
//! revision is the whole list again). Prints, for each, throughput, p50/p99 per call and the
//! worker's peak RSS.
//!
//! Checks, always: with `since_revision` every poll after the first is `unchanged` or a delta
//! holding only rows the writers changed (never more than the writes in flight since the
//! poller's previous answer, never a removed id, never the whole list), and a poller that
//! applied every delta holds exactly the whole list at the end. With `DELTA_LOAD_TARGETS=1`
//! also the issue's targets with the writers running: `get` p99 under 25 ms and at least
//! 1,000 calls/s.
//!
//! The defaults fit CI (1,000 skills, 3 s per run). The issue's figures:
//!
//! ```sh
//! DELTA_LOAD_SKILLS=10000 DELTA_LOAD_SECONDS=30 DELTA_LOAD_TARGETS=1 \
//!   cargo test --release --test worker load_deltas:: -- --nocapture
//! ```

use test_support::{fake_engine, worker_process};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_engine::FakeEngine;
use serde_json::{Value, json};
use test_support::generate::{Rng, TreeSpec, write_tree};
use worker_process::WorkerProcess;

const POLLERS: usize = 8;
const AGENTS: usize = 8;
const WRITERS: usize = 2;
const POLL_EVERY: Duration = Duration::from_millis(100);
/// 4 updates a second per writer.
const WRITE_EVERY: Duration = Duration::from_millis(250);
/// Skills each writer updates, in turn.
const WRITER_IDS: usize = 40;
/// The issue's targets, with the writers running.
const GET_P99_TARGET: Duration = Duration::from_millis(25);
const CALLS_PER_SECOND_TARGET: f64 = 1_000.0;
/// The longest one call may take before the run counts as stuck.
const CALL_LIMIT: Duration = Duration::from_secs(60);
const UP_WITHIN: Duration = Duration::from_secs(300);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}"))
        })
        .unwrap_or(default)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Pollers send `since_revision`: unchanged, a delta, or (first) the whole list.
    Since,
    /// Pollers send `if_revision`: unchanged, or the whole list.
    IfRevision,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Since => "since_revision",
            Mode::IfRevision => "if_revision only",
        }
    }

    fn request(self, held: u64) -> Value {
        match self {
            Mode::Since => json!({ "since_revision": held }),
            Mode::IfRevision => json!({ "if_revision": held }),
        }
    }
}

/// One run's worker and engine.
struct Bus {
    runtime: tokio::runtime::Runtime,
    engine: Arc<FakeEngine>,
    worker: WorkerProcess,
}

impl Bus {
    fn start(base: &Path, installed: &BTreeSet<String>) -> Bus {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let engine = Arc::new(runtime.block_on(FakeEngine::start()));
        let workers: Vec<Value> = installed.iter().map(|n| json!({ "name": n })).collect();
        engine.respond("worker::list", json!({ "workers": workers }));
        fake_configuration(&engine);
        let worker = WorkerProcess::spawn(engine.url(), base, None, &[("RUST_LOG", Some("warn"))]);
        runtime.block_on(async {
            for wait in [
                engine.wait_ready(UP_WITHIN).await.map(drop),
                engine
                    .wait_function("directory::skills::update", UP_WITHIN)
                    .await
                    .map(drop),
            ] {
                worker.expect("the worker comes up", wait);
            }
        });
        // The answers are large and many: the fake keeps none of them.
        engine.keep_history(false);
        Bus {
            runtime,
            engine,
            worker,
        }
    }

    fn call(&self, function_id: &str, request: Value) -> Result<Value, String> {
        let engine = self.engine.clone();
        self.runtime
            .block_on(engine.invoke_with(function_id, request, None, CALL_LIMIT))
            .map_err(|e| format!("{function_id}: {} {}", e.code, e.message))
    }

    /// The worker's high-water mark of resident memory so far (`VmHWM`).
    fn peak_rss(&self) -> u64 {
        self.worker.memory_bytes("VmHWM")
    }
}

/// The configuration worker: NOT_FOUND until `register` stores its initial value.
fn fake_configuration(engine: &FakeEngine) {
    let stored = Arc::new(Mutex::new(None::<Value>));
    let for_get = stored.clone();
    engine.respond_with("configuration::get", move |data| {
        match for_get.lock().expect("stored").clone() {
            Some(value) => Ok(json!({ "id": data["id"], "value": value })),
            None => Err(("NOT_FOUND".to_string(), "not found".to_string())),
        }
    });
    engine.respond_with("configuration::register", move |data| {
        let mut value = stored.lock().expect("stored");
        if value.is_none()
            && let Some(initial) = data.get("initial_value")
        {
            *value = Some(initial.clone());
        }
        Ok(data)
    });
}

/// What the callers of one run measured.
#[derive(Default)]
struct Tally {
    /// Latencies by call type (`get`, `list`, `update`); the pollers' first, whole answers
    /// are left out (the initial load, not a refresh).
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    /// Poll answers by kind, and the rows they carried.
    answers: BTreeMap<&'static str, usize>,
    poll_rows: usize,
    polls: usize,
    problems: Vec<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        for (k, mut v) in other.latencies {
            self.latencies.entry(k).or_default().append(&mut v);
        }
        for (k, n) in other.answers {
            *self.answers.entry(k).or_default() += n;
        }
        self.poll_rows += other.poll_rows;
        self.polls += other.polls;
        self.problems.extend(other.problems);
    }
}

/// The writes the writers started and finished, for the bound on a delta's size.
#[derive(Default)]
struct Writes {
    started: AtomicU64,
    done: AtomicU64,
}

/// A poller's rows, keyed by the id the answer shows (only poller 0 keeps them).
type Rows = BTreeMap<String, Value>;

fn rows_of(list: &Value) -> Rows {
    list.as_array()
        .expect("rows")
        .iter()
        .map(|r| (r["id"].as_str().expect("id").to_string(), r.clone()))
        .collect()
}

struct Poller<'a> {
    bus: &'a Bus,
    mode: Mode,
    writes: &'a Writes,
    written: &'a BTreeSet<String>,
    keep_rows: bool,
}

impl Poller<'_> {
    /// Polls until `until`; returns what it measured, its last revision and (poller 0) rows.
    fn run(&self, until: Instant) -> (Tally, u64, Option<Rows>) {
        let mut tally = Tally::default();
        let mut held = 0u64;
        let mut rows: Option<Rows> = None;
        let mut next = Instant::now();
        let mut first = true;
        // Writes done before the previous poll was sent are in the revision it answered with.
        let mut done_before_previous = 0;
        while Instant::now() < until {
            let done_before = self.writes.done.load(Ordering::SeqCst);
            let started = Instant::now();
            let answer = match self
                .bus
                .call("directory::skills::list", self.mode.request(held))
            {
                Ok(answer) => answer,
                Err(e) => {
                    tally.problems.push(e);
                    break;
                }
            };
            let took = started.elapsed();
            let started_by_now = self.writes.started.load(Ordering::SeqCst);
            let in_flight = started_by_now - done_before_previous;
            let kind = self.check(&answer, first, in_flight, &mut tally);
            done_before_previous = done_before;
            *tally.answers.entry(kind).or_default() += 1;
            if !first {
                tally.latencies.entry("list").or_default().push(took);
                tally.polls += 1;
            }
            if self.keep_rows {
                rows = Some(apply(rows, &answer));
            }
            held = answer["revision"].as_u64().expect("a revision");
            first = false;
            next += POLL_EVERY;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        (tally, held, rows)
    }

    /// The kind of a poll answer; with `since_revision`, what it may hold is checked.
    fn check(
        &self,
        answer: &Value,
        first: bool,
        in_flight: u64,
        tally: &mut Tally,
    ) -> &'static str {
        if answer["unchanged"] == json!(true) {
            return "unchanged";
        }
        if let Some(changed) = answer["changed"].as_array() {
            let removed = answer["removed"].as_array().map_or(0, Vec::len);
            if !first {
                tally.poll_rows += changed.len() + removed;
            }
            let ids: Vec<&str> = changed.iter().filter_map(|r| r["id"].as_str()).collect();
            if removed != 0 || ids.iter().any(|id| !self.written.contains(*id)) {
                tally.problems.push(format!(
                    "a delta holds rows no writer changed: changed {ids:?}, removed {}",
                    answer["removed"]
                ));
            }
            if ids.len() as u64 > in_flight {
                tally.problems.push(format!(
                    "a delta of {} rows when at most {in_flight} writes can have landed since the previous answer",
                    ids.len()
                ));
            }
            return "delta";
        }
        let rows = answer["skills"].as_array().map_or(0, Vec::len);
        if !first {
            tally.poll_rows += rows;
            if self.mode == Mode::Since {
                tally.problems.push(format!(
                    "a whole list ({rows} rows) answered a refresh: {}",
                    answer["full"]
                ));
            }
        }
        "whole"
    }
}

/// A client's rows after an answer.
fn apply(rows: Option<Rows>, answer: &Value) -> Rows {
    if answer["unchanged"] == json!(true) {
        return rows.expect("unchanged answers a client holding rows");
    }
    if let Some(skills) = answer.get("skills") {
        return rows_of(skills);
    }
    let mut rows = rows.expect("a delta answers a client holding rows");
    for id in answer["removed"].as_array().expect("removed") {
        rows.remove(id.as_str().expect("an id"));
    }
    rows.extend(rows_of(&answer["changed"]));
    rows
}

fn agent(bus: &Bus, ids: &[String], seed: u64, until: Instant) -> Tally {
    let mut tally = Tally::default();
    let mut rng = Rng::new(seed);
    while Instant::now() < until {
        let id = &ids[rng.below(ids.len())];
        let started = Instant::now();
        match bus.call("directory::skills::get", json!({ "id": id })) {
            Ok(_) => tally
                .latencies
                .entry("get")
                .or_default()
                .push(started.elapsed()),
            Err(e) => {
                tally.problems.push(e);
                break;
            }
        }
    }
    tally
}

fn writer(bus: &Bus, ids: &[String], w: usize, writes: &Writes, stop: &AtomicBool) -> Tally {
    let mut tally = Tally::default();
    let mut next = Instant::now();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let id = &ids[n % ids.len()];
        let content = format!(
            "---\ntitle: Written {w}-{n}\ndescription: Updated by writer {w}.\n---\n# Written\n\nWrite {n} of writer {w}.\n"
        );
        writes.started.fetch_add(1, Ordering::SeqCst);
        let started = Instant::now();
        let result = bus.call(
            "directory::skills::update",
            json!({ "id": id, "content": content }),
        );
        writes.done.fetch_add(1, Ordering::SeqCst);
        match result {
            Ok(_) => tally
                .latencies
                .entry("update")
                .or_default()
                .push(started.elapsed()),
            Err(e) => tally.problems.push(e),
        }
        n += 1;
        next += WRITE_EVERY;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    tally
}

/// What one run measured.
struct Figures {
    mode: Mode,
    seconds: f64,
    tally: Tally,
    peak_rss: u64,
}

impl Figures {
    fn calls(&self) -> usize {
        self.tally.latencies.values().map(Vec::len).sum()
    }

    fn per_second(&self, kind: &str) -> f64 {
        self.tally.latencies.get(kind).map_or(0, Vec::len) as f64 / self.seconds
    }

    fn percentile(&self, kind: &str, p: f64) -> Duration {
        let Some(l) = self.tally.latencies.get(kind) else {
            return Duration::ZERO;
        };
        let mut l = l.clone();
        l.sort();
        if l.is_empty() {
            return Duration::ZERO;
        }
        l[((l.len() as f64 - 1.0) * p).round() as usize]
    }

    fn row(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let pair = |kind: &str| {
            format!(
                "{:.1} / {:.1} ms",
                ms(self.percentile(kind, 0.5)),
                ms(self.percentile(kind, 0.99))
            )
        };
        format!(
            "| {} | {:.0} | {:.0} | {} | {} | {} | {:.1} | {} MiB |",
            self.mode.label(),
            self.calls() as f64 / self.seconds,
            self.per_second("get"),
            pair("get"),
            pair("list"),
            pair("update"),
            self.tally.poll_rows as f64 / self.tally.polls.max(1) as f64,
            self.peak_rss >> 20,
        )
    }
}

const HEADER: &str = "| pollers on | calls/s | get/s | get p50 / p99 | list p50 / p99 | update p50 / p99 | rows per refresh | worker peak RSS |\n| --- | --- | --- | --- | --- | --- | --- | --- |";

fn run(
    mode: Mode,
    base: &Path,
    installed: &BTreeSet<String>,
    ids: &[String],
    seconds: u64,
) -> Figures {
    let bus = Bus::start(base, installed);
    // The worker answers once its boot reconcile is done.
    let deadline = Instant::now() + UP_WITHIN;
    while bus
        .call("directory::skills::get", json!({ "id": ids[0] }))
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the worker never served the tree\n{}",
            bus.worker.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let written: BTreeSet<String> = ids[..WRITERS * WRITER_IDS].iter().cloned().collect();
    let writes = Writes::default();
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut tally = Tally::default();
    let mut last = None;
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let mine = &ids[w * WRITER_IDS..(w + 1) * WRITER_IDS];
                let (bus, writes, stop) = (&bus, &writes, &stop);
                scope.spawn(move || writer(bus, mine, w, writes, stop))
            })
            .collect();
        let agents: Vec<_> = (0..AGENTS)
            .map(|a| {
                let bus = &bus;
                scope.spawn(move || agent(bus, ids, 0xA6E7 + a as u64, until))
            })
            .collect();
        let pollers: Vec<_> = (0..POLLERS)
            .map(|p| {
                let poller = Poller {
                    bus: &bus,
                    mode,
                    writes: &writes,
                    written: &written,
                    keep_rows: p == 0,
                };
                scope.spawn(move || poller.run(until))
            })
            .collect();
        for handle in agents {
            tally.merge(handle.join().expect("an agent panicked"));
        }
        for (p, handle) in pollers.into_iter().enumerate() {
            let (t, held, rows) = handle.join().expect("a poller panicked");
            tally.merge(t);
            if p == 0 {
                last = Some((held, rows));
            }
        }
        stop.store(true, Ordering::SeqCst);
        for handle in writers {
            tally.merge(handle.join().expect("a writer panicked"));
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    // Poller 0 catches up once more; then it holds the whole list.
    if let Some((held, Some(rows))) = last {
        let answer = bus
            .call("directory::skills::list", mode.request(held))
            .expect("catch up");
        let rows = apply(Some(rows), &answer);
        let whole = bus
            .call("directory::skills::list", json!({}))
            .expect("the whole list");
        assert!(
            rows == rows_of(&whole["skills"]),
            "[{}] the poller's rows differ from the whole list",
            mode.label()
        );
    }
    let peak_rss = bus.peak_rss();
    let stderr = bus.worker.stderr();
    assert!(
        !stderr.contains("panicked"),
        "the worker panicked:\n{stderr}"
    );
    drop(bus);
    Figures {
        mode,
        seconds,
        tally,
        peak_rss,
    }
}

/// The generated tree, the namespaces (all installed, so the filter hides nothing) and the
/// skill ids callers read and write: files directly under `skills_folder`.
fn lay_out(base: &Path, skills: usize) -> (BTreeSet<String>, Vec<String>) {
    write_tree(
        base,
        &TreeSpec {
            skills,
            seed: 16,
            corpus: None,
        },
    )
    .expect("generate the tree");
    let root = base.join("skills");
    let mut ids = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(&root).expect("under root");
            let top = rel.components().next().map(|c| c.as_os_str().to_owned());
            if path.is_dir() {
                // The local root (`skills/iii`) shadows namespaces; its skills are left out.
                if top.is_some_and(|t| t != "iii") {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "md")
                && rel.components().count() > 1
                && !rel.to_string_lossy().contains("system-prompts")
                && !rel.ends_with("index.md")
            {
                ids.push(rel.with_extension("").to_string_lossy().into_owned());
            }
        }
    }
    // A namespace with a folder in the local root (`skills/iii`) is shadowed whole.
    let local: BTreeSet<String> = fs::read_dir(root.join("iii"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.retain(|id| !local.contains(id.split('/').next().unwrap_or_default()));
    ids.sort();
    // Shuffled, so that the writers' ids (the first ones) come from a spread of namespaces.
    let mut rng = Rng::new(16);
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i + 1));
    }
    let installed = ids
        .iter()
        .filter_map(|id| id.split('/').next())
        .map(str::to_string)
        .collect();
    (installed, ids)
}

#[test]
fn pollers_on_since_revision_receive_only_the_changed_rows() {
    let skills = env_u64("DELTA_LOAD_SKILLS", 1_000) as usize;
    let seconds = env_u64("DELTA_LOAD_SECONDS", 3);
    let targets = std::env::var_os("DELTA_LOAD_TARGETS").is_some();
    let tree = tempfile::tempdir().expect("temp dir");
    let (installed, ids) = lay_out(tree.path(), skills);
    assert!(
        ids.len() > WRITERS * WRITER_IDS,
        "{} skills are too few for the writers",
        ids.len()
    );
    let mut figures = Vec::new();
    for mode in [Mode::Since, Mode::IfRevision] {
        figures.push(run(mode, tree.path(), &installed, &ids, seconds));
    }
    println!(
        "\nload_deltas: {skills} skills, {seconds} s per run; {POLLERS} pollers every {} ms, {AGENTS} agents calling get back to back, {WRITERS} writers at one update every {} ms each",
        POLL_EVERY.as_millis(),
        WRITE_EVERY.as_millis()
    );
    println!("{HEADER}");
    for f in &figures {
        println!("{}", f.row());
    }
    for f in &figures {
        println!("  [{}] poll answers: {:?}", f.mode.label(), f.tally.answers);
    }
    for f in &figures {
        assert!(
            f.tally.problems.is_empty(),
            "[{}] {} problems, first: {:#?}",
            f.mode.label(),
            f.tally.problems.len(),
            &f.tally.problems[..f.tally.problems.len().min(5)]
        );
        for kind in ["get", "list", "update"] {
            assert!(
                f.tally.latencies.get(kind).is_some_and(|l| !l.is_empty()),
                "[{}] no {kind} call",
                f.mode.label()
            );
        }
    }
    let deltas = &figures[0];
    assert!(
        deltas.tally.answers.get("delta").is_some_and(|n| *n > 0),
        "the pollers never received a delta: {:?}",
        deltas.tally.answers
    );
    if targets {
        let p99 = deltas.percentile("get", 0.99);
        assert!(p99 < GET_P99_TARGET, "get p99 {p99:?} with since_revision");
        let rate = deltas.calls() as f64 / deltas.seconds;
        assert!(
            rate >= CALLS_PER_SECOND_TARGET,
            "{rate:.0} calls/s with since_revision"
        );
    }
}
