//! Git repositories the tests make, served over loopback HTTPS by git's own smart-HTTP CGI
//! (`git http-backend`) behind a self-signed certificate made here (rcgen) and served with
//! rustls. Clients trust it through git's environment (`GIT_SSL_CAINFO`), so the download's
//! URL guard (https, ssh and git@ only) is exercised as users meet it, never relaxed.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::http::{Request, read_request, write_response};

/// The `git` program, with an environment free of the machine's own configuration.
pub fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A working repository under `<root>/work/<name>`, published as a bare repository at
/// `<root>/served/<name>.git` by [`Repo::publish`].
pub struct Repo {
    pub work: PathBuf,
    pub served: PathBuf,
}

impl Repo {
    pub fn init(root: &Path, name: &str) -> Repo {
        let work = root.join("work").join(name);
        std::fs::create_dir_all(&work).expect("mkdir");
        git(&work, &["init", "--quiet", "--initial-branch=main"]);
        Repo {
            work,
            served: root.join("served").join(format!("{name}.git")),
        }
    }

    pub fn write(&self, rel: &str, text: &str) -> &Repo {
        let path = self.work.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
        self
    }

    /// Gives a written file the mode git records as executable (100755).
    pub fn executable(&self, rel: &str) -> &Repo {
        use std::os::unix::fs::PermissionsExt;
        let path = self.work.join(rel);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        self
    }

    pub fn symlink(&self, rel: &str, target: &str) -> &Repo {
        let path = self.work.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, path).expect("symlink");
        self
    }

    pub fn remove(&self, rel: &str) -> &Repo {
        std::fs::remove_file(self.work.join(rel)).expect("remove");
        self
    }

    /// Commits everything and (re)publishes the bare repository the server serves.
    pub fn publish(&self, message: &str) {
        git(&self.work, &["add", "--all"]);
        git(
            &self.work,
            &["commit", "--quiet", "--allow-empty", "-m", message],
        );
        if self.served.exists() {
            std::fs::remove_dir_all(&self.served).expect("remove the old bare copy");
        }
        std::fs::create_dir_all(self.served.parent().expect("parent")).expect("mkdir");
        git(
            self.served.parent().expect("parent"),
            &[
                "clone",
                "--quiet",
                "--bare",
                self.work.to_str().expect("utf8"),
                self.served.to_str().expect("utf8"),
            ],
        );
    }
}

/// How the server treats requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Serves the repositories.
    Serve,
    /// Accepts TLS connections and never answers (a clone that must time out).
    Hang,
    /// Answers every request `401` asking for a password (a private or missing repository on
    /// a forge), which makes git ask for credentials.
    Unauthorized,
}

/// The HTTPS server over `<root>/served`, and the CA file that makes git trust it.
pub struct GitServer {
    port: u16,
    pub ca_file: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl GitServer {
    pub fn start(root: &Path, behaviour: Behaviour) -> GitServer {
        let served = root.join("served");
        std::fs::create_dir_all(&served).expect("mkdir");
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("certificate parameters");
        let cert = params.self_signed(&key).expect("self-signed certificate");
        let ca_file = root.join("loopback-ca.pem");
        std::fs::write(&ca_file, cert.pem()).expect("write the CA file");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .expect("server certificate");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the git server");
        let port = listener.local_addr().expect("address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (config, served) = (config.clone(), served.clone());
                std::thread::spawn(move || serve(stream, config, &served, behaviour));
            }
        });
        GitServer {
            port,
            ca_file,
            stop,
            thread: Some(thread),
        }
    }

    /// `https://127.0.0.1:<port>/<name>.git`.
    pub fn url(&self, name: &str) -> String {
        format!("https://127.0.0.1:{}/{name}.git", self.port)
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(tcp: TcpStream, config: Arc<rustls::ServerConfig>, served: &Path, behaviour: Behaviour) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(connection) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    let Ok(request) = read_request(&mut tls) else {
        return;
    };
    if behaviour == Behaviour::Hang {
        // Keep the connection open, answer nothing, until the client gives up.
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    let (status, headers, body) = match behaviour {
        Behaviour::Unauthorized => (
            401,
            vec![(
                "WWW-Authenticate".to_string(),
                "Basic realm=\"private\"".to_string(),
            )],
            Vec::new(),
        ),
        _ => http_backend(&request, served),
    };
    let _ = write_response(&mut tls, status, &headers, &body);
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// Runs `git http-backend` for one request, CGI style, and splits its output.
fn http_backend(request: &Request, served: &Path) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", served)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", &request.path)
        .env("QUERY_STRING", &request.query)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(content_type) = request.header("content-type") {
        cgi.env("CONTENT_TYPE", content_type);
    }
    for (name, value) in &request.headers {
        cgi.env(
            format!("HTTP_{}", name.to_ascii_uppercase().replace('-', "_")),
            value,
        );
    }
    let mut child = cgi.spawn().expect("run git http-backend");
    let mut stdin = child.stdin.take().expect("stdin");
    let body = request.body.clone();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let output = child.wait_with_output().expect("git http-backend output");
    let _ = writer.join();
    let out = output.stdout;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|at| (at, 2)));
    let Some((at, gap)) = split else {
        return (500, Vec::new(), out);
    };
    let mut status = 200;
    let mut headers = Vec::new();
    for line in String::from_utf8_lossy(&out[..at]).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("status") {
            status = value
                .split_whitespace()
                .next()
                .and_then(|code| code.parse().ok())
                .unwrap_or(500);
        } else if !name.eq_ignore_ascii_case("content-length") {
            headers.push((name.to_string(), value.to_string()));
        }
    }
    (status, headers, out[at + gap..].to_vec())
}
