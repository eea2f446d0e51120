//! What can still be read from a frontmatter block that is not YAML.
//!
//! Real files break YAML in a few common ways: an unquoted `: ` inside a description
//! (`description: Use it for: x`), template braces (`title: {{title}}`), or emoji written as
//! JSON surrogate-pair escapes (`"\uD83D\uDD2D"`, which YAML refuses). Dropping the whole block
//! would lose the name and description people wrote, so the top-level `key: value` lines are
//! read one by one instead, and the file is reported in `check` so its author can fix it.
//!
//! Only single-line scalars are read: a top-level line, a known key, `: `, and a plain,
//! single-quoted or double-quoted value. Nested or multi-line values are left out.

use super::Fields;

/// Rewrites each escaped UTF-16 surrogate pair in `yaml` (`\uD83D\uDD2D`) as the one 8-digit
/// escape YAML accepts for it (`\U0001F52D`); `None` when there is none. Only escapes (an odd
/// number of backslashes in front) are touched; a lone surrogate is left for the parser to refuse.
pub fn join_surrogate_escapes(yaml: &str) -> Option<String> {
    let bytes = yaml.as_bytes();
    let mut out = String::with_capacity(yaml.len());
    let mut copied = 0;
    let mut i = 0;
    let mut changed = false;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        // A run of backslashes: pairs are literal backslashes; an odd one escapes what follows.
        let run = bytes[i..].iter().take_while(|b| **b == b'\\').count();
        let escape = i + run - 1;
        i += run;
        if run % 2 == 0 {
            continue;
        }
        let pair = (hex_escape(yaml, escape), hex_escape(yaml, escape + 6));
        if let (Some(high @ 0xD800..=0xDBFF), Some(low @ 0xDC00..=0xDFFF)) = pair {
            let scalar = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
            out.push_str(&yaml[copied..escape]);
            out.push_str(&format!("\\U{scalar:08X}"));
            copied = escape + 12;
            i = copied;
            changed = true;
        }
    }
    changed.then(|| {
        out.push_str(&yaml[copied..]);
        out
    })
}

/// The code unit of a `\uXXXX` escape starting at byte `at`.
fn hex_escape(text: &str, at: usize) -> Option<u32> {
    let digits = text.get(at..at + 6)?.strip_prefix("\\u")?;
    u32::from_str_radix(digits, 16).ok()
}

/// The recognised fields of the block's top-level `key: value` lines (see the module doc).
pub fn salvage(yaml: &str) -> Fields {
    let mut fields = Fields::default();
    for (key, value) in one_line_values(yaml) {
        match key {
            "title" => fields.title = Some(value),
            "name" => fields.name = Some(value),
            "type" => fields.r#type = Some(value),
            "function_id" => fields.function_id = Some(value),
            "description" => fields.description = Some(value),
            "logo" => fields.logo = Some(value),
            "model" => fields.model = Some(value),
            "reasoning_effort" => fields.reasoning_effort = Some(value),
            "icon" => fields.icon = Some(value),
            "color" => fields.color = Some(value),
            "extends" => fields.extends = Some(value),
            "compatibility" => fields.compatibility = Some(value),
            "disable-model-invocation" => {
                fields.disable_model_invocation =
                    matches!(value.as_str(), "true" | "True" | "TRUE");
            }
            _ => {}
        }
    }
    fields
}

/// The top-level `key: value` lines of a block whose value is a one-line scalar, in order.
/// Nested keys of a mapping that failed to parse are not ours to guess.
pub fn one_line_values(yaml: &str) -> impl Iterator<Item = (&str, String)> {
    yaml.lines()
        .filter(|line| !line.starts_with(char::is_whitespace))
        .filter_map(|line| {
            let (key, rest) = line.split_once(':')?;
            if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
                return None;
            }
            Some((key, scalar(rest.trim())?))
        })
}

/// A one-line scalar value; `None` for null, an empty value, or one that starts a nested or
/// multi-line value (`|`, `>`, `[`, `{`, `&`, `*`, `!`), which this reader does not guess at.
fn scalar(value: &str) -> Option<String> {
    if let Some(quoted) = value.strip_prefix('"') {
        return double_quoted(quoted);
    }
    if let Some(quoted) = value.strip_prefix('\'') {
        let end = single_quote_end(quoted)?;
        return Some(quoted[..end].replace("''", "'"));
    }
    // A comment starts at ` #` in a plain value.
    let plain = value.split(" #").next().unwrap_or_default().trim_end();
    if plain.is_empty()
        || plain.starts_with(['|', '>', '[', '{', '&', '*', '!', '#'])
        || matches!(plain, "~" | "null" | "Null" | "NULL")
    {
        return None;
    }
    Some(plain.to_owned())
}

/// Where a single-quoted value ends: the first `'` not doubled.
fn single_quote_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// A double-quoted value up to its closing quote, with YAML's common escapes decoded
/// (surrogate pairs included); `None` when it is not closed on the line or has a bad escape.
fn double_quoted(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => {
                let escaped = match chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    ' ' => ' ',
                    'u' => {
                        let unit = hex(&mut chars, 4)?;
                        if (0xD800..=0xDBFF).contains(&unit) {
                            let (Some('\\'), Some('u')) = (chars.next(), chars.next()) else {
                                return None;
                            };
                            let low = hex(&mut chars, 4)?;
                            if !(0xDC00..=0xDFFF).contains(&low) {
                                return None;
                            }
                            char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?
                        } else {
                            char::from_u32(unit)?
                        }
                    }
                    'U' => char::from_u32(hex(&mut chars, 8)?)?,
                    'x' => char::from_u32(hex(&mut chars, 2)?)?,
                    _ => return None,
                };
                out.push(escaped);
            }
            c => out.push(c),
        }
    }
    None
}

fn hex(chars: &mut std::str::Chars<'_>, digits: usize) -> Option<u32> {
    let text: String = chars.take(digits).collect();
    if text.len() != digits {
        return None;
    }
    u32::from_str_radix(&text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surrogate_pair_escapes_are_joined() {
        assert_eq!(
            join_surrogate_escapes(r#"emoji: "\uD83D\uDD2D" x"#).as_deref(),
            Some(r#"emoji: "\U0001F52D" x"#)
        );
        assert_eq!(
            join_surrogate_escapes(r#"a: "\ud83d\ude80\uD83D\uDD2D""#).as_deref(),
            Some(r#"a: "\U0001F680\U0001F52D""#)
        );
        // An escaped backslash is not an escape; a lone surrogate and a BMP escape are left.
        assert_eq!(join_surrogate_escapes(r#"a: "\\uD83D\uDD2D""#), None);
        assert_eq!(join_surrogate_escapes(r#"a: "\uD83D x""#), None);
        assert_eq!(join_surrogate_escapes(r#"a: "\u00e9""#), None);
        assert_eq!(join_surrogate_escapes("plain: text"), None);
    }

    #[test]
    fn top_level_scalar_lines_are_read() {
        let yaml = "\
name: laravel-verification
description: Verification loop: env checks, linting, tests.
title: 'It''s here' # comment kept out
type: how-to # a comment
logo: \"\\uD83D\\uDD2D\"
disable-model-invocation: true
  nested: ignored
skills:
  - a
model: ~
icon:
color: [blue]
unknown: value
";
        let fields = salvage(yaml);
        assert_eq!(fields.name.as_deref(), Some("laravel-verification"));
        assert_eq!(
            fields.description.as_deref(),
            Some("Verification loop: env checks, linting, tests.")
        );
        assert_eq!(fields.title.as_deref(), Some("It's here"));
        assert_eq!(fields.r#type.as_deref(), Some("how-to"));
        assert_eq!(fields.logo.as_deref(), Some("🔭"));
        assert!(fields.disable_model_invocation);
        assert_eq!(fields.skills, None);
        assert_eq!(fields.model, None);
        assert_eq!(fields.icon, None);
        assert_eq!(fields.color, None);
    }

    #[test]
    fn broken_values_are_left_out() {
        let fields = salvage("title: \"open\nname: {{name}}\ndescription: |\n  block\n");
        assert_eq!(fields, Fields::default());
        assert_eq!(salvage("title:x\n").title, None, "no space after the colon");
    }
}
