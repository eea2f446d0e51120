//! Reconcile: make the index equal to what a fresh scan of the roots computes, reading only
//! what changed. It runs in named phases, all in one write transaction of the index, beside the
//! texts store's writes (see [`super::texts`]), which a thread of its own makes and
//! commits as it goes, the last commit before the index's:
//!
//! 1. [`Plan::make`]: walk and stat the roots, and compare with the mirror: which files to read,
//!    which vanished, which folder facts changed, which parts of the views are dirty;
//! 2. [`store_files`]: read, hash, parse, encode and compress the changed files (in parallel,
//!    in bounded batches) and store them, their new texts in the texts store;
//! 3. [`drop_removed`] and [`collect_garbage`]: forget vanished files, and the contents no
//!    file holds any more (those whose count of files in the mirror fell to zero);
//! 4. [`update_views`]: recompute the dirty parts of the views (from the parses this reconcile
//!    made and those it reads back, see `parts`) and write the rows that differ from the
//!    stored ones;
//! 5. [`stamp`]: bump the revision when an answer changed, log which keys it changed (see
//!    [`super::changelog`]), and record the reconcile.
//!
//! Each phase costs what the change costs: nothing in a scoped reconcile looks at every file.

mod mirror;
mod parts;
mod read;
pub(super) mod retired;
mod store;

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::SyncSender;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use redb::WriteTransaction;

use super::changelog;
use super::records::{ReconcileStamp, Stat, encode};
use super::tables::*;
use super::texts;
use super::views::{self, Changes, Dirty, Inputs};
use super::walk::{TopDirs, Unreadable, walk, walk_scoped};
use crate::doc::{Hash, ParsedDoc};
use crate::error::{Error, IndexError, Result};
use crate::roots::{Root, Roots};
use crate::rules::skip::SkipReason;
use crate::time::Stamp;

pub use mirror::Mirror;
use mirror::Moves;
pub(crate) use read::Reading;

/// Files read per batch: bounds the memory a cold reindex holds at once.
const BATCH: usize = 1024;
/// Batches read but not yet stored, at most: what keeps the pool busy while the thread that
/// writes the index stores, and bounds the memory a cold reindex holds.
const READ_AHEAD: usize = 4;
/// Batches of new texts handed to the texts store's writer but not yet stored, at most: room
/// for it to catch up after it waits on a commit's sync (one every few MiB of texts, see
/// `texts`) or on redb growing the file, without stalling the index's writer and, through it,
/// the reading. With 2, a cold build of 50,000 skills used both cores 1.74 of the time; with 8
/// and 4 batches read ahead, 1.78.
const TEXTS_AHEAD: usize = 8;

/// A file whose mtime or ctime is this close to the scan is read again next time: a later
/// write in the same timestamp tick (coarse on many file systems) could leave its stat
/// unchanged.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// A reconcile whose files to read are at most this many racy files is checked for being a
/// write's echo before it begins a transaction (see `Plan::only_racy_rereads_unchanged`);
/// larger ones (a burst of edits, a boot) go straight to the transaction.
const RACY_REREADS_CHECKED_FIRST: usize = 64;

/// What one reconcile did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    /// Candidate files found on disk.
    pub files: usize,
    /// Files read (new or changed since the last reconcile).
    pub read: usize,
    /// Distinct contents parsed (content already known is not parsed again).
    pub parsed: usize,
    /// Files that vanished.
    pub removed: usize,
    /// Files and folders not served, or served with a problem (see `check`).
    pub skipped: usize,
    /// Whether any answer of the read functions changed (and so the revision was bumped).
    pub changed: bool,
    /// Which families' rows changed (the `external` events a watcher burst sends).
    pub skills_changed: bool,
    pub system_prompts_changed: bool,
    pub agents_changed: bool,
    pub revision: u64,
    pub duration_ms: u64,
    /// Temporary files killed writers left that this reconcile's walk found and removed (see
    /// `store::sweep_found_temps`); the others it found are listed as skipped.
    #[serde(skip)]
    pub temps: Vec<std::path::PathBuf>,
    /// Whether the views were computed from scratch rather than part by part.
    #[serde(skip)]
    pub views_from_scratch: bool,
}

impl Report {
    /// The families whose answers changed, in order.
    pub fn families_changed(&self) -> Vec<crate::events::Family> {
        use crate::events::Family;
        [
            (Family::Skills, self.skills_changed),
            (Family::SystemPrompts, self.system_prompts_changed),
            (Family::Agents, self.agents_changed),
        ]
        .into_iter()
        .filter_map(|(family, changed)| changed.then_some(family))
        .collect()
    }
}

/// Reconcile progress, for a progress line on long runs.
#[derive(Clone, Copy, Debug)]
pub enum Progress {
    Walked { files: usize, to_read: usize },
    Read { done: usize, total: usize },
}

/// What a reconcile looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every root, in full.
    All,
    /// Only these paths (files or folders, absolute) and what is under them; paths outside
    /// every root are ignored. Used for a library write and for watcher events.
    Paths(Vec<std::path::PathBuf>),
}

/// What a reconcile writes to: the index, its texts store (see [`super::texts`]), and the gate
/// that readers take a snapshot of both through.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub index: &'a redb::Database,
    pub texts: &'a redb::Database,
    pub gate: &'a RwLock<()>,
}

pub fn run(
    target: Target<'_>,
    mirror: &mut Mirror,
    roots: &Roots,
    scope: &Scope,
    progress: &dyn Fn(Progress),
) -> Result<Report> {
    let started = Instant::now();
    let scan_start = Stamp::now();
    let plan = Plan::make(mirror, roots, scope)?;
    tracing::debug!(
        to_read = plan.to_read.len(),
        walk_ms = started.elapsed().as_millis() as u64,
        "roots walked"
    );
    progress(Progress::Walked {
        files: plan.files,
        to_read: plan.to_read.len(),
    });
    let mut report = Report {
        read: plan.to_read.len(),
        removed: plan.removed.len(),
        temps: plan.temps.clone(),
        ..Report::default()
    };
    if plan.is_noop(mirror) || plan.only_racy_rereads_unchanged(mirror, roots, scan_start) {
        report.revision = mirror.revision;
        report.files = mirror.files.len();
        report.skipped = store::skipped_count(target.index)?;
        report.duration_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }
    report.views_from_scratch = plan.full_views;

    let txn = target.index.begin_write().map_err(Error::index)?;
    // Texts an earlier commit stopped referring to: removed from the texts store by this
    // reconcile's write to it, and from the list by this commit.
    let removals = texts::Removals {
        garbage: store::take_garbage(&txn)?,
        next: mirror.next_text,
    };
    std::thread::scope(|threads| {
        let (to_texts, texts_in) = std::sync::mpsc::sync_channel(TEXTS_AHEAD);
        let texts = std::thread::Builder::new()
            .name("iii-directory-texts".into())
            .spawn_scoped(threads, || {
                texts::write(target.texts, &removals, texts_in, target.gate)
            })
            .map_err(Error::thread("the texts store's writer"))?;
        let indexed = Phases {
            txn: &txn,
            mirror,
            roots,
            started,
            scan_start,
        }
        .run(plan, &mut report, to_texts, progress);
        // The texts are durable before the index commits anything that refers to them.
        texts.join().expect("the texts store's writer panicked")?;
        indexed
    })?;
    txn.commit().map_err(Error::index)?;
    tracing::debug!(
        commit_ms = started.elapsed().as_millis() as u64,
        "reconcile committed"
    );
    Ok(report)
}

/// Phases 2 to 5, in the index's write transaction; new texts go to the texts store's writer.
struct Phases<'a, 'txn> {
    txn: &'txn WriteTransaction,
    mirror: &'a mut Mirror,
    roots: &'a Roots,
    started: Instant,
    scan_start: Stamp,
}

impl Phases<'_, '_> {
    fn run(
        self,
        plan: Plan,
        report: &mut Report,
        to_texts: SyncSender<texts::Sent>,
        progress: &dyn Fn(Progress),
    ) -> Result<()> {
        let Phases {
            txn,
            mirror,
            roots,
            started,
            scan_start,
        } = self;
        let racy_after = scan_start.minus(mirror.racy_window);
        let mut moves = Moves::default();
        let fresh = store_files(
            txn,
            mirror,
            &mut moves,
            roots,
            (&plan.to_read, racy_after),
            &to_texts,
            progress,
        )?;
        // The texts store makes its last commit while the views are computed here. (Without
        // this, the sender's drop on an error tells it not to commit what it holds.)
        if to_texts.send(texts::Sent::Commit).is_err() {
            return Err(texts_stopped());
        }
        drop(to_texts);
        report.parsed = fresh.len();
        drop_removed(txn, mirror, &mut moves, &plan.removed)?;
        collect_garbage(txn, mirror, moves)?;
        tracing::debug!(
            read = report.read,
            parsed = report.parsed,
            read_ms = started.elapsed().as_millis() as u64,
            "files read and stored"
        );
        if plan.folders_changed(mirror) {
            store::folders(txn, &plan.top_dirs, &plan.unreadable)?;
            mirror.top_dirs = plan.top_dirs;
            mirror.unreadable = plan.unreadable;
        }
        let (changed, changes) = update_views(
            txn,
            mirror,
            plan.full_views,
            &plan.dirty,
            &plan.removed,
            fresh,
        )?;
        tracing::debug!(
            full = plan.full_views,
            namespaces = plan.dirty.namespaces.len(),
            narrowed = plan.dirty.skill_ids.len(),
            views_ms = started.elapsed().as_millis() as u64,
            "views updated"
        );
        stamp(
            txn,
            mirror,
            report,
            (&changed, &changes),
            scan_start,
            started,
        )
    }
}

/// The texts store's writer stopped early; its own error says why (see [`run`]).
fn texts_stopped() -> Error {
    IndexError::Unavailable("the texts store stopped taking texts").into()
}

/// A file to read: its key and its stat now.
type ToRead = ((Root, String), Stat);

/// Phase 1: what disk says, compared with what the index knows.
struct Plan {
    /// Candidate files found on disk.
    files: usize,
    /// Files that are new, changed, or were read too close to a change to trust their stat.
    to_read: Vec<ToRead>,
    /// Files the index knows that are gone (within the scope).
    removed: Vec<(Root, String)>,
    /// The complete folder facts after this reconcile.
    top_dirs: TopDirs,
    unreadable: Unreadable,
    /// Views are recomputed from scratch: a new index, or a folder became (un)listable.
    full_views: bool,
    /// Otherwise, the parts of the views whose rows may differ.
    dirty: Dirty,
    /// Writers' temporary files the walk saw and the sweep removed.
    temps: Vec<std::path::PathBuf>,
}

/// Removes the temporary files killed writers left among those the walk found, and lists the
/// others as skipped (a write in progress elsewhere, or one that could not clean up). Only the
/// index's writer reconciles, and it holds the write lock meanwhile, so none of them is a write
/// of this process in progress.
fn sweep_temps(roots: &Roots, found: &mut super::walk::Found) -> Vec<std::path::PathBuf> {
    if found.temps.is_empty() {
        return Vec::new();
    }
    // Only where the worker writes: a read-only root (reached directly, through a link from a
    // writable one, or nested inside one) holds other tools' files, whatever their names.
    let (writable, read_only): (Vec<_>, Vec<_>) =
        roots.active().partition(|(root, _)| root.writable());
    let read_only: Vec<std::path::PathBuf> = read_only
        .into_iter()
        .filter_map(|(_, path)| path.canonicalize().ok())
        .collect();
    let in_read_only = |path: &std::path::Path| {
        let folder = path.parent().and_then(|folder| folder.canonicalize().ok());
        folder.is_some_and(|folder| read_only.iter().any(|root| folder.starts_with(root)))
    };
    let paths: Vec<std::path::PathBuf> = found
        .temps
        .iter()
        .map(|(_, p)| p.clone())
        .filter(|p| !in_read_only(p))
        .collect();
    let allowed: Vec<&std::path::Path> = writable.into_iter().map(|(_, path)| path).collect();
    let sweep = crate::store::sweep_found_temps(&allowed, &paths);
    let kept: HashSet<&std::path::PathBuf> = sweep.kept.iter().collect();
    for (key, path) in std::mem::take(&mut found.temps) {
        // Removed, or gone meanwhile (another writer's sweep, a write that finished): not left.
        if !kept.contains(&path) {
            continue;
        }
        let pid = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(crate::store::temp_pid)
            .unwrap_or_default();
        found
            .unreadable
            .insert(key, SkipReason::UnfinishedWrite { pid });
    }
    sweep.removed
}

/// The other names (hard links) of the files a scoped walk found changed and that have more
/// than one: an in-place write through one name changes them all, and the watcher reports it
/// under that name only. Found by inode among the indexed files, a look at each (in memory)
/// paid only when such a file changed; a name on another device with the same inode number is
/// walked for nothing (its stat is unchanged).
fn other_names(
    mirror: &Mirror,
    roots: &Roots,
    found: &super::walk::Found,
) -> Option<Vec<std::path::PathBuf>> {
    let inodes: HashSet<u64> = found
        .shared
        .iter()
        .filter_map(|key| {
            let stat = found.files.get(key)?;
            // As `to_read` judges it: a racy file may have changed under the same stat.
            let changed = mirror
                .files
                .get(key)
                .is_none_or(|m| m.stat != *stat || m.racy);
            changed.then_some(stat.ino)
        })
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let more: Vec<std::path::PathBuf> = mirror
        .files
        .iter()
        .filter(|(key, meta)| inodes.contains(&meta.stat.ino) && !found.covers(key))
        .map(|((root, rel), _)| roots.file(*root, rel))
        .collect();
    (!more.is_empty()).then_some(more)
}

impl Plan {
    /// Fails when the walk ran short of resources (see `walk::Short`): it saw only part of
    /// the tree, and what it missed would be dropped as gone.
    fn make(mirror: &Mirror, roots: &Roots, scope: &Scope) -> Result<Plan> {
        let mut found = match scope {
            Scope::All => walk(roots),
            Scope::Paths(paths) => {
                let bounded = mirror.bounded_roots();
                let found = walk_scoped(roots, paths, &bounded);
                match other_names(mirror, roots, &found) {
                    Some(more) => walk_scoped(roots, &[paths.as_slice(), &more].concat(), &bounded),
                    None => found,
                }
            }
        };
        if let Some(short) = &found.short {
            return Err(short.error().into());
        }
        let temps = sweep_temps(roots, &mut found);
        let removed: Vec<(Root, String)> = match scope {
            Scope::All => mirror
                .files
                .keys()
                .filter(|key| !found.files.contains_key(*key))
                .cloned()
                .collect(),
            Scope::Paths(_) => found
                .covered(&mirror.files)
                .into_iter()
                .filter(|key| !found.files.contains_key(*key))
                .cloned()
                .collect(),
        };
        let (top_dirs, unreadable) = match scope {
            Scope::All => (found.top_dirs, found.unreadable),
            Scope::Paths(_) => found.merge_folders(&mirror.top_dirs, &mirror.unreadable),
        };
        // Views never computed, or a folder that became (un)listable, or a link, which reach
        // rows anywhere: recomputed from scratch. A conflict copy or a temporary file coming
        // or going is only its own skipped row.
        let notes = mirror
            .computed
            .then(|| views::changed_notes(&mirror.unreadable, &unreadable))
            .flatten();
        let full_views = notes.is_none();
        let files = found.files.len();
        let to_read: Vec<ToRead> = found
            .files
            .into_iter()
            .filter(|(key, stat)| {
                mirror
                    .files
                    .get(key)
                    .is_none_or(|m| m.stat != *stat || m.racy)
            })
            .collect();
        let dirty = match notes {
            Some(notes) => Dirty {
                notes,
                ..views::dirty_parts(
                    to_read.iter().map(|(key, _)| key).chain(&removed),
                    &mirror.top_dirs,
                    &top_dirs,
                )
            },
            None => Dirty::default(),
        };
        Ok(Plan {
            files,
            to_read,
            removed,
            top_dirs,
            unreadable,
            full_views,
            dirty,
            temps,
        })
    }

    fn folders_changed(&self, mirror: &Mirror) -> bool {
        self.top_dirs != mirror.top_dirs || self.unreadable != mirror.unreadable
    }

    /// Whether the files to read are only files read too close to their last change to trust
    /// their stat, unchanged since (same stat), each holding the content the index has for it
    /// and still as close to its change (so it would be stored exactly as it is): the echo
    /// of a write the index took in itself, which the watcher reports a moment later. Such a
    /// reconcile has nothing to commit; the files are read again, as the racy rule asks, but no
    /// transaction is begun (a commit is two fsyncs, which the call after every write paid).
    fn only_racy_rereads_unchanged(
        &self,
        mirror: &Mirror,
        roots: &Roots,
        scan_start: Stamp,
    ) -> bool {
        if !self.removed.is_empty() || !mirror.computed || self.folders_changed(mirror) {
            return false;
        }
        if self.to_read.is_empty() || self.to_read.len() > RACY_REREADS_CHECKED_FIRST {
            return false;
        }
        let reading = Reading {
            roots,
            known: &mirror.contents,
            claimed: Mutex::new(HashSet::new()),
            racy_after: scan_start.minus(mirror.racy_window),
            pack: false,
        };
        self.to_read.iter().all(|(key, stat)| {
            mirror.files.get(key).is_some_and(|known| {
                known.racy && known.stat == *stat && reading.read(key, *stat).meta == *known
            })
        })
    }

    /// Nothing to read, drop or recompute.
    fn is_noop(&self, mirror: &Mirror) -> bool {
        mirror.computed
            && self.to_read.is_empty()
            && self.removed.is_empty()
            && !self.folders_changed(mirror)
    }
}

/// Phase 2: reads, hashes, parses, encodes and compresses the files to read (on the pool),
/// and stores them; returns the new parses by content hash. Reading runs ahead of storing by up
/// to `READ_AHEAD` batches, so that neither waits for the other batch by batch; this thread
/// stores the files and parses, and hands the new texts to the texts store's writer, so that
/// redb's one writer per file does not leave a core idle.
fn store_files(
    txn: &WriteTransaction,
    mirror: &mut Mirror,
    moves: &mut Moves,
    roots: &Roots,
    (to_read, racy_after): (&[ToRead], Stamp),
    to_texts: &SyncSender<texts::Sent>,
    progress: &dyn Fn(Progress),
) -> Result<HashMap<Hash, ParsedDoc>> {
    let mut tables = store::FileTables::open(txn)?;
    let mut fresh: HashMap<Hash, ParsedDoc> = HashMap::new();
    // The counts are read by the reading threads while this one stores; they change only when
    // the moves are counted, after the last batch.
    let known = std::mem::take(&mut mirror.contents);
    let reading = Reading {
        roots,
        known: &known,
        claimed: Mutex::new(HashSet::new()),
        racy_after,
        pack: true,
    };
    let read_batch = |batch: &[ToRead]| -> Vec<read::Read> {
        batch
            .iter()
            .map(|(key, stat)| reading.read(key, *stat))
            .collect()
    };
    // Each batch is read whole by one thread of the pool, so that its threads go from batch to
    // batch without waiting for each other; a small change still spreads over all of them.
    let batch_len = BATCH
        .min(to_read.len().div_ceil(rayon::current_num_threads() * 4))
        .max(1);
    let mut done = 0;
    let stored = std::thread::scope(|scope| -> Result<()> {
        let (sender, batches) = std::sync::mpsc::sync_channel(READ_AHEAD);
        std::thread::Builder::new()
            .name("iii-directory-read".into())
            .spawn_scoped(scope, move || {
                // An error means the receiver is gone (storing failed): reading stops.
                let _ = to_read
                    .par_chunks(batch_len)
                    .try_for_each_with(sender, |sender, batch| sender.send(read_batch(batch)));
            })
            .map_err(Error::thread("reading the files"))?;
        for reads in batches {
            done += reads.len();
            let texts = tables.store(reads, mirror, moves, &mut fresh)?;
            if to_texts.send(texts::Sent::Batch(texts)).is_err() {
                return Err(texts_stopped());
            }
            progress(Progress::Read {
                done,
                total: to_read.len(),
            });
        }
        Ok(())
    });
    drop(reading);
    mirror.contents = known;
    stored.map(|()| fresh)
}

/// Phase 3a: forgets the files that vanished.
fn drop_removed(
    txn: &WriteTransaction,
    mirror: &mut Mirror,
    moves: &mut Moves,
    removed: &[(Root, String)],
) -> Result<()> {
    let mut tables = store::FileTables::open(txn)?;
    for key in removed {
        tables.remove(key, mirror, moves)?;
    }
    Ok(())
}

/// Phase 3b: drops the parsed documents and texts no file refers to any more: of the contents
/// this reconcile's files left, those no other file holds.
fn collect_garbage(txn: &WriteTransaction, mirror: &mut Mirror, moves: Moves) -> Result<()> {
    let orphans = mirror.count(moves);
    if orphans.is_empty() {
        return Ok(());
    }
    store::FileTables::open(txn)?.forget(&orphans)
}

/// Phase 4: the dirty parts of the views recomputed (or all of them, `full`), compared with
/// the stored rows of those parts, and the rows that differ written. The parses the views look
/// at are this reconcile's `fresh` ones and, for unchanged files, read back from the docs
/// table.
fn update_views(
    txn: &WriteTransaction,
    mirror: &mut Mirror,
    full: bool,
    dirty: &Dirty,
    removed: &[(Root, String)],
    fresh: HashMap<Hash, ParsedDoc>,
) -> Result<(store::Changed, Changes)> {
    let needed: Vec<_> = if full {
        mirror.files.iter().collect()
    } else {
        views::files_needed(&mirror.files, &mirror.prompt_files, dirty)
    };
    let docs = parts::docs(txn, &needed, fresh)?;
    drop(needed);
    let inputs = Inputs {
        files: &mirror.files,
        docs: &docs,
        top_dirs: &mirror.top_dirs,
        unreadable: &mirror.unreadable,
        prompt_files: &mirror.prompt_files,
    };
    let (old, new) = if full {
        (parts::all(txn)?, views::compute(&inputs))
    } else {
        (
            parts::stored(txn, &inputs, dirty, removed)?,
            views::compute_parts(&inputs, dirty),
        )
    };
    let changes = Changes::between(&old, &new);
    drop(old);
    let changed = store::view_changes(txn, &new, &changes)?;
    mirror.computed = true;
    if full {
        // Tens of thousands of parses and rows: freed on the pool, off the commit's path.
        rayon::spawn(move || drop((docs, new)));
    }
    Ok((changed, changes))
}

/// Phase 5: the revision (bumped when an answer changed; file bookkeeping alone, such as a
/// racy file read again with the same content, does not bump it), the keys it changed in the
/// change log, and the reconcile's stamp.
fn stamp(
    txn: &WriteTransaction,
    mirror: &mut Mirror,
    report: &mut Report,
    (changed, changes): (&store::Changed, &Changes),
    scan_start: Stamp,
    started: Instant,
) -> Result<()> {
    report.skills_changed = changed.skills;
    report.system_prompts_changed = changed.prompts;
    report.agents_changed = changed.agents;
    report.changed = changed.skills || changed.prompts || changed.agents || changed.skipped;
    if report.changed {
        mirror.revision += 1;
        changelog::record(txn, mirror.revision, changes, mirror.log_keep)?;
    }
    report.revision = mirror.revision;
    report.files = mirror.files.len();
    report.skipped = changed.skipped_rows;
    report.duration_ms = started.elapsed().as_millis() as u64;
    let mut meta = txn.open_table(META).map_err(Error::index)?;
    meta.insert(META_REVISION, encode(&mirror.revision).as_slice())
        .map_err(Error::index)?;
    let stamp = ReconcileStamp {
        at: scan_start,
        duration_ms: report.duration_ms,
    };
    meta.insert(META_RECONCILE, encode(&stamp).as_slice())
        .map_err(Error::index)?;
    meta.insert(META_NEXT_TEXT, encode(&mirror.next_text).as_slice())
        .map_err(Error::index)?;
    Ok(())
}

/// The views of the roots from scratch, without any index: walk, read and parse every file,
/// merge. What a reconcile must agree with, and what a rescan on every read pays; tests and
/// the benchmark baseline use it.
#[cfg(any(test, feature = "testing"))]
pub fn fresh_views(roots: &Roots) -> views::Views {
    let found = walk(roots);
    let never = Stamp {
        secs: i64::MAX,
        nanos: 0,
    };
    let known = HashMap::new();
    let reading = Reading {
        roots,
        known: &known,
        claimed: Mutex::new(HashSet::new()),
        racy_after: never,
        pack: false,
    };
    let reads: Vec<read::Read> = found
        .files
        .par_iter()
        .map(|(key, stat)| reading.read(key, *stat))
        .collect();
    let mut files = std::collections::BTreeMap::new();
    let mut docs = HashMap::new();
    for read in reads {
        if let (Ok(hash), Some(new)) = (&read.meta.content, read.new) {
            docs.insert(*hash, new.parsed);
        }
        files.insert(read.key, read.meta);
    }
    views::compute(&Inputs {
        files: &files,
        docs: &docs,
        top_dirs: &found.top_dirs,
        unreadable: &found.unreadable,
        prompt_files: &views::prompt_files(files.keys()),
    })
}
