//! "On (re)connect, set up": the one place that owns what the worker establishes on the engine
//! for each connection, the first and every reconnect.
//!
//! The SDK replays, on every reconnect, what it holds in memory: trigger types, functions and
//! the bindings made with `register_trigger` (SDK 0.23 `collect_registrations`). It does not
//! replay calls. So what the worker does by calling the engine (registering and reading its
//! configuration entry, fetching the function catalog, reconciling worker skills) is lost when
//! the engine restarts, and must be done again; a binding, on the other hand, must be made once
//! and never again (a second one would be a second live binding).
//!
//! [`STEPS`] is the list, in order. [`supervise`] runs the whole list each time `connection.rs`
//! reports a new connection; a step reports what it did ([`Outcome`]), and each outcome is
//! logged, counted per step, and shown in `directory::index::status` under
//! `connection.setup`. A run interrupted by a newer connection is abandoned and the list starts
//! over on the new one. A feature that needs anything on the engine adds a step here; nothing
//! else in the worker calls the engine at connect time.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use iii_sdk::IIIClient;
use serde_json::{Value, json};

use super::Shared;
use super::configuration::{self, ApplyResult, Registration};
use super::search::{self, HintBinding};
use super::{console, downloads};
use crate::locks;
use crate::search::service::Reuse;
use crate::time::Stamp;

/// What a step came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done now.
    Done(String),
    /// Nothing to do: a binding the SDK holds and replays on reconnects.
    Replayed(String),
    /// Not applicable (a setting is off, the engine lacks the worker it needs).
    Skipped(String),
    Failed(String),
}

impl Outcome {
    fn name(&self) -> &'static str {
        match self {
            Outcome::Done(_) => "done",
            Outcome::Replayed(_) => "replayed",
            Outcome::Skipped(_) => "skipped",
            Outcome::Failed(_) => "failed",
        }
    }

    fn detail(&self) -> &str {
        match self {
            Outcome::Done(d) | Outcome::Replayed(d) | Outcome::Skipped(d) | Outcome::Failed(d) => d,
        }
    }
}

type StepFuture<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// One named setup step.
pub struct Step {
    pub name: &'static str,
    run: for<'a> fn(&'a Run) -> StepFuture<'a>,
}

/// Every step, in the order they run on each connection.
pub const STEPS: &[Step] = &[
    // The engine's worker set and the registry may have changed while it was away.
    Step {
        name: "caches",
        run: caches,
    },
    // Calls: the entry's schema lives in the engine's memory only, lost with a restart.
    Step {
        name: "configuration.register",
        run: configuration_register,
    },
    Step {
        name: "configuration.read",
        run: configuration_read,
    },
    // A binding: made once, replayed by the SDK.
    Step {
        name: "configuration.bind",
        run: configuration_bind,
    },
    Step {
        name: "downloads.bind",
        run: downloads_bind,
    },
    // Calls: adds made while the engine was away were never announced.
    Step {
        name: "downloads.reconcile",
        run: downloads_reconcile,
    },
    Step {
        name: "search.follow",
        run: search_follow,
    },
    // A call: the engine's functions may have changed while it was away.
    Step {
        name: "search.catalog",
        run: search_catalog,
    },
    // The stored configuration just read may have turned `inject_hint` on or off.
    Step {
        name: "search.hint",
        run: search_hint,
    },
    Step {
        name: "console.assets",
        run: console_assets,
    },
];

/// What lasts across runs: the bindings already made, the `--config` seed until the entry was
/// first registered, and the record of every run.
pub struct Setup {
    seed: Mutex<Option<Value>>,
    /// The steps whose binding the SDK now holds.
    bound: Mutex<HashSet<&'static str>>,
    reconcile_running: Arc<AtomicBool>,
    record: Mutex<Record>,
}

impl Setup {
    /// `seed` is offered as the entry's initial value until a registration goes through.
    pub fn new(seed: Option<Value>) -> Setup {
        Setup {
            seed: Mutex::new(seed),
            bound: Mutex::new(HashSet::new()),
            reconcile_running: Arc::new(AtomicBool::new(false)),
            record: Mutex::new(Record::default()),
        }
    }

    fn record(&self) -> MutexGuard<'_, Record> {
        locks::lock(&self.record)
    }

    /// Runs `bind` unless this step's binding was already made (the SDK replays it).
    async fn once<F, Fut, E>(&self, step: &'static str, what: &str, bind: F) -> Outcome
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        if locks::lock(&self.bound).contains(step) {
            return Outcome::Replayed(format!("{what}: replayed by the SDK"));
        }
        match bind().await {
            Ok(()) => {
                locks::lock(&self.bound).insert(step);
                Outcome::Done(format!("{what}: bound"))
            }
            Err(e) => Outcome::Failed(format!("{what}: {e}")),
        }
    }

    /// The `setup` object of the status.
    pub fn status(&self) -> Value {
        self.record().status()
    }
}

/// The `connection` object of `directory::index::status`: the link's facts and the setup.
pub fn status(iii: &IIIClient, shared: &Shared) -> Value {
    let mut status = shared.link.status(iii.get_connection_state());
    status["setup"] = shared.setup.status();
    status
}

/// One run of the list, for one connection.
pub struct Run {
    iii: IIIClient,
    shared: Arc<Shared>,
    connection: u64,
    /// Set by `configuration.register` when the engine has no configuration worker.
    no_configuration_worker: AtomicBool,
}

/// Runs the list on every new connection, until the link is gone.
pub async fn supervise(iii: IIIClient, shared: Arc<Shared>) {
    let mut newest = shared.link.subscribe();
    loop {
        let connection = *newest.borrow_and_update();
        if connection > 0 {
            let run = Run {
                iii: iii.clone(),
                shared: shared.clone(),
                connection,
                no_configuration_worker: AtomicBool::new(false),
            };
            tokio::select! {
                () = run.all() => {}
                changed = newest.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    shared.setup.record().interrupted(connection);
                    tracing::warn!(connection, "setup interrupted by a newer connection; starting over");
                    continue;
                }
            }
        }
        if newest.changed().await.is_err() {
            return;
        }
    }
}

impl Run {
    async fn all(&self) {
        let setup = &self.shared.setup;
        setup.record().started(self.connection);
        tracing::info!(
            connection = self.connection,
            "engine connection: setting up"
        );
        let mut failed = 0;
        for step in STEPS {
            let started = Instant::now();
            let outcome = (step.run)(self).await;
            let took = started.elapsed();
            log(self.connection, step.name, &outcome, took);
            failed += usize::from(matches!(outcome, Outcome::Failed(_)));
            setup
                .record()
                .step(self.connection, step.name, outcome, took);
        }
        let took = setup.record().finished(self.connection);
        tracing::info!(
            connection = self.connection,
            failed,
            duration_ms = took.as_millis() as u64,
            "engine connection set up"
        );
    }

    fn directory_settings(&self) -> crate::config::Settings {
        self.shared.directory.settings()
    }
}

fn log(connection: u64, step: &str, outcome: &Outcome, took: Duration) {
    let duration_ms = took.as_millis() as u64;
    let (name, detail) = (outcome.name(), outcome.detail());
    match outcome {
        Outcome::Failed(_) => {
            tracing::warn!(
                connection,
                step,
                outcome = name,
                duration_ms,
                "setup step: {detail}"
            )
        }
        Outcome::Done(_) => {
            tracing::info!(
                connection,
                step,
                outcome = name,
                duration_ms,
                "setup step: {detail}"
            )
        }
        Outcome::Replayed(_) | Outcome::Skipped(_) => {
            tracing::debug!(
                connection,
                step,
                outcome = name,
                duration_ms,
                "setup step: {detail}"
            )
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The steps
// ---------------------------------------------------------------------------------------------

fn caches(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        if run.connection == 1 {
            return Outcome::Skipped("first connection: nothing cached yet".into());
        }
        run.shared.installed.clear();
        run.shared.registry.clear_cache();
        Outcome::Done("installed workers and registry answers forgotten".into())
    })
}

fn configuration_register(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        let setup = &run.shared.setup;
        let seed = locks::lock(&setup.seed).clone();
        let initial = seed
            .clone()
            .unwrap_or_else(|| run.directory_settings().to_json());
        match configuration::register(&run.iii, initial).await {
            Registration::Registered { offered_initial } => {
                locks::lock(&setup.seed).take();
                Outcome::Done(
                    match (offered_initial, seed.is_some()) {
                        (true, true) => "registered with the --config seed as initial value",
                        (true, false) => "registered with the current settings as initial value",
                        (false, _) => "registered (a value is stored)",
                    }
                    .into(),
                )
            }
            Registration::NoConfigurationWorker => {
                run.no_configuration_worker.store(true, Ordering::SeqCst);
                Outcome::Skipped("no configuration worker; the seed or defaults apply".into())
            }
            Registration::Failed(e) => Outcome::Failed(e),
        }
    })
}

fn configuration_read(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        if run.no_configuration_worker.load(Ordering::SeqCst) {
            return Outcome::Skipped("no configuration worker".into());
        }
        let shared = &run.shared;
        match configuration::refresh(
            &run.iii,
            &shared.directory,
            &shared.installed,
            &shared.registry,
            &shared.refusals,
        )
        .await
        {
            ApplyResult::Applied => Outcome::Done("stored configuration applied".into()),
            ApplyResult::RestartRequired(fields) => Outcome::Failed(format!(
                "restart required: {} changed; the previous configuration is kept",
                fields.join(", ")
            )),
            ApplyResult::Rejected(e) => {
                Outcome::Failed(format!("stored configuration rejected: {e}"))
            }
            ApplyResult::NotRead(e) => Outcome::Failed(format!("configuration::get: {e}")),
        }
    })
}

fn configuration_bind(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        if run.no_configuration_worker.load(Ordering::SeqCst) {
            return Outcome::Skipped("no configuration worker".into());
        }
        let iii = &run.iii;
        run.shared
            .setup
            .once("configuration.bind", "configuration:updated", || async {
                iii.register_trigger(configuration::binding()).map(drop)
            })
            .await
    })
}

fn downloads_bind(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        if !run.directory_settings().auto_download {
            return Outcome::Skipped("auto_download is off".into());
        }
        let iii = &run.iii;
        run.shared
            .setup
            .once("downloads.bind", "worker adds", || {
                downloads::bind_worker_added(iii)
            })
            .await
    })
}

fn downloads_reconcile(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        if !run.directory_settings().auto_download {
            return Outcome::Skipped("auto_download is off".into());
        }
        let running = run.shared.setup.reconcile_running.clone();
        if running.swap(true, Ordering::SeqCst) {
            return Outcome::Skipped("a reconcile is already running".into());
        }
        let (iii, shared) = (run.iii.clone(), run.shared.clone());
        // Downloads take long; setup does not wait for them.
        tokio::spawn(async move {
            downloads::boot_reconcile(&iii, &shared).await;
            running.store(false, Ordering::SeqCst);
        });
        Outcome::Done("worker skills reconcile started in the background".into())
    })
}

/// What the `search.follow` step binds, as its status names it.
const FOLLOWED_PUSHES: &str = "engine::functions-available and engine::workers-available";

fn search_follow(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        let iii = &run.iii;
        run.shared
            .setup
            .once("search.follow", FOLLOWED_PUSHES, || async {
                search::follow_bindings()
                    .into_iter()
                    .try_for_each(|binding| iii.register_trigger(binding).map(drop))
            })
            .await
    })
}

fn search_catalog(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        match search::refresh_catalog(&run.iii, &run.shared.search, Reuse::Nothing).await {
            Ok(detail) => Outcome::Done(detail),
            Err(e) => Outcome::Failed(e.to_string()),
        }
    })
}

fn search_hint(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        let inject_hint = run.directory_settings().inject_hint;
        match search::reconcile_hint(&run.iii, &run.shared.search, inject_hint) {
            HintBinding::Bound => Outcome::Done("hint hook bound".into()),
            HintBinding::Kept => Outcome::Replayed("hint hook: replayed by the SDK".into()),
            HintBinding::Unbound => Outcome::Done("hint hook unbound (inject_hint is off)".into()),
            HintBinding::Off => Outcome::Skipped("inject_hint is off".into()),
            HintBinding::Failed => Outcome::Failed("cannot bind the hint hook".into()),
        }
    })
}

fn console_assets(run: &Run) -> StepFuture<'_> {
    Box::pin(async move {
        let iii = &run.iii;
        run.shared
            .setup
            .once("console.assets", "console assets", || async {
                match console::register(iii) {
                    0 => Err("no asset could be announced".to_string()),
                    _ => Ok(()),
                }
            })
            .await
    })
}

// ---------------------------------------------------------------------------------------------
// The record
// ---------------------------------------------------------------------------------------------

#[derive(Default, Clone, Copy)]
struct Counts {
    done: u64,
    replayed: u64,
    skipped: u64,
    failed: u64,
}

struct StepRecord {
    outcome: Outcome,
    duration: Duration,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RunState {
    Running,
    Done,
    Interrupted,
}

struct LatestRun {
    connection: u64,
    state: RunState,
    started_at: Stamp,
    started: Instant,
    finished: Option<(Stamp, Duration)>,
    steps: BTreeMap<&'static str, StepRecord>,
}

#[derive(Default)]
struct Record {
    runs: u64,
    latest: Option<LatestRun>,
    counts: BTreeMap<&'static str, Counts>,
}

impl Record {
    fn started(&mut self, connection: u64) {
        self.runs += 1;
        self.latest = Some(LatestRun {
            connection,
            state: RunState::Running,
            started_at: Stamp::now(),
            started: Instant::now(),
            finished: None,
            steps: BTreeMap::new(),
        });
    }

    fn step(&mut self, connection: u64, name: &'static str, outcome: Outcome, duration: Duration) {
        let counts = self.counts.entry(name).or_default();
        match outcome {
            Outcome::Done(_) => counts.done += 1,
            Outcome::Replayed(_) => counts.replayed += 1,
            Outcome::Skipped(_) => counts.skipped += 1,
            Outcome::Failed(_) => counts.failed += 1,
        }
        if let Some(latest) = self.latest.as_mut().filter(|l| l.connection == connection) {
            latest.steps.insert(name, StepRecord { outcome, duration });
        }
    }

    /// Marks the run finished; returns how long it took.
    fn finished(&mut self, connection: u64) -> Duration {
        match self.latest.as_mut().filter(|l| l.connection == connection) {
            Some(latest) => {
                let took = latest.started.elapsed();
                latest.state = RunState::Done;
                latest.finished = Some((Stamp::now(), took));
                took
            }
            None => Duration::ZERO,
        }
    }

    fn interrupted(&mut self, connection: u64) {
        if let Some(latest) = self.latest.as_mut().filter(|l| l.connection == connection) {
            latest.state = RunState::Interrupted;
        }
    }

    fn status(&self) -> Value {
        let latest = self.latest.as_ref();
        let steps: Vec<Value> = STEPS
            .iter()
            .map(|step| {
                let last = latest.and_then(|l| l.steps.get(step.name));
                let counts = self.counts.get(step.name).copied().unwrap_or_default();
                json!({
                    "name": step.name,
                    "outcome": last.map(|s| s.outcome.name()),
                    "detail": last.map(|s| s.outcome.detail()),
                    "duration_ms": last.map(|s| s.duration.as_millis() as u64),
                    "counts": {
                        "done": counts.done,
                        "replayed": counts.replayed,
                        "skipped": counts.skipped,
                        "failed": counts.failed,
                    },
                })
            })
            .collect();
        json!({
            "runs": self.runs,
            "connection": latest.map(|l| l.connection),
            "state": match latest.map(|l| l.state) {
                None => "pending",
                Some(RunState::Running) => "running",
                Some(RunState::Done) => "done",
                Some(RunState::Interrupted) => "interrupted",
            },
            "started_at": latest.map(|l| l.started_at.rfc3339()),
            "finished_at": latest.and_then(|l| l.finished).map(|(at, _)| at.rfc3339()),
            "duration_ms": latest.and_then(|l| l.finished).map(|(_, took)| took.as_millis() as u64),
            "steps": steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_are_unique_and_the_configuration_comes_first() {
        let names: Vec<&str> = STEPS.iter().map(|s| s.name).collect();
        let unique: HashSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        let at = |name: &str| names.iter().position(|n| *n == name).expect(name);
        assert!(at("configuration.register") < at("configuration.read"));
        assert!(at("configuration.read") < at("configuration.bind"));
        assert!(at("configuration.bind") < at("downloads.bind"));
        // The hint follows the stored configuration just read.
        assert!(at("configuration.read") < at("search.hint"));
    }

    #[test]
    fn the_record_counts_every_outcome_and_shows_the_latest_run() {
        let mut record = Record::default();
        assert_eq!(record.status()["state"], "pending");
        record.started(1);
        record.step(
            1,
            "caches",
            Outcome::Skipped("first".into()),
            Duration::ZERO,
        );
        record.step(
            1,
            "configuration.bind",
            Outcome::Done("bound".into()),
            Duration::from_millis(2),
        );
        record.finished(1);
        record.started(2);
        record.step(
            2,
            "configuration.bind",
            Outcome::Replayed("replayed".into()),
            Duration::ZERO,
        );
        record.interrupted(2);
        let status = record.status();
        assert_eq!(status["runs"], 2);
        assert_eq!(status["connection"], 2);
        assert_eq!(status["state"], "interrupted");
        let bind = status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "configuration.bind")
            .unwrap();
        assert_eq!(bind["outcome"], "replayed");
        assert_eq!(bind["counts"]["done"], 1);
        assert_eq!(bind["counts"]["replayed"], 1);
        let caches = status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "caches")
            .unwrap();
        assert_eq!(
            caches["outcome"],
            Value::Null,
            "not run on connection 2 yet"
        );
        assert_eq!(caches["counts"]["skipped"], 1);
    }
}
