//! Benchmarks of the read functions against the rescan-on-every-read baseline and the floors.
//!
//! ```sh
//! cargo bench --bench directory              # 10,000 skills
//! BENCH_SKILLS=1000 cargo bench --bench directory
//! ```
//!
//! Trees are generated once per size under `target/bench-trees/` (bodies from
//! `../shared/corpus` when present). Each figure is the median (p50) and p99 of repeated calls.

mod common;

use std::time::Instant;

use common::{Sample, measure, ms, tree};

use iii_directory::config::Config;
use iii_directory::index::reconcile::fresh_views;
use iii_directory::index::walk::walk;
use iii_directory::{Directory, ReadFunction};
use serde_json::json;

fn row(name: &str, s: &Sample, baseline: Option<&Sample>) {
    let ratio = baseline.map_or(String::new(), |b| {
        format!("{:.0}×", b.p50.as_secs_f64() / s.p50.as_secs_f64())
    });
    println!("{name:<44} {:>10} {:>10} {ratio:>10}", ms(s.p50), ms(s.p99));
}

fn main() {
    let skills: usize = std::env::var("BENCH_SKILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let base = tree(skills);
    let mut config = Config::for_root(&base);
    config.paths.index_path = base.join("data/bench.redb");
    let _ = std::fs::remove_file(&config.paths.index_path);
    let directory = Directory::open(config.clone()).expect("open");
    let cold = Instant::now();
    let report = directory.reconcile().expect("reconcile");
    let cold = cold.elapsed();
    println!(
        "tree: {skills} skills, {} files; cold reindex {} ms",
        report.files,
        cold.as_millis()
    );
    println!(
        "{:<44} {:>10} {:>10} {:>10}",
        "figure (ms)", "p50", "p99", "ratio"
    );

    let roots = directory.roots().clone();
    let warm = measure(iterations.min(20), || {
        directory.reconcile().expect("reconcile");
    });
    let floor_walk = measure(iterations.min(20), || {
        std::hint::black_box(walk(&roots));
    });
    row("warm reconcile, nothing changed", &warm, None);
    row("floor: walk and stat", &floor_walk, None);

    let list = measure(iterations, || {
        std::hint::black_box(
            directory
                .read(ReadFunction::SkillsList, &json!({}), None)
                .expect("list"),
        );
    });
    let baseline_list = measure(iterations.min(5), || {
        std::hint::black_box(fresh_views(&roots));
    });
    let response = directory
        .read(ReadFunction::SkillsList, &json!({}), None)
        .expect("list");
    let floor_json = measure(iterations, || {
        std::hint::black_box(serde_json::to_vec(&response).expect("json"));
    });
    let list_json = measure(iterations, || {
        let v = directory
            .read(ReadFunction::SkillsList, &json!({}), None)
            .expect("list");
        std::hint::black_box(serde_json::to_vec(&v).expect("json"));
    });
    row(
        "skills::list, all rows, JSON text (the wire)",
        &list_json,
        None,
    );
    row(
        "skills::list, all rows, as a serde_json::Value",
        &list,
        None,
    );
    row("baseline: rescan (walk, read, parse)", &baseline_list, None);
    row("floor: serialize the rows to JSON", &floor_json, None);
    println!(
        "list vs baseline: {:.0}× faster; list vs JSON floor: {:.1}×",
        baseline_list.p50.as_secs_f64() / list_json.p50.as_secs_f64(),
        list_json.p50.as_secs_f64() / floor_json.p50.as_secs_f64()
    );

    let prefix = measure(iterations, || {
        std::hint::black_box(
            directory
                .read(ReadFunction::SkillsList, &json!({"prefix": "send-"}), None)
                .expect("list"),
        );
    });
    row("skills::list, prefix", &prefix, None);
    let search = measure(iterations, || {
        std::hint::black_box(
            directory
                .read(ReadFunction::SkillsList, &json!({"search": "email"}), None)
                .expect("list"),
        );
    });
    row("skills::list, search", &search, None);
    let ids: Vec<String> = response["skills"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect();
    let mut i = 0;
    let get = measure(iterations * 10, || {
        i = (i + 7919) % ids.len();
        std::hint::black_box(
            directory
                .read(ReadFunction::SkillsGet, &json!({"id": ids[i]}), None)
                .expect("get"),
        );
    });
    row("skills::get", &get, None);
    let index = measure(iterations, || {
        std::hint::black_box(
            directory
                .read(ReadFunction::SkillsIndex, &json!({}), None)
                .expect("index"),
        );
    });
    row("skills::index", &index, None);
    let agent = measure(iterations * 10, || {
        std::hint::black_box(
            directory
                .read(ReadFunction::AgentsGet, &json!({"id": "agent-3"}), None)
                .expect("agent"),
        );
    });
    row("agents::get with an extends chain", &agent, None);
}
