//! The watched folders: which folder each inotify descriptor stands for, which roots exist,
//! and what a batch of events means for the index (the paths to look at again).
//!
//! inotify watches one folder at a time, so a tree is watched folder by folder, and a folder
//! that appears is watched as its creation event is translated, before the reconcile that
//! walks it: a file made in it before its watch existed is found by that walk, one made after
//! has an event of its own. A root that does not exist yet is waited for through the nearest
//! folder above it that does.
//!
//! A change under a symbolic link's target is reported under the target only: the links in the
//! watched folders are kept (`links.rs`), and the paths reaching a change through them are
//! added to what the change asks to reconcile.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::deep::DeepTargets;
use super::inotify::{Event, Inotify, Wd};
use super::links::{self, Links, Walked};
use crate::roots::{Layout, Root, Roots};
use crate::rules::skip::is_upstream_copy;
use crate::store::{is_staging_name, temp_pid};

/// How a root is watched, for `directory::index::status`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RootState {
    /// Every folder of it is watched: reads are as fresh as a rescan.
    Watched,
    /// It does not exist (nothing is served from it); the folder above it is watched, so it
    /// is served as soon as it appears.
    Absent,
    /// A file (or anything but a folder) is where it should be: nothing is served from it, and
    /// the folder above it is watched, so a folder made in its place is served at once.
    NotAFolder,
    /// Some of it could not be watched (the reason says why): changes there are picked up by
    /// the safety net.
    Partial(String),
    /// It could not be watched at all.
    Unwatched(String),
    /// It is watched, but this process may not list it (the reason says why): nothing is
    /// served from it until it may, which is seen at once.
    Unreadable(String),
}

impl RootState {
    /// Whether the root has no folder to watch (absent, or something else in its place).
    fn is_missing(&self) -> bool {
        matches!(self, RootState::Absent | RootState::NotAFolder)
    }
}

/// One line for status per root not wholly watched or not listable, from roots already looked
/// at (each look lists them).
pub fn problems_of(roots: &[RootWatch]) -> Vec<String> {
    roots
        .iter()
        .filter_map(|root| match &root.state {
            RootState::Partial(why) | RootState::Unwatched(why) => {
                Some(format!("cannot watch {} {}: {why}", root.root, root.path))
            }
            RootState::Unreadable(why) => Some(format!(
                "cannot list {} {} ({why}): nothing is served from it until this process may \
                 read it (fix its mode, or run the worker as its owner)",
                root.root, root.path
            )),
            _ => None,
        })
        .collect()
}

/// A watched root's state as status shows it: [`RootState::Unreadable`] when this process may
/// not list it now (its mode changed under the worker, say), which its watch alone does not
/// tell. One `opendir` a root.
fn shown_state(spec: &Spec) -> RootState {
    listed_state(&spec.state, || std::fs::read_dir(&spec.path).map(drop))
}

/// [`shown_state`] of a root in `state` whose folder `list` tries to list.
fn listed_state(state: &RootState, list: impl FnOnce() -> io::Result<()>) -> RootState {
    match state {
        RootState::Watched | RootState::Partial(_) => match list() {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                RootState::Unreadable(e.to_string())
            }
            _ => state.clone(),
        },
        other => other.clone(),
    }
}

/// One root as the watch sees it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RootWatch {
    pub root: &'static str,
    pub path: String,
    pub state: RootState,
    /// Whether reads reflect every change made to it before they began. False where the
    /// watch is partial or missing, and on file systems where changes made by other machines
    /// are never reported (network mounts): there the safety net bounds how stale a read is.
    pub fresh_reads: bool,
}

/// What a batch of events asks of the index.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Paths to reconcile (files or folders, with what is under them).
    pub paths: BTreeSet<PathBuf>,
    /// Reconcile everything: the kernel's queue overflowed, so events were lost.
    pub full: bool,
    /// Sync cookies that arrived (see `fresh.rs`): they ask for a catch-up now.
    pub cookies: Vec<PathBuf>,
    /// The sync folder beside the index went, the index perhaps with it: a full reconcile
    /// builds it again (see `Index::replaced`).
    pub sync_gone: bool,
    /// Every root is to be walked again: a cookie asks it (`sync_cookie::Ask::Rescan`), or
    /// more paths reach the changes through links than `links::Links::reaching` takes.
    pub rescan: bool,
}

impl Changes {
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
            && !self.full
            && self.cookies.is_empty()
            && !self.sync_gone
            && !self.rescan
    }
}

/// A configured root and how deep its layout goes.
struct Spec {
    root: Root,
    path: PathBuf,
    /// How many folder levels below the root hold documents: `None` for no limit.
    depth: Option<usize>,
    state: RootState,
    /// The file system does not report other machines' changes.
    remote: bool,
    /// The folder watched at the root's path (device and inode, links followed): a link
    /// re-pointed, or another folder renamed to where a link leads, is another folder, whose
    /// changes the old watches never report.
    watched_as: Option<(u64, u64)>,
}

pub struct Tree {
    specs: Vec<Spec>,
    /// The folder sync cookies are made in, watched on its own.
    sync: Option<PathBuf>,
    /// The sync folder went (a `git clean` of the index's folder): made and watched again by
    /// [`Tree::restore_sync`].
    sync_lost: bool,
    /// Each watched folder's path, held once by both maps: a tree of 40,000 folders kept two
    /// copies of each (4 MiB more of the worker's resident set).
    by_wd: HashMap<Wd, Arc<Path>>,
    by_path: BTreeMap<Arc<Path>, Wd>,
    /// The symbolic links in the watched folders, and where they lead.
    links: Links,
    /// A link was noted or forgotten since the links were last resolved.
    relink: bool,
    /// A root's folder (or one above a root) was watched again under another path: it was
    /// moved into a watched folder (`mv agents skills/team`), so its watch now stands for the
    /// new path and its own move event names that one. The roots are looked at again.
    root_moved: bool,
    /// Folders a link leads into from a root walked deeper than the folder's own root watches
    /// it, with what each link needs of them (see [`Tree::note_deep_needs`]).
    deep: DeepTargets,
    /// Where the roots that are dangling links lead: their coming (a folder renamed to where a
    /// link leads) is heard through the nearest folder above them, as an absent root's is.
    link_waits: BTreeSet<PathBuf>,
    /// At most this many watches, as if it were the kernel's limit (tests of the degraded
    /// mode and of its recovery; see `WatchOptions::watch_limit`).
    limit: Option<Arc<AtomicUsize>>,
}

impl Tree {
    /// Watches every root that exists (and waits for those that do not); `refused` roots are
    /// not watched at all (tests of the degraded mode).
    #[cfg(test)]
    pub fn new(
        inotify: &Inotify,
        roots: &Roots,
        refused: &dyn Fn(Root) -> bool,
        sync: Option<PathBuf>,
    ) -> Tree {
        Tree::with_limit(inotify, roots, refused, sync, None)
    }

    /// Watches every root that exists, with at most `limit` watches when one is given (tests).
    pub fn with_limit(
        inotify: &Inotify,
        roots: &Roots,
        refused: &dyn Fn(Root) -> bool,
        sync: Option<PathBuf>,
        limit: Option<Arc<AtomicUsize>>,
    ) -> Tree {
        // Off global roots are not configured, so there is nothing to watch or report.
        let specs = [
            Root::Skills,
            Root::LocalSkills,
            Root::Agents,
            Root::AgentsSkills,
            Root::GlobalAgentsSkills,
            Root::GlobalAgents,
        ]
        .into_iter()
        .filter_map(|root| roots.get(root).map(|path| (root, path)))
        .map(|(root, path)| Spec {
            root,
            path: path.to_path_buf(),
            depth: match root.layout() {
                Layout::Tree => None,
                // `<dir>/SKILL.md`.
                Layout::SkillFolders => Some(1),
                // `<id>.md` directly in the folder.
                Layout::Profiles => Some(0),
            },
            state: if refused(root) {
                RootState::Unwatched("watch refused (injected failure)".into())
            } else {
                RootState::Absent
            },
            remote: false,
            watched_as: None,
        })
        .collect();
        let mut tree = Tree {
            specs,
            sync: None,
            sync_lost: false,
            by_wd: HashMap::new(),
            by_path: BTreeMap::new(),
            links: Links::default(),
            relink: false,
            root_moved: false,
            deep: DeepTargets::default(),
            link_waits: BTreeSet::new(),
            limit,
        };
        if let Some(sync) = sync {
            match tree.add(inotify, &sync) {
                Ok(wd) => {
                    tree.note(wd, sync.clone());
                    tree.sync = Some(sync);
                }
                Err(e) => tracing::warn!(
                    "cannot watch {} for sync cookies: {e}; other processes' reads wait for \
                     the watcher's next burst instead",
                    sync.display()
                ),
            }
        }
        tree.recheck_roots(inotify, &mut Changes::default());
        tree
    }

    /// Makes the sync folder again and watches it, when it went: the commands beside this
    /// writer wait on their cookies there. `claim` makes (and marks) the folder. Tried again
    /// at the next turn when it cannot be made yet (the index's folder is made again with
    /// the index, at the next reconcile).
    pub fn restore_sync(&mut self, inotify: &Inotify, claim: impl FnOnce() -> Option<PathBuf>) {
        if !self.sync_lost {
            return;
        }
        let Some(folder) = claim() else { return };
        match self.add(inotify, &folder) {
            Ok(wd) => {
                self.note(wd, folder.clone());
                self.sync = Some(folder);
                self.sync_lost = false;
                tracing::info!("the sync folder beside the index is back");
            }
            Err(e) => tracing::debug!("cannot watch {} yet: {e}", folder.display()),
        }
    }

    /// The sync cookies in the sync folder now: before a full reconcile, the ones it answers
    /// (an overflow of the kernel's queue may have lost their events, and they were made
    /// before the walk began, so it takes in every change made before them).
    pub fn cookies_waiting(&self) -> Vec<PathBuf> {
        let Some(sync) = &self.sync else {
            return Vec::new();
        };
        crate::sync_cookie::cookies_in(sync)
    }

    /// Each root's watch, for status.
    pub fn roots(&self) -> Vec<RootWatch> {
        self.specs
            .iter()
            .map(|spec| RootWatch {
                root: spec.root.config_key(),
                path: spec.path.display().to_string(),
                fresh_reads: !spec.remote
                    && (spec.state == RootState::Watched || spec.state.is_missing()),
                state: shown_state(spec),
            })
            .collect()
    }

    /// Problems worth a line in status, one per root that is not wholly watched or cannot be
    /// listed (the status takes them from the roots it has looked at: [`problems_of`]).
    #[cfg(test)]
    pub fn problems(&self) -> Vec<String> {
        problems_of(&self.roots())
    }

    /// The roots watched (their paths), for status.
    pub fn watched(&self) -> Vec<String> {
        self.specs
            .iter()
            .filter(|s| matches!(s.state, RootState::Watched | RootState::Partial(_)))
            .map(|s| s.path.display().to_string())
            .collect()
    }

    /// Folders watched, of all roots (and the folders above absent roots).
    pub fn folders(&self) -> usize {
        self.by_wd.len()
    }

    /// What `events` mean, with the watches brought up to date on the way: folders that
    /// appeared are watched, folders that went are forgotten, roots that appeared or went
    /// are looked at again.
    pub fn translate(&mut self, inotify: &Inotify, events: &[Event]) -> Changes {
        let mut changes = Changes::default();
        let mut recheck = false;
        for event in events {
            if event.is(libc::IN_Q_OVERFLOW) {
                changes.full = true;
                continue;
            }
            let Some(folder) = self.by_wd.get(&event.wd).cloned() else {
                continue;
            };
            if event.is(libc::IN_IGNORED) {
                self.forget_wd(event.wd);
                if self.sync.as_deref() == Some(&*folder) {
                    // The folder beside the index went, the index perhaps with it (a `git
                    // clean`): a reconcile now builds it again before a command builds its own.
                    self.sync_lost = true;
                    changes.sync_gone = true;
                }
                recheck |= self.holds_a_root(&folder);
                continue;
            }
            if event.is(libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) {
                // Its parent reports the entry; only a root (or a folder above one) going
                // changes what is watched beyond that.
                recheck |= self.holds_a_root(&folder);
                continue;
            }
            let Some(name) = event.name() else {
                if event.is(libc::IN_ATTRIB) {
                    changes.paths.extend(self.roots_in(&folder));
                    self.relink = true;
                }
                continue;
            };
            let path = folder.join(name);
            let is_dir = event.is(libc::IN_ISDIR);
            // A folder's mode decides whether the links through it resolve (one resolved
            // while it could not be entered leads nowhere known): they are resolved again.
            self.relink |= is_dir && event.is(libc::IN_ATTRIB);
            if self.sync.as_deref() == Some(&*folder) {
                if event.is(libc::IN_CREATE | libc::IN_MOVED_TO)
                    && !is_dir
                    && crate::sync_cookie::is_cookie(name)
                {
                    changes.rescan |= crate::sync_cookie::asks_rescan(name);
                    changes.cookies.push(path);
                }
                continue;
            }
            // A link made or gone is looked at whatever its name: one to a folder is walked
            // as a folder (its files' rows, served or listed by `check`, come and go with it),
            // and the kernel reports it as a file.
            let mut is_link = false;
            if is_dir && event.is(libc::IN_MOVED_FROM | libc::IN_DELETE) {
                self.unwatch_under(inotify, &path);
            } else if event.is(libc::IN_MOVED_FROM | libc::IN_DELETE) {
                is_link = self.links.remove(&path);
                self.relink |= is_link;
            }
            // A folder not watched whose mode changed is watched as a new one is: one that
            // could not be watched (nor listed) when it came has its folders and links taken in
            // now. One already watched is not walked again: `touch` and `rsync -a` change the
            // attributes of every folder they reach.
            let opened = event.is(libc::IN_ATTRIB) && !self.by_path.contains_key(path.as_path());
            if is_dir && (event.is(libc::IN_CREATE | libc::IN_MOVED_TO) || opened) {
                // It may have replaced a link (renamed over it).
                self.relink |= self.links.remove(&path);
                if let Some(depth) = self.depth_to_watch(&path) {
                    if let Err(why) = self.watch_tree(inotify, &path, depth) {
                        self.partial_at(&path, why.to_string());
                    }
                }
            } else if event.is(libc::IN_CREATE | libc::IN_MOVED_TO)
                && self.in_a_root(&path)
                && !self.is_a_root(&path)
            {
                // A link (even to a folder) is not reported as a folder: one `lstat` tells. A
                // file renamed over a link replaces it.
                is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink());
                if is_link {
                    let deeper = self.note_link(path.clone());
                    self.watch_deeper(inotify, deeper);
                } else {
                    self.relink |= self.links.remove(&path);
                }
            }
            recheck |=
                self.holds_a_root(&path) || self.link_waits.iter().any(|w| w.starts_with(&path));
            if self.in_a_root(&path) && relevant(&path, is_dir || is_link) {
                changes.paths.insert(path);
            }
        }
        if recheck || std::mem::take(&mut self.root_moved) {
            self.recheck_roots(inotify, &mut changes);
        }
        self.follow_links(inotify, &mut changes);
        changes
    }

    /// Adds to `changes` the paths that reach them through links, and the links that lead
    /// elsewhere since a link was made or removed (`a -> b/x` when `b` is a link that changed).
    /// Nothing to do, and nothing done, in a tree without links.
    fn follow_links(&mut self, inotify: &Inotify, changes: &mut Changes) {
        if std::mem::take(&mut self.relink) {
            let targets = self.link_targets();
            let moved = self.links.resolve_again(&|link| targets.resolve(link));
            let links = &self.links;
            self.deep.keep_only(|link| links.target(link));
            for link in &moved {
                let Some(target) = self.links.target(link).map(Path::to_path_buf) else {
                    continue;
                };
                let deeper = self.note_deep_needs(link, &target);
                self.watch_deeper(inotify, deeper);
            }
            changes.paths.extend(moved);
        }
        if !self.links.is_empty() {
            let roots: Vec<Walked<'_>> = self
                .specs
                .iter()
                .map(|spec| Walked {
                    path: &spec.path,
                    depth: spec.depth,
                })
                .collect();
            match self.links.reaching(&changes.paths, &roots) {
                Some(reached) => changes.paths.extend(reached),
                None => changes.rescan = true,
            }
        }
    }

    /// Notes the link at `path` with where it leads. Returns the folders to watch deeper than
    /// they are for it (see [`Tree::note_deep_needs`]), each with how many levels below it.
    fn note_link(&mut self, path: PathBuf) -> Vec<(PathBuf, usize)> {
        let resolved = self.link_targets().resolve(&path);
        let deeper = match &resolved.0 {
            Some(target) => self.note_deep_needs(&path, target),
            None => Vec::new(),
        };
        self.relink |= self.links.insert_resolved(path, resolved);
        deeper
    }

    /// The watches the link at `link`, leading to `target`, needs beyond those its target's
    /// root has: the walk lists a folder it leads to as deep as the link's own root goes
    /// (`skills/foo -> ../.agents/skills/x` lists all of `x`, whose root reads only
    /// `x/SKILL.md`), and reads a file it leads to, which its folder's events report. A target
    /// not there yet may come as either. Each such folder is noted for the link, so that it is
    /// watched as deep once made (or made again), and so are the folders on the way to it, up
    /// to one its root watches: a folder's making, rename or removal is reported only in the
    /// folder above it. Returns the folders to watch, each with how many levels below it.
    fn note_deep_needs(&mut self, link: &Path, target: &Path) -> Vec<(PathBuf, usize)> {
        let Some(folder) = target.parent() else {
            return Vec::new();
        };
        // How deep the link's own root walks it as a folder, and whether it reads it as a file,
        // where that is more than the target's root watches (never, for a link within a tree).
        // Noted even where another link's need covers it: that link may go first.
        let beyond = |levels: Option<usize>, wanted: &Path| {
            levels.filter(|levels| self.depth_in_roots(wanted).is_none_or(|had| had < *levels))
        };
        let read_as_file = link.parent().and_then(|p| self.depth_left(p)).map(|_| 0);
        let as_folder = beyond(self.depth_left(link), target);
        let as_file = beyond(read_as_file, folder);
        if as_folder.is_none() && as_file.is_none() {
            return Vec::new();
        }
        let wanted = match std::fs::metadata(target) {
            Ok(meta) if meta.is_dir() => [(target, as_folder), (folder, None)],
            Ok(_) => [(target, None), (folder, as_file)],
            Err(_) => [(target, as_folder), (folder, as_file)],
        };
        let mut watch = Vec::new();
        for (wanted, levels) in wanted {
            let Some(levels) = levels else { continue };
            let short = self.watched_short_of(wanted, levels);
            self.deep.note(wanted, link, target, levels);
            if !short {
                continue;
            }
            // The highest folder there on the way down to `wanted` that its root does not
            // watch: watched from there, the walk goes down the way (see `watch_tree`).
            let top = wanted
                .ancestors()
                .take_while(|above| {
                    self.in_a_root(above) && (*above == wanted || self.depth_left(above).is_none())
                })
                .filter(|above| above.is_dir())
                .last();
            if let Some(top) = top {
                let depth = self.depth_to_watch(top).unwrap_or(0);
                watch.push((top.to_path_buf(), depth));
            }
        }
        watch
    }

    /// Whether the folder `wanted` is watched less than `levels` below it (or not at all).
    fn watched_short_of(&self, wanted: &Path, levels: usize) -> bool {
        self.depth_left(wanted).is_none_or(|had| had < levels)
    }

    /// Watches each of `folders` as many levels down as it comes with (see
    /// [`Tree::note_deep_needs`]).
    fn watch_deeper(&mut self, inotify: &Inotify, folders: Vec<(PathBuf, usize)>) {
        for (folder, depth) in folders {
            if let Err(why) = self.watch_tree(inotify, &folder, depth) {
                self.partial_at(&folder, why.to_string());
            }
        }
    }

    /// What resolves links into watched paths, for the roots as they are now.
    fn link_targets(&self) -> LinkTargets {
        LinkTargets {
            roots: self
                .specs
                .iter()
                .filter_map(|spec| {
                    Some((std::fs::canonicalize(&spec.path).ok()?, spec.path.clone()))
                })
                .collect(),
        }
    }

    /// Adds watches for every folder of every watched root again (those already watched keep
    /// theirs): after an overflow, events that would have added some were lost. A root only
    /// partly watched (the kernel's watch limit was reached) is tried again whole, so once the
    /// limit is raised (or folders went) it is watched again, and its reads fresh. The links
    /// are listed again on the way (those made or removed among the lost events too).
    pub fn rewatch(&mut self, inotify: &Inotify) {
        let mut changes = Changes::default();
        self.recheck_roots(inotify, &mut changes);
        self.links = Links::default();
        self.deep.clear();
        for i in 0..self.specs.len() {
            if matches!(
                self.specs[i].state,
                RootState::Watched | RootState::Partial(_)
            ) {
                let state = self.watch_root(inotify, i);
                if matches!(self.specs[i].state, RootState::Partial(_))
                    && state == RootState::Watched
                {
                    tracing::info!(
                        "every folder of {} {} is watched again: its reads are fresh",
                        self.specs[i].root.config_key(),
                        self.specs[i].path.display()
                    );
                }
                self.specs[i].state = state;
            }
        }
        self.relink = false;
    }

    /// Looks at every root again: a root that appeared is watched (and reconciled whole), one
    /// that went is forgotten (and reconciled, which drops its rows), and an absent one is
    /// waited for through the nearest folder above it.
    fn recheck_roots(&mut self, inotify: &Inotify, changes: &mut Changes) {
        self.link_waits.clear();
        for i in 0..self.specs.len() {
            let spec = &self.specs[i];
            if matches!(spec.state, RootState::Unwatched(_)) {
                continue;
            }
            let path = spec.path.clone();
            let was_there = !spec.state.is_missing();
            if !path.is_dir() {
                if was_there {
                    self.unwatch_under(inotify, &path);
                    changes.paths.insert(path.clone());
                    // The links into it lead out of the roots now.
                    self.relink = true;
                }
                self.specs[i].state = match path.exists() {
                    true => RootState::NotAFolder,
                    false => RootState::Absent,
                };
                let mut made = self.wait_for(inotify, &path);
                // A link whose target went (renamed away, to be replaced): its target's coming
                // is reported where the target is, not where the link is.
                if let Some(target) = link_target(&path) {
                    made |= self.wait_for(inotify, &target) && path.is_dir();
                    self.link_waits.insert(target);
                }
                if !made {
                    continue;
                }
                // It was made while the watch above it was being set up: watch it now.
            }
            if self.specs[i].state.is_missing() {
                // The links into it lead there again (while it was missing, out of the roots).
                self.relink = true;
                let state = self.watch_root(inotify, i);
                self.specs[i].remote = remote_file_system(&path);
                self.specs[i].state = state;
                changes.paths.insert(path);
            } else if !self.by_path.contains_key(path.as_path())
                || self.specs[i].watched_as != folder_identity(&path)
            {
                // Replaced by another folder under the same name, or a link to it that leads
                // elsewhere now: the old folder's watches go, and the new one is watched.
                self.unwatch_under(inotify, &path);
                self.relink = true;
                self.specs[i].state = self.watch_root(inotify, i);
                changes.paths.insert(path);
            }
        }
    }

    /// Watches root `i` whole, noting which folder that is, and, when its path is a link, the
    /// folder the link is in: re-pointing it (`ln -sfn`, a rename over it) is reported only
    /// there.
    fn watch_root(&mut self, inotify: &Inotify, i: usize) -> RootState {
        let path = self.specs[i].path.clone();
        let depth = self.specs[i].depth.unwrap_or(usize::MAX);
        self.specs[i].watched_as = folder_identity(&path);
        let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink());
        if let Some(parent) = path.parent().filter(|_| is_link) {
            self.watch_folder(inotify, parent);
        }
        match self.watch_tree(inotify, &path, depth) {
            Ok(()) => RootState::Watched,
            Err(why) => RootState::Partial(why.to_string()),
        }
    }

    /// Watches one folder above the roots (where a root or a link to one comes or goes),
    /// unless it already is.
    fn watch_folder(&mut self, inotify: &Inotify, folder: &Path) {
        if !self.by_path.contains_key(folder) {
            if let Ok(wd) = self.add(inotify, folder) {
                self.note(wd, folder.to_path_buf());
            }
        }
    }

    /// Watches the nearest existing folder above `path`, to hear of the next folder on the way
    /// to it being made. A folder on the way made between finding that folder and watching it
    /// has no event of its own, so it looks again after each watch it adds. Returns whether
    /// `path` itself exists by then.
    fn wait_for(&mut self, inotify: &Inotify, path: &Path) -> bool {
        let nearest = || path.ancestors().skip(1).find(|a| a.is_dir());
        let mut above = nearest();
        while let Some(folder) = above {
            self.watch_folder(inotify, folder);
            if path.is_dir() {
                return true;
            }
            let now = nearest();
            if now == Some(folder) {
                return false;
            }
            above = now;
        }
        false
    }

    /// Watches `top` and the folders under it, `depth` levels down, noting the links in them
    /// (the deepest level is listed for its links too: `<dir>/SKILL.md` or `<id>.md` may be
    /// one). Folder links are not followed: their targets inside the roots are watched where
    /// they are, and deeper when the link's root walks deeper than theirs (see
    /// [`Tree::note_deep_needs`]). Staging folders are not entered. Stops at the first watch
    /// the kernel refuses for lack of room, with why.
    fn watch_tree(
        &mut self,
        inotify: &Inotify,
        top: &Path,
        depth: usize,
    ) -> Result<(), WatchLimit> {
        // Each folder with how many levels below it are still to be watched.
        let mut stack = vec![(top.to_path_buf(), depth)];
        while let Some((folder, levels)) = stack.pop() {
            match self.add(inotify, &folder) {
                Ok(wd) => self.note(wd, folder.clone()),
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    return Err(WatchLimit { at: folder });
                }
                // Gone already, not a folder, or unreadable: nothing to watch there.
                Err(_) => continue,
            }
            let Ok(entries) = std::fs::read_dir(&folder) else {
                continue;
            };
            for entry in entries.flatten() {
                // The kind comes with the listing: no `stat` for a tree without links.
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let name = entry.file_name();
                if kind.is_symlink() {
                    stack.extend(self.note_link(entry.path()));
                } else if kind.is_dir() && !name.to_str().is_some_and(is_staging_name) {
                    let path = entry.path();
                    // Every level of a tree; else a level less, or what links into or below
                    // it need (nothing to look up without such links).
                    let below = if levels == usize::MAX {
                        Some(levels)
                    } else if self.deep.is_empty() {
                        levels.checked_sub(1)
                    } else {
                        levels.checked_sub(1).max(self.depth_to_watch(&path))
                    };
                    if let Some(levels) = below {
                        stack.push((path, levels));
                    }
                }
            }
        }
        Ok(())
    }

    /// Watches one folder, unless a test's limit on watches is reached (then refused as the
    /// kernel refuses past `fs.inotify.max_user_watches`).
    fn add(&self, inotify: &Inotify, folder: &Path) -> io::Result<Wd> {
        if let Some(limit) = &self.limit {
            if !self.by_path.contains_key(folder)
                && self.by_wd.len() >= limit.load(Ordering::SeqCst)
            {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
        }
        inotify.add(folder)
    }

    /// Forgets the watches of `top` and every folder under it (it was removed or renamed; a
    /// rename inside the tree is watched again under its new name by its own event).
    fn unwatch_under(&mut self, inotify: &Inotify, top: &Path) {
        let under: Vec<(Arc<Path>, Wd)> = self
            .by_path
            .range::<Path, _>((Bound::Included(top), Bound::Unbounded))
            .take_while(|(path, _)| path.starts_with(top))
            .map(|(path, wd)| (path.clone(), *wd))
            .collect();
        for (path, wd) in under {
            inotify.remove(wd);
            self.by_path.remove(&path);
            self.by_wd.remove(&wd);
        }
        self.relink |= self.links.remove_under(top);
    }

    /// The roots holding `path` are no longer wholly watched.
    fn partial_at(&mut self, path: &Path, why: String) {
        for spec in &mut self.specs {
            if path.starts_with(&spec.path) && spec.state == RootState::Watched {
                tracing::warn!(
                    "{why}: changes in {} are picked up by the safety-net reconcile",
                    spec.root.config_key()
                );
                spec.state = RootState::Partial(why.clone());
            }
        }
    }

    fn note(&mut self, wd: Wd, path: PathBuf) {
        // A folder watched again (replaced under its name) keeps the copy `by_path` holds,
        // which its insert below would not replace.
        let path: Arc<Path> = match self.by_path.get_key_value(path.as_path()) {
            Some((held, _)) => held.clone(),
            None => path.into(),
        };
        if let Some(old) = self.by_wd.insert(wd, path.clone()) {
            if old != path {
                self.root_moved |= self.holds_a_root(&old);
                self.by_path.remove(&old);
            }
        }
        self.by_path.insert(path, wd);
    }

    fn forget_wd(&mut self, wd: Wd) {
        if let Some(path) = self.by_wd.remove(&wd) {
            if self.by_path.get(&path) == Some(&wd) {
                self.by_path.remove(&path);
            }
        }
    }

    /// Whether `path` is a root or a folder above one (so its coming or going changes a root).
    fn holds_a_root(&self, path: &Path) -> bool {
        self.specs
            .iter()
            .any(|s| s.path.starts_with(path) && !matches!(s.state, RootState::Unwatched(_)))
    }

    /// The watched roots at or under `folder`, for a change of `folder`'s own mode (`chmod`)
    /// or owner: it decides whether this process may list them, so what they serve, and the
    /// kernel reports it only to the folder's own watch, nameless (a root's parent is
    /// watched only while something waits there). A folder inside a root has none: its
    /// parent's watch reports it by name.
    fn roots_in(&self, folder: &Path) -> Vec<PathBuf> {
        self.specs
            .iter()
            .filter(|s| s.path.starts_with(folder) && !matches!(s.state, RootState::Unwatched(_)))
            .map(|s| s.path.clone())
            .collect()
    }

    /// Whether `path` is a root's own path (a link there is the root, looked at again by
    /// [`Tree::recheck_roots`], not a link inside it).
    fn is_a_root(&self, path: &Path) -> bool {
        self.specs.iter().any(|s| s.path == path)
    }

    fn in_a_root(&self, path: &Path) -> bool {
        self.specs
            .iter()
            .any(|s| path.starts_with(&s.path) && !matches!(s.state, RootState::Unwatched(_)))
    }

    /// How many levels under `path` are to be watched, when `path` is a folder inside a root
    /// deep enough to hold documents there, or below a folder a link leads into from deeper
    /// (`usize::MAX`: every level).
    fn depth_left(&self, path: &Path) -> Option<usize> {
        self.depth_in_roots(path).max(self.deep.levels_below(path))
    }

    /// How many levels under `path` its roots' own walks read (`usize::MAX`: every level).
    fn depth_in_roots(&self, path: &Path) -> Option<usize> {
        self.specs
            .iter()
            .filter(|s| !matches!(s.state, RootState::Unwatched(_)))
            .filter_map(|s| {
                let level = path.strip_prefix(&s.path).ok()?.components().count();
                match s.depth {
                    None => Some(usize::MAX),
                    Some(depth) => depth.checked_sub(level),
                }
            })
            .max()
    }

    /// How many levels under the folder `path` are to be watched: those [`Tree::depth_left`]
    /// says, or the folder itself when it is on the way to a folder a link leads into (see
    /// [`Tree::note_deep_needs`]; the walk from it goes down the way).
    fn depth_to_watch(&self, path: &Path) -> Option<usize> {
        let on_the_way = self.in_a_root(path) && self.deep.on_the_way(path);
        self.depth_left(path).max(on_the_way.then_some(0))
    }
}

/// The roots' real paths with their configured ones: a link's real target becomes a watched
/// path (the path events name) under the root whose real path is the longest prefix of it.
struct LinkTargets {
    roots: Vec<(PathBuf, PathBuf)>,
}

impl LinkTargets {
    /// Where the link at `link` leads as a watched path (`None` when that is outside every
    /// root: the walk never follows those), with how the system fails to resolve it.
    fn resolve(&self, link: &Path) -> links::Resolved {
        if self.roots.is_empty() {
            return (None, None);
        }
        let (real, failure) = links::real_target(link);
        (real.and_then(|real| self.watched(&real)), failure)
    }

    /// The watched path of the real path `real`, under the root whose real path is the
    /// longest prefix of it.
    fn watched(&self, real: &Path) -> Option<PathBuf> {
        self.roots
            .iter()
            .filter_map(|(real_root, root)| {
                let rest = real.strip_prefix(real_root).ok()?;
                Some((real_root.components().count(), links::join(root, rest)))
            })
            .max_by_key(|(depth, _)| *depth)
            .map(|(_, target)| target)
    }
}

/// Where the symbolic link at `path` leads (one step), when it is one.
fn link_target(path: &Path) -> Option<PathBuf> {
    let target = std::fs::read_link(path).ok()?;
    Some(match path.parent() {
        Some(parent) => parent.join(target),
        None => target,
    })
}

/// The device and inode of the folder at `path`, links followed.
fn folder_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Paths worth a look: documents, folders or links to them (names without an extension are
/// taken as such), and the other files `check` lists, an update's `.upstream` copy and another
/// process's temporary file, so that `check` and `index::status` follow them as they come and
/// go. Staging folders are not (a landing reconciles what it lands), nor this process's own
/// temporary files (its writes reconcile the files they make).
fn relevant(path: &Path, is_dir: bool) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    // A name that is not UTF-8 is looked at too: `check` lists it.
    let name = name.to_string_lossy();
    if is_staging_name(&name) {
        return false;
    }
    is_dir
        || path.extension().is_none_or(|ext| ext == "md")
        || is_upstream_copy(&name)
        || temp_pid(&name).is_some_and(|pid| pid != std::process::id())
}

/// Whether `path` is on a file system that does not report changes made elsewhere: network
/// file systems and FUSE mounts.
fn remote_file_system(path: &Path) -> bool {
    const REMOTE: [i64; 7] = [
        0x6969,                 // NFS
        0x517B,                 // SMB
        0xFF53_4D42_u32 as i64, // CIFS
        0xFE53_4D42_u32 as i64, // SMB2
        0x6573_5546,            // FUSE
        0x0102_1997,            // 9P
        0x00C3_6400,            // Ceph
    ];
    statfs_type(path).is_ok_and(|kind| REMOTE.contains(&kind))
}

fn statfs_type(path: &Path) -> io::Result<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: statfs writes one struct through the pointer; `c` is NUL-terminated.
    unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut fs) != 0 {
            return Err(io::Error::last_os_error());
        }
        #[allow(clippy::unnecessary_cast)]
        Ok(fs.f_type as i64)
    }
}

/// The kernel refused a watch for lack of room: the folder where the watching stopped.
#[derive(Debug, thiserror::Error)]
#[error(
    "the kernel's limit on watches was reached at {} (raise fs.inotify.max_user_watches)",
    at.display()
)]
struct WatchLimit {
    at: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_root_this_process_may_not_list_is_unreadable() {
        let denied = || Err(io::Error::from(io::ErrorKind::PermissionDenied));
        let state = listed_state(&RootState::Watched, denied);
        assert!(
            matches!(&state, RootState::Unreadable(why) if !why.is_empty()),
            "{state:?}"
        );
        let partial = RootState::Partial("limit".into());
        assert!(matches!(
            listed_state(&partial, denied),
            RootState::Unreadable(_)
        ));
        // Listed, or gone meanwhile (the watch says so next): as the watch has it.
        assert_eq!(
            listed_state(&RootState::Watched, || Ok(())),
            RootState::Watched
        );
        let gone = || Err(io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(listed_state(&RootState::Watched, gone), RootState::Watched);
        assert_eq!(listed_state(&RootState::Absent, denied), RootState::Absent);
        let json = serde_json::to_value(RootState::Unreadable("Permission denied".into()));
        assert_eq!(
            json.ok(),
            Some(serde_json::json!({ "unreadable": "Permission denied" }))
        );
    }

    fn roots(base: &Path) -> Roots {
        Roots::new(
            base.join("skills"),
            base.join("skills/iii"),
            base.join(".agents/skills"),
            base.join("agents"),
        )
    }

    fn drain(inotify: &Inotify, tree: &mut Tree) -> Changes {
        let mut events = Vec::new();
        inotify.read_queued(&mut events).unwrap();
        tree.translate(inotify, &events)
    }

    #[test]
    fn a_new_folder_is_watched_before_it_is_walked_and_renames_follow_it() {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(base.path().join("skills")).unwrap();
        let inotify = Inotify::new().unwrap();
        let mut tree = Tree::new(&inotify, &roots(base.path()), &|_| false, None);
        let ns = base.path().join("skills/ns");
        std::fs::create_dir_all(ns.join("deep")).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([ns.clone()]));
        // Watched now, below too.
        std::fs::write(ns.join("deep/a.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([ns.join("deep/a.md")]));
        // A folder renamed inside the tree is heard under its new name.
        let moved = base.path().join("skills/moved");
        std::fs::rename(&ns, &moved).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([ns.clone(), moved.clone()]));
        std::fs::write(moved.join("deep/b.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([moved.join("deep/b.md")]));
        // Other files and staging folders are not worth a look.
        std::fs::write(moved.join("deep/picture.png"), "x").unwrap();
        std::fs::write(moved.join("deep/notes.tmp"), "x").unwrap();
        std::fs::create_dir(base.path().join("skills/.iii-staging-x")).unwrap();
        assert!(drain(&inotify, &mut tree).is_empty());
        // Nor are this process's own temporary files: its writes reconcile what they make.
        let own = format!("deep/b.md.{}-0.tmp", std::process::id());
        std::fs::write(moved.join(own), "x").unwrap();
        assert!(drain(&inotify, &mut tree).is_empty());
        // Another writer's temporary file and an update's conflict copy are: `check` lists
        // them.
        std::fs::write(moved.join("deep/b.md.1-2.tmp"), "x").unwrap();
        std::fs::write(moved.join("deep/b.md.upstream"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(
            changes.paths,
            BTreeSet::from([
                moved.join("deep/b.md.1-2.tmp"),
                moved.join("deep/b.md.upstream")
            ])
        );
    }

    #[test]
    fn more_paths_through_links_than_the_bound_has_every_root_walked_again() {
        let base = tempfile::tempdir().unwrap();
        let team = base.path().join("skills/team");
        std::fs::create_dir_all(&team).unwrap();
        for alias in ["a1", "a2", "a3"] {
            std::os::unix::fs::symlink("team", base.path().join("skills").join(alias)).unwrap();
        }
        let inotify = Inotify::new().unwrap();
        let mut tree = Tree::new(&inotify, &roots(base.path()), &|_| false, None);
        std::fs::write(team.join("one.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths.len(), 4, "{:?}", changes.paths);
        assert!(!changes.rescan);
        // 1,400 files in one batch: 4,200 paths through the links.
        for i in 0..1400 {
            std::fs::write(team.join(format!("f{i}.md")), "x").unwrap();
        }
        assert!(drain(&inotify, &mut tree).rescan);
    }

    #[test]
    fn a_root_that_is_a_file_says_so_and_is_watched_once_a_folder_takes_its_place() {
        let base = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let roots = roots(base.path());
        let skills = roots.path(Root::Skills).to_path_buf();
        std::fs::write(&skills, "not a folder").unwrap();
        let mut tree = Tree::new(&inotify, &roots, &|_| false, None);
        let watch = |tree: &Tree| {
            tree.roots()
                .into_iter()
                .find(|r| r.root == "skills_folder")
                .unwrap()
        };
        assert_eq!(watch(&tree).state, RootState::NotAFolder);
        assert!(watch(&tree).fresh_reads);
        assert!(tree.problems().is_empty(), "no change is missed there");
        std::fs::remove_file(&skills).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(
            changes.is_empty() || changes.paths.contains(&skills),
            "{changes:?}"
        );
        assert_eq!(watch(&tree).state, RootState::Absent);
        std::fs::create_dir(&skills).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&skills), "{changes:?}");
        assert_eq!(watch(&tree).state, RootState::Watched);
        // And a file in a watched root's place, later.
        std::fs::remove_dir(&skills).unwrap();
        std::fs::write(&skills, "x").unwrap();
        drain(&inotify, &mut tree);
        assert_eq!(watch(&tree).state, RootState::NotAFolder);
    }

    #[test]
    fn a_root_made_later_is_served_then_dropped_then_served_again() {
        let base = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let roots = roots(base.path());
        let mut tree = Tree::new(&inotify, &roots, &|_| false, None);
        let state = |tree: &Tree, key: &str| {
            tree.roots()
                .into_iter()
                .find(|r| r.root == key)
                .unwrap()
                .state
        };
        assert_eq!(state(&tree, "agents_skills_folder"), RootState::Absent);
        let agents_skills = roots.path(Root::AgentsSkills).to_path_buf();
        std::fs::create_dir_all(agents_skills.join("polish")).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&agents_skills), "{changes:?}");
        assert_eq!(state(&tree, "agents_skills_folder"), RootState::Watched);
        std::fs::write(agents_skills.join("polish/SKILL.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(
            changes
                .paths
                .contains(&agents_skills.join("polish/SKILL.md")),
            "{changes:?}"
        );
        std::fs::remove_dir_all(base.path().join(".agents")).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&agents_skills), "{changes:?}");
        assert_eq!(state(&tree, "agents_skills_folder"), RootState::Absent);
        std::fs::create_dir_all(&agents_skills).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&agents_skills), "{changes:?}");
        assert_eq!(state(&tree, "agents_skills_folder"), RootState::Watched);
    }

    #[test]
    fn a_root_that_is_a_link_is_watched_where_it_leads_after_it_is_re_pointed() {
        let base = tempfile::tempdir().unwrap();
        let releases = base.path().join("releases");
        let (a, b) = (releases.join("a"), releases.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let skills = base.path().join("skills");
        std::os::unix::fs::symlink(&a, &skills).unwrap();
        // Every other root exists, so that no wait for one watches the folder the link is in.
        for root in [
            ".agents/skills",
            "agents",
            "releases/a/iii",
            "releases/b/iii",
        ] {
            std::fs::create_dir_all(base.path().join(root)).unwrap();
        }
        let inotify = Inotify::new().unwrap();
        let mut tree = Tree::new(&inotify, &roots(base.path()), &|_| false, None);
        std::fs::write(a.join("one.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([skills.join("one.md")]));

        // `ln -sfn releases/b skills`: a new link renamed over the old one.
        let next = base.path().join("skills.next");
        std::os::unix::fs::symlink(&b, &next).unwrap();
        std::fs::rename(&next, &skills).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&skills), "{changes:?}");
        // The new target is heard; the old one is no root any more.
        std::fs::write(b.join("two.md"), "x").unwrap();
        std::fs::write(a.join("old.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([skills.join("two.md")]));

        // The link stays, and the folder it names is replaced by another renamed into place.
        let old = releases.join("b.old");
        std::fs::rename(&b, &old).unwrap();
        std::fs::create_dir(&b).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&skills), "{changes:?}");
        std::fs::write(b.join("three.md"), "x").unwrap();
        std::fs::write(old.join("gone.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([skills.join("three.md")]));
        let state = |tree: &Tree| {
            tree.roots()
                .into_iter()
                .find(|r| r.root == "skills_folder")
                .unwrap()
                .state
        };
        assert_eq!(state(&tree), RootState::Watched);

        // The target renamed away, the link dangling for a moment, then a folder prepared
        // elsewhere renamed to where the link leads: watched there once it comes.
        let next = releases.join("next");
        std::fs::create_dir(&next).unwrap();
        std::fs::write(next.join("four.md"), "x").unwrap();
        std::fs::rename(&b, releases.join("b.older")).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&skills), "{changes:?}");
        assert_eq!(state(&tree), RootState::Absent);
        std::fs::rename(&next, &b).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&skills), "{changes:?}");
        assert_eq!(state(&tree), RootState::Watched);
        std::fs::write(b.join("five.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([skills.join("five.md")]));
    }

    /// A root whose folders are made between the look for the nearest existing folder and the
    /// watch on it has no event for them: the watch looks again, and finds the root.
    #[test]
    fn a_root_made_while_its_wait_is_set_up_is_found() {
        let base = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let roots = roots(base.path());
        let mut tree = Tree::new(&inotify, &roots, &|_| false, None);
        let agents_skills = roots.path(Root::AgentsSkills).to_path_buf();
        // What the race leaves: the folders exist, and no event announced them.
        std::fs::create_dir_all(agents_skills.join("polish")).unwrap();
        let mut events = Vec::new();
        inotify.read_queued(&mut events).unwrap();
        assert!(tree.wait_for(&inotify, &agents_skills));
        // A later look at the roots watches it.
        tree.rewatch(&inotify);
        let state = tree
            .roots()
            .into_iter()
            .find(|r| r.root == "agents_skills_folder");
        assert_eq!(state.unwrap().state, RootState::Watched);
    }

    /// An off global root is neither watched nor reported; an on one is watched with its
    /// project counterpart's depth (`<id>.md`, `<dir>/SKILL.md`), nested files ignored.
    #[test]
    fn global_roots_are_watched_only_when_set() {
        let base = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let keys =
            |tree: &Tree| -> Vec<&str> { tree.roots().into_iter().map(|r| r.root).collect() };
        let off = Tree::new(&inotify, &roots(base.path()), &|_| false, None);
        assert!(!keys(&off).iter().any(|k| k.starts_with("global_")));
        let (agents, skills) = (
            base.path().join("home/agents"),
            base.path().join("home/skills"),
        );
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::create_dir_all(&skills).unwrap();
        let on = roots(base.path()).with_globals(Some(skills.clone()), Some(agents.clone()));
        let inotify = Inotify::new().unwrap();
        let mut tree = Tree::new(&inotify, &on, &|_| false, None);
        let keys = keys(&tree);
        assert!(keys.contains(&"global_agents_folder"), "{keys:?}");
        assert!(keys.contains(&"global_agents_skills_folder"), "{keys:?}");
        std::fs::write(agents.join("me.md"), "x").unwrap();
        std::fs::create_dir_all(skills.join("pdf")).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&agents.join("me.md")), "{changes:?}");
        assert!(changes.paths.contains(&skills.join("pdf")), "{changes:?}");
        std::fs::write(skills.join("pdf/SKILL.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(
            changes.paths.contains(&skills.join("pdf/SKILL.md")),
            "{changes:?}"
        );
    }

    /// A change under a link's target asks for the paths through the link too, across roots;
    /// a link made later is noted by its event, and one removed is forgotten.
    #[test]
    fn a_change_under_a_link_target_asks_for_the_link_paths() {
        use std::os::unix::fs::symlink;
        let base = tempfile::tempdir().unwrap();
        let skills = base.path().join("skills");
        let agents_skills = base.path().join(".agents/skills");
        std::fs::create_dir_all(skills.join("tgt")).unwrap();
        std::fs::create_dir_all(skills.join("real")).unwrap();
        std::fs::create_dir_all(&agents_skills).unwrap();
        symlink("tgt", skills.join("ali")).unwrap();
        std::fs::write(skills.join("a.md"), "x").unwrap();
        symlink("a.md", skills.join("b.md")).unwrap();
        symlink(skills.join("real"), agents_skills.join("linked")).unwrap();
        // A link out of the roots is never followed, so never asked for.
        symlink(base.path(), skills.join("out")).unwrap();
        let inotify = Inotify::new().unwrap();
        let mut tree = Tree::new(&inotify, &roots(base.path()), &|_| false, None);
        assert_eq!(tree.links.len(), 4);
        std::fs::write(skills.join("tgt/x.md"), "x").unwrap();
        std::fs::write(skills.join("a.md"), "y").unwrap();
        std::fs::write(skills.join("real/SKILL.md"), "y").unwrap();
        let changes = drain(&inotify, &mut tree);
        for path in [
            skills.join("tgt/x.md"),
            skills.join("ali/x.md"),
            skills.join("a.md"),
            skills.join("b.md"),
            skills.join("real/SKILL.md"),
            agents_skills.join("linked/SKILL.md"),
        ] {
            assert!(changes.paths.contains(&path), "{path:?} in {changes:?}");
        }
        // Made later: the link itself, then what reaches it.
        symlink("tgt", skills.join("later")).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(changes.paths.contains(&skills.join("later")), "{changes:?}");
        std::fs::remove_file(skills.join("tgt/x.md")).unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(
            changes.paths.contains(&skills.join("later/x.md")),
            "{changes:?}"
        );
        std::fs::remove_file(skills.join("later")).unwrap();
        // A file renamed over a link replaces it: a link no more.
        std::fs::write(skills.join("plain.md"), "x").unwrap();
        std::fs::rename(skills.join("plain.md"), skills.join("b.md")).unwrap();
        std::fs::remove_file(skills.join("ali")).unwrap();
        drain(&inotify, &mut tree);
        assert_eq!(tree.links.len(), 2, "the links left: linked, out");
        std::fs::write(skills.join("tgt/z.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert_eq!(changes.paths, BTreeSet::from([skills.join("tgt/z.md")]));
    }

    /// A root partly watched for lack of watches is tried again whole by `rewatch`, and is
    /// watched again once there is room.
    #[test]
    fn a_partial_root_is_watched_again_once_the_limit_allows() {
        let base = tempfile::tempdir().unwrap();
        for ns in 0..5 {
            std::fs::create_dir_all(base.path().join(format!("skills/ns{ns}/deep"))).unwrap();
        }
        let inotify = Inotify::new().unwrap();
        let limit = Arc::new(AtomicUsize::new(4));
        let mut tree = Tree::with_limit(
            &inotify,
            &roots(base.path()),
            &|_| false,
            None,
            Some(limit.clone()),
        );
        let skills = |tree: &Tree| {
            tree.roots()
                .into_iter()
                .find(|r| r.root == "skills_folder")
                .unwrap()
        };
        assert!(matches!(skills(&tree).state, RootState::Partial(_)));
        assert!(!skills(&tree).fresh_reads);
        tree.rewatch(&inotify);
        assert!(matches!(skills(&tree).state, RootState::Partial(_)));
        limit.store(usize::MAX, Ordering::SeqCst);
        tree.rewatch(&inotify);
        assert_eq!(skills(&tree).state, RootState::Watched);
        assert!(skills(&tree).fresh_reads);
        assert!(tree.problems().is_empty(), "{:?}", tree.problems());
        std::fs::write(base.path().join("skills/ns4/deep/a.md"), "x").unwrap();
        let changes = drain(&inotify, &mut tree);
        assert!(
            changes
                .paths
                .contains(&base.path().join("skills/ns4/deep/a.md")),
            "{changes:?}"
        );
    }

    #[test]
    fn an_overflow_asks_for_everything() {
        let base = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let mut tree = Tree::new(&inotify, &roots(base.path()), &|_| false, None);
        let overflow = Event {
            wd: -1,
            mask: libc::IN_Q_OVERFLOW,
            name: None,
        };
        assert!(tree.translate(&inotify, &[overflow]).full);
    }

    fn watched_under(tree: &Tree, top: &Path) -> Vec<PathBuf> {
        tree.by_path
            .keys()
            .filter(|p| p.starts_with(top))
            .map(|p| p.to_path_buf())
            .collect()
    }

    /// A base with the roots, `.agents/skills/x/sub`, the `folders` given and `skills/foo ->
    /// ../.agents/skills/x` (the skills tree's walk lists all of `x` through it), watched.
    fn linked_into_a_skill_folder(folders: &[&str]) -> (tempfile::TempDir, Inotify, Tree) {
        let base = tempfile::tempdir().unwrap();
        for folder in ["skills", "agents", ".agents/skills/x/sub"]
            .iter()
            .chain(folders)
        {
            std::fs::create_dir_all(base.path().join(folder)).unwrap();
        }
        std::os::unix::fs::symlink("../.agents/skills/x", base.path().join("skills/foo")).unwrap();
        let inotify = Inotify::new().unwrap();
        let tree = Tree::new(&inotify, &roots(base.path()), &|_| false, None);
        (base, inotify, tree)
    }

    fn sh(base: &Path, script: &str) {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(base)
            .status()
            .unwrap();
        assert!(status.success(), "{script}");
    }

    /// A shallow root replaced by a copy of itself, with a link into one of its folders: the
    /// new folder is watched as deep as the link needs.
    #[test]
    fn a_root_replaced_keeps_a_linked_folder_watched_deep() {
        let (base, inotify, mut tree) = linked_into_a_skill_folder(&[]);
        drain(&inotify, &mut tree);
        sh(
            base.path(),
            "cp -R .agents/skills .agents/new && mv .agents/skills .agents/old \
             && mv .agents/new .agents/skills",
        );
        drain(&inotify, &mut tree);
        let sub = base.path().join(".agents/skills/x/sub");
        assert!(
            tree.by_path.contains_key(sub.as_path()),
            "x/sub not watched"
        );
    }

    /// A shallow root moved away and back, with a link into one of its folders: that folder is
    /// watched as deep as the link needs, every other only as deep as the root reads.
    #[test]
    fn a_root_made_again_is_watched_only_as_deep_as_needed() {
        let (base, inotify, mut tree) = linked_into_a_skill_folder(&[".agents/skills/big/a/b/c"]);
        sh(base.path(), "mv .agents/skills .agents/saved");
        drain(&inotify, &mut tree);
        sh(base.path(), "mv .agents/saved .agents/skills");
        drain(&inotify, &mut tree);
        let big = base.path().join(".agents/skills/big");
        assert_eq!(watched_under(&tree, &big), vec![big.clone()]);
        let sub = base.path().join(".agents/skills/x/sub");
        assert!(
            tree.by_path.contains_key(sub.as_path()),
            "x/sub not watched"
        );
    }

    /// The folder above a root, holding other things, moved away and back with the root out of
    /// it: nothing there is watched for the link into the root, which is not there.
    #[test]
    fn a_folder_above_a_root_made_again_is_not_watched_whole() {
        let (base, inotify, mut tree) = linked_into_a_skill_folder(&[".agents/cache/a/b"]);
        for script in [
            "mv .agents/skills saved-skills",
            "mv .agents saved",
            "mv saved .agents",
        ] {
            sh(base.path(), script);
            drain(&inotify, &mut tree);
        }
        let cache = watched_under(&tree, &base.path().join(".agents/cache"));
        assert!(cache.is_empty(), "watched outside every root: {cache:?}");
    }

    /// Links made and removed, each to a place of its own below a shallow root's depth: what
    /// each needed goes with it, what `foo` needs stays.
    #[test]
    fn what_a_link_needed_goes_with_it() {
        let (base, inotify, mut tree) = linked_into_a_skill_folder(&[]);
        let link = base.path().join("skills/l");
        for i in 0..1000 {
            std::os::unix::fs::symlink(format!("../.agents/skills/x/d{i}"), &link).unwrap();
            drain(&inotify, &mut tree);
            std::fs::remove_file(&link).unwrap();
            drain(&inotify, &mut tree);
        }
        assert_eq!(tree.links.len(), 1);
        assert_eq!(tree.deep.folders(), 1, "what gone links needed is kept");
    }
}
