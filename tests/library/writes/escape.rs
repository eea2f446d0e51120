//! Writes that cannot escape a root (issue 33, item 5): a folder on the way swapped for a link
//! to outside while creates run never lets a file land outside the root, never leaves a
//! temporary file, and every answer says what happened on disk. And what `check` lists that it
//! used to omit: FIFOs, folder-link loops and temporary files left behind.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// Creates the folder-swap race runs at least (the attack used 800), the swaps it
/// waits for at least, and the creates that got through it waits for.
const RACE_CREATES: usize = 600;
const RACE_SWAPS: usize = 1_000;
const RACE_OK: usize = 100;

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("no NUL in a temp path")
}

/// Exchanges two names atomically (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &CString, b: &CString) -> bool {
    // SAFETY: two NUL-terminated paths alive for the call; AT_FDCWD needs no descriptor.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    ret == 0
}

/// Every regular file under `dir`, links not followed.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let t = entry.file_type().expect("file type");
        if t.is_dir() {
            out.extend(files_under(&entry.path()));
        } else if t.is_file() {
            out.push(entry.path());
        }
    }
    out
}

#[test]
fn folder_swapped_for_a_link_during_creates_never_lets_a_write_escape() {
    let tree = Tree::new();
    tree.mkdir("skills/iii")
        .mkdir("agents")
        .mkdir("outside")
        .write("skills/ns/index.md", "# Ns\n\nThe namespace.\n");
    let outside = tree.path("outside");
    // The link the attacker swaps in, kept inside the root between swaps.
    let link = tree.path("skills/zz-link");
    symlink(&outside, &link).expect("link");
    let directory = Arc::new(tree.open());
    let (ns, link) = (c_path(&tree.path("skills/ns")), c_path(&link));

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        std::thread::spawn(move || {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                assert!(exchange(&ns, &link), "renameat2(RENAME_EXCHANGE)");
                n += 1;
                swaps.store(n, Ordering::Relaxed);
                // Hold each state a little while, so creates meet both and every moment between.
                std::thread::sleep(Duration::from_micros(20 + (n as u64 * 97) % 500));
            }
            // Leave `ns` as the real folder.
            if n % 2 == 1 {
                assert!(exchange(&ns, &link));
            }
        })
    };

    let mut answered_ok = Vec::new();
    let mut failed = Vec::new();
    // At least RACE_CREATES creates, and on until the race has had its chances: enough swaps
    // and enough creates that got through (a create that gets through is slower than one that
    // is refused). Bounded in time.
    let started = std::time::Instant::now();
    let mut i = 0;
    while i < RACE_CREATES
        || ((swaps.load(Ordering::Relaxed) < RACE_SWAPS || answered_ok.len() < RACE_OK)
            && started.elapsed() < Duration::from_secs(120))
    {
        i += 1;
        let id = format!("ns/x{i}");
        let request = json!({"id": id, "content": format!("# X{i}\n\nCreated under a race.\n")});
        match directory.write(WriteFunction::SkillsCreate, &request, None) {
            Ok(_) => answered_ok.push(id),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("symbolic link") || text.contains("already exists"),
                    "{id}: unexpected failure: {text}"
                );
                if failed.len() < 5 {
                    eprintln!("{id}: {text}");
                }
                failed.push(id);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    let swaps = swaps.load(Ordering::Relaxed);
    eprintln!(
        "{i} creates under {swaps} swaps: {} answered OK, {} failed",
        answered_ok.len(),
        failed.len()
    );
    assert!(
        fs::symlink_metadata(tree.path("skills/ns"))
            .expect("ns")
            .is_dir(),
        "ns is the real folder again"
    );
    assert!(i >= RACE_CREATES);
    assert!(swaps >= 100, "the swapper ran ({swaps} swaps)");
    assert!(!answered_ok.is_empty(), "some creates got through");

    let escaped = files_under(&outside);
    assert_eq!(escaped, Vec::<PathBuf>::new(), "files outside the root");
    let temps: Vec<PathBuf> = files_under(tree.base())
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert_eq!(temps, Vec::<PathBuf>::new(), "temporary files left");
    for id in &answered_ok {
        assert!(
            tree.path(&format!("skills/{id}.md")).is_file(),
            "{id} answered OK but is not in the root"
        );
    }
    for id in &failed {
        assert!(
            !tree.path(&format!("skills/{id}.md")).exists(),
            "{id} failed but exists"
        );
    }
    // Nothing else appeared anywhere: every file in the root is the namespace's or a create's.
    let created: BTreeSet<PathBuf> = answered_ok
        .iter()
        .map(|id| tree.path(&format!("skills/{id}.md")))
        .chain([tree.path("skills/ns/index.md")])
        .collect();
    let found: BTreeSet<PathBuf> = files_under(&tree.path("skills")).into_iter().collect();
    assert_eq!(found, created);
    // And the index agrees with the disk once it looks again.
    directory.reconcile().expect("reconcile");
    assert_matches_fresh(&tree, &directory);
}

fn mkfifo(path: &Path) {
    // SAFETY: a NUL-terminated path alive for the call.
    assert_eq!(unsafe { libc::mkfifo(c_path(path).as_ptr(), 0o644) }, 0);
}

fn skip_reason(directory: &Directory, path: &Path) -> Option<SkipReason> {
    let path = path.display().to_string();
    directory
        .skipped()
        .expect("skipped")
        .into_iter()
        .find(|s| s.path == path)
        .map(|s| s.reason)
}

#[test]
fn check_lists_fifos_and_never_opens_them() {
    let tree = Tree::new();
    tree.mkdir("skills/iii")
        .mkdir("agents")
        .mkdir(".agents/skills/piped")
        .write("skills/ns/index.md", "# Ns\n\nServed.\n");
    mkfifo(&tree.path("skills/ns/pipe.md"));
    mkfifo(&tree.path("agents/pipe.md"));
    mkfifo(&tree.path(".agents/skills/piped/SKILL.md"));
    // A walk that opened one would block here forever; the test harness would time out.
    let directory = tree.open();
    for rel in [
        "skills/ns/pipe.md",
        "agents/pipe.md",
        ".agents/skills/piped/SKILL.md",
    ] {
        let reason = skip_reason(&directory, &tree.path(rel))
            .unwrap_or_else(|| panic!("{rel} not listed: {:?}", directory.skipped()));
        assert_eq!(reason, SkipReason::NotRegular(Special::Fifo), "{rel}");
    }
    // A scoped reconcile (a watcher burst) sees the same, and still serves the rest.
    directory
        .reconcile_paths(vec![tree.path("skills/ns/pipe.md"), tree.path("agents")])
        .expect("scoped");
    assert!(skip_reason(&directory, &tree.path("skills/ns/pipe.md")).is_some());
    assert!(skip_reason(&directory, &tree.path("agents/pipe.md")).is_some());
    let ids = common::skill_ids(&directory);
    assert!(ids.contains(&"ns".to_string()), "{ids:?}");
    assert_matches_fresh(&tree, &directory);
}

#[test]
fn check_lists_folder_link_loops() {
    let tree = Tree::new();
    tree.mkdir("skills/iii")
        .mkdir("agents")
        .write("skills/loop/index.md", "# Loop\n\nServed.\n");
    symlink("..", tree.path("skills/loop/up")).expect("link");
    symlink(tree.path("skills"), tree.path("skills/loop/root")).expect("link");
    symlink("b", tree.path("skills/loop/a")).expect("link");
    symlink("a", tree.path("skills/loop/b")).expect("link");
    let directory = tree.open();
    for rel in [
        "skills/loop/up",
        "skills/loop/root",
        "skills/loop/a",
        "skills/loop/b",
    ] {
        let reason = skip_reason(&directory, &tree.path(rel))
            .unwrap_or_else(|| panic!("{rel} not listed: {:?}", directory.skipped()));
        assert!(
            matches!(
                reason,
                SkipReason::LinkLoops(_) | SkipReason::LinkToAncestor
            ),
            "{rel}: {reason}"
        );
    }
    directory
        .reconcile_paths(vec![tree.path("skills/loop/up"), tree.path("skills/loop")])
        .expect("scoped");
    assert!(skip_reason(&directory, &tree.path("skills/loop/up")).is_some());
    assert_matches_fresh(&tree, &directory);
}

#[test]
fn check_lists_temporary_files_left_and_the_start_sweep_removes_dead_writers_ones() {
    let tree = Tree::new();
    tree.mkdir("skills/iii")
        .mkdir("agents")
        .write("skills/ns/index.md", "# Ns\n\nServed.\n");
    // A process that ran and is gone.
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let dead = child.id();
    child.wait().expect("wait");
    let gone = tree.path(&format!("skills/ns/a.md.{dead}-0.tmp"));
    let gone_agent = tree.path(&format!("agents/b.md.{dead}-3.tmp"));
    // A live process's fresh temporary file (pid 1 is always alive): its writer may still
    // rename it, so it stays, and `check` lists it.
    let live = tree.path("skills/ns/c.md.1-7.tmp");
    let live_agent = tree.path("agents/d.md.1-8.tmp");
    for path in [&gone, &gone_agent, &live, &live_agent] {
        fs::write(path, "partial").expect("write");
    }
    let directory = tree.open();
    assert!(
        !gone.exists() && !gone_agent.exists(),
        "dead writers' temps swept at start"
    );
    for path in [&live, &live_agent] {
        assert!(path.exists());
        let reason = skip_reason(&directory, path)
            .unwrap_or_else(|| panic!("{} not listed: {:?}", path.display(), directory.skipped()));
        assert_eq!(reason, SkipReason::UnfinishedWrite { pid: 1 });
    }
    for path in [&gone, &gone_agent] {
        assert_eq!(skip_reason(&directory, path), None);
    }
    // Once removed, the next look drops it from the list.
    fs::remove_file(&live).expect("remove");
    directory
        .reconcile_paths(vec![tree.path("skills/ns")])
        .expect("scoped");
    assert_eq!(skip_reason(&directory, &live), None);
    assert_matches_fresh(&tree, &directory);
}

#[test]
fn the_sweep_removes_only_the_workers_own_temporaries_and_only_where_it_writes() {
    let tree = Tree::new();
    tree.mkdir("skills/iii")
        .mkdir("agents")
        .write("skills/ns/index.md", "# Ns\n\nServed.\n")
        .write(".agents/skills/pdf/SKILL.md", "# Pdf\n\nServed.\n");
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let dead = child.id();
    child.wait().expect("wait");
    // A user's files of the temporaries' shape that the worker never writes (no pid 2024 runs
    // here, and an hour-old file is stale whoever named it), and a temporary of ours in the
    // read-only agents skills root, which the walk reaches through a link from skills_folder.
    symlink("../../.agents/skills/pdf", tree.path("skills/ns/ro")).expect("link");
    let users = [
        tree.path("skills/ns/data/sales.2024-06.tmp"),
        tree.path("agents/report.2024-06.tmp"),
        tree.path(&format!("skills/ns/run.sh.{dead}-0.tmp")),
        tree.path(&format!(".agents/skills/pdf/more.md.{dead}-0.tmp")),
    ];
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(7_200);
    for path in &users {
        fs::create_dir_all(path.parent().unwrap()).expect("mkdir");
        fs::write(path, "precious").expect("write");
        let file = fs::File::options().write(true).open(path).expect("open");
        file.set_modified(an_hour_ago).expect("age");
    }
    let ours = tree.path(&format!("skills/ns/a.md.{dead}-0.tmp"));
    fs::write(&ours, "partial").expect("write");
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    assert!(!ours.exists(), "a dead writer's temporary is swept");
    for path in &users {
        assert_eq!(
            fs::read_to_string(path).ok().as_deref(),
            Some("precious"),
            "{} kept",
            path.display()
        );
    }
    assert_matches_fresh(&tree, &directory);
}
