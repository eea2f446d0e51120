//! The real `iii-directory` binary as a child process, for wire tests outside `worker.rs`
//! (`console.rs`, `browser.rs`): started against a URL on a Compose folder with extra
//! environment, its stderr kept in a file, stopped with SIGTERM (a clean exit expected), and
//! killed by its own handle if a test fails first.
#![allow(dead_code)]

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::Instant;

/// How long a clean shutdown after SIGTERM may take.
pub const STOP_WITHIN: Duration = Duration::from_secs(5);

pub struct WorkerProcess {
    child: Child,
    log: PathBuf,
    _logs: TempDir,
}

impl WorkerProcess {
    /// `iii-directory --url URL [--config CONFIG]` with `III_COMPOSE_DIR=compose`, telemetry
    /// off, and `env` on top (a value of `None` removes the variable).
    pub fn spawn(
        url: &str,
        compose: &Path,
        config: Option<&Path>,
        env: &[(&str, Option<&str>)],
    ) -> WorkerProcess {
        let logs = tempfile::tempdir().expect("temp dir");
        let log = logs.path().join("stderr.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_iii-directory"));
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
            .env_remove("III_DIRECTORY_UI_DIR");
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

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and expects a successful exit within [`STOP_WITHIN`].
    pub async fn stop(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(&pid)
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + STOP_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the worker") {
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
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
