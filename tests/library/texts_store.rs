//! The texts store beside the index (`src/index/texts.rs`): it ends up holding exactly the texts
//! the index refers to (a text the index stops referring to is removed by the next reconcile
//! that writes, even after a restart), a content that comes back is served again, and a reader
//! never pairs a snapshot of the index with a texts store that lost one of its texts.

use test_support::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Tree, call};
use iii_directory::{Directory, ReadFunction};
use serde_json::json;

const GET: ReadFunction = ReadFunction::SkillsGet;

/// Texts in the store, as a fresh snapshot sees them.
fn held(d: &Directory) -> u64 {
    d.index()
        .read()
        .expect("snapshot")
        .texts_held()
        .expect("count the texts")
}

fn raw(d: &Directory, id: &str) -> serde_json::Value {
    call(d, GET, json!({ "id": id, "raw": true }))["raw"].clone()
}

#[test]
fn the_store_keeps_the_texts_the_index_refers_to() {
    let tree = Tree::new();
    tree.write("skills/a/one.md", "# One\n\nFirst.\n")
        .write("skills/a/two.md", "# Two\n\nSecond.\n")
        .write("skills/a/copy.md", "# One\n\nFirst.\n");
    let d = tree.open();
    assert_eq!(held(&d), 2, "one text per distinct content");

    tree.remove("skills/a/two.md");
    d.reconcile().expect("reconcile");
    assert_eq!(
        held(&d),
        2,
        "a dropped text stays until the index's commit that dropped it is behind"
    );
    tree.write("skills/a/three.md", "# Three\n\nThird.\n");
    d.reconcile().expect("reconcile");
    assert_eq!(held(&d), 2, "`two` removed, `three` added");

    // Dropped, then back before the removal ran: removed and stored again in one write.
    tree.remove("skills/a/three.md");
    d.reconcile().expect("reconcile");
    tree.write("skills/a/again.md", "# Three\n\nThird.\n");
    d.reconcile().expect("reconcile");
    assert_eq!(raw(&d, "a/again"), "# Three\n\nThird.\n");
    assert_eq!(held(&d), 2);

    // The list of texts to remove outlives the process.
    tree.remove("skills/a/again.md");
    d.reconcile().expect("reconcile");
    drop(d);
    let d = tree.open();
    tree.write("skills/a/four.md", "# Four\n\nFourth.\n");
    d.reconcile().expect("reconcile");
    assert_eq!(
        held(&d),
        2,
        "`again` removed after the restart, `four` added"
    );
    assert_eq!(raw(&d, "a/one"), "# One\n\nFirst.\n");
    assert_eq!(raw(&d, "a/four"), "# Four\n\nFourth.\n");
}

/// Each reconcile drops the previous version's text and removes the one before: a reader
/// asking all along must always find the text of the version its snapshot lists. (A stress
/// test: it catches a removal that lands before the index commit that dropped the text, a
/// window of milliseconds; the gate in `Index::read` closes a far narrower one.)
#[test]
fn a_reader_never_misses_a_text_while_versions_come_and_go() {
    let tree = Tree::new();
    let version = |n: usize| format!("# Skill\n\nVersion {n}.\n");
    tree.write("skills/a/x.md", &version(0));
    let d = Arc::new(tree.open());
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (d, stop) = (d.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let answer = d
                    .read(GET, &json!({ "id": "a/x", "raw": true }), None)
                    .unwrap_or_else(|e| panic!("read {reads} failed: {e}"));
                let text = answer["raw"].as_str().expect("raw text").to_string();
                assert!(text.starts_with("# Skill\n\nVersion "), "{text}");
                reads += 1;
            }
            reads
        })
    };
    for n in 1..=150 {
        tree.write("skills/a/x.md", &version(n));
        d.reconcile().expect("reconcile");
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("the reader saw every text");
    assert!(reads > 0, "the reader ran");
    assert_eq!(raw(&d, "a/x"), version(150));
    assert_eq!(held(&d), 2, "the last version, and the one before it");
}

/// Texts under keys the index never handed out (what a reconcile that failed after the texts
/// store committed, or a crash before the index committed, leaves) are removed by the next
/// reconcile that writes, and never served.
#[test]
fn texts_a_failed_reconcile_left_are_removed() {
    let tree = Tree::new();
    tree.write("skills/a/one.md", "# One\n\nFirst.\n");
    let d = tree.open();
    let index_path = d.config().paths.index_path.clone();
    drop(d);
    {
        let texts = iii_directory::index_files(&index_path)[1].clone();
        let db = redb::Database::create(&texts).expect("open the texts store");
        let txn = db.begin_write().expect("write");
        {
            let mut table = txn
                .open_table(redb::TableDefinition::<u64, &[u8]>::new("texts"))
                .expect("texts");
            for key in [1, 2, 1_000] {
                table.insert(key, b"left over".as_slice()).expect("insert");
            }
        }
        txn.commit().expect("commit");
    }
    let d = tree.open();
    tree.write("skills/a/two.md", "# Two\n\nSecond.\n");
    d.reconcile().expect("reconcile");
    assert_eq!(held(&d), 2, "the left-over texts are gone");
    assert_eq!(raw(&d, "a/one"), "# One\n\nFirst.\n");
    assert_eq!(raw(&d, "a/two"), "# Two\n\nSecond.\n");
}

/// A build whose texts outgrow one of the texts store's commits (it commits as it goes) stores
/// and serves every text.
#[test]
fn a_build_larger_than_one_texts_commit_serves_every_text() {
    let tree = Tree::new();
    // Text that does not compress: about 12 MiB stored, several of the texts store's commits.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut noise = |len: usize| -> String {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'a' + (seed % 26) as u8)
            })
            .collect()
    };
    let texts: Vec<String> = (0..1_500)
        .map(|n| format!("# Skill {n}\n\n{}\n", noise(8_000)))
        .collect();
    for (n, text) in texts.iter().enumerate() {
        tree.write(&format!("skills/big/s{n}.md"), text);
    }
    let d = tree.open();
    assert_eq!(held(&d), texts.len() as u64);
    for (n, text) in texts.iter().enumerate() {
        assert_eq!(raw(&d, &format!("big/s{n}")), text.as_str(), "s{n}");
    }
}
