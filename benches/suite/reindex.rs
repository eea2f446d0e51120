//! Reconcile figures: a cold reindex (no index file), a warm boot with nothing changed (open the
//! existing index and reconcile, as a restarted worker does) and with 1% of the skills changed,
//! beside the rescan baseline and the floors (walk and stat; walk and read every byte).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use iii_directory::Root;
use iii_directory::config::Config;
use iii_directory::testing::fresh_views;
use iii_directory::testing::walk;
use iii_directory::{Directory, Roots};
use rayon::prelude::*;
use test_support::generate::Rng;

use crate::Settings;
use crate::measure::{Sample, cpu_seconds, measure, measure_pair};
use crate::reads::TARGET_SKILLS;
use crate::results::{Check, Cmp, Figure};

/// A warm boot with nothing changed stays within this many times the walk-and-stat floor…
const WARM_MAX_OVER_FLOOR: f64 = 3.0;
/// … and under this at 50,000 skills (ms).
const WARM_50K_MAX_MS: f64 = 1_000.0;
/// A cold reindex of 50,000 skills stays under this (ms)…
const COLD_50K_MAX_MS: f64 = 15_000.0;
/// … using both cores: CPU time over wall time at least this.
const COLD_MIN_CPU_USE: f64 = 1.5;
/// Issue 15: a cold reindex of 50,000 skills under this (ms)…
const COLD_50K_MAX_MS_15: f64 = 4_000.0;
/// … with CPU time over wall time at least this on 2 cores.
const COLD_MIN_CPU_USE_15: f64 = 1.7;
/// The tree size of the absolute targets.
const LARGE: usize = 50_000;
/// An index file at most this many times the markdown it indexes.
const INDEX_MAX_OVER_CONTENT: f64 = 2.0;

/// The walk-and-stat floor and the rescan baseline, measured once and shared by the figures.
pub struct Floors {
    pub walk: Sample,
    pub rescan: Sample,
}

pub fn floors(settings: &Settings, roots: &Roots) -> Floors {
    Floors {
        walk: measure(1, settings.iterations.min(20), || {
            black_box(walk(roots));
        }),
        rescan: measure(0, settings.baseline_runs, || {
            black_box(fresh_views(roots));
        }),
    }
}

/// Markdown files under the roots and their bytes (what the index covers).
pub fn content(roots: &Roots) -> (usize, u64) {
    let found = walk(roots);
    let bytes = found.files.values().map(|stat| stat.size).sum();
    (found.files.len(), bytes)
}

/// Cold reindexes: delete the index, open, reconcile. Returns the figure and the directory,
/// left open and up to date.
pub fn cold(settings: &Settings, config: &Config, floors: &Floors) -> (Figure, Directory) {
    let runs = settings.cold_runs;
    let mut times = Vec::with_capacity(runs);
    let mut cpu = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        drop(last.take());
        let _ = iii_directory::remove_index(&config.paths.index_path);
        let (wall0, cpu0) = (Instant::now(), cpu_seconds());
        let directory = Directory::open(config.clone()).expect("open");
        let report = directory.reconcile().expect("cold reconcile");
        let wall = wall0.elapsed();
        cpu.push((cpu_seconds() - cpu0) / wall.as_secs_f64());
        times.push(wall);
        assert!(report.read > 0, "a cold reindex reads every file");
        last = Some(directory);
    }
    let sample = Sample::of(times);
    let cpu_use = cpu.iter().sum::<f64>() / cpu.len() as f64;
    let roots = Roots::from_paths(&config.paths);
    let read_floor = measure(1, settings.baseline_runs, || {
        black_box(read_every_byte(&roots));
    });
    let met = sample.p50 < COLD_50K_MAX_MS && cpu_use >= COLD_MIN_CPU_USE;
    let figure = Figure::timing(
        "cold_reindex",
        "cold reindex (delete, open, reconcile)",
        &sample,
    )
    .baseline("rescan", floors.rescan.p50)
    .floor("walk + read every byte", read_floor.p50)
    .target(5, "<15 s using both cores", LARGE, met)
    .check(
        15,
        LARGE,
        Check {
            what: "p50",
            measured: sample.p50,
            cmp: Cmp::Below,
            limit: COLD_50K_MAX_MS_15,
            unit: "ms",
        },
    )
    .check(
        15,
        LARGE,
        Check {
            what: "CPU time / wall time",
            measured: cpu_use,
            cmp: Cmp::AtLeast,
            limit: COLD_MIN_CPU_USE_15,
            unit: "",
        },
    )
    .note(format!(
        "CPU time / wall time {cpu_use:.2} on {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    ));
    (figure, last.expect("at least one cold run"))
}

/// Walk, then read every file's bytes in parallel: what any index built from scratch pays.
fn read_every_byte(roots: &Roots) -> u64 {
    let found = walk(roots);
    found
        .files
        .par_iter()
        .map(|((root, rel), _)| {
            std::fs::read(roots.file(*root, rel)).map_or(0, |bytes| bytes.len() as u64)
        })
        .sum()
}

/// Reconcile alone on an open, up-to-date directory, alternating with its walk-and-stat floor.
pub fn warm_reconcile(settings: &Settings, directory: &Directory, floors: &Floors) -> Figure {
    let mut read = 0;
    let roots = directory.roots().clone();
    let (sample, walked) = measure_pair(
        1,
        settings.iterations.min(20),
        || read += directory.reconcile().expect("reconcile").read,
        || {
            black_box(walk(&roots));
        },
    );
    Figure::timing(
        "warm_reconcile",
        "reconcile, nothing changed (index open)",
        &sample,
    )
    .baseline("rescan", floors.rescan.p50)
    .floor("walk + stat", walked.p50)
    .note(format!("{read} files read over all runs"))
}

/// A boot on an existing index with nothing changed: open it, reconcile. `config`'s index must
/// be up to date and not open.
pub fn warm_boot(settings: &Settings, config: &Config, floors: &Floors) -> Figure {
    let mut read = 0;
    let roots = Roots::from_paths(&config.paths);
    let (sample, walked) = measure_pair(
        1,
        settings.iterations.min(10),
        || {
            let directory = Directory::open(config.clone()).expect("open");
            read += directory.reconcile().expect("reconcile").read;
        },
        || {
            black_box(walk(&roots));
        },
    );
    let over_floor = sample.p50 / walked.p50;
    let (text, at, met) = if settings.skills >= LARGE {
        ("<1 s", LARGE, sample.p50 < WARM_50K_MAX_MS)
    } else {
        (
            "≤3× floor",
            TARGET_SKILLS,
            over_floor <= WARM_MAX_OVER_FLOOR,
        )
    };
    Figure::timing(
        "warm_boot",
        "warm boot, nothing changed (open + reconcile)",
        &sample,
    )
    .baseline("rescan", floors.rescan.p50)
    .floor("walk + stat", walked.p50)
    .target(5, text, at, met)
    .note(format!("{read} files read over all runs"))
}

/// A boot after 1% of the skill files changed while nothing ran. Edits files of `config`'s
/// folders, which must be the suite's own copy.
pub fn boot_one_percent(settings: &Settings, config: &Config, floors: &Floors) -> Figure {
    let roots = Roots::from_paths(&config.paths);
    let found = walk(&roots);
    let mut skills: Vec<PathBuf> = found
        .files
        .keys()
        .filter(|(root, _)| *root == Root::Skills)
        .map(|(root, rel)| roots.file(*root, rel))
        .collect();
    let count = (skills.len() / 100).max(1);
    let mut rng = Rng::new(7);
    let chosen: Vec<(PathBuf, String)> = (0..count)
        .map(|_| {
            let path = skills.swap_remove(rng.below(skills.len()));
            let text = std::fs::read_to_string(&path).expect("read a skill");
            (path, text)
        })
        .collect();
    let mut times = Vec::new();
    let mut read = 0;
    for run in 0..settings.iterations.clamp(1, 10) {
        edit(&chosen, run);
        let start = Instant::now();
        let directory = Directory::open(config.clone()).expect("open");
        read += directory.reconcile().expect("reconcile").read;
        times.push(start.elapsed());
    }
    let runs = times.len();
    Figure::timing(
        "boot_1pct",
        &format!("warm boot, 1% changed ({count} files)"),
        &Sample::of(times),
    )
    .baseline("rescan", floors.rescan.p50)
    .floor("walk + stat", floors.walk.p50)
    .note(format!(
        "{} files read per boot on average",
        read / runs.max(1)
    ))
}

/// Rewrites each file with a line that differs per run (so its content, not only its stat,
/// changes).
fn edit(files: &[(PathBuf, String)], run: usize) {
    for (path, original) in files {
        std::fs::write(path, format!("{original}\nBench edit {run}.\n")).expect("edit");
    }
}

/// The index's files (the index and its texts store) against the markdown they index.
pub fn index_size(index_path: &Path, content_bytes: u64) -> Figure {
    let size: u64 = iii_directory::index_files(index_path)
        .iter()
        .map(|file| std::fs::metadata(file).map_or(0, |m| m.len()))
        .sum();
    let ratio = size as f64 / content_bytes.max(1) as f64;
    Figure::new("index_size", "index file size", "bytes", size as f64)
        .floor("markdown bytes", content_bytes as f64)
        .target(
            5,
            "≤2× content",
            TARGET_SKILLS,
            ratio <= INDEX_MAX_OVER_CONTENT,
        )
}
