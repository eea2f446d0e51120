//! Reading one markdown document: frontmatter, YAML fields, title and first paragraph, ids and
//! path classification. Pure functions over bytes and strings; nothing here touches the disk.
//!
//! A document is parsed once per distinct content (the index keys parsed records by content
//! hash), so `ParsedDoc` holds everything any family (skill, system prompt, agent profile) needs;
//! what depends on where the file sits (its id, its display id) is decided by the caller.

pub mod classify;
pub mod conflict;
pub mod distance;
pub mod frontmatter;
pub mod ids;
pub mod markdown;
pub mod paths;

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

/// A blake3 hash of a file's (decoded) content: one parse serves every file with that content.
pub type Hash = [u8; 32];

/// Why a document's content cannot be served, as shown to callers (with its path).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServeIssue {
    Read(ReadIssue),
    /// The body is empty after the frontmatter.
    EmptyBody,
}

impl ServeIssue {
    /// The read path's error for this file, naming it.
    pub fn message(&self, path: &std::path::Path) -> String {
        let path = path.display();
        match self {
            ServeIssue::Read(ReadIssue::TooLarge(n)) => {
                format!(
                    "file {path} is too large ({n} bytes; max {})",
                    MAX_FILE_BYTES
                )
            }
            ServeIssue::Read(ReadIssue::NotUtf8) => format!("file {path} is not UTF-8 text"),
            ServeIssue::Read(ReadIssue::Io(e)) => format!("read {path}: {e}"),
            ServeIssue::EmptyBody => format!("file {path} has empty body"),
        }
    }
}

impl std::fmt::Display for ServeIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeIssue::Read(ReadIssue::TooLarge(n)) => {
                write!(f, "too large ({n} bytes; max {})", MAX_FILE_BYTES)
            }
            ServeIssue::Read(ReadIssue::NotUtf8) => f.write_str("not UTF-8 text"),
            ServeIssue::Read(ReadIssue::Io(e)) => write!(f, "cannot be read: {e}"),
            ServeIssue::EmptyBody => f.write_str("empty body"),
        }
    }
}

/// The frontmatter of a document, as found.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Frontmatter {
    /// No `---` block at the start of the file.
    Absent,
    /// A block that is read but cannot be used: a YAML mapping whose recognised key has the
    /// wrong shape (or is given twice), or YAML over the loader's budgets; the string says why,
    /// without a trailing period.
    Invalid(String),
    /// A block with its recognised fields (boxed: most documents of a tree have one, and the
    /// other variants are small).
    Present(Box<Fields>),
    /// A block that is not YAML (or not a mapping): the fields its top-level `key: value` lines
    /// give, and the parser's reason, without a trailing period.
    Salvaged { fields: Box<Fields>, error: String },
}

impl Frontmatter {
    /// The recognised fields, when the block is a mapping or could be salvaged.
    pub fn fields(&self) -> Option<&Fields> {
        match self {
            Frontmatter::Present(fields) | Frontmatter::Salvaged { fields, .. } => Some(fields),
            Frontmatter::Absent | Frontmatter::Invalid(_) => None,
        }
    }

    /// Whether the block is not YAML because a merge left its conflict markers in it (the
    /// reason [`frontmatter::read_block`] gives such a block).
    pub fn holds_conflict_markers(&self) -> bool {
        matches!(self, Frontmatter::Salvaged { error, .. } if error == conflict::FRONTMATTER_REASON)
    }
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
    /// `compatibility` (Agent Skills), when it is a string. Read leniently: its shape is for the
    /// spec checks to report, never a reason to serve the file without its frontmatter.
    pub compatibility: Option<String>,
    /// An agent profile's `functions:` (engine functions a session preloads). Read leniently, as
    /// `compatibility` is: a skill that happens to use the key keeps its frontmatter, and the
    /// profile rule refuses a value of the wrong shape.
    pub functions: Option<Lenient<Vec<String>>>,
    /// An agent profile's `skills_index:`, leniently as `functions`.
    pub skills_index: Option<Lenient<bool>>,
}

/// A frontmatter value read leniently: the value, or the fact that it had another shape.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Lenient<T> {
    Value(T),
    Misshapen,
}

/// Everything the index keeps about one distinct file content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ParsedDoc {
    pub frontmatter: Frontmatter,
    /// Byte offset in the content where the body (text after the frontmatter block) starts.
    pub body_offset: u32,
    /// The body is empty after trimming `\n` (the read path's rule: such a file is not served).
    pub body_empty: bool,
    /// The body's title line (see [`markdown::title`]), when it has one.
    pub h1: Option<String>,
    /// The body's description by the contract's line rule (see [`markdown::description`]);
    /// empty when there is none.
    pub first_paragraph: String,
}

impl ParsedDoc {
    /// Parses a whole file's text.
    pub fn parse(content: &str) -> ParsedDoc {
        let split = frontmatter::split(content);
        let frontmatter = match split.yaml {
            None => Frontmatter::Absent,
            Some(yaml) => frontmatter::read_block(yaml),
        };
        let body = &content[split.body_offset..];
        let (h1, first_paragraph) = markdown::title_and_description(body);
        ParsedDoc {
            frontmatter,
            body_offset: split.body_offset as u32,
            body_empty: body.trim_matches('\n').is_empty(),
            h1,
            first_paragraph,
        }
    }

    /// The recognised fields, when the frontmatter is a mapping or could be salvaged.
    pub fn fields(&self) -> Option<&Fields> {
        self.frontmatter.fields()
    }
}

/// Decodes a file's bytes into text, enforcing the size cap. A leading UTF-8 byte-order mark is
/// dropped, so that a file saved by an editor that writes one still has its frontmatter found.
pub fn decode(bytes: &[u8]) -> Result<&str, ReadIssue> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadIssue::TooLarge(bytes.len() as u64));
    }
    std::str::from_utf8(bytes)
        .map(as_read)
        .map_err(|_| ReadIssue::NotUtf8)
}

/// A text about to be written, as the scan will read it back from the file ([`decode`] drops a
/// leading byte-order mark): a write checks and answers for what the next read sees.
pub fn as_read(content: &str) -> &str {
    content.strip_prefix('\u{feff}').unwrap_or(content)
}

/// Whether `c` acts on a terminal, or on how the text around it shows, rather than showing
/// itself: a control character (an escape sequence, a bell, a newline where one line is meant)
/// or a bidirectional format character (U+202E turns what follows it around). Text a file
/// supplies is shown with these replaced wherever a person or a model reads it as a line.
pub fn acts_on_display(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// At least this many corpus documents should yield both a title and a first paragraph; a
    /// drop below it means title or paragraph extraction broke on real content.
    const MIN_DOCS_WITH_TITLE_AND_PARAGRAPH: usize = 2_000;

    fn markdown_files(root: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let entries = std::fs::read_dir(&dir)
                .unwrap_or_else(|error| panic!("cannot list {}: {error}", dir.display()));
            for entry in entries {
                let path = entry
                    .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()))
                    .path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|ext| ext == "md") {
                    found.push(path);
                }
            }
        }
        found.sort();
        found
    }

    #[test]
    fn parses_the_whole_corpus() {
        let Some(root) = test_support::common::shared_path("corpus") else {
            return;
        };
        let files = markdown_files(&root);
        assert!(!files.is_empty(), "no .md files under {}", root.display());
        let mut parsed = 0;
        let mut with_title_and_paragraph = 0;
        for path in &files {
            let bytes = std::fs::read(path)
                .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
            let Ok(content) = decode(&bytes) else {
                continue;
            };
            let doc = ParsedDoc::parse(content);
            assert!(
                content.is_char_boundary(doc.body_offset as usize),
                "{}: body offset {} is not a char boundary",
                path.display(),
                doc.body_offset
            );
            parsed += 1;
            if doc.h1.is_some() && !doc.first_paragraph.is_empty() {
                with_title_and_paragraph += 1;
            }
        }
        assert!(
            with_title_and_paragraph >= MIN_DOCS_WITH_TITLE_AND_PARAGRAPH,
            "only {with_title_and_paragraph} of {parsed} corpus documents have both a title and a \
             first paragraph (expected at least {MIN_DOCS_WITH_TITLE_AND_PARAGRAPH})"
        );
    }

    #[test]
    fn parse_ties_the_pieces_together() {
        let doc = ParsedDoc::parse("---\ntitle: T\n---\n# Heading\n\nFirst para.\n");
        assert_eq!(doc.body_offset, 17);
        assert!(!doc.body_empty);
        assert_eq!(doc.h1.as_deref(), Some("Heading"));
        assert_eq!(doc.first_paragraph, "First para.");
        assert_eq!(doc.fields().and_then(|f| f.title.as_deref()), Some("T"));

        let salvaged = ParsedDoc::parse("---\ntitle: [a\nname: n\n---\n\n\n");
        assert!(matches!(salvaged.frontmatter, Frontmatter::Salvaged { .. }));
        assert!(salvaged.body_empty);
        assert_eq!(salvaged.fields().and_then(|f| f.name.as_deref()), Some("n"));
        assert_eq!(salvaged.fields().and_then(|f| f.title.as_deref()), None);

        let invalid = ParsedDoc::parse("---\ntitle: [a]\n---\nx\n");
        assert!(matches!(invalid.frontmatter, Frontmatter::Invalid(_)));
        assert_eq!(invalid.fields(), None);

        let absent = ParsedDoc::parse("plain text\n");
        assert_eq!(absent.frontmatter, Frontmatter::Absent);
        assert_eq!(absent.body_offset, 0);
    }
}
