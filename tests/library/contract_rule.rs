//! Titles and descriptions against an independent, literal reading of the contract's line rule
//! (§3.2), on a generated tree: every `skills::list` row whose title or description comes from
//! the body must equal what the rule gives, except where the body has a fenced code block or a
//! setext heading, the two places where we read better than the rule on purpose.
//!
//! `CONTRACT_RULE_SKILLS=10000 cargo test --release --test library contract_rule:: -- --nocapture`
//! measures a 10,000-skill tree (the default is 2,000). Bodies come from `../shared/corpus` when
//! it is there, else from the generator's synthetic bodies.

use test_support::common;

use std::path::Path;

use common::{Tree, call};
use iii_directory::ReadFunction;
use iii_directory::doc::{ParsedDoc, decode, frontmatter};
use serde_json::json;
use test_support::generate::{TreeSpec, write_tree};

/// The contract's title rule, literally: the first line whose left-trimmed text starts with
/// `# `, its text trimmed, when that is not empty.
fn literal_title(body: &str) -> Option<String> {
    body.lines().find_map(|line| {
        let text = line.trim_start().strip_prefix("# ")?.trim();
        (!text.is_empty()).then(|| text.to_owned())
    })
}

/// The contract's description rule, literally (§3.2).
fn literal_description(body: &str) -> String {
    let mut collected: Vec<&str> = Vec::new();
    for line in body.lines().map(str::trim) {
        let boundary = line.is_empty() || line.starts_with('#') || line.starts_with('>');
        match (boundary, collected.is_empty()) {
            (true, true) => continue,
            (true, false) => break,
            (false, _) => collected.push(line),
        }
    }
    collected.join(" ")
}

/// Whether the body holds what we read differently on purpose: a code fence or a setext
/// underline.
fn has_refinement(body: &str) -> bool {
    body.lines().map(str::trim).any(|line| {
        line.starts_with("```")
            || line.starts_with("~~~")
            || (!line.is_empty() && line.chars().all(|c| c == '=' || c == '-'))
    })
}

#[test]
fn titles_and_descriptions_follow_the_line_rule() {
    let skills: usize = std::env::var("CONTRACT_RULE_SKILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let tree = Tree::new();
    let spec = TreeSpec {
        skills,
        seed: 7,
        corpus: corpus.is_dir().then_some(corpus),
    };
    write_tree(tree.base(), &spec).expect("generate the tree");
    let d = tree.open();
    let listed = call(&d, ReadFunction::SkillsList, json!({}));
    let rows = listed["skills"].as_array().expect("rows");

    let (mut compared, mut equal, mut refined) = (0, 0, 0);
    for row in rows {
        let id = row["id"].as_str().expect("id");
        let got = call(
            &d,
            ReadFunction::SkillsGet,
            json!({ "id": id, "raw": true }),
        );
        let Some(path) = got["path"].as_str().filter(|p| !p.is_empty()) else {
            continue; // bundled
        };
        let bytes = std::fs::read(path).expect("read the skill");
        let text = decode(&bytes).expect("a served file decodes");
        let body = &text[frontmatter::split(text).body_offset..];
        let doc = ParsedDoc::parse(text);
        let fields = doc.fields();
        let set = |v: Option<&String>| v.is_some_and(|s| !s.trim().is_empty());
        let from_body_title = !set(fields.and_then(|f| f.title.as_ref()))
            && !set(fields.and_then(|f| f.name.as_ref()));
        let from_body_description = !set(fields.and_then(|f| f.description.as_ref()));
        if !from_body_title && !from_body_description {
            continue;
        }
        compared += 1;
        let title_ok = !from_body_title
            || row["title"] == literal_title(body).unwrap_or_else(|| id.to_owned());
        let description_ok =
            !from_body_description || row["description"] == literal_description(body);
        if title_ok && description_ok {
            equal += 1;
        } else {
            assert!(
                has_refinement(body),
                "{id}: title {} / {:?}, description {} / {:?}",
                row["title"],
                literal_title(body),
                row["description"],
                literal_description(body)
            );
            refined += 1;
        }
    }
    println!(
        "{} rows listed, {compared} with a title or description from the body: {equal} equal to \
         the literal rule, {refined} differing where the body has a code fence or setext heading",
        rows.len()
    );
    assert!(compared > skills / 10, "too few rows read their body");
}
