//! A loopback fake of the iii engine for wire tests of the worker (protocol notes §5.3).
//!
//! Include it with `mod fake_engine;`. [`FakeEngine::start`] binds `127.0.0.1:0` and speaks
//! the engine side of the worker protocol over WebSocket:
//!
//! - `/otel` sockets are accepted and drained (their frames are kept, for a test to search);
//! - every other path is a worker session: the fake sends `workerregistered` at once, keeps
//!   reading (so tungstenite answers WS pings), answers JSON `ping` with `pong`, and records
//!   every frame the worker sends.
//!
//! What the fake models, and how:
//!
//! - Registrations (`registerfunction`, `registertriggertype`, `registertrigger`) are live
//!   state owned by the connection that sent them. `unregisterfunction` / `unregistertrigger`
//!   remove an entry, and a disconnect removes everything the connection owned, as the real
//!   engine does. `unregistertriggertype` is only recorded: engine 0.23 ignores that frame.
//! - A frame over 16 MiB ends the connection, as the engine's frame limit does (the worker
//!   must refuse an answer that long rather than send it).
//! - `invokefunction` without an `invocation_id` is a fire ([`Fire`]); the one to
//!   `engine::workers::register` marks the connection ready instead and is not a fire.
//!   A fire whose target is a function registered on an open connection is also delivered
//!   there (with a fresh id; the reply is dropped), like the engine does.
//! - [`FakeEngine::invoke_with_baggage`] sends the worker an `invokefunction` carrying a W3C
//!   `baggage` header, as the engine forwards a caller's OpenTelemetry baggage.
//! - `invokefunction` with an id is a call out of the worker ([`Call`]). It is answered from a
//!   canned response ([`FakeEngine::respond`] and friends) if one is set; otherwise it is
//!   routed to the open connection that registered that function; otherwise it gets
//!   `function_not_found`.
//! - [`FakeEngine::subscribe`] acts as the engine forwarding a subscriber's binding to the
//!   provider. A binding to a type no open connection provides is parked and delivered when a
//!   connection registers the type (also after a reconnect), like the engine's pending
//!   bindings. A binding whose ack carries an error is dropped.
//! - A `registertrigger` sent by a connection (a binding it makes as a subscriber) is recorded
//!   ([`FakeEngine::worker_triggers`]) and forwarded the same way to the connection that
//!   provides its type, parked until one does. The provider's error ack is passed back to the
//!   subscriber (a success ack is not, as in the engine). The subscriber's `unregistertrigger`,
//!   or its disconnect, sends the provider `unregistertrigger{id, trigger_type}`. So two
//!   connections, say a worker and a browser page speaking the protocol, can subscribe to each
//!   other's trigger types and receive each other's fires.
//! - A `reattach` whose id and token match an earlier connection retires that connection if it
//!   is still open. Engine→worker invocations pending on a connection that goes away fail with
//!   `invocation_stopped`.
//!
//! - [`FakeEngine::model_configuration_worker`] turns on a model of the engine's
//!   `configuration` worker (`configuration.rs`): stored values, schemas known only after a
//!   registration in the current engine session, and `configuration` events to live bindings.
//! - [`FakeEngine::go_away`] and [`FakeEngine::come_back`] model an engine restart on the same
//!   port: the listener closes (connects are refused meanwhile), every socket is dropped, and
//!   what the engine held in memory is forgotten (the bindings made through
//!   [`FakeEngine::subscribe`], the configuration schemas, the reattach tokens it issued);
//!   canned answers and stored configuration values stay. [`ConnectionInfo`] records when each
//!   connection was accepted and when each of its frames arrived.
//!
//! Not modelled: namespaces (recorded, never checked), `_caller_worker_id` injection, the
//! namespace grace timer, the worker-name lease, RBAC, channels and queues.
//!
//! [`FakeEngine::keep_history`]`(false)` stops recording frames, calls, fires and results (the
//! live routing goes on), for long runs that move large answers.
//!
//! Waiting never spins: every change to the recorded state bumps a watch channel and the
//! `wait_*` helpers sleep on it until their condition holds or their deadline passes, and then
//! return an error that says what they were waiting for and what the fake has seen.
#![allow(dead_code)]

pub mod configuration;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

/// Default deadline of [`FakeEngine::invoke`] and [`FakeEngine::subscribe`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The fire-and-forget call with which a worker announces its metadata ("worker ready").
pub const WORKERS_REGISTER: &str = "engine::workers::register";

/// Error code the fake itself uses when a test-side wait runs out.
pub const FAKE_TIMEOUT: &str = "fake_engine_timeout";

/// Error code the fake itself uses when there is no worker to talk to.
pub const FAKE_NOT_CONNECTED: &str = "fake_engine_not_connected";

const KIND_WORKER: u32 = 0xfa4e_0001;
const KIND_TOKEN: u32 = 0xfa4e_0002;
const KIND_INVOCATION: u32 = 0xfa4e_0003;

/// A UUID-shaped id (the SDK parses invocation ids as UUIDs) built from a counter.
fn uuid_like(kind: u32, n: u64) -> String {
    format!("{kind:08x}-0000-4000-8000-{n:012x}")
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

/// The wire error shape `{code, message, stacktrace?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    pub stacktrace: Option<String>,
}

impl ErrorBody {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            code: code.into(),
            message: message.into(),
            stacktrace: None,
        }
    }

    fn from_value(value: &Value) -> ErrorBody {
        ErrorBody {
            code: str_field(value, "code"),
            message: str_field(value, "message"),
            stacktrace: opt_str(value, "stacktrace"),
        }
    }

    fn to_value(&self) -> Value {
        let mut body = json!({"code": self.code, "message": self.message});
        if let Some(stacktrace) = &self.stacktrace {
            body["stacktrace"] = json!(stacktrace);
        }
        body
    }
}

impl fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorBody {}

/// A `registerfunction` frame, as last received for its id.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredFunction {
    pub connection: u64,
    pub id: String,
    pub description: Option<String>,
    pub request_format: Option<Value>,
    pub response_format: Option<Value>,
    pub metadata: Option<Value>,
    /// The HTTP invocation config of an HTTP-invoked function.
    pub invocation: Option<Value>,
}

/// A `registertriggertype` frame, as last received for its id.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredTriggerType {
    pub connection: u64,
    pub id: String,
    pub description: String,
    pub trigger_request_format: Option<Value>,
    pub call_request_format: Option<Value>,
    pub namespace: Option<String>,
}

/// A `registertrigger` frame sent by the worker as a subscriber (a binding it made).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerTrigger {
    pub connection: u64,
    pub id: String,
    pub trigger_type: String,
    pub function_id: String,
    pub config: Value,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
    pub trigger_namespace: Option<String>,
}

/// A `triggerregistrationresult` frame: the worker, as a provider, acking a binding.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistrationResult {
    pub connection: u64,
    pub id: String,
    pub trigger_type: String,
    pub function_id: String,
    pub error: Option<ErrorBody>,
}

/// An `unregistertrigger` frame sent by the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct UnregisteredTrigger {
    pub connection: u64,
    pub id: String,
    pub trigger_type: Option<String>,
}

/// A `reattach` frame. `matched` tells whether id and token are those the fake gave an
/// earlier connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Reattach {
    pub connection: u64,
    pub previous_worker_id: String,
    pub reattach_token: Option<String>,
    pub matched: bool,
}

/// An `invokefunction` with a null `invocation_id` (other than `engine::workers::register`).
#[derive(Debug, Clone, PartialEq)]
pub struct Fire {
    pub connection: u64,
    pub function_id: String,
    pub data: Value,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
    /// For example `{"type":"void"}`.
    pub action: Option<Value>,
}

/// An `invokefunction` with an `invocation_id`: a call out of the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub connection: u64,
    pub invocation_id: String,
    pub function_id: String,
    pub data: Value,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
    pub action: Option<Value>,
}

/// An `invocationresult` frame sent by the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct InvocationResult {
    pub connection: u64,
    pub invocation_id: String,
    pub function_id: String,
    pub result: Option<Value>,
    pub error: Option<ErrorBody>,
}

/// One WebSocket session on `/` (connections are numbered from 1).
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionInfo {
    pub id: u64,
    pub path: String,
    /// The `worker_id` the fake sent in `workerregistered`.
    pub worker_id: String,
    /// The `reattach_token` the fake sent in `workerregistered`.
    pub reattach_token: String,
    pub open: bool,
    /// The `data` of this connection's `engine::workers::register` call, once it came.
    pub ready: Option<Value>,
    /// Frames received from the worker on this connection.
    pub frames: Vec<Value>,
    /// Frames the fake wrote to this connection.
    pub sent: Vec<Value>,
    /// When the fake accepted the TCP connection.
    pub accepted_at: Instant,
    /// When each of `frames` arrived (same order).
    pub received_at: Vec<Instant>,
}

// ---------------------------------------------------------------------------------------------
// Shared state
// ---------------------------------------------------------------------------------------------

type Handler = Arc<dyn Fn(Value) -> Result<Value, (String, String)> + Send + Sync>;

#[derive(Clone)]
enum Responder {
    Value(Value),
    Error(ErrorBody),
    Never,
    With(Handler),
}

/// An engine→worker invocation waiting for its `invocationresult`.
enum Pending {
    /// Sent by a test through [`FakeEngine::invoke`].
    Test {
        connection: u64,
        reply: oneshot::Sender<Result<Value, ErrorBody>>,
    },
    /// A worker's call routed to the worker that registered the function.
    Relay {
        connection: u64,
        caller: u64,
        function_id: String,
    },
    /// A fire delivered to a registered function; the reply is dropped.
    Discard { connection: u64 },
}

impl Pending {
    fn connection(&self) -> u64 {
        match self {
            Pending::Test { connection, .. }
            | Pending::Relay { connection, .. }
            | Pending::Discard { connection } => *connection,
        }
    }
}

/// A binding the fake (as the engine) forwards to the provider of its trigger type.
struct Subscription {
    trigger_type: String,
    function_id: String,
    config: Value,
    metadata: Option<Value>,
    delivered_to: Option<u64>,
    /// The connection that made the binding with its own `registertrigger`; `None` for one
    /// made by the test through [`FakeEngine::subscribe`].
    owner: Option<u64>,
}

impl Subscription {
    fn frame(&self, id: &str) -> Value {
        let mut frame = json!({
            "type": "registertrigger",
            "id": id,
            "trigger_type": self.trigger_type,
            "function_id": self.function_id,
            "config": self.config,
        });
        if let Some(metadata) = &self.metadata {
            frame["metadata"] = metadata.clone();
        }
        frame
    }
}

enum Outgoing {
    Frame(Value),
    Close,
}

struct Conn {
    info: ConnectionInfo,
    tx: mpsc::UnboundedSender<Outgoing>,
}

#[derive(Default)]
struct State {
    next_conn: u64,
    next_id: u64,
    conns: BTreeMap<u64, Conn>,
    otel_connections: usize,
    /// Every telemetry frame received (OTLP spans, metrics, logs), as sent.
    telemetry: Vec<Vec<u8>>,
    frames: Vec<Value>,
    functions: BTreeMap<String, RegisteredFunction>,
    registration_counts: BTreeMap<String, usize>,
    trigger_types: BTreeMap<String, RegisteredTriggerType>,
    worker_triggers: BTreeMap<String, WorkerTrigger>,
    registration_results: Vec<RegistrationResult>,
    unregistered_functions: Vec<String>,
    unregistered_triggers: Vec<UnregisteredTrigger>,
    unregistered_trigger_types: Vec<String>,
    reattaches: Vec<Reattach>,
    ready_history: Vec<Value>,
    fires: Vec<Fire>,
    calls: Vec<Call>,
    results: Vec<InvocationResult>,
    responders: HashMap<String, Responder>,
    pending: HashMap<String, Pending>,
    subscriptions: BTreeMap<String, Subscription>,
    subscription_waiters: HashMap<String, oneshot::Sender<Option<ErrorBody>>>,
    tasks: Vec<AbortHandle>,
    /// False after `keep_history(false)`: history is not recorded.
    forget_history: bool,
    /// The configuration worker model, when turned on.
    configuration: Option<configuration::Store>,
    /// Connections numbered up to this one belong to an earlier engine session: their
    /// reattach tokens are unknown to this one.
    session_floor: u64,
    /// How many times the engine went away.
    restarts: u64,
}

impl State {
    fn fresh_id(&mut self, kind: u32) -> String {
        self.next_id += 1;
        uuid_like(kind, self.next_id)
    }

    fn is_open(&self, conn: u64) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.info.open)
    }

    /// Queue `frame` for the connection; false if it is closed or unknown.
    fn send_to(&self, conn: u64, frame: Value) -> bool {
        match self.conns.get(&conn) {
            Some(c) if c.info.open => c.tx.send(Outgoing::Frame(frame)).is_ok(),
            _ => false,
        }
    }

    fn function_owner(&self, function_id: &str) -> Option<u64> {
        self.functions
            .get(function_id)
            .map(|f| f.connection)
            .filter(|c| self.is_open(*c))
    }

    fn trigger_type_owner(&self, trigger_type: &str) -> Option<u64> {
        self.trigger_types
            .get(trigger_type)
            .map(|t| t.connection)
            .filter(|c| self.is_open(*c))
    }

    /// The newest open worker connection.
    fn active(&self) -> Option<u64> {
        self.conns
            .values()
            .rev()
            .find(|c| c.info.open)
            .map(|c| c.info.id)
    }

    fn ready_data(&self) -> Option<Value> {
        self.conns
            .values()
            .rev()
            .filter(|c| c.info.open)
            .find_map(|c| c.info.ready.clone())
    }

    /// Forward a binding to the open connection providing its type, if any.
    fn deliver(&mut self, id: &str) {
        let Some(subscription) = self.subscriptions.get(id) else {
            return;
        };
        let Some(provider) = self.trigger_type_owner(&subscription.trigger_type) else {
            return;
        };
        let frame = subscription.frame(id);
        if self.send_to(provider, frame)
            && let Some(subscription) = self.subscriptions.get_mut(id)
        {
            subscription.delivered_to = Some(provider);
        }
    }

    /// Remove a binding and tell the provider it was given to, if that one is still open.
    fn withdraw(&mut self, id: &str) {
        let Some(subscription) = self.subscriptions.remove(id) else {
            return;
        };
        if let Some(provider) = subscription.delivered_to {
            self.send_to(
                provider,
                json!({"type": "unregistertrigger", "id": id, "trigger_type": subscription.trigger_type}),
            );
        }
    }

    /// A short description of what the fake has seen, for error messages.
    fn summary(&self) -> String {
        let open: Vec<u64> = self
            .conns
            .values()
            .filter(|c| c.info.open)
            .map(|c| c.info.id)
            .collect();
        let tail: Vec<String> = self
            .frames
            .iter()
            .rev()
            .take(12)
            .rev()
            .map(|f| match f.get("type").and_then(Value::as_str) {
                Some(t) => match f.get("id").or_else(|| f.get("function_id")) {
                    Some(Value::String(id)) => format!("{t}({id})"),
                    _ => t.to_string(),
                },
                None => "<non-json>".to_string(),
            })
            .collect();
        format!(
            "connections so far: {}, open: {open:?}, ready: {}, functions: {:?}, trigger types: {:?}, \
             frames received: {}, last frames: [{}]",
            self.conns.len(),
            self.ready_data().is_some(),
            self.functions.keys().collect::<Vec<_>>(),
            self.trigger_types.keys().collect::<Vec<_>>(),
            self.frames.len(),
            tail.join(", ")
        )
    }
}

struct Shared {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

// ---------------------------------------------------------------------------------------------
// The fake engine
// ---------------------------------------------------------------------------------------------

/// A loopback fake engine. Dropping it stops the listener and closes every socket.
pub struct FakeEngine {
    url: String,
    port: u16,
    shared: Arc<Shared>,
    /// The accept loop; `None` while the engine is away.
    accept_task: Mutex<Option<AbortHandle>>,
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        if let Some(task) = self.accept_task.lock().ok().and_then(|mut t| t.take()) {
            task.abort();
        }
        for task in self.shared.lock().tasks.drain(..) {
            task.abort();
        }
    }
}

impl FakeEngine {
    /// Binds `127.0.0.1:0` and starts accepting connections. Panics if it cannot bind.
    pub async fn start() -> FakeEngine {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake engine: bind 127.0.0.1:0");
        let port = listener
            .local_addr()
            .expect("fake engine: local addr")
            .port();
        let (changed, _) = watch::channel(0u64);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed,
        });
        let accept_task = accept_loop(shared.clone(), listener);
        FakeEngine {
            url: format!("ws://127.0.0.1:{port}"),
            port,
            shared,
            accept_task: Mutex::new(Some(accept_task)),
        }
    }

    /// `ws://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    // ----- canned answers to calls out of the worker -----------------------------------------

    /// Answer calls to `function_id` with `result`.
    pub fn respond(&self, function_id: &str, result: Value) {
        self.set_responder(function_id, Responder::Value(result));
    }

    /// Answer calls to `function_id` with the error `{code, message}`.
    pub fn respond_error(&self, function_id: &str, code: &str, message: &str) {
        self.set_responder(function_id, Responder::Error(ErrorBody::new(code, message)));
    }

    /// Never answer calls to `function_id` (to exercise the caller's timeout).
    pub fn never_answer(&self, function_id: &str) {
        self.set_responder(function_id, Responder::Never);
    }

    /// Answer calls to `function_id` by running `f` on the call's `data`;
    /// `Err((code, message))` becomes an error result.
    pub fn respond_with<F>(&self, function_id: &str, f: F)
    where
        F: Fn(Value) -> Result<Value, (String, String)> + Send + Sync + 'static,
    {
        self.set_responder(function_id, Responder::With(Arc::new(f)));
    }

    /// Remove the canned answer for `function_id`.
    pub fn forget_response(&self, function_id: &str) {
        self.shared.lock().responders.remove(function_id);
    }

    fn set_responder(&self, function_id: &str, responder: Responder) {
        self.shared
            .lock()
            .responders
            .insert(function_id.to_string(), responder);
    }

    // ----- snapshots -------------------------------------------------------------------------

    /// Functions currently registered by open connections, by id.
    pub fn functions(&self) -> BTreeMap<String, RegisteredFunction> {
        self.shared.lock().functions.clone()
    }

    /// Trigger types currently provided by open connections, by id.
    pub fn trigger_types(&self) -> BTreeMap<String, RegisteredTriggerType> {
        self.shared.lock().trigger_types.clone()
    }

    /// Bindings the worker currently holds as a subscriber, by binding id.
    pub fn worker_triggers(&self) -> BTreeMap<String, WorkerTrigger> {
        self.shared.lock().worker_triggers.clone()
    }

    pub fn registration_results(&self) -> Vec<RegistrationResult> {
        self.shared.lock().registration_results.clone()
    }

    pub fn unregistered_functions(&self) -> Vec<String> {
        self.shared.lock().unregistered_functions.clone()
    }

    pub fn unregistered_triggers(&self) -> Vec<UnregisteredTrigger> {
        self.shared.lock().unregistered_triggers.clone()
    }

    pub fn unregistered_trigger_types(&self) -> Vec<String> {
        self.shared.lock().unregistered_trigger_types.clone()
    }

    pub fn reattaches(&self) -> Vec<Reattach> {
        self.shared.lock().reattaches.clone()
    }

    /// Fire-and-forget invocations (null `invocation_id`), except `engine::workers::register`.
    pub fn fires(&self) -> Vec<Fire> {
        self.shared.lock().fires.clone()
    }

    /// Calls out of the worker (`invokefunction` with an `invocation_id`).
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// Every `invocationresult` the worker sent.
    pub fn results(&self) -> Vec<InvocationResult> {
        self.shared.lock().results.clone()
    }

    /// Every frame received from workers on `/`, in order, across connections.
    pub fn frames(&self) -> Vec<Value> {
        self.shared.lock().frames.clone()
    }

    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.shared
            .lock()
            .conns
            .values()
            .map(|c| c.info.clone())
            .collect()
    }

    /// The register data of the newest open connection that sent `engine::workers::register`.
    pub fn ready(&self) -> Option<Value> {
        self.shared.lock().ready_data()
    }

    /// Every `engine::workers::register` data received, in order.
    pub fn ready_history(&self) -> Vec<Value> {
        self.shared.lock().ready_history.clone()
    }

    /// How many `registerfunction` frames carried this id.
    pub fn registration_count(&self, function_id: &str) -> usize {
        self.shared
            .lock()
            .registration_counts
            .get(function_id)
            .copied()
            .unwrap_or(0)
    }

    pub fn otel_connections(&self) -> usize {
        self.shared.lock().otel_connections
    }

    /// How many telemetry frames came (on `/otel` or a worker socket), and how many of them
    /// hold `needle`.
    pub fn telemetry_holding(&self, needle: &[u8]) -> (usize, usize) {
        let st = self.shared.lock();
        let holding = st
            .telemetry
            .iter()
            .filter(|frame| frame.windows(needle.len()).any(|w| w == needle))
            .count();
        (st.telemetry.len(), holding)
    }

    /// Forget the history (frames, fires, calls, results, acks, unregistrations, reattaches,
    /// registration counts). Live state stays: connections, registered functions, trigger
    /// types, bindings, subscriptions, canned answers and pending invocations.
    pub fn clear(&self) {
        let mut st = self.shared.lock();
        st.frames.clear();
        st.registration_counts.clear();
        st.registration_results.clear();
        st.unregistered_functions.clear();
        st.unregistered_triggers.clear();
        st.unregistered_trigger_types.clear();
        st.reattaches.clear();
        st.ready_history.clear();
        st.fires.clear();
        st.calls.clear();
        st.results.clear();
        st.telemetry.clear();
        for conn in st.conns.values_mut() {
            conn.info.frames.clear();
            conn.info.received_at.clear();
            conn.info.sent.clear();
        }
        drop(st);
        self.shared.bump();
    }

    /// With `false`, stop recording history (frames, fires, calls, results and the frames of
    /// each connection) and forget what was recorded; the live routing is unchanged. For runs
    /// that move many large answers, where the copies would only cost memory and time.
    pub fn keep_history(&self, keep: bool) {
        self.shared.lock().forget_history = !keep;
        if !keep {
            self.clear();
        }
    }

    // ----- waiting ---------------------------------------------------------------------------

    async fn wait_until<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&State) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + timeout;
        let mut changes = self.shared.changed.subscribe();
        loop {
            {
                let st = self.shared.lock();
                if let Some(found) = check(&st) {
                    return Ok(found);
                }
            }
            let woke = tokio::time::timeout_at(deadline, changes.changed()).await;
            if !matches!(woke, Ok(Ok(()))) {
                let st = self.shared.lock();
                if let Some(found) = check(&st) {
                    return Ok(found);
                }
                return Err(format!(
                    "fake engine: timed out after {timeout:?} waiting for {what}; {}",
                    st.summary()
                ));
            }
        }
    }

    /// Wait until an open connection has called `engine::workers::register`; returns its data.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<Value, String> {
        self.wait_until(
            timeout,
            "the worker to call engine::workers::register",
            |st| st.ready_data(),
        )
        .await
    }

    /// Wait until an open connection has registered `function_id`.
    pub async fn wait_function(
        &self,
        function_id: &str,
        timeout: Duration,
    ) -> Result<RegisteredFunction, String> {
        self.wait_until(
            timeout,
            &format!("function {function_id} to be registered"),
            |st| st.functions.get(function_id).cloned(),
        )
        .await
    }

    /// Wait until an open connection provides `trigger_type`.
    pub async fn wait_trigger_type(
        &self,
        trigger_type: &str,
        timeout: Duration,
    ) -> Result<RegisteredTriggerType, String> {
        self.wait_until(
            timeout,
            &format!("trigger type {trigger_type} to be registered"),
            |st| st.trigger_types.get(trigger_type).cloned(),
        )
        .await
    }

    /// Wait until the worker holds a binding matching `predicate`.
    pub async fn wait_worker_trigger(
        &self,
        predicate: impl Fn(&WorkerTrigger) -> bool,
        timeout: Duration,
    ) -> Result<WorkerTrigger, String> {
        self.wait_until(timeout, "a matching worker binding", |st| {
            st.worker_triggers.values().find(|t| predicate(t)).cloned()
        })
        .await
    }

    /// Wait until `predicate` holds over all frames received so far; returns them.
    pub async fn wait_for(
        &self,
        predicate: impl Fn(&[Value]) -> bool,
        timeout: Duration,
    ) -> Result<Vec<Value>, String> {
        self.wait_until(timeout, "a frame predicate", |st| {
            predicate(&st.frames).then(|| st.frames.clone())
        })
        .await
    }

    /// Wait for the first fire (since the last `clear`) matching `predicate`.
    pub async fn wait_fire(
        &self,
        predicate: impl Fn(&Fire) -> bool,
        timeout: Duration,
    ) -> Result<Fire, String> {
        self.wait_until(timeout, "a matching fire", |st| {
            st.fires.iter().find(|f| predicate(f)).cloned()
        })
        .await
    }

    /// Wait for the first call out of the worker (since the last `clear`) matching `predicate`.
    pub async fn wait_call(
        &self,
        predicate: impl Fn(&Call) -> bool,
        timeout: Duration,
    ) -> Result<Call, String> {
        self.wait_until(timeout, "a matching call", |st| {
            st.calls.iter().find(|c| predicate(c)).cloned()
        })
        .await
    }

    // ----- driving the worker ----------------------------------------------------------------

    /// Invoke a worker function the way the engine does, with [`DEFAULT_TIMEOUT`].
    pub async fn invoke(&self, function_id: &str, data: Value) -> Result<Value, ErrorBody> {
        self.invoke_with(function_id, data, None, DEFAULT_TIMEOUT)
            .await
    }

    /// Invokes a call that must fail, and returns its error.
    pub async fn invoke_err(&self, function_id: &str, data: Value) -> ErrorBody {
        match self.invoke(function_id, data.clone()).await {
            Ok(value) => panic!("{function_id} {data} should fail, answered {value}"),
            Err(err) => err,
        }
    }

    /// Invoke a worker function with optional per-invocation `metadata` and a deadline.
    ///
    /// Errors: the worker's own error; `function_not_found` if no open connection registered
    /// `function_id`; `invocation_stopped` if the connection goes away first;
    /// [`FAKE_TIMEOUT`] if no result comes before `timeout`.
    pub async fn invoke_with(
        &self,
        function_id: &str,
        data: Value,
        metadata: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, ErrorBody> {
        self.invoke_frame(function_id, data, metadata, None, timeout)
            .await
    }

    /// Invoke a worker function with a W3C `baggage` header on the frame (for example
    /// `iii.session.id=s1`), as the engine forwards a caller's OpenTelemetry baggage.
    pub async fn invoke_with_baggage(
        &self,
        function_id: &str,
        data: Value,
        baggage: &str,
    ) -> Result<Value, ErrorBody> {
        self.invoke_frame(function_id, data, None, Some(baggage), DEFAULT_TIMEOUT)
            .await
    }

    async fn invoke_frame(
        &self,
        function_id: &str,
        data: Value,
        metadata: Option<Value>,
        baggage: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, ErrorBody> {
        let (reply, outcome) = oneshot::channel();
        let invocation_id = {
            let mut st = self.shared.lock();
            let Some(owner) = st.function_owner(function_id) else {
                return Err(ErrorBody::new(
                    "function_not_found",
                    format!(
                        "Function {function_id} not found (no open connection registered it); {}",
                        st.summary()
                    ),
                ));
            };
            let invocation_id = st.fresh_id(KIND_INVOCATION);
            let mut frame = json!({
                "type": "invokefunction",
                "invocation_id": invocation_id,
                "function_id": function_id,
                "data": data,
            });
            if let Some(metadata) = metadata {
                frame["metadata"] = metadata;
            }
            if let Some(baggage) = baggage {
                frame["baggage"] = json!(baggage);
            }
            st.pending.insert(
                invocation_id.clone(),
                Pending::Test {
                    connection: owner,
                    reply,
                },
            );
            st.send_to(owner, frame);
            invocation_id
        };
        match tokio::time::timeout(timeout, outcome).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(ErrorBody::new(
                FAKE_NOT_CONNECTED,
                format!("invocation {invocation_id} of {function_id} was dropped"),
            )),
            Err(_) => {
                let mut st = self.shared.lock();
                st.pending.remove(&invocation_id);
                Err(ErrorBody::new(
                    FAKE_TIMEOUT,
                    format!(
                        "no invocationresult for {function_id} (invocation {invocation_id}) \
                         within {timeout:?}; {}",
                        st.summary()
                    ),
                ))
            }
        }
    }

    /// Bind `function_id` to the worker's trigger type `trigger_type` as the engine does for a
    /// subscriber: send `registertrigger` to the provider and wait (up to [`DEFAULT_TIMEOUT`])
    /// for its `triggerregistrationresult`. If no open connection provides the type yet, the
    /// binding is delivered as soon as one registers it.
    pub async fn subscribe(
        &self,
        id: &str,
        trigger_type: &str,
        function_id: &str,
        config: Value,
        metadata: Option<Value>,
    ) -> Result<(), ErrorBody> {
        self.subscribe_with_timeout(
            id,
            trigger_type,
            function_id,
            config,
            metadata,
            DEFAULT_TIMEOUT,
        )
        .await
    }

    pub async fn subscribe_with_timeout(
        &self,
        id: &str,
        trigger_type: &str,
        function_id: &str,
        config: Value,
        metadata: Option<Value>,
        timeout: Duration,
    ) -> Result<(), ErrorBody> {
        let (ack_tx, ack_rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            st.subscription_waiters.insert(id.to_string(), ack_tx);
            let mut subscription = Subscription {
                trigger_type: trigger_type.to_string(),
                function_id: function_id.to_string(),
                config,
                metadata,
                delivered_to: None,
                owner: None,
            };
            if let Some(owner) = st.trigger_type_owner(trigger_type)
                && st.send_to(owner, subscription.frame(id))
            {
                subscription.delivered_to = Some(owner);
            }
            st.subscriptions.insert(id.to_string(), subscription);
        }
        match tokio::time::timeout(timeout, ack_rx).await {
            Ok(Ok(None)) => Ok(()),
            Ok(Ok(Some(error))) => Err(error),
            Ok(Err(_)) => Err(ErrorBody::new(
                FAKE_NOT_CONNECTED,
                format!("the wait for the ack of binding {id} was replaced by a newer subscribe"),
            )),
            Err(_) => {
                let mut st = self.shared.lock();
                st.subscription_waiters.remove(id);
                st.subscriptions.remove(id);
                let provided = st.trigger_type_owner(trigger_type).is_some();
                Err(ErrorBody::new(
                    FAKE_TIMEOUT,
                    format!(
                        "no triggerregistrationresult for binding {id} within {timeout:?} \
                         (trigger type {trigger_type} provided by an open connection: {provided}); {}",
                        st.summary()
                    ),
                ))
            }
        }
    }

    /// Remove a binding made with [`FakeEngine::subscribe`] and send the provider
    /// `unregistertrigger{id, trigger_type}`. Errors if no open connection provides the type.
    pub fn unsubscribe(&self, id: &str, trigger_type: &str) -> Result<(), String> {
        let mut st = self.shared.lock();
        let delivered = st.subscriptions.remove(id).and_then(|s| s.delivered_to);
        let target = delivered
            .filter(|c| st.is_open(*c))
            .or_else(|| st.trigger_type_owner(trigger_type));
        let frame = json!({"type": "unregistertrigger", "id": id, "trigger_type": trigger_type});
        match target {
            Some(conn) if st.send_to(conn, frame) => Ok(()),
            _ => Err(format!(
                "fake engine: no open connection provides trigger type {trigger_type}; {}",
                st.summary()
            )),
        }
    }

    /// Send any frame to the newest open worker connection.
    pub fn send_to_worker(&self, frame: Value) -> Result<(), String> {
        let st = self.shared.lock();
        match st.active() {
            Some(conn) if st.send_to(conn, frame) => Ok(()),
            _ => Err(format!(
                "fake engine: no open worker connection; {}",
                st.summary()
            )),
        }
    }

    /// Drop every open worker socket (a Close frame, then the TCP connection), and wait until
    /// the fake has processed the disconnects. The SDK reconnects about 2 s later.
    /// Returns how many connections were closed.
    pub async fn close_connection(&self) -> Result<usize, String> {
        let ids: Vec<u64> = {
            let st = self.shared.lock();
            st.conns
                .values()
                .filter(|c| c.info.open)
                .filter(|c| c.tx.send(Outgoing::Close).is_ok())
                .map(|c| c.info.id)
                .collect()
        };
        if ids.is_empty() {
            return Err(format!(
                "fake engine: no open worker connection to close; {}",
                self.shared.lock().summary()
            ));
        }
        self.wait_until(Duration::from_secs(5), "the closed sockets to go", |st| {
            ids.iter().all(|id| !st.is_open(*id)).then_some(())
        })
        .await?;
        Ok(ids.len())
    }

    // ----- engine restarts -------------------------------------------------------------------

    /// The engine stops, as a process that exits: the listener closes (connects are refused
    /// until [`FakeEngine::come_back`]), every worker socket is dropped, and what the engine
    /// held in memory is forgotten: the bindings made with [`FakeEngine::subscribe`] (their
    /// subscribers must bind again), the configuration schemas (stored values stay, as on
    /// disk), held configuration reads, and the reattach tokens it issued. Returns how many
    /// sockets were open.
    pub async fn go_away(&self) -> Result<usize, String> {
        let task = self.accept_task.lock().ok().and_then(|mut t| t.take());
        let Some(task) = task else {
            return Err("fake engine: already away".to_string());
        };
        task.abort();
        // The listener is closed once the aborted task is gone.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !task.is_finished() {
            if Instant::now() >= deadline {
                return Err("fake engine: the accept loop did not stop".to_string());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let open = self.connections().iter().filter(|c| c.open).count();
        if open > 0 {
            self.close_connection().await?;
        }
        {
            let mut st = self.shared.lock();
            st.restarts += 1;
            st.session_floor = st.next_conn;
            let bound_by_tests: Vec<String> = st
                .subscriptions
                .iter()
                .filter(|(_, s)| s.owner.is_none())
                .map(|(id, _)| id.clone())
                .collect();
            for id in bound_by_tests {
                st.subscriptions.remove(&id);
            }
            st.subscription_waiters.clear();
            if let Some(store) = st.configuration.as_mut() {
                store.restart();
            }
        }
        self.shared.bump();
        Ok(open)
    }

    /// The engine is back on the same port, accepting connections.
    pub async fn come_back(&self) -> Result<(), String> {
        let mut slot = self.accept_task.lock().map_err(|e| e.to_string())?;
        if slot.is_some() {
            return Err("fake engine: not away".to_string());
        }
        let listener = std::net::TcpListener::bind(("127.0.0.1", self.port))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(TcpListener::from_std)
            .map_err(|e| {
                format!(
                    "fake engine: cannot listen on port {} again: {e}",
                    self.port
                )
            })?;
        *slot = Some(accept_loop(self.shared.clone(), listener));
        Ok(())
    }

    /// How many times the engine went away.
    pub fn restarts(&self) -> u64 {
        self.shared.lock().restarts
    }

    // ----- the configuration worker ----------------------------------------------------------

    /// Answer `configuration::*` calls from a model of the engine's configuration worker
    /// (`configuration.rs`) instead of `function_not_found`; canned answers still win.
    pub fn model_configuration_worker(&self) {
        let mut st = self.shared.lock();
        if st.configuration.is_none() {
            st.configuration = Some(configuration::Store::default());
        }
    }

    /// The simplest configuration worker, as canned answers (no model): `configuration::get`
    /// answers NOT_FOUND until a value is stored, then the value; `configuration::register`
    /// stores its `initial_value` when nothing is stored yet (as the engine does) and echoes
    /// its input. Returns the stored value, for the test to read or replace.
    pub fn canned_configuration_worker(&self) -> Arc<Mutex<Option<Value>>> {
        let stored = Arc::new(Mutex::new(None::<Value>));
        let for_get = stored.clone();
        self.respond_with("configuration::get", move |data| {
            let value = for_get.lock().expect("stored").clone();
            match value {
                Some(value) => Ok(json!({ "id": data["id"], "value": value })),
                None => Err((
                    "NOT_FOUND".to_string(),
                    format!("configuration {} not found", data["id"]),
                )),
            }
        });
        let for_register = stored.clone();
        self.respond_with("configuration::register", move |data| {
            let mut value = for_register.lock().expect("stored");
            if value.is_none()
                && let Some(initial) = data.get("initial_value")
            {
                *value = Some(initial.clone());
            }
            Ok(data)
        });
        stored
    }

    /// `configuration::set` as an operator calls it (`iii trigger configuration::set`): the
    /// model's answer, and the `configuration:updated` event to the live bindings.
    pub fn configuration_set(&self, id: &str, value: Value) -> Result<Value, ErrorBody> {
        let outcome = {
            let mut st = self.shared.lock();
            if st.configuration.is_none() {
                return Err(ErrorBody::new(
                    "function_not_found",
                    "Function configuration::set not found (the model is off)",
                ));
            }
            configuration::set(&mut st, id, Some(value))
        };
        self.shared.bump();
        outcome
    }

    /// Replace a stored value behind the engine's back, as an edit of `config/<id>.yaml` while
    /// the engine is stopped: no event, no schema check.
    pub fn configuration_store(&self, id: &str, value: Value) {
        let mut st = self.shared.lock();
        let store = st
            .configuration
            .get_or_insert_with(configuration::Store::default);
        match store.entries.get_mut(id) {
            Some(entry) => entry.value = value,
            None => {
                store.entries.insert(
                    id.to_string(),
                    configuration::Entry {
                        value,
                        schema: Value::Null,
                        name: String::new(),
                        description: String::new(),
                        metadata: None,
                    },
                );
            }
        }
    }

    /// The model's entry for `id`.
    pub fn configuration_entry(&self, id: &str) -> Option<configuration::Entry> {
        self.shared
            .lock()
            .configuration
            .as_ref()
            .and_then(|store| store.entries.get(id).cloned())
    }

    /// Every configuration event delivered so far.
    pub fn configuration_deliveries(&self) -> Vec<configuration::Delivery> {
        self.shared
            .lock()
            .configuration
            .as_ref()
            .map(|store| store.deliveries.clone())
            .unwrap_or_default()
    }

    /// With `true`, `configuration::get` calls get no answer (a read in flight); with `false`,
    /// the held ones still on an open connection are answered now.
    pub fn hold_configuration_reads(&self, hold: bool) {
        let mut st = self.shared.lock();
        let Some(store) = st.configuration.as_mut() else {
            return;
        };
        store.hold_reads = hold;
        if hold {
            return;
        }
        let held = std::mem::take(&mut store.held);
        for read in held {
            if let Some(outcome) = configuration::call(
                &mut st,
                read.connection,
                &read.invocation_id,
                "configuration::get",
                &read.data,
            ) {
                st.send_to(
                    read.connection,
                    result_frame(&read.invocation_id, "configuration::get", outcome),
                );
            }
        }
    }

    /// How many `configuration::get` calls are held right now.
    pub fn held_configuration_reads(&self) -> usize {
        self.shared
            .lock()
            .configuration
            .as_ref()
            .map_or(0, |store| store.held.len())
    }
}

// ---------------------------------------------------------------------------------------------
// Connection tasks
// ---------------------------------------------------------------------------------------------

fn is_telemetry(bytes: &[u8]) -> bool {
    bytes.starts_with(b"OTLP") || bytes.starts_with(b"MTRC") || bytes.starts_with(b"LOGS")
}

fn accept_loop(shared: Arc<Shared>, listener: TcpListener) -> AbortHandle {
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let task = tokio::spawn(serve(shared.clone(), stream, Instant::now()));
                    let mut st = shared.lock();
                    st.tasks.retain(|t| !t.is_finished());
                    st.tasks.push(task.abort_handle());
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    })
    .abort_handle()
}

/// The largest frame the fake accepts, as the engine: it reads worker sockets with
/// tungstenite's defaults, and drops a connection that sends a longer frame.
pub const MAX_FRAME_BYTES: usize = 16 << 20;
/// The largest message, likewise.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

fn ws_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .max_message_size(Some(MAX_MESSAGE_BYTES))
}

async fn serve(shared: Arc<Shared>, stream: TcpStream, accepted_at: Instant) {
    let _ = stream.set_nodelay(true);
    let mut path = String::from("/");
    // The error type is tungstenite's handshake response, which the callback must return.
    #[allow(clippy::result_large_err)]
    let callback = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        path = request.uri().path().to_string();
        Ok(response)
    };
    let Ok(ws) =
        tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(ws_config())).await
    else {
        return;
    };
    if path.starts_with("/otel") {
        shared.lock().otel_connections += 1;
        shared.bump();
        let mut ws = ws;
        while let Some(frame) = ws.next().await {
            match frame {
                Ok(Message::Binary(bytes)) => shared.lock().telemetry.push(bytes.to_vec()),
                Ok(Message::Text(text)) => shared.lock().telemetry.push(text.as_bytes().to_vec()),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        return;
    }

    let (tx, mut rx) = mpsc::unbounded_channel();
    let (conn, hello) = {
        let mut st = shared.lock();
        st.next_conn += 1;
        let conn = st.next_conn;
        let worker_id = uuid_like(KIND_WORKER, conn);
        let reattach_token = uuid_like(KIND_TOKEN, conn);
        let hello = json!({
            "type": "workerregistered",
            "worker_id": worker_id,
            "reattach_token": reattach_token,
        });
        st.conns.insert(
            conn,
            Conn {
                info: ConnectionInfo {
                    id: conn,
                    path,
                    worker_id,
                    reattach_token,
                    open: true,
                    ready: None,
                    frames: Vec::new(),
                    sent: Vec::new(),
                    accepted_at,
                    received_at: Vec::new(),
                },
                tx,
            },
        );
        (conn, hello)
    };
    shared.bump();

    let (mut sink, mut source) = ws.split();
    let mut alive = write_frame(&shared, conn, &mut sink, hello).await;
    while alive {
        tokio::select! {
            outgoing = rx.recv() => match outgoing {
                Some(Outgoing::Frame(frame)) => {
                    alive = write_frame(&shared, conn, &mut sink, frame).await;
                }
                Some(Outgoing::Close) | None => {
                    let _ = tokio::time::timeout(Duration::from_millis(200), sink.close()).await;
                    alive = false;
                }
            },
            incoming = source.next() => match incoming {
                Some(Ok(Message::Text(text))) => handle_text(&shared, conn, text.as_str()),
                Some(Ok(Message::Binary(bytes))) => {
                    if is_telemetry(&bytes) {
                        shared.lock().telemetry.push(bytes.to_vec());
                    } else {
                        handle_text(&shared, conn, &String::from_utf8_lossy(&bytes));
                    }
                }
                // Ping, Pong, Close: tungstenite answers pings and the close handshake itself.
                Some(Ok(_)) => {}
                Some(Err(_)) | None => alive = false,
            },
        }
    }
    drop(sink);
    drop(source);
    disconnect(&shared, conn);
}

async fn write_frame<S>(shared: &Shared, conn: u64, sink: &mut S, frame: Value) -> bool
where
    S: futures_util::Sink<Message> + Unpin,
{
    let text = frame.to_string();
    {
        let mut st = shared.lock();
        let record = !st.forget_history;
        if record && let Some(c) = st.conns.get_mut(&conn) {
            c.info.sent.push(frame);
        }
    }
    sink.send(Message::Text(text.into())).await.is_ok()
}

fn disconnect(shared: &Shared, conn: u64) {
    let mut st = shared.lock();
    if let Some(c) = st.conns.get_mut(&conn) {
        c.info.open = false;
    }
    let stopped: Vec<String> = st
        .pending
        .iter()
        .filter(|(_, p)| p.connection() == conn)
        .map(|(id, _)| id.clone())
        .collect();
    for invocation_id in stopped {
        let stopped = ErrorBody::new("invocation_stopped", "Invocation stopped");
        match st.pending.remove(&invocation_id) {
            Some(Pending::Test { reply, .. }) => {
                let _ = reply.send(Err(stopped));
            }
            Some(Pending::Relay {
                caller,
                function_id,
                ..
            }) => {
                st.send_to(
                    caller,
                    json!({
                        "type": "invocationresult",
                        "invocation_id": invocation_id,
                        "function_id": function_id,
                        "error": stopped.to_value(),
                    }),
                );
            }
            Some(Pending::Discard { .. }) | None => {}
        }
    }
    st.functions.retain(|_, f| f.connection != conn);
    st.trigger_types.retain(|_, t| t.connection != conn);
    st.worker_triggers.retain(|_, t| t.connection != conn);
    // The engine drops the bindings a connection made and tells their providers.
    let owned: Vec<String> = st
        .subscriptions
        .iter()
        .filter(|(_, s)| s.owner == Some(conn))
        .map(|(id, _)| id.clone())
        .collect();
    for id in owned {
        st.withdraw(&id);
    }
    for subscription in st.subscriptions.values_mut() {
        if subscription.delivered_to == Some(conn) {
            subscription.delivered_to = None;
        }
    }
    drop(st);
    shared.bump();
}

fn str_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn opt_str(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

fn opt_value(value: &Value, key: &str) -> Option<Value> {
    value.get(key).filter(|v| !v.is_null()).cloned()
}

fn result_frame(
    invocation_id: &str,
    function_id: &str,
    outcome: Result<Value, ErrorBody>,
) -> Value {
    let mut frame = Map::new();
    frame.insert("type".into(), json!("invocationresult"));
    frame.insert("invocation_id".into(), json!(invocation_id));
    frame.insert("function_id".into(), json!(function_id));
    match outcome {
        Ok(result) => frame.insert("result".into(), result),
        Err(error) => frame.insert("error".into(), error.to_value()),
    };
    Value::Object(frame)
}

/// A canned closure to run once the state lock is released.
struct Deferred {
    handler: Handler,
    data: Value,
    invocation_id: String,
    function_id: String,
}

fn handle_text(shared: &Shared, conn: u64, text: &str) {
    let frame: Value =
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
    let deferred = {
        let mut st = shared.lock();
        if !st.forget_history {
            st.frames.push(frame.clone());
            if let Some(c) = st.conns.get_mut(&conn) {
                c.info.frames.push(frame.clone());
                c.info.received_at.push(Instant::now());
            }
        }
        handle_frame(&mut st, conn, &frame)
    };
    if let Some(d) = deferred {
        let outcome = match catch_unwind(AssertUnwindSafe(|| (d.handler)(d.data))) {
            Ok(Ok(result)) => Ok(result),
            Ok(Err((code, message))) => Err(ErrorBody::new(code, message)),
            Err(_) => Err(ErrorBody::new(
                "fake_engine_handler_panicked",
                format!("the respond_with closure for {} panicked", d.function_id),
            )),
        };
        shared.lock().send_to(
            conn,
            result_frame(&d.invocation_id, &d.function_id, outcome),
        );
    }
    shared.bump();
}

fn handle_frame(st: &mut State, conn: u64, frame: &Value) -> Option<Deferred> {
    let kind = frame
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "ping" => {
            st.send_to(conn, json!({"type": "pong"}));
        }
        "registerfunction" => {
            let function = RegisteredFunction {
                connection: conn,
                id: str_field(frame, "id"),
                description: opt_str(frame, "description"),
                request_format: opt_value(frame, "request_format"),
                response_format: opt_value(frame, "response_format"),
                metadata: opt_value(frame, "metadata"),
                invocation: opt_value(frame, "invocation"),
            };
            *st.registration_counts
                .entry(function.id.clone())
                .or_default() += 1;
            st.functions.insert(function.id.clone(), function);
        }
        "unregisterfunction" => {
            let id = str_field(frame, "id");
            st.functions.remove(&id);
            st.unregistered_functions.push(id);
        }
        "registertriggertype" => {
            let trigger_type = RegisteredTriggerType {
                connection: conn,
                id: str_field(frame, "id"),
                description: str_field(frame, "description"),
                trigger_request_format: opt_value(frame, "trigger_request_format"),
                call_request_format: opt_value(frame, "call_request_format"),
                namespace: opt_str(frame, "namespace"),
            };
            let type_id = trigger_type.id.clone();
            st.trigger_types.insert(type_id.clone(), trigger_type);
            // Deliver the bindings parked for this type.
            let parked: Vec<Value> = st
                .subscriptions
                .iter_mut()
                .filter(|(_, s)| s.trigger_type == type_id && s.delivered_to != Some(conn))
                .map(|(id, s)| {
                    s.delivered_to = Some(conn);
                    s.frame(id)
                })
                .collect();
            for registertrigger in parked {
                st.send_to(conn, registertrigger);
            }
        }
        "unregistertriggertype" => {
            st.unregistered_trigger_types.push(str_field(frame, "id"));
        }
        "registertrigger" => {
            let binding = WorkerTrigger {
                connection: conn,
                id: str_field(frame, "id"),
                trigger_type: str_field(frame, "trigger_type"),
                function_id: str_field(frame, "function_id"),
                config: frame.get("config").cloned().unwrap_or(Value::Null),
                metadata: opt_value(frame, "metadata"),
                namespace: opt_str(frame, "namespace"),
                trigger_namespace: opt_str(frame, "trigger_namespace"),
            };
            // As the engine: forward the binding to the provider of its type, or park it.
            let subscription = Subscription {
                trigger_type: binding.trigger_type.clone(),
                function_id: binding.function_id.clone(),
                config: binding.config.clone(),
                metadata: binding.metadata.clone(),
                delivered_to: None,
                owner: Some(conn),
            };
            let id = binding.id.clone();
            st.worker_triggers.insert(id.clone(), binding);
            st.subscriptions.insert(id.clone(), subscription);
            st.deliver(&id);
        }
        "unregistertrigger" => {
            let id = str_field(frame, "id");
            st.worker_triggers.remove(&id);
            if st
                .subscriptions
                .get(&id)
                .is_some_and(|s| s.owner == Some(conn))
            {
                st.withdraw(&id);
            }
            st.unregistered_triggers.push(UnregisteredTrigger {
                connection: conn,
                id,
                trigger_type: opt_str(frame, "trigger_type"),
            });
        }
        "triggerregistrationresult" => {
            let result = RegistrationResult {
                connection: conn,
                id: str_field(frame, "id"),
                trigger_type: str_field(frame, "trigger_type"),
                function_id: str_field(frame, "function_id"),
                error: opt_value(frame, "error").map(|e| ErrorBody::from_value(&e)),
            };
            if let Some(error) = &result.error
                && let Some(refused) = st.subscriptions.remove(&result.id)
                && let Some(subscriber) = refused.owner
            {
                // The engine passes a refusal back to the connection that made the binding.
                st.send_to(
                    subscriber,
                    json!({
                        "type": "triggerregistrationresult",
                        "id": result.id,
                        "trigger_type": result.trigger_type,
                        "function_id": result.function_id,
                        "error": error.to_value(),
                    }),
                );
            }
            if let Some(waiter) = st.subscription_waiters.remove(&result.id) {
                let _ = waiter.send(result.error.clone());
            }
            st.registration_results.push(result);
        }
        "reattach" => {
            let previous_worker_id = str_field(frame, "previous_worker_id");
            let reattach_token = opt_str(frame, "reattach_token");
            let previous = st
                .conns
                .values()
                .find(|c| {
                    c.info.id != conn
                        && c.info.id > st.session_floor
                        && c.info.worker_id == previous_worker_id
                        && Some(&c.info.reattach_token) == reattach_token.as_ref()
                })
                .map(|c| c.info.id);
            // The engine retires the previous connection when the token matches.
            if let Some(previous) = previous
                && let Some(c) = st.conns.get(&previous)
                && c.info.open
            {
                let _ = c.tx.send(Outgoing::Close);
            }
            st.reattaches.push(Reattach {
                connection: conn,
                previous_worker_id,
                reattach_token,
                matched: previous.is_some(),
            });
        }
        "invokefunction" => return handle_invoke(st, conn, frame),
        "invocationresult" => {
            let invocation_id = str_field(frame, "invocation_id");
            let function_id = str_field(frame, "function_id");
            let result = opt_value(frame, "result");
            let error = opt_value(frame, "error").map(|e| ErrorBody::from_value(&e));
            if !st.forget_history {
                st.results.push(InvocationResult {
                    connection: conn,
                    invocation_id: invocation_id.clone(),
                    function_id: function_id.clone(),
                    result: result.clone(),
                    error: error.clone(),
                });
            }
            let outcome = match error {
                Some(error) => Err(error),
                None => Ok(result.unwrap_or(Value::Null)),
            };
            match st.pending.remove(&invocation_id) {
                Some(Pending::Test { reply, .. }) => {
                    let _ = reply.send(outcome);
                }
                Some(Pending::Relay { caller, .. }) => {
                    st.send_to(caller, result_frame(&invocation_id, &function_id, outcome));
                }
                Some(Pending::Discard { .. }) | None => {}
            }
        }
        // pong, registerservice, unknown types: recorded as frames only.
        _ => {}
    }
    None
}

fn handle_invoke(st: &mut State, conn: u64, frame: &Value) -> Option<Deferred> {
    let function_id = str_field(frame, "function_id");
    let data = frame.get("data").cloned().unwrap_or(Value::Null);
    let metadata = opt_value(frame, "metadata");
    let namespace = opt_str(frame, "namespace");
    let action = opt_value(frame, "action");

    let Some(invocation_id) = opt_str(frame, "invocation_id") else {
        if function_id == WORKERS_REGISTER {
            if let Some(c) = st.conns.get_mut(&conn) {
                c.info.ready = Some(data.clone());
            }
            st.ready_history.push(data);
            return None;
        }
        // A fire. If a worker registered the target, deliver it there like the engine does.
        if let Some(owner) = st.function_owner(&function_id) {
            let delivery_id = st.fresh_id(KIND_INVOCATION);
            let mut delivery = json!({
                "type": "invokefunction",
                "invocation_id": delivery_id,
                "function_id": function_id,
                "data": data,
            });
            if let Some(metadata) = &metadata {
                delivery["metadata"] = metadata.clone();
            }
            st.pending
                .insert(delivery_id, Pending::Discard { connection: owner });
            st.send_to(owner, delivery);
        }
        if !st.forget_history {
            st.fires.push(Fire {
                connection: conn,
                function_id,
                data,
                metadata,
                namespace,
                action,
            });
        }
        return None;
    };

    if !st.forget_history {
        st.calls.push(Call {
            connection: conn,
            invocation_id: invocation_id.clone(),
            function_id: function_id.clone(),
            data: data.clone(),
            metadata: metadata.clone(),
            namespace,
            action,
        });
    }

    let reply = |st: &State, outcome: Result<Value, ErrorBody>| {
        st.send_to(conn, result_frame(&invocation_id, &function_id, outcome));
    };
    match st.responders.get(&function_id).cloned() {
        Some(Responder::Value(result)) => reply(st, Ok(result)),
        Some(Responder::Error(error)) => reply(st, Err(error)),
        Some(Responder::Never) => {}
        Some(Responder::With(handler)) => {
            return Some(Deferred {
                handler,
                data,
                invocation_id: invocation_id.clone(),
                function_id: function_id.clone(),
            });
        }
        None if function_id == WORKERS_REGISTER => {
            if let Some(c) = st.conns.get_mut(&conn) {
                c.info.ready = Some(data.clone());
            }
            st.ready_history.push(data);
            reply(st, Ok(json!({"success": true})));
        }
        None if st.configuration.is_some() && configuration::provides(&function_id) => {
            if let Some(outcome) =
                configuration::call(st, conn, &invocation_id, &function_id, &data)
            {
                reply(st, outcome);
            }
        }
        None => match st.function_owner(&function_id) {
            Some(owner) => {
                let mut forward = json!({
                    "type": "invokefunction",
                    "invocation_id": invocation_id,
                    "function_id": function_id,
                    "data": data,
                });
                if let Some(metadata) = metadata {
                    forward["metadata"] = metadata;
                }
                st.pending.insert(
                    invocation_id.clone(),
                    Pending::Relay {
                        connection: owner,
                        caller: conn,
                        function_id: function_id.clone(),
                    },
                );
                st.send_to(owner, forward);
            }
            None => reply(
                st,
                Err(ErrorBody::new(
                    "function_not_found",
                    format!("Function {function_id} not found"),
                )),
            ),
        },
    }
    None
}
