//! Crash safety: a child process (this test binary, re-executed) writes skills through the
//! library in a loop and prints one line per acknowledged write; the parent kills it with
//! SIGKILL at a random moment, restarts from the same tree and index, and checks that every
//! acknowledged write is on disk with exactly its content, that no file is torn, that no
//! temporary file is ever served, and that the index after a reconcile equals a fresh one.
//!
//! ```sh
//! CRASH_CYCLES=500 cargo test --test crash -- --nocapture
//! ```

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use iii_directory::generate::Rng;
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::{Value, json};

const CHILD: &str = "crash_child_writer";
const TREE_VAR: &str = "III_DIRECTORY_CRASH_TREE";
const SEED_VAR: &str = "III_DIRECTORY_CRASH_SEED";
/// Skills the child works on: a small id space so creates, updates and deletes collide.
const CRASH_IDS: usize = 24;
const SEED_IDS: usize = 8;
const SIZES: [usize; 7] = [40, 300, 2_000, 16_000, 64_000, 180_000, 250_000];

/// The full content of a write, a pure function of its token and size: the parent rebuilds
/// what the child wrote from the line it printed.
fn content_for(token: &str, size: usize) -> String {
    let mut text =
        format!("---\ntitle: T {token}\ntoken: {token}\nsize: {size}\n---\n# {token}\n\n");
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

/// Files the parent edits directly between kills.
const EXTERNAL_IDS: usize = 60;

fn external_id(i: usize) -> String {
    format!("ext/e{i}")
}

fn crash_id(i: usize) -> String {
    format!("crash/k{i}")
}

fn seed_id(i: usize) -> String {
    format!("seed/s{i}")
}

fn file_of(base: &Path, id: &str) -> PathBuf {
    base.join("skills").join(format!("{id}.md"))
}

/// The child: opens the index, reconciles, says READY, then writes until killed.
#[test]
#[ignore = "run by `crash_kill_cycles` as a child process"]
fn crash_child_writer() {
    let Ok(base) = std::env::var(TREE_VAR) else {
        return;
    };
    let seed: u64 = std::env::var(SEED_VAR).unwrap().parse().unwrap();
    let base = PathBuf::from(base);
    let directory = Directory::open(iii_directory::config::Config::for_root(&base)).unwrap();
    directory.reconcile().unwrap();
    let mut rng = Rng::new(seed);
    let out = std::io::stdout();
    let say = |line: String| {
        let mut out = out.lock();
        out.write_all(line.as_bytes()).unwrap();
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    };
    say("READY".into());
    for n in 0.. {
        let id = if rng.chance(75) {
            crash_id(rng.below(CRASH_IDS))
        } else {
            seed_id(rng.below(SEED_IDS))
        };
        let exists = directory
            .read(ReadFunction::SkillsGet, &json!({"id": id}), None)
            .is_ok();
        let token = format!("{seed}-{n}");
        let size = SIZES[rng.below(SIZES.len())] + rng.below(100);
        let (function, op, request) = if !exists {
            (
                WriteFunction::SkillsCreate,
                "create",
                json!({"id": id, "content": content_for(&token, size)}),
            )
        } else if rng.chance(70) {
            (
                WriteFunction::SkillsUpdate,
                "update",
                json!({"id": id, "content": content_for(&token, size)}),
            )
        } else {
            (WriteFunction::SkillsDelete, "delete", json!({"id": id}))
        };
        say(format!("BEGIN {op} {id} {token} {size}"));
        match directory.write(function, &request, None) {
            Ok(response) => say(format!("ACK {op} {id} {token} {size} {response}")),
            Err(e) => say(format!("ERR {op} {id} {token} {e}")),
        }
    }
}

/// One write the child began: what the parent knows of it.
#[derive(Clone, Debug)]
struct Begun {
    op: String,
    id: String,
    token: String,
    size: usize,
}

/// What a skill's file should hold: `None` = no file.
type State = Option<(String, usize)>;

#[derive(Default, Debug)]
struct Totals {
    cycles: usize,
    acknowledged: usize,
    acknowledged_creates_updates: usize,
    acknowledged_deletes: usize,
    in_flight_landed: usize,
    in_flight_not_landed: usize,
    killed_before_any_write: usize,
    /// Cycles that began with a batch of external edits (for the child's boot reconcile).
    external_batches: usize,
    stray_temp_files: usize,
    index_rebuilt: usize,
    /// Skill states compared with the disk and the index (every id, every cycle).
    states_checked: usize,
}

#[test]
fn crash_kill_cycles() {
    let cycles: usize = std::env::var("CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let tree = common::Tree::new();
    let base = tree.base().to_path_buf();
    tree.mkdir("skills/iii").mkdir("agents");
    let mut model: BTreeMap<String, State> = BTreeMap::new();
    let mut known: BTreeSet<String> = BTreeSet::new();
    for i in 0..SEED_IDS {
        let token = format!("seed-{i}");
        let size = 500 + 1000 * i;
        tree.write(
            &format!("skills/{}.md", seed_id(i)),
            &content_for(&token, size),
        );
        model.insert(seed_id(i), Some((token.clone(), size)));
        known.insert(token);
    }
    for i in 0..CRASH_IDS {
        model.insert(crash_id(i), None);
    }
    tree.mkdir("skills/ext");
    for i in 0..EXTERNAL_IDS {
        let token = format!("ext-{i}");
        tree.write(
            &format!("skills/{}.md", external_id(i)),
            &content_for(&token, 300),
        );
        model.insert(external_id(i), Some((token.clone(), 300)));
        known.insert(token);
    }
    drop(tree.open());

    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(0xC0FFEE);
    let mut totals = Totals::default();
    let started = Instant::now();
    for cycle in 0..cycles {
        // Now and then a batch of edits behind the library's back, so the child's boot
        // reconcile has work to do when an early kill comes.
        if rng.chance(30) {
            totals.external_batches += 1;
            for k in 0..EXTERNAL_IDS {
                let token = format!("p{cycle}-{k}");
                let size = 1_000 + 97 * k;
                fs::write(file_of(&base, &external_id(k)), content_for(&token, size)).unwrap();
                model.insert(external_id(k), Some((token.clone(), size)));
                known.insert(token);
            }
        }
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                CHILD,
                "--nocapture",
                "--ignored",
                "--test-threads=1",
            ])
            .env(TREE_VAR, &base)
            .env(SEED_VAR, (cycle + 1).to_string())
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child");
        let stdout = child.stdout.take().unwrap();
        let (ready_tx, ready_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                // A line cut by the kill has no newline: it was never fully printed.
                if buf.last() != Some(&b'\n') {
                    break;
                }
                let line = String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned();
                if line.ends_with("READY") {
                    let _ = ready_tx.send(());
                }
                lines.push(line);
            }
            lines
        });
        // One cycle in five kills the child while it opens and reconciles the index.
        if !rng.chance(20) {
            ready_rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("cycle {cycle}: the child never got ready"));
        }
        let delay = Duration::from_micros(rng.below(50_000) as u64);
        std::thread::sleep(delay);
        child.kill().expect("kill the child");
        child.wait().expect("reap the child");
        let lines = reader.join().unwrap();
        totals.cycles += 1;

        // What the child began and acknowledged, in order.
        let mut begun: Option<Begun> = None;
        let mut writes = 0;
        for line in &lines {
            let words: Vec<&str> = line.splitn(6, ' ').collect();
            match words[0] {
                "BEGIN" => {
                    let b = Begun {
                        op: words[1].into(),
                        id: words[2].into(),
                        token: words[3].into(),
                        size: words[4].parse().unwrap(),
                    };
                    known.insert(b.token.clone());
                    begun = Some(b);
                    writes += 1;
                }
                "ACK" => {
                    let b = begun.take().expect("ACK without BEGIN");
                    assert_eq!((words[1], words[2], words[3]), (&*b.op, &*b.id, &*b.token));
                    let response: Value = serde_json::from_str(words[5]).unwrap();
                    totals.acknowledged += 1;
                    if b.op == "delete" {
                        totals.acknowledged_deletes += 1;
                        assert_eq!(response["id"], b.id, "{line}");
                        model.insert(b.id, None);
                    } else {
                        totals.acknowledged_creates_updates += 1;
                        assert_eq!(response["id"], b.id, "{line}");
                        assert_eq!(response["bytes"], b.size_bytes(), "{line}");
                        assert_eq!(response["title"], format!("T {}", b.token), "{line}");
                        model.insert(b.id, Some((b.token, b.size)));
                    }
                }
                "ERR" => panic!("cycle {cycle}: the child's write failed: {line}"),
                _ => {}
            }
        }
        if writes == 0 {
            totals.killed_before_any_write += 1;
        }

        // The disk: every acknowledged write is there with exactly its content; the write in
        // flight when the kill came either landed whole or not at all.
        for (id, expected) in model.clone() {
            totals.states_checked += 1;
            let actual = disk_state(&base, &id, &known, cycle);
            match &begun {
                Some(b) if b.id == id => {
                    let after: State = if b.op == "delete" {
                        None
                    } else {
                        Some((b.token.clone(), b.size))
                    };
                    assert!(
                        actual == expected || actual == after,
                        "cycle {cycle}: in-flight {b:?} left {id} as {actual:?}, neither {expected:?} nor {after:?}"
                    );
                    if actual == after && after != expected {
                        totals.in_flight_landed += 1;
                    } else {
                        totals.in_flight_not_landed += 1;
                    }
                    model.insert(id, actual);
                }
                _ => assert_eq!(
                    actual, expected,
                    "cycle {cycle}: {id} on disk differs from its last acknowledged write"
                ),
            }
        }
        // No torn file anywhere, and nothing but ours.
        let (markdown, temps) = scan(&base);
        for path in &markdown {
            let text = fs::read_to_string(path).unwrap();
            let (token, size) = header_of(&text).unwrap_or_else(|| {
                panic!("cycle {cycle}: torn or foreign file {}", path.display())
            });
            assert!(
                known.contains(&token),
                "cycle {cycle}: unknown token in {}",
                path.display()
            );
            assert!(
                text == content_for(&token, size),
                "cycle {cycle}: torn file {} ({} bytes, token {token})",
                path.display(),
                text.len()
            );
        }
        totals.stray_temp_files = temps.len();

        // Restart: the same tree and index; after a reconcile it equals a fresh index.
        let directory = Directory::open(iii_directory::config::Config::for_root(&base))
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen: {e}"));
        if directory.index().read().unwrap().file_count().unwrap() == 0 {
            totals.index_rebuilt += 1;
        }
        directory.reconcile().unwrap();
        let listed = common::skill_ids(&directory);
        assert!(
            listed.iter().all(|id| !id.contains("tmp")),
            "cycle {cycle}: a temporary file is served: {listed:?}"
        );
        for (id, state) in &model {
            let got = directory.read(
                ReadFunction::SkillsGet,
                &json!({"id": id, "raw": true}),
                None,
            );
            match state {
                Some((token, size)) => {
                    let got = got.unwrap_or_else(|e| panic!("cycle {cycle}: get {id}: {e}"));
                    assert!(
                        got["raw"] == content_for(token, *size),
                        "cycle {cycle}: {id} served stale content"
                    );
                }
                None => assert!(got.is_err(), "cycle {cycle}: {id} deleted but served"),
            }
        }
        assert_matches_fresh(&directory, cycle);
        drop(directory);
    }
    println!(
        "crash: {} cycles in {:.1}s; acknowledged writes checked: {} ({} creates/updates, {} deletes); in flight at the kill: {} landed whole, {} not at all; cycles killed before any write: {}; stray temporary files on disk at the end: {}; index rebuilt after a kill: {}; cycles starting with {EXTERNAL_IDS} external edits: {}; skill states checked against disk and index: {}",
        totals.cycles,
        started.elapsed().as_secs_f64(),
        totals.acknowledged,
        totals.acknowledged_creates_updates,
        totals.acknowledged_deletes,
        totals.in_flight_landed,
        totals.in_flight_not_landed,
        totals.killed_before_any_write,
        totals.stray_temp_files,
        totals.index_rebuilt,
        totals.external_batches,
        totals.states_checked,
    );
    assert!(
        totals.acknowledged >= cycles / 4,
        "too few acknowledged writes to mean anything: {totals:?}"
    );
    assert_eq!(
        totals.index_rebuilt, 0,
        "a kill damaged the index: {totals:?}"
    );
}

impl Begun {
    fn size_bytes(&self) -> usize {
        content_for(&self.token, self.size).len()
    }
}

/// What a skill's file holds on disk, checked to be one complete content the child wrote.
fn disk_state(base: &Path, id: &str, known: &BTreeSet<String>, cycle: usize) -> State {
    let path = file_of(base, id);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("cycle {cycle}: read {}: {e}", path.display()),
    };
    let (token, size) =
        header_of(&text).unwrap_or_else(|| panic!("cycle {cycle}: torn file {}", path.display()));
    assert!(
        known.contains(&token),
        "cycle {cycle}: unknown token {token}"
    );
    assert!(
        text == content_for(&token, size),
        "cycle {cycle}: torn file {}",
        path.display()
    );
    Some((token, size))
}

/// Every `.md` file and every temporary file under the roots (the index folder excepted).
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

fn assert_matches_fresh(directory: &Directory, cycle: usize) {
    let fresh_dir = tempfile::tempdir().unwrap();
    let mut config = directory.config().clone();
    config.paths.index_path = fresh_dir.path().join("fresh.redb");
    let fresh = Directory::open(config).unwrap();
    fresh.reconcile().unwrap();
    let dump = |d: &Directory| {
        let mut out = BTreeMap::new();
        let list = common::call(d, ReadFunction::SkillsList, json!({}));
        for id in common::skill_ids(d) {
            let got = d
                .read(
                    ReadFunction::SkillsGet,
                    &json!({"id": id, "raw": true}),
                    None,
                )
                .map_err(|e| e.to_string());
            out.insert(format!("get {id}"), format!("{got:?}"));
        }
        out.insert("list".into(), list.to_string());
        out.insert(
            "index".into(),
            common::call(d, ReadFunction::SkillsIndex, json!({})).to_string(),
        );
        out.insert("skipped".into(), format!("{:?}", d.skipped().unwrap()));
        out
    };
    let (ours, theirs) = (dump(directory), dump(&fresh));
    for key in ours.keys().chain(theirs.keys()) {
        assert!(
            ours.get(key) == theirs.get(key),
            "cycle {cycle}: index != fresh index at {key}"
        );
    }
}
