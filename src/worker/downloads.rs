//! The worker's side of downloads: the three download functions and the registry proxy on the
//! bus, and auto-download (contract §3.10). When `auto_download` is on, the worker binds
//! `directory::__on_worker_added` to the engine's `worker` trigger type for finished adds, and
//! reconciles in the background at each connection (`setup.rs`; adds made while the engine was
//! away were never announced): the engine's own skill `iii` first, then every installed worker
//! (`worker::list`) that has neither a completion marker nor a local override.
//! One download per worker at a time; each success invalidates the installed-workers cache
//! (the new namespace may now pass `filter_unregistered`). Auto-downloads land and fire their
//! change events like explicit ones.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iii_sdk::IIIClient;
use iii_sdk::protocol::RegisterTriggerInput;
use serde_json::{Value, json};

use super::engine::call;
use super::error::WorkerError;
use super::surface::ON_WORKER_ADDED;
use super::{Call, Shared};
use crate::doc::ids::validate_worker_name;
use crate::download::{self, AutoOutcome, DownloadFunction, marker};
use crate::error::Result;
use crate::locks;
use crate::registry::{Release, functions as registry_functions};

/// The worker the engine skill comes from; it is not in `worker::list` (contract).
const ENGINE_SKILL: &str = "iii";
/// The trigger type announcing worker installs, and the binding (contract).
const WORKER_TRIGGER_TYPE: &str = "worker";
/// Attempts at binding the `worker` trigger, sleeping `BIND_BACKOFF` × attempt between.
const BIND_ATTEMPTS: u32 = 5;
const BIND_BACKOFF: Duration = Duration::from_secs(2);
/// How long after boot the reconcile starts (contract).
const BOOT_DELAY: Duration = Duration::from_secs(2);
/// `worker::list` at boot: attempts, timeout of each, and backoff × attempt (contract).
const LIST_ATTEMPTS: u32 = 6;
const LIST_TIMEOUT: Duration = Duration::from_secs(10);
const LIST_BACKOFF: Duration = Duration::from_secs(2);

/// The workers being auto-downloaded right now.
#[derive(Default)]
pub struct InFlight {
    names: Mutex<HashSet<String>>,
}

/// A claim on one worker's download; released when dropped.
struct Claim<'a> {
    in_flight: &'a InFlight,
    name: String,
}

impl InFlight {
    /// Claims `name`, or `None` when its download is already running.
    fn claim(&self, name: &str) -> Option<Claim<'_>> {
        let mut names = locks::lock(&self.names);
        names.insert(name.to_string()).then(|| Claim {
            in_flight: self,
            name: name.to_string(),
        })
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut names = locks::lock(&self.in_flight.names);
        names.remove(&self.name);
    }
}

/// `work`'s outcome, the arenas trimmed soon after: reading a bundle's files takes up to twice
/// `download_max_bytes` in buffers, which malloc otherwise keeps (a worker that downloaded an
/// 80 MB bundle stayed at 400 to 500 MB resident).
async fn trimmed_after<T>(shared: &Arc<Shared>, work: impl Future<Output = T>) -> T {
    let outcome = work.await;
    shared.trimmer.trim_soon();
    outcome
}

/// `directory::skills::download`, `download_from_repo`, `download_from_registry`.
pub(super) async fn download(
    call: Call,
    function: DownloadFunction,
    input: Value,
) -> Result<Value, WorkerError> {
    let shared = &call.shared;
    let log = &|step| tracing::debug!(?step, "download");
    let run = download::run(&shared.directory, &shared.registry, function, &input, log);
    Ok(trimmed_after(shared, run).await?)
}

/// `directory::registry::workers::list`.
pub(super) async fn registry_list(call: Call, input: Value) -> Result<Value, WorkerError> {
    Ok(registry_functions::list(&call.shared.registry, &input).await?)
}

/// `directory::registry::workers::info`.
pub(super) async fn registry_info(call: Call, input: Value) -> Result<Value, WorkerError> {
    let info = registry_functions::info(&call.shared.registry, &input);
    Ok(trimmed_after(&call.shared, info).await?)
}

/// `directory::skills::bundles::restore`: fetches what the bundles lock records.
pub(super) async fn restore(call: Call, input: Value) -> Result<Value, WorkerError> {
    let shared = &call.shared;
    let restore = download::restore::restore(&shared.directory, &shared.registry, &input);
    Ok(trimmed_after(shared, restore).await?)
}

/// `directory::skills::bundles::plan-update`: an update plan of a locked bundle.
pub(super) async fn plan_update(call: Call, input: Value) -> Result<Value, WorkerError> {
    let shared = &call.shared;
    let plan = download::plan::plan_update(&shared.directory, &shared.registry, &input);
    Ok(trimmed_after(shared, plan).await?)
}

/// `directory::skills::bundles::apply`: lands an update plan.
pub(super) async fn apply(call: Call, input: Value) -> Result<Value, WorkerError> {
    let shared = &call.shared;
    let apply = download::plan::apply(&shared.directory, &shared.registry, &input);
    Ok(trimmed_after(shared, apply).await?)
}

/// `directory::skills::bundles::check-updates`: asks each locked bundle's source.
pub(super) async fn check_updates(call: Call, input: Value) -> Result<Value, WorkerError> {
    let shared = &call.shared;
    let settings = shared.directory.settings();
    let lock = shared.directory.config().paths.bundles_lock.clone();
    let check = download::updates::check_updates(&settings, &lock, &shared.registry, &input);
    Ok(trimmed_after(shared, check).await?)
}

/// `directory::__on_worker_added {worker?}`: downloads the worker's bundle at `latest` and
/// answers `{ok: true}` whatever happened (failures are logged). With `auto_download` off the
/// trigger is never bound, and a direct call does nothing.
pub(super) async fn on_worker_added(call: Call, input: Value) -> Result<Value, WorkerError> {
    let shared = &call.shared;
    if !shared.directory.setting(|s| s.auto_download) {
        tracing::debug!("auto_download is off; a worker add downloads nothing");
        return Ok(json!({ "ok": true }));
    }
    match input.get("worker").and_then(Value::as_str).map(str::trim) {
        Some(worker) if !worker.is_empty() => {
            if install(shared, worker, Release::latest()).await {
                shared.installed.clear();
            }
        }
        _ => tracing::debug!("worker added without a name; nothing to download"),
    }
    Ok(json!({ "ok": true }))
}

/// One auto-download, guarded and logged; true when files landed.
async fn install(shared: &Arc<Shared>, worker: &str, release: Release) -> bool {
    if let Err(why) = validate_worker_name(worker) {
        tracing::warn!(
            worker = %crate::error::quoted(worker),
            "not downloading skills for an invalid worker name: {why}"
        );
        return false;
    }
    let Some(_claim) = shared.in_flight.claim(worker) else {
        tracing::debug!(worker, "skills download already in progress");
        return false;
    };
    let installing = download::install_worker(&shared.directory, &shared.registry, worker, release);
    match trimmed_after(shared, installing).await {
        Ok(AutoOutcome::Installed { files }) => {
            tracing::info!(worker, files, "worker skills downloaded");
            true
        }
        Ok(AutoOutcome::NotPublished) => {
            tracing::debug!(worker, "the registry publishes no skills for this worker");
            false
        }
        Err(e) => {
            tracing::warn!(worker, "worker skills download failed: {e}");
            false
        }
    }
}

/// Binds `directory::__on_worker_added` to finished worker adds, with the contract's retries.
/// The SDK keeps the binding and replays it on every reconnect, so it is made once. Returns
/// the last error when every attempt failed.
pub async fn bind_worker_added(iii: &IIIClient) -> Result<(), iii_sdk::Error> {
    let mut attempt = 1;
    loop {
        let binding = RegisterTriggerInput::new(
            WORKER_TRIGGER_TYPE,
            ON_WORKER_ADDED,
            json!({ "operations": ["add"], "stages": ["done"] }),
        );
        match iii.register_trigger(binding) {
            Ok(_) => return Ok(()),
            Err(e) if attempt < BIND_ATTEMPTS => {
                tracing::debug!(attempt, "cannot bind worker adds yet: {e}");
                tokio::time::sleep(BIND_BACKOFF * attempt).await;
                attempt += 1;
            }
            Err(e) => {
                tracing::warn!("cannot bind worker adds; auto-download on add is off: {e}");
                return Err(e);
            }
        }
    }
}

/// The reconcile run at each connection: the engine skill, then every installed worker without
/// a completion marker or a local override, one after the other.
pub async fn boot_reconcile(iii: &IIIClient, shared: &Arc<Shared>) {
    tokio::time::sleep(BOOT_DELAY).await;
    let mut downloaded = install(shared, ENGINE_SKILL, Release::latest()).await;
    let paths = shared.directory.config().paths.clone();
    for (name, release) in installed_workers(iii).await {
        if validate_worker_name(&name).is_err()
            || paths.local_skills_folder.join(&name).is_dir()
            || marker::has_marker(&paths.skills_folder, &name)
        {
            continue;
        }
        downloaded |= install(shared, &name, release).await;
    }
    if downloaded {
        shared.installed.clear();
    }
    tracing::info!("worker skills reconciled");
}

/// `worker::list` with the contract's retries: each worker's name and the release to fetch
/// (its `version` when it has one, else `latest`). Empty when the list cannot be had.
async fn installed_workers(iii: &IIIClient) -> Vec<(String, Release)> {
    for attempt in 1..=LIST_ATTEMPTS {
        match call(iii, "worker::list", json!({}), LIST_TIMEOUT).await {
            Ok(answer) => {
                return answer["workers"]
                    .as_array()
                    .map(|rows| rows.iter().filter_map(listed_worker).collect())
                    .unwrap_or_default();
            }
            Err(e) if attempt < LIST_ATTEMPTS => {
                tracing::debug!(attempt, "worker::list failed, retrying: {e}");
                tokio::time::sleep(LIST_BACKOFF * attempt).await;
            }
            Err(e) => tracing::warn!("worker::list failed; installed workers not reconciled: {e}"),
        }
    }
    Vec::new()
}

fn listed_worker(row: &Value) -> Option<(String, Release)> {
    let name = row.get("name")?.as_str()?.to_string();
    let release = row
        .get("version")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map_or_else(Release::latest, |v| Release::Version(v.to_string()));
    Some((name, release))
}
