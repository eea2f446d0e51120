//! Embeddings of contents no file holds any more, kept a while. A team that switches git
//! branches drops thousands of contents and brings them back a minute later; embedding them
//! again cost minutes of CPU per switch, and search ranked those skills by words meanwhile. So a
//! content's vectors, when the content goes, move to
//! [`RETIRED_VECTORS`](crate::index::tables::RETIRED_VECTORS), and move back when a file holds
//! that content again. The table is bounded: past [`KEPT`] entries the oldest go.
//!
//! A retired vector is only taken back when it was made by the model the index's vectors are
//! of now (its fingerprint is in the value): a model changed meanwhile makes it worthless.

use redb::{ReadableTable, ReadableTableMetadata, Table};

use crate::doc::Hash;
use crate::error::{Error, Result};

/// How many retired contents are kept (388 bytes a passage, most contents having two: some
/// 16 MB).
const KEPT: u64 = 20_000;
/// How far past [`KEPT`] the table may grow before the oldest are dropped, so that the scan
/// that finds them runs once per so many retirements, not on each.
const SLACK: u64 = KEPT / 8;

const HEADER: usize = 16;

/// A fingerprint of a model name, as kept with each retired vector.
pub fn model_print(model: &[u8]) -> u64 {
    crate::digest::u64_of(&blake3::hash(model))
}

/// The table's value for `vector` (the bytes it had in `VECTORS`), retired at `now`.
fn retired_value(vector: &[u8], model: u64, now: u64) -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER + vector.len());
    value.extend_from_slice(&now.to_le_bytes());
    value.extend_from_slice(&model.to_le_bytes());
    value.extend_from_slice(vector);
    value
}

/// The vector bytes of a retired value made by `model`; `None` for another model's, or a value
/// too short to be one.
fn taken_back(value: &[u8], model: u64) -> Option<&[u8]> {
    let print = u64::from_le_bytes(value.get(8..HEADER)?.try_into().ok()?);
    (print == model).then(|| &value[HEADER..])
}

fn retired_at(value: &[u8]) -> u64 {
    value
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

type Vectors<'txn> = Table<'txn, &'static [u8; 32], &'static [u8]>;

/// Moves the vectors of `gone` (contents no file holds now) from `vectors` to `retired`, then
/// drops the oldest retired ones past the bound.
pub fn retire(
    vectors: &mut Vectors<'_>,
    retired: &mut Vectors<'_>,
    gone: &[Hash],
    model: Option<u64>,
) -> Result<()> {
    // Each retired content is stamped apart from the others, in order, so that the trim's
    // oldest are exactly the first retired.
    let mut now = now_nanos();
    for hash in gone {
        now += 1;
        let Some(vector) = vectors.remove(hash).map_err(Error::index)? else {
            continue;
        };
        if let Some(model) = model {
            let value = retired_value(vector.value(), model, now);
            drop(vector);
            retired
                .insert(hash, value.as_slice())
                .map_err(Error::index)?;
        }
    }
    trim(retired)
}

/// Moves the vectors of `back` (contents a file holds again) from `retired` to `vectors`, when
/// they were made by `model`; others are dropped.
pub fn take_back(
    vectors: &mut Vectors<'_>,
    retired: &mut Vectors<'_>,
    back: impl IntoIterator<Item = Hash>,
    model: Option<u64>,
) -> Result<()> {
    if retired.is_empty().map_err(Error::index)? {
        return Ok(());
    }
    for hash in back {
        let Some(value) = retired.remove(&hash).map_err(Error::index)? else {
            continue;
        };
        if let Some(vector) = model.and_then(|model| taken_back(value.value(), model)) {
            let vector = vector.to_vec();
            drop(value);
            vectors
                .insert(&hash, vector.as_slice())
                .map_err(Error::index)?;
        }
    }
    Ok(())
}

/// Drops the oldest retired vectors down to [`KEPT`] once the table is [`SLACK`] past it.
fn trim(retired: &mut Vectors<'_>) -> Result<()> {
    let len = retired.len().map_err(Error::index)?;
    if len <= KEPT + SLACK {
        return Ok(());
    }
    let mut ages: Vec<(u64, Hash)> = Vec::with_capacity(len as usize);
    for entry in retired.iter().map_err(Error::index)? {
        let (hash, value) = entry.map_err(Error::index)?;
        ages.push((retired_at(value.value()), *hash.value()));
    }
    ages.sort_unstable();
    for (_, hash) in &ages[..(len - KEPT) as usize] {
        retired.remove(hash).map_err(Error::index)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_vector_comes_back_only_to_the_model_that_made_it() {
        let model = model_print(b"all-MiniLM-L6-v2 abc");
        let value = retired_value(&[1, 2, 3], model, 42);
        assert_eq!(taken_back(&value, model), Some(&[1u8, 2, 3][..]));
        assert_eq!(taken_back(&value, model_print(b"another")), None);
        assert_eq!(retired_at(&value), 42);
        assert_eq!(taken_back(&value[..10], model), None);
    }

    #[test]
    fn retired_vectors_come_back_and_only_the_newest_are_kept() {
        use crate::index::tables::{RETIRED_VECTORS, VECTORS};
        let db = redb::Builder::new()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .unwrap();
        let print = model_print(b"m");
        let model = Some(print);
        let hash = |i: u64| {
            let mut h = [0u8; 32];
            h[..8].copy_from_slice(&i.to_le_bytes());
            h
        };
        let txn = db.begin_write().unwrap();
        {
            let mut vectors = txn.open_table(VECTORS).unwrap();
            let mut retired = txn.open_table(RETIRED_VECTORS).unwrap();
            vectors.insert(&hash(1), [7u8; 4].as_slice()).unwrap();
            retire(&mut vectors, &mut retired, &[hash(1)], model).unwrap();
            assert!(vectors.get(&hash(1)).unwrap().is_none());
            take_back(&mut vectors, &mut retired, [hash(1)], model).unwrap();
            assert_eq!(vectors.get(&hash(1)).unwrap().unwrap().value(), [7u8; 4]);
            assert!(retired.is_empty().unwrap());

            // Past the bound and its slack, the oldest go, down to the bound.
            let over = KEPT + SLACK + 1;
            for i in 0..over {
                let value = retired_value(&[1], print, 1000 + i);
                retired.insert(&hash(100 + i), value.as_slice()).unwrap();
            }
            trim(&mut retired).unwrap();
            assert_eq!(retired.len().unwrap(), KEPT);
            assert!(
                retired.get(&hash(100)).unwrap().is_none(),
                "the oldest went"
            );
            assert!(retired.get(&hash(100 + over - 1)).unwrap().is_some());

            // Many retired by one reconcile, past the bound at once: exactly the bound is kept,
            // the last retired among them.
            retired.retain(|_, _| false).unwrap();
            let many: Vec<Hash> = (0..over).map(|i| hash(1_000_000 + i)).collect();
            for h in &many {
                vectors.insert(h, [1u8].as_slice()).unwrap();
            }
            retire(&mut vectors, &mut retired, &many, model).unwrap();
            assert_eq!(retired.len().unwrap(), KEPT);
            assert!(retired.get(&many[over as usize - 1]).unwrap().is_some());
            assert!(retired.get(&many[0]).unwrap().is_none());
        }
        txn.abort().unwrap();
    }
}
