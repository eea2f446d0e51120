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

/// What to do about a failure a person can act on: a permission this process lacks.
fn hint(source: &io::Error) -> &'static str {
    match source.kind() {
        io::ErrorKind::PermissionDenied => {
            "; the user this process runs as lacks that permission: grant it on the folder or \
             file (chmod, chown), or run the worker as the files' owner"
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
    fn a_permission_denied_says_what_to_do_and_other_failures_stay_as_they_are() {
        let denied = io_error("write", Path::new("/srv/skills/a.md"))(io::Error::from(
            io::ErrorKind::PermissionDenied,
        ));
        let text = denied.to_string();
        assert!(
            text.starts_with("write /srv/skills/a.md: permission denied; the user"),
            "{text}"
        );
        assert!(text.contains("chmod"), "{text}");
        let full = io_error("write", Path::new("/srv/skills/a.md"))(io::Error::from(
            io::ErrorKind::StorageFull,
        ));
        assert!(!full.to_string().contains(';'), "{full}");
    }
}
