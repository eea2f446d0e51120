//! How the suite measures: repeated timings with percentiles, the cached generated trees and
//! the suite's own working copies, and what `/proc` says about a process (CPU time, peak RSS).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use test_support::generate::{TreeSpec, write_tree};

/// Percentiles of repeated runs, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub runs: usize,
}

impl Sample {
    /// Percentiles of these durations (nearest rank).
    pub fn of(mut times: Vec<Duration>) -> Sample {
        assert!(!times.is_empty(), "a sample needs at least one run");
        times.sort();
        let at = |q: f64| {
            let rank = ((times.len() as f64 * q).ceil() as usize).clamp(1, times.len());
            times[rank - 1].as_secs_f64() * 1e3
        };
        Sample {
            p50: at(0.50),
            p95: at(0.95),
            p99: at(0.99),
            runs: times.len(),
        }
    }
}

/// Times `f` `runs` times after `warmup` untimed runs.
pub fn measure(warmup: usize, runs: usize, mut f: impl FnMut()) -> Sample {
    for _ in 0..warmup {
        f();
    }
    Sample::of(
        (0..runs.max(1))
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

/// As [`measure`], with the whole process's CPU time per call (ms, every thread, the warm-up
/// runs included): how much of the cores one call keeps busy.
pub fn measure_with_process_cpu(warmup: usize, runs: usize, f: impl FnMut()) -> (Sample, f64) {
    let cpu = cpu_seconds();
    let sample = measure(warmup, runs, f);
    let per_call_ms = (cpu_seconds() - cpu) * 1e3 / (warmup + runs.max(1)) as f64;
    (sample, per_call_ms)
}

/// Times `f` and `g` alternately, `runs` times each after `warmup` untimed rounds, so that a
/// figure and its floor see the same load on a shared machine.
pub fn measure_pair(
    warmup: usize,
    runs: usize,
    mut f: impl FnMut(),
    mut g: impl FnMut(),
) -> (Sample, Sample) {
    for _ in 0..warmup {
        f();
        g();
    }
    let mut times = (Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        f();
        times.0.push(start.elapsed());
        let start = Instant::now();
        g();
        times.1.push(start.elapsed());
    }
    (Sample::of(times.0), Sample::of(times.1))
}

/// The crate's folder: trees, work copies and results live under its `target/`.
pub fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A generated tree of `skills` skills under `target/bench-trees/<skills>`, written once (bodies
/// from `../shared/corpus`, or `$III_DIRECTORY_SHARED/corpus`, when present). The suite never writes into it: it may be shared.
pub fn tree(skills: usize) -> PathBuf {
    let base = manifest_dir().join(format!("target/bench-trees/{skills}"));
    let done = base.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&base);
        // The specs folder beside the checkout, or where `III_DIRECTORY_SHARED` says (a
        // worktree elsewhere), as the tests find it.
        let shared = std::env::var_os("III_DIRECTORY_SHARED")
            .map_or_else(|| manifest_dir().join("../shared"), PathBuf::from);
        let corpus = shared.join("corpus");
        let spec = TreeSpec {
            skills,
            seed: 1,
            corpus: corpus.is_dir().then_some(corpus),
        };
        write_tree(&base, &spec).expect("generate tree");
        std::fs::write(&done, "").expect("marker");
        // Let the files age past the racy window, so a warm reconcile reads nothing.
        std::thread::sleep(Duration::from_millis(2100));
    }
    base
}

/// The folders of a tree the index reads (not `data/`, where other tools keep index files).
pub const TREE_FOLDERS: [&str; 3] = ["skills", "agents", ".agents"];

/// A fresh copy of `source`'s folders at `dest` (replacing what was there), for the parts of
/// the suite that edit files or let a worker own an index.
pub fn copy_tree(source: &Path, dest: &Path) {
    let _ = std::fs::remove_dir_all(dest);
    std::fs::create_dir_all(dest).expect("create the work copy");
    for folder in TREE_FOLDERS {
        if source.join(folder).exists() {
            let status = Command::new("cp")
                .arg("-R")
                .arg(source.join(folder))
                .arg(dest)
                .status()
                .expect("run cp");
            assert!(status.success(), "copy {folder} of {}", source.display());
        }
    }
}

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The kernel's clock ticks per second for `/proc/<pid>/stat` times (USER_HZ, 100 on Linux).
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// CPU time (user + system, all threads) this process has used so far, in seconds.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3; utime and stime
    // are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / CLOCK_TICKS_PER_SECOND,
        _ => f64::NAN,
    }
}

/// A field of `/proc/<pid>/status` in kB (`VmHWM`, `VmRSS`), as MiB.
pub fn status_mib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
}

/// The load averages over 1, 5 and 15 minutes.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// A child process killed when dropped, so that a run that panics leaves no worker behind
/// (one would hold the run's output open).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
