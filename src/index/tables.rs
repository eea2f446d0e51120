//! The redb tables and the schema version. Changing any table's key, value encoding or meaning
//! is a new schema version with a file in `migrations/`.

use redb::TableDefinition;

/// Version of the layout below; see `migrations/`.
pub const SCHEMA_VERSION: u64 = 3;

/// `(root, relative path)` → postcard [`FileMeta`](super::records::FileMeta).
pub const FILES: TableDefinition<(u8, &str), &[u8]> = TableDefinition::new("files");
/// Content hash → postcard [`ParsedDoc`](crate::doc::ParsedDoc), parsed once per distinct content.
pub const DOCS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("docs");
/// Content hash → the file's text, LZ4-compressed (see
/// [`compress_text`](super::records::compress_text)). Same key set as `DOCS`.
pub const CONTENT: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("content");
/// Top-level folder names of the two skills roots: `(root, name)`.
pub const TOP_DIRS: TableDefinition<(u8, &str), ()> = TableDefinition::new("top_dirs");
/// Folders that could not be listed: `(root, relative path)` → why.
pub const UNREADABLE: TableDefinition<(u8, &str), &str> = TableDefinition::new("unreadable");
/// Visible skill id → postcard [`SkillRow`](super::records::SkillRow).
pub const SKILLS: TableDefinition<&str, &[u8]> = TableDefinition::new("view_skills");
/// System prompt name → postcard [`PromptRow`](super::records::PromptRow).
pub const PROMPTS: TableDefinition<&str, &[u8]> = TableDefinition::new("view_prompts");
/// Agent id → postcard [`AgentRow`](super::records::AgentRow).
pub const AGENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("view_agents");
/// `(root, relative path)` → why the file is not served.
pub const SKIPPED: TableDefinition<(u8, &str), &str> = TableDefinition::new("view_skipped");
/// Named values: [`META_SCHEMA`], [`META_REVISION`], [`META_RECONCILE`].
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

pub const META_SCHEMA: &str = "schema_version";
pub const META_REVISION: &str = "revision";
pub const META_RECONCILE: &str = "last_reconcile";
