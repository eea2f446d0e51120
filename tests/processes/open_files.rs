//! The binary under a low open-file limit: a hard limit below what it needs stops it at once,
//! naming the limit to raise; a low soft limit under a higher hard one is raised, and the
//! command runs as usual.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use test_support::common::Tree;

/// The hard limit on open files this test runs under.
fn hard_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(got, 0);
    limit.rlim_max
}

/// `list skills` over the tree, started with these open-file limits.
fn list_skills_with(tree: &Tree, soft: u64, hard: u64) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_iii-directory"));
    command
        .env("III_COMPOSE_DIR", tree.base())
        .env_remove("RUST_LOG")
        .current_dir(std::env::temp_dir())
        .args(["list", "skills"]);
    // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    command.output().expect("run iii-directory")
}

#[test]
fn a_hard_open_file_limit_too_low_stops_at_once_and_says_which_limit_to_raise() {
    let tree = Tree::new();
    tree.write("skills/deploy.md", "# Deploy\n\nShip it.\n");
    let out = list_skills_with(&tree, 20, 20);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("may open only 20 files") && stderr.contains("ulimit -n"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_low_soft_open_file_limit_is_raised_to_the_hard_one() {
    let hard = hard_limit();
    if hard < 256 {
        eprintln!("skipped: the hard open-file limit here is {hard}; raise it to run this test");
        return;
    }
    let tree = Tree::new();
    tree.write("skills/deploy.md", "# Deploy\n\nShip it.\n");
    let out = list_skills_with(&tree, 12, hard);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("deploy"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
