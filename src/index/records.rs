//! What the index stores, as plain serde types encoded with postcard. Rows are derived from
//! files; nothing here is ground truth.

use serde::{Deserialize, Serialize};

use crate::doc::ReadIssue;
use crate::time::Stamp;

/// A blake3 content hash.
pub type Hash = [u8; 32];

/// The folders the index watches, by role. The discriminant is part of the file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum Root {
    /// `skills_folder`: skills and system prompts, recursive.
    Skills = 0,
    /// `local_skills_folder`: project overrides, whole namespaces win over `skills_folder`.
    LocalSkills = 1,
    /// `agents_skills_folder`: read-only, shallow `<dir>/SKILL.md` entries.
    AgentsSkills = 2,
    /// `agents_folder`: direct `<id>.md` agent profiles.
    Agents = 3,
}

impl Root {
    pub const ALL: [Root; 4] = [
        Root::Skills,
        Root::LocalSkills,
        Root::AgentsSkills,
        Root::Agents,
    ];

    pub fn from_u8(v: u8) -> Option<Root> {
        Root::ALL.into_iter().find(|r| *r as u8 == v)
    }

    /// The configuration key naming this root, for messages.
    pub fn config_key(self) -> &'static str {
        match self {
            Root::Skills => "skills_folder",
            Root::LocalSkills => "local_skills_folder",
            Root::AgentsSkills => "agents_skills_folder",
            Root::Agents => "agents_folder",
        }
    }
}

/// What identifies a version of a file without reading it. Any difference means "read again".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stat {
    pub size: u64,
    pub mtime: Stamp,
    pub ctime: Stamp,
    pub ino: u64,
}

/// One file of a root as last reconciled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    pub stat: Stat,
    /// Hash of the (decoded) content, or why the content could not be used.
    pub content: Result<Hash, ReadIssue>,
    /// The file changed so close to the moment it was read that a later change within the same
    /// timestamp tick could leave its stat unchanged; such a file is read again next time.
    pub racy: bool,
}

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
                    crate::doc::MAX_FILE_BYTES
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
                write!(
                    f,
                    "too large ({n} bytes; max {})",
                    crate::doc::MAX_FILE_BYTES
                )
            }
            ServeIssue::Read(ReadIssue::NotUtf8) => f.write_str("not UTF-8 text"),
            ServeIssue::Read(ReadIssue::Io(e)) => write!(f, "cannot be read: {e}"),
            ServeIssue::EmptyBody => f.write_str("empty body"),
        }
    }
}

/// Where a row's content comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// A file under a root; `content` is the hash of its text in the content table, or why it
    /// cannot be served.
    File {
        root: Root,
        rel: String,
        content: Result<Hash, ServeIssue>,
    },
    /// Compiled into the binary (see `bundled`).
    Bundled,
}

/// One visible skill, before `filter_unregistered` (which depends on the engine and is applied
/// at read time).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillRow {
    pub display_id: String,
    pub title: String,
    pub r#type: Option<String>,
    pub function_id: Option<String>,
    pub disable_model_invocation: bool,
    pub description: String,
    pub bytes: u64,
    pub modified_at: String,
    pub source: Source,
    /// The row survives `filter_unregistered` whatever is installed: a single-segment id, the
    /// `directory` or `iii` namespace, or a namespace served by the agents skills root.
    pub always_visible: bool,
    /// Served from `agents_skills_folder`: read-only and left out of `skills::index`.
    pub agents_skill: bool,
}

impl SkillRow {
    /// The first id segment, the namespace `filter_unregistered` checks.
    pub fn namespace(id: &str) -> &str {
        id.split('/').next().unwrap_or(id)
    }
}

/// One system prompt found on disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptRow {
    pub description: String,
    pub modified_at: String,
    pub bytes: u64,
    pub source: Source,
}

/// The frontmatter of an agent profile, validated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub logo: Option<String>,
    pub skills: Vec<String>,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
    pub icon: Option<String>,
    pub color: Option<String>,
    pub extends: Option<String>,
}

/// One agent profile found on disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRow {
    pub profile: Profile,
    pub modified_at: String,
    pub bytes: u64,
    pub source: Source,
}

/// Facts about the last reconcile, kept for status and the CLI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileStamp {
    pub at: Stamp,
    pub duration_ms: u64,
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).expect("serializing an index record to memory cannot fail")
}

pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> crate::Result<T> {
    postcard::from_bytes(bytes).map_err(|e| crate::Error::Index(format!("undecodable record: {e}")))
}

/// A file's text as the content table stores it: LZ4 block compression with the length in
/// front. Markdown shrinks to about a third, which keeps the index smaller than the files it
/// indexes, and decompressing one file costs microseconds.
pub fn compress_text(text: &str) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(text.as_bytes())
}

/// The inverse of [`compress_text`]. The stated length is checked against the file size cap
/// before anything is allocated, so a damaged record cannot ask for a huge buffer.
pub fn decompress_text(bytes: &[u8]) -> crate::Result<String> {
    let undecodable = |why: String| crate::Error::Index(format!("undecodable content: {why}"));
    let stated = bytes
        .get(..4)
        .map(|n| u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as u64)
        .ok_or_else(|| undecodable("shorter than its length prefix".into()))?;
    if stated > crate::doc::MAX_FILE_BYTES {
        return Err(undecodable(format!("states {stated} bytes")));
    }
    let raw = lz4_flex::block::decompress_size_prepended(bytes)
        .map_err(|e| undecodable(e.to_string()))?;
    String::from_utf8(raw).map_err(|e| undecodable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_round_trips_through_compression() {
        for text in ["", "# a\n", &"the quick brown fox\n".repeat(5_000)] {
            let packed = compress_text(text);
            assert_eq!(decompress_text(&packed).expect("decode"), text);
        }
        assert!(compress_text(&"abc ".repeat(1_000)).len() < 200);
    }

    #[test]
    fn damaged_content_is_an_error_not_a_huge_allocation() {
        let mut packed = compress_text("hello world");
        packed[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decompress_text(&packed).is_err());
        assert!(decompress_text(&[1, 2]).is_err());
        let mut truncated = compress_text(&"hello world ".repeat(50));
        truncated.truncate(truncated.len() / 2);
        assert!(decompress_text(&truncated).is_err());
    }
}
