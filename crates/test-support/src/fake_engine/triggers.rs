//! Bindings (triggers), forwarded as the engine does between the connection that makes one
//! (a subscriber, or the test through [`FakeEngine::subscribe`]) and the connection that
//! provides its trigger type. A binding to a type no open connection provides is parked and
//! delivered when one registers it. The provider's error ack goes back to the subscriber (a
//! success ack does not, as in the engine); the subscriber's `unregistertrigger`, or its
//! disconnect, sends the provider `unregistertrigger{id, trigger_type}`.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::frames::{opt_str, opt_value, str_field};
use super::records::{ErrorBody, RegistrationResult, UnregisteredTrigger, WorkerTrigger};
use super::state::{State, Subscription};
use super::{DEFAULT_TIMEOUT, FAKE_NOT_CONNECTED, FAKE_TIMEOUT, FakeEngine};

impl FakeEngine {
    /// Bind `function_id` to the worker's trigger type `trigger_type` as the engine does for a
    /// subscriber: send `registertrigger` to the provider and wait (up to [`DEFAULT_TIMEOUT`])
    /// for its `triggerregistrationresult`. If no open connection provides the type yet, the
    /// binding is delivered as soon as one registers it.
    pub async fn subscribe(
        &self,
        id: &str,
        trigger_type: &str,
        function_id: &str,
        config: Value,
        metadata: Option<Value>,
    ) -> Result<(), ErrorBody> {
        self.subscribe_with_timeout(
            id,
            trigger_type,
            function_id,
            config,
            metadata,
            DEFAULT_TIMEOUT,
        )
        .await
    }

    pub async fn subscribe_with_timeout(
        &self,
        id: &str,
        trigger_type: &str,
        function_id: &str,
        config: Value,
        metadata: Option<Value>,
        timeout: Duration,
    ) -> Result<(), ErrorBody> {
        let ack = self.bind(
            id,
            Subscription {
                trigger_type: trigger_type.to_string(),
                function_id: function_id.to_string(),
                config,
                metadata,
                delivered_to: None,
                owner: None,
            },
        );
        match tokio::time::timeout(timeout, ack).await {
            Ok(Ok(None)) => Ok(()),
            Ok(Ok(Some(error))) => Err(error),
            Ok(Err(_)) => Err(ErrorBody::new(
                FAKE_NOT_CONNECTED,
                format!("the wait for the ack of binding {id} was replaced by a newer subscribe"),
            )),
            Err(_) => Err(self.binding_timed_out(id, trigger_type, timeout)),
        }
    }

    /// Remove a binding made with [`FakeEngine::subscribe`] and send the provider
    /// `unregistertrigger{id, trigger_type}`. Errors if no open connection provides the type.
    pub fn unsubscribe(&self, id: &str, trigger_type: &str) -> Result<(), String> {
        let mut st = self.shared.lock();
        let delivered = st.subscriptions.remove(id).and_then(|s| s.delivered_to);
        let target = delivered
            .filter(|c| st.is_open(*c))
            .or_else(|| st.trigger_type_owner(trigger_type));
        let frame = json!({"type": "unregistertrigger", "id": id, "trigger_type": trigger_type});
        match target {
            Some(conn) if st.send_to(conn, frame) => Ok(()),
            _ => Err(format!(
                "fake engine: no open connection provides trigger type {trigger_type}; {}",
                st.summary()
            )),
        }
    }

    /// Records the test's binding `id` and forwards it to the provider of its type if one is
    /// open; returns where its ack will come.
    fn bind(
        &self,
        id: &str,
        mut subscription: Subscription,
    ) -> oneshot::Receiver<Option<ErrorBody>> {
        let (ack_tx, ack_rx) = oneshot::channel();
        let mut st = self.shared.lock();
        st.subscription_waiters.insert(id.to_string(), ack_tx);
        if let Some(owner) = st.trigger_type_owner(&subscription.trigger_type)
            && st.send_to(owner, subscription.frame(id))
        {
            subscription.delivered_to = Some(owner);
        }
        st.subscriptions.insert(id.to_string(), subscription);
        ack_rx
    }

    /// Gives up waiting for a binding's ack: the binding is dropped, and the error says what
    /// the fake has seen.
    fn binding_timed_out(&self, id: &str, trigger_type: &str, timeout: Duration) -> ErrorBody {
        let mut st = self.shared.lock();
        st.subscription_waiters.remove(id);
        st.subscriptions.remove(id);
        let provided = st.trigger_type_owner(trigger_type).is_some();
        ErrorBody::new(
            FAKE_TIMEOUT,
            format!(
                "no triggerregistrationresult for binding {id} within {timeout:?} \
                 (trigger type {trigger_type} provided by an open connection: {provided}); {}",
                st.summary()
            ),
        )
    }
}

impl State {
    /// Forward a binding to the open connection providing its type, if any.
    pub(super) fn deliver(&mut self, id: &str) {
        let Some(subscription) = self.subscriptions.get(id) else {
            return;
        };
        let Some(provider) = self.trigger_type_owner(&subscription.trigger_type) else {
            return;
        };
        let frame = subscription.frame(id);
        if self.send_to(provider, frame)
            && let Some(subscription) = self.subscriptions.get_mut(id)
        {
            subscription.delivered_to = Some(provider);
        }
    }

    /// Deliver the bindings parked for `trigger_type` to `provider`, which just registered it.
    pub(super) fn deliver_parked(&mut self, trigger_type: &str, provider: u64) {
        let parked: Vec<Value> = self
            .subscriptions
            .iter_mut()
            .filter(|(_, s)| s.trigger_type == trigger_type && s.delivered_to != Some(provider))
            .map(|(id, s)| {
                s.delivered_to = Some(provider);
                s.frame(id)
            })
            .collect();
        for registertrigger in parked {
            self.send_to(provider, registertrigger);
        }
    }

    /// Remove a binding and tell the provider it was given to, if that one is still open.
    pub(super) fn withdraw(&mut self, id: &str) {
        let Some(subscription) = self.subscriptions.remove(id) else {
            return;
        };
        if let Some(provider) = subscription.delivered_to {
            self.send_to(
                provider,
                json!({"type": "unregistertrigger", "id": id, "trigger_type": subscription.trigger_type}),
            );
        }
    }
}

/// `registertrigger` from a connection (a binding it makes as a subscriber): recorded, and
/// forwarded to the provider of its type, or parked until one registers it.
pub(super) fn on_register_trigger(st: &mut State, conn: u64, frame: &Value) {
    let binding = WorkerTrigger {
        connection: conn,
        id: str_field(frame, "id"),
        trigger_type: str_field(frame, "trigger_type"),
        function_id: str_field(frame, "function_id"),
        config: frame.get("config").cloned().unwrap_or(Value::Null),
        metadata: opt_value(frame, "metadata"),
        namespace: opt_str(frame, "namespace"),
        trigger_namespace: opt_str(frame, "trigger_namespace"),
    };
    // As the engine: forward the binding to the provider of its type, or park it.
    let subscription = Subscription {
        trigger_type: binding.trigger_type.clone(),
        function_id: binding.function_id.clone(),
        config: binding.config.clone(),
        metadata: binding.metadata.clone(),
        delivered_to: None,
        owner: Some(conn),
    };
    let id = binding.id.clone();
    st.worker_triggers.insert(id.clone(), binding);
    st.subscriptions.insert(id.clone(), subscription);
    st.deliver(&id);
}

/// `unregistertrigger` from a connection: its binding goes, and its provider is told.
pub(super) fn on_unregister_trigger(st: &mut State, conn: u64, frame: &Value) {
    let id = str_field(frame, "id");
    st.worker_triggers.remove(&id);
    if st
        .subscriptions
        .get(&id)
        .is_some_and(|s| s.owner == Some(conn))
    {
        st.withdraw(&id);
    }
    st.unregistered_triggers.push(UnregisteredTrigger {
        connection: conn,
        id,
        trigger_type: opt_str(frame, "trigger_type"),
    });
}

/// `triggerregistrationresult`: a provider acking a binding. A refusal drops the binding and
/// goes back to the connection that made it; a test waiting in `subscribe` gets the ack.
pub(super) fn on_registration_result(st: &mut State, conn: u64, frame: &Value) {
    let result = RegistrationResult {
        connection: conn,
        id: str_field(frame, "id"),
        trigger_type: str_field(frame, "trigger_type"),
        function_id: str_field(frame, "function_id"),
        error: opt_value(frame, "error").map(|e| ErrorBody::from_value(&e)),
    };
    if let Some(error) = &result.error
        && let Some(refused) = st.subscriptions.remove(&result.id)
        && let Some(subscriber) = refused.owner
    {
        // The engine passes a refusal back to the connection that made the binding.
        st.send_to(
            subscriber,
            json!({
                "type": "triggerregistrationresult",
                "id": result.id,
                "trigger_type": result.trigger_type,
                "function_id": result.function_id,
                "error": error.to_value(),
            }),
        );
    }
    if let Some(waiter) = st.subscription_waiters.remove(&result.id) {
        let _ = waiter.send(result.error.clone());
    }
    st.registration_results.push(result);
}
