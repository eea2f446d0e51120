//! The provider side of the `directory::*::on-change` trigger types: subscriber sets kept per
//! trigger id, and the fan-out of change events as fire-and-forget calls in each subscriber's
//! namespace. A failing subscriber never affects the writer.

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
