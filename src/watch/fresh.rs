//! Reads as fresh as a rescan, at the index's speed. Every read first drains the watcher's
//! inotify queue itself and reconciles exactly the paths it names (nothing at all when it is
//! empty, the common case: one `ioctl`), so a change completed before the read began is in its
//! answer. The watcher's thread drains the same queue when it wakes; whoever drains first
//! reconciles, under one lock, so a path is taken in once.
//!
//! Events stay exact: a catch-up reconciles without announcing, and the families it changed
//! are added to the burst in progress, which announces one `external` per family when it ends
//! (50 ms after its last event, or 5 s after its first on a disk that stays busy). What a
//! burst heard is reconciled at most 500 ms after it was heard, whether or not it is over.
//!
//! Another process reading the same index (a read-only follower, the command line while a
//! worker runs) cannot drain this process's queue: it leaves a sync cookie, an empty file in
//! the folder beside the index that this watcher watches too. The kernel queues the cookie's
//! event after every event before it, so when the watcher has seen it, it has seen them all:
//! it catches up, then removes the cookie, which is what the follower waits for.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::inotify::{Event, Inotify};
use super::tree::{Changes, RootState, RootWatch, Tree, problems_of};
use super::{WatchOptions, WatchStatus};
use crate::directory::{CatchUp, Directory};
use crate::error::Result;
use crate::events::Family;
use crate::locks;

/// How many changed paths a burst keeps while the index cannot record them before it asks for
/// a full reconcile instead.
const PATHS_KEPT_WHILE_FAILING: usize = 10_000;

/// The queue, the watched tree and the burst being collected.
pub struct Tracker {
    inotify: Inotify,
    state: Mutex<State>,
    status: Arc<Mutex<WatchStatus>>,
    options: WatchOptions,
    /// The writer let go of its sync folder (it shuts down): the folder's removal is not a
    /// loss to repair.
    sync_released: AtomicBool,
}

struct State {
    tree: Tree,
    burst: Burst,
    events: Vec<Event>,
}

/// What the queue asked for since the last announcement.
#[derive(Default)]
struct Burst {
    /// Paths not reconciled yet.
    paths: BTreeSet<PathBuf>,
    /// Everything is to be reconciled (the queue overflowed, the sync folder went, or a
    /// follower asked for a rescan).
    full: bool,
    /// A follower asked for a rescan (`reindex` beside the worker): the next attempt is made
    /// at once, even in the index's pause after failures, since someone waits to know whether
    /// the walk could be recorded now.
    rescan: bool,
    /// Sync cookies to remove once caught up.
    cookies: Vec<PathBuf>,
    /// The first change not reconciled yet.
    first: Option<Instant>,
    /// The last change heard of.
    last: Option<Instant>,
    /// The burst's first change: a burst still busy after [`WatchOptions::max_burst`] is
    /// announced, and a new one begins.
    opened: Option<Instant>,
    /// Families whose answers the burst changed so far (announced when it ends).
    touched: BTreeSet<Family>,
    /// After a failed reconcile: when the index may be tried again.
    not_before: Option<Instant>,
}

impl Burst {
    fn pending(&self) -> bool {
        self.full || !self.paths.is_empty() || !self.cookies.is_empty()
    }

    fn add(&mut self, changes: Changes) {
        let now = Instant::now();
        if !changes.paths.is_empty() || changes.full || changes.sync_gone || changes.rescan {
            self.first.get_or_insert(now);
            self.opened.get_or_insert(now);
            self.last = Some(now);
        }
        self.paths.extend(changes.paths);
        self.full |= changes.full || changes.sync_gone || changes.rescan;
        self.rescan |= changes.rescan;
        self.cookies.extend(changes.cookies);
    }

    /// Tells the processes waiting on their cookies that every change before them is taken in
    /// (see `sync_cookie.rs`), or, to those that asked for a rescan, why the index could not
    /// record it (`failure`): a catch-up is answered either way, so that a read beside a
    /// failing index answers from it as it is.
    fn answer_cookies(&mut self, failure: Option<&str>) {
        for cookie in self.cookies.drain(..) {
            crate::sync_cookie::answer(&cookie, failure);
        }
    }

    /// When the watcher's thread next has work, if a burst is collecting: reconciling what
    /// it heard (after a quiet period, or at most `max_delay` after the first change not
    /// taken in), or, all of it taken in, announcing it once the disk is quiet.
    fn deadline(&self, options: &WatchOptions) -> Option<Instant> {
        let quiet = self.last? + options.quiet;
        let due = match self.first {
            Some(first) => quiet.min(first + options.max_delay),
            None => quiet,
        };
        Some(self.not_before.map_or(due, |retry| due.max(retry)))
    }

    /// Whether the burst is over: the disk has been quiet, or it has been busy for longer
    /// than one burst may last.
    fn over(&self, options: &WatchOptions, now: Instant) -> bool {
        let quiet = self.last.is_none_or(|last| last + options.quiet <= now);
        quiet
            || self
                .opened
                .is_some_and(|opened| opened + options.max_burst <= now)
    }
}

/// Logs each root that became unreadable to this process (its mode changed under the worker),
/// and each that is readable again: reads then serve nothing from it, which only its status
/// said.
fn say_unreadable_roots(before: &[RootWatch], now: &[RootWatch]) {
    for root in now {
        let was = before.iter().find(|b| b.root == root.root);
        let was_unreadable = was.is_some_and(|b| matches!(b.state, RootState::Unreadable(_)));
        match &root.state {
            RootState::Unreadable(why) if !was_unreadable => tracing::warn!(
                "{} {} cannot be listed ({why}): nothing is served from it until this process \
                 may read it (fix its mode, or run the worker as its owner)",
                root.root,
                root.path
            ),
            RootState::Unreadable(_) => {}
            _ if was_unreadable => {
                tracing::info!("{} {} can be listed again", root.root, root.path);
            }
            _ => {}
        }
    }
}

impl Tracker {
    pub fn new(
        inotify: Inotify,
        tree: Tree,
        status: Arc<Mutex<WatchStatus>>,
        options: WatchOptions,
    ) -> Tracker {
        Tracker {
            inotify,
            state: Mutex::new(State {
                tree,
                burst: Burst::default(),
                events: Vec::new(),
            }),
            status,
            options,
            sync_released: AtomicBool::new(false),
        }
    }

    /// Says the sync folder is let go of for good: it is not made again when it goes.
    pub fn release_sync(&self) {
        self.sync_released.store(true, Ordering::SeqCst);
    }

    pub fn inotify(&self) -> &Inotify {
        &self.inotify
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        locks::lock(&self.state)
    }

    /// Moves what the kernel queued into the burst, watching new folders on the way.
    fn drain(&self, state: &mut State) {
        if !self.inotify.has_queued() {
            return;
        }
        state.events.clear();
        if let Err(e) = self.inotify.read_queued(&mut state.events) {
            tracing::warn!("reading the file watcher's queue failed: {e}");
        }
        let events = std::mem::take(&mut state.events);
        let changes = state.tree.translate(&self.inotify, &events);
        state.events = events;
        if changes.full {
            tracing::info!(
                "the kernel's file event queue overflowed; reconciling every root instead of \
                 the changed paths (raise fs.inotify.max_queued_events if this repeats)"
            );
            if let Ok(mut status) = self.status.lock() {
                status.rescans += 1;
            }
        }
        let opened = state.burst.first.is_none();
        state.burst.add(changes);
        if opened && state.burst.first.is_some() {
            // A reader may have drained what woke the watcher's thread: tell it a burst began,
            // so that it ends on time.
            self.inotify.wake();
        }
    }

    /// Reconciles what the burst holds and has not been reconciled, without announcing it.
    fn take_in(&self, directory: &Directory, state: &mut State) {
        if state.burst.full {
            // Watches lost with the overflowed events are added first, so that nothing made
            // after the walk below goes unheard (what was made meanwhile joins the burst).
            state.tree.rewatch(&self.inotify);
            self.drain(state);
        }
        let swallowed = match state.burst.full {
            true => state.tree.cookies_waiting(),
            false => Vec::new(),
        };
        let burst = &mut state.burst;
        // An index file or texts store removed under this writer (`rm` of one of them, which
        // no watch reports) is built again before a cookie is answered: the command waiting
        // on it reads the files at the path.
        burst.full |= !burst.cookies.is_empty() && !directory.index_in_place();
        let mut failure = None;
        let to_reconcile = burst.full || !burst.paths.is_empty();
        // While the index cannot record changes, attempts wait out its pause (see
        // `index::trouble`): each one reopens the files and walks every root.
        if to_reconcile && !burst.rescan && !directory.index_may_retry() {
            failure = directory.index_trouble().map(|t| t.error);
        } else if to_reconcile {
            burst.rescan = false;
            let result = if burst.full {
                directory.reconcile_unannounced()
            } else {
                directory.reconcile_paths_unannounced(burst.paths.iter().cloned().collect())
            };
            match result {
                Ok(report) => {
                    if burst.full {
                        burst.cookies.extend(swallowed);
                    }
                    burst.touched.extend(report.families_changed());
                    burst.paths.clear();
                    burst.full = false;
                }
                // Kept for the next read or the end of the burst to try again.
                Err(e) => {
                    tracing::warn!("reconcile after file changes failed: {e}");
                    failure = Some(e.to_string());
                }
            }
        }
        burst.answer_cookies(failure.as_deref());
        let index_path = &directory.config().paths.index_path;
        state.tree.restore_sync(&self.inotify, || {
            (!self.sync_released.load(Ordering::SeqCst) && directory.index_in_place())
                .then(|| crate::sync_cookie::claim_folder(index_path))
                .flatten()
        });
        self.publish_status(state);
    }

    fn publish_status(&self, state: &State) {
        if let Ok(mut status) = self.status.lock() {
            let roots = state.tree.roots();
            say_unreadable_roots(&status.roots, &roots);
            status.problems = problems_of(&roots);
            status.roots = roots;
            status.watched = state.tree.watched();
            status.degraded = !status.problems.is_empty();
        }
    }

    /// One turn of the watcher's thread: drain, answer cookies at once, end the burst when
    /// it is due. Returns the families to announce and when to wake next.
    pub fn turn(&self, directory: &Directory) -> (Vec<Family>, Option<Instant>) {
        let mut state = self.lock();
        self.drain(&mut state);
        if !state.burst.cookies.is_empty() {
            self.take_in(directory, &mut state);
        }
        let now = Instant::now();
        let due = state
            .burst
            .deadline(&self.options)
            .is_some_and(|at| at <= now);
        if !due {
            return (Vec::new(), state.burst.deadline(&self.options));
        }
        self.take_in(directory, &mut state);
        if state.burst.pending() {
            // The reconcile failed: try again after another quiet period, and not before the
            // index's pause after failures is over.
            state.burst.last = Some(now);
            state.burst.first = Some(now);
            state.burst.not_before = directory.index_trouble().map(|t| t.retry_at());
            // While the index fails, what changes gathers: past a bound, one full reconcile
            // stands for it all.
            if state.burst.paths.len() > PATHS_KEPT_WHILE_FAILING {
                state.burst.paths.clear();
                state.burst.full = true;
            }
            return (Vec::new(), state.burst.deadline(&self.options));
        }
        if !state.burst.over(&self.options, now) {
            // Taken in while the disk is still busy (a checkout of thousands of files): reads
            // and the index keep up, and the one `external` per family waits for the end.
            state.burst.first = None;
            return (Vec::new(), state.burst.deadline(&self.options));
        }
        let done = std::mem::take(&mut state.burst);
        if let Ok(mut status) = self.status.lock() {
            status.bursts += 1;
        }
        (done.touched.into_iter().collect(), None)
    }

    /// The safety net's full reconcile, announced with the burst in progress if there is one.
    /// Returns the families to announce now.
    pub fn safety_net(&self, directory: &Directory) -> Vec<Family> {
        let mut state = self.lock();
        state.tree.rewatch(&self.inotify);
        self.drain(&mut state);
        let swallowed = state.tree.cookies_waiting();
        let mut failure = None;
        let changed = match directory.reconcile_unannounced() {
            Ok(report) => {
                state.burst.cookies.extend(swallowed);
                state.burst.paths.clear();
                state.burst.full = false;
                report.families_changed()
            }
            Err(e) => {
                failure = Some(e.to_string());
                tracing::warn!("safety-net reconcile failed: {e}");
                // What it was to take in is still to be taken in: by a full reconcile, once
                // the index's pause after failures is over.
                state.burst.add(Changes {
                    full: true,
                    ..Changes::default()
                });
                state.burst.not_before = directory.index_trouble().map(|t| t.retry_at());
                Vec::new()
            }
        };
        state.burst.answer_cookies(failure.as_deref());
        self.publish_status(&state);
        if state.burst.opened.is_some() {
            state.burst.touched.extend(changed);
            Vec::new()
        } else {
            changed
        }
    }

    /// Runs `change`, then empties the kernel's queue as an overflow does, losing its events,
    /// and asks for the full reconcile an overflow asks for (tests of what an overflow loses).
    /// The watcher's thread cannot drain meanwhile: it waits for the state's lock.
    #[cfg(any(test, feature = "testing"))]
    pub fn lose_events_of(&self, change: impl FnOnce()) {
        let mut state = self.lock();
        change();
        let mut lost = Vec::new();
        let _ = self.inotify.read_queued(&mut lost);
        state.burst.add(Changes {
            full: true,
            ..Changes::default()
        });
        self.inotify.wake();
    }

    pub fn publish_initial_status(&self) {
        self.publish_status(&self.lock());
    }
}

impl CatchUp for Tracker {
    fn behind(&self) -> bool {
        if self.inotify.has_queued() {
            return true;
        }
        match self.state.try_lock() {
            Ok(state) => state.burst.full || !state.burst.paths.is_empty(),
            // Someone is catching up right now.
            Err(_) => true,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    fn pending(&self) -> bool {
        let state = self.lock();
        self.inotify.has_queued() || state.burst.full || !state.burst.paths.is_empty()
    }

    fn catch_up(&self, directory: &Directory) -> Result<()> {
        let mut state = self.lock();
        self.drain(&mut state);
        if state.burst.pending() {
            self.take_in(directory, &mut state);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_after_a_failed_reconcile_waits_for_the_index_pause() {
        let options = WatchOptions::default();
        let now = Instant::now();
        let mut burst = Burst {
            first: Some(now),
            last: Some(now),
            opened: Some(now),
            ..Burst::default()
        };
        assert_eq!(burst.deadline(&options), Some(now + options.quiet));
        let retry = now + Duration::from_secs(4);
        burst.not_before = Some(retry);
        assert_eq!(burst.deadline(&options), Some(retry));
        // A pause already over changes nothing.
        burst.not_before = Some(now);
        assert_eq!(burst.deadline(&options), Some(now + options.quiet));
    }
}
