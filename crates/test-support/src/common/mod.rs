//! Shared test helpers: a temporary base folder laid out with the default roots, and a
//! `Directory` opened over it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use iii_directory::config::Config;
use iii_directory::doc::ids::{IdError, SegmentError};
use iii_directory::{Directory, ReadFunction, SkipReason};
use serde_json::{Value, json};

/// A temporary base folder: `skills/`, `skills/iii/` (local), `.agents/skills/`, `agents/`,
/// and the index under `data/`.
pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::new()
    }
}

impl Tree {
    pub fn new() -> Tree {
        Tree {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn base(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.base().join(rel)
    }

    /// Writes a file (creating its folders), relative to the base folder.
    pub fn write(&self, rel: &str, text: &str) -> &Tree {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, text).expect("write");
        self
    }

    pub fn mkdir(&self, rel: &str) -> &Tree {
        fs::create_dir_all(self.path(rel)).expect("mkdir");
        self
    }

    pub fn remove(&self, rel: &str) -> &Tree {
        let path = self.path(rel);
        if path.is_dir() {
            fs::remove_dir_all(path)
        } else {
            fs::remove_file(path)
        }
        .expect("remove");
        self
    }

    pub fn rename(&self, from: &str, to: &str) -> &Tree {
        let to = self.path(to);
        fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        fs::rename(self.path(from), to).expect("rename");
        self
    }

    pub fn config(&self) -> Config {
        Config::for_root(self.base())
    }

    /// Opens the index as its writer and reconciles it with the tree.
    pub fn open(&self) -> Directory {
        self.open_with(self.config())
    }

    pub fn open_with(&self, config: Config) -> Directory {
        let directory = Directory::open(config).expect("open index");
        directory.reconcile().expect("reconcile");
        directory
    }
}

pub mod child;
mod model;
mod shared;
pub use model::{MODEL_ENV, model_dir};
pub use shared::{crate_dir, shared_path};

/// The corpus of real skills beside the project (`../shared/corpus`), or `None` (the test
/// skips) in a checkout without it.
pub fn corpus() -> Option<PathBuf> {
    shared_path("corpus")
}

/// Copies a folder recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// Calls a read function with no installed-workers set (nothing hidden by the filter).
pub fn call(directory: &Directory, function: ReadFunction, request: Value) -> Value {
    directory
        .read(function, &request, None)
        .unwrap_or_else(|e| panic!("{} failed: {e}", function.id()))
}

/// Calls a read function expecting an error, and returns its message.
pub fn call_err(directory: &Directory, function: ReadFunction, request: Value) -> String {
    match directory.read(function, &request, None) {
        Ok(v) => panic!("{} should fail, answered {v}", function.id()),
        Err(e) => e.to_string(),
    }
}

/// Calls a read function with a known set of installed workers.
pub fn call_installed(
    directory: &Directory,
    function: ReadFunction,
    request: Value,
    installed: &[&str],
) -> Value {
    let set: BTreeSet<String> = installed.iter().map(|s| s.to_string()).collect();
    directory
        .read(function, &request, Some(&set))
        .unwrap_or_else(|e| panic!("{} failed: {e}", function.id()))
}

/// The display ids `skills::list` returns.
pub fn skill_ids(directory: &Directory) -> Vec<String> {
    let list = call(directory, ReadFunction::SkillsList, json!({}));
    list["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

/// Every answer of the read functions, keyed by call: each list, every listed skill, system
/// prompt and agent profile (raw), the skills index and the skipped files. Two indexes of the
/// same disk give equal dumps.
pub fn dump(directory: &Directory) -> BTreeMap<String, Result<Value, String>> {
    let mut out = BTreeMap::new();
    let mut ask = |function: ReadFunction, request: Value| {
        let answer = directory
            .read(function, &request, None)
            .map_err(|e| e.to_string());
        let rows = answer.clone().unwrap_or_default();
        out.insert(format!("{} {request}", function.id()), answer);
        rows
    };
    let lists = [
        (
            ReadFunction::SkillsList,
            "skills",
            "id",
            ReadFunction::SkillsGet,
            "id",
        ),
        (
            ReadFunction::SystemPromptsList,
            "prompts",
            "name",
            ReadFunction::SystemPromptsGet,
            "name",
        ),
        (
            ReadFunction::AgentsList,
            "agents",
            "id",
            ReadFunction::AgentsGet,
            "id",
        ),
    ];
    for (list, rows, field, get, key) in lists {
        let answer = ask(list, json!({}));
        for row in answer[rows].as_array().cloned().unwrap_or_default() {
            let id = row[field].clone();
            ask(get, json!({ key: id, "raw": true }));
        }
    }
    ask(ReadFunction::SkillsIndex, json!({}));
    let skipped = directory
        .skipped()
        .map(|s| serde_json::to_value(s).expect("serialize"))
        .map_err(|e| e.to_string());
    out.insert("skipped".into(), skipped);
    out
}

/// A fresh index of the tree `config` describes, opened and reconciled from scratch in a
/// temporary folder that goes away with it. Derefs to its [`Directory`].
pub struct FreshIndex {
    directory: Directory,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for FreshIndex {
    type Target = Directory;

    fn deref(&self) -> &Directory {
        &self.directory
    }
}

pub fn fresh_index(config: &Config) -> FreshIndex {
    fresh_index_in(config, tempfile::tempdir().expect("temp dir"))
}

/// [`fresh_index`] with its index file in `dir`.
pub fn fresh_index_in(config: &Config, dir: tempfile::TempDir) -> FreshIndex {
    let mut config = config.clone();
    config.paths.index_path = dir.path().join("fresh.redb");
    let directory = Directory::open(config).expect("open a fresh index");
    directory.reconcile().expect("reconcile a fresh index");
    FreshIndex {
        directory,
        _dir: dir,
    }
}

/// For a failure message: each key whose answer differs between two dumps, with both answers
/// as JSON (cut to 600 characters).
pub fn dump_diff<V: PartialEq + serde::Serialize>(
    ours: &BTreeMap<String, V>,
    fresh: &BTreeMap<String, V>,
) -> String {
    let show = |v: Option<&V>| -> String {
        v.map_or("(absent)".to_string(), |v| {
            serde_json::to_string(v).expect("serialize")
        })
        .chars()
        .take(600)
        .collect()
    };
    let keys: BTreeSet<&String> = ours.keys().chain(fresh.keys()).collect();
    let mut out = String::new();
    for key in keys {
        if ours.get(key) != fresh.get(key) {
            out.push_str(&format!(
                "\n{key}:\n  index: {}\n  fresh: {}",
                show(ours.get(key)),
                show(fresh.get(key))
            ));
        }
    }
    out
}

// ---- Shared accessors of the family test files --------------------------------------------

/// The modification time [`Tree::set_mtime`] gives a file, and how the contract prints it.
pub const MTIME_SECS: u64 = 1_777_926_161;
pub const MTIME_NANOS: u32 = 123_456_789;
pub const MTIME_TEXT: &str = "2026-05-04T20:22:41.123456789+00:00";

impl Tree {
    /// Sets a file's modification time to [`MTIME_TEXT`].
    pub fn set_mtime(&self, rel: &str) {
        let file = fs::File::options()
            .write(true)
            .open(self.path(rel))
            .expect("open for mtime");
        file.set_modified(
            std::time::UNIX_EPOCH + std::time::Duration::new(MTIME_SECS, MTIME_NANOS),
        )
        .expect("set mtime");
    }

    /// The absolute path of `rel`, as responses and `check` print it.
    pub fn abs(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }
}

/// A list function's answer key and the field that names its rows.
fn list_shape(list: ReadFunction) -> (&'static str, &'static str) {
    match list {
        ReadFunction::SkillsList => ("skills", "id"),
        ReadFunction::SystemPromptsList => ("prompts", "name"),
        ReadFunction::AgentsList => ("agents", "id"),
        other => panic!("{} is not a list function", other.id()),
    }
}

/// The rows a list function answers with.
pub fn rows(directory: &Directory, list: ReadFunction, request: Value) -> Vec<Value> {
    let (key, _) = list_shape(list);
    call(directory, list, request)[key]
        .as_array()
        .unwrap_or_else(|| panic!("{} answers a {key} array", list.id()))
        .clone()
}

/// The ids of a search answer's `results` (`skills::search`), in order.
pub fn result_ids(answer: &Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

/// The names (ids) of a list's rows, in order.
pub fn names(directory: &Directory, list: ReadFunction) -> Vec<String> {
    let (_, field) = list_shape(list);
    rows(directory, list, json!({}))
        .iter()
        .map(|r| r[field].as_str().expect("row name").to_string())
        .collect()
}

/// The row named `name` of a list.
pub fn row(directory: &Directory, list: ReadFunction, name: &str) -> Value {
    let (_, field) = list_shape(list);
    rows(directory, list, json!({}))
        .into_iter()
        .find(|r| r[field] == name)
        .unwrap_or_else(|| panic!("{} has no row {name}", list.id()))
}

/// A get function's request naming `name` (`{id}` for skills and agents, `{name}` for prompts).
fn get_request(get: ReadFunction, name: &str) -> Value {
    match get {
        ReadFunction::SystemPromptsGet => json!({ "name": name }),
        _ => json!({ "id": name }),
    }
}

pub fn get(directory: &Directory, get: ReadFunction, name: &str) -> Value {
    call(directory, get, get_request(get, name))
}

pub fn get_err(directory: &Directory, get: ReadFunction, name: &str) -> String {
    call_err(directory, get, get_request(get, name))
}

/// The reason `check` gives for a file under a root (by configuration key), if any.
pub fn skipped(directory: &Directory, root: &str, path: &str) -> Option<SkipReason> {
    directory
        .skipped()
        .expect("skipped")
        .into_iter()
        .find(|s| s.root == root && s.path == path)
        .map(|s| s.reason)
}

/// The reason `check` gives a skill file whose id has an invalid segment: the segment at
/// `position` (from 1) breaks `problem`.
pub fn invalid_segment(id: &str, position: usize, problem: SegmentError) -> SkipReason {
    SkipReason::InvalidId {
        id: id.to_string(),
        problem: IdError::Segment {
            id: id.to_string(),
            position,
            problem,
        },
    }
}

/// [`invalid_segment`] for a segment with characters an id may not hold.
pub fn bad_characters(id: &str, position: usize) -> SkipReason {
    let segment = id.split('/').nth(position - 1).expect("segment");
    invalid_segment(id, position, SegmentError::Characters(segment.to_string()))
}

pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A file of the crate (a bundled asset), read straight from the repository.
pub fn asset(rel: &str) -> String {
    fs::read_to_string(crate_dir().join(rel)).expect("asset")
}

/// A frontmatter key of a bundled asset.
pub fn asset_field(rel: &str, key: &str) -> String {
    let text = asset(rel);
    let prefix = format!("{key}: ");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{rel} has no {key}"));
    line[prefix.len()..].trim_matches('"').to_string()
}

/// What follows the frontmatter block of a bundled asset, verbatim.
pub fn asset_body(rel: &str) -> String {
    let text = asset(rel);
    let end = text[4..].find("\n---\n").expect("frontmatter end") + 4 + 5;
    text[end..].to_string()
}

/// Files (and symbolic links, not followed) under `dir`, in name order, as paths relative to
/// `base`; folders whose relative path `skip` names are not entered.
pub fn files_under(base: &Path, dir: &Path, skip: &dyn Fn(&str) -> bool) -> Vec<String> {
    fn visit(base: &Path, dir: &Path, skip: &dyn Fn(&str) -> bool, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            let rel = path
                .strip_prefix(base)
                .expect("under base")
                .to_string_lossy()
                .into_owned();
            if meta.is_dir() {
                if !skip(&rel) {
                    visit(base, &path, skip, out);
                }
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    visit(base, dir, skip, &mut out);
    out
}

/// The message a caught panic carries.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// Every entry under `base` (the index folder `data/` excepted), with its kind and content
/// hash or link target: equal maps mean the tree is byte for byte the same.
pub fn tree_state(base: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(base)
                .expect("under base")
                .to_string_lossy()
                .into_owned();
            if rel == "data" {
                continue;
            }
            let meta = fs::symlink_metadata(&path).expect("stat");
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).expect("read_link");
                out.insert(rel, format!("link {}", target.display()));
            } else if meta.is_dir() {
                out.insert(rel, "dir".into());
                walk(base, &path, out);
            } else {
                let bytes = fs::read(&path).expect("read");
                out.insert(rel, format!("file {}", blake3::hash(&bytes).to_hex()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(base, base, &mut out);
    out
}
