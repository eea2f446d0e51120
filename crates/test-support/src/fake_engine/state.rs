//! The fake's shared state: every connection, what each registered, the bindings it forwards,
//! the engine→worker invocations waiting for a result, and the history tests read; behind one
//! mutex, with a watch channel bumped on every change so that waits never spin.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;

use super::configuration;
use super::records::{
    Call, ConnectionInfo, ErrorBody, Fire, InvocationResult, Reattach, RegisteredFunction,
    RegisteredTriggerType, RegistrationResult, UnregisteredTrigger, WorkerTrigger,
};

pub(super) const KIND_WORKER: u32 = 0xfa4e_0001;
pub(super) const KIND_TOKEN: u32 = 0xfa4e_0002;
pub(super) const KIND_INVOCATION: u32 = 0xfa4e_0003;

/// A UUID-shaped id (the SDK parses invocation ids as UUIDs) built from a counter.
pub(super) fn uuid_like(kind: u32, n: u64) -> String {
    format!("{kind:08x}-0000-4000-8000-{n:012x}")
}

pub(super) type Handler = Arc<dyn Fn(Value) -> Result<Value, (String, String)> + Send + Sync>;

#[derive(Clone)]
pub(super) enum Responder {
    Value(Value),
    Error(ErrorBody),
    Never,
    With(Handler),
}

/// An engine→worker invocation waiting for its `invocationresult`.
pub(super) enum Pending {
    /// Sent by a test through [`super::FakeEngine::invoke`].
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
    pub(super) fn connection(&self) -> u64 {
        match self {
            Pending::Test { connection, .. }
            | Pending::Relay { connection, .. }
            | Pending::Discard { connection } => *connection,
        }
    }
}

/// A binding the fake (as the engine) forwards to the provider of its trigger type.
pub(super) struct Subscription {
    pub(super) trigger_type: String,
    pub(super) function_id: String,
    pub(super) config: Value,
    pub(super) metadata: Option<Value>,
    pub(super) delivered_to: Option<u64>,
    /// The connection that made the binding with its own `registertrigger`; `None` for one
    /// made by the test through [`super::FakeEngine::subscribe`].
    pub(super) owner: Option<u64>,
}

impl Subscription {
    pub(super) fn frame(&self, id: &str) -> Value {
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

pub(super) enum Outgoing {
    Frame(Value),
    Close,
}

pub(super) struct Conn {
    pub(super) info: ConnectionInfo,
    pub(super) tx: mpsc::UnboundedSender<Outgoing>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) next_conn: u64,
    pub(super) next_id: u64,
    pub(super) conns: BTreeMap<u64, Conn>,
    pub(super) otel_connections: usize,
    /// Every telemetry frame received (OTLP spans, metrics, logs), as sent.
    pub(super) telemetry: Vec<Vec<u8>>,
    pub(super) frames: Vec<Value>,
    pub(super) functions: BTreeMap<String, RegisteredFunction>,
    pub(super) registration_counts: BTreeMap<String, usize>,
    pub(super) trigger_types: BTreeMap<String, RegisteredTriggerType>,
    pub(super) worker_triggers: BTreeMap<String, WorkerTrigger>,
    pub(super) registration_results: Vec<RegistrationResult>,
    pub(super) unregistered_functions: Vec<String>,
    pub(super) unregistered_triggers: Vec<UnregisteredTrigger>,
    pub(super) unregistered_trigger_types: Vec<String>,
    pub(super) reattaches: Vec<Reattach>,
    pub(super) ready_history: Vec<Value>,
    pub(super) fires: Vec<Fire>,
    pub(super) calls: Vec<Call>,
    pub(super) results: Vec<InvocationResult>,
    pub(super) responders: HashMap<String, Responder>,
    /// The functions whose calls are held back ([`super::FakeEngine::hold_calls`]).
    pub(super) holding: BTreeSet<String>,
    /// The calls held back, in the order they came, until released.
    pub(super) held: Vec<Call>,
    pub(super) pending: HashMap<String, Pending>,
    pub(super) subscriptions: BTreeMap<String, Subscription>,
    pub(super) subscription_waiters: HashMap<String, oneshot::Sender<Option<ErrorBody>>>,
    pub(super) tasks: Vec<AbortHandle>,
    /// False after `keep_history(false)`: history is not recorded.
    pub(super) forget_history: bool,
    /// The configuration worker model, when turned on.
    pub(super) configuration: Option<configuration::Store>,
    /// Connections numbered up to this one belong to an earlier engine session: their
    /// reattach tokens are unknown to this one.
    pub(super) session_floor: u64,
    /// How many times the engine went away.
    pub(super) restarts: u64,
}

impl State {
    pub(super) fn fresh_id(&mut self, kind: u32) -> String {
        self.next_id += 1;
        uuid_like(kind, self.next_id)
    }

    pub(super) fn is_open(&self, conn: u64) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.info.open)
    }

    /// Queue `frame` for the connection; false if it is closed or unknown.
    pub(super) fn send_to(&self, conn: u64, frame: Value) -> bool {
        match self.conns.get(&conn) {
            Some(c) if c.info.open => c.tx.send(Outgoing::Frame(frame)).is_ok(),
            _ => false,
        }
    }

    pub(super) fn function_owner(&self, function_id: &str) -> Option<u64> {
        self.functions
            .get(function_id)
            .map(|f| f.connection)
            .filter(|c| self.is_open(*c))
    }

    pub(super) fn trigger_type_owner(&self, trigger_type: &str) -> Option<u64> {
        self.trigger_types
            .get(trigger_type)
            .map(|t| t.connection)
            .filter(|c| self.is_open(*c))
    }

    /// The newest open worker connection.
    pub(super) fn active(&self) -> Option<u64> {
        self.conns
            .values()
            .rev()
            .find(|c| c.info.open)
            .map(|c| c.info.id)
    }

    pub(super) fn ready_data(&self) -> Option<Value> {
        self.conns
            .values()
            .rev()
            .filter(|c| c.info.open)
            .find_map(|c| c.info.ready.clone())
    }

    /// A short description of what the fake has seen, for error messages.
    pub(super) fn summary(&self) -> String {
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

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) changed: watch::Sender<u64>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}
