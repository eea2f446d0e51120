//! The live doorbell: a file-system watcher over the roots whose bursts of events become one
//! scoped reconcile each, plus a slow safety-net reconcile for anything the watcher missed.
//!
//! A burst never carries the changes itself: it only says which paths to look at again. The
//! reconcile compares disk with the index and publishes one `external` event per family whose
//! answers changed, so our own writes (already reconciled by the write) and changes to files
//! that are not documents cause no event.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::directory::Directory;
use crate::roots::Root;
use crate::time::Stamp;

/// How the watcher batches events and how often the safety net runs.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// A burst ends after this long without a new event.
    pub quiet: Duration,
    /// A burst never waits longer than this from its first event, however busy the disk.
    pub max_delay: Duration,
    /// Pretend the watch of these roots failed (tests of the degraded mode).
    #[cfg(any(test, feature = "testing"))]
    pub fail_roots: Vec<Root>,
}

impl Default for WatchOptions {
    fn default() -> WatchOptions {
        WatchOptions {
            quiet: Duration::from_millis(50),
            max_delay: Duration::from_millis(500),
            #[cfg(any(test, feature = "testing"))]
            fail_roots: Vec::new(),
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
    /// Some root is not watched, or the watcher failed: changes there are seen only by the
    /// safety-net reconcile.
    pub degraded: bool,
    /// Why, one line per problem.
    pub problems: Vec<String>,
    /// Folders watched.
    pub watched: Vec<String>,
    /// Bursts handled and reconciles they caused.
    pub bursts: u64,
    /// Rescan notices: the kernel's event queue overflowed (`fs.inotify.max_queued_events`), so
    /// the burst reconciled every root instead of the paths it heard of. Nothing is missed, but
    /// many of these mean the queue is too small for the churn on disk.
    pub rescans: u64,
    /// When the last safety-net reconcile ran (RFC 3339), if it has.
    pub last_safety_net: Option<String>,
}

enum Message {
    Event(notify::Result<notify::Event>),
    Stop,
}

/// A running watcher; stops when dropped.
pub struct Watcher {
    sender: Sender<Message>,
    thread: Option<JoinHandle<()>>,
    status: Arc<Mutex<WatchStatus>>,
    // Kept alive for as long as the watch should run.
    _notify: Option<RecommendedWatcher>,
}

impl Watcher {
    /// Creates the writable roots when missing, watches every root that exists, and starts the
    /// thread that turns bursts into reconciles.
    pub fn start(directory: Arc<Directory>, options: WatchOptions) -> Watcher {
        let (sender, receiver) = mpsc::channel();
        let status = Arc::new(Mutex::new(WatchStatus::default()));
        let started = Instant::now();
        let notify = watch_roots(&directory, &options, sender.clone(), &status);
        tracing::debug!(
            watch_ms = started.elapsed().as_millis() as u64,
            "roots watched"
        );
        let thread_status = status.clone();
        let thread = std::thread::Builder::new()
            .name("iii-directory-watch".into())
            .spawn(move || run(directory, options, receiver, thread_status))
            .expect("spawning the watcher thread");
        Watcher {
            sender,
            thread: Some(thread),
            status,
            _notify: notify,
        }
    }

    pub fn status(&self) -> WatchStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops watching and waits for a burst in progress to finish.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.sender.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn note_problem(status: &Mutex<WatchStatus>, problem: String) {
    tracing::warn!("{problem}; changes there are picked up by the safety-net reconcile");
    if let Ok(mut status) = status.lock() {
        status.degraded = true;
        status.problems.push(problem);
    }
}

/// The folders to watch: the writable roots (created when missing) and the agents skills root
/// when it exists. A root nested in another watched root is covered by that one's watch.
fn watch_roots(
    directory: &Directory,
    options: &WatchOptions,
    sender: Sender<Message>,
    status: &Mutex<WatchStatus>,
) -> Option<RecommendedWatcher> {
    let roots = directory.roots();
    let handler = move |event: notify::Result<notify::Event>| {
        if worth_a_look(&event) {
            let _ = sender.send(Message::Event(event));
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(watcher) => watcher,
        Err(e) => {
            note_problem(status, format!("the file watcher could not start: {e}"));
            return None;
        }
    };
    // Folders watched recursively: a root inside one of them needs no watch of its own.
    let mut watched: Vec<PathBuf> = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    for root in [
        Root::Skills,
        Root::LocalSkills,
        Root::Agents,
        Root::AgentsSkills,
    ] {
        let path = roots.path(root);
        if root != Root::AgentsSkills {
            if let Err(e) = std::fs::create_dir_all(path) {
                note_problem(
                    status,
                    format!(
                        "cannot create {} {}: {e}",
                        root.config_key(),
                        path.display()
                    ),
                );
                continue;
            }
        } else if !path.is_dir() {
            continue;
        }
        if watched.iter().any(|w| path.starts_with(w)) {
            continue;
        }
        let recursive = root != Root::Agents;
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        let result = if options.refuses(root) {
            Err(notify::Error::generic("watch refused (injected failure)"))
        } else {
            watcher.watch(path, mode)
        };
        match result {
            Ok(()) => {
                if recursive {
                    watched.push(path.to_path_buf());
                }
                listed.push(path.display().to_string());
            }
            Err(e) => note_problem(
                status,
                format!("cannot watch {} {}: {e}", root.config_key(), path.display()),
            ),
        }
    }
    if let Ok(mut status) = status.lock() {
        status.watched = listed;
    }
    Some(watcher)
}

/// Whether an event can matter to a burst, decided on notify's thread so that the rest are
/// never queued: notify watches for opens too, and every folder a walk opens (notify's own when
/// it adds its watches, a reconcile's) and every file a reconcile reads is at least one: about a
/// hundred thousand per walk of a large tree, none of them a change.
fn worth_a_look(event: &notify::Result<notify::Event>) -> bool {
    match event {
        Ok(event) if event.need_rescan() => true,
        Ok(event) => {
            !matches!(event.kind, EventKind::Access(_)) && event.paths.iter().any(|p| relevant(p))
        }
        Err(_) => true,
    }
}

/// Paths worth a look: documents, and folders (which carry no extension). Our own temporary
/// files and other files are not.
fn relevant(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name.ends_with(".tmp") {
        return false;
    }
    match path.extension() {
        None => true,
        Some(ext) => ext == "md",
    }
}

/// A burst being collected.
#[derive(Default)]
struct Burst {
    paths: BTreeSet<PathBuf>,
    full: bool,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Burst {
    /// Adds an event that passed [`worth_a_look`] (the only way one reaches the queue): a
    /// change with at least one relevant path, a rescan notice, or an error.
    fn add(&mut self, event: notify::Result<notify::Event>, status: &Mutex<WatchStatus>) {
        match event {
            Ok(event) if event.need_rescan() => {
                // Not degraded: this burst reconciles every root, so nothing is lost. A large
                // tree overflows the queue once as its watches are added (see `worth_a_look`).
                tracing::info!(
                    "the kernel's file event queue overflowed; reconciling every root instead \
                     of the changed paths (raise fs.inotify.max_queued_events if this repeats)"
                );
                if let Ok(mut status) = status.lock() {
                    status.rescans += 1;
                }
                self.full = true;
            }
            Ok(event) => self
                .paths
                .extend(event.paths.into_iter().filter(|p| relevant(p))),
            Err(e) => {
                note_problem(status, format!("file watcher error: {e}"));
                self.full = true;
            }
        }
        let now = Instant::now();
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// When the burst is over, if one is collecting.
    fn deadline(&self, options: &WatchOptions) -> Option<Instant> {
        let (first, last) = (self.first?, self.last?);
        Some((last + options.quiet).min(first + options.max_delay))
    }
}

fn run(
    directory: Arc<Directory>,
    options: WatchOptions,
    receiver: Receiver<Message>,
    status: Arc<Mutex<WatchStatus>>,
) {
    let mut burst = Burst::default();
    let mut every = safety_net_interval(&directory);
    let mut next_safety_net = every.map(|every| Instant::now() + every);
    loop {
        let now = Instant::now();
        let wake = [
            burst.deadline(&options),
            next_safety_net,
            Some(now + SETTINGS_CHECK),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(now);
        let message = receiver.recv_timeout(wake.saturating_duration_since(now));
        match message {
            Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(Message::Event(event)) => burst.add(event, &status),
            Err(RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if burst.deadline(&options).is_some_and(|at| at <= now) {
            let done = std::mem::take(&mut burst);
            let result = if done.full {
                directory.reconcile()
            } else {
                directory.reconcile_paths(done.paths.into_iter().collect())
            };
            if let Err(e) = result {
                tracing::warn!("reconcile after file changes failed: {e}");
            }
            if let Ok(mut status) = status.lock() {
                status.bursts += 1;
            }
        }
        // The interval is a tunable setting: a new one counts from now.
        let live = safety_net_interval(&directory);
        if live != every {
            every = live;
            next_safety_net = every.map(|every| now + every);
        }
        if next_safety_net.is_some_and(|at| at <= now) {
            if let Err(e) = directory.reconcile() {
                tracing::warn!("safety-net reconcile failed: {e}");
            }
            if let Ok(mut status) = status.lock() {
                status.last_safety_net = Some(Stamp::now().rfc3339());
            }
            next_safety_net = every.map(|every| Instant::now() + every);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, DataChange, Flag, ModifyKind};

    fn event(kind: EventKind, path: &str) -> notify::Result<notify::Event> {
        Ok(notify::Event::new(kind).add_path(PathBuf::from(path)))
    }

    #[test]
    fn opens_and_files_that_are_not_documents_are_dropped_before_the_queue() {
        let modify = EventKind::Modify(ModifyKind::Data(DataChange::Content));
        assert!(worth_a_look(&event(modify, "/r/ns/a.md")));
        assert!(worth_a_look(&event(modify, "/r/ns")));
        assert!(!worth_a_look(&event(modify, "/r/ns/a.md.tmp")));
        assert!(!worth_a_look(&event(modify, "/r/ns/picture.png")));
        assert!(!worth_a_look(&event(
            EventKind::Access(AccessKind::Open(notify::event::AccessMode::Any)),
            "/r/ns/a.md"
        )));
        assert!(worth_a_look(&Err(notify::Error::generic("broken"))));
    }

    #[test]
    fn a_rescan_notice_reconciles_everything_and_is_not_a_degraded_watch() {
        let status = Mutex::new(WatchStatus::default());
        let notice = Ok(notify::Event::new(EventKind::Other).set_flag(Flag::Rescan));
        assert!(worth_a_look(&notice));
        let mut burst = Burst::default();
        burst.add(notice, &status);
        assert!(burst.full);
        assert!(burst.first.is_some(), "the burst is collecting");
        let status = status.into_inner().unwrap();
        assert_eq!(status.rescans, 1);
        assert!(!status.degraded, "{status:?}");
        assert!(status.problems.is_empty(), "{status:?}");
    }
}
