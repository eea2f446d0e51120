//! The worker's dispatch without an engine, for the fuzz target and tests: a call goes through
//! the same screen (`screen.rs`), the same library functions, the same answer measure
//! (`wire::check`) and the same error bound (`wire::bounded_error`) as on the bus. What needs
//! the engine or the network is left out: downloads are read and checked but not fetched,
//! the registry is an unreachable loopback port, and the engine's own functions (function
//! search, `engine::functions::info`, the hooks) are screened only.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::error::WorkerError;
use crate::directory::Directory;
use crate::download::{self, DownloadFunction};
use crate::registry::{Endpoint, Registry, functions as registry_functions};

/// A directory answering calls as the worker would.
pub struct Local {
    pub(super) directory: Arc<Directory>,
    registry: Registry,
    runtime: tokio::runtime::Runtime,
}

impl Local {
    pub fn new(directory: Arc<Directory>) -> Local {
        let registry = Registry::new(|| Endpoint {
            base_url: "http://127.0.0.1:9".into(),
            timeout: Duration::from_secs(2),
            cache_ttl: Duration::ZERO,
            max_response_bytes: 1 << 20,
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        Local {
            directory,
            registry,
            runtime,
        }
    }

    /// `directory::index::status`: the library's part (no watcher, no engine connection).
    pub(super) fn status(&self, _: &Value) -> Result<Value, WorkerError> {
        Ok(self.directory.status()?)
    }

    /// A download's request read and checked, nothing fetched.
    pub(super) fn check_download(
        &self,
        function: DownloadFunction,
        request: &Value,
    ) -> Result<Value, WorkerError> {
        let source = download::source::parse(function, request)?;
        if let download::Source::Repo { .. } = source {
            download::repo::check(&source)?;
        }
        Ok(Value::Null)
    }

    /// `directory::registry::workers::list`, against the unreachable registry.
    pub(super) fn registry_list(&self, request: &Value) -> Result<Value, WorkerError> {
        let list = registry_functions::list(&self.registry, request);
        Ok(self.runtime.block_on(list)?)
    }

    /// `directory::registry::workers::info`, against the unreachable registry.
    pub(super) fn registry_info(&self, request: &Value) -> Result<Value, WorkerError> {
        let info = registry_functions::info(&self.registry, request);
        Ok(self.runtime.block_on(info)?)
    }

    /// What needs the engine or fetches: screened only, answered `null`.
    pub(super) fn unanswered(&self, _: &Value) -> Result<Value, WorkerError> {
        Ok(Value::Null)
    }
}

/// A call the worker answers with an error: the message it sends, and why.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// What the caller reads: `handler error: …`, cut to what the engine's frame carries.
    pub message: String,
    #[source]
    pub cause: WorkerError,
}
