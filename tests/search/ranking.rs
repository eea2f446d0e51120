//! Golden ranking tests of function search on a catalog of 206 searchable functions written the
//! way real workers publish theirs (`tests/fixtures/search_catalog.json`, an
//! `engine::functions::info {function_ids}` answer: http, state, queue, stream, email, storage,
//! s3, database, directory, cron, browser, shell, git, github, slack, payments, …, plus
//! `engine::` built-ins, the search itself and internal functions, which must never show up).
//!
//! Each test pins the exact answer and says which rule produces it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iii_directory::registry::RegistryError;
use iii_directory::registry::{Author, FunctionContract, Worker};
use iii_directory::retrieval::fusion::{DenseHit, DenseRanker};
use iii_directory::search::bm25::Hit;
use iii_directory::search::catalog::{Catalog, info_entries, parse_list, tools_from_info};
use iii_directory::search::rank::{NAMESPACE_FLOOR, namespace_floor, ranked_hits};
use iii_directory::search::registry::WorkerSource;
use iii_directory::search::{FunctionSearch, RegistrySearch, query, select, select_with};
use serde_json::{Value, json};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/search_catalog.json"
    );
    let text = std::fs::read_to_string(path).expect("read the catalog fixture");
    serde_json::from_str(&text).expect("the catalog fixture is JSON")
}

/// The catalog built the way the worker builds it: the listed ids, then the info entries.
fn catalog() -> Catalog {
    let answer = fixture();
    let ids = parse_list(&answer).expect("list");
    Catalog::build(&tools_from_info(&ids, info_entries(&answer)))
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The ids a search selects, in merge order.
fn ids(catalog: &Catalog, capabilities: &[&str]) -> Vec<String> {
    select(catalog, &query::prepare(&strings(capabilities)))
}

/// The `workers` of a full answer, as (namespace, ids).
fn grouped(response: &Value) -> Vec<(String, Vec<String>)> {
    response["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| {
            let ids = w["functions"]
                .as_array()
                .expect("functions")
                .iter()
                .map(|f| f["function_id"].as_str().expect("id").to_string())
                .collect();
            (w["namespace"].as_str().expect("namespace").to_string(), ids)
        })
        .collect()
}

fn search_with(catalog: Catalog) -> FunctionSearch {
    let search = FunctionSearch::new();
    search.catalog().install(catalog);
    search
}

async fn answer(search: &FunctionSearch, capabilities: &[&str], session: Option<&str>) -> Value {
    let response = search
        .search(&json!({ "capabilities": capabilities }), session, None)
        .await
        .expect("search");
    serde_json::to_value(response).expect("serialize")
}

#[test]
fn the_fixture_is_big_and_keeps_what_must_never_be_found_out() {
    let catalog = catalog();
    assert!(catalog.len() >= 200, "{} functions", catalog.len());
    for hidden in [
        "directory::search_functions",
        "engine::functions::list",
        "engine::functions::info",
        "queue::internal::reap",
        "directory::pre-generate",
        "directory::on-config-change",
    ] {
        assert!(!catalog.contains(hidden), "{hidden}");
    }
    assert!(catalog.contains("directory::skills::get"));
}

#[test]
fn excluded_and_internal_functions_are_never_results() {
    let catalog = catalog();
    // Their own words find only public functions.
    assert_eq!(
        ids(&catalog, &["search functions for capabilities"]),
        ["directory::skills::list"]
    );
    assert_eq!(
        ids(&catalog, &["list functions registered with the engine"]),
        ["directory::skills::list"]
    );
    assert!(ids(&catalog, &["reap expired leases"]).is_empty());
    // The worker's own public functions are searchable like any other.
    assert_eq!(
        ids(&catalog, &["download a skills bundle from the registry"]),
        ["directory::skills::download"]
    );
}

/// The function floor: `browser::screenshot` (9.05, 2 of 3 terms) and `browser::parser`
/// (7.85, 2 terms: `fetched` is not `fetch`) sit under 85% of `browser::fetch` (13.9, all 3
/// terms) without its coverage.
#[test]
fn fetch_a_browser_page_returns_only_browser_fetch() {
    let catalog = catalog();
    let capability = query::prepare(&strings(&["fetch a browser page"]));
    let raw: Vec<String> = ranked_hits(catalog.index(), &capability[0].terms)
        .iter()
        .map(|h| catalog.tools()[h.doc].name.clone())
        .collect();
    assert!(raw.contains(&"browser::parser".to_string()), "{raw:?}");
    assert!(raw.len() >= 5, "{raw:?}");
    assert_eq!(ids(&catalog, &["fetch a browser page"]), ["browser::fetch"]);
}

/// The function floor keeps co-relevant functions: every email sender matches both terms (the
/// leader's coverage) at 73% to 84% of the leader, across four workers.
#[test]
fn full_coverage_keeps_co_relevant_functions_across_workers() {
    let catalog = catalog();
    assert_eq!(
        ids(&catalog, &["send an email"]),
        [
            "resend::emails::send",
            "stripe::invoices::send",
            "resend::emails::batch",
            "mailer::send",
            "auth::passwords::reset",
        ]
    );
    // Two of three terms at 47% of a three-term leader is a tail.
    assert_eq!(
        ids(&catalog, &["geocode a street address"]),
        ["maps::geocode", "maps::reverse_geocode"]
    );
    assert_eq!(
        ids(&catalog, &["send a slack message and post to discord"]),
        ["slack::messages::post", "discord::messages::send"]
    );
}

/// The two-distinct-terms minimum: one matching word is never enough, however strong.
#[test]
fn one_matching_term_is_not_a_match() {
    let catalog = catalog();
    assert!(ids(&catalog, &["twilio"]).is_empty());
    assert!(ids(&catalog, &["kubernetes twilio"]).is_empty());
    assert_eq!(ids(&catalog, &["twilio sms"]), ["twilio::sms::send"]);
}

/// The namespace floor, on this catalog's real scores for one capability before the function
/// floor: workers whose best function is under 40% of the leader go, whole. (After the 50%
/// function floor it cannot remove anything more; it is kept as the contract's second guard.)
#[test]
fn the_namespace_floor_drops_trailing_workers_whole() {
    let catalog = catalog();
    let capability = query::prepare(&strings(&["send an SMS text message"]));
    let hits: Vec<Hit> = ranked_hits(catalog.index(), &capability[0].terms);
    let ranked: Vec<(&str, f64)> = hits
        .iter()
        .map(|h| (catalog.tools()[h.doc].name.as_str(), h.score))
        .collect();
    let names: Vec<&str> = ranked.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "twilio::sms::send",
            "telegram::messages::send",
            "discord::messages::send",
            "mailer::send",
            "resend::emails::send",
            "slack::messages::post",
        ]
    );
    let top = ranked[0].1;
    let kept: Vec<&str> =
        namespace_floor(ranked.clone(), NAMESPACE_FLOOR, |id| catalog.worker_of(id))
            .into_iter()
            .map(|(n, _)| n)
            .collect();
    assert_eq!(
        kept,
        [
            "twilio::sms::send",
            "telegram::messages::send",
            "discord::messages::send",
            "mailer::send",
        ]
    );
    for (name, score) in &ranked {
        assert_eq!(
            kept.contains(name),
            *score >= 0.4 * top,
            "{name} {score} vs {top}"
        );
    }
    // The whole pipeline keeps only the leader: the others miss one of its four terms.
    assert_eq!(
        ids(&catalog, &["send an SMS text message"]),
        ["twilio::sms::send"]
    );
}

/// Each capability is ranked against its own leader, and the merge takes one from each before
/// any second: `storage::put` comes right after the email leader, though it scores far less.
#[test]
fn capabilities_merge_round_robin() {
    let catalog = catalog();
    assert_eq!(
        ids(&catalog, &["send an email", "store a file"]),
        [
            "resend::emails::send",
            "storage::put",
            "stripe::invoices::send",
            "resend::emails::batch",
            "mailer::send",
            "auth::passwords::reset",
        ]
    );
    assert_eq!(
        ids(&catalog, &["store a file", "send an email"])[..3],
        [
            "storage::put",
            "resend::emails::send",
            "stripe::invoices::send"
        ]
    );
}

/// Twelve candidates are merged (two full rounds of six), then only the first six workers
/// met keep theirs: round two's `stripe`, `telegram` and `shell` candidates go.
#[test]
fn at_most_twelve_candidates_from_six_workers() {
    let catalog = catalog();
    let selected = ids(
        &catalog,
        &[
            "send an email",
            "send a message",
            "list buckets",
            "read a file",
            "geocode a street address",
            "search the web",
        ],
    );
    assert_eq!(
        selected,
        [
            "resend::emails::send",
            "discord::messages::send",
            "storage::buckets::list",
            "coder::files::read",
            "maps::geocode",
            "web::search",
            "storage::list",
            "maps::reverse_geocode",
            "web::news",
        ]
    );
}

#[tokio::test]
async fn answers_group_by_worker_in_rank_order_with_slim_descriptions() {
    let search = search_with(catalog());
    let response = answer(&search, &["send an email", "store a file"], None).await;
    assert_eq!(
        grouped(&response),
        [
            (
                "resend".to_string(),
                strings(&["resend::emails::send", "resend::emails::batch"])
            ),
            ("storage".to_string(), strings(&["storage::put"])),
            ("stripe".to_string(), strings(&["stripe::invoices::send"])),
            ("mailer".to_string(), strings(&["mailer::send"])),
            ("auth".to_string(), strings(&["auth::passwords::reset"])),
        ]
    );
    // The first sentence only.
    assert_eq!(
        response["workers"][0]["functions"][0]["description"],
        "Send a transactional email through Resend."
    );
    assert!(response.get("installable").is_none());
    assert!(response["latency_ms"].as_f64().is_some_and(|l| l >= 0.0));
    assert!(
        response["guidance"]
            .as_str()
            .is_some_and(|g| g.contains("ONE engine::functions::info"))
    );
}

/// The engine's own pub/sub registers `publish`, an id without a namespace: it is found, and
/// grouped under the worker the engine says registered it (`worker_name`), or under its own id
/// when the engine names none. The contract's search dropped such ids, so "publish an event"
/// answered nothing.
#[tokio::test]
async fn a_function_without_a_namespace_is_found_and_grouped_under_its_worker() {
    let mut answer_fixture = fixture();
    let functions = answer_fixture["functions"]
        .as_array_mut()
        .expect("functions");
    functions.push(json!({
        "function_id": "publish",
        "description": "Publishes an event",
        "request_schema": { "type": "object", "properties": { "topic": {}, "data": {} } },
        "worker_name": "iii-pubsub",
    }));
    functions.push(
        json!({ "function_id": "heartbeat", "description": "Report that a worker is alive." }),
    );
    let ids = parse_list(&answer_fixture).expect("list");
    let search = search_with(Catalog::build(&tools_from_info(
        &ids,
        info_entries(&answer_fixture),
    )));

    let published = answer(&search, &["publish an event"], None).await;
    assert_eq!(
        grouped(&published),
        [("iii-pubsub".to_string(), strings(&["publish"]))]
    );
    assert_eq!(
        published["workers"][0]["functions"][0]["description"],
        "Publishes an event"
    );
    let alive = answer(&search, &["report worker alive"], None).await;
    assert_eq!(
        grouped(&alive),
        [("heartbeat".to_string(), strings(&["heartbeat"]))]
    );
}

#[test]
fn the_stoplist_changes_nothing_but_noise() {
    let catalog = catalog();
    assert!(ids(&catalog, &["the of and"]).is_empty());
    assert!(ids(&catalog, &["is it on"]).is_empty());
    let bare = ids(&catalog, &["send email"]);
    assert_eq!(ids(&catalog, &["send an email"]), bare);
    assert_eq!(ids(&catalog, &["Send THE email, to it."]), bare);
    // A stopword-only capability beside a real one takes no slot.
    assert_eq!(ids(&catalog, &["the of and", "send an email"]), bare);
}

#[test]
fn plurals_fold() {
    let catalog = catalog();
    assert_eq!(
        ids(&catalog, &["send emails"]),
        ids(&catalog, &["send an email"])
    );
    assert_eq!(
        ids(&catalog, &["list buckets"]),
        [
            "storage::buckets::list",
            "storage::list",
            "s3::listObjectsV2"
        ]
    );
    assert_eq!(
        ids(&catalog, &["list bucket"]),
        ids(&catalog, &["list buckets"])
    );
    assert_eq!(
        ids(&catalog, &["create issues"]),
        ["github::issues::create"]
    );
}

/// `s3::presignUrl` says neither "presign" nor "url" in its description or arguments: only the
/// camelCase parts of its name find it. `coder::files::edit` is found through its camelCase
/// arguments `oldString`/`newString`.
#[test]
fn camel_case_names_and_arguments_are_split() {
    let catalog = catalog();
    assert_eq!(
        ids(&catalog, &["presign a url for an object"]),
        ["s3::presignUrl"]
    );
    assert_eq!(ids(&catalog, &["presignUrl object"]), ["s3::presignUrl"]);
    assert_eq!(
        ids(
            &catalog,
            &["replace an old string with a new string in a file"]
        ),
        ["coder::files::edit"]
    );
}

/// JSON keys in capability text are not what the caller wants: `subject` as a key would make
/// the two senders with a `subject` argument outrank every other email sender.
#[test]
fn json_keys_in_capability_text_are_stripped() {
    let catalog = catalog();
    let with_json = ids(
        &catalog,
        &[r#"send an email with {"subject": "Weekly report", "to": "team@example.com"}"#],
    );
    assert_eq!(
        with_json,
        ids(
            &catalog,
            &["send an email with weekly report team example com"]
        )
    );
    assert_eq!(with_json, ids(&catalog, &["send an email"]));
    assert_eq!(
        ids(
            &catalog,
            &["send an email with subject weekly report team example com"]
        ),
        ["resend::emails::send", "mailer::send"]
    );
}

#[tokio::test]
async fn summarizing_provided_text_is_never_searched() {
    let search = search_with(catalog());
    let response = answer(&search, &["summarize the provided text"], None).await;
    assert!(grouped(&response).is_empty());
    assert!(
        response["guidance"]
            .as_str()
            .is_some_and(|g| g.starts_with("No installed function matched"))
    );
    // Beside a real capability it takes no slot; summarizing a web page is not intrinsic.
    let mixed = answer(&search, &["summarize this content", "store a file"], None).await;
    assert_eq!(
        grouped(&mixed),
        [("storage".to_string(), strings(&["storage::put"]))]
    );
    let summarize = answer(&search, &["summarize a long document"], None).await;
    assert_eq!(
        grouped(&summarize),
        [("llm".to_string(), strings(&["llm::summarize"]))]
    );
}

#[tokio::test]
async fn session_memory_sends_only_what_is_new() {
    let search = search_with(catalog());
    let first = answer(&search, &["send an email"], Some("s1")).await;
    assert_eq!(grouped(&first).len(), 4);
    // Another capability next to the same one: only the new candidate is sent, the repeats
    // are named in the guidance.
    let second = answer(&search, &["send an email", "store a file"], Some("s1")).await;
    assert_eq!(
        grouped(&second),
        [("storage".to_string(), strings(&["storage::put"]))]
    );
    let guidance = second["guidance"].as_str().unwrap_or_default();
    assert!(guidance.contains(
        "Already provided earlier in this session (candidates unchanged — reuse the earlier result): resend::emails::send, stripe::invoices::send, resend::emails::batch, mailer::send, auth::passwords::reset."
    ), "{guidance}");
    // Everything repeated: resent whole (the caller likely lost it), with no repeat note.
    let third = answer(&search, &["store a file"], Some("s1")).await;
    assert_eq!(
        grouped(&third),
        [("storage".to_string(), strings(&["storage::put"]))]
    );
    assert!(
        !third["guidance"]
            .as_str()
            .unwrap_or_default()
            .contains("Already provided")
    );
    // Another session, or no session, gets everything.
    let other = answer(&search, &["send an email", "store a file"], Some("s2")).await;
    assert_eq!(grouped(&other).len(), 5);
    let anonymous = answer(&search, &["send an email", "store a file"], None).await;
    assert_eq!(grouped(&anonymous).len(), 5);
    let anonymous = answer(&search, &["send an email", "store a file"], None).await;
    assert_eq!(grouped(&anonymous).len(), 5);
}

#[tokio::test]
async fn a_new_catalog_clears_session_memory() {
    let search = search_with(catalog());
    answer(&search, &["send an email"], Some("s1")).await;
    let answer_fixture = fixture();
    let mut ids = parse_list(&answer_fixture).expect("list");
    ids.retain(|id| id != "auth::passwords::reset");
    search.catalog().install(Catalog::build(&tools_from_info(
        &ids,
        info_entries(&answer_fixture),
    )));
    let after = answer(&search, &["send an email", "store a file"], Some("s1")).await;
    assert_eq!(
        grouped(&after).len(),
        4,
        "everything is new to a new catalog"
    );
    assert!(
        !after["guidance"]
            .as_str()
            .unwrap_or_default()
            .contains("Already provided")
    );
}

#[tokio::test]
async fn request_errors_are_the_contract_texts() {
    let search = search_with(catalog());
    let error = |request: Value| {
        let search = &search;
        async move {
            search
                .search(&request, None, None)
                .await
                .expect_err("an error")
                .to_string()
        }
    };
    assert_eq!(
        error(json!({ "capabilities": [] })).await,
        "provide at least one capability"
    );
    assert_eq!(
        error(json!({ "capabilities": ["a", "b", "c", "d", "e", "f", "g"] })).await,
        "provide at most 6 capabilities"
    );
    assert_eq!(
        error(json!({ "capabilities": ["send mail", " "] })).await,
        "capabilities must not be blank"
    );
    assert!(
        error(json!({ "query": "send mail" }))
            .await
            .contains("capabilities")
    );
}

/// A registry in memory that counts its calls.
#[derive(Default)]
struct CountingRegistry {
    calls: Mutex<Vec<String>>,
}

#[async_trait]
impl WorkerSource for CountingRegistry {
    async fn find_workers(&self, search: &str) -> Result<Vec<Worker>, RegistryError> {
        self.calls.lock().expect("calls").push(search.to_string());
        Ok(vec![Worker {
            name: "pdfkit".into(),
            version: Some("0.4.0".into()),
            description: Some("PDF tools".into()),
            author: Some(Author {
                verified: true,
                ..Author::default()
            }),
            ..Worker::default()
        }])
    }

    async fn worker_functions(&self, _: &str) -> Result<Vec<FunctionContract>, RegistryError> {
        Ok(vec![FunctionContract {
            name: "pdfkit::watermark".into(),
            description: Some("Stamp a watermark on every page of a PDF. Fast.".into()),
            request_schema: json!({ "properties": { "file": {}, "text": {} } }),
            ..FunctionContract::default()
        }])
    }
}

#[tokio::test]
async fn all_intrinsic_capabilities_ask_the_registry_nothing() {
    let search = search_with(catalog());
    let registry = Arc::new(CountingRegistry::default());
    let registry_search = RegistrySearch {
        registry: registry.as_ref(),
        phase_wait: Duration::from_millis(500),
    };
    let response = search
        .search(
            &json!({ "capabilities": ["summarize the provided text", "write a summary of this content"] }),
            None,
            Some(registry_search),
        )
        .await
        .expect("search");
    assert!(response.workers.is_empty() && response.installable.is_empty());
    assert!(registry.calls.lock().expect("calls").is_empty());

    // A real capability nothing installed covers: the registry worker is offered.
    let response = search
        .search(
            &json!({ "capabilities": ["watermark a pdf"] }),
            None,
            Some(registry_search),
        )
        .await
        .expect("search");
    let value = serde_json::to_value(&response).expect("serialize");
    assert!(grouped(&value).is_empty());
    assert_eq!(
        value["installable"],
        json!([{
            "name": "pdfkit", "version": "0.4.0", "description": "PDF tools",
            "functions": [{ "function_id": "pdfkit::watermark", "description": "Stamp a watermark on every page of a PDF." }],
            "install": { "function": "compose::add", "payload": { "worker": "pdfkit" } },
        }])
    );
    assert!(value["guidance"].as_str().is_some_and(|g| {
        g.starts_with("No installed function matched these capabilities, but the `installable`")
    }));
    assert_eq!(
        *registry.calls.lock().expect("calls"),
        ["watermark a pdf", "watermark", "pdf"]
    );
}

/// The shared registry client against a loopback registry: what `installable` offers over real
/// HTTP, and what a registry that never answers costs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_search_over_http_and_a_registry_that_never_answers() {
    use iii_directory::registry::{Endpoint, Registry as Client};
    use iii_directory::search::registry::DEFAULT_PHASE_WAIT;
    // The downloads' loopback registry, reused for registry search over real HTTP.
    use test_support::loopback::registry::{FakeRegistry, Reply};

    let server = FakeRegistry::start();
    let endpoint = |url: String| Endpoint {
        base_url: url,
        timeout: Duration::from_secs(10),
        cache_ttl: Duration::from_secs(60),
        max_response_bytes: 1 << 20,
    };
    server.json(
        "/w",
        json!({
            "workers": [
                { "name": "pdfkit", "version": "0.4.0", "description": "PDF tools", "author": { "name": "iii", "verified": true } },
                { "name": "pdfcopy", "version": "9.9.9", "description": "PDF tools too", "author": { "verified": false } },
            ],
            "pagination": { "next_cursor": null, "has_more": false, "page_size": 20 },
        }),
    );
    server.json(
        "/w/pdfkit",
        json!({ "worker": { "name": "pdfkit", "version": "0.4.0" }, "functions": [
            { "name": "pdfkit::watermark", "description": "Stamp a watermark on every page of a PDF. Fast.",
              "request_schema": { "properties": { "file": {}, "text": {} } } },
            { "name": "pdfkit::__sync", "description": "Internal watermark sync for PDF pages.", "metadata": { "internal": true } },
        ] }),
    );
    server.json("/w/pdfkit/skills", json!({ "skills": [] }));
    let client = Client::fixed(endpoint(server.url()));
    let search = search_with(catalog());
    let registry = RegistrySearch {
        registry: &client,
        phase_wait: DEFAULT_PHASE_WAIT,
    };
    let response = search
        .search(
            &json!({ "capabilities": ["watermark a pdf"] }),
            None,
            Some(registry),
        )
        .await
        .expect("search");
    let value = serde_json::to_value(&response).expect("serialize");
    assert_eq!(
        value["installable"],
        json!([{
            "name": "pdfkit", "version": "0.4.0", "description": "PDF tools",
            "functions": [{ "function_id": "pdfkit::watermark", "description": "Stamp a watermark on every page of a PDF." }],
            "install": { "function": "compose::add", "payload": { "worker": "pdfkit" } },
        }]),
        "verified authors only, internal functions left out"
    );
    assert!(
        server.hits("/w/pdfcopy").is_empty(),
        "an unverified worker is never looked up"
    );
    // Every list query went over the wire with the capability text; info was cached once.
    assert!(
        server
            .hits("/w")
            .iter()
            .any(|r| r.query.contains("search=watermark"))
    );
    assert_eq!(server.hits("/w/pdfkit").len(), 1);

    // A registry that accepts the connection and never answers: the search still returns,
    // with its installed candidates, within its bound (one list phase; nothing to look up).
    let dead = FakeRegistry::start();
    dead.reply(
        "/w",
        Reply::Slow(
            Duration::from_secs(30),
            Box::new(Reply::Json(200, json!({}))),
        ),
    );
    let dead_client = Client::fixed(endpoint(dead.url()));
    let registry = RegistrySearch {
        registry: &dead_client,
        phase_wait: DEFAULT_PHASE_WAIT,
    };
    let started = std::time::Instant::now();
    let response = search
        .search(
            &json!({ "capabilities": ["send an email"] }),
            None,
            Some(registry),
        )
        .await
        .expect("search");
    let took = started.elapsed();
    assert!(
        took < DEFAULT_PHASE_WAIT * 2 + Duration::from_millis(500),
        "a dead registry cost {took:?}"
    );
    assert!(response.installable.is_empty());
    assert!(
        !response.workers.is_empty(),
        "installed candidates are still answered"
    );
}

/// A dense lane that ranks one catalog function first for any capability, found by an exact
/// scan that honours the caller's filter; before answering it waits (at most 2 s) for a task of
/// the runtime to have run, and records whether it had.
struct WaitsForTheRuntime {
    id: String,
    ticked: Arc<std::sync::atomic::AtomicBool>,
    saw_tick: Arc<std::sync::atomic::AtomicBool>,
}

impl DenseRanker for WaitsForTheRuntime {
    fn nearest(&self, query: &str, limit: usize) -> Option<Vec<DenseHit>> {
        self.nearest_where(query, limit, &|_| true)
    }

    fn nearest_where(
        &self,
        _: &str,
        limit: usize,
        keep: &(dyn Fn(&String) -> bool + Sync),
    ) -> Option<Vec<DenseHit>> {
        use std::sync::atomic::Ordering;
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !self.ticked.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.saw_tick
            .store(self.ticked.load(Ordering::SeqCst), Ordering::SeqCst);
        let hits = [DenseHit::new(self.id.clone(), 0.9)];
        Some(
            hits.into_iter()
                .filter(|h| keep(&h.key))
                .take(limit)
                .collect(),
        )
    }
}

/// A lane that fails on every query.
struct Panics;

impl DenseRanker for Panics {
    fn nearest(&self, _: &str, _: usize) -> Option<Vec<DenseHit>> {
        panic!("the lane broke")
    }
}

/// The ids of a full answer, in order.
fn answered_ids(response: &Value) -> Vec<String> {
    grouped(response)
        .into_iter()
        .flat_map(|(_, ids)| ids)
        .collect()
}

// `#[tokio::test]` runs on one thread: a lane embedding on it would keep every other task of
// the runtime waiting, the ticker below included.
#[tokio::test]
async fn the_dense_lane_runs_off_the_runtimes_threads_and_a_lane_that_panics_leaves_lexical() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let catalog = catalog();
    let id = catalog.tools()[0].name.clone();
    let search = search_with(catalog);
    let lexical = answer(&search, &["send an email"], None).await;
    let nonsense = "zqxj vwpk";
    assert_eq!(
        answered_ids(&answer(&search, &[nonsense], None).await),
        Vec::<String>::new()
    );

    let ticked = Arc::new(AtomicBool::new(false));
    let saw_tick = Arc::new(AtomicBool::new(false));
    search.set_dense(Arc::new(WaitsForTheRuntime {
        id: id.clone(),
        ticked: ticked.clone(),
        saw_tick: saw_tick.clone(),
    }));
    let ticker = tokio::spawn(async move { ticked.store(true, Ordering::SeqCst) });
    let hybrid = answer(&search, &[nonsense], None).await;
    assert!(
        saw_tick.load(Ordering::SeqCst),
        "the runtime's thread was held while the lane ranked"
    );
    assert_eq!(answered_ids(&hybrid), vec![id], "the lane's answer is used");
    ticker.await.expect("ticker");

    search.set_dense(Arc::new(Panics));
    let after_panic = answer(&search, &["send an email"], None).await;
    assert_eq!(grouped(&after_panic), grouped(&lexical));
}

/// A lane still holding the vectors of a catalog since replaced: the functions that left rank
/// first in it, 40 of them, more than a search asks the lane for.
struct HoldsAnOldCatalog {
    live: String,
}

impl DenseRanker for HoldsAnOldCatalog {
    fn nearest(&self, query: &str, limit: usize) -> Option<Vec<DenseHit>> {
        self.nearest_where(query, limit, &|_| true)
    }

    fn nearest_where(
        &self,
        _: &str,
        limit: usize,
        keep: &(dyn Fn(&String) -> bool + Sync),
    ) -> Option<Vec<DenseHit>> {
        let gone = (0..40).map(|i| DenseHit::new(format!("gone::f{i}"), 0.95 - i as f32 * 1e-3));
        let hits = gone.chain([DenseHit::new(self.live.clone(), 0.8)]);
        Some(hits.filter(|h| keep(&h.key)).take(limit).collect())
    }
}

#[test]
fn functions_gone_from_the_catalog_take_no_place_in_the_dense_lanes_answer() {
    let catalog = catalog();
    let live = catalog.tools()[0].name.clone();
    let lane = HoldsAnOldCatalog { live: live.clone() };
    let capabilities = query::prepare(&strings(&["zqxj vwpk"]));
    assert_eq!(
        select_with(&catalog, &capabilities, Some(&lane)),
        vec![live],
        "the lane is asked for functions of the search's catalog only"
    );
}

/// The encoder reads English: a capability mostly in another script is ranked lexically, so
/// a lane that embeds it near unrelated functions offers none of them.
#[test]
fn a_capability_the_encoder_cannot_read_is_ranked_lexically() {
    let catalog = catalog();
    // A lane that finds the catalog's first function for anything it is asked.
    let lane = super::FindsOne(catalog.tools()[0].name.clone());
    let capabilities = |text: &str| query::prepare(&[text.to_string()]);
    let chinese = capabilities("烤面包");
    assert!(select_with(&catalog, &chinese, Some(&lane)).is_empty());
    assert_eq!(
        select_with(&catalog, &chinese, Some(&lane)),
        select(&catalog, &chinese)
    );
    let english = capabilities("bake a loaf of sourdough bread");
    assert!(select_with(&catalog, &english, Some(&lane)).contains(&lane.0));
}

/// The engine finds an id in one namespace only: a candidate another engine namespace holds
/// says which (`engine_namespace`), and the guidance says how to call it; a default-namespace
/// function carries nothing new, and the catalog's fingerprint stays the contract's.
#[tokio::test]
async fn a_candidate_of_another_engine_namespace_says_which() {
    let listed = strings(&["ledger::post-entry", "mailer::send"]);
    let info = json!({ "functions": [
        { "function_id": "ledger::post-entry", "namespace": "team-a",
          "description": "Post a journal entry to the general ledger." },
        { "function_id": "mailer::send", "namespace": "default",
          "description": "Send an email." },
    ]});
    let catalog = Catalog::build(&tools_from_info(&listed, info_entries(&info)));
    // The same catalog with the default namespace left unsaid, and with none named at all.
    let unsaid = json!({ "functions": [
        { "function_id": "ledger::post-entry", "namespace": "team-a",
          "description": "Post a journal entry to the general ledger." },
        { "function_id": "mailer::send", "description": "Send an email." },
    ]});
    let plain = json!({ "functions": [
        { "function_id": "ledger::post-entry", "description": "Post a journal entry to the general ledger." },
        { "function_id": "mailer::send", "description": "Send an email." },
    ]});
    let fingerprint = |answer: &Value| {
        Catalog::build(&tools_from_info(&listed, info_entries(answer)))
            .fingerprint()
            .to_string()
    };
    assert_eq!(fingerprint(&info), fingerprint(&unsaid));
    assert_ne!(fingerprint(&info), fingerprint(&plain));
    let search = search_with(catalog);
    let ledger = answer(&search, &["post a journal entry to the ledger"], None).await;
    let entry = &ledger["workers"][0]["functions"][0];
    assert_eq!(entry["function_id"], "ledger::post-entry");
    assert_eq!(entry["engine_namespace"], "team-a");
    assert!(
        ledger["guidance"]
            .as_str()
            .expect("guidance")
            .contains("engine_namespace"),
        "{ledger}"
    );
    let mail = answer(&search, &["send an email"], None).await;
    let entry = &mail["workers"][0]["functions"][0];
    assert_eq!(entry["function_id"], "mailer::send");
    assert!(entry.get("engine_namespace").is_none(), "{mail}");
    assert!(
        !mail["guidance"]
            .as_str()
            .expect("guidance")
            .contains("engine_namespace"),
        "{mail}"
    );
}

/// A lane that cannot answer now: its query threads busy with a burst, or the catalog not
/// embedded yet.
struct CannotAnswerNow;

impl DenseRanker for CannotAnswerNow {
    fn nearest(&self, _: &str, _: usize) -> Option<Vec<DenseHit>> {
        None
    }
}

/// When a connected lane leaves a capability to its words, the guidance says the answer may
/// miss what a second search finds (16 of 24 identical searches in a burst answered nothing
/// and read "No installed function matched"); a worker without a model, or a lane that
/// answered, says nothing of it.
#[tokio::test]
async fn a_capability_left_to_its_words_by_the_lane_is_said_in_the_guidance() {
    let catalog = catalog();
    let id = catalog.tools()[0].name.clone();
    let search = search_with(catalog);
    let note = iii_directory::search::response::WORDS_ONLY_NOTE;
    let guidance = |response: &Value| response["guidance"].as_str().expect("guidance").to_string();
    let nonsense = "zqxj vwpk";
    let lexical = answer(&search, &[nonsense], None).await;
    assert!(
        !guidance(&lexical).contains(note),
        "no model, nothing to say"
    );

    search.set_dense(Arc::new(CannotAnswerNow));
    let busy = answer(&search, &[nonsense], None).await;
    assert_eq!(answered_ids(&busy), Vec::<String>::new());
    assert!(guidance(&busy).ends_with(note), "{}", guidance(&busy));
    let found = answer(&search, &["send an email"], None).await;
    assert!(!answered_ids(&found).is_empty());
    assert!(guidance(&found).ends_with(note), "{}", guidance(&found));

    search.set_dense(Arc::new(super::FindsOne(id.clone())));
    let answered = answer(&search, &[nonsense], None).await;
    assert_eq!(answered_ids(&answered), vec![id]);
    assert!(!guidance(&answered).contains(note));
    // A capability the encoder does not read is ranked by its words by design: nothing to say.
    let other_script = answer(&search, &["отправить письмо"], None).await;
    assert!(!guidance(&other_script).contains(note));
}
