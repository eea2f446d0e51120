//! The change log: which row keys of which list table changed at each index revision, kept
//! for the last `change_log_revisions` revisions, so that a `list` can answer with what changed
//! since a revision its caller holds instead of every row.
//!
//! Layout (table [`CHANGE_LOG`]): `(table, revision, key)` → nothing, one entry per view row
//! that was inserted, replaced or removed at that revision (`table` is a [`Logged`]). The meta
//! value [`META_LOG_FLOOR`] is the oldest revision the log can answer from: for every revision
//! after it up to the current one, every changed key is in the table. Entries at or below the
//! floor are deleted as it rises.
//!
//! The log is written by reconcile's last phase, in the same write transaction as the rows it
//! describes, so it survives restarts and never disagrees with the rows, even across a crash.
//! A revision that changed more than [`MAX_KEYS_PER_REVISION`] keys (a new index, a folder that
//! became unreadable, a large download) is not itemised: the floor moves up to it, and callers
//! holding an older revision get the whole list again, which costs no more than such a delta.

use std::collections::BTreeSet;

use redb::{ReadableTable, Table, WriteTransaction};

use super::records::encode;
use super::tables::{CHANGE_LOG, META, META_LOG_FLOOR, meta_u64};
use super::views::Changes;
use crate::error::{Error, Result};

/// A revision changing more keys than this is not itemised (see the module doc).
const MAX_KEYS_PER_REVISION: usize = 4_096;

/// The list tables whose changes are logged, as stored in the log's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Logged {
    Skills = 0,
    Prompts = 1,
    Agents = 2,
}

impl Logged {
    pub const ALL: [Logged; 3] = [Logged::Skills, Logged::Prompts, Logged::Agents];

    fn keys(self, changes: &Changes) -> &BTreeSet<String> {
        match self {
            Logged::Skills => &changes.skills,
            Logged::Prompts => &changes.prompts,
            Logged::Agents => &changes.agents,
        }
    }
}

/// Records what `revision` changed and trims the log to the last `keep` revisions. Called only
/// when the revision was bumped, inside the reconcile's write transaction.
pub fn record(txn: &WriteTransaction, revision: u64, changes: &Changes, keep: u64) -> Result<()> {
    let mut meta = txn.open_table(META).map_err(Error::index)?;
    let mut floor = meta_u64(&meta, META_LOG_FLOOR)?.unwrap_or(0);
    let count: usize = Logged::ALL.iter().map(|t| t.keys(changes).len()).sum();
    let mut log = txn.open_table(CHANGE_LOG).map_err(Error::index)?;
    if count > MAX_KEYS_PER_REVISION || keep == 0 {
        floor = revision;
    } else {
        for table in Logged::ALL {
            for key in table.keys(changes) {
                log.insert((table as u8, revision, key.as_str()), ())
                    .map_err(Error::index)?;
            }
        }
        floor = floor.max(revision.saturating_sub(keep));
    }
    trim(&mut log, floor)?;
    meta.insert(META_LOG_FLOOR, encode(&floor).as_slice())
        .map_err(Error::index)?;
    Ok(())
}

/// Deletes the entries of revisions at or below `floor`: no answer reads them any more.
fn trim(log: &mut Table<'_, (u8, u64, &'static str), ()>, floor: u64) -> Result<()> {
    for table in Logged::ALL {
        let t = table as u8;
        log.retain_in(
            (t, 0, "")..=(t, floor, "\u{10FFFF}\u{10FFFF}"),
            |(_, rev, _), ()| rev > floor,
        )
        .map_err(Error::index)?;
    }
    Ok(())
}

/// The keys of `table` that changed after revision `since`, up to the log's newest revision;
/// `None` when the log no longer reaches back to `since` (it is below the floor).
pub fn changed_since<T>(
    log: &T,
    floor: u64,
    table: Logged,
    since: u64,
) -> Result<Option<BTreeSet<String>>>
where
    T: ReadableTable<(u8, u64, &'static str), ()>,
{
    if since < floor {
        return Ok(None);
    }
    let t = table as u8;
    let mut keys = BTreeSet::new();
    let Some(first) = since.checked_add(1) else {
        return Ok(Some(keys));
    };
    for entry in log
        .range((t, first, "")..(t + 1, 0, ""))
        .map_err(Error::index)?
    {
        let (key, _) = entry.map_err(Error::index)?;
        keys.insert(key.value().2.to_string());
    }
    Ok(Some(keys))
}

/// A new index file's identity: random, so that revisions of two index files (a rebuilt one,
/// another tree) are never taken for each other (see `list_revision`).
pub fn new_epoch() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // `RandomState` is seeded from the operating system's randomness; the clock and the
    // process id make two indexes created by one process differ too.
    let mut hasher = std::hash::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::tables::CHANGE_LOG;
    use redb::ReadableDatabase;

    fn changes(skills: &[&str], agents: &[&str]) -> Changes {
        Changes {
            skills: skills.iter().map(|s| s.to_string()).collect(),
            agents: agents.iter().map(|s| s.to_string()).collect(),
            ..Changes::default()
        }
    }

    fn db() -> (tempfile::TempDir, redb::Database) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = redb::Database::create(dir.path().join("log.redb")).expect("create");
        (dir, db)
    }

    fn write(db: &redb::Database, revision: u64, c: &Changes, keep: u64) {
        let txn = db.begin_write().expect("write");
        record(&txn, revision, c, keep).expect("record");
        txn.commit().expect("commit");
    }

    /// (floor, every entry) as the file holds them.
    fn state(db: &redb::Database) -> (u64, Vec<(u8, u64, String)>) {
        let txn = db.begin_read().expect("read");
        let meta = txn.open_table(META).expect("meta");
        let floor = meta_u64(&meta, META_LOG_FLOOR)
            .expect("decode")
            .expect("floor");
        let log = txn.open_table(CHANGE_LOG).expect("log");
        let entries = log
            .iter()
            .expect("iter")
            .map(|e| {
                let (k, _) = e.expect("entry");
                let (t, r, key) = k.value();
                (t, r, key.to_string())
            })
            .collect();
        (floor, entries)
    }

    fn since(db: &redb::Database, table: Logged, since: u64) -> Option<Vec<String>> {
        let txn = db.begin_read().expect("read");
        let (floor, _) = state(db);
        let log = txn.open_table(CHANGE_LOG).expect("log");
        changed_since(&log, floor, table, since)
            .expect("read")
            .map(|k| k.into_iter().collect())
    }

    #[test]
    fn the_log_keeps_the_last_revisions_and_trims_the_rest() {
        let (_dir, db) = db();
        for revision in 1..=10 {
            let key = format!("s{revision}");
            write(&db, revision, &changes(&[&key], &["a"]), 3);
        }
        let (floor, entries) = state(&db);
        assert_eq!(floor, 7, "three revisions kept: 8, 9 and 10");
        let revisions: BTreeSet<u64> = entries.iter().map(|e| e.1).collect();
        assert_eq!(revisions, BTreeSet::from([8, 9, 10]), "{entries:?}");
        assert_eq!(entries.len(), 6, "one skill and one agent per revision");
        assert_eq!(
            since(&db, Logged::Skills, 7),
            Some(vec!["s10".into(), "s8".into(), "s9".into()])
        );
        assert_eq!(since(&db, Logged::Skills, 9), Some(vec!["s10".into()]));
        assert_eq!(since(&db, Logged::Skills, 10), Some(vec![]));
        assert_eq!(since(&db, Logged::Agents, 8), Some(vec!["a".into()]));
        assert_eq!(since(&db, Logged::Prompts, 8), Some(vec![]));
        assert_eq!(since(&db, Logged::Skills, 6), None, "below the floor");
    }

    #[test]
    fn a_smaller_keep_trims_at_once_and_a_larger_one_cannot_bring_entries_back() {
        let (_dir, db) = db();
        for revision in 1..=6 {
            write(&db, revision, &changes(&["x"], &[]), 100);
        }
        assert_eq!(state(&db).0, 0);
        write(&db, 7, &changes(&["y"], &[]), 2);
        let (floor, entries) = state(&db);
        assert_eq!(floor, 5);
        assert_eq!(entries.len(), 2);
        write(&db, 8, &changes(&["z"], &[]), 100);
        assert_eq!(state(&db).0, 5, "the floor never goes down");
        assert_eq!(
            since(&db, Logged::Skills, 5),
            Some(vec!["x".into(), "y".into(), "z".into()])
        );
    }

    #[test]
    fn a_revision_with_too_many_changes_moves_the_floor_to_itself() {
        let (_dir, db) = db();
        write(&db, 1, &changes(&["a"], &[]), 100);
        let many: Vec<String> = (0..=MAX_KEYS_PER_REVISION)
            .map(|i| format!("k{i}"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        write(&db, 2, &changes(&many, &[]), 100);
        let (floor, entries) = state(&db);
        assert_eq!(floor, 2);
        assert!(entries.is_empty(), "nothing at or below the floor is kept");
        assert_eq!(since(&db, Logged::Skills, 1), None);
        assert_eq!(since(&db, Logged::Skills, 2), Some(vec![]));
        write(&db, 3, &changes(&["b"], &[]), 100);
        assert_eq!(since(&db, Logged::Skills, 2), Some(vec!["b".into()]));
    }

    #[test]
    fn keep_zero_logs_nothing() {
        let (_dir, db) = db();
        write(&db, 1, &changes(&["a"], &["b"]), 0);
        assert_eq!(state(&db), (1, vec![]));
        assert_eq!(since(&db, Logged::Skills, 0), None);
        assert_eq!(since(&db, Logged::Skills, 1), Some(vec![]));
    }

    #[test]
    fn epochs_differ() {
        let epochs: BTreeSet<u64> = (0..100).map(|_| new_epoch()).collect();
        assert_eq!(epochs.len(), 100);
    }
}
