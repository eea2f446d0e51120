//! Embeddings at rest: each vector quantized to one signed byte per dimension plus one f32
//! (388 bytes, so 50,000 take 18.5 MiB), and a table of them scanned exactly for the `k`
//! nearest by cosine.
//!
//! A vector is stored as `q = round(127 · v / max|v|)`, together with `1 / ‖q‖`. The cosine
//! of two stored vectors is then `(qa · qb) · scale_a · scale_b`: one integer dot product
//! (which the compiler turns into SIMD multiply-adds) and one multiplication, with no
//! dequantization and no norm computed at query time. A query is quantized the same way, so
//! the scan compares like with like; its own rounding moves a cosine by about 1e-3.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use super::DIMENSIONS;

/// Bytes of one stored vector: the scale (f32, little-endian), then the values.
pub const QUANTIZED_BYTES: usize = 4 + DIMENSIONS;

/// One embedding quantized to int8, with the factor that turns its integer dot products into
/// cosines.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    /// `1 / ‖values‖` (zero for the zero vector).
    pub scale: f32,
    pub values: [i8; DIMENSIONS],
}

impl Quantized {
    /// Quantizes `vector` (of [`DIMENSIONS`] values; any length, as cosines ignore it).
    pub fn from_vector(vector: &[f32]) -> Quantized {
        assert_eq!(
            vector.len(),
            DIMENSIONS,
            "an embedding has {DIMENSIONS} values"
        );
        let max = vector.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let mut values = [0i8; DIMENSIONS];
        if max > 0.0 && max.is_finite() {
            for (q, v) in values.iter_mut().zip(vector) {
                // In [-127, 127] by construction; `as` saturates a NaN to 0.
                *q = (v / max * 127.0).round() as i8;
            }
        }
        let norm = values
            .iter()
            .map(|&q| f32::from(q) * f32::from(q))
            .sum::<f32>()
            .sqrt();
        Quantized {
            scale: if norm > 0.0 { 1.0 / norm } else { 0.0 },
            values,
        }
    }

    /// The unit vector this stands for.
    pub fn dequantize(&self) -> Vec<f32> {
        self.values
            .iter()
            .map(|&q| f32::from(q) * self.scale)
            .collect()
    }

    /// The cosine of the two vectors as stored.
    pub fn cosine(&self, other: &Quantized) -> f32 {
        dot(&self.values, &other.values) as f32 * self.scale * other.scale
    }

    /// The stored form: scale, then values.
    pub fn to_bytes(&self) -> [u8; QUANTIZED_BYTES] {
        let mut bytes = [0u8; QUANTIZED_BYTES];
        bytes[..4].copy_from_slice(&self.scale.to_le_bytes());
        for (b, &q) in bytes[4..].iter_mut().zip(&self.values) {
            *b = q as u8;
        }
        bytes
    }

    /// Reads the stored form; `None` for a slice of another length or a scale that is not a
    /// finite non-negative number.
    pub fn from_bytes(bytes: &[u8]) -> Option<Quantized> {
        let bytes: &[u8; QUANTIZED_BYTES] = bytes.try_into().ok()?;
        let scale = f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if !scale.is_finite() || scale < 0.0 {
            return None;
        }
        let mut values = [0i8; DIMENSIONS];
        for (q, &b) in values.iter_mut().zip(&bytes[4..]) {
            *q = b as i8;
        }
        Some(Quantized { scale, values })
    }
}

/// Several vectors kept as one value (the passages of one skill): their stored forms one after
/// another.
pub fn join_bytes(vectors: &[Quantized]) -> Vec<u8> {
    vectors.iter().flat_map(|v| v.to_bytes()).collect()
}

/// Reads [`join_bytes`]'s form; `None` for an empty value, a length that is not a multiple of
/// [`QUANTIZED_BYTES`], or any vector [`Quantized::from_bytes`] refuses.
pub fn split_bytes(bytes: &[u8]) -> Option<Vec<Quantized>> {
    if bytes.is_empty() || bytes.len() % QUANTIZED_BYTES != 0 {
        return None;
    }
    bytes
        .chunks_exact(QUANTIZED_BYTES)
        .map(Quantized::from_bytes)
        .collect()
}

/// Integer dot product of two quantized vectors (at most 127² · 384, far inside i32).
#[inline(always)]
fn dot(a: &[i8; DIMENSIONS], b: &[i8; DIMENSIONS]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(i16::from(x) * i16::from(y)))
        .sum()
}

/// `query`'s cosine with each of `values` (scaled by `scales`), in order: the integer dot
/// products at the widest SIMD this processor has (`iii_embed_kernel::int8_dots`: AVX-512
/// VNNI, else AVX2), then one multiplication each.
fn scan(query: &Quantized, values: &[[i8; DIMENSIONS]], scales: &[f32]) -> Vec<f32> {
    let mut dots = vec![0i32; values.len()];
    iii_embed_kernel::int8_dots(&query.values, values, &mut dots);
    dots.iter()
        .zip(scales)
        .map(|(&dot, scale)| dot as f32 * query.scale * scale)
        .collect()
}

/// Quantized vectors with a key each, in insertion order, stored contiguously.
#[derive(Clone, Debug)]
pub struct VectorTable<K> {
    keys: Vec<K>,
    scales: Vec<f32>,
    values: Vec<[i8; DIMENSIONS]>,
}

/// One answer of [`VectorTable::top_k`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit<'a, K> {
    pub key: &'a K,
    /// Position of the vector in the table.
    pub index: usize,
    /// Cosine against the query, in [-1, 1] up to rounding.
    pub score: f32,
}

impl<K> Default for VectorTable<K> {
    fn default() -> Self {
        VectorTable {
            keys: Vec::new(),
            scales: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl<K> VectorTable<K> {
    pub fn new() -> VectorTable<K> {
        VectorTable::default()
    }

    pub fn with_capacity(capacity: usize) -> VectorTable<K> {
        VectorTable {
            keys: Vec::with_capacity(capacity),
            scales: Vec::with_capacity(capacity),
            values: Vec::with_capacity(capacity),
        }
    }

    pub fn push(&mut self, key: K, vector: &Quantized) {
        self.keys.push(key);
        self.scales.push(vector.scale);
        self.values.push(vector.values);
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn keys(&self) -> &[K] {
        &self.keys
    }

    /// The vector at `index`.
    pub fn get(&self, index: usize) -> Option<(&K, Quantized)> {
        Some((
            self.keys.get(index)?,
            Quantized {
                scale: self.scales[index],
                values: self.values[index],
            },
        ))
    }

    /// The cosine of `query` with the vectors at `indices`, in that order: those rows side by
    /// side, scored as [`VectorTable::scores`] scores every row.
    pub(super) fn scores_at(&self, query: &Quantized, indices: &[usize]) -> Vec<f32> {
        let values: Vec<[i8; DIMENSIONS]> = indices.iter().map(|&i| self.values[i]).collect();
        let scales: Vec<f32> = indices.iter().map(|&i| self.scales[i]).collect();
        scan(query, &values, &scales)
    }

    /// Bytes the vectors take in memory (keys not counted).
    pub fn vector_bytes(&self) -> usize {
        self.len() * QUANTIZED_BYTES
    }

    /// The cosine of `query` with every vector, in table order.
    pub fn scores(&self, query: &Quantized) -> Vec<f32> {
        scan(query, &self.values, &self.scales)
    }

    /// Each vector's hubness: the mean cosine of its `n` nearest other vectors in the table. A
    /// vector near many others is near many queries too, served or not, so its similarity to
    /// one says less. Every pair is scored (spread over the rayon pool the caller runs on): for
    /// a catalog of functions, not a tree of skills.
    pub fn hubness(&self, n: usize) -> Vec<f32>
    where
        K: Sync,
    {
        (0..self.len())
            .into_par_iter()
            .map(|i| {
                let vector = Quantized {
                    scale: self.scales[i],
                    values: self.values[i],
                };
                let mut others = self.scores(&vector);
                others.swap_remove(i);
                let n = n.min(others.len());
                if n == 0 {
                    return 0.0;
                }
                others.select_nth_unstable_by(n - 1, |a, b| b.total_cmp(a));
                others[..n].iter().sum::<f32>() / n as f32
            })
            .collect()
    }

    /// The `k` vectors nearest to `query` by cosine, best first (equal scores in table
    /// order), from an exact scan of the whole table.
    pub fn top_k(&self, query: &Quantized, k: usize) -> Vec<Hit<'_, K>>
    where
        K: Sync,
    {
        self.top_k_where(query, k, |_| true)
    }

    /// As [`VectorTable::top_k`], over the vectors whose key `keep` accepts (a prefix or a
    /// visibility rule, applied before ranking so it never shortens the answer).
    ///
    /// A large table is scanned in chunks of [`SCAN_CHUNK`] spread over the rayon pool the
    /// caller runs on (every thread of it: at 50,000 vectors the scan is about a millisecond
    /// of one core's memory bandwidth); each chunk keeps its own best `k`, and the best `k` of
    /// those are the table's, ties included, since every chunk ranks by the same order.
    pub fn top_k_where(
        &self,
        query: &Quantized,
        k: usize,
        keep: impl Fn(&K) -> bool + Sync,
    ) -> Vec<Hit<'_, K>>
    where
        K: Sync,
    {
        if k == 0 {
            return Vec::new();
        }
        let best = |start: usize, end: usize| {
            let scores = scan(query, &self.values[start..end], &self.scales[start..end]);
            best_of(
                scores
                    .into_iter()
                    .enumerate()
                    .map(|(i, score)| Ranked {
                        score,
                        index: start + i,
                    })
                    .filter(|r| keep(&self.keys[r.index])),
                k,
            )
        };
        let n = self.len();
        let candidates = if n >= 2 * SCAN_CHUNK {
            let chunks: Vec<Vec<Ranked>> = (0..n.div_ceil(SCAN_CHUNK))
                .into_par_iter()
                .map(|c| best(c * SCAN_CHUNK, ((c + 1) * SCAN_CHUNK).min(n)))
                .collect();
            best_of(chunks.into_iter().flatten(), k)
        } else {
            best(0, n)
        };
        candidates
            .into_iter()
            .map(|r| Hit {
                key: &self.keys[r.index],
                index: r.index,
                score: r.score,
            })
            .collect()
    }
}

/// Vectors one task of a parallel scan covers (3 MiB of int8 values).
pub const SCAN_CHUNK: usize = 8192;

/// The best `k` of `candidates`, best first.
pub(super) fn best_of(candidates: impl Iterator<Item = Ranked>, k: usize) -> Vec<Ranked> {
    // A min-heap of the best `k` so far: its top is the one to drop next.
    let mut best: BinaryHeap<Ranked> = BinaryHeap::with_capacity(k + 1);
    for ranked in candidates {
        if best.len() < k {
            best.push(ranked);
        } else if best.peek().is_some_and(|worst| ranked < *worst) {
            best.pop();
            best.push(ranked);
        }
    }
    best.into_sorted_vec()
}

/// A scan candidate, ordered best first: a higher score, then an earlier index, is "less",
/// so a max-heap of them keeps the worst on top and `into_sorted_vec` lists the best first.
#[derive(Clone, Copy)]
pub(super) struct Ranked {
    pub(super) score: f32,
    pub(super) index: usize,
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.index.cmp(&other.index))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}
