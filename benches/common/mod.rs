//! What the benchmarks share: the cached generated trees and percentile measurement.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iii_directory::generate::{TreeSpec, write_tree};

/// Median and 99th percentile of repeated runs.
pub struct Sample {
    pub p50: Duration,
    pub p99: Duration,
}

/// Times `f` `iterations` times (after one warm-up run).
pub fn measure(iterations: usize, mut f: impl FnMut()) -> Sample {
    f();
    let mut times: Vec<Duration> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    Sample {
        p50: times[times.len() / 2],
        p99: times[(times.len() * 99 / 100).min(times.len() - 1)],
    }
}

/// A generated tree of `skills` skills under `target/bench-trees/<skills>`, written once (bodies
/// from `../shared/corpus` when present).
pub fn tree(skills: usize) -> PathBuf {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/bench-trees/{skills}"));
    let done = base.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&base);
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
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

pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
