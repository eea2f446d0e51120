//! The binary as an operator runs it (scripts, containers, supervisors): output that cannot be
//! written, Ctrl-C, a process that cannot start threads.

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

use crate::cli::{iii, sample_tree};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `command` with its stdout on `file`, run to its end.
fn run_into(mut command: Command, file: fs::File) -> Output {
    command.stdout(file).output().expect("run iii-directory")
}

/// `command` started with its stdout closed (`>&-`).
fn run_with_stdout_closed(mut command: Command) -> Output {
    // SAFETY: close(2) between fork and exec touches only the child's descriptor table.
    unsafe {
        command.pre_exec(|| {
            libc::close(libc::STDOUT_FILENO);
            Ok(())
        });
    }
    command.output().expect("run iii-directory")
}

#[test]
fn output_that_cannot_be_written_fails_the_command_with_the_reason() {
    let tree = sample_tree();
    let commands: [&[&str]; 5] = [
        &["list", "skills", "--json"],
        &["index", "--json"],
        &["check", "--json"],
        &["bundles", "verify"],
        &["get", "skill", "mailer/send-email", "--raw"],
    ];
    for args in commands {
        let full = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let mut command = iii(&tree);
        command.args(args);
        let output = run_into(command, full);
        assert!(!output.status.success(), "{args:?} > /dev/full exited 0");
        assert!(
            stderr(&output).contains("could not write the output to stdout (No space left"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let mut command = iii(&tree);
    command.args(["list", "skills", "--json"]);
    let output = run_with_stdout_closed(command);
    assert!(!output.status.success(), "list with stdout closed exited 0");
    assert!(
        stderr(&output).contains("could not write the output to stdout (Bad file descriptor"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_reader_that_stops_reading_ends_the_command_quietly() {
    let tree = sample_tree();
    let mut child = iii(&tree)
        .args(["list", "skills", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // As `| head -0` does: the pipe is closed before the command writes to it.
    drop(child.stdout.take());
    let mut errors = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut errors)
        .expect("read stderr");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}: {errors}");
    assert_eq!(errors, "");
}
