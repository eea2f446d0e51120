//! Crash safety: a child process (this test binary, re-executed) runs the write functions of
//! all three families (skills, system prompts, agent profiles: create, update, delete) through
//! the library in a loop and prints one line per acknowledged write; the parent kills it with
//! SIGKILL at a random moment (during its boot reconcile, while the index is being written, or
//! among its writes), restarts from the same tree and index, and checks that every
//! acknowledged write is on disk with exactly its content, that the write in flight landed
//! whole or not at all, that no file is torn, that the restart removed every temporary file
//! the kill left behind and serves none, and that the index after a reconcile equals a fresh
//! one.
//!
//! The default (`CRASH_CYCLES`, 200) fits CI; a longer run:
//!
//! ```sh
//! CRASH_CYCLES=2000 cargo test --release --test processes crash:: -- --nocapture
//! ```

use test_support::common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::child;
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::{Value, json};
use test_support::generate::Rng;

const CHILD: &str = "crash_child_writer";
const TREE_VAR: &str = "III_DIRECTORY_CRASH_TREE";
const SEED_VAR: &str = "III_DIRECTORY_CRASH_SEED";
/// Documents of each family the child works on: a small id space so creates, updates and
/// deletes collide.
const CRASH_IDS: usize = 12;
const SEED_IDS: usize = 4;
const SIZES: [usize; 7] = [40, 300, 2_000, 16_000, 64_000, 180_000, 250_000];
/// How long the parent waits for the child to reach a phase before failing.
const PHASE_WAIT: Duration = Duration::from_secs(30);

/// The three families the write functions cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Family {
    Skill,
    Prompt,
    Agent,
}

impl Family {
    const ALL: [Family; 3] = [Family::Skill, Family::Prompt, Family::Agent];

    fn word(self) -> &'static str {
        match self {
            Family::Skill => "skill",
            Family::Prompt => "prompt",
            Family::Agent => "agent",
        }
    }

    fn parse(word: &str) -> Family {
        Family::ALL
            .into_iter()
            .find(|f| f.word() == word)
            .unwrap_or_else(|| panic!("unknown family {word}"))
    }

    /// The request key naming a document of this family.
    fn key(self) -> &'static str {
        match self {
            Family::Prompt => "name",
            _ => "id",
        }
    }

    fn get(self) -> ReadFunction {
        match self {
            Family::Skill => ReadFunction::SkillsGet,
            Family::Prompt => ReadFunction::SystemPromptsGet,
            Family::Agent => ReadFunction::AgentsGet,
        }
    }

    fn write(self, op: &str) -> WriteFunction {
        match (self, op) {
            (Family::Skill, "create") => WriteFunction::SkillsCreate,
            (Family::Skill, "update") => WriteFunction::SkillsUpdate,
            (Family::Skill, "delete") => WriteFunction::SkillsDelete,
            (Family::Prompt, "create") => WriteFunction::SystemPromptsCreate,
            (Family::Prompt, "update") => WriteFunction::SystemPromptsUpdate,
            (Family::Prompt, "delete") => WriteFunction::SystemPromptsDelete,
            (Family::Agent, "create") => WriteFunction::AgentsCreate,
            (Family::Agent, "update") => WriteFunction::AgentsUpdate,
            (Family::Agent, "delete") => WriteFunction::AgentsDelete,
            _ => panic!("unknown op {op}"),
        }
    }

    fn crash_id(self, i: usize) -> String {
        match self {
            Family::Skill => format!("crash/k{i}"),
            Family::Prompt => format!("p{i}"),
            Family::Agent => format!("a{i}"),
        }
    }

    fn seed_id(self, i: usize) -> String {
        match self {
            Family::Skill => format!("seed/s{i}"),
            Family::Prompt => format!("ps{i}"),
            Family::Agent => format!("as{i}"),
        }
    }

    /// Where the document lives, relative to the base folder.
    fn rel(self, id: &str) -> String {
        match self {
            Family::Skill => format!("skills/{id}.md"),
            Family::Prompt => format!("skills/system-prompts/{id}.md"),
            Family::Agent => format!("agents/{id}.md"),
        }
    }

    /// The family of a file, from its path relative to the base folder.
    fn of_rel(rel: &str) -> Family {
        if rel.starts_with("agents/") {
            Family::Agent
        } else if rel.starts_with("skills/system-prompts/") {
            Family::Prompt
        } else {
            Family::Skill
        }
    }
}

/// One document: its family and id (a prompt's name).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Doc {
    family: Family,
    id: String,
}

impl fmt::Display for Doc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family.word(), self.id)
    }
}

/// The full content of a write, a pure function of its family, token and size: the parent
/// rebuilds what the child wrote from the line it printed. Each family gets the frontmatter
/// its write rules require (a prompt's `description`, an agent's `name`).
fn content_for(family: Family, token: &str, size: usize) -> String {
    let fields = match family {
        Family::Skill => format!("title: T {token}\n"),
        Family::Prompt => format!("description: D {token}\n"),
        Family::Agent => format!("name: N {token}\ndescription: D {token}\n"),
    };
    let mut text = format!("---\n{fields}token: {token}\nsize: {size}\n---\n# {token}\n\n");
    let mut i = 0;
    while text.len() < size {
        text.push_str(&format!("line {i} of {token}: the quick brown fox.\n"));
        i += 1;
    }
    if text.len() > size && size > 120 {
        text.truncate(size - 1);
        text.push('\n');
    }
    text
}

/// The contents the parent compares files and answers with, built once each (building a
/// 250 KB content line by line in a debug build is not free) and kept while the model refers
/// to them.
#[derive(Default)]
struct Contents {
    built: HashMap<(Family, String, usize), String>,
}

impl Contents {
    fn get(&mut self, family: Family, token: &str, size: usize) -> &str {
        self.built
            .entry((family, token.to_string(), size))
            .or_insert_with(|| content_for(family, token, size))
    }

    /// Forgets the contents no document holds any more.
    fn retain(&mut self, model: &BTreeMap<Doc, State>) {
        let live: HashSet<(Family, &str, usize)> = model
            .iter()
            .filter_map(|(doc, state)| {
                let (token, size) = state.as_ref()?;
                Some((doc.family, token.as_str(), *size))
            })
            .collect();
        self.built
            .retain(|(family, token, size), _| live.contains(&(*family, token.as_str(), *size)));
    }
}

/// The token and size a file declares, if it is one of ours.
fn header_of(text: &str) -> Option<(String, usize)> {
    let token = text.lines().find_map(|l| l.strip_prefix("token: "))?;
    let size = text
        .lines()
        .find_map(|l| l.strip_prefix("size: "))?
        .parse()
        .ok()?;
    Some((token.to_string(), size))
}

/// Skills the parent edits directly between kills.
const EXTERNAL_IDS: usize = 60;

fn external_id(i: usize) -> String {
    format!("ext/e{i}")
}

/// The child: opens the index (says OPENED), reconciles (says READY), then writes until killed.
#[test]
#[ignore = "run by `crash_kill_cycles` as a child process"]
fn crash_child_writer() {
    let Ok(base) = std::env::var(TREE_VAR) else {
        return;
    };
    let seed: u64 = std::env::var(SEED_VAR).unwrap().parse().unwrap();
    let base = PathBuf::from(base);
    let directory = Directory::open(iii_directory::config::Config::for_root(&base)).unwrap();
    child::say("OPENED");
    let started = Instant::now();
    directory.reconcile().unwrap();
    child::say(&format!("READY {}", started.elapsed().as_micros()));
    let mut rng = Rng::new(seed);
    for n in 0.. {
        let family = match rng.below(4) {
            0 | 1 => Family::Skill,
            2 => Family::Prompt,
            _ => Family::Agent,
        };
        let id = if rng.chance(75) {
            family.crash_id(rng.below(CRASH_IDS))
        } else {
            family.seed_id(rng.below(SEED_IDS))
        };
        let key = family.key();
        let exists = directory
            .read(family.get(), &json!({ key: id }), None)
            .is_ok();
        let token = format!("{seed}-{n}");
        let size = SIZES[rng.below(SIZES.len())] + rng.below(100);
        let op = if !exists {
            "create"
        } else if rng.chance(70) {
            "update"
        } else {
            "delete"
        };
        let request = if op == "delete" {
            json!({ key: id })
        } else {
            json!({ key: id, "content": content_for(family, &token, size) })
        };
        let family_word = family.word();
        child::say(&format!("BEGIN {op} {family_word} {id} {token} {size}"));
        match directory.write(family.write(op), &request, None) {
            Ok(response) => child::say(&format!(
                "ACK {op} {family_word} {id} {token} {size} {response}"
            )),
            Err(e) => child::say(&format!("ERR {op} {family_word} {id} {token} {e}")),
        }
    }
}

/// One write the child began: what the parent knows of it.
#[derive(Clone, Debug)]
struct Begun {
    op: String,
    doc: Doc,
    token: String,
    size: usize,
}

impl Begun {
    fn content(&self) -> String {
        content_for(self.doc.family, &self.token, self.size)
    }
}

/// What a document's file should hold: `None` = no file.
type State = Option<(String, usize)>;

/// Where in its life the child was when the kill came.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// Before it said OPENED: starting, or opening the index.
    Opening,
    /// Between OPENED and READY: its boot reconcile, writing the index.
    BootReconcile,
    /// Among its writes.
    Writing,
}

#[derive(Default, Debug)]
struct Totals {
    cycles: usize,
    kills_by_phase: BTreeMap<String, usize>,
    /// Acknowledged writes by family and operation.
    acknowledged: BTreeMap<String, usize>,
    in_flight_landed: usize,
    in_flight_not_landed: usize,
    /// Files found torn (not one complete content the child wrote): must stay 0.
    torn: usize,
    /// Cycles that began with a batch of external edits (for the child's boot reconcile).
    external_batches: usize,
    /// Temporary files the kills left on disk, all removed by the restart's open.
    temps_left_by_kills: usize,
    index_rebuilt: usize,
    /// Document states compared with the disk and the index (every id, every cycle).
    states_checked: usize,
    /// The child's boot reconciles after an external batch, in microseconds.
    boot_reconcile_us: Vec<u64>,
    /// Wall time by step of a cycle, to see where a slow run spends it.
    steps: BTreeMap<&'static str, Duration>,
}

#[test]
fn crash_kill_cycles() {
    let cycles: usize = std::env::var("CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let tree = common::Tree::new();
    let base = tree.base().to_path_buf();
    tree.mkdir("skills/iii").mkdir("agents");
    let mut model: BTreeMap<Doc, State> = BTreeMap::new();
    let mut known: BTreeSet<String> = BTreeSet::new();
    for family in Family::ALL {
        for i in 0..SEED_IDS {
            let doc = Doc {
                family,
                id: family.seed_id(i),
            };
            let token = format!("seed-{}-{i}", family.word());
            let size = 500 + 1000 * i;
            tree.write(&family.rel(&doc.id), &content_for(family, &token, size));
            model.insert(doc, Some((token.clone(), size)));
            known.insert(token);
        }
        for i in 0..CRASH_IDS {
            let id = family.crash_id(i);
            model.insert(Doc { family, id }, None);
        }
    }
    for i in 0..EXTERNAL_IDS {
        let token = format!("ext-{i}");
        let doc = Doc {
            family: Family::Skill,
            id: external_id(i),
        };
        tree.write(
            &Family::Skill.rel(&doc.id),
            &content_for(Family::Skill, &token, 300),
        );
        model.insert(doc, Some((token.clone(), 300)));
        known.insert(token);
    }
    drop(tree.open());

    let mut rng = Rng::new(0xC0FFEE);
    let mut totals = Totals::default();
    let mut contents = Contents::default();
    let started = Instant::now();
    for cycle in 0..cycles {
        // Where this cycle aims its kill: mostly among the writes; one in six into the boot
        // reconcile (after a batch of external edits, so it has the index to write); one in
        // twelve as early as possible.
        let aim = match rng.below(12) {
            0 => Phase::Opening,
            1 | 2 => Phase::BootReconcile,
            _ => Phase::Writing,
        };
        let edited = aim == Phase::BootReconcile || rng.chance(20);
        if edited {
            totals.external_batches += 1;
            for k in 0..EXTERNAL_IDS {
                let token = format!("p{cycle}-{k}");
                let size = 1_000 + 97 * k;
                let doc = Doc {
                    family: Family::Skill,
                    id: external_id(k),
                };
                fs::write(
                    base.join(Family::Skill.rel(&doc.id)),
                    content_for(Family::Skill, &token, size),
                )
                .unwrap();
                model.insert(doc, Some((token.clone(), size)));
                known.insert(token);
            }
        }
        let mut step = Instant::now();
        let mut lap = |totals: &mut Totals, name: &'static str| {
            *totals.steps.entry(name).or_default() += step.elapsed();
            step = Instant::now();
        };
        let mut child = child::command(&child::test_path(module_path!(), CHILD))
            .env(TREE_VAR, &base)
            .env(SEED_VAR, (cycle + 1).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child");
        let stdout = child.stdout.take().unwrap();
        let (phase_tx, phase_rx) = mpsc::channel();
        // `Some(phase)` when the child enters a phase, `None` for each acknowledged write (the
        // harness may print before our lines: the word is matched anywhere).
        let reader = child::read_lines(stdout, move |line| {
            if line.ends_with("OPENED") {
                let _ = phase_tx.send(Some(Phase::BootReconcile));
            } else if line.contains("READY ") {
                let _ = phase_tx.send(Some(Phase::Writing));
            } else if line.starts_with("ACK ") {
                let _ = phase_tx.send(None);
            }
        });
        let wait_for = |signal: Option<Phase>| loop {
            match phase_rx.recv_timeout(PHASE_WAIT) {
                Ok(got) if got == signal => break,
                Ok(_) => {}
                Err(_) => panic!("cycle {cycle}: the child never reached {signal:?}"),
            }
        };
        let delay = match aim {
            Phase::Opening => Duration::from_micros(rng.below(20_000) as u64),
            Phase::BootReconcile => {
                wait_for(Some(Phase::BootReconcile));
                // Somewhere inside the boot reconcile: up to the longest one seen so far.
                let longest = totals.boot_reconcile_us.iter().max().copied();
                let longest = longest.unwrap_or(20_000).max(1) as usize;
                Duration::from_micros(rng.below(longest) as u64)
            }
            Phase::Writing => {
                // After zero to two acknowledged writes (however slow the machine makes each
                // one), then at any moment of the next.
                wait_for(Some(Phase::Writing));
                for _ in 0..rng.below(3) {
                    wait_for(None);
                }
                Duration::from_micros(rng.below(40_000) as u64)
            }
        };
        lap(&mut totals, "1 child start to aim");
        std::thread::sleep(delay);
        child.kill().expect("kill the child");
        child.wait().expect("reap the child");
        let lines = reader.join().unwrap();
        totals.cycles += 1;

        // What the child began and acknowledged, in order.
        let mut phase = Phase::Opening;
        let mut begun: Option<Begun> = None;
        for line in &lines {
            if line.ends_with("OPENED") {
                phase = Phase::BootReconcile;
                continue;
            }
            if let Some(us) = line.split("READY ").nth(1) {
                phase = Phase::Writing;
                if edited {
                    totals.boot_reconcile_us.push(us.parse().unwrap());
                }
                continue;
            }
            let words: Vec<&str> = line.splitn(7, ' ').collect();
            match words[0] {
                "BEGIN" => {
                    let b = Begun {
                        op: words[1].into(),
                        doc: Doc {
                            family: Family::parse(words[2]),
                            id: words[3].into(),
                        },
                        token: words[4].into(),
                        size: words[5].parse().unwrap(),
                    };
                    known.insert(b.token.clone());
                    begun = Some(b);
                }
                "ACK" => {
                    let b = begun.take().expect("ACK without BEGIN");
                    assert_eq!(
                        (words[1], words[2], words[3], words[4]),
                        (&*b.op, b.doc.family.word(), &*b.doc.id, &*b.token)
                    );
                    let response: Value = serde_json::from_str(words[6]).unwrap();
                    check_response(&b, &response, line);
                    *totals
                        .acknowledged
                        .entry(format!("{} {}", b.doc.family.word(), b.op))
                        .or_default() += 1;
                    let state = (b.op != "delete").then(|| (b.token.clone(), b.size));
                    model.insert(b.doc, state);
                }
                "ERR" => panic!("cycle {cycle}: the child's write failed: {line}"),
                _ => {}
            }
        }
        *totals
            .kills_by_phase
            .entry(format!("{phase:?}"))
            .or_default() += 1;

        lap(&mut totals, "2 kill delay and reap");
        // The disk: every acknowledged write is there with exactly its content; the write in
        // flight when the kill came either landed whole or not at all.
        for (doc, expected) in model.clone() {
            totals.states_checked += 1;
            let actual = disk_state(&base, &doc, &known, &mut contents, cycle, &mut totals.torn);
            match &begun {
                Some(b) if b.doc == doc => {
                    let after: State = (b.op != "delete").then(|| (b.token.clone(), b.size));
                    assert!(
                        actual == expected || actual == after,
                        "cycle {cycle}: in-flight {b:?} left {doc} as {actual:?}, neither {expected:?} nor {after:?}"
                    );
                    if actual == after && after != expected {
                        totals.in_flight_landed += 1;
                    } else {
                        totals.in_flight_not_landed += 1;
                    }
                    model.insert(doc, actual);
                }
                _ => assert_eq!(
                    actual, expected,
                    "cycle {cycle}: {doc} on disk differs from its last acknowledged write"
                ),
            }
        }
        // No torn file anywhere, and nothing but ours.
        let (markdown, temps) = scan(&base);
        for path in &markdown {
            let rel = path.strip_prefix(&base).unwrap().to_string_lossy();
            let family = Family::of_rel(&rel);
            let text = fs::read_to_string(path).unwrap();
            let whole = header_of(&text)
                .filter(|(token, size)| {
                    known.contains(token) && text == contents.get(family, token, *size)
                })
                .is_some();
            if !whole {
                totals.torn += 1;
            }
            assert!(whole, "cycle {cycle}: torn or foreign file {rel}");
        }
        totals.temps_left_by_kills += temps.len();

        lap(&mut totals, "3 disk checks");
        // A fresh index of the disk as the kill left it, built beside the restart (the disk
        // does not change any more this cycle; its temporary files are not documents).
        let fresh = {
            let base = base.clone();
            std::thread::spawn(move || {
                common::fresh_index(&iii_directory::config::Config::for_root(&base))
            })
        };
        // Restart: the same tree and index. The boot reconcile removes the kill's temporary
        // files, and the index then equals a fresh one.
        let directory = Directory::open(iii_directory::config::Config::for_root(&base))
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen: {e}"));
        if directory.index().read().unwrap().file_count().unwrap() == 0 {
            totals.index_rebuilt += 1;
        }
        directory.reconcile().unwrap();
        let (_, left) = scan(&base);
        assert!(
            left.is_empty(),
            "cycle {cycle}: temporary files survived the restart: {left:?}"
        );
        let listed = common::skill_ids(&directory);
        assert!(
            listed.iter().all(|id| !id.contains("tmp")),
            "cycle {cycle}: a temporary file is served: {listed:?}"
        );
        // Every answer, then the model's documents among them: each one present is served
        // with exactly its last content, each one absent is not served.
        let ours = common::dump(&directory);
        for (doc, state) in &model {
            let key = doc.family.key();
            let request = json!({ key: doc.id, "raw": true });
            match state {
                Some((token, size)) => {
                    let asked = format!("{} {request}", doc.family.get().id());
                    let got = match ours.get(&asked) {
                        Some(Ok(got)) => got,
                        other => panic!("cycle {cycle}: {doc} not served: {other:?}"),
                    };
                    assert!(
                        got["raw"] == contents.get(doc.family, token, *size),
                        "cycle {cycle}: {doc} served stale content"
                    );
                }
                None => assert!(
                    directory.read(doc.family.get(), &request, None).is_err(),
                    "cycle {cycle}: {doc} deleted but served"
                ),
            }
        }
        lap(&mut totals, "4 restart, reconcile, answers");
        let fresh = fresh.join().expect("the fresh index");
        let theirs = common::dump(&fresh);
        for key in ours.keys().chain(theirs.keys()) {
            assert!(
                ours.get(key) == theirs.get(key),
                "cycle {cycle}: index != fresh index at {key}"
            );
        }
        drop(directory);
        contents.retain(&model);
        lap(&mut totals, "5 fresh index (built alongside) compared");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let acknowledged: usize = totals.acknowledged.values().sum();
    let boot = &totals.boot_reconcile_us;
    println!(
        "crash: {} cycles in {elapsed:.1}s ({:.0} ms each); kills by phase: {:?}; \
         acknowledged writes: {acknowledged} {:?}; in flight at the kill: {} landed whole, {} not \
         at all; torn files: {}; temporary files left by kills: {} (all removed on restart); \
         index rebuilt after a kill: {}; cycles starting with {EXTERNAL_IDS} external edits: {}; \
         boot reconcile after edits: max {} µs; document states checked against disk and \
         index: {}; time by step: {:?}",
        totals.cycles,
        elapsed * 1000.0 / totals.cycles.max(1) as f64,
        totals.kills_by_phase,
        totals.acknowledged,
        totals.in_flight_landed,
        totals.in_flight_not_landed,
        totals.torn,
        totals.temps_left_by_kills,
        totals.index_rebuilt,
        totals.external_batches,
        boot.iter().max().copied().unwrap_or_default(),
        totals.states_checked,
        totals.steps,
    );
    assert_eq!(totals.torn, 0);
    assert!(
        acknowledged >= cycles / 2,
        "too few acknowledged writes to mean anything: {totals:?}"
    );
    for family in Family::ALL {
        for op in ["create", "update", "delete"] {
            let key = format!("{} {op}", family.word());
            assert!(
                totals.acknowledged.get(&key).copied().unwrap_or(0) > 0 || cycles < 50,
                "no acknowledged {key} in {cycles} cycles: {totals:?}"
            );
        }
    }
    assert_eq!(
        totals.index_rebuilt, 0,
        "a kill damaged the index: {totals:?}"
    );
}

/// The response of an acknowledged write says what was written.
fn check_response(b: &Begun, response: &Value, line: &str) {
    let key = b.doc.family.key();
    assert_eq!(response[key], b.doc.id, "{line}");
    if b.op == "delete" {
        return;
    }
    assert_eq!(response["bytes"], b.content().len(), "{line}");
    match b.doc.family {
        Family::Skill => assert_eq!(response["title"], format!("T {}", b.token), "{line}"),
        Family::Prompt => assert_eq!(response["description"], format!("D {}", b.token), "{line}"),
        Family::Agent => assert_eq!(response["name"], format!("N {}", b.token), "{line}"),
    }
}

/// What a document's file holds on disk, checked to be one complete content the child wrote.
fn disk_state(
    base: &Path,
    doc: &Doc,
    known: &BTreeSet<String>,
    contents: &mut Contents,
    cycle: usize,
    torn: &mut usize,
) -> State {
    let path = base.join(doc.family.rel(&doc.id));
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("cycle {cycle}: read {}: {e}", path.display()),
    };
    let header = header_of(&text).filter(|(token, size)| {
        known.contains(token) && text == contents.get(doc.family, token, *size)
    });
    if header.is_none() {
        *torn += 1;
        panic!("cycle {cycle}: torn file {}", path.display());
    }
    header
}

/// Every `.md` file and every temporary file under the base folder (the index folder excepted).
fn scan(base: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    fn walk(dir: &Path, md: &mut Vec<PathBuf>, tmp: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                if path.file_name() != Some("data".as_ref()) {
                    walk(&path, md, tmp);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                md.push(path);
            } else if path.extension().is_some_and(|e| e == "tmp") {
                tmp.push(path);
            }
        }
    }
    let (mut md, mut tmp) = (Vec::new(), Vec::new());
    walk(base, &mut md, &mut tmp);
    (md, tmp)
}
