//! The index is a cache of disk: whatever happened to its file (deleted, truncated, overwritten
//! with garbage, another schema version, not a database at all), `Directory::open` succeeds, a
//! reconcile rebuilds it, and every read answers as before. Also: one writer per index file,
//! and `open_shared` beside a writer gives a read-only follower that sees the writer's updates.

use test_support::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::Tree;
use iii_directory::testing::encode;
use iii_directory::testing::{SCHEMA_VERSION, beside};
use iii_directory::{Directory, OpenError, ReadFunction};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::{Value, json};
use test_support::generate::Rng;

/// The index's `meta` table, as the library defines it.
const META: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("meta");
const PAGE: usize = 4096;

type Answers = Vec<(String, Result<Value, String>)>;

fn ask(out: &mut Answers, d: &Directory, function: ReadFunction, request: Value) {
    let answer = d.read(function, &request, None).map_err(|e| e.to_string());
    out.push((format!("{} {request}", function.id()), answer));
}

/// Asks a list function and returns the `key` of each of its `list` rows.
fn ask_list(
    out: &mut Answers,
    d: &Directory,
    function: ReadFunction,
    list: &str,
    key: &str,
) -> Vec<Value> {
    ask(out, d, function, json!({}));
    match &out.last().expect("just pushed").1 {
        Ok(v) => v[list].as_array().cloned().unwrap_or_default(),
        Err(e) => panic!("{} failed: {e}", function.id()),
    }
    .iter()
    .map(|row| row[key].clone())
    .collect()
}

/// Every answer of every read function on this index.
fn answers(d: &Directory) -> Answers {
    let mut out = Answers::new();
    for id in ask_list(&mut out, d, ReadFunction::SkillsList, "skills", "id") {
        ask(
            &mut out,
            d,
            ReadFunction::SkillsGet,
            json!({ "id": id, "raw": true }),
        );
    }
    ask(
        &mut out,
        d,
        ReadFunction::SkillsList,
        json!({ "prefix": "a/" }),
    );
    ask(
        &mut out,
        d,
        ReadFunction::SkillsGet,
        json!({ "id": "a/missing" }),
    );
    ask(&mut out, d, ReadFunction::SkillsIndex, json!({}));
    for name in ask_list(
        &mut out,
        d,
        ReadFunction::SystemPromptsList,
        "prompts",
        "name",
    ) {
        ask(
            &mut out,
            d,
            ReadFunction::SystemPromptsGet,
            json!({ "name": name, "raw": true }),
        );
    }
    for id in ask_list(&mut out, d, ReadFunction::AgentsList, "agents", "id") {
        ask(
            &mut out,
            d,
            ReadFunction::AgentsGet,
            json!({ "id": id, "raw": true }),
        );
    }
    let skipped = d
        .skipped()
        .map(|s| serde_json::to_value(s).expect("serialize"))
        .map_err(|e| e.to_string());
    out.push(("skipped()".into(), skipped));
    out
}

/// A small tree with something of every kind, served and skipped.
fn small_tree() -> Tree {
    let tree = Tree::new();
    tree.write(
        "skills/a/index.md",
        "---\ntitle: Alpha\ntype: index\ndescription: The a worker.\n---\n# A\n\nAlpha body.\n",
    )
    .write("skills/a/send.md", "# Send\n\nSends things.\n")
    .write("skills/b/SKILL.md", "---\ntitle: Beta\n---\nBeta body.\n")
    .write("skills/a/Bad.md", "an invalid id\n")
    .write("skills/a/empty.md", "---\ntitle: Empty\n---\n")
    .write("skills/iii/c/index.md", "# C (local)\n\nLocal body.\n")
    .write(
        "skills/system-prompts/reviewer.md",
        "---\ndescription: Reviews code.\n---\nYou review code.\n",
    )
    .write("skills/system-prompts/broken.md", "no frontmatter\n")
    .write(
        ".agents/skills/d/SKILL.md",
        "---\nname: Delta\n---\nDelta body.\n",
    )
    .write(
        "agents/x.md",
        "---\nname: X\nextends: iii\nskills: [a, nope]\nmodel: m1\n---\nYou are x.\n",
    )
    .write("agents/y.md", "---\nname: Y\nextends: x\n---\nYou are y.\n")
    .write("agents/broken.md", "no frontmatter\n");
    tree
}

fn index_path(tree: &Tree) -> PathBuf {
    tree.config().paths.index_path
}

/// The index's texts store, beside it.
fn texts_path(tree: &Tree) -> PathBuf {
    let [index, texts] = iii_directory::index_files(&index_path(tree));
    assert_ne!(index, texts);
    texts
}

/// Builds the index of the tree and records every answer; the index is closed on return.
fn record(tree: &Tree) -> Answers {
    let directory = tree.open();
    let recorded = answers(&directory);
    assert!(
        recorded.iter().filter(|(_, a)| a.is_ok()).count() > 20,
        "the tree should give many answers: {recorded:?}"
    );
    recorded
}

/// Opens the (damaged) index, reconciles, and checks every answer against the recorded ones;
/// then checks that the rebuilt file opens cleanly again with the same answers.
fn assert_recovers(tree: &Tree, recorded: &Answers, what: &str) {
    for round in ["after the damage", "after reopening the rebuilt index"] {
        let directory = Directory::open(tree.config())
            .unwrap_or_else(|e| panic!("{what}: open failed {round}: {e}"));
        directory
            .reconcile()
            .unwrap_or_else(|e| panic!("{what}: reconcile failed {round}: {e}"));
        let got = answers(&directory);
        assert_answers_eq(&got, recorded, &format!("{what}, {round}"));
    }
}

fn assert_answers_eq(got: &Answers, want: &Answers, what: &str) {
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g, w, "{what}: answer differs");
    }
    assert_eq!(got.len(), want.len(), "{what}: number of answers differs");
}

fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

fn overwrite(path: &Path, offset: usize, bytes: &[u8]) {
    let mut data = fs::read(path).expect("read index");
    let end = (offset + bytes.len()).min(data.len());
    data[offset..end].copy_from_slice(&bytes[..end - offset]);
    fs::write(path, data).expect("write index");
}

fn truncate(path: &Path, len: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open index")
        .set_len(len)
        .expect("truncate");
}

#[test]
fn deleted_index_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    fs::remove_file(index_path(&tree)).expect("delete");
    assert_recovers(&tree, &recorded, "deleted index");
}

/// A `git clean -fdx` of the folder the index lives in, while a writer runs: the next read
/// builds the file again at its path, with every answer (`processes` checks the holder note).
#[test]
fn an_index_folder_removed_under_a_running_writer_is_built_again_there() {
    let tree = small_tree();
    let directory = Directory::open(tree.config()).expect("open");
    directory.reconcile().expect("reconcile");
    let recorded = answers(&directory);
    let folder = index_path(&tree).parent().unwrap().to_path_buf();
    fs::remove_dir_all(&folder).expect("remove the index's folder");
    // The next read notices, with nothing changed in the folders.
    assert_answers_eq(&answers(&directory), &recorded, "after the removal");
    assert!(index_path(&tree).is_file(), "built again at its path");
    assert!(texts_path(&tree).is_file());
    drop(directory);
    let reopened = Directory::open(tree.config()).expect("reopen");
    reopened.reconcile().expect("reconcile");
    assert_answers_eq(&answers(&reopened), &recorded, "reopened");
}

/// A creation of the index stopped before redb wrote its header (a full disk at the first
/// start, a kill): a file of zeros, which is replaced like an empty one, not refused as
/// someone else's file.
#[test]
fn an_index_of_zeros_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    fs::write(index_path(&tree), vec![0u8; 73_728]).expect("zeros");
    fs::remove_file(texts_path(&tree)).expect("the texts store was never made");
    assert_recovers(&tree, &recorded, "an index of zeros");
    // Shorter than redb's header, too.
    fs::write(index_path(&tree), [0u8; 2]).expect("zeros");
    fs::remove_file(texts_path(&tree)).expect("texts");
    assert_recovers(&tree, &recorded, "two zero bytes");
}

#[test]
fn index_truncated_to_zero_bytes_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    truncate(&index_path(&tree), 0);
    assert_recovers(&tree, &recorded, "index truncated to 0 bytes");
}

/// Cuts the file to half its length.
fn truncate_to_half(path: &Path) {
    let len = fs::metadata(path).expect("stat").len();
    truncate(path, len / 2);
}

/// Overwrites the page in the middle of the file with garbage.
fn garbage_in_the_middle(path: &Path, seed: u64) {
    let len = fs::metadata(path).expect("stat").len() as usize;
    overwrite(path, len / 2 / PAGE * PAGE, &garbage(seed, PAGE));
}

#[test]
fn index_truncated_to_half_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    truncate_to_half(&index_path(&tree));
    assert_recovers(&tree, &recorded, "index truncated to half its length");
}

#[test]
fn index_with_a_garbage_header_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    overwrite(&index_path(&tree), 0, &garbage(1, PAGE));
    assert_recovers(&tree, &recorded, "first 4 KiB overwritten with garbage");
}

#[test]
fn index_with_garbage_in_the_middle_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    garbage_in_the_middle(&index_path(&tree), 2);
    assert_recovers(&tree, &recorded, "a 4 KiB chunk in the middle overwritten");
}

/// How one damaged copy of the index fared: `None` when it was rebuilt (or the damage was
/// harmless) and every answer came out as recorded; else what went wrong, and where.
fn outcome_of_damage(tree: &Tree, recorded: &Answers, zero_window: bool) -> Option<String> {
    let stage = std::cell::Cell::new("Directory::open");
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let directory = match Directory::open(tree.config()) {
            Ok(d) => d,
            Err(e) => return Some(format!("open failed: {e}")),
        };
        if zero_window {
            directory.index().set_racy_window(Duration::ZERO);
        }
        stage.set("reconcile");
        if let Err(e) = directory.reconcile() {
            return Some(format!("reconcile failed: {e}"));
        }
        stage.set("read");
        let got = answers(&directory);
        let (wrong, _) = got.iter().zip(recorded).find(|(g, r)| g != r)?;
        let wrong = format!("{wrong:?}");
        Some(format!("wrong answer: {}", &wrong[..wrong.len().min(240)]))
    }));
    run.unwrap_or_else(|_| Some(format!("panicked in {}", stage.get())))
}

/// Damages the index of the small tree page by page (each time from the intact file) with
/// garbage over `len` bytes at `offset` into the page, with the default racy window and with a
/// zero one (as on a restart long after the files were written, when reconcile reads nothing),
/// and lists every case that was not rebuilt or harmless.
fn damage_each_page(offset: usize, len: usize) -> Vec<String> {
    let tree = small_tree();
    let recorded = record(&tree);
    let path = index_path(&tree);
    let original = fs::read(&path).expect("read index");
    let mut failures = Vec::new();
    for page in 0..original.len() / PAGE {
        if original[page * PAGE..(page + 1) * PAGE]
            .iter()
            .all(|b| *b == 0)
        {
            continue;
        }
        for zero_window in [false, true] {
            fs::write(&path, &original).expect("restore");
            overwrite(&path, page * PAGE + offset, &garbage(page as u64, len));
            if let Some(failure) = outcome_of_damage(&tree, &recorded, zero_window) {
                failures.push(format!(
                    "page {page} (bytes {offset}..{} of it), zero racy window {zero_window}: {failure}",
                    offset + len
                ));
            }
        }
    }
    failures
}

/// Garbage over a whole page at a time. Note: in a debug build redb walks every page when it
/// opens a file (a debug assertion), so a page with a garbage header panics at open and the
/// index is rebuilt; a release build does not walk them, and there the damage of a `content`
/// page surfaces as a panic in `skills::get` (see the ignored test below).
#[test]
fn garbage_over_any_whole_page_is_rebuilt_or_harmless() {
    let failures = damage_each_page(0, PAGE);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Garbage inside a page, its header left intact: the page still looks like a page, so only
/// redb's checksums (which the index never verifies) can tell.
#[test]
fn garbage_inside_any_page_is_rebuilt_or_harmless() {
    let mut failures = Vec::new();
    for (offset, len) in [(8, PAGE - 8), (16, 64), (100, 8)] {
        failures.extend(damage_each_page(offset, len));
    }
    assert!(
        failures.is_empty(),
        "{} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A valid redb file whose `meta` says another schema version (nothing else in it).
#[test]
fn index_of_another_schema_version_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    let path = index_path(&tree);
    fs::remove_file(&path).expect("delete");
    {
        let db = redb::Database::create(&path).expect("create redb");
        let txn = db.begin_write().expect("write txn");
        {
            let mut meta = txn.open_table(META).expect("meta");
            meta.insert("schema_version", encode(&999u64).as_slice())
                .expect("insert");
        }
        txn.commit().expect("commit");
    }
    assert_recovers(&tree, &recorded, "a redb file of schema version 999");
}

/// The real index with only its schema version changed: nothing in it may be trusted.
#[test]
fn real_index_with_a_bumped_schema_version_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    let path = index_path(&tree);
    {
        let db = redb::Database::create(&path).expect("open redb");
        {
            let txn = db.begin_read().expect("read txn");
            let meta = txn.open_table(META).expect("meta");
            let version = meta.get("schema_version").expect("get").expect("present");
            assert_eq!(version.value(), encode(&SCHEMA_VERSION).as_slice());
        }
        let txn = db.begin_write().expect("write txn");
        {
            let mut meta = txn.open_table(META).expect("meta");
            meta.insert("schema_version", encode(&999u64).as_slice())
                .expect("insert");
            // Rows a rebuilt index must not keep: a skill that is not on disk.
            let mut skills: redb::Table<'_, &str, &[u8]> = txn
                .open_table(TableDefinition::new("view_skills"))
                .expect("skills");
            let row = skills
                .get("a/index")
                .expect("get")
                .expect("a/index row")
                .value()
                .to_vec();
            skills
                .insert("ghost/index", row.as_slice())
                .expect("insert");
        }
        txn.commit().expect("commit");
    }
    assert_recovers(&tree, &recorded, "the real index with schema version 999");
}

/// A redb file with tables but no schema version.
#[test]
fn redb_file_without_a_schema_version_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    let path = index_path(&tree);
    fs::remove_file(&path).expect("delete");
    {
        let db = redb::Database::create(&path).expect("create redb");
        let txn = db.begin_write().expect("write txn");
        {
            let other: TableDefinition<'_, &str, u64> = TableDefinition::new("something_else");
            txn.open_table(other)
                .expect("table")
                .insert("k", 1)
                .expect("insert");
        }
        txn.commit().expect("commit");
    }
    assert_recovers(&tree, &recorded, "a redb file of another program");
}

#[test]
fn deleted_texts_store_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    fs::remove_file(texts_path(&tree)).expect("delete");
    assert_recovers(&tree, &recorded, "deleted texts store");
}

#[test]
fn texts_store_truncated_to_half_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    truncate_to_half(&texts_path(&tree));
    assert_recovers(&tree, &recorded, "texts store truncated to half its length");
}

#[test]
fn texts_store_with_garbage_in_the_middle_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    garbage_in_the_middle(&texts_path(&tree), 3);
    assert_recovers(
        &tree,
        &recorded,
        "a 4 KiB chunk of the texts store overwritten",
    );
}

/// A texts store that belongs to another index file (restored from a backup of another
/// machine, say) holds texts under another epoch: the pair is rebuilt, not trusted.
#[test]
fn texts_store_of_another_index_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    let mut other = tree.config();
    other.paths.index_path = tree.base().join("other.redb");
    drop(tree.open_with(other.clone()));
    // The same texts, but the other index's.
    fs::copy(
        &iii_directory::index_files(&other.paths.index_path)[1],
        texts_path(&tree),
    )
    .expect("copy");
    assert_recovers(&tree, &recorded, "the texts store of another index file");
}

#[test]
fn text_file_instead_of_an_index_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    fs::write(index_path(&tree), "this is not a database\n".repeat(1000)).expect("write");
    assert_recovers(&tree, &recorded, "a text file");
}

/// Bytes inside a record changed (a bit flip, a torn sector): the pages stay well-formed, so
/// only redb's checksums can tell. The damaged values must not be served.
#[test]
fn damaged_record_bytes_are_not_served() {
    let tree = small_tree();
    tree.write(
        "skills/m/index.md",
        "---\ntitle: Titlealpha\n---\n# Heading\n\nFirst paragraph.\n\nMarkerbody here.\n",
    );
    let recorded = record(&tree);
    let mut hits = 0;
    // The title is in the index, the body in its texts store.
    for path in iii_directory::index_files(&index_path(&tree)) {
        let mut data = fs::read(&path).expect("read index");
        for marker in [&b"Titlealpha"[..], b"Markerbody"] {
            for i in 0..data.len() - marker.len() {
                if &data[i..i + marker.len()] == marker {
                    data[i] = b'X';
                    hits += 1;
                }
            }
        }
        fs::write(&path, data).expect("write index");
    }
    assert!(hits >= 2, "the markers are stored in the index");
    assert_recovers(&tree, &recorded, "record bytes changed in place");
}

#[test]
fn second_writer_in_the_same_process_is_busy() {
    let tree = small_tree();
    let writer = tree.open();
    match Directory::open(tree.config()) {
        Err(OpenError::Busy(path)) => assert_eq!(path, index_path(&tree)),
        Err(other) => panic!("expected Busy, got {other}"),
        Ok(_) => panic!("a second writer opened the same index"),
    }
    let message = Directory::open(tree.config())
        .err()
        .expect("busy")
        .to_string();
    assert!(
        message.contains("another process is writing the index"),
        "{message}"
    );
    // The first writer is unaffected, and once it is closed the index opens again.
    let recorded = answers(&writer);
    writer.reconcile().expect("reconcile");
    drop(writer);
    let again = Directory::open(tree.config()).expect("open after the writer closed");
    assert!(again.is_writer());
    assert_answers_eq(&answers(&again), &recorded, "reopened");
}

#[test]
fn open_shared_beside_a_writer_follows_it() {
    let tree = small_tree();
    let writer = tree.open();
    let follower = Directory::open_shared(tree.config()).expect("open shared");
    assert!(!follower.is_writer(), "the writer holds the index");
    assert_answers_eq(
        &answers(&follower),
        &answers(&writer),
        "follower before changes",
    );
    let error = follower
        .reconcile()
        .expect_err("a follower cannot reconcile");
    assert!(error.to_string().contains("read-only"), "{error}");

    // The writer reconciles changes; new reads on the follower see them.
    tree.write("skills/e/index.md", "---\ntitle: Echo\n---\nEcho body.\n")
        .write("skills/a/send.md", "# Send v2\n\nSends more things.\n")
        .remove("skills/b/SKILL.md")
        .write("agents/z.md", "---\nname: Z\nextends: y\n---\nYou are z.\n");
    writer.reconcile().expect("reconcile");
    let got = answers(&follower);
    assert_answers_eq(
        &got,
        &answers(&writer),
        "follower after the writer reconciled",
    );
    let ids = common::skill_ids(&follower);
    assert!(ids.contains(&"e".to_string()), "{ids:?}");
    assert!(!ids.contains(&"b".to_string()), "{ids:?}");
    let send = common::call(
        &follower,
        ReadFunction::SkillsGet,
        json!({ "id": "a/send" }),
    );
    assert_eq!(send["title"], "Send v2");
    let x = common::call(&follower, ReadFunction::AgentsGet, json!({ "id": "x" }));
    let z = common::call(&follower, ReadFunction::AgentsGet, json!({ "id": "z" }));
    let x_prompt = x["system_prompt"].as_str().expect("prompt");
    assert!(x_prompt.ends_with("\n\nYou are x.\n"), "{x_prompt}");
    assert_eq!(
        z["system_prompt"],
        format!(
            "{}\n\nYou are y.\n\nYou are z.\n",
            x_prompt.trim_end_matches('\n')
        )
    );

    // Once the writer is gone, `open_shared` becomes the writer.
    drop(follower);
    drop(writer);
    let alone = Directory::open_shared(tree.config()).expect("open shared");
    assert!(alone.is_writer());
}

#[test]
fn read_only_open_without_an_index_says_how_to_build_it() {
    let tree = small_tree();
    let error = match Directory::open_read_only(tree.config()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("no index file exists yet"),
    };
    assert!(error.contains("iii-directory reindex"), "{error}");
}

/// Opens `config` expecting the refusal of a file that is not an index of ours: the error names
/// the setting and the file.
fn assert_not_ours(config: iii_directory::config::Config, file: &Path) -> String {
    let message = match Directory::open(config) {
        Err(e @ OpenError::NotOurs { .. }) => e.to_string(),
        Err(other) => panic!("expected a refusal of {}, got {other}", file.display()),
        Ok(_) => panic!("{} was taken as an index", file.display()),
    };
    assert!(message.contains("index_path"), "{message}");
    assert!(message.contains(&file.display().to_string()), "{message}");
    message
}

/// Issue 33: a stored `index_path` pointing at a user's file made the next start replace it
/// (and add `<file>.texts`). Such a file is refused, byte for byte untouched, with nothing
/// created beside it.
#[test]
fn user_file_at_index_path_is_refused_and_left_untouched() {
    let tree = small_tree();
    let user = tree.base().join("notes.txt");
    let bytes = "my notes\nroot:x:0:0::/root:/bin/sh\n".repeat(200);
    fs::write(&user, &bytes).expect("write");
    let mut config = tree.config();
    config.paths.index_path = user.clone();
    assert_not_ours(config.clone(), &user);
    assert_eq!(fs::read_to_string(&user).expect("read"), bytes);
    let [_, texts] = iii_directory::index_files(&user);
    assert!(!texts.exists(), "nothing is created beside it");
    // A second start (a restart loop, say) refuses the same way.
    assert_not_ours(config, &user);
    assert_eq!(fs::read_to_string(&user).expect("read"), bytes);
}

/// A user's file where the texts store would go, beside an `index_path` that does not exist:
/// refused before the index is created.
#[test]
fn user_file_at_the_texts_path_is_refused_and_left_untouched() {
    let tree = small_tree();
    let index = tree.base().join("notes");
    let [_, texts] = iii_directory::index_files(&index);
    fs::write(&texts, "my texts\n").expect("write");
    let mut config = tree.config();
    config.paths.index_path = index.clone();
    assert_not_ours(config, &texts);
    assert_eq!(fs::read_to_string(&texts).expect("read"), "my texts\n");
    assert!(!index.exists(), "the index was not created");
}

/// Another program's redb database is a redb file without our marker: refused, untouched.
#[test]
fn another_programs_redb_database_is_refused_and_left_untouched() {
    let tree = small_tree();
    let other = tree.base().join("other-app.redb");
    {
        let db = redb::Database::create(&other).expect("create redb");
        let txn = db.begin_write().expect("write txn");
        {
            let table: TableDefinition<'_, &str, u64> = TableDefinition::new("accounts");
            txn.open_table(table)
                .expect("table")
                .insert("alice", 7)
                .expect("insert");
        }
        txn.commit().expect("commit");
    }
    let before = fs::read(&other).expect("read");
    let mut config = tree.config();
    config.paths.index_path = other.clone();
    assert_not_ours(config, &other);
    assert_eq!(
        fs::read(&other).expect("read"),
        before,
        "not a byte changed"
    );
    let db = redb::Database::open(&other).expect("still a database");
    let txn = db.begin_read().expect("read txn");
    let table: TableDefinition<'_, &str, u64> = TableDefinition::new("accounts");
    let value = txn
        .open_table(table)
        .expect("table")
        .get("alice")
        .expect("get");
    assert_eq!(value.map(|v| v.value()), Some(7));
}

/// A device, a folder, a link to nothing: never opened, created through or replaced.
#[test]
fn a_file_that_is_not_a_regular_file_is_refused() {
    let tree = small_tree();
    let folder = tree.base().join("a-folder");
    fs::create_dir(&folder).expect("mkdir");
    let dangling = tree.base().join("dangling");
    std::os::unix::fs::symlink(tree.base().join("nowhere/index.redb"), &dangling).expect("link");
    for path in [PathBuf::from("/dev/null"), folder, dangling] {
        let mut config = tree.config();
        config.paths.index_path = path.clone();
        assert_not_ours(config, &path);
    }
    assert!(!tree.base().join("nowhere").exists());
}

/// An empty file is taken (there is nothing in it to lose), and the index built in it.
#[test]
fn an_empty_file_at_index_path_becomes_the_index() {
    let tree = small_tree();
    let recorded = record(&tree);
    fs::remove_file(index_path(&tree)).expect("delete");
    fs::remove_file(texts_path(&tree)).expect("delete");
    fs::write(index_path(&tree), "").expect("empty file");
    assert_recovers(&tree, &recorded, "an empty file at index_path");
}

/// A folder mounted read-only, unmounted when the test ends (however it ends).
struct ReadOnlyMount {
    point: PathBuf,
}

impl ReadOnlyMount {
    /// Binds `source` read-only at `point`; `None` where this process may not mount (not
    /// root, or in a container without the privilege).
    fn bind(source: &Path, point: &Path) -> Option<ReadOnlyMount> {
        let mount = |args: &[&str]| {
            std::process::Command::new("mount")
                .args(args)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let (source, point_text) = (source.to_str()?, point.to_str()?);
        if !mount(&["--bind", source, point_text]) {
            return None;
        }
        let mounted = ReadOnlyMount {
            point: point.to_path_buf(),
        };
        mount(&["-o", "remount,bind,ro", point_text]).then_some(mounted)
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.point)
            .status();
    }
}

/// An index on a read-only file system (a valid one, or none yet) is neither rebuilt nor
/// deleted: the open says the file cannot be written and what to set instead.
#[test]
fn an_index_that_cannot_be_written_is_left_as_it_is_with_what_to_do() {
    let tree = small_tree();
    let (source, point) = (tree.path("index-source"), tree.path("index-mount"));
    fs::create_dir_all(&source).expect("mkdir");
    fs::create_dir_all(&point).expect("mkdir");
    let mut config = tree.config();
    config.paths.index_path = source.join("index.redb");
    Directory::open(config.clone())
        .expect("open")
        .reconcile()
        .expect("reconcile");
    let Some(_mount) = ReadOnlyMount::bind(&source, &point) else {
        eprintln!("skipped: a read-only bind mount needs root (run the tests as root to cover it)");
        return;
    };
    for file in ["index.redb", "elsewhere.redb"] {
        config.paths.index_path = point.join(file);
        let before = fs::read_dir(&point).expect("list").count();
        let message = match Directory::open(config.clone()) {
            Err(e @ OpenError::Unwritable { .. }) => e.to_string(),
            Err(other) => panic!("{file}: expected the index to be unwritable, got {other}"),
            Ok(_) => panic!("{file}: opened on a read-only file system"),
        };
        assert!(
            message.starts_with(&format!(
                "index_path: {} cannot be written (",
                point.join(file).display()
            )),
            "{message}"
        );
        assert!(message.contains("Set index_path to a file in a writable folder"));
        assert_eq!(fs::read_dir(&point).expect("list").count(), before);
    }
}

/// A damaged index beside a texts store that a writer which died left unclosed: redb opens
/// that store only as a writer (to recover it), so its marker is read from a recovered copy,
/// and the pair is ours to rebuild. (It was refused as "not an index of iii-directory", and the
/// worker could not start, until the user deleted the files.)
#[test]
fn a_damaged_index_beside_the_texts_store_of_a_dead_writer_is_rebuilt() {
    let tree = small_tree();
    let recorded = record(&tree);
    let (index, texts) = (index_path(&tree), texts_path(&tree));
    // The files as a writer that died leaves them: copied while one holds them open.
    let writer = tree.open();
    let (index_bytes, texts_bytes) = (
        fs::read(&index).expect("index"),
        fs::read(&texts).expect("texts"),
    );
    drop(writer);
    fs::write(&index, &index_bytes[..index_bytes.len() / 2]).expect("a truncated index");
    fs::write(&texts, &texts_bytes).expect("the texts store as the writer left it");
    for stamp in [&index, &texts] {
        let _ = fs::remove_file(beside(stamp, ".clean"));
    }
    assert_recovers(
        &tree,
        &recorded,
        "damaged index beside a dead writer's texts store",
    );
}

/// The index file damaged under a running writer: the next write fails to commit, the index is
/// rebuilt from disk, and brought back whole (not just the written path: a rebuild that only
/// reconciled the write's scope left the worker serving that one file). The write's answer is
/// the write's, which landed on disk.
#[test]
fn an_index_damaged_under_a_running_writer_is_rebuilt_whole_at_the_next_write() {
    let tree = small_tree();
    // Enough rows that the index's pages are not all in redb's cache at the write.
    for n in 0..12_000 {
        tree.write(
            &format!("skills/filler/s{n:05}.md"),
            &format!("# Filler {n}\n\nFiller skill number {n}.\n"),
        );
    }
    let directory = tree.open();
    let before = common::skill_ids(&directory);
    truncate(&index_path(&tree), 100_000);
    let created = directory.write(
        iii_directory::WriteFunction::SkillsCreate,
        &json!({ "id": "late/note", "content": "# Late\n\nWritten after the damage.\n" }),
        None,
    );
    assert!(created.is_ok(), "the write landed: {created:?}");
    let after = common::skill_ids(&directory);
    assert_eq!(
        after.len(),
        before.len() + 1,
        "the whole tree, and the new skill"
    );
    assert!(after.contains(&"late/note".to_string()));
}
