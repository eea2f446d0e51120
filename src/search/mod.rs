//! Function search and the pre-generate hint (`directory::search_functions`,
//! `directory::pre-generate`, `directory::hint-preview`, `directory::on-functions-change`).
//!
//! A search ranks the live engine catalog with BM25 for each capability the caller lacks and
//! answers compact `{function_id, description}` candidates grouped by worker, plus, when asked,
//! registry workers that are not installed but would match. The pieces:
//!
//! - `tokenize`: text to terms (camelCase, stopwords, plurals, JSON keys, intrinsic filter);
//! - `catalog`: engine answers to slim tools, their fingerprint and BM25 index;
//! - `bm25`: the index, built once per catalog, never per query;
//! - `rank`: per-capability ranking, the floors, the round-robin merge and the caps;
//! - `query`: request validation and capability preparation;
//! - `session`: what each session was already given;
//! - `registry`: the installable section, against a [`registry::WorkerSource`] (the shared
//!   registry client implements it);
//! - `response`: the answer and its guidance texts;
//! - `hint`: the pre-generate gates and the hint text;
//! - `service`: the catalog refresher, against an [`service::Engine`].
//!
//! **Architecture invariant:** no I/O here but through the two traits; no engine SDK types.

pub mod bm25;
pub mod catalog;
pub mod hint;
pub mod known;
pub mod query;
pub mod rank;
pub mod registry;
pub mod response;
pub mod service;
pub mod session;
pub mod vectors;
/// The tokenizer is shared with skill search, one layer down (`retrieval`).
pub use crate::retrieval::tokenize;

use crate::locks;
use crate::retrieval::fusion::{DenseHit, DenseRanker, FUNCTION_FLOORS, fuse};
use crate::retrieval::texts::encoder_reads;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use catalog::Catalog;
use query::Capability;
use rank::{
    MAX_CANDIDATES, MAX_WORKERS, MIN_MATCHED_TERMS, NAMESPACE_FLOOR, coverage_prune,
    group_by_worker, limit_workers, matched_beside_dense, namespace_floor, ranked_hits_matching,
    round_robin,
};
use registry::WorkerSource;
use response::{Candidate, Response, Worker};
use service::CatalogService;
use session::Split;

/// The OTel baggage key that carries the caller's session id (contract).
pub const SESSION_BAGGAGE_KEY: &str = "iii.session.id";

/// What an engine call failed with, as the engine's client reports it (search sees no SDK
/// type).
pub type EngineError = Box<dyn std::error::Error + Send + Sync>;

/// Why a search or a catalog refresh failed; the texts are the contract's.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The request is not `{capabilities: [string]}`: serde's reason.
    #[error("invalid request: {0}")]
    Request(#[source] serde_json::Error),
    #[error("provide at least one capability")]
    NoCapability,
    #[error("provide at most {} capabilities", query::MAX_CAPABILITIES)]
    TooManyCapabilities,
    #[error("capabilities must not be blank")]
    BlankCapability,
    /// An engine call of the refresh failed: the function, and why.
    #[error("{function}: {source}")]
    Engine {
        function: &'static str,
        #[source]
        source: EngineError,
    },
    #[error("catalog list response was malformed")]
    ListMalformed,
    #[error("catalog list contained duplicate function id")]
    ListDuplicate,
    #[error("catalog info failed for every function")]
    InfoAllFailed,
}

/// Registry search for one call: the client, and how long each phase may take.
#[derive(Clone, Copy)]
pub struct RegistrySearch<'a> {
    pub registry: &'a dyn WorkerSource,
    pub phase_wait: Duration,
}

/// Search state shared by every call: the catalog, and the per-session memories.
#[derive(Default)]
pub struct FunctionSearch {
    catalog: CatalogService,
    /// The embedder's lane for functions, once one is connected (lexical until then).
    dense: std::sync::RwLock<Option<Arc<dyn DenseRanker>>>,
    delivered: Mutex<session::Memory>,
    hints: Mutex<hint::Memory>,
}

impl FunctionSearch {
    pub fn new() -> FunctionSearch {
        FunctionSearch::default()
    }

    /// Connects the embedder's lane for functions: later searches fuse it in whenever it is
    /// ready.
    pub fn set_dense(&self, lane: Arc<dyn DenseRanker>) {
        *locks::write(&self.dense) = Some(lane);
    }

    /// The catalog service (to refresh it, or to read the catalog in use).
    pub fn catalog(&self) -> &CatalogService {
        &self.catalog
    }

    /// `directory::search_functions`. `session` is the caller's session id, when it sent one;
    /// `registry` is `None` when registry search is off.
    pub async fn search(
        &self,
        request: &Value,
        session: Option<&str>,
        registry: Option<RegistrySearch<'_>>,
    ) -> Result<Response, SearchError> {
        let started = Instant::now();
        let capabilities = query::parse(request)?;
        let catalog = self.catalog.current();
        let dense = locks::read(&self.dense).clone();
        let Selection {
            ids: selected,
            by_words_only,
        } = match dense {
            Some(dense) => select_off_runtime(catalog.clone(), capabilities.clone(), dense).await,
            None => select_noting(&catalog, &capabilities, None),
        };
        let split = match session.filter(|s| !s.is_empty()) {
            Some(session) => {
                locks::lock(&self.delivered).split(session, catalog.fingerprint(), &selected)
            }
            None => Split {
                send: selected,
                repeated: Vec::new(),
            },
        };
        let workers = workers(&catalog, &split.send);
        let installable = match registry {
            Some(search) if !capabilities.is_empty() => {
                registry::installable(search.registry, search.phase_wait, &catalog, &capabilities)
                    .await
            }
            _ => Vec::new(),
        };
        Ok(Response {
            guidance: response::guidance_for(
                &workers,
                &split.repeated,
                !installable.is_empty(),
                by_words_only,
            ),
            workers,
            installable,
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// `directory::pre-generate`.
    pub fn pre_generate(&self, request: &Value, hint_min_workers: u64) -> Value {
        hint::pre_generate(&self.hints, request, hint_min_workers)
    }
}

/// The ids a search selects from the catalog: each capability ranked against its own leader
/// (coverage prune, namespace floor), merged round-robin up to 12, at most 6 workers. The
/// worker always asks [`select_noting`]; this lexical form is for the tests and benchmarks.
#[cfg(any(test, feature = "testing"))]
pub fn select(catalog: &Catalog, capabilities: &[Capability]) -> Vec<String> {
    select_with(catalog, capabilities, None)
}

/// The contract's selection with the embedder's lane for functions, when it is ready: each
/// capability's lexical ranking of its content terms ([`tokenize::content_terms`]; a hit
/// matching one in five of them, [`rank::matched_beside_dense`]; through the floors) is fused
/// by reciprocal rank with the functions the lane finds above its floor, then merged
/// round-robin up to 12, at most 6 workers. `None` (or a lane not ready) ranks each capability
/// as the contract does, as does a capability the encoder does not read
/// ([`encoder_reads`]: mostly in a script other than Latin). The ids of [`select_noting`], for
/// the tests, the evaluation and the benchmarks.
#[cfg(any(test, feature = "testing"))]
pub fn select_with(
    catalog: &Catalog,
    capabilities: &[Capability],
    dense: Option<&dyn DenseRanker>,
) -> Vec<String> {
    select_noting(catalog, capabilities, dense).ids
}

/// What a search selected, and how.
pub struct Selection {
    pub ids: Vec<String>,
    /// A capability the encoder reads was ranked by its words alone, although a dense lane is
    /// connected: the lane was busy with a burst of queries, or has not embedded the catalog
    /// yet. A paraphrase it would have found may come back empty (said in the guidance).
    pub by_words_only: bool,
}

/// The selection [`select_with`] describes, saying whether the dense lane left a capability to
/// the words alone.
pub fn select_noting(
    catalog: &Catalog,
    capabilities: &[Capability],
    dense: Option<&dyn DenseRanker>,
) -> Selection {
    let mut by_words_only = false;
    let rankings: Vec<Vec<String>> = capabilities
        .iter()
        .map(|capability| {
            let read = dense.filter(|_| encoder_reads(&capability.text));
            let nearest = read.and_then(|d| nearest_listed(d, catalog, &capability.text));
            by_words_only |= read.is_some() && nearest.is_none();
            match nearest {
                Some(nearest) => {
                    let terms = tokenize::content_terms(&capability.terms);
                    let lexical = lexical_ranking(catalog, &terms, matched_beside_dense(&terms));
                    fuse(&lexical, &nearest, FUNCTION_FLOORS.for_terms(terms.len()))
                        .into_iter()
                        .map(|f| f.key)
                        .collect()
                }
                None => lexical_ranking(catalog, &capability.terms, MIN_MATCHED_TERMS),
            }
        })
        .collect();
    let rankings: Vec<Vec<&str>> = rankings
        .iter()
        .map(|r| r.iter().map(String::as_str).collect())
        .collect();
    let ids = limit_workers(round_robin(&rankings, MAX_CANDIDATES), MAX_WORKERS, |id| {
        catalog.worker_of(id)
    })
    .into_iter()
    .map(str::to_string)
    .collect();
    Selection { ids, by_words_only }
}

/// [`select_with`] with the dense lane, on tokio's blocking threads: embedding each capability
/// takes milliseconds of CPU (more in a debug build), which on the runtime's threads would
/// hold up every other call and timer they serve. A lane that panics is logged, and the
/// search answers with the lexical selection.
async fn select_off_runtime(
    catalog: Arc<Catalog>,
    capabilities: Vec<Capability>,
    dense: Arc<dyn DenseRanker>,
) -> Selection {
    let (for_lane, asked) = (catalog.clone(), capabilities.clone());
    let selected =
        tokio::task::spawn_blocking(move || select_noting(&for_lane, &asked, Some(dense.as_ref())))
            .await;
    selected.unwrap_or_else(|e| {
        tracing::warn!("the dense lane of function search failed, ranking lexically: {e}");
        Selection {
            by_words_only: true,
            ..select_noting(&catalog, &capabilities, None)
        }
    })
}

/// The catalog's functions matching at least `min_matched` distinct terms of `terms`, best
/// first, through the coverage prune and the namespace floor.
fn lexical_ranking(catalog: &Catalog, terms: &[String], min_matched: usize) -> Vec<String> {
    let hits = ranked_hits_matching(catalog.index(), terms, min_matched);
    let ranked: Vec<(&str, f64)> = coverage_prune(hits)
        .into_iter()
        .map(|hit| (catalog.tools()[hit.doc].name.as_str(), hit.score))
        .collect();
    namespace_floor(ranked, NAMESPACE_FLOOR, |id| catalog.worker_of(id))
        .into_iter()
        .map(|(id, _)| id.to_string())
        .collect()
}

/// The [`DENSE_DEPTH`] functions of `catalog` nearest to `capability` in the lane. The lane
/// may still hold a previous catalog's vectors (it embeds a change in the background): the
/// functions gone from `catalog` are passed over while it scans, so they take no place.
fn nearest_listed(
    dense: &dyn DenseRanker,
    catalog: &Catalog,
    capability: &str,
) -> Option<Vec<DenseHit>> {
    dense.nearest_where(capability, DENSE_DEPTH, &|id: &String| catalog.contains(id))
}

/// How many functions the dense lane is asked for per capability.
const DENSE_DEPTH: usize = MAX_CANDIDATES * 2;

/// Candidates grouped by worker, in rank order, with their slim descriptions.
fn workers(catalog: &Catalog, ids: &[String]) -> Vec<Worker> {
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    group_by_worker(&ids, |id| catalog.worker_of(id))
        .into_iter()
        .map(|(namespace, members)| Worker {
            namespace: namespace.to_string(),
            functions: members
                .into_iter()
                .filter_map(|id| catalog.get(id))
                .map(|tool| Candidate {
                    function_id: tool.name.clone(),
                    description: tool.description.clone(),
                    engine_namespace: tool.engine_namespace.clone(),
                })
                .collect(),
        })
        .collect()
}
