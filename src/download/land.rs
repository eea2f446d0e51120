//! Landing a checked bundle in a [`Directory`]: under the directory's write lock (through
//! `Directory::change`, like every write), all or nothing through `store::landing`, with its
//! reconcile and events. The directory knows nothing of downloads; this module calls it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::Paths;
use crate::directory::{Change, Directory};
use crate::error::Result;
use crate::events::{ChangeEvent, Family};
use crate::roots::Root;

use super::bundle::Bundle;
use super::guard;
use crate::rules::Source;
use crate::store::landing::{self, Targets, lock_path};

/// A landed download: the function's response and the paths of the files written.
#[derive(Clone, Debug, PartialEq)]
pub struct Landed {
    /// `{namespace, skills_written, system_prompts_written, agents_written, source}`.
    pub response: Value,
    pub paths: Vec<PathBuf>,
}

/// Lands a checked bundle all or nothing and answers the download's response `{namespace,
/// skills_written, system_prompts_written, agents_written, source}`.
///
/// The index's writer lands under its write lock, reconciles the written paths in the same
/// call (so the next read sees them and the watcher's echo finds nothing new), and then
/// publishes one `{op: "download", namespace, source}` event per family with files in the
/// response. A read-only directory (a worker owns the index) lands the files the same safe
/// way and leaves the index to its owner, whose watcher picks them up.
pub fn land(directory: &Directory, bundle: Bundle) -> Result<Landed> {
    let folders = &directory.config().paths;
    let lock = lock_path(&folders.index_path);
    let targets = Targets {
        skills: &folders.skills_folder,
        agents: &folders.agents_folder,
        lock: &lock,
    };
    let source = &bundle.source;
    let written = &bundle.written;
    let event = |family| ChangeEvent {
        family,
        payload: json!({
            "op": "download",
            "namespace": source.namespace(),
            "source": source.kind(),
        }),
    };
    let events = [
        (Family::Skills, &written.skills),
        (Family::SystemPrompts, &written.system_prompts),
        (Family::Agents, &written.agents),
    ]
    .into_iter()
    .filter(|(_, names)| !names.is_empty())
    .map(|(family, _)| event(family))
    .collect();
    let namespace = source.namespace().to_string();
    let served_prompt = |name: &str| -> Result<Option<PathBuf>> {
        Ok(
            match directory.reader()?.prompt(name)?.map(|row| row.source) {
                Some(Source::File { root, rel, .. }) => Some(directory.roots().file(root, &rel)),
                _ => None,
            },
        )
    };
    let paths = directory.change(|| {
        // Checked under the landing's lock, so that what the checks saw is what lands.
        let touched = landing::land_with(targets, || {
            guard::check(folders, &namespace, bundle.files, &served_prompt)
                .map(|checked| checked.files)
        })?;
        // The bundle's files; its record (also landed, and reconciled) is not one.
        let files = touched
            .iter()
            .filter(|p| p.file_name().is_none_or(|n| n != guard::RECORD_FILE))
            .cloned()
            .collect();
        Ok(Change {
            value: files,
            touched,
            events,
        })
    })?;
    let response = json!({
        "namespace": source.namespace(),
        "skills_written": written.skills,
        "system_prompts_written": written.system_prompts,
        "agents_written": written.agents,
        "source": source.to_json(),
    });
    Ok(Landed { response, paths })
}

/// How many of the markdown files a landing wrote the index does not hold yet as they are
/// on disk (the same inode and size: the landing renamed them into place). The command line
/// follows a running worker's index with it.
pub fn unindexed(directory: &Directory, written: &[PathBuf]) -> Result<usize> {
    use std::os::unix::fs::MetadataExt;
    let reader = directory.reader()?;
    let paths = &directory.config().paths;
    let mut missing = 0;
    for file in written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        let (Some(key), Ok(meta)) = (index_key(paths, file), std::fs::metadata(file)) else {
            continue;
        };
        let record = reader.file(key.0, &key.1)?;
        if !record.is_some_and(|r| r.stat.ino == meta.ino() && r.stat.size == meta.len()) {
            missing += 1;
        }
    }
    Ok(missing)
}

/// The index's key of a written file: agent profiles under `agents_folder`, everything else
/// under `skills_folder`.
fn index_key(paths: &Paths, file: &Path) -> Option<(Root, String)> {
    if let Ok(rel) = file.strip_prefix(&paths.agents_folder) {
        return Some((Root::Agents, rel.to_str()?.to_string()));
    }
    let rel = file.strip_prefix(&paths.skills_folder).ok()?;
    Some((Root::Skills, rel.to_str()?.replace('\\', "/")))
}
