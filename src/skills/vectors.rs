//! The skill embeddings in memory, and the dense lane of skill search over them.
//!
//! One vector per distinct content (the index's `vectors` table, read when the model becomes
//! ready, only if that model made them, then added to batch by batch as the background embedder
//! stores them) sits in one [`VectorTable`] keyed by content hash. A query is embedded and
//! then one exact scan of that table runs (int8, AVX2 when the processor has it: about 1 ms of
//! one core at 50,000 vectors, in chunks over both), on the embedder's query threads; the hits are turned into the
//! skill ids of the revision being answered through a map from content to row positions, built
//! once per revision from the revision's rows. Vectors of contents no row holds any more are
//! skipped by that map, and dropped from the table when they reach an eighth of it.
//!
//! An approximate index (HNSW, IVF) would start to pay where the scan stops fitting the query
//! budget. The scan is linear: the top 10 of 50,000 vectors took 0.57 ms p50 (AVX-512 VNNI,
//! both cores; 1.30 ms on one core with AVX2 before) and of 100,000 2.1 ms p50 on a shared,
//! loaded machine (`cargo bench --bench suite -- embed`). Beside the query's embedding (about
//! 2.5 ms) and the lexical lane and fusion (about 1 ms at 50,000), a search stays within 5 ms
//! up to roughly 100,000 skills on a loaded machine and 150,000 to 200,000 on two free cores;
//! below that the exact scan is exact, and costs nothing to keep current.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use super::cache::SkillCache;
use super::listed::Listed;
use super::search::leading_body;
use crate::doc::Hash;
use crate::embed::{Embedder, Quantized, VectorTable};
use crate::error::Result;
use crate::index::Reader;
use crate::locks;
use crate::retrieval::fusion::{DenseHit, DenseRanker, Progress};
use crate::retrieval::texts;
use crate::rules::skill::SkillRow;

/// The text a skill content is embedded as: `retrieval::texts` decides (the name, title,
/// description and leading body of the row that holds it), the same text the quality tests
/// score.
pub fn skill_text(listed: &Listed, text: &str) -> String {
    texts::skill_text(
        &listed.shown_id(),
        &listed.title(),
        &listed.description(),
        leading_body(text),
    )
}

/// A digest of [`skill_text`] as it treats a fixed skill (16 hex digits): it changes when the
/// text a skill is embedded as changes, and with it the name stored vectors are kept under
/// (`directory::dense::vectors_model`), so that vectors of the old texts are embedded again.
pub fn skill_text_digest() -> String {
    let row = SkillRow {
        title: "Sample skill".into(),
        r#type: Some("skill".into()),
        description: "Use when a sample is needed.".into(),
        name: Some("sample-skill".into()),
        ..SkillRow::blank("probe/sample-skill")
    };
    let listed = Listed::new("probe/sample-skill".into(), &row);
    let text = "---\nname: sample-skill\ndescription: Use when a sample is needed.\n---\n\
                # Sample skill\n\n## Steps\n\n1. Run `sample --check` on the **input**.\n\n\
                | a | b |\n|---|---|\n\nMore words of the body follow here.\n";
    blake3::hash(skill_text(&listed, text).as_bytes()).to_hex()[..16].to_string()
}

/// See the module doc.
#[derive(Default)]
pub struct SkillVectors {
    table: RwLock<Table>,
    /// Content hash → row positions, of the last revision asked for.
    rows: Mutex<Option<Arc<ByContent>>>,
}

#[derive(Default)]
struct Table {
    vectors: VectorTable<Hash>,
    at: HashMap<Hash, u32>,
}

/// The row positions holding each content in one revision.
struct ByContent {
    epoch: u64,
    revision: u64,
    rows: HashMap<Hash, Vec<u32>>,
}

impl SkillVectors {
    /// Replaces what is held with the vectors the index keeps of `model`, read one at a time
    /// into the table (never all of them twice in memory).
    pub fn load(&self, reader: &Reader, model: &str) -> Result<()> {
        let count = if reader.vectors_model()?.as_deref() == Some(model) {
            usize::try_from(reader.vector_count()?).unwrap_or(0)
        } else {
            0
        };
        let mut table = Table {
            vectors: VectorTable::with_capacity(count),
            at: HashMap::with_capacity(count),
        };
        reader.each_vector(model, |hash, vector| table.push(hash, &vector))?;
        *locks::write(&self.table) = table;
        Ok(())
    }

    /// Adds embeddings (a content already held keeps its vector).
    pub fn insert(&self, batch: &[(Hash, Quantized)]) {
        let mut table = locks::write(&self.table);
        for (hash, vector) in batch {
            table.push(*hash, vector);
        }
    }

    /// The distinct contents of `cache`'s rows that have no vector yet, in row order.
    pub fn pending(&self, cache: &SkillCache) -> Vec<Hash> {
        let table = locks::read(&self.table);
        let mut seen = std::collections::HashSet::new();
        cache
            .rows()
            .iter()
            .filter_map(|row| row.content)
            .filter(|hash| !table.at.contains_key(hash) && seen.insert(*hash))
            .collect()
    }

    /// How many distinct contents of `cache`'s rows have a vector, and how many do not.
    pub fn progress(&self, cache: &SkillCache) -> (u64, u64) {
        let by_content = self.by_content(cache);
        let table = locks::read(&self.table);
        let embedded = by_content
            .rows
            .keys()
            .filter(|hash| table.at.contains_key(*hash))
            .count();
        (embedded as u64, (by_content.rows.len() - embedded) as u64)
    }

    /// Drops the vectors of contents `cache`'s rows no longer hold, once they are an eighth of
    /// the table (the index drops them with their content; this keeps the scan short).
    pub fn compact(&self, cache: &SkillCache) {
        let by_content = self.by_content(cache);
        let mut table = locks::write(&self.table);
        let live = table
            .at
            .keys()
            .filter(|hash| by_content.rows.contains_key(*hash))
            .count();
        let dead = table.vectors.len() - live;
        if dead == 0 || dead * 8 < table.vectors.len() {
            return;
        }
        let mut kept = Table {
            vectors: VectorTable::with_capacity(live),
            at: HashMap::with_capacity(live),
        };
        for index in 0..table.vectors.len() {
            if let Some((hash, vector)) = table.vectors.get(index)
                && by_content.rows.contains_key(hash)
            {
                kept.push(*hash, &vector);
            }
        }
        *table = kept;
    }

    /// The row positions of each content in `cache`'s revision (built on the revision's first
    /// ask).
    fn by_content(&self, cache: &SkillCache) -> Arc<ByContent> {
        let mut held = locks::lock(&self.rows);
        if let Some(map) = held.as_ref()
            && map.epoch == cache.epoch
            && map.revision == cache.revision
        {
            return map.clone();
        }
        let mut rows: HashMap<Hash, Vec<u32>> = HashMap::with_capacity(cache.rows().len());
        for (position, row) in cache.rows().iter().enumerate() {
            if let Some(hash) = row.content {
                rows.entry(hash).or_default().push(position as u32);
            }
        }
        let map = Arc::new(ByContent {
            epoch: cache.epoch,
            revision: cache.revision,
            rows,
        });
        *held = Some(map.clone());
        map
    }

    /// The skill ids of `cache`'s revision nearest to `query`, best first, at most `limit`
    /// (a content two skills share gives both, at the same similarity).
    pub fn nearest(&self, query: &Quantized, cache: &SkillCache, limit: usize) -> Vec<DenseHit> {
        let by_content = self.by_content(cache);
        let table = locks::read(&self.table);
        // Unfiltered first (no lookup per vector): dead vectors are under an eighth of the
        // table; only when they crowd the head is the scan repeated with the filter.
        let mut hits = table.vectors.top_k(query, 2 * limit);
        let live = |hash: &Hash| by_content.rows.contains_key(hash);
        if hits.iter().filter(|h| live(h.key)).count() < limit.min(by_content.rows.len())
            && table.vectors.len() > hits.len()
        {
            hits = table.vectors.top_k_where(query, limit, |hash| live(hash));
        }
        let mut out = Vec::with_capacity(limit);
        for hit in hits {
            for &position in by_content.rows.get(hit.key).into_iter().flatten() {
                out.push(DenseHit {
                    key: cache.at(position).id.to_string(),
                    similarity: hit.score,
                });
            }
        }
        out.truncate(limit);
        out
    }
}

impl Table {
    fn push(&mut self, hash: Hash, vector: &Quantized) {
        if self.at.contains_key(&hash) {
            return;
        }
        self.at.insert(hash, self.vectors.len() as u32);
        self.vectors.push(hash, vector);
    }
}

/// The dense lane of one skill search: the model, the vectors, and the revision answered.
pub struct SkillLane<'a> {
    pub model: &'a str,
    pub embedder: &'a Embedder,
    pub vectors: &'a SkillVectors,
    pub cache: &'a SkillCache,
}

impl DenseRanker for SkillLane<'_> {
    fn model(&self) -> &str {
        self.model
    }

    fn nearest(&self, query: &str, limit: usize) -> Option<Vec<DenseHit>> {
        Some(self.embedder.on_query_threads(|| {
            let query = self.embedder.embed_query_quantized(query);
            self.vectors.nearest(&query, self.cache, limit)
        }))
    }

    fn progress(&self) -> Progress {
        let (embedded, pending) = self.vectors.progress(self.cache);
        Progress {
            embedded,
            pending,
            ready: true,
        }
    }
}
