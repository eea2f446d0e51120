//! The live catalog: fetched from the engine (`engine::functions::list`, then
//! `engine::functions::info {function_ids}` in parallel batches of at most 32), indexed once,
//! and swapped in only when its fingerprint changed. Refreshes are serialized; a failed one
//! keeps the catalog that was there. A refresh asked for while another already waits its turn
//! joins that one (it will fetch after the change that asked), so a burst of pushes costs two
//! fetches, not one each.
//!
//! The engine is reached through [`Engine`], so this logic runs without a socket in tests.

use crate::locks;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;
use serde_json::{Value, json};

use super::catalog::{Catalog, Tool, info_entries, parse_list, tools_from_info};
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

/// The engine's functions as tools, in listed order (excluded and internal ones left out).
pub async fn fetch(engine: &dyn Engine) -> Result<Vec<Tool>, SearchError> {
    let listed = engine
        .call(LIST, json!({}), LIST_TIMEOUT)
        .await
        .map_err(|source| SearchError::Engine {
            function: LIST,
            source,
        })?;
    let ids = parse_list(&listed)?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let answers = join_all(ids.chunks(INFO_BATCH).map(|batch| async move {
        engine
            .call(
                "engine::functions::info",
                json!({ "function_ids": batch }),
                INFO_TIMEOUT,
            )
            .await
            .inspect_err(|e| {
                tracing::warn!(
                    functions = batch.len(),
                    "engine::functions::info batch failed; those functions stay out of search: {e}"
                );
            })
            .ok()
    }))
    .await;
    let answered: Vec<Value> = answers.into_iter().flatten().collect();
    if answered.is_empty() {
        return Err(SearchError::InfoAllFailed);
    }
    Ok(tools_from_info(
        &ids,
        answered.iter().flat_map(info_entries),
    ))
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
    refreshing: tokio::sync::Mutex<()>,
    /// A refresh waits for `refreshing` and has not fetched yet.
    queued: AtomicBool,
    /// A catalog fetched from the engine is in use (the empty one of a new service is not).
    loaded: AtomicBool,
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
            refreshing: tokio::sync::Mutex::new(()),
            queued: AtomicBool::new(false),
            loaded: AtomicBool::new(false),
        }
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
    pub async fn refresh(&self, engine: &dyn Engine) -> Result<Refresh, SearchError> {
        if self.queued.swap(true, Ordering::SeqCst) {
            return Ok(Refresh::Joined);
        }
        let _one_at_a_time = self.refreshing.lock().await;
        self.queued.store(false, Ordering::SeqCst);
        self.fetch_and_install(engine).await
    }

    /// Waits for the first catalog from the engine: fetches it now unless a refresh under way
    /// brings it. A search before then would answer that nothing is installed.
    pub async fn ensure_loaded(&self, engine: &dyn Engine) -> Result<(), SearchError> {
        if self.loaded() {
            return Ok(());
        }
        let _one_at_a_time = self.refreshing.lock().await;
        if !self.loaded() {
            self.fetch_and_install(engine).await?;
        }
        Ok(())
    }

    async fn fetch_and_install(&self, engine: &dyn Engine) -> Result<Refresh, SearchError> {
        let tools = fetch(engine).await?;
        Ok(self.install(Catalog::build(&tools)))
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
        info: InfoAnswer,
        info_calls: AtomicUsize,
        in_flight: AtomicUsize,
        peak: AtomicUsize,
    }

    impl Scripted {
        fn new(
            list: Answer,
            info: impl Fn(&[String]) -> Answer + Send + Sync + 'static,
        ) -> Scripted {
            Scripted {
                list: Mutex::new(list),
                info: Box::new(info),
                info_calls: AtomicUsize::new(0),
                in_flight: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
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
            let answer = match function_id {
                "engine::functions::list" => self
                    .list
                    .lock()
                    .map(|l| l.clone())
                    .unwrap_or(Err("poisoned")),
                "engine::functions::info" => {
                    self.info_calls.fetch_add(1, Ordering::SeqCst);
                    let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    self.peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    self.in_flight.fetch_sub(1, Ordering::SeqCst);
                    let ids: Vec<String> =
                        serde_json::from_value(payload["function_ids"].clone()).unwrap_or_default();
                    assert!(ids.len() <= INFO_BATCH, "a batch of {}", ids.len());
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
        let tools = fetch(&engine).await.unwrap_or_default();
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
        assert_eq!(fetch(&engine).await.ok(), Some(Vec::new()));
        assert_eq!(engine.info_calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn failures_are_reported_with_the_contract_texts() {
        let refusal = async |engine: Scripted| fetch(&engine).await.expect_err("fails").to_string();
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
        let tools = fetch(&engine).await.unwrap_or_default();
        assert_eq!(tools.len(), 40 - INFO_BATCH);
    }

    #[tokio::test]
    async fn refresh_swaps_only_on_a_new_fingerprint_and_keeps_the_old_catalog_on_error() {
        let service = CatalogService::default();
        let empty = service.current().fingerprint().to_string();
        let engine = Scripted::new(Ok(listing(10)), details);
        assert_eq!(
            service.refresh(&engine).await.ok(),
            Some(Refresh::Changed { functions: 10 })
        );
        let first = service.current();
        assert_ne!(first.fingerprint(), empty);
        assert_eq!(
            service.refresh(&engine).await.ok(),
            Some(Refresh::Unchanged)
        );
        assert!(
            Arc::ptr_eq(&first, &service.current()),
            "an unchanged catalog is not rebuilt in place"
        );

        let failing = Scripted::new(Ok(listing(12)), |_| Err("down"));
        assert!(service.refresh(&failing).await.is_err());
        assert!(
            Arc::ptr_eq(&first, &service.current()),
            "a failed refresh keeps the catalog"
        );

        let grown = Scripted::new(Ok(listing(12)), details);
        assert_eq!(
            service.refresh(&grown).await.ok(),
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
                tokio::spawn(async move { service.refresh(engine.as_ref()).await })
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
            service.refresh(engine.as_ref()).await.ok(),
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
}
