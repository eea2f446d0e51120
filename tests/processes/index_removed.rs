//! The folder the index lives in removed under a running worker (a `git clean -fdx` of a
//! repository whose ignored `data/` holds it): the watcher hears its sync folder go, and at
//! once builds the index again at its path, with the worker's holder note and the sync folder
//! beside it, so the commands beside the worker follow it again instead of building an index
//! of their own, and wait on it for fresh reads. The index file removed alone is built again
//! too, with its texts store. The child declares itself a worker, which a process may do
//! once, so it runs alone (`common::child`).

use test_support::common::{Tree, child};

use std::process::Stdio;

const CHILD: &str = "index_removed_child";
const TREE_VAR: &str = "III_DIRECTORY_INDEX_REMOVED_TREE";
const MODE_VAR: &str = "III_DIRECTORY_INDEX_REMOVED_MODE";

#[test]
#[ignore = "run by the index-removal test as a child process"]
fn index_removed_child() {
    let Ok(base) = std::env::var(TREE_VAR) else {
        return;
    };
    iii_directory::declare_process_role(iii_directory::WORKER_ROLE);
    let config = iii_directory::config::Config::for_root(std::path::Path::new(&base));
    let index = config.paths.index_path.clone();
    let sync = index.with_file_name("index.redb.sync");
    let directory = std::sync::Arc::new(iii_directory::Directory::open(config).expect("open"));
    directory.reconcile().expect("reconcile");
    let watcher =
        iii_directory::Watcher::start(directory.clone(), iii_directory::WatchOptions::default());
    assert!(sync.is_dir(), "the watcher claims the sync folder");
    match std::env::var(MODE_VAR).as_deref() {
        Ok("file") => {
            file_removed(&directory, &base, &index);
            watcher.stop();
            return;
        }
        Ok("texts") => {
            let texts = index.with_file_name("index.redb.texts");
            file_removed(&directory, &base, &texts);
            watcher.stop();
            return;
        }
        _ => {}
    }
    std::fs::remove_dir_all(index.parent().unwrap()).expect("remove the index's folder");
    // No read, no change in the folders: the watcher notices on its own.
    let started = std::time::Instant::now();
    while !(index.is_file() && sync.is_dir()) && started.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let holder = iii_directory::read_index_holder(&index).map(|h| (h.pid, h.role));
    child::say(&format!(
        "RESULT {} {} {:?}",
        index.is_file(),
        sync.is_dir(),
        holder == Some((std::process::id(), iii_directory::WORKER_ROLE.to_string()))
    ));
    watcher.stop();
}

/// In the child: one of the index's two files is removed (the other stays, held by this
/// writer); the next read builds both again and serves what is on disk, and writes land.
fn file_removed(directory: &iii_directory::Directory, base: &str, file: &std::path::Path) {
    use iii_directory::{ReadFunction, WriteFunction};
    use serde_json::json;
    let index = directory.config().paths.index_path.clone();
    std::fs::remove_file(file).expect("remove one of the index's files");
    let skill = std::path::Path::new(base).join("skills/later.md");
    std::fs::write(&skill, "# Later\n\nWritten after the index went.\n").expect("write");
    let got = directory.read(ReadFunction::SkillsGet, &json!({"id": "later"}), None);
    let title = got.map(|g| g["title"].clone()).map_err(|e| e.to_string());
    let created = directory.write(
        WriteFunction::SkillsCreate,
        &json!({"id": "made", "content": "# Made\n\nAfter the rebuild.\n"}),
        None,
    );
    let status = directory.status().map(|s| s["index_error"].clone());
    child::say(&format!(
        "RESULT {title:?} {} {:?} {}",
        created.is_ok(),
        status.map_err(|e| e.to_string()),
        index.is_file() && file.is_file()
    ));
}

/// Only the index file removed under a worker (`rm data/index.redb`): its texts store is still
/// the one the worker holds, locked, which refused every rebuild until a restart. Only the
/// texts store removed: the worker went on unaware, and every command beside it failed.
#[test]
fn an_index_file_removed_alone_under_a_worker_is_built_again() {
    for mode in ["file", "texts"] {
        let tree = Tree::new();
        tree.write("skills/deploy.md", "# Deploy\n\nShip it.\n");
        let output = child::command(&child::test_path(module_path!(), CHILD))
            .env(TREE_VAR, tree.base())
            .env(MODE_VAR, mode)
            .stdin(Stdio::null())
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(r#"RESULT Ok(String("Later")) true Ok(Null) true"#),
            "{mode}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn an_index_removed_under_a_worker_is_built_again_with_its_holder_note() {
    let tree = Tree::new();
    tree.write("skills/deploy.md", "# Deploy\n\nShip it.\n");
    let output = child::command(&child::test_path(module_path!(), CHILD))
        .env(TREE_VAR, tree.base())
        .stdin(Stdio::null())
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("RESULT true true true"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
