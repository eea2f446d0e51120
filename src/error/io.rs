//! A file-system step that failed, with what a person needs to act on it: what was being done,
//! on which path, and the system's error (kept as the source). The one way the crate reports
//! an I/O failure: the stores, the landing of downloads, the clone and the console's assets.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{step} {}: {source}", path.display())]
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

/// An [`IoError`] of `step` on `path`, for `map_err`.
pub fn io_error<'a>(step: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> IoError + 'a {
    move |source| IoError {
        step,
        path: path.to_path_buf(),
        source,
    }
}
