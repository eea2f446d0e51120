//! Splitting a file into its frontmatter block and body (contract §2.4), and reading the block's
//! YAML into the recognised [`Fields`]. The YAML itself is loaded by [`yaml::load`], which
//! bounds what a hostile block can cost.

pub(crate) mod salvage;

use super::{Fields, Frontmatter, Lenient, conflict};
use crate::yaml::{self, Limits, Value};

/// Most nodes one frontmatter document may expand to (aliases counted at the size of what they
/// point to). Real frontmatter has a few dozen; this leaves room for long `skills` lists.
pub const MAX_YAML_NODES: usize = 10_000;

/// Deepest nesting of sequences and mappings allowed. Frontmatter is flat in practice; the cap
/// keeps recursive walks and drops of the tree shallow.
pub const MAX_YAML_DEPTH: usize = 64;

const LIMITS: Limits = Limits {
    max_nodes: MAX_YAML_NODES,
    max_depth: MAX_YAML_DEPTH,
    aliases: true,
};

/// The line of its file a frontmatter block starts at: the one below the opening fence.
pub const BLOCK_FIRST_LINE: usize = 2;

/// The opening fence, with either line ending; it must sit at byte 0.
const OPENERS: [&str; 2] = ["---\n", "---\r\n"];

/// A closing fence is this at the start of a line, followed by `\n`, `\r\n` or the end of the file.
const FENCE_LINE_START: &str = "\n---";

/// Where a file's frontmatter YAML and body are.
#[derive(Debug, PartialEq, Eq)]
pub struct Split<'a> {
    /// The text between the fences, when the file has a closed block; `Some("")` for an empty one.
    pub yaml: Option<&'a str>,
    /// Byte offset of the body: right after the closing fence's line ending, or 0 without a block.
    pub body_offset: usize,
}

/// Finds the frontmatter block at the start of `content`, byte-exactly as the contract describes:
/// nothing is trimmed, so a CRLF file keeps each YAML line's trailing `\r` (the YAML parser treats
/// it as part of the line break) and the body starts exactly after the fence.
pub fn split(content: &str) -> Split<'_> {
    let no_block = Split {
        yaml: None,
        body_offset: 0,
    };
    let Some(opener) = OPENERS.iter().find(|opener| content.starts_with(**opener)) else {
        return no_block;
    };
    let yaml_start = opener.len();
    // Search from the opener's own `\n`, so that an empty block (`---\n---\n`) closes at once.
    let search_from = yaml_start - 1;
    for (found, _) in content[search_from..].match_indices(FENCE_LINE_START) {
        let fence_start = search_from + found;
        let after_dashes = fence_start + FENCE_LINE_START.len();
        let rest = &content[after_dashes..];
        let line_ending = if rest.starts_with('\n') {
            1
        } else if rest.starts_with("\r\n") {
            2
        } else if rest.is_empty() || rest == "\r" {
            // A closing fence on the last line with no newline after it: all body is gone.
            return Split {
                yaml: Some(&content[yaml_start..fence_start.max(yaml_start)]),
                body_offset: content.len(),
            };
        } else {
            // `----`, `--- x` and the like are not fences; keep looking.
            continue;
        };
        return Split {
            yaml: Some(&content[yaml_start..fence_start.max(yaml_start)]),
            body_offset: after_dashes + line_ending,
        };
    }
    no_block
}

/// Reads a frontmatter block: its recognised fields when it is a YAML mapping; when it is not
/// (not YAML, or not a mapping), what its `key: value` lines say, with the reason (see
/// [`salvage`]). JSON-style surrogate-pair escapes, which YAML refuses, are joined first.
pub fn read_block(yaml: &str) -> Frontmatter {
    let error = match parse_fields(yaml) {
        Ok(fields) => return Frontmatter::Present(Box::new(fields)),
        Err(FieldsError::NotAMapping(why)) => why,
        Err(unusable) => return Frontmatter::Invalid(unusable.message()),
    };
    if let Some(joined) = salvage::join_surrogate_escapes(yaml) {
        match parse_fields(&joined) {
            Ok(fields) => return Frontmatter::Present(Box::new(fields)),
            Err(FieldsError::NotAMapping(_)) => {}
            Err(unusable) => return Frontmatter::Invalid(unusable.message()),
        }
    }
    // A merge's conflict markers break the YAML at the first of them: the parser's reason
    // would point at that line, not at the merge left unresolved.
    let error = match conflict::has_markers(yaml) {
        true => conflict::FRONTMATTER_REASON.to_owned(),
        false => error,
    };
    Frontmatter::Salvaged {
        fields: Box::new(salvage::salvage(yaml)),
        error,
    }
}

/// Why a block's recognised fields could not be read. Messages carry no trailing period.
#[derive(Debug, PartialEq, Eq)]
pub enum FieldsError {
    /// The block is not YAML, or its document is not a mapping.
    NotAMapping(String),
    /// A mapping whose recognised key has a value of the wrong shape, or is given twice.
    Shape(ShapeError),
    /// YAML over the loader's budgets (a billion laughs, deep nesting): refused, never read.
    Refused(String),
}

/// A recognised key whose value has the wrong shape, or that is given twice.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("`{0}` must be a string")]
    NotAString(String),
    #[error("`{0}` must be true or false")]
    NotABoolean(String),
    #[error("`{0}` must be a list of strings")]
    NotAList(String),
    #[error("`{0}` entries must be strings")]
    EntryNotAString(String),
    #[error("`{0}` is set more than once")]
    Repeated(String),
}

impl FieldsError {
    /// Why, as the frontmatter's reason (no trailing period).
    pub fn message(&self) -> String {
        match self {
            FieldsError::NotAMapping(why) | FieldsError::Refused(why) => why.clone(),
            FieldsError::Shape(shape) => shape.to_string(),
        }
    }
}

/// Reads the recognised keys out of a frontmatter block. Unknown keys and keys that are not
/// strings are ignored; a recognised key with a value of the wrong shape is an error naming it.
/// A recognised key given twice is an error too, since either reading of it would be a guess;
/// unknown keys may repeat.
pub fn parse_fields(yaml: &str) -> Result<Fields, FieldsError> {
    if yaml.trim().is_empty() {
        return Ok(Fields::default());
    }
    let loaded = yaml::load_at(yaml, &LIMITS, BLOCK_FIRST_LINE).map_err(|e| match e {
        yaml::LoadError::Syntax(why) => FieldsError::NotAMapping(why),
        other if other.is_limit() => FieldsError::Refused(format!("frontmatter {other}")),
        other => FieldsError::NotAMapping(format!("frontmatter {other}")),
    })?;
    match loaded.as_deref() {
        None | Some(Value::Null) => Ok(Fields::default()),
        Some(Value::Map(entries)) => {
            let mut fields = Fields::default();
            let mut seen: Vec<&str> = Vec::new();
            for (key, value) in entries {
                let Value::Text(key) = &**key else {
                    continue;
                };
                if !apply_field(&mut fields, key, value).map_err(FieldsError::Shape)? {
                    continue;
                }
                if seen.contains(&key.as_str()) {
                    return Err(FieldsError::Shape(ShapeError::Repeated(key.clone())));
                }
                seen.push(key);
            }
            Ok(fields)
        }
        Some(_) => Err(FieldsError::NotAMapping(
            "frontmatter is not a mapping".to_owned(),
        )),
    }
}

/// Stores one entry when its key is recognised; returns whether it was.
fn apply_field(fields: &mut Fields, key: &str, value: &Value) -> Result<bool, ShapeError> {
    let slot = match key {
        "title" => &mut fields.title,
        "name" => &mut fields.name,
        "type" => &mut fields.r#type,
        "function_id" => &mut fields.function_id,
        "description" => &mut fields.description,
        "logo" => &mut fields.logo,
        "model" => &mut fields.model,
        "reasoning_effort" => &mut fields.reasoning_effort,
        "icon" => &mut fields.icon,
        "color" => &mut fields.color,
        "extends" => &mut fields.extends,
        "disable-model-invocation" => {
            fields.disable_model_invocation = boolean(key, value)?;
            return Ok(true);
        }
        "skills" => {
            fields.skills = string_list(key, value)?;
            return Ok(true);
        }
        // Not counted as recognised: a repeated or misshapen `compatibility` is the spec
        // checks' to report (`rules::spec`), and must not cost the file its other fields.
        "compatibility" => {
            fields.compatibility = match value {
                Value::Text(text) => Some(text.clone()),
                _ => None,
            };
            return Ok(false);
        }
        // Not counted as recognised either, for the same reason: only a profile gives them a
        // meaning, and the profile rule refuses a misshapen one (`rules::agent`).
        "functions" => {
            fields.functions = match string_list(key, value) {
                Ok(list) => list.map(Lenient::Value),
                Err(_) => Some(Lenient::Misshapen),
            };
            return Ok(false);
        }
        "skills_index" => {
            fields.skills_index = match value {
                Value::Null => None,
                Value::Bool(flag, _) => Some(Lenient::Value(*flag)),
                _ => Some(Lenient::Misshapen),
            };
            return Ok(false);
        }
        _ => return Ok(false),
    };
    *slot = string(key, value)?;
    Ok(true)
}

/// A string field: any non-null scalar, as its text.
fn string(key: &str, value: &Value) -> Result<Option<String>, ShapeError> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(_, text) | Value::Number(text) | Value::Text(text) => Ok(Some(text.clone())),
        Value::Seq(_) | Value::Map(_) => Err(ShapeError::NotAString(key.to_owned())),
    }
}

/// A boolean field: absent or null means false.
fn boolean(key: &str, value: &Value) -> Result<bool, ShapeError> {
    match value {
        Value::Null => Ok(false),
        Value::Bool(flag, _) => Ok(*flag),
        Value::Number(_) | Value::Text(_) | Value::Seq(_) | Value::Map(_) => {
            Err(ShapeError::NotABoolean(key.to_owned()))
        }
    }
}

/// A list of strings: every entry a non-null scalar, kept as its text.
fn string_list(key: &str, value: &Value) -> Result<Option<Vec<String>>, ShapeError> {
    match value {
        Value::Null => Ok(None),
        Value::Seq(items) => items
            .iter()
            .map(|item| {
                item.scalar_text()
                    .map(str::to_owned)
                    .ok_or_else(|| ShapeError::EntryNotAString(key.to_owned()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Value::Bool(..) | Value::Number(_) | Value::Text(_) | Value::Map(_) => {
            Err(ShapeError::NotAList(key.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn parts(content: &str) -> (Option<&str>, &str) {
        let split = split(content);
        (split.yaml, &content[split.body_offset..])
    }

    // ---- split (§2.4) ----

    #[test]
    fn lf_block_and_body() {
        let content = "---\ntitle: x\n---\n# Body\n";
        assert_eq!(parts(content), (Some("title: x"), "# Body\n"));
        assert_eq!(split(content).body_offset, 17);
    }

    #[test]
    fn crlf_block_keeps_carriage_returns_in_yaml() {
        let content = "---\r\ntitle: x\r\nname: y\r\n---\r\nBody\r\n";
        assert_eq!(parts(content), (Some("title: x\r\nname: y\r"), "Body\r\n"));
    }

    #[test]
    fn body_is_byte_exact() {
        let content = "---\na: 1\n---\n\n\n  indented\n\n";
        assert_eq!(parts(content), (Some("a: 1"), "\n\n  indented\n\n"));
    }

    #[test]
    fn empty_blocks() {
        assert_eq!(parts("---\n---\nbody"), (Some(""), "body"));
        assert_eq!(parts("---\r\n---\r\nbody"), (Some(""), "body"));
        assert_eq!(parts("---\n---"), (Some(""), ""));
        assert_eq!(parts("---\n\n---\nbody"), (Some(""), "body"));
    }

    #[test]
    fn closing_fence_at_end_of_file_without_newline() {
        let content = "---\ntitle: x\n---";
        assert_eq!(parts(content), (Some("title: x"), ""));
        assert_eq!(split(content).body_offset, content.len());
        let crlf = "---\r\ntitle: x\r\n---\r";
        assert_eq!(parts(crlf), (Some("title: x\r"), ""));
        assert_eq!(split(crlf).body_offset, crlf.len());
    }

    #[test]
    fn unclosed_block_is_no_frontmatter() {
        for content in [
            "---\ntitle: x\nbody\n",
            "---\ntitle: x\n--- \nbody\n",
            "---\ntitle: x\n----\nbody\n",
            "---\ntitle: x\n---x\n",
            "---\n",
            "---\r\n",
        ] {
            assert_eq!(
                split(content),
                Split {
                    yaml: None,
                    body_offset: 0
                },
                "{content:?}"
            );
        }
    }

    #[test]
    fn opener_must_be_at_byte_zero_and_alone_on_its_line() {
        for content in [
            " ---\na: 1\n---\nbody",
            "\n---\na: 1\n---\nbody",
            "--- \na: 1\n---\nbody",
            "----\na: 1\n---\nbody",
            "---",
            "",
            "# Title\n---\na: 1\n---\n",
        ] {
            assert_eq!(split(content).yaml, None, "{content:?}");
            assert_eq!(split(content).body_offset, 0, "{content:?}");
        }
    }

    #[test]
    fn first_closing_fence_wins() {
        let content = "---\na: 1\n---\nmiddle\n---\nend\n";
        assert_eq!(parts(content), (Some("a: 1"), "middle\n---\nend\n"));
    }

    #[test]
    fn skipped_near_fences_then_a_real_one() {
        let content = "---\na: 1\n---- no\n--- no\n---\r\nbody";
        assert_eq!(parts(content), (Some("a: 1\n---- no\n--- no"), "body"));
    }

    #[test]
    fn mixed_endings_follow_the_fence_found() {
        // LF opener, CRLF closing fence.
        assert_eq!(parts("---\na: 1\n---\r\nbody"), (Some("a: 1"), "body"));
        // CRLF opener, LF closing fence.
        assert_eq!(parts("---\r\na: 1\r\n---\nbody"), (Some("a: 1\r"), "body"));
    }

    #[test]
    fn multibyte_text_around_fences() {
        let content = "---\ntitle: café ☕\n---\nnaïve body";
        assert_eq!(parts(content), (Some("title: café ☕"), "naïve body"));
    }

    // ---- parse_fields ----

    fn fields(yaml: &str) -> Fields {
        match parse_fields(yaml) {
            Ok(fields) => fields,
            Err(why) => panic!("{yaml:?} should parse: {why:?}"),
        }
    }

    #[test]
    fn empty_or_null_yaml_is_default() {
        for yaml in ["", "  \n\t\n", "\r", "~", "null", "# comment only\n"] {
            assert_eq!(fields(yaml), Fields::default(), "{yaml:?}");
        }
    }

    #[test]
    fn every_recognised_key() {
        let yaml = "\
title: The Title
name: the-name
type: how-to
function_id: shell::exec
description: Says what it does.
disable-model-invocation: true
logo: \"🚀\"
skills: [a/index, b]
model: gpt-x
reasoning_effort: high
icon: rocket
color: '#ff0000'
extends: iii
compatibility: Needs git
functions: [engine::functions::list]
skills_index: false
unknown: [ignored, {deep: true}]
";
        let expected = Fields {
            title: Some("The Title".into()),
            name: Some("the-name".into()),
            r#type: Some("how-to".into()),
            function_id: Some("shell::exec".into()),
            description: Some("Says what it does.".into()),
            disable_model_invocation: true,
            logo: Some("🚀".into()),
            skills: Some(vec!["a/index".into(), "b".into()]),
            model: Some("gpt-x".into()),
            reasoning_effort: Some("high".into()),
            icon: Some("rocket".into()),
            color: Some("#ff0000".into()),
            extends: Some("iii".into()),
            compatibility: Some("Needs git".into()),
            functions: Some(Lenient::Value(vec!["engine::functions::list".into()])),
            skills_index: Some(Lenient::Value(false)),
        };
        assert_eq!(fields(yaml), expected);
    }

    /// `compatibility` is the spec checks' to judge: a misshapen or repeated one is left out,
    /// and the block keeps its other fields.
    #[test]
    fn compatibility_is_read_leniently() {
        let listed = fields("name: n\ncompatibility: [a]\n");
        assert_eq!(listed.name.as_deref(), Some("n"));
        assert_eq!(listed.compatibility, None);
        let twice = fields("compatibility: a\ncompatibility: b\n");
        assert_eq!(twice.compatibility.as_deref(), Some("b"));
    }

    #[test]
    fn crlf_yaml_parses_without_carriage_returns_in_values() {
        let content = "---\r\ntitle: x\r\ndescription: y\r\n---\r\nbody";
        let yaml = split(content).yaml.expect("block");
        let parsed = fields(yaml);
        assert_eq!(parsed.title.as_deref(), Some("x"));
        assert_eq!(parsed.description.as_deref(), Some("y"));
    }

    #[test]
    fn strings_are_kept_as_written() {
        let parsed = fields("title: '  padded  '\ndescription: |\n  line one\n  line two\n");
        assert_eq!(parsed.title.as_deref(), Some("  padded  "));
        assert_eq!(parsed.description.as_deref(), Some("line one\nline two\n"));
    }

    #[test]
    fn non_string_scalars_keep_their_text() {
        let parsed = fields("title: 42\nname: 3.10\ntype: true\nmodel: 0x1F\nicon: 1e3\n");
        assert_eq!(parsed.title.as_deref(), Some("42"));
        assert_eq!(parsed.name.as_deref(), Some("3.10"));
        assert_eq!(parsed.r#type.as_deref(), Some("true"));
        assert_eq!(parsed.model.as_deref(), Some("0x1F"));
        assert_eq!(parsed.icon.as_deref(), Some("1e3"));
    }

    #[test]
    fn null_string_fields_are_absent() {
        let parsed = fields("title:\nname: ~\ntype: null\ndescription: \"\"\n");
        assert_eq!(parsed.title, None);
        assert_eq!(parsed.name, None);
        assert_eq!(parsed.r#type, None);
        // A quoted empty string is a string, not null.
        assert_eq!(parsed.description.as_deref(), Some(""));
    }

    #[test]
    fn collections_in_string_fields_are_errors_naming_the_key() {
        assert_eq!(
            parse_fields("title: [a, b]"),
            Err(FieldsError::Shape(ShapeError::NotAString("title".into())))
        );
        assert_eq!(
            parse_fields("function_id:\n  a: b\n"),
            Err(FieldsError::Shape(ShapeError::NotAString(
                "function_id".into()
            )))
        );
    }

    #[test]
    fn disable_model_invocation_is_a_boolean() {
        assert!(!fields("title: x").disable_model_invocation);
        assert!(!fields("disable-model-invocation:").disable_model_invocation);
        assert!(!fields("disable-model-invocation: false").disable_model_invocation);
        assert!(fields("disable-model-invocation: TRUE").disable_model_invocation);
        // Only the hyphenated key counts.
        assert!(!fields("disable_model_invocation: true").disable_model_invocation);
        for bad in ["'true'", "yes", "1", "[true]", "{a: 1}"] {
            let err = parse_fields(&format!("disable-model-invocation: {bad}"))
                .expect_err("not a boolean");
            let err = err.message();
            assert!(err.contains("`disable-model-invocation`"), "{bad}: {err}");
        }
    }

    #[test]
    fn functions_and_skills_index_are_read_leniently() {
        let read = fields("functions: [engine::functions::list, 7]\nskills_index: false\n");
        assert_eq!(
            read.functions,
            Some(Lenient::Value(vec![
                "engine::functions::list".into(),
                "7".into()
            ]))
        );
        assert_eq!(read.skills_index, Some(Lenient::Value(false)));
        assert_eq!(fields("functions:\nskills_index: ~\n").functions, None);
        assert_eq!(fields("skills_index: ~\n").skills_index, None);
        // Another shape is kept as such, and costs the file none of its other fields.
        let odd = fields("name: x\nfunctions: one::fn\nskills_index: 'no'\n");
        assert_eq!(odd.name.as_deref(), Some("x"));
        assert_eq!(odd.functions, Some(Lenient::Misshapen));
        assert_eq!(odd.skills_index, Some(Lenient::Misshapen));
    }

    #[test]
    fn skills_is_a_list_of_scalars() {
        assert_eq!(fields("skills:").skills, None);
        assert_eq!(fields("skills: []").skills, Some(vec![]));
        assert_eq!(
            fields("skills:\n  - a\n  - 7\n  - true\n").skills,
            Some(vec!["a".into(), "7".into(), "true".into()])
        );
        for bad in ["skills: a", "skills: {a: 1}", "skills: 3"] {
            assert_eq!(
                parse_fields(bad),
                Err(FieldsError::Shape(ShapeError::NotAList("skills".into()))),
                "{bad}"
            );
        }
        for bad in ["skills: [a, [b]]", "skills: [a, {b: c}]", "skills: [a, ~]"] {
            assert_eq!(
                parse_fields(bad),
                Err(FieldsError::Shape(ShapeError::EntryNotAString(
                    "skills".into()
                ))),
                "{bad}"
            );
        }
    }

    #[test]
    fn top_level_must_be_a_mapping() {
        for yaml in ["- a\n- b\n", "just text", "42", "[a]"] {
            assert_eq!(
                parse_fields(yaml),
                Err(FieldsError::NotAMapping(
                    "frontmatter is not a mapping".to_owned()
                )),
                "{yaml:?}"
            );
        }
    }

    #[test]
    fn non_string_keys_are_ignored() {
        let parsed = fields("[title]: x\n{a: 1}: y\n~: z\ntitle: kept\n");
        assert_eq!(parsed.title.as_deref(), Some("kept"));
    }

    #[test]
    fn aliases_resolve_for_fields() {
        let parsed = fields("name: &n shared\ntitle: *n\nskills: &s [a]\n");
        assert_eq!(parsed.title.as_deref(), Some("shared"));
        assert_eq!(parsed.skills, Some(vec!["a".into()]));
    }

    #[test]
    fn repeated_recognised_key_is_an_error_but_unknown_ones_may_repeat() {
        assert_eq!(
            parse_fields("title: a\ntitle: b\n"),
            Err(FieldsError::Shape(ShapeError::Repeated("title".into())))
        );
        assert_eq!(
            fields("tag: a\ntag: b\ntitle: x\n").title.as_deref(),
            Some("x")
        );
    }

    #[test]
    fn syntax_errors_carry_the_parser_message_without_a_period() {
        for yaml in [
            "title: [unclosed",
            "a: b: c",
            "- a\nb: c\n",
            "title: \"open",
        ] {
            let err = parse_fields(yaml).expect_err("syntax error");
            assert!(
                matches!(err, FieldsError::NotAMapping(_)),
                "{yaml:?}: {err:?}"
            );
            let err = err.message();
            assert!(!err.is_empty() && !err.ends_with('.'), "{yaml:?}: {err}");
            assert!(err.contains("line"), "{yaml:?}: {err}");
        }
    }

    #[test]
    fn billion_laughs_is_refused_quickly() {
        let mut yaml = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for level in 1..9 {
            let previous = format!("*a{}", level - 1);
            let items = [previous.as_str(); 9].join(", ");
            yaml.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        yaml.push_str("title: boom\n");
        let started = Instant::now();
        let err = parse_fields(&yaml).expect_err("must refuse");
        let err = err.message();
        assert_eq!(
            err,
            format!("frontmatter YAML is too complex (more than {MAX_YAML_NODES} nodes)")
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        // As deep as a whole 256 KiB file allows, in both flow and block styles.
        let depth = 120_000;
        let flow = format!("title: {}{}", "[".repeat(depth), "]".repeat(depth));
        let err = parse_fields(&flow).expect_err("too deep");
        let err = err.message();
        assert!(
            err.contains("nested too deeply") || err.contains("recursion limit"),
            "{err}"
        );

        let block = format!("{}x\n", "- ".repeat(depth));
        let err = parse_fields(&block).expect_err("too deep");
        let err = err.message();
        assert!(err.contains("nested too deeply"), "{err}");

        let mappings = format!("{{a: {}", "{a: ".repeat(depth));
        assert!(parse_fields(&mappings).is_err());
    }

    #[test]
    fn second_document_in_the_block_is_an_error() {
        assert!(parse_fields("title: a\n--- \ntitle: b\n").is_err());
    }

    #[test]
    fn surrogate_pair_escapes_from_json_emitters_parse() {
        let yaml = "name: scope\ndescription: \"Looks far.\"\nemoji: \"\\uD83D\\uDD2D\"\nlogo: \"\\uD83D\\uDD2D\"";
        assert!(matches!(
            parse_fields(yaml),
            Err(FieldsError::NotAMapping(_))
        ));
        let Frontmatter::Present(fields) = read_block(yaml) else {
            panic!("the joined escapes parse: {:?}", read_block(yaml));
        };
        assert_eq!(fields.name.as_deref(), Some("scope"));
        assert_eq!(fields.description.as_deref(), Some("Looks far."));
        assert_eq!(fields.logo.as_deref(), Some("🔭"));
    }

    #[test]
    fn a_block_that_is_not_yaml_is_salvaged_with_its_error() {
        let yaml =
            "name: laravel-verification\ndescription: Verification loop: env checks, tests.\n";
        let Frontmatter::Salvaged { fields, error } = read_block(yaml) else {
            panic!("expected a salvaged block: {:?}", read_block(yaml));
        };
        assert_eq!(fields.name.as_deref(), Some("laravel-verification"));
        assert_eq!(
            fields.description.as_deref(),
            Some("Verification loop: env checks, tests.")
        );
        assert!(error.contains("line"), "{error}");
        assert!(matches!(
            read_block("- a\n- b\n"),
            Frontmatter::Salvaged { error, .. } if error == "frontmatter is not a mapping"
        ));
        // A mapping with a badly shaped known key is not salvaged: it is invalid.
        assert_eq!(
            read_block("title: [a]"),
            Frontmatter::Invalid("`title` must be a string".to_owned())
        );
        assert!(matches!(read_block("title: x"), Frontmatter::Present(_)));
    }

    #[test]
    fn a_block_with_merge_conflict_markers_is_salvaged_naming_them() {
        let yaml = "name: Builder\n<<<<<<< HEAD\ndescription: Ours.\n=======\ndescription: Theirs.\n>>>>>>> feature\n";
        let block = read_block(yaml);
        assert!(block.holds_conflict_markers(), "{block:?}");
        let Frontmatter::Salvaged { fields, .. } = block else {
            panic!("salvaged");
        };
        assert_eq!(fields.name.as_deref(), Some("Builder"));
        assert!(!read_block("name: a\ndescription: b: c\n").holds_conflict_markers());
    }
}
