//! A loopback fake of the iii engine for wire tests of the worker (protocol notes §5.3).
//!
//! [`FakeEngine::start`] binds `127.0.0.1:0` and speaks the engine side of the worker protocol
//! over WebSocket:
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
//!   `function_not_found`. [`FakeEngine::hold_calls`] holds back the calls to a function that
//!   would be routed, until [`FakeEngine::release_calls`] routes them.
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
//!
//! The parts, by topic: `records` (what tests read back), `state` (the shared state behind one
//! lock), `connection` (a socket's task: handshake, frames in and out, the disconnect),
//! `frames` (one frame read and dispatched), `registration` (functions and trigger types),
//! `triggers` (bindings forwarded between subscribers and providers), `invocations` (calls,
//! fires and results in both directions), `canned` (canned answers), `configuration` (the
//! configuration worker model), `restarts` (closed sockets, reattaches, an engine restart),
//! `history` (snapshots of what was seen) and `waiting` (the `wait_*` helpers).

mod canned;
pub mod configuration;
mod connection;
mod frames;
mod history;
mod invocations;
mod records;
mod registration;
mod restarts;
mod state;
mod triggers;
mod waiting;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::AbortHandle;

pub use connection::MAX_FRAME_BYTES;
pub use records::{
    Call, ConnectionInfo, ErrorBody, Fire, InvocationResult, Reattach, RegisteredFunction,
    RegisteredTriggerType, RegistrationResult, UnregisteredTrigger, WorkerTrigger,
};
use state::{Shared, State};

/// Default deadline of [`FakeEngine::invoke`] and [`FakeEngine::subscribe`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The fire-and-forget call with which a worker announces its metadata ("worker ready").
pub const WORKERS_REGISTER: &str = "engine::workers::register";

/// Error code the fake itself uses when a test-side wait runs out.
pub const FAKE_TIMEOUT: &str = "fake_engine_timeout";

/// Error code the fake itself uses when there is no worker to talk to.
pub const FAKE_NOT_CONNECTED: &str = "fake_engine_not_connected";

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
        let accept_task = connection::accept_loop(shared.clone(), listener);
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
}
