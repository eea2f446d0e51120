//! The downloads' part of [`Directory`]: landing a checked bundle under the write lock with its
//! reconcile and events, and finishing interrupted landings when the index's writer opens.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::Paths;
use crate::events::{ChangeEvent, Family};
use crate::index::Scope;
use crate::{Directory, Result};

use super::bundle::Bundle;
use super::landing::{self, Recovery, Targets};

/// The advisory lock that serializes landings across processes: beside the index, which
/// every process serving the same folders shares.
fn lock_path(index_path: &Path) -> PathBuf {
    let mut name = index_path.as_os_str().to_owned();
    name.push(".downloads.lock");
    PathBuf::from(name)
}

/// Finishes or removes what killed downloads left in these folders (see [`landing`]); a
/// failure is logged, never fatal: the staging folders are invisible to the index meanwhile.
pub fn recover_at_open(paths: &Paths) -> Recovery {
    let lock = lock_path(&paths.index_path);
    let targets = Targets {
        skills: &paths.skills_folder,
        agents: &paths.agents_folder,
        lock: &lock,
    };
    match landing::recover(targets) {
        Ok(recovery) => {
            if recovery != Recovery::default() {
                tracing::info!(
                    rolled_forward = recovery.rolled_forward,
                    discarded = recovery.discarded,
                    files = recovery.touched.len(),
                    "finished interrupted downloads"
                );
            }
            recovery
        }
        Err(e) => {
            tracing::warn!("cannot finish interrupted downloads: {e}");
            Recovery::default()
        }
    }
}

/// A landed download: the function's response and the paths of the files written.
#[derive(Clone, Debug, PartialEq)]
pub struct Landed {
    /// `{namespace, skills_written, system_prompts_written, agents_written, source}`.
    pub response: Value,
    pub paths: Vec<PathBuf>,
}

impl Directory {
    /// Lands a checked bundle all or nothing and answers the download's response `{namespace,
    /// skills_written, system_prompts_written, agents_written, source}`.
    ///
    /// The index's writer lands under its write lock, reconciles the written paths in the same
    /// call (so the next read sees them and the watcher's echo finds nothing new), and then
    /// publishes one `{op: "download", namespace, source}` event per family with files in the
    /// response. A read-only directory (a worker owns the index) lands the files the same safe
    /// way and leaves the index to its owner, whose watcher picks them up.
    pub fn land_download(&self, bundle: Bundle) -> Result<Landed> {
        let folders = &self.config.paths;
        let lock = lock_path(&folders.index_path);
        let targets = Targets {
            skills: &folders.skills_folder,
            agents: &folders.agents_folder,
            lock: &lock,
        };
        let paths = {
            let _guard = self.lock()?;
            let touched = landing::land(targets, &bundle.files)?;
            if self.index.is_writer() && !touched.is_empty() {
                self.index
                    .reconcile(&self.roots, &Scope::Paths(touched.clone()), &|_| {})?;
            }
            touched
        };
        let source = &bundle.source;
        let written = &bundle.written;
        for (family, names) in [
            (Family::Skills, &written.skills),
            (Family::SystemPrompts, &written.system_prompts),
            (Family::Agents, &written.agents),
        ] {
            if !names.is_empty() {
                self.subscribers.publish(&ChangeEvent {
                    family,
                    payload: json!({
                        "op": "download",
                        "namespace": source.namespace(),
                        "source": source.kind(),
                    }),
                });
            }
        }
        let response = json!({
            "namespace": source.namespace(),
            "skills_written": written.skills,
            "system_prompts_written": written.system_prompts,
            "agents_written": written.agents,
            "source": source.to_json(),
        });
        Ok(Landed { response, paths })
    }
}
