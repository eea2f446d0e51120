//! The one rule every family write and every download landing follows before it touches a
//! target under a root: each folder on the way from the root to the target, as symbolic links
//! resolve it, is a folder under the root's real path. A link that leads anywhere else (out of
//! the root, to nothing) blocks the way, and so does an entry that is not a folder where the
//! target needs one, and a link back to a folder already on the way (a loop: the walk never
//! enters one, so a file written through it would be served under another id, or not at all).
//! A way that stops existing part-way is open: the write makes the rest.
//!
//! What the callers add, and why they differ: the landing also refuses a target that is a link
//! or not a regular file (a bundle replaces only the files it wrote) and any entry it cannot
//! look at, each with its own message; a family write refuses only a link that leads out
//! (`D115`/`D214`), and leaves a file in the way to the atomic write, which fails with the
//! system's error as before this rule was shared.
//!
//! This check gives the clear message. The guarantee is the write's own (`beneath`): a link
//! swapped in after the check makes the write fail, never land outside.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why the way to a target is blocked.
#[derive(Debug, thiserror::Error)]
pub enum Blocked {
    /// A symbolic link on the way leads out of the root, or to nothing.
    #[error("{} is a symbolic link leading outside {}", at.display(), root.display())]
    LinkOutside { at: PathBuf, root: PathBuf },
    /// A symbolic link on the way leads back to a folder on the way to it.
    #[error("{} is a symbolic link back to a folder above it, which the scan never enters", at.display())]
    LinkLoop { at: PathBuf },
    /// An entry on the way (or a link to one under the root) is not a folder.
    #[error("{} is a file where the bundle needs a folder", at.display())]
    NotAFolder { at: PathBuf },
    /// An entry on the way cannot be looked at.
    #[error("{} cannot be read ({source})", at.display())]
    Unreadable {
        at: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Checks the folders on the way from `root` to `root/rel` (not the target itself). A root
/// that does not exist yet blocks nothing: the write creates everything below it.
pub fn check_way(root: &Path, rel: &Path) -> Result<(), Blocked> {
    let Ok(real_root) = root.canonicalize() else {
        return Ok(());
    };
    let Some(folders) = rel.parent() else {
        return Ok(());
    };
    // The folders on the way so far, as the walk tells them apart (device and inode).
    let mut on_the_way: Vec<(u64, u64)> = fs::metadata(root)
        .map(|meta| vec![(meta.dev(), meta.ino())])
        .unwrap_or_default();
    let mut at = root.to_path_buf();
    for folder in folders.components() {
        at.push(folder);
        let meta = match fs::symlink_metadata(&at) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(Blocked::Unreadable { at, source }),
        };
        let kind = meta.file_type();
        if kind.is_dir() {
            on_the_way.push((meta.dev(), meta.ino()));
            continue;
        }
        if !kind.is_symlink() {
            return Err(Blocked::NotAFolder { at });
        }
        match at.canonicalize() {
            Ok(real) if !real.starts_with(&real_root) => {}
            Ok(real) if real.is_dir() => {
                let Ok(meta) = fs::metadata(&real) else {
                    return Ok(());
                };
                let folder = (meta.dev(), meta.ino());
                if on_the_way.contains(&folder) {
                    return Err(Blocked::LinkLoop { at });
                }
                on_the_way.push(folder);
                continue;
            }
            Ok(_) => return Err(Blocked::NotAFolder { at }),
            Err(_) => {}
        }
        return Err(Blocked::LinkOutside {
            at,
            root: root.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        fs::create_dir_all(root.join("ns/deep")).expect("mkdir");
        fs::create_dir_all(&outside).expect("mkdir");
        fs::write(root.join("ns/file"), "x").expect("write");
        symlink(&outside, root.join("out")).expect("link");
        symlink(root.join("ns"), root.join("alias")).expect("link");
        symlink(root.join("ns/file"), root.join("to-file")).expect("link");
        symlink(root.join("gone"), root.join("dangling")).expect("link");
        Tree {
            _dir: dir,
            root,
            outside,
        }
    }

    fn way(tree: &Tree, rel: &str) -> Result<(), Blocked> {
        check_way(&tree.root, Path::new(rel))
    }

    #[test]
    fn folders_and_links_that_stay_inside_are_open() {
        let t = tree();
        for rel in [
            "x.md",
            "ns/x.md",
            "ns/deep/x.md",
            "new/folders/x.md",
            "alias/x.md",
            "alias/deep/x.md",
            // The target itself is the caller's business, links included.
            "out",
            "ns/file",
        ] {
            assert!(way(&t, rel).is_ok(), "{rel}");
        }
    }

    #[test]
    fn a_link_leading_out_or_nowhere_blocks_the_way() {
        let t = tree();
        for (rel, at) in [("out/x.md", "out"), ("dangling/x.md", "dangling")] {
            match way(&t, rel) {
                Err(Blocked::LinkOutside { at: blocked, .. }) => {
                    assert_eq!(blocked, t.root.join(at), "{rel}")
                }
                other => panic!("{rel}: {other:?}"),
            }
        }
        assert!(fs::read_dir(&t.outside).expect("outside").next().is_none());
    }

    #[test]
    fn a_file_where_a_folder_is_needed_blocks_the_way() {
        let t = tree();
        for (rel, at) in [("ns/file/x.md", "ns/file"), ("to-file/x.md", "to-file")] {
            match way(&t, rel) {
                Err(Blocked::NotAFolder { at: blocked }) => {
                    assert_eq!(blocked, t.root.join(at), "{rel}")
                }
                other => panic!("{rel}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_link_back_to_a_folder_on_the_way_blocks_it() {
        let t = tree();
        symlink("..", t.root.join("ns/up")).expect("link");
        symlink(&t.root, t.root.join("ns/deep/top")).expect("link");
        for (rel, at) in [
            ("ns/up/x.md", "ns/up"),
            ("ns/up/ns/x.md", "ns/up"),
            ("ns/deep/top/x.md", "ns/deep/top"),
            ("alias/deep/top/ns/x.md", "alias/deep/top"),
        ] {
            match way(&t, rel) {
                Err(Blocked::LinkLoop { at: blocked }) => {
                    assert_eq!(blocked, t.root.join(at), "{rel}")
                }
                other => panic!("{rel}: {other:?}"),
            }
        }
        // A link to a sibling folder is no loop: the walk enters it.
        symlink(t.root.join("ns/deep"), t.root.join("deep-alias")).expect("link");
        assert!(way(&t, "deep-alias/x.md").is_ok());
    }

    #[test]
    fn a_root_that_does_not_exist_yet_blocks_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(check_way(&dir.path().join("later"), Path::new("a/b.md")).is_ok());
    }
}
