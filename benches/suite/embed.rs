//! Sentence embeddings (issue 28): a query's embedding on the embedder's query threads, the same plus an exact
//! scan of 2,000 function vectors, the exact scan of 50,000 and 100,000 vectors, the passage
//! scan of 50,000 and 100,000 skills (a lead and a continuation each), and the embedding
//! of real skill texts (name, title, description and body, their first 2,000 characters, from
//! `../shared/corpus`) on every core, at 128 and at 256 tokens a text.
//!
//! Runs alone: `cargo bench --bench suite -- embed` (results in
//! `target/bench-results/embed.json`). Needs the model (`III_DIRECTORY_SEARCH_MODEL`); says so
//! and measures nothing without it. `BENCH_EMBED_TEXTS` sets how many skill texts the batch
//! figures embed (default 96).

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use iii_directory::embed::{DIMENSIONS, Embedder, PassageTable, Quantized, VectorTable};
use test_support::common::{corpus, model_dir};
use test_support::generate::Rng;

use crate::Settings;
use crate::measure::{cpu_seconds, env_usize, measure, measure_with_process_cpu};
use crate::results::{Check, Cmp, Figure};

/// `search_functions` p50 including the query's embedding, on 2,000 functions (ms, issue 28).
const SEARCH_P50_MAX_MS: f64 = 5.0;
/// Characters of a skill's text that are embedded at most (its leading part).
const SKILL_TEXT_CHARS: usize = 2_000;

const QUERIES: [&str; 8] = [
    "publish an event",
    "give me a bird's-eye view of devices joined to my private mesh",
    "turn this scanned paperwork into searchable words",
    "send an email with an attachment",
    "store a file and get a public link",
    "list the open pull requests that wait for my review",
    "convert a spreadsheet to csv",
    "schedule a meeting next tuesday with the design team",
];

pub fn figures(settings: &Settings) -> Vec<Figure> {
    let Some(dir) = model_dir() else {
        return Vec::new();
    };
    let started = Instant::now();
    let model = Embedder::load(&dir).expect("load the model");
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let runs = settings.iterations * 10;
    let mut figures = Vec::new();

    // A query is embedded on the embedder's own query threads (both cores), as a search does;
    // the calling thread only waits, so its CPU clock would say nothing: the process's does.
    let mut next = 0;
    let (query, query_cpu_ms) = measure_with_process_cpu(10, runs, || {
        next = (next + 1) % QUERIES.len();
        black_box(model.embed_query(QUERIES[next]));
    });
    figures.push(
        Figure::timing("embed_query", "embed one query (its query threads)", &query).note(format!(
            "model loaded in {load_ms:.0} ms; queries of 3 to 14 words; {query_cpu_ms:.2} ms of \
             the process's CPU time per query (every thread)"
        )),
    );

    let mut rng = Rng::new(28);
    let functions = random_table(&mut rng, 2_000);
    let search = measure(10, runs, || {
        next = (next + 1) % QUERIES.len();
        let query = model.embed_query_quantized(QUERIES[next]);
        black_box(functions.top_k(&query, 12));
    });
    figures.push(
        Figure::timing(
            "embed_search_2k",
            "embed a query + top 12 of 2,000 vectors",
            &search,
        )
        .check(
            28,
            0,
            Check {
                what: "p50, the dense lane of search_functions (BM25 and fusion not included)",
                measured: search.p50,
                cmp: Cmp::AtMost,
                limit: SEARCH_P50_MAX_MS,
                unit: "ms",
            },
        ),
    );

    let skills = random_table(&mut rng, 50_000);
    let probe = Quantized::from_vector(&model.embed_query(QUERIES[0]));
    let scan = measure(3, runs, || {
        black_box(skills.top_k(&probe, 10));
    });
    figures.push(
        Figure::timing("vector_scan_50k", "exact top 10 of 50,000 vectors", &scan).note(format!(
            "int8 vectors: {:.1} MiB",
            skills.vector_bytes() as f64 / (1024.0 * 1024.0)
        )),
    );

    // Twice as many: where an approximate index would start to pay (the scan is linear).
    let more = random_table(&mut rng, 100_000);
    let scan_100k = measure(3, runs, || {
        black_box(more.top_k(&probe, 10));
    });
    figures.push(
        Figure::timing(
            "vector_scan_100k",
            "exact top 10 of 100,000 vectors",
            &scan_100k,
        )
        .note(format!(
            "int8 vectors: {:.1} MiB; in chunks over the rayon pool, as at 50,000",
            more.vector_bytes() as f64 / (1024.0 * 1024.0)
        )),
    );
    drop(more);

    // Skills as they are stored: a lead and a continuation each, the continuations found
    // through their sign bits first (`embed::PassageTable`); the top 80, as a search asks.
    for skills in [50_000, 100_000] {
        let table = random_passages(&mut rng, skills);
        let scan = measure(3, runs, || {
            black_box(table.nearest(&probe, 80, |_| true));
        });
        figures.push(
            Figure::timing(
                &format!("passage_scan_{}k", skills / 1_000),
                &format!("top 80 of {skills} skills, two passages each"),
                &scan,
            )
            .note(format!(
                "{} vectors: the leads scanned exactly, the continuations' sign bits first, \
                 then the closest {} scored exactly",
                table.vectors(),
                iii_directory::embed::candidates(80)
            )),
        );
    }

    let texts = skill_texts(env_usize("BENCH_EMBED_TEXTS", 96).max(1));
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    for max_tokens in [128, 256] {
        let model = Embedder::load(&dir)
            .expect("load the model")
            .with_max_tokens(max_tokens);
        let tokens: usize = texts.iter().map(|t| model.tokenize(t).len()).sum();
        black_box(model.embed_batch(&texts[..texts.len().min(4)]));
        let started = Instant::now();
        let cpu = cpu_seconds();
        black_box(model.embed_batch(&texts));
        let seconds = started.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        figures.push(
            Figure::new(
                &format!("embed_batch_{max_tokens}"),
                &format!("embed skill texts, at most {max_tokens} tokens (all cores)"),
                "texts/s",
                texts.len() as f64 / seconds,
            )
            .note(format!(
                "{} texts, {:.0} tokens each on average, {} threads",
                texts.len(),
                tokens as f64 / texts.len() as f64,
                rayon::current_num_threads()
            )),
        );
        figures.push(
            Figure::new(
                &format!("embed_batch_{max_tokens}_cpu"),
                &format!("embed skill texts, at most {max_tokens} tokens, per CPU second"),
                "texts/s",
                texts.len() as f64 / cpu,
            )
            .note(
                "texts per second of the process's CPU time (load-independent; ×2 on 2 free cores)",
            ),
        );
    }
    figures
}

/// `n` keys with two random passages each (a scan's cost does not depend on their values).
fn random_passages(rng: &mut Rng, n: usize) -> PassageTable<u32> {
    let mut table = PassageTable::with_capacity(n);
    for i in 0..n {
        let passages = [random_vector(rng), random_vector(rng)];
        table.push(i as u32, &passages);
    }
    table
}

fn random_vector(rng: &mut Rng) -> Quantized {
    let v: Vec<f32> = (0..DIMENSIONS)
        .map(|_| rng.below(2_001) as f32 / 1_000.0 - 1.0)
        .collect();
    Quantized::from_vector(&v)
}

/// `n` random unit vectors, quantized (a scan's cost does not depend on their values).
fn random_table(rng: &mut Rng, n: usize) -> VectorTable<u32> {
    let mut table = VectorTable::with_capacity(n);
    for i in 0..n {
        table.push(i as u32, &random_vector(rng));
    }
    table
}

/// The leading `SKILL_TEXT_CHARS` of the first `n` SKILL.md files of the corpus (in path
/// order), or made-up prose of the same length without it.
pub fn skill_texts(n: usize) -> Vec<String> {
    let mut files = Vec::new();
    if let Some(corpus) = corpus() {
        collect_skills(&corpus, &mut files);
    }
    files.sort();
    let mut texts: Vec<String> = files
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|text| text.chars().take(SKILL_TEXT_CHARS).collect())
        .take(n)
        .collect();
    let prose = "Use this skill when the user asks to review, summarize or transform documents; \
                 it explains the steps, the commands and the checks to run. ";
    while texts.len() < n {
        texts.push(prose.repeat(SKILL_TEXT_CHARS / prose.len()));
    }
    texts
}

fn collect_skills(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_skills(&path, out);
        } else if path.file_name().is_some_and(|n| n == "SKILL.md") {
            out.push(path);
        }
    }
}
