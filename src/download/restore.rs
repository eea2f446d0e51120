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

use serde::Deserialize;
use serde_json::{Value, json};

use crate::code::Code;
use crate::config::{Paths, Settings};
use crate::directory::Directory;
use crate::error::{Error, Result, quoted};
use crate::registry::{Registry, Release};
use crate::request;

use super::bundle::{Bundle, Dest};
use super::guard::{OnEdited, namespace_folder};
use super::lock::{self, Entry, LockedSource, Route};
use super::source::Source;
use super::{fetch, fetch_repo, land};

/// `{namespace?, force?}`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct RestoreRequest {
    namespace: Option<String>,
    #[serde(deserialize_with = "request::null_as_default")]
    force: bool,
}

/// A restore asked for: the lock's entries it restores, and how it treats files edited
/// locally. Each entry is fetched and checked ([`fetch_checked`]), then landed
/// ([`land_checked`]): apart, so that a command can hold the index only while it lands.
pub struct Restore {
    entries: Vec<Entry>,
    /// One namespace was asked for: its outcome, or its error, is the answer.
    one: bool,
    on_edited: OnEdited,
}

impl Restore {
    /// Reads the request and the bundles lock at `paths` (`D334` for a namespace it does not
    /// record).
    pub fn asked(paths: &Paths, request: &Value) -> Result<Restore> {
        let RestoreRequest { namespace, force } = request::parse(request)?;
        let on_edited = if force {
            OnEdited::Overwrite
        } else {
            OnEdited::Keep
        };
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
        Ok(Restore {
            entries,
            one: namespace.is_some(),
            on_edited,
        })
    }

    /// The entries to restore, in the lock's order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// What a landing does with a file edited locally (`force` replaces it).
    pub fn on_edited(&self) -> OnEdited {
        self.on_edited
    }

    /// The answer, from each entry's outcome in order: one bundle answers its outcome or its
    /// error; all of them answer `{restored: [...], failed: [{namespace, error}]}`, each bundle
    /// landed or refused on its own.
    pub fn answer(&self, outcomes: Vec<Result<Value>>) -> Result<Value> {
        if self.one {
            return outcomes.into_iter().next().unwrap_or(Ok(Value::Null));
        }
        let mut restored = Vec::new();
        let mut failed = Vec::new();
        for (entry, outcome) in self.entries.iter().zip(outcomes) {
            match outcome {
                Ok(outcome) => restored.push(outcome),
                Err(e) => {
                    failed.push(json!({ "namespace": entry.namespace, "error": e.to_string() }))
                }
            }
        }
        Ok(json!({ "restored": restored, "failed": failed }))
    }
}

/// Restores one locked bundle (`namespace`) or all of them, landing each through `directory`
/// (see [`Restore::answer`] for the answer).
pub async fn restore(
    directory: &Arc<Directory>,
    registry: &Registry,
    request: &Value,
) -> Result<Value> {
    let paths = &directory.config().paths;
    let asked = Restore::asked(paths, request)?;
    let mut outcomes = Vec::new();
    for entry in asked.entries() {
        let outcome = match fetch_checked(&directory.settings(), paths, registry, entry).await {
            Ok(bundle) => land_checked(directory, entry, bundle, asked.on_edited()).await,
            Err(e) => Err(e),
        };
        outcomes.push(outcome);
    }
    asked.answer(outcomes)
}

/// Fetches one entry's locked source and checks it against the entry: every file with its
/// locked sha256, nothing more or less (`D335` otherwise). Reads no index.
pub async fn fetch_checked(
    settings: &Settings,
    paths: &Paths,
    registry: &Registry,
    entry: &Entry,
) -> Result<Bundle> {
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
            fetch_repo(settings, source, commit.clone(), &|_| {}).await?
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
            let bundle = fetch(settings, registry, source, &|_| {}).await?;
            let served = bundle.resolved.digest.clone().unwrap_or_default();
            if served != *digest {
                return Err(differs(format!(
                    "the registry's bundle {worker}@{version} is not the one the lock records (digest {served}, locked {digest}); it was refused and nothing was written."
                )));
            }
            bundle
        }
    };
    check_against(&bundle, entry, &namespace_folder(paths, &entry.namespace))?;
    if let LockedSource::Registry { tag, .. } = &entry.source {
        bundle.resolved.tag = tag.clone();
    }
    Ok(bundle)
}

/// Lands a bundle [`fetch_checked`] answered for `entry`, as a download lands (staged, all or
/// nothing, the lock in the same commit).
pub async fn land_checked(
    directory: &Arc<Directory>,
    entry: &Entry,
    bundle: Bundle,
    on_edited: OnEdited,
) -> Result<Value> {
    let landing = directory.clone();
    let landed = tokio::task::spawn_blocking(move || land(&landing, bundle, on_edited))
        .await
        .map_err(Error::task("restore task"))??;
    Ok(json!({
        "namespace": entry.namespace,
        "files": entry.files.len(),
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
