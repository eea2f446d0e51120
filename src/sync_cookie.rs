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

/// The folder beside the index where followers leave sync cookies. Only a watching writer
/// makes it, and it removes it when it stops.
pub fn sync_folder(index_path: &Path) -> PathBuf {
    crate::store::beside(index_path, ".sync")
}

/// How a sync with the writer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synced {
    /// No watching writer (no sync folder), or no cookie could be left: nothing to wait for.
    NoWriter,
    /// The writer took in every change made before the call.
    Answered,
    /// The writer did not answer in time; the read answers from the index as it is.
    GaveUp,
}

/// Leaves a cookie for the writer's watcher and waits until it is answered (see the module
/// doc). A writer that does not answer in time costs one warning.
pub fn sync_with_writer(index_path: &Path) -> Synced {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let folder = sync_folder(index_path);
    if !folder.is_dir() {
        return Synced::NoWriter;
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let cookie = folder.join(format!("{}-{n}", std::process::id()));
    if let Err(e) = std::fs::write(&cookie, b"") {
        tracing::debug!("cannot leave a sync cookie in {}: {e}", folder.display());
        return Synced::NoWriter;
    }
    let started = Instant::now();
    let mut next_look = COOKIE_WAIT;
    let mut writer: Option<Busy> = None;
    let mut pause = Duration::from_micros(50);
    while cookie.exists() {
        if started.elapsed() > next_look {
            match writer.as_mut() {
                // The first look: how much CPU the writer has used so far.
                None => {
                    writer = Some(Busy::of_writer(index_path));
                    tracing::warn!(
                        "waiting for the worker to take in the changes made on disk (no answer \
                         within {} ms; up to {} s while it works)",
                        COOKIE_WAIT.as_millis(),
                        BUSY_WAIT.as_secs()
                    );
                }
                Some(busy) => {
                    if started.elapsed() > BUSY_WAIT || !busy.still_working() {
                        let _ = std::fs::remove_file(&cookie);
                        tracing::warn!(
                            "the worker did not confirm within {} ms that it had taken in the \
                             latest changes; answering from the index as it is",
                            started.elapsed().as_millis()
                        );
                        return Synced::GaveUp;
                    }
                }
            }
            next_look += COOKIE_WAIT;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
    Synced::Answered
}

/// Whether the writer is working: its CPU time, as last read.
struct Busy {
    pid: Option<u32>,
    cpu: Option<u64>,
}

impl Busy {
    /// The writer its holder note names, and its CPU time now (none without a live writer).
    fn of_writer(index_path: &Path) -> Busy {
        let pid = holder::read(index_path).map(|h| h.pid);
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

    /// A writer's sync folder beside `index`, and its holder note naming `writer`.
    fn writer_beside(index: &Path, writer: &Child) {
        std::fs::create_dir_all(sync_folder(index)).expect("sync folder");
        let note = holder::Holder {
            pid: writer.id(),
            role: holder::WORKER.to_string(),
            folders: Vec::new(),
        };
        holder::write_note(index, &note).expect("note");
    }

    /// Answers the first cookie left in `index`'s sync folder after `after`.
    fn answer_after(index: &Path, after: Duration) -> std::thread::JoinHandle<()> {
        let folder = sync_folder(index);
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                let cookies: Vec<PathBuf> = std::fs::read_dir(&folder)
                    .map(|entries| entries.flatten().map(|e| e.path()).collect())
                    .unwrap_or_default();
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
    fn a_follower_waits_past_the_first_second_only_for_a_writer_that_is_working() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        assert_eq!(sync_with_writer(&index), Synced::NoWriter);

        // A writer spinning on the CPU, answering after 2.5 s: waited for.
        let mut spinning = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("spawn");
        writer_beside(&index, &spinning);
        let answer = answer_after(&index, Duration::from_millis(2500));
        assert_eq!(sync_with_writer(&index), Synced::Answered);
        answer.join().expect("answered");
        let _ = spinning.kill();
        let _ = spinning.wait();

        // A writer that uses no CPU (asleep, as a stopped or stuck one): given up on.
        let mut idle = Command::new("sleep").arg("30").spawn().expect("spawn");
        writer_beside(&index, &idle);
        let answer = answer_after(&index, Duration::from_millis(4000));
        assert_eq!(sync_with_writer(&index), Synced::GaveUp);
        answer.join().expect("joined");
        let _ = idle.kill();
        let _ = idle.wait();
    }

    #[test]
    fn cpu_time_is_read_for_a_live_process_only() {
        let mine = cpu_ticks(std::process::id());
        assert!(mine.is_some());
        assert_eq!(cpu_ticks(u32::MAX), None);
    }
}
