//! The layout rules the configured folders must keep, checked at every open (the worker at
//! boot, every command of the CLI), whatever the settings came from (the `--config` seed, the
//! defaults, or a value stored in the engine's configuration worker, which any caller on the
//! bus may have set):
//!
//! 1. No root is the filesystem root `/`: a root is walked whole and written to. No writable
//!    root (`skills_folder`, `local_skills_folder`, `agents_folder`, and `global_agents_folder`,
//!    whose profiles are updated and deleted in place) is a system folder, a top-level shared
//!    one (`/home`, `/tmp`, …) or the home folder.
//! 2. The index (and the files beside it: its texts store, its stamps, the landing folder) is
//!    inside no root: it would be listed as that root's files, and a write there would land on
//!    the index, or the index's rebuild on a skill. Nor is a root named as a file beside the
//!    index (`<index>.sync`): the worker removes those.
//! 3. Roots overlap only as the contract's defaults do: `local_skills_folder` may lie inside
//!    `skills_folder` (by default it is `skills/iii`). No two roots are the same folder, and no
//!    other root lies inside `skills_folder` or `local_skills_folder`, which are walked
//!    recursively (its files would be served twice, under two roles). The shallow roots
//!    (`agents_folder`, `agents_skills_folder` and the user-global `global_agents_folder`,
//!    `global_agents_skills_folder`, checked only when set) read only their direct entries, so
//!    a folder inside them is not theirs to serve and may be another root. A global root that
//!    is the same folder as its project one (the worker run from the home folder) is refused
//!    like any other pair: its files would be served twice.
//!
//! Paths are compared after `.` and `..` are resolved and links are followed as far as the
//! path exists, so `/srv/..`, or a link to `/`, is `/`.

use std::path::{Component, Path, PathBuf};

use super::{ConfigError, Paths};

/// A root, by its configuration key (this leaf does not reach `roots`, which builds on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Root {
    Skills,
    LocalSkills,
    AgentsSkills,
    Agents,
    GlobalAgentsSkills,
    GlobalAgents,
}

impl Root {
    fn config_key(self) -> &'static str {
        match self {
            Root::Skills => "skills_folder",
            Root::LocalSkills => "local_skills_folder",
            Root::AgentsSkills => "agents_skills_folder",
            Root::Agents => "agents_folder",
            Root::GlobalAgentsSkills => "global_agents_skills_folder",
            Root::GlobalAgents => "global_agents_folder",
        }
    }
}

/// The configured roots (the global ones only when set).
fn roots(paths: &Paths) -> Vec<(Root, &Path)> {
    let mut roots: Vec<(Root, &Path)> = [
        (Root::Skills, &paths.skills_folder),
        (Root::LocalSkills, &paths.local_skills_folder),
        (Root::AgentsSkills, &paths.agents_skills_folder),
        (Root::Agents, &paths.agents_folder),
    ]
    .map(|(root, path)| (root, path.as_path()))
    .to_vec();
    let globals = [
        (Root::GlobalAgentsSkills, &paths.global_agents_skills_folder),
        (Root::GlobalAgents, &paths.global_agents_folder),
    ];
    for (root, path) in globals {
        if let Some(path) = path {
            roots.push((root, path.as_path()));
        }
    }
    roots
}

/// Whether the worker writes and deletes files in the root (on a caller's request over the bus).
/// The user-global agents folder is: its profiles are updated and deleted in place.
fn writable(root: Root) -> bool {
    matches!(
        root,
        Root::Skills | Root::LocalSkills | Root::Agents | Root::GlobalAgents
    )
}

/// Folders of the system that hold no one's skills, walked whole and written to by no root.
const SYSTEM_TREES: [&str; 9] = [
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/proc", "/sys",
];
/// Top-level folders that hold everyone's files: a root may lie inside them, never be one.
const SHARED_TOPS: [&str; 17] = [
    "/home",
    "/root",
    "/var",
    "/var/tmp",
    "/var/lib",
    "/var/log",
    "/var/cache",
    "/var/spool",
    "/opt",
    "/srv",
    "/tmp",
    "/mnt",
    "/media",
    "/run",
    "/run/user",
    "/dev",
    "/dev/shm",
];

/// Why a writable root may not be `path`: a system folder (or inside one), a top-level shared
/// folder, or the home folder (or a folder above it). A root's `.md` files are deleted and
/// overwritten by any caller of the bus, so a stored configuration pointing one at the home
/// folder would hand that caller every note in it.
fn system_folder(path: &Path) -> Option<String> {
    if let Some(tree) = SYSTEM_TREES.iter().find(|tree| path.starts_with(tree)) {
        return Some(format!(
            "lies in {tree}, a system folder; a writable root's files are rewritten and deleted on request"
        ));
    }
    let home = std::env::var_os("HOME").map(|home| normalize(Path::new(&home)));
    if let Some(home) = home.filter(|home| home.parent().is_some() && home.starts_with(path)) {
        return Some(format!(
            "is the home folder ({}) or holds it; give the root a folder of its own inside it",
            home.display()
        ));
    }
    SHARED_TOPS
        .iter()
        .any(|top| path == Path::new(top))
        .then(|| {
            "is a folder many programs' or users' files share; give the root a folder of its own \
             inside it"
                .into()
        })
}

/// Whether `path` is, or lies inside, a file named as the index's files beside it are
/// (`<index>.sync`, `<index>.texts`, `<index>.holder`, …).
fn beside_index(index: &Path, path: &Path) -> bool {
    let (Some(folder), Some(name)) = (index.parent(), index.file_name()) else {
        return false;
    };
    let first = path
        .strip_prefix(folder)
        .ok()
        .and_then(|rest| rest.components().next());
    first.is_some_and(|first| {
        first
            .as_os_str()
            .as_encoded_bytes()
            .strip_prefix(name.as_encoded_bytes())
            .is_some_and(|rest| rest.starts_with(b"."))
    })
}

/// Whether the root is walked recursively (anything under it is its file).
fn recursive(root: Root) -> bool {
    matches!(root, Root::Skills | Root::LocalSkills)
}

/// Checks the rules above; the first broken one is the error.
pub fn check(paths: &Paths) -> Result<(), ConfigError> {
    let roots: Vec<(Root, PathBuf)> = roots(paths)
        .into_iter()
        .map(|(root, path)| (root, normalize(path)))
        .collect();
    let unsafe_value = |key: &'static str, path: &Path, why: String| ConfigError::Unsafe {
        key,
        path: path.to_path_buf(),
        why,
    };
    for (root, path) in &roots {
        if path.parent().is_none() {
            return Err(unsafe_value(
                root.config_key(),
                path,
                "is the filesystem root; a root is walked whole and written to".into(),
            ));
        }
    }
    for (root, path) in roots.iter().filter(|(root, _)| writable(*root)) {
        if let Some(why) = system_folder(path) {
            return Err(unsafe_value(root.config_key(), path, why));
        }
    }
    let index = normalize(&paths.index_path);
    if index.parent().is_none() {
        return Err(unsafe_value(
            "index_path",
            &index,
            "is the filesystem root".into(),
        ));
    }
    // The innermost root first, so that a message names the folder closest to the file.
    let mut by_depth: Vec<&(Root, PathBuf)> = roots.iter().collect();
    by_depth.sort_by_key(|(_, path)| std::cmp::Reverse(path.components().count()));
    for (root, path) in by_depth.iter().copied() {
        if index.starts_with(path) {
            return Err(unsafe_value(
                "index_path",
                &paths.index_path,
                format!(
                    "lies inside {} ({}); the index must live outside every root, or it would \
                     be served and overwritten as that root's files",
                    root.config_key(),
                    path.display()
                ),
            ));
        }
    }
    // Nor is a root, or a folder above one, named as the files beside the index are
    // (`<index>.sync`, `<index>.texts`, …): the worker makes, empties and removes those.
    if let Some((root, path)) = roots.iter().find(|(_, path)| beside_index(&index, path)) {
        return Err(unsafe_value(
            root.config_key(),
            path,
            format!(
                "is named as a file beside index_path ({}.sync, {}.texts, …), which the worker \
                 makes and removes; give the root or the index another name",
                index.display(),
                index.display()
            ),
        ));
    }
    // The lock is data of ours beside the skills: never a document the walk would serve, never
    // a root or the index.
    let lock = normalize(&paths.bundles_lock);
    let lock_refused = if lock
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
    {
        Some("ends in .md, so the index would read it as a document".to_string())
    } else if lock.parent().is_none() || lock == index {
        Some("is the filesystem root or the index file".to_string())
    } else if beside_index(&index, &lock) {
        Some(format!(
            "is named as a file beside index_path ({}.holder, {}.texts, …), which the worker writes",
            index.display(),
            index.display()
        ))
    } else {
        roots
            .iter()
            .find(|(_, path)| *path == lock)
            .map(|(root, _)| format!("is the folder of {}", root.config_key()))
    };
    if let Some(why) = lock_refused {
        return Err(unsafe_value("bundles_lock_path", &paths.bundles_lock, why));
    }
    for (i, (a, a_path)) in roots.iter().enumerate() {
        if let Some((b, _)) = roots[i + 1..].iter().find(|(_, b_path)| b_path == a_path) {
            return Err(unsafe_value(
                b.config_key(),
                a_path,
                format!(
                    "is the same folder as {}; each root needs a folder of its own",
                    a.config_key()
                ),
            ));
        }
    }
    for (outer, outer_path) in by_depth
        .iter()
        .copied()
        .filter(|(root, _)| recursive(*root))
    {
        for (inner, inner_path) in &roots {
            let allowed = *outer == Root::Skills && *inner == Root::LocalSkills;
            if outer == inner || allowed || !inner_path.starts_with(outer_path) {
                continue;
            }
            return Err(unsafe_value(
                inner.config_key(),
                inner_path,
                format!(
                    "lies inside {} ({}); only local_skills_folder may lie inside skills_folder",
                    outer.config_key(),
                    outer_path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// `path` with `.` and `..` resolved and links followed as far as it exists.
pub fn normalize(path: &Path) -> PathBuf {
    let written = lexical(path);
    // The deepest existing ancestor, with its links resolved, then the rest as written.
    let mut existing = written.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let joined = rest.iter().rev().fold(real, |acc: PathBuf, c| acc.join(c));
            return lexical(&joined);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return written,
        }
    }
}

/// `.` dropped and `..` applied to what precedes it, without touching the disk (nor through
/// links: `skills/../skills/a.md` is `skills/a.md`, as a person reads it).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // `/..` is `/`; a relative path keeps a leading `..`.
                if !out.pop() && !out.has_root() {
                    out.push(component);
                }
            }
            other => out.push(other),
        }
    }
    out
}
