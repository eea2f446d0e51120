//! The binary as an operator runs it (scripts, containers, supervisors): output that cannot be
//! written, Ctrl-C, a process that cannot start threads.

use test_support::common::Tree;

use std::fs;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

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

/// `command` started with SIGINT ignored, as a script's background job is (`cmd &` without job
/// control).
fn with_sigint_ignored(command: &mut Command) -> &mut Command {
    // SAFETY: signal(2) between fork and exec changes only the child's disposition, which exec
    // keeps for an ignored signal.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        })
    }
}

fn interrupt(child: &Child) {
    // SAFETY: kill(2) with the pid of a child we have not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
}

/// Waits for `child` to end, up to `within`.
fn ended(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn ctrl_c_stops_a_worker_in_its_first_second_even_started_with_sigint_ignored() {
    let tree = sample_tree();
    let mut worker = with_sigint_ignored(&mut iii(&tree))
        .args(["--url", "ws://127.0.0.1:1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the worker");
    // Still waiting for the engine's stored configuration (1.5 s without an engine).
    std::thread::sleep(Duration::from_millis(200));
    interrupt(&worker);
    let status = ended(&mut worker, Duration::from_secs(10));
    assert_eq!(
        status.and_then(|status| status.signal()),
        Some(libc::SIGINT),
        "the worker did not stop on Ctrl-C: {status:?}"
    );
}

/// Ctrl-C at moments spread over a `reindex --from-scratch` (deleting the index, creating its
/// files, reading, committing): each time the reindex ends at once, and the next command
/// serves the whole tree.
#[test]
fn ctrl_c_stops_a_reindex_at_any_moment_and_the_next_command_serves_the_whole_tree() {
    const SKILLS: usize = 3000;
    const MOMENTS: u64 = 10;
    let tree = Tree::new();
    for i in 0..SKILLS {
        tree.write(
            &format!("skills/ns{}/s{i}.md", i % 30),
            &format!("---\ndescription: Skill {i}.\n---\n# Skill {i}\n\nBody {i}.\n"),
        );
    }
    for moment in 0..MOMENTS {
        let mut reindex = with_sigint_ignored(&mut iii(&tree))
            .args(["reindex", "--from-scratch", "--no-embed"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn reindex");
        std::thread::sleep(Duration::from_millis(15 * moment));
        let status = interrupted(&mut reindex);
        // A late Ctrl-C may find the reindex done.
        assert!(
            status.signal() == Some(libc::SIGINT) || (moment > 0 && status.success()),
            "at moment {moment}: {status}"
        );
        let listed = list_skills(&tree, &format!("at moment {moment}"));
        let ours = listed["skills"]
            .as_array()
            .expect("skills")
            .iter()
            .filter(|skill| skill["id"].as_str().is_some_and(|id| id.starts_with("ns")))
            .count();
        assert_eq!(ours, SKILLS, "at moment {moment}");
    }
}

/// Ctrl-C the moment a first index's file appears, while it is being created: the next command
/// builds the index and serves the tree (a file killed in its making is not taken for
/// someone else's).
#[test]
fn ctrl_c_while_a_first_index_is_created_leaves_nothing_the_next_command_refuses() {
    let tree = sample_tree();
    let index = tree.config().paths.index_path;
    for cycle in 0..10 {
        for file in iii_directory::index_files(&index) {
            let _ = fs::remove_file(file);
        }
        let mut reindex = iii(&tree)
            .args(["reindex", "--no-embed"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn reindex");
        while !index.exists() && reindex.try_wait().expect("try_wait").is_none() {
            std::hint::spin_loop();
        }
        interrupt(&reindex);
        let _ = reindex.wait();
        list_skills(&tree, &format!("cycle {cycle}"));
    }
}

/// `list skills --json` after an interrupted command (`when` says which): it must succeed, and
/// answers the list.
fn list_skills(tree: &Tree, when: &str) -> serde_json::Value {
    let output = iii(tree)
        .args(["list", "skills", "--json"])
        .output()
        .expect("list");
    assert!(output.status.success(), "{when}: {}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// Sends Ctrl-C again and again until `child` ends: the first may come before the process
/// takes Ctrl-C back from the ignored state it started in.
fn interrupted(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        interrupt(child);
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every thread the process starts asks for a stack this large (`RUST_MIN_STACK`), which no
/// address space has room for: a process that cannot start threads, as under a small
/// `ulimit -v`, made deterministic.
const NO_ROOM_FOR_A_STACK: &str = "1099511627776";

#[test]
fn a_reindex_that_cannot_start_its_threads_says_so_without_a_panic() {
    let tree = sample_tree();
    let output = iii(&tree)
        .args(["reindex", "--from-scratch", "--no-embed"])
        .env("RUST_MIN_STACK", NO_ROOM_FOR_A_STACK)
        .output()
        .expect("run reindex");
    let errors = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{errors}");
    assert!(!errors.contains("panicked"), "{errors}");
    assert!(
        errors.contains("could not start a thread") && errors.contains("raise the limit"),
        "{errors}"
    );
}
