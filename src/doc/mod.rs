//! Reading one markdown document: frontmatter, YAML fields, title and first paragraph, ids and
//! path classification. Pure functions over bytes and strings; nothing here touches the disk.
//!
//! A document is parsed once per distinct content (the index keys parsed records by content
//! hash), so `ParsedDoc` holds everything any family (skill, system prompt, agent profile) needs;
//! what depends on where the file sits (its id, its display id) is decided by the caller.

pub mod classify;
pub mod frontmatter;
pub mod ids;
pub mod markdown;

use serde::{Deserialize, Serialize};

/// The largest file, frontmatter included, that is read as a document (contract: 256 KiB).
pub const MAX_FILE_BYTES: u64 = 262_144;

/// Why a file's content could not be used as a document. Kept without paths so that one parsed
/// record can serve every file with the same content; callers add the path when they render it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum ReadIssue {
    /// The whole file is larger than [`MAX_FILE_BYTES`].
    TooLarge(u64),
    /// The file is not UTF-8 text.
    NotUtf8,
    /// Reading the file failed.
    Io(String),
}

/// The frontmatter of a document, as found.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Frontmatter {
    /// No `---` block at the start of the file.
    Absent,
    /// A block is there but it is not usable YAML (or not a mapping, or a field has the wrong
    /// shape); the string says why, without a trailing period.
    Invalid(String),
    /// A block with its recognised fields.
    Present(Fields),
}

/// The frontmatter keys any family recognises. Values are kept as written (not trimmed) so that
/// each family can apply its own rules, such as "`logo` must be non-empty when present".
/// Scalars that are not strings (numbers, booleans) are kept as their YAML text; `null` is absent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub title: Option<String>,
    pub name: Option<String>,
    pub r#type: Option<String>,
    pub function_id: Option<String>,
    pub description: Option<String>,
    /// `disable-model-invocation` (hyphenated key in the file).
    pub disable_model_invocation: bool,
    pub logo: Option<String>,
    pub skills: Option<Vec<String>>,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
    pub icon: Option<String>,
    pub color: Option<String>,
    pub extends: Option<String>,
}

/// Everything the index keeps about one distinct file content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ParsedDoc {
    pub frontmatter: Frontmatter,
    /// Byte offset in the content where the body (text after the frontmatter block) starts.
    pub body_offset: u32,
    /// The body is empty after trimming `\n` (the read path's rule: such a file is not served).
    pub body_empty: bool,
    /// Text of the first level-1 heading of the body, trimmed, when non-empty.
    pub h1: Option<String>,
    /// Source text of the body's first paragraph, lines trimmed and joined with single spaces;
    /// empty when there is none.
    pub first_paragraph: String,
}

impl ParsedDoc {
    /// Parses a whole file's text.
    pub fn parse(content: &str) -> ParsedDoc {
        let split = frontmatter::split(content);
        let frontmatter = match split.yaml {
            None => Frontmatter::Absent,
            Some(yaml) => match frontmatter::parse_fields(yaml) {
                Ok(fields) => Frontmatter::Present(fields),
                Err(why) => Frontmatter::Invalid(why),
            },
        };
        let body = &content[split.body_offset..];
        let (h1, first_paragraph) = markdown::title_and_paragraph(body);
        ParsedDoc {
            frontmatter,
            body_offset: split.body_offset as u32,
            body_empty: body.trim_matches('\n').is_empty(),
            h1,
            first_paragraph,
        }
    }

    /// The recognised fields, when the frontmatter is present and valid.
    pub fn fields(&self) -> Option<&Fields> {
        match &self.frontmatter {
            Frontmatter::Present(fields) => Some(fields),
            _ => None,
        }
    }
}

/// Decodes a file's bytes into text, enforcing the size cap. A leading UTF-8 byte-order mark is
/// dropped, so that a file saved by an editor that writes one still has its frontmatter found.
pub fn decode(bytes: &[u8]) -> Result<&str, ReadIssue> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadIssue::TooLarge(bytes.len() as u64));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|_| ReadIssue::NotUtf8)
}
