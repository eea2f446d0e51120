//! `download --repo` through the real binary and real git: repositories made here, served over
//! loopback HTTPS by `git http-backend` behind a certificate git trusts through its own
//! environment (`GIT_SSL_CAINFO`), never through a relaxed URL guard.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::Tree;
use crate::common::tree_state;
use test_support::loopback::git::{Behaviour, GitServer, Repo};

/// A Compose folder for the binary, a folder of repositories with its HTTPS server, and a
/// private temporary folder (`TMPDIR`) in which the clones must not outlive a download.
struct Fixture {
    compose: Tree,
    repos: tempfile::TempDir,
    tmp: tempfile::TempDir,
    server: GitServer,
}

impl Fixture {
    fn new(behaviour: Behaviour) -> Fixture {
        let compose = Tree::new();
        compose.mkdir("skills/iii").mkdir("agents");
        let repos = tempfile::tempdir().expect("temp");
        let server = GitServer::start(repos.path(), behaviour);
        Fixture {
            compose,
            repos,
            tmp: tempfile::tempdir().expect("temp"),
            server,
        }
    }

    /// A fixture serving the repository `skills` with `frontend-design` published at `v1`.
    fn serving_frontend_design() -> Fixture {
        let f = Fixture::new(Behaviour::Serve);
        let repo = f.repo("skills");
        frontend_design(&repo);
        repo.publish("v1");
        f
    }

    fn repo(&self, name: &str) -> Repo {
        Repo::init(self.repos.path(), name)
    }

    fn cli(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_iii-directory"))
            .args(args)
            .env("III_COMPOSE_DIR", self.compose.base())
            .env("GIT_SSL_CAINFO", &self.server.ca_file)
            .env("TMPDIR", self.tmp.path())
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .output()
            .expect("run iii-directory")
    }

    /// `download --repo … --json`, expected to succeed.
    fn download(&self, repo: &str, skill: &str, branch: Option<&str>) -> Value {
        let mut args = vec!["download", "--repo", repo, "--skill", skill, "--json"];
        if let Some(branch) = branch {
            args.extend(["--branch", branch]);
        }
        let out = self.cli(&args);
        assert!(
            out.status.success(),
            "download failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("--json prints the response")
    }

    /// A download that must fail and leave the tree byte for byte as it was; returns stderr.
    fn refused(&self, args: &[&str]) -> String {
        let before = tree_state(self.compose.base());
        let out = self.cli(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{args:?} should fail");
        assert_eq!(
            tree_state(self.compose.base()),
            before,
            "{args:?} changed the tree: {stderr}"
        );
        self.assert_no_clone_left();
        stderr
    }

    fn assert_no_clone_left(&self) {
        let left: Vec<PathBuf> = std::fs::read_dir(self.tmp.path())
            .expect("tmp")
            .map(|e| e.expect("entry").path())
            .collect();
        assert!(left.is_empty(), "temporary clones left behind: {left:?}");
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.compose.path(rel)).expect(rel)
    }
}

fn frontend_design(repo: &Repo) {
    repo.write("README.md", "# Skills\n")
        .write(
            "skills/frontend-design/index.md",
            "# Frontend design\n\nv1\n",
        )
        .write("skills/frontend-design/components.md", "# Components\n")
        .write("skills/frontend-design/layouts/grid.md", "# Grid\n")
        .write(
            "skills/frontend-design/scripts/build.sh",
            "#!/bin/sh\necho build\n",
        )
        .write("skills/frontend-design/.hidden/secret.md", "# hidden\n")
        .write("skills/frontend-design/.env", "TOKEN=1\n")
        .write("skills/frontend-design/prompts/say-hello.md", "# hello\n")
        .write(
            "skills/frontend-design/agents/helper.md",
            "---\nname: H\n---\nx\n",
        )
        .write(
            "skills/frontend-design/system-prompts/designer.md",
            "---\ndescription: Designs.\n---\nYou design.\n",
        )
        .write("skills/other/index.md", "# Another skill\n");
}

/// A file the repository marks executable lands executable (as a checkout gives it), and so
/// does one the repository makes executable later without changing its bytes; the others land
/// as plain files.
#[test]
fn a_repo_files_executable_mode_lands_with_it() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    repo.write("skills/tools/SKILL.md", "# Tools\n")
        .write("skills/tools/scripts/run.sh", "#!/bin/sh\necho run\n")
        .executable("skills/tools/scripts/run.sh")
        .write("skills/tools/scripts/lib.sh", "echo lib\n");
    repo.publish("v1");
    let url = f.server.url("skills");
    let mode = |rel: &str| {
        std::fs::metadata(f.compose.path(&format!("skills/tools/{rel}")))
            .expect("landed")
            .permissions()
            .mode()
    };
    f.download(&url, "tools", None);
    assert_ne!(mode("scripts/run.sh") & 0o100, 0, "run.sh is executable");
    assert_eq!(mode("scripts/lib.sh") & 0o111, 0, "lib.sh is not");
    assert_eq!(mode("SKILL.md") & 0o111, 0, "SKILL.md is not");

    // v2: run.sh changes, lib.sh becomes executable with the same bytes.
    repo.write("skills/tools/scripts/run.sh", "#!/bin/sh\necho run v2\n")
        .executable("skills/tools/scripts/run.sh")
        .executable("skills/tools/scripts/lib.sh");
    repo.publish("v2");
    f.download(&url, "tools", None);
    assert_ne!(
        mode("scripts/run.sh") & 0o100,
        0,
        "the new run.sh is executable"
    );
    assert_ne!(
        mode("scripts/lib.sh") & 0o100,
        0,
        "lib.sh is executable now"
    );
    assert_eq!(mode("SKILL.md") & 0o111, 0, "SKILL.md is still not");
}

#[test]
fn a_repo_skill_lands_with_its_payload_and_without_ignored_paths() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let url = f.server.url("skills");
    let response = f.download(&url, "frontend-design", None);
    assert_eq!(
        response,
        json!({
            "namespace": "frontend-design",
            "skills_written": ["components.md", "index.md", "layouts/grid.md", "scripts/build.sh"],
            "system_prompts_written": ["designer"],
            "agents_written": [],
            "source": {"kind": "repo", "repo": url, "skill": "frontend-design", "branch": "main"},
            "kept_local": [],
            "review": {"executables": ["scripts/build.sh"], "scripts": ["scripts/build.sh"], "hidden": [".env", ".hidden"], "large": []},
        })
    );
    let ns = f.compose.path("skills/frontend-design");
    for rel in [
        "index.md",
        "components.md",
        "layouts/grid.md",
        "scripts/build.sh",
        "system-prompts/designer.md",
    ] {
        assert!(ns.join(rel).is_file(), "{rel}");
    }
    for rel in [".hidden", ".env", "prompts", "agents"] {
        assert!(!ns.join(rel).exists(), "{rel} must not be copied");
    }
    assert!(!f.compose.path("skills/other").exists());
    assert!(
        !f.compose.path("agents/helper.md").exists(),
        "repos never install agents"
    );
    f.assert_no_clone_left();

    // The index is current when the command returns.
    let out = f.cli(&["list", "skills", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).expect("list");
    let ids: Vec<&str> = list["skills"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    for id in [
        "frontend-design",
        "frontend-design/components",
        "frontend-design/layouts/grid",
    ] {
        assert!(ids.contains(&id), "{id}: {ids:?}");
    }

    // A re-pull after an upstream change: overwritten file by file, siblings kept.
    f.compose
        .write("skills/frontend-design/mine.md", "# Mine\n");
    repo.write(
        "skills/frontend-design/index.md",
        "# Frontend design\n\nv2\n",
    )
    .remove("skills/frontend-design/components.md");
    repo.publish("v2");
    let again = f.download(&url, "frontend-design", Some("main"));
    assert_eq!(
        again["skills_written"],
        json!(["index.md", "layouts/grid.md", "scripts/build.sh"])
    );
    assert!(f.read("skills/frontend-design/index.md").contains("v2"));
    assert_eq!(
        f.read("skills/frontend-design/components.md"),
        "# Components\n"
    );
    assert_eq!(f.read("skills/frontend-design/mine.md"), "# Mine\n");
}

#[test]
fn the_summary_says_what_was_written() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let out = f.cli(&[
        "download",
        "--repo",
        &f.server.url("skills"),
        "--skill",
        "frontend-design",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cloning https://127.0.0.1:"),
        "progress: {stderr}"
    );
    assert!(
        stdout.starts_with("downloaded frontend-design from https://127.0.0.1:"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "skill files (4): components.md, index.md, layouts/grid.md, scripts/build.sh"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("system prompts (1): designer"), "{stdout}");
    assert!(stdout.contains("index updated (revision"), "{stdout}");
}

#[test]
fn a_missing_branch_or_skill_folder_changes_nothing() {
    let f = Fixture::new(Behaviour::Serve);
    f.compose
        .write("skills/frontend-design/index.md", "# Existing\n");
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let url = f.server.url("skills");
    let err = f.refused(&[
        "download",
        "--repo",
        &url,
        "--skill",
        "frontend-design",
        "--branch",
        "no-such-branch",
    ]);
    assert!(
        err.contains("git clone --branch no-such-branch exited with"),
        "{err}"
    );
    let err = f.refused(&["download", "--repo", &url, "--skill", "missing-skill"]);
    assert!(err.contains("has no folder skills/missing-skill/"), "{err}");
    let err = f.refused(&[
        "download",
        "--repo",
        &f.server.url("nothing-here"),
        "--skill",
        "x",
    ]);
    assert!(err.contains("exited with"), "{err}");
}

/// No answer shows the temporary clone's path (or the process id in its name).
#[test]
fn errors_never_show_the_temporary_clone() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let url = f.server.url("skills");
    let tmp = f.tmp.path().display().to_string();
    for args in [
        vec!["download", "--repo", &url, "--skill", "missing-skill"],
        vec![
            "download", "--repo", &url, "--skill", "x", "--branch", "nope",
        ],
    ] {
        let err = f.refused(&args);
        assert!(
            !err.contains(&tmp) && !err.contains("iii-directory-clone"),
            "{args:?}: {err}"
        );
    }
}

/// A repo bundle lands only where nothing that is not its own would be replaced or shadowed:
/// the user's file in the namespace, the user's system prompt of the same name elsewhere.
#[test]
fn a_repo_bundle_never_replaces_or_shadows_what_is_not_its_own() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let url = f.server.url("skills");
    f.compose
        .write("skills/frontend-design/layouts/grid.md", "# My grid\n");
    let err = f.refused(&["download", "--repo", &url, "--skill", "frontend-design"]);
    assert!(
        err.contains("D330 conflict: bundle file \"layouts/grid.md\" would replace"),
        "{err}"
    );
    f.compose.remove("skills/frontend-design");
    f.compose.write(
        "skills/system-prompts/designer.md",
        "---\ndescription: The user's designer.\n---\nMine.\n",
    );
    let err = f.refused(&["download", "--repo", &url, "--skill", "frontend-design"]);
    assert!(
        err.contains(
            "bundle file \"system-prompts/designer.md\" is the system prompt \"designer\""
        ),
        "{err}"
    );
    let err = f.refused(&["download", "--repo", &url, "--skill", "system-prompts"]);
    assert!(err.contains("D331 invalid_input"), "{err}");
}

#[test]
fn a_symbolic_link_in_the_skill_folder_refuses_the_bundle() {
    let f = Fixture::new(Behaviour::Serve);
    f.compose.write("skills/linked/index.md", "# Existing\n");
    let secret = f.repos.path().join("secret.md");
    std::fs::write(&secret, "# outside the repository\n").expect("write");
    let repo = f.repo("linked");
    repo.write("skills/linked/index.md", "# Linked\n")
        .symlink("skills/linked/leak.md", secret.to_str().expect("utf8"))
        .symlink("skills/up/escape.md", "../../../../etc/passwd");
    repo.publish("links");
    let url = f.server.url("linked");
    let err = f.refused(&["download", "--repo", &url, "--skill", "linked"]);
    assert!(
        err.contains("skills/linked/leak.md is a symbolic link"),
        "{err}"
    );
    assert!(err.contains("outside the repository"), "{err}");
    let err = f.refused(&["download", "--repo", &url, "--skill", "up"]);
    assert!(err.contains("outside the repository"), "{err}");
    // A link that stays inside the repository is refused too: links are never copied.
    let inside = f.repo("inside");
    inside
        .write("skills/s/index.md", "# S\n")
        .symlink("skills/s/alias.md", "index.md");
    inside.publish("inside");
    let err = f.refused(&[
        "download",
        "--repo",
        &f.server.url("inside"),
        "--skill",
        "s",
    ]);
    assert!(err.contains("inside the repository"), "{err}");
    // The skill folder itself a link.
    let whole = f.repo("whole");
    whole
        .write("elsewhere/index.md", "# E\n")
        .symlink("skills/w", "../elsewhere");
    whole.publish("whole");
    let err = f.refused(&["download", "--repo", &f.server.url("whole"), "--skill", "w"]);
    assert!(err.contains("skills/w is a symbolic link"), "{err}");
}

#[test]
fn guards_refuse_before_git_runs() {
    let f = Fixture::new(Behaviour::Serve);
    for (repo, skill, why) in [
        ("ext::sh -c touch% /tmp/pwned", "s", "transport trick"),
        ("git::https://x/y", "s", "transport trick"),
        (
            "http://127.0.0.1/x.git",
            "s",
            "must start with https://, ssh://, or git@",
        ),
        ("file:///etc", "s", "file:"),
        ("--upload-pack=touch /tmp/x", "s", "argument injection"),
        (
            "https://127.0.0.1/x.git",
            "../../etc",
            "skill may not contain",
        ),
        ("https://127.0.0.1/x.git", ".hidden", "skill may not"),
    ] {
        let (repo_arg, skill_arg) = (format!("--repo={repo}"), format!("--skill={skill}"));
        let err = f.refused(&["download", &repo_arg, &skill_arg]);
        assert!(err.contains(why), "{repo} {skill}: {err}");
        assert!(!err.contains("cloning"), "git ran for {repo}: {err}");
    }
}

/// The ssh command a user set in their git configuration (`core.sshCommand`: a key per host, a
/// jump host) is the one git runs for an ssh URL; the worker's guard against prompts is a
/// session without a terminal, not an ssh command of its own over theirs.
#[test]
fn an_ssh_download_runs_the_ssh_command_the_user_configured() {
    let f = Fixture::new(Behaviour::Serve);
    let called = f.tmp.path().join("ssh-called");
    let ssh = f.tmp.path().join("my-ssh");
    std::fs::write(
        &ssh,
        format!(
            "#!/bin/sh\n\
             if (: </dev/tty) 2>/dev/null; then t=tty; else t=no-tty; fi\n\
             echo \"$t $*\" > '{}'\n\
             exit 255\n",
            called.display()
        ),
    )
    .expect("ssh script");
    std::fs::set_permissions(&ssh, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let gitconfig = f.tmp.path().join("gitconfig");
    std::fs::write(
        &gitconfig,
        format!("[core]\n\tsshCommand = {}\n", ssh.display()),
    )
    .expect("gitconfig");
    let before = tree_state(f.compose.base());
    let mut command = Command::new(env!("CARGO_BIN_EXE_iii-directory"));
    command
        .args([
            "download",
            "--repo",
            "ssh://git@127.0.0.1:1/skills.git",
            "--skill",
            "frontend-design",
        ])
        .env("III_COMPOSE_DIR", f.compose.base())
        .env("TMPDIR", f.tmp.path())
        .env("GIT_CONFIG_GLOBAL", &gitconfig)
        .env_remove("GIT_SSH_COMMAND")
        .env_remove("GIT_SSH")
        .env_remove("RUST_LOG");
    // Run on a terminal of its own, as a person would, so that only git's session keeps ssh
    // from it.
    let terminal = Terminal::open();
    terminal.control(&mut command);
    let out = command.output().expect("run iii-directory");
    drop(terminal);
    assert!(!out.status.success());
    assert_eq!(tree_state(f.compose.base()), before);
    let seen = std::fs::read_to_string(&called).unwrap_or_else(|e| {
        panic!(
            "the configured ssh command was not run ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(seen.contains("127.0.0.1"), "{seen}");
    // Without a terminal of its own, ssh could not have asked anything of a person.
    assert!(seen.starts_with("no-tty "), "{seen}");
}

/// A pseudo-terminal, made the controlling terminal of a command started with it.
struct Terminal {
    master: libc::c_int,
    slave: libc::c_int,
}

impl Terminal {
    fn open() -> Terminal {
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes the two descriptors it opens; the other arguments are null
        // (no name wanted, default settings and size).
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
        Terminal { master, slave }
    }

    /// Starts `command` in a session of its own whose controlling terminal is this one.
    fn control(&self, command: &mut Command) {
        let slave = self.slave;
        // SAFETY: setsid and ioctl are async-signal-safe and touch no memory of the parent.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(command, move || {
                if libc::setsid() == -1 || libc::ioctl(slave, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // SAFETY: the two descriptors openpty gave, closed once.
        unsafe {
            libc::close(self.slave);
            libc::close(self.master);
        }
    }
}

/// A forge that asks for a password (a private or missing repository answers 401) fails the
/// download at once: no program the environment or the user's configuration names to ask for
/// one (`GIT_ASKPASS`, `SSH_ASKPASS`, `core.askPass`) is run, nor anything that would wait for
/// a person until the timeout.
#[test]
fn a_repository_asking_for_a_password_fails_at_once_without_asking_anyone() {
    let f = Fixture::new(Behaviour::Unauthorized);
    // Beside the fixture's TMPDIR, which must hold no clone afterwards.
    let aside = tempfile::tempdir().expect("temp");
    let asked = aside.path().join("asked");
    let askpass = aside.path().join("askpass");
    std::fs::write(
        &askpass,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\necho secret\n",
            asked.display()
        ),
    )
    .expect("askpass script");
    std::fs::set_permissions(
        &askpass,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let gitconfig = aside.path().join("gitconfig");
    std::fs::write(
        &gitconfig,
        format!("[core]\n\taskPass = {}\n", askpass.display()),
    )
    .expect("gitconfig");
    let repo = f.server.url("skills");
    let before = tree_state(f.compose.base());
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_iii-directory"))
        .args(["download", "--repo", &repo, "--skill", "frontend-design"])
        .env("III_COMPOSE_DIR", f.compose.base())
        .env("GIT_SSL_CAINFO", &f.server.ca_file)
        .env("TMPDIR", f.tmp.path())
        .env("GIT_CONFIG_GLOBAL", &gitconfig)
        .env("GIT_ASKPASS", &askpass)
        .env("SSH_ASKPASS", &askpass)
        .env("DISPLAY", ":0")
        .env_remove("RUST_LOG")
        .output()
        .expect("run iii-directory");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "{stderr}");
    assert!(
        !asked.exists(),
        "a password was asked for: {:?}",
        std::fs::read_to_string(&asked)
    );
    assert_eq!(tree_state(f.compose.base()), before);
    f.assert_no_clone_left();
}

#[test]
fn a_clone_that_hangs_is_killed_at_the_timeout_and_removed() {
    let f = Fixture::new(Behaviour::Hang);
    let config = f.compose.path("slow.yaml");
    std::fs::write(&config, "download_timeout_ms: 1500\n").expect("config");
    let started = Instant::now();
    let err = f.refused(&[
        "--config",
        config.to_str().expect("utf8"),
        "download",
        "--repo",
        &f.server.url("any"),
        "--skill",
        "s",
    ]);
    assert!(err.contains("git clone timed out after 1500 ms"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// A worker (here: a directory in this process, with its watcher) owns the index: the command
/// lands the files on disk and waits until that live index shows them.
#[test]
fn with_a_running_owner_the_command_lands_and_follows_its_index() {
    let f = Fixture::serving_frontend_design();
    let owner = std::sync::Arc::new(f.compose.open());
    let watcher =
        iii_directory::Watcher::start(owner.clone(), iii_directory::WatchOptions::default());
    let out = f.cli(&[
        "download",
        "--repo",
        &f.server.url("skills"),
        "--skill",
        "frontend-design",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("indexed by the running worker"), "{stdout}");
    let ids = crate::common::skill_ids(&owner);
    assert!(
        ids.contains(&"frontend-design/layouts/grid".to_string()),
        "{ids:?}"
    );
    watcher.stop();
    assert_no_staging(f.compose.base());
}

/// A command holds the index past its rows (a `reindex` computing embeddings, which reads may
/// follow): a download waits until it lets go and lands as the index's writer, rather than
/// follow an index nobody takes the files into (it waited 30 s and failed, the bundle landed).
#[test]
fn beside_a_reindex_past_its_rows_the_command_waits_and_lands_as_the_writer() {
    let f = Fixture::serving_frontend_design();
    let index = f.compose.config().paths.index_path;
    let owner = f.compose.open();
    let note = iii_directory::IndexHolder {
        pid: std::process::id(),
        role: "reindex".into(),
        settled: true,
        ..Default::default()
    };
    iii_directory::write_index_holder(&index, &note).expect("the command's note");
    let url = f.server.url("skills");
    let out = std::thread::scope(|scope| {
        let download =
            scope.spawn(|| f.cli(&["download", "--repo", &url, "--skill", "frontend-design"]));
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!download.is_finished(), "waited for the command");
        drop(owner);
        download.join().expect("the download")
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("index updated"), "{stdout}");
    let ids = crate::common::skill_ids(&f.compose.open());
    assert!(
        ids.contains(&"frontend-design/layouts/grid".to_string()),
        "{ids:?}"
    );
}

/// Beside a running worker, the command takes the worker's live configuration from its note
/// (the stored configuration wins over `--config`, as it does for the worker): a policy set
/// through the configuration worker, `download_allow_executables: false`, refuses the bundle
/// from the command line too.
#[test]
fn beside_a_running_worker_the_command_follows_the_workers_policies() {
    let f = Fixture::serving_frontend_design();
    let index = f.compose.config().paths.index_path;
    let owner = f.compose.open();
    let note = iii_directory::IndexHolder {
        pid: std::process::id(),
        role: iii_directory::WORKER_ROLE.into(),
        folders: Vec::new(),
        config: Some(iii_directory::NotedConfig {
            settings: json!({ "download_allow_executables": false }),
            base: f.compose.base().to_path_buf(),
        }),
        // Its first reconcile is done (the fixture opened the index as its writer): the note
        // does not say it is building.
        ..Default::default()
    };
    iii_directory::write_index_holder(&index, &note).expect("the worker's note");
    let stderr = f.refused(&[
        "download",
        "--repo",
        &f.server.url("skills"),
        "--skill",
        "frontend-design",
    ]);
    assert!(stderr.contains("D333"), "{stderr}");
    assert!(stderr.contains("scripts/build.sh"), "{stderr}");
    drop(owner);
}

fn assert_no_staging(base: &Path) {
    let state = tree_state(base);
    assert!(
        state.keys().all(|k| !k.contains(".iii-staging-")),
        "a staging folder was left: {state:?}"
    );
}

/// The commit `git rev-parse HEAD` names in a working repository.
fn head(repo: &Repo) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(&repo.work)
        .args(["rev-parse", "HEAD"])
        .output()
        .expect("git rev-parse");
    String::from_utf8(out.stdout)
        .expect("utf8")
        .trim()
        .to_string()
}

/// A repository URL carrying credentials (`https://user:token@host/…`) clones with them, and
/// shows and keeps itself without them: in the answer, the progress and summary lines, the
/// bundles lock (which is meant to be committed) and `bundles list`.
#[test]
fn credentials_in_a_repo_url_are_used_and_never_shown_or_kept() {
    use iii_directory::download::lock;
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let url = f.server.url("skills");
    let secret = "ghp_s3cretTOKEN";
    let with_token = url.replacen("https://", &format!("https://alice:{secret}@"), 1);
    let out = f.cli(&[
        "download",
        "--repo",
        &with_token,
        "--skill",
        "frontend-design",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let shown = format!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(!shown.contains(secret) && shown.contains(&url), "{shown}");
    let json = f.cli(&[
        "download",
        "--repo",
        &with_token,
        "--skill",
        "frontend-design",
        "--json",
    ]);
    let answer: Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(answer["source"]["repo"], url.as_str(), "{answer}");
    let lock_path = f.compose.path("skills/iii-bundles.lock.json");
    assert!(!f.read("skills/iii-bundles.lock.json").contains(secret));
    let locked = lock::read(&lock_path).expect("lock");
    assert!(
        matches!(&locked.bundles["frontend-design"].source, lock::LockedSource::Repo { repo, .. } if *repo == url)
    );
    let listed = f.cli(&["bundles", "list", "--json"]);
    assert!(!String::from_utf8_lossy(&listed.stdout).contains(secret));
    // A refused URL is named without its credentials too.
    let refused = f.refused(&[
        "download",
        "--repo",
        &format!("{with_token} x"),
        "--skill",
        "frontend-design",
    ]);
    assert!(!refused.contains(secret), "{refused}");
}

#[test]
fn the_lock_records_the_commit_each_download_resolved() {
    use iii_directory::download::lock;
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let url = f.server.url("skills");
    f.download(&url, "frontend-design", None);
    let path = f.compose.path("skills/iii-bundles.lock.json");
    let entry = |commit: &str| {
        let locked = lock::read(&path).expect("lock");
        let entry = locked.bundles["frontend-design"].clone();
        assert_eq!(
            entry.source,
            lock::LockedSource::Repo {
                repo: url.clone(),
                branch: "main".into(),
                folder: "skills/frontend-design".into(),
                commit: Some(commit.to_string()),
            }
        );
        entry
    };
    let first = entry(&head(&repo));
    assert_eq!(first.files.len(), 5, "{:?}", first.files);
    repo.write(
        "skills/frontend-design/index.md",
        "# Frontend design\n\nv2\n",
    );
    repo.publish("v2");
    f.download(&url, "frontend-design", None);
    let second = entry(&head(&repo));
    let index = |e: &lock::Entry| {
        e.files
            .iter()
            .find(|f| f.path == "frontend-design/index.md")
            .map(|f| f.sha256.clone())
    };
    assert_ne!(index(&first), index(&second));
    assert_eq!(
        index(&second),
        Some(lock::sha256_hex(b"# Frontend design\n\nv2\n"))
    );

    // The command line reads the same lock.
    let out = f.cli(&["bundles", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(listed["bundles"][0]["state"], "clean");
    let out = f.cli(&["bundles", "verify"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("every locked file matches: 1 bundle(s), 5 file(s)")
    );
    std::fs::write(
        f.compose.path("skills/frontend-design/components.md"),
        "# Mine\n",
    )
    .expect("edit");
    let out = f.cli(&["bundles", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("modified  components.md"), "{report}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 bundle(s) differ from the bundles lock")
    );
    let out = f.cli(&["bundles", "get", "frontend-design"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&format!("@ {}", &head(&repo)[..12])),
        "{shown}"
    );
    assert!(
        shown.contains("modified  skills         components.md"),
        "{shown}"
    );
}

#[test]
fn restore_fetches_the_locked_commit_after_the_branch_moved() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let url = f.server.url("skills");
    f.download(&url, "frontend-design", None);
    let locked = f.read("skills/frontend-design/index.md");
    repo.write(
        "skills/frontend-design/index.md",
        "# Frontend design\n\nv2\n",
    );
    repo.publish("v2");
    std::fs::remove_file(f.compose.path("skills/frontend-design/index.md")).expect("rm");
    let out = f.cli(&["bundles", "restore", "frontend-design"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("restored frontend-design (5 file(s), each as locked)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(f.read("skills/frontend-design/index.md"), locked);
    f.assert_no_clone_left();
}

/// A restore holds the index only while it lands: reads beside a restore whose source is
/// slow answer at once, instead of waiting for the network with it.
#[test]
fn reads_beside_a_restore_do_not_wait_for_its_fetch() {
    let f = Fixture::serving_frontend_design();
    let url = f.server.url("skills");
    f.download(&url, "frontend-design", None);
    // The lock now names a source that accepts and never answers.
    let hanging = GitServer::start(f.repos.path(), Behaviour::Hang);
    let lock = f.compose.path("skills/iii-bundles.lock.json");
    let text = std::fs::read_to_string(&lock).expect("lock");
    std::fs::write(&lock, text.replace(&url, &hanging.url("skills"))).expect("lock");
    let config = f.compose.path("slow.yaml");
    std::fs::write(&config, "download_timeout_ms: 6000\n").expect("config");
    let config = config.to_str().expect("utf8");
    std::thread::scope(|scope| {
        let restore = scope.spawn(|| f.cli(&["--config", config, "bundles", "restore"]));
        std::thread::sleep(Duration::from_millis(1000));
        assert!(!restore.is_finished(), "the restore waits on its source");
        let started = Instant::now();
        let list = f.cli(&["--config", config, "list", "skills"]);
        let took = started.elapsed();
        assert!(
            list.status.success(),
            "{}",
            String::from_utf8_lossy(&list.stderr)
        );
        assert!(
            String::from_utf8_lossy(&list.stdout).contains("frontend-design"),
            "{}",
            String::from_utf8_lossy(&list.stdout)
        );
        assert!(
            took < Duration::from_secs(3) && !restore.is_finished(),
            "the read waited for the restore ({took:?}): {}",
            String::from_utf8_lossy(&list.stderr)
        );
        let restored = restore.join().expect("the restore");
        let said = String::from_utf8_lossy(&restored.stdout);
        assert!(said.contains("timed out"), "{said}");
    });
}

#[test]
fn check_updates_sees_the_branch_move() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    let url = f.server.url("skills");
    f.download(&url, "frontend-design", None);
    let checked = |expected: &str| {
        let out = f.cli(&["bundles", "check-updates", "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answer: Value = serde_json::from_slice(&out.stdout).expect("json");
        let bundle = answer["bundles"][0].clone();
        assert_eq!(bundle["state"], expected, "{bundle}");
        bundle
    };
    let current = checked("current");
    assert_eq!(current["upstream"]["commit"], head(&repo));
    repo.write("skills/frontend-design/extra.md", "# Extra\n");
    repo.publish("v2");
    let moved = checked("update-available");
    assert_eq!(moved["upstream"]["commit"], head(&repo));
    assert_ne!(moved["upstream"]["commit"], moved["locked"]["commit"]);
}

/// A repository bundle across commits: a re-download after a local edit fetches the locked
/// commit again as the base and merges the two sides; a change of the same line on both sides
/// keeps the user's copy with the upstream text beside it.
#[test]
fn a_re_download_across_commits_merges_a_local_edit_three_way() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.write(
        "skills/frontend-design/components.md",
        "# Components\n\nbuttons\ncards\nforms\n",
    );
    repo.publish("v1");
    let url = f.server.url("skills");
    f.download(&url, "frontend-design", None);
    f.compose.write(
        "skills/frontend-design/components.md",
        "# Components\n\nbuttons, mine\ncards\nforms\n",
    );
    f.compose
        .write("skills/frontend-design/layouts/grid.md", "# Grid, mine\n");
    repo.write(
        "skills/frontend-design/components.md",
        "# Components\n\nbuttons\ncards\nforms, v2\n",
    )
    .write("skills/frontend-design/layouts/grid.md", "# Grid v2\n");
    repo.publish("v2");
    let answer = f.download(&url, "frontend-design", None);
    assert_eq!(answer["merged"], json!(["components.md"]), "{answer}");
    assert_eq!(
        answer["conflicts"],
        json!([{"path": "layouts/grid.md", "upstream_copy": "layouts/grid.md.upstream"}])
    );
    assert_eq!(
        f.read("skills/frontend-design/components.md"),
        "# Components\n\nbuttons, mine\ncards\nforms, v2\n"
    );
    assert_eq!(
        f.read("skills/frontend-design/layouts/grid.md"),
        "# Grid, mine\n"
    );
    assert_eq!(
        f.read("skills/frontend-design/layouts/grid.md.upstream"),
        "# Grid v2\n"
    );
    // Once more in plain text: the summary names the merge and the conflict with its copy.
    repo.write(
        "skills/frontend-design/components.md",
        "# Components\n\nbuttons\ncards\nforms, v3\n",
    )
    .write("skills/frontend-design/layouts/grid.md", "# Grid v3\n");
    repo.publish("v3");
    let out = f.cli(&["download", "--repo", &url, "--skill", "frontend-design"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("\n  merged with your edits (1): components.md"),
        "{stdout}"
    );
    // Kept as the user has it: the conflicting file only; the merged one was rewritten.
    assert!(
        stdout.contains("\n  kept as you have them (--force replaces those the bundle installed and you edited) (1): layouts/grid.md\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "\n  conflicts: yours kept, merge upstream's text by hand, then delete its copy (1): layouts/grid.md (upstream's text in layouts/grid.md.upstream)"
        ),
        "{stdout}"
    );
    f.assert_no_clone_left();
}

/// A repository's options beside a registry worker are a usage error (status 2, as clap says of
/// any), never a request the download refuses later.
#[test]
fn repository_options_beside_a_worker_are_a_usage_error() {
    let f = Fixture::new(Behaviour::Serve);
    for extra in [["--skill", "x"], ["--branch", "b"]] {
        let mut args = vec!["download", "--worker", "mw"];
        args.extend(extra);
        let out = f.cli(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("cannot be used with"), "{args:?}: {stderr}");
    }
}

/// A locked namespace keeps its origin: a download of the same skill name from another
/// repository is refused with nothing written (the lock would silently point elsewhere), and
/// `--force` replaces the bundle. Another branch of the same repository is the same origin, and
/// so is the same repository spelled another way (a trailing `/`).
#[test]
fn a_download_from_another_origin_into_a_locked_namespace_is_refused_unless_forced() {
    let f = Fixture::new(Behaviour::Serve);
    for name in ["first", "second"] {
        let repo = f.repo(name);
        repo.write("skills/sw/SKILL.md", &format!("# Sw from {name}\n"));
        repo.publish("v1");
    }
    let (first, second) = (f.server.url("first"), f.server.url("second"));
    f.download(&format!("{first}/"), "sw", None);
    f.download(&first, "sw", None);
    let stderr = f.refused(&["download", "--repo", &second, "--skill", "sw"]);
    assert!(
        stderr.contains(&format!(
            "D330 conflict: namespace \"sw\" holds the bundle of the repository {first} (bundles lock), and this download is from the repository {second}; nothing was written"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("download --force"), "{stderr}");
    let out = f.cli(&[
        "download", "--repo", &second, "--skill", "sw", "--force", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(f.read("skills/sw/SKILL.md"), "# Sw from second\n");
    let lock = f.read("skills/iii-bundles.lock.json");
    assert!(lock.contains(&second) && !lock.contains(&first), "{lock}");
}

/// A bundle may not ship a file named as an update names upstream's text beside a conflicting
/// file (`<name>.upstream`): it could never be updated. Refused whole, nothing written.
#[test]
fn a_bundle_shipping_a_conflict_copys_name_is_refused() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("upr");
    repo.write("skills/nginx/SKILL.md", "# Nginx\n")
        .write("skills/nginx/proxy.conf", "a\n")
        .write("skills/nginx/proxy.conf.upstream", "b\n");
    repo.publish("v1");
    let stderr = f.refused(&[
        "download",
        "--repo",
        &f.server.url("upr"),
        "--skill",
        "nginx",
    ]);
    assert!(
        stderr.contains("bundle file \"nginx/proxy.conf.upstream\" ends in .upstream"),
        "{stderr}"
    );
}

/// A restore that cannot fetch a bundle's locked source says so for that bundle, and the
/// command fails saying that bundles could not be restored (it used to end with "differ from
/// the bundles lock", though nothing had been compared).
#[test]
fn a_restore_that_cannot_fetch_names_the_failure() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("gone");
    repo.write("skills/writing/SKILL.md", "# Writing\n");
    repo.publish("v1");
    f.download(&f.server.url("gone"), "writing", None);
    std::fs::remove_dir_all(&repo.served).expect("remove the repository");
    let out = f.cli(&["bundles", "restore"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("not restored writing: "), "{stdout}");
    assert!(
        stderr.contains("1 bundle(s) could not be restored (the reasons are above)"),
        "{stderr}"
    );
    assert!(!stderr.contains("differ from the bundles lock"), "{stderr}");
}

/// A download killed outright leaves its clone in the temporary folder; the next download
/// removes the clones of processes that no longer run, and only those.
#[test]
fn a_download_removes_the_clones_dead_downloads_left() {
    let f = Fixture::new(Behaviour::Serve);
    let repo = f.repo("skills");
    frontend_design(&repo);
    repo.publish("v1");
    // A pid above the kernel's pid_max is no process; this test's own pid is alive.
    let dead = f
        .tmp
        .path()
        .join(format!("iii-directory-clone-{}-0-1", 1u32 << 23));
    let live = f
        .tmp
        .path()
        .join(format!("iii-directory-clone-{}-0-1", std::process::id()));
    for clone in [&dead, &live] {
        std::fs::create_dir_all(clone.join("checkout")).expect("mkdir");
        std::fs::write(clone.join("checkout/README.md"), "x").expect("write");
    }
    f.download(&f.server.url("skills"), "frontend-design", None);
    assert!(!dead.exists(), "the dead download's clone is removed");
    assert!(live.exists(), "a running download's clone is left alone");
    std::fs::remove_dir_all(&live).expect("tidy");
    f.assert_no_clone_left();
}
