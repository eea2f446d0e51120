//! What the disk holds against the bundles lock (issue 29): `directory::skills::bundles::list`,
//! `::get {namespace}` and `::verify`, and `iii-directory bundles`.
//!
//! Each locked bundle is `missing` when some file it landed is gone, else `modified` when some
//! file's bytes differ from the locked sha256, else `untracked` when its namespace folder holds
//! files the lock does not list (a file made by hand, or one an older version left), else
//! `clean`; the three lists are always given, whatever the state. Beside them, `upstream_copies`
//! names every `<name>.upstream` copy an update's conflict left, and `stale_upstream_copies` the
//! ones whose conflict is settled (the file is clean again, the lock no longer lists it, or a
//! later update moved past the copy's text), unless the user edited the copy since (their merge
//! in progress, [`copy_edited`]); a stale copy makes an otherwise clean bundle
//! `untracked`. Files are named as a
//! download's response names them: relative to the namespace folder, `agents/<id>.md` for a
//! profile. Nothing here writes, and nothing reads the index: the disk and the lock are the
//! whole truth. Dot names (the bundle's record, the auto-download marker, staging folders) and
//! our temporary files are never untracked.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::Paths;
use crate::error::Result;
use crate::request;
use crate::store::is_temp_name;
use crate::store::landing::Dest;

use super::guard::{has_record, namespace_folder, unedited};
use super::lock::{self, Entry, LockedSource, Route};
use crate::rules::skip::UPSTREAM_SUFFIX;

/// The three status functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BundlesFunction {
    List,
    Get,
    Verify,
}

impl BundlesFunction {
    pub const ALL: [BundlesFunction; 3] = [
        BundlesFunction::List,
        BundlesFunction::Get,
        BundlesFunction::Verify,
    ];

    /// The function id on the engine bus.
    pub fn id(self) -> &'static str {
        match self {
            BundlesFunction::List => "directory::skills::bundles::list",
            BundlesFunction::Get => "directory::skills::bundles::get",
            BundlesFunction::Verify => "directory::skills::bundles::verify",
        }
    }
}

/// A bundle's state, worst first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Missing,
    Modified,
    Untracked,
    Clean,
}

/// One locked file against the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileState {
    Clean,
    Modified,
    Missing,
}

/// A locked file as `get` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileStatus {
    pub path: String,
    pub route: Route,
    pub state: FileState,
}

/// One bundle against the disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BundleStatus {
    pub namespace: String,
    pub state: State,
    pub source: LockedSource,
    pub landed_at: String,
    /// How many files the lock lists.
    pub files: usize,
    pub modified: Vec<String>,
    pub missing: Vec<String>,
    pub untracked: Vec<String>,
    /// Every `<name>.upstream` copy an update's conflict left beside a file of the bundle.
    pub upstream_copies: Vec<String>,
    /// The copies no conflict needs any more (see [`copy_is_stale`]): safe to delete.
    pub stale_upstream_copies: Vec<String>,
    /// Whether the namespace holds the bundle's record of what it wrote (`.iii-bundle-files`).
    /// Without it a landing takes back from the lock the files holding the locked bytes, and
    /// a restore refuses a file of the bundle edited here (`guard::check`). The files' state
    /// does not depend on it.
    pub recorded: bool,
    /// Every locked file with its state (`get` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Vec<FileStatus>>,
}

/// `{namespace}`.
#[derive(Deserialize)]
struct GetRequest {
    namespace: String,
}

/// Answers one of the three functions from the lock at `paths.bundles_lock` and the disk.
pub fn answer(paths: &Paths, function: BundlesFunction, request: &Value) -> Result<Value> {
    // A landing a killed download left half done is finished (or undone) first, under the
    // landings' own lock: the answer compares the bundles' files, never what a crash left
    // between two versions (which would read as files edited here).
    crate::store::landing::recover_at_open(paths);
    match function {
        BundlesFunction::List => {
            let bundles = statuses(paths)?;
            Ok(json!({ "bundles": bundles }))
        }
        BundlesFunction::Get => {
            let GetRequest { namespace } = request::parse(request)?;
            let namespace = namespace.trim();
            let locked = lock::read(&paths.bundles_lock)?;
            let entry = locked.bundles.get(namespace).ok_or_else(|| {
                lock::not_locked(
                    namespace,
                    "it was never downloaded here, or the lock was replaced.",
                )
            })?;
            Ok(json!(status(paths, entry, true)))
        }
        BundlesFunction::Verify => {
            let bundles = statuses(paths)?;
            let files: usize = bundles.iter().map(|b| b.files).sum();
            let problems: Vec<&BundleStatus> =
                bundles.iter().filter(|b| b.state != State::Clean).collect();
            Ok(json!({
                "ok": problems.is_empty(),
                "checked": { "bundles": bundles.len(), "files": files },
                "bundles": problems,
            }))
        }
    }
}

/// Every locked bundle's status, by namespace.
pub fn statuses(paths: &Paths) -> Result<Vec<BundleStatus>> {
    let locked = lock::read(&paths.bundles_lock)?;
    Ok(locked
        .bundles
        .values()
        .map(|entry| status(paths, entry, false))
        .collect())
}

/// One bundle's status; with `detail`, every file's state too.
pub fn status(paths: &Paths, entry: &Entry, detail: bool) -> BundleStatus {
    let folder = namespace_folder(paths, &entry.namespace);
    let prefix = format!("{folder}/");
    let shown = |route: Route, path: &str| match route {
        Route::Agents => format!("agents/{path}"),
        _ => path.strip_prefix(&prefix).unwrap_or(path).to_string(),
    };
    let (mut modified, mut missing, mut files) = (Vec::new(), Vec::new(), Vec::new());
    let (mut copies, mut stale) = (Vec::new(), Vec::new());
    for file in &entry.files {
        let root = file.route.dest().bundle_root(paths);
        let disk = lock::file_sha256(&root.join(&file.path));
        let state = match &disk {
            None => FileState::Missing,
            Some((size, sha)) if *size == file.size && *sha == file.sha256 => FileState::Clean,
            Some(_) => FileState::Modified,
        };
        let name = shown(file.route, &file.path);
        let copy_rel = format!("{}{UPSTREAM_SUFFIX}", file.path);
        if let Some((_, copy)) = lock::file_sha256(&root.join(&copy_rel)) {
            let copy_name = format!("{name}{UPSTREAM_SUFFIX}");
            let edited = copy_edited(&copy, Some(&file.sha256), || {
                unedited(paths, &entry.namespace, file.route.dest(), &copy_rel)
            });
            if !edited && copy_is_stale(state, &copy, &file.sha256) {
                stale.push(copy_name.clone());
            }
            copies.push(copy_name);
        }
        match state {
            FileState::Missing => missing.push(name.clone()),
            FileState::Modified => modified.push(name.clone()),
            FileState::Clean => {}
        }
        files.push(FileStatus {
            path: name,
            route: file.route,
            state,
        });
    }
    let locked: BTreeSet<&str> = entry
        .files
        .iter()
        .filter(|f| f.route.dest() == Dest::Skills)
        .filter_map(|f| f.path.strip_prefix(&prefix))
        .collect();
    let mut untracked = Vec::new();
    walk(
        &paths.skills_folder.join(&folder),
        "",
        &mut |rel| {
            match rel.strip_suffix(UPSTREAM_SUFFIX) {
                // Beside a locked file: looked at above.
                Some(stem) if locked.contains(stem) => {}
                // Beside a file the lock no longer lists: no conflict left to settle.
                Some(_) => {
                    copies.push(rel.to_string());
                    stale.push(rel.to_string());
                }
                None if !locked.contains(rel) => untracked.push(rel.to_string()),
                None => {}
            }
        },
        &paths.bundles_lock,
    );
    untracked.sort();
    copies.sort();
    stale.sort();
    let state = if !missing.is_empty() {
        State::Missing
    } else if !modified.is_empty() {
        State::Modified
    } else if !untracked.is_empty() || !stale.is_empty() {
        State::Untracked
    } else {
        State::Clean
    };
    BundleStatus {
        namespace: entry.namespace.clone(),
        state,
        source: entry.source.clone(),
        landed_at: entry.landed_at.clone(),
        files: entry.files.len(),
        modified,
        missing,
        untracked,
        upstream_copies: copies,
        stale_upstream_copies: stale,
        recorded: has_record(paths, &entry.namespace),
        detail: detail.then_some(files),
    }
}

/// Whether a conflict's `<name>.upstream` copy (its sha256 `copy`) was edited since the landing
/// that wrote it. That landing locked the file at upstream's bytes, the copy's own, and listed
/// the copy in the bundle's record: a copy holding neither the locked bytes (`locked`) nor what
/// the record lists for it (`recorded`, asked only then) holds the user's work, which is never
/// stale, never removed and never written over.
pub fn copy_edited(copy: &str, locked: Option<&str>, recorded: impl FnOnce() -> bool) -> bool {
    Some(copy) != locked && !recorded()
}

/// Whether an update's `<name>.upstream` copy (its sha256 `copy`) beside a locked file (in
/// `state`, locked as `locked`) has outlived its conflict: the file holds the locked bytes
/// again, or the copy is not the locked upstream text any more (a later update moved on).
/// Apply removes such a copy when it lands the file (`plan.rs`); one left by hand stays until
/// the user deletes it.
pub fn copy_is_stale(state: FileState, copy: &str, locked: &str) -> bool {
    state == FileState::Clean || copy != locked
}

/// Calls `found` with the path (under `dir`) of every regular file below `dir`, links not
/// followed, dot names and our temporary files passed over, `skip` (the lock) never named.
fn walk(dir: &Path, rel: &str, found: &mut dyn FnMut(&str), skip: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') || is_temp_name(&name) {
            continue;
        }
        let path = entry.path();
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, &child, found, skip),
            Ok(t) if t.is_file() && path != skip => found(&child),
            _ => {}
        }
    }
}
