//! Function search: `directory::search_functions` as the worker answers it in-process
//! (`FunctionSearch::search`, six capabilities) on a generated catalog of 2,000 functions, with
//! registry search off and on (an in-memory registry, so the figure is search's own work; and
//! the worker's registry client against a loopback HTTP registry with its cache off, so every
//! call goes over HTTP), the catalog rebuild (slim, fingerprint, BM25 index) for 2,000
//! functions, and the catalog's refresh on a push at 6,000 (`catalog_refresh.rs`).
//! The baseline is what the original worker does on every call: rebuild the index, then rank.
//!
//! Runs in the full suite, or alone: `cargo bench --bench suite -- search`. The catalog does not
//! depend on the tree size; the targets are judged in runs at the standard size (the
//! default), as the suite's other targets are.

use std::hint::black_box;
use std::time::Duration;

use async_trait::async_trait;
use iii_directory::registry::RegistryError;
use iii_directory::registry::{Author, FunctionContract, Worker};
use iii_directory::search::catalog::{Catalog, Tool};
use iii_directory::search::registry::WorkerSource;
use iii_directory::search::{FunctionSearch, RegistrySearch, query, select};
use serde_json::{Value, json};
use test_support::generate::Rng;
use test_support::loopback::registry::FakeRegistry;

use crate::Settings;
use crate::measure::measure;
use crate::reads::TARGET_SKILLS;
use crate::results::Figure;

/// Functions in the generated catalog (issue 13).
pub const FUNCTIONS: usize = 2_000;
/// Functions per generated worker.
const PER_WORKER: usize = 20;
/// p50 of a search with registry search off must stay under this (ms, issue 13).
const SEARCH_P50_MAX_MS: f64 = 2.0;
/// A catalog rebuild of 2,000 functions must stay under this (ms, issue 13).
const REBUILD_MAX_MS: f64 = 50.0;

const SERVICES: [&str; 25] = [
    "mail", "storage", "billing", "queue", "state", "browser", "calendar", "chat", "crm", "docs",
    "image", "video", "search", "maps", "weather", "payments", "auth", "logs", "metrics", "git",
    "tickets", "sheets", "pdf", "sms", "vector",
];
const VERBS: [&str; 20] = [
    "send",
    "list",
    "get",
    "create",
    "update",
    "delete",
    "search",
    "export",
    "import",
    "sync",
    "archive",
    "restore",
    "share",
    "render",
    "convert",
    "validate",
    "schedule",
    "cancel",
    "publish",
    "summarize",
];
const OBJECTS: [&str; 30] = [
    "email",
    "file",
    "invoice",
    "message",
    "record",
    "event",
    "page",
    "report",
    "user",
    "order",
    "ticket",
    "image",
    "document",
    "contact",
    "payment",
    "job",
    "row",
    "comment",
    "label",
    "webhook",
    "token",
    "bucket",
    "channel",
    "thread",
    "template",
    "customer",
    "subscription",
    "location",
    "forecast",
    "embedding",
];
const QUALIFIERS: [&str; 8] = [
    "in a batch",
    "with attachments",
    "for a date range",
    "by id",
    "as JSON",
    "with retries",
    "from a URL",
    "to a team",
];
const ARGS: [&str; 16] = [
    "id", "name", "to", "subject", "body", "url", "limit", "cursor", "from", "until", "format",
    "filter", "bucket", "key", "channel", "timezone",
];

/// The six capabilities every timed search asks.
const CAPABILITIES: [&str; 6] = [
    "send an email with attachments",
    "store a file in a bucket",
    "create an invoice for a customer",
    "schedule a job every hour",
    "search documents by text",
    "post a message to a team channel",
];

/// A deterministic catalog of `count` functions from 100 workers, described the way workers
/// describe theirs (a verb, an object, a qualifier; a few arguments).
pub fn generated_tools(count: usize) -> Vec<Tool> {
    let mut rng = Rng::new(13);
    (0..count)
        .map(|i| {
            let worker = i / PER_WORKER;
            let service = SERVICES[worker % SERVICES.len()];
            let verb = *rng.pick(&VERBS);
            let object = *rng.pick(&OBJECTS);
            let qualifier = *rng.pick(&QUALIFIERS);
            let mut properties = serde_json::Map::new();
            for _ in 0..1 + rng.below(4) {
                properties.insert(rng.pick(&ARGS).to_string(), json!({ "type": "string" }));
            }
            Tool {
                name: format!("{service}{worker}::{object}s::{verb}_{i}"),
                description: format!(
                    "{} a {object} {qualifier}. Returns the {object} and its status.",
                    capitalized(verb)
                ),
                parameters: json!({ "type": "object", "properties": properties }),
                worker: None,
                engine_namespace: None,
            }
        })
        .collect()
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// A loopback HTTP registry answering what `registry` holds: one list (the registry matches
/// by free text; this one answers every query with the first ten workers) and every worker's
/// detail and skills.
fn loopback_registry(registry: &InMemoryRegistry) -> FakeRegistry {
    let server = FakeRegistry::start();
    let rows: Vec<Value> = registry
        .workers
        .iter()
        .take(10)
        .map(|(w, _)| serde_json::to_value(w).expect("worker row"))
        .collect();
    server.json(
        "/w",
        json!({ "workers": rows, "pagination": { "next_cursor": null, "has_more": false, "page_size": 10 } }),
    );
    for (worker, functions) in &registry.workers {
        server.json(
            &format!("/w/{}", worker.name),
            json!({ "worker": worker, "functions": functions }),
        );
        server.json(
            &format!("/w/{}/skills", worker.name),
            json!({ "skills": [] }),
        );
    }
    server
}

/// A registry in memory: 40 verified workers, each listing matches on its description words.
struct InMemoryRegistry {
    workers: Vec<(Worker, Vec<FunctionContract>)>,
}

impl InMemoryRegistry {
    fn new() -> InMemoryRegistry {
        let mut rng = Rng::new(7);
        let workers = (0..40)
            .map(|w| {
                let object = *rng.pick(&OBJECTS);
                let name = format!("registry-{object}-{w}");
                let functions = (0..8)
                    .map(|f| {
                        let verb = *rng.pick(&VERBS);
                        let qualifier = *rng.pick(&QUALIFIERS);
                        (f, verb, qualifier)
                    })
                    .map(|(f, verb, qualifier)| FunctionContract {
                        name: format!("{name}::{verb}_{f}"),
                        description: Some(format!("{} a {object} {qualifier}.", capitalized(verb))),
                        request_schema: json!({ "properties": { "id": {} } }),
                        ..FunctionContract::default()
                    })
                    .collect();
                (
                    Worker {
                        name,
                        version: Some("1.0.0".into()),
                        description: Some(format!("Work with {object}s")),
                        author: Some(Author {
                            verified: w % 4 != 0,
                            ..Author::default()
                        }),
                        ..Worker::default()
                    },
                    functions,
                )
            })
            .collect();
        InMemoryRegistry { workers }
    }
}

#[async_trait]
impl WorkerSource for InMemoryRegistry {
    async fn find_workers(&self, search: &str) -> Result<Vec<Worker>, RegistryError> {
        let words: Vec<&str> = search.split_whitespace().collect();
        Ok(self
            .workers
            .iter()
            .filter(|(w, _)| {
                let text = w.description.as_deref().unwrap_or_default();
                words.iter().any(|word| text.contains(word))
            })
            .take(10)
            .map(|(w, _)| w.clone())
            .collect())
    }

    async fn worker_functions(&self, name: &str) -> Result<Vec<FunctionContract>, RegistryError> {
        self.workers
            .iter()
            .find(|(w, _)| w.name == name)
            .map(|(_, info)| info.clone())
            .ok_or(RegistryError::NotFound)
    }
}

pub fn figures(settings: &Settings) -> Vec<Figure> {
    // Searches are fast: ten times the suite's iteration count of them; rebuilds as many as it.
    let runs = settings.iterations * 10;
    let rebuilds = settings.iterations;
    let tools = generated_tools(FUNCTIONS);
    let request = json!({ "capabilities": CAPABILITIES });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let rebuild = measure(1, rebuilds, || {
        black_box(Catalog::build(&tools));
    });
    let search = FunctionSearch::new();
    search.catalog().install(Catalog::build(&tools));
    let answer: Value = serde_json::to_value(
        runtime
            .block_on(search.search(&request, None, None))
            .expect("search"),
    )
    .expect("serialize");
    let candidates: usize = answer["workers"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|w| w["functions"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0);
    assert!(candidates > 0, "the generated catalog answers: {answer}");

    let off = measure(10, runs, || {
        black_box(
            runtime
                .block_on(search.search(&request, None, None))
                .expect("search"),
        );
    });
    // The original's way: the index rebuilt from the catalog on every call.
    let capabilities = query::parse(&request).expect("request");
    let rebuild_per_call = measure(1, rebuilds, || {
        let catalog = Catalog::build(&tools);
        black_box(select(&catalog, &capabilities));
    });

    let registry = InMemoryRegistry::new();
    let with_registry = RegistrySearch {
        registry: &registry,
        phase_wait: Duration::from_millis(1500),
    };
    let installable = runtime
        .block_on(search.search(&request, None, Some(with_registry)))
        .expect("search")
        .installable
        .len();
    let on = measure(10, runs, || {
        black_box(
            runtime
                .block_on(search.search(&request, None, Some(with_registry)))
                .expect("search"),
        );
    });

    // The worker's registry client, cache off, against a loopback registry serving the same
    // workers: every call pays the HTTP round trips.
    let server = loopback_registry(&registry);
    let client = iii_directory::registry::Registry::fixed(iii_directory::registry::Endpoint {
        base_url: server.url(),
        timeout: Duration::from_secs(5),
        cache_ttl: Duration::ZERO,
        max_response_bytes: 1 << 20,
    });
    let over_http = RegistrySearch {
        registry: &client,
        phase_wait: Duration::from_millis(1500),
    };
    let http_installable = runtime
        .block_on(search.search(&request, None, Some(over_http)))
        .expect("search")
        .installable
        .len();
    let http = measure(3, settings.iterations, || {
        black_box(
            runtime
                .block_on(search.search(&request, None, Some(over_http)))
                .expect("search"),
        );
    });

    let mut figures = vec![
        Figure::timing(
            "search_off",
            "search_functions, 2,000 functions, 6 capabilities",
            &off,
        )
        .baseline("index rebuilt per call", rebuild_per_call.p50)
        .target(13, "p50 <2 ms", TARGET_SKILLS, off.p50 < SEARCH_P50_MAX_MS)
        .note(format!(
            "registry search off; {candidates} candidates answered; in-process (no wire)"
        )),
        Figure::timing(
            "search_registry",
            "search_functions + registry (in-memory registry)",
            &on,
        )
        .note(format!(
            "in-memory registry (40 workers, no network): the cost of registry search itself; {installable} installable workers answered"
        )),
        Figure::timing(
            "search_registry_http",
            "search_functions + registry (loopback HTTP, no cache)",
            &http,
        )
        .note(format!(
            "the worker's registry client against a local HTTP registry, cache off: every list and info request goes over loopback; {http_installable} installable workers answered"
        )),
        Figure::timing("search_rebuild", "search catalog rebuild, 2,000 functions", &rebuild)
            .target(13, "<50 ms", TARGET_SKILLS, rebuild.p50 < REBUILD_MAX_MS)
            .note("slim tools, blake3 fingerprint, BM25 index; once per catalog change"),
    ];
    figures.extend(crate::catalog_refresh::figures(settings));
    figures
}
