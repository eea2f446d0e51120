//! Invocations in both directions. A test invokes a worker's function as the engine does, and
//! waits for its `invocationresult`. A worker's `invokefunction` is its ready call
//! (`engine::workers::register`), a fire (no `invocation_id`: recorded, and delivered to the
//! function's provider if one is open), or a call out, answered by a canned answer, the
//! configuration model, or the connection that registered the function, else
//! `function_not_found`. Results are handed to whoever waits for them.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::configuration;
use super::frames::{Deferred, opt_str, opt_value, result_frame, str_field};
use super::records::{Call, ErrorBody, Fire, InvocationResult};
use super::state::{KIND_INVOCATION, Pending, Responder, State};
use super::{DEFAULT_TIMEOUT, FAKE_NOT_CONNECTED, FAKE_TIMEOUT, FakeEngine, WORKERS_REGISTER};

impl FakeEngine {
    /// Invoke a worker function the way the engine does, with [`DEFAULT_TIMEOUT`].
    pub async fn invoke(&self, function_id: &str, data: Value) -> Result<Value, ErrorBody> {
        self.invoke_with(function_id, data, None, DEFAULT_TIMEOUT)
            .await
    }

    /// Invokes a call that must fail, and returns its error.
    pub async fn invoke_err(&self, function_id: &str, data: Value) -> ErrorBody {
        match self.invoke(function_id, data.clone()).await {
            Ok(value) => panic!("{function_id} {data} should fail, answered {value}"),
            Err(err) => err,
        }
    }

    /// Invoke a worker function with optional per-invocation `metadata` and a deadline.
    ///
    /// Errors: the worker's own error; `function_not_found` if no open connection registered
    /// `function_id`; `invocation_stopped` if the connection goes away first;
    /// [`FAKE_TIMEOUT`] if no result comes before `timeout`.
    pub async fn invoke_with(
        &self,
        function_id: &str,
        data: Value,
        metadata: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, ErrorBody> {
        self.invoke_frame(function_id, data, metadata, None, timeout)
            .await
    }

    /// Invoke a worker function with a W3C `baggage` header on the frame (for example
    /// `iii.session.id=s1`), as the engine forwards a caller's OpenTelemetry baggage.
    pub async fn invoke_with_baggage(
        &self,
        function_id: &str,
        data: Value,
        baggage: &str,
    ) -> Result<Value, ErrorBody> {
        self.invoke_frame(function_id, data, None, Some(baggage), DEFAULT_TIMEOUT)
            .await
    }

    /// Send any frame to the newest open worker connection.
    pub fn send_to_worker(&self, frame: Value) -> Result<(), String> {
        let st = self.shared.lock();
        match st.active() {
            Some(conn) if st.send_to(conn, frame) => Ok(()),
            _ => Err(format!(
                "fake engine: no open worker connection; {}",
                st.summary()
            )),
        }
    }

    async fn invoke_frame(
        &self,
        function_id: &str,
        data: Value,
        metadata: Option<Value>,
        baggage: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, ErrorBody> {
        let (reply, outcome) = oneshot::channel();
        let invocation_id = self.send_invocation(function_id, data, metadata, baggage, reply)?;
        match tokio::time::timeout(timeout, outcome).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(ErrorBody::new(
                FAKE_NOT_CONNECTED,
                format!("invocation {invocation_id} of {function_id} was dropped"),
            )),
            Err(_) => Err(self.invocation_timed_out(&invocation_id, function_id, timeout)),
        }
    }

    /// Sends the provider of `function_id` an `invokefunction` whose result goes to `reply`;
    /// returns its invocation id.
    fn send_invocation(
        &self,
        function_id: &str,
        data: Value,
        metadata: Option<Value>,
        baggage: Option<&str>,
        reply: oneshot::Sender<Result<Value, ErrorBody>>,
    ) -> Result<String, ErrorBody> {
        let mut st = self.shared.lock();
        let Some(owner) = st.function_owner(function_id) else {
            return Err(ErrorBody::new(
                "function_not_found",
                format!(
                    "Function {function_id} not found (no open connection registered it); {}",
                    st.summary()
                ),
            ));
        };
        let invocation_id = st.fresh_id(KIND_INVOCATION);
        let mut frame = json!({
            "type": "invokefunction",
            "invocation_id": invocation_id,
            "function_id": function_id,
            "data": data,
        });
        if let Some(metadata) = metadata {
            frame["metadata"] = metadata;
        }
        if let Some(baggage) = baggage {
            frame["baggage"] = json!(baggage);
        }
        st.pending.insert(
            invocation_id.clone(),
            Pending::Test {
                connection: owner,
                reply,
            },
        );
        st.send_to(owner, frame);
        Ok(invocation_id)
    }

    /// Gives up waiting for an invocation's result: the error says what the fake has seen.
    fn invocation_timed_out(
        &self,
        invocation_id: &str,
        function_id: &str,
        timeout: Duration,
    ) -> ErrorBody {
        let mut st = self.shared.lock();
        st.pending.remove(invocation_id);
        ErrorBody::new(
            FAKE_TIMEOUT,
            format!(
                "no invocationresult for {function_id} (invocation {invocation_id}) \
                 within {timeout:?}; {}",
                st.summary()
            ),
        )
    }
}

/// An `invokefunction` from a worker: its ready call, a fire, or a call out. A call answered
/// by a `respond_with` closure comes back as the [`Deferred`] closure to run.
pub(super) fn on_invoke(st: &mut State, conn: u64, frame: &Value) -> Option<Deferred> {
    let function_id = str_field(frame, "function_id");
    let data = frame.get("data").cloned().unwrap_or(Value::Null);
    let metadata = opt_value(frame, "metadata");
    let namespace = opt_str(frame, "namespace");
    let action = opt_value(frame, "action");
    match opt_str(frame, "invocation_id") {
        None if function_id == WORKERS_REGISTER => {
            mark_ready(st, conn, data);
            None
        }
        None => {
            fire(
                st,
                Fire {
                    connection: conn,
                    function_id,
                    data,
                    metadata,
                    namespace,
                    action,
                },
            );
            None
        }
        Some(invocation_id) => call_out(
            st,
            Call {
                connection: conn,
                invocation_id,
                function_id,
                data,
                metadata,
                namespace,
                action,
            },
        ),
    }
}

/// `engine::workers::register`: the connection is ready, with this data.
fn mark_ready(st: &mut State, conn: u64, data: Value) {
    if let Some(c) = st.conns.get_mut(&conn) {
        c.info.ready = Some(data.clone());
    }
    st.ready_history.push(data);
}

/// A fire. If a worker registered the target, deliver it there like the engine does.
fn fire(st: &mut State, fire: Fire) {
    if let Some(owner) = st.function_owner(&fire.function_id) {
        let delivery_id = st.fresh_id(KIND_INVOCATION);
        let mut delivery = json!({
            "type": "invokefunction",
            "invocation_id": delivery_id,
            "function_id": fire.function_id,
            "data": fire.data,
        });
        if let Some(metadata) = &fire.metadata {
            delivery["metadata"] = metadata.clone();
        }
        st.pending
            .insert(delivery_id, Pending::Discard { connection: owner });
        st.send_to(owner, delivery);
    }
    if !st.forget_history {
        st.fires.push(fire);
    }
}

/// A call out of the worker, answered in this order: a canned answer, the ready call, the
/// configuration model, the connection that registered the function, `function_not_found`.
fn call_out(st: &mut State, call: Call) -> Option<Deferred> {
    if !st.forget_history {
        st.calls.push(call.clone());
    }
    let Call {
        connection: conn,
        invocation_id,
        function_id,
        data,
        metadata,
        ..
    } = call;
    let reply = |st: &State, outcome: Result<Value, ErrorBody>| {
        st.send_to(conn, result_frame(&invocation_id, &function_id, outcome));
    };
    match st.responders.get(&function_id).cloned() {
        Some(Responder::Value(result)) => reply(st, Ok(result)),
        Some(Responder::Error(error)) => reply(st, Err(error)),
        Some(Responder::Never) => {}
        Some(Responder::With(handler)) => {
            return Some(Deferred {
                handler,
                data,
                invocation_id: invocation_id.clone(),
                function_id: function_id.clone(),
            });
        }
        None if function_id == WORKERS_REGISTER => {
            mark_ready(st, conn, data);
            reply(st, Ok(json!({"success": true})));
        }
        None if st.holding.contains(&function_id) => {
            st.held.push(Call {
                connection: conn,
                invocation_id,
                function_id,
                data,
                metadata,
                namespace: None,
                action: None,
            });
        }
        None if st.configuration.is_some() && configuration::provides(&function_id) => {
            if let Some(outcome) =
                configuration::call(st, conn, &invocation_id, &function_id, &data)
            {
                reply(st, outcome);
            }
        }
        None => relay(st, conn, &invocation_id, &function_id, data, metadata),
    }
    None
}

/// Sends on the held calls to `function_id` ([`FakeEngine::release_calls`]), in their order,
/// as if they came now; answers how many there were.
pub(super) fn release(st: &mut State, function_id: &str) -> usize {
    st.holding.remove(function_id);
    let (released, kept): (Vec<Call>, Vec<Call>) = std::mem::take(&mut st.held)
        .into_iter()
        .partition(|call| call.function_id == function_id);
    st.held = kept;
    let count = released.len();
    for call in released {
        relay(
            st,
            call.connection,
            &call.invocation_id,
            &call.function_id,
            call.data,
            call.metadata,
        );
    }
    count
}

/// Routes a worker's call to the open connection that registered the function (its result
/// goes back to the caller), or answers `function_not_found`.
fn relay(
    st: &mut State,
    caller: u64,
    invocation_id: &str,
    function_id: &str,
    data: Value,
    metadata: Option<Value>,
) {
    let Some(owner) = st.function_owner(function_id) else {
        let not_found = ErrorBody::new(
            "function_not_found",
            format!("Function {function_id} not found"),
        );
        st.send_to(
            caller,
            result_frame(invocation_id, function_id, Err(not_found)),
        );
        return;
    };
    let mut forward = json!({
        "type": "invokefunction",
        "invocation_id": invocation_id,
        "function_id": function_id,
        "data": data,
    });
    if let Some(metadata) = metadata {
        forward["metadata"] = metadata;
    }
    st.pending.insert(
        invocation_id.to_string(),
        Pending::Relay {
            connection: owner,
            caller,
            function_id: function_id.to_string(),
        },
    );
    st.send_to(owner, forward);
}

/// An `invocationresult` from a worker: recorded, and handed to the test or the caller that
/// waits for it (the result of a delivered fire is dropped).
/// The result is taken out of the frame, not copied: a whole list is a value of a million
/// nodes, and copying then freeing it here kept this connection's next frame waiting for
/// milliseconds, which the benchmarks would have charged to the worker.
pub(super) fn on_result(st: &mut State, conn: u64, frame: &mut Value) {
    let invocation_id = str_field(frame, "invocation_id");
    let function_id = str_field(frame, "function_id");
    let result = frame
        .get_mut("result")
        .map(Value::take)
        .filter(|v| !v.is_null());
    let error = opt_value(frame, "error").map(|e| ErrorBody::from_value(&e));
    if !st.forget_history {
        st.results.push(InvocationResult {
            connection: conn,
            invocation_id: invocation_id.clone(),
            function_id: function_id.clone(),
            result: result.clone(),
            error: error.clone(),
        });
    }
    let outcome = match error {
        Some(error) => Err(error),
        None => Ok(result.unwrap_or(Value::Null)),
    };
    match st.pending.remove(&invocation_id) {
        Some(Pending::Test { reply, .. }) => {
            let _ = reply.send(outcome);
        }
        Some(Pending::Relay { caller, .. }) => {
            st.send_to(caller, result_frame(&invocation_id, &function_id, outcome));
        }
        Some(Pending::Discard { .. }) | None => {}
    }
}
