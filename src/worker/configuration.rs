//! The `iii-directory` entry of the engine's configuration worker: registered at boot with its
//! schema (and the `--config` seed as the initial value when nothing is stored), read live,
//! and re-read on `configuration:updated`. Tunable changes apply at once; topology changes are
//! refused until a restart, keeping the whole previous configuration.

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::IIIClient;
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::runtime::IIIConnectionState;
use serde_json::{Value, json};

use super::engine::{Installed, call_retrying, is_missing};
use crate::config::Settings;
use crate::directory::Directory;
use crate::registry::Registry;

/// The configuration entry id (contract).
pub const ENTRY_ID: &str = "iii-directory";
/// Timeout and attempts of configuration calls (contract: 5 s, 3 attempts).
const TIMEOUT: Duration = Duration::from_secs(5);
const ATTEMPTS: u32 = 3;
/// The function the `configuration` trigger calls.
pub const ON_CHANGE: &str = "directory::on-config-change";

/// The settings stored in the configuration worker, when the engine answers within `wait`;
/// `None` without an engine, without an entry, or with a value that does not parse.
pub async fn stored(iii: &IIIClient, wait: Duration) -> Option<Settings> {
    let deadline = tokio::time::Instant::now() + wait;
    while iii.get_connection_state() != IIIConnectionState::Connected {
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = super::engine::call(
        iii,
        "configuration::get",
        json!({ "id": ENTRY_ID }),
        TIMEOUT,
    )
    .await
    .ok()?;
    let value = answer.get("value").filter(|v| !v.is_null())?;
    match Settings::from_json(value) {
        Ok((settings, _)) => Some(settings),
        Err(e) => {
            tracing::warn!("stored configuration rejected ({e}); using the seed or defaults");
            None
        }
    }
}

/// Registers the entry, applies its live value and binds the change trigger. Without a
/// configuration worker the seed (or defaults) stays in force.
pub async fn boot(
    iii: &IIIClient,
    directory: &Arc<Directory>,
    installed: &Installed,
    registry: &Registry,
    seed: Option<Value>,
) {
    let stored = match call_retrying(
        iii,
        "configuration::get",
        json!({ "id": ENTRY_ID }),
        TIMEOUT,
        ATTEMPTS,
    )
    .await
    {
        Ok(answer) => answer.get("value").cloned().filter(|v| !v.is_null()),
        Err(e) if is_missing(&e) => None,
        Err(e) => {
            tracing::warn!("configuration worker unreachable ({e}); keeping the seed or defaults");
            return;
        }
    };
    let mut register = json!({
        "id": ENTRY_ID,
        "name": ENTRY_ID,
        "description": "Skills, system prompts and agent profiles served from folders on disk.",
        "schema": Settings::json_schema(),
    });
    if stored.is_none() {
        register["initial_value"] = seed.unwrap_or_else(|| directory.settings().to_json());
    }
    match call_retrying(iii, "configuration::register", register, TIMEOUT, ATTEMPTS).await {
        Ok(_) => {}
        Err(e) if is_missing(&e) => {
            tracing::info!("no configuration worker; the seed or defaults apply");
            return;
        }
        Err(e) => tracing::warn!("configuration::register failed: {e}"),
    }
    refresh(iii, directory, installed, registry).await;
    let binding = RegisterTriggerInput::new(
        "configuration",
        ON_CHANGE,
        json!({ "configuration_id": ENTRY_ID, "event_types": ["configuration:updated"] }),
    );
    if let Err(e) = iii.register_trigger(binding) {
        tracing::warn!("cannot bind configuration changes: {e}");
    }
}

/// Fetches the live value and applies what may change live.
pub async fn refresh(
    iii: &IIIClient,
    directory: &Arc<Directory>,
    installed: &Installed,
    registry: &Registry,
) {
    let value = match call_retrying(
        iii,
        "configuration::get",
        json!({ "id": ENTRY_ID }),
        TIMEOUT,
        ATTEMPTS,
    )
    .await
    {
        Ok(answer) => answer.get("value").cloned().unwrap_or(Value::Null),
        Err(e) => {
            tracing::warn!("configuration::get failed ({e}); keeping the current configuration");
            return;
        }
    };
    apply(directory, installed, registry, &value);
}

/// Applies a configuration value: a topology change keeps everything as it was. An applied
/// change forgets the installed-workers set and every cached registry answer (the registry may
/// have moved).
pub fn apply(directory: &Directory, installed: &Installed, registry: &Registry, value: &Value) {
    let settings = match Settings::from_json(value) {
        Ok((settings, warnings)) => {
            for warning in warnings {
                tracing::warn!("{warning}");
            }
            settings
        }
        Err(e) => {
            tracing::warn!("configuration rejected ({e}); keeping the current configuration");
            return;
        }
    };
    match directory.apply_settings(settings) {
        Ok(()) => {
            installed.clear();
            registry.clear_cache();
            tracing::info!("configuration applied");
        }
        Err(fields) => tracing::warn!(
            "configuration change of {} needs a restart (restart required); keeping the whole previous configuration",
            fields.join(", ")
        ),
    }
}
