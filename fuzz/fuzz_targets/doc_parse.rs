//! A whole document from bytes: decode, frontmatter split, YAML fields, title and first paragraph,
//! the Agent Skills checks, and the classification and id of a path taken from the input's
//! first line.

#![no_main]

use iii_directory::doc::classify::{PathClass, classify};
use iii_directory::doc::frontmatter::{self, MAX_YAML_NODES};
use iii_directory::doc::ids::skill_id_for;
use iii_directory::doc::{Frontmatter, MAX_FILE_BYTES, ParsedDoc, ReadIssue, decode};
use iii_directory::testing::spec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let content = match decode(bytes) {
        Ok(content) => content,
        Err(ReadIssue::TooLarge(size)) => {
            assert!(size > MAX_FILE_BYTES);
            return;
        }
        Err(issue) => {
            assert_eq!(issue, ReadIssue::NotUtf8);
            assert!(std::str::from_utf8(bytes).is_err());
            return;
        }
    };
    check_document(content);
    check_path(content.lines().next().unwrap_or_default());
});

fn check_document(content: &str) {
    let doc = ParsedDoc::parse(content);
    assert_eq!(doc, ParsedDoc::parse(content), "parsing is deterministic");

    let offset = doc.body_offset as usize;
    assert!(offset <= content.len() && content.is_char_boundary(offset));
    let body = &content[offset..];
    assert_eq!(doc.body_empty, body.trim_matches('\n').is_empty());

    let split = frontmatter::split(content);
    assert_eq!(split.body_offset, offset);
    match (&doc.frontmatter, split.yaml) {
        (Frontmatter::Absent, None) => assert_eq!(offset, 0),
        (Frontmatter::Absent, Some(_)) | (_, None) => panic!("frontmatter and split disagree"),
        (_, Some(yaml)) => {
            // The block lies between the opening fence and the body.
            let start = yaml.as_ptr() as usize - content.as_ptr() as usize;
            assert!(start <= 5 && start + yaml.len() <= offset);
        }
    }
    if let Frontmatter::Present(fields) = &doc.frontmatter {
        // Every list entry is a node of the bounded tree.
        let skills = fields.skills.as_ref().map_or(0, Vec::len);
        assert!(skills < MAX_YAML_NODES);
    }
    if let Frontmatter::Invalid(why) | Frontmatter::Salvaged { error: why, .. } = &doc.frontmatter {
        assert!(
            !why.ends_with('.'),
            "messages carry no trailing period: {why:?}"
        );
    }

    // The Agent Skills checks of the same text: deterministic, rules in code order, and a
    // name kept only when it is a non-empty trimmed string.
    let conformance = spec::check(content);
    assert_eq!(
        conformance,
        spec::check(content),
        "checking is deterministic"
    );
    assert!(
        conformance
            .rules
            .windows(2)
            .all(|w| w[0].code() <= w[1].code())
    );
    if let Some(name) = &conformance.name {
        assert!(!name.is_empty() && name.trim() == name);
    }

    if let Some(title) = &doc.h1 {
        assert!(!title.is_empty() && title.trim() == title);
        assert!(
            derived_from(title, body),
            "title {title:?} is not from the body"
        );
    }
    let paragraph = &doc.first_paragraph;
    assert_eq!(paragraph.trim(), paragraph);
    assert!(!paragraph.contains('\n'));
    assert!(
        derived_from(paragraph, body),
        "paragraph {paragraph:?} is not from the body"
    );
}

/// Whether `text`, whitespace aside, reads in order in `source`: the title and paragraph are source
/// lines trimmed and joined with spaces, so their other characters all come from the body.
fn derived_from(text: &str, source: &str) -> bool {
    let mut source = source.chars().filter(|c| !c.is_whitespace());
    text.chars()
        .filter(|c| !c.is_whitespace())
        .all(|wanted| source.any(|c| c == wanted))
}

fn check_path(rel_path: &str) {
    let class = classify(rel_path);
    let components: Vec<&str> = rel_path.split('/').collect();
    let has = |word: &str| components.contains(&word);
    let expected = if has("system-prompts") {
        PathClass::SystemPrompt
    } else if has("prompts") {
        PathClass::Prompts
    } else if has("agents") {
        PathClass::Agents
    } else {
        PathClass::Skill
    };
    assert_eq!(class, expected, "{rel_path:?}");

    let id = skill_id_for(rel_path);
    assert!(id.len() <= rel_path.len() + "index".len());
    // The folders are kept as they are; only the file name changes.
    if let Some((folder, _)) = rel_path.rsplit_once('/') {
        assert!(id.starts_with(folder) && id[folder.len()..].starts_with('/'));
    }
}
