//! The provider side of the `directory::*::on-change` trigger types: subscriber sets kept per
//! trigger id, and the fan-out of change events as fire-and-forget calls in each subscriber's
//! namespace. A failing subscriber never affects the writer.
//!
//! The subscriber set belongs to one connection: the engine forgets a provider's bindings when
//! its connection drops and forwards every live binding again when the type is registered on
//! the next one. So the set is emptied when a connection is known to be gone
//! ([`Subscriptions::forget_all`], run by `connection.rs` before the next connection's replay):
//! a subscriber whose worker did not come back is not called, and one that did comes back once,
//! under its id (a binding forwarded again with the same id replaces, never adds).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use iii_sdk::IIIClient;
use iii_sdk::protocol::{TriggerAction, TriggerRequest};
use iii_sdk::trigger::{TriggerConfig, TriggerHandler};

use crate::events::{ChangeEvent, Family};

/// Subscribers by family, then by trigger id (a repeated id replaces the earlier binding).
#[derive(Default)]
pub struct Subscriptions {
    by_family: Mutex<HashMap<Family, BTreeMap<String, TriggerConfig>>>,
}

impl Subscriptions {
    fn bind(&self, family: Family, config: TriggerConfig) {
        if let Ok(mut map) = self.by_family.lock() {
            tracing::info!(trigger_type = family.trigger_type(), id = %config.id, function_id = %config.function_id, "subscriber bound");
            map.entry(family)
                .or_default()
                .insert(config.id.clone(), config);
        }
    }

    fn unbind(&self, family: Family, id: &str) {
        if let Ok(mut map) = self.by_family.lock() {
            map.entry(family).or_default().remove(id);
        }
    }

    /// Forgets every subscriber (the connection they were bound on is gone).
    pub fn forget_all(&self) {
        if let Ok(mut map) = self.by_family.lock() {
            let forgotten: usize = map.values().map(BTreeMap::len).sum();
            map.clear();
            if forgotten > 0 {
                tracing::info!(
                    forgotten,
                    "subscribers forgotten with the lost connection; the engine forwards the live ones again"
                );
            }
        }
    }

    /// How many subscribers each family has.
    #[cfg(test)]
    fn count(&self, family: Family) -> usize {
        self.by_family
            .lock()
            .map(|map| map.get(&family).map_or(0, BTreeMap::len))
            .unwrap_or(0)
    }

    /// Sends an event to every subscriber of its family, without waiting for any of them.
    pub fn fan_out(&self, iii: &IIIClient, runtime: &tokio::runtime::Handle, event: &ChangeEvent) {
        let subscribers: Vec<TriggerConfig> = self
            .by_family
            .lock()
            .map(|map| {
                map.get(&event.family)
                    .map(|s| s.values().cloned().collect())
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        for subscriber in subscribers {
            let request = TriggerRequest {
                function_id: subscriber.function_id.clone(),
                payload: event.payload.clone(),
                action: Some(TriggerAction::Void),
                timeout_ms: None,
            };
            let mut request: iii_sdk::protocol::TriggerRequestWithMetadata = request.into();
            if let Some(metadata) = subscriber.metadata.clone() {
                request = request.metadata(metadata);
            }
            if let Some(namespace) = subscriber.namespace.clone() {
                request = request.namespace(namespace);
            }
            let iii = iii.clone();
            runtime.spawn(async move {
                if let Err(e) = iii.trigger(request).await {
                    tracing::warn!(function_id = %subscriber.function_id, "change event not delivered: {e}");
                }
            });
        }
    }
}

/// The trigger handler of one family's trigger type.
pub struct Provider {
    pub family: Family,
    pub subscriptions: Arc<Subscriptions>,
}

#[async_trait]
impl TriggerHandler for Provider {
    async fn register_trigger(&self, config: TriggerConfig) -> Result<(), iii_sdk::Error> {
        self.subscriptions.bind(self.family, config);
        Ok(())
    }

    async fn unregister_trigger(&self, config: TriggerConfig) -> Result<(), iii_sdk::Error> {
        self.subscriptions.unbind(self.family, &config.id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding(id: &str, function_id: &str) -> TriggerConfig {
        TriggerConfig {
            id: id.to_string(),
            function_id: function_id.to_string(),
            config: json!({}),
            metadata: None,
            namespace: None,
        }
    }

    #[test]
    fn a_binding_forwarded_again_under_its_id_replaces_the_first() {
        let subscriptions = Subscriptions::default();
        subscriptions.bind(Family::Skills, binding("t1", "sub::fn"));
        subscriptions.bind(Family::Skills, binding("t1", "sub::fn"));
        assert_eq!(subscriptions.count(Family::Skills), 1);
    }

    #[test]
    fn forget_all_empties_every_family() {
        let subscriptions = Subscriptions::default();
        subscriptions.bind(Family::Skills, binding("t1", "a::fn"));
        subscriptions.bind(Family::Agents, binding("t2", "b::fn"));
        subscriptions.forget_all();
        assert_eq!(subscriptions.count(Family::Skills), 0);
        assert_eq!(subscriptions.count(Family::Agents), 0);
        subscriptions.bind(Family::Skills, binding("t1", "a::fn"));
        assert_eq!(subscriptions.count(Family::Skills), 1, "binds again after");
    }
}
