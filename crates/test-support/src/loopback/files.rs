//! A loopback file server for the embedding model's download: plain HTTP on
//! `127.0.0.1:<port>`, files by path, `Range: bytes=N-` answered with 206, and, once per path
//! when asked, a body cut short after some bytes (a connection that drops mid-file) or a range
//! answered from the file's start (a server that resumes somewhere else). It records each
//! request's path and `Range` header.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::http::{Server, read_request, write_response};

#[derive(Default)]
struct State {
    files: HashMap<String, Arc<Vec<u8>>>,
    /// Path → bytes to send before dropping the connection, for its next request only.
    cut: HashMap<String, usize>,
    /// Paths whose next ranged request is answered 206 from byte 0.
    from_start: Vec<String>,
    requests: Vec<(String, Option<String>)>,
}

pub struct FileServer {
    server: Server,
    state: Arc<Mutex<State>>,
}

impl FileServer {
    pub fn start() -> FileServer {
        let state = Arc::new(Mutex::new(State::default()));
        let served = state.clone();
        FileServer {
            server: Server::start(move |stream| serve(stream, &served)),
            state,
        }
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn file(&self, path: &str, content: Vec<u8>) {
        let mut state = self.state.lock().expect("state");
        state.files.insert(path.to_owned(), Arc::new(content));
    }

    /// The next request for `path` gets only `bytes` of its body, then the connection closes.
    pub fn cut_next(&self, path: &str, bytes: usize) {
        let mut state = self.state.lock().expect("state");
        state.cut.insert(path.to_owned(), bytes);
    }

    /// The next request for `path` that asks for a range gets 206 with the whole file, its
    /// `Content-Range` saying it starts at byte 0.
    pub fn range_from_start_next(&self, path: &str) {
        let mut state = self.state.lock().expect("state");
        state.from_start.push(path.to_owned());
    }

    /// Every request so far: its path and its `Range` header.
    pub fn requests(&self) -> Vec<(String, Option<String>)> {
        self.state.lock().expect("state").requests.clone()
    }
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(request) = read_request(&mut stream) else {
        return;
    };
    let range = request.header("range").map(str::to_owned);
    let (file, cut, from_start) = {
        let mut state = state.lock().expect("state");
        state.requests.push((request.path.clone(), range.clone()));
        let cut = state.cut.remove(&request.path);
        let listed = state.from_start.iter().position(|p| *p == request.path);
        let from_start = match listed {
            Some(at) if range.is_some() => {
                state.from_start.remove(at);
                true
            }
            _ => false,
        };
        (state.files.get(&request.path).cloned(), cut, from_start)
    };
    let Some(file) = file else {
        let _ = write_response(&mut stream, 404, &[], b"not found");
        return;
    };
    let asked = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    // A range from past the end is refused, as HTTP servers do.
    if asked.is_some_and(|n| n >= file.len()) {
        let headers = [(
            "Content-Range".to_owned(),
            format!("bytes */{}", file.len()),
        )];
        let _ = write_response(&mut stream, 416, &headers, b"");
        return;
    }
    let start = if from_start { asked.map(|_| 0) } else { asked };
    let body = &file[start.unwrap_or(0)..];
    let content_range = start.map(|n| format!("bytes {n}-{}/{}", file.len() - 1, file.len()));
    let Some(cut) = cut else {
        let headers: Vec<(String, String)> = content_range
            .map(|r| ("Content-Range".to_owned(), r))
            .into_iter()
            .collect();
        let _ = write_response(
            &mut stream,
            if start.is_some() { 206 } else { 200 },
            &headers,
            body,
        );
        return;
    };
    // Announce the whole length, send part of it, and close.
    let status = match &content_range {
        Some(range) => format!("206 Partial Content\r\nContent-Range: {range}"),
        None => "200 OK".to_owned(),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body[..cut.min(body.len())]);
    let _ = stream.flush();
}
