//! The embedded redb index: a cache of the roots on disk that the read functions answer from.
//! This file opens it (rebuilding a damaged or foreign file) and dispatches reconciles;
//! `reader` answers from a snapshot, `reconcile` brings it up to date, `views` merges the
//! roots into rows with the family rules, `walk` lists what is on disk.
//!
//! Architecture invariants: nothing here reads a file's content outside [`Index::reconcile`],
//! and reconcile is the only way the index changes. The index never calls a family's read or
//! write code; it knows the families only through their rules. The index can always be deleted
//! and rebuilt from disk.

pub mod changelog;
mod clean_close;
pub mod holder;
mod isolated;
mod owned;
mod reader;
pub mod reconcile;
pub mod records;
pub mod tables;
mod texts;
pub mod trouble;
mod vectors;
pub mod views;
pub mod walk;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use redb::ReadableDatabase;

use crate::config::ConfigError;
use crate::error::{Error, IndexError, IoError, Result, io_error, short_of_resources};
use crate::locks;
use clean_close::CleanClose;
use tables::*;
use trouble::Trouble;

pub use reader::{Reader, Specs};
pub use reconcile::{Progress, Report, Scope};
pub use vectors::ContentVectors;

/// Memory redb may use to cache pages. Reads beyond it come from the file (and the OS cache);
/// the default of 1 GiB would dominate the worker's footprint. The answers a worker serves most
/// come from rows decoded once (the skill cache), so the pages are read rarely after boot: at
/// 50,000 skills, 8 MiB instead of 32 took 27 MiB off the worker's peak for about 4 µs more
/// per `skills::get` (the text's page is read from the OS cache), and 4 MiB instead of 8 took
/// about 4 MiB more off with no change to `get` or to a cold reindex
/// (`BENCH_SECTIONS="memory reads reindex"`, issue 15).
const CACHE_BYTES: usize = 4 * 1024 * 1024;

/// Why the index could not be opened: for writing (`Directory::open`), or at all
/// (`open_read_only`, `open_shared`).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another process (a running worker, usually) is the index's writer.
    #[error("another process is writing the index at {}", .0.display())]
    Busy(PathBuf),
    /// The writer's files could not be opened, made or rebuilt.
    #[error("index at {}: {source}", path.display())]
    Failed {
        path: PathBuf,
        #[source]
        source: Error,
    },
    /// A file at `index_path` (or its texts store) that is not an index this worker made: it is
    /// left untouched (see `owned.rs` for the rule).
    #[error(
        "index_path: {} is {why}; it is left untouched. Set index_path to a file of its own{}",
        path.display(),
        if *a_file { " (or delete this one if it is a damaged index)" } else { "" }
    )]
    NotOurs {
        path: PathBuf,
        why: String,
        a_file: bool,
    },
    /// The index file cannot be written where it is (a read-only file system, a folder this
    /// process may not write): it is left as it is.
    #[error(
        "index_path: {} cannot be written ({source}); the index is a cache this process keeps up to date and needs a writable place. Set index_path to a file in a writable folder (nothing is lost: the index is rebuilt from the folders)",
        path.display()
    )]
    Unwritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The worker holding the index serves other folders than this process's configuration
    /// names: its rows are not this configuration's to answer with.
    #[error(
        "the index at {} belongs to {holder}, which serves other folders ({difference}); answering from it would show that tree as this one. Use the folders the worker serves (its `directory::index::status` names them; a configuration stored in the engine since it started, which `iii trigger configuration::get id=iii-directory` shows, is served only after the worker restarts), or give this configuration an index_path of its own",
        path.display()
    )]
    OtherFolders {
        path: PathBuf,
        holder: String,
        difference: String,
    },
    /// The configured folders break a layout rule (`config::layout`): nothing was opened.
    #[error(transparent)]
    Unsafe(#[from] ConfigError),
    /// A read-only follower of another process's writer could not open the index.
    #[error(transparent)]
    Follow(#[from] IndexError),
}

enum Handle {
    Writer(Writer),
    Reader {
        index: redb::ReadOnlyDatabase,
        texts: redb::ReadOnlyDatabase,
    },
}

/// The writer's two files: the index, and the texts store it refers to (see [`texts`]).
struct Stores {
    index: redb::Database,
    texts: redb::Database,
}

/// The writer's databases. Closing them cleanly leaves a [`CleanClose`] stamp beside each file,
/// so the next open can skip verifying every page (seconds on a large tree).
struct Writer {
    /// `None` after a reconcile failed and the files could not be reopened (a full disk, say):
    /// the next reconcile tries again.
    slot: RwLock<Option<Stores>>,
    path: PathBuf,
    /// Set by [`Index::close`]: the files are closed for good, and nothing reopens them.
    closed: AtomicBool,
    /// The failing reconciles, while they last (see [`trouble`]).
    trouble: Mutex<Option<Trouble>>,
    /// The device and inode of the index file this writer opened: a file removed or replaced
    /// under it (a `git clean -fdx` of the folder it lives in) is noticed by the next read or
    /// reconcile, and by the watcher when the sync folder beside it goes.
    opened: Mutex<Option<(u64, u64)>>,
    /// The device and inode of the texts store this writer opened beside it.
    opened_texts: Mutex<Option<(u64, u64)>>,
    /// Set when the file was built again after it was removed or replaced; taken by
    /// [`Index::take_rebuilt`].
    rebuilt: AtomicBool,
    /// Set by [`Index::note_rows_complete`]: what a holder note written again says.
    rows_complete: AtomicBool,
}

/// The device and inode of the file at `path`, if there is one.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Writer {
    /// Closes the files and leaves the clean-close stamps (not while panicking: a panic may
    /// have left a write half done in memory).
    fn close(&self, stores: Option<Stores>) {
        // Close first: redb records the clean shutdown in the file, which changes its stat.
        if let Some(Stores { index, texts }) = stores {
            drop(index);
            drop(texts);
            if !std::thread::panicking() {
                CleanClose::record(&self.path);
                CleanClose::record(&texts::path(&self.path));
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let stores = locks::get_mut(&mut self.slot).take();
        self.close(stores);
    }
}

/// An open index file: the single writer (which reconciles) or a read-only follower.
pub struct Index {
    handle: Handle,
    path: PathBuf,
    /// The writer's in-memory copy of what reconcile compares against.
    mirror: Mutex<reconcile::Mirror>,
    /// The writer's last committed state, for [`Index::latest`].
    latest: Mutex<Option<Latest>>,
    /// Held (shared) while a snapshot of both files is taken, and (exclusively) while a commit
    /// that removes texts becomes visible: a snapshot never pairs an index that still refers to
    /// a text with a texts store that no longer holds it.
    gate: RwLock<()>,
}

/// An index file's identity and revision: what a list revision is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latest {
    pub epoch: u64,
    pub revision: u64,
}

fn builder(cache_bytes: usize) -> redb::Builder {
    let mut builder = redb::Builder::new();
    builder
        .set_concurrency_mode(redb::ConcurrencyMode::SingleWriter)
        .set_cache_size(cache_bytes);
    builder
}

impl Index {
    /// Opens (creating when missing) the index as its writer. A damaged index or one of another
    /// schema version is rebuilt: it is deleted here and refilled by the next reconcile.
    pub fn open_writer(path: &Path) -> Result<Index, OpenError> {
        let started = std::time::Instant::now();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| OpenError::Failed {
                path: path.to_path_buf(),
                source: io_error("create_dir_all", parent)(e).into(),
            })?;
        }
        let (stores, mirror) = open_or_rebuild(path)?;
        tracing::debug!(
            path = %path.display(),
            open_ms = started.elapsed().as_millis() as u64,
            "index opened as writer"
        );
        let index = Index {
            handle: Handle::Writer(Writer {
                slot: RwLock::new(Some(stores)),
                path: path.to_path_buf(),
                closed: AtomicBool::new(false),
                trouble: Mutex::new(None),
                opened: Mutex::new(file_id(path)),
                opened_texts: Mutex::new(file_id(&texts::path(path))),
                rebuilt: AtomicBool::new(false),
                rows_complete: AtomicBool::new(false),
            }),
            path: path.to_path_buf(),
            mirror: Mutex::new(mirror),
            latest: Mutex::new(None),
            gate: RwLock::new(()),
        };
        index.note_latest();
        Ok(index)
    }

    /// Opens the index as its writer, first waiting for a command of this binary that holds it
    /// (a `reindex`, a read bringing it up to date, a download) to let go: it does when done.
    /// Held by a worker, or by a process whose note does not appear within
    /// [`holder::NOTE_WAIT`] (an older binary, another program), it is `Busy`; so is it, with
    /// `follow_settled`, held by a command whose rows are complete (`Holder::settled`), which a
    /// read may follow. `waiting` is told once who is waited for.
    ///
    /// While no note names a live holder the open is tried again: the holder may have just
    /// taken the lock (it notes itself right after), or just let go of it, its note with it (two
    /// `reindex` run by cron at once met that, and the second took the first for a worker).
    pub fn open_writer_after_commands(
        path: &Path,
        follow_settled: bool,
        waiting: impl FnOnce(&holder::Holder),
    ) -> Result<Index, OpenError> {
        let mut waiting = Some(waiting);
        // Dropped when this returns: the note lasts while the wait does.
        let mut _wanted = None;
        let mut unnoted_since: Option<std::time::Instant> = None;
        loop {
            let busy = match Index::open_writer(path) {
                Err(OpenError::Busy(busy)) => busy,
                other => return other,
            };
            // A note of this process is one it left when it let go (a `reindex --from-scratch`
            // opens twice): another process took the lock since, and has not noted itself yet.
            let noted = holder::read(path).filter(|h| h.pid != std::process::id());
            match noted {
                Some(holder) if holder.is_command() && !(follow_settled && holder.settled) => {
                    unnoted_since = None;
                    if let Some(tell) = waiting.take() {
                        tell(&holder);
                        _wanted = holder::Wanted::note(path);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                Some(_) => return Err(OpenError::Busy(busy)),
                None => {
                    let since = unnoted_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() >= holder::NOTE_WAIT {
                        return Err(OpenError::Busy(busy));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
        }
    }

    /// Opens an existing index read-only, following a writer in another process.
    pub fn open_reader(path: &Path) -> Result<Index, IndexError> {
        if let Some(missing) = files(path).into_iter().find(|file| !file.exists()) {
            return Err(IndexError::NotBuilt(missing));
        }
        let open = |path: &Path, cache_bytes| {
            builder(cache_bytes)
                .open_read_only(path)
                .map_err(|source| IndexError::Follow {
                    path: path.to_path_buf(),
                    source,
                })
        };
        let index = open(path, CACHE_BYTES)?;
        let texts = open(&texts::path(path), texts::CACHE_BYTES)?;
        Ok(Index {
            handle: Handle::Reader { index, texts },
            path: path.to_path_buf(),
            mirror: Mutex::new(Default::default()),
            latest: Mutex::new(None),
            gate: RwLock::new(()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_writer(&self) -> bool {
        matches!(self.handle, Handle::Writer(_))
    }

    /// The writer's failing reconciles, while they last: reads serve the last recorded state
    /// meanwhile (see [`trouble`]). `None` for a follower.
    pub fn trouble(&self) -> Option<Trouble> {
        match &self.handle {
            Handle::Writer(writer) => locks::lock(&writer.trouble).clone(),
            Handle::Reader { .. } => None,
        }
    }

    /// Whether the watcher or a read may try a reconcile now: always, unless the last ones
    /// failed and their pause has not passed (see [`trouble`]).
    pub fn may_retry(&self) -> bool {
        self.trouble()
            .is_none_or(|t| t.retry_at() <= std::time::Instant::now())
    }

    /// How close to a scan a file's change must be for it to be read again next time (see
    /// [`reconcile::RACY_WINDOW`]). Tests that make sure each edit changes a file's stat lower it.
    #[cfg(any(test, feature = "testing"))]
    pub fn set_racy_window(&self, window: std::time::Duration) {
        if let Ok(mut mirror) = self.mirror.lock() {
            mirror.racy_window = window;
        }
    }

    /// How many revisions the change log keeps (`change_log_revisions`); applies from the
    /// next reconcile that changes something.
    pub fn set_change_log_revisions(&self, keep: u64) {
        match self.mirror.lock() {
            Ok(mut mirror) => mirror.log_keep = keep,
            // Every reconcile fails the same way then, and says so: this only must not be
            // lost without a word.
            Err(_) => tracing::warn!(
                "change_log_revisions: {keep} not applied: the index state was poisoned by a \
                 panic; restart the worker"
            ),
        }
    }

    /// A consistent snapshot of the index for reads: of both files, taken together.
    pub fn read(&self) -> Result<Reader> {
        let _open = self.gate.read().map_err(|_| poisoned())?;
        let (txn, texts) = match &self.handle {
            Handle::Writer(writer) => match writer.slot.read().map_err(|_| poisoned())?.as_ref() {
                Some(stores) => (stores.index.begin_read(), stores.texts.begin_read()),
                None => return Err(closed()),
            },
            Handle::Reader { index, texts } => (index.begin_read(), texts.begin_read()),
        };
        Ok(Reader {
            txn: txn.map_err(Error::index)?,
            texts: texts.map_err(Error::index)?,
        })
    }

    /// Brings the index up to date with the roots: see [`reconcile`].
    pub fn reconcile(
        &self,
        roots: &crate::roots::Roots,
        scope: &Scope,
        progress: &dyn Fn(Progress),
    ) -> Result<Report> {
        let Handle::Writer(writer) = &self.handle else {
            return Err(IndexError::Unavailable("a read-only index cannot reconcile").into());
        };
        let Writer { slot, trouble, .. } = writer;
        // Told once per spell of failures; the attempts after the first are logged at debug.
        let failing = locks::lock(trouble).is_some();
        let mut mirror = self.mirror.lock().map_err(|_| poisoned())?;
        let run = |mirror: &mut reconcile::Mirror, scope: &Scope| -> Result<Report> {
            match slot.read().map_err(|_| poisoned())?.as_ref() {
                Some(stores) => {
                    let target = reconcile::Target {
                        index: &stores.index,
                        texts: &stores.texts,
                        gate: &self.gate,
                    };
                    reconcile::run(target, mirror, roots, scope, progress)
                }
                None => Err(closed()),
            }
        };
        // A reopened index may have been rebuilt from nothing (its file was damaged): only a
        // reconcile of every root brings it back whole. A scoped one would leave it holding
        // the few paths of that scope, and every read answering from them.
        let mut scope = scope;
        let replaced = writer.replaced();
        if replaced {
            let which = if writer.index_replaced() {
                "the index file"
            } else {
                "the index's texts store (beside it)"
            };
            tracing::warn!(
                path = %self.path.display(),
                "{which} was removed or replaced while this process used it (a `git clean` of \
                 its folder, say); the index is built again there from the folders"
            );
            if let Some(parent) = self.path.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
        }
        if replaced || slot.read().map_err(|_| poisoned())?.is_none() {
            // A replaced file is another inode, with a lock of its own: it is opened before the
            // one served now is let go, so a failed open (a command holding the new file)
            // leaves reads served from the old.
            // The texts store alone gone (the index file still the one held): this writer's
            // files are let go of first, as the index file's lock is this writer's own, and
            // both are built again (a texts store of another index is no use to this one).
            let reopened = match replaced && writer.index_replaced() {
                true => self.open_again(slot, &mut mirror),
                false => self.reopen(slot, &mut mirror),
            };
            if let Err(e) = reopened {
                let result = Err(e);
                note_outcome(trouble, &result);
                return result;
            }
            scope = &Scope::All;
            if replaced {
                writer.rebuilt.store(true, Ordering::SeqCst);
            }
        }
        let mut result = run(&mut mirror, scope);
        if let Err(e) = &result {
            // redb refuses all work after a failed write to its file (a full disk, say, or a
            // file damaged under it), and the mirror may be ahead of what was committed: start
            // again from the file, which holds the last committed state, or from a rebuilt one.
            if failing {
                tracing::debug!(error = %e, "reconcile failed again; reopening the index");
            } else {
                tracing::warn!(error = %e, "reconcile failed; reopening the index");
            }
            let reopened = self.reopen(slot, &mut mirror).and_then(|()| {
                let whole = run(&mut mirror, &Scope::All);
                if whole.is_err() {
                    // Failed again (the disk is still full): back to the file's last state, so
                    // the mirror is never ahead of what was committed.
                    self.reopen(slot, &mut mirror)?;
                }
                whole
            });
            match reopened {
                Ok(report) => result = Ok(report),
                Err(again) if failing => tracing::debug!(
                    error = %again,
                    "the index could not be reopened and brought up to date"
                ),
                Err(again) => tracing::warn!(
                    error = %again,
                    "the index could not be reopened and brought up to date; reads serve its \
                     last recorded state, and it is tried again after a pause that grows to 30 s \
                     (or at the next write). If the disk holding {} is full, free space there",
                    self.path.display()
                ),
            }
        }
        note_outcome(trouble, &result);
        // Under the mirror lock, so that reconciles note their commits in order.
        self.note_latest();
        drop(mirror);
        result
    }

    /// The epoch and revision of the writer's last commit, kept in memory: the idle poll of a
    /// UI ("has anything changed since revision N?") is answered from it without a read
    /// transaction. `None` for a read-only follower, whose writer is another process (read a
    /// snapshot instead). Noted before [`Index::reconcile`] returns, so before the directory
    /// announces what the reconcile changed.
    pub fn latest(&self) -> Option<Latest> {
        *locks::lock(&self.latest)
    }

    fn note_latest(&self) {
        let latest = self.read().and_then(|r| r.latest());
        *locks::lock(&self.latest) = latest.ok();
    }

    /// Says in this process's holder note that the index's rows are complete: a read started
    /// now may follow this process instead of waiting for it (see [`holder::note_settled`]).
    pub fn note_rows_complete(&self) {
        if let Handle::Writer(writer) = &self.handle {
            writer.rows_complete.store(true, Ordering::SeqCst);
            holder::note_settled(&self.path);
        }
    }

    /// Whether this writer's rows are complete, for a holder note written again (see
    /// [`Index::note_rows_complete`]).
    pub fn rows(&self) -> holder::Rows {
        match &self.handle {
            Handle::Writer(writer) if writer.rows_complete.load(Ordering::SeqCst) => {
                holder::Rows::Complete
            }
            _ => holder::Rows::Building,
        }
    }

    /// The worker waiting for this process, a command, to let go of the index (see
    /// [`holder::Wanted`]).
    pub fn wanted_by_a_worker(&self) -> Option<holder::Holder> {
        match self.handle {
            Handle::Writer(_) => holder::wanted_by(&self.path),
            Handle::Reader { .. } => None,
        }
    }

    /// Closes the writer's files for good, leaving the clean-close stamps, so that the next
    /// open skips verifying every page. A worker shutting down calls it: the threads that
    /// still share the directory then (the SDK's handlers, the watcher) keep it from ever being
    /// dropped. Waits for a reconcile or a commit in flight; every later call is refused as on
    /// a closed index. A follower has nothing to close.
    pub fn close(&self) {
        let Handle::Writer(writer) = &self.handle else {
            return;
        };
        let _no_reconcile = locks::lock(&self.mirror);
        writer.closed.store(true, Ordering::SeqCst);
        let stores = locks::write(&writer.slot).take();
        writer.close(stores);
    }

    /// Closes the writer's database and opens it again (rebuilding it if the file is
    /// damaged), with the mirror reloaded from it. Callers hold the mirror lock. An index
    /// closed for good ([`Index::close`]) stays closed.
    fn reopen(&self, slot: &RwLock<Option<Stores>>, mirror: &mut reconcile::Mirror) -> Result<()> {
        self.refuse_when_closed()?;
        let mut slot = slot.write().map_err(|_| poisoned())?;
        // The file locks go with the old databases: they must be closed before the new open.
        drop(slot.take());
        let opened = open_or_rebuild(&self.path).map_err(|e| IndexError::Reopen(Box::new(e)))?;
        self.install(&mut slot, opened, mirror);
        Ok(())
    }

    /// Opens the writer's files at the path again, then lets go of the ones open now: for a
    /// file replaced under this writer (see [`Writer::replaced`]), another inode with a lock
    /// of its own.
    fn open_again(
        &self,
        slot: &RwLock<Option<Stores>>,
        mirror: &mut reconcile::Mirror,
    ) -> Result<()> {
        self.refuse_when_closed()?;
        let expected = match &self.handle {
            Handle::Writer(writer) => writer.let_go_of_a_lone_texts_store(),
            Handle::Reader { .. } => false,
        };
        let opened = open_or_rebuild_as(&self.path, expected)
            .map_err(|e| IndexError::Reopen(Box::new(e)))?;
        self.install(&mut locks::write(slot), opened, mirror);
        Ok(())
    }

    /// An index closed for good ([`Index::close`]) stays closed.
    fn refuse_when_closed(&self) -> Result<()> {
        match &self.handle {
            Handle::Writer(w) if w.closed.load(Ordering::SeqCst) => Err(closed()),
            _ => Ok(()),
        }
    }

    /// Serves the files just opened (letting go of any open before) with the mirror loaded
    /// from them, keeping the mirror's settings.
    fn install(
        &self,
        slot: &mut Option<Stores>,
        (stores, fresh): (Stores, reconcile::Mirror),
        mirror: &mut reconcile::Mirror,
    ) {
        let (racy_window, log_keep) = (mirror.racy_window, mirror.log_keep);
        *mirror = fresh;
        mirror.racy_window = racy_window;
        mirror.log_keep = log_keep;
        *slot = Some(stores);
        if let Handle::Writer(writer) = &self.handle {
            *locks::lock(&writer.opened) = file_id(&self.path);
            *locks::lock(&writer.opened_texts) = file_id(&texts::path(&self.path));
        }
    }

    /// Whether the writer's index file was removed or replaced under it (one `stat`).
    pub fn replaced(&self) -> bool {
        matches!(&self.handle, Handle::Writer(writer) if writer.replaced())
    }

    /// Whether the file was built again since the last call, after it was removed or replaced
    /// under this writer: the caller writes its holder note again, which went with it.
    pub fn take_rebuilt(&self) -> bool {
        match &self.handle {
            Handle::Writer(writer) => writer.rebuilt.swap(false, Ordering::SeqCst),
            Handle::Reader { .. } => false,
        }
    }
}

impl Writer {
    /// When only the index file went (an `rm` of it, not of its folder; a command may have made
    /// an empty one in its place since), the texts store at its path is still the one this
    /// writer holds, locked, and belongs to the index removed: it is unlinked, so that both
    /// files are built again (the open handle serves reads until then). Opened as it is, this
    /// writer's own lock on it refused the rebuild on every attempt.
    /// Returns whether it did: the rebuild that follows is then this writer's own doing.
    fn let_go_of_a_lone_texts_store(&self) -> bool {
        let texts = texts::path(&self.path);
        let held = *locks::lock(&self.opened_texts);
        if self.index_replaced() && held.is_some() && file_id(&texts) == held {
            match std::fs::remove_file(&texts) {
                Ok(()) => return true,
                Err(e) => {
                    tracing::warn!(path = %texts.display(), %e, "cannot remove the texts store of the removed index")
                }
            }
        }
        false
    }

    /// Whether the index file at the path, or its texts store, is gone, or another file than
    /// the one opened.
    fn replaced(&self) -> bool {
        self.index_replaced() || self.texts_replaced()
    }

    fn index_replaced(&self) -> bool {
        let opened = *locks::lock(&self.opened);
        opened.is_some() && file_id(&self.path) != opened
    }

    fn texts_replaced(&self) -> bool {
        let opened = *locks::lock(&self.opened_texts);
        opened.is_some() && file_id(&texts::path(&self.path)) != opened
    }
}

fn poisoned() -> Error {
    IndexError::Unavailable("index state poisoned by a panic").into()
}

fn closed() -> Error {
    IndexError::Unavailable(
        "the index is closed: the worker is shutting down, or a write to its file failed (the next reconcile then reopens it)",
    )
    .into()
}

/// Opens the writer's files, rebuilding both when either is damaged, of another schema version,
/// or (the texts store) made for another index file, and when both are this worker's to
/// replace: a file at `index_path` that is not recognisably an index of ours (or its damaged
/// form) is refused, untouched (`owned.rs`).
fn open_or_rebuild(path: &Path) -> Result<(Stores, reconcile::Mirror), OpenError> {
    open_or_rebuild_as(path, false)
}

/// [`open_or_rebuild`]; with `expected`, the caller has just removed the texts store itself,
/// and the rebuild that follows is not warned of (the caller said why already).
fn open_or_rebuild_as(
    path: &Path,
    expected: bool,
) -> Result<(Stores, reconcile::Mirror), OpenError> {
    let failed = |source: Error| OpenError::Failed {
        path: path.to_path_buf(),
        source,
    };
    let not_ours = |refused: owned::NotOurs| OpenError::NotOurs {
        path: refused.path,
        why: refused.why,
        a_file: refused.a_file,
    };
    // What was there before this open wrote anything: the open itself creates a new index's
    // tables, which must not count as a marker that makes the file beside it ours.
    let found = owned::Pair::inspect_settled(path);
    if found.doubtful() {
        found.may_replace().map_err(not_ours)?;
    } else if let Some(refused) = found.untouchable() {
        return Err(not_ours(refused));
    }
    let unwritable = |source| OpenError::Unwritable {
        path: path.to_path_buf(),
        source,
    };
    match open_checked(path) {
        Ok(opened) => Ok(opened),
        Err(Opened::Busy) => Err(OpenError::Busy(path.to_path_buf())),
        Err(Opened::Unwritable(e)) => Err(unwritable(e)),
        Err(Opened::Short(why)) => Err(failed(why)),
        Err(Opened::Unusable(why)) => {
            found.may_replace().map_err(not_ours)?;
            if expected {
                tracing::debug!(path = %path.display(), %why, "rebuilding the index");
            } else {
                tracing::warn!(path = %path.display(), %why, "index unusable; rebuilding it from disk");
            }
            remove_files(path).map_err(|e| failed(e.into()))?;
            match open_checked(path) {
                Ok(opened) => Ok(opened),
                Err(Opened::Busy) => Err(OpenError::Busy(path.to_path_buf())),
                Err(Opened::Unwritable(e)) => Err(unwritable(e)),
                Err(Opened::Short(why) | Opened::Unusable(why)) => Err(failed(why)),
            }
        }
    }
}

/// The files of the index at `path`: the index itself and its texts store.
pub fn files(path: &Path) -> [PathBuf; 2] {
    [path.to_path_buf(), texts::path(path)]
}

/// Deletes the index at `path` and its texts store (what is missing already is fine).
pub fn remove_files(path: &Path) -> Result<(), IoError> {
    for file in files(path) {
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_error("remove", &file)(e));
            }
            _ => {}
        }
    }
    Ok(())
}

enum Opened {
    Busy,
    /// The file (or its folder) cannot be written: nothing to rebuild, nothing to delete.
    Unwritable(std::io::Error),
    /// The system ran short of something the open needed (descriptors, memory, space) or the
    /// disk failed a read: the file may be whole, and is left as it is for a later attempt.
    Short(Error),
    Unusable(Error),
}

/// Whether an I/O failure says the file (or its folder) cannot be written at all.
fn unwritable(io: &std::io::Error) -> bool {
    matches!(
        io.kind(),
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied
    )
}

/// Whether an I/O failure of an open passes with the shortage that caused it (or is the disk's,
/// not the file's), so that the file must not be deleted as damaged for it.
fn passing(io: &std::io::Error) -> bool {
    short_of_resources(io)
        || matches!(
            io.raw_os_error(),
            Some(libc::ENOSPC | libc::EDQUOT | libc::EIO | libc::EAGAIN)
        )
}

/// An error of preparing an opened file, as an [`Opened`]: a passing I/O failure leaves the
/// file alone; anything else says it is unusable.
fn unusable_or_short(e: Error) -> Opened {
    match &e {
        Error::Index(IndexError::Database(redb::Error::Io(io))) if passing(io) => Opened::Short(e),
        _ => Opened::Unusable(e),
    }
}

/// Opens both files and checks they are an index (and its texts) this binary can use.
fn open_checked(path: &Path) -> Result<(Stores, reconcile::Mirror), Opened> {
    let (index, (mirror, epoch, new)) = open_file(path, CACHE_BYTES, |db| {
        let new = prepare(db)?;
        Ok((reconcile::Mirror::load(db)?, epoch_of(db)?, new))
    })?;
    let (texts, ()) = open_file(&texts::path(path), texts::CACHE_BYTES, |db| {
        texts::check(db, epoch, new)
    })?;
    Ok((Stores { index, texts }, mirror))
}

/// Opens one file as its writer, then `prepare`s it. redb may panic on a file that is not a
/// database at all, so the open is isolated.
fn open_file<T>(
    path: &Path,
    cache_bytes: usize,
    prepare: impl FnOnce(&redb::Database) -> Result<T> + std::panic::UnwindSafe,
) -> Result<(redb::Database, T), Opened> {
    create_whole(path)?;
    let untouched = CleanClose::take(path);
    let attempt = isolated::isolated(|| {
        // Unless the file is as a clean close left it, the writer verifies every page's
        // checksum at open: a damaged file is rebuilt here rather than trusted (and perhaps
        // served, or panicking) later.
        let db = builder(cache_bytes)
            .set_check_integrity_on_open(!untouched)
            .create(path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen
                | redb::DatabaseError::LockProtocolMismatch => Opened::Busy,
                redb::DatabaseError::Storage(redb::StorageError::Io(io)) if unwritable(&io) => {
                    Opened::Unwritable(io)
                }
                other => unusable_or_short(Error::index(other)),
            })?;
        let prepared = prepare(&db).map_err(unusable_or_short)?;
        Ok((db, prepared))
    });
    attempt.unwrap_or_else(|_| {
        let unreadable = IndexError::Layout("the file is not a readable redb database".into());
        Err(Opened::Unusable(unreadable.into()))
    })
}

/// Notes a reconcile's outcome in the writer's [`Trouble`]: a failure starts or extends it, a
/// success ends it (and says so, when it had begun).
fn note_outcome(trouble: &Mutex<Option<Trouble>>, result: &Result<Report>) {
    let mut trouble = locks::lock(trouble);
    match (result, trouble.as_mut()) {
        (Ok(_), Some(ended)) => {
            tracing::info!(
                attempts = ended.attempts,
                "the index records changes again; reads are as fresh as the disk"
            );
            *trouble = None;
        }
        (Ok(_), None) => {}
        (Err(e), Some(going_on)) => going_on.again(e.to_string()),
        (Err(e), None) => *trouble = Some(Trouble::new(e.to_string())),
    }
}

/// Makes a missing file as a new, empty redb database beside it and links it into place
/// whole. redb writes its magic number last: a file created in place and killed before that
/// (Ctrl-C at the start of a `reindex --from-scratch`) starts with zeros, is not recognisably
/// ours, and would be refused from then on (`owned.rs`). Best effort: where no hard link can
/// be made, redb creates the file in place as before; a file that another process linked
/// first is left to it. A database that cannot be made at all (a full disk) fails the open
/// here: made in place, it would leave the same zeros.
fn create_whole(path: &Path) -> Result<(), Opened> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    let prefix = format!(
        "{}.new-",
        path.file_name().unwrap_or_default().to_string_lossy()
    );
    remove_staged_by_the_dead(path, &prefix);
    let staged = path.with_file_name(format!("{prefix}{}", std::process::id()));
    let created = redb::Database::create(&staged);
    let made = match created {
        Ok(db) => {
            drop(db);
            let _ = std::fs::hard_link(&staged, path);
            Ok(())
        }
        Err(redb::DatabaseError::Storage(redb::StorageError::Io(io))) if unwritable(&io) => {
            Err(Opened::Unwritable(io))
        }
        Err(redb::DatabaseError::Storage(redb::StorageError::Io(io))) => {
            let failed = Error::Io(io_error("create", path)(io));
            Err(Opened::Short(failed))
        }
        // Anything else: redb's own open in place says what it is.
        Err(_) => Ok(()),
    };
    let _ = std::fs::remove_file(&staged);
    made
}

/// Removes the files [`create_whole`] staged in processes that were killed before they
/// removed them (`<prefix><pid>`, the pid no longer running).
fn remove_staged_by_the_dead(path: &Path, prefix: &str) {
    let Some(Ok(entries)) = path.parent().map(std::fs::read_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|name| name.strip_prefix(prefix));
        if pid
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| !holder::alive(pid))
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The index file's identity (`meta.epoch`).
fn epoch_of(db: &redb::Database) -> Result<u64> {
    let txn = db.begin_read().map_err(Error::index)?;
    stored_u64(&txn, META_EPOCH)?
        .ok_or_else(|| IndexError::Missing("the epoch in meta".into()).into())
}

/// Checks the schema version of an opened file and creates the tables of a new one; returns
/// whether it was new.
fn prepare(db: &redb::Database) -> Result<bool> {
    let version = stored_u64(&db.begin_read().map_err(Error::index)?, META_SCHEMA)?;
    match version {
        Some(SCHEMA_VERSION) => Ok(false),
        Some(other) => Err(IndexError::Layout(format!(
            "schema version {other} is not {SCHEMA_VERSION} (see migrations/)"
        ))
        .into()),
        None if holds_no_table(db)? => create_tables(db).map(|()| true),
        None => Err(IndexError::Layout("tables without a schema version".into()).into()),
    }
}

fn create_tables(db: &redb::Database) -> Result<()> {
    let txn = db.begin_write().map_err(Error::index)?;
    {
        txn.open_table(FILES).map_err(Error::index)?;
        txn.open_table(DOCS).map_err(Error::index)?;
        txn.open_table(SPEC).map_err(Error::index)?;
        txn.open_table(VECTORS).map_err(Error::index)?;
        txn.open_table(RETIRED_VECTORS).map_err(Error::index)?;
        txn.open_table(TEXT_IDS).map_err(Error::index)?;
        txn.open_table(TEXTS_GARBAGE).map_err(Error::index)?;
        txn.open_table(TOP_DIRS).map_err(Error::index)?;
        txn.open_table(UNREADABLE).map_err(Error::index)?;
        txn.open_table(SKILLS).map_err(Error::index)?;
        txn.open_table(PROMPTS).map_err(Error::index)?;
        txn.open_table(AGENTS).map_err(Error::index)?;
        txn.open_table(SKIPPED).map_err(Error::index)?;
        txn.open_table(CHANGE_LOG).map_err(Error::index)?;
        let mut meta = txn.open_table(META).map_err(Error::index)?;
        meta.insert(META_SCHEMA, records::encode(&SCHEMA_VERSION).as_slice())
            .map_err(Error::index)?;
        meta.insert(META_REVISION, records::encode(&0u64).as_slice())
            .map_err(Error::index)?;
        meta.insert(
            META_EPOCH,
            records::encode(&changelog::new_epoch()).as_slice(),
        )
        .map_err(Error::index)?;
        meta.insert(META_LOG_FLOOR, records::encode(&0u64).as_slice())
            .map_err(Error::index)?;
        meta.insert(META_NEXT_TEXT, records::encode(&0u64).as_slice())
            .map_err(Error::index)?;
    }
    txn.commit().map_err(Error::index)
}
