//! The texts store: the files' texts, in a redb file of its own beside the index
//! (`<index>.texts`), so that a reconcile stores them on a thread of its own while the index's
//! writer stores everything else. A redb file has one writer at a time, and the texts are most of
//! a cold build's bytes: in one file, one thread wrote them all while the other core waited
//! (issue 15). Texts are stored under keys the index hands out in order (its `text_ids` table
//! maps each content hash to one), so new texts are appended.
//!
//! The two files commit separately, so their order is what keeps them agreeing:
//! - **texts are added before** the index commit that refers to them: every key in the index's
//!   `text_ids` table has its text here;
//! - **texts are removed after** the index commit that dropped them: that commit lists their
//!   keys in the index's `texts_garbage` table, and the next reconcile removes them here, then
//!   clears the list in its own index commit.
//!
//! A write commits as it goes (see [`COMMIT_BYTES`]), so a reconcile that fails, or a crash
//! before the index commits, leaves texts under keys the index never handed out (at or above
//! its `next_text`): the next reconcile removes them before it adds any (see [`Removals`]). A
//! texts file that is missing, damaged, or made for another index file (its epoch differs) has
//! the pair rebuilt from disk, like a damaged index.
//!
//! The writer's process takes a snapshot of both files through a gate that a removal of
//! garbage closes (`Index::read`). A read-only follower in another process cannot: a removal
//! that lands between its two snapshots fails that one `get` with "content … is missing";
//! asking again answers.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::mpsc::Receiver;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use super::records::encode;
use super::tables::{META, META_EPOCH, META_SCHEMA, holds_no_table, stored_u64};
use crate::error::{Error, IndexError, Result};
use crate::locks;

fn layout(why: impl Into<String>) -> Error {
    IndexError::Layout(why.into()).into()
}

/// Texts store key → the file's text, LZ4-compressed (see
/// [`compress_text`](super::records::compress_text)). The index maps each content hash to its
/// key (`text_ids`) and hands keys out in increasing order (`next_text`), so new texts are
/// appended: a cold build fills each page once instead of reaching back into pages it has
/// already written (content hashes are random).
pub const TEXTS: TableDefinition<'static, u64, &[u8]> = TableDefinition::new("texts");
/// Version of this file's layout, in its `meta` table beside the `epoch` of the index file it
/// belongs to; see `migrations/`.
const SCHEMA_VERSION: u64 = 2;

/// Memory redb may use to cache this file's pages. A text is read once per `skills::get` of a
/// row, from the OS cache when not from here. Half of it is redb's write buffer, which holds
/// about one commit's pages (see [`COMMIT_BYTES`]): 32 MiB with commits of 8 built no faster.
pub const CACHE_BYTES: usize = 8 * 1024 * 1024;
/// A write commits each time it has stored this many bytes of texts, and at its end. A commit
/// computes the checksums of the pages it wrote: while they are still in the write buffer that
/// is cheap, and it runs beside the reading of the next files. A cold build committed only at
/// its end re-read and rewrote every page of the store while nothing else ran (0.4 s at 50,000
/// skills). What such a commit leaves when its reconcile fails is removed by the next one (see
/// [`Removals`]).
const COMMIT_BYTES: usize = 3 * 1024 * 1024;

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
        (Some(SCHEMA_VERSION), _) => Err(layout("the texts store belongs to another index file")),
        (Some(other), _) => Err(layout(format!(
            "texts store schema version {other} is not {SCHEMA_VERSION} (see migrations/)"
        ))),
        (None, _) if !holds_no_table(db)? => Err(layout("texts store without a schema version")),
        (None, _) if new => create(db, epoch),
        (None, _) => Err(IndexError::Missing("the texts store".into()).into()),
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

/// New texts of one batch of reads, by key, in key order.
pub type Batch = Vec<(u64, Vec<u8>)>;

/// What a reconcile sends the texts store's writer.
pub enum Sent {
    Batch(Batch),
    /// Every batch is sent: commit. A writer whose sender goes away without this does not
    /// commit what it holds (the reconcile failed).
    Commit,
}

/// What a reconcile's write removes from the texts store before it adds texts.
pub struct Removals {
    /// Keys an earlier index commit stopped referring to (the index's `texts_garbage`).
    pub garbage: Vec<u64>,
    /// The first key the index has not handed out (`next_text`): texts at or above it were
    /// stored by a reconcile whose index commit never came (it failed, or the process died).
    pub next: u64,
}

/// One reconcile's write to the texts store, run on a thread of its own: removes what
/// `removals` names, then stores each batch as it arrives, committing every [`COMMIT_BYTES`]
/// and on [`Sent::Commit`]. The last commit is durable before this returns, so the index may
/// then commit references to these texts. `gate` is held while a commit that removes garbage
/// becomes visible (see [`super::Index::read`]). With nothing to remove or store, nothing is
/// written.
pub fn write(
    db: &redb::Database,
    removals: &Removals,
    received: Receiver<Sent>,
    gate: &RwLock<()>,
) -> Result<()> {
    let mut txn = remove(db, removals)?;
    // Whether `txn` removes texts an index commit referred to.
    let mut removes_garbage = txn.is_some() && !removals.garbage.is_empty();
    let mut uncommitted = 0;
    for sent in received {
        match sent {
            Sent::Batch(batch) if batch.is_empty() => {}
            Sent::Batch(batch) => {
                let mut table = begun(&mut txn, db)?
                    .open_table(TEXTS)
                    .map_err(Error::index)?;
                for (key, packed) in &batch {
                    table.insert(key, packed.as_slice()).map_err(Error::index)?;
                    uncommitted += packed.len();
                }
                drop(table);
                if uncommitted >= COMMIT_BYTES {
                    commit(txn.take(), removes_garbage, gate)?;
                    (removes_garbage, uncommitted) = (false, 0);
                }
            }
            Sent::Commit => return commit(txn.take(), removes_garbage, gate),
        }
    }
    Ok(())
}

/// A write transaction holding the removals, or `None` when there is nothing to remove.
fn remove(db: &redb::Database, removals: &Removals) -> Result<Option<redb::WriteTransaction>> {
    let left_over = {
        let txn = db.begin_read().map_err(Error::index)?;
        let table = txn.open_table(TEXTS).map_err(Error::index)?;
        let last = table.last().map_err(Error::index)?;
        last.is_some_and(|(key, _)| key.value() >= removals.next)
    };
    if removals.garbage.is_empty() && !left_over {
        return Ok(None);
    }
    let txn = db.begin_write().map_err(Error::index)?;
    {
        let mut table = txn.open_table(TEXTS).map_err(Error::index)?;
        for key in &removals.garbage {
            table.remove(key).map_err(Error::index)?;
        }
        if left_over {
            table
                .retain_in(removals.next.., |_, _| false)
                .map_err(Error::index)?;
        }
    }
    Ok(Some(txn))
}

/// Commits `txn`, if any, with the gate closed when it `removes_garbage`.
fn commit(
    txn: Option<redb::WriteTransaction>,
    removes_garbage: bool,
    gate: &RwLock<()>,
) -> Result<()> {
    let Some(txn) = txn else { return Ok(()) };
    let _closed = removes_garbage.then(|| locks::write(gate));
    let started = std::time::Instant::now();
    let committed = txn.commit().map_err(Error::index);
    tracing::debug!(
        commit_ms = started.elapsed().as_millis() as u64,
        "texts committed"
    );
    committed
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

/// The text under `key` in a snapshot of the store.
pub fn get(txn: &redb::ReadTransaction, key: u64) -> Result<Option<String>> {
    txn.open_table(TEXTS)
        .map_err(Error::index)?
        .get(key)
        .map_err(Error::index)?
        .map(|v| super::records::decompress_text(v.value()))
        .transpose()
}
