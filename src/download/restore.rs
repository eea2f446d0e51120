//! Restore (`directory::skills::bundles::restore {namespace?, force?}`, `iii-directory bundles
//! restore`): fetches exactly what the bundles lock records (a repository at its locked commit,
//! a registry worker at its locked version) and lands it only when every file has its locked
//! sha256 and nothing more or less: on another machine, the same bytes, or a `D335` error naming
//! the file that differs, with nothing written. A registry that serves another digest for the
//! pinned version is refused the same way. The landing is a download's (staged, all or
//! nothing, the lock in the same commit; files edited locally kept unless `force`), and an
//! entry landed with the same bytes keeps its `landed_at`, so a restore leaves a committed lock
//! untouched.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::code::Code;
use crate::directory::Directory;
use crate::error::{Error, Result, quoted};
use crate::registry::{Registry, Release};
use crate::request;

use super::bundle::{Bundle, Dest, Limits};
use super::guard::{OnEdited, namespace_folder};
use super::lock::{self, Entry, LockedSource, Route};
use super::source::Source;
use super::{fetch, land, repo};

/// `{namespace?, force?}`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct RestoreRequest {
    namespace: Option<String>,
    force: bool,
}

/// Restores one locked bundle (`namespace`) or all of them. One bundle answers its outcome or
/// its error; all of them answer `{restored: [...], failed: [{namespace, error}]}`, each bundle
/// landed or refused on its own.
pub async fn restore(
    directory: &Arc<Directory>,
    registry: &Registry,
    request: &Value,
) -> Result<Value> {
    let RestoreRequest { namespace, force } = request::parse(request)?;
    let on_edited = if force {
        OnEdited::Overwrite
    } else {
        OnEdited::Keep
    };
    let paths = directory.config().paths.clone();
    let locked = lock::read(&paths.bundles_lock)?;
    let namespace = namespace
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty());
    let entries: Vec<Entry> = match &namespace {
        Some(ns) => vec![
            locked
                .bundles
                .get(ns)
                .cloned()
                .ok_or_else(|| lock::not_locked(ns, "nothing to restore."))?,
        ],
        None => locked.bundles.into_values().collect(),
    };
    let mut restored = Vec::new();
    let mut failed = Vec::new();
    for entry in entries {
        match restore_one(directory, registry, &entry, on_edited).await {
            Ok(outcome) => restored.push(outcome),
            Err(e) if namespace.is_some() => return Err(e),
            Err(e) => failed.push(json!({ "namespace": entry.namespace, "error": e.to_string() })),
        }
    }
    if namespace.is_some() {
        return Ok(restored.pop().unwrap_or(Value::Null));
    }
    Ok(json!({ "restored": restored, "failed": failed }))
}

/// Fetches one entry's locked source, checks it against the entry, lands it.
async fn restore_one(
    directory: &Arc<Directory>,
    registry: &Registry,
    entry: &Entry,
    on_edited: OnEdited,
) -> Result<Value> {
    let settings = directory.settings();
    let limits = Limits::from_settings(&settings);
    let mut bundle = match &entry.source {
        LockedSource::Repo {
            repo,
            branch,
            folder,
            commit,
        } => {
            let skill = folder.strip_prefix("skills/").unwrap_or(folder).to_string();
            if skill != entry.namespace {
                return Err(Error::Invalid(format!(
                    "the lock's entry {} reads from {}, not skills/{}; fix the lock",
                    quoted(&entry.namespace),
                    quoted(folder),
                    entry.namespace
                )));
            }
            let source = Source::Repo {
                repo: repo.clone(),
                skill,
                branch: branch.clone(),
            };
            let commit = commit.clone();
            let timeout = Duration::from_millis(settings.download_timeout_ms);
            tokio::task::spawn_blocking(move || {
                repo::fetch_at(source, commit.as_deref(), timeout, limits)
            })
            .await
            .map_err(Error::task("restore task"))??
        }
        LockedSource::Registry {
            worker,
            version,
            digest,
            ..
        } => {
            let Some(version) = version.clone() else {
                return Err(Error::Invalid(format!(
                    "the lock's entry {} names no version; download it again to pin one",
                    quoted(&entry.namespace)
                )));
            };
            let source = Source::Registry {
                worker: worker.clone(),
                release: Release::Version(version.clone()),
            };
            let bundle = fetch(&settings, registry, source, &|_| {}).await?;
            let served = bundle.resolved.digest.clone().unwrap_or_default();
            if served != *digest {
                return Err(differs(format!(
                    "the registry's bundle {worker}@{version} is not the one the lock records (digest {served}, locked {digest}); it was refused and nothing was written."
                )));
            }
            bundle
        }
    };
    check_against(
        &bundle,
        entry,
        &namespace_folder(&directory.config().paths, &entry.namespace),
    )?;
    if let LockedSource::Registry { tag, .. } = &entry.source {
        bundle.resolved.tag = tag.clone();
    }
    let landing = directory.clone();
    let landed = tokio::task::spawn_blocking(move || land(&landing, bundle, on_edited))
        .await
        .map_err(Error::task("restore task"))??;
    let files = entry.files.len();
    Ok(json!({
        "namespace": entry.namespace,
        "files": files,
        "kept_local": landed.response["kept_local"],
    }))
}

fn differs(problem: String) -> Error {
    Error::coded(Code::BundleDiffersFromLock, problem, &[])
}

/// The bundle holds exactly the entry's files, each with its locked sha256.
fn check_against(bundle: &Bundle, entry: &Entry, folder: &str) -> Result<()> {
    let namespace_prefix = format!("{}/", entry.namespace);
    let folder_prefix = format!("{folder}/");
    let key = |agents: bool, path: &str, prefix: &str| {
        if agents {
            format!("agents/{path}")
        } else {
            path.strip_prefix(prefix).unwrap_or(path).to_string()
        }
    };
    let mut fetched: BTreeMap<String, String> = bundle
        .files
        .iter()
        .map(|f| {
            (
                key(f.dest == Dest::Agents, &f.rel, &namespace_prefix),
                lock::sha256_hex(&f.bytes),
            )
        })
        .collect();
    let refuse = |path: &str, why: &str| {
        Err(differs(format!(
            "bundle {} file {} {why}; the restore was refused and nothing was written.",
            quoted(&entry.namespace),
            quoted(path)
        )))
    };
    for file in &entry.files {
        let path = key(file.route == Route::Agents, &file.path, &folder_prefix);
        match fetched.remove(&path) {
            None => return refuse(&path, "is locked but the source no longer has it"),
            Some(sha) if sha != file.sha256 => {
                return refuse(&path, "has other bytes at the source than the lock records");
            }
            Some(_) => {}
        }
    }
    if let Some(path) = fetched.keys().next() {
        return refuse(path, "is at the source but not in the lock");
    }
    Ok(())
}
