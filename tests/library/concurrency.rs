//! Many threads on one `Arc<Directory>` with the watcher running: mixed writes and reads on a
//! small id space, an external editor changing files behind the library's back, no error
//! outside the contract's races, no deadlock, and at the end the index equals the disk and a
//! fresh index. Then two writers racing on one skill: the file is always one complete version,
//! and the index serves the same.
//!
//! ```sh
//! CONCURRENCY_SECS=30 cargo test --test library concurrency:: -- --nocapture
//! ```

use test_support::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::Tree;
use iii_directory::ChangeEvent;
use iii_directory::{Directory, ReadFunction, WriteFunction};
use iii_directory::{WatchOptions, Watcher};
use serde_json::{Value, json};
use test_support::generate::Rng;

const THREADS: usize = 8;
const IDS: usize = 12;

fn skill_id(i: usize) -> String {
    // Two namespaces and a namespace overview, so deletes empty folders and alias ids race.
    match i % 4 {
        0 => format!("conc/k{i}"),
        1 => format!("conc/sub/k{i}"),
        2 => format!("other{}/index", i % 3),
        _ => format!("flat{i}"),
    }
}

fn content(token: &str, size: usize) -> String {
    let mut text = format!("---\ntitle: T {token}\n---\n# {token}\n\n");
    while text.len() < size {
        text.push_str(&format!("{token} filler line.\n"));
    }
    text
}

/// Every read answer, keyed by call.
fn dump(directory: &Directory) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for id in common::skill_ids(directory) {
        let got = directory
            .read(
                ReadFunction::SkillsGet,
                &json!({"id": id, "raw": true}),
                None,
            )
            .unwrap_or_else(|e| json!({"error": e.to_string()}));
        out.insert(format!("skills::get {id}"), got);
    }
    for f in [
        ReadFunction::SkillsList,
        ReadFunction::SkillsIndex,
        ReadFunction::SystemPromptsList,
        ReadFunction::AgentsList,
    ] {
        out.insert(f.id().to_string(), common::call(directory, f, json!({})));
    }
    out.insert(
        "skipped".into(),
        serde_json::to_value(directory.skipped().unwrap()).unwrap(),
    );
    out
}

fn fresh_dump(directory: &Directory) -> BTreeMap<String, Value> {
    dump(&common::fresh_index(directory.config()))
}

/// Runs `work` on a thread and fails (instead of hanging) if it does not finish in time.
fn finish_within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}: deadlock?"))
}

#[test]
fn eight_threads_mixed_writes_and_reads_with_the_watcher() {
    let secs: u64 = std::env::var("CONCURRENCY_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let tree = Tree::new();
    tree.mkdir("skills/iii").mkdir("agents");
    tree.write("skills/ext/index.md", "# Ext\n\nx\n");
    let directory = Arc::new(tree.open());
    let events = Arc::new(AtomicUsize::new(0));
    let counter = events.clone();
    directory.subscribe(Arc::new(move |_: &ChangeEvent| {
        counter.fetch_add(1, Ordering::Relaxed);
    }));
    let watcher = Watcher::start(directory.clone(), WatchOptions::default());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let stop = Arc::new(AtomicBool::new(false));
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let ops: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();

    let mut handles = Vec::new();
    for t in 0..THREADS {
        let directory = directory.clone();
        let failures = failures.clone();
        let ops = ops.clone();
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng::new(1000 + t as u64);
            let mut local: BTreeMap<String, usize> = BTreeMap::new();
            let mut n = 0;
            while Instant::now() < deadline {
                n += 1;
                let id = skill_id(rng.below(IDS));
                let token = format!("t{t}-{n}");
                let size = [50, 500, 5_000, 40_000][rng.below(4)];
                let (label, result, allowed): (&str, _, &[&str]) = match rng.below(10) {
                    0 | 1 => (
                        "skills::create",
                        directory.write(
                            WriteFunction::SkillsCreate,
                            &json!({"id": id, "content": content(&token, size)}),
                            None,
                        ),
                        &["D114"],
                    ),
                    2 | 3 => (
                        "skills::update",
                        directory.write(
                            WriteFunction::SkillsUpdate,
                            &json!({"id": id, "content": content(&token, size)}),
                            None,
                        ),
                        &["D110"],
                    ),
                    4 => (
                        "skills::delete",
                        directory.write(WriteFunction::SkillsDelete, &json!({"id": id}), None),
                        &["D110"],
                    ),
                    5 => (
                        "skills::list",
                        directory.read(ReadFunction::SkillsList, &json!({}), None),
                        &[],
                    ),
                    6 => (
                        "skills::index",
                        directory.read(ReadFunction::SkillsIndex, &json!({}), None),
                        &[],
                    ),
                    7 => {
                        // Prompts and agents on a tiny name space of their own.
                        let name = format!("p{}", rng.below(3));
                        let body =
                            format!("---\nname: {name}\ndescription: {token}\n---\n{token}\n");
                        match rng.below(6) {
                            0 => (
                                "system-prompts::create",
                                directory.write(
                                    WriteFunction::SystemPromptsCreate,
                                    &json!({"name": name, "content": body}),
                                    None,
                                ),
                                &["D214"],
                            ),
                            1 => (
                                "system-prompts::update",
                                directory.write(
                                    WriteFunction::SystemPromptsUpdate,
                                    &json!({"name": name, "content": body}),
                                    None,
                                ),
                                &["D210"],
                            ),
                            2 => (
                                "system-prompts::delete",
                                directory.write(
                                    WriteFunction::SystemPromptsDelete,
                                    &json!({"name": name}),
                                    None,
                                ),
                                &["D210"],
                            ),
                            3 => (
                                "agents::create",
                                directory.write(
                                    WriteFunction::AgentsCreate,
                                    &json!({"id": name, "content": body}),
                                    None,
                                ),
                                &["D414"],
                            ),
                            4 => (
                                "agents::update",
                                directory.write(
                                    WriteFunction::AgentsUpdate,
                                    &json!({"id": name, "content": body}),
                                    None,
                                ),
                                &["D410"],
                            ),
                            _ => (
                                "agents::delete",
                                directory.write(
                                    WriteFunction::AgentsDelete,
                                    &json!({"id": name}),
                                    None,
                                ),
                                &["D410"],
                            ),
                        }
                    }
                    _ => {
                        let result = directory.read(
                            ReadFunction::SkillsGet,
                            &json!({"id": id, "raw": true}),
                            None,
                        );
                        // A served skill is always one complete content.
                        if let Ok(v) = &result {
                            let raw = v["raw"].as_str().unwrap_or_default();
                            let token = raw
                                .lines()
                                .find_map(|l| l.strip_prefix("title: T "))
                                .unwrap_or("");
                            let size = raw.len();
                            let complete = !token.is_empty()
                                && [50, 500, 5_000, 40_000]
                                    .iter()
                                    .any(|s| content(token, *s) == raw);
                            if !complete {
                                failures
                                    .lock()
                                    .unwrap()
                                    .push(format!("get {id}: incomplete content ({size} bytes)"));
                            }
                        }
                        ("skills::get", result, &["D110"])
                    }
                };
                let outcome = match &result {
                    Ok(_) => "ok".to_string(),
                    Err(e) => match e.code() {
                        Some(code) if allowed.contains(&code.text()) => code.to_string(),
                        _ => {
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("{label} {id}: unexpected error: {e}"));
                            "unexpected".into()
                        }
                    },
                };
                *local.entry(format!("{label} {outcome}")).or_default() += 1;
            }
            let mut ops = ops.lock().unwrap();
            for (k, v) in local {
                *ops.entry(k).or_default() += v;
            }
        }));
    }
    // An editor changing files behind the library's back.
    let external = {
        let base = tree.base().to_path_buf();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rng = Rng::new(77);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let rel = format!("skills/ext/e{}.md", rng.below(6));
                let path = base.join(&rel);
                if rng.chance(25) {
                    let _ = fs::remove_file(&path);
                } else {
                    fs::write(&path, format!("# External {n}\n\nx\n")).unwrap();
                }
                if rng.chance(10) {
                    fs::write(
                        base.join("agents/ext.md"),
                        format!("---\nname: Ext {n}\n---\nx\n"),
                    )
                    .unwrap();
                }
                std::thread::sleep(Duration::from_millis(rng.below(30) as u64));
            }
        })
    };

    finish_within(
        Duration::from_secs(secs + 60),
        "the worker threads",
        move || {
            for h in handles {
                h.join().expect("a worker thread panicked");
            }
        },
    );
    stop.store(true, Ordering::Relaxed);
    external.join().unwrap();

    let ops = ops.lock().unwrap().clone();
    let total: usize = ops.values().sum();
    println!(
        "concurrency: {total} operations in {secs}s on {THREADS} threads, {} events; {ops:?}",
        events.load(Ordering::Relaxed)
    );
    let failures = failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "{} failures: {failures:#?}",
        failures.len()
    );
    for needed in [
        "skills::create ok",
        "skills::update ok",
        "skills::delete ok",
    ] {
        assert!(ops.contains_key(needed), "no `{needed}` happened: {ops:?}");
    }

    // The watcher catches up with the external editor on its own.
    let start = Instant::now();
    loop {
        let (ours, fresh) = (dump(&directory), fresh_dump(&directory));
        if ours == fresh {
            break;
        }
        if start.elapsed() > Duration::from_secs(3) {
            panic!(
                "the watched index did not converge to a fresh index:{}",
                common::dump_diff(&ours, &fresh)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    watcher.stop();
    directory.reconcile().unwrap();
    let ours = dump(&directory);
    let fresh = fresh_dump(&directory);
    assert!(
        ours == fresh,
        "index != fresh index:{}",
        common::dump_diff(&ours, &fresh)
    );
    // And the index serves what is on disk.
    for id in common::skill_ids(&directory) {
        let got = common::call(
            &directory,
            ReadFunction::SkillsGet,
            json!({"id": id, "raw": true}),
        );
        if let Some(path) = got["path"].as_str().filter(|p| !p.is_empty()) {
            assert_eq!(
                fs::read_to_string(path).unwrap(),
                got["raw"].as_str().unwrap(),
                "{id}"
            );
        }
    }
}

#[test]
fn two_writers_on_one_skill_leave_one_complete_version() {
    let tree = Tree::new();
    tree.mkdir("skills/iii").mkdir("agents");
    tree.write("skills/race/index.md", &content("seed", 100));
    let directory = Arc::new(tree.open());
    let watcher = Watcher::start(directory.clone(), WatchOptions::default());
    let writes = 200;
    let sizes = [60, 700, 9_000, 30_000];
    let mut all: BTreeSet<String> = BTreeSet::new();
    all.insert(content("seed", 100));
    for w in 0..2 {
        for i in 0..writes {
            all.insert(content(&format!("w{w}-{i}"), sizes[i % sizes.len()]));
        }
    }
    let all = Arc::new(all);
    let done = Arc::new(AtomicBool::new(false));
    // A reader checking every answer is one of the complete versions.
    let reader = {
        let directory = directory.clone();
        let all = all.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let got = common::call(
                    &directory,
                    ReadFunction::SkillsGet,
                    json!({"id": "race", "raw": true}),
                );
                let raw = got["raw"].as_str().unwrap();
                assert!(all.contains(raw), "served a version nobody wrote");
                let title = got["title"].as_str().unwrap();
                assert_eq!(
                    format!(
                        "T {}",
                        &raw[raw.find("# ").unwrap() + 2..].lines().next().unwrap()
                    ),
                    title,
                    "title and raw content from two versions"
                );
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let directory = directory.clone();
            std::thread::spawn(move || {
                for i in 0..writes {
                    let id = if i % 2 == 0 { "race" } else { "race/index" };
                    directory
                        .write(
                            WriteFunction::SkillsUpdate,
                            &json!({"id": id, "content": content(&format!("w{w}-{i}"), sizes[i % sizes.len()])}),
                            None,
                        )
                        .unwrap_or_else(|e| panic!("writer {w} update {i}: {e}"));
                }
            })
        })
        .collect();
    finish_within(Duration::from_secs(120), "the two writers", move || {
        for w in writers {
            w.join().expect("a writer panicked");
        }
    });
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("the reader panicked");
    std::thread::sleep(Duration::from_millis(300));
    let on_disk = fs::read_to_string(tree.path("skills/race/index.md")).unwrap();
    assert!(
        all.contains(&on_disk),
        "the file is not one complete version"
    );
    assert!(
        on_disk.contains("w0-199") || on_disk.contains("w1-199"),
        "the last version on disk is some writer's last write"
    );
    let served = common::call(
        &directory,
        ReadFunction::SkillsGet,
        json!({"id": "race", "raw": true}),
    );
    assert_eq!(served["raw"], on_disk.as_str());
    let temps: Vec<_> = fs::read_dir(tree.path("skills/race"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
    watcher.stop();
    let ours = dump(&directory);
    let fresh = fresh_dump(&directory);
    assert!(
        ours == fresh,
        "index != fresh index:{}",
        common::dump_diff(&ours, &fresh)
    );
    println!(
        "two writers: {} updates, {reads} concurrent reads",
        2 * writes
    );
}

#[test]
fn a_subscriber_may_read_and_write_from_its_callback() {
    // Events are published after the write lock is released: a subscriber that reads, or even
    // writes (here: answering each create with an update), neither deadlocks nor loops.
    let tree = Tree::new();
    tree.mkdir("skills/iii").mkdir("agents");
    let directory = Arc::new(tree.open());
    let weak = Arc::downgrade(&directory);
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = seen.clone();
    directory.subscribe(Arc::new(move |e: &ChangeEvent| {
        sink.lock().unwrap().push(e.payload.clone());
        let Some(directory) = weak.upgrade() else {
            return;
        };
        let _ = directory.read(ReadFunction::SkillsList, &json!({}), None);
        if e.payload["op"] == "create" {
            let id = e.payload["id"].as_str().unwrap().to_string();
            directory
                .write(
                    WriteFunction::SkillsUpdate,
                    &json!({"id": id, "content": "# Touched by a subscriber\n\nx\n"}),
                    None,
                )
                .unwrap();
        }
    }));
    let watcher = Watcher::start(directory.clone(), WatchOptions::default());
    let d = directory.clone();
    finish_within(
        Duration::from_secs(30),
        "writes with a re-entrant subscriber",
        move || {
            for i in 0..10 {
                d.write(
                    WriteFunction::SkillsCreate,
                    &json!({"id": format!("re/s{i}"), "content": "# Created\n\nx\n"}),
                    None,
                )
                .unwrap();
            }
        },
    );
    tree.write("skills/re/external.md", "# External\n\nx\n");
    std::thread::sleep(Duration::from_millis(600));
    watcher.stop();
    let seen = seen.lock().unwrap().clone();
    let creates = seen.iter().filter(|p| p["op"] == "create").count();
    let updates = seen.iter().filter(|p| p["op"] == "update").count();
    let externals = seen.iter().filter(|p| p["op"] == "external").count();
    assert_eq!((creates, updates, externals), (10, 10, 1), "{seen:?}");
    let got = common::call(&directory, ReadFunction::SkillsGet, json!({"id": "re/s3"}));
    assert_eq!(got["title"], "Touched by a subscriber");
}
