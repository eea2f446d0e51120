//! Disk full: a child process (this test binary, re-executed) lowers its own file-size limit
//! (`setrlimit(RLIMIT_FSIZE)`, with SIGXFSZ ignored so a write past it fails with EFBIG, as a
//! full disk fails with ENOSPC) and then writes. No root, no tmpfs: the limit is per process.
//!
//! - Document writes past the limit (every family, create and update) fail with the
//!   contract's I/O error (`write <temporary file>: <reason>`, uncoded), leave the previous
//!   file byte for byte and no temporary file; once the limit is lifted, the same open
//!   directory writes again.
//! - The index hitting the limit during a reconcile (redb cannot grow its file) fails with an
//!   `index:` error and touches no document; once there is room again the same open directory
//!   reconciles (it reopens its file), and the next open serves exactly what a fresh index of
//!   the disk serves.
//! - `reindex` beside a worker whose index cannot grow fails, naming why; with room again the
//!   next one is recorded at once.

use test_support::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::child;
use iii_directory::config::Config;
use iii_directory::{
    Directory, IndexHolder, ReadFunction, WORKER_ROLE, WriteFunction, write_index_holder,
};
use serde_json::{Value, json};

const CHILD: &str = "disk_full_child";
const TREE_VAR: &str = "III_DIRECTORY_DISK_FULL_TREE";
const MODE_VAR: &str = "III_DIRECTORY_DISK_FULL_MODE";
/// The file-size limit for document writes: below the contents written, above the index's
/// writes in place.
const FILE_LIMIT: u64 = 64 * 1024;
/// Skills added behind the index's back before the index may not grow.
const BULK: usize = 600;

/// Sets the soft file-size limit of this process (`None`: back to the hard limit), with
/// SIGXFSZ ignored so that writing past it fails with EFBIG instead of killing us.
fn limit_file_size(bytes: Option<u64>) {
    // SAFETY: plain libc calls on a valid, initialised struct; the child is single-threaded
    // here (`--test-threads=1`, no watcher) and nothing else depends on the signal's action.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit), 0);
        limit.rlim_cur = bytes.unwrap_or(limit.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
}

fn big(token: &str, head: &str) -> String {
    let mut text = format!("---\n{head}\n---\n# {token}\n\n");
    while (text.len() as u64) < 3 * FILE_LIMIT {
        text.push_str(&format!("{token}: a line too many for a full disk.\n"));
    }
    text
}

fn bulk_content(i: usize) -> String {
    format!(
        "---\ntitle: Bulk {i}\n---\n# Bulk {i}\n\n{}\n",
        "Filler. ".repeat(600)
    )
}

/// The writes the child makes past the limit: label, function, request.
fn big_writes() -> Vec<(&'static str, WriteFunction, Value)> {
    vec![
        (
            "skills::update",
            WriteFunction::SkillsUpdate,
            json!({"id": "full/old", "content": big("u", "title: U")}),
        ),
        (
            "skills::create",
            WriteFunction::SkillsCreate,
            json!({"id": "full/new", "content": big("c", "title: C")}),
        ),
        (
            "system-prompts::update",
            WriteFunction::SystemPromptsUpdate,
            json!({"name": "old-prompt", "content": big("pu", "description: PU")}),
        ),
        (
            "system-prompts::create",
            WriteFunction::SystemPromptsCreate,
            json!({"name": "new-prompt", "content": big("pc", "description: PC")}),
        ),
        (
            "agents::update",
            WriteFunction::AgentsUpdate,
            json!({"id": "old-agent", "content": big("au", "name: AU")}),
        ),
        (
            "agents::create",
            WriteFunction::AgentsCreate,
            json!({"id": "new-agent", "content": big("ac", "name: AC")}),
        ),
    ]
}

/// A skill whose text (words that do not compress, half the index's size) fits under a
/// file-size limit at the index's size, but cannot be recorded without the index growing.
fn unrecorded(index_bytes: u64) -> Value {
    let mut text = String::from("---\ntitle: Landed\n---\n# Landed\n\n");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while (text.len() as u64) < index_bytes / 2 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text.push_str(&format!("w{:x} ", x % 1_000_000_007));
    }
    json!({"id": "full/landed", "content": text})
}

/// Files of the tree the writes must leave alone, and where the creates would have landed.
const OLD_FILES: [(&str, &str); 3] = [
    (
        "skills/full/old.md",
        "---\ntitle: Old\n---\n# Old\n\nThe old skill.\n",
    ),
    (
        "skills/system-prompts/old-prompt.md",
        "---\ndescription: The old prompt.\n---\nOld prompt.\n",
    ),
    (
        "agents/old-agent.md",
        "---\nname: Old agent\n---\nOld agent.\n",
    ),
];
const CREATED: [&str; 3] = [
    "skills/full/new.md",
    "skills/system-prompts/new-prompt.md",
    "agents/new-agent.md",
];

fn say(value: Value) {
    child::say(&format!("RESULT {value}"));
}

fn outcome(result: iii_directory::Result<Value>) -> Value {
    match result {
        Ok(v) => json!({ "ok": v }),
        Err(e) => json!({ "err": e.to_string(), "code": e.code().map(|c| c.text()) }),
    }
}

#[test]
#[ignore = "run by the disk-full tests as a child process"]
fn disk_full_child() {
    let Ok(base) = std::env::var(TREE_VAR) else {
        return;
    };
    let base = PathBuf::from(base);
    if std::env::var(MODE_VAR).unwrap() == "first_open" {
        limit_file_size(Some(4096));
        let first = Directory::open(Config::for_root(&base)).map(|_| json!("opened"));
        let first = first.map_err(|e| e.to_string());
        say(json!({ "label": "full", "result": { "err": first.err() } }));
        limit_file_size(None);
        let again =
            Directory::open(Config::for_root(&base)).map(|d| d.reconcile().map(|r| r.files));
        let again = match again {
            Ok(Ok(files)) => json!({ "ok": files }),
            Ok(Err(e)) => json!({ "err": e.to_string() }),
            Err(e) => json!({ "err": e.to_string() }),
        };
        say(json!({ "label": "room", "result": again }));
        say(json!("DONE"));
        return;
    }
    let directory = Directory::open(Config::for_root(&base)).unwrap();
    directory.reconcile().unwrap();
    match std::env::var(MODE_VAR).unwrap().as_str() {
        "writes" => {
            limit_file_size(Some(FILE_LIMIT));
            for (label, function, request) in big_writes() {
                let result = directory.write(function, &request, None);
                say(json!({ "label": label, "result": outcome(result) }));
            }
            limit_file_size(None);
            let result = directory.write(
                WriteFunction::SkillsUpdate,
                &json!({"id": "full/old", "content": "# After\n\nThe limit is lifted.\n"}),
                None,
            );
            say(json!({ "label": "after", "result": outcome(result) }));
        }
        "index" => {
            for i in 0..BULK {
                let path = base.join(format!("skills/bulk/b{i}.md"));
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, bulk_content(i)).unwrap();
            }
            let index = directory.config().paths.index_path.clone();
            let size = fs::metadata(&index).unwrap().len();
            limit_file_size(Some(size));
            let result = directory.reconcile().map(|r| json!(r.files));
            say(json!({ "label": "reconcile", "index_bytes": size, "result": outcome(result) }));
            let result = directory.read(ReadFunction::SkillsList, &json!({}), None);
            let result = result.map(|l| json!(l["skills"].as_array().map_or(0, Vec::len)));
            say(json!({ "label": "read", "result": outcome(result) }));
            limit_file_size(None);
            let result = directory.reconcile().map(|r| json!(r.files));
            say(json!({ "label": "lifted", "result": outcome(result) }));
            let result =
                directory.read(ReadFunction::SkillsList, &json!({"prefix": "bulk/"}), None);
            let result = result.map(|l| json!(l["skills"].as_array().map_or(0, Vec::len)));
            say(json!({ "label": "after", "result": outcome(result) }));
        }
        "stalled" => {
            let index = directory.config().paths.index_path.clone();
            let size = fs::metadata(&index).unwrap().len();
            limit_file_size(Some(size));
            let landed = directory.write(WriteFunction::SkillsCreate, &unrecorded(size), None);
            say(json!({ "label": "landed", "result": outcome(landed) }));
            let status = directory.status().map(|s| s["index_error"].clone());
            say(json!({ "label": "status", "result": outcome(status) }));
            let refused = directory.write(
                WriteFunction::SkillsCreate,
                &json!({"id": "full/refused", "content": "# Refused\n\nSmall.\n"}),
                None,
            );
            say(json!({ "label": "refused", "result": outcome(refused) }));
            limit_file_size(None);
            let after = directory.write(
                WriteFunction::SkillsCreate,
                &json!({"id": "full/after", "content": "# After\n\nRoom again.\n"}),
                None,
            );
            say(json!({ "label": "after", "result": outcome(after) }));
            let status = directory.status().map(|s| s["index_error"].clone());
            say(json!({ "label": "status_after", "result": outcome(status) }));
            let got = directory.read(ReadFunction::SkillsGet, &json!({"id": "full/landed"}), None);
            let got = got.map(|g| g["title"].clone());
            say(json!({ "label": "served", "result": outcome(got) }));
        }
        "rescan" => {
            let directory = std::sync::Arc::new(directory);
            note_worker(&base);
            let watcher = iii_directory::Watcher::start(directory.clone(), Default::default());
            let index = directory.config().paths.index_path.clone();
            limit_file_size(Some(fs::metadata(&index).unwrap().len()));
            for i in 0..BULK {
                let path = base.join(format!("skills/bulk/b{i}.md"));
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, bulk_content(i)).unwrap();
            }
            say(json!({ "label": "full", "result": reindex_beside(&base) }));
            limit_file_size(None);
            say(json!({ "label": "room", "result": reindex_beside(&base) }));
            watcher.stop();
        }
        other => panic!("unknown mode {other}"),
    }
    say(json!("DONE"));
}

/// Notes this process as the worker holding the index of the tree at `base` (as a worker's
/// holder note names it), so that a command run beside it follows it.
fn note_worker(base: &Path) {
    let paths = Config::for_root(base).paths;
    let folders = [
        ("skills_folder", paths.skills_folder),
        ("local_skills_folder", paths.local_skills_folder),
        ("agents_skills_folder", paths.agents_skills_folder),
        ("agents_folder", paths.agents_folder),
    ];
    let holder = IndexHolder {
        pid: std::process::id(),
        role: WORKER_ROLE.to_string(),
        folders: folders
            .into_iter()
            .map(|(key, path)| (key.to_string(), path.display().to_string()))
            .collect(),
        // The child reconciled before it notes itself.
        settled: true,
        ..IndexHolder::default()
    };
    write_index_holder(&paths.index_path, &holder).expect("note the holder");
}

/// `iii-directory reindex --json` over the tree at `base`, beside this process: its exit
/// status, output and error output.
fn reindex_beside(base: &Path) -> Value {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_iii-directory"))
        .args(["reindex", "--json"])
        .env("III_COMPOSE_DIR", base)
        .env_remove("RUST_LOG")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run iii-directory");
    json!({
        "success": output.status.success(),
        "stdout": String::from_utf8_lossy(&output.stdout),
        "stderr": String::from_utf8_lossy(&output.stderr),
    })
}

/// Runs the child in `mode` over `base`; returns its results by label.
fn run_child(base: &Path, mode: &str) -> BTreeMap<String, Value> {
    let output = child::command(&child::test_path(module_path!(), CHILD))
        .env(TREE_VAR, base)
        .env(MODE_VAR, mode)
        .stdin(Stdio::null())
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("RESULT \"DONE\""),
        "the child failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.split("RESULT ").nth(1))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| Some((v["label"].as_str()?.to_string(), v)))
        .collect()
}

/// Every temporary file (`*.tmp`) under `dir`.
fn temps(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(temps(&path));
        } else if path.extension().is_some_and(|e| e == "tmp") {
            out.push(path);
        }
    }
    out
}

/// The reopened index answers exactly as a fresh index of the same disk.
fn assert_reopens_like_fresh(tree: &common::Tree) -> Directory {
    let directory = Directory::open(tree.config()).expect("reopen after the disk was full");
    directory.reconcile().expect("reconcile after reopening");
    let fresh = common::fresh_index(&tree.config());
    assert_eq!(common::dump(&directory), common::dump(&fresh));
    directory
}

#[test]
fn writes_on_a_full_disk_fail_cleanly_and_keep_the_old_files() {
    let tree = common::Tree::new();
    tree.mkdir("skills/iii");
    for (rel, text) in OLD_FILES {
        tree.write(rel, text);
    }
    drop(tree.open());
    let results = run_child(tree.base(), "writes");

    for (label, _, _) in big_writes() {
        let result = &results[label]["result"];
        let message = result["err"]
            .as_str()
            .unwrap_or_else(|| panic!("{label} past the file-size limit succeeded: {result}"));
        println!("disk full: {label} -> {message}");
        // The contract's I/O error: the step, the temporary file, the system's reason.
        assert!(
            message.starts_with("write ") && message.contains(".tmp: "),
            "{label}: {message}"
        );
        assert!(message.contains("File too large"), "{label}: {message}");
        assert_eq!(
            result["code"],
            Value::Null,
            "{label}: I/O errors are uncoded"
        );
    }
    assert!(
        results["after"]["result"]["ok"].is_object(),
        "the write after the limit was lifted: {}",
        results["after"]
    );
    assert_eq!(
        fs::read_to_string(tree.path("skills/full/old.md")).unwrap(),
        "# After\n\nThe limit is lifted.\n"
    );
    for (rel, text) in &OLD_FILES[1..] {
        assert_eq!(&fs::read_to_string(tree.path(rel)).unwrap(), text, "{rel}");
    }
    for rel in CREATED {
        assert!(!tree.path(rel).exists(), "{rel} was created half");
    }
    assert_eq!(temps(tree.base()), Vec::<PathBuf>::new());
    let directory = assert_reopens_like_fresh(&tree);
    let got = common::call(
        &directory,
        ReadFunction::SkillsGet,
        json!({"id": "full/old", "raw": true}),
    );
    assert_eq!(got["raw"], "# After\n\nThe limit is lifted.\n");
}

#[test]
fn an_index_that_cannot_grow_fails_the_reconcile_and_recovers_on_open() {
    let tree = common::Tree::new();
    tree.mkdir("skills/iii");
    for (rel, text) in OLD_FILES {
        tree.write(rel, text);
    }
    drop(tree.open());
    let results = run_child(tree.base(), "index");
    let reconcile = &results["reconcile"];
    println!("disk full: index reconcile -> {reconcile}");
    let message = reconcile["result"]["err"]
        .as_str()
        .unwrap_or_else(|| panic!("the reconcile could grow the index: {reconcile}"));
    assert!(message.starts_with("index: "), "{message}");
    println!(
        "disk full: read after the failed reconcile -> {}; reconcile after the limit was lifted -> {}",
        results["read"]["result"], results["lifted"]["result"]
    );
    // The same open directory recovers once there is room again: no restart needed.
    assert!(
        results["lifted"]["result"]["ok"].is_number(),
        "the reconcile after the limit was lifted: {}",
        results["lifted"]
    );
    assert_eq!(
        results["after"]["result"]["ok"], BULK,
        "{}",
        results["after"]
    );

    // The documents are untouched: the old ones and every bulk file, byte for byte.
    for (rel, text) in OLD_FILES {
        assert_eq!(fs::read_to_string(tree.path(rel)).unwrap(), text, "{rel}");
    }
    for i in 0..BULK {
        let rel = format!("skills/bulk/b{i}.md");
        assert_eq!(
            fs::read_to_string(tree.path(&rel)).unwrap(),
            bulk_content(i)
        );
    }
    assert_eq!(temps(tree.base()), Vec::<PathBuf>::new());
    let directory = assert_reopens_like_fresh(&tree);
    let ids = common::skill_ids(&directory);
    assert_eq!(
        ids.iter().filter(|id| id.starts_with("bulk/")).count(),
        BULK
    );
}

/// `reindex` beside a worker whose index cannot grow fails, naming the index's trouble: the
/// worker walked every folder as asked but could not record the walk. Once there is room
/// again, the next `reindex` is recorded at once, without waiting out the pause the worker
/// keeps between attempts on a failing index.
#[test]
fn reindex_beside_a_worker_whose_index_cannot_grow_says_so_and_then_records() {
    let tree = common::Tree::new();
    tree.mkdir("skills/iii");
    for (rel, text) in OLD_FILES {
        tree.write(rel, text);
    }
    drop(tree.open());
    let results = run_child(tree.base(), "rescan");
    let full = &results["full"]["result"];
    assert_eq!(full["success"], false, "{full}");
    let stderr = full["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains("walked every folder again, but its index cannot record changes (index: "),
        "{stderr}"
    );
    let room = &results["room"]["result"];
    assert_eq!(room["success"], true, "{room}");
    let summary: Value = serde_json::from_str(room["stdout"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("reindex printed invalid JSON ({e}): {room}"));
    assert_eq!(summary["rescanned_by_worker"], true, "{summary}");
    assert_eq!(
        summary["files"].as_u64(),
        Some((OLD_FILES.len() + BULK) as u64),
        "{summary}"
    );
    assert_eq!(temps(tree.base()), Vec::<PathBuf>::new());
}

#[test]
fn a_write_the_index_cannot_record_says_it_landed_and_the_next_is_refused_untouched() {
    let tree = common::Tree::new();
    tree.mkdir("skills/iii");
    for (rel, text) in OLD_FILES {
        tree.write(rel, text);
    }
    drop(tree.open());
    let results = run_child(tree.base(), "stalled");
    println!("disk full: stalled -> {results:?}");

    // The write that landed before the index failed says so, naming the file.
    let landed = results["landed"]["result"]["err"]
        .as_str()
        .unwrap_or_else(|| panic!("the index could record the write: {results:?}"));
    assert!(
        landed.starts_with("index: ") && !landed.contains("index: index:"),
        "{landed}"
    );
    assert!(
        landed.contains("The change is on disk (")
            && landed.contains(&tree.path("skills/full/landed.md").display().to_string()),
        "{landed}"
    );
    assert!(tree.path("skills/full/landed.md").exists());

    // The status says why reads are behind the disk.
    let error = &results["status"]["result"]["ok"];
    assert!(
        error["error"].is_string() && error["attempts"].as_u64() >= Some(1),
        "{error}"
    );

    // The next write is refused before it touches the disk.
    let refused = results["refused"]["result"]["err"]
        .as_str()
        .unwrap_or_else(|| panic!("a write went through a failing index: {results:?}"));
    assert!(
        refused.starts_with("index: the index at ")
            && refused.contains("nothing was written")
            && !refused.contains("(index:"),
        "{refused}"
    );
    assert!(!tree.path("skills/full/refused.md").exists());

    // With room again the same open directory writes, records what landed, and clears the
    // status.
    assert!(
        results["after"]["result"]["ok"].is_object(),
        "{:?}",
        results["after"]
    );
    assert_eq!(results["status_after"]["result"]["ok"], Value::Null);
    assert_eq!(results["served"]["result"]["ok"], "Landed");
    assert_reopens_like_fresh(&tree);
}

/// The first start of a worker on a full disk: the index cannot be made. It says so, leaves no
/// file that a later start refuses as someone else's, and the next start with room builds it.
#[test]
fn a_first_index_on_a_full_disk_fails_clearly_and_the_next_start_builds_it() {
    let tree = common::Tree::new();
    tree.write("skills/deploy.md", "# Deploy\n\nShip it.\n");
    let results = run_child(tree.base(), "first_open");
    println!("disk full: first open -> {results:?}");
    let full = results["full"]["result"]["err"]
        .as_str()
        .unwrap_or_else(|| panic!("the index was made past the limit: {results:?}"));
    assert!(full.contains("File too large"), "{full}");
    assert!(!full.contains("not an index"), "{full}");
    assert_eq!(
        results["room"]["result"]["ok"], 1,
        "the start with room: {:?}",
        results["room"]
    );
}
