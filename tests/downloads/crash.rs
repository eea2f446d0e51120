//! SIGKILL during downloads: a child process (this test binary, re-executed) downloads bundles
//! of the worker `dl` from a loopback registry in a loop, each an overlapping random subset of
//! a pool of skill, payload and agent files with contents naming the bundle, and says BEGIN and
//! ACK around each. The parent kills it at a random moment, checks that no staging folder is
//! ever seen by the walk (so never listed), restarts from the same tree and index (the open
//! finishes or undoes the interrupted landing), and checks that every acknowledged bundle is on
//! disk, that the one in flight landed whole or not at all (never a mix), that no staging folder
//! is left, and that the index equals a fresh one.
//!
//! `DOWNLOAD_CRASH_CYCLES` (default 30) sets the number of kills.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use iii_directory::Directory;
use iii_directory::Roots;
use iii_directory::config::Config;
use iii_directory::download::{BundlesFunction, DownloadFunction, status};
use iii_directory::registry::{Endpoint, Registry};
use serde_json::json;
use test_support::generate::Rng;

use crate::common;
use crate::common::child;
use test_support::loopback::registry::FakeRegistry;

const CHILD: &str = "downloads_crash_child";
const TREE_VAR: &str = "III_DIRECTORY_DOWNLOAD_CRASH_TREE";
const SEED_VAR: &str = "III_DIRECTORY_DOWNLOAD_CRASH_SEED";
/// `apply`: once the bundle is locked, the child lands each version through `plan-update` and
/// `apply` (which also removes the files the version dropped) instead of a download.
const MODE_VAR: &str = "III_DIRECTORY_DOWNLOAD_CRASH_MODE";
const WORKER: &str = "dl";
const PHASE_WAIT: Duration = Duration::from_secs(30);

/// Every file a bundle may hold, as `(path in the bundle, path under the base folder)`.
fn pool() -> Vec<(String, String)> {
    let mut pool = Vec::new();
    for i in 0..10 {
        let rel = if i % 3 == 0 {
            format!("sub/f{i}.md")
        } else {
            format!("f{i}.md")
        };
        pool.push((rel.clone(), format!("skills/{WORKER}/{rel}")));
    }
    for i in 0..3 {
        pool.push((
            format!("scripts/s{i}.sh"),
            format!("skills/{WORKER}/scripts/s{i}.sh"),
        ));
        pool.push((format!("agents/dl-a{i}.md"), format!("agents/dl-a{i}.md")));
    }
    pool
}

/// The bundle named `token`: a subset of the pool (never empty), each file naming the token.
fn bundle_for(token: &str) -> Vec<(String, String, String)> {
    let seed = blake3::hash(token.as_bytes());
    let mut rng = Rng::new(u64::from_le_bytes(
        seed.as_bytes()[..8].try_into().expect("8 bytes"),
    ));
    let pool = pool();
    let mut chosen = Vec::new();
    for (bundle_path, base_path) in &pool {
        if rng.chance(50) {
            let text = content(token, base_path, rng.below(20_000));
            chosen.push((bundle_path.clone(), base_path.clone(), text));
        }
    }
    if chosen.is_empty() {
        let (bundle_path, base_path) = &pool[0];
        chosen.push((
            bundle_path.clone(),
            base_path.clone(),
            content(token, base_path, 100),
        ));
    }
    chosen
}

fn content(token: &str, path: &str, padding: usize) -> String {
    let mut text = format!("---\nname: N {token}\n---\n# token {token}\n\npath {path}\n");
    text.push_str(&"padding line.\n".repeat(padding / 14));
    text
}

fn token_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("# token "))
        .map(str::to_string)
}

#[test]
#[ignore = "run by `downloads_killed_at_any_moment_land_whole_or_not_at_all` as a child process"]
fn downloads_crash_child() {
    let Ok(base) = std::env::var(TREE_VAR) else {
        return;
    };
    let seed: u64 = std::env::var(SEED_VAR)
        .expect("seed")
        .parse()
        .expect("seed");
    let apply_mode = std::env::var(MODE_VAR).is_ok_and(|m| m == "apply");
    let server = FakeRegistry::start();
    let mut config = Config::for_root(Path::new(&base));
    config.settings.registry_url = server.url();
    let directory = std::sync::Arc::new(Directory::open(config.clone()).expect("open"));
    child::say("OPENED");
    directory.reconcile().expect("reconcile");
    child::say("READY");
    let registry = Registry::fixed(Endpoint::from_settings(&config.settings));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for n in 0.. {
        let token = format!("{seed}-{n}");
        let files = bundle_for(&token);
        let served: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, _, c)| (p.as_str(), c.as_str()))
            .collect();
        server.bundle(WORKER, &served);
        let locked = iii_directory::download::lock::read(&config.paths.bundles_lock)
            .is_ok_and(|l| l.bundles.contains_key(WORKER));
        let planned = (apply_mode && locked).then(|| {
            runtime
                .block_on(iii_directory::download::plan::plan_update(
                    &directory,
                    &registry,
                    &json!({ "namespace": WORKER }),
                ))
                .expect("plan")
        });
        child::say(&format!("BEGIN {token}"));
        let started = std::time::Instant::now();
        let answer = match planned {
            Some(plan) => runtime.block_on(iii_directory::download::plan::apply(
                &directory,
                &registry,
                &json!({ "plan_id": plan["plan_id"] }),
            )),
            None => runtime.block_on(iii_directory::download::run(
                &directory,
                &registry,
                DownloadFunction::FromRegistry,
                &json!({ "worker": WORKER }),
                &|_| {},
            )),
        };
        match answer {
            Ok(_) => child::say(&format!("ACK {token} {}", started.elapsed().as_micros())),
            Err(e) => child::say(&format!("ERR {token} {e}")),
        }
    }
}

/// The bundles lock after a restart agrees with the files: its entry lists exactly the last
/// bundle that landed, each file with the sha256 it has on disk (or there is no entry, when
/// none landed).
fn lock_agrees(base: &Path, last: Option<&str>, cycle: usize) {
    use iii_directory::download::lock::{self, Route};
    let locked = lock::read(&base.join("skills/iii-bundles.lock.json")).expect("the lock reads");
    let Some(token) = last else {
        assert!(locked.bundles.is_empty(), "cycle {cycle}: {locked:?}");
        return;
    };
    let entry = locked.bundles.get(WORKER).expect("the bundle's entry");
    let mut listed: Vec<String> = entry
        .files
        .iter()
        .map(|f| match f.route {
            Route::Agents => format!("agents/{}", f.path),
            _ => format!("skills/{}", f.path),
        })
        .collect();
    listed.sort();
    let mut expected: Vec<String> = bundle_for(token).into_iter().map(|(_, b, _)| b).collect();
    expected.sort();
    assert_eq!(
        listed, expected,
        "cycle {cycle}: the lock names another bundle than {token}"
    );
    for (file, rel) in entry.files.iter().zip(&listed_in_order(entry)) {
        let on_disk = lock::file_sha256(&base.join(rel));
        assert_eq!(
            on_disk,
            Some((file.size, file.sha256.clone())),
            "cycle {cycle}: {rel} differs from the lock"
        );
    }
}

fn listed_in_order(entry: &iii_directory::download::lock::Entry) -> Vec<String> {
    use iii_directory::download::lock::Route;
    entry
        .files
        .iter()
        .map(|f| match f.route {
            Route::Agents => format!("agents/{}", f.path),
            _ => format!("skills/{}", f.path),
        })
        .collect()
}

/// What each pool file holds: the token of the bundle that wrote it, or `None`.
type Model = BTreeMap<String, Option<String>>;

fn disk(base: &Path) -> Model {
    pool()
        .into_iter()
        .map(|(_, rel)| {
            let text = std::fs::read_to_string(base.join(&rel)).ok();
            let token = text
                .as_deref()
                .map(|t| token_of(t).unwrap_or_else(|| format!("TORN {rel}")));
            (rel, token)
        })
        .collect()
}

/// The tree after bundle `token` lands; an apply over the last one (`previous`) also removes
/// the files that one had and this one drops (nobody edited them).
fn apply(model: &Model, previous: Option<&str>, token: &str) -> Model {
    let mut next = model.clone();
    for (_, rel, _) in previous.map(bundle_for).unwrap_or_default() {
        next.insert(rel, None);
    }
    for (_, rel, _) in bundle_for(token) {
        next.insert(rel, Some(token.to_string()));
    }
    next
}

fn staging_left(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(".iii-staging-")
        {
            found.push(path);
        } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(staging_left(&path));
        }
    }
    found
}

#[test]
fn downloads_killed_at_any_moment_land_whole_or_not_at_all() {
    killed_at_any_moment(Mode::Download);
}

/// The same kills during `apply` of update plans, which also remove files.
#[test]
fn applies_killed_at_any_moment_land_whole_or_not_at_all() {
    killed_at_any_moment(Mode::Apply);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Download,
    Apply,
}

fn killed_at_any_moment(mode: Mode) {
    // A download keeps the files a version dropped (the contract keeps siblings); an apply
    // removes them.
    let dropping = |last: Option<&str>| -> Option<String> {
        (mode == Mode::Apply).then_some(last?.to_string())
    };
    let cycles: usize = std::env::var("DOWNLOAD_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let tree = common::Tree::new();
    tree.mkdir("skills/iii").mkdir("agents");
    tree.write(
        "skills/dl/mine.md",
        "# token mine\n\nA file no bundle has.\n",
    );
    let base = tree.base().to_path_buf();
    drop(tree.open());
    let mut model = disk(&base);
    // The token of the last bundle that landed: the lock's entry must describe it.
    let mut last: Option<String> = None;
    let mut rng = Rng::new(0x0D01_70AD);
    let (mut landed, mut not_landed, mut acknowledged) = (0, 0, 0);
    let (mut staging_seen, mut committed_seen) = (0, 0);
    // The longest download seen, in microseconds: kills are spread over that long.
    let mut longest: u64 = 20_000;
    for cycle in 0..cycles {
        let mut child = child::command(&child::test_path(module_path!(), CHILD))
            .env(TREE_VAR, &base)
            .env(SEED_VAR, (cycle + 1).to_string())
            .env(
                MODE_VAR,
                if mode == Mode::Apply {
                    "apply"
                } else {
                    "download"
                },
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        let reader = child::read_lines(stdout, move |line| {
            if line.ends_with("READY") || line.contains("ACK ") {
                let _ = tx.send(line.to_string());
            }
        });
        let wait = |what: &str| loop {
            match rx.recv_timeout(PHASE_WAIT) {
                Ok(line) if line.contains(what) => break,
                Ok(_) => {}
                Err(_) => panic!("cycle {cycle}: the child never said {what}"),
            }
        };
        wait("READY");
        for _ in 0..rng.below(3) {
            wait("ACK ");
        }
        std::thread::sleep(Duration::from_micros(rng.below(longest as usize) as u64));
        child.kill().expect("kill");
        child.wait().expect("reap");
        let lines = reader.join().expect("reader");

        let mut in_flight = None;
        for line in &lines {
            if let Some(token) = line.strip_prefix("BEGIN ") {
                in_flight = Some(token.to_string());
            } else if let Some(ack) = line.strip_prefix("ACK ") {
                let (token, micros) = ack.split_once(' ').expect("ACK token micros");
                longest = longest.max(micros.parse().expect("micros"));
                assert_eq!(in_flight.as_deref(), Some(token), "cycle {cycle}");
                model = apply(&model, dropping(last.as_deref()).as_deref(), token);
                last = Some(token.to_string());
                acknowledged += 1;
                in_flight = None;
            } else if line.starts_with("ERR ") {
                panic!("cycle {cycle}: a download failed: {line}");
            }
        }

        // Whatever the kill left, the walk never sees a staging folder's files.
        let left = staging_left(&base);
        if !left.is_empty() {
            staging_seen += 1;
            committed_seen += usize::from(left.iter().any(|s| s.join("commit.json").exists()));
            let config = Config::for_root(&base);
            let found = iii_directory::testing::walk(&Roots::from_paths(&config.paths));
            let leaked: Vec<_> = found
                .files
                .keys()
                .chain(found.top_dirs.iter())
                .filter(|(_, rel)| rel.contains(".iii-staging-"))
                .collect();
            assert!(leaked.is_empty(), "cycle {cycle}: the walk saw {leaked:?}");
        }

        // Asked first (as `iii-directory bundles verify` after a crash is), the bundles'
        // status finishes or undoes the landing in flight itself: no file of it reads as
        // edited here, and no staging folder is left.
        if !left.is_empty() {
            let config = Config::for_root(&base);
            let verified =
                status::answer(&config.paths, BundlesFunction::Verify, &json!({})).expect("verify");
            assert!(staging_left(&base).is_empty(), "cycle {cycle}: {verified}");
            for bundle in verified["bundles"].as_array().expect("bundles") {
                assert_eq!(bundle["modified"], json!([]), "cycle {cycle}: {bundle}");
            }
        }

        // Restart: the open finishes or undoes the landing in flight (if the status has not).
        let directory = Directory::open(Config::for_root(&base)).expect("reopen");
        directory.reconcile().expect("reconcile");
        let after = disk(&base);
        let whole = in_flight
            .as_ref()
            .map(|token| apply(&model, dropping(last.as_deref()).as_deref(), token));
        if after == model {
            not_landed += usize::from(in_flight.is_some());
        } else if Some(&after) == whole.as_ref() {
            landed += 1;
            model = after.clone();
            last = in_flight.clone();
        } else {
            let differing: Vec<_> = after
                .iter()
                .filter(|(rel, token)| model.get(*rel) != Some(token))
                .collect();
            panic!(
                "cycle {cycle}: a mix after the kill of {in_flight:?}: {differing:?} differ from the last acknowledged state"
            );
        }
        lock_agrees(&base, last.as_deref(), cycle);
        assert_eq!(
            std::fs::read_to_string(base.join("skills/dl/mine.md")).expect("sibling"),
            "# token mine\n\nA file no bundle has.\n"
        );
        let left = staging_left(&base);
        assert!(
            left.is_empty(),
            "cycle {cycle}: staging left after the restart: {left:?}"
        );
        let ids = common::skill_ids(&directory);
        assert!(
            ids.iter().all(|id| !id.contains("staging")),
            "cycle {cycle}: {ids:?}"
        );
        let skipped = directory.skipped().expect("skipped");
        assert!(
            skipped.iter().all(|s| !s.path.contains(".iii-staging-")),
            "cycle {cycle}: {skipped:?}"
        );
        let ours = common::dump(&directory);
        drop(directory);
        let fresh = common::fresh_index(&Config::for_root(&base));
        assert!(
            common::dump(&fresh) == ours,
            "cycle {cycle}: index != fresh index"
        );
    }
    println!(
        "{mode:?} crash: {cycles} kills; {acknowledged} downloads acknowledged (longest {longest} µs); in flight at the kill: {landed} landed whole, {not_landed} not at all; kills that left a staging folder: {staging_seen}, of which committed (rolled forward at the restart): {committed_seen}"
    );
    assert!(acknowledged > 0, "no download ever finished");
}
