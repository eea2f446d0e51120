//! The texts store: the files' texts by content hash, in a redb file of its own beside the index
//! (`<index>.texts`), so that a reconcile stores them on a thread of its own while the index's
//! writer stores everything else. A redb file has one writer at a time, and the texts are most of
//! a cold build's bytes: in one file, one thread wrote them all while the other core waited
//! (issue 15).
//!
//! The two files commit separately, so their order is what keeps them agreeing:
//! - **texts are added before** the index commit that refers to them: every content hash in the
//!   index's `docs` table has its text here;
//! - **texts are removed after** the index commit that dropped them: that commit lists them in
//!   the index's `texts_garbage` table, and the next reconcile removes them here, then clears
//!   the list in its own index commit.
//!
//! A crash between the two commits leaves at most texts nobody refers to (space, never a wrong
//! answer); a texts file that is missing, damaged, or made for another index file (its epoch
//! differs) has the pair rebuilt from disk, like a damaged index.
//!
//! The writer's process takes a snapshot of both files through a gate that a removal closes
//! (`Index::read`). A read-only follower in another process cannot: a removal that lands
//! between its two snapshots fails that one `get` with "content … is missing"; asking again
//! answers.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::mpsc::Receiver;

use redb::{ReadableDatabase, TableDefinition};

use super::records::encode;
use super::tables::{META, META_EPOCH, META_SCHEMA, holds_no_table, stored_u64};
use crate::doc::Hash;
use crate::error::{Error, Result};

/// Content hash → the file's text, LZ4-compressed (see
/// [`compress_text`](super::records::compress_text)).
pub const TEXTS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("content");
/// Version of this file's layout, in its `meta` table beside the `epoch` of the index file it
/// belongs to; see `migrations/`.
const SCHEMA_VERSION: u64 = 1;

/// Memory redb may use to cache this file's pages. A text is read once per `skills::get` of a
/// row, from the OS cache when not from here. In a cold build a larger cache only moves the
/// writing of the pages to the commit, where nothing else runs: at 50,000 skills the commit
/// took 0.37 s with 8 MiB, 0.44 s with 64 and 0.54 s with 256.
pub const CACHE_BYTES: usize = 8 * 1024 * 1024;

/// The texts store of the index at `index`.
pub fn path(index: &Path) -> PathBuf {
    crate::store::beside(index, ".texts")
}

/// Checks that an opened texts file belongs to the index of `epoch`, or makes a new one its
/// store when the index is `new` too. An empty texts file beside an index that is not new is
/// refused: the texts that index refers to are gone.
pub fn check(db: &redb::Database, epoch: u64, new: bool) -> Result<()> {
    let (schema, stored_epoch) = {
        let txn = db.begin_read().map_err(Error::index)?;
        (
            stored_u64(&txn, META_SCHEMA)?,
            stored_u64(&txn, META_EPOCH)?,
        )
    };
    match (schema, stored_epoch) {
        (Some(SCHEMA_VERSION), Some(e)) if e == epoch => Ok(()),
        (Some(SCHEMA_VERSION), _) => Err(Error::Index(
            "the texts store belongs to another index file".into(),
        )),
        (Some(other), _) => Err(Error::Index(format!(
            "texts store schema version {other} is not {SCHEMA_VERSION} (see migrations/)"
        ))),
        (None, _) if !holds_no_table(db)? => {
            Err(Error::Index("texts store without a schema version".into()))
        }
        (None, _) if new => create(db, epoch),
        (None, _) => Err(Error::Index("the texts store is missing".into())),
    }
}

fn create(db: &redb::Database, epoch: u64) -> Result<()> {
    let txn = db.begin_write().map_err(Error::index)?;
    {
        txn.open_table(TEXTS).map_err(Error::index)?;
        let mut meta = txn.open_table(META).map_err(Error::index)?;
        meta.insert(META_SCHEMA, encode(&SCHEMA_VERSION).as_slice())
            .map_err(Error::index)?;
        meta.insert(META_EPOCH, encode(&epoch).as_slice())
            .map_err(Error::index)?;
    }
    txn.commit().map_err(Error::index)
}

/// New texts of one batch of reads, in hash order.
pub type Batch = Vec<(Hash, Vec<u8>)>;

/// What a reconcile sends the texts store's writer.
pub enum Sent {
    Batch(Batch),
    /// Every batch is sent: commit. A writer whose sender goes away without this commits
    /// nothing (the reconcile failed).
    Commit,
}

/// One reconcile's write to the texts store, run on a thread of its own: removes `garbage`
/// (texts the index stopped referring to in an earlier commit), then stores each batch as it
/// arrives, and commits on [`Sent::Commit`]. The commit is durable before this returns, so the
/// index may then commit references to these texts. `gate` is held while a commit that removes
/// texts becomes visible (see [`super::Index::read`]). With nothing to remove or store,
/// nothing is written.
pub fn write(
    db: &redb::Database,
    garbage: &[Hash],
    received: Receiver<Sent>,
    gate: &RwLock<()>,
) -> Result<()> {
    let mut txn = None;
    if !garbage.is_empty() {
        let mut table = begun(&mut txn, db)?
            .open_table(TEXTS)
            .map_err(Error::index)?;
        for hash in garbage {
            table.remove(hash).map_err(Error::index)?;
        }
    }
    for sent in received {
        match sent {
            Sent::Batch(batch) if batch.is_empty() => {}
            Sent::Batch(batch) => {
                let mut table = begun(&mut txn, db)?
                    .open_table(TEXTS)
                    .map_err(Error::index)?;
                for (hash, packed) in &batch {
                    table
                        .insert(hash, packed.as_slice())
                        .map_err(Error::index)?;
                }
            }
            Sent::Commit => {
                let Some(txn) = txn else { return Ok(()) };
                let _closed =
                    (!garbage.is_empty()).then(|| gate.write().unwrap_or_else(|p| p.into_inner()));
                let started = std::time::Instant::now();
                let committed = txn.commit().map_err(Error::index);
                tracing::debug!(
                    commit_ms = started.elapsed().as_millis() as u64,
                    "texts committed"
                );
                return committed;
            }
        }
    }
    Ok(())
}

/// The write transaction, begun at the first thing to write.
fn begun<'t>(
    txn: &'t mut Option<redb::WriteTransaction>,
    db: &redb::Database,
) -> Result<&'t redb::WriteTransaction> {
    if txn.is_none() {
        *txn = Some(db.begin_write().map_err(Error::index)?);
    }
    Ok(txn.as_ref().expect("begun above"))
}

/// How many texts a snapshot of the store holds.
#[cfg(any(test, feature = "testing"))]
pub fn count(txn: &redb::ReadTransaction) -> Result<u64> {
    use redb::ReadableTableMetadata;
    txn.open_table(TEXTS)
        .map_err(Error::index)?
        .len()
        .map_err(Error::index)
}

/// The text of `hash` in a snapshot of the store.
pub fn get(txn: &redb::ReadTransaction, hash: &Hash) -> Result<Option<String>> {
    txn.open_table(TEXTS)
        .map_err(Error::index)?
        .get(hash)
        .map_err(Error::index)?
        .map(|v| super::records::decompress_text(v.value()))
        .transpose()
}
