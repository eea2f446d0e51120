//! The shared test vectors of the server's reading rules (`ui/vectors.json`), run on the Rust
//! reader: how a file splits into frontmatter and body, which ids are valid, and what the
//! skills list shows for a text (through the dry run the console page calls). The same file
//! runs on the page's copy of these rules (`tests/browser/vectors.mjs`), so the two cannot
//! disagree without one of the runs failing.

use iii_directory::doc::frontmatter::split;
use iii_directory::doc::ids::{validate_name, validate_skill_id};
use iii_directory::dry_run;
use serde_json::{Value, json};
use test_support::common;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/ui/vectors.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read ui/vectors.json"))
        .expect("ui/vectors.json is JSON")
}

fn cases<'a>(vectors: &'a Value, key: &str) -> &'a [Value] {
    let list = vectors[key].as_array().expect("a list of cases");
    assert!(!list.is_empty(), "{key} has cases");
    list
}

fn text<'a>(case: &'a Value, key: &str) -> &'a str {
    case[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {case}"))
}

#[test]
fn frontmatter_splits_as_the_vectors_say() {
    let vectors = vectors();
    let mut wrong = Vec::new();
    for case in cases(&vectors, "split") {
        let content = text(case, "text");
        let found = split(content);
        let got = json!({ "front": found.yaml, "body": &content[found.body_offset..] });
        let want = json!({ "front": case["front"], "body": case["body"] });
        if got != want {
            wrong.push(format!(
                "{}: read {got}, the vector says {want}",
                case["name"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn ids_and_names_are_valid_as_the_vectors_say() {
    let vectors = vectors();
    let mut wrong = Vec::new();
    for case in cases(&vectors, "skill_ids") {
        let (id, valid) = (text(case, "id"), case["valid"] == true);
        if validate_skill_id(id).is_ok() != valid {
            wrong.push(format!("skill id {id:?}: valid should be {valid}"));
        }
    }
    for case in cases(&vectors, "names") {
        let (name, valid) = (text(case, "name"), case["valid"] == true);
        if validate_name(name).is_ok() != valid {
            wrong.push(format!("name {name:?}: valid should be {valid}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn skill_texts_read_as_the_vectors_say() {
    let vectors = vectors();
    let mut wrong = Vec::new();
    let tree = common::Tree::new();
    let directory = tree.open();
    for case in cases(&vectors, "skill_readings") {
        let request = json!({
            "family": "skills",
            "id": case["id"],
            "content": case["text"],
        });
        let answer = dry_run::check(&directory, &request).expect("the dry run answers");
        let got = json!({
            "frontmatter": answer["frontmatter"],
            "title": answer["title"],
            "description": answer["description"],
            "refused": !answer["refused"].is_null(),
        });
        let want = json!({
            "frontmatter": case["frontmatter"],
            "title": case["title"],
            "description": case["description"],
            "refused": case["refused"],
        });
        if got != want {
            wrong.push(format!(
                "{}: read {got}, the vector says {want}",
                case["name"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
