//! The Agent Skills specification's rules for a `SKILL.md` (agentskills.io): what its
//! frontmatter must hold, checked the way the spec's reference validator (`skills-ref`, on npm)
//! checks it, so that the two agree on which files are valid. Where the validator is looser than
//! the spec's text (it turns `metadata` values into strings before looking, never looks at
//! `allowed-tools`, and takes some letters outside `a-z` in names), these checks follow the text;
//! `tests/library/spec_agreement.rs` lists each file where that makes the verdicts differ.
//!
//! [`check`] depends on the text alone, so the index computes it once per distinct content at
//! reconcile; the one rule that depends on where the file sits (its name equals its folder's)
//! is added by [`Conformance::problems`].
//!
//! Architecture invariant: pure, like the rest of `rules`.

mod rule;
mod text;

pub use rule::{
    BODY_LINES_GUIDANCE, BODY_TOKENS_GUIDANCE, CHARS_PER_TOKEN, MAX_COMPATIBILITY, MAX_DESCRIPTION,
    MAX_NAME, Rule, SPEC_KEYS, Severity,
};
pub use text::js_len;

use serde::{Deserialize, Serialize};

use crate::doc::frontmatter::{self, MAX_YAML_DEPTH, MAX_YAML_NODES};
use crate::yaml::{self, Limits, Value};
use text::js_trim;

/// The file name the specification's rules apply to.
pub const SKILL_FILE: &str = "SKILL.md";

const LIMITS: Limits = Limits {
    max_nodes: MAX_YAML_NODES,
    max_depth: MAX_YAML_DEPTH,
    aliases: true,
};

/// What the specification says of one file's text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conformance {
    /// The rules the text breaks, in code order (the folder rule excepted).
    pub rules: Vec<Rule>,
    /// `name`, trimmed, when it is a non-empty string: what the folder rule compares.
    pub name: Option<String>,
    /// The spec's optional fields, when present with the shape the spec gives them.
    pub fields: SpecFields,
}

/// The optional fields of the specification, as `skills::get` returns them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecFields {
    pub license: Option<String>,
    pub compatibility: Option<String>,
    /// The entries of `metadata` whose key and value are scalars, as their text, in file order.
    pub metadata: Option<Vec<(String, String)>>,
    pub allowed_tools: Option<String>,
}

impl Conformance {
    /// Every rule the file breaks, the folder rule included: `folder` is the name of the
    /// folder holding the file.
    pub fn problems(&self, folder: &str) -> Vec<Rule> {
        let mut rules = self.rules.clone();
        if let Some(name) = &self.name {
            if name != folder {
                rules.push(Rule::NameNotFolder {
                    name: name.clone(),
                    folder: folder.to_owned(),
                });
                rules.sort_by_key(Rule::code);
            }
        }
        rules
    }
}

/// Whether a list of rules leaves the file valid (warnings allowed).
pub fn valid(rules: &[Rule]) -> bool {
    rules.iter().all(|r| r.severity() == Severity::Warning)
}

/// Checks a file's text (already decoded) against the specification.
pub fn check(text: &str) -> Conformance {
    let mut out = Conformance::default();
    let split = frontmatter::split(text);
    let Some(block) = split.yaml else {
        out.rules.push(Rule::NoFrontmatter);
        return out;
    };
    match yaml::load_at(block, &LIMITS, frontmatter::BLOCK_FIRST_LINE) {
        Err(why) => {
            out.rules.push(Rule::NotYaml(why.to_string()));
            one_line_fields(&mut out, block);
        }
        Ok(None) => keys(&mut out, &[]),
        Ok(Some(node)) => match &*node {
            Value::Null => keys(&mut out, &[]),
            Value::Map(entries) => keys(&mut out, entries),
            _ => out.rules.push(Rule::NotAMapping),
        },
    }
    body(&mut out.rules, &text[split.body_offset..]);
    out.rules.sort_by_key(Rule::code);
    out
}

/// The rules of the top-level mapping's keys, and the spec's fields it holds.
fn keys(out: &mut Conformance, entries: &[(yaml::Node, yaml::Node)]) {
    let mut seen: Vec<String> = Vec::new();
    let mut repeated: Vec<String> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for (key, _) in entries {
        let key = key_text(key);
        if seen.contains(&key) {
            if !repeated.contains(&key) {
                repeated.push(key);
            }
            continue;
        }
        if !SPEC_KEYS.contains(&key.as_str()) {
            unknown.push(key.clone());
        }
        seen.push(key);
    }
    out.rules
        .extend(repeated.into_iter().map(Rule::KeyRepeated));
    unknown.sort();
    out.rules.extend(unknown.into_iter().map(Rule::UnknownKey));

    let get = |wanted: &str| {
        entries
            .iter()
            .find(|(key, _)| key_text(key) == wanted)
            .map(|(_, value)| &**value)
    };
    match get("name") {
        None => out.rules.push(Rule::NameMissing),
        Some(value) => out.name = name(&mut out.rules, value),
    }
    match get("description") {
        None => out.rules.push(Rule::DescriptionMissing),
        Some(value) => match value.scalar_text().filter(|d| !js_trim(d).is_empty()) {
            None => out.rules.push(Rule::DescriptionEmpty),
            Some(description) => {
                let n = js_len(description);
                if n > MAX_DESCRIPTION {
                    out.rules.push(Rule::DescriptionTooLong(n));
                }
            }
        },
    }
    if let Some(value) = get("compatibility") {
        match value {
            Value::Text(compatibility) => {
                let n = js_len(compatibility);
                if n > MAX_COMPATIBILITY {
                    out.rules.push(Rule::CompatibilityTooLong(n));
                }
                out.fields.compatibility = Some(compatibility.clone());
            }
            _ => out.rules.push(Rule::CompatibilityNotString),
        }
    }
    if let Some(value) = get("metadata") {
        out.fields.metadata = metadata(&mut out.rules, value);
    }
    if let Some(value) = get("allowed-tools") {
        out.fields.allowed_tools = allowed_tools(&mut out.rules, value);
    }
    out.fields.license = get("license")
        .and_then(Value::scalar_text)
        .map(str::to_owned);
}

/// The optional fields a block that is not YAML still gives on its one-line `key: value`
/// lines, as the worker's own reading of such a block takes them (`compatibility` comes from
/// that reading): what `get` answers then, so an author's `license` is not lost to a colon in
/// the description.
fn one_line_fields(out: &mut Conformance, block: &str) {
    for (key, value) in frontmatter::salvage::one_line_values(block) {
        match key {
            "license" => out.fields.license = Some(value),
            "allowed-tools" => out.fields.allowed_tools = Some(value),
            _ => {}
        }
    }
}

/// A key as the reference sees it: JavaScript object keys are strings, so a scalar key is its
/// text (`null` for a null key), and a collection key is never a spec key.
fn key_text(key: &Value) -> String {
    match key {
        Value::Null => "null".to_owned(),
        Value::Seq(_) | Value::Map(_) => "[collection]".to_owned(),
        scalar => scalar.scalar_text().unwrap_or_default().to_owned(),
    }
}

/// The name rules; the trimmed name when it is usable for the folder rule.
fn name(rules: &mut Vec<Rule>, value: &Value) -> Option<String> {
    let Some(name) = value.scalar_text().map(js_trim).filter(|n| !n.is_empty()) else {
        rules.push(Rule::NameEmpty);
        return None;
    };
    let n = js_len(name);
    if n > MAX_NAME {
        rules.push(Rule::NameTooLong(n));
    }
    if name.chars().any(char::is_uppercase) {
        rules.push(Rule::NameNotLowercase(name.to_owned()));
    }
    if name.starts_with('-') || name.ends_with('-') {
        rules.push(Rule::NameEdgeHyphen);
    }
    if name.contains("--") {
        rules.push(Rule::NameDoubleHyphen);
    }
    // Capitals are their own rule; any other character outside a-z, 0-9 and `-` is this one.
    let stray = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || c.is_uppercase()));
    if let Some(c) = stray {
        rules.push(Rule::NameCharset(c));
    }
    Some(name.to_owned())
}

/// The metadata rules; its string entries.
fn metadata(rules: &mut Vec<Rule>, value: &Value) -> Option<Vec<(String, String)>> {
    let Value::Map(entries) = value else {
        rules.push(Rule::MetadataNotAMap);
        return None;
    };
    let mut kept = Vec::new();
    for (key, value) in entries {
        match (&**key, &**value) {
            (Value::Text(key), Value::Text(value)) => kept.push((key.clone(), value.clone())),
            (key, _) => rules.push(Rule::MetadataNotString(key_text(key))),
        }
    }
    Some(kept)
}

/// The `allowed-tools` rules; the tools as the spec's one string (a list joined with spaces).
fn allowed_tools(rules: &mut Vec<Rule>, value: &Value) -> Option<String> {
    match value {
        Value::Text(tools) => Some(tools.clone()),
        Value::Seq(items) => {
            let tools: Option<Vec<&str>> = items.iter().map(|item| item.scalar_text()).collect();
            match tools {
                Some(tools) => {
                    rules.push(Rule::AllowedToolsList);
                    Some(tools.join(" "))
                }
                None => {
                    rules.push(Rule::AllowedToolsNotString);
                    None
                }
            }
        }
        _ => {
            rules.push(Rule::AllowedToolsNotString);
            None
        }
    }
}

/// The body's size against the spec's guidance (warnings).
fn body(rules: &mut Vec<Rule>, body: &str) {
    let lines = body.lines().count();
    if lines > BODY_LINES_GUIDANCE {
        rules.push(Rule::BodyLines(lines));
    }
    let tokens = js_len(body).div_ceil(CHARS_PER_TOKEN);
    if tokens > BODY_TOKENS_GUIDANCE {
        rules.push(Rule::BodyTokens(tokens));
    }
}

#[cfg(test)]
mod tests;
