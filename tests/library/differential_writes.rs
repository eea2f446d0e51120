//! Differential test of writes: random sequences mixing the nine write functions (valid and
//! invalid requests) with external file changes (create, edit, delete, rename, namespace moves,
//! empty folders, prompt and agent files, agents skills), reconciled at quiescent points (a full
//! `reconcile()`, or a scoped `reconcile_paths` of what changed, as the watcher does), with the
//! occasional restart. After every quiescent point every read answer of the incremental index
//! equals the answer of a fresh index built from scratch on a new index file.
//!
//! ```sh
//! DIFF_WRITE_SEQUENCES=1000 cargo test --test library differential_writes:: -- --nocapture
//! DIFF_WRITE_SEED=1234 cargo test --test library differential_writes::   # replay one sequence
//! DIFF_WRITE_FIRST_SEED=5000 DIFF_WRITE_SEQUENCES=1000 cargo test --test library differential_writes::
//! ```

use test_support::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::Tree;
use iii_directory::{ChangeEvent, Family};
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::{Value, json};
use test_support::generate::Rng;

const OPS_PER_SEQUENCE: usize = 24;
const SENTINEL: &str = "skills/zz-sentinel/keep.md";

const SKILL_IDS: &[&str] = &[
    "a",
    "a/index",
    "a/x",
    "a/y/z",
    "b",
    "b/x",
    "c/index",
    "c/SKILL.md",
    "shell",
    "shell/x",
    "loc/x",
    "imp",
    "imp/x",
    "tool",
    "iii-directory/index",
    "directory/note",
    "iii/note",
    "iii/shell/x",
    "iii://b/x.md",
    "x::y",
    "Bad",
    "a/prompts/p",
    "a/agents/q",
    "a/system-prompts/s",
];
const PROMPT_NAMES: &[&str] = &["p1", "p2", "p3", "iii-minimal", "iii-runtime", "Bad"];
const AGENT_IDS: &[&str] = &["g1", "g2", "iii", "iii-minimal", "Bad", "sub"];

/// Files external changes write (relative to the base).
const SKILL_FILES: &[&str] = &[
    "skills/a/index.md",
    "skills/a/x.md",
    "skills/a/y/z.md",
    "skills/a.md",
    "skills/b/x.md",
    "skills/b/SKILL.md",
    "skills/b/SKILLS.md",
    "skills/b/index.md",
    "skills/c/index.md",
    "skills/shell/index.md",
    "skills/shell/x.md",
    "skills/loc/x.md",
    "skills/iii/shell/index.md",
    "skills/iii/shell/x.md",
    "skills/iii/loc/x.md",
    "skills/iii/a/index.md",
    "skills/iii/note.md",
    "skills/iii-directory/extra.md",
    "skills/Upper/x.md",
    "skills/a/prompts/p.md",
    "skills/a/agents/q.md",
    "skills/top.md",
];
const PROMPT_FILES: &[&str] = &[
    "skills/system-prompts/p1.md",
    "skills/system-prompts/p2.md",
    "skills/system-prompts/iii-minimal.md",
    "skills/a/system-prompts/p3.md",
    "skills/iii/system-prompts/p1.md",
];
const AGENT_FILES: &[&str] = &[
    "agents/g1.md",
    "agents/g2.md",
    "agents/iii.md",
    "agents/Bad.md",
    "agents/sub/x.md",
];
const AGENTS_SKILL_FILES: &[&str] = &[
    ".agents/skills/imp/SKILL.md",
    ".agents/skills/tool/SKILL.md",
    ".agents/skills/b/SKILL.md",
    ".agents/skills/imp/reference/r.md",
    ".agents/skills/Caps/SKILL.md",
];
const FOLDERS: &[&str] = &[
    "skills/a",
    "skills/b",
    "skills/c",
    "skills/shell",
    "skills/loc",
    "skills/iii/a",
    "skills/iii/b",
    "skills/iii/shell",
    "skills/iii/loc",
    "skills/iii/c",
    "skills/system-prompts",
    "skills/iii/system-prompts",
    ".agents/skills/imp",
    ".agents/skills/tool",
];

fn skill_content(rng: &mut Rng, n: usize) -> String {
    match rng.below(9) {
        0 => format!("---\ntitle: Title {n}\ntype: index\ndescription: D {n}\n---\nBody {n}.\n"),
        1 => format!("# Heading {n}\n\nParagraph {n}.\n"),
        2 => format!("plain text {n}\n"),
        3 => format!("---\nname: Named {n}\nfunction_id: a::f{n}\n---\n# H {n}\n\nx\n"),
        4 => "---\ntitle: empty\n---\n\n".into(),
        5 => format!("---\ntitle: [broken yaml {n}\n---\n# Broken {n}\n\nx\n"),
        6 => format!(
            "---\ndisable-model-invocation: true\n---\n# Hidden {n}\n\n> note\n\nText {n}.\n"
        ),
        7 if rng.chance(20) => format!("# Big {n}\n\n{}", "z".repeat(262_145)),
        _ => format!("---\ntitle: T{n}\ntype: how-to\n---\n# T{n}\n\nBody {n}.\n"),
    }
}

fn prompt_content(rng: &mut Rng, name: &str, n: usize) -> String {
    match rng.below(7) {
        0 => format!("---\ndescription: Prompt {n}\n---\nSay {n}.\n"),
        1 => format!("---\nname: {name}\ndescription: Prompt {n}\n---\nSay {n}.\n"),
        2 => format!(
            "---\nname: {}\ndescription: Renamed {n}\n---\nSay {n}.\n",
            PROMPT_NAMES[rng.below(3)]
        ),
        3 => format!("---\nname: {name}\n---\nNo description {n}.\n"),
        4 => format!("no frontmatter {n}\n"),
        5 => "---\ndescription: d\n---\n".into(),
        _ => format!("---\nname: Not Valid\ndescription: d {n}\n---\nx\n"),
    }
}

fn agent_content(rng: &mut Rng, n: usize) -> String {
    match rng.below(7) {
        0 => format!("---\nname: Agent {n}\ndescription: A {n}\n---\nYou are {n}.\n"),
        1 => format!(
            "---\nname: Child {n}\nextends: {}\nskills:\n  - a\n  - b/x\nmodel: m{n}\n---\nChild {n}.\n",
            ["g1", "g2", "iii", "nobody"][rng.below(4)]
        ),
        2 => format!("---\nname: Empty {n}\n---\n"),
        3 => format!("---\ndescription: no name {n}\n---\nx\n"),
        4 => format!("---\nname: A\nicon: nope{n}\n---\nx\n"),
        5 => format!("no frontmatter {n}\n"),
        _ => format!("---\nname: Logo {n}\nlogo: \"🤖\"\ncolor: teal\nicon: code\n---\nx\n"),
    }
}

/// Every read answer, keyed by call.
fn dump(directory: &Directory) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let read = |f: ReadFunction, r: Value| match directory.read(f, &r, None) {
        Ok(v) => v,
        Err(e) => json!({ "error": e.to_string() }),
    };
    let names = |v: &Value, list: &str, key: &str| -> Vec<String> {
        v[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[key].as_str().unwrap().to_string())
            .collect()
    };
    let list = read(ReadFunction::SkillsList, json!({}));
    for id in names(&list, "skills", "id") {
        out.insert(
            format!("skills::get {id}"),
            read(ReadFunction::SkillsGet, json!({"id": id, "raw": true})),
        );
    }
    // Misses too: the suggestions depend on the whole view.
    for id in ["a/missing", "shell/x", "b/x", "imp/x"] {
        out.insert(
            format!("skills::get {id}"),
            read(ReadFunction::SkillsGet, json!({"id": id, "raw": true})),
        );
    }
    out.insert("skills::list".into(), list);
    out.insert(
        "skills::index".into(),
        read(ReadFunction::SkillsIndex, json!({})),
    );
    let installed: BTreeSet<String> = ["a".to_string()].into();
    out.insert(
        "skills::list filtered".into(),
        directory
            .read(ReadFunction::SkillsList, &json!({}), Some(&installed))
            .unwrap(),
    );
    let prompts = read(ReadFunction::SystemPromptsList, json!({}));
    for name in names(&prompts, "prompts", "name") {
        out.insert(
            format!("system-prompts::get {name}"),
            read(
                ReadFunction::SystemPromptsGet,
                json!({"name": name, "raw": true}),
            ),
        );
    }
    out.insert("system-prompts::list".into(), prompts);
    let agents = read(ReadFunction::AgentsList, json!({}));
    for id in names(&agents, "agents", "id") {
        out.insert(
            format!("agents::get {id}"),
            read(ReadFunction::AgentsGet, json!({"id": id, "raw": true})),
        );
    }
    out.insert("agents::list".into(), agents);
    out.insert(
        "skipped".into(),
        serde_json::to_value(directory.skipped().unwrap()).unwrap(),
    );
    out
}

/// Where the trees and indexes of this test live: a memory file system when there is one (the
/// test makes thousands of fsyncs; what it checks does not depend on the disk), else the
/// default temporary folder. `DIFF_WRITE_TMPDIR` overrides.
fn scratch() -> tempfile::TempDir {
    let dir = std::env::var("DIFF_WRITE_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("/dev/shm"));
    if dir.is_dir() {
        if let Ok(t) = tempfile::tempdir_in(&dir) {
            return t;
        }
    }
    tempfile::tempdir().unwrap()
}

fn fresh_dump(directory: &Directory) -> BTreeMap<String, Value> {
    dump(&common::fresh_index_in(directory.config(), scratch()))
}

/// Which families' answers differ between two dumps.
fn families_changed(a: &BTreeMap<String, Value>, b: &BTreeMap<String, Value>) -> BTreeSet<Family> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = BTreeSet::new();
    for key in keys {
        if a.get(key) == b.get(key) {
            continue;
        }
        if key.starts_with("skills::list") {
            out.insert(Family::Skills);
        } else if key.starts_with("system-prompts::") {
            out.insert(Family::SystemPrompts);
        } else if key == "agents::list" {
            out.insert(Family::Agents);
        }
    }
    out
}

struct Sequence {
    seed: u64,
    tree: Tree,
    directory: Option<Directory>,
    events: Arc<Mutex<Vec<ChangeEvent>>>,
    log: Arc<Mutex<Vec<String>>>,
    rng: Rng,
    n: usize,
    /// Paths changed behind the library's back since the last reconcile.
    touched: Vec<PathBuf>,
}

impl Sequence {
    fn new(seed: u64, log: Arc<Mutex<Vec<String>>>) -> Sequence {
        let tree = Tree::new();
        tree.mkdir("skills/iii")
            .mkdir("agents")
            .mkdir(".agents/skills");
        let mut rng = Rng::new(seed);
        // A file no operation touches: a tree with no file and no folder at all meets a known
        // bug (see `a_fresh_index_of_an_empty_tree_serves_the_bundled_skills` in writes.rs),
        // which would end every sequence that empties the tree.
        tree.write(SENTINEL, "# Sentinel\n\nNever touched.\n");
        // A small random starting tree.
        for _ in 0..rng.below(8) {
            let rel = SKILL_FILES[rng.below(SKILL_FILES.len())];
            let n = rng.below(1000);
            tree.write(rel, &skill_content(&mut rng, n));
        }
        if rng.chance(50) {
            tree.write(
                ".agents/skills/imp/SKILL.md",
                "---\nname: Imp\ndescription: Agents skill.\n---\nImp.\n",
            );
        }
        if rng.chance(50) {
            tree.write(
                "skills/system-prompts/p1.md",
                "---\ndescription: P1\n---\nP1.\n",
            );
        }
        if rng.chance(50) {
            tree.write("agents/g1.md", "---\nname: G1\n---\nG1.\n");
        }
        let directory = tree.open();
        let events: Arc<Mutex<Vec<ChangeEvent>>> = Arc::default();
        let sequence = Sequence {
            seed,
            tree,
            directory: Some(directory),
            events,
            log,
            rng,
            n: 0,
            touched: Vec::new(),
        };
        sequence.subscribe();
        sequence
    }

    fn subscribe(&self) {
        let sink = self.events.clone();
        self.dir().subscribe(Arc::new(move |e: &ChangeEvent| {
            sink.lock().unwrap().push(e.clone())
        }));
    }

    fn dir(&self) -> &Directory {
        self.directory.as_ref().expect("open")
    }

    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }

    fn event_count(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    fn fail(&self, what: String) -> ! {
        panic!("seed {}: {what}", self.seed)
    }

    fn step(&mut self) {
        self.n += 1;
        match self.rng.below(20) {
            0..=9 => self.library_write(),
            10..=17 => self.external_change(),
            18 => self.restart(),
            _ => self.quiescent_point(),
        }
        if self.rng.chance(20) {
            self.quiescent_point();
        }
    }

    fn library_write(&mut self) {
        let n = self.n;
        let rng = &mut self.rng;
        let (function, request) = match rng.below(9) {
            0 => {
                let id = SKILL_IDS[rng.below(SKILL_IDS.len())];
                (
                    WriteFunction::SkillsCreate,
                    json!({"id": id, "content": skill_content(rng, n)}),
                )
            }
            1 | 2 => {
                let id = SKILL_IDS[rng.below(SKILL_IDS.len())];
                (
                    WriteFunction::SkillsUpdate,
                    json!({"id": id, "content": skill_content(rng, n)}),
                )
            }
            3 => {
                let id = SKILL_IDS[rng.below(SKILL_IDS.len())];
                (WriteFunction::SkillsDelete, json!({"id": id}))
            }
            4 => {
                let name = PROMPT_NAMES[rng.below(PROMPT_NAMES.len())];
                (
                    WriteFunction::SystemPromptsCreate,
                    json!({"name": name, "content": prompt_content(rng, name, n)}),
                )
            }
            5 => {
                let name = PROMPT_NAMES[rng.below(PROMPT_NAMES.len())];
                (
                    WriteFunction::SystemPromptsUpdate,
                    json!({"name": name, "content": prompt_content(rng, name, n)}),
                )
            }
            6 => {
                let name = PROMPT_NAMES[rng.below(PROMPT_NAMES.len())];
                (WriteFunction::SystemPromptsDelete, json!({"name": name}))
            }
            7 => {
                let id = AGENT_IDS[rng.below(AGENT_IDS.len())];
                let function = if rng.chance(50) {
                    WriteFunction::AgentsCreate
                } else {
                    WriteFunction::AgentsUpdate
                };
                (
                    function,
                    json!({"id": id, "content": agent_content(rng, n)}),
                )
            }
            _ => {
                let id = AGENT_IDS[rng.below(AGENT_IDS.len())];
                (WriteFunction::AgentsDelete, json!({"id": id}))
            }
        };
        let installed: BTreeSet<String> = ["a".to_string(), "b".to_string()].into();
        let filtered = self.rng.chance(20);
        let before = self.event_count();
        let result = self
            .dir()
            .write(function, &request, filtered.then_some(&installed));
        let mut shown = request.clone();
        if let Some(c) = shown.get_mut("content") {
            let text = c.as_str().unwrap();
            *c = json!(if text.len() > 120 {
                format!("<{} bytes>", text.len())
            } else {
                text.to_string()
            });
        }
        let outcome = match &result {
            Ok(v) => format!("ok {v}"),
            Err(e) => format!("err {e}"),
        };
        self.note(format!(
            "{:>3} write {}{} {shown} => {outcome}",
            self.n,
            function.id(),
            if filtered { " (installed: a, b)" } else { "" }
        ));
        let published = self.events.lock().unwrap()[before..].to_vec();
        match &result {
            Ok(_) if published.len() != 1 => {
                self.fail(format!("a successful write published {published:?}"))
            }
            Err(_) if !published.is_empty() => {
                self.fail(format!("a failed write published {published:?}"))
            }
            Ok(_) => {
                let family = match function {
                    WriteFunction::SkillsCreate
                    | WriteFunction::SkillsUpdate
                    | WriteFunction::SkillsDelete => Family::Skills,
                    WriteFunction::SystemPromptsCreate
                    | WriteFunction::SystemPromptsUpdate
                    | WriteFunction::SystemPromptsDelete => Family::SystemPrompts,
                    _ => Family::Agents,
                };
                if published[0].family != family || published[0].payload["op"] == "external" {
                    self.fail(format!("wrong event {published:?}"));
                }
            }
            Err(_) => {}
        }
        if let Err(e) = &result {
            // Every refusal is a coded error, a plain validation message, or a request error;
            // an I/O or index error only when the index is behind the disk.
            let text = e.to_string();
            if matches!(e, iii_directory::Error::Index(_))
                || (matches!(e, iii_directory::Error::Io(_)) && self.touched.is_empty())
            {
                self.fail(format!("unexpected error: {text}"));
            }
        }
        let temps = temp_files(self.tree.base());
        if !temps.is_empty() {
            self.fail(format!("temporary files left behind: {temps:?}"));
        }
    }

    fn external_change(&mut self) {
        let base = self.tree.base().to_path_buf();
        let n = self.n;
        let rng = &mut self.rng;
        let mut touched: Vec<PathBuf> = Vec::new();
        let description;
        match rng.below(12) {
            0..=2 => {
                let rel = SKILL_FILES[rng.below(SKILL_FILES.len())];
                let text = skill_content(rng, n);
                write_file(&base.join(rel), &text);
                description = format!("write {rel}");
                touched.push(base.join(rel));
            }
            3 => {
                let files = markdown_files(&base);
                if files.is_empty() {
                    return;
                }
                let path = files[rng.below(files.len())].clone();
                fs::remove_file(&path).unwrap();
                description = format!("delete {}", rel(&base, &path));
                touched.push(path);
            }
            4 => {
                let files = markdown_files(&base);
                if files.is_empty() {
                    return;
                }
                let from = files[rng.below(files.len())].clone();
                let all: Vec<&str> = SKILL_FILES
                    .iter()
                    .chain(PROMPT_FILES)
                    .chain(AGENT_FILES)
                    .copied()
                    .collect();
                let to = base.join(all[rng.below(all.len())]);
                fs::create_dir_all(to.parent().unwrap()).unwrap();
                if fs::rename(&from, &to).is_err() {
                    return;
                }
                description = format!("rename {} -> {}", rel(&base, &from), rel(&base, &to));
                touched.push(from);
                touched.push(to);
            }
            5 | 6 => {
                let from = base.join(FOLDERS[rng.below(FOLDERS.len())]);
                let to = base.join(FOLDERS[rng.below(FOLDERS.len())]);
                if !from.is_dir() || to.starts_with(&from) {
                    return;
                }
                fs::create_dir_all(to.parent().unwrap()).unwrap();
                if fs::rename(&from, &to).is_err() {
                    return;
                }
                description = format!("move folder {} -> {}", rel(&base, &from), rel(&base, &to));
                touched.push(from);
                touched.push(to);
            }
            7 => {
                let dir = base.join(FOLDERS[rng.below(FOLDERS.len())]);
                if rng.chance(50) {
                    fs::create_dir_all(&dir).unwrap();
                    description = format!("mkdir {}", rel(&base, &dir));
                } else {
                    if !dir.exists() {
                        return;
                    }
                    fs::remove_dir_all(&dir).unwrap();
                    description = format!("rm -r {}", rel(&base, &dir));
                }
                touched.push(dir);
            }
            8 => {
                let rel_path = PROMPT_FILES[rng.below(PROMPT_FILES.len())];
                let name = Path::new(rel_path).file_stem().unwrap().to_str().unwrap();
                let text = prompt_content(rng, name, n);
                write_file(&base.join(rel_path), &text);
                description = format!("write {rel_path}");
                touched.push(base.join(rel_path));
            }
            9 => {
                let rel_path = AGENT_FILES[rng.below(AGENT_FILES.len())];
                let text = agent_content(rng, n);
                write_file(&base.join(rel_path), &text);
                description = format!("write {rel_path}");
                touched.push(base.join(rel_path));
            }
            10 => {
                let rel_path = AGENTS_SKILL_FILES[rng.below(AGENTS_SKILL_FILES.len())];
                let path = base.join(rel_path);
                if path.exists() && rng.chance(40) {
                    fs::remove_file(&path).unwrap();
                    description = format!("delete {rel_path}");
                } else {
                    write_file(
                        &path,
                        &format!("---\nname: Agents skill {n}\ndescription: d\n---\nBody {n}.\n"),
                    );
                    description = format!("write {rel_path}");
                }
                touched.push(path);
            }
            _ => {
                let rel_path = [
                    "skills/a/notes.txt",
                    "skills/a/x.md.tmp",
                    "agents/g1.md.tmp",
                ][rng.below(3)];
                write_file(&base.join(rel_path), "not a document\n");
                description = format!("write {rel_path}");
                touched.push(base.join(rel_path));
            }
        }
        self.note(format!("{:>3} external {description}", self.n));
        self.touched.extend(touched);
    }

    fn restart(&mut self) {
        self.note(format!("{:>3} restart", self.n));
        let config = self.dir().config().clone();
        // The old writer must be gone before the index opens again.
        drop(self.directory.take());
        self.directory = Some(Directory::open(config).unwrap());
        self.subscribe();
        self.quiescent_point();
    }

    fn quiescent_point(&mut self) {
        let before_dump = dump(self.dir());
        let before = self.event_count();
        let scoped = !self.touched.is_empty() && self.rng.chance(50);
        let report = if scoped {
            {
                let paths = std::mem::take(&mut self.touched);
                self.dir().reconcile_paths(paths)
            }
        } else {
            self.touched.clear();
            self.dir().reconcile()
        };
        let report = report.unwrap_or_else(|e| self.fail(format!("reconcile: {e}")));
        self.note(format!(
            "{:>3} {} (changed: {})",
            self.n,
            if scoped {
                "reconcile_paths"
            } else {
                "reconcile"
            },
            report.changed
        ));
        let after_dump = dump(self.dir());
        let fresh = fresh_dump(self.dir());
        if after_dump != fresh {
            self.fail(format!(
                "index != fresh index after {}:{}",
                if scoped {
                    "reconcile_paths"
                } else {
                    "reconcile"
                },
                common::dump_diff(&after_dump, &fresh)
            ));
        }
        // External events: one per family whose answers changed, none for the others.
        let published: Vec<ChangeEvent> = self.events.lock().unwrap()[before..].to_vec();
        let families: Vec<Family> = published.iter().map(|e| e.family).collect();
        let unique: BTreeSet<Family> = families.iter().copied().collect();
        if unique.len() != families.len()
            || published
                .iter()
                .any(|e| e.payload != json!({"op": "external"}))
        {
            self.fail(format!("reconcile published {published:?}"));
        }
        let changed = families_changed(&before_dump, &after_dump);
        for family in &changed {
            if !unique.contains(family) {
                self.fail(format!(
                    "{family:?} answers changed without an external event (published {published:?}):{}",
                    common::dump_diff(&before_dump, &after_dump)
                ));
            }
        }
        // A prompt file moved to another folder with its name, content and mtime kept changes
        // its row (where it lives) but no answer, and may be announced: only skills and agents
        // (whose answers show every row change) are checked for events that announce nothing.
        for family in unique.iter().filter(|f| **f != Family::SystemPrompts) {
            let section = match family {
                Family::Skills => "skills::",
                Family::SystemPrompts => "system-prompts::",
                Family::Agents => "agents::",
            };
            let moved = before_dump
                .keys()
                .chain(after_dump.keys())
                .filter(|k| k.starts_with(section))
                .any(|k| before_dump.get(k) != after_dump.get(k));
            if !moved {
                self.fail(format!(
                    "an external event for {family:?} although its answers did not change"
                ));
            }
        }
    }
}

fn write_file(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn rel(base: &Path, path: &Path) -> String {
    path.strip_prefix(base).unwrap().display().to_string()
}

/// Every `.md` file under the roots.
fn markdown_files(base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(base, &mut |p| {
        if p.extension().is_some_and(|e| e == "md") && !p.ends_with(SENTINEL) {
            out.push(p.to_path_buf());
        }
    });
    out.sort();
    out
}

/// Temporary files the library may have left (ours end in `.<pid>-<n>.tmp`).
fn temp_files(base: &Path) -> Vec<PathBuf> {
    let pid = format!(".{}-", std::process::id());
    let mut out = Vec::new();
    walk(base, &mut |p| {
        let name = p.file_name().unwrap().to_string_lossy();
        if name.ends_with(".tmp") && name.contains(&pid) {
            out.push(p.to_path_buf());
        }
    });
    out
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            if path.file_name() != Some("data".as_ref()) {
                walk(&path, f);
            }
        } else {
            f(&path);
        }
    }
}

fn run_sequence(seed: u64, log: Arc<Mutex<Vec<String>>>) {
    let mut sequence = Sequence::new(seed, log);
    for _ in 0..OPS_PER_SEQUENCE {
        sequence.step();
    }
    sequence.quiescent_point();
}

#[test]
fn random_write_sequences_match_a_fresh_index() {
    let sequences: u64 = std::env::var("DIFF_WRITE_SEQUENCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    let seeds: Vec<u64> = match std::env::var("DIFF_WRITE_SEED") {
        Ok(seed) => vec![seed.parse().expect("DIFF_WRITE_SEED is a number")],
        Err(_) => {
            let first: u64 = std::env::var("DIFF_WRITE_FIRST_SEED")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            (first..first + sequences).collect()
        }
    };
    let done = AtomicUsize::new(0);
    let started = std::time::Instant::now();
    for seed in seeds {
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let result = catch_unwind(AssertUnwindSafe(|| run_sequence(seed, log.clone())));
        if let Err(panic) = result {
            eprintln!(
                "\nFAILING SEED {seed} (replay: DIFF_WRITE_SEED={seed} cargo test --test library differential_writes::)\nop log:\n{}\n",
                log.lock().unwrap().join("\n")
            );
            resume_unwind(panic);
        }
        done.fetch_add(1, Ordering::Relaxed);
    }
    println!(
        "differential writes: {} sequences of {OPS_PER_SEQUENCE} steps in {:.1}s",
        done.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
}
