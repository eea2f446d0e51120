//! Snapshots of what the fake has seen and holds (registrations, bindings, fires, calls,
//! results, frames, connections, telemetry), and forgetting the history for long runs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::FakeEngine;
use super::records::{
    Call, ConnectionInfo, Fire, InvocationResult, Reattach, RegisteredFunction,
    RegisteredTriggerType, RegistrationResult, UnregisteredTrigger, WorkerTrigger,
};

impl FakeEngine {
    /// Functions currently registered by open connections, by id.
    pub fn functions(&self) -> BTreeMap<String, RegisteredFunction> {
        self.shared.lock().functions.clone()
    }

    /// Trigger types currently provided by open connections, by id.
    pub fn trigger_types(&self) -> BTreeMap<String, RegisteredTriggerType> {
        self.shared.lock().trigger_types.clone()
    }

    /// Bindings the worker currently holds as a subscriber, by binding id.
    pub fn worker_triggers(&self) -> BTreeMap<String, WorkerTrigger> {
        self.shared.lock().worker_triggers.clone()
    }

    pub fn registration_results(&self) -> Vec<RegistrationResult> {
        self.shared.lock().registration_results.clone()
    }

    pub fn unregistered_functions(&self) -> Vec<String> {
        self.shared.lock().unregistered_functions.clone()
    }

    pub fn unregistered_triggers(&self) -> Vec<UnregisteredTrigger> {
        self.shared.lock().unregistered_triggers.clone()
    }

    pub fn unregistered_trigger_types(&self) -> Vec<String> {
        self.shared.lock().unregistered_trigger_types.clone()
    }

    pub fn reattaches(&self) -> Vec<Reattach> {
        self.shared.lock().reattaches.clone()
    }

    /// Fire-and-forget invocations (null `invocation_id`), except `engine::workers::register`.
    pub fn fires(&self) -> Vec<Fire> {
        self.shared.lock().fires.clone()
    }

    /// Calls out of the worker (`invokefunction` with an `invocation_id`).
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// Every `invocationresult` the worker sent.
    pub fn results(&self) -> Vec<InvocationResult> {
        self.shared.lock().results.clone()
    }

    /// Every frame received from workers on `/`, in order, across connections.
    pub fn frames(&self) -> Vec<Value> {
        self.shared.lock().frames.clone()
    }

    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.shared
            .lock()
            .conns
            .values()
            .map(|c| c.info.clone())
            .collect()
    }

    /// The register data of the newest open connection that sent `engine::workers::register`.
    pub fn ready(&self) -> Option<Value> {
        self.shared.lock().ready_data()
    }

    /// Every `engine::workers::register` data received, in order.
    pub fn ready_history(&self) -> Vec<Value> {
        self.shared.lock().ready_history.clone()
    }

    /// How many `registerfunction` frames carried this id.
    pub fn registration_count(&self, function_id: &str) -> usize {
        self.shared
            .lock()
            .registration_counts
            .get(function_id)
            .copied()
            .unwrap_or(0)
    }

    pub fn otel_connections(&self) -> usize {
        self.shared.lock().otel_connections
    }

    /// How many telemetry frames came (on `/otel` or a worker socket), and how many of them
    /// hold `needle`.
    pub fn telemetry_holding(&self, needle: &[u8]) -> (usize, usize) {
        let st = self.shared.lock();
        let holding = st
            .telemetry
            .iter()
            .filter(|frame| frame.windows(needle.len()).any(|w| w == needle))
            .count();
        (st.telemetry.len(), holding)
    }

    /// Forget the history (frames, fires, calls, results, acks, unregistrations, reattaches,
    /// registration counts). Live state stays: connections, registered functions, trigger
    /// types, bindings, subscriptions, canned answers and pending invocations.
    pub fn clear(&self) {
        let mut st = self.shared.lock();
        st.frames.clear();
        st.registration_counts.clear();
        st.registration_results.clear();
        st.unregistered_functions.clear();
        st.unregistered_triggers.clear();
        st.unregistered_trigger_types.clear();
        st.reattaches.clear();
        st.ready_history.clear();
        st.fires.clear();
        st.calls.clear();
        st.results.clear();
        st.telemetry.clear();
        for conn in st.conns.values_mut() {
            conn.info.frames.clear();
            conn.info.received_at.clear();
            conn.info.sent.clear();
        }
        drop(st);
        self.shared.bump();
    }

    /// With `false`, stop recording history (frames, fires, calls, results and the frames of
    /// each connection) and forget what was recorded; the live routing is unchanged. For runs
    /// that move many large answers, where the copies would only cost memory and time.
    pub fn keep_history(&self, keep: bool) {
        self.shared.lock().forget_history = !keep;
        if !keep {
            self.clear();
        }
    }
}
