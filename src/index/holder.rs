//! Who holds the index as its writer, for the processes that find it held. The writer's lock
//! (redb's) says only that some process holds it; a note beside the index file
//! (`<index_path>.holder`: `{pid, role, folders}`) says which, and which folders it indexes. A
//! process of this binary declares its role once ([`declare`]): `worker`, or the command it
//! runs (`reindex`, `list`, `download`…).
//!
//! What the others do with it (`Index::open_writer_after_commands`, `Directory::open_shared`):
//! a command holds the index for a while and then lets go, so a worker starting, a `reindex`,
//! or a read that would bring the index up to date waits for it instead of failing or
//! following an index that is being rebuilt; a worker holds it for good, so a second worker
//! stops with an error and a command follows the worker's live copy, unless the worker
//! indexes other folders than the command's configuration names.
//!
//! The note is consulted only while the lock is held, so one left by a process that died is
//! harmless: its pid is no longer alive, and the note is read as no note.
//!
//! A worker that waits for a command says so in a second note, `<index_path>.wanted` (a
//! [`Wanted`] while it waits): a command whose remaining work can wait for the worker (a
//! `reindex` embedding skills, which the worker does in the background anyway) stops early
//! and lets go, rather than keep the worker off the bus for minutes.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The role this process declared, if it did (a library user, a test: none).
static ROLE: OnceLock<String> = OnceLock::new();

/// The role of a worker serving the bus; every other role is a command.
pub const WORKER: &str = "worker";

/// How long a process that found the index held waits for the holder's note: the holder
/// writes it right after taking the lock, so a missing note is usually a moment away.
pub const NOTE_WAIT: Duration = Duration::from_secs(2);

/// Declares this process's role, written in the note of every index it opens as the writer.
/// The first declaration holds.
pub fn declare(role: &str) {
    let _ = ROLE.set(role.to_string());
}

/// The process holding an index, as its note says.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub role: String,
    /// The folders it indexes, `[configuration key, path]` for each root that is on: a
    /// process with other folders must not read the rows this index holds as its own.
    #[serde(default)]
    pub folders: Vec<(String, String)>,
    /// A worker's live configuration, which a command beside it takes for its own: the
    /// worker's stored configuration wins over the command's `--config` (download policies,
    /// the bundles lock, the search model), as it does for the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<NotedConfig>,
    /// The index's rows are complete. A command says so when it only adds what a read does
    /// not need (a `reindex` computing embeddings): a read may then follow it rather than wait.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settled: bool,
    /// A worker's first reconcile is not done: until it is, a read beside it waits
    /// (`sync_cookie`), since the rows it would read are a previous run's, or none. Said while
    /// building rather than once built, so that a note without it (a worker of an older
    /// build, or one whose last note could not be written) is never waited for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub building: bool,
}

/// A worker's configuration as its note carries it: its settings, and the folder relative
/// paths in them resolve against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotedConfig {
    pub settings: serde_json::Value,
    pub base: PathBuf,
}

impl NotedConfig {
    /// The configuration of this process's own settings, as noted.
    pub fn of(settings: &crate::config::Settings) -> NotedConfig {
        NotedConfig {
            settings: settings.to_json(),
            base: crate::config::base_dir(),
        }
    }

    /// The worker's configuration, resolved as the worker resolves it; `None` when the note's
    /// settings do not read as settings (a note of another build).
    pub fn config(&self) -> Option<crate::config::Config> {
        let (settings, _) = crate::config::Settings::from_json(&self.settings).ok()?;
        let paths = settings.resolve(&self.base, crate::config::home_dir().as_deref());
        Some(crate::config::Config { settings, paths })
    }
}

impl Holder {
    /// Whether the holder is a command of this binary, which lets go of the index when done.
    pub fn is_command(&self) -> bool {
        self.role != WORKER
    }

    /// How a message names it: "`iii-directory reindex` (pid 4242)".
    pub fn describe(&self) -> String {
        match self.is_command() {
            true => format!("`iii-directory {}` (pid {})", self.role, self.pid),
            false => format!("a running iii-directory worker (pid {})", self.pid),
        }
    }
}

fn note_path(index: &Path) -> PathBuf {
    crate::store::beside(index, ".holder")
}

fn wanted_path(index: &Path) -> PathBuf {
    crate::store::beside(index, ".wanted")
}

/// This process's note that it waits for the index as a worker, removed when dropped (once
/// the worker opened the index, or gave up).
pub struct Wanted {
    path: PathBuf,
}

impl Wanted {
    /// Leaves the note, when this process declared itself a worker. Best effort, and only as a
    /// new file: a note of a process that died is replaced, anything else at that path (a
    /// user's file, a link, a live worker's note) is left as it is.
    pub fn note(index: &Path) -> Option<Wanted> {
        if ROLE.get().map(String::as_str) != Some(WORKER) {
            return None;
        }
        let path = wanted_path(index);
        if read_note(&path).is_some_and(|holder| !alive(holder.pid)) {
            let _ = std::fs::remove_file(&path);
        }
        let holder = Holder {
            pid: std::process::id(),
            role: WORKER.into(),
            ..Holder::default()
        };
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut file| {
                let bytes = serde_json::to_vec(&holder).map_err(std::io::Error::other)?;
                std::io::Write::write_all(&mut file, &bytes)
            });
        match written {
            Ok(()) => Some(Wanted { path }),
            Err(e) => {
                tracing::debug!(path = %path.display(), %e, "could not note that this worker waits for the index");
                None
            }
        }
    }
}

impl Drop for Wanted {
    fn drop(&mut self) {
        // Only our own note: another worker may have replaced a note it found stale.
        if read_note(&self.path).is_some_and(|holder| holder.pid == std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The worker waiting for the index at `index`, when a live process other than this one says
/// so ([`Wanted`]), and this process is a command (a worker holds the index for good).
pub fn wanted_by(index: &Path) -> Option<Holder> {
    if ROLE.get().is_some_and(|role| role == WORKER) {
        return None;
    }
    read_note(&wanted_path(index))
        .filter(|holder| holder.pid != std::process::id() && alive(holder.pid))
}

/// Whether the rows of an index this process notes itself as holding are complete (see
/// [`Holder::settled`] and [`Holder::building`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// Not yet: the process has not reconciled the file it just opened or built.
    Building,
    /// A reconcile of this file is done.
    Complete,
}

/// Notes this process as the writer of the index at `index`, indexing `folders` (when it
/// declared a role), with its live `settings` when it is a worker. Best effort: without the
/// note, the commands beside wait [`NOTE_WAIT`] for one at each open (see
/// `Index::open_writer_after_commands`), then tell a worker by its sync folder, and follow it
/// with its configuration file's settings rather than its live ones; a worker says so once.
pub fn note(
    index: &Path,
    folders: Vec<(String, String)>,
    settings: &crate::config::Settings,
    rows: Rows,
) {
    let Some(role) = ROLE.get() else {
        return;
    };
    let (settled, building) = match rows {
        Rows::Building => (false, role == WORKER),
        Rows::Complete => (true, false),
    };
    let holder = Holder {
        pid: std::process::id(),
        role: role.clone(),
        folders,
        config: (role == WORKER).then(|| NotedConfig::of(settings)),
        settled,
        building,
    };
    match write_note(index, &holder) {
        Err(e) if role == WORKER => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(
                    "cannot write {} ({e}), the note that tells commands run beside this worker \
                     that it holds the index: each of them waits {} s for it at every start, \
                     and takes the --config file's settings rather than the live ones; move \
                     aside whatever is at that path, or let this user write there",
                    note_path(index).display(),
                    NOTE_WAIT.as_secs()
                )
            });
        }
        Err(e) => {
            tracing::debug!(index = %index.display(), %e, "could not note the index's holder")
        }
        Ok(()) => {}
    }
}

/// Marks this process's note as [`Holder::settled`], and no longer [`Holder::building`]. Best
/// effort, as [`note`].
pub fn note_settled(index: &Path) {
    let Some(mut holder) = own_note(index) else {
        return;
    };
    holder.settled = true;
    holder.building = false;
    if let Err(e) = write_note(index, &holder) {
        tracing::debug!(index = %index.display(), %e, "could not note that the index's rows are complete");
    }
}

/// This process's own note, if the note at `index` is one.
fn own_note(index: &Path) -> Option<Holder> {
    read_note(&note_path(index)).filter(|h| h.pid == std::process::id())
}

/// Writes the note naming `holder` as the writer of the index at `index`, whole (a reader
/// never sees half of it). Public for tests that stand in for a worker.
pub fn write_note(index: &Path, holder: &Holder) -> std::io::Result<()> {
    let path = note_path(index);
    // `index_path` is configuration: what sits at `<index>.holder` is replaced only when it is
    // a note (a regular file that reads as one), never a user's file or a link.
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Ok(meta) if meta.is_file() && read_note(&path).is_some() => {}
        Ok(_) | Err(_) => {
            return Err(std::io::Error::other(format!(
                "{} is not a holder note; it is left as it is",
                path.display()
            )));
        }
    }
    let temporary = path.with_extension(format!("holder.{}.tmp", holder.pid));
    let written = serde_json::to_vec(holder)
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            // A new file: a link or a file left at the temporary name is not written through.
            let _ = std::fs::remove_file(&temporary);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temporary)?;
            std::io::Write::write_all(&mut file, &bytes)
        })
        .and_then(|()| std::fs::rename(&temporary, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// The note as it is now, when it names a live process.
pub fn read(index: &Path) -> Option<Holder> {
    read_note(&note_path(index)).filter(|holder| alive(holder.pid))
}

/// The note at `path`, read capped (a note is a few hundred bytes; a user's large file at that
/// path is not one).
fn read_note(path: &Path) -> Option<Holder> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(1 << 16)
        .read_to_end(&mut bytes)
        .ok()?;
    serde_json::from_slice::<Holder>(&bytes).ok()
}

pub(crate) fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // Signal 0 checks that the process exists; EPERM means it does, owned by someone else.
    // SAFETY: kill with signal 0 sends nothing; it only checks the pid.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_processs_own_note_is_marked_settled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        let own = Holder {
            pid: std::process::id(),
            role: "reindex".into(),
            ..Holder::default()
        };
        write_note(&index, &own).expect("note");
        note_settled(&index);
        assert!(read_note(&note_path(&index)).expect("note").settled);
        let other = Holder {
            pid: std::os::unix::process::parent_id(),
            role: "reindex".into(),
            ..Holder::default()
        };
        write_note(&index, &other).expect("note");
        note_settled(&index);
        assert!(!read_note(&note_path(&index)).expect("note").settled);
    }

    #[test]
    fn a_users_file_or_a_link_at_the_notes_path_is_never_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        let holder = Holder {
            pid: std::process::id(),
            role: WORKER.into(),
            ..Holder::default()
        };
        std::fs::write(note_path(&index), "my holder text").expect("write");
        assert!(write_note(&index, &holder).is_err());
        assert_eq!(
            std::fs::read_to_string(note_path(&index)).expect("read"),
            "my holder text"
        );
        std::fs::remove_file(note_path(&index)).expect("remove");
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "MY NOTES").expect("write");
        std::os::unix::fs::symlink(&notes, note_path(&index)).expect("link");
        assert!(write_note(&index, &holder).is_err());
        assert_eq!(std::fs::read_to_string(&notes).expect("read"), "MY NOTES");
        // A link planted at the temporary name is not written through either.
        std::fs::remove_file(note_path(&index)).expect("unlink");
        let temporary = note_path(&index).with_extension(format!("holder.{}.tmp", holder.pid));
        std::os::unix::fs::symlink(&notes, &temporary).expect("link");
        write_note(&index, &holder).expect("a new note");
        assert_eq!(std::fs::read_to_string(&notes).expect("read"), "MY NOTES");
        assert_eq!(read_note(&note_path(&index)), Some(holder));
    }

    #[test]
    fn a_note_of_a_live_process_names_it_and_one_of_a_dead_one_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        let write = |holder: &Holder| write_note(&index, holder).expect("write");
        // The parent of this test process is alive and is not this process.
        let parent = Holder {
            pid: std::os::unix::process::parent_id(),
            role: "reindex".into(),
            ..Holder::default()
        };
        write(&parent);
        assert_eq!(read(&index), Some(parent.clone()));
        assert!(parent.is_command());
        assert_eq!(
            parent.describe(),
            format!("`iii-directory reindex` (pid {})", parent.pid)
        );
        // A pid no process has (above the kernel's pid_max).
        write(&Holder {
            pid: 1 << 23,
            role: WORKER.into(),
            ..Holder::default()
        });
        assert_eq!(read(&index), None);
    }
}
