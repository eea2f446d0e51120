//! Canned answers to the calls a worker makes out (`invokefunction` with an id): a value, an
//! error, no answer at all, or a closure run on the call's data. A canned answer wins over the
//! configuration model and over routing to a connection that registered the function.

use std::sync::Arc;

use serde_json::Value;

use super::FakeEngine;
use super::records::ErrorBody;
use super::state::Responder;

impl FakeEngine {
    /// Answer calls to `function_id` with `result`.
    pub fn respond(&self, function_id: &str, result: Value) {
        self.set_responder(function_id, Responder::Value(result));
    }

    /// Answer calls to `function_id` with the error `{code, message}`.
    pub fn respond_error(&self, function_id: &str, code: &str, message: &str) {
        self.set_responder(function_id, Responder::Error(ErrorBody::new(code, message)));
    }

    /// Never answer calls to `function_id` (to exercise the caller's timeout).
    pub fn never_answer(&self, function_id: &str) {
        self.set_responder(function_id, Responder::Never);
    }

    /// Answer calls to `function_id` by running `f` on the call's `data`;
    /// `Err((code, message))` becomes an error result.
    pub fn respond_with<F>(&self, function_id: &str, f: F)
    where
        F: Fn(Value) -> Result<Value, (String, String)> + Send + Sync + 'static,
    {
        self.set_responder(function_id, Responder::With(Arc::new(f)));
    }

    /// Remove the canned answer for `function_id`.
    pub fn forget_response(&self, function_id: &str) {
        self.shared.lock().responders.remove(function_id);
    }

    fn set_responder(&self, function_id: &str, responder: Responder) {
        self.shared
            .lock()
            .responders
            .insert(function_id.to_string(), responder);
    }
}
