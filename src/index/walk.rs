//! Walking the roots: which candidate files exist and their stat, without reading any content.
//! This is the part of every reconcile that cannot be skipped, so it does nothing else.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::Roots;
use super::records::{Root, Stat};
use crate::time::Stamp;

/// The file name that makes a folder of `agents_skills_folder` a skill.
pub const AGENTS_SKILL_FILE: &str = "SKILL.md";

/// What a walk of all roots found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// Candidate markdown files by root and `/`-separated path relative to the root.
    pub files: BTreeMap<(Root, String), Stat>,
    /// Top-level folder names of `skills_folder` and `local_skills_folder` (namespace shadowing
    /// looks at folders, even empty ones).
    pub top_dirs: BTreeSet<(Root, String)>,
    /// Folders that could not be listed, with why.
    pub unreadable: BTreeMap<(Root, String), String>,
}

pub fn walk(roots: &Roots) -> Found {
    let mut found = Found::default();
    for root in Root::ALL {
        let dir = roots.path(root);
        match root {
            Root::Skills | Root::LocalSkills => walk_tree(root, dir, &mut found),
            Root::AgentsSkills => walk_agents_skills(dir, &mut found),
            Root::Agents => walk_flat(root, dir, &mut found),
        }
    }
    found
}

pub fn stat_of(meta: &Metadata) -> Stat {
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

pub fn is_markdown(name: &str) -> bool {
    name.len() > 3 && name.ends_with(".md")
}

/// A recursive walk collecting `**/*.md` files. Symbolic links are followed, but a folder is
/// entered at most once (by device and inode) so that a link loop ends.
fn walk_tree(root: Root, dir: &Path, found: &mut Found) {
    let mut seen = HashSet::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        let Ok(meta) = fs::metadata(&path) else {
            continue;
        };
        if !seen.insert((meta.dev(), meta.ino())) {
            continue;
        }
        let entries = match fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) => {
                if !(rel.is_empty() && e.kind() == std::io::ErrorKind::NotFound) {
                    found.unreadable.insert((root, rel), e.to_string());
                }
                continue;
            }
        };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let Ok(meta) = fs::metadata(entry.path()) else {
                continue;
            };
            if meta.is_dir() {
                if rel.is_empty() {
                    found.top_dirs.insert((root, name));
                }
                stack.push((entry.path(), child_rel));
            } else if meta.is_file() && is_markdown(&name) {
                found.files.insert((root, child_rel), stat_of(&meta));
            }
        }
    }
}

/// `agents_skills_folder` is shallow: only `<dir>/SKILL.md` is an entry.
fn walk_agents_skills(dir: &Path, found: &mut Found) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let skill = entry.path().join(AGENTS_SKILL_FILE);
        if let Ok(meta) = fs::metadata(&skill) {
            if meta.is_file() {
                found.files.insert(
                    (Root::AgentsSkills, format!("{name}/{AGENTS_SKILL_FILE}")),
                    stat_of(&meta),
                );
            }
        }
    }
}

/// `agents_folder` holds direct `<id>.md` files; nested files are ignored.
fn walk_flat(root: Root, dir: &Path, found: &mut Found) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !is_markdown(&name) {
            continue;
        }
        if let Ok(meta) = fs::metadata(entry.path()) {
            if meta.is_file() {
                found.files.insert((root, name), stat_of(&meta));
            }
        }
    }
}
