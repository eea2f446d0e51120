//! Hostile input (issue 6, "Reliability and security"): files that are not UTF-8, carry a BOM
//! or CRLF line ends, huge lines, a 100 MB file, deep nesting, very many files in one folder,
//! invalid names, symbolic links that leave a root or loop, a root that is a link, files that
//! vanish mid-scan, unreadable files and folders, YAML bombs, frontmatter that is not a
//! mapping, `extends` loops and long chains, edits racing a reconcile, a watcher that cannot
//! watch (the inotify limit, injected), and writes with hostile ids.
//!
//! Each case checks three things: the hostile file gets the right skip reason (`check`,
//! `Directory::skipped`) or the right error, a healthy neighbour is still listed and served
//! with its exact content, and nothing was written outside the roots.
//!
//! The suite runs in CI at a reduced size. The full-size run (100,000 files in one folder):
//!
//! ```text
//! HOSTILE_MANY_FILES=100000 cargo test --test library hostile::many_files -- --nocapture
//! ```
//!
//! Measured on a shared 2-core machine under heavy load (debug build): 20,000 files index in
//! about 6 s (the whole suite takes about 20 s); 100,000 files index in about 90 s, list in
//! about 16 s, with a peak RSS of about 450 MB.
//!
//! When the tests run as root (which ignores file permissions), the permission-denied case runs
//! its scan in a child process as the user `nobody` (through `setpriv`).

use test_support::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Tree;
use iii_directory::doc::ids::{IdError, NameError, SegmentError};
use iii_directory::doc::{ReadIssue, ServeIssue};
use iii_directory::{Directory, ReadFunction, WriteFunction};
use iii_directory::{FrontmatterProblem, ProfileProblem, PromptProblem, Root, SkipReason};
use iii_directory::{WatchOptions, Watcher};
use serde_json::{Value, json};

/// The healthy neighbour every case keeps beside its hostile file.
const HEALTHY_ID: &str = "healthy";
const HEALTHY_REL: &str = "skills/healthy/index.md";
const HEALTHY_TEXT: &str = "---\ntitle: Healthy\ntype: index\ndescription: Still served.\n---\n# Healthy\n\nStill served.\n";
const HEALTHY_BODY: &str = "# Healthy\n\nStill served.\n";

/// Default number of files in the one-folder case; `HOSTILE_MANY_FILES` overrides it.
const MANY_FILES_DEFAULT: usize = 20_000;

/// Time a parse-heavy hostile case may take in a debug build before it counts as a hang.
const QUICK: Duration = Duration::from_secs(5);

/// A tree with the healthy neighbour (a skill, a system prompt, an agent profile) and a
/// folder outside every root for link targets.
fn hostile_tree() -> Tree {
    let tree = Tree::new();
    tree.mkdir("skills/iii")
        .mkdir(".agents/skills")
        .mkdir("agents")
        .mkdir("outside")
        .write(HEALTHY_REL, HEALTHY_TEXT)
        .write(
            "skills/system-prompts/calm.md",
            "---\ndescription: Calm voice.\n---\nStay calm.\n",
        )
        .write(
            "agents/steady.md",
            "---\nname: Steady\ndescription: Steady.\n---\nBe steady.\n",
        );
    tree
}

/// The healthy neighbours are listed and served with their exact content.
fn assert_healthy(d: &Directory) {
    let list = common::call(d, ReadFunction::SkillsList, json!({}));
    let row = list["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .find(|r| r["id"] == HEALTHY_ID)
        .unwrap_or_else(|| panic!("{HEALTHY_ID} is not listed: {list}"));
    assert_eq!(row["title"], "Healthy");
    assert_eq!(row["description"], "Still served.");
    let got = common::call(
        d,
        ReadFunction::SkillsGet,
        json!({"id": HEALTHY_ID, "raw": true}),
    );
    assert_eq!(got["body"], HEALTHY_BODY);
    assert_eq!(got["raw"], HEALTHY_TEXT);
    let prompt = common::call(d, ReadFunction::SystemPromptsGet, json!({"name": "calm"}));
    assert_eq!(prompt["body"], "Stay calm.\n", "{prompt}");
    let agent = common::call(d, ReadFunction::AgentsGet, json!({"id": "steady"}));
    assert_eq!(agent["name"], "Steady", "{agent}");
}

/// Every entry under `dir` (links not followed) with its kind and content, the index's own
/// folder left out: what "nothing was written" is checked against.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.ends_with("data") && path.parent() == Some(dir) {
                continue;
            }
            let meta = fs::symlink_metadata(&path).expect("lstat");
            let what = if meta.is_symlink() {
                format!(
                    "link -> {}",
                    fs::read_link(&path).expect("readlink").display()
                )
            } else if meta.is_dir() {
                stack.push(path.clone());
                "dir".to_string()
            } else {
                let bytes = fs::read(&path).unwrap_or_default();
                format!("file {} {}", bytes.len(), blake3::hash(&bytes))
            };
            out.insert(path, what);
        }
    }
    out
}

/// The recorded skip reason of a file (path relative to the tree's base), if any.
fn skip_reason(d: &Directory, tree: &Tree, rel: &str) -> Option<SkipReason> {
    let path = tree.path(rel).display().to_string();
    d.skipped()
        .expect("skipped")
        .into_iter()
        .find(|s| s.path == path)
        .map(|s| s.reason)
}

/// The reason of a file listed with defaults because its content cannot be read.
fn unservable(issue: ReadIssue) -> SkipReason {
    SkipReason::Unservable(ServeIssue::Read(issue))
}

/// The parser's reason when a system prompt or agent profile is skipped for frontmatter that is
/// not usable YAML.
fn invalid_yaml(reason: &SkipReason) -> Option<&str> {
    match reason {
        SkipReason::NotAPrompt(PromptProblem::Frontmatter(FrontmatterProblem::InvalidYaml(
            why,
        )))
        | SkipReason::NotAProfile(ProfileProblem::Frontmatter(FrontmatterProblem::InvalidYaml(
            why,
        ))) => Some(why),
        _ => None,
    }
}

fn expect_skip(d: &Directory, tree: &Tree, rel: &str) -> SkipReason {
    skip_reason(d, tree, rel).unwrap_or_else(|| {
        panic!(
            "{rel} has no skip reason; skipped: {:?}",
            d.skipped().expect("skipped")
        )
    })
}

fn get(d: &Directory, id: &str) -> Result<Value, String> {
    d.read(
        ReadFunction::SkillsGet,
        &json!({"id": id, "raw": true}),
        None,
    )
    .map_err(|e| e.to_string())
}

fn listed(d: &Directory, id: &str) -> Option<Value> {
    let list = common::call(d, ReadFunction::SkillsList, json!({}));
    list["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .find(|r| r["id"] == id)
        .cloned()
}

fn prompt_names(d: &Directory) -> Vec<String> {
    let list = common::call(d, ReadFunction::SystemPromptsList, json!({}));
    list["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .map(|r| r["name"].as_str().expect("name").to_string())
        .collect()
}

fn agent_row(d: &Directory, id: &str) -> Option<Value> {
    let list = common::call(d, ReadFunction::AgentsList, json!({}));
    list["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|r| r["id"] == id)
        .cloned()
}

/// Every read answer of the index, to compare with a fresh index of the same disk.
fn dump(d: &Directory) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for f in [
        ReadFunction::SkillsList,
        ReadFunction::SkillsIndex,
        ReadFunction::SystemPromptsList,
        ReadFunction::AgentsList,
    ] {
        out.insert(f.id().to_string(), common::call(d, f, json!({})));
    }
    let ids: Vec<String> = out["directory::skills::list"]["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect();
    for id in ids {
        out.insert(format!("get {id}"), json!(get(d, &id)));
    }
    out.insert(
        "skipped".into(),
        serde_json::to_value(d.skipped().expect("skipped")).expect("json"),
    );
    out
}

/// The index equals a fresh index of the same disk.
fn assert_matches_fresh(d: &Directory) {
    let fresh = common::fresh_index(d.config());
    assert_eq!(dump(d), dump(&fresh), "index != fresh index");
}

/// Polls `check` until it holds or `limit` passes.
fn wait_for(what: &str, limit: Duration, check: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if check() {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Lets every user read, write and enter everything under `dir` (and `dir` itself).
fn open_to_everyone(dir: &Path) {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).expect("chmod");
    for entry in fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).expect("lstat");
        if meta.is_dir() {
            open_to_everyone(&path);
        } else if meta.is_file() {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod");
        }
    }
}

/// Whether this process ignores file permissions (root): permission-denied cases cannot be
/// produced with `chmod` then.
fn permissions_ignored(tree: &Tree) -> bool {
    let probe = tree.path("outside/probe");
    fs::write(&probe, "x").expect("write probe");
    fs::set_permissions(&probe, fs::Permissions::from_mode(0o000)).expect("chmod");
    let readable = fs::read(&probe).is_ok();
    fs::remove_file(&probe).expect("remove probe");
    readable
}

// ---------------------------------------------------------------------------------------------
// Encodings and line ends

#[test]
fn non_utf8_files_are_skipped_with_a_reason() {
    let tree = hostile_tree();
    tree.write("skills/latin/index.md", "");
    fs::write(tree.path("skills/latin/index.md"), b"# Caf\xe9\n\nText.\n").expect("write");
    tree.write("skills/system-prompts/latin.md", "");
    fs::write(
        tree.path("skills/system-prompts/latin.md"),
        b"---\ndescription: caf\xe9\n---\nBody\n",
    )
    .expect("write");
    tree.write("agents/latin.md", "");
    fs::write(
        tree.path("agents/latin.md"),
        b"---\nname: Caf\xe9\n---\nBody\n",
    )
    .expect("write");
    // A name that is not UTF-8 cannot be an id; it must not disturb the scan, and `check`
    // lists it (a folder, or a file named like a document; not any other file).
    let raw = |rel: &str, name: &[u8]| tree.path(rel).join(std::ffi::OsStr::from_bytes(name));
    fs::write(raw("skills/latin", b"n\xe9.md"), "# Name\n\nx\n").expect("write");
    fs::write(raw("skills/latin", b"n\xe9.png"), "not a document").expect("write");
    fs::create_dir(raw("skills", b"caf\xe9")).expect("mkdir");
    fs::write(raw("skills", b"caf\xe9").join("menu.md"), "# Menu\n\nx\n").expect("write");
    fs::write(raw("agents", b"b\xe9a.md"), "---\nname: Bea\n---\nx\n").expect("write");
    let before = snapshot(tree.base());
    let d = tree.open();
    for (rel, folder) in [
        ("skills/latin/n\\xE9.md", false),
        ("skills/caf\\xE9", true),
        ("agents/b\\xE9a.md", false),
    ] {
        assert_eq!(
            expect_skip(&d, &tree, rel),
            SkipReason::NameNotUtf8 { folder },
            "{rel}"
        );
    }
    assert!(skip_reason(&d, &tree, "skills/latin/n\\xE9.png").is_none());
    // Its escaped name is no document's id, so `check --json` names none.
    let unnamed: Vec<_> = d
        .skipped()
        .expect("skipped")
        .into_iter()
        .filter(|s| matches!(s.reason, SkipReason::NameNotUtf8 { .. }))
        .collect();
    assert_eq!(unnamed.len(), 3, "{unnamed:?}");
    assert!(
        unnamed.iter().all(|s| s.family.is_none() && s.id.is_none()),
        "{unnamed:?}"
    );
    assert!(
        SkipReason::NameNotUtf8 { folder: true }
            .to_string()
            .contains("rename it in UTF-8"),
    );

    for rel in [
        "skills/latin/index.md",
        "skills/system-prompts/latin.md",
        "agents/latin.md",
    ] {
        assert_eq!(
            expect_skip(&d, &tree, rel),
            unservable(ReadIssue::NotUtf8),
            "{rel}"
        );
    }
    // The contract keeps a row for a skill file that cannot be read, with defaults; `get` names
    // the file.
    let row = listed(&d, "latin").expect("row");
    assert_eq!(row["title"], "latin");
    assert_eq!(
        get(&d, "latin").expect_err("not served"),
        format!(
            "file {} is not UTF-8 text",
            tree.path("skills/latin/index.md").display()
        )
    );
    assert!(!prompt_names(&d).contains(&"latin".to_string()));
    assert!(agent_row(&d, "latin").is_none());
    assert_healthy(&d);
    assert_eq!(snapshot(tree.base()), before);
}

#[test]
fn a_byte_order_mark_is_dropped_and_the_file_served() {
    let tree = hostile_tree();
    let skill = "---\ntitle: Marked\ntype: how-to\n---\n# H\n\nMarked text.\n";
    tree.write("skills/bom/index.md", &format!("\u{feff}{skill}"));
    tree.write(
        "skills/system-prompts/bom.md",
        "\u{feff}---\ndescription: With a mark.\n---\nMarked prompt.\n",
    );
    tree.write(
        "agents/bom.md",
        "\u{feff}---\nname: Marked\n---\nMarked agent.\n",
    );
    let d = tree.open();
    let got = get(&d, "bom").expect("served");
    assert_eq!(got["title"], "Marked");
    assert_eq!(got["type"], "how-to");
    assert_eq!(got["body"], "# H\n\nMarked text.\n");
    assert_eq!(got["raw"], skill);
    let prompt = common::call(&d, ReadFunction::SystemPromptsGet, json!({"name": "bom"}));
    assert_eq!(prompt["body"], "Marked prompt.\n");
    assert_eq!(agent_row(&d, "bom").expect("agent")["name"], "Marked");
    for rel in [
        "skills/bom/index.md",
        "skills/system-prompts/bom.md",
        "agents/bom.md",
    ] {
        assert_eq!(skip_reason(&d, &tree, rel), None, "{rel}");
    }
    assert_healthy(&d);
}

#[test]
fn crlf_frontmatter_parses_and_bodies_are_byte_exact() {
    let tree = hostile_tree();
    let skill = "---\r\ntitle: Windows\r\ntype: index\r\ndescription: Crlf lines.\r\n---\r\n# W\r\n\r\nBody.\r\n";
    tree.write("skills/crlf/index.md", skill);
    tree.write(
        "skills/system-prompts/crlf.md",
        "---\r\ndescription: Crlf prompt.\r\n---\r\nPrompt.\r\n",
    );
    tree.write(
        "agents/crlf.md",
        "---\r\nname: Crlf\r\ndescription: Crlf agent.\r\nextends: steady\r\n---\r\nAgent.\r\n",
    );
    let d = tree.open();
    let row = listed(&d, "crlf").expect("row");
    assert_eq!(row["title"], "Windows");
    assert_eq!(row["type"], "index");
    assert_eq!(row["description"], "Crlf lines.");
    let got = get(&d, "crlf").expect("served");
    assert_eq!(got["body"], "# W\r\n\r\nBody.\r\n");
    assert_eq!(got["raw"], skill);
    let prompts = common::call(&d, ReadFunction::SystemPromptsList, json!({}));
    let prompt = prompts["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .find(|p| p["name"] == "crlf")
        .cloned()
        .expect("crlf prompt");
    assert_eq!(prompt["description"], "Crlf prompt.");
    let agent = agent_row(&d, "crlf").expect("agent");
    assert_eq!(agent["name"], "Crlf");
    assert_eq!(agent["extends"], "steady");
    assert!(agent.get("inheritance_error").is_none(), "{agent}");
    assert_healthy(&d);
}

// ---------------------------------------------------------------------------------------------
// Sizes

#[test]
fn a_huge_single_line_is_served_under_the_cap_and_skipped_over_it() {
    let tree = hostile_tree();
    let head = "# Long\n\n";
    let under = format!("{head}{}\n", "y".repeat(250_000));
    tree.write("skills/long/under.md", &under);
    let over = "z".repeat(300_000);
    tree.write("skills/long/over.md", &over);
    let started = Instant::now();
    let d = tree.open();
    assert!(started.elapsed() < QUICK, "took {:?}", started.elapsed());
    let got = get(&d, "long/under").expect("served");
    assert_eq!(got["raw"], under);
    assert_eq!(got["title"], "Long");
    assert_eq!(
        expect_skip(&d, &tree, "skills/long/over.md"),
        unservable(ReadIssue::TooLarge(300_000))
    );
    assert!(
        get(&d, "long/over")
            .expect_err("too large")
            .contains("is too large")
    );
    assert_healthy(&d);
}

/// A 100 MB file (sparse, so the test costs no disk): skipped by its size, without being read.
/// The reconcile runs in a child process so that the bytes it reads can be counted.
#[test]
fn a_100_mb_file_is_skipped_without_being_read() {
    let tree = hostile_tree();
    let big = tree.path("skills/big/index.md");
    fs::create_dir_all(big.parent().expect("parent")).expect("mkdir");
    let file = fs::File::create(&big).expect("create");
    file.set_len(100 * 1024 * 1024).expect("set_len");
    drop(file);
    let big_prompt = tree.path("skills/system-prompts/big.md");
    fs::File::create(&big_prompt)
        .expect("create")
        .set_len(100 * 1024 * 1024)
        .expect("set_len");

    let stdout = reconcile_in_a_child(&tree, false);
    let read_bytes: u64 = child_says(&stdout, "RECONCILE_READ_BYTES")
        .parse()
        .expect("number");
    assert!(
        read_bytes < 20 * 1024 * 1024,
        "the reconcile read {read_bytes} bytes: the 100 MB files were read"
    );

    // The child built the index; open it again here and check what it recorded.
    let d = tree.open();
    assert_eq!(
        expect_skip(&d, &tree, "skills/big/index.md"),
        unservable(ReadIssue::TooLarge(104_857_600))
    );
    assert_eq!(
        expect_skip(&d, &tree, "skills/system-prompts/big.md"),
        unservable(ReadIssue::TooLarge(104_857_600))
    );
    assert_eq!(listed(&d, "big").expect("row")["bytes"], 104_857_600u64);
    assert!(
        get(&d, "big")
            .expect_err("too large")
            .contains("is too large")
    );
    assert!(!prompt_names(&d).contains(&"big".to_string()));
    assert_healthy(&d);
}

/// A file that grows from a few bytes to 100 MB between the walk (its stat) and the read: the
/// read stops at the cap instead of loading it whole, and the next reconcile sees its size.
#[test]
fn a_file_growing_past_the_cap_mid_scan_is_not_read_whole() {
    let tree = hostile_tree();
    tree.write("skills/grows/index.md", "# Small\n\nFor now.\n");
    let stdout = reconcile_in_a_child_with(
        &tree,
        false,
        &[("HOSTILE_CHILD_GROW", "skills/grows/index.md")],
    );
    let read_bytes: u64 = child_says(&stdout, "RECONCILE_READ_BYTES")
        .parse()
        .expect("number");
    assert!(
        read_bytes < 20 * 1024 * 1024,
        "the reconcile read {read_bytes} bytes: the grown file was read whole"
    );
    assert!(
        child_says(&stdout, "SKIPPED").contains("too large ("),
        "{stdout}"
    );
    let d = tree.open();
    assert_eq!(
        expect_skip(&d, &tree, "skills/grows/index.md"),
        unservable(ReadIssue::TooLarge(104_857_600))
    );
    assert!(get(&d, "grows").is_err());
    assert_healthy(&d);
}

/// Run by [`a_100_mb_file_is_skipped_without_being_read`] in a child process: reconciles the
/// tree given in `HOSTILE_CHILD_BASE` and prints the bytes this process read meanwhile.
#[test]
#[ignore = "run by a_100_mb_file_is_skipped_without_being_read"]
fn reconcile_in_child() {
    let base = PathBuf::from(std::env::var("HOSTILE_CHILD_BASE").expect("HOSTILE_CHILD_BASE"));
    let rchar = || -> u64 {
        let io = fs::read_to_string("/proc/self/io").expect("/proc/self/io");
        io.lines()
            .find_map(|l| l.strip_prefix("rchar:"))
            .expect("rchar")
            .trim()
            .parse()
            .expect("number")
    };
    let d = Directory::open(iii_directory::config::Config::for_root(&base)).expect("open");
    // `HOSTILE_CHILD_GROW`: a file that grows to 100 MB between the walk and the reads.
    let grow = std::env::var("HOSTILE_CHILD_GROW")
        .ok()
        .map(|rel| base.join(rel));
    let before = rchar();
    d.reconcile_with_progress(&|p| {
        if let (iii_directory::Progress::Walked { .. }, Some(path)) = (p, &grow) {
            let file = fs::OpenOptions::new().write(true).open(path).expect("open");
            file.set_len(100 * 1024 * 1024).expect("set_len");
        }
    })
    .expect("reconcile");
    println!("RECONCILE_READ_BYTES={}", rchar() - before);
    // `HOSTILE_CHILD_SCOPED`: paths to reconcile by themselves after the whole reconcile
    // (`[rel, …]`), which must leave the index a fresh one would be.
    if let Some(paths) = std::env::var_os("HOSTILE_CHILD_SCOPED") {
        let paths: Vec<String> =
            serde_json::from_str(paths.to_str().expect("utf-8")).expect("paths");
        d.reconcile_paths(paths.iter().map(|rel| base.join(rel)).collect())
            .expect("scoped reconcile");
        assert_matches_fresh(&d);
    }
    // `HOSTILE_CHILD_SHORT`: a path to reconcile by itself with no descriptor to spare: the
    // walk runs short, so the reconcile fails and drops nothing.
    if let Some(rel) = std::env::var_os("HOSTILE_CHILD_SHORT") {
        let answer = {
            let _held = OutOfDescriptors::now();
            d.reconcile_paths(vec![base.join(rel)])
                .map_err(|e| e.to_string())
        };
        println!("SHORT={}", json!(answer.err()));
        assert_matches_fresh(&d);
    }
    let skipped = serde_json::to_string(&d.skipped().expect("skipped")).expect("json");
    println!("SKIPPED={skipped}");
    // `HOSTILE_CHILD_CALLS`: functions to call after the reconcile (`[[id, request], …]`),
    // each answer printed as `{"ok": …}` or `{"err": "…"}`.
    if let Some(calls) = std::env::var_os("HOSTILE_CHILD_CALLS") {
        let calls: Vec<(String, Value)> =
            serde_json::from_str(calls.to_str().expect("utf-8")).expect("calls");
        let answers: Vec<Value> = calls
            .iter()
            .map(|(id, request)| call_any(&d, id, request))
            .collect();
        println!("CALLS={}", Value::Array(answers));
    }
    // `HOSTILE_CHILD_LOCKED`: the test locked some of the healthy entries.
    if std::env::var_os("HOSTILE_CHILD_LOCKED").is_none() {
        assert_healthy(&d);
    }
}

/// While held, this process can open no file: its limit on descriptors is lowered to its
/// highest one, and every lower one free is taken by `/dev/null`. Dropped, both are given back.
struct OutOfDescriptors {
    limit: libc::rlimit,
    _taken: Vec<fs::File>,
}

impl OutOfDescriptors {
    fn now() -> OutOfDescriptors {
        let highest = fs::read_dir("/proc/self/fd")
            .expect("list descriptors")
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<libc::rlim_t>().ok())
            .max()
            .expect("a descriptor");
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: both calls read or write one `rlimit` through a valid pointer.
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
            let lowered = libc::rlimit {
                rlim_cur: highest + 1,
                ..limit
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lowered), 0);
        }
        let taken = std::iter::from_fn(|| fs::File::open("/dev/null").ok()).collect();
        OutOfDescriptors {
            limit,
            _taken: taken,
        }
    }
}

impl Drop for OutOfDescriptors {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.limit) };
    }
}

/// Calls the read or write function `id` with `request`: `{"ok": answer}` or `{"err": message}`.
fn call_any(d: &Directory, id: &str, request: &Value) -> Value {
    let answer = match (ReadFunction::from_id(id), WriteFunction::from_id(id)) {
        (Some(read), _) => d.read(read, request, None),
        (None, Some(write)) => d.write(write, request, None),
        (None, None) => panic!("no function {id}"),
    };
    match answer {
        Ok(value) => json!({ "ok": value }),
        Err(e) => json!({ "err": e.to_string() }),
    }
}

/// Runs [`reconcile_in_child`] on the tree in a child process, as the user `nobody` when
/// `as_nobody` (for permission checks when the tests run as root), and returns its output.
fn reconcile_in_a_child(tree: &Tree, as_nobody: bool) -> String {
    reconcile_in_a_child_with(tree, as_nobody, &[])
}

fn reconcile_in_a_child_with(tree: &Tree, as_nobody: bool, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().expect("test binary");
    let mut command = if as_nobody {
        let mut command = std::process::Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&exe);
        command
    } else {
        std::process::Command::new(&exe)
    };
    let output = command
        .arg(common::child::test_path(
            module_path!(),
            "reconcile_in_child",
        ))
        .args(["--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("HOSTILE_CHILD_BASE", tree.base())
        .envs(env.iter().copied())
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The value the child printed as `KEY=value` (the test harness may print its own text first).
fn child_says<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.split_once(&format!("{key}=")).map(|(_, value)| value))
        .unwrap_or_else(|| panic!("the child did not print {key}: {stdout}"))
        .trim()
}

// ---------------------------------------------------------------------------------------------
// Shapes of the tree

#[test]
fn deep_nesting_is_walked_and_over_long_ids_are_skipped() {
    let tree = hostile_tree();
    // 200 levels: a valid id of 403 bytes.
    let deep = format!("deep/{}leaf", "a/".repeat(200));
    tree.write(&format!("skills/{deep}.md"), "# Deep\n\nAt the bottom.\n");
    // 600 levels: an id over the 1024-byte limit.
    let deeper = format!("deeper/{}leaf", "b/".repeat(600));
    tree.write(&format!("skills/{deeper}.md"), "# Deeper\n\nToo deep.\n");
    let started = Instant::now();
    let d = tree.open();
    assert!(started.elapsed() < QUICK, "took {:?}", started.elapsed());
    assert_eq!(get(&d, &deep).expect("served")["title"], "Deep");
    assert_eq!(
        expect_skip(&d, &tree, &format!("skills/{deeper}.md")),
        SkipReason::InvalidId {
            id: deeper.clone(),
            problem: IdError::TooLong(deeper.clone())
        }
    );
    assert!(listed(&d, &deeper).is_none());
    assert_healthy(&d);
}

#[test]
fn many_files_in_one_folder_are_indexed() {
    let count: usize = std::env::var("HOSTILE_MANY_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MANY_FILES_DEFAULT);
    let tree = hostile_tree();
    let dir = tree.path("skills/crowd");
    fs::create_dir_all(&dir).expect("mkdir");
    let started = Instant::now();
    for i in 0..count {
        fs::write(
            dir.join(format!("s{i:06}.md")),
            format!("# S{i}\n\nNumber {i}.\n"),
        )
        .expect("write");
    }
    let written = started.elapsed();
    let started = Instant::now();
    let d = Directory::open(tree.config()).expect("open");
    let report = d.reconcile().expect("reconcile");
    let indexed = started.elapsed();
    let started = Instant::now();
    let list = common::call(&d, ReadFunction::SkillsList, json!({"prefix": "crowd/"}));
    let listed_in = started.elapsed();
    let started = Instant::now();
    let again = d.reconcile().expect("second reconcile");
    let rescan = started.elapsed();
    println!(
        "many_files: {count} files written in {written:?}, indexed in {indexed:?} \
         ({} read), listed in {listed_in:?}, unchanged reconcile in {rescan:?}",
        report.read
    );
    assert_eq!(list["skills"].as_array().expect("skills").len(), count);
    let last = count - 1;
    let got = get(&d, &format!("crowd/s{last:06}")).expect("served");
    assert_eq!(got["raw"], format!("# S{last}\n\nNumber {last}.\n"));
    assert!(!again.changed);
    assert!(d.skipped().expect("skipped").is_empty());
    assert_healthy(&d);
}

#[test]
fn invalid_names_are_skipped_with_the_validator_reason() {
    let tree = hostile_tree();
    let long = "x".repeat(65);
    let bad_segment = |id: &str, position: usize| SkipReason::InvalidId {
        id: id.to_string(),
        problem: IdError::Segment {
            id: id.to_string(),
            position,
            problem: SegmentError::Characters(id.split('/').nth(position - 1).unwrap().into()),
        },
    };
    let bad_agent = |id: &str| SkipReason::InvalidAgentId {
        id: id.to_string(),
        problem: NameError::Characters(id.to_string()),
    };
    let cases = [
        ("skills/ns/Upper.md", bad_segment("ns/Upper", 2)),
        ("skills/ns/has space.md", bad_segment("ns/has space", 2)),
        ("skills/ns/dot.ted.md", bad_segment("ns/dot.ted", 2)),
        ("skills/ns/.hidden.md", bad_segment("ns/.hidden", 2)),
        ("skills/ns/café.md", bad_segment("ns/café", 2)),
        ("skills/ns/back\\slash.md", bad_segment("ns/back\\slash", 2)),
        ("skills/Bad Ns/x.md", bad_segment("Bad Ns/x", 1)),
        ("agents/Bad.md", bad_agent("Bad")),
        ("agents/a.b.md", bad_agent("a.b")),
    ];
    for (rel, _) in &cases {
        tree.write(rel, "# Named\n\nx\n");
    }
    let long_rel = format!("skills/ns/{long}.md");
    tree.write(&long_rel, "# Long\n\nx\n");
    tree.write("skills/ns/fine.md", "# Fine\n\nx\n");
    let d = tree.open();
    for (rel, reason) in cases {
        assert_eq!(expect_skip(&d, &tree, rel), reason, "{rel}");
    }
    let id = format!("ns/{long}");
    assert_eq!(
        expect_skip(&d, &tree, &long_rel),
        SkipReason::InvalidId {
            id: id.clone(),
            problem: IdError::Segment {
                id,
                position: 2,
                problem: SegmentError::TooLong(long)
            }
        }
    );
    assert_eq!(get(&d, "ns/fine").expect("served")["title"], "Fine");
    assert_healthy(&d);
}

// ---------------------------------------------------------------------------------------------
// Symbolic links

#[test]
fn symlinks_out_of_the_roots_are_not_followed() {
    let tree = hostile_tree();
    tree.write("outside/secret.md", "# Secret\n\nOutside the roots.\n")
        .write("outside/dir/leak.md", "# Leak\n\nOutside the roots.\n")
        .write("outside/agent.md", "---\nname: Leak\n---\nOutside.\n")
        .write("outside/askill/SKILL.md", "# Leak\n\nOutside.\n");
    let outside = tree.path("outside");
    symlink(outside.join("secret.md"), tree.path("skills/secret.md")).expect("link");
    symlink(outside.join("dir"), tree.path("skills/escape")).expect("link");
    symlink(outside.join("agent.md"), tree.path("agents/leak.md")).expect("link");
    symlink(outside.join("askill"), tree.path(".agents/skills/leak")).expect("link");
    // A relative link climbing out of the root.
    symlink(
        "../../outside/secret.md",
        tree.path("skills/healthy/climb.md"),
    )
    .expect("link");
    // A link that stays inside the roots is followed.
    symlink(tree.path(HEALTHY_REL), tree.path("skills/alias.md")).expect("link");
    let before = snapshot(tree.base());
    let d = tree.open();

    for rel in [
        "skills/secret.md",
        "skills/escape",
        "agents/leak.md",
        ".agents/skills/leak",
        "skills/healthy/climb.md",
    ] {
        let reason = expect_skip(&d, &tree, rel);
        assert!(
            matches!(reason, SkipReason::LinkOutside(_)),
            "{rel}: {reason}"
        );
    }
    for id in ["secret", "escape/leak", "leak", "healthy/climb"] {
        assert!(get(&d, id).is_err(), "{id} served from outside the roots");
        assert!(listed(&d, id).is_none(), "{id} listed");
    }
    assert!(agent_row(&d, "leak").is_none());
    let all = serde_json::to_string(&dump(&d)).expect("json");
    assert!(!all.contains("Outside the roots"), "outside content served");
    assert_eq!(get(&d, "alias").expect("served")["raw"], HEALTHY_TEXT);
    assert_healthy(&d);

    // A write through a link out of the roots is refused, and writes nothing.
    for (function, request) in [
        (
            WriteFunction::SkillsCreate,
            json!({"id": "escape/planted", "content": "# Planted\n\nx\n"}),
        ),
        (
            WriteFunction::SkillsCreate,
            json!({"id": "escape/deeper/planted", "content": "# Planted\n\nx\n"}),
        ),
    ] {
        let err = d
            .write(function, &request, None)
            .expect_err("write through a link out of the roots");
        assert!(err.to_string().starts_with("D115 "), "{err}");
    }
    assert_eq!(snapshot(tree.base()), before);

    // The same after a watcher-style scoped reconcile of the links.
    d.reconcile_paths(vec![
        tree.path("skills/secret.md"),
        tree.path("skills/escape"),
        tree.path("skills/escape/leak.md"),
        tree.path("agents/leak.md"),
    ])
    .expect("scoped reconcile");
    assert!(get(&d, "secret").is_err());
    assert!(get(&d, "escape/leak").is_err());
    assert_matches_fresh(&d);
}

#[test]
fn symlink_loops_end() {
    let tree = hostile_tree();
    tree.write("skills/loop/index.md", "# Loop\n\nInside a loop.\n");
    symlink("..", tree.path("skills/loop/up")).expect("link");
    symlink(".", tree.path("skills/loop/here")).expect("link");
    symlink(tree.path("skills"), tree.path("skills/loop/root")).expect("link");
    symlink("self.md", tree.path("skills/loop/self.md")).expect("link");
    symlink("pong.md", tree.path("skills/loop/ping.md")).expect("link");
    symlink("ping.md", tree.path("skills/loop/pong.md")).expect("link");
    symlink("b", tree.path("skills/loop/a")).expect("link");
    symlink("a", tree.path("skills/loop/b")).expect("link");
    let started = Instant::now();
    let d = tree.open();
    assert!(started.elapsed() < QUICK, "took {:?}", started.elapsed());
    assert_eq!(get(&d, "loop").expect("served")["title"], "Loop");
    for rel in [
        "skills/loop/self.md",
        "skills/loop/ping.md",
        "skills/loop/pong.md",
    ] {
        let reason = expect_skip(&d, &tree, rel);
        assert!(
            matches!(reason, SkipReason::LinkBroken(_) | SkipReason::LinkLoops(_)),
            "{rel}: {reason}"
        );
    }
    for id in [
        "loop/self",
        "loop/ping",
        "loop/up/loop",
        "loop/root/healthy",
    ] {
        assert!(listed(&d, id).is_none(), "{id} listed");
    }
    assert_healthy(&d);
    d.reconcile_paths(vec![tree.path("skills/loop")])
        .expect("scoped reconcile");
    assert_matches_fresh(&d);
}

/// Links that lead many ways into one folder (a shared folder linked from 40 namespaces, or
/// a tree built to multiply paths) are followed into it 16 times at most, the first 16 paths
/// in path order (compared name by name), each other path listed by `check`; the folder's own
/// path is always walked. Whatever order the parallel walk finds them in, every walk keeps the same ones, so no row
/// comes and goes between reconciles.
#[test]
fn a_folder_is_entered_by_its_own_path_and_the_first_sixteen_links() {
    let tree = hub_linked_from_forty_namespaces();
    let served = |d: &Directory| served_through_links(d, 0..40);
    let refused = |d: &Directory| not_followed(d);
    let d = tree.open();
    assert!(listed(&d, "hub").is_some(), "the folder's own path");
    assert_eq!(served(&d), (0..16).collect::<Vec<_>>());
    let expected: Vec<String> = (16..40)
        .map(|i| tree.abs(&format!("skills/ns{i:02}/a/b/common")))
        .collect();
    assert_eq!(refused(&d), expected);
    assert!(
        SkipReason::TooManyLinkedPaths
            .to_string()
            .contains("16 other such paths"),
    );
    for _ in 0..5 {
        d.reconcile().expect("reconcile");
        assert_eq!(served(&d), (0..16).collect::<Vec<_>>());
        assert_eq!(refused(&d), expected);
    }
    // A change under the shared folder reaches the index by paths through links (as the
    // watcher names them): the index stays what a whole walk makes of the tree.
    tree.write("skills/hub/index.md", "# Hub again\n\nEdited.\n");
    d.reconcile_paths(vec![
        tree.path("skills/hub/index.md"),
        tree.path("skills/ns00/a/b/common/index.md"),
        tree.path("skills/ns20/a/b/common/index.md"),
    ])
    .expect("scoped reconcile");
    assert_eq!(served(&d), (0..16).collect::<Vec<_>>());
    assert_eq!(refused(&d), expected);
    assert_eq!(
        listed(&d, "ns00/a/b/common").expect("served")["title"],
        "Hub again"
    );
    assert_matches_fresh(&d);
    assert_healthy(&d);
}

/// `skills/hub` (a skill), linked from `skills/nsNN/a/b/common` for NN in 00..40.
fn hub_linked_from_forty_namespaces() -> Tree {
    let tree = hostile_tree();
    tree.write("skills/hub/index.md", "# Hub\n\nReached many ways.\n");
    for i in 0..40 {
        tree.mkdir(&format!("skills/ns{i:02}/a/b"));
        symlink(
            "../../../hub",
            tree.path(&format!("skills/ns{i:02}/a/b/common")),
        )
        .expect("link");
    }
    tree
}

/// Which of the namespaces `nsNN` serve the hub through their link.
fn served_through_links(d: &Directory, namespaces: std::ops::Range<usize>) -> Vec<usize> {
    namespaces
        .filter(|i| listed(d, &format!("ns{i:02}/a/b/common")).is_some())
        .collect()
}

/// The paths through links `check` lists as not followed, for the bound on paths into one
/// folder.
fn not_followed(d: &Directory) -> Vec<String> {
    d.skipped()
        .expect("skipped")
        .into_iter()
        .filter(|s| s.reason == SkipReason::TooManyLinkedPaths)
        .map(|s| s.path)
        .collect()
}

/// A profile (and skill) named `name`, as the file both roots share holds it.
fn shared_profile(name: &str) -> String {
    format!("---\nname: {name}\n---\nShared.\n")
}

/// Writes the skill at `rel` and gives it a second name in the agents folder, `shared.md`: a
/// write in place through one name changes the other, which nothing reports.
fn shared_with_the_agents_folder(tree: &Tree, rel: &str) {
    tree.write(rel, &shared_profile("First"));
    fs::hard_link(tree.path(rel), tree.path("agents/shared.md")).expect("hard link");
}

/// Scoped reconciles (a watcher's bursts) in a tree where the bound on paths through links
/// turned some away leave the index as a whole walk makes it: a link among the followed ones
/// removed gives its place to the next, links under the shared folder add no `check` rows
/// under paths the whole walk does not enter, and a file given by name that has another name
/// in another root brings that name up to date even when its root was walked whole.
#[test]
fn scoped_reconciles_where_links_were_turned_away_match_a_whole_walk() {
    let tree = hub_linked_from_forty_namespaces();
    shared_with_the_agents_folder(&tree, "skills/hub/shared.md");
    let d = tree.open();
    let through_links = |rest: &str| -> Vec<PathBuf> {
        (0..40)
            .map(|i| tree.path(&format!("skills/ns{i:02}/a/b/common{rest}")))
            .collect()
    };
    let reconcile = |paths: Vec<PathBuf>, what: &str| {
        d.reconcile_paths(paths).expect(what);
        assert_matches_fresh(&d);
    };

    // Written in place through the hub's own name, given last; the other root's name follows.
    fs::write(tree.path("skills/hub/shared.md"), shared_profile("Second")).expect("write");
    let mut paths = through_links("/shared.md");
    paths.push(tree.path("skills/hub/shared.md"));
    reconcile(paths, "an in-place write");
    assert_eq!(agent_row(&d, "shared").expect("profile")["name"], "Second");

    // A link that leads nowhere and one back up, under the shared folder.
    symlink("missing.md", tree.path("skills/hub/dangling.md")).expect("link");
    symlink("..", tree.path("skills/hub/up")).expect("link");
    let mut paths = [through_links("/dangling.md"), through_links("/up")].concat();
    paths.extend([
        tree.path("skills/hub/dangling.md"),
        tree.path("skills/hub/up"),
    ]);
    reconcile(paths, "links under the shared folder");
    let reasons = d.skipped().expect("skipped");
    let under = |rest: &str| reasons.iter().filter(|s| s.path.ends_with(rest)).count();
    assert_eq!(
        under("/dangling.md"),
        17,
        "the hub's own and 16 paths through links"
    );
    assert_eq!(under("/up"), 17, "{reasons:#?}");

    // One of the followed links removed, then a namespace holding another: the next paths in
    // order take their places.
    fs::remove_file(tree.path("skills/ns00/a/b/common")).expect("remove");
    reconcile(vec![tree.path("skills/ns00/a/b/common")], "a link removed");
    assert_eq!(served_through_links(&d, 0..40), (1..17).collect::<Vec<_>>());
    fs::remove_dir_all(tree.path("skills/ns01")).expect("remove");
    reconcile(vec![tree.path("skills/ns01")], "a namespace removed");
    assert_eq!(served_through_links(&d, 0..40), (2..18).collect::<Vec<_>>());
    // A link replaced by a folder of the same name within one burst: the path is there, but
    // no longer one through a link.
    let common = tree.path("skills/ns02/a/b/common");
    fs::remove_file(&common).expect("remove");
    tree.write(
        "skills/ns02/a/b/common/index.md",
        "# Own\n\nNo longer a link.\n",
    );
    reconcile(vec![common], "a link replaced by a folder");
    assert_eq!(served_through_links(&d, 3..40), (3..19).collect::<Vec<_>>());
    let expected: Vec<String> = (19..40)
        .map(|i| tree.abs(&format!("skills/ns{i:02}/a/b/common")))
        .collect();
    assert_eq!(not_followed(&d), expected);
    assert_healthy(&d);
}

/// Where no path through links was turned away, scoped reconciles below a link (as a watcher
/// names a change under a linked folder: by its own path and each path through links) leave the
/// index as a whole walk makes it, through every kind of change. (Which of them walk their paths
/// alone is asserted by the unit tests of `walk_scoped`.)
#[test]
fn scoped_reconciles_below_links_match_a_whole_walk() {
    let tree = hostile_tree();
    tree.write("skills/team/one/index.md", "# One\n\nFirst.\n")
        .write("skills/plain/index.md", "# Plain\n\nBeside.\n");
    symlink("team", tree.path("skills/alias")).expect("link");
    symlink("../team", tree.path("skills/plain/again")).expect("link");
    let d = tree.open();
    let both = |rel: &str| {
        vec![
            tree.path(&format!("skills/team/{rel}")),
            tree.path(&format!("skills/alias/{rel}")),
            tree.path(&format!("skills/plain/again/{rel}")),
        ]
    };
    let reconcile = |paths: Vec<PathBuf>, what: &str| {
        d.reconcile_paths(paths).expect(what);
        assert_matches_fresh(&d);
    };
    tree.write("skills/team/one/index.md", "# One again\n\nEdited.\n");
    reconcile(both("one/index.md"), "an edit");
    assert_eq!(
        listed(&d, "alias/one").expect("served")["title"],
        "One again"
    );
    tree.write("skills/team/two/deep/index.md", "# Two\n\nNew.\n");
    reconcile(both("two"), "a new folder");
    assert!(listed(&d, "plain/again/two/deep").is_some());
    symlink("missing.md", tree.path("skills/team/dangling.md")).expect("link");
    reconcile(both("dangling.md"), "a link that leads nowhere");
    symlink("..", tree.path("skills/team/up")).expect("link");
    reconcile(both("up"), "a link back up");
    symlink("../plain", tree.path("skills/team/sideways")).expect("link");
    reconcile(both("sideways"), "a link to a folder beside");
    assert!(listed(&d, "alias/sideways").is_some());
    fs::remove_dir_all(tree.path("skills/team/two")).expect("remove");
    reconcile(both("two"), "a folder removed");
    fs::remove_file(tree.path("skills/team/sideways")).expect("remove");
    reconcile(both("sideways"), "a link removed");
    assert!(listed(&d, "alias/sideways").is_none());
    // A burst whose first path (a new link) sends the root whole, with an in-place write
    // through a name that has another in another root: that name follows.
    shared_with_the_agents_folder(&tree, "skills/team/shared.md");
    d.reconcile().expect("reconcile");
    symlink("../plain", tree.path("skills/team/across")).expect("link");
    fs::write(tree.path("skills/team/shared.md"), shared_profile("Second")).expect("write");
    let mut paths = both("across");
    paths.extend(both("shared.md"));
    reconcile(paths, "a link and an in-place write");
    assert_eq!(agent_row(&d, "shared").expect("profile")["name"], "Second");
    assert_healthy(&d);
}

#[test]
fn a_root_that_is_a_symlink_works() {
    let tree = hostile_tree();
    fs::rename(tree.path("skills"), tree.path("real-skills")).expect("move");
    symlink(tree.path("real-skills"), tree.path("skills")).expect("link");
    fs::rename(tree.path("agents"), tree.path("real-agents")).expect("move");
    symlink("real-agents", tree.path("agents")).expect("link");
    let d = tree.open();
    assert_healthy(&d);
    assert!(
        d.skipped().expect("skipped").is_empty(),
        "{:?}",
        d.skipped()
    );
    let created = d
        .write(
            WriteFunction::SkillsCreate,
            &json!({"id": "healthy/added", "content": "# Added\n\nThrough the link.\n"}),
            None,
        )
        .expect("create");
    assert_eq!(created["title"], "Added");
    assert!(tree.path("real-skills/healthy/added.md").is_file());
    assert!(
        fs::symlink_metadata(tree.path("skills"))
            .expect("lstat")
            .is_symlink(),
        "the root link was replaced"
    );
    assert_eq!(get(&d, "healthy/added").expect("served")["title"], "Added");
    assert_matches_fresh(&d);
}

// ---------------------------------------------------------------------------------------------
// The disk changing under the scan

#[test]
fn files_vanishing_mid_scan_cause_no_error() {
    let tree = hostile_tree();
    for i in 0..50 {
        tree.write(
            &format!("skills/gone/g{i:02}.md"),
            &format!("# G{i}\n\nx\n"),
        );
    }
    tree.write(
        "skills/system-prompts/gone.md",
        "---\ndescription: Gone.\n---\nx\n",
    );
    tree.write("agents/gone.md", "---\nname: Gone\n---\nx\n");
    let d = Directory::open(tree.config()).expect("open");
    let base = tree.base().to_path_buf();
    // Between the walk and the reads: everything just listed disappears.
    d.reconcile_with_progress(&|p| {
        if let iii_directory::Progress::Walked { .. } = p {
            let _ = fs::remove_dir_all(base.join("skills/gone"));
            let _ = fs::remove_file(base.join("skills/system-prompts/gone.md"));
            let _ = fs::remove_file(base.join("agents/gone.md"));
        }
    })
    .expect("a reconcile racing deletions succeeds");
    for i in 0..50 {
        assert!(get(&d, &format!("gone/g{i:02}")).is_err());
    }
    assert!(!prompt_names(&d).contains(&"gone".to_string()));
    assert!(agent_row(&d, "gone").is_none());
    assert_healthy(&d);
    d.reconcile().expect("reconcile");
    assert_matches_fresh(&d);
}

#[test]
fn edits_racing_a_reconcile_end_equal_to_a_fresh_scan() {
    let tree = hostile_tree();
    for i in 0..40 {
        tree.write(
            &format!("skills/race/r{i:02}.md"),
            &format!("# R{i}\n\nv0\n"),
        );
    }
    let d = Arc::new(Directory::open(tree.config()).expect("open"));
    d.reconcile().expect("reconcile");
    let base = tree.base().to_path_buf();
    // Deterministic interleaving: each reconcile's files change between its walk and its reads
    // (same size and new size, deletions and creations).
    for round in 1..=5u32 {
        let base = base.clone();
        d.reconcile_with_progress(&move |p| {
            if let iii_directory::Progress::Walked { .. } = p {
                for i in 0..40 {
                    let path = base.join(format!("skills/race/r{i:02}.md"));
                    let text = match (i + round as usize) % 4 {
                        0 => format!("# R{i}\n\nv{round}\n"),
                        1 => format!("# R{i} round {round}\n\nlonger v{round}\n"),
                        2 => {
                            let _ = fs::remove_file(&path);
                            continue;
                        }
                        _ => format!("# X{i}\n\nw{round}\n"),
                    };
                    let _ = fs::write(&path, text);
                }
            }
        })
        .expect("reconcile");
    }
    // Free-running: a thread edits while reconciles run.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let editor = {
        let stop = stop.clone();
        let base = base.clone();
        std::thread::spawn(move || {
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let i = n % 40;
                let path = base.join(format!("skills/race/r{i:02}.md"));
                if n % 7 == 0 {
                    let _ = fs::remove_file(&path);
                } else {
                    let _ = fs::write(&path, format!("# E{n}\n\n{}\n", "e".repeat(n % 13)));
                }
                n += 1;
            }
        })
    };
    for _ in 0..10 {
        d.reconcile().expect("reconcile during edits");
        assert_healthy(&d);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    editor.join().expect("editor");
    d.reconcile().expect("reconcile after the edits");
    assert_matches_fresh(&d);
    assert_healthy(&d);
}

/// Root ignores permissions: a permission-denied case is then scanned in a child process as
/// `nobody` ([`skipped_as_nobody`]), on a tree everyone may read and write but for the entries
/// a test locks afterwards. Opens the tree to everyone and says whether that can run (it needs
/// `setpriv`; without it, says so).
fn can_scan_as_nobody(tree: &Tree) -> bool {
    let setpriv = std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !setpriv {
        println!(
            "note: running as root without setpriv: permissions cannot be enforced, so the \
             permission-denied skip reasons are not checked in this run"
        );
        return false;
    }
    open_to_everyone(tree.base());
    true
}

/// `check`'s rows (path → reason) after a reconcile of `tree` in a child process as `nobody`,
/// every healthy entry readable.
fn skipped_as_nobody(tree: &Tree) -> BTreeMap<String, String> {
    skipped_rows(&reconcile_in_a_child(tree, true))
}

/// The `check` rows (path → reason) a child printed.
fn skipped_rows(stdout: &str) -> BTreeMap<String, String> {
    let rows: Vec<Value> =
        serde_json::from_str(child_says(stdout, "SKIPPED")).expect("skipped json");
    rows.iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().expect("text").to_string();
            (text("path"), text("reason"))
        })
        .collect()
}

#[test]
fn below_a_folder_that_cannot_be_listed_a_scoped_reconcile_finds_what_the_whole_walk_finds() {
    let tree = hostile_tree();
    tree.write("skills/locked/top.md", "# Top\n\nx\n")
        .write("skills/locked/inner/index.md", "# Inner\n\nx\n");
    let as_root = permissions_ignored(&tree);
    if as_root && !can_scan_as_nobody(&tree) {
        return;
    }
    let chmod = |rel: &str, mode: u32| {
        fs::set_permissions(tree.path(rel), fs::Permissions::from_mode(mode)).expect("chmod")
    };
    // Entered, not listed, by anyone: a whole walk sees nothing below them, a `stat` of a
    // path below them does.
    chmod("skills/locked", 0o333);
    chmod("agents", 0o333);
    let scoped = json!([
        "skills/locked/top.md",
        "skills/locked/inner/index.md",
        "agents/steady.md",
        HEALTHY_REL,
    ])
    .to_string();
    let stdout = reconcile_in_a_child_with(
        &tree,
        as_root,
        &[
            ("HOSTILE_CHILD_LOCKED", "1"),
            ("HOSTILE_CHILD_SCOPED", &scoped),
        ],
    );
    chmod("skills/locked", 0o755);
    chmod("agents", 0o755);
    // The child's scoped reconcile matched a fresh index; both list the two folders.
    let skipped = skipped_rows(&stdout);
    for rel in ["skills/locked", "agents"] {
        let reason = skipped
            .get(&tree.path(rel).display().to_string())
            .unwrap_or_else(|| panic!("{rel} not skipped: {skipped:?}"));
        assert!(reason.contains("ermission denied"), "{reason}");
    }
    assert_eq!(skipped.len(), 2, "{skipped:?}");
}

/// A scoped reconcile that cannot list a folder on the way for want of descriptors has seen
/// only part of what it was asked to: it fails, saying why, and leaves the rows below as they
/// were (a folder it may not list would have them dropped, as the whole walk drops them).
#[test]
fn a_scoped_reconcile_out_of_descriptors_fails_and_drops_nothing() {
    let tree = hostile_tree();
    tree.write("skills/deep/inner/leaf.md", "# Leaf\n\nx\n");
    let stdout = reconcile_in_a_child_with(
        &tree,
        false,
        &[("HOSTILE_CHILD_SHORT", "skills/deep/inner/leaf.md")],
    );
    let short: Option<String> = serde_json::from_str(child_says(&stdout, "SHORT")).expect("json");
    let short = short.expect("the scoped reconcile failed");
    assert!(
        short.contains("list the folder") && short.contains("os error 24"),
        "{short}"
    );
}

#[test]
fn unreadable_files_and_folders_are_skipped_and_the_scan_goes_on() {
    let tree = hostile_tree();
    tree.write("skills/locked/index.md", "# Locked\n\nx\n")
        .write("skills/closed/inner.md", "# Inner\n\nx\n")
        .write(
            "skills/system-prompts/locked.md",
            "---\ndescription: L.\n---\nx\n",
        )
        .write("skills/zz-after/index.md", "# After\n\nScanned after.\n");
    let as_root = permissions_ignored(&tree);
    let chmod = |rel: &str, mode: u32| {
        fs::set_permissions(tree.path(rel), fs::Permissions::from_mode(mode)).expect("chmod")
    };
    if as_root && !can_scan_as_nobody(&tree) {
        let d = tree.open();
        assert_healthy(&d);
        return;
    }
    chmod("skills/locked/index.md", 0o000);
    chmod("skills/system-prompts/locked.md", 0o000);
    chmod("skills/closed", 0o000);
    let skipped: BTreeMap<String, String> = if as_root {
        skipped_as_nobody(&tree)
    } else {
        let d = tree.open();
        // The scan went on and served the rest.
        assert_eq!(get(&d, "zz-after").expect("served")["title"], "After");
        assert_healthy(&d);
        assert!(get(&d, "locked").is_err());
        assert!(listed(&d, "closed/inner").is_none());
        d.skipped()
            .expect("skipped")
            .into_iter()
            // The sentences, as the child's JSON gives them.
            .map(|s| (s.path, s.reason.to_string()))
            .collect()
    };
    let reason = |rel: &str| {
        skipped
            .get(&tree.path(rel).display().to_string())
            .unwrap_or_else(|| panic!("{rel} not skipped: {skipped:?}"))
            .clone()
    };
    let locked = reason("skills/locked/index.md");
    assert!(
        locked.starts_with("cannot be read: ") && locked.contains("ermission denied"),
        "{locked}"
    );
    let prompt = reason("skills/system-prompts/locked.md");
    assert!(prompt.starts_with("cannot be read: "), "{prompt}");
    let closed = reason("skills/closed");
    assert!(
        closed.starts_with("folder cannot be listed: ") && closed.contains("ermission denied"),
        "{closed}"
    );
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    let d = tree.open();
    assert_eq!(get(&d, "zz-after").expect("served")["title"], "After");
    chmod("skills/closed", 0o755);
    chmod("skills/locked/index.md", 0o644);
    chmod("skills/system-prompts/locked.md", 0o644);
    d.reconcile().expect("reconcile");
    assert_eq!(get(&d, "locked").expect("served")["title"], "Locked");
    assert_eq!(get(&d, "closed/inner").expect("served")["title"], "Inner");
    assert!(
        d.skipped().expect("skipped").is_empty(),
        "{:?}",
        d.skipped()
    );
}

/// A profile, a system prompt or a skill whose file this process may not read: `get`, `update`
/// name the file and why it is not served (never "does not exist", from which `create`, "a
/// file already exists", sends the caller back to `update`), and a skill update, which keeps a file's permissions, is refused rather than
/// answered as written while the skill stays unserved.
#[test]
fn calls_on_an_unreadable_file_name_the_file_and_why() {
    let tree = hostile_tree();
    tree.write("agents/eve.md", "---\nname: Eve\n---\nx\n")
        .write(
            "skills/system-prompts/hush.md",
            "---\ndescription: H.\n---\nx\n",
        )
        .write("skills/rw/secret.md", "# Secret\n\nx\n")
        .write(
            "skills/mailer/system-prompts/digest.md",
            "---\ndescription: D.\n---\nx\n",
        );
    let as_root = permissions_ignored(&tree);
    if as_root && !can_scan_as_nobody(&tree) {
        return;
    }
    for rel in [
        "agents/eve.md",
        "skills/system-prompts/hush.md",
        "skills/rw/secret.md",
        "skills/mailer/system-prompts/digest.md",
    ] {
        fs::set_permissions(tree.path(rel), fs::Permissions::from_mode(0o000)).expect("chmod");
    }
    let new_profile = "---\nname: Eve\n---\ny\n";
    let calls = json!([
        ["directory::agents::get", {"id": "eve"}],
        ["directory::agents::update", {"id": "eve", "content": new_profile}],
        ["directory::agents::create", {"id": "eve", "content": new_profile}],
        ["directory::system-prompts::get", {"name": "hush"}],
        ["directory::skills::update", {"id": "rw/secret", "content": "# S2\n\ny\n"}],
        ["directory::system-prompts::get", {"name": "digest"}],
        ["directory::system-prompts::create", {"name": "digest", "content": "---\ndescription: New.\n---\ny\n"}],
    ]);
    let answers: Vec<Value> = if as_root {
        let stdout = reconcile_in_a_child_with(
            &tree,
            true,
            &[
                ("HOSTILE_CHILD_LOCKED", "1"),
                ("HOSTILE_CHILD_CALLS", &calls.to_string()),
            ],
        );
        serde_json::from_str(child_says(&stdout, "CALLS")).expect("answers")
    } else {
        let d = tree.open();
        let calls: Vec<(String, Value)> = serde_json::from_value(calls).expect("calls");
        calls
            .iter()
            .map(|(id, request)| call_any(&d, id, request))
            .collect()
    };
    let error = |i: usize| {
        answers[i]["err"]
            .as_str()
            .unwrap_or_else(|| panic!("call {i} answered {}", answers[i]))
            .to_string()
    };
    let eve = tree.path("agents/eve.md").display().to_string();
    for i in [0, 1] {
        let e = error(i);
        assert!(
            e.starts_with("D410 not_found: agent profile \"eve\" is not served"),
            "{e}"
        );
        assert!(e.contains(&eve) && e.contains("ermission denied"), "{e}");
    }
    // The contract's sentence for a file in the way of a create.
    let create = error(2);
    assert!(
        create.starts_with("D414") && create.contains("(currently skipped by the scanner)"),
        "{create}"
    );
    let prompt = error(3);
    assert!(
        prompt.starts_with("D210 not_found: system prompt \"hush\" is not served"),
        "{prompt}"
    );
    let skill = error(4);
    assert!(
        skill.starts_with("D116") && skill.contains("chmod u+r"),
        "{skill}"
    );
    // A bundle's prompts land in its namespace's `system-prompts` folder.
    let nested = error(5);
    assert!(
        nested.starts_with("D210 not_found: system prompt \"digest\" is not served: ")
            && nested.contains("mailer/system-prompts/digest.md"),
        "{nested}"
    );
    // A create of that name elsewhere would make two files of one name once it is readable.
    let twin = error(6);
    assert!(
        twin.starts_with("D214") && twin.contains("mailer/system-prompts/digest.md"),
        "{twin}"
    );
    assert!(!tree.path("skills/system-prompts/digest.md").exists());
    // Nothing was written: the files are as they were.
    for rel in ["agents/eve.md", "skills/rw/secret.md"] {
        fs::set_permissions(tree.path(rel), fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    assert_eq!(
        fs::read_to_string(tree.path("agents/eve.md")).expect("read"),
        "---\nname: Eve\n---\nx\n"
    );
    assert_eq!(
        fs::read_to_string(tree.path("skills/rw/secret.md")).expect("read"),
        "# Secret\n\nx\n"
    );
}

/// The agents folders are read shallowly, but a folder there the worker may not list is
/// listed by `check` as any skills folder is: profiles and agents skills never vanish unsaid.
#[test]
fn unreadable_agents_folders_are_listed_by_check() {
    let tree = hostile_tree();
    tree.write(
        ".agents/skills/hidden/SKILL.md",
        "---\nname: hidden\ndescription: Hidden.\n---\nx\n",
    );
    let as_root = permissions_ignored(&tree);
    if as_root && !can_scan_as_nobody(&tree) {
        return;
    }
    let chmod = |rel: &str, mode: u32| {
        fs::set_permissions(tree.path(rel), fs::Permissions::from_mode(mode)).expect("chmod")
    };
    chmod("agents", 0o000);
    chmod(".agents/skills/hidden", 0o000);
    let get_steady = json!({ "id": "steady" });
    let (skipped, answer): (BTreeMap<String, String>, Value) = if as_root {
        let calls = json!([["directory::agents::get", get_steady]]).to_string();
        let stdout = reconcile_in_a_child_with(
            &tree,
            true,
            &[
                ("HOSTILE_CHILD_LOCKED", "1"),
                ("HOSTILE_CHILD_CALLS", &calls),
            ],
        );
        let answers: Vec<Value> =
            serde_json::from_str(child_says(&stdout, "CALLS")).expect("answers");
        (skipped_rows(&stdout), answers[0].clone())
    } else {
        let d = tree.open();
        let skipped = d
            .skipped()
            .expect("skipped")
            .into_iter()
            .map(|s| (s.path, s.reason.to_string()))
            .collect();
        (skipped, call_any(&d, "directory::agents::get", &get_steady))
    };
    // A profile behind a folder that cannot be listed is not said not to exist.
    let refused = answer["err"].as_str().expect("refused");
    assert!(
        refused.starts_with("D410 not_found: agent profile \"steady\" is not served: ")
            && refused.contains("folder cannot be listed"),
        "{refused}"
    );
    chmod("agents", 0o777);
    chmod(".agents/skills/hidden", 0o777);
    for rel in ["agents", ".agents/skills/hidden"] {
        let reason = skipped
            .get(&tree.path(rel).display().to_string())
            .unwrap_or_else(|| panic!("{rel} not listed: {skipped:?}"));
        assert!(
            reason.starts_with("folder cannot be listed: ") && reason.contains("ermission denied"),
            "{rel}: {reason}"
        );
    }
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    let d = tree.open();
    assert!(agent_row(&d, "steady").is_some());
    assert!(d.skipped().expect("skipped").is_empty());
}

// ---------------------------------------------------------------------------------------------
// YAML

/// Nine levels of nine aliases: 9^9 nodes if expanded.
fn billion_laughs() -> String {
    let mut yaml = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..9 {
        let items = vec![format!("*a{}", level - 1); 9].join(", ");
        yaml.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    yaml
}

#[test]
fn yaml_bombs_are_refused_quickly_with_a_reason() {
    let tree = hostile_tree();
    let bomb = billion_laughs();
    let deep = format!("x: {}{}\n", "[".repeat(50_000), "]".repeat(50_000));
    tree.write(
        "skills/system-prompts/bomb.md",
        &format!("---\n{bomb}description: Boom.\n---\nBody.\n"),
    )
    .write(
        "agents/bomb.md",
        &format!("---\n{bomb}name: Boom\n---\nBody.\n"),
    )
    .write(
        "skills/system-prompts/deep.md",
        &format!("---\n{deep}description: Deep.\n---\nBody.\n"),
    )
    .write(
        "agents/deep.md",
        &format!("---\n{deep}name: Deep\n---\nBody.\n"),
    )
    .write(
        "skills/bomb/index.md",
        &format!("---\n{bomb}title: Boom\n---\n# Bomb heading\n\nBody.\n"),
    );
    let started = Instant::now();
    let d = tree.open();
    assert!(started.elapsed() < QUICK, "took {:?}", started.elapsed());
    for rel in ["skills/system-prompts/bomb.md", "agents/bomb.md"] {
        let reason = expect_skip(&d, &tree, rel);
        let why = invalid_yaml(&reason).unwrap_or_else(|| panic!("{rel}: {reason}"));
        assert!(why.contains("too complex"), "{rel}: {reason}");
    }
    for rel in ["skills/system-prompts/deep.md", "agents/deep.md"] {
        let reason = expect_skip(&d, &tree, rel);
        let why = invalid_yaml(&reason).unwrap_or_else(|| panic!("{rel}: {reason}"));
        assert!(
            why.contains("nested too deeply") || why.contains("recursion limit"),
            "{rel}: {reason}"
        );
    }
    assert!(!prompt_names(&d).iter().any(|n| n == "bomb" || n == "deep"));
    assert!(agent_row(&d, "bomb").is_none());
    // Skill frontmatter is lenient (contract 2.4): unusable YAML counts as absent, so the skill
    // is served with its heading for a title.
    let got = get(&d, "bomb").expect("served");
    assert_eq!(got["title"], "Bomb heading");
    assert_healthy(&d);
}

#[test]
fn frontmatter_that_is_not_a_mapping_is_skipped_with_a_reason() {
    let tree = hostile_tree();
    let shapes = [
        ("list", "- a\n- b\n"),
        ("scalar", "just a string\n"),
        ("number", "42\n"),
    ];
    for (name, yaml) in shapes {
        tree.write(
            &format!("skills/system-prompts/{name}.md"),
            &format!("---\n{yaml}---\nBody.\n"),
        )
        .write(
            &format!("agents/{name}.md"),
            &format!("---\n{yaml}---\nBody.\n"),
        )
        .write(
            &format!("skills/{name}/index.md"),
            &format!("---\n{yaml}---\n# Heading {name}\n\nBody.\n"),
        );
    }
    let d = tree.open();
    for (name, _) in shapes {
        for rel in [
            format!("skills/system-prompts/{name}.md"),
            format!("agents/{name}.md"),
        ] {
            let reason = expect_skip(&d, &tree, &rel);
            let why = invalid_yaml(&reason).unwrap_or_else(|| panic!("{rel}: {reason}"));
            assert!(why.contains("mapping"), "{rel}: {reason}");
        }
        assert!(agent_row(&d, name).is_none());
        assert!(!prompt_names(&d).contains(&name.to_string()));
        let got = get(&d, name).expect("served");
        assert_eq!(got["title"], format!("Heading {name}"));
    }
    assert_healthy(&d);
}

// ---------------------------------------------------------------------------------------------
// Agent inheritance

#[test]
fn extends_loops_and_long_chains_carry_d415() {
    let tree = hostile_tree();
    let agent = |id: &str, parent: &str| {
        tree.write(
            &format!("agents/{id}.md"),
            &format!("---\nname: {id}\nextends: {parent}\n---\nBody of {id}.\n"),
        );
    };
    agent("l1", "l2");
    agent("l2", "l3");
    agent("l3", "l1");
    // A chain of 200 profiles: c0 → c1 → … → c199.
    for i in 0..199 {
        agent(&format!("c{i}"), &format!("c{}", i + 1));
    }
    tree.write("agents/c199.md", "---\nname: c199\n---\nEnd.\n");
    // Eight hops is fine (ok8 → c192 → … → c199), nine are not.
    tree.write("agents/ok8.md", "---\nname: ok8\nextends: c192\n---\nOk.\n");
    let started = Instant::now();
    let d = tree.open();
    let list = common::call(&d, ReadFunction::AgentsList, json!({}));
    assert!(started.elapsed() < QUICK, "took {:?}", started.elapsed());
    let error_of = |id: &str| -> Option<String> {
        list["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed"))
            .get("inheritance_error")
            .and_then(|e| e.as_str())
            .map(str::to_string)
    };
    assert_eq!(
        error_of("l1").expect("loop"),
        "D415 invalid_input: agent profile \"l1\" has an extends loop: l1 → l2 → l3 → l1. \
         Next: call directory::agents::list to browse agent profile ids."
    );
    let deep = error_of("c0").expect("too deep");
    assert!(
        deep.starts_with(
            "D415 invalid_input: agent profile \"c0\" extends chain is deeper than 8 levels: c0 → c1"
        ),
        "{deep}"
    );
    assert_eq!(error_of("c191"), None);
    assert_eq!(error_of("ok8"), None);
    assert!(error_of("c190").is_some_and(|e| e.contains("deeper than 8 levels")));
    let got = common::call(&d, ReadFunction::AgentsGet, json!({"id": "l2"}));
    assert!(
        got["inheritance_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("D415 ")),
        "{got}"
    );
    assert_healthy(&d);
}

// ---------------------------------------------------------------------------------------------
// The watcher cannot watch (the inotify watch limit, injected)

#[test]
fn a_watch_limit_leaves_the_worker_serving_through_the_safety_net() {
    let tree = hostile_tree();
    let d = Arc::new(tree.open());
    let mut settings = d.settings();
    settings.safety_net_interval_ms = 200;
    d.apply_settings(settings).expect("a tunable setting");
    let options = WatchOptions {
        fail_roots: vec![Root::Skills, Root::LocalSkills, Root::Agents],
        ..WatchOptions::default()
    };
    let watcher = Watcher::start(d.clone(), options);
    let status = watcher.status();
    assert!(status.degraded, "{status:?}");
    let problems = &status.problems;
    for key in ["skills_folder", "agents_folder"] {
        assert!(
            problems
                .iter()
                .any(|p| p.contains(key) && p.contains("injected failure")),
            "{key}: {status:?}"
        );
    }
    assert_healthy(&d);

    tree.write(
        "skills/healthy/late.md",
        "# Late\n\nSeen by the safety net.\n",
    )
    .write("agents/late.md", "---\nname: Late\n---\nLate.\n");
    wait_for(
        "the safety net picks up the new files",
        Duration::from_secs(5),
        || get(&d, "healthy/late").is_ok() && agent_row(&d, "late").is_some(),
    );
    let status = watcher.status();
    assert!(status.degraded, "{status:?}");
    assert!(status.last_safety_net.is_some(), "{status:?}");
    assert_eq!(
        get(&d, "healthy/late").expect("served")["raw"],
        "# Late\n\nSeen by the safety net.\n"
    );
    assert_healthy(&d);
    watcher.stop();
}

// ---------------------------------------------------------------------------------------------
// Writes with hostile ids

#[test]
fn writes_with_hostile_ids_are_refused_and_write_nothing() {
    let tree = hostile_tree();
    let d = tree.open();
    let before = snapshot(tree.base());
    let long = "a".repeat(5000);
    let long_segment = format!("ns/{}", "b".repeat(65));
    let ids = [
        "../x",
        "../../outside/x",
        "ns/../../x",
        "..",
        ".",
        "/etc/passwd",
        "/tmp/x",
        "a\0b",
        "ns/a\0b",
        "a\\b",
        "..\\x",
        "C:\\x",
        "~/x",
        "ns//x",
        "ns/",
        "/ns",
        "Upper",
        "ns/has space",
        "ns/x.md.tmp",
        "%2e%2e/x",
        "",
        long.as_str(),
        long_segment.as_str(),
        "file:///etc/passwd",
        "ns::fn",
    ];
    let content = "---\nname: x\ndescription: x\n---\n# X\n\nx\n";
    for id in ids {
        for (function, request) in [
            (
                WriteFunction::SkillsCreate,
                json!({"id": id, "content": content}),
            ),
            (
                WriteFunction::SkillsUpdate,
                json!({"id": id, "content": content}),
            ),
            (WriteFunction::SkillsDelete, json!({"id": id})),
            (
                WriteFunction::SystemPromptsCreate,
                json!({"name": id, "content": content}),
            ),
            (
                WriteFunction::SystemPromptsUpdate,
                json!({"name": id, "content": content}),
            ),
            (WriteFunction::SystemPromptsDelete, json!({"name": id})),
            (
                WriteFunction::AgentsCreate,
                json!({"id": id, "content": content}),
            ),
            (
                WriteFunction::AgentsUpdate,
                json!({"id": id, "content": content}),
            ),
            (WriteFunction::AgentsDelete, json!({"id": id})),
        ] {
            let result = d.write(function, &request, None);
            let err = match result {
                Ok(v) => panic!("{} {id:?} succeeded: {v}", function.id()),
                Err(e) => e.to_string(),
            };
            assert!(!err.is_empty(), "{} {id:?}", function.id());
            assert!(
                !err.contains("os error"),
                "{} {id:?} reached the disk: {err}",
                function.id()
            );
        }
    }
    assert_eq!(
        snapshot(tree.base()),
        before,
        "a hostile write changed the disk"
    );
    assert_healthy(&d);
}

/// A tree of thousands of files that are not served (a `node_modules` folder of READMEs) keeps
/// `index::status` small: it lists the first 1,000 by path and counts them all; `check`
/// still lists every one.
#[test]
fn status_lists_the_first_thousand_skipped_files_and_counts_them_all() {
    let tree = Tree::new();
    tree.write("skills/deploy.md", "# Deploy\n\nShip it.\n");
    for i in 0..1005 {
        tree.write(
            &format!("skills/node_modules/pkg {i:04}/README.md"),
            "# pkg\n\nreadme\n",
        );
    }
    let d = tree.open();
    let status = d.status().expect("status");
    let listed = status["skipped"].as_array().expect("skipped");
    assert_eq!(listed.len(), 1000);
    assert_eq!(status["skipped_total"], 1005);
    assert!(
        listed[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("pkg 0000/README.md")
    );
    assert_eq!(d.skipped().expect("check").len(), 1005);
}

/// Makes `depth` folders named `segment`, each inside the last, under `base`, and a skill in the
/// deepest, through directory descriptors: past the system's path limit no whole path works.
fn nest(base: &Path, segment: &str, depth: usize) {
    use std::ffi::CString;
    let open = |at: libc::c_int, name: &CString| {
        // SAFETY: a valid descriptor (or AT_FDCWD) and a NUL-terminated name.
        let fd = unsafe { libc::openat(at, name.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY) };
        assert!(fd >= 0, "openat: {}", std::io::Error::last_os_error());
        fd
    };
    let mut fd = open(
        libc::AT_FDCWD,
        &CString::new(base.as_os_str().as_bytes()).unwrap(),
    );
    let segment = CString::new(segment).unwrap();
    for _ in 0..depth {
        // SAFETY: as above; each descriptor is closed once the next is open.
        unsafe {
            assert_eq!(libc::mkdirat(fd, segment.as_ptr(), 0o755), 0);
            let next = open(fd, &segment);
            libc::close(fd);
            fd = next;
        }
    }
    let leaf = CString::new("leaf.md").unwrap();
    let body = b"# Deep\n\nbody\n";
    // SAFETY: as above; the buffer outlives the write.
    unsafe {
        let file = libc::openat(fd, leaf.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
        assert!(file >= 0);
        assert_eq!(
            libc::write(file, body.as_ptr().cast(), body.len()),
            body.len() as isize
        );
        libc::close(file);
        libc::close(fd);
    }
}

/// A folder nested so deep that its path is longer than the system takes is listed by `check`
/// with the reason, instead of vanishing with everything under it.
#[test]
fn a_folder_past_the_path_limit_is_listed_by_check() {
    let tree = Tree::new();
    tree.write("skills/deploy.md", "# Deploy\n\nShip it.\n");
    tree.mkdir("skills/deep");
    nest(&tree.path("skills/deep"), &"t".repeat(64), 70);
    let d = tree.open();
    let too_long: Vec<_> = d
        .skipped()
        .expect("check")
        .into_iter()
        .filter(|s| {
            s.reason
                .to_string()
                .contains("longer than the system takes")
        })
        .collect();
    assert_eq!(too_long.len(), 1, "{too_long:?}");
    assert!(
        too_long[0]
            .reason
            .to_string()
            .starts_with("folder cannot be listed: ")
    );
    assert!(get(&d, "deploy").is_ok());
}
