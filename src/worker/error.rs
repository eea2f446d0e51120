//! Why a function the worker answers itself (the engine proxy, function search, downloads, the
//! console's assets) gave no answer. The message is what the caller reads after
//! `handler error: `; each variant keeps what failed as its source.

use std::path::PathBuf;

use crate::error::Error;
use crate::index::OpenError;
use crate::search::SearchError;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The library's error; a coded one renders as the contract's message.
    #[error(transparent)]
    Directory(#[from] Error),
    /// A call on the engine failed: what the worker was calling, and the SDK's error.
    #[error("{calling}: {source}")]
    Engine {
        calling: &'static str,
        /// Boxed: the SDK's error is large, and every handler's result carries this type.
        #[source]
        source: Box<iii_sdk::Error>,
    },
    /// A task of the worker's own runtime ended without an answer (a panic, a shutdown).
    #[error("{task}: {source}")]
    Task {
        task: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// Function search refused the request.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// The search catalog could not be fetched from the engine; the last one stays in use.
    #[error("catalog_fetch_failed: {0}")]
    CatalogFetch(#[source] SearchError),
    /// A call to a function this worker does not have (the engine-less dispatch, `local.rs`).
    #[error("function_not_found: {0}")]
    UnknownFunction(String),
}

impl WorkerError {
    /// A `Task` error of `task`, for `map_err` on a join.
    pub fn task(task: &'static str) -> impl FnOnce(tokio::task::JoinError) -> WorkerError {
        move |source| WorkerError::Task { task, source }
    }
}

/// Why `serve` stopped, or never started serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// Another process is the index's writer: `holder` names it when its note does.
    #[error(
        "the index at {} is held by {}; stop it first, or give this worker an index_path of \
         its own",
        path.display(),
        holder.as_deref().unwrap_or(crate::UNNOTED_HOLDER)
    )]
    Busy {
        path: PathBuf,
        holder: Option<String>,
    },
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The boot reconcile failed.
    #[error(transparent)]
    Reconcile(Error),
    /// The engine refused this worker for good.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The task watching the connection ended without an answer.
    #[error("connection watch failed: {0}")]
    Watch(#[source] tokio::task::JoinError),
}

/// The engine rejected this worker's registration; the SDK does not reconnect after that.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "another {worker} worker is already registered on the engine at {url} \
         (WORKER_NAMESPACE_CONFLICT); one engine serves one {worker}: stop the other \
         one, or point this one at another engine with --url",
        worker = super::WORKER_NAME
    )]
    NamespaceConflict { url: String },
    #[error("the engine at {url} refused this worker: {source}")]
    Rejected {
        url: String,
        #[source]
        source: Box<iii_sdk::Error>,
    },
}
