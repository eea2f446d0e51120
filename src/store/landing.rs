//! Landing a checked bundle all or nothing, and finishing what a killed download left.
//!
//! A landing works in a staging folder inside each destination root (so every rename stays on
//! one file system), named `.iii-staging-<txn>`; the walk never enters it, so nothing in it is
//! ever listed:
//!
//! ```text
//! <root>/.iii-staging-<txn>/files/<dest>/<path>    the new files, written and fsynced
//! <root>/.iii-staging-<txn>/backup/<dest>/<path>   hard links to the files they replace
//! <skills_folder>/.iii-staging-<txn>/commit.json   written (atomically) once all is staged
//! ```
//!
//! The destinations are `skills_folder`, `agents_folder` and the folder of the bundles lock
//! (`Dest::BundlesLock`): a download's new lock is one more file of the same commit.
//!
//! 1. Every target is checked first (no folder on the way that is a file or a link leading out
//!    of the root, no target that is a folder or a link): a refusal writes nothing.
//! 2. Stage every file and link a backup of every file it replaces; fsync. A failure here
//!    removes the staging folders: the tree is byte for byte as it was.
//! 3. Commit: `commit.json` lists the files. From here on the download is decided.
//! 4. Move each staged file over its target (rename). A failure moves every file already moved
//!    back into staging and its backup back into place (the old inode, so byte for byte the old
//!    file), removes the commit record and then the staging folders.
//! 5. fsync the targets' folders, remove the staging folders (the commit record last).
//!
//! A landing may also remove files (an update whose upstream dropped them): each is linked
//! under `backup/` in step 2 like a replaced file, listed in the commit record's `removed`, and
//! unlinked in step 4 after the moves. A rollback links it back from its backup; a roll forward
//! unlinks it when it is still the file that was backed up (the same inode, or the same bytes
//! where the backup had to be a copy), or when its backup is gone (a rollback had put it back).
//!
//! A crash (SIGKILL, power loss) can stop this anywhere. [`recover`], run when the index's
//! writer opens, before its first reconcile, looks at every staging folder: one without a commit
//! record is removed (the tree never changed); one with a record is rolled forward, moving every
//! file still staged into place (its other files were moved already). Either way the tree holds
//! the old files or the whole new bundle, never a mix. A rollback in progress keeps that true:
//! it moves new files back into staging before it puts a backup in place, so a roll forward
//! from any point of it still finds every new file.
//!
//! Landings and recoveries are serialized across processes by an advisory lock (flock) on a
//! file beside the index, so a command-line download and a running worker never interleave,
//! and a recovery never touches a staging folder that a live download is filling.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::beneath::{self, Dir};
use super::way;
use super::{self as store, Mode, STAGING_PREFIX, is_staging_name};
use crate::config::Paths;
use crate::error::{Error, IoError, Result, io_error};

/// The root a file lands under.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Dest {
    /// `skills_folder`: skills, system prompts and payload files, under the namespace folder.
    Skills,
    /// `agents_folder`: agent profiles, `<id>.md`.
    Agents,
    /// The folder of the bundles lock (`bundles_lock_path`): the lock's new version lands in
    /// the same commit as the files it describes, so a crash never leaves them disagreeing.
    #[serde(rename = "bundles-lock")]
    BundlesLock,
}

impl Dest {
    pub const ALL: [Dest; 3] = [Dest::Skills, Dest::Agents, Dest::BundlesLock];

    /// The root a bundle's file for this dest is under: `agents_folder` for a profile, else
    /// `skills_folder` (the lock's own file is found by `bundles_lock_path`, never by this).
    pub fn bundle_root(self, paths: &Paths) -> &Path {
        match self {
            Dest::Agents => &paths.agents_folder,
            Dest::Skills | Dest::BundlesLock => &paths.skills_folder,
        }
    }

    /// The name of the dest's folder inside a staging folder.
    pub fn word(self) -> &'static str {
        match self {
            Dest::Skills => "skills",
            Dest::Agents => "agents",
            Dest::BundlesLock => "bundles-lock",
        }
    }
}

/// One file of a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileToLand {
    pub dest: Dest,
    /// `/`-separated, relative to the dest root (`<namespace>/<path>` or `<id>.md`).
    pub rel: String,
    pub bytes: Vec<u8>,
    /// Lands with the executable bits (where its read bits are), as a checkout of a file
    /// whose mode in the repository is executable does.
    pub executable: bool,
}

const COMMIT_FILE: &str = "commit.json";
const FILES_DIR: &str = "files";
const BACKUP_DIR: &str = "backup";
/// The commit record's format version.
const COMMIT_SCHEMA: u32 = 1;

/// Whether a file's mode has an execute bit, for anyone: what a landing gives back with
/// [`set_executable`].
pub fn has_execute_bit(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// Adds an execute bit beside each read bit of the new file's mode (which the umask shaped):
/// whoever may read the script may run it.
fn set_executable(file: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = file.metadata()?.permissions();
    let mode = permissions.mode();
    permissions.set_mode(mode | (mode & 0o444) >> 2);
    file.set_permissions(permissions)
}

/// The advisory lock that serializes landings across processes: beside the index, which
/// every process serving the same folders shares.
pub fn lock_path(index_path: &Path) -> PathBuf {
    super::beside(index_path, ".downloads.lock")
}

/// Finishes or removes what killed downloads left in these folders (see the [module](self)); a
/// failure is logged, never fatal: the staging folders are invisible to the index meanwhile.
pub fn recover_at_open(paths: &Paths) -> Recovery {
    let lock = lock_path(&paths.index_path);
    let lock_folder = bundles_lock_folder(&paths.bundles_lock);
    let targets = Targets {
        skills: &paths.skills_folder,
        agents: &paths.agents_folder,
        bundles_lock: &lock_folder,
        lock: &lock,
    };
    match recover(targets) {
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

/// The folder the bundles lock at `path` lands in (its parent; `.` for a bare name).
pub fn bundles_lock_folder(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The folders a bundle lands in, by destination.
#[derive(Clone, Copy, Debug)]
pub struct Targets<'a> {
    pub skills: &'a Path,
    pub agents: &'a Path,
    /// The folder holding the bundles lock file.
    pub bundles_lock: &'a Path,
    /// The advisory lock file (beside the index).
    pub lock: &'a Path,
}

impl Targets<'_> {
    pub fn root(&self, dest: Dest) -> &Path {
        match dest {
            Dest::Skills => self.skills,
            Dest::Agents => self.agents,
            Dest::BundlesLock => self.bundles_lock,
        }
    }
}

/// The commit record: which files the download lands, and which it removes (absent in
/// records written before removals existed).
#[derive(Serialize, Deserialize)]
struct Commit {
    schema: u32,
    files: Vec<(Dest, String)>,
    #[serde(default)]
    removed: Vec<(Dest, String)>,
}

/// What one landing does: files to write and files to remove, under their roots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub files: Vec<FileToLand>,
    /// `(dest, rel)` of files to remove; each must be a regular file when the landing starts.
    pub removed: Vec<(Dest, String)>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.files.is_empty() && self.removed.is_empty()
    }
}

/// The cross-process landing lock; released when dropped (the file is closed).
struct DownloadLock {
    _file: File,
}

impl DownloadLock {
    fn acquire(path: &Path) -> Result<DownloadLock> {
        let fail = |e: io::Error| Error::Io(io_error("lock", path)(e));
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(fail)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(fail)?;
        loop {
            // SAFETY: flock(2) on a file descriptor this function owns and keeps open.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(DownloadLock { _file: file });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(fail(e));
            }
        }
    }
}

static TXNS: AtomicU64 = AtomicU64::new(0);

/// One landing's staging folders.
struct Txn<'a> {
    targets: Targets<'a>,
    name: String,
}

impl<'a> Txn<'a> {
    fn new(targets: Targets<'a>) -> Txn<'a> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let n = TXNS.fetch_add(1, Ordering::Relaxed);
        Txn {
            targets,
            name: format!("{STAGING_PREFIX}{}-{n}-{nanos}", std::process::id()),
        }
    }

    fn named(targets: Targets<'a>, name: &str) -> Txn<'a> {
        Txn {
            targets,
            name: name.to_string(),
        }
    }

    /// `e` with the staging folders' paths (which carry the process id and a unique name)
    /// replaced by `<root>/.iii-staging`: no answer shows a temporary path.
    fn without_staging_names(&self, e: Error) -> Error {
        let shown = |dest: Dest| {
            let staging = self.staging(dest);
            let shown = self
                .targets
                .root(dest)
                .join(STAGING_PREFIX.trim_end_matches('-'));
            (staging, shown)
        };
        let scrub = |mut text: String| {
            for dest in Dest::ALL {
                let (staging, shown) = shown(dest);
                text = text.replace(&staging.display().to_string(), &shown.display().to_string());
            }
            text
        };
        let scrub_path = |path: PathBuf| {
            Dest::ALL
                .into_iter()
                .map(shown)
                .find_map(|(staging, shown)| {
                    path.strip_prefix(&staging)
                        .ok()
                        .map(|rest| shown.join(rest))
                })
                .unwrap_or(path)
        };
        match e {
            Error::Io(e) => Error::Io(e.map_path(scrub_path)),
            Error::Invalid(text) => Error::Invalid(scrub(text)),
            other => other,
        }
    }

    fn staging(&self, dest: Dest) -> PathBuf {
        self.targets.root(dest).join(&self.name)
    }

    /// The staging folder holding the commit record (always in `skills_folder`).
    fn primary(&self) -> PathBuf {
        self.staging(Dest::Skills)
    }

    fn staged(&self, dest: Dest, rel: &str) -> PathBuf {
        self.staging(dest)
            .join(FILES_DIR)
            .join(dest.word())
            .join(rel)
    }

    fn backup(&self, dest: Dest, rel: &str) -> PathBuf {
        self.staging(dest)
            .join(BACKUP_DIR)
            .join(dest.word())
            .join(rel)
    }

    fn target(&self, dest: Dest, rel: &str) -> PathBuf {
        self.targets.root(dest).join(rel)
    }

    fn commit_path(&self) -> PathBuf {
        self.primary().join(COMMIT_FILE)
    }

    /// Step 2: every file written under `files/`, every file it replaces or removes linked
    /// under `backup/`, all of it fsynced.
    fn stage(&self, files: &[FileToLand], removed: &[(Dest, String)]) -> Result<()> {
        let mut folders = BTreeSet::new();
        let mut roots = Vec::with_capacity(Dest::ALL.len());
        for dest in Dest::ALL {
            let root = self.targets.root(dest);
            let root_dir = Dir::root(root, false).map_err(io_error("open", root))?;
            root_dir
                .mkdir(OsStr::new(&self.name))
                .or_else(|e| match e.kind() {
                    // skills_folder and agents_folder may be one folder.
                    io::ErrorKind::AlreadyExists => Ok(()),
                    _ => Err(e),
                })
                .map_err(io_error("create_dir", &self.staging(dest)))?;
            folders.insert(root.to_path_buf());
            roots.push(root_dir);
        }
        let root_dir = |dest: Dest| &roots[Dest::ALL.iter().position(|d| *d == dest).unwrap_or(0)];
        let mut written = Vec::with_capacity(files.len());
        for file in files {
            let staged = self.staged(file.dest, &file.rel);
            let dir = staging_dir(
                root_dir(file.dest),
                &self.staged_rel(file.dest, &file.rel),
                &staged,
            )?;
            note_folders(&staged, &self.staging(file.dest), &mut folders);
            let name = staged.file_name().unwrap_or_default().to_os_string();
            let mut new = dir.create_new(&name).map_err(io_error("write", &staged))?;
            new.write_all(&file.bytes)
                .map_err(io_error("write", &staged))?;
            if file.executable {
                set_executable(&new).map_err(io_error("chmod", &staged))?;
            }
            written.push(staged);
            let target = self.target(file.dest, &file.rel);
            if fs::symlink_metadata(&target).is_ok() {
                let backup = self.backup(file.dest, &file.rel);
                let backup_dir = staging_dir(
                    root_dir(file.dest),
                    &self.backup_rel(file.dest, &file.rel),
                    &backup,
                )?;
                note_folders(&backup, &self.staging(file.dest), &mut folders);
                back_up(self.targets.root(file.dest), &target, &backup_dir, &name)
                    .map_err(io_error("back up", &target))?;
            }
        }
        for (dest, rel) in removed {
            let target = self.target(*dest, rel);
            let backup = self.backup(*dest, rel);
            let backup_dir = staging_dir(root_dir(*dest), &self.backup_rel(*dest, rel), &backup)?;
            note_folders(&backup, &self.staging(*dest), &mut folders);
            let name = backup.file_name().unwrap_or_default().to_os_string();
            back_up(self.targets.root(*dest), &target, &backup_dir, &name)
                .map_err(io_error("back up", &target))?;
        }
        // One fsync per file and folder, many at once: the file system batches concurrent
        // syncs into shared journal commits, where one after the other each waits for its own.
        in_parallel(&written, store::sync_file)?;
        let folders: Vec<PathBuf> = folders.into_iter().collect();
        Ok(in_parallel(&folders, store::sync_dir)?)
    }

    /// Step 3: the commit record, written whole or not at all.
    fn commit(&self, files: &[FileToLand], removed: &[(Dest, String)]) -> Result<()> {
        let record = Commit {
            schema: COMMIT_SCHEMA,
            files: files.iter().map(|f| (f.dest, f.rel.clone())).collect(),
            removed: removed.to_vec(),
        };
        let bytes = serde_json::to_vec(&record).map_err(Error::json)?;
        store::write_atomic(
            &[self.targets.skills],
            &self.commit_path(),
            &bytes,
            Mode::CreateNew,
        )
        .map(drop)
        .map_err(Error::from)
    }

    /// Step 4: each staged file renamed over its target. `moved` says how far it got, and
    /// `created` which target folders it made.
    fn move_in(
        &self,
        files: &[FileToLand],
        moved: &mut Vec<usize>,
        created: &mut Vec<PathBuf>,
    ) -> Result<()> {
        for (i, file) in files.iter().enumerate() {
            let target = self.target(file.dest, &file.rel);
            let root = self.targets.root(file.dest);
            rename_beneath(
                (root, &self.staged_rel(file.dest, &file.rel)),
                (root, Path::new(&file.rel)),
                created,
            )
            .map_err(io_error("rename into", &target))?;
            moved.push(i);
        }
        Ok(())
    }

    /// Step 4's removals, after the moves: each removed file unlinked through its folder's
    /// descriptor. `unlinked` says how far it got.
    fn move_out(&self, removed: &[(Dest, String)], unlinked: &mut Vec<usize>) -> Result<()> {
        for (i, (dest, rel)) in removed.iter().enumerate() {
            let target = self.target(*dest, rel);
            unlink_beneath(self.targets.root(*dest), Path::new(rel))
                .map_err(io_error("remove", &target))?;
            unlinked.push(i);
        }
        Ok(())
    }

    /// Removes a folder step 4 made (an absolute path under a root's real path), if empty,
    /// through its parent's descriptor.
    fn remove_empty(&self, folder: &Path) {
        for dest in Dest::ALL {
            let root = self.targets.root(dest);
            let Ok(real) = root.canonicalize() else {
                continue;
            };
            let Ok(rel) = folder.strip_prefix(&real) else {
                continue;
            };
            if let Ok((parent, name)) = beneath::split(rel) {
                let _ = Dir::root(&real, false)
                    .and_then(|r| Ok(r.open_dir(parent, false)?))
                    .and_then(|dir| dir.rmdir(name));
            }
            return;
        }
    }

    /// [`Txn::staged`] relative to the dest's root.
    fn staged_rel(&self, dest: Dest, rel: &str) -> PathBuf {
        Path::new(&self.name)
            .join(FILES_DIR)
            .join(dest.word())
            .join(rel)
    }

    /// [`Txn::backup`] relative to the dest's root.
    fn backup_rel(&self, dest: Dest, rel: &str) -> PathBuf {
        Path::new(&self.name)
            .join(BACKUP_DIR)
            .join(dest.word())
            .join(rel)
    }

    /// Undoes step 4: every moved file back into staging, then its backup (if any) back into
    /// place, then the folders step 4 created, then the commit record.
    fn roll_back(
        &self,
        files: &[FileToLand],
        moved: &[usize],
        created: &[PathBuf],
        (removed, unlinked): (&[(Dest, String)], &[usize]),
    ) {
        for &i in unlinked.iter().rev() {
            let (dest, rel) = &removed[i];
            let root = self.targets.root(*dest);
            let backup = self.backup_rel(*dest, rel);
            if let Err(e) = rename_beneath((root, &backup), (root, Path::new(rel)), &mut Vec::new())
            {
                let target = self.target(*dest, rel);
                tracing::error!(path = %target.display(), "rollback: cannot restore a removed file: {e}");
            }
        }
        for &i in moved.iter().rev() {
            let file = &files[i];
            let root = self.targets.root(file.dest);
            let target = self.target(file.dest, &file.rel);
            let rel = Path::new(&file.rel);
            let staged = self.staged_rel(file.dest, &file.rel);
            if let Err(e) = rename_beneath((root, rel), (root, &staged), &mut Vec::new()) {
                tracing::error!(path = %target.display(), "rollback: cannot take a new file back: {e}");
                continue;
            }
            let backup = self.backup(file.dest, &file.rel);
            if fs::symlink_metadata(&backup).is_ok() {
                let backup = self.backup_rel(file.dest, &file.rel);
                if let Err(e) = rename_beneath((root, &backup), (root, rel), &mut Vec::new()) {
                    tracing::error!(path = %target.display(), "rollback: cannot restore the old file: {e}");
                }
            }
        }
        for folder in created.iter().rev() {
            self.remove_empty(folder);
        }
        if let Err(e) = fs::remove_file(self.commit_path())
            .and_then(|()| store::sync_dir(&self.primary()).map_err(io::Error::other))
        {
            tracing::error!("rollback: cannot remove the commit record: {e}");
        }
    }

    /// Removes the staging folders; the one holding the commit record last, and the record
    /// last within it, so a crash meanwhile leaves a record only while files may still be
    /// staged.
    fn remove(&self) {
        let primary = self.primary();
        for dest in Dest::ALL {
            let staging = self.staging(dest);
            if staging != primary {
                remove_tree(&staging);
            }
        }
        // Inside the staging folder, through its descriptor: a staging folder swapped for a
        // link never makes these removals act elsewhere.
        let root = self.targets.root(Dest::Skills);
        if let Ok(staging) =
            Dir::root(root, false).and_then(|r| Ok(r.open_dir(Path::new(&self.name), false)?))
        {
            for sub in [FILES_DIR, BACKUP_DIR] {
                self.remove_sub(root, &staging, sub);
            }
            let _ = staging.unlink(OsStr::new(COMMIT_FILE));
        }
        remove_tree(&primary);
    }
}

impl Txn<'_> {
    /// Removes the folder `sub` of the primary staging folder: moved (through descriptors) to
    /// a staging-named folder directly in the root first, so that the removal of the whole
    /// tree only ever resolves the root's own path and a name of ours.
    fn remove_sub(&self, root: &Path, staging: &Dir, sub: &str) {
        let n = TXNS.fetch_add(1, Ordering::Relaxed);
        let trash = format!("{}.{sub}-{n}", self.name);
        let Ok(root_dir) = Dir::root(root, false) else {
            return;
        };
        match staging.rename(OsStr::new(sub), &root_dir, OsStr::new(&trash)) {
            Ok(()) => remove_tree(&root.join(trash)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(folder = sub, "cannot remove a staging folder: {e}"),
        }
    }
}

fn remove_tree(path: &Path) {
    match fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), "cannot remove a staging folder: {e}"),
    }
}

/// The folder of a staged file (`rel` relative to the root), made beneath the root's
/// descriptor without following links.
fn staging_dir(root: &Dir, rel: &Path, path: &Path) -> Result<Dir> {
    let folder = rel.parent().unwrap_or(Path::new(""));
    let made = root.create_dirs(folder, &mut Vec::new());
    Ok(made.map_err(|e| io_error("create_dir_all", path)(e.into()))?)
}

/// Remembers the folders between `top` and `path`'s parent, for their fsync.
fn note_folders(path: &Path, top: &Path, folders: &mut BTreeSet<PathBuf>) {
    if let Some(parent) = path.parent() {
        for folder in parent.ancestors().take_while(|a| a.starts_with(top)) {
            folders.insert(folder.to_path_buf());
        }
    }
}

/// Keeps the file `target` (inside `root`) as `name` in the backup folder: a hard link keeps
/// the very file (content, inode, times) for a rollback; a copy where the file system has no
/// hard links. The target is reached through descriptors, never through a link.
fn back_up(root: &Path, target: &Path, backup: &Dir, name: &OsStr) -> io::Result<()> {
    let (root, rel) =
        store::locate(&[root], target).map_err(|e| io::Error::other(e.to_string()))?;
    let (folder, target_name) = beneath::split(&rel)?;
    let dir = Dir::root(&root, false)?.open_dir(folder, false)?;
    if dir.link(target_name, backup, name).is_ok() {
        return Ok(());
    }
    let mut from = dir.open_file(target_name)?;
    let mut to = backup.create_new(name)?;
    io::copy(&mut from, &mut to).map(drop)
}

/// Renames `from` to `to`, both relative to `root`, through folder descriptors opened from the
/// root's without following links; the missing folders on the way to `to` are made
/// (`mkdirat`) and recorded in `made` (absolute, outermost first).
///
/// A target inside the root is first located as the store's writes locate theirs: a link on its
/// way that stays inside the root (which [`check_target`] allows) is resolved once into where
/// it leads; a link swapped in after that makes the rename fail, never land outside.
fn rename_beneath(
    (from_root, from): (&Path, &Path),
    (to_root, to): (&Path, &Path),
    made: &mut Vec<PathBuf>,
) -> io::Result<()> {
    let (from_root, from) = store::locate(&[from_root], &from_root.join(from))
        .map_err(|e| io::Error::other(e.to_string()))?;
    let (to_root, to) = store::locate(&[to_root], &to_root.join(to))
        .map_err(|e| io::Error::other(e.to_string()))?;
    let (from_dir, from_name) = beneath::split(&from)?;
    let (to_dir, to_name) = beneath::split(&to)?;
    let source = Dir::root(&from_root, false)?.open_dir(from_dir, false)?;
    let mut made_here = Vec::new();
    let dest = Dir::root(&to_root, false)?.create_dirs(to_dir, &mut made_here);
    made.extend(made_here.into_iter().map(|m| to_root.join(m)));
    source.rename(from_name, &dest?, to_name)
}

/// Step 1 for one file: the target may be created or replaced without leaving the root. The
/// way to it follows the writes' rule (`store::way`); the target itself must be absent or a
/// regular file, since a bundle replaces only files (never a link, a folder or a device).
fn check_target(root: &Path, rel: &str) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::Invalid(format!(
            "cannot download into {}: {why}; nothing was written",
            root.join(rel).display()
        )))
    };
    if fs::metadata(root).is_ok_and(|meta| !meta.is_dir()) {
        let root = root.to_path_buf();
        return refuse(store::StoreError::RootNotAFolder { root }.to_string());
    }
    if let Err(blocked) = way::check_way(root, Path::new(rel)) {
        return refuse(blocked.to_string());
    }
    let target = root.join(rel);
    match fs::symlink_metadata(&target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => refuse(format!("{} cannot be read ({e})", target.display())),
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) if meta.file_type().is_symlink() => {
            refuse(format!("{} is a symbolic link", target.display()))
        }
        Ok(_) => refuse(format!("{} is not a regular file", target.display())),
    }
}

/// Step 1 for one removal: the way to it follows the writes' rule, and it is a regular file.
fn check_removal(root: &Path, rel: &str) -> Result<()> {
    check_target(root, rel)?;
    if fs::symlink_metadata(root.join(rel)).is_err() {
        return Err(Error::Invalid(format!(
            "cannot remove {}: it is gone; nothing was written",
            root.join(rel).display()
        )));
    }
    Ok(())
}

/// Unlinks `rel` (a file inside `root`) through its folder's descriptor, never through a link.
fn unlink_beneath(root: &Path, rel: &Path) -> io::Result<()> {
    let (root, rel) =
        store::locate(&[root], &root.join(rel)).map_err(|e| io::Error::other(e.to_string()))?;
    let (folder, name) = beneath::split(&rel)?;
    Dir::root(&root, false)?
        .open_dir(folder, false)?
        .unlink(name)
}

/// Whether the file at `target` is still the one backed up at `backup` (a roll forward of a
/// removal): the same inode, or the same bytes where the backup is a copy; a backup that is
/// gone was put back by a rollback, so the target is the old file.
fn still_backed_up(target: &Path, backup: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(now) = fs::symlink_metadata(target) else {
        return false;
    };
    if !now.is_file() {
        return false;
    }
    match fs::symlink_metadata(backup) {
        Err(_) => true,
        Ok(kept) if kept.dev() == now.dev() && kept.ino() == now.ino() => true,
        Ok(_) => matches!((fs::read(target), fs::read(backup)), (Ok(a), Ok(b)) if a == b),
    }
}

/// Lands `files` all or nothing (see the module doc) and returns the paths written.
#[cfg(test)]
pub fn land(targets: Targets<'_>, files: &[FileToLand]) -> Result<Vec<PathBuf>> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let _lock = DownloadLock::acquire(targets.lock)?;
    land_locked(targets, files, &[])
}

/// Lands the files `prepare` gives, all or nothing, with `prepare` run under the landing lock:
/// checks it makes against the tree (what a bundle may replace) hold when the files land.
pub fn land_with(
    targets: Targets<'_>,
    prepare: impl FnOnce() -> Result<Vec<FileToLand>>,
) -> Result<Vec<PathBuf>> {
    land_changes(targets, || {
        Ok(Changes {
            files: prepare()?,
            removed: Vec::new(),
        })
    })
}

/// [`land_with`] for a landing that also removes files: the paths written and removed.
pub fn land_changes(
    targets: Targets<'_>,
    prepare: impl FnOnce() -> Result<Changes>,
) -> Result<Vec<PathBuf>> {
    let _lock = DownloadLock::acquire(targets.lock)?;
    let changes = prepare()?;
    if changes.is_empty() {
        return Ok(Vec::new());
    }
    land_locked(targets, &changes.files, &changes.removed)
}

fn land_locked(
    targets: Targets<'_>,
    files: &[FileToLand],
    removed: &[(Dest, String)],
) -> Result<Vec<PathBuf>> {
    for file in files {
        check_target(targets.root(file.dest), &file.rel)?;
    }
    for (dest, rel) in removed {
        check_removal(targets.root(*dest), rel)?;
    }
    for dest in Dest::ALL {
        let root = targets.root(dest);
        fs::create_dir_all(root).map_err(io_error("create_dir_all", root))?;
    }
    let txn = Txn::new(targets);
    if let Err(e) = txn
        .stage(files, removed)
        .and_then(|()| txn.commit(files, removed))
    {
        txn.remove();
        return Err(txn.without_staging_names(e));
    }
    let (mut moved, mut created, mut unlinked) = (Vec::new(), Vec::new(), Vec::new());
    if let Err(e) = txn
        .move_in(files, &mut moved, &mut created)
        .and_then(|()| txn.move_out(removed, &mut unlinked))
    {
        txn.roll_back(files, &moved, &created, (removed, &unlinked));
        txn.remove();
        return Err(e);
    }
    let touched: Vec<PathBuf> = files
        .iter()
        .map(|f| txn.target(f.dest, &f.rel))
        .chain(removed.iter().map(|(dest, rel)| txn.target(*dest, rel)))
        .collect();
    sync_parents(&touched);
    txn.remove();
    Ok(touched)
}

fn sync_parents(paths: &[PathBuf]) {
    let parents: BTreeSet<&Path> = paths.iter().filter_map(|p| p.parent()).collect();
    let parents: Vec<PathBuf> = parents.into_iter().map(Path::to_path_buf).collect();
    if let Err(e) = in_parallel(&parents, store::sync_dir) {
        tracing::warn!("{e}");
    }
}

/// Threads that wait on fsyncs at once. Waiting on the disk costs no CPU, so this is not
/// bounded by the cores.
const SYNC_THREADS: usize = 16;

/// Runs `sync` on every path from [`SYNC_THREADS`] threads; the first error, if any.
fn in_parallel(
    paths: &[PathBuf],
    sync: impl Fn(&Path) -> Result<(), IoError> + Sync,
) -> Result<(), IoError> {
    if paths.len() <= 1 {
        return paths.iter().try_for_each(|p| sync(p));
    }
    let chunk = paths.len().div_ceil(SYNC_THREADS);
    let sync_part = |part: &[PathBuf]| part.iter().try_for_each(|p| sync(p));
    std::thread::scope(|scope| {
        // A part whose thread cannot start (a limit of threads or memory) is synced here.
        let workers: Vec<_> = paths
            .chunks(chunk)
            .map(|part| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || sync_part(part))
                    .map_err(|_| part)
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| match worker {
                Ok(worker) => worker.join().unwrap_or_else(|_| {
                    let panicked = io::Error::other("the fsync thread panicked");
                    Err(io_error("fsync", &paths[0])(panicked))
                }),
                Err(part) => sync_part(part),
            })
            .collect::<Result<Vec<()>, IoError>>()
            .map(drop)
    })
}

/// What [`recover`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Committed landings finished.
    pub rolled_forward: usize,
    /// Uncommitted landings removed.
    pub discarded: usize,
    /// Files moved into place by the roll forwards.
    pub touched: Vec<PathBuf>,
}

/// Finishes or removes every staging folder a killed landing left (see the module doc).
pub fn recover(targets: Targets<'_>) -> Result<Recovery> {
    let mut recovery = Recovery::default();
    let mut names = BTreeSet::new();
    for dest in Dest::ALL {
        names.extend(staging_names(targets.root(dest)));
    }
    if names.is_empty() {
        return Ok(recovery);
    }
    let _lock = DownloadLock::acquire(targets.lock)?;
    for name in names {
        let txn = Txn::named(targets, &name);
        match read_commit(&txn.commit_path()) {
            Some(commit) => {
                roll_forward(&txn, &commit, &mut recovery.touched);
                recovery.rolled_forward += 1;
            }
            None => recovery.discarded += 1,
        }
        txn.remove();
    }
    Ok(recovery)
}

/// The staging folders (real folders, never links) directly in `root`.
fn staging_names(root: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| is_staging_name(name))
        .collect()
}

fn read_commit(path: &Path) -> Option<Commit> {
    let bytes = fs::read(path).ok()?;
    let commit: Commit = serde_json::from_slice(&bytes).ok()?;
    (commit.schema == COMMIT_SCHEMA).then_some(commit)
}

/// Moves every file of a committed landing that is still staged into place.
fn roll_forward(txn: &Txn<'_>, commit: &Commit, touched: &mut Vec<PathBuf>) {
    let mut done = Vec::new();
    for (dest, rel) in &commit.files {
        // The record is ours, but a record is still data read from disk: only plain relative
        // paths are followed.
        if !Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        {
            continue;
        }
        let staged = txn.staged(*dest, rel);
        if !fs::symlink_metadata(&staged).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let target = txn.target(*dest, rel);
        let root = txn.targets.root(*dest);
        let moved = rename_beneath(
            (root, &txn.staged_rel(*dest, rel)),
            (root, Path::new(rel)),
            &mut Vec::new(),
        );
        match moved {
            Ok(()) => done.push(target),
            Err(e) => {
                tracing::error!(path = %target.display(), "cannot finish an interrupted download: {e}")
            }
        }
    }
    for (dest, rel) in &commit.removed {
        if !Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        {
            continue;
        }
        let target = txn.target(*dest, rel);
        if !still_backed_up(&target, &txn.backup(*dest, rel)) {
            continue;
        }
        match unlink_beneath(txn.targets.root(*dest), Path::new(rel)) {
            Ok(()) => done.push(target),
            Err(e) => {
                tracing::error!(path = %target.display(), "cannot finish an interrupted removal: {e}")
            }
        }
    }
    sync_parents(&done);
    touched.extend(done);
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        skills: PathBuf,
        agents: PathBuf,
        lock: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().expect("temp");
            let skills = dir.path().join("skills");
            let agents = dir.path().join("agents");
            fs::create_dir_all(&skills).expect("mkdir");
            fs::create_dir_all(&agents).expect("mkdir");
            let lock = dir.path().join("data/index.redb.downloads.lock");
            Fixture {
                _dir: dir,
                skills,
                agents,
                lock,
            }
        }

        fn targets(&self) -> Targets<'_> {
            Targets {
                skills: &self.skills,
                agents: &self.agents,
                bundles_lock: &self.skills,
                lock: &self.lock,
            }
        }
    }

    fn file(dest: Dest, rel: &str, text: &str) -> FileToLand {
        FileToLand {
            dest,
            rel: rel.into(),
            bytes: text.as_bytes().to_vec(),
            executable: false,
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn lands_files_and_keeps_siblings() {
        let f = Fixture::new();
        fs::create_dir_all(f.skills.join("ns")).expect("mkdir");
        fs::write(f.skills.join("ns/keep.md"), "keep").expect("write");
        fs::write(f.skills.join("ns/a.md"), "old").expect("write");
        let files = [
            file(Dest::Skills, "ns/a.md", "new a"),
            file(Dest::Skills, "ns/deep/b.md", "b"),
            file(Dest::Agents, "captain.md", "c"),
        ];
        let touched = land(f.targets(), &files).expect("landed");
        assert_eq!(touched.len(), 3);
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/a.md")).expect("a"),
            "new a"
        );
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/deep/b.md")).expect("b"),
            "b"
        );
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/keep.md")).expect("keep"),
            "keep"
        );
        assert_eq!(
            fs::read_to_string(f.agents.join("captain.md")).expect("c"),
            "c"
        );
        assert_eq!(names(&f.skills), ["ns"], "no staging folder left");
        assert_eq!(names(&f.agents), ["captain.md"]);
    }

    #[test]
    fn a_failed_move_puts_everything_back() {
        let f = Fixture::new();
        fs::create_dir_all(f.skills.join("ns")).expect("mkdir");
        fs::write(f.skills.join("ns/a.md"), "old a").expect("write");
        let files = [
            file(Dest::Skills, "ns/a.md", "new a"),
            file(Dest::Skills, "ns/new/b.md", "b"),
            file(Dest::Skills, "ns/z.md", "z"),
        ];
        let txn = Txn::new(f.targets());
        txn.stage(&files, &[]).expect("staged");
        txn.commit(&files, &[]).expect("committed");
        // The last target turns into a folder after the checks: its rename fails.
        fs::create_dir_all(f.skills.join("ns/z.md/x")).expect("mkdir");
        let (mut moved, mut created) = (Vec::new(), Vec::new());
        assert!(txn.move_in(&files, &mut moved, &mut created).is_err());
        assert_eq!(moved, [0, 1]);
        txn.roll_back(&files, &moved, &created, (&[], &[]));
        txn.remove();
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/a.md")).expect("a"),
            "old a"
        );
        assert!(!f.skills.join("ns/new").exists(), "created folders removed");
        assert_eq!(names(&f.skills), ["ns"]);
    }

    #[test]
    fn recovery_rolls_committed_landings_forward_and_discards_the_rest() {
        let f = Fixture::new();
        fs::create_dir_all(f.skills.join("ns")).expect("mkdir");
        fs::write(f.skills.join("ns/a.md"), "old a").expect("write");
        let files = [
            file(Dest::Skills, "ns/a.md", "new a"),
            file(Dest::Skills, "ns/b.md", "new b"),
            file(Dest::Agents, "x.md", "x"),
        ];
        // Committed, killed after moving the first file.
        let committed = Txn::new(f.targets());
        committed.stage(&files, &[]).expect("staged");
        committed.commit(&files, &[]).expect("committed");
        let (mut moved, mut created) = (Vec::new(), Vec::new());
        committed
            .move_in(&files[..1], &mut moved, &mut created)
            .expect("first moved");
        // Staged but never committed.
        let other = [file(Dest::Skills, "ns/c.md", "c")];
        let uncommitted = Txn::new(f.targets());
        uncommitted.stage(&other, &[]).expect("staged");

        let recovery = recover(f.targets()).expect("recovered");
        assert_eq!(recovery.rolled_forward, 1);
        assert_eq!(recovery.discarded, 1);
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/a.md")).expect("a"),
            "new a"
        );
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/b.md")).expect("b"),
            "new b"
        );
        assert_eq!(fs::read_to_string(f.agents.join("x.md")).expect("x"), "x");
        assert!(!f.skills.join("ns/c.md").exists());
        assert_eq!(names(&f.skills), ["ns"]);
        assert_eq!(names(&f.agents), ["x.md"]);
        assert_eq!(recover(f.targets()).expect("again"), Recovery::default());
    }

    #[test]
    fn removals_land_roll_back_and_roll_forward_with_the_files() {
        let f = Fixture::new();
        fs::create_dir_all(f.skills.join("ns/old")).expect("mkdir");
        fs::write(f.skills.join("ns/old/gone.md"), "gone").expect("write");
        fs::write(f.skills.join("ns/a.md"), "old a").expect("write");
        let files = [file(Dest::Skills, "ns/a.md", "new a")];
        let removed = [(Dest::Skills, "ns/old/gone.md".to_string())];
        // Committed, killed before anything moved: the recovery writes and removes.
        let txn = Txn::new(f.targets());
        txn.stage(&files, &removed).expect("staged");
        txn.commit(&files, &removed).expect("committed");
        assert!(
            f.skills.join("ns/old/gone.md").exists(),
            "not removed before step 4"
        );
        assert_eq!(recover(f.targets()).expect("recovered").rolled_forward, 1);
        assert!(!f.skills.join("ns/old/gone.md").exists());
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/a.md")).expect("a"),
            "new a"
        );
        // A failed step 4 puts a removed file back.
        fs::write(f.skills.join("ns/old/gone.md"), "back").expect("write");
        let txn = Txn::new(f.targets());
        let files = [file(Dest::Skills, "ns/a.md", "newer a")];
        txn.stage(&files, &removed).expect("staged");
        txn.commit(&files, &removed).expect("committed");
        let (mut moved, mut created, mut unlinked) = (Vec::new(), Vec::new(), Vec::new());
        txn.move_in(&files, &mut moved, &mut created)
            .expect("moved");
        txn.move_out(&removed, &mut unlinked).expect("removed");
        txn.roll_back(&files, &moved, &created, (&removed, &unlinked));
        txn.remove();
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/old/gone.md")).expect("back"),
            "back"
        );
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/a.md")).expect("a"),
            "new a"
        );
        // Whole: both at once, nothing staged left.
        let touched = land_changes(f.targets(), || {
            Ok(Changes {
                files: files.to_vec(),
                removed: removed.to_vec(),
            })
        })
        .expect("landed");
        assert_eq!(touched.len(), 2);
        assert!(!f.skills.join("ns/old/gone.md").exists());
        assert_eq!(names(&f.skills), ["ns"]);
        // A removal of a file that is gone is refused before anything is written.
        assert!(
            land_changes(f.targets(), || Ok(Changes {
                files: Vec::new(),
                removed: removed.to_vec(),
            }))
            .is_err()
        );
    }

    #[test]
    fn a_lock_in_a_folder_of_its_own_rolls_forward_with_the_files() {
        let f = Fixture::new();
        let ledger = f.skills.parent().expect("base").join("locks");
        let targets = Targets {
            bundles_lock: &ledger,
            ..f.targets()
        };
        fs::create_dir_all(&ledger).expect("mkdir");
        fs::write(ledger.join("bundles.json"), "old lock").expect("write");
        let files = [
            file(Dest::Skills, "ns/a.md", "new a"),
            file(Dest::BundlesLock, "bundles.json", "new lock"),
        ];
        // Committed, killed before anything moved.
        let txn = Txn::new(targets);
        txn.stage(&files, &[]).expect("staged");
        txn.commit(&files, &[]).expect("committed");
        assert_eq!(
            fs::read_to_string(ledger.join("bundles.json")).expect("lock"),
            "old lock"
        );
        let recovery = recover(targets).expect("recovered");
        assert_eq!(recovery.rolled_forward, 1);
        assert_eq!(
            fs::read_to_string(ledger.join("bundles.json")).expect("lock"),
            "new lock"
        );
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/a.md")).expect("a"),
            "new a"
        );
        assert_eq!(names(&ledger), ["bundles.json"], "no staging folder left");
        // Staged but never committed: both stay old.
        let again = [
            file(Dest::Skills, "ns/a.md", "newer a"),
            file(Dest::BundlesLock, "bundles.json", "newer lock"),
        ];
        let uncommitted = Txn::new(targets);
        uncommitted.stage(&again, &[]).expect("staged");
        let recovery = recover(targets).expect("recovered");
        assert_eq!(recovery.discarded, 1);
        assert_eq!(
            fs::read_to_string(ledger.join("bundles.json")).expect("lock"),
            "new lock"
        );
        assert_eq!(names(&ledger), ["bundles.json"]);
        assert_eq!(names(&f.skills), ["ns"]);
    }

    #[test]
    fn a_rollback_cut_short_still_rolls_forward_whole() {
        let f = Fixture::new();
        fs::create_dir_all(f.skills.join("ns")).expect("mkdir");
        fs::write(f.skills.join("ns/a.md"), "old a").expect("write");
        let files = [
            file(Dest::Skills, "ns/a.md", "new a"),
            file(Dest::Skills, "ns/b.md", "new b"),
        ];
        let txn = Txn::new(f.targets());
        txn.stage(&files, &[]).expect("staged");
        txn.commit(&files, &[]).expect("committed");
        let (mut moved, mut created) = (Vec::new(), Vec::new());
        txn.move_in(&files, &mut moved, &mut created)
            .expect("moved");
        // The rollback's first step for `b`, then a crash: `b` is back in staging.
        fs::rename(
            f.skills.join("ns/b.md"),
            txn.staged(Dest::Skills, "ns/b.md"),
        )
        .expect("back");
        recover(f.targets()).expect("recovered");
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/a.md")).expect("a"),
            "new a"
        );
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/b.md")).expect("b"),
            "new b"
        );
    }

    #[test]
    fn targets_that_would_leave_the_root_or_clash_are_refused() {
        let f = Fixture::new();
        let outside = f.skills.parent().expect("parent").join("outside");
        fs::create_dir_all(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, f.skills.join("out")).expect("link");
        fs::create_dir_all(f.skills.join("ns/dir.md")).expect("mkdir");
        fs::write(f.skills.join("ns/file"), "x").expect("write");
        std::os::unix::fs::symlink(f.skills.join("ns/file"), f.skills.join("ns/link.md"))
            .expect("link");
        for (rel, why) in [
            ("out/x.md", "leading outside"),
            ("ns/dir.md", "not a regular file"),
            ("ns/file/x.md", "where the bundle needs a folder"),
            ("ns/link.md", "symbolic link"),
        ] {
            let err = land(f.targets(), &[file(Dest::Skills, rel, "x")])
                .expect_err(rel)
                .to_string();
            assert!(err.contains(why), "{rel}: {err}");
        }
        assert!(names(&outside).is_empty());
        // A link that stays inside the root is a folder like any other.
        std::os::unix::fs::symlink(f.skills.join("ns"), f.skills.join("alias")).expect("link");
        land(f.targets(), &[file(Dest::Skills, "alias/y.md", "y")]).expect("inside");
        assert_eq!(
            fs::read_to_string(f.skills.join("ns/y.md")).expect("y"),
            "y"
        );
    }

    #[test]
    fn errors_never_show_a_staging_folders_unique_name() {
        let f = Fixture::new();
        let txn = Txn::new(f.targets());
        let staging = txn.staging(Dest::Skills).display().to_string();
        let full = io::Error::other("full");
        let e = txn.without_staging_names(Error::Io(io_error(
            "write",
            &Path::new(&staging).join("files/x.md"),
        )(full)));
        let text = e.to_string();
        assert!(!text.contains(&txn.name), "{text}");
        assert!(text.contains(".iii-staging/files/x.md"), "{text}");
    }

    #[test]
    fn one_folder_for_both_roots_works() {
        let f = Fixture::new();
        let targets = Targets {
            skills: &f.skills,
            agents: &f.skills,
            bundles_lock: &f.skills,
            lock: &f.lock,
        };
        land(
            targets,
            &[
                file(Dest::Skills, "x.md/a.md", "a"),
                file(Dest::Agents, "y.md", "y"),
            ],
        )
        .expect("landed");
        assert_eq!(names(&f.skills), ["x.md", "y.md"]);
    }
}
