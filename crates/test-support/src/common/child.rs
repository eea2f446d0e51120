//! This test binary, re-executed as a child process that runs one `#[ignore]`d test, for the
//! tests that kill a child at a random moment or limit its resources (`processes::crash`,
//! `downloads::crash`, `processes::disk_full`): the child prints whole lines, the parent reads
//! them.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdout, Command};
use std::thread::JoinHandle;

/// The full path in its test binary of the test `name` written in the module `module` (that
/// module's `module_path!()`): the harness names a test by its module path without the crate.
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}

/// `<this test binary> --exact <test> --nocapture --ignored --test-threads=1` with `RUST_LOG`
/// unset: the ignored test `test` (its full path in the binary, see [`test_path`]) alone,
/// printing as it goes.
pub fn command(test: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command
        .args([
            "--exact",
            test,
            "--nocapture",
            "--ignored",
            "--test-threads=1",
        ])
        .env_remove("RUST_LOG");
    command
}

/// In the child: prints `line` and its newline, flushed at once, so a kill cuts at most the
/// line being written.
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes()).expect("stdout");
    out.write_all(b"\n").expect("stdout");
    out.flush().expect("stdout");
}

/// In the parent: reads the child's stdout on a thread until it closes, handing each whole
/// line to `on_line` as it comes, and returns every whole line. A last line without its newline
/// was cut by the kill (never fully printed) and is left out. The test harness may print
/// before the child's own lines.
pub fn read_lines(
    stdout: ChildStdout,
    mut on_line: impl FnMut(&str) + Send + 'static,
) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        while reader.read_until(b'\n', &mut buf).unwrap_or(0) > 0 {
            if buf.last() != Some(&b'\n') {
                break;
            }
            let line = String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned();
            on_line(&line);
            lines.push(line);
            buf.clear();
        }
        lines
    })
}
