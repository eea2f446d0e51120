//! The worker's connection to the engine as the worker sees it: every WebSocket session (the
//! first and each reconnect) is noticed, numbered and timed, the last connection error is kept,
//! and `directory::index::status` reports it under `connection`.
//!
//! How a (re)connection is noticed. The SDK's only public signal is `get_connection_state()`,
//! and it lags: after a drop the state stays `Connected` through the SDK's fixed 2 s retry sleep,
//! and is `Reconnecting` only while the next connect attempt runs (well under a millisecond on
//! loopback). A poll therefore misses nearly every fast drop-and-return. iii-sdk 0.23 has no
//! connection event or channel (checked in its source: the state is a private `Mutex`;
//! `wait_until_registered` returns at once after the first registration, whose id survives
//! reconnects; the `Notify` it waits on is private). What the SDK does do,
//! every time, is log `iii connected` (target `iii_sdk::iii`) on its connection thread, right
//! after the WebSocket opens and before it replays a single registration. [`layer`] is a
//! `tracing` layer, with its own filter so the log level does not hide it, that turns that event
//! into a new connection synchronously, on that thread; the worker binary installs it. The SDK's
//! connection warnings (`failed to connect; retrying`, `websocket receive error`, …) become the
//! last error. Without the layer (an embedder that did not install it) [`poll`] watches the
//! state instead; it catches only returns after an outage longer than its interval, and says
//! so in the status (`detection: "state_polling"`).
//!
//! So the worker depends on the wording of the SDK's log messages ([`SDK_CONNECTED`] and
//! [`SDK_CONNECTION_ERRORS`]): the test `the_pinned_sdk_logs_the_messages_matched_here` reads
//! the pinned SDK's source (located with `cargo metadata`) and fails when a message is reworded,
//! dropped or added to its connection loop. Bumping `iii-sdk` means running it and updating the
//! lists (or, if the SDK has grown a connection event by then, using that instead).
//!
//! Hooks registered with [`Link::on_reset`] run when a connection is known to be gone: with the
//! layer, synchronously at the next connection's start (before the SDK's replay, so before the
//! engine can forward anything on the new connection); when polling, as soon as the state is
//! seen to leave `Connected`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use iii_sdk::IIIClient;
use iii_sdk::runtime::IIIConnectionState;
use serde_json::{Value, json};
use tokio::sync::watch;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::Context;

use crate::locks;
use crate::time::Stamp;

/// The SDK's log target, and the message it logs each time a WebSocket session opens.
const SDK_TARGET: &str = "iii_sdk";
const SDK_CONNECTED: &str = "iii connected";
/// The SDK's warnings that mean the connection failed or was lost (SDK 0.23 `run_connection`,
/// `send_ws` and `fail_registration_fatal`).
const SDK_CONNECTION_ERRORS: &[&str] = &[
    "failed to connect; retrying",
    "connect attempt timed out; retrying",
    "websocket receive error",
    "send failed; reconnecting",
    "failed to send reattach; reconnecting",
    "failed to flush queue",
    "failed to flush post-drain queue",
    "no frames from engine within idle window; forcing reconnect",
    "keepalive ping failed; reconnecting",
    "keepalive ping timed out; reconnecting",
    "websocket send timed out; treating link as dead",
    "worker registration rejected; not reconnecting",
];
/// What a drop the SDK did not log looks like in the status (the engine closed the socket).
const CLOSED_WITHOUT_ERROR: &str = "the connection closed (the engine went away or closed it)";
/// How often [`poll`] looks at the SDK's state when the layer is not installed.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// Set once [`layer`] is part of the process's subscriber.
static LAYER_INSTALLED: AtomicBool = AtomicBool::new(false);
/// The links the layer reports to.
static LINKS: Mutex<Vec<Weak<Link>>> = Mutex::new(Vec::new());

/// How new connections are noticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detection {
    /// From the SDK's own `iii connected` event (exact, synchronous).
    SdkEvents,
    /// By polling `get_connection_state()` (misses drops shorter than the SDK's retry).
    StatePolling,
}

impl Detection {
    fn name(self) -> &'static str {
        match self {
            Detection::SdkEvents => "sdk_events",
            Detection::StatePolling => "state_polling",
        }
    }

    fn current() -> Detection {
        if LAYER_INSTALLED.load(Ordering::SeqCst) {
            Detection::SdkEvents
        } else {
            Detection::StatePolling
        }
    }
}

type Hook = Box<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Facts {
    /// Sessions opened so far (the first connection is 1).
    connections: u64,
    connected_since: Option<Stamp>,
    /// Whether an error was recorded since the current session opened.
    error_since_connect: bool,
    last_error: Option<(String, Stamp)>,
}

/// One client's connection history.
pub struct Link {
    url: String,
    facts: Mutex<Facts>,
    /// The number of the newest connection; a setup runner waits on it.
    newest: watch::Sender<u64>,
    on_reset: Mutex<Vec<Hook>>,
}

impl Link {
    /// A link for the client that connects to `url`, reported to by [`layer`]. Create it before
    /// the client starts connecting, or the first connection may go unseen.
    pub fn watch(url: &str) -> Arc<Link> {
        let link = Arc::new(Link {
            url: url.to_string(),
            facts: Mutex::new(Facts::default()),
            newest: watch::channel(0).0,
            on_reset: Mutex::new(Vec::new()),
        });
        let mut links = locks::lock(&LINKS);
        links.retain(|l| l.strong_count() > 0);
        links.push(Arc::downgrade(&link));
        link
    }

    /// Runs `hook` whenever a connection is known to be gone (see the module doc). It must be
    /// quick: with the layer it runs on the SDK's connection thread.
    pub fn on_reset(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.hooks().push(Box::new(hook));
    }

    /// Follows the number of the newest connection (0 before the first).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.newest.subscribe()
    }

    /// A new session opened: numbers it, and on a reconnect first runs the reset hooks.
    fn connected(&self) {
        let number = {
            let mut facts = self.lock();
            if facts.connections > 0 && !facts.error_since_connect {
                facts.last_error = Some((CLOSED_WITHOUT_ERROR.to_string(), Stamp::now()));
            }
            facts.connections += 1;
            facts.connected_since = Some(Stamp::now());
            facts.error_since_connect = false;
            facts.connections
        };
        if number > 1 {
            tracing::warn!(
                url = %self.url,
                connection = number,
                "the iii engine connection was lost and is back; setting up again"
            );
            self.reset();
        }
        self.newest.send_replace(number);
    }

    /// The session is gone (seen by polling).
    fn lost(&self) {
        {
            let mut facts = self.lock();
            facts.connected_since = None;
        }
        self.reset();
    }

    fn error(&self, message: String) {
        let mut facts = self.lock();
        facts.error_since_connect = true;
        facts.last_error = Some((message, Stamp::now()));
    }

    fn reset(&self) {
        for hook in self.hooks().iter() {
            hook();
        }
    }

    /// The `connection` object of `directory::index::status`, without `setup` (added by the
    /// setup module).
    pub fn status(&self, state: IIIConnectionState) -> Value {
        let facts = self.lock();
        let connected = state == IIIConnectionState::Connected;
        json!({
            "state": state_name(state),
            "url": self.url,
            "connected_since": facts.connected_since.filter(|_| connected).map(Stamp::rfc3339),
            "connections": facts.connections,
            "reconnections": facts.connections.saturating_sub(1),
            "last_error": facts.last_error.as_ref().map(|(message, at)| json!({
                "message": message,
                "at": at.rfc3339(),
            })),
            "detection": Detection::current().name(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Facts> {
        locks::lock(&self.facts)
    }

    fn hooks(&self) -> std::sync::MutexGuard<'_, Vec<Hook>> {
        locks::lock(&self.on_reset)
    }
}

/// Whether [`layer`] is installed (else reconnections are only polled for).
pub fn layer_installed() -> bool {
    Detection::current() == Detection::SdkEvents
}

fn state_name(state: IIIConnectionState) -> &'static str {
    match state {
        IIIConnectionState::Disconnected => "disconnected",
        IIIConnectionState::Connecting => "connecting",
        IIIConnectionState::Connected => "connected",
        IIIConnectionState::Reconnecting => "reconnecting",
        IIIConnectionState::Failed => "failed",
    }
}

/// The links an SDK event about `address` concerns (all of them when it names none).
fn links_for(address: Option<&str>) -> Vec<Arc<Link>> {
    let links = locks::lock(&LINKS);
    links
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|l| address.is_none_or(|a| a == l.url))
        .collect()
}

/// Without [`layer`]: watches the SDK's state and turns its transitions into connections and
/// losses. Returns at once when the layer is installed (it reports everything itself).
pub async fn poll(iii: IIIClient, link: Arc<Link>) {
    let mut was_connected = false;
    loop {
        if Detection::current() == Detection::SdkEvents {
            return;
        }
        let connected = iii.get_connection_state() == IIIConnectionState::Connected;
        match (was_connected, connected) {
            (false, true) => link.connected(),
            (true, false) => link.lost(),
            _ => {}
        }
        was_connected = connected;
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// The `tracing` layer that reports the SDK's connection events to every [`Link`]; add it to
/// the process's subscriber beside the log output. It filters for itself (the SDK's target at
/// `info`), so it sees those events whatever the log level.
pub fn layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    SdkEvents.with_filter(Targets::new().with_target(SDK_TARGET, Level::INFO))
}

struct SdkEvents;

impl<S: Subscriber> Layer<S> for SdkEvents {
    fn on_layer(&mut self, _subscriber: &mut S) {
        LAYER_INSTALLED.store(true, Ordering::SeqCst);
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message == SDK_CONNECTED {
            for link in links_for(fields.address.as_deref()) {
                link.connected();
            }
        } else if *event.metadata().level() <= Level::WARN
            && SDK_CONNECTION_ERRORS.contains(&fields.message.as_str())
        {
            let message = match &fields.error {
                Some(error) => format!("{}: {error}", fields.message),
                None => fields.message.clone(),
            };
            for link in links_for(None) {
                link.error(message.clone());
            }
        }
    }
}

/// The fields of an SDK event that matter here.
#[derive(Default)]
struct Fields {
    message: String,
    address: Option<String>,
    error: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field.name(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field.name(), format!("{value:?}"));
    }
}

impl Fields {
    fn record(&mut self, name: &str, value: String) {
        match name {
            "message" => self.message = value,
            "address" => self.address = Some(value),
            "error" => self.error = Some(value),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(url: &str) -> Arc<Link> {
        Link::watch(url)
    }

    #[test]
    fn connections_are_numbered_and_a_reconnect_resets() {
        let link = link("ws://test-numbering");
        let resets = Arc::new(Mutex::new(0));
        let counter = resets.clone();
        link.on_reset(move || *counter.lock().unwrap() += 1);
        let newest = link.subscribe();
        link.connected();
        assert_eq!(*newest.borrow(), 1);
        assert_eq!(
            *resets.lock().unwrap(),
            0,
            "the first connection resets nothing"
        );
        link.connected();
        assert_eq!(*newest.borrow(), 2);
        assert_eq!(*resets.lock().unwrap(), 1);
        let status = link.status(IIIConnectionState::Connected);
        assert_eq!(status["connections"], 2);
        assert_eq!(status["reconnections"], 1);
        assert!(status["connected_since"].is_string());
        assert_eq!(
            status["last_error"]["message"], CLOSED_WITHOUT_ERROR,
            "a drop the SDK did not log is still reported"
        );
    }

    #[test]
    fn an_sdk_error_is_the_last_error_and_not_overwritten_at_the_return() {
        let link = link("ws://test-errors");
        link.connected();
        link.error("failed to connect; retrying: Connection refused".into());
        link.connected();
        let status = link.status(IIIConnectionState::Connected);
        assert_eq!(
            status["last_error"]["message"],
            "failed to connect; retrying: Connection refused"
        );
        assert!(status["last_error"]["at"].is_string());
    }

    #[test]
    fn not_connected_means_no_connected_since() {
        let link = link("ws://test-state");
        link.connected();
        let status = link.status(IIIConnectionState::Reconnecting);
        assert_eq!(status["state"], "reconnecting");
        assert_eq!(status["connected_since"], Value::Null);
        link.lost();
        let status = link.status(IIIConnectionState::Connected);
        assert_eq!(status["connected_since"], Value::Null);
    }

    #[test]
    fn events_reach_only_the_link_of_their_address() {
        let a = link("ws://test-address-a");
        let b = link("ws://test-address-b");
        for l in links_for(Some("ws://test-address-a")) {
            l.connected();
        }
        assert_eq!(*a.subscribe().borrow(), 1);
        assert_eq!(*b.subscribe().borrow(), 0);
    }

    /// The messages the layer matches are the pinned SDK's, word for word, at the levels it
    /// logs them; and every warning of the SDK's connection loop is either one of them or
    /// known not to mean a lost connection. A reworded, dropped or new message fails here
    /// rather than silently breaking the reconnect setup.
    #[test]
    fn the_pinned_sdk_logs_the_messages_matched_here() {
        let source = pinned_sdk_source("src/iii.rs");
        let logged = logged_messages(&source);
        let logged_as = |message: &str| logged.iter().find(|(_, m, _)| m == message);
        let (level, _, args) = logged_as(SDK_CONNECTED).expect("iii-sdk logs its connections");
        assert_eq!(level, "info");
        assert!(args.contains("address ="), "the address field: {args}");
        for message in SDK_CONNECTION_ERRORS {
            assert!(
                logged_as(message).is_some_and(|(level, _, _)| level != "info"),
                "iii-sdk no longer logs {message:?} as a warning"
            );
        }
        // A frame the SDK failed to handle does not end the connection.
        let not_a_lost_connection = ["failed to handle frame"];
        let start = source
            .find("async fn run_connection")
            .expect("run_connection");
        let end = start
            + source[start..]
                .find("\n    fn ")
                .expect("the next function");
        for (level, message, _) in logged_messages(&source[start..end]) {
            if level == "info" {
                continue;
            }
            assert!(
                SDK_CONNECTION_ERRORS.contains(&message.as_str())
                    || not_a_lost_connection.contains(&message.as_str()),
                "iii-sdk's connection loop logs {message:?} ({level}), which this module does \
                 not know: does it mean a lost connection?"
            );
        }
    }

    /// A file of the `iii-sdk` package this crate builds with, as `cargo metadata` locates it.
    fn pinned_sdk_source(file: &str) -> String {
        let run = |program: String, args: &[&str]| {
            let output = std::process::Command::new(&program)
                .args(args)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .unwrap_or_else(|e| panic!("{program}: {e}"));
            assert!(output.status.success(), "{program} {args:?} failed");
            output.stdout
        };
        // This platform's dependencies only: the others may not be downloaded.
        let rustc = run("rustc".into(), &["-vV"]);
        let host = String::from_utf8_lossy(&rustc)
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
            .expect("rustc names its host");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let args = ["metadata", "--format-version", "1", "--offline", "--locked"];
        let stdout = run(cargo, &[&args[..], &["--filter-platform", &host]].concat());
        let metadata: Value = serde_json::from_slice(&stdout).expect("metadata JSON");
        let sdk = metadata["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .find(|p| p["name"] == "iii-sdk")
            .expect("iii-sdk is a dependency");
        assert_eq!(
            sdk["version"], "0.23.0",
            "the SDK this module was checked against"
        );
        let manifest = std::path::Path::new(sdk["manifest_path"].as_str().expect("manifest"));
        let path = manifest.parent().expect("package folder").join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Every `tracing::{info,warn,error}!(…)` of `source`: its level, its message (the last
    /// string literal) and its arguments' text.
    fn logged_messages(source: &str) -> Vec<(String, String, String)> {
        let mut found = Vec::new();
        for level in ["info", "warn", "error"] {
            let head = format!("tracing::{level}!(");
            let mut rest = source;
            while let Some(at) = rest.find(&head) {
                let args = &rest[at + head.len()..];
                let end = closing_paren(args);
                if let Some(message) = last_string_literal(&args[..end]) {
                    found.push((level.to_string(), message, args[..end].to_string()));
                }
                rest = &args[end..];
            }
        }
        found
    }

    /// Where the parenthesis opened just before `text` closes (string contents skipped).
    fn closing_paren(text: &str) -> usize {
        let (mut depth, mut in_string, mut escaped) = (1, false, false);
        for (i, c) in text.char_indices() {
            match (in_string, c) {
                (true, _) if escaped => escaped = false,
                (true, '\\') => escaped = true,
                (true, '"') => in_string = false,
                (true, _) => {}
                (false, '"') => in_string = true,
                (false, '(') => depth += 1,
                (false, ')') if depth == 1 => return i,
                (false, ')') => depth -= 1,
                _ => {}
            }
        }
        text.len()
    }

    fn last_string_literal(args: &str) -> Option<String> {
        let end = args.rfind('"')?;
        let start = args[..end].rfind('"')?;
        Some(args[start + 1..end].to_string())
    }
}
