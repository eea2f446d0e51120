//! The watcher: an inotify queue over the roots (`inotify.rs`, `tree.rs`) that every read
//! drains before it answers (`fresh.rs`), so reads are as fresh as a rescan; bursts of events
//! become one announcement each; and a slow safety-net reconcile for what the kernel does not
//! report (network mounts, a watch limit reached).
//!
//! A burst never carries the changes itself: it only says which paths to look at again. The
//! reconcile compares disk with the index, and each burst announces one `external` event per
//! family whose answers changed, so our own writes (already reconciled by the write) and
//! changes to files that are not documents cause no event.

mod deep;
mod fresh;
mod inotify;
mod links;
mod tree;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::directory::Directory;
use crate::roots::Root;
use crate::sync_cookie;
use crate::time::Stamp;
use fresh::Tracker;
pub use tree::{RootState, RootWatch};

/// How the watcher batches events and how often the safety net runs.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// A burst ends after this long without a new event.
    pub quiet: Duration,
    /// What a burst heard is reconciled at most this long after the first change not taken
    /// in yet, however busy the disk.
    pub max_delay: Duration,
    /// A burst ends (its `external` events go out) once the disk is quiet, or this long after
    /// its first change, however busy the disk: a `git checkout` of thousands of files is one
    /// burst, not one every `max_delay`.
    pub max_burst: Duration,
    /// Pretend the watch of these roots failed (tests of the degraded mode).
    #[cfg(any(test, feature = "testing"))]
    pub fail_roots: Vec<Root>,
    /// Refuse watches past this many, as the kernel does past `fs.inotify.max_user_watches`;
    /// a test raises it while the watcher runs, as a user raises the limit (tests of the
    /// degraded mode and its recovery, without root).
    #[cfg(any(test, feature = "testing"))]
    pub watch_limit: Option<Arc<std::sync::atomic::AtomicUsize>>,
}

impl Default for WatchOptions {
    fn default() -> WatchOptions {
        WatchOptions {
            quiet: Duration::from_millis(50),
            max_delay: Duration::from_millis(500),
            max_burst: Duration::from_secs(5),
            #[cfg(any(test, feature = "testing"))]
            fail_roots: Vec::new(),
            #[cfg(any(test, feature = "testing"))]
            watch_limit: None,
        }
    }
}

impl WatchOptions {
    /// Whether a test asked for the watch of this root to fail.
    fn refuses(&self, root: Root) -> bool {
        #[cfg(any(test, feature = "testing"))]
        return self.fail_roots.contains(&root);
        #[cfg(not(any(test, feature = "testing")))]
        {
            let _ = root;
            false
        }
    }

    /// The test's limit on watches, if it set one.
    fn watch_limit(&self) -> Option<Arc<std::sync::atomic::AtomicUsize>> {
        #[cfg(any(test, feature = "testing"))]
        return self.watch_limit.clone();
        #[cfg(not(any(test, feature = "testing")))]
        None
    }
}

/// How often the watcher thread looks at the live settings, at the longest: a change of
/// `safety_net_interval_ms` takes effect within this.
const SETTINGS_CHECK: Duration = Duration::from_secs(1);

/// The safety net's interval in the live settings (`safety_net_interval_ms`, 0 = off).
fn safety_net_interval(directory: &Directory) -> Option<Duration> {
    let every = directory.setting(|s| s.safety_net_interval_ms);
    (every > 0).then(|| Duration::from_millis(every))
}

/// The watcher's health, for `directory::index::status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WatchStatus {
    /// Some root is not wholly watched, or the watcher failed: changes there are seen only by
    /// the safety-net reconcile.
    pub degraded: bool,
    /// Why, one line per problem.
    pub problems: Vec<String>,
    /// Roots watched.
    pub watched: Vec<String>,
    /// Each root: watched, absent (served as soon as it appears), a file in a folder's place,
    /// or not wholly watched, and
    /// whether reads there are as fresh as a rescan.
    pub roots: Vec<RootWatch>,
    /// Bursts handled.
    pub bursts: u64,
    /// Rescan notices: the kernel's event queue overflowed (`fs.inotify.max_queued_events`), so
    /// the burst reconciled every root instead of the paths it heard of. Nothing is missed, but
    /// many of these mean the queue is too small for the churn on disk.
    pub rescans: u64,
    /// When the last safety-net reconcile started (RFC 3339), if one has.
    pub last_safety_net: Option<String>,
}

/// A running watcher; stops when dropped.
pub struct Watcher {
    directory: Arc<Directory>,
    tracker: Option<Arc<Tracker>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
    status: Arc<Mutex<WatchStatus>>,
    /// The sync folder this writer claimed, removed when it stops.
    sync: Mutex<Option<PathBuf>>,
}

impl Watcher {
    /// Creates the writable roots when missing, watches every root that exists (and waits for
    /// the others to appear), makes every read of `directory` catch up with the queue first,
    /// and starts the thread that announces bursts and runs the safety net.
    pub fn start(directory: Arc<Directory>, options: WatchOptions) -> Watcher {
        let status = Arc::new(Mutex::new(WatchStatus::default()));
        let started = Instant::now();
        // A writer's watcher answers the cookies of the commands beside it.
        let mut sync = directory
            .is_writer()
            .then(|| sync_cookie::claim_folder(&directory.config().paths.index_path))
            .flatten();
        let tracker = track(&directory, &options, &status, sync.clone()).map(Arc::new);
        if tracker.is_none() {
            // No queue to see cookies in: none may wait for an answer.
            sync.take()
                .inspect(|folder| sync_cookie::release_folder(folder));
        }
        if let Some(tracker) = &tracker {
            directory.set_catch_up(Some(tracker.clone()));
        }
        tracing::debug!(
            watch_ms = started.elapsed().as_millis() as u64,
            "roots watched"
        );
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (directory, tracker, stop) = (directory.clone(), tracker.clone(), stop.clone());
            let status = status.clone();
            std::thread::Builder::new()
                .name("iii-directory-watch".into())
                .spawn(move || run(&directory, tracker.as_deref(), &stop, &status))
                .map_err(crate::error::Error::thread("the watcher's thread"))
        };
        let thread = started_or_noted(thread, &status);
        Watcher {
            directory,
            tracker,
            stop,
            thread,
            status,
            sync: Mutex::new(sync),
        }
    }

    /// The watcher's health, after taking in what the queue holds (a root that appeared or
    /// went a moment ago shows as such).
    pub fn status(&self) -> WatchStatus {
        if let Some(tracker) = &self.tracker {
            use crate::directory::CatchUp as _;
            if let Err(e) = tracker.catch_up(&self.directory) {
                tracing::warn!("catching up with changes on disk failed: {e}");
            }
        }
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Runs `change` and loses the events it queued, as an overflow of the kernel's queue
    /// does (tests of what the watcher makes of one).
    #[cfg(any(test, feature = "testing"))]
    pub fn lose_events_of(&self, change: impl FnOnce()) {
        if let Some(tracker) = &self.tracker {
            tracker.lose_events_of(change);
        }
    }

    /// Removes the sync folder this writer's watcher claimed: from then on the commands beside
    /// it wait for nothing (the worker calls it as it shuts down, whoever still holds the
    /// watcher).
    pub fn release_sync_folder(&self) {
        if let Some(tracker) = &self.tracker {
            tracker.release_sync();
        }
        let claimed = self.sync.lock().ok().and_then(|mut sync| sync.take());
        if let Some(folder) = claimed {
            sync_cookie::release_folder(&folder);
        }
    }

    /// Stops watching and waits for a burst in progress to finish.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(tracker) = self.tracker.take() {
            tracker.inotify().wake();
            self.directory.set_catch_up(None);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.release_sync_folder();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn note_problem(status: &Mutex<WatchStatus>, problem: String) {
    tracing::warn!("{problem}; changes there are picked up by the safety-net reconcile");
    record_problem(status, problem);
}

fn record_problem(status: &Mutex<WatchStatus>, problem: String) {
    if let Ok(mut status) = status.lock() {
        status.degraded = true;
        status.problems.push(problem);
    }
}

/// The watcher's thread, or, when it could not start, the problem in the status: reads still
/// take in the queue (their catch-up is set before the thread starts), so only the
/// announcements of changes and the safety net are lost, and the worker keeps serving.
fn started_or_noted(
    thread: Result<JoinHandle<()>, crate::error::Error>,
    status: &Mutex<WatchStatus>,
) -> Option<JoinHandle<()>> {
    let error = match thread {
        Ok(thread) => return Some(thread),
        Err(e) => e,
    };
    let problem = format!(
        "{error}; until then, reads still see every change on disk, but changes are not \
         announced to subscribers and no safety-net reconcile runs"
    );
    tracing::error!("{problem}");
    record_problem(status, problem);
    None
}

/// Why inotify could not be started, with the limit to raise: `EMFILE` there is most often
/// the per-user count of inotify instances, not the open-file limit its text names.
fn start_failure(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EMFILE) => format!(
            "{e}: the per-user limit on inotify instances is reached (raise \
             fs.inotify.max_user_instances), or this process's open-file limit is (ulimit -n)"
        ),
        _ => e.to_string(),
    }
}

/// The queue over the roots: the writable roots are created when missing, every root that
/// exists is watched, and the sync folder beside the index (for other processes' reads) too.
fn track(
    directory: &Directory,
    options: &WatchOptions,
    status: &Arc<Mutex<WatchStatus>>,
    sync: Option<PathBuf>,
) -> Option<Tracker> {
    let roots = directory.roots();
    for root in [Root::Skills, Root::LocalSkills, Root::Agents] {
        let path = roots.path(root);
        if root.warn_if_a_file(path) {
            continue;
        }
        if let Err(e) = std::fs::create_dir_all(path) {
            tracing::warn!(
                "cannot create {} {}: {e}; it is served as soon as it exists",
                root.config_key(),
                path.display()
            );
        }
    }
    let inotify = match inotify::Inotify::new() {
        Ok(inotify) => inotify,
        Err(e) => {
            let why = format!("the file watcher could not start: {}", start_failure(&e));
            note_problem(status, why.clone());
            // Every root then says so, as a root the watch cannot reach does.
            if let Ok(mut status) = status.lock() {
                status.roots = roots
                    .active()
                    .map(|(root, path)| RootWatch {
                        root: root.config_key(),
                        path: path.display().to_string(),
                        state: RootState::Unwatched(why.clone()),
                        fresh_reads: false,
                    })
                    .collect();
            }
            return None;
        }
    };
    let tree = tree::Tree::with_limit(
        &inotify,
        roots,
        &|root| options.refuses(root),
        sync,
        options.watch_limit(),
    );
    // The roots not wholly watched; one that cannot be listed is said when the status is
    // first published (`fresh::say_unreadable_roots`), the safety net being no help there.
    let unwatched: Vec<RootWatch> = tree
        .roots()
        .into_iter()
        .filter(|root| matches!(root.state, RootState::Partial(_) | RootState::Unwatched(_)))
        .collect();
    for problem in tree::problems_of(&unwatched) {
        tracing::warn!("{problem}; changes there are picked up by the safety-net reconcile");
    }
    tracing::debug!(folders = tree.folders(), "folders watched");
    let tracker = Tracker::new(inotify, tree, status.clone(), options.clone());
    tracker.publish_initial_status();
    Some(tracker)
}

fn run(
    directory: &Directory,
    tracker: Option<&Tracker>,
    stop: &std::sync::atomic::AtomicBool,
    status: &Mutex<WatchStatus>,
) {
    let mut every = safety_net_interval(directory);
    let mut next_safety_net = every.map(|every| Instant::now() + every);
    let mut burst_due: Option<Instant> = None;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let now = Instant::now();
        let wake = [burst_due, next_safety_net, Some(now + SETTINGS_CHECK)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now);
        let timeout = wake.saturating_duration_since(now);
        match tracker {
            Some(tracker) => {
                tracker.inotify().wait(timeout);
            }
            None => std::thread::sleep(timeout.min(Duration::from_millis(100))),
        }
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Some(tracker) = tracker {
            let (announce, due) = tracker.turn(directory);
            burst_due = due;
            directory.announce_external(&announce);
        }
        // The interval is a tunable setting: a new one counts from now.
        let now = Instant::now();
        let live = safety_net_interval(directory);
        if live != every {
            every = live;
            next_safety_net = every.map(|every| now + every);
        }
        if next_safety_net.is_some_and(|at| at <= now) {
            // Stamped as it starts: what it finds is visible to reads before it returns.
            if let Ok(mut status) = status.lock() {
                status.last_safety_net = Some(Stamp::now().rfc3339());
            }
            let announce = match tracker {
                Some(tracker) => tracker.safety_net(directory),
                None => directory
                    .reconcile_unannounced()
                    .map(|report| report.families_changed())
                    .unwrap_or_else(|e| {
                        tracing::warn!("safety-net reconcile failed: {e}");
                        Vec::new()
                    }),
            };
            directory.announce_external(&announce);
            next_safety_net = every.map(|every| Instant::now() + every);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watcher_that_cannot_start_names_the_inotify_limit_to_raise() {
        let instances = start_failure(&std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(
            instances.contains("fs.inotify.max_user_instances"),
            "{instances}"
        );
        let other = start_failure(&std::io::Error::from_raw_os_error(libc::ENOMEM));
        assert!(!other.contains("inotify"), "{other}");
    }

    #[test]
    fn a_watcher_thread_that_cannot_start_is_a_problem_in_the_status_not_a_panic() {
        let status = Mutex::new(WatchStatus::default());
        let refused = Err(std::io::Error::from_raw_os_error(libc::EAGAIN))
            .map_err(crate::error::Error::thread("the watcher's thread"));
        assert!(started_or_noted(refused, &status).is_none());
        let status = status.into_inner().expect("status");
        assert!(status.degraded);
        let problem = &status.problems[0];
        assert!(
            problem.contains("could not start a thread for the watcher's thread")
                && problem.contains("ulimit -u")
                && problem.contains("not announced"),
            "{problem}"
        );
    }
}
