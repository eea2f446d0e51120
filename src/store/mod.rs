//! Writing files the way a reader can never see half of: a temporary file in the target's
//! folder, fsync, rename (or link, to refuse an existing target) over the target, fsync of the
//! folder. A failed write removes its temporary file.
//!
//! Every step is done through folder descriptors opened from the root's descriptor without
//! following links ([`beneath`]): a write, a delete or a sweep can never land outside the root
//! it was planned in, even when a folder on its way is swapped for a link while it runs.
//!
//! Temporary files are named `<file>.<pid>-<n>.tmp`, where `<file>` is a markdown file or one of
//! the worker's dot files: they never end in `.md`, so no scan and no watcher takes them for
//! documents, and a user's file of that shape but another name is never taken for one. A
//! process killed mid-write leaves its temporary file behind; the next reconcile that walks it
//! removes those ([`sweep_found_temps`], fed by its walk), and `check` lists any that remain.

pub mod beneath;
pub mod landing;
pub mod way;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use beneath::{Dir, Refusal};

use crate::error::{Error, IoError, io_error};

/// Whether a write may replace an existing file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Replace the target if it exists: a link at its name is replaced by the file (the
    /// worker's own files: a download's marker, a landing's files).
    Replace,
    /// Replace a document (a family's update): a target that is a symbolic link to another
    /// document is replaced where it leads, and stays a link ([`through_link`]).
    Update,
    /// Fail with `AlreadyExists` if the target exists, even if another process creates it
    /// between our check and our write (create).
    CreateNew,
}

/// Why a write failed, with the step and path for the message.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} already exists")]
    Exists(PathBuf),
    /// The target is not beneath a root it may be written in: a symbolic link on its way
    /// leads elsewhere (or was swapped in while the write ran). Nothing was written.
    #[error("{} would lead outside {} through a symbolic link", path.display(), root.display())]
    Link { path: PathBuf, root: PathBuf },
    /// The target is a symbolic link to a file that is not a markdown document (a script, the
    /// bundles lock): markdown is never written through it. Nothing was written.
    #[error(
        "{} is a symbolic link to {}, which is not a markdown document, and a write goes through \
         a link only to another document; edit that file itself, or replace the link with a file",
        path.display(),
        target.display()
    )]
    LinkToNonDocument { path: PathBuf, target: PathBuf },
    /// The root the target is under is a file (or a link to one), not a folder: a setting
    /// pointed at the wrong path. Nothing was written.
    #[error(
        "{} is a file, not a folder, so nothing is served from it and nothing can be written \
         under it; point its setting at a folder, or move the file away",
        root.display()
    )]
    RootNotAFolder { root: PathBuf },
    /// A conditional write found the file it would replace other than the caller expected
    /// ([`Expected`]): `gone` when no file was there. Nothing was written.
    #[error("{} is not as expected", path.display())]
    Unexpected { path: PathBuf, gone: bool },
    #[error(transparent)]
    Io(#[from] IoError),
}

/// What a conditional [`write_atomic_expecting`] asks of the file it replaces, read just
/// before the rename through the folder the rename goes through: at most `limit` bytes of it,
/// which `holds` must accept.
pub struct Expected<'a> {
    pub limit: u64,
    pub holds: &'a dyn Fn(&[u8]) -> bool,
}

/// A store error where no family gives it a coded message (see `write::store_error`): the
/// failed step as an I/O error, a refusal as an invalid target.
impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        match e {
            StoreError::Io(e) => Error::Io(e),
            refused => Error::invalid(refused),
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// When this process named its first temporary file: a temporary file carrying our pid but
/// older than this was left by an earlier process that had the same pid (containers reuse
/// small pids across restarts).
static FIRST_TEMP_AT: OnceLock<SystemTime> = OnceLock::new();

/// The file beside `path` whose name is `path`'s with `suffix` after it (the index's own
/// siblings: its texts store, its clean-close stamp, the downloads' lock).
pub fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The name of the temporary sibling a write of the file `name` goes through.
fn temp_name(name: &OsStr) -> OsString {
    FIRST_TEMP_AT.get_or_init(SystemTime::now);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut temp = name.to_os_string();
    temp.push(format!(".{}-{n}.tmp", std::process::id()));
    temp
}

/// The temporary sibling a write of `dest` goes through.
#[cfg(test)]
fn temp_path(dest: &Path) -> PathBuf {
    dest.with_file_name(temp_name(dest.file_name().unwrap_or_default()))
}

/// Where a write of `dest` lands: the real path of the root it stays beneath, and its path
/// relative to that root with no link in it.
///
/// `dest` must lie (as written) under one of `roots`. Links inside the roots are resolved
/// here, once, into the path they lead to (a link from one allowed root into another is
/// allowed); a target whose folders lead anywhere else is [`StoreError::Link`]. This is only
/// the plan: the write then opens that path from the root's descriptor without following any
/// link ([`beneath`]), so a link swapped in meanwhile makes it fail, never escape.
pub(crate) fn locate(roots: &[&Path], dest: &Path) -> Result<(PathBuf, PathBuf), StoreError> {
    let not_beneath = || {
        let refusal = io::Error::new(io::ErrorKind::InvalidInput, "not under a configured folder");
        StoreError::Io(io_error("write", dest)(refusal))
    };
    let root = roots
        .iter()
        .filter(|root| dest.starts_with(root) && dest != **root)
        .max_by_key(|root| root.as_os_str().len())
        .ok_or_else(not_beneath)?;
    let rel = dest.strip_prefix(root).map_err(|_| not_beneath())?;
    beneath::split(rel).map_err(|_| not_beneath())?;
    let Ok(real_root) = root.canonicalize() else {
        // No root yet: nothing below it exists, the write creates it all.
        return Ok((root.to_path_buf(), rel.to_path_buf()));
    };
    if !real_root.is_dir() {
        return Err(StoreError::RootNotAFolder {
            root: root.to_path_buf(),
        });
    }
    // The nearest folder on the way that exists, and what is missing below it.
    let mut existing = dest.parent();
    let mut missing = Vec::new();
    while let Some(dir) = existing {
        if fs::symlink_metadata(dir).is_ok() || dir == *root {
            break;
        }
        missing.push(dir.file_name().unwrap_or_default());
        existing = dir.parent();
    }
    let name = dest.file_name().unwrap_or_default();
    let escape = || StoreError::Link {
        path: dest.to_path_buf(),
        root: root.to_path_buf(),
    };
    let real = existing
        .and_then(|dir| dir.canonicalize().ok())
        .ok_or_else(escape)?;
    let real_roots = std::iter::once(real_root).chain(
        roots
            .iter()
            .filter(|other| *other != root)
            .filter_map(|other| other.canonicalize().ok()),
    );
    for real_root in real_roots {
        if let Ok(inside) = real.strip_prefix(&real_root) {
            let mut rel = inside.to_path_buf();
            rel.extend(missing.iter().rev());
            rel.push(name);
            return Ok((real_root, rel));
        }
    }
    Err(escape())
}

/// The folder of a located target, opened beneath its root without following links.
fn open_parent(
    root: &Path,
    rel: &Path,
    dest: &Path,
    create: bool,
) -> Result<(Dir, OsString), StoreError> {
    let (folder, name) = beneath::split(rel).map_err(|e| refusal(e, dest, root, "write"))?;
    let root_dir = Dir::root(root, create).map_err(io_error("open", root))?;
    // The system's error is about the folder (a file where it must be, say), so it names it.
    let dir = root_dir.open_dir(folder, create).map_err(|e| match e {
        Refusal::Io(source) => {
            StoreError::Io(io_error("create_dir_all", &root.join(folder))(source))
        }
        other => refusal(other, dest, root, "create_dir_all"),
    })?;
    Ok((dir, name.to_os_string()))
}

fn refusal(e: Refusal, dest: &Path, root: &Path, step: &'static str) -> StoreError {
    match e {
        Refusal::Link(_) | Refusal::NotBeneath(_) => StoreError::Link {
            path: dest.to_path_buf(),
            root: root.to_path_buf(),
        },
        Refusal::Io(source) => StoreError::Io(io_error(step, dest)(source)),
    }
}

/// Makes a file's content durable, opening it by its path.
pub fn sync_file(path: &Path) -> Result<(), IoError> {
    fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(io_error("fsync", path))
}

/// Makes a folder's entries durable, opening it by its path (a write through a folder
/// descriptor syncs that descriptor instead: [`beneath::Dir::sync`]).
pub fn sync_dir(dir: &Path) -> Result<(), IoError> {
    fs::File::open(dir)
        .and_then(|folder| folder.sync_all())
        .map_err(io_error("fsync", dir))
}

/// Whether this process may read `path` (`access(2)`, which opens nothing: a FIFO put in its
/// place never blocks the check).
pub fn may_read(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    unsafe { libc::access(path.as_ptr(), libc::R_OK) == 0 }
}

/// The file a replace of `dest` writes: `dest` itself, or, when `dest` is a symbolic link, the
/// file it leads to, named under the root of `roots` it lies beneath. A link is served by the
/// scan when it leads inside the roots, and two ids then read one file: replacing the link by
/// a file would part them (and show in git as a type change), so the write goes where the link
/// leads and the link stays. A link leading outside `roots` (or into a read-only root) is
/// [`StoreError::Link`], one to a file of the roots that is not a markdown document (a script,
/// the bundles lock) [`StoreError::LinkToNonDocument`]: nothing is written through either. As
/// with folders ([`locate`]), the link is resolved once, here; the write itself follows no
/// link.
fn through_link(roots: &[&Path], dest: &Path) -> Result<PathBuf, StoreError> {
    if !fs::symlink_metadata(dest).is_ok_and(|meta| meta.is_symlink()) {
        return Ok(dest.to_path_buf());
    }
    // Broken, or a loop: there is no file to write (the scan lists it in `check`).
    let real = dest.canonicalize().map_err(io_error("write", dest))?;
    let beneath = roots.iter().find_map(|root| {
        let rel = real.strip_prefix(root.canonicalize().ok()?).ok()?;
        (!rel.as_os_str().is_empty()).then(|| root.join(rel))
    });
    let Some(beneath) = beneath else {
        // Outside: where it leads is not said (it may be any file of the machine).
        return Err(StoreError::Link {
            path: dest.to_path_buf(),
            root: roots
                .iter()
                .find(|root| dest.starts_with(root))
                .map_or_else(|| dest.to_path_buf(), |root| root.to_path_buf()),
        });
    };
    // Only to another document: a link to the bundles lock or a script is not one to write
    // markdown through.
    if !(real.extension().is_some_and(|e| e == "md") && real.is_file()) {
        return Err(StoreError::LinkToNonDocument {
            path: dest.to_path_buf(),
            target: beneath,
        });
    }
    Ok(beneath)
}

/// Writes `bytes` to `dest` atomically, creating its folders, beneath one of `roots` (`dest`
/// lies under one of them as written; see [`locate`]), and answers the path written, links
/// resolved: where a folder link on the way leads, and for a replace of a file that is a
/// symbolic link, the file it leads to ([`through_link`]). The scan reads the file under
/// that name as well, so the caller reconciles both. Every step goes through folder
/// descriptors reached without following links, and a failed write removes its temporary
/// file.
pub fn write_atomic(
    roots: &[&Path],
    dest: &Path,
    bytes: &[u8],
    mode: Mode,
) -> Result<PathBuf, StoreError> {
    write_atomic_expecting(roots, dest, bytes, mode, None)
}

/// [`write_atomic`], and with `expected` a conditional one: once the new text is on disk
/// beside it, the file it would replace is read through the same folder descriptor and name
/// the rename replaces, and unless it is there and `expected` accepts it, the temporary file
/// is removed and nothing is written ([`StoreError::Unexpected`]). Why there: another
/// process's write (an editor, `git pull`) does not take this worker's lock, so a check made
/// before the write's own link resolution and fsync could pass on a file replaced a moment
/// later, or on another file than the one a link then leads to. Linux has no rename that
/// compares, so the window left is the instant between this read and the rename.
pub fn write_atomic_expecting(
    roots: &[&Path],
    dest: &Path,
    bytes: &[u8],
    mode: Mode,
    expected: Option<Expected<'_>>,
) -> Result<PathBuf, StoreError> {
    let target = match mode {
        Mode::Update => through_link(roots, dest)?,
        Mode::Replace | Mode::CreateNew => dest.to_path_buf(),
    };
    let dest = target.as_path();
    let (root, rel) = locate(roots, dest)?;
    let written = named_under(roots, &root, &rel);
    let (dir, name) = open_parent(&root, &rel, dest, true)?;
    let temp = temp_name(&name);
    let temp_path = dest.with_file_name(&temp);
    // A replaced file keeps its permissions: an edit changes the text, not who may read it.
    let kept_mode = match mode {
        Mode::Replace | Mode::Update => dir.file_mode(&name).ok().flatten(),
        Mode::CreateNew => None,
    };
    let result = write_temp(&dir, &temp, &temp_path, bytes, kept_mode)
        .and_then(|()| match &expected {
            Some(expected) => check_expected(&dir, &name, dest, expected),
            None => Ok(()),
        })
        .and_then(|()| publish(&dir, &temp, &name, dest, mode));
    if result.is_err() {
        // Through the very folder it was made in, whatever became of the path meanwhile.
        let _ = dir.unlink(&temp);
    }
    result?;
    dir.sync().map_err(io_error("fsync", dest))?;
    Ok(written)
}

/// The file `name` of `dir` as [`Expected`] asks: there, a regular file (a link or a FIFO put
/// in its place is not the file expected) and accepted by `holds`.
fn check_expected(
    dir: &Dir,
    name: &OsStr,
    dest: &Path,
    expected: &Expected<'_>,
) -> Result<(), StoreError> {
    use std::io::Read;
    let unexpected = |gone| StoreError::Unexpected {
        path: dest.to_path_buf(),
        gone,
    };
    let file = match dir.open_file(name) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(unexpected(true)),
        Err(_) => return Err(unexpected(false)),
    };
    let mut now = Vec::new();
    file.take(expected.limit)
        .read_to_end(&mut now)
        .map_err(io_error("read", dest))?;
    if (expected.holds)(&now) {
        Ok(())
    } else {
        Err(unexpected(false))
    }
}

/// The path `rel` beneath the real path of a root names under the one of `roots` that leads
/// there (the name the scan knows the file by), or under the real path itself.
fn named_under(roots: &[&Path], real_root: &Path, rel: &Path) -> PathBuf {
    roots
        .iter()
        .find(|root| root.canonicalize().is_ok_and(|real| real == real_root))
        .map_or(real_root, |root| root)
        .join(rel)
}

fn write_temp(
    dir: &Dir,
    temp: &OsStr,
    path: &Path,
    bytes: &[u8],
    file_mode: Option<u32>,
) -> Result<(), StoreError> {
    let mut file = dir.create_new(temp).map_err(io_error("write", path))?;
    if let Some(bits) = file_mode {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(bits))
            .map_err(io_error("chmod", path))?;
    }
    file.write_all(bytes).map_err(io_error("write", path))?;
    Ok(file.sync_all().map_err(io_error("fsync", path))?)
}

fn publish(
    dir: &Dir,
    temp: &OsStr,
    name: &OsStr,
    dest: &Path,
    mode: Mode,
) -> Result<(), StoreError> {
    match mode {
        Mode::Replace | Mode::Update => Ok(dir
            .rename(temp, dir, name)
            .map_err(io_error("rename", dest))?),
        Mode::CreateNew => match dir.link(temp, dir, name) {
            Ok(()) => {
                // The target is in place: a temporary name that cannot be removed now is
                // housekeeping for the next sweep, not a failed create.
                if let Err(e) = dir.unlink(temp) {
                    tracing::warn!(path = %dest.display(), "cannot remove a temporary file: {e}");
                }
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(StoreError::Exists(dest.to_path_buf()))
            }
            // File systems without hard links: a rename that refuses an existing target, or
            // where even that is missing, check-then-rename (the caller's lock makes it safe
            // against this process's own writers).
            Err(_) => match dir.rename_noreplace(temp, dir, name) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    Err(StoreError::Exists(dest.to_path_buf()))
                }
                Err(_) if dir.kind(name).ok() == Some(None) => Ok(dir
                    .rename(temp, dir, name)
                    .map_err(io_error("rename", dest))?),
                Err(_) => Err(StoreError::Exists(dest.to_path_buf())),
            },
        },
    }
}

/// A temporary file older than this is stale whoever named it: a write holds its temporary
/// file for the time of one write, fsync and rename.
const STALE_AFTER: Duration = Duration::from_secs(3_600);
/// Slack for file systems whose timestamps lag the clock (coarse mtime granularity).
const CLOCK_SLACK: Duration = Duration::from_secs(2);

/// The pid in a name of the form `<file>.<pid>-<n>.tmp` (`<pid>` and `<n>` decimal digits),
/// where `<file>` is one this module writes ([`is_written_here`]), or `None` for any other
/// name: never ours to touch. A user's `sales.2024-06.tmp` has the shape but not the file.
pub fn temp_pid(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".tmp")?;
    let (file, tag) = stem.rsplit_once('.')?;
    let (pid, n) = tag.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !is_written_here(file) || !digits(pid) || !digits(n) {
        return None;
    }
    pid.parse().ok()
}

/// Whether a file of this name is one [`write_atomic`] writes: a markdown document (a skill, a
/// prompt, a profile: `.md`, the one extension served) or one of the worker's own
/// dot files (`.iii-skill-complete`). The only other file written so, a landing's commit
/// record, lies in a staging folder no walk enters. No other name is swept.
fn is_written_here(file: &str) -> bool {
    (file.len() > 3 && file.ends_with(".md")) || file.starts_with(".iii-")
}

/// Whether process `pid` exists, when the platform can say (`/proc`); `None` when it cannot.
fn pid_alive(pid: u32) -> Option<bool> {
    let proc = Path::new("/proc");
    proc.join("self")
        .exists()
        .then(|| proc.join(pid.to_string()).exists())
}

/// Whether a temporary file named by `pid` and last modified at `modified` can no longer be
/// renamed into place by any writer. Callers hold the index's writer lock, so the only writers
/// of these folders are this process's own threads.
fn is_stale(pid: u32, modified: SystemTime, now: SystemTime) -> bool {
    if now.duration_since(modified).unwrap_or_default() > STALE_AFTER {
        return true;
    }
    if pid == std::process::id() {
        // Ours only if named since this process's first write.
        return match FIRST_TEMP_AT.get() {
            None => true,
            Some(first) => modified + CLOCK_SLACK < *first,
        };
    }
    pid_alive(pid) == Some(false)
}

/// What [`sweep_found_temps`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Stale temporary files removed.
    pub removed: Vec<PathBuf>,
    /// Files with our naming pattern that were kept (their writer may still be running).
    pub kept: Vec<PathBuf>,
}

/// Removes, among files a walk found, the temporary files that killed writers left: files
/// named exactly `<file>.<pid>-<n>.tmp` whose process is gone, that this process did not
/// name, or that are older than an hour. Anything else is left alone. Errors (a file already
/// gone) are skipped: the sweep is housekeeping and never stops a reconcile. A reconcile
/// passes the temporary-looking files its walk saw (`is_temp_name`) under `roots`; each is
/// looked at and removed through its folder's descriptor, never through a link.
pub fn sweep_found_temps(roots: &[&Path], files: &[PathBuf]) -> Sweep {
    let mut sweep = Sweep::default();
    let now = SystemTime::now();
    for file in files {
        sweep_one(roots, file, now, &mut sweep);
    }
    sweep
}

/// Every download staging folder's name starts with this (see `download::landing`). A bundle
/// can never write such a name: bundle paths may not have a segment starting with a dot.
pub const STAGING_PREFIX: &str = ".iii-staging-";

/// Whether a file or folder name is one of our staging folders (the walk skips them).
pub fn is_staging_name(name: &str) -> bool {
    name.starts_with(STAGING_PREFIX)
}

/// Whether a file name has our temporary files' pattern (see [`temp_pid`]).
pub fn is_temp_name(name: &str) -> bool {
    temp_pid(name).is_some()
}

fn sweep_one(roots: &[&Path], path: &Path, now: SystemTime, sweep: &mut Sweep) {
    let Some(pid) = path
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(temp_pid)
    else {
        return;
    };
    let Ok((root, rel)) = locate(roots, path) else {
        return;
    };
    let Ok((dir, name)) = open_parent(&root, &rel, path, false) else {
        return;
    };
    // A folder, a link or a FIFO with our naming pattern is not a file of ours (`open_file`
    // opens regular files only, without following a link or blocking).
    let Ok(modified) = dir
        .open_file(&name)
        .and_then(|file| file.metadata())
        .and_then(|meta| meta.modified())
    else {
        return;
    };
    if !is_stale(pid, modified, now) {
        sweep.kept.push(path.to_path_buf());
        return;
    }
    match dir.unlink(&name) {
        Ok(()) => sweep.removed.push(path.to_path_buf()),
        // Another writer's sweep (a fresh index over the same folders) took it first.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(_) => sweep.kept.push(path.to_path_buf()),
    }
}

/// Removes a file beneath one of `roots` (see [`locate`]), then, with `cleanup`, each parent
/// folder left empty, up to but never including its root or any of `keep` (the other
/// configured roots, which may sit inside it). Every step goes through folder descriptors
/// reached without following links.
pub fn remove_beneath(
    roots: &[&Path],
    path: &Path,
    cleanup: bool,
    keep: &[&Path],
) -> Result<(), StoreError> {
    let (root, rel) = locate(roots, path)?;
    let (folder, name) = beneath::split(&rel).map_err(|e| refusal(e, path, &root, "delete"))?;
    let mut dirs = vec![Dir::root(&root, false).map_err(io_error("open", &root))?];
    let parts: Vec<&OsStr> = folder.iter().collect();
    for part in &parts {
        let next = dirs[dirs.len() - 1]
            .open_dir(Path::new(part), false)
            .map_err(|e| refusal(e, path, &root, "delete"))?;
        dirs.push(next);
    }
    let last = dirs.len() - 1;
    dirs[last].unlink(name).map_err(io_error("delete", path))?;
    let mut changed = last;
    if cleanup {
        let kept: Vec<(u64, u64)> = keep
            .iter()
            .filter_map(|k| fs::metadata(k).ok())
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            })
            .collect();
        // dirs[i] is the folder named parts[i - 1] in dirs[i - 1]; dirs[0] is the root.
        for i in (1..=last).rev() {
            if dirs[i].id().is_ok_and(|id| kept.contains(&id)) {
                break;
            }
            if dirs[i - 1].rmdir(parts[i - 1]).is_err() {
                break;
            }
            changed = i - 1;
        }
    }
    Ok(dirs[changed].sync().map_err(io_error("fsync", path))?)
}

/// Removes a file beneath one of `roots` (no folder cleanup).
pub fn remove(roots: &[&Path], path: &Path) -> Result<(), StoreError> {
    remove_beneath(roots, path, false, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_and_create_new() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("a/b/x.md");
        write_atomic(&[dir.path()], &dest, b"one", Mode::CreateNew).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        assert!(matches!(
            write_atomic(&[dir.path()], &dest, b"two", Mode::CreateNew),
            Err(StoreError::Exists(_))
        ));
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        write_atomic(&[dir.path()], &dest, b"three", Mode::Replace).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"three");
        let names: Vec<_> = fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![OsString::from("x.md")],
            "no temporary file left behind"
        );
    }

    /// A conditional write compares what its rename replaces, read just before it: the file a
    /// link leads to inside the roots, at most `limit` bytes; a file gone, or a FIFO or a link
    /// put in its place, is not the file expected; nothing is written then and no temporary
    /// file stays.
    #[test]
    fn a_conditional_write_lands_only_over_the_file_expected() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(root.join("ns")).unwrap();
        let roots = [root.as_path()];
        let holds_old = |now: &[u8]| now == b"old";
        let write = |rel: &str| {
            let expected = Expected {
                limit: 3,
                holds: &holds_old,
            };
            write_atomic_expecting(
                &roots,
                &root.join(rel),
                b"new",
                Mode::Update,
                Some(expected),
            )
        };
        let unexpected = |r: Result<PathBuf, StoreError>| match r {
            Err(StoreError::Unexpected { gone, .. }) => Some(gone),
            _ => None,
        };
        fs::write(root.join("ns/a.md"), b"old").unwrap();
        write("ns/a.md").unwrap();
        assert_eq!(fs::read(root.join("ns/a.md")).unwrap(), b"new");
        // Another writer's text stays.
        fs::write(root.join("ns/b.md"), b"theirs").unwrap();
        assert_eq!(unexpected(write("ns/b.md")), Some(false));
        assert_eq!(fs::read(root.join("ns/b.md")).unwrap(), b"theirs");
        // Through a link: the file it leads to is the one compared and written.
        fs::write(root.join("ns/c.md"), b"old").unwrap();
        std::os::unix::fs::symlink(root.join("ns/c.md"), root.join("ns/link.md")).unwrap();
        write("ns/link.md").unwrap();
        assert_eq!(fs::read(root.join("ns/c.md")).unwrap(), b"new");
        assert_eq!(unexpected(write("ns/none.md")), Some(true));
        assert!(!root.join("ns/none.md").exists());
        let fifo = std::ffi::CString::new(
            root.join("ns/fifo.md")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path and touches nothing else.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        assert!(write("ns/fifo.md").is_err());
        let names: Vec<OsString> = fs::read_dir(root.join("ns"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(names.is_empty(), "no temporary file left behind: {names:?}");
    }

    #[test]
    fn a_link_on_the_way_is_refused_and_nothing_lands_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        fs::create_dir_all(root.join("ns")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("ns"), root.join("alias")).unwrap();
        for mode in [Mode::CreateNew, Mode::Replace] {
            for dest in ["out/x.md", "out/deep/x.md"] {
                let e = write_atomic(&[&root], &root.join(dest), b"x", mode).unwrap_err();
                assert!(matches!(e, StoreError::Link { .. }), "{dest}: {e}");
            }
        }
        assert!(matches!(
            remove_beneath(&[&root], &root.join("out/x.md"), true, &[]),
            Err(StoreError::Link { .. })
        ));
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
        // A link that stays inside the root is resolved once, and the write lands where it
        // leads, through descriptors.
        write_atomic(&[&root], &root.join("alias/y.md"), b"y", Mode::CreateNew).unwrap();
        assert_eq!(fs::read(root.join("ns/y.md")).unwrap(), b"y");
        // A path outside every root is not written at all.
        assert!(write_atomic(&[&root], &outside.join("z.md"), b"z", Mode::Replace).is_err());
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn a_replace_of_a_file_link_writes_where_it_leads_and_never_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside.md");
        fs::create_dir_all(root.join("ns")).unwrap();
        fs::write(root.join("ns/target.md"), "old").unwrap();
        fs::write(&outside, "outside").unwrap();
        std::os::unix::fs::symlink("ns/target.md", root.join("alias.md")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out.md")).unwrap();
        let written = write_atomic(&[&root], &root.join("alias.md"), b"new", Mode::Update);
        assert_eq!(written.unwrap(), root.join("ns/target.md"));
        assert!(
            fs::symlink_metadata(root.join("alias.md"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(fs::read(root.join("ns/target.md")).unwrap(), b"new");
        let e = write_atomic(&[&root], &root.join("out.md"), b"x", Mode::Update).unwrap_err();
        assert!(matches!(e, StoreError::Link { .. }), "{e}");
        assert_eq!(fs::read(&outside).unwrap(), b"outside");
        assert!(
            fs::symlink_metadata(root.join("out.md"))
                .unwrap()
                .is_symlink()
        );
        // A create never goes through a link: the name is taken.
        let e = write_atomic(&[&root], &root.join("alias.md"), b"x", Mode::CreateNew);
        assert!(matches!(e, Err(StoreError::Exists(_))));
        // An update goes through to a document only: not to a lock or a script.
        fs::write(root.join("ns/lock.json"), "{}").unwrap();
        std::os::unix::fs::symlink("ns/lock.json", root.join("lock.md")).unwrap();
        let e = write_atomic(&[&root], &root.join("lock.md"), b"x", Mode::Update).unwrap_err();
        // Said as it is: inside the root, but no document.
        assert!(
            matches!(&e, StoreError::LinkToNonDocument { target, .. } if target.ends_with("ns/lock.json")),
            "{e}"
        );
        assert!(!e.to_string().contains("outside"), "{e}");
        assert_eq!(fs::read(root.join("ns/lock.json")).unwrap(), b"{}");
        // The worker's own files are replaced at their name, link or not (a download's marker).
        let written = write_atomic(&[&root], &root.join("lock.md"), b"mine", Mode::Replace);
        assert_eq!(written.unwrap(), root.join("lock.md"));
        assert!(
            !fs::symlink_metadata(root.join("lock.md"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(fs::read(root.join("ns/lock.json")).unwrap(), b"{}");
    }

    #[test]
    fn failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("x.md");
        fs::create_dir(&dest).unwrap(); // a folder where the file should go: rename fails
        assert!(write_atomic(&[dir.path()], &dest, b"x", Mode::Replace).is_err());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("x.md")]);
    }

    #[test]
    fn temp_names_are_recognised_exactly() {
        assert_eq!(temp_pid("x.md.123-4.tmp"), Some(123));
        assert_eq!(temp_pid(".iii-skill-complete.9-0.tmp"), Some(9));
        for not_ours in [
            "x.md.tmp",
            ".123-4.tmp",
            "x.md.12a-4.tmp",
            "x.md.123-.tmp",
            "x.md.-4.tmp",
            "x.md.123_4.tmp",
            "x.md.123-4.tmp.md",
            "x.md.123-4-5.tmp",
            "x.md",
            "notes.tmp",
            // The shape, but files this module never writes: a user's.
            "sales.2024-06.tmp",
            "run.sh.123-4.tmp",
            "x.mdx.123-4.tmp",
            "iii-skill-complete.9-0.tmp",
            "Notes.MD.2024-06.tmp",
        ] {
            assert_eq!(temp_pid(not_ours), None, "{not_ours}");
        }
        let dest = Path::new("/r/a/x.md");
        let name = temp_path(dest);
        let name = name.file_name().unwrap().to_str().unwrap();
        assert_eq!(temp_pid(name), Some(std::process::id()));
    }

    /// A pid that no process has: a child that ran and was reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn sweep_removes_only_stale_temporary_files_of_ours() {
        if pid_alive(1).is_none() {
            return; // no /proc: only the age rule applies, covered below
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        let agents = dir.path().join("agents");
        let touch = |path: &Path, age: Duration| {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let file = fs::File::create(path).unwrap();
            file.set_modified(SystemTime::now() - age).unwrap();
        };
        let now = Duration::ZERO;
        let hours = Duration::from_secs(2 * 3_600);
        let dead = dead_pid();
        // Ours: this process has named a temporary file before the fresh one below.
        let own = temp_path(&root.join("ns/own.md"));
        let gone = [
            root.join(format!("ns/x.md.{dead}-0.tmp")),
            agents.join(format!("a.md.{dead}-17.tmp")),
            // Alive pid, but far too old for any write still in progress.
            root.join("ns/deep/y.md.1-3.tmp"),
            // Our pid, named before this process's first write: an earlier life of the pid.
            root.join(format!("ns/z.md.{}-0.tmp", std::process::id())),
        ];
        touch(&gone[0], now);
        touch(&gone[1], now);
        touch(&gone[2], hours);
        touch(&gone[3], Duration::from_secs(600));
        let kept = [
            // A live process's fresh temporary file: it may be about to rename it.
            root.join("ns/w.md.1-5.tmp"),
            // This process's own write in progress.
            own,
        ];
        touch(&kept[0], now);
        touch(&kept[1], now);
        let foreign = [
            root.join("ns/notes.tmp"),
            root.join(format!("ns/x.md.{dead}-0.tmp.bak")),
            root.join(format!("ns/x.md.{dead}-a.tmp")),
            root.join("ns/doc.md"),
        ];
        for path in &foreign {
            touch(path, hours);
        }
        // A folder with our naming pattern is not a file of ours.
        let folder = root.join(format!("ns/d.md.{dead}-1.tmp"));
        fs::create_dir_all(&folder).unwrap();

        let found: Vec<PathBuf> = gone
            .iter()
            .chain(&kept)
            .chain(&foreign)
            .chain([&folder])
            .cloned()
            .collect();
        let sweep = sweep_found_temps(&[dir.path()], &found);
        let mut removed = sweep.removed.clone();
        removed.sort();
        let mut expected = gone.to_vec();
        expected.sort();
        assert_eq!(removed, expected);
        assert_eq!(sweep.kept.len(), kept.len());
        for path in gone {
            assert!(!path.exists(), "{} should be gone", path.display());
        }
        for path in kept.iter().chain(&foreign) {
            assert!(path.exists(), "{} should stay", path.display());
        }
        assert!(folder.is_dir());
    }

    #[test]
    fn sweep_of_files_already_gone_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join(format!("x.md.{}-0.tmp", dead_pid()));
        assert_eq!(sweep_found_temps(&[dir.path()], &[gone]), Sweep::default());
    }

    #[test]
    fn removes_empty_parents_but_never_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        write_atomic(&[&root], &root.join("ns/deep/x.md"), b"x", Mode::Replace).unwrap();
        write_atomic(&[&root], &root.join("ns/keep.md"), b"k", Mode::Replace).unwrap();
        remove_beneath(&[&root], &root.join("ns/deep/x.md"), true, &[]).unwrap();
        assert!(!root.join("ns/deep").exists());
        assert!(root.join("ns/keep.md").exists());
        remove_beneath(&[&root], &root.join("ns/keep.md"), true, &[]).unwrap();
        assert!(!root.join("ns").exists());
        assert!(root.exists(), "the root itself stays");
    }
}
