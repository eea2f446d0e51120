//! One frame from a worker: recorded (unless the history is off), then dispatched by its
//! `type` to the part of the fake that models it. A call answered by a `respond_with` closure
//! runs that closure after the state lock is released, and its result is sent then.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::records::ErrorBody;
use super::state::{Handler, Shared, State};
use super::{invocations, registration, restarts, triggers};

/// A canned closure to run once the state lock is released.
pub(super) struct Deferred {
    pub(super) handler: Handler,
    pub(super) data: Value,
    pub(super) invocation_id: String,
    pub(super) function_id: String,
}

impl Deferred {
    /// Runs the closure on the call's data (a panic becomes an error result) and returns the
    /// `invocationresult` frame to send.
    fn answer(self) -> Value {
        let outcome = match catch_unwind(AssertUnwindSafe(|| (self.handler)(self.data))) {
            Ok(Ok(result)) => Ok(result),
            Ok(Err((code, message))) => Err(ErrorBody::new(code, message)),
            Err(_) => Err(ErrorBody::new(
                "fake_engine_handler_panicked",
                format!("the respond_with closure for {} panicked", self.function_id),
            )),
        };
        result_frame(&self.invocation_id, &self.function_id, outcome)
    }
}

pub(super) fn handle_text(shared: &Shared, conn: u64, text: &str) {
    let mut frame: Value =
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
    let deferred = {
        let mut st = shared.lock();
        record(&mut st, conn, &frame);
        handle_frame(&mut st, conn, &mut frame)
    };
    if let Some(deferred) = deferred {
        // Run outside the lock: the closure may call the fake.
        let answer = deferred.answer();
        shared.lock().send_to(conn, answer);
    }
    shared.bump();
}

/// Keeps the frame in the history, across connections and on its own.
fn record(st: &mut State, conn: u64, frame: &Value) {
    if st.forget_history {
        return;
    }
    st.frames.push(frame.clone());
    if let Some(c) = st.conns.get_mut(&conn) {
        c.info.frames.push(frame.clone());
        c.info.received_at.push(Instant::now());
    }
}

fn handle_frame(st: &mut State, conn: u64, frame: &mut Value) -> Option<Deferred> {
    let kind = frame
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match kind.as_str() {
        "ping" => {
            st.send_to(conn, json!({"type": "pong"}));
        }
        "registerfunction" => registration::on_register_function(st, conn, frame),
        "unregisterfunction" => registration::on_unregister_function(st, frame),
        "registertriggertype" => registration::on_register_trigger_type(st, conn, frame),
        "unregistertriggertype" => registration::on_unregister_trigger_type(st, frame),
        "registertrigger" => triggers::on_register_trigger(st, conn, frame),
        "unregistertrigger" => triggers::on_unregister_trigger(st, conn, frame),
        "triggerregistrationresult" => triggers::on_registration_result(st, conn, frame),
        "reattach" => restarts::on_reattach(st, conn, frame),
        "invokefunction" => return invocations::on_invoke(st, conn, frame),
        "invocationresult" => invocations::on_result(st, conn, frame),
        // pong, registerservice, unknown types: recorded as frames only.
        _ => {}
    }
    None
}

pub(super) fn str_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

pub(super) fn opt_str(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

pub(super) fn opt_value(value: &Value, key: &str) -> Option<Value> {
    value.get(key).filter(|v| !v.is_null()).cloned()
}

pub(super) fn result_frame(
    invocation_id: &str,
    function_id: &str,
    outcome: Result<Value, ErrorBody>,
) -> Value {
    let mut frame = Map::new();
    frame.insert("type".into(), json!("invocationresult"));
    frame.insert("invocation_id".into(), json!(invocation_id));
    frame.insert("function_id".into(), json!(function_id));
    match outcome {
        Ok(result) => frame.insert("result".into(), result),
        Err(error) => frame.insert("error".into(), error.to_value()),
    };
    Value::Object(frame)
}
