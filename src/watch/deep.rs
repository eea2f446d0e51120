//! Folders watched deeper than their roots watch them, for the links that lead into them.
//!
//! A shallow root is watched only as deep as its own walk reads (`<dir>/SKILL.md`, `<id>.md`),
//! but a tree's walk follows a link into it as a tree: with `skills/foo ->
//! ../.agents/skills/x`, all of `x` is served through `foo`, so all of `x` is watched. Each such
//! folder is kept here with what each link needs of it, so that a folder made there later (or
//! the root replaced by another folder) is watched as deep, and so that what a link needed
//! goes with it.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};

#[derive(Default)]
pub struct DeepTargets {
    /// Each folder with, for each link needing it, the target that link led to when it was
    /// noted and how many levels below the folder it needs (`usize::MAX`: every level).
    by_folder: BTreeMap<PathBuf, BTreeMap<PathBuf, (PathBuf, usize)>>,
}

impl DeepTargets {
    pub fn is_empty(&self) -> bool {
        self.by_folder.is_empty()
    }

    /// How many folders are noted.
    #[cfg(test)]
    pub fn folders(&self) -> usize {
        self.by_folder.len()
    }

    pub fn clear(&mut self) {
        self.by_folder.clear();
    }

    /// Notes that the link at `link`, leading to `target`, needs `folder` watched `levels`
    /// below it.
    pub fn note(&mut self, folder: &Path, link: &Path, target: &Path, levels: usize) {
        self.by_folder
            .entry(folder.to_path_buf())
            .or_default()
            .insert(link.to_path_buf(), (target.to_path_buf(), levels));
    }

    /// Forgets what the links no longer there, or leading elsewhere now, needed (`leads` says
    /// where a link leads now, if it is one). Their watches stay until the next rewatch; no
    /// folder made there later is watched for them.
    pub fn keep_only<'a>(&mut self, leads: impl Fn(&Path) -> Option<&'a Path>) {
        self.by_folder.retain(|_, needs| {
            needs.retain(|link, (target, _)| leads(link) == Some(target.as_path()));
            !needs.is_empty()
        });
    }

    /// How many levels below `path` are to be watched for the links into a folder at or above
    /// it (`usize::MAX`: every level).
    pub fn levels_below(&self, path: &Path) -> Option<usize> {
        path.ancestors()
            .filter_map(|folder| {
                let levels = self
                    .by_folder
                    .get(folder)?
                    .values()
                    .map(|(_, l)| *l)
                    .max()?;
                if levels == usize::MAX {
                    return Some(usize::MAX);
                }
                let level = path.strip_prefix(folder).ok()?.components().count();
                levels.checked_sub(level)
            })
            .max()
    }

    /// Whether a folder noted lies below `path`: `path` is on the way to it, and watched so
    /// that the next folder on the way (or the folder itself) is heard being made or going.
    pub fn on_the_way(&self, path: &Path) -> bool {
        // Paths order by their parts: what lies below `path` comes right after it.
        self.by_folder
            .range::<Path, _>((Bound::Excluded(path), Bound::Unbounded))
            .next()
            .is_some_and(|(folder, _)| folder.starts_with(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_go_down_from_the_folder_and_every_level_stays_every_level() {
        let mut deep = DeepTargets::default();
        deep.note(Path::new("/a/x"), Path::new("/s/l"), Path::new("/a/x"), 2);
        assert_eq!(deep.levels_below(Path::new("/a/x")), Some(2));
        assert_eq!(deep.levels_below(Path::new("/a/x/b/c")), Some(0));
        assert_eq!(deep.levels_below(Path::new("/a/x/b/c/d")), None);
        assert_eq!(deep.levels_below(Path::new("/a")), None);
        deep.note(
            Path::new("/a/x"),
            Path::new("/s/m"),
            Path::new("/a/x"),
            usize::MAX,
        );
        assert_eq!(deep.levels_below(Path::new("/a/x/b/c/d")), Some(usize::MAX));
    }

    #[test]
    fn only_the_folders_above_one_noted_are_on_the_way() {
        let mut deep = DeepTargets::default();
        deep.note(
            Path::new("/a/b/x"),
            Path::new("/s/l"),
            Path::new("/a/b/x"),
            0,
        );
        assert!(deep.on_the_way(Path::new("/a")));
        assert!(deep.on_the_way(Path::new("/a/b")));
        assert!(!deep.on_the_way(Path::new("/a/b/x")));
        assert!(!deep.on_the_way(Path::new("/a/b-c")));
        assert!(!deep.on_the_way(Path::new("/a/c")));
    }

    #[test]
    fn what_a_link_gone_or_re_pointed_needed_goes() {
        let mut deep = DeepTargets::default();
        deep.note(Path::new("/a/x"), Path::new("/s/l"), Path::new("/a/x"), 3);
        deep.note(Path::new("/a/x"), Path::new("/s/m"), Path::new("/a/x"), 1);
        deep.note(
            Path::new("/a/y"),
            Path::new("/s/n"),
            Path::new("/a/y/f.md"),
            0,
        );
        // `l` leads elsewhere now, `n` is gone, `m` is as it was.
        deep.keep_only(|link| match link.to_str() {
            Some("/s/l") => Some(Path::new("/a/z")),
            Some("/s/m") => Some(Path::new("/a/x")),
            _ => None,
        });
        assert_eq!(deep.levels_below(Path::new("/a/x")), Some(1));
        assert_eq!(deep.levels_below(Path::new("/a/y")), None);
        deep.keep_only(|_| None);
        assert!(deep.is_empty());
    }
}
