//! The `iii-directory` entry of the engine's configuration worker: registered on every
//! connection with its schema (and, when nothing is stored, the `--config` seed or the current
//! settings as the initial value), read live, and re-read on `configuration:updated`. Tunable
//! changes apply at once; topology changes are refused until a restart, keeping the whole
//! previous configuration. `setup.rs` runs these on each (re)connection.

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

/// What registering the entry came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Registration {
    /// Registered; `offered_initial` when nothing was stored and the initial value was offered.
    Registered {
        offered_initial: bool,
    },
    /// The engine has no configuration worker: the seed (or defaults) stays in force.
    NoConfigurationWorker,
    Failed(String),
}

/// Registers the entry with its schema. The initial value is offered only when nothing is
/// stored: re-registering with an `initial_value` would replace the stored value.
pub async fn register(iii: &IIIClient, initial: Value) -> Registration {
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
            return Registration::Failed(format!("configuration::get: {e}"));
        }
    };
    let mut register = json!({
        "id": ENTRY_ID,
        "name": ENTRY_ID,
        "description": "Skills, system prompts and agent profiles served from folders on disk.",
        "schema": Settings::json_schema(),
    });
    let offered_initial = stored.is_none();
    if offered_initial {
        register["initial_value"] = initial;
    }
    match call_retrying(iii, "configuration::register", register, TIMEOUT, ATTEMPTS).await {
        Ok(_) => Registration::Registered { offered_initial },
        Err(e) if is_missing(&e) => {
            tracing::info!("no configuration worker; the seed or defaults apply");
            Registration::NoConfigurationWorker
        }
        Err(e) => {
            tracing::warn!("configuration::register failed: {e}");
            Registration::Failed(format!("configuration::register: {e}"))
        }
    }
}

/// The binding that re-reads the entry on `configuration:updated`. The SDK keeps it and
/// replays it on every reconnect, so it is made once.
pub fn binding() -> RegisterTriggerInput {
    RegisterTriggerInput::new(
        "configuration",
        ON_CHANGE,
        json!({ "configuration_id": ENTRY_ID, "event_types": ["configuration:updated"] }),
    )
}

/// Fetches the live value and applies what may change live.
pub async fn refresh(
    iii: &IIIClient,
    directory: &Arc<Directory>,
    installed: &Installed,
    registry: &Registry,
) -> ApplyResult {
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
            return ApplyResult::NotRead(e.to_string());
        }
    };
    apply(directory, installed, registry, &value)
}

/// What became of a configuration value.
#[derive(Debug, PartialEq, Eq)]
pub enum ApplyResult {
    Applied,
    /// A topology change: nothing applied until a restart.
    RestartRequired(Vec<&'static str>),
    /// The value does not parse; nothing applied.
    Rejected(String),
    /// The value could not be fetched; nothing applied.
    NotRead(String),
}

/// Applies a configuration value: a topology change keeps everything as it was. An applied
/// change forgets the installed-workers set and every cached registry answer (the registry may
/// have moved).
pub fn apply(
    directory: &Directory,
    installed: &Installed,
    registry: &Registry,
    value: &Value,
) -> ApplyResult {
    let settings = match Settings::from_json(value) {
        Ok((settings, warnings)) => {
            for warning in warnings {
                tracing::warn!("{warning}");
            }
            settings
        }
        Err(e) => {
            tracing::warn!("configuration rejected ({e}); keeping the current configuration");
            return ApplyResult::Rejected(e.to_string());
        }
    };
    match directory.apply_settings(settings) {
        Ok(()) => {
            installed.clear();
            registry.clear_cache();
            tracing::info!("configuration applied");
            ApplyResult::Applied
        }
        Err(fields) => {
            tracing::warn!(
                "configuration change of {} needs a restart (restart required); keeping the whole previous configuration",
                fields.join(", ")
            );
            ApplyResult::RestartRequired(fields)
        }
    }
}
