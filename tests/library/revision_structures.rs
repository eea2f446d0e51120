//! The per-revision structures of the skill cache (issue 31) follow the change: after random
//! creates, updates and deletes through the library, and edits behind its back, the miss
//! postings, the lowercase ids and the worker overviews the directory keeps (shared with the
//! revision before, or derived from the last ones built) equal the ones built from scratch at
//! the same revision.
//!
//! ```sh
//! STRUCTURE_WRITES=2000 cargo test --test library revision_structures:: -- --nocapture
//! ```

use test_support::common;

use common::Tree;
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::json;
use test_support::generate::Rng;

/// Namespaces and leaves the random ids are made of (a few collide in lowercase, some repeat
/// a segment, some are worker overviews).
const NAMESPACES: &[&str] = &["alpha", "beta", "Beta", "gamma", "alpha-tools", "x"];
const LEAVES: &[&str] = &[
    "index",
    "notes",
    "alpha",
    "deploy",
    "Deploy",
    "run/fast",
    "run/slow",
    "x",
    "zeta-zeta",
];

/// Rows beside the random ones: a revision patches its cache (rather than decoding every row)
/// only when the change is small beside the tree.
const FILLER: usize = 60;

fn filler(tree: &Tree) {
    for i in 0..FILLER {
        let id = format!("filler/s{i:02}");
        tree.write(&format!("skills/{id}.md"), &content(&id, 0, false));
    }
}

fn writes() -> usize {
    std::env::var("STRUCTURE_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn random_id(rng: &mut Rng) -> String {
    format!(
        "{}/{}",
        NAMESPACES[rng.below(NAMESPACES.len())],
        LEAVES[rng.below(LEAVES.len())]
    )
}

fn content(id: &str, n: usize, overview: bool) -> String {
    let kind = if overview { "type: index\n" } else { "" };
    format!("---\n{kind}title: {id} {n}\ndescription: written {n}\n---\n# {id}\n\nBody {n}.\n")
}

/// A miss, so that the revision's postings are made (shared, derived or built).
fn miss(directory: &Directory) {
    let request = json!({ "id": "alpha/deployy" });
    assert!(
        directory
            .read(ReadFunction::SkillsGet, &request, None)
            .is_err()
    );
}

fn check(directory: &Directory, step: usize) -> bool {
    let (kept, built, derived) = directory.skill_structures().expect("structures");
    assert_eq!(
        kept, built,
        "step {step}: structures differ from a fresh build"
    );
    derived
}

#[test]
fn structures_after_random_writes_equal_a_fresh_build() {
    let tree = Tree::new();
    filler(&tree);
    for (i, ns) in NAMESPACES.iter().enumerate() {
        for leaf in LEAVES.iter().take(3 + i % 3) {
            let id = format!("{ns}/{leaf}");
            tree.write(
                &format!("skills/{id}.md"),
                &content(&id, 0, *leaf == "index"),
            );
        }
    }
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    miss(&directory);
    check(&directory, 0);

    let mut rng = Rng::new(31);
    let mut derived = 0;
    for step in 1..=writes() {
        let id = random_id(&mut rng);
        let exists = directory
            .read(ReadFunction::SkillsGet, &json!({ "id": id }), None)
            .is_ok();
        let overview = id.ends_with("/index") || rng.below(4) == 0;
        match (exists, rng.below(10)) {
            // Behind the library's back now and then, reconciled as the watcher would.
            (_, 0) => {
                let rel = format!("skills/{id}.md");
                if exists {
                    tree.remove(&rel);
                } else {
                    tree.write(&rel, &content(&id, step, overview));
                }
                directory
                    .reconcile_paths(vec![tree.path(&rel)])
                    .expect("scoped reconcile");
            }
            // A refused write (an id another one shadows, say) changes nothing: the check
            // below holds all the same.
            (true, 1..=3) => {
                let _ = directory.write(WriteFunction::SkillsDelete, &json!({ "id": id }), None);
            }
            (true, _) => {
                let request = json!({ "id": id, "content": content(&id, step, overview) });
                let _ = directory.write(WriteFunction::SkillsUpdate, &request, None);
            }
            (false, _) => {
                let request = json!({ "id": id, "content": content(&id, step, overview) });
                let _ = directory.write(WriteFunction::SkillsCreate, &request, None);
            }
        }
        // Misses after some writes only: the next miss then derives its postings over several
        // revisions' changes.
        if rng.below(3) == 0 {
            miss(&directory);
        }
        if rng.below(2) == 0 && check(&directory, step) {
            derived += 1;
        }
    }
    assert!(derived > 0, "no revision's postings were derived or shared");
}

#[test]
fn an_update_shares_the_postings_of_the_revision_before() {
    let tree = Tree::new();
    filler(&tree);
    tree.write("skills/a/one.md", &content("a/one", 0, false));
    tree.write("skills/a/index.md", &content("a/index", 0, true));
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    miss(&directory);
    let request = json!({ "id": "a/one", "content": content("a/one", 1, false) });
    directory
        .write(WriteFunction::SkillsUpdate, &request, None)
        .expect("update");
    // The first read after the write finds the postings ready: no miss built them.
    assert!(directory.skill_postings_ready().expect("cache"));
    let (kept, built, _) = directory.skill_structures().expect("structures");
    assert_eq!(kept, built);
}
