//! The repo source (contract §3.9): the guards on the URL, the skill name and the branch, a
//! shallow `git clone` of one branch into a private temporary folder (bounded by
//! `download_timeout_ms`, killed with its whole process group on timeout, removed on every
//! path), and the files of `skills/<skill>/` read into a bundle for `<skills_folder>/<skill>/`.
//!
//! git runs from an argument vector (never a shell) with `--` before the URL, only the https and
//! ssh transports (`protocol.ext` and `protocol.file` never; `GIT_PROTOCOL_FROM_USER=0`), no
//! terminal prompt, no hooks, no fsmonitor and no submodules. A symbolic link anywhere in the
//! skill folder refuses the bundle: a link means something else once moved into the skills
//! folder (which the walk may follow), a link that leaves the clone would copy or point at files
//! outside it, and no skill needs one (the registry's format cannot even carry one). Entries
//! whose name starts with `.` are skipped, as are `prompts/` and `agents/` paths; repo downloads
//! never install agent profiles.

use std::fs;
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::doc::classify::{PathClass, classify};
use crate::doc::paths::{is_markdown, validate_bundle_path};
use crate::error::{Error, Result, io_error, quoted};
use crate::store::landing::has_execute_bit;

use super::bundle::{Bundle, BundleBuilder, Dest, File, Limits, Listed};
use super::lock::Resolved;
use super::source::Source;

/// URL forms a clone may use (contract): https, ssh, and scp-like ssh (`git@host:path`).
const ALLOWED_URL_PREFIXES: [&str; 3] = ["https://", "ssh://", "git@"];
/// How often the clone's end (or its deadline) is checked.
const POLL: Duration = Duration::from_millis(20);
/// The tail of git's stderr kept for an error message.
const STDERR_TAIL_BYTES: usize = 2048;
/// How long to wait for git's stderr to close after git itself has ended.
const STDERR_GRACE: Duration = Duration::from_secs(1);
/// The folder of a repository holding one folder per skill (contract).
const SKILLS_DIR: &str = "skills";

/// The contract's URL guard, plus no whitespace or control characters (a URL has none, and
/// they have no business on a command line).
pub fn check_repo_url(repo: &str) -> Result<()> {
    let shown = super::url::without_credentials(repo);
    let repo = repo.trim();
    let refuse = |why: String| Err(Error::Invalid(why));
    if repo.is_empty() {
        return refuse("repo URL must be non-empty".into());
    }
    if repo.starts_with('-') {
        return refuse(format!(
            "repo URL may not start with '-' (argument injection): {repo}",
            repo = quoted(&shown)
        ));
    }
    if names_a_remote_helper(repo) {
        return refuse(format!(
            "repo URL may not contain '::' (transport trick): {repo}",
            repo = quoted(&shown)
        ));
    }
    if repo
        .get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("file:"))
    {
        return refuse(format!(
            "repo URL may not use the file: transport: {repo}",
            repo = quoted(&shown)
        ));
    }
    if repo.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return refuse(format!(
            "repo URL may not contain whitespace or control characters: {repo}",
            repo = quoted(&shown)
        ));
    }
    if !ALLOWED_URL_PREFIXES.iter().any(|p| repo.starts_with(p)) {
        return refuse(format!(
            "repo URL must start with https://, ssh://, or git@ — got: {repo}",
            repo = quoted(&shown)
        ));
    }
    Ok(())
}

/// Whether git would hand `repo` to a remote helper (`<transport>::<address>`: `ext::`, `fd::`,
/// `git::https://…`). git's rule (`transport_get`): a scheme-like run at the start (a letter,
/// then letters, digits, `+`, `-`, `.`) followed by `::`. A `::` elsewhere, as in the IPv6
/// literal of `https://[::1]:8443/x`, is no transport.
fn names_a_remote_helper(repo: &str) -> bool {
    let scheme_len = repo
        .char_indices()
        .find(|&(i, c)| {
            let scheme_char = c.is_ascii_alphabetic()
                || (i > 0 && (c.is_ascii_digit() || matches!(c, '+' | '-' | '.')));
            !scheme_char
        })
        .map_or(repo.len(), |(i, _)| i);
    repo[scheme_len..].starts_with("::")
}

/// The contract's skill-name guard: ASCII letters, digits, `-`, `_` and `.`, not starting with
/// a dot (so never `.` or `..`), no separator.
pub fn check_skill_name(skill: &str) -> Result<()> {
    let refuse = |why: String| Err(Error::Invalid(why));
    if skill.is_empty() {
        return refuse("skill must be non-empty".into());
    }
    if skill.contains('/') || skill.contains('\\') {
        return refuse(format!(
            "skill may not contain a path separator: {skill}",
            skill = quoted(skill)
        ));
    }
    if skill.contains("..") {
        return refuse(format!(
            "skill may not contain '..': {skill}",
            skill = quoted(skill)
        ));
    }
    if skill.starts_with('.') {
        return refuse(format!(
            "skill may not start with '.': {skill}",
            skill = quoted(skill)
        ));
    }
    if !skill
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return refuse(format!(
            "skill may only contain ASCII letters, digits, '-', '_' and '.': {skill}",
            skill = quoted(skill)
        ));
    }
    Ok(())
}

/// A branch git would take as a branch: non-empty (contract), and not an option or a line.
pub fn check_branch(branch: &str) -> Result<()> {
    if branch.is_empty() {
        return Err(Error::Invalid("branch must be non-empty".into()));
    }
    if branch.starts_with('-') || branch.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Invalid(format!(
            "branch may not start with '-' or contain whitespace or control characters: {branch}",
            branch = quoted(branch)
        )));
    }
    Ok(())
}

/// Every guard of a repo source, before anything runs: the skill name, the URL, the branch.
pub fn check(source: &Source) -> Result<()> {
    let Source::Repo {
        repo,
        skill,
        branch,
    } = source
    else {
        return Err(Error::Invalid("not a repo source".into()));
    };
    check_skill_name(skill)?;
    check_repo_url(repo)?;
    check_branch(branch)
}

/// A clone on disk, its files not read yet (see [`Cloned::read`]); the folder is removed when
/// it is dropped, whatever happens. Apart so that the clone (git waiting on the network) and
/// the read (the files held in memory) can wait for different turns
/// (`registry::admission`).
pub struct Cloned {
    dir: CloneDir,
    source: Source,
    /// The source's repository and skill, for the read.
    repo: String,
    skill: String,
    /// The commit checked out, when git could say.
    head: Option<String>,
}

/// Clones the source's branch, at `commit` when one is given (a restore of a locked bundle):
/// when the branch's head is another commit, that commit is fetched (`git fetch --depth 1
/// origin <commit>`) and checked out, bounded by the same timeout.
pub fn clone_at(source: Source, commit: Option<&str>, timeout: Duration) -> Result<Cloned> {
    check(&source)?;
    if let Some(commit) = commit.filter(|c| !is_commit_id(c)) {
        return Err(Error::Invalid(format!(
            "the locked commit {} is not a commit id",
            quoted(commit)
        )));
    }
    let Source::Repo {
        repo,
        skill,
        branch,
    } = &source
    else {
        return Err(Error::Invalid("not a repo source".into()));
    };
    let (repo, skill) = (repo.clone(), skill.clone());
    let dir = CloneDir::create()?;
    let started = Instant::now();
    let head = run_git_clone(&repo, branch, &dir.checkout(), timeout)
        .and_then(|()| {
            let head = head_commit(&dir.checkout());
            match commit {
                Some(want) if head.as_deref() != Some(want) => {
                    let left = timeout.saturating_sub(started.elapsed());
                    check_out_commit(&dir.checkout(), want, left)?;
                    Ok(head_commit(&dir.checkout()))
                }
                _ => Ok(head),
            }
        })
        .map_err(|e| dir.scrub(e))?;
    Ok(Cloned {
        dir,
        source,
        repo,
        skill,
        head,
    })
}

impl Cloned {
    /// Reads `skills/<skill>/` of the clone into a checked bundle, then removes the clone.
    pub fn read(self, limits: Limits) -> Result<Bundle> {
        let Cloned {
            dir,
            source,
            repo,
            skill,
            head,
        } = self;
        collect(source, &dir.checkout(), &repo, &skill, limits, head).map_err(|e| dir.scrub(e))
    }
}

/// Removes, once per process, the clone folders a download killed outright left in the
/// temporary folder: folders of this user named for a process that no longer runs.
fn sweep_dead_clones() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(CLONE_PREFIX))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            let ours = fs::symlink_metadata(entry.path())
                .is_ok_and(|m| m.is_dir() && std::os::unix::fs::MetadataExt::uid(&m) == me);
            if ours && !crate::index::holder::alive(pid) {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    });
}

/// A private temporary folder for one clone, removed when dropped.
struct CloneDir {
    path: PathBuf,
}

static CLONES: AtomicU64 = AtomicU64::new(0);

/// The prefix of a clone's folder name; the process id follows it.
const CLONE_PREFIX: &str = "iii-directory-clone-";

impl CloneDir {
    fn create() -> Result<CloneDir> {
        sweep_dead_clones();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let name = format!(
            "{CLONE_PREFIX}{}-{}-{nanos}",
            std::process::id(),
            CLONES.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(io_error("create the folder of the clone", &path))?;
        Ok(CloneDir { path })
    }

    fn checkout(&self) -> PathBuf {
        self.path.join("checkout")
    }

    /// `e` with the clone's path (and so the process id in its name) taken out: git's own
    /// messages and the file errors name files inside it.
    fn scrub(&self, e: Error) -> Error {
        let scrub = |text: String| {
            let checkout = self.checkout().display().to_string();
            let path = self.path.display().to_string();
            text.replace(&format!("{checkout}/"), "")
                .replace(&checkout, "the clone")
                .replace(&format!("{path}/"), "")
                .replace(&path, "the clone")
        };
        match e {
            Error::Io(e) => {
                Error::Io(e.map_path(|path| PathBuf::from(scrub(path.display().to_string()))))
            }
            Error::Invalid(text) => Error::Invalid(scrub(text)),
            other => other,
        }
    }
}

impl Drop for CloneDir {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), "cannot remove a temporary clone: {e}");
        }
    }
}

/// The git command line: one branch, depth 1, quiet, https/ssh only, with the guards of
/// [`guarded_git`].
fn git_command(repo: &str, branch: &str, into: &Path) -> Command {
    let mut git = guarded_git();
    git.args([
        "clone",
        "--depth",
        "1",
        "--no-recurse-submodules",
        "--branch",
    ])
    .arg(branch)
    .arg("--quiet")
    .arg("--")
    .arg(repo)
    .arg(into);
    git
}

/// git with nothing of the repository's configuration that could run a program (nor the
/// user's hooks or file-system monitor), https and ssh only, no prompt of any kind, in a
/// session (and so a process group) of its own. What the user set up to authenticate (an ssh
/// command, an ssh agent, a credential helper) works as they set it.
fn guarded_git() -> Command {
    let mut git = Command::new("git");
    for setting in [
        "protocol.ext.allow=never",
        "protocol.file.allow=never",
        "protocol.allow=never",
        "protocol.https.allow=always",
        "protocol.ssh.allow=always",
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "submodule.recurse=false",
    ] {
        git.arg("-c").arg(setting);
    }
    // No prompt: a question nobody answers holds the download until its timeout. git asks
    // for a name and password on the terminal (`GIT_TERMINAL_PROMPT`) or through a program
    // (`GIT_ASKPASS`, `core.askPass`, `SSH_ASKPASS`: an empty `GIT_ASKPASS` stops that
    // search); ssh asks for a passphrase or a host key's approval on the terminal (none, see
    // `setsid` below) or in a dialog, which needs a display before OpenSSH 8.4 and is
    // refused by `SSH_ASKPASS_REQUIRE=never` from 8.4 on (a value the user set stands).
    git.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env("GIT_PROTOCOL_FROM_USER", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if std::env::var_os("SSH_ASKPASS_REQUIRE").is_none() {
        git.env("SSH_ASKPASS_REQUIRE", "never");
    }
    // SAFETY: `setsid` and `prctl` are async-signal-safe and touch nothing of the parent's
    // memory. A session of its own gives git and its helpers (git-remote-https, index-pack,
    // ssh) a process group a timeout ends whole, and no controlling terminal, so nothing can
    // ask a question on the terminal a command runs in (it fails at once instead of waiting,
    // stopped, for an answer), while the ssh command the user chose (`GIT_SSH_COMMAND`,
    // `core.sshCommand`: a key per host, a jump host) runs as they set it. A forked child is
    // never a process group's leader, so `setsid` does not fail. `PR_SET_PDEATHSIG` asks the
    // kernel to end git with the thread that started it (a download killed outright), so no
    // clone runs on, orphaned, until the server gives up.
    unsafe {
        git.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    git
}

fn run_git_clone(repo: &str, branch: &str, into: &Path, timeout: Duration) -> Result<()> {
    let mut child = git_command(repo, branch, into)
        .spawn()
        .map_err(io_error("spawn", Path::new("git")))?;
    let stderr = read_stderr(&mut child);
    let status = wait_with_deadline(&mut child, timeout);
    let text = stderr.recv_timeout(STDERR_GRACE).unwrap_or_default();
    match status {
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(Error::Invalid(format!(
            "git clone --branch {branch} exited with {status}: {}",
            text.trim()
        ))),
        None => Err(Error::Invalid(format!(
            "git clone timed out after {} ms",
            timeout.as_millis()
        ))),
    }
}

/// The tail of the child's stderr, delivered once it closes.
fn read_stderr(child: &mut Child) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    if let Some(mut pipe) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..n]);
                if all.len() > STDERR_TAIL_BYTES * 2 {
                    all.drain(..all.len() - STDERR_TAIL_BYTES);
                }
            }
            let start = all.len().saturating_sub(STDERR_TAIL_BYTES);
            let _ = sender.send(String::from_utf8_lossy(&all[start..]).into_owned());
        });
    }
    receiver
}

/// The child's exit status, or `None` when the deadline passed first (the child's process
/// group is then killed and reaped).
fn wait_with_deadline(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            Ok(None) | Err(_) => {
                kill_group(child);
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// SIGKILL to the child's process group (it leads its own session, see [`guarded_git`]).
fn kill_group(child: &mut Child) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        let _ = child.kill();
        return;
    };
    // SAFETY: kill(2) with a negative pid signals that process group; the group is the child's
    // own (`setsid` before exec), created by us and not yet reaped, so it names no other
    // process.
    let sent = unsafe { libc::kill(-pid, libc::SIGKILL) };
    if sent != 0 {
        let _ = child.kill();
    }
}

/// Where `branch` of `repo` points now (`git ls-remote`, with the clone's guards and the
/// same URL and branch checks), or `None` when the repository has no such branch.
pub fn remote_head(repo: &str, branch: &str, timeout: Duration) -> Result<Option<String>> {
    check_repo_url(repo)?;
    check_branch(branch)?;
    let mut git = guarded_git();
    git.args(["ls-remote", "--heads", "--"])
        .arg(repo)
        .arg(format!("refs/heads/{branch}"))
        .stdout(Stdio::piped());
    let mut child = git.spawn().map_err(io_error("spawn", Path::new("git")))?;
    let stderr = read_stderr(&mut child);
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = out.read_to_string(&mut text);
        }
        text
    });
    let status = wait_with_deadline(&mut child, timeout);
    let text = stderr.recv_timeout(STDERR_GRACE).unwrap_or_default();
    match status {
        Some(status) if status.success() => {}
        Some(status) => {
            return Err(Error::Invalid(format!(
                "git ls-remote exited with {status}: {}",
                text.trim()
            )));
        }
        None => {
            return Err(Error::Invalid(format!(
                "git ls-remote timed out after {} ms",
                timeout.as_millis()
            )));
        }
    }
    let listed = reader.join().unwrap_or_default();
    Ok(listed
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .find(|(_, name)| *name == format!("refs/heads/{branch}"))
        .map(|(commit, _)| commit.to_string())
        .filter(|c| is_commit_id(c)))
}

/// Whether `text` is a full hexadecimal commit id (SHA-1 or SHA-256).
fn is_commit_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Fetches `commit` into the clone and checks it out, with the clone's guards (no hooks, no
/// fsmonitor, no submodules, https and ssh only, no prompt), within `timeout` in all.
fn check_out_commit(checkout: &Path, commit: &str, timeout: Duration) -> Result<()> {
    let started = Instant::now();
    for args in [
        &[
            "fetch",
            "--quiet",
            "--depth",
            "1",
            "--no-recurse-submodules",
            "origin",
            commit,
        ][..],
        &["checkout", "--quiet", "--detach", commit][..],
    ] {
        let mut git = guarded_git();
        git.arg("-C").arg(checkout).args(args);
        let mut child = git.spawn().map_err(io_error("spawn", Path::new("git")))?;
        let stderr = read_stderr(&mut child);
        let left = timeout.saturating_sub(started.elapsed());
        let status = wait_with_deadline(&mut child, left);
        let text = stderr.recv_timeout(STDERR_GRACE).unwrap_or_default();
        match status {
            Some(status) if status.success() => {}
            Some(status) => {
                return Err(Error::Invalid(format!(
                    "cannot get the locked commit {commit}: git {} exited with {status}: {}",
                    args[0],
                    text.trim()
                )));
            }
            None => {
                return Err(Error::Invalid(format!(
                    "getting the locked commit {commit} timed out after {} ms",
                    timeout.as_millis()
                )));
            }
        }
    }
    Ok(())
}

/// The commit the clone checked out, by `git rev-parse HEAD` in it (no hooks or fsmonitor: it
/// only reads the refs); `None` when git cannot say, which leaves the lock without a commit
/// rather than failing a download that landed fine upstream.
fn head_commit(checkout: &Path) -> Option<String> {
    let output = Command::new("git")
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .arg("-C")
        .arg(checkout)
        .args(["rev-parse", "--verify", "HEAD"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let commit = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && commit.len() >= 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(commit)
}

/// Reads `skills/<skill>/` of a checkout into a bundle for `<skills_folder>/<skill>/`.
fn collect(
    source: Source,
    checkout: &Path,
    repo: &str,
    skill: &str,
    limits: Limits,
    commit: Option<String>,
) -> Result<Bundle> {
    let skills_dir = checkout.join(SKILLS_DIR);
    let folder = skills_dir.join(skill);
    for step in [&skills_dir, &folder] {
        match fs::symlink_metadata(step) {
            Err(_) => {
                // The contract's text ends with `(cloned to <tmp>)`; no answer shows a
                // temporary path (and the process id in its name).
                return Err(Error::Invalid(format!(
                    "repo {repo} has no folder skills/{skill}/",
                    repo = quoted(&super::url::without_credentials(repo))
                )));
            }
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(link_error(checkout, step, &format!("skills/{skill}")));
            }
            Ok(meta) if !meta.is_dir() => {
                return Err(Error::Invalid(format!(
                    "skills/{skill} in {repo} is not a directory",
                    repo = quoted(&super::url::without_credentials(repo))
                )));
            }
            Ok(_) => {}
        }
    }
    let mut builder = BundleBuilder::new(source, limits);
    builder.resolved(Resolved {
        commit,
        ..Resolved::default()
    });
    let mut folders = vec![(folder, String::new())];
    while let Some((dir, rel_dir)) = folders.pop() {
        let mut entries: Vec<fs::DirEntry> = fs::read_dir(&dir)
            .and_then(|entries| entries.collect::<std::io::Result<_>>())
            .map_err(io_error("read_dir", &dir))?;
        entries.sort_by_key(fs::DirEntry::file_name);
        // Folders are taken off the end of the stack: push them in reverse to walk in order.
        let mut subfolders = Vec::new();
        for entry in entries {
            let name = entry.file_name().into_string().map_err(|name| {
                Error::Invalid(format!(
                    "skills/{skill}/{rel_dir} holds a file name that is not UTF-8 ({name:?}); nothing was written"
                ))
            })?;
            let hidden = name.starts_with('.');
            let rel = if rel_dir.is_empty() {
                name
            } else {
                format!("{rel_dir}/{name}")
            };
            if hidden {
                builder.hidden(rel);
                continue;
            }
            let path = entry.path();
            let meta = fs::symlink_metadata(&path).map_err(io_error("stat", &path))?;
            if meta.file_type().is_symlink() {
                return Err(link_error(
                    checkout,
                    &path,
                    &format!("skills/{skill}/{rel}"),
                ));
            }
            if meta.is_dir() {
                subfolders.push((path, rel));
                continue;
            }
            if !meta.is_file() {
                return Err(Error::Invalid(format!(
                    "skills/{skill}/{rel} is not a regular file; nothing was written"
                )));
            }
            builder.count()?;
            add_file(&mut builder, skill, &path, rel, meta.len())?;
        }
        folders.extend(subfolders.into_iter().rev());
    }
    builder.finish()
}

/// One regular file of the skill folder: ignored family paths are skipped, every other file is
/// checked and read (no further than its size allows).
fn add_file(
    builder: &mut BundleBuilder,
    skill: &str,
    path: &Path,
    rel: String,
    size: u64,
) -> Result<()> {
    let listed = match classify(&rel) {
        PathClass::Prompts | PathClass::Agents => return Ok(()),
        PathClass::SystemPrompt => is_markdown(&rel).then(|| (Listed::SystemPrompt, stem(&rel))),
        PathClass::Skill => Some((Listed::Skill, rel.clone())),
    };
    validate_bundle_path(&rel).map_err(|why| {
        Error::Invalid(format!(
            "invalid file path {rel} in skills/{skill}/: {why}; nothing was written",
            rel = quoted(&rel)
        ))
    })?;
    builder.check_size(&rel, size)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or_default());
    let file = fs::File::open(path).map_err(io_error("read", path))?;
    let executable = file.metadata().is_ok_and(|m| has_execute_bit(&m));
    file.take(size.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_error("read", path))?;
    let landed = File {
        dest: Dest::Skills,
        rel: format!("{skill}/{rel}"),
        bytes,
        executable,
    };
    builder.add_file(landed, listed)
}

fn stem(rel: &str) -> String {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    file.strip_suffix(".md").unwrap_or(file).to_string()
}

/// The refusal of a symbolic link, saying where it points and whether that leaves the clone.
fn link_error(checkout: &Path, link: &Path, shown: &str) -> Error {
    let target = fs::read_link(link)
        .map(|t| t.display().to_string())
        .unwrap_or_else(|_| "?".into());
    let leaves = match (fs::canonicalize(link), fs::canonicalize(checkout)) {
        (Ok(real), Ok(root)) => !real.starts_with(root),
        // A broken link: judged by its text.
        _ => Path::new(&target).is_absolute() || target.contains(".."),
    };
    let where_to = if leaves {
        "outside the repository"
    } else {
        "inside the repository"
    };
    Error::Invalid(format!(
        "{shown} is a symbolic link (to {target}, {where_to}); bundles may not contain links, and nothing was written"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_guard() {
        for ok in [
            "https://github.com/anthropics/skills",
            "ssh://git@github.com/a/b.git",
            "git@github.com:a/b.git",
            // IPv6 literals are hosts, not transports (issue 33).
            "https://[::1]:8443/x",
            "https://[2001:db8::1]/a/b.git",
            "ssh://git@[::1]:22/a/b.git",
        ] {
            assert!(check_repo_url(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("", "non-empty"),
            ("   ", "non-empty"),
            ("--upload-pack=touch /tmp/x", "argument injection"),
            ("-oProxyCommand=x", "argument injection"),
            ("ext::sh -c touch% /tmp/pwned", "transport trick"),
            ("git::https://x", "transport trick"),
            ("fd::17", "transport trick"),
            ("my-helper.v2::x", "transport trick"),
            ("file:///etc", "file:"),
            ("FILE:///etc", "file:"),
            ("http://github.com/a/b", "must start with"),
            ("../../etc", "must start with"),
            ("/srv/repo", "must start with"),
            ("https://x/a b", "whitespace"),
            ("https://x/a\nb", "whitespace"),
        ] {
            let err = check_repo_url(bad).expect_err(bad).to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn skill_name_guard() {
        for ok in ["frontend-design", "Frontend_Design", "v1.2", "x"] {
            assert!(check_skill_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "a..b",
            "a b",
            "ü",
            "../../etc",
        ] {
            assert!(check_skill_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn branch_guard() {
        assert!(check_branch("main").is_ok());
        assert!(check_branch("release/1.x").is_ok());
        for bad in ["", "--upload-pack=x", "a b", "a\nb"] {
            assert!(check_branch(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_clone_folder_is_private_and_removed() {
        let clone = CloneDir::create().expect("create");
        let path = clone.path.clone();
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        fs::write(path.join("x"), "x").expect("write");
        drop(clone);
        assert!(!path.exists());
    }

    /// What git is run with, whoever calls it: the settings that keep the repository's and the
    /// user's configuration from running a program or a transport other than https and ssh,
    /// come before the subcommand (where `-c` applies), and no prompt.
    #[test]
    fn git_runs_with_every_guard_before_its_subcommand() {
        let git = git_command("https://example.com/r.git", "main", Path::new("/tmp/c"));
        let args: Vec<String> = git
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let subcommand = args.iter().position(|a| a == "clone").expect("clone");
        let settings: Vec<&str> = args[..subcommand]
            .chunks(2)
            .map(|pair| {
                assert_eq!(pair[0], "-c", "{args:?}");
                pair[1].as_str()
            })
            .collect();
        for guard in [
            "protocol.ext.allow=never",
            "protocol.file.allow=never",
            "protocol.allow=never",
            "protocol.https.allow=always",
            "protocol.ssh.allow=always",
            "core.hooksPath=/dev/null",
            "core.fsmonitor=false",
            "submodule.recurse=false",
        ] {
            assert!(settings.contains(&guard), "{guard} missing: {args:?}");
        }
        assert_eq!(
            &args[subcommand..],
            [
                "clone",
                "--depth",
                "1",
                "--no-recurse-submodules",
                "--branch",
                "main",
                "--quiet",
                "--",
                "https://example.com/r.git",
                "/tmp/c"
            ]
        );
        let env: Vec<(String, Option<String>)> = git
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        for (key, value) in [
            ("GIT_TERMINAL_PROMPT", Some("0")),
            ("GIT_ASKPASS", Some("")),
            ("DISPLAY", None),
            ("WAYLAND_DISPLAY", None),
            ("GIT_PROTOCOL_FROM_USER", Some("0")),
        ] {
            assert!(
                env.contains(&(key.to_string(), value.map(str::to_string))),
                "{key}: {env:?}"
            );
        }
        assert!(
            env.iter().all(|(key, _)| key != "GIT_SSH_COMMAND"),
            "the user's ssh command stands: {env:?}"
        );
    }
}
