//! One fixture per rule, each breaking that rule alone (and a valid file breaking none).

use super::*;

/// A valid `SKILL.md` for folder `pdf-tools`, with `frontmatter` lines added to its block.
fn skill(frontmatter: &str) -> String {
    format!("---\n{frontmatter}---\n# PDF tools\n\nExtracts text.\n")
}

const NAME: &str = "name: pdf-tools\n";
const DESCRIPTION: &str = "description: Extracts text from PDF files.\n";

fn valid_with(extra: &str) -> String {
    skill(&format!("{NAME}{DESCRIPTION}{extra}"))
}

/// The codes of every rule `text` breaks in a folder named `folder`.
fn codes(text: &str, folder: &str) -> Vec<&'static str> {
    check(text)
        .problems(folder)
        .iter()
        .map(Rule::code)
        .collect()
}

#[track_caller]
fn breaks_only(text: &str, folder: &str, code: &str) {
    assert_eq!(codes(text, folder), [code], "{text}");
}

#[test]
fn a_valid_file_breaks_nothing() {
    let text = valid_with(
        "license: Apache-2.0\ncompatibility: Requires git and network access\nmetadata:\n  author: someone\n  version: \"1.0\"\nallowed-tools: Bash(git:*) Read\n",
    );
    let conformance = check(&text);
    assert_eq!(conformance.problems("pdf-tools"), []);
    assert_eq!(conformance.name.as_deref(), Some("pdf-tools"));
    let fields = conformance.fields;
    assert_eq!(fields.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(
        fields.compatibility.as_deref(),
        Some("Requires git and network access")
    );
    assert_eq!(
        fields.metadata,
        Some(vec![
            ("author".to_owned(), "someone".to_owned()),
            ("version".to_owned(), "1.0".to_owned())
        ])
    );
    assert_eq!(fields.allowed_tools.as_deref(), Some("Bash(git:*) Read"));
    assert!(valid(&conformance.rules));
}

#[test]
fn s100_no_frontmatter() {
    breaks_only("# PDF tools\n\nExtracts text.\n", "pdf-tools", "S100");
}

#[test]
fn s101_not_yaml() {
    breaks_only(&valid_with("license: [unclosed\n"), "pdf-tools", "S101");
}

#[test]
fn s102_not_a_mapping() {
    breaks_only(&skill("- name\n- description\n"), "pdf-tools", "S102");
}

#[test]
fn s103_key_repeated() {
    breaks_only(
        &valid_with("license: MIT\nlicense: MIT\n"),
        "pdf-tools",
        "S103",
    );
}

#[test]
fn s110_name_missing() {
    breaks_only(&skill(DESCRIPTION), "pdf-tools", "S110");
}

#[test]
fn s111_name_empty() {
    breaks_only(
        &skill(&format!("name: \"  \"\n{DESCRIPTION}")),
        "pdf-tools",
        "S111",
    );
    breaks_only(
        &skill(&format!("name: [a]\n{DESCRIPTION}")),
        "pdf-tools",
        "S111",
    );
}

#[test]
fn s112_name_too_long() {
    let long = "a".repeat(MAX_NAME + 1);
    breaks_only(
        &skill(&format!("name: {long}\n{DESCRIPTION}")),
        &long,
        "S112",
    );
    let limit = "a".repeat(MAX_NAME);
    assert_eq!(
        codes(&skill(&format!("name: {limit}\n{DESCRIPTION}")), &limit),
        [""; 0]
    );
}

#[test]
fn s113_name_not_lowercase() {
    breaks_only(
        &skill(&format!("name: Pdf-Tools\n{DESCRIPTION}")),
        "Pdf-Tools",
        "S113",
    );
}

#[test]
fn s114_name_charset() {
    breaks_only(
        &skill(&format!("name: pdf_tools\n{DESCRIPTION}")),
        "pdf_tools",
        "S114",
    );
    breaks_only(
        &skill(&format!("name: café\n{DESCRIPTION}")),
        "café",
        "S114",
    );
}

#[test]
fn s115_name_edge_hyphen() {
    breaks_only(
        &skill(&format!("name: -pdf\n{DESCRIPTION}")),
        "-pdf",
        "S115",
    );
    breaks_only(
        &skill(&format!("name: pdf-\n{DESCRIPTION}")),
        "pdf-",
        "S115",
    );
}

#[test]
fn s116_name_double_hyphen() {
    breaks_only(
        &skill(&format!("name: pdf--tools\n{DESCRIPTION}")),
        "pdf--tools",
        "S116",
    );
}

#[test]
fn s117_name_not_folder() {
    breaks_only(&valid_with(""), "pdf", "S117");
}

#[test]
fn s120_description_missing() {
    breaks_only(&skill(NAME), "pdf-tools", "S120");
}

#[test]
fn s121_description_empty() {
    breaks_only(
        &skill(&format!("{NAME}description: \"\"\n")),
        "pdf-tools",
        "S121",
    );
    breaks_only(
        &skill(&format!("{NAME}description:\n")),
        "pdf-tools",
        "S121",
    );
}

#[test]
fn s122_description_too_long() {
    // Counted in UTF-16 units, as the reference does: 513 emoji are 1,026 units.
    let emoji = "😀".repeat(513);
    breaks_only(
        &skill(&format!("{NAME}description: {emoji}\n")),
        "pdf-tools",
        "S122",
    );
    let limit = "d".repeat(MAX_DESCRIPTION);
    assert_eq!(
        codes(
            &skill(&format!("{NAME}description: {limit}\n")),
            "pdf-tools"
        ),
        [""; 0]
    );
}

#[test]
fn s130_compatibility_not_string() {
    breaks_only(&valid_with("compatibility: [git]\n"), "pdf-tools", "S130");
    breaks_only(&valid_with("compatibility:\n"), "pdf-tools", "S130");
}

#[test]
fn s131_compatibility_too_long() {
    let long = "c".repeat(MAX_COMPATIBILITY + 1);
    breaks_only(
        &valid_with(&format!("compatibility: {long}\n")),
        "pdf-tools",
        "S131",
    );
}

#[test]
fn s140_metadata_not_a_map() {
    breaks_only(&valid_with("metadata: author\n"), "pdf-tools", "S140");
}

#[test]
fn s141_metadata_not_strings() {
    breaks_only(
        &valid_with("metadata:\n  version: 1.0\n"),
        "pdf-tools",
        "S141",
    );
    let nested = check(&valid_with("metadata:\n  a: b\n  tags: [x]\n"));
    assert_eq!(
        nested.fields.metadata,
        Some(vec![("a".to_owned(), "b".to_owned())])
    );
}

#[test]
fn s150_allowed_tools_not_string() {
    breaks_only(
        &valid_with("allowed-tools:\n  bash: yes\n"),
        "pdf-tools",
        "S150",
    );
    breaks_only(
        &valid_with("allowed-tools: [Bash, [Read]]\n"),
        "pdf-tools",
        "S150",
    );
}

#[test]
fn s151_allowed_tools_list_warns() {
    let text = valid_with("allowed-tools: [Bash, Read]\n");
    breaks_only(&text, "pdf-tools", "S151");
    let conformance = check(&text);
    assert!(valid(&conformance.rules));
    assert_eq!(
        conformance.fields.allowed_tools.as_deref(),
        Some("Bash Read")
    );
}

#[test]
fn s160_unknown_key() {
    breaks_only(&valid_with("version: 2\n"), "pdf-tools", "S160");
}

#[test]
fn s170_body_lines_warn() {
    let text = format!("{}{}", valid_with(""), "x\n".repeat(BODY_LINES_GUIDANCE));
    breaks_only(&text, "pdf-tools", "S170");
    assert!(valid(&check(&text).rules));
}

#[test]
fn s171_body_tokens_warn() {
    let long_line = "word ".repeat(BODY_TOKENS_GUIDANCE);
    let text = format!("{}{long_line}\n", valid_with(""));
    breaks_only(&text, "pdf-tools", "S171");
    assert!(valid(&check(&text).rules));
}

#[test]
fn every_rule_has_a_distinct_code_and_a_sentence() {
    let rules = [
        Rule::NoFrontmatter,
        Rule::NotYaml("x".into()),
        Rule::NotAMapping,
        Rule::KeyRepeated("k".into()),
        Rule::NameMissing,
        Rule::NameEmpty,
        Rule::NameTooLong(65),
        Rule::NameNotLowercase("A".into()),
        Rule::NameCharset('_'),
        Rule::NameEdgeHyphen,
        Rule::NameDoubleHyphen,
        Rule::NameNotFolder {
            name: "a".into(),
            folder: "b".into(),
        },
        Rule::DescriptionMissing,
        Rule::DescriptionEmpty,
        Rule::DescriptionTooLong(2_000),
        Rule::CompatibilityNotString,
        Rule::CompatibilityTooLong(600),
        Rule::MetadataNotAMap,
        Rule::MetadataNotString("v".into()),
        Rule::AllowedToolsNotString,
        Rule::AllowedToolsList,
        Rule::UnknownKey("k".into()),
        Rule::BodyLines(501),
        Rule::BodyTokens(5_001),
    ];
    let mut codes: Vec<&str> = rules.iter().map(Rule::code).collect();
    codes.dedup();
    assert_eq!(codes.len(), rules.len());
    for rule in &rules {
        assert!(!rule.to_string().is_empty());
        assert_eq!(rule.to_json()["code"], rule.code());
    }
}

#[test]
fn messages_name_control_and_space_characters_instead_of_printing_them() {
    assert_eq!(
        Rule::NameCharset('\u{1}').to_string(),
        "`name` may hold only a-z, 0-9 and hyphens, and has U+0001"
    );
    assert_eq!(
        Rule::NameCharset('_').to_string(),
        "`name` may hold only a-z, 0-9 and hyphens, and has '_'"
    );
    assert_eq!(
        Rule::NameNotFolder {
            name: "ctl\u{1}\u{1b}".into(),
            folder: "ctl".into()
        }
        .to_string(),
        "`name` \"ctlU+0001U+001B\" differs from its folder's name \"ctl\""
    );
}

/// A YAML mistake is named at its line in the file, as an editor numbers it (the block starts
/// below its fence), and at its column.
#[test]
fn a_yaml_mistake_is_placed_at_its_line_in_the_file() {
    let text = "---\nname: colon-desc\ndescription: Use this: when you need colons\n---\n# B\n";
    let rules = check(text).problems("colon-desc");
    let message = rules
        .iter()
        .find(|r| r.code() == "S101")
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(message.contains("at line 3 column 22"), "{message}");
    // The worker's own reading of the block says the same.
    match frontmatter::read_block("name: colon-desc\ndescription: Use this: when\n") {
        crate::doc::Frontmatter::Salvaged { error, .. } => {
            assert!(error.contains("at line 3 column 22"), "{error}")
        }
        other => panic!("{other:?}"),
    }
}

/// A block that is not YAML still gives its one-line `license` and `allowed-tools`, as the
/// worker's reading of it gives `compatibility`: a colon in a description loses nothing else.
#[test]
fn a_block_that_is_not_yaml_keeps_its_one_line_optional_fields() {
    let text = skill(
        "name: pdf-tools\ndescription: Use this: for invoices\nlicense: MIT\nallowed-tools: Read Bash\nmetadata:\n  a: b\n",
    );
    let conformance = check(&text);
    assert!(
        conformance
            .problems("pdf-tools")
            .iter()
            .any(|r| r.code() == "S101")
    );
    assert_eq!(conformance.fields.license.as_deref(), Some("MIT"));
    assert_eq!(
        conformance.fields.allowed_tools.as_deref(),
        Some("Read Bash")
    );
    assert_eq!(
        conformance.fields.metadata, None,
        "nested values are not guessed"
    );
}
