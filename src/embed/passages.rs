//! Vectors of keys that are embedded as several passages (a skill's lead and its continuation):
//! a key scores by its nearest passage.
//!
//! The leads are scanned exactly, as a [`VectorTable`] always is. The other passages, about as
//! many again, are found in two steps: the sign bits of every one (48 bytes each, an eighth of
//! its int8 values) are compared with the query's, and only the [`candidates`] that agree on
//! the most signs are scored exactly. The scan then reads 21 MiB at 50,000 skills instead of
//! 37: the top 80 costs about 0.3 ms more than the leads alone, where scoring every passage
//! cost 1.1 ms more (`cargo bench --bench suite -- embed`). Sign agreement follows the angle
//! between two vectors, so a passage near the query is among the candidates; what the second
//! step can miss is a passage whose signs disagree with the query's more than those of the
//! hundreds scored, which is held to a recall floor on clustered vectors
//! (`tests/search/embed.rs`). Below [`PREFILTER_FROM`] passages every one is scored, exactly.
//!
//! A key's later passages are ranked as vectors, so [`PassageTable::nearest`] is exact in keys
//! when a key has at most one of them, as a skill does (`retrieval::texts::skill_passages`).
use std::collections::HashMap;

use super::DIMENSIONS;
use super::vectors::{Hit, Quantized, Ranked, VectorTable, best_of};

/// Sign-bit words per vector.
const SIGN_WORDS: usize = DIMENSIONS / 64;

/// Below this many non-lead passages, each is scored exactly (the first step would save
/// nothing).
pub const PREFILTER_FROM: usize = 4096;

/// How many non-lead passages the second step scores exactly for `k` results: the closest by
/// sign agreement, ten per result and at least 512 (a few hundred dot products), and every
/// passage as close as the last of them.
pub fn candidates(k: usize) -> usize {
    k.saturating_mul(10).max(512)
}

/// See the module doc.
pub struct PassageTable<K> {
    /// Every key's first passage.
    leads: VectorTable<K>,
    /// Every later passage, keyed by its lead's position in `leads` (4 bytes, not a copy of
    /// the key: a content hash is 32), with its sign bits at the same position in `signs`.
    rest: VectorTable<u32>,
    signs: Vec<[u64; SIGN_WORDS]>,
}

impl<K> Default for PassageTable<K> {
    fn default() -> Self {
        PassageTable {
            leads: VectorTable::default(),
            rest: VectorTable::default(),
            signs: Vec::new(),
        }
    }
}

impl<K: Clone + Eq + std::hash::Hash + Sync> PassageTable<K> {
    /// Room for `keys` keys with two passages each.
    pub fn with_capacity(keys: usize) -> PassageTable<K> {
        PassageTable {
            leads: VectorTable::with_capacity(keys),
            rest: VectorTable::with_capacity(keys),
            signs: Vec::with_capacity(keys),
        }
    }

    /// Adds `key` with its passages, the lead first (nothing when `passages` is empty).
    pub fn push(&mut self, key: K, passages: &[Quantized]) {
        let Some((lead, rest)) = passages.split_first() else {
            return;
        };
        let at = self.leads.len() as u32;
        for passage in rest {
            self.rest.push(at, passage);
            self.signs.push(signs(&passage.values));
        }
        self.leads.push(key, lead);
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.leads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leads.is_empty()
    }

    /// How many vectors, every passage counted.
    pub fn vectors(&self) -> usize {
        self.leads.len() + self.rest.len()
    }

    /// Every key's first passage, in the order the keys were pushed.
    pub fn leads(&self) -> &VectorTable<K> {
        &self.leads
    }

    /// Every vector's key, each passage once.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        let rest = self.rest.keys().iter().map(|&at| self.lead_key(at));
        self.leads.keys().iter().chain(rest)
    }

    /// The key of the lead at `at`.
    fn lead_key(&self, at: u32) -> &K {
        &self.leads.keys()[at as usize]
    }

    /// The keys `keep` accepts, with their passages, in a table of their own (each table's
    /// order kept, so equal scores rank as they did).
    pub fn retain(&self, keep: impl Fn(&K) -> bool) -> PassageTable<K> {
        let mut kept = PassageTable::default();
        // Each kept lead's new position, by its old one.
        let mut moved: Vec<Option<u32>> = Vec::with_capacity(self.leads.len());
        for index in 0..self.leads.len() {
            let new = self
                .leads
                .get(index)
                .filter(|(key, _)| keep(key))
                .map(|(key, lead)| {
                    kept.leads.push(key.clone(), &lead);
                    (kept.leads.len() - 1) as u32
                });
            moved.push(new);
        }
        for index in 0..self.rest.len() {
            if let Some((&at, passage)) = self.rest.get(index)
                && let Some(new) = moved[at as usize]
            {
                kept.rest.push(new, &passage);
                kept.signs.push(self.signs[index]);
            }
        }
        kept
    }

    /// The `k` keys `keep` accepts nearest to `query`, each once at the cosine of its nearest
    /// passage, best first (equal scores: leads before later passages, then in table order).
    pub fn nearest(
        &self,
        query: &Quantized,
        k: usize,
        keep: impl Fn(&K) -> bool + Sync,
    ) -> Vec<(&K, f32)> {
        let leads = self.leads.top_k_where(query, k, &keep);
        let rest = self.rest_nearest(query, k, &keep);
        let mut best: Vec<(&K, f32)> = Vec::with_capacity(leads.len() + rest.len());
        let mut at: HashMap<&K, usize> = HashMap::with_capacity(leads.len() + rest.len());
        let hits = leads.into_iter().map(|hit| (hit.key, hit.score));
        for (key, score) in hits.chain(rest) {
            match at.get(key) {
                Some(&i) => best[i].1 = best[i].1.max(score),
                None => {
                    at.insert(key, best.len());
                    best.push((key, score));
                }
            }
        }
        // Stable: equal scores keep the order above.
        best.sort_by(|a, b| b.1.total_cmp(&a.1));
        best.truncate(k);
        best
    }

    /// The `k` later passages nearest to `query` (see the module doc), as their keys and
    /// cosines, best first.
    fn rest_nearest(
        &self,
        query: &Quantized,
        k: usize,
        keep: &(impl Fn(&K) -> bool + Sync),
    ) -> Vec<(&K, f32)> {
        let keep = |&at: &u32| keep(self.lead_key(at));
        let hits = if self.rest.len() < PREFILTER_FROM {
            self.rest.top_k_where(query, k, keep)
        } else {
            self.prefiltered(query, k, keep)
        };
        hits.into_iter()
            .map(|hit| (self.lead_key(*hit.key), hit.score))
            .collect()
    }

    /// [`Self::rest_nearest`]'s two steps, for a table of [`PREFILTER_FROM`] passages or more.
    fn prefiltered(
        &self,
        query: &Quantized,
        k: usize,
        keep: impl Fn(&u32) -> bool,
    ) -> Vec<Hit<'_, u32>> {
        let wanted = signs(&query.values);
        let keys = self.rest.keys();
        let mut distances = vec![0u16; self.signs.len()];
        iii_embed_kernel::bit_distances(&wanted, &self.signs, &mut distances);
        // The smallest disagreement at which there are enough candidates, from a histogram of
        // the kept passages' disagreements: passes over small integers, no sort.
        let mut histogram = [0usize; DIMENSIONS + 1];
        for (&distance, key) in distances.iter().zip(keys) {
            if keep(key) {
                histogram[usize::from(distance)] += 1;
            }
        }
        let wanted_count = candidates(k);
        let mut seen = 0;
        let cutoff = histogram
            .iter()
            .position(|&n| {
                seen += n;
                seen >= wanted_count
            })
            .unwrap_or(DIMENSIONS);
        let chosen: Vec<usize> = distances
            .iter()
            .zip(keys)
            .enumerate()
            .filter(|&(_, (&distance, key))| usize::from(distance) <= cutoff && keep(key))
            .map(|(index, _)| index)
            .collect();
        let scores = self.rest.scores_at(query, &chosen);
        let scored = chosen
            .iter()
            .zip(scores)
            .map(|(&index, score)| Ranked { score, index });
        best_of(scored, k)
            .into_iter()
            .map(|ranked| Hit {
                key: &self.rest.keys()[ranked.index],
                index: ranked.index,
                score: ranked.score,
            })
            .collect()
    }
}

/// A vector's sign bits: bit `i` is set when value `i` is positive.
fn signs(values: &[i8; DIMENSIONS]) -> [u64; SIGN_WORDS] {
    let mut bits = [0u64; SIGN_WORDS];
    for (i, &value) in values.iter().enumerate() {
        if value > 0 {
            bits[i / 64] |= 1 << (i % 64);
        }
    }
    bits
}
