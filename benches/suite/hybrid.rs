//! Hybrid search (issue 28), with the model (`III_DIRECTORY_SEARCH_MODEL`; the section is
//! skipped with a line without it):
//!
//! - `skills::search` in hybrid mode over the tree, p50 including the query's embedding. The
//!   tree's contents get two stand-in passage vectors each, as most real skills have (the real
//!   embeddings of a few dozen skill-like texts, two mixed per passage so that all differ):
//!   embedding 50,000 skills takes most of an hour, and the scans, the fusion and the answer
//!   cost the same whatever distinct vectors they hold;
//! - the first embedding pass on that index made to look as an older tokenizer's (each
//!   embedded content read once), beside the next pass;
//! - the embedding throughput of a cold tree (`EMBED_TREE` skills, really embedded), in
//!   skills/s, with lexical searches served meanwhile (their p50 beside the idle one);
//! - `search_functions`' library ranking in hybrid mode on the generated catalog of 2,000
//!   functions, and the catalog's first embedding; the same search while a catalog whose texts
//!   all changed is embedded, beside it quiet;
//! - the worker's peak RSS serving hybrid searches with the model loaded and the tree's
//!   vectors in memory.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iii_directory::config::Config;
use iii_directory::embed::{Embedder, Quantized};
use iii_directory::search::catalog::Catalog;
use iii_directory::search::query;
use iii_directory::search::select_with;
use iii_directory::search::vectors::FunctionLane;
use iii_directory::{Directory, ModelState, vectors_model};
use serde_json::{Value, json};

use crate::Settings;
use crate::measure::{Reaped, load_average, measure, measure_with_process_cpu, status_mib, tree};
use crate::results::Figure;
use crate::search::{FUNCTIONS, generated_tools};
use crate::skill_search::{TASKS, searches};
use crate::worker::{command, engine_for_worker, write_config};

/// Skills of the cold tree whose embedding is timed.
const EMBED_TREE: usize = 200;
/// p50 of a search at 50,000 skills and on 2,000 functions (ms, issue 28).
pub const P50_MAX_MS: f64 = 5.0;
const TARGET_AT: usize = 50_000;

/// Texts whose embeddings stand in for the tree's (skill-like, varied).
const STAND_INS: [&str; 24] = [
    "Deploy a web site to a static host and roll back a bad release.",
    "Write and run unit tests for a service.",
    "Send email reports and newsletters to a team.",
    "Review code changes for security issues.",
    "Plan and apply database schema migrations.",
    "Extract tables from scanned documents with OCR.",
    "Alert on error rates and latency from metrics.",
    "Explain an unfamiliar codebase and its architecture.",
    "Manage Kubernetes deployments and rollouts.",
    "Build charts and dashboards from spreadsheets.",
    "Translate documents between languages.",
    "Schedule meetings and manage a calendar.",
    "Process payments and refunds with Stripe.",
    "Write release notes from a changelog.",
    "Generate images from a text prompt.",
    "Summarize long PDF reports.",
    "Manage secrets and rotate credentials.",
    "Profile and speed up slow Python code.",
    "Design a REST API and its OpenAPI schema.",
    "Scrape product prices from web pages.",
    "Create slide decks from an outline.",
    "Set up continuous integration pipelines.",
    "Triage GitHub issues and label them.",
    "Back up and restore a Postgres database.",
];

pub fn figures(settings: &Settings, config: &Config, work: &Path) -> Vec<Figure> {
    let Some(folder) = std::env::var_os("III_DIRECTORY_SEARCH_MODEL") else {
        eprintln!(
            "hybrid: skipped (needs the embedding model: export \
             III_DIRECTORY_SEARCH_MODEL=$(tools/search-model))"
        );
        return Vec::new();
    };
    let embedder = Arc::new(Embedder::load(Path::new(&folder)).expect("load the model"));
    // An index of its own: the stand-in vectors stay out of the other sections' index.
    let mut config = config.clone();
    config.paths.index_path = work.join("hybrid-search.redb");
    let _ = iii_directory::remove_index(&config.paths.index_path);
    let config = &config;
    let mut out = Vec::new();
    out.extend(skill_search(settings, config, &embedder));
    out.push(older_tokenizer_pass(settings, config, &embedder));
    out.extend(cold_embedding(settings, &embedder));
    out.extend(functions(settings, &embedder));
    out.extend(worker_rss(
        settings,
        config,
        work,
        Path::new(&folder),
        &embedder,
    ));
    out
}

/// Stand-in passage vectors: the embeddings of `STAND_INS`, two of them mixed in a proportion
/// of the passage's own, so that no two passages are the same vector. A real tree has no
/// thousands of equal vectors, which the continuations' sign step would all have to tie and
/// score.
fn stand_ins(embedder: &Embedder) -> impl Fn(usize) -> Quantized {
    let texts: Vec<Vec<f32>> = STAND_INS.iter().map(|t| embedder.embed_query(t)).collect();
    move |i| {
        let n = texts.len();
        let (a, b) = (&texts[i % n], &texts[(i / n + 1 + i) % n]);
        let weight = (i % 97) as f32 / 97.0;
        let mixed: Vec<f32> = a.iter().zip(b).map(|(x, y)| x + weight * y).collect();
        Quantized::from_vector(&mixed)
    }
}

/// The directory over the tree with every content's vectors stored and the model ready: two
/// passages per skill, as a real tree has (its bodies go on past the lead: 95% of the corpus).
fn hybrid_directory(config: &Config, embedder: &Arc<Embedder>) -> Directory {
    let directory = Directory::open(config.clone()).expect("open");
    directory.reconcile().expect("index the tree");
    let passage = stand_ins(embedder);
    directory
        .store_stand_in_vectors(embedder, |i| vec![passage(2 * i), passage(2 * i + 1)])
        .expect("stand-in vectors");
    directory.set_model_state(ModelState::Ready(embedder.clone()));
    assert_eq!(directory.embed_pending().expect("embed"), 0);
    directory
}

fn skill_search(settings: &Settings, config: &Config, embedder: &Arc<Embedder>) -> Vec<Figure> {
    eprintln!("hybrid skill search");
    let directory = hybrid_directory(config, embedder);
    let answer = directory
        .search_skills(&json!({ "query": TASKS[0] }), None, None)
        .expect("search");
    assert_eq!(answer["mode"], "hybrid", "{answer}");
    let (hybrid, cpu_ms) = measure_with_process_cpu(3, settings.iterations, searches(&directory));
    let mut turn = 0;
    let query_only = measure(3, settings.iterations, || {
        let query = TASKS[turn % TASKS.len()];
        turn += 1;
        black_box(embedder.embed_query_quantized(query));
    });
    drop(directory);
    vec![
        Figure::timing(
            "skill_search_hybrid",
            "skills::search hybrid (p50, the query's embedding included)",
            &hybrid,
        )
        .floor("the query's embedding alone", query_only.p50)
        .target(
            28,
            "skills::search hybrid p50 ≤ 5 ms at 50,000 skills",
            TARGET_AT,
            settings.skills != TARGET_AT || hybrid.p50 <= P50_MAX_MS,
        )
        .note(format!(
            "{} skills, every content with two stand-in passage vectors (the embeddings of {} \
             skill-like texts, two mixed per passage); the int8 scans, fusion and answer; \
             {cpu_ms:.2} ms of the \
             process's CPU time per search (both cores), load {}",
            settings.skills,
            STAND_INS.len(),
            load_average()
        )),
    ]
}

/// The first embedding pass of this build on the index `skill_search` left, once made to look
/// as an older build left it (no `meta.vectors_tokens`): it reads every embedded content once
/// to find those whose text the tokenizer now cuts otherwise (none in the generated tree).
fn older_tokenizer_pass(settings: &Settings, config: &Config, embedder: &Arc<Embedder>) -> Figure {
    eprintln!("first pass on an index of an older tokenizer");
    {
        let db = redb::Database::open(&config.paths.index_path).expect("open the index file");
        let txn = db.begin_write().expect("write");
        {
            let meta: redb::TableDefinition<'_, &str, &[u8]> = redb::TableDefinition::new("meta");
            let mut meta = txn.open_table(meta).expect("meta");
            meta.remove("vectors_tokens").expect("remove");
        }
        txn.commit().expect("commit");
    }
    let directory = Directory::open(config.clone()).expect("open");
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(embedder.clone()));
    let started = Instant::now();
    let embedded = directory.embed_pending().expect("embed");
    let first = started.elapsed();
    let started = Instant::now();
    directory.embed_pending().expect("embed");
    let next = started.elapsed();
    Figure::new(
        "older_tokenizer_pass",
        "first embedding pass on an index of an older tokenizer",
        "ms",
        first.as_secs_f64() * 1e3,
    )
    .floor("the next pass, nothing to do", next.as_secs_f64() * 1e3)
    .note(format!(
        "{} skills, every content's vectors stored; each embedded content read once and its \
         passages checked for a spelled-out special token; {embedded} embedded again",
        settings.skills
    ))
}

fn cold_embedding(settings: &Settings, embedder: &Arc<Embedder>) -> Vec<Figure> {
    eprintln!("cold embedding of {EMBED_TREE} skills");
    let source = tree(EMBED_TREE);
    let index = tempfile::tempdir().expect("temp dir");
    let mut config = Config::for_root(&source);
    config.paths.index_path = index.path().join("embed.redb");
    let directory = Arc::new(Directory::open(config).expect("open"));
    directory.reconcile().expect("index");
    // Lexical until the pass has embedded every content.
    let mut search = searches(&directory);
    let idle = measure(3, settings.iterations, &mut search);
    directory.set_model_state(ModelState::Ready(embedder.clone()));
    let done = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let embedding = {
        let directory = directory.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let embedded = directory.embed_pending().expect("embed");
            done.store(true, Ordering::SeqCst);
            (embedded, started.elapsed())
        })
    };
    let mut during = Vec::new();
    loop {
        let start = Instant::now();
        search();
        during.push(start.elapsed());
        if done.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (embedded, took) = embedding.join().expect("embedding thread");
    let during = crate::measure::Sample::of(during);
    let per_second = embedded as f64 / took.as_secs_f64();
    let mut passages = 0;
    directory
        .index()
        .read()
        .expect("read")
        .each_vector(&vectors_model(embedder), |content| {
            passages += content.passages.len()
        })
        .expect("read the vectors");
    vec![
        Figure::new(
            "embed_cold_tree",
            "embedding a cold tree in the background",
            "skills/s",
            per_second,
        )
        .note(format!(
            "{embedded} distinct skill contents ({passages} passages) in {:.1} s (batches of \
             32 on the low-priority pool); lexical skills::search meanwhile p50 {:.2} ms, p99 \
             {:.2} ms ({} searches), idle p50 {:.2} ms",
            took.as_secs_f64(),
            during.p50,
            during.p99,
            during.runs,
            idle.p50
        )),
    ]
}

fn functions(settings: &Settings, embedder: &Arc<Embedder>) -> Vec<Figure> {
    eprintln!("hybrid function search on {FUNCTIONS} functions");
    let catalog = Arc::new(Catalog::build(&generated_tools(FUNCTIONS)));
    let lane = FunctionLane::new(embedder.clone());
    let started = Instant::now();
    let embedded = lane.follow(|| catalog.clone());
    let took = started.elapsed();
    let request = json!({ "capabilities": ["send an email with attachments"] });
    let capabilities = query::parse(&request).expect("request");
    let (search, cpu_ms) = measure_with_process_cpu(3, settings.iterations * 4, || {
        black_box(select_with(&catalog, &capabilities, Some(&lane)));
    });
    let during = searched_while_a_new_catalog_is_embedded(&lane, || {
        black_box(select_with(&catalog, &capabilities, Some(&lane)));
    });
    vec![
        Figure::timing(
            "search_functions_hybrid",
            "search_functions hybrid, one capability (p50, its embedding included)",
            &search,
        )
        .target(
            28,
            "search_functions hybrid p50 ≤ 5 ms on 2,000 functions",
            TARGET_AT,
            settings.skills != TARGET_AT || search.p50 <= P50_MAX_MS,
        )
        .note(format!(
            "the generated catalog of {FUNCTIONS} functions; its first embedding: {embedded} \
             texts in {:.1} s ({:.0}/s); {cpu_ms:.2} ms of the process's CPU time per search \
             (both cores), load {}",
            took.as_secs_f64(),
            embedded as f64 / took.as_secs_f64(),
            load_average()
        )),
        Figure::timing(
            "search_functions_hybrid_during_catalog_embed",
            "search_functions hybrid while a changed catalog is embedded (p50)",
            &during.sample,
        )
        .twin(&search)
        .note(format!(
            "the same search, repeated every 10 ms while the lane embeds a catalog whose \
             {FUNCTIONS} texts all changed ({} texts in {:.1} s); the search meanwhile fuses \
             the previous catalog's vectors",
            during.embedded,
            during.took.as_secs_f64()
        )),
    ]
}

/// Searches timed while `lane` embeds a catalog of the same functions with every text
/// changed (an engine restarted with new versions of its workers, say).
struct DuringEmbed {
    sample: crate::measure::Sample,
    embedded: usize,
    took: Duration,
}

fn searched_while_a_new_catalog_is_embedded(
    lane: &FunctionLane,
    mut search: impl FnMut(),
) -> DuringEmbed {
    let changed: Vec<_> = generated_tools(FUNCTIONS)
        .into_iter()
        .map(|mut tool| {
            // The first sentence is the text embedded: the change must be in it.
            tool.description = format!("In version two, {}", tool.description);
            tool
        })
        .collect();
    let changed = Arc::new(Catalog::build(&changed));
    std::thread::scope(|scope| {
        let started = Instant::now();
        let embedding = scope.spawn(move || (lane.follow(|| changed.clone()), started.elapsed()));
        let mut times = Vec::new();
        while !embedding.is_finished() {
            let start = Instant::now();
            search();
            times.push(start.elapsed());
            std::thread::sleep(Duration::from_millis(10));
        }
        let (embedded, took) = embedding.join().expect("embedding thread");
        DuringEmbed {
            sample: crate::measure::Sample::of(times),
            embedded,
            took,
        }
    })
}

fn worker_rss(
    settings: &Settings,
    config: &Config,
    work: &Path,
    model: &Path,
    embedder: &Arc<Embedder>,
) -> Vec<Figure> {
    eprintln!("worker memory with the model");
    let (config_file, index) = write_config(work, "hybrid");
    let seed = std::fs::read_to_string(&config_file).expect("config");
    std::fs::write(
        &config_file,
        format!(
            "{seed}search_model_path: {}\n",
            serde_json::to_string(&model.display().to_string()).expect("path")
        ),
    )
    .expect("write config");
    let _ = iii_directory::remove_index(&index);
    let mut worker_config = config.clone();
    worker_config.paths.index_path = index;
    drop(hybrid_directory(&worker_config, embedder));
    let tree = config.paths.skills_folder.parent().expect("the tree");
    let (runtime, engine) = engine_for_worker();
    engine.keep_history(false);
    // Reaped: a panic below must not leave a worker embedding the tree on both cores.
    let mut child = Reaped(
        command(tree, &config_file)
            .args(["--url", engine.url()])
            .stderr(std::fs::File::create(work.join("hybrid-worker.log")).expect("log"))
            .spawn()
            .expect("start the worker"),
    );
    let pid = child.0.id();
    let call = |function: &str, data: Value| {
        runtime
            .block_on(engine.invoke_with(function, data, None, Duration::from_secs(120)))
            .expect("call")
    };
    runtime
        .block_on(engine.wait_function("directory::index::status", Duration::from_secs(300)))
        .expect("the worker registers");
    let deadline = Instant::now() + Duration::from_secs(300);
    while call("directory::index::status", json!({}))["search"]["mode"] != "hybrid" {
        assert!(Instant::now() < deadline, "the worker never turned hybrid");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut peaks = Vec::new();
    for _ in 0..3 {
        for query in TASKS.iter().cycle().take(40) {
            let answer = call("directory::skills::search", json!({ "query": query }));
            assert_eq!(answer["mode"], "hybrid");
        }
        peaks.push(status_mib(pid, "VmHWM").unwrap_or(f64::NAN));
    }
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let _ = child.0.wait();
    let model_mib = std::fs::metadata(model.join("model.safetensors"))
        .map(|m| m.len() as f64 / (1024.0 * 1024.0))
        .unwrap_or(f64::NAN);
    vec![
        Figure::new(
            "worker_rss_hybrid",
            "peak RSS, worker with the model serving hybrid skill search",
            "MiB",
            peaks[0],
        )
        .target(
            28,
            "≤ 150 MiB plus the model's size at 50,000 skills",
            TARGET_AT,
            settings.skills != TARGET_AT || peaks[0] <= 150.0 + model_mib,
        )
        .note(format!(
            "VmHWM after 40 hybrid searches, and after two more rounds: {:.1}, {:.1}, {:.1} MiB; \
             the model file is {model_mib:.1} MiB; {} skills, every vector in memory",
            peaks[0], peaks[1], peaks[2], settings.skills
        )),
    ]
}
