//! The iii worker: a thin adapter that puts the library on the engine bus. It maps each
//! `directory::*` function id to a [`Directory`] call, registers the `on-change` trigger types
//! and fans change events out to their subscribers, and follows the configuration worker.
//!
//! Architecture invariant: no directory logic lives here; handlers never block the SDK's
//! connection thread (library work runs on the blocking pool).

mod configuration;
mod connection;
mod console;
mod downloads;
mod engine;
mod error;
pub mod local;
mod model;
mod offline;
pub mod screen;
mod search;
mod setup;
mod subscriptions;
pub mod surface;
mod trim;
mod watchdog;
mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use iii_sdk::runtime::{IIIConnectionState, WorkerMetadata};
use iii_sdk::{IIIClient, InitOptions, RegisterFunction, RegisterTriggerType};
use serde_json::{Value, json};

use crate::answer::Answer;
use crate::config::Config;
use crate::directory::{Directory, InstalledNeed, LibraryFunction, ReadFunction, WriteFunction};
use crate::events::{ChangeEvent, Family};
use crate::index::OpenError;
use crate::registry::{Endpoint, Registry};
use crate::watch::{WatchOptions, Watcher};
use engine::Installed;
use error::Refusal;
use subscriptions::{Provider, Subscriptions};
use surface::{Deadline, FamilyType, Handler, OnChange, family};

pub use connection::layer as connection_layer;
pub use error::{ServeError, WorkerError};
pub use search::{BusSearchError, SKILLS_PER_CAPABILITY, search_over_bus};

/// The worker's name on the bus (contract).
pub const WORKER_NAME: &str = "iii-directory";
/// How long to wait for the engine before saying so.
const CONNECT_NOTICE_AFTER: Duration = Duration::from_secs(2);
/// How long boot waits for the engine to ask for a stored configuration.
const STORED_CONFIG_WAIT: Duration = Duration::from_millis(1500);

/// What `serve` needs.
pub struct ServeOptions {
    pub url: String,
    pub config: Config,
    /// The `--config` seed as JSON, offered as the configuration entry's initial value.
    pub seed: Option<Value>,
    /// What reading the seed warned of (numbers brought into range, unknown keys): kept for
    /// `index::status` while the seed is what the worker serves.
    pub seed_warnings: Vec<String>,
}

/// Everything a handler needs, shared.
struct Shared {
    directory: Arc<Directory>,
    watcher: Watcher,
    installed: Installed,
    search: Arc<search::SearchState>,
    /// The workers registry client and its cache, read live from the directory's settings;
    /// downloads, the registry proxy and function search share it.
    registry: Arc<Registry>,
    /// Workers whose skills are being auto-downloaded.
    in_flight: downloads::InFlight,
    /// The connection to the engine: each (re)connection, the last error.
    link: Arc<connection::Link>,
    /// What is set up on each connection (`setup.rs`), and how it went.
    setup: setup::Setup,
    trimmer: Arc<trim::Trimmer>,
    /// Configuration values refused (at boot or live), for the log and `index::status`.
    refusals: Arc<configuration::Refusals>,
}

/// What a handler of the worker's own functions is given: the engine and the shared state.
#[derive(Clone)]
struct Call {
    iii: IIIClient,
    shared: Arc<Shared>,
}

/// Runs the worker until SIGTERM or Ctrl-C.
pub fn serve(options: ServeOptions) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("iii-directory")
        .build()
        .map_err(ServeError::Runtime)?;
    // Before connecting, so that the first connection is seen too.
    let link = connection::Link::watch(&options.url);
    let iii = connect(&options.url);
    if !connection::layer_installed() {
        tracing::warn!(
            "the connection layer (iii_directory::worker::connection_layer) is not installed: \
             a drop shorter than the SDK's 2 s retry goes unnoticed and is not set up again"
        );
    }
    runtime.spawn(connection::poll(iii.clone(), link.clone()));
    // A configuration stored in the engine decides the folders too, but only at boot: ask for
    // it briefly before opening the index, and go on with the seed if the engine is not there.
    // A stored value that is unsafe (a root at `/`, an index path on someone's file) leaves the
    // worker on the seed, with the refusal in `index::status`: it never stops the worker.
    let refusals = Arc::new(configuration::Refusals::default());
    let stored = runtime.block_on(configuration::stored(&iii, STORED_CONFIG_WAIT));
    let (config, from_store) = configuration::boot_config(stored, &options.config, &refusals);
    let busy = |index_path: &std::path::Path| ServeError::Busy {
        path: index_path.to_path_buf(),
        holder: crate::index::holder::read(index_path).map(|holder| holder.describe()),
    };
    let (directory, on_seed) = match Directory::open(config.clone()) {
        Ok(directory) => (directory, !from_store),
        Err(OpenError::Busy(_)) => return Err(busy(&config.paths.index_path)),
        Err(e) if from_store => {
            let seed = Directory::open(options.config.clone()).map_err(|e| match e {
                OpenError::Busy(_) => busy(&options.config.paths.index_path),
                other => ServeError::Open(other),
            })?;
            // Said once the seed is known to open: a seed that fails too stops the worker with
            // its own error, not after a line saying it is served.
            refusals.refused_at_boot(e);
            (seed, true)
        }
        Err(e) => return Err(ServeError::Open(e)),
    };
    say_which_configuration(&options, &config, on_seed, &refusals);
    let directory = Arc::new(directory);
    // Watch first, then reconcile: a change made while the boot reconcile runs is either seen by
    // it or heard by the watcher. The other way round, one made between the two would wait for
    // the safety net.
    let watcher = Watcher::start(directory.clone(), WatchOptions::default());
    let report = directory.reconcile().map_err(ServeError::Reconcile)?;
    // The commands beside the worker have waited for this (`sync_cookie`).
    directory.note_rows_complete();
    tracing::info!(
        files = report.files,
        read = report.read,
        skipped = report.skipped,
        duration_ms = report.duration_ms,
        "index reconciled at boot"
    );
    let live = directory.clone();
    let registry = Arc::new(Registry::new(move || {
        Endpoint::from_settings(&live.settings())
    }));
    let shared = Arc::new(Shared {
        directory,
        watcher,
        installed: Installed::default(),
        search: Arc::new(search::SearchState::new(
            runtime.handle().clone(),
            Some(registry.clone()),
        )),
        registry,
        in_flight: downloads::InFlight::default(),
        link,
        setup: setup::Setup::new(options.seed),
        trimmer: Arc::default(),
        refusals,
    });

    register(&iii, &shared, runtime.handle().clone());
    // In the background: lexical answers are served meanwhile.
    shared.directory.start_background();
    model::start(
        shared.directory.clone(),
        shared.search.clone(),
        runtime.handle(),
    );
    let outcome = runtime.block_on(async {
        let refused = tokio::spawn(watch_connection(iii.clone(), options.url.clone()));
        // Everything the worker sets up on the engine, on this connection and every later one.
        tokio::spawn(setup::supervise(iii.clone(), shared.clone()));
        tokio::spawn(search::recheck_catalog(iii.clone(), shared.search.clone()));
        tokio::select! {
            _ = shutdown_signal() => Ok(()),
            refusal = refused => Err(refusal.map_or_else(ServeError::Watch, ServeError::Refused)),
        }
    });
    tracing::info!("shutting down");
    shared.watcher.release_sync_folder();
    shared.search.stop();
    iii.shutdown();
    // A task on the blocking threads that does not end within this (no write does: each is
    // short) is left to the process's exit rather than holding a supervisor's stop.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    // The SDK's handlers and the watcher still share the directory, so it is never dropped:
    // close the index explicitly, or the next start verifies every page of it.
    shared.directory.close();
    outcome
}

/// How long the shutdown waits for tasks in progress on the runtime's blocking threads.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Keeps the seed's warnings for the status while the seed is served, and says when a `--config`
/// file differs from the stored configuration the worker serves instead (its values seed the
/// entry only when none is stored, which nothing else would tell its author).
fn say_which_configuration(
    options: &ServeOptions,
    served: &Config,
    on_seed: bool,
    refusals: &configuration::Refusals,
) {
    if on_seed {
        let from = if options.seed.is_some() {
            "--config seed"
        } else {
            "configuration"
        };
        for warning in &options.seed_warnings {
            refusals.keep(format!("{from}: {warning}"));
        }
    } else if options
        .seed
        .as_ref()
        .is_some_and(|seed| *seed != served.settings.to_json())
    {
        tracing::info!(
            "serving the configuration stored in the engine, which differs from the --config \
             file: the file only seeds the entry when none is stored (see it with `iii trigger \
             configuration::get id=iii-directory`, change it with `configuration::set`)"
        );
    }
}

fn connect(url: &str) -> IIIClient {
    let metadata = WorkerMetadata {
        name: WORKER_NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        description: Some(
            "Skills, system prompts and agent profiles served from folders on disk".into(),
        ),
        ..WorkerMetadata::default()
    };
    iii_sdk::register_worker(
        url,
        InitOptions {
            metadata: Some(metadata),
            ..InitOptions::default()
        },
    )
}

/// Says once, clearly, when the engine is not there, and when it is. Returns (and the worker
/// stops) only when the engine refused this worker for good: the SDK does not reconnect after a
/// rejection, so carrying on would serve nothing.
async fn watch_connection(iii: IIIClient, url: String) -> Refusal {
    let notice_at = tokio::time::Instant::now() + CONNECT_NOTICE_AFTER;
    loop {
        if let Some(refusal) = refusal(&iii, &url) {
            return refusal;
        }
        if tokio::time::Instant::now() >= notice_at {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut connected = iii.get_connection_state() == IIIConnectionState::Connected;
    if connected {
        tracing::info!(%url, "connected to the iii engine");
    } else {
        tracing::warn!(
            %url,
            "waiting for the iii engine (start it, or point --url / III_URL at it); reads from the index keep working meanwhile"
        );
    }
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Some(refusal) = refusal(&iii, &url) {
            return refusal;
        }
        let now = iii.get_connection_state() == IIIConnectionState::Connected;
        if now != connected {
            if now {
                tracing::info!(%url, "connected to the iii engine");
            } else {
                tracing::warn!(%url, "lost the iii engine; reconnecting");
            }
            connected = now;
        }
    }
}

/// What to tell the operator when the engine rejected this worker for good.
fn refusal(iii: &IIIClient, url: &str) -> Option<Refusal> {
    let url = url.to_string();
    match iii.fatal_error()? {
        iii_sdk::Error::RegistrationRejected { code, .. }
            if code == "WORKER_NAMESPACE_CONFLICT" =>
        {
            Some(Refusal::NamespaceConflict { url })
        }
        source => Some(Refusal::Rejected {
            url,
            source: Box::new(source),
        }),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Registers the trigger types, the event fan-out and every function.
fn register(iii: &IIIClient, shared: &Arc<Shared>, runtime: tokio::runtime::Handle) {
    let subscriptions = Arc::new(Subscriptions::default());
    // The engine forgets a provider's bindings with its connection and forwards the live ones
    // again on the next: the set is emptied in between.
    let forget = subscriptions.clone();
    shared.link.on_reset(move || forget.forget_all());
    for (family, description, _) in surface::trigger_types() {
        let provider = Provider {
            family,
            subscriptions: subscriptions.clone(),
        };
        match family {
            Family::Skills => register_trigger_type::<family::Skills>(iii, description, provider),
            Family::SystemPrompts => {
                register_trigger_type::<family::SystemPrompts>(iii, description, provider)
            }
            Family::Agents => register_trigger_type::<family::Agents>(iii, description, provider),
        }
    }
    let fan_out_iii = iii.clone();
    shared
        .directory
        .subscribe(Arc::new(move |event: &ChangeEvent| {
            subscriptions.fan_out(&fan_out_iii, &runtime, event);
        }));
    for function in surface::functions() {
        let (id, deadline, handler) = (function.id, function.deadline, function.handler);
        let metadata = function.metadata();
        let call = Call {
            iii: iii.clone(),
            shared: shared.clone(),
        };
        let mut registration = RegisterFunction::new_async(move |input: Value| {
            let call = call.clone();
            let at_once = idle_poll(&call, id, handler, &input);
            async move {
                match at_once {
                    Some(answer) => answer.map_err(wire_error),
                    // Boxed: the SDK boxes the future this closure returns, which so stays
                    // small (see `idle_poll`).
                    None => Box::pin(answer_call(call, id, deadline, handler, input)).await,
                }
            }
        })
        .description(function.description)
        .request_format(function.request)
        .response_format(function.response);
        if let Some(metadata) = metadata {
            registration = registration.metadata(metadata);
        }
        iii.register_function(function.id, registration);
    }
}

/// Answers one call, within its deadline (`watchdog.rs`), its answer measured for the wire.
async fn answer_call(
    call: Call,
    id: &'static str,
    deadline: Deadline,
    handler: Handler,
    input: Value,
) -> Result<Answer, iii_sdk::Error> {
    let work = async {
        let started = Instant::now();
        screen::screen(id, &input)?;
        let shared = call.shared.clone();
        let answer = handle(call, handler, input).await?;
        let answer = deliverable(&shared, id, answer).await;
        // From the SDK's dispatch of the frame to the answer handed back to it: a `get` right
        // after a whole `list` spends 3 to 6 ms here at 50,000 skills (issue 31), against 0.3
        // ms alone. `debug` level.
        tracing::debug!(
            function = id,
            handler_us = started.elapsed().as_micros() as u64,
            "call answered"
        );
        answer
    };
    watchdog::answered(id, deadline, work)
        .await
        .map_err(wire_error)
}

/// A UI's idle poll (a `list` whose caller holds the current revision) answered as its frame
/// is read, before any future is built for the call; `None` for every other call, and for a
/// poll that needs the installed workers fetched again. The future of a whole call is about
/// 3 KiB, and glibc hands out a block that large only after merging every small block freed
/// since, of which the SDK frees a few hundred per call (its copy of the function's
/// registration); that merge, the deadline's timer and the larger task were a third of what
/// this worker added to such a poll's time over the SDK's own (issue 15).
fn idle_poll(
    call: &Call,
    id: &str,
    handler: Handler,
    input: &Value,
) -> Option<Result<Answer, WorkerError>> {
    let Handler::Library(LibraryFunction::Read(function)) = handler else {
        return None;
    };
    // Only a list is ever unchanged: any other read is screened once, by the whole call.
    function.listed_table()?;
    let shared = &call.shared;
    let installed = match function.installed() {
        InstalledNeed::Never => None,
        InstalledNeed::Cached => shared.installed.held(installed_ttl(shared))?,
        InstalledNeed::Fresh => return None,
    };
    let started = Instant::now();
    let answer = watchdog::answered_at_once(id, || {
        // A request the screen refuses is refused by the whole call, with its reason.
        screen::screen(id, input).ok()?;
        let answer = shared
            .directory
            .read_if_unchanged(function, input, installed.as_deref())?;
        Some(answer.map_err(WorkerError::from))
    })?;
    // Its answer is a few dozen bytes, always within the wire's limit.
    tracing::debug!(
        function = id,
        handler_us = started.elapsed().as_micros() as u64,
        "idle poll answered"
    );
    Some(answer)
}

/// Registers family `F`'s trigger type, its payload schema from [`OnChange`].
fn register_trigger_type<F: FamilyType>(
    iii: &IIIClient,
    description: &'static str,
    provider: Provider,
) {
    let trigger_type = RegisterTriggerType::new(F::FAMILY.trigger_type(), description, provider);
    iii.register_trigger_type(trigger_type.call_request_format::<OnChange<F>>());
}

/// The SDK asks each handler's answer type for a schema; every function's own, from the
/// function table (`response_format`), replaces it at registration.
impl schemars::JsonSchema for Answer {
    fn schema_name() -> String {
        "Answer".into()
    }

    fn json_schema(_: &mut schemars::r#gen::SchemaGenerator) -> schemars::schema::Schema {
        schemars::schema::Schema::Bool(true)
    }
}

/// A handler's error as it goes on the wire: the code and message the original worker's
/// callers read (`invocation_failed`, `handler error: D110 not_found: …`), without a stacktrace.
/// The SDK attaches a freshly captured and symbolized backtrace to any error that has none
/// (for its trace span too), which costs milliseconds and megabytes per error and shows the
/// build machine's paths; an empty one is handed over instead. The message is measured like
/// an answer, and cut to what always fits the engine's frame (`wire::bounded_error`), whatever
/// built it.
fn wire_error(error: WorkerError) -> iii_sdk::Error {
    iii_sdk::Error::Remote {
        code: "invocation_failed".into(),
        message: wire::bounded_error(format!("handler error: {error}")),
        stacktrace: Some(String::new()),
    }
}

/// `answer` if the engine can carry it (`wire.rs`), measured before the SDK builds any of it; a
/// large one is built on trimmed arenas, and trims again once it is gone (`trim.rs`).
async fn deliverable(
    shared: &Shared,
    function: &str,
    answer: Answer,
) -> Result<Answer, WorkerError> {
    let len = answer.json_len();
    wire::check(function, len)?;
    if len >= trim::LARGE_ANSWER_BYTES {
        trim::Trimmer::before_large_answer().await;
        shared.trimmer.trim_soon();
    }
    Ok(answer)
}

/// Answers one call. Library work runs on the blocking pool, never on the SDK's thread.
async fn handle(call: Call, handler: Handler, input: Value) -> Result<Answer, WorkerError> {
    match handler {
        Handler::Library(LibraryFunction::Read(function)) => read(&call, function, input).await,
        Handler::Library(LibraryFunction::Write(function)) => write(&call, function, input).await,
        Handler::Directory(work) => {
            blocking(&call.shared, move |shared| work(&shared.directory, &input))
                .await
                .map(Answer::Value)
        }
        Handler::Worker { run, .. } => run(call, input).await.map(Answer::Value),
    }
}

/// Answers a write function on the blocking pool.
async fn write(call: &Call, function: WriteFunction, input: Value) -> Result<Answer, WorkerError> {
    let started = Instant::now();
    let installed = installed_workers(&call.iii, &call.shared, false).await;
    // Where a write's time goes between the SDK and the library: `debug` level.
    let hop = Instant::now();
    let answer = blocking(&call.shared, move |shared| {
        let waited = hop.elapsed();
        let answer = shared
            .directory
            .write(function, &input, installed.as_deref());
        tracing::debug!(
            function = function.id(),
            hop_us = waited.as_micros() as u64,
            library_us = (hop.elapsed() - waited).as_micros() as u64,
            "write handled"
        );
        answer
    })
    .await;
    tracing::debug!(
        installed_us = hop.duration_since(started).as_micros() as u64,
        handler_us = started.elapsed().as_micros() as u64,
        "write answered"
    );
    answer.map(Answer::Value)
}

/// `directory::index::status`: the library's status with the worker's own parts (the file
/// watcher, the engine connection, the refused configuration values, the search mode).
async fn status(call: Call, _: Value) -> Result<Value, WorkerError> {
    let connection = setup::status(&call.iii, &call.shared);
    blocking(&call.shared, move |shared| {
        shared.directory.status().map(|mut status| {
            status["watcher"] = json!(shared.watcher.status());
            status["connection"] = connection;
            status["configuration"] = shared.refusals.status();
            match shared.directory.search_status() {
                Ok(search) => status["search"] = search,
                Err(e) => tracing::warn!("cannot tell the search model's state: {e}"),
            }
            status
        })
    })
    .await
}

/// Answers a read function: the idle poll of a UI (nothing changed) right here, anything else
/// on the blocking pool.
async fn read(call: &Call, function: ReadFunction, input: Value) -> Result<Answer, WorkerError> {
    let (iii, shared) = (&call.iii, &call.shared);
    let installed = match function.installed() {
        InstalledNeed::Fresh => installed_workers(iii, shared, true).await,
        InstalledNeed::Cached => installed_workers(iii, shared, false).await,
        InstalledNeed::Never => None,
    };
    // Without the hop to the blocking pool.
    let unchanged = shared
        .directory
        .read_if_unchanged(function, &input, installed.as_deref());
    if let Some(answer) = unchanged {
        return Ok(answer?);
    }
    blocking(shared, move |shared| {
        shared
            .directory
            .read_answer(function, &input, installed.as_deref())
    })
    .await
}

/// The installed workers for `filter_unregistered`, kept for `registry_cache_ttl_ms`.
async fn installed_workers(
    iii: &IIIClient,
    shared: &Shared,
    fresh: bool,
) -> Option<Arc<std::collections::BTreeSet<String>>> {
    shared
        .installed
        .get(iii, installed_ttl(shared), fresh)
        .await
}

/// How long a fetched set of installed workers is used (`registry_cache_ttl_ms`).
fn installed_ttl(shared: &Shared) -> Duration {
    Duration::from_millis(shared.directory.setting(|s| s.registry_cache_ttl_ms))
}

/// Runs library work on the blocking pool.
async fn blocking<T: Send + 'static>(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Shared) -> crate::error::Result<T> + Send + 'static,
) -> Result<T, WorkerError> {
    let shared = shared.clone();
    Ok(tokio::task::spawn_blocking(move || work(&shared))
        .await
        .map_err(WorkerError::task("handler failed"))??)
}
