//! Reading `model.safetensors`: an 8-byte little-endian header length, a JSON header naming
//! each tensor's dtype, shape and byte range, then the raw data. Only F32 tensors are read
//! (the model ships as F32), each copied out once into its own vector.

use std::collections::HashMap;

use serde::Deserialize;

use super::EmbedError;

/// One tensor's entry in the header.
#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

/// The parsed file: the header and the data after it.
pub struct Weights {
    entries: HashMap<String, Entry>,
    data: Vec<u8>,
}

impl Weights {
    /// Splits `bytes` (the whole file) into its header and data; checks that every tensor's
    /// range lies within the data.
    pub fn parse(mut bytes: Vec<u8>) -> Result<Weights, EmbedError> {
        let bad = EmbedError::Weights;
        let len_bytes: [u8; 8] = bytes
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or(bad("the file is shorter than its header"))?;
        let header_len = usize::try_from(u64::from_le_bytes(len_bytes))
            .map_err(|_| bad("the header length does not fit in memory"))?;
        let data_start = header_len
            .checked_add(8)
            .filter(|&end| end <= bytes.len())
            .ok_or(bad("the header runs past the end of the file"))?;
        let header: HashMap<String, serde_json::Value> =
            serde_json::from_slice(&bytes[8..data_start]).map_err(EmbedError::WeightsHeader)?;
        let mut entries = HashMap::with_capacity(header.len());
        for (name, value) in header {
            if name == "__metadata__" {
                continue;
            }
            let entry: Entry = serde_json::from_value(value).map_err(EmbedError::WeightsHeader)?;
            let [start, end] = entry.data_offsets;
            if start > end || end > bytes.len() - data_start {
                return Err(bad("a tensor's range runs past the end of the file"));
            }
            entries.insert(name, entry);
        }
        bytes.drain(..data_start);
        Ok(Weights {
            entries,
            data: bytes,
        })
    }

    /// The F32 tensor `name`, which must have exactly `shape`.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| EmbedError::MissingTensor(name.to_owned()))?;
        let count: usize = shape.iter().product();
        let [start, end] = entry.data_offsets;
        if entry.dtype != "F32" || entry.shape != shape || end - start != count * 4 {
            return Err(EmbedError::TensorShape {
                name: name.to_owned(),
                expected: shape.to_vec(),
                found: entry.shape.clone(),
                dtype: entry.dtype.clone(),
            });
        }
        Ok(self.data[start..end]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}
