//! Symbolic links inside the watched folders, and the paths through which they reach a change.
//!
//! inotify reports a change where it happens: under a link's target, never under the link.
//! The walk follows links that stay inside the roots, so a file reached as `ali/x.md` (with
//! `ali -> tgt`) or `b.md` (with `b.md -> a.md`) is served under the link's path too, and a
//! change to `tgt/x.md` or `a.md` must reconcile those paths as well. This keeps every link
//! found in a watched folder (by the watch's own listing, and by the events that make, rename
//! or remove one) with where it leads, and turns a changed path into every in-tree path that
//! reaches it. With no link in the tree, nothing here costs anything: the map is empty.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

/// At most this many paths are added for one batch of changes: a bound on trees built to
/// multiply the paths to a folder (the walk bounds them too, see `MAX_LINKED_PATHS_TO_A_FOLDER`).
const MAX_REACHED: usize = 4096;

/// At most this many paths are looked at for one batch of changes, added or not (a path the
/// walk meets a loop on is looked at, and left out): the bound on the time it takes.
const MAX_LOOKED_AT: usize = 4 * MAX_REACHED;

/// A root as [`Links::reaching`] judges the paths in it.
pub struct Walked<'a> {
    pub path: &'a Path,
    /// How many folder levels below the root its walk looks at (`None`: a tree, walked to any
    /// depth, where a folder met twice on a path is a loop). A shallow root's walk looks at
    /// each entry by its path, so no path there loops, and none deeper is listed.
    pub depth: Option<usize>,
}

#[derive(Default)]
pub struct Links {
    /// Every link in a watched folder, with where it leads, as a watched path (a path under a
    /// root's configured folder, as events name them). `None` when it leads outside every
    /// root: the walk never follows those.
    by_link: BTreeMap<PathBuf, Option<PathBuf>>,
    /// The same, by where they lead.
    by_target: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    /// How the system fails to resolve each link, when it does (its error number), as last
    /// looked at. A link on the way can change that without changing where the link leads (a
    /// loop on its way goes, and it is merely broken now), and the link's `check` row says
    /// which. A link not looked at yet has no entry.
    failures: HashMap<PathBuf, Option<i32>>,
}

/// A link resolved: where it leads (see [`Links::insert`]), and how the system fails to
/// resolve it (`None`: it does not fail).
pub type Resolved = (Option<PathBuf>, Option<i32>);

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

    /// Where the link at `path` leads, when it is one leading inside the roots.
    pub fn target(&self, path: &Path) -> Option<&Path> {
        self.by_link.get(path)?.as_deref()
    }

    /// Notes the link at `path` (made, or found by the watch), resolved: see [`Links::insert`].
    pub fn insert_resolved(&mut self, path: PathBuf, (target, failure): Resolved) -> bool {
        self.failures.insert(path.clone(), failure);
        self.insert(path, target)
    }

    /// Forgets the link at `path`, if there is one. Returns whether there was.
    pub fn remove(&mut self, path: &Path) -> bool {
        self.failures.remove(path);
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
    /// `a -> b/x` when `b` is itself a link, or how they fail) and returns those that now lead
    /// elsewhere or fail otherwise.
    pub fn resolve_again(&mut self, resolve: &dyn Fn(&Path) -> Resolved) -> Vec<PathBuf> {
        let links: Vec<(PathBuf, Option<PathBuf>)> = self
            .by_link
            .iter()
            .map(|(path, target)| (path.clone(), target.clone()))
            .collect();
        let mut moved = Vec::new();
        for (path, old) in links {
            let (new, failure) = resolve(&path);
            let failed_before = self.failures.insert(path.clone(), failure);
            if new != old || failed_before.is_some_and(|before| before != failure) {
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
    ///
    /// A path the walk of no root holding it (`roots`) lists is not added: one it meets a loop
    /// on, or one deeper than a shallow root looks. It is a step all the same, when a link to a
    /// folder past the loop's first folder (or past the root) could take that folder's place:
    /// `a/b/up/f.md` (`a/b/up -> ..`) loops, `x/up/f.md` (`x -> a/b`) does not.
    ///
    /// `None` when more paths reach the changes than the bounds take: every root is to be
    /// walked again.
    pub fn reaching(
        &self,
        paths: &BTreeSet<PathBuf>,
        roots: &[Walked<'_>],
    ) -> Option<BTreeSet<PathBuf>> {
        let mut reached = BTreeSet::new();
        if self.by_target.is_empty() {
            return Some(reached);
        }
        let mut steps = BTreeSet::new();
        let mut looked_at = 0;
        // Each path with the length (in parts) of the longest folder above it a link in place
        // of which cannot take it where a walk lists it: 0 for a path a walk lists.
        let mut work: Vec<(PathBuf, usize)> = paths.iter().map(|p| (p.clone(), 0)).collect();
        while let Some((path, past)) = work.pop() {
            let mut found = Vec::new();
            let mut length = path.components().count();
            for above in path.ancestors() {
                if length <= past {
                    break;
                }
                length -= 1;
                if let Some(links) = self.by_target.get(above) {
                    let rest = path.strip_prefix(above).unwrap_or(Path::new(""));
                    found.extend(links.iter().map(|link| join(link, rest)));
                }
            }
            if past == 0 {
                found.extend(
                    self.by_target
                        .range(path.clone()..)
                        .skip_while(|(target, _)| **target == path)
                        .take_while(|(target, _)| target.starts_with(&path))
                        .flat_map(|(_, links)| links.iter().cloned()),
                );
            }
            for next in found {
                looked_at += 1;
                if reached.len() >= MAX_REACHED || looked_at > MAX_LOOKED_AT {
                    tracing::warn!(
                        "too many paths reach these changes through links (over \
                         {MAX_REACHED}, or {MAX_LOOKED_AT} looked at); every root is walked \
                         again instead"
                    );
                    return None;
                }
                match self.stop_short(&next, roots) {
                    None if !paths.contains(&next) && reached.insert(next.clone()) => {
                        work.push((next, 0));
                    }
                    Some(past) if steps.insert(next.clone()) => work.push((next, past)),
                    _ => {}
                }
            }
        }
        Some(reached)
    }

    /// Where the walks of the roots holding `path` stop short of it: `None` when one of them
    /// lists it, else the length of the longest folder above it that no link in place of can
    /// change that.
    fn stop_short(&self, path: &Path, roots: &[Walked<'_>]) -> Option<usize> {
        let mut past = None;
        for root in roots.iter().filter(|root| path.starts_with(root.path)) {
            let here = match root.depth {
                None => self.loop_under(root.path, path)?,
                Some(depth) => {
                    let length = root.path.components().count();
                    if path.components().count() <= length + depth + 1 {
                        return None;
                    }
                    // Too deep for it: a link in place of the root or a folder below it may
                    // take it where another root lists it, unless it passes a folder twice,
                    // which any walk that goes that deep takes for a loop.
                    let loops = self.loop_under(root.path, path).unwrap_or(0);
                    loops.max(length - 1)
                }
            };
            past = past.max(Some(here));
        }
        past
    }

    /// Whether the walk of `root` meets a loop on `path`, below it: one of its folders, links
    /// followed, is one it passed on the way there (the walk lists nothing past it; it knows
    /// folders by device and inode, this by the paths links lead to). Returns, of the folders
    /// met twice, the length of the longest path each was first met at: only a link in place
    /// of a longer one can take every loop away. A loop at `path`'s last part is none: the
    /// walk lists that link itself, as one that loops.
    fn loop_under(&self, root: &Path, path: &Path) -> Option<usize> {
        let below = path.strip_prefix(root).ok()?;
        let parts = below.components().count();
        let mut real = root.to_path_buf();
        let root_length = root.components().count();
        // Each folder passed, with the length of the path it was first passed at.
        let mut passed = HashMap::from([(real.clone(), root_length)]);
        let mut past = None;
        for (i, part) in below.components().enumerate() {
            real.push(part);
            if let Some(Some(target)) = self.by_link.get(&real) {
                real = target.clone();
            }
            match passed.get(&real) {
                Some(_) if i + 1 == parts => {}
                Some(&first) => past = past.max(Some(first)),
                None => {
                    passed.insert(real.clone(), root_length + i + 1);
                }
            }
        }
        past
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
/// broken, or leads to something not made yet) its text taken from its folder's real path as
/// the system would take it, which is the path whose making would mend it. With how the
/// system failed to resolve it, when it did.
pub fn real_target(path: &Path) -> (Option<PathBuf>, Option<i32>) {
    match std::fs::canonicalize(path) {
        Ok(real) => (Some(real), None),
        Err(e) => (text_target(path), Some(e.raw_os_error().unwrap_or(0))),
    }
}

/// Where the link at `path`, which the system cannot resolve, would lead: see [`real_target`].
fn text_target(path: &Path) -> Option<PathBuf> {
    let text = std::fs::read_link(path).ok()?;
    let folder = std::fs::canonicalize(path.parent()?).ok()?;
    let mut hops = MAX_LINKS_ON_A_PATH;
    Some(resolved_from(folder, &text, &mut hops))
}

/// As many links as the system follows on one path (Linux's limit): no more broken links'
/// texts are taken in, whatever they lead to.
const MAX_LINKS_ON_A_PATH: usize = 40;

/// `path` taken from the real folder `real` one part at a time, as the system takes it: a part
/// that exists resolved (links followed, so a `..` after a link leaves the folder the link led
/// to, not the link's), a broken link by its own text, the same way, while `hops` lasts (each
/// takes one), and a part not made yet by its name.
fn resolved_from(mut real: PathBuf, path: &Path, hops: &mut usize) -> PathBuf {
    for part in path.components() {
        match part {
            Component::Normal(name) => {
                let next = real.join(name);
                real = match std::fs::canonicalize(&next) {
                    Ok(resolved) => resolved,
                    Err(_) => match std::fs::read_link(&next) {
                        Ok(text) if *hops > 0 => {
                            *hops -= 1;
                            resolved_from(real, &text, hops)
                        }
                        _ => next,
                    },
                };
            }
            Component::ParentDir => {
                real.pop();
            }
            Component::RootDir => real = PathBuf::from("/"),
            Component::CurDir | Component::Prefix(_) => {}
        }
    }
    real
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(paths: &[&str]) -> BTreeSet<PathBuf> {
        paths.iter().map(PathBuf::from).collect()
    }

    /// A root walked to any depth.
    fn tree(path: &str) -> Walked<'_> {
        Walked {
            path: Path::new(path),
            depth: None,
        }
    }

    /// A root of skill folders (`<dir>/SKILL.md`).
    fn skill_folders(path: &str) -> Walked<'_> {
        Walked {
            path: Path::new(path),
            depth: Some(1),
        }
    }

    /// What a change at `paths` reaches in a tree of one root, `/r`.
    fn reach(links: &Links, paths: &[&str]) -> BTreeSet<PathBuf> {
        links
            .reaching(&set(paths), &[tree("/r")])
            .expect("within the bounds")
    }

    /// The default layout's roots: the local root inside the skills root, and a shallow
    /// agents skills root.
    fn default_roots() -> [Walked<'static>; 3] {
        [
            tree("/h/skills"),
            tree("/h/skills/iii"),
            skill_folders("/h/.agents/skills"),
        ]
    }

    #[test]
    fn a_change_reaches_the_links_to_it_and_to_the_folders_around_it() {
        let mut links = Links::default();
        assert!(reach(&links, &["/r/tgt/a.md"]).is_empty());
        links.insert("/r/ali".into(), Some("/r/tgt".into()));
        links.insert("/r/b.md".into(), Some("/r/tgt/a.md".into()));
        links.insert("/r/c.md".into(), Some("/r/b.md".into()));
        links.insert("/r/out".into(), None);
        // Under a linked folder, a linked file, and a link to that link.
        assert_eq!(
            reach(&links, &["/r/tgt/a.md"]),
            set(&["/r/ali/a.md", "/r/b.md", "/r/c.md"])
        );
        // A folder above a target: the links themselves.
        assert_eq!(
            reach(&links, &["/r"]),
            set(&["/r/ali", "/r/b.md", "/r/c.md"])
        );
        assert!(reach(&links, &["/r/other.md"]).is_empty());
        assert!(links.remove_under(Path::new("/r/ali")));
        assert_eq!(
            reach(&links, &["/r/tgt/a.md"]),
            set(&["/r/b.md", "/r/c.md"])
        );
    }

    #[test]
    fn a_link_back_up_is_followed_through_another_link_only() {
        let mut links = Links::default();
        links.insert("/r/a/b/up".into(), Some("/r/a".into()));
        assert!(reach(&links, &["/r/a/f.md"]).is_empty());
        links.insert("/r/x".into(), Some("/r/a/b".into()));
        // `x/up` lists `a`; `a/b/up` and `x/up/b` are loops the walk does not list.
        assert_eq!(reach(&links, &["/r/a/f.md"]), set(&["/r/x/up/f.md"]));
        assert_eq!(reach(&links, &["/r/a/b/g.md"]), set(&["/r/x/g.md"]));
        assert!(links.remove(Path::new("/r/a/b/up")));
        assert!(reach(&links, &["/r/a/f.md"]).is_empty());
        // Two links back up in a row: `y/up2/up` lists `a`.
        let mut links = Links::default();
        links.insert("/r/a/b/up".into(), Some("/r/a".into()));
        links.insert("/r/a/b/c/up2".into(), Some("/r/a/b".into()));
        links.insert("/r/y".into(), Some("/r/a/b/c".into()));
        assert_eq!(
            reach(&links, &["/r/a/index.md"]),
            set(&["/r/y/up2/up/index.md"])
        );
    }

    #[test]
    fn a_loop_is_judged_by_the_walk_of_each_root_that_holds_the_path() {
        // The local root inside the skills root: walked from `iii`, the skills root is not a
        // folder passed on the way, so `iii/up` lists it, and `iii/l/s` reaches it.
        let roots = default_roots();
        let mut links = Links::default();
        links.insert("/h/skills/iii/up".into(), Some("/h/skills".into()));
        assert_eq!(
            links.reaching(&set(&["/h/skills/foo/index.md"]), &roots),
            Some(set(&["/h/skills/iii/up/foo/index.md"]))
        );
        let mut links = Links::default();
        links.insert("/h/skills/iii/l".into(), Some("/h/.agents/skills".into()));
        links.insert("/h/.agents/skills/s".into(), Some("/h/skills".into()));
        assert_eq!(
            links.reaching(&set(&["/h/skills/foo/index.md"]), &roots),
            Some(set(&["/h/skills/iii/l/s/foo/index.md"]))
        );
        // A link in the shallow root to itself: its walk looks at `x/SKILL.md` by that path.
        let mut links = Links::default();
        links.insert(
            "/h/.agents/skills/x".into(),
            Some("/h/.agents/skills".into()),
        );
        assert_eq!(
            links.reaching(&set(&["/h/.agents/skills/SKILL.md"]), &roots),
            Some(set(&["/h/.agents/skills/x/SKILL.md"]))
        );
    }

    #[test]
    fn skill_folders_linking_each_other_reach_nothing_their_walk_does_not_list() {
        // The agents skills root looks at `<dir>/SKILL.md` only: `b/see-a/SKILL.md` is too
        // deep for it, and `a/see-b/see-a/…` passes `a` twice.
        let mut links = Links::default();
        links.insert(
            "/h/.agents/skills/a/see-b".into(),
            Some("/h/.agents/skills/b".into()),
        );
        links.insert(
            "/h/.agents/skills/b/see-a".into(),
            Some("/h/.agents/skills/a".into()),
        );
        let roots = default_roots();
        let change = set(&["/h/.agents/skills/a/SKILL.md"]);
        assert_eq!(links.reaching(&change, &roots), Some(BTreeSet::new()));
        // A link in the skills root to the second folder serves the first one's file there.
        links.insert("/h/skills/b".into(), Some("/h/.agents/skills/b".into()));
        assert_eq!(
            links.reaching(&change, &roots),
            Some(set(&["/h/skills/b/see-a/SKILL.md"]))
        );
    }

    #[test]
    fn a_tree_root_inside_a_shallow_one_walks_through_it() {
        // `/h/as/sk`'s walk passes only its own folders: through `l0` it lists the shallow
        // root `/h/as`, and through `s/l2` the skills root.
        let roots = [tree("/h/skills"), skill_folders("/h/as"), tree("/h/as/sk")];
        let mut links = Links::default();
        links.insert("/h/as/sk/l0".into(), Some("/h/as".into()));
        links.insert("/h/as/s/l2".into(), Some("/h/skills".into()));
        assert_eq!(
            links.reaching(&set(&["/h/skills/a/SKILL.md"]), &roots),
            Some(set(&["/h/as/sk/l0/s/l2/a/SKILL.md"]))
        );
    }

    #[test]
    fn many_links_back_up_beside_many_links_in_reach_each_path_once() {
        // A folder with a thousand links back up to it in its subfolders, and a thousand
        // links to it: none of the first is a way in, each of the second is one.
        let mut links = Links::default();
        for i in 0..1000 {
            links.insert(format!("/r/a/b{i}/up").into(), Some("/r/a".into()));
            links.insert(format!("/r/z{i}").into(), Some("/r/a".into()));
        }
        let reached = reach(&links, &["/r/a/index.md"]);
        let aliases: BTreeSet<PathBuf> = (0..1000)
            .map(|i| PathBuf::from(format!("/r/z{i}/index.md")))
            .collect();
        assert_eq!(reached, aliases);
    }

    #[test]
    fn links_that_multiply_paths_end() {
        let mut links = Links::default();
        for i in 0..=MAX_REACHED {
            links.insert(format!("/r/l{i}").into(), Some("/r/t".into()));
        }
        assert_eq!(links.reaching(&set(&["/r/t/f.md"]), &[tree("/r")]), None);
    }

    #[test]
    fn paths_the_walk_meets_a_loop_on_are_not_named() {
        // Two folders each holding a link to the other: `s/up/down/up/…` would not end.
        let mut links = Links::default();
        links.insert("/r/s/up".into(), Some("/r/t".into()));
        links.insert("/r/t/down".into(), Some("/r/s".into()));
        assert_eq!(reach(&links, &["/r/s/f.md"]), set(&["/r/t/down/f.md"]));
        // A link back up to the root, and one to its folder: the root is on every path, so
        // `c/up` is a loop as much as `a/up`.
        let mut links = Links::default();
        links.insert("/r/a/up".into(), Some("/r".into()));
        links.insert("/r/c".into(), Some("/r/a".into()));
        assert!(reach(&links, &["/r/f.md"]).is_empty());
        assert_eq!(reach(&links, &["/r/a/g.md"]), set(&["/r/c/g.md"]));
    }

    #[test]
    fn a_broken_link_leads_where_its_text_says() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink("sub/../gone/x.md", dir.path().join("l.md")).unwrap();
        assert_eq!(
            real_target(&dir.path().join("l.md")),
            (Some(real.join("gone/x.md")), Some(libc::ENOENT))
        );
        // Its text crosses a link, then goes up: from where the link led, as the system goes.
        std::fs::create_dir_all(dir.path().join("deep/inner")).unwrap();
        std::os::unix::fs::symlink("deep/inner", dir.path().join("hop")).unwrap();
        std::os::unix::fs::symlink("hop/../gone.md", dir.path().join("m.md")).unwrap();
        assert_eq!(
            real_target(&dir.path().join("m.md")),
            (Some(real.join("deep/gone.md")), Some(libc::ENOENT))
        );
        // A broken link on the way, taken by its own text: `hop2 -> missing/dir`.
        std::os::unix::fs::symlink("missing/dir", dir.path().join("hop2")).unwrap();
        std::os::unix::fs::symlink("hop2/../gone.md", dir.path().join("n.md")).unwrap();
        assert_eq!(
            real_target(&dir.path().join("n.md")),
            (Some(real.join("missing/gone.md")), Some(libc::ENOENT))
        );
        std::fs::write(dir.path().join("t.md"), "x").unwrap();
        std::os::unix::fs::symlink("t.md", dir.path().join("k.md")).unwrap();
        assert_eq!(
            real_target(&dir.path().join("k.md")),
            (Some(real.join("t.md")), None)
        );
    }

    /// A link that leads to the same place but fails otherwise (a loop on its way went, and it
    /// is merely broken) is resolved again as one that moved: its `check` row says why.
    #[test]
    fn a_link_that_fails_otherwise_is_resolved_again_as_moved() {
        let mut links = Links::default();
        let target = Some(PathBuf::from("/r/b"));
        links.insert_resolved("/r/hop".into(), (target.clone(), Some(libc::ELOOP)));
        let same = |_: &Path| (Some(PathBuf::from("/r/b")), Some(libc::ELOOP));
        assert!(links.resolve_again(&same).is_empty());
        let broken = |_: &Path| (Some(PathBuf::from("/r/b")), Some(libc::ENOENT));
        assert_eq!(links.resolve_again(&broken), vec![PathBuf::from("/r/hop")]);
        assert!(links.resolve_again(&broken).is_empty());
        // A link noted without how it fails is not taken as moved the first time.
        links.insert("/r/new".into(), target);
        assert!(links.resolve_again(&broken).is_empty());
    }
}
