//! Change-to-visible latency: how long after a file is edited behind the library's back (an
//! editor, `git pull`) the new content is served, with the watcher running over a large tree.
//! Also the latency of a write through the library (which is visible when the call returns).
//!
//! ```sh
//! cargo bench --bench latency                         # 10,000 skills, 100 edits
//! BENCH_SKILLS=1000 BENCH_EDITS=300 cargo bench --bench latency
//! ```
//!
//! The tree is generated once per size under `target/bench-trees/` (shared with
//! `benches/directory.rs`; bodies from `../shared/corpus` when present). Edited files are put
//! back as they were at the end, and this benchmark keeps its own index file
//! (`data/latency.redb`), so the other benchmark's figures are not disturbed.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_usize, tree};
use iii_directory::config::Config;
use iii_directory::generate::Rng;
use iii_directory::watch::{WatchOptions, Watcher};
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::json;

/// How long one edit may take to show before it counts as missed.
const GIVE_UP: Duration = Duration::from_secs(10);
/// Pause between edits, so each edit is a burst of its own (longer than the watcher's quiet
/// period, so stray late events of the previous edit have been handled).
const BETWEEN_EDITS: Duration = Duration::from_millis(120);

struct Figures {
    p50: f64,
    p95: f64,
    p99: f64,
    max: f64,
}

fn figures(samples: &mut [Duration]) -> Figures {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        ms(samples[i])
    };
    Figures {
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
        max: ms(*samples.last().expect("samples")),
    }
}

fn print_row(name: &str, f: &Figures) {
    println!(
        "{name:<46} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
        f.p50, f.p95, f.p99, f.max
    );
}

/// The body of a file (what follows its frontmatter), for a new title on top.
fn body_of(text: &str) -> &str {
    let rest = text
        .strip_prefix("---\n")
        .and_then(|r| r.find("\n---\n").map(|i| &r[i + 5..]));
    rest.unwrap_or(text)
}

fn title_of(directory: &Directory, id: &str) -> Option<String> {
    directory
        .read(ReadFunction::SkillsGet, &json!({"id": id}), None)
        .ok()
        .and_then(|v| v["title"].as_str().map(str::to_string))
}

fn main() {
    let skills = env_usize("BENCH_SKILLS", 10_000);
    let edits = env_usize("BENCH_EDITS", 100);
    let base = tree(skills);
    let mut config = Config::for_root(&base);
    config.paths.index_path = base.join("data/latency.redb");

    let opened = Instant::now();
    let directory = Arc::new(Directory::open(config.clone()).expect("open"));
    let open_ms = opened.elapsed().as_millis();
    let reconciled = Instant::now();
    let report = directory.reconcile().expect("reconcile");
    println!(
        "tree: {skills} skills, {} files; open {open_ms} ms, reconcile {} ms ({} files read)",
        report.files,
        reconciled.elapsed().as_millis(),
        report.read
    );

    // Edit targets: plain files of skills_folder (not the local root, not agents skills).
    let skills_root = config.paths.skills_folder.clone();
    let local_root = config.paths.local_skills_folder.clone();
    let rows = directory
        .read(ReadFunction::SkillsList, &json!({}), None)
        .expect("list");
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    for row in rows["skills"].as_array().expect("rows") {
        let id = row["id"].as_str().expect("id").to_string();
        let got = directory
            .read(ReadFunction::SkillsGet, &json!({"id": id}), None)
            .expect("get");
        let path = PathBuf::from(got["path"].as_str().unwrap_or_default());
        if path.starts_with(&skills_root) && !path.starts_with(&local_root) {
            candidates.push((id, path));
        }
    }
    let mut rng = Rng::new(42);
    let mut targets: Vec<(String, PathBuf, String)> = Vec::new();
    while targets.len() < edits.min(candidates.len()) {
        let (id, path) = candidates.swap_remove(rng.below(candidates.len()));
        let original = std::fs::read_to_string(&path).expect("read target");
        targets.push((id, path, original));
    }

    let watcher = Watcher::start(directory.clone(), WatchOptions::default());
    std::thread::sleep(Duration::from_millis(300));
    let run = std::process::id();
    let mut latencies = Vec::with_capacity(targets.len());
    let mut polls = 0u64;
    let mut missed = 0;
    for (i, (id, path, original)) in targets.iter().enumerate() {
        let title = format!("latency probe {run} {i}");
        let text = format!("---\ntitle: {title}\n---\n{}", body_of(original));
        let start = Instant::now();
        std::fs::write(path, &text).expect("edit");
        loop {
            polls += 1;
            if title_of(&directory, id).as_deref() == Some(title.as_str()) {
                latencies.push(start.elapsed());
                break;
            }
            if start.elapsed() > GIVE_UP {
                missed += 1;
                latencies.push(start.elapsed());
                eprintln!("edit {i} of {id} not visible after {GIVE_UP:?}");
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(BETWEEN_EDITS);
    }
    let status = watcher.status();
    watcher.stop();

    // Writes through the library: visible when the call returns.
    let mut write_latencies = Vec::with_capacity(targets.len());
    for (i, (id, _, original)) in targets.iter().enumerate() {
        let title = format!("library write {run} {i}");
        let content = format!("---\ntitle: {title}\n---\n{}", body_of(original));
        let start = Instant::now();
        directory
            .write(
                WriteFunction::SkillsUpdate,
                &json!({"id": id, "content": content}),
                None,
            )
            .expect("library update");
        write_latencies.push(start.elapsed());
        assert_eq!(title_of(&directory, id).as_deref(), Some(title.as_str()));
    }

    // Where the time goes: a scoped reconcile of one edited file (what a watcher burst or a
    // library write runs), and a full reconcile with nothing changed.
    let mut scoped = Vec::with_capacity(targets.len());
    for (i, (_, path, original)) in targets.iter().enumerate() {
        let text = format!("---\ntitle: scoped {run} {i}\n---\n{}", body_of(original));
        std::fs::write(path, text).expect("edit");
        let start = Instant::now();
        directory
            .reconcile_paths(vec![path.clone()])
            .expect("scoped reconcile");
        scoped.push(start.elapsed());
    }
    let mut full = Vec::new();
    for _ in 0..10 {
        let start = Instant::now();
        directory.reconcile().expect("reconcile");
        full.push(start.elapsed());
    }

    // Put the shared tree back as it was.
    for (_, path, original) in &targets {
        std::fs::write(path, original).expect("restore");
    }
    directory.reconcile().expect("reconcile after restore");

    println!(
        "{:<46} {:>9} {:>9} {:>9} {:>9}",
        "figure (ms)", "p50", "p95", "p99", "max"
    );
    print_row(
        &format!("external edit -> visible ({} edits)", latencies.len()),
        &figures(&mut latencies),
    );
    print_row(
        &format!("library update call ({} writes)", write_latencies.len()),
        &figures(&mut write_latencies),
    );
    print_row(
        &format!("scoped reconcile of 1 edited file ({})", scoped.len()),
        &figures(&mut scoped),
    );
    print_row("full reconcile (10)", &figures(&mut full));
    println!(
        "watcher: quiet period {} ms, max burst {} ms; {} bursts; degraded: {}; polls every 1 ms: {polls}; edits never visible: {missed}",
        WatchOptions::default().quiet.as_millis(),
        WatchOptions::default().max_delay.as_millis(),
        status.bursts,
        status.degraded,
    );
    println!("reproduce: BENCH_SKILLS={skills} BENCH_EDITS={edits} cargo bench --bench latency");
    assert_eq!(missed, 0, "some edits never became visible");
}
