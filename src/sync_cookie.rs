//! Sync cookies: how a process that reads the index but does not write it (a read-only
//! follower, such as the command line while a worker runs) gets reads as fresh as the
//! writer's. It leaves an empty file in a folder beside the index that the writer's watcher
//! watches with the roots. The kernel queues that file's event after every event queued before
//! it, so once the watcher has seen the cookie it has seen every earlier change: it takes them
//! in, commits, and removes the cookie, which is what the follower waits for (the technique
//! of watchman's sync cookies).
//!
//! A writer answers within milliseconds, unless it is taking in a large burst first (a
//! `git checkout` or `chmod -R` over tens of thousands of files takes seconds). So the
//! follower waits [`COOKIE_WAIT`], and then goes on waiting, up to [`BUSY_WAIT`], for as long
//! as the writer keeps using the CPU; a writer that used none over a further [`COOKIE_WAIT`]
//! (stopped, stuck) is given up on, and the read answers from the index as it is.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::index::holder;

/// How long a follower waits for the writer's watcher before it asks whether the writer is
/// busy, and how often it asks again.
const COOKIE_WAIT: Duration = Duration::from_secs(1);
/// The longest a follower waits for a writer that stays busy.
const BUSY_WAIT: Duration = Duration::from_secs(60);
/// How long a writer given up on is not waited for again by this process: a command makes
/// several reads, and waited for a stopped worker at each.
const GIVEN_UP_FOR: Duration = Duration::from_secs(30);

/// What this process waited for a writer to do, and gave up on.
#[derive(Clone, Copy)]
enum Wait {
    /// To answer a cookie (it is stopped, or stuck).
    Answer,
    /// To end its first reconcile.
    Build,
}

/// A writer this process gave up on: the index, the writer's pid, and when.
type GaveUpOn = Option<(PathBuf, u32, Instant)>;

/// The writers this process gave up on, one for each [`Wait`].
static GIVEN_UP: std::sync::Mutex<[GaveUpOn; 2]> = std::sync::Mutex::new([None, None]);

/// Whether this process gave up on `wait` of the writer `pid` of the index at `index_path`
/// less than [`GIVEN_UP_FOR`] ago.
fn gave_up(wait: Wait, index_path: &Path, pid: u32) -> bool {
    crate::locks::lock(&GIVEN_UP)[wait as usize]
        .as_ref()
        .is_some_and(|(index, given_up, at)| {
            index == index_path && *given_up == pid && at.elapsed() < GIVEN_UP_FOR
        })
}

/// Notes that this process gave up on `wait` of the writer `pid` of the index at `index_path`.
fn give_up(wait: Wait, index_path: &Path, pid: u32) {
    crate::locks::lock(&GIVEN_UP)[wait as usize] =
        Some((index_path.to_path_buf(), pid, Instant::now()));
}

/// [`ask_writer`], even of a writer this process gave up on a moment ago: for a question whose
/// answer matters more than the wait (a download that just landed asks whether the worker took
/// its files in; given up on before it landed, the worker may have been slow only then).
pub fn ask_writer_afresh(index_path: &Path, ask: Ask) -> Synced {
    crate::locks::lock(&GIVEN_UP)[Wait::Answer as usize].take_if(|(index, ..)| index == index_path);
    ask_writer(index_path, ask)
}

/// The folder beside the index where followers leave sync cookies. Only a watching writer
/// makes it (see [`claim_folder`]), and it removes it when it stops.
fn sync_folder(index_path: &Path) -> PathBuf {
    crate::store::beside(index_path, ".sync")
}

/// The file that marks a sync folder as a writer's own. `index_path` is configuration, which a
/// caller on the bus may set, so a folder found at `<index_path>.sync` may be a user's (`photos`
/// beside `photos.sync`'s index): the writer empties and removes only a folder it marked, and
/// only of its cookies, and followers leave cookies only in a marked folder.
const MARK: &str = ".iii-directory-sync";

/// Whether a worker's sync folder (one it marked) stands beside the index at `index_path`: a
/// worker runs there, or one was killed there. What tells a worker from another program when
/// the index's holder left no note (it could not write one).
pub fn worker_folder_beside(index_path: &Path) -> bool {
    sync_folder(index_path).join(MARK).is_file()
}

/// What a cookie asks of the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// To take in every change made before the cookie (every read of a follower).
    CatchUp,
    /// To walk every root again, as its safety net does, before it answers: for the changes
    /// the kernel reports to no watch (`reindex` beside a running worker).
    Rescan,
}

/// How a cookie that asks for [`Ask::Rescan`] ends its name.
const RESCAN_SUFFIX: &str = "-rescan";

/// What the writer appends to a rescan cookie's name for the file that says why its walk could
/// not be recorded (see [`answer`]).
const FAILED_SUFFIX: &str = ".failed";

/// Whether `name` is a cookie's (`<pid>-<n>`, with `-rescan` after it for a rescan, as
/// [`ask_writer`] names them).
pub fn is_cookie(name: &std::ffi::OsStr) -> bool {
    let name = name
        .to_str()
        .map(|n| n.strip_suffix(RESCAN_SUFFIX).unwrap_or(n));
    let Some((pid, n)) = name.and_then(|name| name.split_once('-')) else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(pid) && digits(n)
}

/// The cookies in `folder`: regular files named as cookies (never followed, never anything
/// else a folder may hold).
pub fn cookies_in(folder: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| is_cookie(&e.file_name()))
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The files in `folder` that say why a rescan failed (see [`answer`]), which a follower that
/// was killed before it read its own leaves behind.
fn failures_in(folder: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name();
                    let cookie = name.to_str().and_then(|n| n.strip_suffix(FAILED_SUFFIX));
                    cookie.is_some_and(|c| asks_rescan(c.as_ref()))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Answers the cookie at `cookie`: removes it, which is what its follower waits for. When the
/// cookie asked for a rescan and `failure` says why the walk could not be recorded, a file
/// beside it says so first, which [`ask_writer`] reads once the cookie is gone.
pub fn answer(cookie: &Path, failure: Option<&str>) {
    if let Some(why) = failure.filter(|_| cookie.file_name().is_some_and(asks_rescan)) {
        // A follower that gave up has taken its cookie back: nobody would read the note.
        if !cookie.is_file() {
            return;
        }
        // Made new, never through what sits at that path (the folder is anyone's who can
        // write to it: a link there would have the worker write through it).
        let failed = failed_beside(cookie);
        let _ = std::fs::remove_file(&failed);
        let note = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&failed);
        // On the full disk that failed the walk, the note may not be made: the cookie is then
        // left unanswered, and its follower gives up and says so, rather than hear success.
        match note {
            // Best effort: an empty note still says the walk was not recorded.
            Ok(mut note) => {
                let _ = std::io::Write::write_all(&mut note, why.as_bytes());
            }
            Err(e) => {
                tracing::debug!(
                    "cannot say why a rescan failed beside {}: {e}",
                    cookie.display()
                );
                return;
            }
        }
    }
    let _ = std::fs::remove_file(cookie);
}

/// The file that says why the rescan `cookie` asked for could not be recorded.
fn failed_beside(cookie: &Path) -> PathBuf {
    let mut name = cookie.as_os_str().to_owned();
    name.push(FAILED_SUFFIX);
    PathBuf::from(name)
}

/// Makes the sync folder beside the index this writer's, clearing the cookies a killed writer
/// left (they would never be answered): a new folder is made and marked; a marked one, or an
/// empty one, is taken as it is. Anything else at that path (a user's folder that holds other
/// files, a file, a link) is left untouched, and `None` says there is no sync folder: commands
/// beside this writer then read without waiting for its watcher.
pub fn claim_folder(index_path: &Path) -> Option<PathBuf> {
    let folder = sync_folder(index_path);
    let refuse = |why: &str| {
        tracing::warn!(
            "{} {why}, so it is not used as the worker's sync folder and nothing in it is touched; \
             commands run beside the worker read without waiting for it to take in the latest \
             changes. Move it away, or set another index_path",
            folder.display()
        );
        None
    };
    match std::fs::symlink_metadata(&folder) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Err(e) = std::fs::create_dir(&folder) {
                tracing::debug!("cannot make the sync folder {}: {e}", folder.display());
                return None;
            }
        }
        Err(e) => return refuse(&format!("cannot be read ({e})")),
        Ok(meta) if !meta.is_dir() => return refuse("is not a folder"),
        Ok(_) if folder.join(MARK).is_file() => {
            for file in cookies_in(&folder).into_iter().chain(failures_in(&folder)) {
                let _ = std::fs::remove_file(file);
            }
            return Some(folder);
        }
        Ok(_) => {
            let empty = std::fs::read_dir(&folder).is_ok_and(|mut e| e.next().is_none());
            if !empty {
                return refuse("holds files that are not the worker's");
            }
        }
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(folder.join(MARK))
    {
        Ok(_) => Some(folder),
        Err(e) => {
            tracing::debug!("cannot mark the sync folder {}: {e}", folder.display());
            None
        }
    }
}

/// Removes a folder [`claim_folder`] claimed: its cookies and mark, then the folder if that
/// leaves it empty (never recursively: whatever else appeared in it stays).
pub fn release_folder(folder: &Path) {
    for file in cookies_in(folder).into_iter().chain(failures_in(folder)) {
        let _ = std::fs::remove_file(file);
    }
    let _ = std::fs::remove_file(folder.join(MARK));
    let _ = std::fs::remove_dir(folder);
}

/// Says once, when a worker holds the index but has no sync folder (it found something else at
/// that path, see [`claim_folder`]), that this process's reads may miss the latest changes: the
/// worker's log says why, but the person running the command would otherwise never know.
fn warn_of_a_worker_without_a_sync_folder(index_path: &Path) {
    static SAID: std::sync::Once = std::sync::Once::new();
    if let Some(worker) = holder::read(index_path).filter(|h| !h.is_command()) {
        SAID.call_once(|| {
            tracing::warn!(
                "{} has no sync folder beside the index ({}: its log says why), so this \
                 answer may miss changes made on disk in the last moments",
                worker.describe(),
                sync_folder(index_path).display()
            );
        });
    }
}

/// How a sync with the writer ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Synced {
    /// No watching writer (no sync folder), or no cookie could be left: nothing to wait for.
    NoWriter,
    /// The writer took in every change made before the call.
    Answered,
    /// The writer walked every root as asked ([`Ask::Rescan`]), but its index could not record
    /// the walk: why.
    NotRecorded(String),
    /// The writer did not answer in time; the read answers from the index as it is.
    GaveUp,
}

/// Whether a cookie's name asks for a rescan ([`Ask::Rescan`]).
pub fn asks_rescan(name: &std::ffi::OsStr) -> bool {
    is_cookie(name) && name.to_str().is_some_and(|n| n.ends_with(RESCAN_SUFFIX))
}

/// Leaves a cookie for the writer's watcher and waits until it is answered (see the module
/// doc). A writer that does not answer in time costs one warning.
pub fn sync_with_writer(index_path: &Path) -> Synced {
    ask_writer(index_path, Ask::CatchUp)
}

/// [`sync_with_writer`], asking the writer for `ask`. A worker that has not finished its first
/// reconcile (its note says it is [`building`](holder::Holder::building)) is waited for first:
/// until then its index holds a previous run's rows, or none, and its watcher may not answer
/// yet. A worker whose note goes on saying so past that wait is asked all the same.
pub fn ask_writer(index_path: &Path, ask: Ask) -> Synced {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let holder = holder::read(index_path);
    // A command answers no cookie: what it holds is complete when a read follows it (a
    // `reindex` computing embeddings), and a sync folder beside it is one a killed worker
    // left, which nobody watches.
    if holder.as_ref().is_some_and(holder::Holder::is_command) {
        return Synced::NoWriter;
    }
    let pid = holder.map(|worker| worker.pid);
    if let Some(pid) = pid
        && gave_up(Wait::Answer, index_path, pid)
    {
        tracing::debug!("not asking the worker (pid {pid}) again: it did not answer a moment ago");
        return Synced::GaveUp;
    }
    let building = || holder::read(index_path).is_some_and(|h| !h.is_command() && h.building);
    let building_given_up = pid.is_some_and(|pid| gave_up(Wait::Build, index_path, pid));
    if building()
        && !building_given_up
        && !wait_for_writer(
            index_path,
            building,
            "build its index",
            "asking it for the changes made on disk",
        )
        && let Some(pid) = pid
    {
        give_up(Wait::Build, index_path, pid);
    }
    let folder = sync_folder(index_path);
    if !folder.join(MARK).is_file() {
        warn_of_a_worker_without_a_sync_folder(index_path);
        return Synced::NoWriter;
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let suffix = match ask {
        Ask::CatchUp => "",
        Ask::Rescan => RESCAN_SUFFIX,
    };
    let cookie = folder.join(format!("{}-{n}{suffix}", std::process::id()));
    // A note an earlier process of this pid was never there to read would answer for this one.
    let _ = std::fs::remove_file(failed_beside(&cookie));
    if let Err(e) = std::fs::write(&cookie, b"") {
        // Said once: a command run as another user than the worker's meets it on every read.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                "cannot leave a sync cookie in {} ({e}), so this answer may miss changes made on \
                 disk in the last moments; run the command as the worker's user, or let this \
                 user write in that folder",
                folder.display()
            );
        });
        return Synced::NoWriter;
    }
    if !wait_for_writer(
        index_path,
        || cookie.exists(),
        "take in the changes made on disk",
        "answering from the index as it is",
    ) {
        let _ = std::fs::remove_file(&cookie);
        if let Some(pid) = pid {
            give_up(Wait::Answer, index_path, pid);
        }
        return Synced::GaveUp;
    }
    let failed = failed_beside(&cookie);
    match std::fs::read_to_string(&failed) {
        Ok(why) => {
            let _ = std::fs::remove_file(&failed);
            Synced::NotRecorded(match why.trim() {
                "" => "the worker could not write why; its log and directory::index::status \
                       `index_error` say"
                    .to_string(),
                _ => why,
            })
        }
        Err(_) => Synced::Answered,
    }
}

/// Waits while `pending` holds, for the writer to `what` (as the warnings say it): up to
/// [`COOKIE_WAIT`], then for as long as the writer keeps using the CPU, up to [`BUSY_WAIT`].
/// Returns whether `pending` ended; a writer given up on costs one warning, saying what is
/// done `then`.
fn wait_for_writer(index_path: &Path, pending: impl Fn() -> bool, what: &str, then: &str) -> bool {
    let started = Instant::now();
    let mut next_look = COOKIE_WAIT;
    let mut writer: Option<Busy> = None;
    let mut pause = Duration::from_micros(50);
    while pending() {
        if started.elapsed() > next_look {
            match writer.as_mut() {
                // The first look: how much CPU the writer has used so far.
                None => {
                    writer = Some(Busy::of_writer(index_path));
                    tracing::warn!(
                        "waiting for the worker to {what} (no answer within {} ms; up to {} s \
                         while it works)",
                        COOKIE_WAIT.as_millis(),
                        BUSY_WAIT.as_secs()
                    );
                }
                Some(busy) => {
                    if started.elapsed() > BUSY_WAIT || !busy.still_working() {
                        tracing::warn!(
                            "the worker did not confirm within {} ms that it had done so; \
                             {then}",
                            started.elapsed().as_millis()
                        );
                        return false;
                    }
                }
            }
            next_look += COOKIE_WAIT;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
    true
}

/// Whether the writer is working: its CPU time, as last read.
struct Busy {
    pid: Option<u32>,
    cpu: Option<u64>,
}

impl Busy {
    /// The worker its holder note names, and its CPU time now (none without a live worker: a
    /// command's work is none of a cookie's business).
    fn of_writer(index_path: &Path) -> Busy {
        let pid = holder::read(index_path)
            .filter(|h| !h.is_command())
            .map(|h| h.pid);
        Busy {
            pid,
            cpu: pid.and_then(cpu_ticks),
        }
    }

    /// Whether the writer used the CPU since the last look (a stopped process does not).
    fn still_working(&mut self) -> bool {
        let now = self.pid.and_then(cpu_ticks);
        let working = matches!((self.cpu, now), (Some(before), Some(after)) if after > before);
        self.cpu = now;
        working
    }
}

/// The user and system CPU time of process `pid`, in clock ticks (`/proc/<pid>/stat`), or
/// `None` when it is stopped, gone or unreadable.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: the fields follow its last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Field 3 of the whole line is the state; 14 and 15 are utime and stime.
    if matches!(fields.first(), Some(&("T" | "t"))) {
        return None;
    }
    let ticks = |at: usize| fields.get(at)?.parse::<u64>().ok();
    Some(ticks(11)? + ticks(12)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    /// A writer's sync folder beside `index`, and its holder note naming `writer`, a worker
    /// past its first reconcile.
    fn writer_beside(index: &Path, writer: &Child) {
        claim_folder(index).expect("sync folder");
        holder::write_note(index, &worker_note(writer, true)).expect("note");
    }

    fn worker_note(writer: &Child, built: bool) -> holder::Holder {
        holder::Holder {
            pid: writer.id(),
            role: holder::WORKER.to_string(),
            settled: built,
            building: !built,
            ..holder::Holder::default()
        }
    }

    /// Answers the first cookie left in `index`'s sync folder after `after`.
    fn answer_after(index: &Path, after: Duration) -> std::thread::JoinHandle<()> {
        let folder = sync_folder(index);
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                let cookies = cookies_in(&folder);
                if let Some(cookie) = cookies.first() {
                    std::thread::sleep(after);
                    let _ = std::fs::remove_file(cookie);
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    }

    #[test]
    fn a_folder_at_the_sync_path_that_is_not_the_writers_is_never_touched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("photos");
        let folder = sync_folder(&index);
        // A user's folder that happens to sit at `<index_path>.sync`.
        std::fs::create_dir_all(folder.join("2024")).expect("mkdir");
        std::fs::write(folder.join("2024/a.jpg"), b"precious").expect("write");
        std::fs::write(folder.join("1-2"), b"named like a cookie").expect("write");
        assert_eq!(claim_folder(&index), None);
        assert_eq!(sync_with_writer(&index), Synced::NoWriter);
        let mut left: Vec<String> = std::fs::read_dir(&folder)
            .expect("still there")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["1-2", "2024"], "nothing added, nothing removed");
        assert_eq!(
            std::fs::read(folder.join("2024/a.jpg")).expect("kept"),
            b"precious"
        );

        // A link there is not followed into its target.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        let linked = dir.path().join("linked");
        std::os::unix::fs::symlink(&elsewhere, sync_folder(&linked)).expect("link");
        assert_eq!(claim_folder(&linked), None);
        assert_eq!(std::fs::read_dir(&elsewhere).expect("dir").count(), 0);
    }

    #[test]
    fn a_writer_clears_only_cookies_from_its_own_folder_and_removes_it_when_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        let folder = claim_folder(&index).expect("a new folder is claimed");
        // A killed writer's cookies, and a file someone put there since.
        std::fs::write(folder.join("4242-0"), b"").expect("cookie");
        std::fs::write(folder.join("notes.txt"), b"mine").expect("write");
        assert_eq!(
            claim_folder(&index),
            Some(folder.clone()),
            "marked: claimed again"
        );
        assert!(!folder.join("4242-0").exists(), "a stale cookie is cleared");
        release_folder(&folder);
        assert_eq!(
            std::fs::read(folder.join("notes.txt")).expect("kept"),
            b"mine"
        );
        std::fs::remove_file(folder.join("notes.txt")).expect("remove");
        // An empty folder (one a writer made and never marked) is taken, and then removed.
        assert_eq!(claim_folder(&index), Some(folder.clone()));
        release_folder(&folder);
        assert!(!folder.exists());
    }

    #[test]
    fn cookies_are_named_by_pid_and_count() {
        let name = std::ffi::OsStr::new;
        for cookie in ["1-0", "4242-17"] {
            assert!(is_cookie(name(cookie)), "{cookie}");
            assert!(!asks_rescan(name(cookie)), "{cookie}");
        }
        assert!(is_cookie(name("4242-17-rescan")));
        assert!(asks_rescan(name("4242-17-rescan")));
        for other in [
            "",
            "-",
            "1-",
            "-1",
            "a-1",
            "1-2-3",
            ".iii-directory-sync",
            "1-0.tmp",
            "-rescan",
            "1-rescan",
            "1-0-rescan-rescan",
        ] {
            assert!(!is_cookie(name(other)), "{other}");
            assert!(!asks_rescan(name(other)), "{other}");
        }
    }

    #[test]
    fn a_follower_waits_past_the_first_second_only_for_a_writer_that_is_working() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        assert_eq!(sync_with_writer(&index), Synced::NoWriter);

        // A writer spinning on the CPU, answering after 2.5 s: waited for.
        let spinning = Reaped(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("spawn"),
        );
        writer_beside(&index, &spinning.0);
        let answer = answer_after(&index, Duration::from_millis(2500));
        assert_eq!(sync_with_writer(&index), Synced::Answered);
        answer.join().expect("answered");
        drop(spinning);

        // A writer that uses no CPU (asleep, as a stopped or stuck one): given up on.
        let idle = Reaped(Command::new("sleep").arg("30").spawn().expect("spawn"));
        writer_beside(&index, &idle.0);
        let answer = answer_after(&index, Duration::from_millis(4000));
        assert_eq!(sync_with_writer(&index), Synced::GaveUp);
        answer.join().expect("joined");
    }

    /// A process a test started, killed when the test ends, failed assertions included: a
    /// spinning `sh` left behind by a failed run would hold a core for every later test.
    struct Reaped(Child);

    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_follower_waits_for_a_booting_workers_first_reconcile() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        let worker = Reaped(Command::new("sleep").arg("30").spawn().expect("spawn"));
        // Booting: no sync folder yet, and a note that is not settled.
        holder::write_note(&index, &worker_note(&worker.0, false)).expect("note");
        let settles = {
            let (index, note) = (index.clone(), worker_note(&worker.0, true));
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(400));
                claim_folder(&index).expect("sync folder");
                holder::write_note(&index, &note).expect("note");
            })
        };
        let answer = answer_after(&index, Duration::ZERO);
        let started = Instant::now();
        assert_eq!(sync_with_writer(&index), Synced::Answered);
        assert!(started.elapsed() >= Duration::from_millis(400));
        settles.join().expect("settled");
        answer.join().expect("answered");
    }

    #[test]
    fn a_worker_whose_note_goes_on_saying_it_builds_is_asked_all_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        // Idle, and noted as building for good (its last note could not be written).
        let worker = Reaped(Command::new("sleep").arg("30").spawn().expect("spawn"));
        claim_folder(&index).expect("sync folder");
        holder::write_note(&index, &worker_note(&worker.0, false)).expect("note");
        let answer = answer_after(&index, Duration::ZERO);
        let started = Instant::now();
        assert_eq!(sync_with_writer(&index), Synced::Answered);
        assert!(
            started.elapsed() < COOKIE_WAIT * 3,
            "{:?}",
            started.elapsed()
        );
        answer.join().expect("answered");
        // Waited for once: the next read of this process asks at once.
        let answer = answer_after(&index, Duration::ZERO);
        let started = Instant::now();
        assert_eq!(sync_with_writer(&index), Synced::Answered);
        assert!(started.elapsed() < COOKIE_WAIT, "{:?}", started.elapsed());
        answer.join().expect("answered");
        // A note without the word (a worker of an older build) is not waited for at all.
        let other = Reaped(Command::new("sleep").arg("30").spawn().expect("spawn"));
        let older = holder::Holder {
            pid: other.0.id(),
            role: holder::WORKER.to_string(),
            ..holder::Holder::default()
        };
        holder::write_note(&index, &older).expect("note");
        let answer = answer_after(&index, Duration::ZERO);
        let started = Instant::now();
        assert_eq!(sync_with_writer(&index), Synced::Answered);
        assert!(started.elapsed() < COOKIE_WAIT, "{:?}", started.elapsed());
        answer.join().expect("answered");
    }

    /// A command that holds the index past its rows (a `reindex` computing embeddings) answers
    /// no cookie: a read beside it follows it at once, even beside the sync folder a killed
    /// worker left (it waited for the whole embedding, blaming a worker that did not exist).
    #[test]
    fn a_command_holding_the_index_is_asked_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        let folder = claim_folder(&index).expect("a killed worker's sync folder");
        let command = Reaped(Command::new("sleep").arg("30").spawn().expect("spawn"));
        let note = holder::Holder {
            pid: command.0.id(),
            role: "reindex".to_string(),
            settled: true,
            ..holder::Holder::default()
        };
        holder::write_note(&index, &note).expect("note");
        let started = Instant::now();
        assert_eq!(sync_with_writer(&index), Synced::NoWriter);
        assert!(started.elapsed() < COOKIE_WAIT, "{:?}", started.elapsed());
        assert!(cookies_in(&folder).is_empty(), "no cookie is left");
    }

    /// A worker given up on is not waited for again by the same process, unless asked afresh:
    /// a download that just landed asks whether it took the files in.
    #[test]
    fn a_worker_given_up_on_is_asked_afresh_when_the_answer_matters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        let worker = Reaped(Command::new("sleep").arg("30").spawn().expect("spawn"));
        writer_beside(&index, &worker.0);
        assert_eq!(sync_with_writer(&index), Synced::GaveUp);
        let started = Instant::now();
        assert_eq!(sync_with_writer(&index), Synced::GaveUp);
        assert!(started.elapsed() < COOKIE_WAIT, "{:?}", started.elapsed());
        let answer = answer_after(&index, Duration::ZERO);
        assert_eq!(ask_writer_afresh(&index, Ask::CatchUp), Synced::Answered);
        answer.join().expect("answered");
    }

    #[test]
    fn a_failure_note_is_made_new_and_only_for_a_cookie_still_waiting() {
        let dir = tempfile::tempdir().expect("tempdir");
        let folder = dir.path().join("index.redb.sync");
        std::fs::create_dir(&folder).expect("mkdir");
        // A link planted where the note goes: the file it points at is left as it is.
        let planted = dir.path().join("precious.txt");
        std::fs::write(&planted, "mine").expect("write");
        let cookie = folder.join("7-1-rescan");
        std::fs::write(&cookie, b"").expect("cookie");
        std::os::unix::fs::symlink(&planted, failed_beside(&cookie)).expect("link");
        answer(&cookie, Some("index: no space left on device"));
        assert_eq!(std::fs::read_to_string(&planted).expect("read"), "mine");
        assert_eq!(
            std::fs::read_to_string(failed_beside(&cookie)).expect("the note"),
            "index: no space left on device"
        );
        assert!(!cookie.exists(), "answered");
        // A cookie its follower took back gets no note.
        std::fs::remove_file(failed_beside(&cookie)).expect("remove");
        answer(&cookie, Some("index: no space left on device"));
        assert!(!failed_beside(&cookie).exists());
    }

    #[test]
    fn cpu_time_is_read_for_a_live_process_only() {
        let mine = cpu_ticks(std::process::id());
        assert!(mine.is_some());
        assert_eq!(cpu_ticks(u32::MAX), None);
    }
}
