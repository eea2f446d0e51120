//! The folder the index lives in removed under a running worker (a `git clean -fdx` of a
//! repository whose ignored `data/` holds it): the watcher hears its sync folder go, and at
//! once builds the index again at its path, with the worker's holder note and the sync folder
//! beside it, so the commands beside the worker follow it again instead of building an index
//! of their own, and wait on it for fresh reads. The child declares itself a worker, which
//! a process may do once, so it runs alone (`common::child`).

use test_support::common::{Tree, child};

use std::process::Stdio;

const CHILD: &str = "index_removed_child";
const TREE_VAR: &str = "III_DIRECTORY_INDEX_REMOVED_TREE";

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
