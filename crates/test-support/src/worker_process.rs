//! The real `iii-directory` binary as a child process, for the wire tests (`worker`, `search`,
//! `downloads`, `load`): started against a URL on a Compose folder with extra environment, its
//! stderr kept in a file, stopped with SIGTERM (a clean exit expected), and killed by its own
//! handle if a test fails first.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::Instant;

/// How long a clean shutdown after SIGTERM may take.
pub const STOP_WITHIN: Duration = Duration::from_secs(5);

/// The `iii-directory` binary cargo built for the running integration test or benchmark.
///
/// Cargo names it to them at compile time only (`CARGO_BIN_EXE_iii-directory`), and this crate
/// is compiled apart from them; it puts the binary in the profile's folder (`target/debug/`),
/// the parent of the `deps/` folder the test binaries run from.
pub fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the running test binary");
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("iii-directory"))
        .expect("a test binary runs from target/<profile>/deps/");
    assert!(
        binary.is_file(),
        "{} is missing (cargo builds it for the integration tests and benchmarks; \
         the test binary is {})",
        binary.display(),
        exe.display()
    );
    binary
}

pub struct WorkerProcess {
    child: Child,
    log: PathBuf,
    _logs: TempDir,
}

impl WorkerProcess {
    /// `iii-directory --url URL [--config CONFIG]` with `III_COMPOSE_DIR=compose`, telemetry
    /// off, `RUST_LOG=info`, the model download pointed at a closed port, and `env` on top, in order (a value of `None` removes the
    /// variable).
    pub fn spawn(
        url: &str,
        compose: &Path,
        config: Option<&Path>,
        env: &[(&str, Option<&str>)],
    ) -> WorkerProcess {
        let logs = tempfile::tempdir().expect("temp dir");
        let log = logs.path().join("stderr.log");
        let mut command = Command::new(binary());
        command.arg("--url").arg(url);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        command
            .env("III_COMPOSE_DIR", compose)
            .env("OTEL_ENABLED", "false")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("III_URL")
            .env_remove("III_WORKER_NAME")
            .env_remove("III_NAMESPACE")
            .env_remove("III_DIRECTORY_UI_DIR")
            // The model download (on by default) goes to a closed loopback port, never to
            // the network: it fails at once, and search ranks lexically.
            .env("III_DIRECTORY_MODEL_URL", "http://127.0.0.1:9");
        for (key, value) in env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("create the stderr log"))
            .spawn()
            .expect("start the iii-directory binary");
        WorkerProcess {
            child,
            log,
            _logs: logs,
        }
    }

    /// The process id (for `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A memory figure of the worker from `/proc/<pid>/status` (`VmRSS`, `VmHWM`, …), in
    /// bytes; 0 when it cannot be read.
    pub fn memory_bytes(&self, field: &str) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }

    /// The exit status if the worker has exited, without waiting.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("wait for the worker")
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `result`'s value, or a failure that names `what` and shows the worker's stderr (what
    /// went wrong on the worker's side is usually there).
    pub fn expect<T, E: std::fmt::Display>(&self, what: &str, result: Result<T, E>) -> T {
        result.unwrap_or_else(|e| panic!("{what}: {e}\nworker stderr:\n{}", self.stderr()))
    }

    /// Waits until the worker's stderr contains `needle`; returns the whole stderr.
    pub async fn wait_stderr(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.stderr();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "the worker's stderr never said {needle:?} within {timeout:?}; it said:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGTERM and expects a successful exit within [`STOP_WITHIN`].
    pub async fn stop(mut self) {
        let pid = self.pid();
        assert!(self.sigterm(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + STOP_WITHIN;
        loop {
            if let Some(status) = self.try_wait() {
                assert!(
                    status.success(),
                    "the worker exited with {status} after SIGTERM; stderr:\n{}",
                    self.stderr()
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the worker did not exit within {STOP_WITHIN:?} of SIGTERM; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// For a `Drop`: if the worker still runs, SIGTERM, up to [`STOP_WITHIN`] for it to exit
    /// (blocking), then SIGKILL. Checks nothing.
    pub fn terminate(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.sigterm();
            let deadline = std::time::Instant::now() + STOP_WITHIN;
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// `kill -TERM <pid>`; whether it was sent.
    fn sigterm(&self) -> bool {
        Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        // A test that failed before `stop`: end the child it started, by its own handle.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
