//! [`Directory`]: the folders of a configuration, the index over them, and the functions that
//! read and write them. Reads answer from one snapshot of the index; a write takes the write
//! lock, checks, writes on disk, reconciles what it touched and publishes exactly one event.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use serde_json::Value;

use crate::answer::Answer;
use crate::config::{self, Config};
use crate::doc::classify::{PathClass, classify};
use crate::doc::ids::skill_id_for;
use crate::error::{Error, Result};
use crate::events::{ChangeEvent, Family, Subscriber, Subscribers};
use crate::index::changelog::Logged;
use crate::index::holder::Rows;
use crate::index::{self, Index, OpenError, Progress, Report, Scope};
use crate::list_revision::{self, ListRevision, ListScope, RevisionRequest};
use crate::locks;
use crate::retrieval::fusion::DenseRanker;
use crate::roots::{Root, Roots};
use crate::rules::skill::Visibility;
use crate::rules::skip::SkipReason;
use crate::skills::Audience;
use crate::skills::spec::SpecSummary;
use crate::{agents, request, skills, store, system_prompts};

mod dense;
mod functions;

pub use dense::{MODEL_NAME, ModelState, vectors_model};
pub use functions::{InstalledNeed, LIBRARY, LibraryFunction, ReadFunction, WriteFunction};

/// The folders of a configuration, the index over them, and the functions that read and
/// write them.
pub struct Directory {
    config: Config,
    roots: Roots,
    index: Index,
    /// Held across a write's checks, its disk write and its reconcile, and across every other
    /// reconcile: a write is never interleaved with another write, and a reconcile never sees
    /// a write on disk before the write's own reconcile (which would report it as external).
    write_lock: Mutex<()>,
    subscribers: Subscribers,
    /// The decoded skill rows of the latest revision read (see `skills::SkillCache`).
    skill_cache: Mutex<Option<Arc<skills::SkillCache>>>,
    /// The counted terms of skill texts, kept across revisions for skill search.
    skill_terms: Mutex<skills::SkillTerms>,
    /// Set by the first skill search: from then on the background thread builds each new
    /// revision's skill search index ahead of the calls. Before it nothing is built, so a
    /// worker nobody searches keeps no skill terms in memory (hundreds of MiB at 50,000).
    skill_search_wanted: AtomicBool,
    /// The live settings: tunable fields change with the configuration worker.
    settings: RwLock<config::Settings>,
    /// What brings the index up to date with changes on disk before each read: the watcher's
    /// queue, once a watcher runs (see [`CatchUp`]).
    catch_up: RwLock<Option<Arc<dyn CatchUp>>>,
    /// The embedding model's state, the skill vectors, the background embedding.
    dense: dense::Dense,
}

/// Brings the index up to date with every change the disk reported before a read began: the
/// watcher implements it over its inotify queue (`watch/fresh.rs`), so that every read, write
/// and status is as fresh as a rescan at the cost of what changed. Without one installed, a
/// writer's reads answer from the last reconcile, and a follower's ask the writer's watcher
/// through a sync cookie (`sync_cookie.rs`).
pub trait CatchUp: Send + Sync {
    /// Whether a change may be waiting (cheap: no reading of the queue, no reconcile).
    fn behind(&self) -> bool;
    /// Takes in every change reported so far, without announcing it (the watcher's burst
    /// announces what changed, once).
    fn catch_up(&self, directory: &Directory) -> Result<()>;
    /// Whether a change reported so far is not taken in yet (after any catch-up under way).
    #[cfg(any(test, feature = "testing"))]
    fn pending(&self) -> bool;
}

/// The folders a configuration indexes, as a holder's note names them.
fn folders(roots: &Roots) -> Vec<(String, String)> {
    roots
        .active()
        .map(|(root, path)| (root.config_key().to_string(), path.display().to_string()))
        .collect()
}

/// The configuration a process beside `holder` runs with: a worker's noted one when it indexes
/// the same folders (see [`Directory::config_beside_worker`]), else `config`.
fn config_of(config: Config, holder: Option<&index::holder::Holder>) -> Config {
    let Some(holder) = holder.filter(|holder| !holder.is_command()) else {
        return config;
    };
    let ours = folders(&Roots::from_paths(&config.paths));
    let same = holder.folders.is_empty() || same_folders(&holder.folders, &ours);
    match holder.config.as_ref().and_then(|c| c.config()) {
        Some(theirs) if same => theirs,
        _ => config,
    }
}

/// Whether two lists of `(setting, folder)` name the same folders for the same settings, however
/// each is spelled (`..`, `.`, a link on the way: a command run with `III_COMPOSE_DIR=../proj`
/// beside a worker started in `proj`).
fn same_folders(theirs: &[(String, String)], ours: &[(String, String)]) -> bool {
    theirs.len() == ours.len()
        && theirs
            .iter()
            .zip(ours)
            .all(|((k1, p1), (k2, p2))| k1 == k2 && same_folder(p1, p2))
}

/// Whether two spellings name one folder: equal, or equal once `.`, `..` and links are
/// resolved as far as the path exists (as the folder rules compare them).
fn same_folder(a: &str, b: &str) -> bool {
    use crate::config::layout::normalize;
    a == b || normalize(std::path::Path::new(a)) == normalize(std::path::Path::new(b))
}

/// Refuses to follow a holder that indexes other folders than `ours` (a note without folders,
/// from a command or an older build, is not compared).
fn check_same_folders(
    index: &std::path::Path,
    holder: &index::holder::Holder,
    ours: &[(String, String)],
) -> Result<(), OpenError> {
    if holder.folders.is_empty() || same_folders(&holder.folders, ours) {
        return Ok(());
    }
    let differences: Vec<String> = ours
        .iter()
        .filter(|(key, path)| {
            !holder
                .folders
                .iter()
                .any(|(k, p)| k == key && same_folder(p, path))
        })
        .map(|(key, path)| {
            let theirs = holder
                .folders
                .iter()
                .find(|(k, _)| k == key)
                .map_or("none", |(_, p)| p.as_str());
            format!("{key}: {theirs}, where this configuration names {path}")
        })
        .collect();
    let difference = match differences.is_empty() {
        true => "it has a folder this configuration does not".to_string(),
        false => differences.join("; "),
    };
    Err(OpenError::OtherFolders {
        path: index.to_path_buf(),
        holder: holder.describe(),
        difference,
    })
}

/// Says once that an open waits for a command holding the index.
fn waiting(holder: &index::holder::Holder) {
    tracing::warn!(
        "waiting for {}, which holds the index, to finish",
        holder.describe()
    );
}

impl Directory {
    /// Opens the index as its writer (the worker, or the CLI when no worker runs), after any
    /// command of this binary that holds it (see `index::holder`); a worker holding it is
    /// `Busy`.
    pub fn open(config: Config) -> Result<Directory, OpenError> {
        config.check()?;
        let index = Index::open_writer_after_commands(&config.paths.index_path, false, waiting)?;
        Ok(Directory::with_index(config, index))
    }

    /// Opens the index read-only, following the writer of another process.
    pub fn open_read_only(config: Config) -> Result<Directory, OpenError> {
        config.check()?;
        let index = Index::open_reader(&config.paths.index_path)?;
        Ok(Directory::with_index(config, index))
    }

    /// Opens as the writer when no other process is, else as a read-only follower of the
    /// worker that holds the index. A command holding it (a `reindex` may be rebuilding it
    /// from nothing) is waited for, and the index then opened as its writer; or followed too,
    /// once its rows are complete (a `reindex` computing embeddings).
    pub fn open_shared(config: Config) -> Result<Directory, OpenError> {
        Directory::open_beside(config, true)
    }

    /// [`Directory::open_shared`] for a command that writes files into the folders (a
    /// download, a restore): a command holding the index is waited for until it lets go,
    /// whatever its rows, since only a worker takes in files written beside it.
    pub fn open_to_write(config: Config) -> Result<Directory, OpenError> {
        Directory::open_beside(config, false)
    }

    fn open_beside(config: Config, follow_settled: bool) -> Result<Directory, OpenError> {
        config.check()?;
        match Index::open_writer_after_commands(&config.paths.index_path, follow_settled, waiting) {
            Ok(index) => Ok(Directory::with_index(config, index)),
            Err(OpenError::Busy(path)) => {
                let holder = index::holder::read(&path);
                if let Some(holder) = &holder {
                    let ours = folders(&Roots::from_paths(&config.paths));
                    check_same_folders(&path, holder, &ours)?;
                }
                // A worker's files may have been removed under it (an `rm` of one, which no
                // watch reports; the open above may then have made an empty index file in its
                // place): it builds them again before it answers a cookie, so the files opened
                // below are the ones it serves.
                // (Its first read asks again: a round trip of a millisecond with a worker that
                // answers, none with one this process gave up on a moment ago.)
                if holder.as_ref().is_some_and(|h| !h.is_command()) {
                    crate::sync_cookie::sync_with_writer(&path);
                }
                Directory::open_read_only(config_of(config, holder.as_ref()))
            }
            // Another user's worker holds an index this user may read but not write: its live
            // rows are the answer, as for the owner (only a writer needs write permission).
            Err(OpenError::Unwritable { path, source }) => {
                match index::holder::read(&path).filter(|h| h.role == index::holder::WORKER) {
                    Some(holder) => {
                        let ours = folders(&Roots::from_paths(&config.paths));
                        check_same_folders(&path, &holder, &ours)?;
                        Directory::open_read_only(config_of(config, Some(&holder)))
                    }
                    None => Err(OpenError::Unwritable { path, source }),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The configuration a command runs with: a running worker's live one (its holder note
    /// carries it) when the worker indexes the same folders, since the worker's stored
    /// configuration wins over the command's seed as it does for the worker (its policies, its
    /// bundles lock, its model); else `config` itself.
    pub fn config_beside_worker(config: Config) -> Config {
        let holder = index::holder::read(&config.paths.index_path);
        config_of(config, holder.as_ref())
    }

    fn with_index(config: Config, index: Index) -> Directory {
        let roots = Roots::from_paths(&config.paths);
        if index.is_writer() {
            index::holder::note(
                &config.paths.index_path,
                folders(&roots),
                &config.settings,
                Rows::Building,
            );
            // Before the first reconcile: a download killed mid-landing is finished or undone.
            store::landing::recover_at_open(&config.paths);
        }
        index.set_change_log_revisions(config.settings.change_log_revisions);
        let settings = RwLock::new(config.settings.clone());
        Directory {
            config,
            roots,
            index,
            write_lock: Mutex::new(()),
            subscribers: Subscribers::default(),
            skill_cache: Mutex::new(None),
            skill_terms: Mutex::default(),
            skill_search_wanted: AtomicBool::new(false),
            settings,
            catch_up: RwLock::new(None),
            dense: dense::Dense::default(),
        }
    }

    /// Whether a skill search was asked for in this process (see `skill_search_wanted`).
    fn skill_search_wanted(&self) -> bool {
        self.skill_search_wanted.load(Ordering::Relaxed)
    }

    /// The configuration the directory was opened with (its folders are fixed for its life).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The live settings.
    pub fn settings(&self) -> config::Settings {
        self.setting(config::Settings::clone)
    }

    /// What `read` takes from the live settings, without copying them all (the reads ask on
    /// every call).
    pub fn setting<T>(&self, read: impl FnOnce(&config::Settings) -> T) -> T {
        read(&locks::read(&self.settings))
    }

    /// Applies new settings live. The restart-required fields (`topology` in `config::fields`:
    /// the six folders, `auto_download`, `index_path`, `bundles_lock_path`, `search_model_path`
    /// and `search_model_download`) cannot change while the directory is open: if any differs,
    /// nothing is applied and their names are returned.
    pub fn apply_settings(&self, new: config::Settings) -> Result<(), Vec<&'static str>> {
        let mut settings = locks::write(&self.settings);
        let refused = settings.topology_changed(&new);
        if !refused.is_empty() {
            return Err(refused);
        }
        self.index
            .set_change_log_revisions(new.change_log_revisions);
        if self.index.is_writer() {
            // The commands beside the worker read its live settings from the note.
            index::holder::note(
                &self.config.paths.index_path,
                folders(&self.roots),
                &new,
                self.index.rows(),
            );
        }
        *settings = new;
        Ok(())
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// The index itself, for tests that look inside it.
    #[cfg(any(test, feature = "testing"))]
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The index's failing reconciles, while they last (see `index::trouble`).
    pub fn index_trouble(&self) -> Option<index::trouble::Trouble> {
        self.index.trouble()
    }

    /// Whether the index file this writer serves, and its texts store, are the ones at their
    /// paths (not removed or replaced under it; see `Index::replaced`).
    pub(crate) fn index_in_place(&self) -> bool {
        !self.index.replaced()
    }

    /// Whether the watcher or a read may try a reconcile now (see `index::trouble`).
    pub(crate) fn index_may_retry(&self) -> bool {
        self.index.may_retry()
    }

    /// A read snapshot of the index.
    pub(crate) fn reader(&self) -> Result<index::Reader> {
        self.index.read()
    }

    /// The index revision: bumped by every change of an answer.
    pub fn revision(&self) -> Result<u64> {
        self.index.read()?.revision()
    }

    /// Whether this directory is the index's writer (else a read-only follower of another
    /// process's writer).
    pub fn is_writer(&self) -> bool {
        self.index.is_writer()
    }

    /// Says that the index's rows are complete, so that reads may follow this process rather
    /// than wait for it: a command that goes on adding embeddings (`reindex`), or a worker
    /// after its first reconcile.
    pub fn note_rows_complete(&self) {
        self.index.note_rows_complete();
    }

    /// Closes the index for good, cleanly (see [`index::Index::close`]): the last step of a
    /// worker's shutdown. Every later read or write is refused.
    pub fn close(&self) {
        self.index.close();
    }

    /// Receives every change event from now on.
    pub fn subscribe(&self, subscriber: Subscriber) {
        self.subscribers.add(subscriber);
    }

    fn lock(&self) -> Result<MutexGuard<'_, ()>> {
        self.write_lock
            .lock()
            .map_err(|_| Error::Poisoned("the write lock"))
    }

    /// Installs (or, with `None`, removes) what catches reads up with the disk first.
    pub(crate) fn set_catch_up(&self, catch_up: Option<Arc<dyn CatchUp>>) {
        *locks::write(&self.catch_up) = catch_up;
    }

    fn catcher(&self) -> Option<Arc<dyn CatchUp>> {
        locks::read(&self.catch_up).clone()
    }

    /// Takes in every change made on disk before this call, before a read answers: through
    /// the watcher's queue in the writer, through the writer's watcher in a follower. A
    /// failure to catch up is logged, and the read answers from the index as it is.
    fn catch_up(&self) {
        // The index file removed under this writer (a `git clean` of its folder): until it is
        // built again, nothing keeps a command from building another there.
        if self.index.replaced() && self.index.may_retry() {
            if let Err(e) = self.reconcile() {
                tracing::warn!("building the removed index again failed: {e}");
            }
        }
        match self.catcher() {
            Some(catcher) => {
                if let Err(e) = catcher.catch_up(self) {
                    tracing::warn!("catching up with changes on disk failed: {e}");
                }
            }
            None if !self.index.is_writer() => {
                crate::sync_cookie::sync_with_writer(&self.config.paths.index_path);
            }
            None => {}
        }
    }

    /// Whether the watcher holds a change the next read would have to take in first.
    #[cfg(any(test, feature = "testing"))]
    pub fn changes_pending(&self) -> bool {
        self.catcher().is_some_and(|c| c.pending())
    }

    /// Whether a read may have to catch up first (see [`CatchUp::behind`]); a follower always
    /// may.
    fn maybe_behind(&self) -> bool {
        match self.catcher() {
            Some(catcher) => catcher.behind(),
            None => !self.index.is_writer(),
        }
    }

    /// Brings the index up to date with the disk. Changes found here were made behind the
    /// library's back: each family whose answers changed gets one `external` event.
    pub fn reconcile(&self) -> Result<Report> {
        self.reconcile_scope(&Scope::All, &|_| {})
    }

    /// A full reconcile whose changes the caller announces (the watcher's bursts).
    pub(crate) fn reconcile_unannounced(&self) -> Result<Report> {
        self.reconcile_quietly(&Scope::All, &|_| {})
    }

    /// A scoped reconcile whose changes the caller announces (the watcher's bursts).
    pub(crate) fn reconcile_paths_unannounced(&self, paths: Vec<PathBuf>) -> Result<Report> {
        self.reconcile_quietly(&Scope::Paths(paths), &|_| {})
    }

    /// One `external` event for each of these families.
    pub(crate) fn announce_external(&self, families: &[Family]) {
        for family in families {
            self.subscribers.publish(&ChangeEvent::external(*family));
        }
    }

    pub fn reconcile_with_progress(&self, progress: &dyn Fn(Progress)) -> Result<Report> {
        self.reconcile_scope(&Scope::All, progress)
    }

    /// Reconciles only these paths (and what is under them), as for a watcher burst.
    pub fn reconcile_paths(&self, paths: Vec<PathBuf>) -> Result<Report> {
        self.reconcile_scope(&Scope::Paths(paths), &|_| {})
    }

    fn reconcile_scope(&self, scope: &Scope, progress: &dyn Fn(Progress)) -> Result<Report> {
        let report = self.reconcile_quietly(scope, progress)?;
        self.announce_external(&report.families_changed());
        Ok(report)
    }

    fn reconcile_quietly(&self, scope: &Scope, progress: &dyn Fn(Progress)) -> Result<Report> {
        let report = {
            let _guard = self.lock()?;
            self.index.reconcile(&self.roots, scope, progress)?
        };
        self.note_holder_if_rebuilt();
        // The reconcile removed the temporary files killed writers left (see `store`).
        if !report.temps.is_empty() {
            tracing::info!(
                removed = report.temps.len(),
                "removed temporary files left by interrupted writes"
            );
        }
        Ok(report)
    }

    /// Runs a write function: checks, an atomic write on disk, then the index updated in the
    /// same call (so the next read sees it), then exactly one change event.
    pub fn write(
        &self,
        function: WriteFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<Value> {
        if !self.index.is_writer() {
            return Err(Error::ReadOnly);
        }
        // The write's checks see what is on disk now, as the reads do.
        let started = Instant::now();
        self.catch_up();
        tracing::debug!(
            function = function.id(),
            catch_up_us = started.elapsed().as_micros() as u64,
            "write caught up"
        );
        self.change(|| {
            let reader = self.index.read()?;
            let visibility = self.visibility(installed);
            let outcome = function.apply(&reader, &self.roots, visibility, request)?;
            Ok(Change {
                value: outcome.response,
                touched: outcome.touched,
                events: vec![outcome.event],
            })
        })
    }

    /// Writes this process's holder note again after its index file was built again (it was
    /// removed under it, with the note beside it): commands find the worker again. Called
    /// after the reconcile that built it, so its rows are complete.
    fn note_holder_if_rebuilt(&self) {
        if self.index.take_rebuilt() {
            let settings = self.settings();
            index::holder::note(
                &self.config.paths.index_path,
                folders(&self.roots),
                &settings,
                Rows::Complete,
            );
        }
    }

    /// Refuses a change before it touches the disk while the index cannot record changes
    /// (its last reconciles failed) and a full reconcile, tried now, fails too: the caller
    /// hears that nothing was written, instead of an error after its file landed. The
    /// families that reconcile changed go to `caught_up`, for their `external` events.
    fn index_records_changes(&self, caught_up: &mut Vec<Family>) -> Result<()> {
        if self.index.trouble().is_none() {
            return Ok(());
        }
        match self.index.reconcile(&self.roots, &Scope::All, &|_| {}) {
            Ok(report) => {
                caught_up.extend(report.families_changed());
                Ok(())
            }
            Err(e) => Err(Error::Stalled {
                index: self.index.path().to_path_buf(),
                source: Box::new(e),
            }),
        }
    }

    /// Takes the paths a change touched into the index (a writer's own): when it cannot, the
    /// error says the change is on disk all the same.
    fn record(&self, touched: &[PathBuf]) -> Result<()> {
        if !self.index.is_writer() || touched.is_empty() {
            return Ok(());
        }
        let scope = Scope::Paths(touched.to_vec());
        match self.index.reconcile(&self.roots, &scope, &|_| {}) {
            Ok(_) => Ok(()),
            Err(e) => Err(Error::Unrecorded {
                written: touched.iter().map(|p| p.display().to_string()).collect(),
                index: self.index.path().to_path_buf(),
                source: Box::new(e),
            }),
        }
    }

    /// Makes a change on disk under the write lock: `change` writes and says what it touched
    /// and which events to publish. The index's writer reconciles the touched paths in the
    /// same call (so the next read sees them, and the watcher's echo of them finds nothing
    /// new); the events go out once the lock is released. Writes and downloads both land here.
    pub(crate) fn change<T>(&self, change: impl FnOnce() -> Result<Change<T>>) -> Result<T> {
        // Where a change's time goes (issue 31's trace of a write): `debug` level.
        let started = Instant::now();
        let mut caught_up = Vec::new();
        let made = {
            let _guard = self.lock()?;
            let locked = started.elapsed();
            self.index_records_changes(&mut caught_up)
                .and_then(|()| change())
                .and_then(|done| {
                    let written = started.elapsed();
                    self.record(&done.touched)?;
                    Ok((done, locked, written))
                })
        };
        self.note_holder_if_rebuilt();
        // What the catch-up took in is announced whatever became of the change itself.
        self.announce_external(&caught_up);
        let (done, locked, written) = made?;
        let reconciled = started.elapsed();
        // The watcher's echo of this change was queued by the kernel when the files went into
        // place: taken in here, it is paid by the call that caused it, not by the next read
        // (about 0.4 ms at 50,000 skills, which doubled a `get` right after a write).
        if self.index.is_writer() && !done.touched.is_empty() {
            self.catch_up();
        }
        let echoed = started.elapsed();
        for event in &done.events {
            self.subscribers.publish(event);
        }
        tracing::debug!(
            lock_wait_us = locked.as_micros() as u64,
            checks_and_disk_us = (written - locked).as_micros() as u64,
            reconcile_us = (reconciled - written).as_micros() as u64,
            echo_us = (echoed - reconciled).as_micros() as u64,
            publish_us = (started.elapsed() - echoed).as_micros() as u64,
            "change made"
        );
        Ok(done.value)
    }

    fn visibility<'a>(&self, installed: Option<&'a BTreeSet<String>>) -> Visibility<'a> {
        Visibility {
            filter_unregistered: self.setting(|s| s.filter_unregistered),
            installed,
        }
    }

    /// Answers a read function with the contract's response shape. `installed` is the set of
    /// installed worker names for `filter_unregistered`; `None` when unknown (nothing hidden).
    pub fn read(
        &self,
        function: ReadFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<Value> {
        self.read_answer(function, request, installed)?.into_value()
    }

    /// [`Directory::read`]'s answer before it is written out: the worker hands it to the SDK,
    /// which serializes it once into the value it sends.
    pub fn read_answer(
        &self,
        function: ReadFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<Answer> {
        // Where a read's time goes (issue 31: the first read after a write): `debug` level.
        let started = Instant::now();
        self.catch_up();
        let caught_up = started.elapsed();
        let answer = self.read_in(&self.index.read()?, function, request, installed);
        tracing::debug!(
            function = function.id(),
            catch_up_us = caught_up.as_micros() as u64,
            read_us = (started.elapsed() - caught_up).as_micros() as u64,
            "read answered"
        );
        answer
    }

    /// The answer of a `list` call whose caller holds the current revision (`since_revision`,
    /// else `if_revision`): `{unchanged, revision}`, found from the index's last commit, with
    /// no snapshot to read, so cheap enough for an async thread (the worker answers the idle
    /// polls of UIs without a hop to its blocking pool). `None` for any other call, to be
    /// answered by [`Directory::read`].
    pub fn read_if_unchanged(
        &self,
        function: ReadFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Option<Result<Answer>> {
        let table = function.listed_table()?;
        let held: RevisionRequest = request::parse(request).ok()?;
        let held = held.since_revision.or(held.if_revision)?;
        // A change on disk waiting to be taken in is caught up by the full read.
        if self.maybe_behind() {
            return None;
        }
        let latest = match self.index.latest() {
            Some(latest) => latest,
            // A follower: its writer is another process.
            None => self.index.read().and_then(|r| r.latest()).ok()?,
        };
        // Checked whole, as the full read would.
        let filters = match table {
            Logged::Skills => match skills::list_filter_bytes(request) {
                Ok(filters) => Some(filters),
                Err(e) => return Some(Err(e)),
            },
            Logged::Prompts | Logged::Agents => None,
        };
        let scope = filters.as_deref().map(|filters| ListScope {
            visibility: self.visibility(installed),
            filters,
        });
        let current = ListRevision::of(latest, table, scope);
        (current.token == held).then(|| Ok(Answer::Value(list_revision::unchanged(current.token))))
    }

    fn read_in(
        &self,
        reader: &index::Reader,
        function: ReadFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<Answer> {
        function.answer(self, reader, self.visibility(installed), request)
    }

    /// `directory::skills::search` (beyond the contract): skills ranked for a task, with the
    /// same visibility and fresh reads as `list`. `dense` is a dense lane of the caller's
    /// (the quality tests plug one in); without it, the directory's own is used once the model
    /// is ready and the tree embedded, and the ranking is lexical until then.
    pub fn search_skills(
        &self,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
        dense: Option<&dyn DenseRanker>,
    ) -> Result<Value> {
        self.search_skills_for(Audience::Caller, request, installed, dense)
    }

    /// `skills::search` for a model to pick from, unasked (`search_functions`' side lane): as
    /// [`Directory::search_skills`], without the skills whose frontmatter disables model
    /// invocation (left out while ranking, so they never take the place of one that may be
    /// used), and in hybrid mode without the skills only the lexical lane found.
    pub fn search_skills_for_model(
        &self,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
        dense: Option<&dyn DenseRanker>,
    ) -> Result<Value> {
        self.search_skills_for(Audience::Model, request, installed, dense)
    }

    /// `skills::search` for `audience`, on a fresh snapshot.
    fn search_skills_for(
        &self,
        audience: Audience,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
        dense: Option<&dyn DenseRanker>,
    ) -> Result<Value> {
        self.catch_up();
        let reader = self.index.read()?;
        let cache = self.skill_cache(&reader)?;
        let visibility = self.visibility(installed);
        self.rank_skills(&reader, &cache, visibility, audience, request, dense)
    }

    /// `skills::search` over a snapshot, with `dense` or else the directory's own lane.
    fn rank_skills(
        &self,
        reader: &index::Reader,
        cache: &skills::SkillCache,
        visibility: Visibility<'_>,
        audience: Audience,
        request: &Value,
        dense: Option<&dyn DenseRanker>,
    ) -> Result<Value> {
        // This call builds its revision's index itself; later revisions' are built ahead.
        self.skill_search_wanted.store(true, Ordering::Relaxed);
        let embedder = self.embedder();
        let own = self.skill_lane(cache, embedder.as_deref());
        let given = dense.map(|lane| skills::ById { lane, cache });
        let dense = match &given {
            Some(given) => Some(given as &dyn DenseRanker<u32>),
            None => own.as_ref().map(|own| own as &dyn DenseRanker<u32>),
        };
        let doubled = skills::doubled::Doubled::of(&self.roots);
        let asker = skills::Asker {
            audience,
            doubled: &doubled,
        };
        skills::search(
            reader,
            cache,
            &self.skill_terms,
            visibility,
            asker,
            request,
            dense,
        )
    }

    /// Answers a read function with the response's JSON text. `list`, which UIs call
    /// constantly, copies the text of rows decoded once per index revision.
    pub fn read_json(
        &self,
        function: ReadFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<String> {
        self.read_answer(function, request, installed)?.into_json()
    }

    /// The cached skill rows of the snapshot's revision: the cached ones when they are of it,
    /// else brought forward from them (or decoded anew) and kept for the next call. A snapshot
    /// older than the cache (a read that began before a reconcile ended) gets rows of its own.
    fn skill_cache(&self, reader: &index::Reader) -> Result<Arc<skills::SkillCache>> {
        let revision = reader.revision()?;
        let epoch = reader.epoch()?;
        let mut cache = self
            .skill_cache
            .lock()
            .map_err(|_| Error::Poisoned("the skill cache"))?;
        if let Some(cached) = cache.as_ref() {
            if cached.epoch == epoch && cached.revision == revision {
                return Ok(cached.clone());
            }
            if cached.epoch == epoch && cached.revision > revision {
                return Ok(Arc::new(skills::SkillCache::build(reader)?));
            }
        }
        let advanced = match cache.as_ref() {
            Some(cached) => cached.advance(reader)?,
            None => None,
        };
        let fresh = Arc::new(match advanced {
            Some(advanced) => advanced,
            None => skills::SkillCache::build(reader)?,
        });
        *cache = Some(fresh.clone());
        Ok(fresh)
    }

    /// The skill cache's per-revision structures at the current revision as this directory
    /// keeps them (shared with, or derived from, an earlier revision's), the same built from
    /// scratch, and whether the kept postings were ready before this call (shared) or derived
    /// rather than built (see `skills::SkillCache`).
    #[cfg(any(test, feature = "testing"))]
    pub fn skill_structures(&self) -> Result<(skills::Structures, skills::Structures, bool)> {
        let reader = self.index.read()?;
        let kept = self.skill_cache(&reader)?;
        let reused = kept.postings_reused();
        let built = skills::SkillCache::build(&reader)?;
        Ok((kept.structures(), built.structures(), reused))
    }

    /// Whether the current revision's miss postings are ready (built, or shared with the
    /// revision before) before any miss of it.
    #[cfg(any(test, feature = "testing"))]
    pub fn skill_postings_ready(&self) -> Result<bool> {
        let reader = self.index.read()?;
        Ok(self.skill_cache(&reader)?.postings_ready())
    }

    /// `directory::index::status`, beyond the original: the index revision, how many rows each
    /// family serves, every skipped file with its reason, and the last reconcile. (The worker
    /// adds the watcher's health and its connection.)
    pub fn status(&self) -> Result<Value> {
        self.catch_up();
        let skipped = self.skipped()?;
        let reader = self.index.read()?;
        let count = |v: Value, key: &str| v[key].as_array().map_or(0, Vec::len);
        let last = reader.last_reconcile()?;
        Ok(serde_json::json!({
            "revision": reader.revision()?,
            "index_path": self.index.path().display().to_string(),
            "files": reader.file_count()?,
            "counts": {
                "skills": self.skill_cache(&reader)?.rows().len(),
                "system_prompts": count(system_prompts::list(&reader)?, "prompts"),
                "agents": count(agents::list(&reader)?, "agents"),
            },
            "skipped": skipped.iter().take(STATUS_SKIPPED).collect::<Vec<_>>(),
            "skipped_total": skipped.len(),
            "last_reconcile": last.map(|l| serde_json::json!({
                "at": l.at.rfc3339(),
                "duration_ms": l.duration_ms,
            })),
            // Reads serve the last recorded state while this is set.
            "index_error": self.index.trouble().map(|t| serde_json::json!({
                "error": t.error,
                "since": t.since.rfc3339(),
                "attempts": t.attempts,
            })),
        }))
    }

    /// Every served `SKILL.md` checked against the Agent Skills specification (`check --spec`):
    /// the checks stored at reconcile, plus the folder rule.
    /// A `SKILL.md` the index does not serve, or serves with its frontmatter ignored or read
    /// line by line, is noted with the reason; so is one in another case under an agents skills
    /// root, which the index never records (the folders of those roots are listed for it).
    pub fn spec_check(&self) -> Result<SpecSummary> {
        self.catch_up();
        skills::spec::check(&self.index.read()?, &self.roots)
    }

    /// Every agent profile file served with a problem (see [`agents::problems`]), seen as
    /// `installed` names the installed workers (`None`: nothing hidden).
    pub fn profile_problems(
        &self,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<Vec<agents::AgentProblem>> {
        self.catch_up();
        agents::problems(&self.index.read()?, &self.roots, self.visibility(installed))
    }

    /// Every file (or folder) the index does not serve, or serves with a problem, with why.
    pub fn skipped(&self) -> Result<Vec<Skipped>> {
        self.catch_up();
        let reader = self.index.read()?;
        Ok(reader
            .skipped()?
            .into_iter()
            .map(|(root, rel, reason)| {
                // A name that is not UTF-8 is stored written with `\xNN`: no id can name it.
                let named = !matches!(reason, SkipReason::NameNotUtf8 { .. });
                let (family, id) = named
                    .then(|| skipped_document(root, &rel))
                    .flatten()
                    .unzip();
                Skipped {
                    root: root.config_key(),
                    path: self.roots.file(root, &rel).display().to_string(),
                    family,
                    id,
                    reason,
                }
            })
            .collect())
    }
}

/// How many skipped files `index::status` lists (`skipped_total` counts them all; `check`
/// lists every one). A health call stays small however many files a tree holds that are not
/// served: 50,000 of them (a `node_modules` folder of READMEs) made 17 MB, more than the
/// engine carries in one message.
const STATUS_SKIPPED: usize = 1000;

/// What a change on disk made: its answer, the paths it touched, the events it publishes.
pub(crate) struct Change<T> {
    pub value: T,
    pub touched: Vec<PathBuf>,
    pub events: Vec<ChangeEvent>,
}

/// A file the index does not serve, or serves with a problem.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// The configuration key of the root it sits under.
    pub root: &'static str,
    pub path: String,
    /// The family a markdown file there would belong to (`skills`, `system-prompts`,
    /// `agents`), and the id its path gives it, so that a reader (the console page) can put
    /// the problem beside the document; `null` for anything else.
    pub family: Option<&'static str>,
    pub id: Option<String>,
    /// Why; in JSON (`check --json`, `index::status`), its sentence.
    #[serde(serialize_with = "as_sentence")]
    pub reason: SkipReason,
}

/// The family and id a path under a root gives a markdown file, when it gives one.
fn skipped_document(root: Root, rel: &str) -> Option<(&'static str, String)> {
    let stem = rel.strip_suffix(".md")?;
    match root {
        Root::Agents | Root::GlobalAgents => {
            (!stem.contains('/')).then(|| ("agents", stem.to_string()))
        }
        Root::Skills | Root::LocalSkills | Root::AgentsSkills | Root::GlobalAgentsSkills => {
            match classify(rel) {
                PathClass::Skill => Some(("skills", skill_id_for(rel))),
                PathClass::SystemPrompt => {
                    let name = stem.rsplit('/').next().unwrap_or(stem);
                    Some(("system-prompts", name.to_string()))
                }
                PathClass::Prompts | PathClass::Agents => None,
            }
        }
    }
}

fn as_sentence<S: serde::Serializer>(reason: &SkipReason, out: S) -> Result<S::Ok, S::Error> {
    out.collect_str(reason)
}

impl ReadFunction {
    /// The table a `list` function lists, whose revision its caller may hold; `None` for every
    /// other read, which [`Directory::read_if_unchanged`] never answers.
    pub fn listed_table(self) -> Option<Logged> {
        match self {
            ReadFunction::SkillsList => Some(Logged::Skills),
            ReadFunction::SystemPromptsList => Some(Logged::Prompts),
            ReadFunction::AgentsList => Some(Logged::Agents),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skipped_file_names_its_family_and_id() {
        for (root, rel, expected) in [
            (
                Root::Skills,
                "mailer/guide.md",
                Some(("skills", "mailer/guide")),
            ),
            (
                Root::Skills,
                "mailer/SKILL.md",
                Some(("skills", "mailer/index")),
            ),
            (
                Root::LocalSkills,
                "Bad Name.md",
                Some(("skills", "Bad Name")),
            ),
            (
                Root::Skills,
                "team/system-prompts/review.md",
                Some(("system-prompts", "review")),
            ),
            (Root::Agents, "helper.md", Some(("agents", "helper"))),
            (Root::Agents, "nested/helper.md", None),
            (Root::Skills, "prompts/old.md", None),
            (Root::Skills, "mailer/notes.txt", None),
        ] {
            let found = skipped_document(root, rel);
            assert_eq!(
                found.as_ref().map(|(f, id)| (*f, id.as_str())),
                expected,
                "{rel}"
            );
        }
    }
}
