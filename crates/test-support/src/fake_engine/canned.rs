//! Canned answers to the calls a worker makes out (`invokefunction` with an id): a value, an
//! error, no answer at all, or a closure run on the call's data. A canned answer wins over the
//! configuration model and over routing to a connection that registered the function. And
//! calls held back: routed only when the test releases them, so that it can act between a
//! caller's call and its arrival (another writer's write before an update lands).

use std::sync::Arc;

use serde_json::Value;

use super::FakeEngine;
use super::invocations;
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

    /// Hold back the calls to `function_id` that would be routed to the connection that
    /// registered it: they wait, unanswered, until [`FakeEngine::release_calls`].
    pub fn hold_calls(&self, function_id: &str) {
        self.shared.lock().holding.insert(function_id.to_string());
    }

    /// How many calls to `function_id` are held back now.
    pub fn held_calls(&self, function_id: &str) -> usize {
        let st = self.shared.lock();
        st.held
            .iter()
            .filter(|call| call.function_id == function_id)
            .count()
    }

    /// Stop holding calls to `function_id` and route the held ones now, in their order;
    /// answers how many there were.
    pub fn release_calls(&self, function_id: &str) -> usize {
        let released = invocations::release(&mut self.shared.lock(), function_id);
        self.shared.bump();
        released
    }

    fn set_responder(&self, function_id: &str, responder: Responder) {
        self.shared
            .lock()
            .responders
            .insert(function_id.to_string(), responder);
    }
}
