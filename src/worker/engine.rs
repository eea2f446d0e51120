//! Calls to the engine and other workers: a timeout and retry policy, the installed-workers
//! set for `filter_unregistered` (TTL-cached, fail-open), and the `engine::functions::info`
//! proxy.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iii_sdk::IIIClient;
use iii_sdk::protocol::TriggerRequest;
use serde_json::{Value, json};

use super::Call;
use super::error::WorkerError;
use crate::error::Error;
use crate::locks;
use crate::search::catalog::other_engine_namespace;

/// Calls a function and waits for its answer, for at most `timeout`.
pub async fn call(
    iii: &IIIClient,
    function_id: &str,
    payload: Value,
    timeout: Duration,
) -> Result<Value, iii_sdk::Error> {
    iii.trigger(TriggerRequest {
        function_id: function_id.to_string(),
        payload,
        action: None,
        timeout_ms: Some(timeout.as_millis() as u64),
    })
    .await
}

/// Whether an error says the function or entry does not exist (retrying will not help).
pub fn is_missing(e: &iii_sdk::Error) -> bool {
    matches!(e, iii_sdk::Error::Remote { code, .. } if code == "function_not_found" || code == "NOT_FOUND")
}

/// [`call`] with `attempts` tries, sleeping 250 ms × attempt between them; a missing function
/// or entry is not retried.
pub async fn call_retrying(
    iii: &IIIClient,
    function_id: &str,
    payload: Value,
    timeout: Duration,
    attempts: u32,
) -> Result<Value, iii_sdk::Error> {
    let mut attempt = 1;
    loop {
        match call(iii, function_id, payload.clone(), timeout).await {
            Ok(v) => return Ok(v),
            Err(e) if is_missing(&e) || attempt >= attempts => return Err(e),
            Err(e) => tracing::debug!(function_id, attempt, "call failed, retrying: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
        attempt += 1;
    }
}

/// Timeout of `worker::list` (contract: 5 s).
const WORKER_LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// The names of installed workers, from `worker::list`, kept for `registry_cache_ttl_ms`.
#[derive(Default)]
pub struct Installed {
    cached: Mutex<Option<Fetched>>,
    /// The `worker::list` under way, with when it was asked: a caller that finds the set out
    /// of date meanwhile takes its answer rather than asking again (a hundred calls on an
    /// expired set sent a hundred `worker::list`, each waiting out its timeout, to a daemon
    /// already slow). [`Installed::clear`] lets it go, so the calls after a reload or a
    /// reconnection ask anew rather than wait for an answer the last connection may never bring.
    under_way: Mutex<Option<(Instant, Flight)>>,
    /// Bumped by [`Installed::clear`]: a request asked before it keeps nothing it brings (a
    /// request that stalled past a reload once put the set from before it back, for seconds).
    generation: AtomicU64,
}

/// An installed set: `None` when none was ever fetched (nothing is hidden).
type Set = Option<Arc<BTreeSet<String>>>;

/// One `worker::list` request, whose answer every caller waiting on it gets.
type Flight = Arc<tokio::sync::OnceCell<Set>>;

/// The last `worker::list` asked.
#[derive(Clone)]
struct Fetched {
    /// When it was asked: an answer never replaces one asked after it.
    asked: Instant,
    /// When it answered (or failed): the start of its TTL.
    at: Instant,
    /// The set it answered, or after a failure the one before (`None`: never fetched).
    set: Set,
    failed: bool,
    /// The engine has no `worker::list` (no worker daemon): asking again before its functions
    /// change only logs one more error in the engine.
    missing: bool,
}

/// After a failed `worker::list`, the calls within this long (or the TTL, when shorter) use
/// the last set without asking again, so that a failing daemon does not cost every list, get
/// and write a failed round trip. An engine with no `worker::list` at all is asked again only
/// after the TTL, or when its functions change.
const RETRY_FAILED_AFTER: Duration = Duration::from_secs(5);

impl Installed {
    /// The set last fetched while it is younger than `ttl` (a failed fetch's, younger than
    /// [`RETRY_FAILED_AFTER`]); `None` when it has to be asked for again.
    pub fn held(&self, ttl: Duration) -> Option<Set> {
        let cached = self.cached.lock().ok()?;
        let last = cached.as_ref()?;
        let keep_for = if last.failed && !last.missing {
            ttl.min(RETRY_FAILED_AFTER)
        } else {
            ttl
        };
        (last.at.elapsed() < keep_for).then(|| last.set.clone())
    }

    /// The set, refetched when older than `ttl` (or always with `fresh`). On a failed fetch the
    /// last set is kept; with none ever fetched the answer is `None` and nothing is hidden.
    pub async fn get(&self, iii: &IIIClient, ttl: Duration, fresh: bool) -> Set {
        let came = Instant::now();
        if !fresh && let Some(held) = self.held(ttl) {
            return held;
        }
        let flight = self.flight(came, fresh);
        let set = flight.get_or_init(|| self.fetch(iii)).await.clone();
        let mut under_way = locks::lock(&self.under_way);
        if under_way
            .as_ref()
            .is_some_and(|(_, current)| Arc::ptr_eq(current, &flight))
        {
            *under_way = None;
        }
        set
    }

    /// The request to wait for: the one under way, unless this caller is `fresh` and it was
    /// asked before the caller came; else a new one.
    fn flight(&self, came: Instant, fresh: bool) -> Flight {
        let mut under_way = locks::lock(&self.under_way);
        match under_way.as_ref() {
            Some((asked, flight)) if !fresh || *asked >= came => flight.clone(),
            _ => {
                let flight = Flight::default();
                *under_way = Some((Instant::now(), flight.clone()));
                flight
            }
        }
    }

    /// Asks `worker::list`, and keeps what it answered (or, when it fails, the last set).
    async fn fetch(&self, iii: &IIIClient) -> Set {
        let (asked, generation) = (Instant::now(), self.generation.load(Ordering::SeqCst));
        let last_set = self
            .cached
            .lock()
            .ok()
            .and_then(|c| c.as_ref()?.set.clone());
        let fetched = match call(iii, "worker::list", json!({}), WORKER_LIST_TIMEOUT).await {
            Ok(answer) => {
                let names: BTreeSet<String> = answer["workers"]
                    .as_array()
                    .map(|rows| {
                        rows.iter()
                            .filter_map(|w| w["name"].as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                Fetched {
                    asked,
                    at: Instant::now(),
                    set: Some(Arc::new(names)),
                    failed: false,
                    missing: false,
                }
            }
            Err(e) => {
                tracing::debug!(
                    "worker::list failed; {}: {e}",
                    if last_set.is_some() {
                        "keeping the last set"
                    } else {
                        "hiding nothing"
                    }
                );
                Fetched {
                    asked,
                    at: Instant::now(),
                    set: last_set,
                    failed: true,
                    missing: is_missing(&e),
                }
            }
        };
        let set = fetched.set.clone();
        if let Ok(mut c) = self.cached.lock()
            && self.generation.load(Ordering::SeqCst) == generation
            && c.as_ref().is_none_or(|kept| kept.asked <= asked)
        {
            *c = Some(fetched);
        }
        set
    }

    /// Forgets the set, and lets a request under way go (see [`Installed::under_way`]).
    pub fn clear(&self) {
        if let Ok(mut c) = self.cached.lock() {
            self.generation.fetch_add(1, Ordering::SeqCst);
            *c = None;
        }
        *locks::lock(&self.under_way) = None;
    }

    /// Forgets that the engine had no `worker::list`: its functions changed, and a worker
    /// daemon may have brought it.
    pub fn forget_missing(&self) {
        if let Ok(mut c) = self.cached.lock() {
            if c.as_ref().is_some_and(|f| f.missing) {
                *c = None;
            }
        }
    }
}

/// Timeout of the `engine::functions::info` proxy (contract: 10 s).
const INFO_TIMEOUT: Duration = Duration::from_secs(10);

/// `directory::engine::functions::info`: one function's contract, from the engine.
pub(super) async fn function_info(call: Call, request: Value) -> Result<Value, WorkerError> {
    let function_id = request["function_id"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_string();
    if function_id.is_empty() {
        return Err(Error::Invalid("function_id must be non-empty".into()).into());
    }
    let info = self::call(
        &call.iii,
        "engine::functions::info",
        json!({ "function_id": function_id }),
        INFO_TIMEOUT,
    )
    .await
    .map_err(|source| WorkerError::Engine {
        calling: "engine::functions::info proxy",
        source: Box::new(source),
    })?;
    let pick = |keys: &[&str]| {
        keys.iter()
            .map(|k| &info[*k])
            .find(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Null)
    };
    let worker_name = match &info["worker_name"] {
        Value::String(name) => json!(name),
        _ => json!(function_id.split("::").next()),
    };
    let triggers: Vec<Value> = info["registered_triggers"]
        .as_array()
        .map(|rows| {
            rows.iter().map(|t| json!({ "id": t["id"], "trigger_type": t["trigger_type"], "config": t["config"] })).collect()
        })
        .unwrap_or_default();
    let mut answer = json!({
        "function_id": function_id,
        "worker_name": worker_name,
        "description": pick(&["description"]),
        "request_schema": pick(&["request_format", "request_schema"]),
        "response_schema": pick(&["response_format", "response_schema"]),
        "metadata": pick(&["metadata"]),
        "registered_triggers": triggers,
    });
    // Beyond the contract, as in `search_functions`: a function only another engine namespace
    // holds is called there.
    if let Some(namespace) = other_engine_namespace(&info) {
        answer["engine_namespace"] = json!(namespace);
    }
    Ok(answer)
}
