//! Writing files the way a reader can never see half of: a temporary file in the target's
//! folder, fsync, rename (or link, to refuse an existing target) over the target, fsync of the
//! folder. A failed write removes its temporary file.
//!
//! Temporary files are named `<file>.<pid>-<n>.tmp`: they never end in `.md`, so no scan and
//! no watcher takes them for documents.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// The temporary sibling a write of `dest` goes through.
pub fn temp_path(dest: &Path) -> PathBuf {
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
