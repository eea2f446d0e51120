//! Reading one file for a reconcile: capped, decoded, hashed, and (when its content is new)
//! parsed, encoded and compressed. Runs on the rayon pool, so that the single thread that
//! writes the transaction only inserts.

use std::collections::{HashMap, HashSet};
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::sync::Mutex;

use crate::doc::{self, Hash, MAX_FILE_BYTES, ParsedDoc, ReadIssue};
use crate::error::short_of_resources;
use crate::index::records::{FileMeta, Stat, compress_text, encode};
use crate::locks;
use crate::roots::{Root, Roots};
use crate::rules::spec;
use crate::time::Stamp;

/// One file read from disk.
pub struct Read {
    pub key: (Root, String),
    pub meta: FileMeta,
    /// Its content, when that content was not known yet.
    pub new: Option<NewContent>,
}

/// A content seen for the first time: its parse and, for the tables, the parse encoded and the
/// text compressed (on the reading threads, so the single writer thread only inserts).
pub struct NewContent {
    pub parsed: ParsedDoc,
    /// `parsed`, postcard-encoded for the docs table (empty when not packing).
    pub encoded: Vec<u8>,
    /// The text's [`Conformance`](crate::rules::spec::Conformance), postcard-encoded for the
    /// spec table (empty when not packing: only the reads answer with it).
    pub spec: Vec<u8>,
    /// The text, compressed for the content table (empty when not packing).
    pub packed: Vec<u8>,
}

/// What the reads of one reconcile share: which contents the index holds already (with the
/// number of files holding each, see `Mirror::contents`), and which a read of this reconcile
/// has claimed, so that each new content is parsed once however many files hold it.
pub struct Reading<'a> {
    pub roots: &'a Roots,
    pub known: &'a HashMap<Hash, u32>,
    pub claimed: Mutex<HashSet<Hash>>,
    /// A file changed after this is read again next time (see `RACY_WINDOW`).
    pub racy_after: Stamp,
    /// Encode and compress new contents for the tables (a scan without an index does not).
    pub pack: bool,
}

impl Reading<'_> {
    pub fn read(&self, key: &(Root, String), stat: Stat) -> Read {
        let racy = stat.mtime >= self.racy_after || stat.ctime >= self.racy_after;
        let done = |content, new, racy| Read {
            key: key.clone(),
            meta: FileMeta {
                stat,
                content,
                racy,
            },
            new,
        };
        let text = match self.load(key, stat) {
            Ok(bytes) => bytes,
            // A read that failed for want of descriptors or memory is tried again by the next
            // reconcile, as a file changed too near its scan is: its stat will not change.
            Err((issue, passing)) => return done(Err(issue), None, racy || passing),
        };
        let text = match doc::decode(&text) {
            Ok(text) => text,
            Err(issue) => return done(Err(issue), None, racy),
        };
        let hash = *blake3::hash(text.as_bytes()).as_bytes();
        let first = !self.known.contains_key(&hash) && locks::lock(&self.claimed).insert(hash);
        let new = first.then(|| {
            let parsed = ParsedDoc::parse(text);
            // Only a `SKILL.md` answers to the specification; another name's content is checked
            // when a read first asks (`skills::spec::conformance`), which spares every other file
            // a second parse of its frontmatter.
            let skill_file = Path::new(&key.1).file_name() == Some(spec::SKILL_FILE.as_ref());
            let (encoded, spec, packed) = if self.pack {
                (
                    encode(&parsed),
                    match skill_file {
                        true => encode(&spec::check(text)),
                        false => Vec::new(),
                    },
                    compress_text(text),
                )
            } else {
                (Vec::new(), Vec::new(), Vec::new())
            };
            NewContent {
                parsed,
                encoded,
                spec,
                packed,
            }
        });
        done(Ok(hash), new, racy)
    }

    /// The file's bytes, capped: a file that grew past the cap since its stat is not read whole.
    /// A failure says whether it passes with a shortage of the system's (descriptors, memory).
    fn load(&self, key: &(Root, String), stat: Stat) -> Result<Vec<u8>, (ReadIssue, bool)> {
        if stat.size > MAX_FILE_BYTES {
            return Err((ReadIssue::TooLarge(stat.size), false));
        }
        // Never blocking on a FIFO swapped in since the walk's `stat`: `O_NONBLOCK` (no effect
        // on a regular file), and anything but a regular file is not read.
        let open = std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(self.roots.file(key.0, &key.1));
        let read = open.and_then(|file| {
            if !file.metadata()?.is_file() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a regular file",
                ));
            }
            let mut bytes = Vec::with_capacity(stat.size as usize);
            file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
            Ok(bytes)
        });
        read.map_err(|e| (ReadIssue::Io(e.to_string()), short_of_resources(&e)))
    }
}
