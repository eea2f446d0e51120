//! Why a command of the command line failed: a typed error with its source, printed once on
//! stderr as `error: …` with exit code 1.

use std::path::PathBuf;
use std::time::Duration;

use iii_directory::config::ConfigError;
use iii_directory::worker::{BusSearchError, ServeError};
use iii_directory::{IoError, OpenError};

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The command must be the index's writer, and a running worker is.
    #[error(
        "a running iii-directory worker owns the index at {}; stop the worker to reindex \
         offline (`reindex` without --from-scratch asks the worker to walk every folder \
         again), or use the read commands (list, get, index, check), which answer from its \
         live index",
        .0.display()
    )]
    WorkerOwnsIndex(PathBuf),
    /// The index is locked by a process that leaves no note (another program, an older build).
    #[error(
        "the index at {} is locked by {}: stop it, or point index_path elsewhere",
        .0.display(),
        iii_directory::UNNOTED_HOLDER
    )]
    LockedByAnother(PathBuf),
    /// `reindex` asked a running worker to walk every folder again, and it did not say it had.
    #[error(
        "the running iii-directory worker that owns the index at {} did not confirm that it \
         walked every folder again (it has no file watcher, or it stopped answering); see its \
         log and directory::index::status, or stop it and run reindex again",
        .0.display()
    )]
    RescanNotConfirmed(PathBuf),
    /// The running worker walked every folder again, but its index could not record it.
    #[error(
        "the running iii-directory worker walked every folder again, but its index cannot \
         record changes ({0}); fix what that names (free space, when the disk under the index \
         is full), and reads will follow"
    )]
    RescanNotRecorded(String),
    #[error(transparent)]
    Directory(#[from] iii_directory::Error),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Search(#[from] BusSearchError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A download landed, but the running worker did not index all of it in time.
    #[error(
        "the files are on disk, but the running worker has not indexed {missing} of them \
         within {} s; its file watcher may be off (see directory::index::status), and its \
         safety-net rescan (safety_net_interval_ms) will pick them up",
        waited.as_secs()
    )]
    NotIndexed { missing: usize, waited: Duration },
    /// A download landed beside a worker that does not answer (stopped, or stuck).
    #[error(
        "the files are on disk, but the running worker does not answer (it is stopped, or \
         stuck), so it has not indexed {missing} of them; it takes them in when it runs again \
         (see its log, or restart it)"
    )]
    WorkerUnanswered { missing: usize },
    /// `bundles verify` found files that differ from the lock; the report says which.
    #[error("{bundles} bundle(s) differ from the bundles lock")]
    NotVerified { bundles: usize },
    /// `bundles restore` could not restore some bundles; the report says which and why.
    #[error("{bundles} bundle(s) could not be restored (the reasons are above)")]
    NotRestored { bundles: usize },
    /// The command's output could not be written to stdout.
    #[error(
        "could not write the output to stdout ({0}), so it is missing or cut short; check \
         where the output goes (a full disk or a closed stdout) and run the command again"
    )]
    Output(#[source] std::io::Error),
    /// The worker stopped serving, or never started.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

impl CliError {
    /// An error opening the index as its writer, saying so when a running worker holds it.
    pub fn open_as_writer(error: OpenError, index_path: &std::path::Path) -> CliError {
        match error {
            OpenError::Busy(_) => CliError::busy(index_path),
            other => CliError::Open(other),
        }
    }

    /// The index held by another process: a worker, when its note says so, or when it left no
    /// note but its sync folder is beside the index (a worker that could not write its note).
    pub fn busy(index_path: &std::path::Path) -> CliError {
        let worker = match iii_directory::read_index_holder(index_path) {
            Some(holder) => !holder.is_command(),
            None => iii_directory::worker_folder_beside(index_path),
        };
        match worker {
            true => CliError::WorkerOwnsIndex(index_path.to_path_buf()),
            false => CliError::LockedByAnother(index_path.to_path_buf()),
        }
    }
}

/// The runtime a command's one async call (a download, a restore, a question to the registry)
/// runs on: this thread alone.
pub fn cli_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)
}

/// The library's errors name what to do next as bus calls (`Next: call
/// directory::skills::list …`); on the command line, those with a command of their own are
/// named as that command.
pub(crate) fn for_the_command_line(message: &str) -> String {
    const COMMANDS: [(&str, &str); 7] = [
        (
            "call directory::skills::list",
            "run `iii-directory list skills`",
        ),
        ("call directory::skills::index", "run `iii-directory index`"),
        (
            "call directory::skills::get",
            "run `iii-directory get skill`",
        ),
        (
            "call directory::skills::download",
            "run `iii-directory download`",
        ),
        (
            "call directory::system-prompts::list",
            "run `iii-directory list system-prompts`",
        ),
        (
            "call directory::agents::list",
            "run `iii-directory list agents`",
        ),
        (
            "call directory::skills::bundles::list",
            "run `iii-directory bundles`",
        ),
    ];
    COMMANDS
        .iter()
        .fold(message.to_string(), |text, (call, command)| {
            text.replace(&format!("{call} "), &format!("{command} "))
        })
}

#[cfg(test)]
mod tests {
    use super::{CliError, for_the_command_line};

    /// A held index with no holder note is another program's, unless a worker's sync folder
    /// stands beside it (a worker that could not write its note): `reindex` then asks that
    /// worker to walk the folders again instead of blaming another program.
    #[test]
    fn an_unnoted_holder_with_a_workers_sync_folder_is_a_worker() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index.redb");
        assert!(matches!(
            CliError::busy(&index),
            CliError::LockedByAnother(_)
        ));
        let folder = dir.path().join("index.redb.sync");
        std::fs::create_dir(&folder).expect("sync folder");
        std::fs::write(folder.join(".iii-directory-sync"), b"").expect("its mark");
        assert!(matches!(
            CliError::busy(&index),
            CliError::WorkerOwnsIndex(_)
        ));
    }

    #[test]
    fn next_steps_with_a_command_of_their_own_are_named_as_that_command() {
        let bus = "D110 not_found: skill \"pdff\" does not exist. Did you mean: pdf. Next: call directory::skills::list to browse skill ids; or call directory::skills::download_from_registry to fetch one; or call directory::skills::create to author a new skill.";
        assert_eq!(
            for_the_command_line(
                "D334 not_found: bundle \"nope\" is not in the bundles lock; x. Next: call directory::skills::bundles::list to see the bundles the lock records."
            ),
            "D334 not_found: bundle \"nope\" is not in the bundles lock; x. Next: run `iii-directory bundles` to see the bundles the lock records."
        );
        assert_eq!(
            for_the_command_line(bus),
            "D110 not_found: skill \"pdff\" does not exist. Did you mean: pdf. Next: run `iii-directory list skills` to browse skill ids; or call directory::skills::download_from_registry to fetch one; or call directory::skills::create to author a new skill."
        );
    }
}
