//! Reading `model.safetensors`: an 8-byte little-endian header length, a JSON header naming
//! each tensor's dtype, shape and byte range, then the raw data. Only F32 tensors are read
//! (the model ships as F32).
//!
//! The file is not read whole: each tensor is read from its range when the encoder asks for it,
//! a slice at a time, so loading never holds the file's 87 MB beside the packed weights (the
//! worker's peak resident set counts that moment too).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::EmbedError;

/// Values read from the file per slice of a tensor (1 MiB of F32).
const SLICE_VALUES: usize = 1 << 18;

/// The longest JSON header read: all-MiniLM-L6-v2's is 11 KB, and the largest encoder
/// `bert::Config` accepts (48 layers, 16 tensors each) about 120 KB. A longer one is refused
/// before its buffer is allocated: the file's length alone bounded it, and a sparse file claims
/// a terabyte for nothing (its allocation failed and aborted the process).
const MOST_HEADER_BYTES: u64 = 16 << 20;

/// One tensor's entry in the header.
#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

/// The open file and its parsed header.
pub struct Weights {
    file: File,
    path: PathBuf,
    entries: HashMap<String, Entry>,
    /// Where the data after the header starts in the file.
    data_start: u64,
}

impl Weights {
    /// Opens `path` and reads its header; checks that every tensor's range lies within the
    /// file.
    pub fn open(path: &Path) -> Result<Weights, EmbedError> {
        let read_error = |source| EmbedError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = super::open_regular(path).map_err(read_error)?;
        let file_len = file.metadata().map_err(read_error)?.len();
        let bad = EmbedError::Weights;
        let mut len_bytes = [0u8; 8];
        if file_len < 8 {
            return Err(bad("the file is shorter than its header"));
        }
        file.read_exact_at(&mut len_bytes, 0).map_err(read_error)?;
        let header_len = u64::from_le_bytes(len_bytes);
        if header_len > MOST_HEADER_BYTES {
            return Err(bad("the header is longer than any model's"));
        }
        let data_start = header_len
            .checked_add(8)
            .filter(|&end| end <= file_len)
            .ok_or(bad("the header runs past the end of the file"))?;
        let mut header_bytes = vec![0u8; header_len as usize];
        file.read_exact_at(&mut header_bytes, 8)
            .map_err(read_error)?;
        let header: HashMap<String, serde_json::Value> =
            serde_json::from_slice(&header_bytes).map_err(EmbedError::WeightsHeader)?;
        let data_len = file_len - data_start;
        let mut entries = HashMap::with_capacity(header.len());
        for (name, value) in header {
            if name == "__metadata__" {
                continue;
            }
            let entry: Entry = serde_json::from_value(value).map_err(EmbedError::WeightsHeader)?;
            let [start, end] = entry.data_offsets;
            if start > end || end as u64 > data_len {
                return Err(bad("a tensor's range runs past the end of the file"));
            }
            entries.insert(name, entry);
        }
        Ok(Weights {
            file,
            path: path.to_path_buf(),
            entries,
            data_start,
        })
    }

    /// The F32 tensor `name`, which must have exactly `shape`.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        // Sized once the header has vouched for it: the file holds that many values.
        let (_, count) = self.entry(name, shape)?;
        let mut out = Vec::with_capacity(count);
        self.read_tensor(name, shape, |values| out.extend_from_slice(values))?;
        Ok(out)
    }

    /// The header's entry for `name` and its number of values, when it is an F32 tensor of
    /// exactly `shape` whose range holds that many values (a shape whose product overflows
    /// is none).
    fn entry(&self, name: &str, shape: &[usize]) -> Result<(&Entry, usize), EmbedError> {
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| EmbedError::MissingTensor(name.to_owned()))?;
        let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let [start, end] = entry.data_offsets;
        let fits = count
            .and_then(|n| n.checked_mul(4))
            .is_some_and(|bytes| end - start == bytes);
        match count {
            Some(count) if entry.dtype == "F32" && entry.shape == shape && fits => {
                Ok((entry, count))
            }
            _ => Err(EmbedError::TensorShape {
                name: name.to_owned(),
                expected: shape.to_vec(),
                found: entry.shape.clone(),
                dtype: entry.dtype.clone(),
            }),
        }
    }

    /// Hands the F32 tensor `name` (of exactly `shape`) to `each`, a slice of consecutive
    /// values at a time, in order: a large table is converted as it is read, never held as
    /// F32 whole.
    pub fn read_tensor(
        &self,
        name: &str,
        shape: &[usize],
        mut each: impl FnMut(&[f32]),
    ) -> Result<(), EmbedError> {
        let (entry, count) = self.entry(name, shape)?;
        let [start, end] = entry.data_offsets;
        let mut bytes = vec![0u8; SLICE_VALUES.min(count) * 4];
        let mut values = Vec::with_capacity(SLICE_VALUES.min(count));
        let mut at = start;
        while at < end {
            let len = (end - at).min(bytes.len());
            self.file
                .read_exact_at(&mut bytes[..len], self.data_start + at as u64)
                .map_err(|source| EmbedError::Read {
                    path: self.path.clone(),
                    source,
                })?;
            values.clear();
            values.extend(
                bytes[..len]
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            each(&values);
            at += len;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header length the file is long enough for but no model's header comes near is
    /// refused before a buffer of that size is asked for: a sparse file costs no disk, and
    /// allocating the "header" of one of a terabyte aborted the process instead of failing the
    /// load.
    #[test]
    fn a_header_longer_than_any_models_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("model.safetensors");
        let file = File::create(&path).expect("create");
        // Past the bound, and within what any file system gives a sparse file.
        let header_len: u64 = 1 << 32;
        file.write_all_at(&header_len.to_le_bytes(), 0)
            .expect("write the length");
        file.set_len(8 + header_len).expect("a sparse file");
        let opened = Weights::open(&path);
        assert!(
            matches!(opened, Err(EmbedError::Weights(_))),
            "{:?}",
            opened.err()
        );
    }
}
