//! The benchmark suite of issue 5, for one tree size: the read functions, reconciles, change to
//! visible, the worker process's memory and the index size, each beside the rescan-on-every-read
//! baseline and the physical floor, with the issue's targets.
//!
//! ```sh
//! cargo bench --bench suite                         # 10,000 skills
//! BENCH_SKILLS=1000 cargo bench --bench suite       # another size
//! cargo bench --bench suite -- report               # BENCHMARKS.md and bench/plot.svg from saved results
//! bench/run                                         # all of it for 1,000, 10,000 and 50,000 skills
//! cargo bench --bench suite -- search               # only function search (target/bench-results/search.json)
//! cargo bench --bench suite -- embed                # only sentence embeddings (target/bench-results/embed.json)
//! cargo bench --bench suite -- bundles              # only bundle updates (target/bench-results/bundles.json)
//! cargo bench --bench suite -- quality              # the quality tables of function and skill search, lexical and hybrid (printed)
//! BENCH_SECTIONS="reindex latency" cargo bench --bench suite   # only these sections
//! ```
//!
//! Sections (`BENCH_SECTIONS`, all by default): `reindex` (cold reindex, warm boots, index
//! size), `reads` (the read functions), `deltas` (lists since a revision), `latency` (change to
//! visible, `skills::update` beside the same writes on 1,000 skills), `fresh` (what catching
//! up with the disk costs a read), `worker` (the binary:
//! cold `reindex`, the wire), `memory` (the worker's RSS over rounds of lists, misses and updates),
//! `mixed` (issue 31: the calls interleaved with writes, in the library and over the wire, each
//! beside its steady state), `search`, `skill_search` (ranked skill search over the tree),
//! `hybrid` (issue 28: hybrid skill and function search, function search while a changed
//! catalog is embedded, the first pass on an index of an older tokenizer, a cold tree's
//! embedding, the worker's memory with the model; needs `III_DIRECTORY_SEARCH_MODEL`), `catalog` (issue 30:
//! `skills::catalog` and `check --spec` on a tree of Agent Skills). A run of some sections
//! replaces their figures in the saved results of its size and keeps the others.
//!
//! Settings (environment): `BENCH_SKILLS` (tree size), `BENCH_ITERATIONS` (timed runs of the
//! fast figures), `BENCH_BASELINE_RUNS` (runs of each rescan baseline), `BENCH_COLD_RUNS`,
//! `BENCH_EDITS` (edits for change to visible), `BENCH_RESULTS` (results folder, default
//! `target/bench-results`), `BENCH_OUT` (where `report` writes BENCHMARKS.md and
//! `bench/plot.svg`, default the crate folder), `BENCH_SIZES` (sizes `report` reads),
//! `BENCH_ENGINE_URL` (a real iii engine, `ws://…`: the `mixed` section runs its rounds through
//! it too).
//!
//! Trees: the generated tree `target/bench-trees/<size>` is only read (it may be shared); the
//! suite keeps its index files, and a copy of the tree that it edits and serves from the
//! worker, under `target/bench-work/<size>`, recreated on every run.

mod baseline;
mod bundles;
mod catalog;
mod catalog_refresh;
mod deltas;
mod embed;
mod floor_worker;
mod fresh;
mod hybrid;
mod latency;
mod measure;
mod memory;
mod mixed;
mod quality;
mod reads;
mod reindex;
mod report;
mod results;
mod search;
mod skill_search;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iii_directory::config::Config;
use iii_directory::{Directory, Roots};

use measure::{copy_tree, env_usize, load_average, manifest_dir, tree};
use results::{Figure, Run};

/// What a run measures and how long it tries.
pub struct Settings {
    pub skills: usize,
    pub iterations: usize,
    pub baseline_runs: usize,
    pub cold_runs: usize,
    pub edits: usize,
    pub results: PathBuf,
    pub out: PathBuf,
}

impl Settings {
    fn from_env() -> Settings {
        let skills = env_usize("BENCH_SKILLS", 10_000);
        let path = |name: &str, default: PathBuf| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .map_or(default, |p| manifest_dir().join(p))
        };
        Settings {
            skills,
            iterations: env_usize("BENCH_ITERATIONS", 30).max(1),
            baseline_runs: env_usize("BENCH_BASELINE_RUNS", if skills > 10_000 { 2 } else { 3 })
                .max(1),
            cold_runs: env_usize("BENCH_COLD_RUNS", 3).max(1),
            edits: env_usize("BENCH_EDITS", 50).max(1),
            results: path("BENCH_RESULTS", manifest_dir().join("target/bench-results")),
            out: path("BENCH_OUT", manifest_dir().to_path_buf()),
        }
    }
}

/// The order of the figures in tables.
const ORDER: [&str; 54] = [
    "list_all",
    "list_value",
    "list_prefix",
    "list_search",
    "list_delta",
    "list_unchanged",
    "get",
    "get_miss",
    "index",
    "agent_get",
    "cold_reindex",
    "cli_reindex",
    "warm_reconcile",
    "warm_boot",
    "boot_1pct",
    "visible",
    "update",
    "update_small",
    "worker_rss",
    "cli_reindex_rss",
    "wire_list",
    "wire_unchanged",
    "wire_get",
    "index_size",
    "search_off",
    "search_registry",
    "search_registry_http",
    "search_rebuild",
    "mixed_lib_update",
    "mixed_lib_get",
    "mixed_lib_miss",
    "mixed_lib_index",
    "mixed_lib_prefix",
    "mixed_lib_agent",
    "mixed_lib_after_list",
    "mixed_wire_update",
    "mixed_wire_get",
    "mixed_wire_miss",
    "mixed_wire_index",
    "mixed_wire_prefix",
    "mixed_wire_agent",
    "mixed_wire_after_list",
    "mixed_wire_ping",
    "mixed_floor_after_list",
    "mixed_rss",
    "skill_search",
    "skill_search_first",
    "catalog_xml",
    "catalog_json",
    "catalog_large",
    "spec_check",
    "bundle_plan",
    "bundle_apply",
    "check_updates_50",
];

/// Files written within this of a scan are read again by the next one (the racy window, 2 s).
const AGE_PAST_RACY_WINDOW: Duration = Duration::from_millis(2100);

fn main() {
    if floor_worker::serve_if_asked() {
        return;
    }
    let settings = Settings::from_env();
    // `cargo bench` adds `--bench`; anything else that is not a flag is a command.
    let command: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if command.first().map(String::as_str) == Some("report") {
        report::write(&settings);
        return;
    }
    if command.first().map(String::as_str) == Some("quality") {
        quality::print();
        return;
    }
    if let Some(&(name, _, figures)) = PARTS
        .iter()
        .find(|(name, ..)| command.first().map(String::as_str) == Some(*name))
    {
        alone(&settings, name, figures);
        return;
    }
    let sections = Sections::from_env();
    let file = settings.results.join(format!("{}.json", settings.skills));
    let mut run = run(&settings, &sections);
    if let Some(chosen) = &sections.0 {
        run = keep_other_figures(&file, run, chosen);
    }
    results::print(&run);
    std::fs::create_dir_all(&settings.results).expect("results folder");
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&run).expect("serialize"),
    )
    .expect("write results");
    println!("\nresults: {}", file.display());
}

/// What a part measures.
type PartFigures = fn(&Settings) -> Vec<Figure>;

/// The parts that need no skills tree and run alone (`cargo bench --bench suite -- <name>`,
/// saved to `<results>/<name>.json`): name, title, figures.
const PARTS: [(&str, &str, PartFigures); 3] = [
    ("search", "Function search", search::figures),
    ("embed", "Sentence embeddings", embed::figures),
    ("bundles", "Bundle updates", bundles::figures),
];

/// The title of the part `name` (one of [`PARTS`]).
pub fn part_title(name: &str) -> &str {
    PARTS
        .iter()
        .find(|(n, ..)| *n == name)
        .map_or(name, |(_, title, _)| title)
}

/// The sections of the suite a run measures (`BENCH_SECTIONS`, all when unset).
struct Sections(Option<Vec<String>>);

/// Every section, in the order they run.
const SECTIONS: [&str; 12] = [
    "reindex",
    "reads",
    "deltas",
    "latency",
    "fresh",
    "worker",
    "memory",
    "mixed",
    "search",
    "skill_search",
    "hybrid",
    "catalog",
];

impl Sections {
    fn from_env() -> Sections {
        let chosen = std::env::var("BENCH_SECTIONS").ok().map(|s| {
            s.split([' ', ','])
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        });
        if let Some(chosen) = &chosen {
            for name in chosen {
                assert!(
                    SECTIONS.contains(&name.as_str()),
                    "unknown section {name:?} in BENCH_SECTIONS (sections: {})",
                    SECTIONS.join(", ")
                );
            }
        }
        Sections(chosen)
    }

    fn has(&self, name: &str) -> bool {
        self.0.as_ref().is_none_or(|s| s.iter().any(|n| n == name))
    }
}

/// A run of the `chosen` sections merged into the saved run of the same size (if any): its
/// figures replace theirs, the saved run's own account (duration, load) stays, and the rerun is
/// recorded beside it so the report can say which figures came later. With no saved run, it
/// stands alone, marked as measuring only those sections.
fn keep_other_figures(file: &std::path::Path, run: Run, chosen: &[String]) -> Run {
    let Some(mut saved) = std::fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Run>(&bytes).ok())
    else {
        return Run {
            only: chosen.to_vec(),
            ..run
        };
    };
    // A run of some sections only now also holds these.
    if !saved.only.is_empty() {
        for section in chosen {
            if !saved.only.contains(section) {
                saved.only.push(section.clone());
            }
        }
    }
    let fresh: Vec<&str> = run.figures.iter().map(|f| f.key.as_str()).collect();
    saved.figures.retain(|f| !fresh.contains(&f.key.as_str()));
    saved.figures.extend(run.figures);
    sort_figures(&mut saved.figures);
    // An earlier rerun of no other sections than these has no figure left on the page.
    saved
        .reruns
        .retain(|earlier| !earlier.sections.iter().all(|s| chosen.contains(s)));
    saved.reruns.push(results::Rerun {
        sections: chosen.to_vec(),
        at: iii_directory::testing::Stamp::now().rfc3339(),
        seconds: run.seconds,
        load_start: run.load_start,
    });
    saved
}

fn sort_figures(figures: &mut [Figure]) {
    figures.sort_by_key(|f| {
        ORDER
            .iter()
            .position(|k| *k == f.key)
            .unwrap_or(ORDER.len())
    });
}

/// A part that needs no skills tree ([`PARTS`]), alone: its figures go to
/// `<results>/<name>.json`.
fn alone(settings: &Settings, name: &str, figures: PartFigures) {
    let load_start = load_average();
    let started = Instant::now();
    eprintln!("{}", part_title(name));
    let run = Run {
        skills: settings.skills,
        alone: Some(name.to_string()),
        files: 0,
        content_bytes: 0,
        load_start,
        load_end: String::new(),
        seconds: 0.0,
        figures: figures(settings),
        reruns: Vec::new(),
        only: Vec::new(),
    };
    let run = Run {
        load_end: load_average(),
        seconds: started.elapsed().as_secs_f64(),
        ..run
    };
    results::print(&run);
    std::fs::create_dir_all(&settings.results).expect("results folder");
    let file = settings.results.join(format!("{name}.json"));
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&run).expect("serialize"),
    )
    .expect("write results");
    println!("\nresults: {}", file.display());
}

fn run(settings: &Settings, sections: &Sections) -> Run {
    let load_start = load_average();
    let started = Instant::now();
    let source = tree(settings.skills);
    let work = manifest_dir().join(format!("target/bench-work/{}", settings.skills));
    let mut figures: Vec<Figure> = Vec::new();

    // The generated tree, read only; the index in the work folder.
    let mut config = Config::for_root(&source);
    config.paths.index_path = work.join("read.redb");
    let roots = Roots::from_paths(&config.paths);
    let (files, content_bytes) = reindex::content(&roots);
    let needs_floors = ["reindex", "reads", "latency"]
        .iter()
        .any(|s| sections.has(s));
    let floors = needs_floors.then(|| {
        eprintln!(
            "{} skills, {files} files: rescan baseline and floors",
            settings.skills
        );
        reindex::floors(settings, &roots)
    });
    if sections.has("reindex") || sections.has("reads") {
        std::fs::create_dir_all(&work).expect("work folder");
        let floors = floors.as_ref().expect("floors");
        let directory = if sections.has("reindex") {
            eprintln!("cold reindex");
            let (cold, directory) = reindex::cold(settings, &config, floors);
            figures.push(cold);
            figures.push(reindex::warm_reconcile(settings, &directory, floors));
            directory
        } else {
            let directory = Directory::open(config.clone()).expect("open");
            directory.reconcile().expect("index the tree");
            directory
        };
        if sections.has("reads") {
            eprintln!("read functions");
            figures.extend(reads::figures(settings, &directory));
        }
        drop(directory);
        if sections.has("reindex") {
            eprintln!("warm boot");
            figures.push(reindex::warm_boot(settings, &config, floors));
            figures.push(reindex::index_size(&config.paths.index_path, content_bytes));
        }
    }

    if sections.has("skill_search") {
        eprintln!("skill search");
        std::fs::create_dir_all(&work).expect("work folder");
        let directory = Directory::open(config.clone()).expect("open");
        directory.reconcile().expect("index the tree");
        figures.extend(skill_search::figures(settings, &directory, &config));
    }

    if sections.has("catalog") {
        eprintln!("skills catalog and check --spec");
        figures.extend(catalog::figures(settings, &work));
    }

    // The suite's own copy, for everything that edits files.
    let edits = [
        "reindex", "deltas", "latency", "fresh", "worker", "memory", "mixed",
    ]
    .iter()
    .any(|s| sections.has(s));
    if edits {
        let _ = std::fs::remove_dir_all(work.join("tree"));
        let copy = work.join("tree");
        copy_tree(&source, &copy);
        let copied = Instant::now();
        let mut config = Config::for_root(&copy);
        config.paths.index_path = work.join("edit.redb");
        let _ = iii_directory::remove_index(&config.paths.index_path);
        std::thread::sleep(AGE_PAST_RACY_WINDOW.saturating_sub(copied.elapsed()));
        if ["reindex", "deltas", "latency", "fresh"]
            .iter()
            .any(|s| sections.has(s))
        {
            Directory::open(config.clone())
                .expect("open")
                .reconcile()
                .expect("index the copy");
        }
        if sections.has("reindex") {
            eprintln!("warm boot with 1% changed");
            let floors = floors.as_ref().expect("floors");
            figures.push(reindex::boot_one_percent(settings, &config, floors));
        }
        if sections.has("deltas") || sections.has("latency") || sections.has("fresh") {
            let directory = Arc::new(Directory::open(config).expect("open"));
            directory.reconcile().expect("reconcile");
            if sections.has("deltas") {
                eprintln!("list deltas");
                figures.extend(deltas::figures(settings, &directory));
            }
            if sections.has("fresh") {
                eprintln!("fresh reads");
                figures.extend(fresh::figures(settings, directory.clone()));
            }
            if sections.has("latency") {
                eprintln!("change to visible");
                let floors = floors.as_ref().expect("floors");
                figures.extend(latency::figures(settings, directory, floors));
            }
        }
        if sections.has("worker") {
            eprintln!("worker process");
            figures.extend(worker::figures(settings, &copy, &work));
        }
        if sections.has("memory") {
            eprintln!("worker memory");
            figures.extend(memory::figures(settings, &copy, &work));
        }
        if sections.has("mixed") {
            eprintln!("mixed load");
            figures.extend(mixed::figures(settings, &copy, &work));
        }
    }
    if sections.has("search") {
        eprintln!("function search");
        figures.extend(search::figures(settings));
    }
    if sections.has("hybrid") {
        std::fs::create_dir_all(&work).expect("work folder");
        figures.extend(hybrid::figures(settings, &config, &work));
    }

    sort_figures(&mut figures);
    Run {
        skills: settings.skills,
        alone: None,
        files,
        content_bytes,
        load_start,
        load_end: load_average(),
        seconds: started.elapsed().as_secs_f64(),
        figures,
        reruns: Vec::new(),
        only: Vec::new(),
    }
}
