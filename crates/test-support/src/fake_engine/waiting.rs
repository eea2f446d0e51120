//! Waiting on the fake without spinning: every change to its state bumps a watch channel, and a
//! wait sleeps on it until its condition holds or its deadline passes; then it fails with what
//! it waited for and what the fake has seen.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::FakeEngine;
use super::records::{Call, Fire, RegisteredFunction, RegisteredTriggerType, WorkerTrigger};
use super::state::State;

impl FakeEngine {
    pub(super) async fn wait_until<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&State) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + timeout;
        let mut changes = self.shared.changed.subscribe();
        loop {
            {
                let st = self.shared.lock();
                if let Some(found) = check(&st) {
                    return Ok(found);
                }
            }
            let woke = tokio::time::timeout_at(deadline, changes.changed()).await;
            if !matches!(woke, Ok(Ok(()))) {
                let st = self.shared.lock();
                if let Some(found) = check(&st) {
                    return Ok(found);
                }
                return Err(format!(
                    "fake engine: timed out after {timeout:?} waiting for {what}; {}",
                    st.summary()
                ));
            }
        }
    }

    /// Wait until an open connection has called `engine::workers::register`; returns its data.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<Value, String> {
        self.wait_until(
            timeout,
            "the worker to call engine::workers::register",
            |st| st.ready_data(),
        )
        .await
    }

    /// Wait until an open connection has registered `function_id`.
    pub async fn wait_function(
        &self,
        function_id: &str,
        timeout: Duration,
    ) -> Result<RegisteredFunction, String> {
        self.wait_until(
            timeout,
            &format!("function {function_id} to be registered"),
            |st| st.functions.get(function_id).cloned(),
        )
        .await
    }

    /// Wait until an open connection provides `trigger_type`.
    pub async fn wait_trigger_type(
        &self,
        trigger_type: &str,
        timeout: Duration,
    ) -> Result<RegisteredTriggerType, String> {
        self.wait_until(
            timeout,
            &format!("trigger type {trigger_type} to be registered"),
            |st| st.trigger_types.get(trigger_type).cloned(),
        )
        .await
    }

    /// Wait until the worker holds a binding matching `predicate`.
    pub async fn wait_worker_trigger(
        &self,
        predicate: impl Fn(&WorkerTrigger) -> bool,
        timeout: Duration,
    ) -> Result<WorkerTrigger, String> {
        self.wait_until(timeout, "a matching worker binding", |st| {
            st.worker_triggers.values().find(|t| predicate(t)).cloned()
        })
        .await
    }

    /// Wait until `predicate` holds over all frames received so far; returns them.
    pub async fn wait_for(
        &self,
        predicate: impl Fn(&[Value]) -> bool,
        timeout: Duration,
    ) -> Result<Vec<Value>, String> {
        self.wait_until(timeout, "a frame predicate", |st| {
            predicate(&st.frames).then(|| st.frames.clone())
        })
        .await
    }

    /// Wait for the first fire (since the last `clear`) matching `predicate`.
    pub async fn wait_fire(
        &self,
        predicate: impl Fn(&Fire) -> bool,
        timeout: Duration,
    ) -> Result<Fire, String> {
        self.wait_until(timeout, "a matching fire", |st| {
            st.fires.iter().find(|f| predicate(f)).cloned()
        })
        .await
    }

    /// Wait for the first call out of the worker (since the last `clear`) matching `predicate`.
    pub async fn wait_call(
        &self,
        predicate: impl Fn(&Call) -> bool,
        timeout: Duration,
    ) -> Result<Call, String> {
        self.wait_until(timeout, "a matching call", |st| {
            st.calls.iter().find(|c| predicate(c)).cloned()
        })
        .await
    }
}
