//! The spec checks' rules: one variant per way a `SKILL.md` can break the Agent Skills
//! specification, each with a stable code (`S100`…`S171`) that callers and tests compare, and
//! a sentence for people. These codes are the spec checks' own table, apart from the error
//! codes of `src/code.rs`: a rule never refuses a request, it only informs.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The most characters a name may have.
pub const MAX_NAME: usize = 64;
/// The most characters a description may have.
pub const MAX_DESCRIPTION: usize = 1_024;
/// The most characters `compatibility` may have.
pub const MAX_COMPATIBILITY: usize = 500;
/// The spec's guidance for the body: under this many lines…
pub const BODY_LINES_GUIDANCE: usize = 500;
/// …and under this many tokens, estimated as [`CHARS_PER_TOKEN`] characters each.
pub const BODY_TOKENS_GUIDANCE: usize = 5_000;
pub const CHARS_PER_TOKEN: usize = 4;

/// The top-level keys the specification defines.
pub const SPEC_KEYS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// Whether a rule makes the file invalid or only departs from the spec's guidance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One violation of the specification, with what the sentence needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rule {
    /// The file does not start with a `---` frontmatter block.
    NoFrontmatter,
    /// The block is not YAML (the parser's reason).
    NotYaml(String),
    /// The block is YAML but not a mapping.
    NotAMapping,
    /// A top-level key is given more than once.
    KeyRepeated(String),
    NameMissing,
    /// `name` is blank, or not a scalar.
    NameEmpty,
    /// `name` is longer than [`MAX_NAME`] (its length).
    NameTooLong(usize),
    /// `name` has capital letters.
    NameNotLowercase(String),
    /// `name` has a character other than `a-z`, `0-9` and `-` (the first such).
    NameCharset(char),
    /// `name` starts or ends with a hyphen.
    NameEdgeHyphen,
    /// `name` has two hyphens in a row.
    NameDoubleHyphen,
    /// `name` differs from the name of the folder holding the file.
    NameNotFolder {
        name: String,
        folder: String,
    },
    DescriptionMissing,
    /// `description` is blank, or not a scalar.
    DescriptionEmpty,
    /// `description` is longer than [`MAX_DESCRIPTION`] (its length).
    DescriptionTooLong(usize),
    /// `compatibility` is not a string.
    CompatibilityNotString,
    /// `compatibility` is longer than [`MAX_COMPATIBILITY`] (its length).
    CompatibilityTooLong(usize),
    /// `metadata` is not a mapping.
    MetadataNotAMap,
    /// A `metadata` entry whose key or value is not a string (the key, as written).
    MetadataNotString(String),
    /// `allowed-tools` is neither a string nor a list of strings.
    AllowedToolsNotString,
    /// `allowed-tools` is a YAML list of strings, the form some agents write, where the spec
    /// gives a space-delimited string. A warning: the field is experimental in the spec, and
    /// agents (and the reference validator) accept the list.
    AllowedToolsList,
    /// A top-level key the spec does not define.
    UnknownKey(String),
    /// The body has more lines than the spec's guidance (its line count). A warning.
    BodyLines(usize),
    /// The body's estimated tokens exceed the spec's guidance (the estimate). A warning.
    BodyTokens(usize),
}

impl Rule {
    /// The rule's stable code.
    pub const fn code(&self) -> &'static str {
        match self {
            Rule::NoFrontmatter => "S100",
            Rule::NotYaml(_) => "S101",
            Rule::NotAMapping => "S102",
            Rule::KeyRepeated(_) => "S103",
            Rule::NameMissing => "S110",
            Rule::NameEmpty => "S111",
            Rule::NameTooLong(_) => "S112",
            Rule::NameNotLowercase(_) => "S113",
            Rule::NameCharset(_) => "S114",
            Rule::NameEdgeHyphen => "S115",
            Rule::NameDoubleHyphen => "S116",
            Rule::NameNotFolder { .. } => "S117",
            Rule::DescriptionMissing => "S120",
            Rule::DescriptionEmpty => "S121",
            Rule::DescriptionTooLong(_) => "S122",
            Rule::CompatibilityNotString => "S130",
            Rule::CompatibilityTooLong(_) => "S131",
            Rule::MetadataNotAMap => "S140",
            Rule::MetadataNotString(_) => "S141",
            Rule::AllowedToolsNotString => "S150",
            Rule::AllowedToolsList => "S151",
            Rule::UnknownKey(_) => "S160",
            Rule::BodyLines(_) => "S170",
            Rule::BodyTokens(_) => "S171",
        }
    }

    pub const fn severity(&self) -> Severity {
        match self {
            Rule::AllowedToolsList | Rule::BodyLines(_) | Rule::BodyTokens(_) => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// The rule as the answers carry it: `{code, severity, message}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "code": self.code(),
            "severity": self.severity().as_str(),
            "message": self.to_string(),
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::NoFrontmatter => {
                f.write_str("the file does not open with a --- frontmatter block")
            }
            Rule::NotYaml(why) => write!(f, "the frontmatter is not valid YAML: {why}"),
            Rule::NotAMapping => f.write_str("the frontmatter is not a mapping of keys to values"),
            Rule::KeyRepeated(key) => {
                write!(f, "`{key}` appears more than once in the frontmatter")
            }
            Rule::NameMissing => f.write_str("`name` is required and missing"),
            Rule::NameEmpty => f.write_str("`name` must be a non-empty string"),
            Rule::NameTooLong(n) => {
                write!(f, "`name` is {n} characters long; the limit is {MAX_NAME}")
            }
            Rule::NameNotLowercase(name) => {
                write!(f, "`name` \"{}\" has capital letters", visible(name))
            }
            Rule::NameCharset(c) => write!(
                f,
                "`name` may hold only a-z, 0-9 and hyphens, and has {}",
                visible_char(*c)
            ),
            Rule::NameEdgeHyphen => f.write_str("`name` must not start or end with a hyphen"),
            Rule::NameDoubleHyphen => f.write_str("`name` must not hold two hyphens in a row"),
            Rule::NameNotFolder { name, folder } => write!(
                f,
                "`name` \"{}\" differs from its folder's name \"{}\"",
                visible(name),
                visible(folder)
            ),
            Rule::DescriptionMissing => f.write_str("`description` is required and missing"),
            Rule::DescriptionEmpty => f.write_str("`description` must be a non-empty string"),
            Rule::DescriptionTooLong(n) => write!(
                f,
                "`description` is {n} characters long; the limit is {MAX_DESCRIPTION}"
            ),
            Rule::CompatibilityNotString => f.write_str("`compatibility` must be a string"),
            Rule::CompatibilityTooLong(n) => write!(
                f,
                "`compatibility` is {n} characters long; the limit is {MAX_COMPATIBILITY}"
            ),
            Rule::MetadataNotAMap => {
                f.write_str("`metadata` must be a mapping of strings to strings")
            }
            Rule::MetadataNotString(key) => write!(
                f,
                "`metadata` entry `{key}` is not a string key with a string value"
            ),
            Rule::AllowedToolsNotString => {
                f.write_str("`allowed-tools` must be a string of space-separated tools")
            }
            Rule::AllowedToolsList => f.write_str(
                "`allowed-tools` is a list; the specification writes it as one string of space-separated tools",
            ),
            Rule::UnknownKey(key) => {
                write!(f, "`{key}` is not a frontmatter key the specification defines")
            }
            Rule::BodyLines(n) => write!(
                f,
                "the body has {n} lines; the specification advises under {BODY_LINES_GUIDANCE}"
            ),
            Rule::BodyTokens(n) => write!(
                f,
                "the body is about {n} tokens; the specification advises under {BODY_TOKENS_GUIDANCE}"
            ),
        }
    }
}

/// A character as a message shows it: quoted, or as `U+XXXX` when it is a control or space
/// character (which a terminal would act on, or show as nothing).
fn visible_char(c: char) -> String {
    match crate::doc::acts_on_display(c) || c.is_whitespace() {
        true => format!("U+{:04X}", u32::from(c)),
        false => format!("'{c}'"),
    }
}

/// `text` with its control characters as `U+XXXX`, so that a message names what is there.
fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(crate::doc::acts_on_display) {
        return text.into();
    }
    text.chars()
        .map(|c| match crate::doc::acts_on_display(c) {
            true => format!("U+{:04X}", u32::from(c)),
            false => c.to_string(),
        })
        .collect::<String>()
        .into()
}
