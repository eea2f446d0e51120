//! Walking the roots: which candidate files exist and their stat, without reading any content.
//! This is the part of every reconcile that cannot be skipped, so it does nothing else.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, Metadata};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::records::Stat;
use crate::doc::ids::first_segment;
use crate::doc::paths::is_markdown;
use crate::doc::{ReadIssue, ServeIssue};
use crate::error::{IoError, short_of_resources};
use crate::roots::{Layout, Root, Roots};
use crate::rules::skip::{MAX_LINKED_PATHS_TO_A_FOLDER, SkipReason, Special, is_upstream_copy};
// A download's staging folder is never walked: its files are not documents until they land.
use crate::store::is_staging_name;
use crate::time::Stamp;

/// The file name that makes a folder of `agents_skills_folder` (or of
/// `global_agents_skills_folder`) a skill.
pub const AGENTS_SKILL_FILE: &str = "SKILL.md";

/// Top-level folder names of the skills roots, by root.
pub type TopDirs = BTreeSet<(Root, String)>;
/// Folders that could not be listed and links not followed, by root and relative path, with
/// the skip reason.
pub type Unreadable = BTreeMap<(Root, String), SkipReason>;

/// What a walk of all roots found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// Candidate markdown files by root and `/`-separated path relative to the root.
    pub files: BTreeMap<(Root, String), Stat>,
    /// Top-level folder names of `skills_folder` and `local_skills_folder` (namespace shadowing
    /// looks at folders, even empty ones).
    pub top_dirs: BTreeSet<(Root, String)>,
    /// Folders that could not be listed and links not followed, with the skip reason.
    pub unreadable: Unreadable,
    /// Files named like a writer's temporary file (`store::is_temp_name`), by key and path: a
    /// reconcile hands them to the sweep of the ones killed writers left, and lists the others.
    pub temps: Vec<((Root, String), PathBuf)>,
    /// For a scoped walk: the `(root, relative path)` subtrees it looked at (an empty path is
    /// the whole root). Empty for a full walk.
    pub scopes: Vec<(Root, String)>,
    /// Files a scoped walk was given that have other names (hard links, `nlink > 1`): an
    /// in-place write through one name changes the others, which the watcher hears nothing of.
    pub shared: Vec<(Root, String)>,
    /// A folder this process could not list for want of resources (see [`short_of`]): the
    /// walk saw only part of the tree, and a reconcile must not take it for the whole.
    pub short: Option<Short>,
}

/// Why an entry the walk found cannot be looked at, when `check` should say so: a path longer
/// than the system takes (a folder nested dozens deep), which would otherwise vanish without a
/// word. An entry gone since the listing, or a link that leads nowhere (judged elsewhere), is
/// not reported here.
fn unreachable_entry(entry: &fs::DirEntry, name: &str, e: &std::io::Error) -> Option<SkipReason> {
    if e.raw_os_error() != Some(libc::ENAMETOOLONG) {
        return None;
    }
    let why = format!("{e} (the path is longer than the system takes; nest it less deeply)");
    match entry.file_type() {
        Ok(kind) if kind.is_dir() => Some(SkipReason::Unlistable(why)),
        _ if is_markdown(name) => {
            Some(SkipReason::Unservable(ServeIssue::Read(ReadIssue::Io(why))))
        }
        _ => None,
    }
}

/// A folder not listed because this process ran short of something the system gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Short {
    pub path: PathBuf,
    pub errno: i32,
}

impl Short {
    pub fn error(&self) -> IoError {
        IoError {
            step: "list the folder",
            path: self.path.clone(),
            source: std::io::Error::from_raw_os_error(self.errno),
        }
    }
}

/// Whether listing `path` failed for want of resources (open files, memory), which passes,
/// rather than for what the folder is (its permissions), which `check` lists.
fn short_of(path: &Path, e: &std::io::Error) -> Option<Short> {
    let errno = e.raw_os_error()?;
    short_of_resources(e).then(|| Short {
        path: path.to_path_buf(),
        errno,
    })
}

impl Found {
    /// Adds what another walk found (of other places, or the same again) to this one's.
    fn absorb(&mut self, other: Found) {
        self.files.extend(other.files);
        self.top_dirs.extend(other.top_dirs);
        self.unreadable.extend(other.unreadable);
        self.temps.extend(other.temps);
        self.shared.extend(other.shared);
        self.short = self.short.take().or(other.short);
    }

    /// Whether a scoped walk looked at the place of this file (or folder) key.
    pub fn covers(&self, key: &(Root, String)) -> bool {
        self.scopes
            .iter()
            .any(|(root, scope)| *root == key.0 && scope_covers(*root, scope, &key.1))
    }

    /// The keys of `known` (a table by `(root, relative path)`) in the places this scoped walk
    /// looked at, found by key ranges rather than by looking at every key.
    pub fn covered<'a, V>(
        &self,
        known: &'a BTreeMap<(Root, String), V>,
    ) -> BTreeSet<&'a (Root, String)> {
        let mut keys = BTreeSet::new();
        for (root, scope) in &self.scopes {
            let (root, scope) = (*root, scope.as_str());
            // Every key the scope covers sorts between these (`/` sorts before `0`).
            let from = match root.layout() {
                Layout::SkillFolders => first_segment(scope),
                _ => scope,
            };
            let to = format!("{from}0");
            let candidates = known
                .range((root, from.to_string())..)
                .take_while(|((r, rel), _)| *r == root && (from.is_empty() || *rel < to));
            keys.extend(
                candidates
                    .map(|(key, _)| key)
                    .filter(|(_, rel)| scope_covers(root, scope, rel)),
            );
        }
        keys
    }

    /// The complete folder facts after a scoped walk: the top-level folders it looked at (all
    /// of a root it walked whole, else those its scopes start in) replace the old ones, and
    /// unreadable folders in its scopes replace the old ones there.
    pub fn merge_folders(
        &self,
        top_dirs: &TopDirs,
        unreadable: &Unreadable,
    ) -> (TopDirs, Unreadable) {
        let mut dirs = top_dirs.clone();
        for (root, scope) in &self.scopes {
            if root.layout() != Layout::Tree {
                continue;
            }
            if scope.is_empty() {
                dirs.retain(|(r, _)| r != root);
            } else {
                dirs.remove(&(*root, first_segment(scope).to_string()));
            }
        }
        dirs.extend(self.top_dirs.iter().cloned());
        let mut unreadable: Unreadable = unreadable
            .iter()
            .filter(|(key, _)| !self.covers(key))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        unreadable.extend(self.unreadable.iter().map(|(k, v)| (k.clone(), v.clone())));
        (dirs, unreadable)
    }
}

/// Whether the subtree `scope` of a root holds `rel`. The agents skills roots are shallow, so
/// anything under `<dir>` is judged by `<dir>` alone.
fn scope_covers(root: Root, scope: &str, rel: &str) -> bool {
    if scope.is_empty() {
        return true;
    }
    if root.layout() == Layout::SkillFolders {
        return first_segment(scope) == first_segment(rel);
    }
    rel == scope
        || rel
            .strip_prefix(scope)
            .is_some_and(|rest| rest.starts_with('/'))
}

pub fn walk(roots: &Roots) -> Found {
    let mut found = Found::default();
    let inside = real_roots(roots);
    for (root, _) in roots.active() {
        walk_root(roots, root, &inside, &mut found);
    }
    found
}

/// One whole root, by its layout.
fn walk_root(roots: &Roots, root: Root, inside: &[PathBuf], found: &mut Found) {
    let dir = roots.path(root);
    match root.layout() {
        Layout::Tree => {
            walk_tree(root, dir, String::new(), false, inside, found);
        }
        Layout::SkillFolders => walk_agents_skills(root, dir, inside, found),
        Layout::Profiles => walk_flat(root, dir, inside, found),
    }
}

/// The roots' real paths: a symbolic link is followed only to a place under one of them.
fn real_roots(roots: &Roots) -> Vec<PathBuf> {
    roots
        .active()
        .filter_map(|(_, path)| fs::canonicalize(path).ok())
        .collect()
}

/// Whether a real path lies under one of the roots' real paths.
fn within(real: &Path, inside: &[PathBuf]) -> bool {
    inside.iter().any(|root| real.starts_with(root))
}

/// Why the entry at `path` is not followed, when it is a symbolic link to a folder or named
/// like a document: it is broken or loops, or it leads outside every root (design: bad input
/// never serves or writes outside the configured roots).
fn refused_link(path: &Path, name: &str, inside: &[PathBuf]) -> Option<SkipReason> {
    if !fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink()) {
        return None;
    }
    match fs::canonicalize(path) {
        Err(e) if is_markdown(name) => Some(SkipReason::LinkBroken(e.to_string())),
        // Links that lead to each other never reach a folder: a folder-link loop.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            Some(SkipReason::LinkLoops(e.to_string()))
        }
        Err(_) => None,
        Ok(real) if within(&real, inside) => None,
        Ok(real) if real.is_dir() || is_markdown(name) => {
            Some(SkipReason::LinkOutside(real.display().to_string()))
        }
        Ok(_) => None,
    }
}

/// Walks only the given absolute paths (files or folders) and what is under them, per root
/// that holds them. Of the top-level folders, only those the paths start in are looked at
/// again (a root given whole is listed whole): a change elsewhere comes with paths of its own,
/// and listing every namespace folder on every write would cost as much as the tree is wide.
///
/// `bounded` names the roots where the last walk turned a path through links away
/// ([`SkipReason::TooManyLinkedPaths`]): there, any change may give a path turned away the
/// place of one followed (a link or a folder holding one gone, or replaced by a folder of the
/// same name, or no longer entered), so they are walked whole.
pub fn walk_scoped(roots: &Roots, paths: &[PathBuf], bounded: &BTreeSet<Root>) -> Found {
    let mut found = Found::default();
    for path in paths {
        for (root, dir) in roots.active() {
            let Ok(rest) = path.strip_prefix(dir) else {
                continue;
            };
            // A name that is not UTF-8 has no key of its own: its folder is walked instead,
            // which lists it (`check`), or no longer does.
            let rel = rest
                .ancestors()
                .find_map(Path::to_str)
                .unwrap_or_default()
                .replace('\\', "/");
            if !found
                .scopes
                .iter()
                .any(|(r, s)| *r == root && scope_covers(root, s, &rel))
            {
                found.scopes.push((root, rel));
            }
        }
    }
    let inside = real_roots(roots);
    // Which paths through links a walk follows into a folder depends on every path that leads
    // there (`Walk::through_links`), so a scope that may change them is walked as its whole
    // root (see `walk_tree_scope`), and what the other scopes of that root found is left for
    // it, but for the other names of the files they were given.
    let mut parts: Vec<(Root, Found)> = Vec::new();
    let mut whole: Vec<Root> = Vec::new();
    let mut hidden = HiddenWays::default();
    for (root, rel) in &found.scopes {
        let goes_whole = whole.contains(root) || bounded.contains(root);
        // A root given whole is walked as the whole walk walks it, which notes the root
        // itself when it cannot be listed (`check` lists it), where a way found hidden
        // would note nothing.
        let way = if goes_whole || rel.is_empty() {
            Way::Listed
        } else {
            hidden.way_to(roots.path(*root), *root, rel)
        };
        let mut part = Found::default();
        match way {
            // As the whole walk: nothing there (the scope's old rows go).
            Way::Hidden => {}
            Way::Short(short) => {
                found.short.get_or_insert(short);
            }
            Way::Listed
                if goes_whole
                    || walk_subtree(roots, *root, rel, &inside, &mut part) == Scoped::MetALink =>
            {
                // A whole walk notes no other names (see `Found::shared`).
                note_given_file(roots.path(*root), *root, rel, &mut found.shared);
                if !whole.contains(root) {
                    whole.push(*root);
                }
            }
            Way::Listed => parts.push((*root, part)),
        }
    }
    for (root, mut part) in parts {
        if whole.contains(&root) {
            found.shared.append(&mut part.shared);
        } else {
            found.absorb(part);
        }
    }
    for root in &whole {
        walk_root(roots, *root, &inside, &mut found);
        found.scopes.retain(|(r, _)| r != root);
        found.scopes.push((*root, String::new()));
    }
    let scopes = found.scopes.clone();
    for (root, rel) in &scopes {
        // A root walked whole recorded its top-level folders already.
        if root.layout() == Layout::Tree && !rel.is_empty() {
            check_top_dir(
                *root,
                roots.path(*root),
                first_segment(rel),
                &inside,
                &mut found,
            );
        }
    }
    found
}

/// The folders on the way to a scoped walk's paths that exist but cannot be listed: one this
/// process may enter but not read (mode 0300 for its user) hides what is under it from the
/// whole walk, while a scoped walk's `stat` would reach it, so a scope below one finds nothing,
/// as the whole walk does. Each folder is tried once per scoped walk: a burst names many files
/// of few folders.
#[derive(Default)]
struct HiddenWays(HashMap<PathBuf, Way>);

/// What the whole walk does on the way to a path: list every folder there, meet one it cannot
/// list (it finds nothing below), or fall short of resources listing one (the reconcile must
/// not take what it found for the whole).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Way {
    Listed,
    Hidden,
    Short(Short),
}

impl HiddenWays {
    /// The way the whole walk takes to `rel` of the root at `dir`: through the root itself,
    /// and for a tree, each folder between it and `rel`.
    fn way_to(&mut self, dir: &Path, root: Root, rel: &str) -> Way {
        let folders = match root.layout() {
            Layout::Tree => rel.rsplit_once('/').map_or("", |(folders, _)| folders),
            // The whole walk lists the root and looks at each entry by its path.
            Layout::SkillFolders | Layout::Profiles => "",
        };
        let mut on_the_way = vec![dir.to_path_buf()];
        for segment in folders.split('/').filter(|segment| !segment.is_empty()) {
            let folder = on_the_way[on_the_way.len() - 1].join(segment);
            on_the_way.push(folder);
        }
        on_the_way
            .into_iter()
            .map(|folder| {
                self.0
                    .entry(folder)
                    .or_insert_with_key(|folder| listing(folder))
                    .clone()
            })
            .find(|way| *way != Way::Listed)
            .unwrap_or(Way::Listed)
    }
}

/// How listing the folder at `path` goes: [`Way::Hidden`] when it is there but cannot be listed
/// for what it is (its permissions, a link loop); [`Way::Listed`] too when it is missing or no
/// folder, since no walk finds anything below it then.
fn listing(path: &Path) -> Way {
    match fs::read_dir(path) {
        Ok(_) => Way::Listed,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Way::Listed,
        Err(e) => short_of(path, &e).map_or(Way::Hidden, Way::Short),
    }
}

/// What a scoped walk of a subtree did.
#[derive(Debug, PartialEq, Eq)]
enum Scoped {
    Walked,
    /// What it would list depends on which paths through symbolic links the whole walk
    /// follows, which only a walk of the whole root can say; it recorded nothing.
    MetALink,
}

fn walk_subtree(
    roots: &Roots,
    root: Root,
    rel: &str,
    inside: &[PathBuf],
    found: &mut Found,
) -> Scoped {
    if rel.is_empty() {
        walk_root(roots, root, inside, found);
        return Scoped::Walked;
    }
    if rel.split('/').any(is_staging_name) {
        return Scoped::Walked;
    }
    let dir = roots.path(root);
    match root.layout() {
        Layout::Tree => return walk_tree_scope(root, dir, rel, inside, found),
        Layout::SkillFolders => walk_skill_folder_scope(root, dir, rel, inside, found),
        Layout::Profiles => walk_profile_scope(root, dir, rel, inside, found),
    }
    Scoped::Walked
}

/// A path of a tree root where the bound turned no path through links away, and what is under
/// it, as the whole walk lists it; or [`Scoped::MetALink`] where it may add paths through
/// links (a link made, moved in or pointed elsewhere), which could take a folder past the
/// bound.
fn walk_tree_scope(
    root: Root,
    dir: &Path,
    rel: &str,
    inside: &[PathBuf],
    found: &mut Found,
) -> Scoped {
    // Before anything is recorded. Below a link, the whole walk enters the path only if it
    // follows every link on the way: with no path turned away, it does, unless one of them is
    // refused or leads back up.
    let linked = rel
        .rsplit_once('/')
        .is_some_and(|(folder, _)| through_a_link(dir, folder));
    if linked && !entered_on_the_way(dir, rel, inside) {
        return Scoped::MetALink;
    }
    let path = dir.join(rel);
    // As the whole walk: a link is judged where it sits, and nothing past a refused one is seen.
    if let Some(why) = refused_link(&path, rel, inside) {
        found.unreadable.insert((root, rel.to_string()), why);
        return Scoped::Walked;
    }
    let Ok(meta) = fs::metadata(&path) else {
        return Scoped::Walked;
    };
    let key = (root, rel.to_string());
    if let Some(why) = special(&meta, rel) {
        found.unreadable.insert(key, why);
    } else if meta.is_dir() {
        if fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_symlink()) {
            return Scoped::MetALink;
        }
        let mut part = Found::default();
        if walk_tree(root, &path, rel.to_string(), linked, inside, &mut part) == Scoped::MetALink {
            return Scoped::MetALink;
        }
        found.absorb(part);
    } else if meta.is_file() && is_markdown(rel) {
        note_shared(&mut found.shared, &key, &meta);
        found.files.insert(key, stat_of(&meta));
    } else if meta.is_file() && is_upstream_copy(rel) {
        found.unreadable.insert(key, SkipReason::UpstreamCopy);
    } else if meta.is_file() && crate::store::is_temp_name(rel.rsplit('/').next().unwrap_or(rel)) {
        found.temps.push((key, path));
    }
    Scoped::Walked
}

/// The skill folder a path of an agents skills root is in.
fn walk_skill_folder_scope(
    root: Root,
    dir: &Path,
    rel: &str,
    inside: &[PathBuf],
    found: &mut Found,
) {
    // As the whole walk: a link is judged where it sits, and nothing past a refused one is seen.
    let name = first_segment(rel);
    if let Some(why) = refused_link(&dir.join(name), name, inside) {
        found.unreadable.insert((root, name.to_string()), why);
        return;
    }
    if let Some((key, meta)) = skill_folder_entry(root, dir, name, inside, found) {
        note_shared(&mut found.shared, &key, &meta);
    }
}

/// A path of a profiles root: a profile, an upstream copy or a temporary file, when it is one
/// of the root's own entries (the root is flat), judged in the order [`walk_flat`] judges it:
/// a link only where it could be a profile, nothing nested.
fn walk_profile_scope(root: Root, dir: &Path, rel: &str, inside: &[PathBuf], found: &mut Found) {
    if rel.contains('/') {
        return;
    }
    let path = dir.join(rel);
    let key = (root, rel.to_string());
    let is_file = || fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
    if crate::store::is_temp_name(rel) && is_file() {
        found.temps.push((key.clone(), path.clone()));
    }
    if is_upstream_copy(rel) && is_file() {
        found
            .unreadable
            .insert(key.clone(), SkipReason::UpstreamCopy);
    }
    if !is_markdown(rel) {
        return;
    }
    if let Some(why) = refused_link(&path, rel, inside) {
        found.unreadable.insert(key, why);
        return;
    }
    if let Ok(meta) = fs::metadata(&path) {
        if let Some(why) = special(&meta, rel) {
            found.unreadable.insert(key, why);
        } else if meta.is_file() {
            note_shared(&mut found.shared, &key, &meta);
            found.files.insert(key, stat_of(&meta));
        }
    }
}

/// Notes the file at `rel` of a root a scoped walk walks whole, when it is one and has other
/// names (see `Found::shared`).
fn note_given_file(dir: &Path, root: Root, rel: &str, shared: &mut Vec<(Root, String)>) {
    if let Ok(meta) = fs::metadata(dir.join(rel))
        && meta.is_file()
    {
        note_shared(shared, &(root, rel.to_string()), &meta);
    }
}

/// Notes a file a scoped walk was given by name when it has other names (see `Found::shared`).
fn note_shared(shared: &mut Vec<(Root, String)>, key: &(Root, String), meta: &Metadata) {
    if meta.nlink() > 1 {
        shared.push(key.clone());
    }
}

/// Records `name` as a top-level folder of `root` if it is one (and not a staging folder, or a
/// link that is not followed).
fn check_top_dir(root: Root, dir: &Path, name: &str, inside: &[PathBuf], found: &mut Found) {
    if is_staging_name(name) {
        return;
    }
    let path = dir.join(name);
    if fs::metadata(&path).is_ok_and(|m| m.is_dir()) && refused_link(&path, name, inside).is_none()
    {
        found.top_dirs.insert((root, name.to_string()));
    }
}

/// Why an entry named like a document (or a folder) is neither: a FIFO, a socket or a device.
/// Only its `stat` is ever looked at; it is never opened (opening a FIFO blocks).
fn special(meta: &Metadata, name: &str) -> Option<SkipReason> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let what = if t.is_fifo() {
        Special::Fifo
    } else if t.is_socket() {
        Special::Socket
    } else if t.is_block_device() || t.is_char_device() {
        Special::Device
    } else {
        return None;
    };
    let name = name.rsplit('/').next().unwrap_or(name);
    (is_markdown(name) || crate::store::is_temp_name(name)).then_some(SkipReason::NotRegular(what))
}

fn stat_of(meta: &Metadata) -> Stat {
    Stat {
        size: meta.len(),
        mtime: Stamp {
            secs: meta.mtime(),
            nanos: meta.mtime_nsec() as u32,
        },
        ctime: Stamp {
            secs: meta.ctime(),
            nanos: meta.ctime_nsec() as u32,
        },
        ino: meta.ino(),
    }
}

/// A recursive walk collecting `**/*.md` files. Symbolic links within the roots are followed,
/// but never back into a folder above (so a link loop ends). Sibling folders are
/// walked in parallel: a walk is mostly `stat` calls, which the kernel serves on every core.
/// Top-level folders are recorded when the walk starts at the root (`rel` empty).
///
/// A scoped walk (`rel` not empty, `linked` when its path crosses a link the whole walk
/// follows) that would enter a folder through a symbolic link of its own records nothing and
/// says so: the link may be new, and only a walk of the whole root can say which paths through
/// links it follows (`Walk::through_links`).
fn walk_tree(
    root: Root,
    dir: &Path,
    rel: String,
    linked: bool,
    inside: &[PathBuf],
    found: &mut Found,
) -> Scoped {
    let Ok(meta) = fs::metadata(dir) else {
        return Scoped::Walked;
    };
    // A scoped walk starts below the root: as in a full walk, a link back to one of the
    // folders above it is a loop.
    let above = if rel.is_empty() {
        0
    } else {
        rel.split('/').count()
    };
    let mut ancestors: Vec<(u64, u64)> = dir
        .ancestors()
        .skip(1)
        .take(above)
        .filter_map(|ancestor| fs::metadata(ancestor).ok())
        .map(|meta| (meta.dev(), meta.ino()))
        .collect();
    ancestors.reverse();
    let start = (meta.dev(), meta.ino());
    if ancestors.contains(&start) {
        // A scoped walk of a link back to a folder above it: as the full walk, a loop.
        found
            .unreadable
            .insert((root, rel), SkipReason::LinkToAncestor);
        return Scoped::Walked;
    }
    let scoped = !rel.is_empty();
    let walk = Walk { root, inside };
    ancestors.push(start);
    let start = Pending {
        path: dir.to_path_buf(),
        rel,
        ancestors,
        linked,
    };
    let mut part = walk.subtree(start, 0);
    if scoped && part.entered_a_link {
        return Scoped::MetALink;
    }
    let through_links = walk.through_links(std::mem::take(&mut part.through_links));
    let part = part.merge(through_links);
    if scoped && part.entered_a_link {
        return Scoped::MetALink;
    }
    found.files.extend(part.files);
    found.top_dirs.extend(part.top_dirs);
    found.unreadable.extend(part.unreadable);
    found.temps.extend(part.temps);
    if found.short.is_none() {
        found.short = part.short;
    }
    Scoped::Walked
}

/// Whether the folder at `rel` under the root folder `dir` is reached through a symbolic link
/// below the root: one of the folders on its way, itself included, is a link. One `lstat` per
/// folder below the root, as a scoped reconcile runs it for every changed file.
fn through_a_link(dir: &Path, rel: &str) -> bool {
    let mut path = dir.to_path_buf();
    rel.split('/').any(|segment| {
        path.push(segment);
        fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_symlink())
    })
}

/// Two relative paths in the order of their names, one folder level at a time (`a/b` before
/// `a-c`, which a comparison of whole strings puts first).
fn by_names(a: &str, b: &str) -> std::cmp::Ordering {
    a.split('/').cmp(b.split('/'))
}

/// Whether the whole walk, following every path through links, enters each folder on the way
/// to `rel` (its last part aside) under the root folder `dir`: no link on the way is refused,
/// and none leads back to a folder above it.
fn entered_on_the_way(dir: &Path, rel: &str, inside: &[PathBuf]) -> bool {
    let Some((folders, _)) = rel.rsplit_once('/') else {
        return true;
    };
    let Ok(meta) = fs::metadata(dir) else {
        return false;
    };
    let mut above = vec![(meta.dev(), meta.ino())];
    let mut path = dir.to_path_buf();
    folders.split('/').all(|segment| {
        path.push(segment);
        if refused_link(&path, segment, inside).is_some() {
            return false;
        }
        let Ok(meta) = fs::metadata(&path) else {
            return false;
        };
        let id = (meta.dev(), meta.ino());
        let entered = meta.is_dir() && !above.contains(&id);
        above.push(id);
        entered
    })
}

/// What one folder and everything under it holds; merged upwards by [`Walk::subtree`].
#[derive(Default)]
struct Part {
    files: Vec<((Root, String), Stat)>,
    top_dirs: Vec<(Root, String)>,
    unreadable: Vec<((Root, String), SkipReason)>,
    temps: Vec<((Root, String), PathBuf)>,
    short: Option<Short>,
    /// Folders reached through a symbolic link, left for [`Walk::through_links`].
    through_links: Vec<Pending>,
    /// Some folder was entered through a symbolic link listed here.
    entered_a_link: bool,
}

impl Part {
    fn merge(mut self, mut other: Part) -> Part {
        self.files.append(&mut other.files);
        self.top_dirs.append(&mut other.top_dirs);
        self.unreadable.append(&mut other.unreadable);
        self.temps.append(&mut other.temps);
        self.short = self.short.or(other.short);
        self.through_links.append(&mut other.through_links);
        self.entered_a_link |= other.entered_a_link;
        self
    }
}

/// One walk of a tree: what every folder's visit shares.
struct Walk<'a> {
    root: Root,
    /// See [`real_roots`].
    inside: &'a [PathBuf],
}

/// A folder still to list.
struct Pending {
    path: PathBuf,
    rel: String,
    /// The folders above it on its path, by device and inode, itself last.
    ancestors: Vec<(u64, u64)>,
    /// Whether its path crosses a symbolic link (below the root).
    linked: bool,
}

/// Folders this close to the start are walked as tasks of their own, in parallel; deeper ones
/// within their task's loop, so a deep tree needs no deep stack.
const PARALLEL_DEPTH: usize = 2;

impl Walk<'_> {
    /// Everything under one folder reached by its own path, its first levels in parallel; the
    /// folders under it reached through a link are left in `through_links`.
    fn subtree(&self, start: Pending, depth: usize) -> Part {
        let mut part = Part::default();
        let mut stack = vec![(start, depth)];
        let mut tasks = Vec::new();
        while let Some((folder, depth)) = stack.pop() {
            for child in self.list(folder, &mut part) {
                if child.linked {
                    part.through_links.push(child);
                } else if depth < PARALLEL_DEPTH {
                    tasks.push(child);
                } else {
                    stack.push((child, depth + 1));
                }
            }
        }
        tasks
            .into_par_iter()
            .map(|child| self.subtree(child, depth + 1))
            .reduce(Part::default, Part::merge)
            .merge(part)
    }

    /// The folders reached through symbolic links, and everything under them: one at a time,
    /// in the order of their paths compared name by name (depth first, each folder's names
    /// sorted), so that which paths into a folder past
    /// [`MAX_LINKED_PATHS_TO_A_FOLDER`] are not followed (each listed by `check`) is the same
    /// at every walk, whatever order the parallel walk found them in. Links are few in real
    /// trees; a tree built to multiply paths is bounded by the count.
    fn through_links(&self, mut pending: Vec<Pending>) -> Part {
        let mut part = Part::default();
        let mut entered: HashMap<(u64, u64), u32> = HashMap::new();
        // A stack popped in path order, each folder's own folders next.
        pending.sort_unstable_by(|a, b| by_names(&b.rel, &a.rel));
        while let Some(folder) = pending.pop() {
            let id = *folder
                .ancestors
                .last()
                .expect("a folder is its own last ancestor");
            let count = entered.entry(id).or_insert(0);
            *count += 1;
            if *count > MAX_LINKED_PATHS_TO_A_FOLDER {
                part.unreadable
                    .push(((self.root, folder.rel), SkipReason::TooManyLinkedPaths));
                continue;
            }
            let mut children = self.list(folder, &mut part);
            children.sort_unstable_by(|a, b| by_names(&b.rel, &a.rel));
            pending.append(&mut children);
        }
        part
    }

    /// Lists one folder into `part` and returns the folders in it to enter. A folder reached
    /// again below itself (a link loop) is not entered; one reached by several paths is walked
    /// under each (its own path always, and at most [`MAX_LINKED_PATHS_TO_A_FOLDER`] through
    /// links, see [`Walk::through_links`]), so what a file is listed as depends only on its
    /// own path.
    fn list(&self, folder: Pending, part: &mut Part) -> Vec<Pending> {
        let root = self.root;
        let Pending {
            path,
            rel,
            ancestors,
            linked,
        } = folder;
        let entries = match fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) => {
                if let Some(short) = short_of(&path, &e) {
                    part.short.get_or_insert(short);
                } else if !(rel.is_empty() && e.kind() == ErrorKind::NotFound) {
                    part.unreadable
                        .push(((root, rel), SkipReason::Unlistable(e.to_string())));
                }
                return Vec::new();
            }
        };
        let mut folders = Vec::new();
        for entry in entries.flatten() {
            let name = match entry.file_name().into_string() {
                Ok(name) => name,
                Err(raw) => {
                    if let Some((child_rel, why)) = not_utf8(&entry, &raw, &rel) {
                        part.unreadable.push(((root, child_rel), why));
                    }
                    continue;
                }
            };
            if is_staging_name(&name) {
                continue;
            }
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if is_link {
                if let Some(why) = refused_link(&entry.path(), &name, self.inside) {
                    part.unreadable.push(((root, child_rel), why));
                    continue;
                }
            }
            // `stat` only: nothing here opens a file, so a FIFO never blocks the walk.
            let meta = match fs::metadata(entry.path()) {
                Ok(meta) => meta,
                Err(e) => {
                    if let Some(why) = unreachable_entry(&entry, &name, &e) {
                        part.unreadable.push(((root, child_rel), why));
                    }
                    continue;
                }
            };
            if let Some(why) = special(&meta, &name) {
                part.unreadable.push(((root, child_rel), why));
                continue;
            }
            if meta.is_dir() {
                if rel.is_empty() {
                    part.top_dirs.push((root, name));
                }
                let id = (meta.dev(), meta.ino());
                if ancestors.contains(&id) {
                    part.unreadable
                        .push(((root, child_rel), SkipReason::LinkToAncestor));
                } else {
                    part.entered_a_link |= is_link;
                    folders.push(Pending {
                        path: entry.path(),
                        rel: child_rel,
                        ancestors: [ancestors.as_slice(), &[id]].concat(),
                        linked: linked || is_link,
                    });
                }
            } else if meta.is_file() && is_markdown(&name) {
                part.files.push(((root, child_rel), stat_of(&meta)));
            } else if meta.is_file() && is_upstream_copy(&name) {
                part.unreadable
                    .push(((root, child_rel), SkipReason::UpstreamCopy));
            } else if meta.is_file() && crate::store::is_temp_name(&name) {
                part.temps.push(((root, child_rel), entry.path()));
            }
        }
        folders
    }
}

/// The `check` row of an entry of the folder `parent` (relative) whose name is not UTF-8
/// (`raw`): a folder (a link to one included), or a file named like a document, keyed by its
/// path with each byte that is not UTF-8 written `\xNN` (so two such names never share a
/// row); `None` for anything else, which the walk would pass over whatever its name.
fn not_utf8(
    entry: &fs::DirEntry,
    raw: &std::ffi::OsStr,
    parent: &str,
) -> Option<(String, SkipReason)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = raw.as_bytes();
    let folder = fs::metadata(entry.path()).is_ok_and(|meta| meta.is_dir());
    let document = bytes.len() > 3 && bytes.ends_with(b".md");
    if !(folder || document) {
        return None;
    }
    let mut name = String::new();
    for chunk in bytes.utf8_chunks() {
        name.push_str(chunk.valid());
        for byte in chunk.invalid() {
            name.push_str(&format!("\\x{byte:02X}"));
        }
    }
    let rel = if parent.is_empty() {
        name
    } else {
        format!("{parent}/{name}")
    };
    Some((rel, SkipReason::NameNotUtf8 { folder }))
}

/// The name of an entry of a shallow root, or `None` when it is not UTF-8, which `check` then
/// lists if the entry could be one of the root's (a folder, or a file: `folder`).
fn shallow_name(
    root: Root,
    entry: &fs::DirEntry,
    folder: bool,
    found: &mut Found,
) -> Option<String> {
    let raw = match entry.file_name().into_string() {
        Ok(name) => return Some(name),
        Err(raw) => raw,
    };
    if let Some((rel, why)) = not_utf8(entry, &raw, "") {
        if why == (SkipReason::NameNotUtf8 { folder }) {
            found.unreadable.insert((root, rel), why);
        }
    }
    None
}

/// The entries of the shallow root `dir`; `None` when it cannot be listed, which `check`
/// lists (beside the root's own path) unless the folder does not exist: a root is optional.
fn read_root(root: Root, dir: &Path, found: &mut Found) -> Option<fs::ReadDir> {
    match fs::read_dir(dir) {
        Ok(entries) => Some(entries),
        Err(e) => {
            if let Some(short) = short_of(dir, &e) {
                found.short.get_or_insert(short);
            } else if e.kind() != ErrorKind::NotFound {
                found
                    .unreadable
                    .insert((root, String::new()), SkipReason::Unlistable(e.to_string()));
            }
            None
        }
    }
}

/// `agents_skills_folder` (and the global one) is shallow: only `<dir>/SKILL.md` is an entry.
fn walk_agents_skills(root: Root, dir: &Path, inside: &[PathBuf], found: &mut Found) {
    let Some(entries) = read_root(root, dir, found) else {
        return;
    };
    for entry in entries.flatten() {
        // Only a folder can hold an entry here.
        let Some(name) = shallow_name(root, &entry, true, found) else {
            continue;
        };
        if let Some(why) = refused_link(&entry.path(), &name, inside) {
            found.unreadable.insert((root, name), why);
            continue;
        }
        skill_folder_entry(root, dir, &name, inside, found);
    }
}

/// Looks at the `SKILL.md` of the folder `name` of an agents skills root `dir`: its stat into
/// `found`, or why it is skipped (a link that leads out, a special file, a folder this process
/// may not enter). Returns the key and stat of a regular file (for a scoped walk's other
/// names). The full and the scoped walk both look through it, so they find the same.
fn skill_folder_entry(
    root: Root,
    dir: &Path,
    name: &str,
    inside: &[PathBuf],
    found: &mut Found,
) -> Option<((Root, String), Metadata)> {
    let skill = format!("{name}/{AGENTS_SKILL_FILE}");
    if let Some(why) = refused_link(&dir.join(&skill), &skill, inside) {
        found.unreadable.insert((root, skill), why);
        return None;
    }
    match fs::metadata(dir.join(&skill)) {
        Ok(meta) => {
            let key = (root, skill);
            if let Some(why) = special(&meta, AGENTS_SKILL_FILE) {
                found.unreadable.insert(key, why);
                None
            } else if meta.is_file() {
                found.files.insert(key.clone(), stat_of(&meta));
                Some((key, meta))
            } else {
                None
            }
        }
        // A folder this process may not enter hides its `SKILL.md`, if it has one.
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            found.unreadable.insert(
                (root, name.to_string()),
                SkipReason::Unlistable(e.to_string()),
            );
            None
        }
        Err(_) => None,
    }
}

/// `agents_folder` (and the global one) holds direct `<id>.md` files; nested files are ignored.
fn walk_flat(root: Root, dir: &Path, inside: &[PathBuf], found: &mut Found) {
    let Some(entries) = read_root(root, dir, found) else {
        return;
    };
    for entry in entries.flatten() {
        // Only a file can be a document here.
        let Some(name) = shallow_name(root, &entry, false, found) else {
            continue;
        };
        if crate::store::is_temp_name(&name) && entry.file_type().is_ok_and(|t| t.is_file()) {
            found.temps.push(((root, name.clone()), entry.path()));
        }
        if is_upstream_copy(&name) && entry.file_type().is_ok_and(|t| t.is_file()) {
            found
                .unreadable
                .insert((root, name.clone()), SkipReason::UpstreamCopy);
        }
        if !is_markdown(&name) {
            continue;
        }
        if let Some(why) = refused_link(&entry.path(), &name, inside) {
            found.unreadable.insert((root, name), why);
            continue;
        }
        if let Ok(meta) = fs::metadata(entry.path()) {
            if let Some(why) = special(&meta, &name) {
                found.unreadable.insert((root, name), why);
            } else if meta.is_file() {
                found.files.insert((root, name), stat_of(&meta));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// `skills/team` (two skills) reached also through `skills/alias -> team`, and a folder of
    /// its own, `skills/plain`.
    fn linked_tree() -> (tempfile::TempDir, Roots) {
        let base = tempfile::tempdir().unwrap();
        let skills = base.path().join("skills");
        for rel in ["team/one/index.md", "team/two.md", "plain/index.md"] {
            let path = skills.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "# A skill\n\nx\n").unwrap();
        }
        symlink("team", skills.join("alias")).unwrap();
        let roots = Roots::new(
            skills,
            base.path().join("local"),
            base.path().join(".agents/skills"),
            base.path().join("agents"),
        );
        (base, roots)
    }

    fn scoped(roots: &Roots, rels: &[&str], bounded: &[Root]) -> Found {
        let paths: Vec<PathBuf> = rels
            .iter()
            .map(|rel| roots.file(Root::Skills, rel))
            .collect();
        walk_scoped(roots, &paths, &bounded.iter().copied().collect())
    }

    /// What a scoped walk found (files, or `check` rows) is what the whole walk found in its
    /// scopes.
    fn assert_as_whole<V: PartialEq + std::fmt::Debug>(
        found: &Found,
        scoped: &BTreeMap<(Root, String), V>,
        whole: &BTreeMap<(Root, String), V>,
    ) {
        let expected: Vec<_> = found
            .covered(whole)
            .into_iter()
            .map(|key| (key, &whole[key]))
            .collect();
        assert_eq!(
            scoped.iter().collect::<Vec<_>>(),
            expected,
            "{:?}",
            found.scopes
        );
    }

    fn walked_whole(found: &Found) -> bool {
        found.scopes.contains(&(Root::Skills, String::new()))
    }

    #[test]
    fn a_path_below_a_link_is_walked_by_itself_unless_the_bound_turned_paths_away() {
        let (base, roots) = linked_tree();
        symlink("missing.md", base.path().join("skills/team/dangling.md")).unwrap();
        let whole = walk(&roots);
        for rels in [
            &["alias/two.md"][..],
            &["alias/one"],
            &["alias/one/index.md", "team/one/index.md"],
            &["alias/gone.md"],
            &["alias/dangling.md"],
        ] {
            let found = scoped(&roots, rels, &[]);
            assert!(!walked_whole(&found), "{rels:?}: {:?}", found.scopes);
            assert_as_whole(&found, &found.files, &whole.files);
            assert_as_whole(&found, &found.unreadable, &whole.unreadable);
            // Where the bound turned paths away, only a whole walk says which it follows.
            assert!(
                walked_whole(&scoped(&roots, rels, &[Root::Skills])),
                "{rels:?}"
            );
        }
        // There, even a path beside the links: it may be a link's old name.
        assert!(walked_whole(&scoped(
            &roots,
            &["plain/index.md"],
            &[Root::Skills]
        )));
        assert!(!walked_whole(&scoped(&roots, &["plain/index.md"], &[])));
    }

    #[test]
    fn paths_through_links_are_taken_in_order_of_their_names() {
        use std::cmp::Ordering::*;
        assert_eq!(by_names("a/b", "a-c"), Less);
        assert_eq!(by_names("a/b/c", "a/b"), Greater);
        assert_eq!(by_names("ns02/x", "ns10"), Less);
        assert_eq!(by_names("a/b", "a/b"), Equal);
    }

    #[test]
    fn a_link_made_or_met_by_a_scoped_walk_sends_it_to_the_whole_root() {
        let (base, roots) = linked_tree();
        let skills = base.path().join("skills");
        // The link itself, as when it is made or points elsewhere.
        assert!(walked_whole(&scoped(&roots, &["alias"], &[])));
        // A folder with a link in it, as when it is moved in.
        symlink("../plain", skills.join("team/also")).unwrap();
        assert!(walked_whole(&scoped(&roots, &["team"], &[])));
        assert!(!walked_whole(&scoped(&roots, &["alias/one"], &[])));
        // Below a link back up, which the whole walk does not enter.
        symlink("..", skills.join("team/up")).unwrap();
        assert!(walked_whole(&scoped(
            &roots,
            &["alias/up/plain/index.md"],
            &[]
        )));
    }

    #[test]
    fn a_folder_unlisted_for_want_of_descriptors_or_memory_is_short_not_skipped() {
        let path = Path::new("/srv/skills/ops");
        for errno in [libc::EMFILE, libc::ENFILE, libc::ENOMEM] {
            let short = short_of(path, &std::io::Error::from_raw_os_error(errno));
            assert_eq!(short.map(|s| s.errno), Some(errno));
        }
        for errno in [libc::EACCES, libc::ENOENT, libc::ENOTDIR, libc::EIO] {
            assert_eq!(
                short_of(path, &std::io::Error::from_raw_os_error(errno)),
                None
            );
        }
        let error = short_of(path, &std::io::Error::from_raw_os_error(libc::EMFILE))
            .unwrap()
            .error()
            .to_string();
        assert!(
            error.starts_with("list the folder /srv/skills/ops: "),
            "{error}"
        );
    }
}
