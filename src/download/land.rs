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

use super::bundle::{Bundle, Dest, File, Written};
use super::guard::{self, OnEdited};
use super::lock::{self, LockedSource};
use super::review;
use crate::rules::Source;
use crate::store::landing::{self, Targets, bundles_lock_folder, lock_path};

/// A landed download: the function's response and the paths of the files written (the
/// bundles lock is not one of them).
#[derive(Clone, Debug, PartialEq)]
pub struct Landed {
    /// `{namespace, skills_written, system_prompts_written, agents_written, source}`.
    pub response: Value,
    pub paths: Vec<PathBuf>,
}

/// Lands a checked bundle all or nothing, with its entry in the bundles lock, and answers the
/// download's response `{namespace, skills_written, system_prompts_written, agents_written,
/// source, kept_local, review}`.
///
/// Files this bundle installed and someone edited since are kept as they are and listed in
/// `kept_local` (`on_edited: Keep`), or replaced (`Overwrite`, a download's `force: true`).
/// A bundle with executables is refused first when `download_allow_executables` is off.
///
/// The index's writer lands under its write lock, reconciles the written paths in the same
/// call (so the next read sees them and the watcher's echo finds nothing new), and then
/// publishes one `{op: "download", namespace, source}` event per family with files in the
/// response. A read-only directory (a worker owns the index) lands the files the same safe
/// way and leaves the index to its owner, whose watcher picks them up.
pub fn land(directory: &Directory, bundle: Bundle, on_edited: OnEdited) -> Result<Landed> {
    let settings = directory.settings();
    let review = review::review(&bundle, settings.download_large_file_bytes);
    review::allow(&review, settings.download_allow_executables)?;
    let folders = &directory.config().paths;
    let places = LockPlaces::of(folders);
    let targets = places.targets(folders);
    let source = bundle.source.clone();
    let written = bundle.written.clone();
    let locked_source = LockedSource::of(&source, &bundle.resolved);
    let namespace = source.namespace().to_string();
    let served_prompt = |name: &str| served_prompt(directory, name);
    let (paths, kept_local, written) = directory.change(|| {
        let mut kept: Vec<File> = Vec::new();
        let mut folder = namespace.clone();
        // Checked under the landing's lock, so that what the checks saw is what lands, and the
        // bundles lock read here is the one this landing replaces.
        let touched = landing::land_with(targets, || {
            // Read under the landing lock: what the lock lists now owns its files if the
            // record was lost.
            let locked = lock::read(&folders.bundles_lock)?
                .bundles
                .get(&namespace)
                .map(lock::Entry::locked_bytes)
                .unwrap_or_default();
            let checked = guard::check(
                folders,
                &namespace,
                bundle.files,
                &served_prompt,
                (
                    on_edited,
                    guard::Beyond {
                        locked: &locked,
                        ..Default::default()
                    },
                ),
            )?;
            // An empty bundle writes nothing, not even a lock entry.
            if checked.files.is_empty() && checked.kept_local.is_empty() {
                return Ok(Vec::new());
            }
            let bundle_files = checked
                .files
                .iter()
                .chain(&checked.kept_local)
                .filter(|f| !is_record(f));
            let entry = lock::entry(&namespace, locked_source, &checked.folder, bundle_files);
            let mut files = checked.files;
            files.push(places.lock_file(folders, &namespace, entry)?);
            kept = checked.kept_local;
            folder = checked.folder;
            Ok(files)
        })?;
        // The bundle's files; its record and the lock (also landed) are not. The lock is not
        // a document, and may lie outside every root: the reconcile is not told of it.
        let touched: Vec<PathBuf> = touched
            .into_iter()
            .filter(|p| *p != folders.bundles_lock)
            .collect();
        let files = touched
            .iter()
            .filter(|p| p.file_name().is_none_or(|n| n != guard::RECORD_FILE))
            .cloned()
            .collect();
        let kept_local: Vec<String> = kept.iter().map(|f| shown(f, &folder)).collect();
        let written = without_kept(written, &kept, &folder);
        let events = download_events(&written, &namespace, &source, |_, names| !names.is_empty());
        Ok(Change {
            value: (files, kept_local, written),
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
        "kept_local": kept_local,
        "review": review.to_json(),
    });
    Ok(Landed { response, paths })
}

/// Whether `file` is the namespace's record of what the bundle wrote.
pub(super) fn is_record(file: &File) -> bool {
    file.dest == Dest::Skills
        && file
            .rel
            .rsplit('/')
            .next()
            .is_some_and(|name| name == guard::RECORD_FILE)
}

/// A placed file as the response names it: relative to the namespace folder, or
/// `agents/<id>.md`.
pub(super) fn shown(file: &File, folder: &str) -> String {
    match file.dest {
        Dest::Agents => format!("agents/{}", file.rel),
        _ => file
            .rel
            .strip_prefix(folder)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or(&file.rel)
            .to_string(),
    }
}

/// A download's `{op: "download", namespace, source}` event for each family `fires` keeps,
/// given the names the answer lists for it, in the order skills, system prompts, agents.
pub(super) fn download_events(
    written: &Written,
    namespace: &str,
    source: &super::source::Source,
    fires: impl Fn(Family, &[String]) -> bool,
) -> Vec<ChangeEvent> {
    [
        (Family::Skills, &written.skills),
        (Family::SystemPrompts, &written.system_prompts),
        (Family::Agents, &written.agents),
    ]
    .into_iter()
    .filter(|(family, names)| fires(*family, names))
    .map(|(family, _)| ChangeEvent {
        family,
        payload: json!({
            "op": "download",
            "namespace": namespace,
            "source": source.kind(),
        }),
    })
    .collect()
}

/// The response's lists without the files kept locally: they were not written.
pub(super) fn without_kept(mut written: Written, kept: &[File], folder: &str) -> Written {
    for file in kept {
        match file.dest {
            Dest::Agents => {
                let id = file.rel.strip_suffix(".md").unwrap_or(&file.rel);
                written.agents.retain(|a| a != id);
            }
            _ => {
                let rel = shown(file, folder);
                written.skills.retain(|s| *s != rel);
                if lock::route_of(Dest::Skills, &rel) == lock::Route::SystemPrompts {
                    let stem = rel.rsplit('/').next().unwrap_or(&rel);
                    let stem = stem.strip_suffix(".md").unwrap_or(stem);
                    written.system_prompts.retain(|p| p != stem);
                }
            }
        }
    }
    written
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

/// Where a landing of bundles writes besides the folders: the landing's advisory lock beside
/// the index, and the bundles lock file's folder and name.
pub(super) struct LockPlaces {
    landing_lock: PathBuf,
    folder: PathBuf,
    name: String,
}

impl LockPlaces {
    pub(super) fn of(folders: &Paths) -> LockPlaces {
        LockPlaces {
            landing_lock: lock_path(&folders.index_path),
            folder: bundles_lock_folder(&folders.bundles_lock),
            name: folders
                .bundles_lock
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string(),
        }
    }

    pub(super) fn targets<'a>(&'a self, folders: &'a Paths) -> Targets<'a> {
        Targets {
            skills: &folders.skills_folder,
            agents: &folders.agents_folder,
            bundles_lock: &self.folder,
            lock: &self.landing_lock,
        }
    }

    /// The bundles lock with `entry` for `namespace`, as the file the landing commits with the
    /// bundle's files. The same bytes from the same source again (a restore, a re-pull of an
    /// unchanged bundle) keep the entry's `landed_at`, so the committed lock stays as it was.
    pub(super) fn lock_file(
        &self,
        folders: &Paths,
        namespace: &str,
        mut entry: lock::Entry,
    ) -> Result<File> {
        let mut next = lock::read(&folders.bundles_lock)?;
        if let Some(previous) = next.bundles.get(namespace)
            && previous.source == entry.source
            && previous.files == entry.files
        {
            entry.landed_at = previous.landed_at.clone();
        }
        next.bundles.insert(namespace.to_string(), entry);
        Ok(File {
            dest: Dest::BundlesLock,
            rel: self.name.clone(),
            bytes: next.to_bytes()?,
            executable: false,
        })
    }
}

/// The file that serves system prompt `name`, when a file does (a bundle may replace only
/// that one: `guard::check`).
pub(super) fn served_prompt(directory: &Directory, name: &str) -> Result<Option<PathBuf>> {
    Ok(
        match directory.reader()?.prompt(name)?.map(|row| row.source) {
            Some(Source::File { root, rel, .. }) => Some(directory.roots().file(root, &rel)),
            _ => None,
        },
    )
}
