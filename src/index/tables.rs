//! The redb tables, the schema version, and the decoding of whole tables. Changing any table's
//! key, value encoding or meaning is a new schema version with a file in `migrations/`.

use redb::{ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;

use super::records::decode;
use crate::error::{Error, Result};
use crate::roots::Root;

/// Version of the layout below; see `migrations/`.
pub const SCHEMA_VERSION: u64 = 14;

/// `(root, relative path)` → postcard [`FileMeta`](super::records::FileMeta).
pub const FILES: TableDefinition<'static, (u8, &str), &[u8]> = TableDefinition::new("files");
/// Content hash → postcard [`ParsedDoc`](crate::doc::ParsedDoc), parsed once per distinct content.
pub const DOCS: TableDefinition<'static, &[u8; 32], &[u8]> = TableDefinition::new("docs");
/// Content hash → postcard [`Conformance`](crate::rules::spec::Conformance): what the Agent
/// Skills specification says of the text, checked once per distinct content like the parse.
pub const SPEC: TableDefinition<'static, &[u8; 32], &[u8]> = TableDefinition::new("spec");
/// Content hash → the sentence embeddings of its skill passages (`embed::join_bytes`: one
/// `embed::Quantized` after another, int8 with its scale,
/// [`embed::QUANTIZED_BYTES`](crate::embed::QUANTIZED_BYTES) bytes each), written after
/// reconciles by the background embedder and dropped with the content's parse. The layout
/// needs no schema step: the passages a skill is embedded as are part of the name
/// `meta.vectors_model` holds, so a table of another layout belongs to another name and is
/// embedded again, never read as this one.
pub const VECTORS: TableDefinition<'static, &[u8; 32], &[u8]> = TableDefinition::new("vectors");
/// Content hash → the embeddings of a content no file holds any more, kept a while in case it
/// comes back (see `reconcile::retired`): a `git switch` away and back gets its skills' vectors
/// back instead of minutes of embedding. Each value is the time it was retired (`u64` seconds,
/// little-endian), a fingerprint of the model name it was made by (`u64`), then the bytes it
/// had in [`VECTORS`]. Made when first written: a file without it has retired nothing, and a
/// binary that does not know it leaves it alone, so it needs no schema step.
pub const RETIRED_VECTORS: TableDefinition<'static, &[u8; 32], &[u8]> =
    TableDefinition::new("retired_vectors");
/// Content hash → the key of its text in the texts store (see [`texts`](super::texts)). Keys are
/// handed out in order, from [`META_NEXT_TEXT`] up, so that new texts are appended to the
/// texts store.
pub const TEXT_IDS: TableDefinition<'static, &[u8; 32], u64> = TableDefinition::new("text_ids");
/// Texts store keys the index stopped referring to, whose texts the next reconcile removes from
/// the texts store.
pub const TEXTS_GARBAGE: TableDefinition<'static, u64, ()> = TableDefinition::new("texts_garbage");
/// Top-level folder names of the two skills roots: `(root, name)`.
pub const TOP_DIRS: TableDefinition<'static, (u8, &str), ()> = TableDefinition::new("top_dirs");
/// Folders that could not be listed and links not followed: `(root, relative path)` → postcard
/// [`SkipReason`](crate::rules::skip::SkipReason).
pub const UNREADABLE: TableDefinition<'static, (u8, &str), &[u8]> =
    TableDefinition::new("unreadable");
/// Visible skill id → postcard [`SkillRow`](crate::rules::skill::SkillRow).
pub const SKILLS: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("view_skills");
/// System prompt name → postcard [`PromptRow`](crate::rules::prompt::PromptRow).
pub const PROMPTS: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("view_prompts");
/// Agent id → postcard [`AgentRow`](crate::rules::agent::AgentRow).
pub const AGENTS: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("view_agents");
/// `(root, relative path)` → postcard [`SkipReason`](crate::rules::skip::SkipReason): why the
/// file is not served, or is served with a problem.
pub const SKIPPED: TableDefinition<'static, (u8, &str), &[u8]> =
    TableDefinition::new("view_skipped");
/// `(list table, revision, row key)` → nothing: the keys each revision changed (see
/// [`changelog`](super::changelog)).
pub const CHANGE_LOG: TableDefinition<'static, (u8, u64, &str), ()> =
    TableDefinition::new("change_log");
/// Named values: [`META_SCHEMA`], [`META_REVISION`], [`META_RECONCILE`], [`META_EPOCH`],
/// [`META_LOG_FLOOR`], [`META_NEXT_TEXT`], [`META_VECTORS_MODEL`], [`META_VECTORS_TOKENS`],
/// [`META_VECTORS_CAUGHT_UP`].
pub const META: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("meta");

pub const META_SCHEMA: &str = "schema_version";
pub const META_REVISION: &str = "revision";
pub const META_RECONCILE: &str = "last_reconcile";
/// The index file's identity, random at creation (`u64`).
pub const META_EPOCH: &str = "epoch";
/// The oldest revision the change log answers from (`u64`).
pub const META_LOG_FLOOR: &str = "change_log_floor";
/// The texts store key the next new text gets (`u64`). Texts stored at or above it belong to
/// a reconcile whose index commit never came; the next reconcile removes them.
pub const META_NEXT_TEXT: &str = "next_text";
/// The model every vector in [`VECTORS`] was made by (UTF-8: its name, files' fingerprint and
/// text recipe, `directory::dense`); absent until the first vector is stored.
pub const META_VECTORS_MODEL: &str = "vectors_model";
/// How the texts of every vector in [`VECTORS`] were cut into tokens (`u64`,
/// `embed::TOKENS_REVISION`); absent in an index whose vectors predate it.
pub const META_VECTORS_TOKENS: &str = "vectors_tokens";
/// The model (as [`META_VECTORS_MODEL`] names it) that has once embedded every skill content of
/// a revision: from then on skill search is hybrid in every process that loads that model,
/// contents changed since ranking by their words until embedded. Removed with that model's
/// vectors.
pub const META_VECTORS_CAUGHT_UP: &str = "vectors_caught_up";

/// The postcard `u64` under `key` in a file's [`META`] table: `None` when the table or the key
/// is missing (the index and its texts store both keep their schema version and epoch there).
pub fn stored_u64(txn: &redb::ReadTransaction, key: &str) -> Result<Option<u64>> {
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(Error::index(e)),
    };
    meta_u64(&meta, key)
}

/// The postcard `u64` under `key` in an open [`META`] table, `None` when the key is missing.
pub fn meta_u64(
    meta: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> Result<Option<u64>> {
    match meta.get(key).map_err(Error::index)? {
        Some(v) => decode(v.value()).map(Some),
        None => Ok(None),
    }
}

/// Whether a file holds no table at all: a new file, which a schema may take.
pub fn holds_no_table(db: &redb::Database) -> Result<bool> {
    use redb::ReadableDatabase;
    let txn = db.begin_read().map_err(Error::index)?;
    Ok(txn.list_tables().map_err(Error::index)?.next().is_none())
}

/// Every row of a `name → postcard record` table, in key order. Read and write transactions
/// both decode through here.
pub fn decode_rows<T, Table>(table: &Table) -> Result<Vec<(String, T)>>
where
    T: DeserializeOwned,
    Table: ReadableTable<&'static str, &'static [u8]>,
{
    map_rows(table, |name, row| (name, row))
}

/// Every row of a `name → postcard record` table, in key order, each turned into what `f`
/// makes of it as it is decoded: only one decoded record is alive at a time.
pub fn map_rows<T, Out, Table>(
    table: &Table,
    mut f: impl FnMut(String, T) -> Out,
) -> Result<Vec<Out>>
where
    T: DeserializeOwned,
    Table: ReadableTable<&'static str, &'static [u8]>,
{
    let len = table.len().map_err(Error::index)?;
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    for entry in table.iter().map_err(Error::index)? {
        let (k, v) = entry.map_err(Error::index)?;
        out.push(f(k.value().to_string(), decode(v.value())?));
    }
    Ok(out)
}

/// Every entry of a `(root, relative path) → value` table, in key order; entries of an unknown
/// root (a newer schema would not reach this binary) are left out.
pub fn decode_paths<V, Out, Table>(
    table: &Table,
    value: impl Fn(V::SelfType<'_>) -> Result<Out>,
) -> Result<Vec<((Root, String), Out)>>
where
    V: redb::Value + 'static,
    Table: ReadableTable<(u8, &'static str), V>,
{
    let mut out = Vec::new();
    for entry in table.iter().map_err(Error::index)? {
        let (k, v) = entry.map_err(Error::index)?;
        let (root, rel) = k.value();
        if let Some(root) = Root::from_u8(root) {
            out.push(((root, rel.to_string()), value(v.value())?));
        }
    }
    Ok(out)
}
