//! The skill embeddings the index keeps by content hash (table `vectors`, schema 9): written
//! by the background embedder in small commits of their own, read back whole at start, and
//! removed by the reconcile that drops their content (`reconcile::store`).

use redb::{ReadableTable, ReadableTableMetadata};

use super::tables::{DOCS, VECTORS};
use super::{Handle, Index, Reader, Writer, closed, poisoned};
use crate::doc::Hash;
use crate::embed::Quantized;
use crate::error::{Error, IndexError, Result};

impl Reader {
    /// Every stored embedding, in content hash order (a value that is not one is skipped: it
    /// is embedded again).
    pub fn vectors(&self) -> Result<Vec<(Hash, Quantized)>> {
        let table = self.txn.open_table(VECTORS).map_err(Error::index)?;
        let mut out =
            Vec::with_capacity(usize::try_from(table.len().map_err(Error::index)?).unwrap_or(0));
        for entry in table.iter().map_err(Error::index)? {
            let (hash, bytes) = entry.map_err(Error::index)?;
            if let Some(vector) = Quantized::from_bytes(bytes.value()) {
                out.push((*hash.value(), vector));
            }
        }
        Ok(out)
    }

    /// How many contents have a stored embedding.
    pub fn vector_count(&self) -> Result<u64> {
        let table = self.txn.open_table(VECTORS).map_err(Error::index)?;
        table.len().map_err(Error::index)
    }
}

impl Index {
    /// Stores embeddings in one commit, each only while its content is still in the index (a
    /// reconcile may have dropped it since it was read): an embedding is never left behind by
    /// its content. The revision stays as it is: no answer's rows change. Returns the hashes
    /// stored. Redb runs one write at a time, so a reconcile waits for this commit (a batch's
    /// few inserts) or this one for it.
    pub fn store_vectors(&self, batch: &[(Hash, Quantized)]) -> Result<Vec<Hash>> {
        let Handle::Writer(Writer { slot, .. }) = &self.handle else {
            return Err(
                IndexError::Unavailable("a read-only index cannot store embeddings").into(),
            );
        };
        let slot = slot.read().map_err(|_| poisoned())?;
        let stores = slot.as_ref().ok_or_else(closed)?;
        let txn = stores.index.begin_write().map_err(Error::index)?;
        let mut stored = Vec::with_capacity(batch.len());
        {
            let docs = txn.open_table(DOCS).map_err(Error::index)?;
            let mut vectors = txn.open_table(VECTORS).map_err(Error::index)?;
            for (hash, vector) in batch {
                if docs.get(hash).map_err(Error::index)?.is_some() {
                    vectors
                        .insert(hash, vector.to_bytes().as_slice())
                        .map_err(Error::index)?;
                    stored.push(*hash);
                }
            }
        }
        txn.commit().map_err(Error::index)?;
        Ok(stored)
    }
}
