//! A loopback stand-in for the workers registry: plain HTTP on `127.0.0.1:<port>`, one thread
//! per connection, canned replies by path, and a record of every request (path, query,
//! User-Agent) so tests can count requests per leg and check what was sent.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::http::{Request, Server, read_request, write_response};

/// How the fake answers a path.
#[derive(Clone, Debug)]
pub enum Reply {
    Json(u16, Value),
    /// A body as given (malformed JSON, HTML, …).
    Raw(u16, Vec<u8>),
    /// Waits, then answers (a client with a shorter timeout gives up first).
    Slow(Duration, Box<Reply>),
}

#[derive(Default)]
struct State {
    replies: HashMap<String, Reply>,
    requests: Vec<Request>,
}

pub struct FakeRegistry {
    server: Server,
    state: Arc<Mutex<State>>,
}

impl FakeRegistry {
    pub fn start() -> FakeRegistry {
        let state = Arc::new(Mutex::new(State::default()));
        let served = state.clone();
        FakeRegistry {
            server: Server::start(move |stream| serve(stream, &served)),
            state,
        }
    }

    /// `http://127.0.0.1:<port>` (what `registry_url` is set to; a trailing `/` is fine too).
    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn reply(&self, path: &str, reply: Reply) {
        self.state
            .lock()
            .expect("state")
            .replies
            .insert(path.to_string(), reply);
    }

    pub fn json(&self, path: &str, body: Value) {
        self.reply(path, Reply::Json(200, body));
    }

    /// Serves `files` (path → content) as worker `name`'s bundle.
    pub fn bundle(&self, name: &str, files: &[(&str, &str)]) {
        let skills: Vec<Value> = files
            .iter()
            .map(|(path, content)| json!({ "path": path, "content": content }))
            .collect();
        self.json(
            &format!("/w/{name}/skills"),
            json!({ "name": name, "version": "1.0.0", "skills": skills }),
        );
    }

    /// Serves `files` as worker `name`'s bundle at `version` (asked as `?version=<version>`),
    /// and as what the tag `latest` answers from now on: a registry with several versions.
    pub fn publish(&self, name: &str, version: &str, files: &[(String, String)]) {
        let skills: Vec<Value> = files
            .iter()
            .map(|(path, content)| json!({ "path": path, "content": content }))
            .collect();
        let body = json!({ "name": name, "version": version, "skills": skills });
        let path = format!("/w/{name}/skills");
        self.json(&format!("{path}?version={version}"), body.clone());
        self.json(&format!("{path}?version=latest"), body);
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().expect("state").requests.clone()
    }

    /// Requests to exactly this path.
    pub fn hits(&self, path: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }

    pub fn clear(&self) {
        self.state.lock().expect("state").requests.clear();
    }
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(request) = read_request(&mut stream) else {
        return;
    };
    let reply = {
        let mut state = state.lock().expect("state");
        state.requests.push(request.clone());
        // A reply for this version first (`publish`), else the path's.
        let versioned = request
            .param("version")
            .and_then(|v| state.replies.get(&format!("{}?version={v}", request.path)));
        versioned
            .or_else(|| state.replies.get(&request.path))
            .cloned()
    };
    let mut reply = reply.unwrap_or(Reply::Json(404, json!({ "error": "not found" })));
    while let Reply::Slow(delay, inner) = reply {
        std::thread::sleep(delay);
        reply = *inner;
    }
    let json = vec![("Content-Type".to_string(), "application/json".to_string())];
    let _ = match reply {
        Reply::Json(status, body) => {
            write_response(&mut stream, status, &json, body.to_string().as_bytes())
        }
        Reply::Raw(status, body) => write_response(&mut stream, status, &json, &body),
        Reply::Slow(..) => unreachable!("unwrapped above"),
    };
    let _ = stream.flush();
}
