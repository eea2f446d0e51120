//! The live catalog: fetched from the engine (`engine::functions::list`, then
//! `engine::functions::info {function_ids}` in parallel batches of at most 32), indexed once,
//! and swapped in only when its fingerprint changed. A refresh on one of the engine's pushes,
//! and most periodic ones, ask only for the contracts that may have changed (`known.rs`); the
//! one at each connection and one periodic round in ten ask for all. Refreshes are
//! serialized; a failed one keeps the
//! catalog that was there. A refresh asked for while another already waits its turn
//! joins that one (it will fetch after the change that asked), so a burst of pushes costs two
//! fetches, not one each.
//!
//! The engine is reached through [`Engine`], so this logic runs without a socket in tests.

use crate::locks;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::catalog::{Catalog, Draft, SlimTool, info_entries, parse_list, tools_from_info};
pub use super::known::Reuse;
use super::known::{Connections, Known, connections, stamps};
use super::{EngineError, SearchError};

/// Timeout of `engine::functions::list` (contract: 5 s).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);
/// Timeout of each `engine::functions::info` batch (contract: 5 s).
pub const INFO_TIMEOUT: Duration = Duration::from_secs(5);
/// Ids per `engine::functions::info` batch (the engine's maximum).
pub const INFO_BATCH: usize = 32;

/// A call to an engine function, answered or failed (with the client's error).
#[async_trait]
pub trait Engine: Send + Sync {
    async fn call(
        &self,
        function_id: &str,
        payload: Value,
        timeout: Duration,
    ) -> Result<Value, EngineError>;
}

const LIST: &str = "engine::functions::list";
const INFO: &str = "engine::functions::info";
const WORKERS: &str = "engine::workers::list";

/// `engine::functions::info` batches in flight at once: each answer is made slim as it comes,
/// so thousands of schemas are never held all together.
const INFO_IN_FLIGHT: usize = 8;

/// How long a fetch goes on asking for contracts: the batches not asked for by then count as
/// failed (against an engine that stalls, a full fetch of 6,000 functions would otherwise take
/// 188 batches' timeouts, 8 at a time, every search waiting for the first catalog meanwhile).
const INFO_DEADLINE: Duration = Duration::from_secs(20);

/// The engine's functions as slim tools, in listed order (excluded and internal ones left out).
/// With [`Reuse::Unchanged`], a function whose stamp is the one `known` holds keeps what was
/// fetched before. A function whose batch failed is searched by the contract fetched before,
/// if any, kept until a fetch settles it, and asked for again next time. `known` then holds
/// what this fetch settled, and what it carried.
pub async fn fetch(
    engine: &dyn Engine,
    known: &mut Known,
    reuse: Reuse,
) -> Result<Vec<SlimTool>, SearchError> {
    // Before the list: a worker redeployed between the two calls is seen by the next push.
    let connections = worker_connections(engine).await;
    let listed = engine
        .call(LIST, json!({}), LIST_TIMEOUT)
        .await
        .map_err(|source| SearchError::Engine {
            function: LIST,
            source,
        })?;
    let ids = parse_list(&listed)?;
    let stamps = connections
        .map(|connections| stamps(&listed, &connections))
        .unwrap_or_default();
    let kept = |id: &str| match reuse {
        Reuse::Nothing => None,
        Reuse::Unchanged => known.kept(id, *stamps.get(id)?),
    };
    let asked: Vec<String> = ids
        .iter()
        .filter(|id| kept(id).is_none())
        .cloned()
        .collect();
    let mut answers = contracts(engine, &asked).await;
    // Nothing answered, and some function would be left out of search for it: the catalog
    // that is there stays.
    if answers.settled.is_empty() && asked.iter().any(|id| !known.knows(id)) {
        return Err(SearchError::InfoAllFailed);
    }
    let mut settled = Known::default();
    let mut tools = Vec::with_capacity(ids.len());
    for id in &ids {
        let (tool, is_settled) = match kept(id) {
            Some(tool) => (tool.cloned(), true),
            None if answers.settled.contains(id) => (answers.tools.remove(id), true),
            None => (known.earlier(id).cloned(), false),
        };
        match (is_settled, stamps.get(id.as_str())) {
            (true, Some(stamp)) => settled.settle(id, *stamp, tool.clone()),
            (true, None) => {}
            (false, _) => settled.carry(known, id),
        }
        tools.extend(tool);
    }
    tracing::debug!(
        functions = ids.len(),
        asked = asked.len(),
        unanswered = asked.len() - answers.settled.len(),
        "catalog fetched, the contracts asked for"
    );
    *known = settled;
    Ok(tools)
}

/// The connection of each worker the engine lists, or `None` when it does not answer (then
/// nothing is kept).
async fn worker_connections(engine: &dyn Engine) -> Option<Connections> {
    let answer = engine
        .call(WORKERS, json!({}), LIST_TIMEOUT)
        .await
        .inspect_err(|e| tracing::debug!("{WORKERS} failed; every contract is fetched: {e}"))
        .ok()?;
    Some(connections(&answer))
}

/// What `engine::functions::info` answered for the ids asked.
#[derive(Default)]
struct Contracts {
    /// The usable contracts, by id.
    tools: HashMap<String, SlimTool>,
    /// The ids whose batch was answered: with a usable contract, or without one (an error
    /// entry, an internal function, no entry at all).
    settled: HashSet<String>,
}

/// The contracts of these ids, from `engine::functions::info` batches of at most 32,
/// [`INFO_IN_FLIGHT`] in flight at a time, asked for until [`INFO_DEADLINE`]. A failed batch
/// settles none of its ids.
async fn contracts(engine: &dyn Engine, ids: &[String]) -> Contracts {
    let deadline = Instant::now() + INFO_DEADLINE;
    let mut batches = ids.chunks(INFO_BATCH);
    let mut in_flight = FuturesUnordered::new();
    let mut contracts = Contracts::default();
    loop {
        while in_flight.len() < INFO_IN_FLIGHT && Instant::now() < deadline {
            let Some(batch) = batches.next() else { break };
            in_flight.push(info(engine, batch));
        }
        let Some((batch, answer)) = in_flight.next().await else {
            break;
        };
        let Some(answer) = answer else { continue };
        let fetched = tools_from_info(batch, info_entries(&answer));
        contracts.settled.extend(batch.iter().cloned());
        contracts.tools.extend(
            fetched
                .iter()
                .map(|tool| (tool.name.clone(), SlimTool::from_tool(tool))),
        );
    }
    contracts
}

/// One `engine::functions::info` batch and its answer; a failure is logged.
async fn info<'a>(engine: &dyn Engine, batch: &'a [String]) -> (&'a [String], Option<Value>) {
    let answer = engine
        .call(INFO, json!({ "function_ids": batch }), INFO_TIMEOUT)
        .await
        .inspect_err(|e| {
            tracing::warn!(
                functions = batch.len(),
                "{INFO} batch failed; those functions are searched by the contracts fetched \
                 before, if any, until the next refresh: {e}"
            );
        })
        .ok();
    (batch, answer)
}

/// What a refresh did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refresh {
    /// A new catalog of this many functions is in use.
    Changed { functions: usize },
    /// The engine's functions are the ones already indexed.
    Unchanged,
    /// Another refresh was already waiting its turn, and fetches after this one was asked for.
    Joined,
}

/// The catalog searches read, and its refresher.
pub struct CatalogService {
    current: RwLock<Arc<Catalog>>,
    /// Held by the refresh under way, with the contracts the last fetch brought.
    refreshing: tokio::sync::Mutex<Known>,
    /// A refresh waits for `refreshing` and has not fetched yet.
    queued: AtomicBool,
    /// A refresh that keeps no contract was asked for and has not started yet.
    fetch_all: AtomicBool,
    /// A catalog fetched from the engine is in use (the empty one of a new service is not).
    loaded: AtomicBool,
    /// Counts the catalogs swapped in, for those who follow them ([`CatalogService::changes`]).
    swapped: tokio::sync::watch::Sender<u64>,
}

impl Default for CatalogService {
    fn default() -> Self {
        CatalogService::new(Catalog::build(&[]))
    }
}

impl CatalogService {
    pub fn new(catalog: Catalog) -> CatalogService {
        CatalogService {
            current: RwLock::new(Arc::new(catalog)),
            refreshing: tokio::sync::Mutex::new(Known::default()),
            queued: AtomicBool::new(false),
            fetch_all: AtomicBool::new(false),
            loaded: AtomicBool::new(false),
            swapped: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Told of every catalog swapped in, whoever fetched it (a refresh, a push, or the first
    /// search's [`ensure_loaded`](Self::ensure_loaded)): the function lane follows it, so no
    /// catalog goes unembedded because of the path it came by.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.swapped.subscribe()
    }

    /// Whether a catalog fetched from the engine is in use.
    pub fn loaded(&self) -> bool {
        self.loaded.load(Ordering::SeqCst)
    }

    /// The catalog in use (a snapshot: a refresh never changes it under a search).
    pub fn current(&self) -> Arc<Catalog> {
        locks::read(&self.current).clone()
    }

    /// Fetches and indexes the engine's functions, and swaps the new catalog in if it differs.
    /// One refresh at a time; on error the current catalog stays. Joins a refresh that already
    /// waits its turn ([`Refresh::Joined`]).
    /// A refresh that may keep contracts fetches them all anyway when a refresh that may not
    /// was asked for before it started.
    pub async fn refresh(&self, engine: &dyn Engine, reuse: Reuse) -> Result<Refresh, SearchError> {
        if reuse == Reuse::Nothing {
            self.fetch_all.store(true, Ordering::SeqCst);
        }
        if self.queued.swap(true, Ordering::SeqCst) {
            return Ok(Refresh::Joined);
        }
        let mut known = self.refreshing.lock().await;
        self.queued.store(false, Ordering::SeqCst);
        let reuse = match self.fetch_all.swap(false, Ordering::SeqCst) {
            true => Reuse::Nothing,
            false => Reuse::Unchanged,
        };
        self.fetch_and_install(engine, &mut known, reuse).await
    }

    /// Waits for the first catalog from the engine: fetches it now unless a refresh under way
    /// brings it. A search before then would answer that nothing is installed.
    pub async fn ensure_loaded(&self, engine: &dyn Engine) -> Result<(), SearchError> {
        if self.loaded() {
            return Ok(());
        }
        let mut known = self.refreshing.lock().await;
        if !self.loaded() {
            self.fetch_and_install(engine, &mut known, Reuse::Nothing)
                .await?;
        }
        Ok(())
    }

    async fn fetch_and_install(
        &self,
        engine: &dyn Engine,
        known: &mut Known,
        reuse: Reuse,
    ) -> Result<Refresh, SearchError> {
        let draft = Draft::new(fetch(engine, known, reuse).await?);
        if self.loaded() && self.current().fingerprint() == draft.fingerprint() {
            return Ok(Refresh::Unchanged);
        }
        Ok(self.install(draft.finish()))
    }

    /// Swaps `catalog` in when its fingerprint differs from the current one.
    pub fn install(&self, catalog: Catalog) -> Refresh {
        let outcome = self.swap(catalog);
        // After the swap: a search that sees `loaded` reads the catalog fetched.
        self.loaded.store(true, Ordering::SeqCst);
        outcome
    }

    fn swap(&self, catalog: Catalog) -> Refresh {
        let mut current = locks::write(&self.current);
        if current.fingerprint() == catalog.fingerprint() {
            return Refresh::Unchanged;
        }
        let functions = catalog.len();
        *current = Arc::new(catalog);
        self.swapped.send_modify(|count| *count += 1);
        Refresh::Changed { functions }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An engine's answer in these tests: the value, or the message it failed with.
    type Answer = Result<Value, &'static str>;
    type InfoAnswer = Box<dyn Fn(&[String]) -> Answer + Send + Sync>;

    /// An engine answering from closures, counting calls and the largest concurrency seen.
    struct Scripted {
        list: Mutex<Answer>,
        workers: Mutex<Answer>,
        info: InfoAnswer,
        info_calls: AtomicUsize,
        /// Every id asked of `engine::functions::info`, in order.
        asked: Mutex<Vec<String>>,
        in_flight: AtomicUsize,
        peak: AtomicUsize,
        /// How long each `engine::functions::info` call takes.
        delay: Duration,
    }

    impl Scripted {
        fn new(
            list: Answer,
            info: impl Fn(&[String]) -> Answer + Send + Sync + 'static,
        ) -> Scripted {
            Scripted {
                list: Mutex::new(list),
                workers: Mutex::new(Err("unexpected call")),
                info: Box::new(info),
                info_calls: AtomicUsize::new(0),
                asked: Mutex::new(Vec::new()),
                in_flight: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                delay: Duration::from_millis(20),
            }
        }
    }

    #[async_trait]
    impl Engine for Scripted {
        async fn call(
            &self,
            function_id: &str,
            payload: Value,
            _: Duration,
        ) -> Result<Value, EngineError> {
            // Every call yields, as a call over a socket does.
            tokio::task::yield_now().await;
            let answer = match function_id {
                "engine::functions::list" => self
                    .list
                    .lock()
                    .map(|l| l.clone())
                    .unwrap_or(Err("poisoned")),
                "engine::workers::list" => self
                    .workers
                    .lock()
                    .map(|w| w.clone())
                    .unwrap_or(Err("poisoned")),
                "engine::functions::info" => {
                    self.info_calls.fetch_add(1, Ordering::SeqCst);
                    let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    self.peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(self.delay).await;
                    self.in_flight.fetch_sub(1, Ordering::SeqCst);
                    let ids: Vec<String> =
                        serde_json::from_value(payload["function_ids"].clone()).unwrap_or_default();
                    assert!(ids.len() <= INFO_BATCH, "a batch of {}", ids.len());
                    if let Ok(mut asked) = self.asked.lock() {
                        asked.extend(ids.iter().cloned());
                    }
                    (self.info)(&ids)
                }
                _ => Err("unexpected call"),
            };
            answer.map_err(EngineError::from)
        }
    }

    fn details(ids: &[String]) -> Answer {
        let functions: Vec<Value> = ids
            .iter()
            .map(|id| json!({ "function_id": id, "description": format!("Does {id}.") }))
            .collect();
        Ok(json!({ "functions": functions }))
    }

    fn listing(n: usize) -> Value {
        let functions: Vec<Value> = (0..n)
            .map(|i| json!({ "function_id": format!("w{}::f{i}", i % 7) }))
            .collect();
        json!({ "functions": functions })
    }

    #[tokio::test]
    async fn fetches_in_parallel_batches_of_at_most_32() {
        let engine = Scripted::new(Ok(listing(100)), details);
        let tools = fetch(&engine, &mut Known::default(), Reuse::Nothing)
            .await
            .unwrap_or_default();
        assert_eq!(tools.len(), 100);
        assert_eq!(tools[0].name, "w0::f0");
        assert_eq!(engine.info_calls.load(Ordering::SeqCst), 4);
        assert!(
            engine.peak.load(Ordering::SeqCst) > 1,
            "batches ran one at a time"
        );
    }

    #[tokio::test]
    async fn an_empty_listing_is_an_empty_catalog_without_info_calls() {
        let engine = Scripted::new(Ok(json!({ "functions": [] })), details);
        assert_eq!(
            fetch(&engine, &mut Known::default(), Reuse::Nothing)
                .await
                .ok(),
            Some(Vec::new())
        );
        assert_eq!(engine.info_calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn failures_are_reported_with_the_contract_texts() {
        let refusal = async |engine: Scripted| {
            fetch(&engine, &mut Known::default(), Reuse::Nothing)
                .await
                .expect_err("fails")
                .to_string()
        };
        assert_eq!(
            refusal(Scripted::new(Err("timeout"), details)).await,
            "engine::functions::list: timeout"
        );
        assert_eq!(
            refusal(Scripted::new(Ok(json!({ "nope": 1 })), details)).await,
            "catalog list response was malformed"
        );
        assert_eq!(
            refusal(Scripted::new(Ok(listing(40)), |_| Err("forbidden"))).await,
            "catalog info failed for every function"
        );
    }

    #[tokio::test]
    async fn a_failed_batch_leaves_only_its_functions_out() {
        let engine = Scripted::new(Ok(listing(40)), |ids: &[String]| {
            if ids.len() == INFO_BATCH {
                Err("down")
            } else {
                details(ids)
            }
        });
        let tools = fetch(&engine, &mut Known::default(), Reuse::Nothing)
            .await
            .unwrap_or_default();
        assert_eq!(tools.len(), 40 - INFO_BATCH);
    }

    #[tokio::test]
    async fn refresh_swaps_only_on_a_new_fingerprint_and_keeps_the_old_catalog_on_error() {
        let service = CatalogService::default();
        let empty = service.current().fingerprint().to_string();
        let engine = Scripted::new(Ok(listing(10)), details);
        assert_eq!(
            service.refresh(&engine, Reuse::Unchanged).await.ok(),
            Some(Refresh::Changed { functions: 10 })
        );
        let first = service.current();
        assert_ne!(first.fingerprint(), empty);
        assert_eq!(
            service.refresh(&engine, Reuse::Unchanged).await.ok(),
            Some(Refresh::Unchanged)
        );
        assert!(
            Arc::ptr_eq(&first, &service.current()),
            "an unchanged catalog is not rebuilt in place"
        );

        let failing = Scripted::new(Ok(listing(12)), |_| Err("down"));
        assert!(service.refresh(&failing, Reuse::Unchanged).await.is_err());
        assert!(
            Arc::ptr_eq(&first, &service.current()),
            "a failed refresh keeps the catalog"
        );

        let grown = Scripted::new(Ok(listing(12)), details);
        assert_eq!(
            service.refresh(&grown, Reuse::Unchanged).await.ok(),
            Some(Refresh::Changed { functions: 12 })
        );
    }

    #[tokio::test]
    async fn refreshes_are_serialized() {
        let service = Arc::new(CatalogService::default());
        let engine = Arc::new(Scripted::new(Ok(listing(64)), details));
        let runs: Vec<_> = (0..3)
            .map(|_| {
                let service = service.clone();
                let engine = engine.clone();
                tokio::spawn(
                    async move { service.refresh(engine.as_ref(), Reuse::Unchanged).await },
                )
            })
            .collect();
        let mut outcomes = Vec::new();
        for run in runs {
            outcomes.push(run.await.ok().and_then(Result::ok));
        }
        // The first fetches, the second waits its turn, the third joins the second: two
        // batches per refresh that fetched, and never two refreshes' batches at once.
        assert_eq!(
            outcomes,
            [
                Some(Refresh::Changed { functions: 64 }),
                Some(Refresh::Unchanged),
                Some(Refresh::Joined)
            ]
        );
        assert_eq!(engine.info_calls.load(Ordering::SeqCst), 4);
        assert!(engine.peak.load(Ordering::SeqCst) <= 2);
        // Once the queue is empty, a refresh fetches again.
        assert_eq!(
            service
                .refresh(engine.as_ref(), Reuse::Unchanged)
                .await
                .ok(),
            Some(Refresh::Unchanged)
        );
        assert_eq!(engine.info_calls.load(Ordering::SeqCst), 6);
    }

    #[tokio::test]
    async fn the_first_catalog_is_waited_for_once_and_fetched_again_after_a_failure() {
        let service = CatalogService::default();
        assert!(!service.loaded());
        let failing = Scripted::new(Err("timeout"), details);
        assert!(service.ensure_loaded(&failing).await.is_err());
        assert!(!service.loaded(), "a failed fetch loads nothing");

        let engine = Scripted::new(Ok(listing(3)), details);
        assert!(service.ensure_loaded(&engine).await.is_ok());
        assert!(service.loaded());
        assert_eq!(service.current().len(), 3);
        // Loaded: no more fetches for it.
        assert!(service.ensure_loaded(&engine).await.is_ok());
        assert_eq!(engine.info_calls.load(Ordering::SeqCst), 1);
    }

    /// A listing whose entries name their workers (`w0` to `w6`, each one connection).
    fn listing_by_worker(n: usize) -> Value {
        let functions: Vec<Value> = (0..n)
            .map(|i| {
                json!({
                    "function_id": format!("w{}::f{i}", i % 7),
                    "namespace": "default",
                    "worker_name": format!("w{}", i % 7),
                    "description": format!("Function {i}."),
                })
            })
            .collect();
        json!({ "functions": functions })
    }

    fn connections_of(ids: &[&str; 7]) -> Answer {
        let workers: Vec<Value> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| json!({ "name": format!("w{i}"), "namespace": "default", "id": id }))
            .collect();
        Ok(json!({ "workers": workers }))
    }

    fn set(slot: &Mutex<Answer>, answer: Answer) {
        if let Ok(mut slot) = slot.lock() {
            *slot = answer;
        }
    }

    fn take_asked(engine: &Scripted) -> Vec<String> {
        engine
            .asked
            .lock()
            .map(|mut asked| std::mem::take(&mut *asked))
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn a_push_refresh_asks_only_for_the_contracts_that_may_have_changed() {
        let service = CatalogService::default();
        let engine = Scripted::new(Ok(listing_by_worker(100)), details);
        let first = ["a", "b", "c", "d", "e", "f", "g"];
        set(&engine.workers, connections_of(&first));
        let refresh = async |reuse| service.refresh(&engine, reuse).await.ok();

        assert_eq!(
            refresh(Reuse::Unchanged).await,
            Some(Refresh::Changed { functions: 100 })
        );
        assert_eq!(take_asked(&engine).len(), 100, "nothing known yet");
        assert_eq!(refresh(Reuse::Unchanged).await, Some(Refresh::Unchanged));
        assert!(take_asked(&engine).is_empty(), "nothing changed");

        // A new description: that function alone.
        let mut list = listing_by_worker(100);
        list["functions"][9]["description"] = json!("Function nine, renamed.");
        set(&engine.list, Ok(list.clone()));
        refresh(Reuse::Unchanged).await;
        assert_eq!(take_asked(&engine), ["w2::f9"]);

        // Worker w3 redeployed (a new connection, entries unchanged): its functions alone.
        let mut redeployed = first;
        redeployed[3] = "d2";
        set(&engine.workers, connections_of(&redeployed));
        refresh(Reuse::Unchanged).await;
        let asked = take_asked(&engine);
        assert_eq!(asked.len(), 14);
        assert!(asked.iter().all(|id| id.starts_with("w3::")), "{asked:?}");

        // A worker the engine does not list (no pid): its functions every time.
        let mut pidless = connections_of(&redeployed).unwrap_or_default();
        pidless["workers"].as_array_mut().map(|w| w.remove(5));
        set(&engine.workers, Ok(pidless));
        refresh(Reuse::Unchanged).await;
        refresh(Reuse::Unchanged).await;
        let asked = take_asked(&engine);
        assert_eq!(asked.len(), 28);
        assert!(asked.iter().all(|id| id.starts_with("w5::")), "{asked:?}");

        // No answer from engine::workers::list, or a refresh that keeps nothing: all of them.
        set(&engine.workers, Err("forbidden"));
        refresh(Reuse::Unchanged).await;
        assert_eq!(take_asked(&engine).len(), 100);
        set(&engine.workers, connections_of(&redeployed));
        refresh(Reuse::Unchanged).await;
        assert_eq!(
            take_asked(&engine).len(),
            100,
            "the failed one kept nothing"
        );
        refresh(Reuse::Nothing).await;
        assert_eq!(take_asked(&engine).len(), 100);
    }

    #[tokio::test]
    async fn a_push_refresh_joined_by_a_full_one_fetches_every_contract() {
        let service = CatalogService::default();
        let engine = Scripted::new(Ok(listing_by_worker(40)), details);
        set(
            &engine.workers,
            connections_of(&["a", "b", "c", "d", "e", "f", "g"]),
        );
        assert!(service.refresh(&engine, Reuse::Nothing).await.is_ok());
        take_asked(&engine);
        // The first fetches; the second waits its turn; the third, a full one, joins it.
        let (first, second, third) = tokio::join!(
            service.refresh(&engine, Reuse::Unchanged),
            service.refresh(&engine, Reuse::Unchanged),
            service.refresh(&engine, Reuse::Nothing),
        );
        assert_eq!(
            [first.ok(), second.ok(), third.ok()],
            [
                Some(Refresh::Unchanged),
                Some(Refresh::Unchanged),
                Some(Refresh::Joined)
            ]
        );
        assert_eq!(take_asked(&engine).len(), 40, "the waiting one fetched all");
    }

    #[tokio::test]
    async fn a_failed_batch_keeps_the_earlier_contract_and_is_asked_for_again() {
        let service = CatalogService::default();
        let fails = Arc::new(AtomicBool::new(false));
        let failing = fails.clone();
        let engine = Scripted::new(
            Ok(listing_by_worker(40)),
            move |ids: &[String]| match failing.load(Ordering::SeqCst) {
                true => Err("timeout"),
                false => details(ids),
            },
        );
        set(
            &engine.workers,
            connections_of(&["a", "b", "c", "d", "e", "f", "g"]),
        );
        assert!(service.refresh(&engine, Reuse::Nothing).await.is_ok());
        take_asked(&engine);

        // One function's entry changes and another leaves; the one batch asked for fails.
        let mut list = listing_by_worker(40);
        list["functions"][9]["description"] = json!("Function nine, renamed.");
        list["functions"].as_array_mut().map(|f| f.remove(0));
        set(&engine.list, Ok(list));
        fails.store(true, Ordering::SeqCst);
        assert_eq!(
            service.refresh(&engine, Reuse::Unchanged).await.ok(),
            Some(Refresh::Changed { functions: 39 }),
            "the removal is in, the changed function kept as it was"
        );
        assert_eq!(take_asked(&engine), ["w2::f9"]);
        let nine = |service: &CatalogService| {
            let catalog = service.current();
            let tool = catalog.tools().iter().find(|t| t.name == "w2::f9").cloned();
            tool.map(|t| t.description)
        };
        assert_eq!(nine(&service).as_deref(), Some("Does w2::f9."));

        // Failing again, and on a full refresh whose every batch fails: still kept.
        assert!(service.refresh(&engine, Reuse::Unchanged).await.is_ok());
        assert_eq!(take_asked(&engine), ["w2::f9"]);
        assert_eq!(nine(&service).as_deref(), Some("Does w2::f9."));
        assert!(service.refresh(&engine, Reuse::Nothing).await.is_ok());
        assert_eq!(take_asked(&engine).len(), 39);
        assert_eq!(service.current().tools().len(), 39);
        assert_eq!(nine(&service).as_deref(), Some("Does w2::f9."));

        // The next refresh asks for it again, and takes its new contract.
        fails.store(false, Ordering::SeqCst);
        assert!(service.refresh(&engine, Reuse::Unchanged).await.is_ok());
        assert_eq!(take_asked(&engine), ["w2::f9"]);
        assert!(service.refresh(&engine, Reuse::Unchanged).await.is_ok());
        assert!(take_asked(&engine).is_empty(), "settled");
    }

    #[tokio::test]
    async fn a_function_the_engine_refuses_is_not_asked_for_again_while_its_entry_stays() {
        let service = CatalogService::default();
        let engine = Scripted::new(Ok(listing_by_worker(10)), |ids: &[String]| {
            let functions: Vec<Value> = ids
                .iter()
                .map(|id| match id.as_str() {
                    "w3::f3" => json!({ "function_id": id, "error": "forbidden" }),
                    _ => json!({ "function_id": id, "description": format!("Does {id}.") }),
                })
                .collect();
            Ok(json!({ "functions": functions }))
        });
        set(
            &engine.workers,
            connections_of(&["a", "b", "c", "d", "e", "f", "g"]),
        );
        assert_eq!(
            service.refresh(&engine, Reuse::Unchanged).await.ok(),
            Some(Refresh::Changed { functions: 9 })
        );
        assert_eq!(take_asked(&engine).len(), 10);
        assert_eq!(
            service.refresh(&engine, Reuse::Unchanged).await.ok(),
            Some(Refresh::Unchanged)
        );
        assert!(take_asked(&engine).is_empty(), "the refusal is remembered");
        assert!(service.refresh(&engine, Reuse::Nothing).await.is_ok());
        assert_eq!(take_asked(&engine).len(), 10, "a full round asks again");
    }

    #[tokio::test(start_paused = true)]
    async fn against_a_stalled_engine_a_fetch_stops_asking_at_its_deadline() {
        let mut engine = Scripted::new(Ok(listing(INFO_BATCH * 100)), details);
        engine.delay = Duration::from_secs(8);
        let started = Instant::now();
        let tools = fetch(&engine, &mut Known::default(), Reuse::Nothing).await;
        // Eight in flight at once; a batch is asked for only before the deadline.
        let calls = engine.info_calls.load(Ordering::SeqCst);
        assert_eq!(calls, 3 * INFO_IN_FLIGHT, "asked at 0, 8 and 16 s");
        assert_eq!(tools.map(|t| t.len()).ok(), Some(calls * INFO_BATCH));
        assert!(started.elapsed() < INFO_DEADLINE + Duration::from_secs(8));
        assert_eq!(engine.peak.load(Ordering::SeqCst), INFO_IN_FLIGHT);
    }
}
