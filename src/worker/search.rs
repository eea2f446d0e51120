//! Function search on the bus: the handlers of `directory::search_functions`,
//! `directory::on-functions-change`, `directory::pre-generate` and `directory::hint-preview`,
//! and their bindings: the catalog refreshed on `engine::functions-available`, and the
//! pre-generate hook bound to `harness::hook::pre-generate` only while `inject_hint` is on.
//! `setup.rs` makes the bindings and fetches the catalog on each (re)connection.
//!
//! The caller's session id for search memory is the OTel baggage entry `iii.session.id` of the
//! incoming call. The SDK does not hand a handler the call's `baggage`, but it runs the handler
//! future inside the OpenTelemetry context it extracted from it, so the entry is read from the
//! current context, at the start of the handler, before anything moves to another task.
//!
//! Search and refreshes run on the worker's own runtime, never on the SDK's connection thread.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iii_sdk::IIIClient;
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::trigger::Trigger;
use serde_json::{Value, json};

use super::error::WorkerError;
use super::surface::{ON_FUNCTIONS_CHANGE, PRE_GENERATE};
use super::{Call, blocking, installed_workers};
use crate::error::Error;
use crate::locks;
use crate::search::registry::{DEFAULT_PHASE_WAIT, WorkerSource};
use crate::search::service::{Engine, Refresh, Reuse};
use crate::search::session::{self, Split};
use crate::search::vectors::FunctionLane;
use crate::search::{EngineError, FunctionSearch, RegistrySearch, SESSION_BAGGAGE_KEY, hint};

/// The engine's push when its functions change (contract). The engine fires it when the set
/// of function ids changed since its last look (every 5 s), so a function registered again
/// with another description, or a worker redeployed within those 5 s, fires nothing.
pub const FUNCTIONS_AVAILABLE: &str = "engine::functions-available";
/// The engine's push when a worker connects, finishes registering or disconnects: the catalog
/// is fetched again then too, which catches a redeployed worker's new descriptions at once.
pub const WORKERS_AVAILABLE: &str = "engine::workers-available";
/// How often the catalog is fetched again while connected, for what neither push reports (a
/// function registered again on the same connection with a new description or schema): the
/// environment's `III_DIRECTORY_CATALOG_RECHECK_MS` (milliseconds; `0` turns it off), else
/// [`DEFAULT_RECHECK`]. An unchanged catalog costs the fetch and nothing else.
pub const RECHECK_ENV: &str = "III_DIRECTORY_CATALOG_RECHECK_MS";
/// See [`RECHECK_ENV`].
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(60);
/// The harness hook the hint rides on (contract).
pub const PRE_GENERATE_HOOK: &str = "harness::hook::pre-generate";

/// The hook binding's config (contract).
pub fn pre_generate_binding() -> Value {
    json!({ "priority": 100, "timeout_ms": 5000, "on_error": "fail_open" })
}

/// Search state of the worker.
pub struct SearchState {
    search: Arc<FunctionSearch>,
    /// The registry client for `installable`; `None` leaves registry search off whatever
    /// `registry_search` says.
    registry: Option<Arc<dyn WorkerSource>>,
    /// The pre-generate hook binding, while `inject_hint` is on.
    hint_binding: Mutex<Option<Trigger>>,
    runtime: tokio::runtime::Handle,
    /// The dense lane of function search, once the model is loaded.
    lane: Mutex<Option<Arc<FunctionLane>>>,
    /// The worker is shutting down: a lane connected from now on is stopped at once.
    stopping: std::sync::atomic::AtomicBool,
    /// The skills each session's `search_functions` answers named (the side lane), so that a
    /// later answer names only new ones, as it does functions.
    named_skills: Mutex<session::Memory>,
}

impl SearchState {
    pub fn new(
        runtime: tokio::runtime::Handle,
        registry: Option<Arc<dyn WorkerSource>>,
    ) -> SearchState {
        SearchState {
            search: Arc::new(FunctionSearch::new()),
            registry,
            hint_binding: Mutex::new(None),
            runtime,
            lane: Mutex::new(None),
            stopping: std::sync::atomic::AtomicBool::new(false),
            named_skills: Mutex::default(),
        }
    }

    /// Stops the function lane's embedding (at its next chunk) as the worker shuts down.
    pub fn stop(&self) {
        let lane = locks::lock(&self.lane);
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(lane) = lane.as_ref() {
            lane.stop();
        }
    }

    /// Connects the function lane (the model is loaded): searches fuse it in from now on,
    /// with the vectors of the catalog embedded in the background, and of every catalog
    /// swapped in after it (`CatalogService::changes`), until the worker stops.
    pub async fn connect_lane(self: &Arc<Self>, lane: Arc<FunctionLane>) {
        {
            let mut connected = locks::lock(&self.lane);
            if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
                lane.stop();
            }
            *connected = Some(lane.clone());
        }
        self.search.set_dense(lane);
        let mut changes = self.search.catalog().changes();
        let state = self.clone();
        self.runtime.spawn(async move {
            loop {
                // Marked seen before the pass: a catalog swapped in during it starts another.
                changes.borrow_and_update();
                state.embed_catalog().await;
                let stopping = || state.stopping.load(std::sync::atomic::Ordering::SeqCst);
                if stopping() || changes.changed().await.is_err() || stopping() {
                    return;
                }
            }
        });
    }

    /// Embeds the texts of the current catalog's functions that the lane has not seen, off
    /// the runtime's threads (`FunctionLane::follow`: the catalog current once the lane is
    /// free, and any newer one that arrives meanwhile).
    async fn embed_catalog(&self) {
        let Some(lane) = locks::lock(&self.lane).clone() else {
            return;
        };
        let search = self.search.clone();
        let started = std::time::Instant::now();
        let current = move || search.catalog().current();
        match tokio::task::spawn_blocking(move || lane.follow(current)).await {
            Ok(0) => {}
            Ok(embedded) => tracing::info!(
                embedded,
                ms = started.elapsed().as_millis() as u64,
                "function search texts embedded"
            ),
            Err(e) => tracing::warn!("embedding the function catalog stopped: {e}"),
        }
    }
}

/// The engine, for the catalog refresher.
struct Bus(IIIClient);

#[async_trait]
impl Engine for Bus {
    async fn call(
        &self,
        function_id: &str,
        payload: Value,
        timeout: Duration,
    ) -> Result<Value, EngineError> {
        super::engine::call(&self.0, function_id, payload, timeout)
            .await
            .map_err(EngineError::from)
    }
}

/// The caller's session id, from the baggage of the call being handled.
fn session_id() -> Option<String> {
    iii_helpers::observability::get_baggage_entry(SESSION_BAGGAGE_KEY).filter(|s| !s.is_empty())
}

/// Skills named per capability in a `search_functions` answer (the side lane).
pub const SKILLS_PER_CAPABILITY: usize = 3;

/// `search_functions`' `skills`: for each capability (intrinsic ones, and those left blank once
/// prepared, dropped as the search drops them), up to [`SKILLS_PER_CAPABILITY`] skills
/// `skills::search` ranks above its floors with the caller's visibility, among those a model
/// may invoke; capabilities no skill serves are left out. `capabilities` is the request's
/// (already validated by the search).
pub fn skill_lane(
    directory: &crate::Directory,
    capabilities: &Value,
    installed: Option<&std::collections::BTreeSet<String>>,
) -> crate::error::Result<Vec<Value>> {
    let texts: Vec<String> = capabilities
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect();
    let mut lane = Vec::new();
    for asked in &texts {
        // Searched as the functions are (JSON keys stripped, intrinsic needs dropped), and
        // named as the caller wrote it, so that each entry is matched to its capability.
        let Some(capability) = crate::search::query::prepare(std::slice::from_ref(asked)).pop()
        else {
            continue;
        };
        // Only a JSON key, say: nothing to search for.
        if capability.text.trim().is_empty() {
            continue;
        }
        let request = json!({ "query": capability.text, "limit": SKILLS_PER_CAPABILITY });
        let answer = directory.search_skills_for_model(&request, installed, None)?;
        let skills: Vec<Value> = answer["results"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| json!({ "id": r["id"], "title": r["title"], "description": r["description"] }))
            .collect();
        if !skills.is_empty() {
            lane.push(json!({ "capability": asked, "skills": skills }));
        }
    }
    Ok(lane)
}

/// `directory::search_functions`: the engine's functions ranked for each capability, with the
/// skills that serve them (the side lane).
pub(super) async fn search_functions(call: Call, input: Value) -> Result<Value, WorkerError> {
    // Read now: the baggage is in this task's context only.
    let session = session_id();
    let settings = call.shared.directory.settings();
    let capabilities = input["capabilities"].clone();
    let state = &call.shared.search;
    let registry = state.registry.clone().filter(|_| settings.registry_search);
    let search = state.search.clone();
    let iii = call.iii.clone();
    let searched_in = session.clone();
    let mut answer = state
        .runtime
        .spawn(async move {
            // Before the first catalog an answer would say that nothing is installed.
            search
                .catalog()
                .ensure_loaded(&Bus(iii))
                .await
                .map_err(WorkerError::CatalogFetch)?;
            let registry = registry.as_deref().map(|registry| RegistrySearch {
                registry,
                phase_wait: DEFAULT_PHASE_WAIT,
            });
            let response = search
                .search(&input, searched_in.as_deref(), registry)
                .await?;
            serde_json::to_value(response).map_err(|e| WorkerError::from(Error::json(e)))
        })
        .await
        .map_err(WorkerError::task("search failed"))??;
    let installed = installed_workers(&call.iii, &call.shared, false).await;
    let lane = blocking(&call.shared, move |shared| {
        skill_lane(&shared.directory, &capabilities, installed.as_deref())
    })
    .await;
    let lane = match lane {
        Ok(lane) => lane,
        Err(e) => {
            tracing::warn!("search_functions answered without skills: {e}");
            Vec::new()
        }
    };
    let (lane, repeated) = match session.as_deref() {
        Some(session) => name_each_skill_once(lane, |named| {
            locks::lock(&state.named_skills).split(session, SKILLS_FINGERPRINT, named)
        }),
        None => (lane, Vec::new()),
    };
    let mut notes = Vec::new();
    if !lane.is_empty() {
        answer["skills"] = json!(lane);
        // Without a word, an answer with no function tells the agent to go and list skills.
        notes.push(crate::search::response::SKILLS_NOTE.to_string());
    }
    if !repeated.is_empty() {
        notes.push(crate::search::response::skills_repeated_note(&repeated));
    }
    if let Some(guidance) = answer["guidance"].as_str().filter(|_| !notes.is_empty()) {
        answer["guidance"] = json!(format!("{guidance} {}", notes.join(" ")));
    }
    Ok(answer)
}

/// The side lane's session memory is kept apart from the catalog's: a skill's id is all a
/// session needs to read it again, whatever changed in the tree since.
const SKILLS_FINGERPRINT: &str = "skills";

/// The side lane with the skills the session was named before left out (`split` says which,
/// from every id the lane names, in order), and those skills' ids, for the guidance. An entry
/// left without skills is dropped. When every skill was named before, `split` sends them all
/// again (the caller most likely lost the earlier answer), as it does functions.
fn name_each_skill_once(
    lane: Vec<Value>,
    split: impl FnOnce(&[String]) -> Split,
) -> (Vec<Value>, Vec<String>) {
    let mut named: Vec<String> = Vec::new();
    for id in lane.iter().flat_map(skill_ids) {
        if !named.contains(&id) {
            named.push(id);
        }
    }
    if named.is_empty() {
        return (lane, Vec::new());
    }
    let Split { send, repeated } = split(&named);
    let lane = lane
        .into_iter()
        .filter_map(|mut entry| {
            let skills = entry["skills"].as_array_mut()?;
            skills.retain(|skill| {
                skill["id"]
                    .as_str()
                    .is_some_and(|id| send.iter().any(|s| s == id))
            });
            (!skills.is_empty()).then_some(entry)
        })
        .collect();
    (lane, repeated)
}

/// The ids of the skills one side-lane entry names.
fn skill_ids(entry: &Value) -> Vec<String> {
    entry["skills"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|skill| skill["id"].as_str().map(str::to_string))
        .collect()
}

/// `directory::on-functions-change`: refreshes the catalog.
pub(super) async fn on_functions_change(call: Call, _: Value) -> Result<Value, WorkerError> {
    call.shared.installed.forget_missing();
    let state = &call.shared.search;
    let outcome = state
        .runtime
        .spawn(refresh(
            call.iii.clone(),
            state.search.clone(),
            Reuse::Unchanged,
        ))
        .await
        .map_err(WorkerError::task("catalog_refresh_task_failed"))?;
    outcome.map(|_| json!({ "ok": true }))
}

/// `directory::pre-generate`: the hint appended to a generation's system prompt, when its
/// gates allow.
pub(super) async fn pre_generate(call: Call, input: Value) -> Result<Value, WorkerError> {
    let min_workers = call.shared.directory.setting(|s| s.hint_min_workers);
    Ok(call.shared.search.search.pre_generate(&input, min_workers))
}

/// `directory::hint-preview`: the hint per exposure mode.
pub(super) async fn hint_preview(_: Call, _: Value) -> Result<Value, WorkerError> {
    Ok(hint::preview())
}

/// Refreshes the catalog from the engine; the error carries `catalog_fetch_failed`.
async fn refresh(
    iii: IIIClient,
    search: Arc<FunctionSearch>,
    reuse: Reuse,
) -> Result<Refresh, WorkerError> {
    match search.catalog().refresh(&Bus(iii), reuse).await {
        Ok(outcome) => {
            match outcome {
                Refresh::Changed { functions } => {
                    tracing::info!(functions, "function search catalog updated")
                }
                Refresh::Unchanged => tracing::debug!("function search catalog unchanged"),
                Refresh::Joined => tracing::debug!("function search catalog refresh joined"),
            }
            Ok(outcome)
        }
        Err(e) => {
            tracing::warn!("function search catalog not refreshed; keeping the last one: {e}");
            Err(WorkerError::CatalogFetch(e))
        }
    }
}

/// The bindings that refresh the catalog on `engine::functions-available` and
/// `engine::workers-available`. The SDK keeps them and replays them on every reconnect, so
/// they are made once.
pub fn follow_bindings() -> [RegisterTriggerInput; 2] {
    [FUNCTIONS_AVAILABLE, WORKERS_AVAILABLE]
        .map(|push| RegisterTriggerInput::new(push, ON_FUNCTIONS_CHANGE, json!({})))
}

/// The interval of [`recheck_catalog`], from [`RECHECK_ENV`]; `None` when it is off.
fn recheck_interval() -> Option<Duration> {
    crate::time::env_interval(RECHECK_ENV, DEFAULT_RECHECK)
}

/// Every how many rounds of [`recheck_catalog`] every contract is asked for: the others ask
/// only for the functions whose list entry or worker connection changed (a new description is
/// one), so a schema changed on the same connection under the same description is seen within
/// ten rounds (ten minutes by default), and an idle worker over thousands of functions does not
/// read every schema each minute.
const FULL_RECHECK_EVERY: u64 = 10;

/// Fetches the catalog again every [`RECHECK_ENV`] interval while the engine is connected (a
/// failure is logged by the refresh, and the next round tries again).
pub async fn recheck_catalog(iii: IIIClient, state: Arc<SearchState>) {
    let Some(every) = recheck_interval() else {
        return;
    };
    for round in 1.. {
        tokio::time::sleep(every).await;
        if iii.get_connection_state() == iii_sdk::runtime::IIIConnectionState::Connected {
            let reuse = match round % FULL_RECHECK_EVERY {
                0 => Reuse::Nothing,
                _ => Reuse::Unchanged,
            };
            let _ = refresh_catalog(&iii, &state, reuse).await;
        }
    }
}

/// Fetches the catalog from the engine now (at each connection, asking for every contract:
/// the engine's functions may have changed while it was away). Returns how many functions it
/// holds, or why not.
pub async fn refresh_catalog(
    iii: &IIIClient,
    state: &Arc<SearchState>,
    reuse: Reuse,
) -> Result<String, WorkerError> {
    match refresh(iii.clone(), state.search.clone(), reuse).await? {
        Refresh::Changed { functions } => Ok(format!("catalog updated ({functions} functions)")),
        Refresh::Unchanged => Ok("catalog unchanged".to_string()),
        Refresh::Joined => Ok("catalog refresh joined one under way".to_string()),
    }
}

/// What [`reconcile_hint`] did to the pre-generate hook binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HintBinding {
    /// Bound now.
    Bound,
    /// Already bound (the SDK replays the binding on reconnects).
    Kept,
    /// Unbound now (`inject_hint` went off).
    Unbound,
    /// Off and not bound.
    Off,
    /// Should be bound, but binding failed.
    Failed,
}

/// Binds or unbinds the pre-generate hook so that it is bound exactly while `inject_hint` is on.
pub fn reconcile_hint(iii: &IIIClient, state: &SearchState, inject_hint: bool) -> HintBinding {
    let mut binding = locks::lock(&state.hint_binding);
    match (inject_hint, binding.take()) {
        (true, Some(bound)) => {
            *binding = Some(bound);
            HintBinding::Kept
        }
        (true, None) => {
            let hook =
                RegisterTriggerInput::new(PRE_GENERATE_HOOK, PRE_GENERATE, pre_generate_binding());
            match iii.register_trigger(hook) {
                Ok(bound) => {
                    tracing::info!("search hint hook bound ({PRE_GENERATE_HOOK})");
                    *binding = Some(bound);
                    HintBinding::Bound
                }
                Err(e) => {
                    tracing::warn!("cannot bind the search hint hook: {e}");
                    HintBinding::Failed
                }
            }
        }
        (false, Some(bound)) => {
            bound.unregister();
            tracing::info!("search hint hook unbound (inject_hint is off)");
            HintBinding::Unbound
        }
        (false, None) => HintBinding::Off,
    }
}

/// How long `iii-directory search` waits for the engine to accept its connection.
const CLI_CONNECT_WAIT: Duration = Duration::from_secs(5);
/// How long `iii-directory search` waits for the answer (registry search included).
const CLI_ANSWER_WAIT: Duration = Duration::from_secs(30);

/// Why `iii-directory search` got no answer.
#[derive(Debug, thiserror::Error)]
pub enum BusSearchError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(
        "no iii engine answered at {url} within {} s (start it, or point --url / III_URL at it)",
        CLI_CONNECT_WAIT.as_secs()
    )]
    NoEngine { url: String },
    #[error(
        "no iii-directory worker is connected to the engine at {url}; start one with \
         `iii-directory serve --url {url}`"
    )]
    NoWorker { url: String },
    /// The worker's own error, without the SDK's wrapping.
    #[error("{0}")]
    Refused(String),
    #[error("the iii-directory worker did not answer within {} s", CLI_ANSWER_WAIT.as_secs())]
    Timeout,
    #[error(transparent)]
    Sdk(iii_sdk::Error),
}

/// `iii-directory search`: connects to the engine at `url` as a short-lived client, calls
/// `directory::search_functions` and returns its answer; the error says whether the engine or
/// the worker is missing.
pub fn search_over_bus(url: &str, capabilities: &[String]) -> Result<Value, BusSearchError> {
    // Refused here as the worker would refuse it, before any wait for an engine: a caller told
    // to start one would meet this error only after doing so.
    crate::search::query::validate(capabilities)
        .map_err(|refusal| BusSearchError::Refused(refusal.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(BusSearchError::Runtime)?;
    let metadata = iii_sdk::runtime::WorkerMetadata {
        name: "iii-directory-search".into(),
        ..Default::default()
    };
    let iii = iii_sdk::register_worker(
        url,
        iii_sdk::InitOptions {
            metadata: Some(metadata),
            otel: Some(iii_helpers::observability::OtelConfig {
                enabled: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    let answer = runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + CLI_CONNECT_WAIT;
        while iii.get_connection_state() != iii_sdk::runtime::IIIConnectionState::Connected {
            if tokio::time::Instant::now() >= deadline {
                return Err(BusSearchError::NoEngine {
                    url: url.to_string(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let payload = json!({ "capabilities": capabilities });
        super::engine::call(
            &iii,
            crate::search::catalog::SEARCH_FUNCTION_ID,
            payload,
            CLI_ANSWER_WAIT,
        )
        .await
        .map_err(|e| match e {
            e if super::engine::is_missing(&e) => BusSearchError::NoWorker {
                url: url.to_string(),
            },
            iii_sdk::Error::Remote { message, .. } => BusSearchError::Refused(
                message
                    .strip_prefix("handler error: ")
                    .map(str::to_string)
                    .unwrap_or(message),
            ),
            iii_sdk::Error::Timeout => BusSearchError::Timeout,
            other => BusSearchError::Sdk(other),
        })
    });
    match answer {
        // Never connected: the connection thread sleeps out a retry, which joining it would
        // add to the wait the error names. The process ends right after.
        Err(BusSearchError::NoEngine { .. }) => runtime.block_on(iii.shutdown_async()),
        _ => iii.shutdown(),
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(capability: &str, ids: &[&str]) -> Value {
        let skills: Vec<Value> = ids
            .iter()
            .map(|id| json!({ "id": id, "title": id, "description": "" }))
            .collect();
        json!({ "capability": capability, "skills": skills })
    }

    fn named(lane: &[Value]) -> Vec<Vec<String>> {
        lane.iter().map(skill_ids).collect()
    }

    #[test]
    fn a_session_is_named_each_skill_once_and_everything_again_when_nothing_is_new() {
        let mut memory = session::Memory::default();
        let mut ask = |lane: Vec<Value>| {
            name_each_skill_once(lane, |ids| memory.split("s", SKILLS_FINGERPRINT, ids))
        };
        let (lane, repeated) = ask(vec![entry("email", &["mail", "tone"])]);
        assert_eq!(named(&lane), [["mail", "tone"]]);
        assert!(repeated.is_empty());
        // A later answer: the skills named before leave their entries, and an entry left with
        // none goes.
        let (lane, repeated) = ask(vec![
            entry("email", &["mail"]),
            entry("deploy", &["tone", "netlify"]),
        ]);
        assert_eq!(named(&lane), [["netlify"]]);
        assert_eq!(lane[0]["capability"], "deploy");
        assert_eq!(repeated, ["mail", "tone"]);
        // Nothing new: everything again.
        let (lane, repeated) = ask(vec![entry("email", &["mail", "tone"])]);
        assert_eq!(named(&lane), [["mail", "tone"]]);
        assert!(repeated.is_empty());
    }

    #[test]
    fn a_skill_two_capabilities_share_stays_under_both_in_the_answer_that_names_it() {
        let mut memory = session::Memory::default();
        let (lane, repeated) = name_each_skill_once(
            vec![entry("a", &["shared", "x"]), entry("b", &["shared"])],
            |ids| {
                assert_eq!(ids, ["shared", "x"], "each id asked once, in order");
                memory.split("s", SKILLS_FINGERPRINT, ids)
            },
        );
        assert_eq!(named(&lane), [vec!["shared", "x"], vec!["shared"]]);
        assert!(repeated.is_empty());
    }

    #[test]
    fn an_empty_lane_asks_nothing() {
        let (lane, repeated) = name_each_skill_once(Vec::new(), |_| unreachable!());
        assert!(lane.is_empty() && repeated.is_empty());
    }
}
