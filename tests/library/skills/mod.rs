//! `directory::skills::{list,get,index}` against real files in temporary trees: how files become
//! skills, how the roots merge, display ids, `filter_unregistered`, and each function's answers.
//!
//! Note on the default layout: `local_skills_folder` (`skills/iii`) sits inside `skills_folder`
//! (`skills`), so the global scan also sees every local file under the `iii/` namespace (spec
//! 2.6, reproduced literally). Tests that put files in the local root expect those extra ids.

use test_support::common;

use std::fs;

use common::{
    MTIME_TEXT, Tree, asset, asset_field, bad_characters, call, call_err, call_installed,
    invalid_segment, skill_ids, skipped, strings,
};
use iii_directory::doc::ids::SegmentError;
use iii_directory::{Directory, ReadFunction, SkipReason};
use serde_json::{Value, json};

const LIST: ReadFunction = ReadFunction::SkillsList;
const GET: ReadFunction = ReadFunction::SkillsGet;
const INDEX: ReadFunction = ReadFunction::SkillsIndex;

const NEXT_ON_MISS: &str = " Next: call directory::skills::list to browse skill ids; or call directory::skills::index to see the per-worker overview.";

const OMITTED_NOTE: &str = "\n(some descriptions omitted to save space; call directory::skills::get for the full reference)\n";

/// The bundled `iii-directory/*` skills, by display id in on-disk id order.
const BUNDLED_IDS: [&str; 4] = [
    "iii-directory/agent-profiles",
    "iii-directory/authoring-skills",
    "iii-directory/finding-functions",
    "iii-directory",
];

fn rows(directory: &Directory, request: Value) -> Vec<Value> {
    common::rows(directory, LIST, request)
}

fn row(directory: &Directory, id: &str) -> Value {
    common::row(directory, LIST, id)
}

fn get(directory: &Directory, id: &str) -> Value {
    common::get(directory, GET, id)
}

fn get_err(directory: &Directory, id: &str) -> String {
    common::get_err(directory, GET, id)
}

/// A tree whose `skills/iii-directory/` folder (empty) shadows the bundled `iii-directory/*` skills, so
/// that answers hold only what a test writes.
fn no_bundled() -> Tree {
    let tree = Tree::new();
    tree.mkdir("skills/iii-directory");
    tree
}

fn ids_of(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

fn list_ids(directory: &Directory, request: Value) -> Vec<String> {
    ids_of(&rows(directory, request))
}

fn installed_ids(directory: &Directory, installed: &[&str]) -> Vec<String> {
    let list = call_installed(directory, LIST, json!({}), installed);
    ids_of(list["skills"].as_array().expect("skills"))
}

fn index_body(directory: &Directory) -> String {
    call(directory, INDEX, json!({}))["body"]
        .as_str()
        .expect("body")
        .to_string()
}

/// The note `get` puts before a recovered body: a `> Note:` line, a blank line, `---`, a blank
/// line, then the served body verbatim.
fn assert_recovered(answer: &Value, served_body: &str, mentions: &[&str]) {
    let body = answer["body"].as_str().expect("body");
    assert!(body.starts_with("> Note: "), "{body}");
    let suffix = format!("\n\n---\n\n{served_body}");
    assert!(body.ends_with(&suffix), "{body}");
    let note = &body[..body.len() - suffix.len()];
    assert!(!note.contains('\n'), "the note is one line: {note}");
    for word in mentions {
        assert!(note.contains(word), "{word} not in {note}");
    }
}

mod bundled;
mod classification;
mod display_ids;
mod filter;
mod get;
mod index;
mod list;
mod precedence;
mod row_writer;
mod spec_fields;
