//! Why a function the worker answers itself (the engine proxy, function search, downloads, the
//! console's assets) gave no answer. The message is what the caller reads after
//! `handler error: `; each variant keeps what failed as its source.

use crate::error::Error;
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
        #[source]
        source: iii_sdk::Error,
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
}

impl WorkerError {
    /// A `Task` error of `task`, for `map_err` on a join.
    pub fn task(task: &'static str) -> impl FnOnce(tokio::task::JoinError) -> WorkerError {
        move |source| WorkerError::Task { task, source }
    }
}
