//! A socket's task. The accept loop takes each TCP connection; `/otel` sockets are counted and
//! drained (their frames kept for a test to search); any other path is a worker session: the
//! fake sends `workerregistered` at once, writes the frames queued for the connection, reads
//! the worker's (so tungstenite answers WS pings) and hands each to `frames`. When the socket
//! ends, what the connection owned goes with it, as in the engine.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::frames::{self, result_frame};
use super::records::{ConnectionInfo, ErrorBody};
use super::state::{Conn, KIND_TOKEN, KIND_WORKER, Outgoing, Pending, Shared, State, uuid_like};

/// The largest frame the fake accepts, as the engine: it reads worker sockets with
/// tungstenite's defaults, and drops a connection that sends a longer frame.
pub const MAX_FRAME_BYTES: usize = 16 << 20;
/// The largest message, likewise.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

fn is_telemetry(bytes: &[u8]) -> bool {
    bytes.starts_with(b"OTLP") || bytes.starts_with(b"MTRC") || bytes.starts_with(b"LOGS")
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .max_message_size(Some(MAX_MESSAGE_BYTES))
}

pub(super) fn accept_loop(shared: Arc<Shared>, listener: TcpListener) -> AbortHandle {
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

async fn serve(shared: Arc<Shared>, stream: TcpStream, accepted_at: Instant) {
    let _ = stream.set_nodelay(true);
    let Some((ws, path)) = handshake(stream).await else {
        return;
    };
    if path.starts_with("/otel") {
        drain_telemetry(&shared, ws).await;
        return;
    }
    let (conn, hello, rx) = open_session(&shared, path, accepted_at);
    shared.bump();
    pump(&shared, conn, ws, hello, rx).await;
    disconnect(&shared, conn);
}

/// The WebSocket handshake, keeping the request's path.
async fn handshake(stream: TcpStream) -> Option<(WebSocketStream<TcpStream>, String)> {
    let mut path = String::from("/");
    // The error type is tungstenite's handshake response, which the callback must return.
    #[allow(clippy::result_large_err)]
    let callback = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        path = request.uri().path().to_string();
        Ok(response)
    };
    let ws = tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(ws_config()))
        .await
        .ok()?;
    Some((ws, path))
}

/// An `/otel` socket: counted, and every frame kept until it closes.
async fn drain_telemetry(shared: &Shared, mut ws: WebSocketStream<TcpStream>) {
    shared.lock().otel_connections += 1;
    shared.bump();
    while let Some(frame) = ws.next().await {
        match frame {
            Ok(Message::Binary(bytes)) => shared.lock().telemetry.push(bytes.to_vec()),
            Ok(Message::Text(text)) => shared.lock().telemetry.push(text.as_bytes().to_vec()),
            Ok(_) => {}
            Err(_) => break,
        }
    }
}

/// Numbers a new worker session and records it; returns its number, its `workerregistered`
/// hello (a fresh worker id and reattach token) and the queue of frames to write to it.
fn open_session(
    shared: &Shared,
    path: String,
    accepted_at: Instant,
) -> (u64, Value, mpsc::UnboundedReceiver<Outgoing>) {
    let (tx, rx) = mpsc::unbounded_channel();
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
    (conn, hello, rx)
}

/// Writes the hello, then the frames queued for the session, and reads the worker's, until
/// either side closes.
async fn pump(
    shared: &Shared,
    conn: u64,
    ws: WebSocketStream<TcpStream>,
    hello: Value,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
) {
    let (mut sink, mut source) = ws.split();
    let mut alive = write_frame(shared, conn, &mut sink, hello).await;
    while alive {
        tokio::select! {
            outgoing = rx.recv() => match outgoing {
                Some(Outgoing::Frame(frame)) => {
                    alive = write_frame(shared, conn, &mut sink, frame).await;
                }
                Some(Outgoing::Close) | None => {
                    let _ = tokio::time::timeout(Duration::from_millis(200), sink.close()).await;
                    alive = false;
                }
            },
            incoming = source.next() => match incoming {
                Some(Ok(message)) => receive(shared, conn, message),
                Some(Err(_)) | None => alive = false,
            },
        }
    }
}

/// One message from a worker: telemetry is kept, anything else is a frame.
fn receive(shared: &Shared, conn: u64, message: Message) {
    match message {
        Message::Text(text) => frames::handle_text(shared, conn, text.as_str()),
        Message::Binary(bytes) => {
            if is_telemetry(&bytes) {
                shared.lock().telemetry.push(bytes.to_vec());
            } else {
                frames::handle_text(shared, conn, &String::from_utf8_lossy(&bytes));
            }
        }
        // Ping, Pong, Close: tungstenite answers pings and the close handshake itself.
        _ => {}
    }
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

/// The socket ended: the invocations pending on it stop, and what it owned goes.
fn disconnect(shared: &Shared, conn: u64) {
    let mut st = shared.lock();
    if let Some(c) = st.conns.get_mut(&conn) {
        c.info.open = false;
    }
    stop_pending(&mut st, conn);
    forget_owned(&mut st, conn);
    drop(st);
    shared.bump();
}

/// Engine→worker invocations pending on a connection that went away fail with
/// `invocation_stopped`, to the test or the calling worker that waits for them.
fn stop_pending(st: &mut State, conn: u64) {
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
                    result_frame(&invocation_id, &function_id, Err(stopped)),
                );
            }
            Some(Pending::Discard { .. }) | None => {}
        }
    }
}

/// What a connection registered goes with it; the bindings it made are withdrawn from their
/// providers, and those delivered to it wait for the next provider of their type.
fn forget_owned(st: &mut State, conn: u64) {
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
}
