//! `since_revision` on the three lists, as a property: after random sequences of library
//! writes, external edits, deletes, renames, restarts, index rebuilds and visibility changes
//! (the installed workers, `filter_unregistered`), a client holding ANY earlier revision's
//! whole answer and applying the delta it is given holds exactly the current whole answer;
//! and so does a client that polls after every step. Every list with several filters
//! (`prefix`, `search`, `type`, `include_description`).
//!
//! Each answer is also checked against the same answer as text and against the worker's
//! idle-poll path, and for its kind: `unchanged` only when nothing can have changed,
//! a delta whenever the log reaches back (same index file, same visibility), `full: true`
//! only when it must be (another index file, another visibility, a revision older than
//! `change_log_revisions`).
//!
//! `DELTA_SEQUENCES` sets how many sequences run (default a few, seconds in all), `DELTA_STEPS`
//! the steps per sequence, `DELTA_SEED` replays one, `DELTA_FIRST_SEED` explores others.

use test_support::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use common::Tree;
use iii_directory::config::Config;
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::{Value, json};
use test_support::generate::Rng;

const DEFAULT_SEQUENCES: u64 = 6;
const DEFAULT_STEPS: usize = 24;
/// Change log sizes the sequences use: small ones, so that old revisions fall out of it.
const KEEPS: [u64; 3] = [3, 8, 10_000];

/// A list function, its request, and how its rows are keyed on the client.
#[derive(Clone)]
struct Variant {
    list: ReadFunction,
    field: &'static str,
    key: &'static str,
    request: Value,
}

fn variants() -> Vec<Variant> {
    let skills = |request: Value| Variant {
        list: ReadFunction::SkillsList,
        field: "skills",
        key: "id",
        request,
    };
    vec![
        skills(json!({})),
        skills(json!({ "prefix": "a/" })),
        skills(json!({ "prefix": "b" })),
        skills(json!({ "search": "t1" })),
        skills(json!({ "type": "index" })),
        skills(json!({ "include_description": false, "search": "d2" })),
        Variant {
            list: ReadFunction::SystemPromptsList,
            field: "prompts",
            key: "name",
            request: json!({}),
        },
        Variant {
            list: ReadFunction::AgentsList,
            field: "agents",
            key: "id",
            request: json!({}),
        },
    ]
}

/// What decides which skills a caller sees.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    filter: bool,
    installed: Option<BTreeSet<String>>,
}

impl Seen {
    /// What the rows depend on: with the filter off or the set unknown, everything is visible.
    fn effective(&self) -> Option<&BTreeSet<String>> {
        if self.filter {
            self.installed.as_ref()
        } else {
            None
        }
    }
}

/// A client's rows, keyed as the page keys them.
type Rows = BTreeMap<String, Value>;

/// One variant's whole answer at a step.
#[derive(Clone, Debug)]
struct Held {
    token: u64,
    rows: Rows,
    /// What the answer depended on.
    epoch: usize,
    index_revision: u64,
    seen: Seen,
}

struct Sequence {
    seed: u64,
    rng: Rng,
    tree: Tree,
    scratch: tempfile::TempDir,
    keep: u64,
    directory: Option<Directory>,
    seen: Seen,
    /// Bumped whenever the index file is deleted and rebuilt.
    epoch: usize,
    log: Vec<String>,
    /// Per step, per variant: the whole answer then.
    history: Vec<Vec<Held>>,
    /// Per variant: a client that polled after every step.
    pollers: Vec<Held>,
    answers: BTreeMap<&'static str, usize>,
}

const GLOBAL_NS: &[&str] = &["a", "b", "c", "directory"];
const LOCAL_NS: &[&str] = &["a", "c"];
const IN_NS: &[&str] = &["index.md", "SKILL.md", "x.md", "sub/y.md", "t1.md"];
const AT_TOP: &[&str] = &["a.md", "b.md", "index.md"];
const AGENT_IDS: &[&str] = &["x", "y", "z", "iii", "Bad"];
const PROMPT_NAMES: &[&str] = &["p", "q", "iii-minimal"];

fn skill_content(rng: &mut Rng) -> String {
    let k = rng.below(3);
    let mut text = String::from("---\n");
    if rng.chance(70) {
        text.push_str(&format!("title: T{k}\n"));
    }
    if rng.chance(50) {
        text.push_str(&format!("description: D{}\n", rng.below(3)));
    }
    if rng.chance(40) {
        text.push_str(&format!("type: {}\n", rng.pick(&["index", "how-to"])));
    }
    text.push_str("---\n");
    if rng.chance(85) {
        text.push_str(&format!("# H{k}\n\nPara t{} of the body.\n", rng.below(3)));
    }
    text
}

fn agent_content(rng: &mut Rng) -> String {
    let mut text = format!("---\nname: N{}\n", rng.below(3));
    if rng.chance(60) {
        let parent = rng.pick(&["x", "y", "z", "iii", "iii-minimal", "nope"]);
        text.push_str(&format!("extends: {parent}\n"));
    }
    if rng.chance(40) {
        text.push_str(&format!("model: m{}\n", rng.below(3)));
    }
    if rng.chance(30) {
        text.push_str(&format!(
            "skills: {}\n",
            rng.pick(&["[a, b/x]", "[c]", "[]"])
        ));
    }
    text.push_str("---\nYou are an agent.\n");
    text
}

fn prompt_content(rng: &mut Rng) -> String {
    if rng.chance(10) {
        return "---\ntitle: no description\n---\nbody\n".into();
    }
    format!(
        "---\ndescription: prompt {}\n---\nYou are a prompt.\n",
        rng.below(3)
    )
}

impl Sequence {
    fn new(seed: u64) -> Sequence {
        let tree = Tree::new();
        for dir in ["skills/keep", "skills/iii", ".agents/skills", "agents"] {
            tree.mkdir(dir);
        }
        let mut rng = Rng::new(seed);
        let keep = *rng.pick(&KEEPS);
        let mut sequence = Sequence {
            seed,
            rng,
            tree,
            scratch: tempfile::tempdir().expect("temp dir"),
            keep,
            directory: None,
            seen: Seen {
                filter: true,
                installed: None,
            },
            epoch: 0,
            log: Vec::new(),
            history: Vec::new(),
            pollers: Vec::new(),
            answers: BTreeMap::new(),
        };
        for _ in 0..6 {
            sequence.external_write();
        }
        sequence.open();
        sequence
    }

    fn config(&self) -> Config {
        let mut config = self.tree.config();
        config.paths.index_path = self.scratch.path().join("index.redb");
        config.settings.change_log_revisions = self.keep;
        config.settings.filter_unregistered = self.seen.filter;
        config
    }

    fn open(&mut self) {
        let directory = Directory::open(self.config()).expect("open the index");
        directory.reconcile().expect("reconcile");
        self.directory = Some(directory);
    }

    fn directory(&self) -> &Directory {
        self.directory.as_ref().expect("open")
    }

    fn note(&mut self, line: String) {
        self.log.push(line);
    }

    // ---- Steps ---------------------------------------------------------------------------

    fn skill_path(&mut self) -> String {
        match self.rng.below(10) {
            0..=1 => format!("skills/{}", self.rng.pick(AT_TOP)),
            2..=3 => format!(
                "skills/iii/{}/{}",
                self.rng.pick(LOCAL_NS),
                self.rng.pick(IN_NS)
            ),
            4 => format!(".agents/skills/{}/SKILL.md", self.rng.pick(&["a", "d"])),
            _ => format!(
                "skills/{}/{}",
                self.rng.pick(GLOBAL_NS),
                self.rng.pick(IN_NS)
            ),
        }
    }

    fn external_write(&mut self) {
        let (rel, text) = match self.rng.below(10) {
            0..=5 => {
                let rel = self.skill_path();
                (rel, skill_content(&mut self.rng))
            }
            6..=7 => {
                let rel = format!("agents/{}.md", self.rng.pick(AGENT_IDS));
                (rel, agent_content(&mut self.rng))
            }
            _ => {
                let root = self.rng.pick(&["skills", "skills/a", "skills/iii"]);
                let rel = format!("{root}/system-prompts/{}.md", self.rng.pick(PROMPT_NAMES));
                (rel, prompt_content(&mut self.rng))
            }
        };
        self.tree.write(&rel, &text);
        self.note(format!("write {rel}"));
    }

    fn files(&self) -> Vec<String> {
        ["skills", ".agents/skills", "agents"]
            .into_iter()
            .flat_map(|root| {
                common::files_under(self.tree.base(), &self.tree.path(root), &|_| false)
            })
            .filter(|rel| rel.ends_with(".md"))
            .collect()
    }

    fn library_write(&mut self) {
        let (function, request) = match self.rng.below(9) {
            0..=2 => {
                let id = format!(
                    "{}/{}",
                    self.rng.pick(&["a", "b", "c"]),
                    self.rng.pick(&["x", "t1", "index", "sub/y"])
                );
                let function = *self.rng.pick(&[
                    WriteFunction::SkillsCreate,
                    WriteFunction::SkillsUpdate,
                    WriteFunction::SkillsUpdate,
                    WriteFunction::SkillsDelete,
                ]);
                let content = skill_content(&mut self.rng);
                (function, json!({ "id": id, "content": content }))
            }
            3..=5 => {
                let id = *self.rng.pick(&["x", "y", "z", "iii"]);
                let function = *self.rng.pick(&[
                    WriteFunction::AgentsCreate,
                    WriteFunction::AgentsUpdate,
                    WriteFunction::AgentsDelete,
                ]);
                let content = agent_content(&mut self.rng);
                (function, json!({ "id": id, "content": content }))
            }
            _ => {
                let name = *self.rng.pick(PROMPT_NAMES);
                let function = *self.rng.pick(&[
                    WriteFunction::SystemPromptsCreate,
                    WriteFunction::SystemPromptsUpdate,
                    WriteFunction::SystemPromptsDelete,
                ]);
                let content = prompt_content(&mut self.rng);
                (function, json!({ "name": name, "content": content }))
            }
        };
        let installed = self.seen.installed.clone();
        let result = self
            .directory()
            .write(function, &request, installed.as_ref())
            .map(|_| ())
            .map_err(|e| e.to_string().chars().take(60).collect::<String>());
        let target = request.get("id").or(request.get("name")).cloned();
        self.note(format!("{} {target:?}: {result:?}", function.id()));
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=24 => self.library_write(),
            25..=49 => self.external_write(),
            50..=59 => {
                let files = self.files();
                if files.is_empty() {
                    return self.note("delete: no file".into());
                }
                let rel = self.rng.pick(&files).clone();
                self.tree.remove(&rel);
                self.note(format!("delete {rel}"));
            }
            60..=67 => {
                let files = self.files();
                if files.is_empty() {
                    return self.note("rename: no file".into());
                }
                let from = self.rng.pick(&files).clone();
                let to = self.skill_path();
                if from == to || self.tree.path(&to).exists() {
                    return self.note(format!("rename {from} -> {to}: target exists"));
                }
                self.tree.rename(&from, &to);
                self.note(format!("rename {from} -> {to}"));
            }
            68..=72 => {
                // A whole namespace folder moves to the other skills root (shadowing changes).
                let (from, to) = if self.rng.chance(50) {
                    ("skills/c", "skills/iii/c")
                } else {
                    ("skills/iii/c", "skills/c")
                };
                if self.tree.path(from).is_dir() && !self.tree.path(to).exists() {
                    self.tree.rename(from, to);
                    self.note(format!("move folder {from} -> {to}"));
                } else {
                    self.note(format!("move folder {from} -> {to}: not possible"));
                }
            }
            73..=79 => {
                self.directory = None;
                self.open();
                self.note("restart".into());
            }
            80..=82 => {
                self.directory = None;
                let path = self.config().paths.index_path;
                fs::remove_file(&path).expect("delete the index");
                self.open();
                self.epoch += 1;
                self.note("rebuild: the index file deleted and built again".into());
            }
            83..=91 => {
                let options: [Option<&[&str]>; 4] =
                    [None, Some(&["a"]), Some(&["a", "c"]), Some(&[])];
                let pick = *self.rng.pick(&options);
                self.seen.installed =
                    pick.map(|names| names.iter().map(|s| s.to_string()).collect());
                let installed = self.seen.installed.clone();
                self.note(format!("installed workers: {installed:?}"));
            }
            _ => {
                self.seen.filter = !self.seen.filter;
                let mut settings = self.directory().settings();
                settings.filter_unregistered = self.seen.filter;
                self.directory()
                    .apply_settings(settings)
                    .expect("a tunable setting");
                let filter = self.seen.filter;
                self.note(format!("filter_unregistered: {filter}"));
            }
        }
    }

    // ---- Checks --------------------------------------------------------------------------

    fn ask(&self, variant: &Variant, extra: Value) -> Result<Value, String> {
        let mut request = variant.request.clone();
        for (k, v) in extra.as_object().expect("an object") {
            request[k] = v.clone();
        }
        let installed = self.seen.installed.as_ref();
        let directory = self.directory();
        let answer = directory
            .read(variant.list, &request, installed)
            .map_err(|e| format!("{} {request}: {e}", variant.list.id()))?;
        // The same answer written as text (the command line's) says the same.
        let text = directory
            .read_json(variant.list, &request, installed)
            .map_err(|e| format!("{} {request} (as text): {e}", variant.list.id()))?;
        let from_text: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        if from_text != answer {
            return Err(format!(
                "{} {request}: the text answer {text} differs from the value {answer}",
                variant.list.id()
            ));
        }
        // The idle-poll path the worker tries first answers only `unchanged`, and only when
        // the ordinary read does.
        if let Some(fast) = directory.read_if_unchanged(variant.list, &request, installed) {
            let fast = fast
                .and_then(|a| a.into_value())
                .map_err(|e| format!("{} {request} (unchanged path): {e}", variant.list.id()))?;
            if fast != answer {
                return Err(format!(
                    "{} {request}: the unchanged path answered {fast}, the read {answer}",
                    variant.list.id()
                ));
            }
        } else if answer["unchanged"] == json!(true) {
            return Err(format!(
                "{} {request}: the read answered unchanged, the unchanged path did not",
                variant.list.id()
            ));
        }
        Ok(answer)
    }

    fn rows_of(variant: &Variant, rows: &Value) -> Result<Rows, String> {
        let rows = rows
            .as_array()
            .ok_or_else(|| format!("rows are not an array: {rows}"))?;
        let mut out = Rows::new();
        for row in rows {
            let key = row[variant.key]
                .as_str()
                .ok_or_else(|| format!("a row without {}: {row}", variant.key))?;
            if out.insert(key.to_string(), row.clone()).is_some() {
                return Err(format!("two rows keyed {key}"));
            }
        }
        Ok(out)
    }

    /// The whole answer now, with its revision (and the plain answer agrees with it).
    fn whole(&self, variant: &Variant) -> Result<Held, String> {
        let first = self.ask(variant, json!({ "since_revision": 0 }))?;
        if first["full"] != json!(true) {
            return Err(format!(
                "since_revision 0 must answer the whole list: {first}"
            ));
        }
        let token = first["revision"]
            .as_u64()
            .ok_or_else(|| format!("no revision: {first}"))?;
        let plain = self.ask(variant, json!({}))?;
        if plain.get("revision").is_some() || plain.get("full").is_some() {
            return Err(format!("a plain list carries revision fields: {plain}"));
        }
        if plain[variant.field] != first[variant.field] {
            return Err("the plain answer and the full one differ".into());
        }
        Ok(Held {
            token,
            rows: Self::rows_of(variant, &first[variant.field])?,
            epoch: self.epoch,
            index_revision: self.directory().revision().map_err(|e| e.to_string())?,
            seen: self.seen.clone(),
        })
    }

    /// What a client holding `held` must be answered, checked, and its rows after applying it.
    fn catch_up(&mut self, variant: &Variant, held: &Held, now: &Held) -> Result<Rows, String> {
        let answer = self.ask(variant, json!({ "since_revision": held.token }))?;
        let same_view = variant.list != ReadFunction::SkillsList
            || held.seen.effective() == now.seen.effective();
        let floor = now.index_revision.saturating_sub(self.keep);
        let reachable = held.epoch == now.epoch && same_view && held.index_revision >= floor;
        if answer["revision"].as_u64() != Some(now.token) {
            return Err(format!(
                "the answer's revision is not the current one: {answer}"
            ));
        }
        let kind;
        let rows = if answer["unchanged"] == json!(true) {
            kind = "unchanged";
            if held.token != now.token {
                return Err(format!("unchanged for an older revision: {answer}"));
            }
            held.rows.clone()
        } else if answer.get("changed").is_some() {
            kind = "delta";
            if !reachable {
                return Err(format!(
                    "a delta from a revision that cannot be answered from (epoch {} vs {}, view {same_view}, revision {} below the floor {floor}): {answer}",
                    held.epoch, now.epoch, held.index_revision
                ));
            }
            let changed = Self::rows_of(variant, &answer["changed"])?;
            let removed: BTreeSet<String> = answer["removed"]
                .as_array()
                .ok_or_else(|| format!("no removed: {answer}"))?
                .iter()
                .map(|v| v.as_str().expect("an id").to_string())
                .collect();
            if let Some(both) = removed.iter().find(|id| changed.contains_key(*id)) {
                return Err(format!("{both} is both changed and removed: {answer}"));
            }
            let mut rows = held.rows.clone();
            rows.retain(|k, _| !removed.contains(k));
            rows.extend(changed);
            rows
        } else {
            kind = "full";
            if answer["full"] != json!(true) {
                return Err(format!("neither unchanged, a delta nor full: {answer}"));
            }
            if reachable {
                return Err(format!(
                    "the whole list although the log reaches back to revision {}: {answer}",
                    held.index_revision
                ));
            }
            Self::rows_of(variant, &answer[variant.field])?
        };
        *self.answers.entry(kind).or_default() += 1;
        // `if_revision` keeps its meaning: unchanged only for the current revision.
        let cached = self.ask(variant, json!({ "if_revision": held.token }))?;
        let unchanged = cached["unchanged"] == json!(true);
        if unchanged != (held.token == now.token) {
            return Err(format!("if_revision {} answered {cached}", held.token));
        }
        Ok(rows)
    }

    fn check(&mut self) -> Result<(), String> {
        self.directory().reconcile().map_err(|e| e.to_string())?;
        let variants = variants();
        let mut now = Vec::new();
        for variant in &variants {
            now.push(self.whole(variant)?);
        }
        let history = self.history.clone();
        for (step, held_then) in history.iter().enumerate() {
            for (v, variant) in variants.iter().enumerate() {
                let rows = self.catch_up(variant, &held_then[v], &now[v])?;
                if rows != now[v].rows {
                    return Err(format!(
                        "{} {}: the answer of step {step} with the delta applied differs from the whole answer\n  replayed: {rows:?}\n  whole:    {:?}",
                        variant.list.id(),
                        variant.request,
                        now[v].rows
                    ));
                }
            }
        }
        // A client that polled after every step.
        let pollers = std::mem::take(&mut self.pollers);
        for (v, variant) in variants.iter().enumerate() {
            if let Some(held) = pollers.get(v) {
                let rows = self.catch_up(variant, held, &now[v])?;
                if rows != now[v].rows {
                    return Err(format!(
                        "{} {}: a client polling every step holds other rows than the whole answer",
                        variant.list.id(),
                        variant.request
                    ));
                }
            }
        }
        self.pollers = now.clone();
        self.history.push(now);
        Ok(())
    }

    fn run(&mut self, steps: usize) -> Result<(), String> {
        self.check()?;
        for _ in 0..steps {
            self.step();
            self.check()?;
        }
        Ok(())
    }

    fn describe(&self, why: &str) -> String {
        let mut out = format!(
            "{why}\nseed {} (change_log_revisions {}); replay with DELTA_SEED={}\nop log:\n",
            self.seed, self.keep, self.seed
        );
        for (i, line) in self.log.iter().enumerate() {
            out.push_str(&format!("  {:>3}. {line}\n", i + 1));
        }
        out
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}"))
    })
}

#[test]
fn replaying_deltas_from_any_earlier_revision_gives_the_current_list() {
    let started = Instant::now();
    let steps = env_u64("DELTA_STEPS").map_or(DEFAULT_STEPS, |n| n as usize);
    let seeds: Vec<u64> = match env_u64("DELTA_SEED") {
        Some(seed) => vec![seed],
        None => {
            let first = env_u64("DELTA_FIRST_SEED").unwrap_or(0);
            let count = env_u64("DELTA_SEQUENCES").unwrap_or(DEFAULT_SEQUENCES);
            (first..first + count).collect()
        }
    };
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    for &seed in &seeds {
        let mut sequence = Sequence::new(seed);
        match catch_unwind(AssertUnwindSafe(|| sequence.run(steps))) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => panic!("{}", sequence.describe(&why)),
            Err(panic) => {
                let why = common::panic_message(&*panic);
                panic!("{}", sequence.describe(&format!("panicked: {why}")));
            }
        }
        for (kind, n) in sequence.answers {
            *kinds.entry(kind).or_default() += n;
        }
    }
    eprintln!(
        "{} sequences of {steps} steps in {:.1} s; answers by kind: {kinds:?}",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    // The sequences exercise every kind of answer (a generator that never reaches one would
    // leave it untested).
    if seeds.len() >= DEFAULT_SEQUENCES as usize {
        for kind in ["unchanged", "delta", "full"] {
            assert!(
                kinds.get(kind).is_some_and(|n| *n > 0),
                "no {kind} answer: {kinds:?}"
            );
        }
    }
}

/// The worked example of the README: a client keeps the list current through a write, an
/// external delete and a restart, receiving only what changed.
#[test]
fn a_client_keeps_the_skills_list_current_with_small_answers() {
    let tree = Tree::new();
    tree.write("skills/mail/index.md", "# Mail\n\nSend mail.\n");
    tree.write("skills/mail/send.md", "# Send\n\nSend one.\n");
    tree.write("skills/queue/index.md", "# Queue\n\nQueues.\n");
    let directory = tree.open();
    let list = |request: Value, directory: &Directory| {
        common::call(directory, ReadFunction::SkillsList, request)
    };
    let first = list(json!({ "since_revision": 0 }), &directory);
    assert_eq!(first["full"], true);
    let revision = first["revision"].as_u64().expect("revision");
    assert_eq!(
        list(json!({ "since_revision": revision }), &directory),
        json!({ "unchanged": true, "revision": revision })
    );

    directory
        .write(
            WriteFunction::SkillsUpdate,
            &json!({ "id": "mail/send", "content": "# Send v2\n\nSend one, better.\n" }),
            None,
        )
        .expect("update");
    let delta = list(json!({ "since_revision": revision }), &directory);
    assert_eq!(delta["removed"], json!([]));
    let changed = delta["changed"].as_array().expect("changed");
    assert_eq!(changed.len(), 1, "{delta}");
    assert_eq!(changed[0]["id"], "mail/send");
    assert_eq!(changed[0]["title"], "Send v2");
    let revision = delta["revision"].as_u64().expect("revision");

    // Behind the library's back, then a restart: the log is in the index file.
    tree.remove("skills/queue/index.md");
    drop(directory);
    let directory = tree.open();
    let delta = list(json!({ "since_revision": revision }), &directory);
    assert_eq!(delta["changed"], json!([]), "{delta}");
    assert_eq!(delta["removed"], json!(["queue", "queue/index"]));

    // Filters apply: a client of one namespace hears nothing of another's changes.
    let mail = list(
        json!({ "since_revision": 0, "prefix": "mail/" }),
        &directory,
    );
    let at = mail["revision"].as_u64().expect("revision");
    tree.write("skills/other/index.md", "# Other\n\nElsewhere.\n");
    directory.reconcile().expect("reconcile");
    let delta = list(
        json!({ "since_revision": at, "prefix": "mail/" }),
        &directory,
    );
    assert_eq!(delta["changed"], json!([]), "{delta}");
    assert_eq!(delta["removed"], json!([]), "{delta}");
    assert!(delta["revision"].as_u64() > Some(at));

    // A revision of one filtered list is not taken back for another: a caller that changed
    // its filters holds other rows, and gets the whole list it asks for now.
    let held = delta["revision"].as_u64().expect("revision");
    for other in [
        json!({ "prefix": "other/" }),
        json!({ "prefix": "mail/", "type": "index" }),
        json!({ "prefix": "mail/", "search": "send" }),
        json!({ "prefix": "mail/", "include_description": false }),
    ] {
        let mut asked = other.clone();
        asked["since_revision"] = json!(held);
        let answer = list(asked, &directory);
        assert_eq!(answer["full"], true, "{other}: {answer}");
        assert_eq!(answer["skills"], list(other.clone(), &directory)["skills"]);
        asked = other.clone();
        asked["if_revision"] = json!(held);
        let answer = list(asked, &directory);
        assert!(answer["skills"].is_array(), "{other}: {answer}");
    }
    // The same filters spelled otherwise (an empty search filters nothing): still current.
    let same = list(
        json!({ "since_revision": held, "prefix": "mail/", "search": "" }),
        &directory,
    );
    assert_eq!(same, json!({ "unchanged": true, "revision": held }));

    // A rebuilt index is another index: its revisions are not taken for this one's.
    let index_path = directory.config().paths.index_path.clone();
    let held = list(json!({ "since_revision": 0 }), &directory)["revision"].clone();
    drop(directory);
    fs::remove_file(&index_path).expect("delete the index");
    let directory = tree.open();
    let again = list(json!({ "since_revision": held }), &directory);
    assert_eq!(again["full"], true, "{again}");
    assert_eq!(
        again["skills"],
        list(json!({}), &directory)["skills"],
        "the whole list"
    );
}

/// An index of an earlier schema (3: before the change log; 4: texts inside the index file;
/// 5: texts stored by content hash; 6: skip reasons stored as sentences; 7: before the spec
/// checks; 8: before the skill embeddings; 9: before the global roots and the profiles'
/// `functions` and `skills_index`; 10: skill rows without the frontmatter name; 11: skill
/// vectors of the earlier skill text; 12: skill vectors that do not name their model; 13: YAML
/// mistakes placed one line early, salvaged blocks without license or allowed-tools) is rebuilt
/// at open with the log's table, an epoch, a floor and a texts store, and the lists answer
/// deltas from then on.
#[test]
fn an_index_of_an_earlier_schema_is_rebuilt_with_a_change_log() {
    use iii_directory::testing::{SCHEMA_VERSION, encode};
    assert_eq!(SCHEMA_VERSION, 14);
    for earlier in [3u64, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13] {
        rebuilt_from(earlier, encode);
    }
}

fn rebuilt_from(earlier: u64, encode: fn(&u64) -> Vec<u8>) {
    let tree = Tree::new();
    tree.write("skills/a/index.md", "# A\n\nAn a.\n");
    let config = tree.config();
    let path = config.paths.index_path.clone();
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    {
        // What an earlier file holds: its tables (without `change_log` before 4), texts in
        // the index (`content`), no texts store.
        let db = redb::Database::create(&path).expect("create");
        let txn = db.begin_write().expect("write");
        {
            let mut meta = txn
                .open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
                .expect("meta");
            meta.insert("schema_version", encode(&earlier).as_slice())
                .expect("insert");
            meta.insert("revision", encode(&41u64).as_slice())
                .expect("insert");
            txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("view_skills"))
                .expect("view_skills");
            // Every schema had the file table (which, with `schema_version`, marks the file
            // as an index of ours, so it may be rebuilt).
            txn.open_table(redb::TableDefinition::<&[u8], &[u8]>::new("files"))
                .expect("files");
            txn.open_table(redb::TableDefinition::<&[u8; 32], &[u8]>::new("content"))
                .expect("content");
        }
        txn.commit().expect("commit");
    }
    let directory = tree.open();
    let first = common::call(
        &directory,
        ReadFunction::SkillsList,
        json!({ "since_revision": 0 }),
    );
    assert_eq!(first["full"], true);
    assert_eq!(
        directory.revision().expect("revision"),
        1,
        "rebuilt from scratch"
    );
    let revision = first["revision"].clone();
    tree.write("skills/b/index.md", "# B\n\nA b.\n");
    directory.reconcile().expect("reconcile");
    let delta = common::call(
        &directory,
        ReadFunction::SkillsList,
        json!({ "since_revision": revision }),
    );
    assert_eq!(delta["changed"][0]["id"], "b", "{delta}");
    drop(directory);
    let db = redb::Database::open(&path).expect("reopen");
    let txn = redb::ReadableDatabase::begin_read(&db).expect("read");
    let meta = txn
        .open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
        .expect("meta");
    assert_eq!(
        meta.get("schema_version")
            .expect("get")
            .expect("version")
            .value(),
        encode(&iii_directory::testing::SCHEMA_VERSION).as_slice()
    );
    assert!(meta.get("epoch").expect("get").is_some(), "an epoch");
    assert!(
        txn.list_tables()
            .expect("tables")
            .all(|table| redb::TableHandle::name(&table) != "content"),
        "the texts left the index (schema {earlier})"
    );
    assert!(
        iii_directory::index_files(&path)[1].is_file(),
        "a texts store beside it"
    );
    assert!(
        meta.get("change_log_floor").expect("get").is_some(),
        "a floor"
    );
    txn.open_table(redb::TableDefinition::<(u8, u64, &str), ()>::new(
        "change_log",
    ))
    .expect("the change log table");
    txn.open_table(redb::TableDefinition::<&[u8; 32], u64>::new("text_ids"))
        .expect("the text ids table");
    txn.open_table(redb::TableDefinition::<&[u8; 32], &[u8]>::new("spec"))
        .expect("the spec checks table");
    txn.open_table(redb::TableDefinition::<&[u8; 32], &[u8]>::new("vectors"))
        .expect("the skill embeddings table");
}

/// A subscriber that polls as soon as it hears of a change (as the console page does) is never
/// told `unchanged`: the revision the idle-poll path answers from is noted before the change
/// is announced, for a library write and for an edit on disk.
#[test]
fn a_poll_on_a_change_event_sees_the_change() {
    use std::sync::{Arc, Mutex, OnceLock};

    let tree = Tree::new();
    tree.write("skills/mail/index.md", "# Mail\n\nSend mail.\n");
    let directory = Arc::new(tree.open());
    let revision = |d: &Directory| {
        common::call(d, ReadFunction::SkillsList, json!({ "since_revision": 0 }))["revision"]
            .as_u64()
            .expect("revision")
    };
    let held = Arc::new(Mutex::new(revision(&directory)));
    let polls: Arc<Mutex<Vec<Value>>> = Arc::default();
    let this: Arc<OnceLock<std::sync::Weak<Directory>>> = Arc::default();
    this.set(Arc::downgrade(&directory)).expect("set once");
    {
        let (held, polls, this) = (held.clone(), polls.clone(), this.clone());
        directory.subscribe(Arc::new(move |_event: &iii_directory::ChangeEvent| {
            let directory = this.get().and_then(|w| w.upgrade()).expect("the directory");
            let request = json!({ "since_revision": *held.lock().unwrap() });
            let fast = directory.read_if_unchanged(ReadFunction::SkillsList, &request, None);
            let answer = match fast {
                Some(answer) => answer.and_then(|a| a.into_value()).expect("answer"),
                None => directory
                    .read(ReadFunction::SkillsList, &request, None)
                    .expect("read"),
            };
            polls.lock().unwrap().push(answer);
        }));
    }

    directory
        .write(
            WriteFunction::SkillsUpdate,
            &json!({ "id": "mail/index", "content": "# Mail v2\n\nSend more mail.\n" }),
            None,
        )
        .expect("update");
    *held.lock().unwrap() = revision(&directory);
    tree.write("skills/mail/send.md", "# Send\n\nSend one.\n");
    directory.reconcile().expect("reconcile");

    let polls = polls.lock().unwrap();
    assert_eq!(polls.len(), 2, "one poll per change: {polls:?}");
    for poll in polls.iter() {
        assert_ne!(poll["unchanged"], json!(true), "{poll}");
        assert_eq!(poll["changed"].as_array().map(Vec::len), Some(1), "{poll}");
    }
}
