//! Connections going away: the test closing the worker's sockets, a worker's `reattach` after
//! a reconnect (a token the fake issued retires the connection it was issued to), and an
//! engine restart on the same port ([`FakeEngine::go_away`], [`FakeEngine::come_back`]), which
//! forgets what the engine held in memory.

use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::FakeEngine;
use super::connection::accept_loop;
use super::frames::{opt_str, str_field};
use super::records::Reattach;
use super::state::{Outgoing, State};

impl FakeEngine {
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

    /// The engine stops, as a process that exits: the listener closes (connects are refused
    /// until [`FakeEngine::come_back`]), every worker socket is dropped, and what the engine
    /// held in memory is forgotten: the bindings made with [`FakeEngine::subscribe`] (their
    /// subscribers must bind again), the configuration schemas (stored values stay, as on
    /// disk), held configuration reads, and the reattach tokens it issued. Returns how many
    /// sockets were open.
    pub async fn go_away(&self) -> Result<usize, String> {
        self.stop_listening().await?;
        let open = self.connections().iter().filter(|c| c.open).count();
        if open > 0 {
            self.close_connection().await?;
        }
        self.shared.lock().forget_session();
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

    /// Stops the accept loop and waits until it is gone.
    async fn stop_listening(&self) -> Result<(), String> {
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
        Ok(())
    }
}

impl State {
    /// What an engine restart forgets: the reattach tokens of the connections so far, the
    /// bindings tests made (and their waits), the configuration schemas and held reads, and
    /// the calls held back (their callers' sockets are gone).
    fn forget_session(&mut self) {
        self.restarts += 1;
        self.held.clear();
        self.session_floor = self.next_conn;
        let bound_by_tests: Vec<String> = self
            .subscriptions
            .iter()
            .filter(|(_, s)| s.owner.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in bound_by_tests {
            self.subscriptions.remove(&id);
        }
        self.subscription_waiters.clear();
        if let Some(store) = self.configuration.as_mut() {
            store.restart();
        }
    }
}

/// `reattach`: recorded, with whether its id and token are those the fake gave an earlier
/// connection of this engine session; that connection, if still open, is retired.
pub(super) fn on_reattach(st: &mut State, conn: u64, frame: &Value) {
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
