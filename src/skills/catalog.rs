//! `directory::skills::catalog {prefix?, type?, format?, limit?, max_bytes?}` (beyond the
//! contract; issue 30): the names, descriptions and locations of the Agent Skills this worker
//! serves, for agents and harnesses outside iii that load a catalog into a prompt and read a
//! skill's file when a task needs it.
//!
//! An entry is a served `SKILL.md` (see [`CatalogEntry`]) that a model may pick: the same
//! visibility as `list` (precedence and shadowing are the index's rows, `filter_unregistered`
//! at read time), without the rows whose frontmatter says `disable-model-invocation` (a user
//! invokes those; a model is not offered them) or that have no description (nothing for a model
//! to choose by). The entries come in on-disk id order, so each namespace's together, from the
//! cached rows of the revision: a catalog reads no file and no stat.
//!
//! `xml` is the `<available_skills>` block of the reference library's `to-prompt`, line for
//! line; `markdown` one line per skill; `json` the entries as objects. The rendered entries stop
//! at the first that would take the answer past `max_bytes` (or past `limit` entries), and the
//! answer says how many were left out.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::cache::SkillCache;
use super::catalog_index::CatalogRow;
use super::doubled::Doubled;
use super::listed::{CatalogEntry, Listed};
use crate::error::Result;
use crate::request;
use crate::roots::Roots;
use crate::rules::skill::Visibility;

/// The budget when the request sets none: 16 KiB, about 4,000 tokens at four bytes a token.
/// Harnesses that inject a skills catalog keep it to a few thousand tokens of the context (the
/// specification's guidance is about 100 tokens of name and description per skill, so this is
/// room for 40 to 100 skills); a caller that wants more asks for it.
pub const DEFAULT_MAX_BYTES: usize = 16 * 1024;
/// The smallest budget a request may set (smaller ones are raised to it): room for the XML
/// wrapper and one ordinary entry.
pub const MIN_MAX_BYTES: usize = 256;
/// The largest budget a request may set (larger ones are lowered to it): well under the 16 MiB
/// the engine carries in one message, whatever escaping the JSON answer adds.
pub const MAX_MAX_BYTES: usize = 8 << 20;

const XML_OPEN: &str = "<available_skills>\n";
const XML_CLOSE: &str = "</available_skills>";

#[derive(Deserialize, Clone, Copy, Default, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Xml,
    Markdown,
    Json,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::Xml => "xml",
            Format::Markdown => "markdown",
            Format::Json => "json",
        }
    }
}

#[derive(Deserialize, Default)]
struct CatalogRequest {
    prefix: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Absent or null: the default (`xml`).
    format: Option<Format>,
    limit: Option<usize>,
    max_bytes: Option<usize>,
}

/// One entry as it is rendered.
struct Shown<'a> {
    listed: &'a Listed,
    entry: &'a CatalogEntry,
    location: String,
}

impl Shown<'_> {
    fn description(&self) -> Cow<'_, str> {
        self.listed.description()
    }
}

/// `directory::skills::catalog`: see the module doc. Answers `{format, body, count, left_out,
/// max_bytes}` (`xml`, `markdown`) or `{format, skills, count, left_out, max_bytes}` (`json`).
pub fn catalog(
    cache: &SkillCache,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Value> {
    let req: CatalogRequest = request::parse(request)?;
    let max_bytes = req
        .max_bytes
        .unwrap_or(DEFAULT_MAX_BYTES)
        .clamp(MIN_MAX_BYTES, MAX_MAX_BYTES);
    let limit = req.limit.unwrap_or(usize::MAX).max(1);
    let doubled = Doubled::of(roots);
    let index = cache.catalog_index(&doubled);
    // A file the local folder and `skills_folder` both read is one entry: its local row when
    // the request's prefix and the caller's visibility admit that row, else its second
    // reading (`skills::doubled`; a file's two readings are of one type).
    let rows = cache.rows();
    let local_in = |id: &str| {
        req.prefix.as_deref().is_none_or(|p| id.starts_with(p)) && rows.seen(id, visibility)
    };
    let second_shown = |row: &CatalogRow| {
        !row.doubled || !doubled.answered_as_local(rows.at(row.at as usize), local_in)
    };
    let range = match req.prefix.as_deref() {
        Some(prefix) => cache.prefix_range(prefix),
        None => 0..rows.len(),
    };
    let start = index
        .rows
        .partition_point(|r| (r.at as usize) < range.start);
    let end = index.rows.partition_point(|r| (r.at as usize) < range.end);
    let entries = &index.rows[start..end];
    // Whether each namespace is visible, decided once per namespace this request meets.
    let mut visible: Vec<Option<bool>> = vec![None; index.namespaces.len()];
    let mut admits = |row: &CatalogRow| {
        let listed = &**rows.at(row.at as usize);
        let shown = second_shown(row)
            && (row.always_visible
                || *visible[row.ns as usize].get_or_insert_with(|| {
                    visibility.allows_id(&index.namespaces[row.ns as usize], false)
                }));
        shown
            && req
                .kind
                .as_deref()
                .is_none_or(|t| listed.kind().as_deref() == Some(t))
    };
    let mut render = Render::new(req.format.unwrap_or_default(), max_bytes);
    let mut left_out = 0usize;
    let mut at = 0;
    while at < entries.len() {
        let row = &entries[at];
        at += 1;
        if !admits(row) {
            continue;
        }
        let listed = &**rows.at(row.at as usize);
        let entry = listed.catalog.as_deref().expect("a catalog row");
        let shown = Shown {
            listed,
            entry,
            location: roots.file(entry.root, &entry.rel).display().to_string(),
        };
        if render.count == limit || !render.push(&shown) {
            left_out = 1;
            break;
        }
    }
    // The rest are counted, not read: without a filter that needs a row, by their number.
    let rest = &entries[at..];
    let unfiltered = req.kind.is_none()
        && !matches!(
            visibility,
            Visibility {
                filter_unregistered: true,
                installed: Some(_)
            }
        );
    left_out += match (unfiltered, index.any_doubled) {
        (true, false) => rest.len(),
        // Only a second reading needs a look beyond its compact row.
        (true, true) => rest.iter().filter(|row| second_shown(row)).count(),
        (false, _) => rest.iter().filter(|row| admits(row)).count(),
    };
    Ok(render.finish(left_out))
}

/// The answer being written, within its budget.
struct Render {
    format: Format,
    max_bytes: usize,
    /// `xml` and `markdown`: the body so far (without the XML closing line).
    body: String,
    /// `json`: the entries so far, and the length of their array's JSON.
    skills: Vec<Value>,
    json_len: usize,
    count: usize,
    scratch: String,
}

impl Render {
    fn new(format: Format, max_bytes: usize) -> Render {
        let body = match format {
            Format::Xml => XML_OPEN.to_string(),
            _ => String::new(),
        };
        Render {
            format,
            max_bytes,
            body,
            skills: Vec::new(),
            json_len: "[]".len(),
            count: 0,
            scratch: String::new(),
        }
    }

    /// Adds one entry when it fits the budget; false (and nothing added) when it does not.
    fn push(&mut self, shown: &Shown<'_>) -> bool {
        let fits = match self.format {
            Format::Xml => {
                self.scratch.clear();
                push_xml_entry(&mut self.scratch, shown);
                let fits = self.body.len() + self.scratch.len() + XML_CLOSE.len() <= self.max_bytes;
                if fits {
                    self.body.push_str(&self.scratch);
                }
                fits
            }
            Format::Markdown => {
                self.scratch.clear();
                push_markdown_entry(&mut self.scratch, shown);
                let fits = self.body.len() + self.scratch.len() <= self.max_bytes;
                if fits {
                    self.body.push_str(&self.scratch);
                }
                fits
            }
            Format::Json => {
                let value = json!({
                    "id": &*shown.listed.shown_id(),
                    "name": &*shown.entry.name,
                    "description": shown.description().trim(),
                    "location": shown.location,
                });
                let len = value.to_string().len() + usize::from(self.count > 0);
                let fits = self.json_len + len <= self.max_bytes;
                if fits {
                    self.json_len += len;
                    self.skills.push(value);
                }
                fits
            }
        };
        self.count += usize::from(fits);
        fits
    }

    fn finish(mut self, left_out: usize) -> Value {
        let mut answer = json!({
            "format": self.format.as_str(),
            "count": self.count,
            "left_out": left_out,
            "max_bytes": self.max_bytes,
        });
        match self.format {
            Format::Json => answer["skills"] = Value::Array(self.skills),
            Format::Xml => {
                self.body.push_str(XML_CLOSE);
                answer["body"] = Value::String(self.body);
            }
            Format::Markdown => answer["body"] = Value::String(self.body),
        }
        answer
    }
}

/// One `<skill>` of `to-prompt`'s block: each value on a line of its own between its tags,
/// escaped as `to-prompt` escapes name and description. The location is escaped too (the
/// reference leaves it as it is, which breaks the XML for a path with `&` or `<`).
fn push_xml_entry(out: &mut String, shown: &Shown<'_>) {
    out.push_str("<skill>\n<name>\n");
    push_xml_text(out, &shown.entry.name);
    out.push_str("\n</name>\n<description>\n");
    push_xml_text(out, shown.description().trim());
    out.push_str("\n</description>\n<location>\n");
    push_xml_text(out, &shown.location);
    out.push_str("\n</location>\n</skill>\n");
}

/// `text` escaped for XML character data (and attributes): the five characters `to-prompt`
/// escapes, as it spells them. A character XML 1.0 does not allow at all (a control character
/// other than tab, line feed and carriage return) becomes U+FFFD, so that the block always
/// parses.
fn push_xml_text(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// `- **name** (location): description`, on one line: the description's runs of white space
/// become single spaces.
fn push_markdown_entry(out: &mut String, shown: &Shown<'_>) {
    out.push_str("- **");
    push_markdown_text(out, &shown.entry.name, true);
    out.push_str("** (");
    push_markdown_text(out, &shown.location, false);
    out.push_str("): ");
    push_markdown_text(out, &shown.description(), false);
    out.push('\n');
}

/// `text` on one line: runs of whitespace (a newline among them) as one space, other control
/// characters as U+FFFD (they would reach a terminal or a prompt raw), and for the bold name
/// the characters Markdown reads as emphasis or code escaped with a backslash. A description
/// keeps its Markdown: it is meant to be read as such.
fn push_markdown_text(out: &mut String, text: &str, in_bold: bool) {
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        for c in word.chars() {
            match c {
                '\\' | '*' | '_' | '`' if in_bold => {
                    out.push('\\');
                    out.push(c);
                }
                c if crate::doc::acts_on_display(c) => out.push('\u{fffd}'),
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_is_escaped_as_the_reference_escapes_it() {
        let mut out = String::new();
        push_xml_text(&mut out, "a & b <c> \"d\" 'e'\tf\u{1}g");
        assert_eq!(
            out,
            "a &amp; b &lt;c&gt; &quot;d&quot; &#39;e&#39;\tf\u{fffd}g"
        );
    }

    #[test]
    fn a_markdown_entry_stays_on_one_line_and_its_name_stays_bold() {
        let mut out = String::new();
        push_markdown_text(&mut out, "line1\nline2 **bold** a_b `c` \\", true);
        assert_eq!(out, "line1 line2 \\*\\*bold\\*\\* a\\_b \\`c\\` \\\\");
        let mut out = String::new();
        push_markdown_text(
            &mut out,
            "Use `pdf`\r\n  to\tread\u{1b}[31m **forms**\u{202e}",
            false,
        );
        assert_eq!(out, "Use `pdf` to read\u{fffd}[31m **forms**\u{fffd}");
    }

    #[test]
    fn formats_are_read_by_name() {
        let read =
            |v: Value| request::parse::<CatalogRequest>(&v).map(|r| r.format.unwrap_or_default());
        assert_eq!(read(json!({})).ok(), Some(Format::Xml));
        assert_eq!(read(json!({"format": null})).ok(), Some(Format::Xml));
        assert_eq!(
            read(json!({"format": "markdown"})).ok(),
            Some(Format::Markdown)
        );
        assert_eq!(read(json!({"format": "json"})).ok(), Some(Format::Json));
        assert!(read(json!({"format": "yaml"})).is_err());
    }
}
