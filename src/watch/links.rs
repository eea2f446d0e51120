//! Symbolic links inside the watched folders, and the paths through which they reach a change.
//!
//! inotify reports a change where it happens: under a link's target, never under the link.
//! The walk follows links that stay inside the roots, so a file reached as `ali/x.md` (with
//! `ali -> tgt`) or `b.md` (with `b.md -> a.md`) is served under the link's path too, and a
//! change to `tgt/x.md` or `a.md` must reconcile those paths as well. This keeps every link
//! found in a watched folder (by the watch's own listing, and by the events that make, rename
//! or remove one) with where it leads, and turns a changed path into every in-tree path that
//! reaches it. With no link in the tree, nothing here costs anything: the map is empty.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// At most this many paths are added for one batch of changes: a bound on trees built to
/// multiply the paths to a folder (the walk bounds them too, see `MAX_LINKED_PATHS_TO_A_FOLDER`).
const MAX_REACHED: usize = 4096;

#[derive(Default)]
pub struct Links {
    /// Every link in a watched folder, with where it leads, as a watched path (a path under a
    /// root's configured folder, as events name them). `None` when it leads outside every
    /// root, or back to a folder above itself: the walk never follows those.
    by_link: BTreeMap<PathBuf, Option<PathBuf>>,
    /// The same, by where they lead.
    by_target: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

impl Links {
    pub fn is_empty(&self) -> bool {
        self.by_link.is_empty()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_link.len()
    }

    /// Notes the link at `path` (made, or found by the watch), leading where `resolve` says.
    /// Returns whether anything changed.
    pub fn insert(&mut self, path: PathBuf, target: Option<PathBuf>) -> bool {
        if self.by_link.get(&path) == Some(&target) {
            return false;
        }
        self.remove(&path);
        if let Some(target) = &target {
            self.by_target
                .entry(target.clone())
                .or_default()
                .insert(path.clone());
        }
        self.by_link.insert(path, target);
        true
    }

    /// Forgets the link at `path`, if there is one. Returns whether there was.
    pub fn remove(&mut self, path: &Path) -> bool {
        let Some(target) = self.by_link.remove(path) else {
            return false;
        };
        if let Some(target) = target {
            if let Some(links) = self.by_target.get_mut(&target) {
                links.remove(path);
                if links.is_empty() {
                    self.by_target.remove(&target);
                }
            }
        }
        true
    }

    /// Forgets the links at or under `top` (a folder removed or renamed away). Returns whether
    /// there were any.
    pub fn remove_under(&mut self, top: &Path) -> bool {
        let under: Vec<PathBuf> = self
            .by_link
            .range(top.to_path_buf()..)
            .take_while(|(path, _)| path.starts_with(top))
            .map(|(path, _)| path.clone())
            .collect();
        for path in &under {
            self.remove(path);
        }
        !under.is_empty()
    }

    /// Resolves every link again (a link made or removed can change where others lead, as
    /// `a -> b/x` when `b` is itself a link) and returns those that now lead elsewhere.
    pub fn resolve_again(&mut self, resolve: &dyn Fn(&Path) -> Option<PathBuf>) -> Vec<PathBuf> {
        let links: Vec<(PathBuf, Option<PathBuf>)> = self
            .by_link
            .iter()
            .map(|(path, target)| (path.clone(), target.clone()))
            .collect();
        let mut moved = Vec::new();
        for (path, old) in links {
            let new = resolve(&path);
            if new != old {
                self.insert(path.clone(), new);
                moved.push(path);
            }
        }
        moved
    }

    /// Every in-tree path that reaches one of `paths` through links: for a change at `p`, the
    /// link `l` leading to `t` gives `l/<rest>` when `p` is `t/<rest>`, and `l` itself when `p`
    /// is a folder above `t` (renamed or removed with it). Links under a linked folder, and
    /// links to links, are followed too, since a path added is looked up again.
    pub fn reaching(&self, paths: &BTreeSet<PathBuf>) -> BTreeSet<PathBuf> {
        let mut reached = BTreeSet::new();
        if self.by_target.is_empty() {
            return reached;
        }
        let mut work: Vec<PathBuf> = paths.iter().cloned().collect();
        while let Some(path) = work.pop() {
            let mut found = Vec::new();
            for above in path.ancestors() {
                if let Some(links) = self.by_target.get(above) {
                    let rest = path.strip_prefix(above).unwrap_or(Path::new(""));
                    found.extend(links.iter().map(|link| join(link, rest)));
                }
            }
            found.extend(
                self.by_target
                    .range(path.clone()..)
                    .skip_while(|(target, _)| **target == path)
                    .take_while(|(target, _)| target.starts_with(&path))
                    .flat_map(|(_, links)| links.iter().cloned()),
            );
            for path in found {
                if reached.len() >= MAX_REACHED {
                    tracing::warn!(
                        "more than {MAX_REACHED} paths reach one change through links; the \
                         others are picked up by the safety-net reconcile"
                    );
                    return reached;
                }
                if !paths.contains(&path) && reached.insert(path.clone()) {
                    work.push(path);
                }
            }
        }
        reached
    }
}

pub fn join(link: &Path, rest: &Path) -> PathBuf {
    if rest.as_os_str().is_empty() {
        link.to_path_buf()
    } else {
        link.join(rest)
    }
}

/// Where the link at `path` leads, as a real path: resolved whole when it can be; else (it is
/// broken, or leads to something not made yet) its text taken from its folder's real path,
/// with `.` and `..` worked out, which is the path whose making would mend it.
pub fn real_target(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(path) {
        return Some(real);
    }
    let text = std::fs::read_link(path).ok()?;
    let folder = std::fs::canonicalize(path.parent()?).ok()?;
    Some(crate::config::layout::lexical(&folder.join(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(paths: &[&str]) -> BTreeSet<PathBuf> {
        paths.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_change_reaches_the_links_to_it_and_to_the_folders_around_it() {
        let mut links = Links::default();
        assert!(links.reaching(&set(&["/r/tgt/a.md"])).is_empty());
        links.insert("/r/ali".into(), Some("/r/tgt".into()));
        links.insert("/r/b.md".into(), Some("/r/tgt/a.md".into()));
        links.insert("/r/c.md".into(), Some("/r/b.md".into()));
        links.insert("/r/out".into(), None);
        // Under a linked folder, a linked file, and a link to that link.
        assert_eq!(
            links.reaching(&set(&["/r/tgt/a.md"])),
            set(&["/r/ali/a.md", "/r/b.md", "/r/c.md"])
        );
        // A folder above a target: the links themselves.
        assert_eq!(
            links.reaching(&set(&["/r"])),
            set(&["/r/ali", "/r/b.md", "/r/c.md"])
        );
        assert!(links.reaching(&set(&["/r/other.md"])).is_empty());
        assert!(links.remove_under(Path::new("/r/ali")));
        assert_eq!(
            links.reaching(&set(&["/r/tgt/a.md"])),
            set(&["/r/b.md", "/r/c.md"])
        );
    }

    #[test]
    fn links_that_multiply_paths_end() {
        let mut links = Links::default();
        // The tree never notes these (see `Tree::link_target`), but a bound holds anyway.
        links.insert("/r/up".into(), Some("/r".into()));
        links.insert("/r/a".into(), Some("/r/b".into()));
        links.insert("/r/b".into(), Some("/r/a".into()));
        let reached = links.reaching(&set(&["/r/a/f.md"]));
        assert_eq!(reached.len(), MAX_REACHED);
        assert!(reached.contains(Path::new("/r/b/f.md")), "{reached:?}");
    }

    #[test]
    fn a_broken_link_leads_where_its_text_says() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink("sub/../gone/x.md", dir.path().join("l.md")).unwrap();
        assert_eq!(
            real_target(&dir.path().join("l.md")),
            Some(real.join("gone/x.md"))
        );
        std::fs::write(dir.path().join("t.md"), "x").unwrap();
        std::os::unix::fs::symlink("t.md", dir.path().join("k.md")).unwrap();
        assert_eq!(
            real_target(&dir.path().join("k.md")),
            Some(real.join("t.md"))
        );
    }
}
