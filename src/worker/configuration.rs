//! The `iii-directory` entry of the engine's configuration worker: registered on every
//! connection with its schema (and, when nothing is stored, the `--config` seed or the current
//! settings as the initial value), read live, and re-read on `configuration:updated`. Tunable
//! changes apply at once; topology changes are refused until a restart, keeping the whole
//! previous configuration. `setup.rs` runs these on each (re)connection.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iii_sdk::IIIClient;
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::runtime::IIIConnectionState;
use serde_json::{Value, json};

use super::engine::{Installed, call_retrying, is_missing};
use super::error::WorkerError;
use super::{Call, search};
use crate::config::{Config, Settings};
use crate::directory::Directory;
use crate::locks;
use crate::registry::Registry;

/// The configuration entry id (contract).
pub const ENTRY_ID: &str = "iii-directory";
/// Timeout and attempts of configuration calls (contract: 5 s, 3 attempts).
const TIMEOUT: Duration = Duration::from_secs(5);
const ATTEMPTS: u32 = 3;
/// The function the `configuration` trigger calls.
pub const ON_CHANGE: &str = "directory::on-config-change";

/// What the configuration worker held at boot.
pub enum Stored {
    /// No engine within the wait, no entry, or no value.
    Nothing,
    /// A value that parses, with the warnings reading it gave (numbers brought into range).
    Settings(Box<Settings>, Vec<String>),
    /// A value that does not parse, and why: the seed or defaults apply.
    Refused(String, Value),
}

/// The settings stored in the configuration worker, when the engine answers within `wait`.
pub async fn stored(iii: &IIIClient, wait: Duration) -> Stored {
    let deadline = tokio::time::Instant::now() + wait;
    while iii.get_connection_state() != IIIConnectionState::Connected {
        if tokio::time::Instant::now() >= deadline {
            return Stored::Nothing;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = super::engine::call(
        iii,
        "configuration::get",
        json!({ "id": ENTRY_ID }),
        TIMEOUT,
    )
    .await;
    let Some(value) = answer
        .ok()
        .and_then(|answer| answer.get("value").cloned())
        .filter(|v| !v.is_null())
    else {
        return Stored::Nothing;
    };
    match Settings::from_json(&value) {
        Ok((settings, warnings)) => Stored::Settings(Box::new(settings), warnings),
        Err(e) => Stored::Refused(e.to_string(), value),
    }
}

/// The configuration the worker boots with: the stored one when it parses and keeps the layout
/// rules (`config::layout`), else the seed (or defaults), with why in `refusals` and the log.
/// Never an error: a stored value any caller could have set must not stop the worker, or send
/// it into a restart loop.
pub fn boot_config(stored: Stored, seed: &Config, refusals: &Refusals) -> (Config, bool) {
    let refused = |why: String| {
        refusals.refused_at_boot(why);
        (seed.clone(), false)
    };
    match stored {
        Stored::Nothing => {
            // The seed is offered as the first stored value, and read back: not a new one.
            refusals.announced(Announced::Parsed(Box::new(seed.settings.clone())));
            (seed.clone(), false)
        }
        Stored::Refused(why, value) => {
            // Read again once connected: said once, here.
            refusals.announced(Announced::Unparsable(value));
            refused(why)
        }
        Stored::Settings(settings, warnings) => {
            // Read again once connected: what is said of it now stands until another comes.
            refusals.announced(Announced::Parsed(settings.clone()));
            let homeless = crate::config::homeless_paths(&settings);
            for warning in warnings.into_iter().chain(homeless) {
                refusals.note(format!("stored configuration: {warning}"));
            }
            let config = Config::from_settings(*settings);
            match config.check() {
                Ok(()) => (config, true),
                Err(e) => refused(e.to_string()),
            }
        }
    }
}

/// The last refusals of configuration values (at boot, or live), for the log and for
/// `directory::index::status` (`configuration.refused`). Each is about a value that another
/// value announced since replaces: a new value forgets them all ([`Refusals::announced`]).
#[derive(Default)]
pub struct Refusals {
    last: Mutex<VecDeque<Value>>,
    /// The value last announced, at boot or live, so that the same value read again (at each
    /// connection, the seed offered as the first stored value) forgets nothing.
    latest: Mutex<Option<Announced>>,
}

/// A configuration value as announced: its settings, or, when it does not parse, the value.
#[derive(Debug, PartialEq)]
enum Announced {
    Parsed(Box<Settings>),
    Unparsable(Value),
}

/// How many refusals `index::status` shows.
const REFUSALS_KEPT: usize = 8;

impl Refusals {
    /// Logs `what` and keeps it for the status.
    pub fn note(&self, what: String) {
        tracing::warn!("{what}");
        self.keep(what);
    }

    /// Notes a stored configuration refused as the worker started, the seed served instead.
    pub fn refused_at_boot(&self, why: impl std::fmt::Display) {
        self.note(format!(
            "stored configuration refused at boot: {why}; serving the --config seed or the \
             defaults instead"
        ));
    }

    /// Keeps `what` for the status (said in the log already).
    pub fn keep(&self, what: String) {
        let mut last = locks::lock(&self.last);
        if last.len() == REFUSALS_KEPT {
            last.pop_front();
        }
        let refusal = json!({ "at": crate::time::Stamp::now().rfc3339(), "what": what });
        last.push_back(refusal);
    }

    /// Records a value announced; when it is another than the last, forgets every refusal: what
    /// they said of the values before it ("keeping the current configuration", "serving the
    /// --config seed instead", a warning about a key of a value replaced) is no longer what
    /// stands, and the console's settings form reads the refusals after a save. What is said of
    /// this value is noted after, when it is new (said once, not at every connection): returns
    /// whether it is.
    fn announced(&self, value: Announced) -> bool {
        let mut latest = locks::lock(&self.latest);
        let new = latest.as_ref() != Some(&value);
        if new {
            *latest = Some(value);
            locks::lock(&self.last).clear();
        }
        new
    }

    /// The `configuration` object of `directory::index::status`.
    pub fn status(&self) -> Value {
        let last = locks::lock(&self.last);
        json!({ "refused": last.iter().cloned().collect::<Vec<_>>() })
    }
}

/// The entry's stored value (`null` when none is), from `configuration::get` with retries.
async fn get(iii: &IIIClient) -> Result<Value, iii_sdk::Error> {
    let request = json!({ "id": ENTRY_ID });
    let answer = call_retrying(iii, "configuration::get", request, TIMEOUT, ATTEMPTS).await?;
    Ok(answer.get("value").cloned().unwrap_or(Value::Null))
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
    let stored = match get(iii).await {
        Ok(value) => Some(value).filter(|v| !v.is_null()),
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

/// `directory::on-config-change` (after `configuration:updated`): re-reads the configuration,
/// then binds or unbinds the function-search hint as `inject_hint` now says.
pub(super) async fn on_change(call: Call, _: Value) -> Result<Value, WorkerError> {
    let shared = &call.shared;
    refresh(
        &call.iii,
        &shared.directory,
        &shared.installed,
        &shared.registry,
        &shared.refusals,
    )
    .await;
    let inject_hint = shared.directory.setting(|s| s.inject_hint);
    search::reconcile_hint(&call.iii, &shared.search, inject_hint);
    Ok(json!({ "ok": true }))
}

/// Fetches the live value and applies what may change live.
pub async fn refresh(
    iii: &IIIClient,
    directory: &Arc<Directory>,
    installed: &Installed,
    registry: &Registry,
    refusals: &Refusals,
) -> ApplyResult {
    let value = match get(iii).await {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!("configuration::get failed ({e}); keeping the current configuration");
            return ApplyResult::NotRead(e.to_string());
        }
    };
    apply(directory, installed, registry, refusals, &value)
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
    refusals: &Refusals,
    value: &Value,
) -> ApplyResult {
    let (settings, warnings) = match Settings::from_json(value) {
        Ok(parsed) => parsed,
        Err(e) => {
            let what = format!("configuration rejected ({e}); keeping the current configuration");
            match refusals.announced(Announced::Unparsable(value.clone())) {
                true => refusals.note(what),
                false => tracing::debug!("{what} (said before)"),
            }
            return ApplyResult::Rejected(e.to_string());
        }
    };
    let new = refusals.announced(Announced::Parsed(Box::new(settings.clone())));
    let note = |what: String| {
        if new {
            refusals.note(what);
        } else {
            tracing::debug!("{what} (said before)");
        }
    };
    for warning in warnings
        .iter()
        .chain(&crate::config::homeless_paths(&settings))
    {
        note(format!("configuration: {warning}"));
    }
    // Folders that break the layout rules are refused here too, not only at the next start.
    if let Err(e) = Config::from_settings(settings.clone()).check() {
        note(format!(
            "configuration rejected ({e}); keeping the current configuration, and the next \
             start refuses it too"
        ));
        return ApplyResult::Rejected(e.to_string());
    }
    match directory.apply_settings(settings) {
        Ok(()) => {
            installed.clear();
            registry.clear_cache();
            tracing::info!("configuration applied");
            ApplyResult::Applied
        }
        Err(fields) => {
            // Kept for the status too: the other values changed with it wait as well, and a
            // person who saved them (the console's settings form reads `refused`) must see why
            // they did nothing.
            note(format!(
                "configuration change of {} needs a restart (restart required); until then the \
                 whole previous configuration stays, the other values changed with it included",
                fields.join(", ")
            ));
            ApplyResult::RestartRequired(fields)
        }
    }
}
