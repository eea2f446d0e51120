//! What the index stores, as plain serde types encoded with postcard. Rows are derived from
//! files; nothing here is ground truth.

use serde::{Deserialize, Serialize};

use crate::doc::{Hash, ReadIssue};
use crate::error::{ContentError, Error, IndexError, Result};
use crate::time::Stamp;

/// What identifies a version of a file without reading it. Any difference means "read again".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stat {
    pub size: u64,
    pub mtime: Stamp,
    pub ctime: Stamp,
    pub ino: u64,
}

/// One file of a root as last reconciled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    pub stat: Stat,
    /// Hash of the (decoded) content, or why the content could not be used.
    pub content: Result<Hash, ReadIssue>,
    /// The file changed so close to the moment it was read that a later change within the same
    /// timestamp tick could leave its stat unchanged; such a file is read again next time.
    pub racy: bool,
}

/// Facts about the last reconcile, kept for status and the CLI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileStamp {
    pub at: Stamp,
    pub duration_ms: u64,
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).expect("serializing an index record to memory cannot fail")
}

pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| IndexError::Record(e).into())
}

/// A file's text as the content table stores it: LZ4 block compression with the length in
/// front. Markdown shrinks to about a third, which keeps the index smaller than the files it
/// indexes, and decompressing one file costs microseconds.
pub fn compress_text(text: &str) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(text.as_bytes())
}

/// The inverse of [`compress_text`]. The stated length is checked against the file size cap
/// before anything is allocated, so a damaged record cannot ask for a huge buffer.
pub fn decompress_text(bytes: &[u8]) -> Result<String> {
    let undecodable = |why: ContentError| Error::Index(IndexError::Content(why));
    let stated = bytes
        .get(..4)
        .map(|n| u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as u64)
        .ok_or_else(|| undecodable(ContentError::Truncated))?;
    if stated > crate::doc::MAX_FILE_BYTES {
        return Err(undecodable(ContentError::TooLong(stated)));
    }
    let raw =
        lz4_flex::block::decompress_size_prepended(bytes).map_err(|e| undecodable(e.into()))?;
    String::from_utf8(raw).map_err(|e| undecodable(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_round_trips_through_compression() {
        for text in ["", "# a\n", &"the quick brown fox\n".repeat(5_000)] {
            let packed = compress_text(text);
            assert_eq!(decompress_text(&packed).expect("decode"), text);
        }
        assert!(compress_text(&"abc ".repeat(1_000)).len() < 200);
    }

    #[test]
    fn damaged_content_is_an_error_not_a_huge_allocation() {
        let mut packed = compress_text("hello world");
        packed[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decompress_text(&packed).is_err());
        assert!(decompress_text(&[1, 2]).is_err());
        let mut truncated = compress_text(&"hello world ".repeat(50));
        truncated.truncate(truncated.len() / 2);
        assert!(decompress_text(&truncated).is_err());
    }
}
