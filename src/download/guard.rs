//! What a bundle may touch (SECURITY.md, "What a bundle may do"). A bundle may create files,
//! and may change the files it installed itself; everything else it would touch refuses the
//! whole bundle, with a coded error naming the file, before anything is written:
//!
//! - **Reserved namespaces** (`D331`): a bundle never lands in a folder the routing or the
//!   writes give a meaning of their own: `system-prompts` (where `system-prompts::create`
//!   writes), `prompts` and `agents` (folder words the scan classifies), and the namespaces of
//!   the skills compiled into the binary (`iii-directory`). Compared without case, so a
//!   case-insensitive file system cannot be used to reach them.
//! - **What is not its own** (`D330`): an existing file is replaced only when the bundle's
//!   record lists it with the hash of the bytes it has now, that is, when this bundle wrote
//!   it and nobody changed it since; or when it already holds exactly the bytes the bundle
//!   brings, inside the bundle's own namespace folder (a re-pull of a bundle landed before
//!   records existed). A file the record lists that someone edited since is not refused: it
//!   is kept as it is and reported (`OnEdited::Keep`, `kept_local`), or replaced when the
//!   download is forced. An agent profile or system prompt named like a bundled one (`iii`,
//!   `iii-minimal`, `iii-runtime`, …), and a system prompt whose name is already served from a
//!   file that is not the bundle's own (the user's, another namespace's), are refused too.
//! - **Read as something else** (`D330`): a file is refused when a root that also sees it
//!   (roots may be nested: the default `local_skills_folder`, `skills/iii`, sits inside
//!   `skills_folder`) would read it as another namespace, as an agent profile, or as an agents
//!   skill. And the one overlap the contract's defaults make, `<skills_folder>/<namespace>` being
//!   `local_skills_folder` itself (the engine skill `iii` in the default layout), is resolved
//!   by landing that bundle one level down, in `<local_skills_folder>/<namespace>/`, where both
//!   roots read it as the bundle's own namespace ([`namespace_folder`]).
//!
//! The record of what a bundle wrote is `<namespace folder>/.iii-bundle-files` (JSON: each
//! landed file's root and path with the blake3 of the bytes it wrote). It lands in the same
//! all-or-nothing landing as the files it describes, so it never disagrees with them, and like
//! the completion marker its name starts with a dot and does not end in `.md`: the index never
//! serves it, and no bundle can write it (bundle paths have no dot names).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::bundled;
use crate::code::Code;
use crate::config::Paths;
use crate::doc::ParsedDoc;
use crate::doc::classify::{PathClass, classify};
use crate::doc::ids::first_segment;
use crate::doc::paths::is_markdown;
use crate::error::{Error, Result};
use crate::rules::Reading;
use crate::rules::prompt;

use crate::store::landing::{Dest, FileToLand as File};

/// The per-namespace record of what the bundle wrote.
pub const RECORD_FILE: &str = ".iii-bundle-files";
/// The record's format version.
const RECORD_SCHEMA: u32 = 1;
/// The largest record read; a bundle of `download_max_files` files needs far less.
const MAX_RECORD_BYTES: u64 = 16 << 20;

/// Namespace names the routing or the writes give a meaning of their own.
const RESERVED_WORDS: [&str; 3] = ["system-prompts", "prompts", "agents"];

/// Every reserved namespace: [`RESERVED_WORDS`] and the bundled skills' namespaces.
pub fn reserved_namespaces() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = RESERVED_WORDS.to_vec();
    for file in bundled::SKILLS {
        let ns = first_segment(file.id);
        if !names.contains(&ns) {
            names.push(ns);
        }
    }
    names
}

/// Refuses a namespace no bundle may land in (compared without case).
pub fn check_namespace(namespace: &str) -> Result<()> {
    let folded = namespace.to_ascii_lowercase();
    if let Some(word) = reserved_namespaces().into_iter().find(|w| *w == folded) {
        let why = if RESERVED_WORDS.contains(&word) {
            "a folder the worker gives a meaning of its own"
        } else {
            "the namespace of the skills bundled with the worker"
        };
        return Err(Error::coded(
            Code::BundleNamespaceReserved,
            format!(
                "namespace {namespace:?} is reserved ({why}); no bundle may be downloaded into it, and nothing was written."
            ),
            &[],
        ));
    }
    Ok(())
}

/// The folder, relative to `skills_folder`, that `namespace`'s bundle lands in:
/// `<namespace>`, or `<namespace>/<namespace>` when `<skills_folder>/<namespace>` is
/// `local_skills_folder` itself (the default layout's `skills/iii`), so that both roots read
/// the bundle as its own namespace.
pub fn namespace_folder(paths: &Paths, namespace: &str) -> String {
    if real(&paths.skills_folder.join(namespace)) == real(&paths.local_skills_folder) {
        format!("{namespace}/{namespace}")
    } else {
        namespace.to_string()
    }
}

/// Where a bundle file routed for `<skills_folder>/<namespace>/` sits under its root, the
/// namespace's folder being `folder` ([`namespace_folder`]).
pub fn placed_rel(folder: &str, namespace: &str, dest: Dest, rel: &str) -> String {
    if dest == Dest::Skills && folder != namespace {
        let rest = rel
            .strip_prefix(namespace)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or(rel);
        format!("{folder}/{rest}")
    } else {
        rel.to_string()
    }
}

/// The record of what a bundle wrote, by `<dest word>/<path under the dest root>`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    schema: u32,
    namespace: String,
    files: BTreeMap<String, String>,
}

fn record_key(dest: Dest, rel: &str) -> String {
    format!("{}/{rel}", dest.word())
}

fn hash_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The record at `path`, or an empty one when there is none or it cannot be used (then the
/// bundle owns nothing, which refuses more, never less).
fn read_record(path: &Path, namespace: &str) -> Record {
    let read = || -> Option<Record> {
        if !fs::symlink_metadata(path).ok()?.is_file() {
            return None;
        }
        let mut bytes = Vec::new();
        fs::File::open(path)
            .ok()?
            .take(MAX_RECORD_BYTES)
            .read_to_end(&mut bytes)
            .ok()?;
        let record: Record = serde_json::from_slice(&bytes).ok()?;
        (record.schema == RECORD_SCHEMA && record.namespace == namespace).then_some(record)
    };
    read().unwrap_or_default()
}

/// Whether `namespace`'s folder holds a readable record of what its bundle wrote.
pub fn has_record(paths: &Paths, namespace: &str) -> bool {
    let folder = namespace_folder(paths, namespace);
    let path = paths.skills_folder.join(format!("{folder}/{RECORD_FILE}"));
    !read_record(&path, namespace).files.is_empty()
}

/// Whether the file at `dest`/`rel` (placed) holds exactly what `namespace`'s bundle last wrote
/// there, by its record: the bundle's own bytes, unedited since, whatever the lock says.
pub fn unedited(paths: &Paths, namespace: &str, dest: Dest, rel: &str) -> bool {
    let folder = namespace_folder(paths, namespace);
    let record = read_record(
        &paths.skills_folder.join(format!("{folder}/{RECORD_FILE}")),
        namespace,
    );
    let root = dest.bundle_root(paths);
    record
        .files
        .get(&record_key(dest, rel))
        .is_some_and(|hash| file_hash(&root.join(rel)).as_ref() == Some(hash))
}

/// What a file on disk holds: its blake3, or `None` when it is not a regular file (the
/// landing's own checks refuse folders and links in the way).
fn file_hash(path: &Path) -> Option<String> {
    if !fs::symlink_metadata(path).ok()?.is_file() {
        return None;
    }
    let mut hasher = blake3::Hasher::new();
    let mut file = fs::File::open(path).ok()?;
    std::io::copy(&mut file, &mut hasher).ok()?;
    Some(hasher.finalize().to_hex().to_string())
}

/// The file the system prompt of a name is served from, as the index knows it (`None` when no
/// file serves it).
pub type ServedPrompt<'a> = &'a dyn Fn(&str) -> Result<Option<PathBuf>>;

/// What a landing does with a file this bundle installed and someone changed since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnEdited {
    /// Keep the local copy; the file is reported in `kept_local` (the default).
    Keep,
    /// Replace it with the bundle's bytes (`force: true`).
    Overwrite,
}

/// A bundle's files, placed and checked against the tree, ready to land.
pub struct Checked {
    /// What lands: the bundle's files and its updated record.
    pub files: Vec<File>,
    /// The bundle's files that do not land because they were edited locally (placed like
    /// `files`, with the upstream bytes).
    pub kept_local: Vec<File>,
    /// The namespace's folder under `skills_folder` ([`namespace_folder`]).
    pub folder: String,
}

/// What an update's landing does to the bundle's record beyond the files it lands.
#[derive(Clone, Copy, Default)]
pub struct Beyond<'a> {
    /// Placed paths the landing removes: the record forgets them.
    pub removed: &'a [(Dest, String)],
    /// Bundle files (placed, with upstream's bytes) that stay as the user has them though the
    /// lock lists them: the record claims those it does not list yet ([`claim_kept`]).
    pub kept: &'a [File],
    /// The files the bundles lock lists for the namespace (placed), with their size and
    /// sha256: the bundle's own when its record is lost and they hold those bytes
    /// ([`recover_record`]).
    pub locked: &'a [LockedBytes],
}

/// A file as the bundles lock lists it.
#[derive(Clone, Debug)]
pub struct LockedBytes {
    pub dest: Dest,
    /// Placed, relative to the dest root.
    pub rel: String,
    pub size: u64,
    pub sha256: String,
}

/// A namespace whose record is lost (`.iii-bundle-files` not committed beside the lock, say)
/// takes it back from the bundles lock, which the same landing wrote: a file the lock lists
/// that holds the locked bytes is the bundle's own. Without this the bundle would own nothing,
/// and every update or restore of a bundle with an agent profile would be refused. A file with
/// other bytes stays unowned (refused, named): nothing says whose edit it is.
fn recover_record(record: &mut Record, paths: &Paths, locked: &[LockedBytes]) {
    for file in locked {
        let path = file.dest.bundle_root(paths).join(&file.rel);
        // One read gives both hashes, so the bytes adopted are the bytes compared.
        let bytes = match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() == file.size => fs::read(&path).ok(),
            _ => None,
        };
        let Some(bytes) = bytes else {
            continue;
        };
        let sha256 = format!("{:x}", sha2::Sha256::digest(&bytes));
        if sha256.eq_ignore_ascii_case(&file.sha256) {
            record
                .files
                .insert(record_key(file.dest, &file.rel), hash_hex(&bytes));
        }
    }
}

/// Places `files` (routed for `<skills_folder>/<namespace>/`) in the namespace's folder,
/// checks every one against what is on disk and in the index (see the module doc), and adds
/// the bundle's updated record, which forgets the files `beyond.removed` and claims the files
/// `beyond.kept`. Nothing is written.
pub fn check(
    paths: &Paths,
    namespace: &str,
    files: Vec<File>,
    served_prompt: ServedPrompt<'_>,
    (on_edited, beyond): (OnEdited, Beyond<'_>),
) -> Result<Checked> {
    check_namespace(namespace)?;
    let folder = namespace_folder(paths, namespace);
    if files.is_empty() && beyond.removed.is_empty() && beyond.kept.is_empty() {
        return Ok(Checked {
            files,
            kept_local: Vec::new(),
            folder,
        });
    }
    let files: Vec<File> = files
        .into_iter()
        .map(|mut file| {
            file.rel = placed_rel(&folder, namespace, file.dest, &file.rel);
            file
        })
        .collect();
    let record_rel = format!("{folder}/{RECORD_FILE}");
    let mut record = read_record(&paths.skills_folder.join(&record_rel), namespace);
    let record_lost = record.files.is_empty();
    if record_lost {
        recover_record(&mut record, paths, beyond.locked);
    }
    let own_prefix = format!("{folder}/");
    let shown = |file: &File| match file.dest {
        Dest::Agents => format!("agents/{}", file.rel),
        Dest::Skills | Dest::BundlesLock => file
            .rel
            .strip_prefix(&own_prefix)
            .unwrap_or(&file.rel)
            .to_string(),
    };
    let refuse = |file: &File, why: String| {
        Err(Error::coded(
            Code::BundleConflict,
            format!(
                "bundle file {:?} {why}; the bundle was refused and nothing was written.",
                shown(file)
            ),
            &[],
        ))
    };
    let roots = Reals::of(paths);
    // The files that are the bundle's own: the ones it lands now and the ones it landed before.
    let own: BTreeSet<PathBuf> = files
        .iter()
        .filter(|f| f.dest == Dest::Skills)
        .map(|f| f.rel.as_str())
        .chain(
            record
                .files
                .keys()
                .filter_map(|k| k.strip_prefix("skills/")),
        )
        .map(|rel| real(&paths.skills_folder.join(rel)))
        .collect();
    let mut kept = vec![false; files.len()];
    for (i, file) in files.iter().enumerate() {
        if file.dest == Dest::BundlesLock {
            return refuse(file, "is routed where no bundle file may go".into());
        }
        let target = file.dest.bundle_root(paths).join(&file.rel);
        if let Some(why) = roots.read_elsewhere(file.dest, &target, namespace) {
            return refuse(file, why);
        }
        if file.dest == Dest::Agents {
            let id = file.rel.strip_suffix(".md").unwrap_or(&file.rel);
            if bundled::AGENTS.iter().any(|a| a.id == id) {
                return refuse(
                    file,
                    format!("would shadow the agent profile {id:?} bundled with the worker"),
                );
            }
        }
        if let Some(name) = prompt_name(file) {
            if bundled::SYSTEM_PROMPTS.iter().any(|p| p.id == name) {
                return refuse(
                    file,
                    format!("would shadow the system prompt {name:?} bundled with the worker"),
                );
            }
            // The index's answer, and the files `system-prompts::create` writes, looked at on
            // disk (a prompt made a moment ago by hand may not be indexed yet).
            let created = [&paths.skills_folder, &paths.local_skills_folder]
                .into_iter()
                .map(|root| root.join("system-prompts").join(format!("{name}.md")))
                .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()));
            for served in served_prompt(&name)?.into_iter().chain(created) {
                if !own.contains(&real(&served)) {
                    return refuse(
                        file,
                        format!(
                            "is the system prompt {name:?}, which {} already serves and this bundle did not install",
                            shown_path(paths, &served)
                        ),
                    );
                }
            }
        }
        if let Some(sibling) = overview_twin(file, &files, &record, &paths.skills_folder) {
            return refuse(
                file,
                format!(
                    "would shadow skills_folder/{sibling} (the same skill id), which this bundle did not install (move or rename that file, then download again)"
                ),
            );
        }
        let Some(current) = file_hash(&target) else {
            continue;
        };
        let key = record_key(file.dest, &file.rel);
        let owned = record.files.get(&key) == Some(&current);
        let same = current == hash_hex(&file.bytes) && file.dest == Dest::Skills;
        if owned || same {
            continue;
        }
        // Installed by this bundle and edited since: the user's copy stays unless forced.
        if record.files.contains_key(&key) {
            kept[i] = on_edited == OnEdited::Keep;
            continue;
        }
        let what = match file.dest {
            Dest::Agents => format!(
                "would replace the agent profile {:?} (agents_folder/{}), which this bundle did not install (move or rename your profile, then download again)",
                file.rel.strip_suffix(".md").unwrap_or(&file.rel),
                file.rel
            ),
            Dest::Skills | Dest::BundlesLock => format!(
                "would replace skills_folder/{}, which this bundle did not install (move or rename your file, then download again)",
                file.rel
            ),
        };
        let locked_here = beyond
            .locked
            .iter()
            .any(|l| l.dest == file.dest && l.rel == file.rel);
        if record_lost && locked_here {
            return refuse(
                file,
                format!(
                    "{what} as far as it can tell: the namespace lost its record of the files the bundle wrote ({folder}/{RECORD_FILE}), and this file does not hold the bytes the bundles lock lists for it. If it is the bundle's file edited here, move your copy aside and run `iii-directory bundles restore {namespace}`, which lands the bundle as locked, with its record"
                ),
            );
        }
        return refuse(file, what);
    }
    // A kept file keeps the hash it was installed with, so it stays "edited" for the next
    // landing too.
    let mut kept_local = Vec::new();
    let mut landing = Vec::with_capacity(files.len());
    for (keep, file) in kept.into_iter().zip(files) {
        if keep {
            kept_local.push(file);
        } else {
            landing.push(file);
        }
    }
    let mut files = landing;
    record.schema = RECORD_SCHEMA;
    record.namespace = namespace.to_string();
    for (dest, rel) in beyond.removed {
        record.files.remove(&record_key(*dest, rel));
    }
    for file in &files {
        record
            .files
            .insert(record_key(file.dest, &file.rel), hash_hex(&file.bytes));
    }
    claim_kept(&mut record, beyond.kept);
    let bytes = serde_json::to_vec_pretty(&record).map_err(Error::json)?;
    files.push(File {
        dest: Dest::Skills,
        rel: record_rel,
        bytes,
        executable: false,
    });
    Ok(Checked {
        files,
        kept_local,
        folder,
    })
}

/// Lists in the record the files of `kept` it does not list yet, under the hash of upstream's
/// bytes. An update keeps a file as the user has it where upstream's text conflicts with it
/// (`<name>.upstream` beside it) or `keep-local` asks; the lock lists that file as the
/// bundle's, with upstream's bytes, and the record must agree: it decides what a landing may
/// replace, and a file it lacks is refused as one "this bundle did not install" (`D330`) at
/// every later update, even once the conflict is settled, even forced. That is the case of a
/// file made here by hand that a new version of the bundle adds: it was never the bundle's
/// until that landing made it so. Recorded under upstream's bytes, the file reads as edited
/// until it holds them (the conflict settled by taking upstream's text: clean again). A file
/// the record lists already keeps the hash it was installed with (edited then, edited still).
/// Only files of the namespace's own folder are claimed: an agent profile sits in the shared
/// `agents_folder`, where the file in the way may be the user's own profile or another
/// namespace's, and profiles are never adopted.
fn claim_kept(record: &mut Record, kept: &[File]) {
    for file in kept.iter().filter(|f| f.dest == Dest::Skills) {
        record
            .files
            .entry(record_key(file.dest, &file.rel))
            .or_insert_with(|| hash_hex(&file.bytes));
    }
}

/// Records the files of `merged` (placed paths) in the bundle's record under the hash of the
/// upstream bytes they merged rather than of what landed: a merge holds the user's edits, so it
/// reads as edited at the next landing, never as the bundle's own bytes to replace.
pub fn record_as_upstream(checked: &mut Checked, merged: &[(Dest, String, Vec<u8>)]) -> Result<()> {
    if merged.is_empty() {
        return Ok(());
    }
    let Some(file) = checked
        .files
        .iter_mut()
        .find(|f| f.dest == Dest::Skills && f.rel.rsplit('/').next() == Some(RECORD_FILE))
    else {
        return Ok(());
    };
    let mut record: Record = serde_json::from_slice(&file.bytes).map_err(Error::json)?;
    for (dest, rel, upstream) in merged {
        record
            .files
            .insert(record_key(*dest, rel), hash_hex(upstream));
    }
    file.bytes = serde_json::to_vec_pretty(&record).map_err(Error::json)?;
    Ok(())
}

/// The names that give a folder's overview skill id (`SKILL.md` beats `SKILLS.md` beats
/// `index.md`).
const OVERVIEWS: [&str; 3] = ["SKILL.md", "SKILLS.md", "index.md"];

/// For an overview file of the bundle, a sibling overview on disk that serves the same skill id
/// and is not the bundle's own (neither in it nor written by it unchanged since).
fn overview_twin(
    file: &File,
    files: &[File],
    record: &Record,
    skills_folder: &Path,
) -> Option<String> {
    if file.dest != Dest::Skills {
        return None;
    }
    let (dir, name) = file.rel.rsplit_once('/')?;
    if !OVERVIEWS.contains(&name) {
        return None;
    }
    OVERVIEWS
        .iter()
        .filter(|other| **other != name)
        .map(|other| format!("{dir}/{other}"))
        .filter(|twin| {
            !files
                .iter()
                .any(|f| f.dest == Dest::Skills && f.rel == *twin)
        })
        .find(|twin| {
            file_hash(&skills_folder.join(twin)).is_some_and(|current| {
                record.files.get(&record_key(Dest::Skills, twin)) != Some(&current)
            })
        })
}

/// A path under one of the configured folders as `<setting>/<path>`, never the absolute path.
fn shown_path(paths: &Paths, path: &Path) -> String {
    [
        (&paths.local_skills_folder, "local_skills_folder"),
        (&paths.skills_folder, "skills_folder"),
    ]
    .into_iter()
    .find_map(|(root, key)| {
        let rel = path.strip_prefix(root).ok()?;
        Some(format!("{key}/{}", rel.display()))
    })
    .unwrap_or_else(|| "another file".to_string())
}

/// The name a bundle's system prompt file would be served under, when it would be one.
fn prompt_name(file: &File) -> Option<String> {
    if file.dest != Dest::Skills
        || !is_markdown(&file.rel)
        || classify(&file.rel) != PathClass::SystemPrompt
    {
        return None;
    }
    let text = std::str::from_utf8(&file.bytes).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let stem = file.rel.rsplit('/').next()?.strip_suffix(".md")?;
    let doc = ParsedDoc::parse(text);
    prompt::read(&doc, stem, Reading::Scan).ok().map(|p| p.name)
}

/// The four roots as real paths, to see which of them also sees a target.
struct Reals {
    skills: PathBuf,
    local: PathBuf,
    agents: PathBuf,
    agents_skills: PathBuf,
}

impl Reals {
    fn of(paths: &Paths) -> Reals {
        Reals {
            skills: real(&paths.skills_folder),
            local: real(&paths.local_skills_folder),
            agents: real(&paths.agents_folder),
            agents_skills: real(&paths.agents_skills_folder),
        }
    }

    /// Why another root would read `target` as something the bundle did not mean, if it
    /// would: a skills file as another namespace, an agent profile or an agents skill; an
    /// agent profile as a skill or a system prompt.
    fn read_elsewhere(&self, dest: Dest, target: &Path, namespace: &str) -> Option<String> {
        let target = real(target);
        let under = |root: &Path| -> Option<String> {
            let rel = target.strip_prefix(root).ok()?;
            let parts: Option<Vec<&str>> = rel
                .components()
                .map(|c| match c {
                    Component::Normal(s) => s.to_str(),
                    _ => None,
                })
                .collect();
            Some(parts?.join("/"))
        };
        match dest {
            Dest::Skills => {
                // Through a link inside the root, the namespace folder may be another one.
                if let Some(rel) = under(&self.skills) {
                    let ns = first_segment(&rel);
                    if ns != namespace {
                        return Some(format!(
                            "would land at skills_folder/{rel} (through a link), where it reads as namespace {ns:?}, not {namespace:?}"
                        ));
                    }
                }
                if let Some(rel) = under(&self.local) {
                    let ns = first_segment(&rel);
                    if ns != namespace {
                        return Some(format!(
                            "would land at local_skills_folder/{rel}, where it reads as namespace {ns:?}, not {namespace:?}"
                        ));
                    }
                }
                if let Some(rel) = under(&self.agents) {
                    if !rel.contains('/') {
                        return Some(format!(
                            "would land at agents_folder/{rel}, where it reads as an agent profile"
                        ));
                    }
                }
                if let Some(rel) = under(&self.agents_skills) {
                    return Some(format!(
                        "would land at agents_skills_folder/{rel}, a read-only root"
                    ));
                }
                None
            }
            Dest::Agents => [
                (&self.skills, "skills_folder"),
                (&self.local, "local_skills_folder"),
            ]
            .into_iter()
            .find_map(|(root, key)| {
                let rel = under(root)?;
                matches!(classify(&rel), PathClass::Skill | PathClass::SystemPrompt).then(|| {
                    format!(
                        "would land at {key}/{rel}, where it reads as a skill, not an agent profile"
                    )
                })
            }),
            Dest::BundlesLock => None,
        }
    }
}

/// `path` with its longest existing part resolved (links, `..`) and the rest appended as is.
fn real(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(resolved) = at.canonicalize() {
            let mut out = resolved;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_are_refused_without_case() {
        for name in [
            "system-prompts",
            "agents",
            "prompts",
            "iii-directory",
            "System-Prompts",
        ] {
            let err = check_namespace(name).expect_err(name);
            assert_eq!(err.code(), Some(Code::BundleNamespaceReserved), "{name}");
        }
        for name in ["iii", "mailer", "agentsx", "directory"] {
            check_namespace(name).expect(name);
        }
    }

    #[test]
    fn the_default_layout_lands_the_iii_bundle_one_level_down() {
        let dir = tempfile::tempdir().expect("temp");
        let paths = crate::config::Settings::default().resolve(dir.path(), None);
        assert_eq!(namespace_folder(&paths, "iii"), "iii/iii");
        assert_eq!(namespace_folder(&paths, "mailer"), "mailer");
    }
}
