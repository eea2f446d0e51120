//! The skill embeddings the index keeps by content hash (table `vectors`, schema 9: a
//! content's passages, one vector each, in one value after the caller's tag of what else they
//! were made from), and which
//! model made them (`meta.vectors_model`, schema 13): written by the background embedder in
//! small commits of their own, read back at start, and removed by the reconcile that drops
//! their content (`reconcile::store`).
//!
//! **Invariant:** every vector in the table was made by the model `vectors_model` names. A
//! commit storing another model's vectors empties the table first and names its own model; a
//! reader asking with another model's name is given no vector (so they are embedded again,
//! never compared with its own).
//!
//! `meta.vectors_tokens` says how their texts were cut into tokens (`embed::TOKENS_REVISION`):
//! set by the first commit into an empty table, and by `retokenized`, which drops the vectors
//! an older revision made differently, so that only those are embedded again.

use redb::{ReadableTable, ReadableTableMetadata};

use super::records::encode;
use super::tables::{
    DOCS, META, META_VECTORS_CAUGHT_UP, META_VECTORS_MODEL, META_VECTORS_TOKENS, RETIRED_VECTORS,
    VECTORS, stored_u64,
};
use super::{Handle, Index, Reader, Writer, closed, poisoned};
use crate::doc::Hash;
use crate::embed::{Quantized, TOKENS_REVISION, join_bytes, split_bytes};
use crate::error::{Error, IndexError, Result};

/// One content's embeddings as the `vectors` table keeps them: a tag of the caller's for what,
/// beyond the content, its passages were made from (a skill's name, title and description:
/// `skills::built_as`), and one vector per passage. Stored as the tag (8 bytes, little-endian)
/// followed by the vectors (`embed::join_bytes`).
#[derive(Clone, Debug)]
pub struct ContentVectors {
    pub hash: Hash,
    pub tag: u64,
    pub passages: Vec<Quantized>,
}

impl ContentVectors {
    fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = self.tag.to_le_bytes().to_vec();
        bytes.extend(join_bytes(&self.passages));
        bytes
    }

    /// `None` for a value of another form (it is embedded again).
    fn from_bytes(hash: Hash, bytes: &[u8]) -> Option<ContentVectors> {
        let (tag, passages) = bytes.split_first_chunk::<8>()?;
        Some(ContentVectors {
            hash,
            tag: u64::from_le_bytes(*tag),
            passages: split_bytes(passages)?,
        })
    }
}

impl Reader {
    /// The model the stored embeddings were made by (`None` before the first is stored).
    pub fn vectors_model(&self) -> Result<Option<String>> {
        let meta = match self.txn.open_table(META) {
            Ok(meta) => meta,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(Error::index(e)),
        };
        Ok(meta
            .get(META_VECTORS_MODEL)
            .map_err(Error::index)?
            .map(|v| String::from_utf8_lossy(v.value()).into_owned()))
    }

    /// Whether `model` has once embedded every skill content of a revision (see
    /// [`META_VECTORS_CAUGHT_UP`]).
    pub fn vectors_caught_up(&self, model: &str) -> Result<bool> {
        let meta = match self.txn.open_table(META) {
            Ok(meta) => meta,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(false),
            Err(e) => return Err(Error::index(e)),
        };
        let caught_up = meta.get(META_VECTORS_CAUGHT_UP).map_err(Error::index)?;
        // The stored model is checked too: a build from before this record stores another
        // model's vectors without removing it.
        Ok(self.vectors_model()?.as_deref() == Some(model)
            && caught_up.is_some_and(|v| v.value() == model.as_bytes()))
    }

    /// The vectors table, when it holds `model`'s embeddings (`None` for another model's).
    fn vectors_of_model(
        &self,
        model: &str,
    ) -> Result<Option<redb::ReadOnlyTable<&'static [u8; 32], &'static [u8]>>> {
        if self.vectors_model()?.as_deref() != Some(model) {
            return Ok(None);
        }
        Ok(Some(self.txn.open_table(VECTORS).map_err(Error::index)?))
    }

    /// Hands every embedding stored by `model` to `each`, in content hash order, one content
    /// at a time (none when the table holds another model's); returns how many contents. A
    /// value that is not an embedding is skipped: it is embedded again.
    pub fn each_vector(&self, model: &str, mut each: impl FnMut(ContentVectors)) -> Result<u64> {
        let Some(table) = self.vectors_of_model(model)? else {
            return Ok(0);
        };
        let mut count = 0;
        for entry in table.iter().map_err(Error::index)? {
            let (hash, bytes) = entry.map_err(Error::index)?;
            if let Some(vectors) = ContentVectors::from_bytes(*hash.value(), bytes.value()) {
                each(vectors);
                count += 1;
            }
        }
        Ok(count)
    }

    /// The stored embeddings made by `model` of those of `hashes` that have them (none of
    /// another model's).
    pub fn vectors_of<'h>(
        &self,
        model: &str,
        hashes: impl IntoIterator<Item = &'h Hash>,
    ) -> Result<Vec<ContentVectors>> {
        let Some(table) = self.vectors_of_model(model)? else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        for hash in hashes {
            if let Some(bytes) = table.get(hash).map_err(Error::index)? {
                found.extend(ContentVectors::from_bytes(*hash, bytes.value()));
            }
        }
        Ok(found)
    }

    /// Whether the content `hash` has a stored embedding.
    pub fn has_vector(&self, hash: &Hash) -> Result<bool> {
        let table = self.txn.open_table(VECTORS).map_err(Error::index)?;
        Ok(table.get(hash).map_err(Error::index)?.is_some())
    }

    /// How the stored embeddings' texts were cut into tokens (`None`: before
    /// [`TOKENS_REVISION`] was recorded).
    pub fn vectors_tokens(&self) -> Result<Option<u64>> {
        stored_u64(&self.txn, META_VECTORS_TOKENS)
    }

    /// How many contents have a stored embedding (of whichever model `vectors_model` names).
    pub fn vector_count(&self) -> Result<u64> {
        let table = self.txn.open_table(VECTORS).map_err(Error::index)?;
        table.len().map_err(Error::index)
    }
}

impl Index {
    /// Stores embeddings made by `model` in one commit, each only while its content is still
    /// in the index (a reconcile may have dropped it since it was read): an embedding is never
    /// left behind by its content. Embeddings of another model are removed in the same commit
    /// (see the module doc). The revision stays as it is: no answer's rows change. Returns the
    /// hashes stored. Redb runs one write at a time, so a reconcile waits for this commit (a
    /// batch's few inserts) or this one for it.
    pub fn store_vectors(&self, model: &str, batch: &[ContentVectors]) -> Result<Vec<Hash>> {
        self.in_one_commit("a read-only index cannot store embeddings", |txn| {
            let mut stored = Vec::with_capacity(batch.len());
            let mut meta = txn.open_table(META).map_err(Error::index)?;
            let same = meta
                .get(META_VECTORS_MODEL)
                .map_err(Error::index)?
                .is_some_and(|v| v.value() == model.as_bytes());
            let docs = txn.open_table(DOCS).map_err(Error::index)?;
            let mut vectors = txn.open_table(VECTORS).map_err(Error::index)?;
            if !same {
                vectors.retain(|_, _| false).map_err(Error::index)?;
                // Another model's retired vectors would never be taken back.
                let mut retired = txn.open_table(RETIRED_VECTORS).map_err(Error::index)?;
                retired.retain(|_, _| false).map_err(Error::index)?;
                meta.insert(META_VECTORS_MODEL, model.as_bytes())
                    .map_err(Error::index)?;
                meta.remove(META_VECTORS_CAUGHT_UP).map_err(Error::index)?;
            }
            // Into an empty table, every vector is of this build's tokens.
            if vectors.is_empty().map_err(Error::index)? {
                meta.insert(META_VECTORS_TOKENS, encode(&TOKENS_REVISION).as_slice())
                    .map_err(Error::index)?;
            }
            for content in batch {
                if docs.get(&content.hash).map_err(Error::index)?.is_some() {
                    vectors
                        .insert(&content.hash, content.to_bytes().as_slice())
                        .map_err(Error::index)?;
                    stored.push(content.hash);
                }
            }
            Ok(stored)
        })
    }

    /// Runs `body` in one write transaction of the index and commits it; a follower's index
    /// refuses with `read_only`.
    fn in_one_commit<T>(
        &self,
        read_only: &'static str,
        body: impl FnOnce(&redb::WriteTransaction) -> Result<T>,
    ) -> Result<T> {
        let Handle::Writer(Writer { slot, .. }) = &self.handle else {
            return Err(IndexError::Unavailable(read_only).into());
        };
        let slot = slot.read().map_err(|_| poisoned())?;
        let stores = slot.as_ref().ok_or_else(closed)?;
        let txn = stores.index.begin_write().map_err(Error::index)?;
        let done = body(&txn)?;
        txn.commit().map_err(Error::index)?;
        Ok(done)
    }

    /// Records that `model` has embedded every skill content of the latest revision (see
    /// [`META_VECTORS_CAUGHT_UP`]); a commit only the first time.
    pub fn note_vectors_caught_up(&self, model: &str) -> Result<()> {
        if self.read()?.vectors_caught_up(model)? {
            return Ok(());
        }
        self.in_one_commit("a read-only index records no embeddings", |txn| {
            let mut meta = txn.open_table(META).map_err(Error::index)?;
            // Only over that model's vectors: a commit of another model's since the pass read
            // its snapshot leaves it unrecorded.
            let same = meta
                .get(META_VECTORS_MODEL)
                .map_err(Error::index)?
                .is_some_and(|v| v.value() == model.as_bytes());
            if same {
                meta.insert(META_VECTORS_CAUGHT_UP, model.as_bytes())
                    .map_err(Error::index)?;
            }
            Ok(())
        })
    }

    /// Drops the stored embeddings of `stale` (contents whose text an older tokenizer revision
    /// cut differently) and records, in the same commit, that every one left is of
    /// [`TOKENS_REVISION`].
    pub fn retokenized(&self, stale: &[Hash]) -> Result<()> {
        self.drop_vectors_and(stale, |meta, retired| {
            // Retired vectors may be of the older revision: none is taken back.
            retired.retain(|_, _| false).map_err(Error::index)?;
            meta.insert(META_VECTORS_TOKENS, encode(&TOKENS_REVISION).as_slice())
                .map_err(Error::index)?;
            Ok(())
        })
    }

    /// Drops the stored embeddings of `unused`: contents a file still holds that are no longer
    /// embedded (an Agent Skill's resources, which skill search does not rank).
    pub fn drop_vectors(&self, unused: &[Hash]) -> Result<()> {
        self.drop_vectors_and(unused, |_, _| Ok(()))
    }

    /// Drops the stored embeddings of `hashes` and updates `meta` in the same commit.
    fn drop_vectors_and(
        &self,
        hashes: &[Hash],
        update_meta: impl FnOnce(
            &mut redb::Table<'_, &str, &[u8]>,
            &mut redb::Table<'_, &[u8; 32], &[u8]>,
        ) -> Result<()>,
    ) -> Result<()> {
        self.in_one_commit("a read-only index cannot drop embeddings", |txn| {
            let mut meta = txn.open_table(META).map_err(Error::index)?;
            let mut vectors = txn.open_table(VECTORS).map_err(Error::index)?;
            for hash in hashes {
                vectors.remove(hash).map_err(Error::index)?;
            }
            let mut retired = txn.open_table(RETIRED_VECTORS).map_err(Error::index)?;
            update_meta(&mut meta, &mut retired)
        })
    }
}
