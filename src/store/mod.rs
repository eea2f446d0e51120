//! Writing files the way a reader can never see half of: a temporary file in the target's
//! folder, fsync, rename (or link, to refuse an existing target) over the target, fsync of the
//! folder. A failed write removes its temporary file.
//!
//! Temporary files are named `<file>.<pid>-<n>.tmp`: they never end in `.md`, so no scan and
//! no watcher takes them for documents. A process killed mid-write leaves its temporary file
//! behind; the next full reconcile removes those ([`sweep_found_temps`], fed by its walk).

pub mod landing;

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Whether a write may replace an existing file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Replace the target if it exists (update).
    Replace,
    /// Fail with `AlreadyExists` if the target exists, even if another process creates it
    /// between our check and our write (create).
    CreateNew,
}

/// Why a write failed, with the step and path for the message.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} already exists")]
    Exists(PathBuf),
    #[error("{step} {path}: {source}")]
    Io {
        step: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_error<'a>(step: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        step,
        path: path.to_path_buf(),
        source,
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

/// The temporary sibling a write of `dest` goes through.
pub fn temp_path(dest: &Path) -> PathBuf {
    FIRST_TEMP_AT.get_or_init(SystemTime::now);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}-{n}.tmp", std::process::id()));
    dest.with_file_name(name)
}

/// Writes `bytes` to `dest` atomically, creating its folders.
pub fn write_atomic(dest: &Path, bytes: &[u8], mode: Mode) -> Result<(), StoreError> {
    let dir = dest.parent().ok_or_else(|| StoreError::Io {
        step: "write",
        path: dest.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "no parent folder"),
    })?;
    fs::create_dir_all(dir).map_err(io_error("create_dir_all", dir))?;
    let temp = temp_path(dest);
    let result = write_temp(&temp, bytes).and_then(|()| publish(&temp, dest, mode));
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result?;
    sync_dir(dir)
}

fn write_temp(temp: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(io_error("write", temp))?;
    file.write_all(bytes).map_err(io_error("write", temp))?;
    file.sync_all().map_err(io_error("fsync", temp))
}

fn publish(temp: &Path, dest: &Path, mode: Mode) -> Result<(), StoreError> {
    match mode {
        Mode::Replace => fs::rename(temp, dest).map_err(io_error("rename", dest)),
        Mode::CreateNew => match fs::hard_link(temp, dest) {
            Ok(()) => {
                fs::remove_file(temp).map_err(io_error("remove", temp))?;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(StoreError::Exists(dest.to_path_buf()))
            }
            // File systems without hard links: the caller's lock makes check-then-rename safe
            // against this process's own writers.
            Err(_) if !dest.exists() => fs::rename(temp, dest).map_err(io_error("rename", dest)),
            Err(_) => Err(StoreError::Exists(dest.to_path_buf())),
        },
    }
}

/// Makes a rename or removal in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error("fsync", dir))
}

/// A temporary file older than this is stale whoever named it: a write holds its temporary
/// file for the time of one write, fsync and rename.
const STALE_AFTER: Duration = Duration::from_secs(3_600);
/// Slack for file systems whose timestamps lag the clock (coarse mtime granularity).
const CLOCK_SLACK: Duration = Duration::from_secs(2);

/// The pid in a name of the form `<file>.<pid>-<n>.tmp` (`<file>` non-empty, `<pid>` and `<n>`
/// decimal digits), or `None` for any other name: never ours to touch.
pub fn temp_pid(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".tmp")?;
    let (file, tag) = stem.rsplit_once('.')?;
    let (pid, n) = tag.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if file.is_empty() || !digits(pid) || !digits(n) {
        return None;
    }
    pid.parse().ok()
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
    pub kept: usize,
}

/// Removes, among files a walk found, the temporary files that killed writers left: files
/// named exactly `<file>.<pid>-<n>.tmp` whose process is gone, that this process did not
/// name, or that are older than an hour. Anything else is left alone. Errors (a file already
/// gone) are skipped: the sweep is housekeeping and never stops a reconcile. A full reconcile
/// passes the temporary-looking files its walk saw (`is_temp_name`).
pub fn sweep_found_temps(files: &[PathBuf]) -> Sweep {
    let mut sweep = Sweep::default();
    let now = SystemTime::now();
    for file in files {
        sweep_one(file, now, &mut sweep);
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

fn sweep_one(path: &Path, now: SystemTime, sweep: &mut Sweep) {
    let Some(pid) = path
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(temp_pid)
    else {
        return;
    };
    let Ok(meta) = fs::symlink_metadata(path) else {
        return;
    };
    // A folder (or a link) with our naming pattern is not a file of ours.
    if !meta.is_file() {
        return;
    }
    let Ok(modified) = meta.modified() else {
        return;
    };
    if is_stale(pid, modified, now) && fs::remove_file(path).is_ok() {
        sweep.removed.push(path.to_path_buf());
    } else {
        sweep.kept += 1;
    }
}

/// Removes a file, then each parent folder left empty, up to but never including `root` or
/// any of `keep` (the other configured roots, which may sit inside `root`).
pub fn remove_with_empty_parents(
    path: &Path,
    root: &Path,
    keep: &[&Path],
) -> Result<(), StoreError> {
    fs::remove_file(path).map_err(io_error("delete", path))?;
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == root || keep.contains(&d) || !d.starts_with(root) || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    if let Some(parent) = dir {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Removes a file (no folder cleanup).
pub fn remove(path: &Path) -> Result<(), StoreError> {
    fs::remove_file(path).map_err(io_error("delete", path))?;
    match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_and_create_new() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("a/b/x.md");
        write_atomic(&dest, b"one", Mode::CreateNew).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        assert!(matches!(
            write_atomic(&dest, b"two", Mode::CreateNew),
            Err(StoreError::Exists(_))
        ));
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        write_atomic(&dest, b"three", Mode::Replace).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"three");
        let names: Vec<_> = fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("x.md")],
            "no temporary file left behind"
        );
    }

    #[test]
    fn failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("x.md");
        fs::create_dir(&dest).unwrap(); // a folder where the file should go: rename fails
        assert!(write_atomic(&dest, b"x", Mode::Replace).is_err());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("x.md")]);
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
            let file = File::create(path).unwrap();
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
        let sweep = sweep_found_temps(&found);
        let mut removed = sweep.removed.clone();
        removed.sort();
        let mut expected = gone.to_vec();
        expected.sort();
        assert_eq!(removed, expected);
        assert_eq!(sweep.kept, kept.len());
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
        assert_eq!(sweep_found_temps(&[gone]), Sweep::default());
    }

    #[test]
    fn removes_empty_parents_but_never_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        write_atomic(&root.join("ns/deep/x.md"), b"x", Mode::Replace).unwrap();
        write_atomic(&root.join("ns/keep.md"), b"k", Mode::Replace).unwrap();
        remove_with_empty_parents(&root.join("ns/deep/x.md"), &root, &[]).unwrap();
        assert!(!root.join("ns/deep").exists());
        assert!(root.join("ns/keep.md").exists());
        remove_with_empty_parents(&root.join("ns/keep.md"), &root, &[]).unwrap();
        assert!(!root.join("ns").exists());
        assert!(root.exists(), "the root itself stays");
    }
}
