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
use super::surface::{self, Handler};
use super::{screen, wire};
use crate::directory::{Directory, LibraryFunction};
use crate::download::{self, DownloadFunction};
use crate::registry::{Endpoint, Registry, functions as registry_functions};

/// A directory answering calls as the worker would.
pub struct Local {
    directory: Arc<Directory>,
    /// The surface, built once.
    functions: Vec<surface::Function>,
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
            functions: surface::functions(),
            registry,
            runtime,
        }
    }

    /// Calls `function` with `request`: the answer as the JSON text the worker would hand the
    /// SDK, or the error it would send (`handler error: …`).
    pub fn call(&self, function: &str, request: &Value) -> Result<String, Refused> {
        self.answer(function, request).map_err(|cause| Refused {
            message: wire::bounded_error(format!("handler error: {cause}")),
            cause,
        })
    }

    fn answer(&self, function: &str, request: &Value) -> Result<String, WorkerError> {
        let handler = self
            .functions
            .iter()
            .find(|f| f.id == function)
            .map(|f| f.handler)
            .ok_or_else(|| WorkerError::UnknownFunction(function.to_string()))?;
        screen::screen(function, request)?;
        let json = match handler {
            Handler::Library(LibraryFunction::Read(read)) => self
                .directory
                .read_answer(read, request, None)
                .and_then(|answer| answer.into_json())?,
            Handler::Library(LibraryFunction::Write(write)) => {
                self.directory.write(write, request, None)?.to_string()
            }
            Handler::Directory(work) => work(&self.directory, request)?.to_string(),
            Handler::Worker { offline, .. } => offline(self, request)?.to_string(),
        };
        wire::check(function, json.len())?;
        Ok(json)
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::error::MAX_ERROR_BYTES;

    /// The fuzz target's property on fixed cases, for every function: oversized fields,
    /// wrongly typed fields and requests that are not objects all answer, and every error
    /// is short.
    #[test]
    fn every_function_answers_hostile_payloads_with_short_errors() {
        let root = tempfile::tempdir().expect("temp dir");
        let skill = root.path().join("skills/mailer/guide.md");
        std::fs::create_dir_all(skill.parent().expect("parent")).expect("mkdir");
        std::fs::write(&skill, "# Guide\n\nSend mail.\n").expect("write");
        let directory = Directory::open(Config::for_root(root.path())).expect("open");
        directory.reconcile().expect("reconcile");
        let local = Local::new(Arc::new(directory));
        let huge = "\u{80}".repeat(2_500_000);
        let wrong = [
            json!(huge),
            json!(5),
            json!(true),
            json!([huge]),
            json!({"x": huge}),
        ];
        let mut calls = 0;
        for function in surface::functions() {
            let keys: Vec<String> = function.request["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            let mut requests = vec![json!([huge]), json!(huge), json!(7)];
            for value in &wrong {
                requests.push(Value::Object(
                    keys.iter().map(|k| (k.clone(), value.clone())).collect(),
                ));
                for key in &keys {
                    requests.push(json!({ key: value }));
                }
            }
            for request in &requests {
                calls += 1;
                if let Err(Refused { message, .. }) = local.call(function.id, request) {
                    assert!(
                        message.len() < 8 << 10,
                        "{}: {} bytes",
                        function.id,
                        message.len()
                    );
                    assert!(message.len() <= MAX_ERROR_BYTES);
                }
            }
        }
        assert!(calls > 200, "{calls}");
        // Nothing was created from an array.
        let refused = local
            .call(
                "directory::skills::create",
                &json!(["arr/x", "# x\n\nbody"]),
            )
            .expect_err("refused");
        assert_eq!(
            refused.message,
            format!(
                "handler error: {} invalid_input: the request must be a JSON object, not an array.",
                crate::code::Code::SkillsRequestRefused
            )
        );
        assert!(!root.path().join("skills/arr/x.md").exists());
        let guide = local
            .call("directory::skills::get", &json!({"id": "mailer/guide"}))
            .expect("a normal call");
        assert!(guide.contains("\"id\":\"mailer/guide\""), "{guide}");
    }
}
