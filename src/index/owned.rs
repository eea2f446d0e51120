//! Whether the files at `index_path` are this worker's to replace. The index is a cache, so a
//! damaged one is deleted and rebuilt; but `index_path` is configuration (stored in the engine,
//! settable by any caller on the bus), so a file found there is replaced only when it is
//! recognisably an index of ours or its damaged form. The rule, for the pair of files (the
//! index, and its texts store `<index>.texts`):
//!
//! 1. A file that is absent or empty may be created. A file of nothing but zero bytes, up to
//!    64 MiB (a redb file whose creation stopped before its header), counts as empty.
//! 2. A file that is not a regular file (a folder, a device, a FIFO, a link to nothing) is
//!    never opened, created through or replaced.
//! 3. A redb database (its first bytes are redb's magic number) that carries this project's
//!    marker for its role is ours, whatever its schema version: a `meta` table holding a
//!    `schema_version`, beside the role's own table (`files` for the index, `texts` for the
//!    texts store).
//! 4. A file that is neither (another program's file, or one of ours whose header is damaged)
//!    is ours only when the other file of the pair carries its marker and was there before this
//!    open: a texts store is only ever made beside an index this worker made at that path.
//!
//! Anything else makes the open refuse, naming the file and `index_path`, with nothing written.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::{ReadableDatabase, TableHandle};

use super::tables::{META, META_SCHEMA, stored_u64};

/// The first bytes of every redb file (redb's `MAGICNUMBER`, not exported by the crate).
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// What was at one of the two paths before the open touched anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Found {
    Absent,
    Empty,
    /// Starts with redb's magic number.
    Redb,
    /// A regular file that is not a redb database.
    Other,
    /// Not a regular file, or a link to nothing: never touched.
    Untouchable(&'static str),
}

/// The role a file plays in the pair, and so the table its marker names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Index,
    Texts,
}

impl Role {
    fn table(self) -> &'static str {
        match self {
            Role::Index => "files",
            Role::Texts => "texts",
        }
    }
}

pub(super) fn found(path: &Path) -> Found {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Absent,
        Err(_) => return Found::Untouchable("something that cannot be inspected"),
        Ok(_) => {}
    }
    // Followed, as redb's open would follow it.
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Found::Untouchable("a link to a file that does not exist");
        }
        Err(_) => return Found::Untouchable("something that cannot be inspected"),
    };
    if !meta.is_file() {
        return Found::Untouchable("not a regular file (a folder, a device or a pipe)");
    }
    if meta.len() == 0 {
        return Found::Empty;
    }
    let mut head = [0u8; REDB_MAGIC.len()];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    match read {
        Ok(()) if head == REDB_MAGIC => Found::Redb,
        Err(e) if e.kind() != std::io::ErrorKind::UnexpectedEof => {
            Found::Untouchable("a file that cannot be read")
        }
        // Read, whole or shorter than the magic. A redb file whose creation stopped before its
        // header (a full disk, a kill) is nothing but zeros, nobody's data: replaced like an
        // empty file.
        _ if all_zeros(path, meta.len()) => Found::Empty,
        _ => Found::Other,
    }
}

/// Files larger than this are never read through to see whether they hold only zeros.
const MAX_ZEROS_CHECKED: u64 = 64 << 20;

/// Whether the file holds nothing but zero bytes (and is small enough to read through).
fn all_zeros(path: &Path, len: u64) -> bool {
    if len > MAX_ZEROS_CHECKED {
        return false;
    }
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) if buf[..n].iter().all(|&b| b == 0) => {}
            Ok(_) | Err(_) => return false,
        }
    }
}

/// What a read-only open of a redb file shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    /// This project's marker for the role (rule 3).
    Marked,
    /// Tables, but not ours.
    Foreign,
    /// No table at all: a new database, which a schema may take.
    Blank,
    /// redb cannot open it read-only: damaged, or left by a crash and not yet recovered (the
    /// writer's open recovers it; its marker is read again if a rebuild comes due).
    Unreadable,
}

/// Reads the marker of the redb file at `path` for `role`, read-only, so that nothing is written
/// to a file that may not be ours.
fn probe(path: &Path, role: Role) -> Probe {
    let probe = super::isolated::isolated(|| {
        let db = redb::Builder::new()
            .set_cache_size(1024 * 1024)
            .open_read_only(path)
            .ok()?;
        marker(&db, role)
    });
    probe.ok().flatten().unwrap_or(Probe::Unreadable)
}

/// Copies larger than this are not made to look for a marker: a partner that big is no texts
/// store or index of a skills tree.
const MAX_PROBED_COPY: u64 = 4 << 30;

/// [`probe`] of a file redb will not open read-only because a process that held it died
/// without closing it (it needs the recovery only a writer's open does): the recovery runs on
/// a private copy, never on a file that may not be ours. The partner of a damaged file is often
/// in that state, since damage and a crash tend to come together.
fn probe_recovered_copy(path: &Path, role: Role) -> Probe {
    static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    if std::fs::metadata(path).map_or(true, |m| m.len() > MAX_PROBED_COPY) {
        return Probe::Unreadable;
    }
    let copy = std::env::temp_dir().join(format!(
        "iii-directory-probe-{}-{}",
        std::process::id(),
        COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let copied = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&copy)
        .and_then(|mut to| std::io::copy(&mut std::fs::File::open(path)?, &mut to));
    let probe = copied.ok().and_then(|_| {
        super::isolated::isolated(|| {
            let db = redb::Builder::new()
                .set_cache_size(1024 * 1024)
                .open(&copy)
                .ok()?;
            marker(&db, role)
        })
        .ok()
        .flatten()
    });
    let _ = std::fs::remove_file(&copy);
    probe.unwrap_or(Probe::Unreadable)
}

/// Whether an open database carries this project's marker for `role`.
fn marker(db: &impl ReadableDatabase, role: Role) -> Option<Probe> {
    let txn = db.begin_read().ok()?;
    let names: Vec<String> = txn
        .list_tables()
        .ok()?
        .map(|table| table.name().to_owned())
        .collect();
    let version = stored_u64(&txn, META_SCHEMA).ok()?;
    Some(if names.is_empty() {
        Probe::Blank
    } else if version.is_some()
        && names.iter().any(|n| n == META.name())
        && names.iter().any(|n| n == role.table())
    {
        Probe::Marked
    } else {
        Probe::Foreign
    })
}

/// One of the two files, as found before the open.
struct File {
    path: PathBuf,
    role: Role,
    found: Found,
    /// For a redb file, what its read-only open showed before the writer's open.
    probe: Option<Probe>,
}

impl File {
    fn marked(&self) -> bool {
        match self.probe {
            Some(Probe::Marked) => true,
            // Recovered by the writer's open since, perhaps: look again, then at a recovered
            // copy.
            Some(Probe::Unreadable) => match probe(&self.path, self.role) {
                Probe::Marked => true,
                Probe::Unreadable => probe_recovered_copy(&self.path, self.role) == Probe::Marked,
                Probe::Foreign | Probe::Blank => false,
            },
            _ => false,
        }
    }
}

/// The two files of the index at `path`, as found before the open.
pub(super) struct Pair {
    files: [File; 2],
}

/// Why a file at `index_path` is left alone.
pub(super) struct NotOurs {
    pub path: PathBuf,
    pub why: String,
    /// A regular file, which may be a damaged index of ours: deleting it is worth suggesting.
    pub a_file: bool,
}

impl Pair {
    pub(super) fn inspect(path: &Path) -> Pair {
        let [index, texts] = super::files(path);
        let file = |path: PathBuf, role| {
            let found = found(&path);
            let probe = (found == Found::Redb).then(|| probe(&path, role));
            File {
                path,
                role,
                found,
                probe,
            }
        };
        Pair {
            files: [file(index, Role::Index), file(texts, Role::Texts)],
        }
    }

    /// As [`Pair::inspect`], but a doubtful pair that another process may be making right now
    /// (a file of it changed in the last seconds: two commands started together on a new
    /// project) is looked at again until it settles, for up to a couple of seconds, rather
    /// than refused as not ours while that process writes its first tables.
    pub(super) fn inspect_settled(path: &Path) -> Pair {
        const SETTLE: Duration = Duration::from_secs(2);
        const RECENT: Duration = Duration::from_secs(10);
        let started = Instant::now();
        loop {
            let pair = Pair::inspect(path);
            let refused = pair.doubtful() && pair.may_replace().is_err();
            let recent = pair.files.iter().any(|file| {
                std::fs::metadata(&file.path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|at| at.elapsed().is_ok_and(|age| age < RECENT))
            });
            if !refused || !recent || started.elapsed() >= SETTLE {
                return pair;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A file redb must not even open (rule 2), refused before any open.
    pub(super) fn untouchable(&self) -> Option<NotOurs> {
        self.files.iter().find_map(|file| match file.found {
            Found::Untouchable(why) => Some(NotOurs {
                path: file.path.clone(),
                why: why.to_owned(),
                a_file: false,
            }),
            _ => None,
        })
    }

    /// Whether a file of the pair is, as found, not ours by itself: not a redb database, or one
    /// with tables but without our marker (rule 4 then decides, before the writer's open).
    pub(super) fn doubtful(&self) -> bool {
        self.files
            .iter()
            .any(|file| file.found == Found::Other || file.probe == Some(Probe::Foreign))
    }

    /// Whether both files may be deleted and made again (the rules above); the first file that
    /// may not, otherwise.
    pub(super) fn may_replace(&self) -> Result<(), NotOurs> {
        if let Some(refused) = self.untouchable() {
            return Err(refused);
        }
        let marks = [self.files[0].marked(), self.files[1].marked()];
        for (i, file) in self.files.iter().enumerate() {
            let new = matches!(file.found, Found::Absent | Found::Empty)
                || file.probe == Some(Probe::Blank);
            if !(new || marks[i] || marks[1 - i]) {
                let what = match file.found {
                    Found::Redb => "a redb database that is not an index of iii-directory",
                    _ => "a file that is not an index of iii-directory",
                };
                return Err(NotOurs {
                    path: file.path.clone(),
                    why: what.to_owned(),
                    a_file: true,
                });
            }
        }
        Ok(())
    }
}
