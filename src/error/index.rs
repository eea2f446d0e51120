//! Why the index could not be opened, read or written, with redb's own error as the source
//! where redb refused (its errors are one enum per operation; any of them converts).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// redb refused an operation (a transaction, a table, the storage, a commit).
    #[error("{source}{hint}", source = .0, hint = storage_hint(.0))]
    Database(#[from] redb::Error),
    /// A follower could not open a file of the index another process writes.
    #[error("{}: {source}{hint}", path.display(), hint = follow_hint(source))]
    Follow {
        path: PathBuf,
        #[source]
        source: redb::DatabaseError,
    },
    /// A follower found no index to follow.
    #[error("no index at {}; run `iii-directory reindex` to build it", .0.display())]
    NotBuilt(PathBuf),
    /// A stored record that does not decode (damage, or a record of another layout).
    #[error("undecodable record: {0}")]
    Record(#[from] postcard::Error),
    /// A stored text that does not decode.
    #[error("undecodable content: {0}")]
    Content(#[from] ContentError),
    /// The file is not the index this binary reads: what is wrong with it.
    #[error("{0}")]
    Layout(String),
    /// Something the index must hold is missing from a snapshot (damage, or a bug): what.
    #[error("{0} is missing")]
    Missing(String),
    /// The index cannot take the operation in the state it is in.
    #[error("{0}")]
    Unavailable(&'static str),
    /// The writer's files could not be opened again after a failed write.
    #[error("{0}")]
    Reopen(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Why a stored text does not decode.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    #[error("shorter than its length prefix")]
    Truncated,
    /// A stated length over the file size cap: nothing was allocated for it.
    #[error("states {0} bytes")]
    TooLong(u64),
    #[error(transparent)]
    Lz4(#[from] lz4_flex::block::DecompressError),
    #[error(transparent)]
    Utf8(#[from] std::string::FromUtf8Error),
}

/// What to do when redb's storage failed for a reason a person can act on (a full disk).
fn storage_hint(e: &redb::Error) -> &'static str {
    match e {
        redb::Error::Io(io) => super::io::hint(io),
        _ => "",
    }
}

/// Who holds an index when its holder left no note, as every error that meets one says it: the
/// process is no iii-directory worker or command of this version, or a tool that locked the
/// file itself.
pub const UNNOTED_HOLDER: &str = "another process, which is no iii-directory worker or command \
                                  of this version that says so beside the index (`fuser` or \
                                  `lsof` on the file names it)";

/// What to do when a follower finds the file locked for good: the process holding it left no
/// note a follower can use.
fn follow_hint(source: &redb::DatabaseError) -> String {
    match source {
        redb::DatabaseError::DatabaseAlreadyOpen => {
            format!(" (held by {UNNOTED_HOLDER}; stop it, or point index_path elsewhere)")
        }
        _ => String::new(),
    }
}
