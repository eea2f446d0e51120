//! `directory::skills::bundles::check-updates {namespace?}`: whether each locked bundle's
//! source has moved on. A registry bundle locked from a tag asks the registry what that tag
//! answers now (its version and digest); one locked at a pinned version is `pinned`. A repository
//! bundle asks `git ls-remote` where its branch points. The questions run in parallel, each
//! bounded by `download_timeout_ms` (at most [`MAX_BOUND`]), and fail open: a source that errs
//! or does not answer in time marks its bundle `unknown` with the reason, and the others
//! answer. Answers are kept for `registry_cache_ttl_ms` (successes only), keyed by the registry
//! URL or the repository URL and the tag or branch.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::Settings;
use crate::error::{Error, Result};
use crate::locks;
use crate::registry::{Registry, Release};
use crate::request;

use super::lock::{self, Entry, LockedSource, registry_digest};
use super::repo;

/// The longest a check of one source may take, whatever `download_timeout_ms` says: a check is
/// a question, not a download.
pub const MAX_BOUND: Duration = Duration::from_secs(10);

/// What a source answers now.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Upstream {
    /// The registry's version and digest for the tag.
    Registry {
        version: Option<String>,
        digest: String,
    },
    /// The branch's commit (`None`: the branch is gone).
    Repo { commit: Option<String> },
}

type Cache = Mutex<HashMap<String, (Instant, Upstream)>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// `{namespace?}`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct CheckRequest {
    namespace: Option<String>,
}

/// Answers `{bundles: [{namespace, state, locked, upstream?, reason?}]}`, `state` one of
/// `current`, `update-available`, `pinned`, `unknown`.
pub async fn check_updates(
    settings: &Settings,
    lock_path: &std::path::Path,
    registry: &Registry,
    request: &Value,
) -> Result<Value> {
    let CheckRequest { namespace } = request::parse(request)?;
    let locked = lock::read(lock_path)?;
    let entries: Vec<Entry> = match namespace.as_deref().map(str::trim) {
        // One bundle the lock does not hold is refused as `get` and `restore` refuse it.
        Some(ns) if !ns.is_empty() => {
            let entry = locked.bundles.get(ns).cloned().ok_or_else(|| {
                lock::not_locked(
                    ns,
                    "it was never downloaded here, or the lock was replaced.",
                )
            })?;
            vec![entry]
        }
        _ => locked.bundles.into_values().collect(),
    };
    let bound = Duration::from_millis(settings.download_timeout_ms).min(MAX_BOUND);
    let ttl = Duration::from_millis(settings.registry_cache_ttl_ms);
    let base_url = registry.endpoint().base_url;
    let checks = entries
        .iter()
        .map(|entry| check_one(entry, registry, &base_url, bound, ttl));
    let bundles = futures_util::future::join_all(checks).await;
    Ok(json!({ "bundles": bundles }))
}

async fn check_one(
    entry: &Entry,
    registry: &Registry,
    base_url: &str,
    bound: Duration,
    ttl: Duration,
) -> Value {
    let locked = serde_json::to_value(&entry.source).unwrap_or_default();
    let answer = |state: &str, upstream: Option<Value>, reason: Option<String>| {
        let mut row = json!({ "namespace": entry.namespace, "state": state, "locked": locked });
        if let Some(upstream) = upstream {
            row["upstream"] = upstream;
        }
        if let Some(reason) = reason {
            row["reason"] = json!(reason);
        }
        row
    };
    let key = match &entry.source {
        LockedSource::Registry { tag: None, .. } => {
            return answer(
                "pinned",
                None,
                Some("locked at a version, not a tag".into()),
            );
        }
        LockedSource::Registry {
            worker,
            tag: Some(tag),
            ..
        } => format!("registry {base_url} {worker} {tag}"),
        LockedSource::Repo { repo, branch, .. } => format!("repo {repo} {branch}"),
    };
    let cached = {
        let cache = locks::lock(cache());
        cache
            .get(&key)
            .filter(|(at, _)| at.elapsed() < ttl)
            .map(|(_, upstream)| upstream.clone())
    };
    let upstream = match cached {
        Some(upstream) => upstream,
        None => match tokio::time::timeout(bound, ask(entry, registry, bound)).await {
            Ok(Ok(upstream)) => {
                if !ttl.is_zero() {
                    locks::lock(cache()).insert(key, (Instant::now(), upstream.clone()));
                }
                upstream
            }
            Ok(Err(e)) => return answer("unknown", None, Some(e.to_string())),
            Err(_) => {
                return answer(
                    "unknown",
                    None,
                    Some(format!("no answer within {} ms", bound.as_millis())),
                );
            }
        },
    };
    match (&entry.source, upstream) {
        (
            LockedSource::Registry {
                version, digest, ..
            },
            Upstream::Registry {
                version: now,
                digest: now_digest,
            },
        ) => {
            let moved = now_digest != *digest || (now.is_some() && now != *version);
            // Other bytes under the locked version: a published version was changed, which a
            // `restore` refuses (`D335`); worth saying, as the version alone looks current.
            let republished = moved && now.is_some() && now == *version;
            answer(
                if moved { "update-available" } else { "current" },
                Some(json!({ "version": now, "digest": now_digest })),
                republished.then(|| {
                    "the registry serves other bytes under the locked version: a published \
                     version was changed"
                        .into()
                }),
            )
        }
        (LockedSource::Repo { commit, .. }, Upstream::Repo { commit: now }) => match now {
            None => answer(
                "unknown",
                None,
                Some("the branch is gone from the repository".into()),
            ),
            Some(now) => answer(
                if Some(&now) == commit.as_ref() {
                    "current"
                } else {
                    "update-available"
                },
                Some(json!({ "commit": now })),
                None,
            ),
        },
        _ => answer("unknown", None, Some("the source changed kind".into())),
    }
}

/// Asks the entry's source where it stands now.
async fn ask(entry: &Entry, registry: &Registry, bound: Duration) -> Result<Upstream> {
    match &entry.source {
        LockedSource::Registry { worker, tag, .. } => {
            let release = tag.clone().map_or_else(Release::latest, Release::Tag);
            let (bundle, _turn) = registry
                .skills_bundle(worker, &release)
                .await
                .map_err(|e| crate::registry::functions::download_error(worker, &e))?;
            let digest = registry_digest(
                bundle
                    .skills
                    .iter()
                    .map(|f| (f.path.as_str(), f.content.as_str())),
            );
            Ok(Upstream::Registry {
                version: bundle.version,
                digest,
            })
        }
        LockedSource::Repo { repo, branch, .. } => {
            let (repo, branch) = (repo.clone(), branch.clone());
            let commit =
                tokio::task::spawn_blocking(move || repo::remote_head(&repo, &branch, bound))
                    .await
                    .map_err(Error::task("check-updates task"))??;
            Ok(Upstream::Repo { commit })
        }
    }
}
