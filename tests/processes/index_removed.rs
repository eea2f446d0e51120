//! The folder the index lives in removed under a running worker (a `git clean -fdx` of a
//! repository whose ignored `data/` holds it): the next reconcile builds the index again at its
//! path, and the worker's holder note beside it, so the commands beside the worker follow it
//! again instead of building an index of their own. The child declares itself a worker, which
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
    let directory = iii_directory::Directory::open(config).expect("open");
    directory.reconcile().expect("reconcile");
    std::fs::remove_dir_all(index.parent().unwrap()).expect("remove the index's folder");
    directory.reconcile().expect("reconcile after the removal");
    let holder = iii_directory::read_index_holder(&index).map(|h| (h.pid, h.role));
    child::say(&format!(
        "RESULT {} {:?}",
        index.is_file(),
        holder == Some((std::process::id(), iii_directory::WORKER_ROLE.to_string()))
    ));
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
        stdout.contains("RESULT true true"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
