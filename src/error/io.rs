//! A file-system step that failed, with what a person needs to act on it: what was being done,
//! on which path, and the system's error (kept as the source). The one way the crate reports
//! an I/O failure: the stores, the landing of downloads, the clone and the console's assets.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{step} {}: {source}{}", path.display(), hint(source))]
pub struct IoError {
    /// What was being done (`write`, `fsync`, `rename into`, …).
    pub step: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl IoError {
    /// The same failure with its path rewritten (to hide a temporary folder's name).
    pub fn map_path(self, rewrite: impl FnOnce(PathBuf) -> PathBuf) -> IoError {
        IoError {
            path: rewrite(self.path),
            ..self
        }
    }
}

/// Whether a failure is this process running short of what the system gives it (descriptors,
/// memory): it passes, and says nothing about the file or folder it was about.
pub fn short_of_resources(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)
    )
}

/// What to do about a failure a person can act on: a permission this process lacks, a full
/// disk, too many open files.
pub(crate) fn hint(source: &io::Error) -> &'static str {
    if source.raw_os_error() == Some(libc::EMFILE) {
        return "; this process has too many files open: raise its open-file limit (ulimit -n)";
    }
    match source.kind() {
        io::ErrorKind::PermissionDenied => {
            "; the user this process runs as lacks that permission: grant it on the folder or \
             file (chmod, chown), or run the worker as the files' owner"
        }
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            "; the disk (or the quota) there is full: free space, then try again"
        }
        _ => "",
    }
}

/// An [`IoError`] of `step` on `path`, for `map_err`.
pub fn io_error<'a>(step: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> IoError + 'a {
    move |source| IoError {
        step,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_a_full_disk_or_too_many_open_files_say_what_to_do() {
        let denied = io_error("write", Path::new("/srv/skills/a.md"))(io::Error::from(
            io::ErrorKind::PermissionDenied,
        ));
        let text = denied.to_string();
        assert!(
            text.starts_with("write /srv/skills/a.md: permission denied; the user"),
            "{text}"
        );
        assert!(text.contains("chmod"), "{text}");
        let full = io_error("write", Path::new("/srv/skills/a.md"))(io::Error::from_raw_os_error(
            libc::ENOSPC,
        ));
        assert!(full.to_string().contains("; the disk"), "{full}");
        let open = io_error("open", Path::new("/srv/skills/a.md"))(io::Error::from_raw_os_error(
            libc::EMFILE,
        ));
        assert!(open.to_string().contains("ulimit -n"), "{open}");
        let other = io_error("read", Path::new("/srv/skills/a.md"))(io::Error::from(
            io::ErrorKind::InvalidData,
        ));
        assert!(!other.to_string().contains(';'), "{other}");
    }
}
