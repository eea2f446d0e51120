//! The engine-less dispatch of [`Local`]: a call found in the surface's table, screened,
//! answered by its entry's library function or offline handler, and measured as on the bus.
//! It sits apart from `local.rs` because the table's entries name `Local`'s handlers.

use std::sync::OnceLock;

use serde_json::Value;

use super::error::WorkerError;
use super::local::{Local, Refused};
use super::surface::{self, Handler};
use super::{screen, wire};
use crate::directory::LibraryFunction;

/// The surface, built once for every `Local` (the fuzz target calls without end).
fn table() -> &'static [surface::Function] {
    static TABLE: OnceLock<Vec<surface::Function>> = OnceLock::new();
    TABLE.get_or_init(surface::functions)
}

impl Local {
    /// Calls `function` with `request`: the answer as the JSON text the worker would hand the
    /// SDK, or the error it would send (`handler error: …`).
    pub fn call(&self, function: &str, request: &Value) -> Result<String, Refused> {
        self.answer(function, request).map_err(|cause| Refused {
            message: wire::bounded_error(format!("handler error: {cause}")),
            cause,
        })
    }

    fn answer(&self, function: &str, request: &Value) -> Result<String, WorkerError> {
        let handler = table()
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
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::sync::Arc;

    use super::*;
    use crate::config::Config;
    use crate::directory::Directory;
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
