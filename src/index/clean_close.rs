//! The clean-close stamp: what lets a writer skip verifying every page of an index file that
//! nothing has touched since the last clean close.

use std::path::{Path, PathBuf};

/// A sidecar file, `<index>.clean`, holding the index file's size, inode and modification
/// time right after a clean close. When the file still has exactly that stat at the next open,
/// nothing has touched it since, and the page-by-page integrity check is skipped. The stamp is
/// removed at open, so a writer that crashes leaves none, and a file changed while stopped
/// (damaged, truncated, replaced) no longer matches it: both are verified in full.
pub(super) struct CleanClose;

impl CleanClose {
    pub(super) fn sidecar(index: &Path) -> PathBuf {
        crate::store::beside(index, ".clean")
    }

    pub(super) fn stat_line(index: &Path) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(index).ok()?;
        Some(format!(
            "{} {} {} {}",
            meta.len(),
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec()
        ))
    }

    /// Leaves the stamp, as a new file: the open consumed the last one, so something at the
    /// sidecar's path now is not a stamp of this writer's (`index_path` is configuration: a
    /// user's file, or a link to one, may sit at `<index>.clean`). It is left as it is, and the
    /// next open verifies the index in full.
    pub(super) fn record(index: &Path) {
        let Some(line) = CleanClose::stat_line(index) else {
            return;
        };
        let sidecar = CleanClose::sidecar(index);
        // `create_new` never follows a link, nor opens a file that exists.
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&sidecar)
            .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()));
        if let Err(e) = written {
            tracing::debug!(error = %e, path = %sidecar.display(), "could not record the index's clean close");
        }
    }

    /// Whether the file is as the last clean close left it; consumes the stamp either way.
    pub(super) fn take(index: &Path) -> bool {
        let sidecar = CleanClose::sidecar(index);
        // Read capped, and removed only when it is a stamp: `index_path` is configuration, and a
        // file of someone else's that happens to sit at `<index>.clean` is not ours to delete.
        let recorded = std::fs::File::open(&sidecar).ok().and_then(|file| {
            use std::io::Read;
            let mut text = String::new();
            file.take(128).read_to_string(&mut text).ok()?;
            Some(text)
        });
        let is_stamp = |text: &String| {
            let fields: Vec<&str> = text.split(' ').collect();
            fields.len() == 4 && fields.iter().all(|f| f.parse::<i128>().is_ok())
        };
        let recorded = recorded.filter(is_stamp);
        if recorded.is_some() {
            let _ = std::fs::remove_file(&sidecar);
        }
        recorded.is_some() && recorded == CleanClose::stat_line(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;

    #[test]
    fn only_a_clean_close_leaves_a_stamp_and_an_open_consumes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("index.redb");
        let sidecar = CleanClose::sidecar(&path);

        let index = Index::open_writer(&path).expect("open");
        assert!(!sidecar.exists(), "no stamp while the writer is open");
        drop(index);
        let stamp = std::fs::read_to_string(&sidecar).expect("a clean close leaves a stamp");
        assert_eq!(Some(stamp), CleanClose::stat_line(&path));

        // A writer that never closes (a crash) leaves no stamp behind.
        std::mem::forget(Index::open_writer(&path).expect("open again"));
        assert!(!sidecar.exists(), "the open consumed the stamp");
    }

    /// An explicit close (a worker shutting down while its threads still share the index)
    /// leaves the stamps, and the index stays closed: nothing reopens it and writes to the
    /// file after its stamp.
    #[test]
    fn an_explicit_close_leaves_the_stamps_and_the_index_stays_closed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("index.redb");
        let index = Index::open_writer(&path).expect("open");
        index.close();
        let stamp = std::fs::read_to_string(CleanClose::sidecar(&path)).expect("a stamp");
        assert_eq!(Some(stamp.clone()), CleanClose::stat_line(&path));
        let texts = crate::index::texts::path(&path);
        assert!(
            CleanClose::sidecar(&texts).exists(),
            "the texts store's stamp"
        );
        assert!(index.read().is_err(), "reads are refused once closed");
        let root = |name: &str| dir.path().join(name);
        let roots = crate::roots::Roots::new(
            root("skills"),
            root("local"),
            root("agents-skills"),
            root("agents"),
        );
        let reconcile = index.reconcile(&roots, &crate::index::Scope::All, &|_| {});
        assert!(reconcile.is_err(), "a reconcile does not reopen it");
        drop(index);
        assert_eq!(
            std::fs::read_to_string(CleanClose::sidecar(&path)).expect("the stamp"),
            stamp,
            "dropping a closed index changes nothing"
        );
        assert!(CleanClose::take(&path), "the next open trusts the file");
    }

    #[test]
    fn a_file_or_link_at_the_stamps_path_is_never_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("index.redb");
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "MY NOTES").expect("write");
        std::os::unix::fs::symlink(&notes, CleanClose::sidecar(&path)).expect("link");
        drop(Index::open_writer(&path).expect("open"));
        assert_eq!(std::fs::read_to_string(&notes).expect("read"), "MY NOTES");
        std::fs::remove_file(CleanClose::sidecar(&path)).expect("unlink");
        std::fs::write(CleanClose::sidecar(&path), "a user's file").expect("write");
        drop(Index::open_writer(&path).expect("open"));
        assert_eq!(
            std::fs::read_to_string(CleanClose::sidecar(&path)).expect("read"),
            "a user's file"
        );
    }

    #[test]
    fn a_stamp_that_no_longer_matches_the_file_is_not_trusted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("index.redb");
        drop(Index::open_writer(&path).expect("open"));
        assert!(CleanClose::sidecar(&path).exists());
        // Any write to the file while stopped changes its stat.
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.push(0);
        std::fs::write(&path, bytes).expect("append");
        assert!(!CleanClose::take(&path), "changed since the clean close");
        assert!(!CleanClose::sidecar(&path).exists());
        assert!(!CleanClose::take(&path), "no stamp, no trust");
    }
}
