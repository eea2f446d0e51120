//! The skill embeddings in memory, and the dense lane of skill search over them.
//!
//! Each distinct content has one vector per passage (`retrieval::texts::skill_passages`: the
//! lead, and a continuation when the body goes on; the index's `vectors` table, read when the
//! model becomes ready, only if that model made them, then added to batch by batch as the
//! background embedder stores them), all in one [`PassageTable`] keyed by content hash. A
//! query is embedded and then the table is scanned (int8, AVX2 or AVX-512 VNNI, in chunks), on
//! the embedder's query threads (one per core, at most 4; none on one core, where the calling
//! thread does it); a content scores by its nearest passage, and
//! the hits are turned into the row positions of the revision being answered (which the search
//! fuses and reads rows by, with no id looked up) through a map from content to row positions,
//! built once per revision from the revision's rows. Vectors
//! of contents no row holds any more are skipped by that map, and dropped from the table when
//! they reach an eighth of it.
//!
//! A content's passages are made from the first row holding it ([`built_as`] tags what they
//! took from it beyond the content: its name, title and description), and stay as long as a
//! row with that tag holds it: a renamed skill is embedded again under its new name, a copy
//! added under another name changes nothing.
//!
//! How far the exact scan goes (BENCHMARKS.md, "How far the exact vector scan goes"): on two
//! cores a hybrid search took 4.0 to 4.4 ms at 50,000 skills and 4.9 to 6.4 ms at 100,000 over
//! this stop's runs, so the 5 ms target holds to somewhere between 65,000 and 80,000 skills.
//! The query's embedding (about 2.4 ms) does not grow; the passage scan (the top 80 of 50,000
//! skills of two passages each in about 0.8 ms, of 100,000 in 1.5 ms) is a third to two fifths
//! of the growth, and is what an approximate index (HNSW, IVF) would replace: the lexical lane,
//! the fusion and the answer grow with the tree too.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::cache::SkillCache;
use super::listed::Listed;
use super::search::leading_body;
use crate::doc::Hash;
use crate::embed::{Embedder, PassageTable, Quantized};
use crate::error::Result;
use crate::index::{ContentVectors, Reader};
use crate::locks;
use crate::retrieval::fusion::{DenseHit, DenseRanker};
use crate::retrieval::texts;
use crate::rules::skill::SkillRow;

/// What a skill's passages take from its row beyond its content (its shown id, title and
/// description; the body is the content's): the tag its vectors are stored under, so that the
/// same content under another name is embedded again.
pub fn built_as(listed: &Listed) -> u64 {
    let mut hasher = blake3::Hasher::new();
    for part in [listed.shown_id(), listed.title(), listed.description()] {
        hasher.update(part.as_bytes());
        hasher.update(&[0]);
    }
    crate::digest::u64_of(&hasher.finalize())
}

/// A content to embed: its hash, the [`built_as`] tag of the row its passages are made from,
/// and those passages.
pub type ToEmbed = (Hash, u64, Vec<String>);

/// The vectors of `contents`: every passage in one call of `embed` (a batch over the cores),
/// then regrouped by content in the same order.
pub fn embed_contents(
    contents: &[ToEmbed],
    embed: impl FnOnce(&[&str]) -> Vec<Vec<f32>>,
) -> Vec<ContentVectors> {
    let refs: Vec<&str> = contents
        .iter()
        .flat_map(|(_, _, passages)| passages.iter().map(String::as_str))
        .collect();
    let mut vectors = embed(&refs).into_iter();
    contents
        .iter()
        .map(|(hash, tag, passages)| ContentVectors {
            hash: *hash,
            tag: *tag,
            passages: vectors
                .by_ref()
                .take(passages.len())
                .map(|v| Quantized::from_vector(&v))
                .collect(),
        })
        .collect()
}

/// A content waiting for its vectors, and the position of the first row holding it (the row
/// its passages are made from).
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    pub hash: Hash,
    pub position: u32,
}

/// The passages a skill content is embedded as: `retrieval::texts` decides (from the name,
/// title, description and leading body of the row that holds it), the same texts the quality
/// tests score.
pub fn skill_passages(listed: &Listed, text: &str) -> Vec<String> {
    texts::skill_passages(
        &listed.shown_id(),
        &listed.title(),
        &listed.description(),
        leading_body(text),
    )
}

/// A digest of [`skill_passages`] as it treats a fixed skill with a long body (16 hex digits):
/// it changes when the texts a skill is embedded as change, and with it the name stored vectors
/// are kept under (`directory::dense::vectors_model`), so that vectors of the old texts are
/// embedded again.
pub fn skill_passages_digest() -> String {
    let row = SkillRow {
        title: "Sample skill".into(),
        r#type: Some("skill".into()),
        description: "Use when a sample is needed.".into(),
        name: Some("sample-skill".into()),
        ..SkillRow::blank("probe/sample-skill")
    };
    let listed = Listed::new("probe/sample-skill".into(), &row);
    // Long enough that every passage rule (the lead's cut, the continuation) shows.
    let text = format!(
        "---\nname: sample-skill\ndescription: Use when a sample is needed.\n---\n\
         # Sample skill\n\n## Steps\n\n1. Run `sample --check` on the **input**.\n\n\
         | a | b |\n|---|---|\n\n{}",
        "More words of the body follow here.\n".repeat(60)
    );
    let passages = skill_passages(&listed, &text);
    blake3::hash(passages.join("\n\0").as_bytes()).to_hex()[..16].to_string()
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
    /// Every passage's vector, keyed by its content.
    passages: PassageTable<Hash>,
    /// The contents that have their vectors, each with the [`built_as`] tag of the row they
    /// were made from.
    held: HashMap<Hash, u64>,
}

/// The row positions holding each content in one revision, and each row's [`built_as`] tag
/// (by position: 8 bytes a row).
struct ByContent {
    epoch: u64,
    revision: u64,
    /// The contents of files, which the index stores vectors of (and `index::status` counts).
    rows: HashMap<Hash, Vec<u32>>,
    /// The bundled skills the revision serves, by the hash of their text: embedded by each
    /// process and held in memory only ([`SkillVectors::embed_bundled`]).
    bundled: HashMap<Hash, Vec<u32>>,
    tags: OnceLock<Vec<u64>>,
}

impl ByContent {
    /// The rows holding a content: files' and bundled skills' alike (a file copied from a
    /// bundled skill to start a fork holds its text too).
    fn positions(&self, hash: &Hash) -> impl Iterator<Item = &u32> {
        [self.rows.get(hash), self.bundled.get(hash)]
            .into_iter()
            .flatten()
            .flatten()
    }

    /// Whether a row of the revision holds the content.
    fn live(&self, hash: &Hash) -> bool {
        self.rows.contains_key(hash) || self.bundled.contains_key(hash)
    }

    /// Each row's tag, computed on first use: the embedding pass and the status need them, a
    /// search does not (it would pay a digest of every row after each change). `cache` is the
    /// revision this map was built from.
    fn tags(&self, cache: &SkillCache) -> &[u64] {
        self.tags
            .get_or_init(|| cache.rows().iter().map(|row| built_as(row)).collect())
    }
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
            passages: PassageTable::with_capacity(count),
            held: HashMap::with_capacity(count),
        };
        reader.each_vector(model, |content| table.push(&content))?;
        *locks::write(&self.table) = table;
        Ok(())
    }

    /// Adds embeddings; a content held under another tag (made from another row) has its
    /// vectors replaced.
    pub fn insert(&self, batch: &[ContentVectors]) {
        let mut table = locks::write(&self.table);
        let replaced: HashSet<Hash> = batch
            .iter()
            .filter(|c| table.held.get(&c.hash).is_some_and(|&tag| tag != c.tag))
            .map(|c| c.hash)
            .collect();
        if !replaced.is_empty() {
            let passages = table.passages.retain(|hash| !replaced.contains(hash));
            table.held.retain(|hash, _| !replaced.contains(hash));
            table.passages = passages;
        }
        for content in batch {
            table.push(content);
        }
    }

    /// The distinct contents of `cache`'s rows without vectors made from a row holding them,
    /// in row order, each with its first row (the one they are to be made from).
    pub fn pending(&self, cache: &SkillCache) -> Vec<Pending> {
        let by_content = self.by_content(cache);
        let tags = by_content.tags(cache);
        let table = locks::read(&self.table);
        let mut pending: Vec<Pending> = by_content
            .rows
            .iter()
            .filter(|(hash, positions)| !table.is_current(hash, positions, tags))
            .map(|(hash, positions)| Pending {
                hash: *hash,
                position: positions[0],
            })
            .collect();
        pending.sort_unstable_by_key(|p| p.position);
        pending
    }

    /// How many distinct contents of `cache`'s rows are embedded (resources left out), with a
    /// vector or not.
    pub fn contents(&self, cache: &SkillCache) -> u64 {
        self.by_content(cache).rows.len() as u64
    }

    /// How many distinct contents of `cache`'s rows have vectors made from a row holding them,
    /// and how many do not.
    pub fn progress(&self, cache: &SkillCache) -> (u64, u64) {
        let by_content = self.by_content(cache);
        let tags = by_content.tags(cache);
        let table = locks::read(&self.table);
        let embedded = by_content
            .rows
            .iter()
            .filter(|(hash, positions)| table.is_current(hash, positions, tags))
            .count();
        (embedded as u64, (by_content.rows.len() - embedded) as u64)
    }

    /// Forgets the held contents of `cache`'s rows whose vectors the index no longer keeps, so
    /// that they are embedded again: a reconcile dropped them with their content, which came
    /// back since (a file deleted and restored, a branch switched and back). Returns how many.
    /// Nothing is looked up while the index keeps as many vectors as are held.
    pub fn forget_dropped(&self, reader: &Reader, cache: &SkillCache) -> Result<usize> {
        let (embedded, _) = self.progress(cache);
        if reader.vector_count()? >= embedded {
            return Ok(0);
        }
        let by_content = self.by_content(cache);
        let mut dropped = HashSet::new();
        for hash in locks::read(&self.table).held.keys() {
            if by_content.rows.contains_key(hash) && !reader.has_vector(hash)? {
                dropped.insert(*hash);
            }
        }
        self.forget(&dropped);
        Ok(dropped.len())
    }

    /// The held contents no row of `cache` embeds: contents that left the tree, or that only
    /// resources hold now.
    pub fn unused(&self, cache: &SkillCache) -> HashSet<Hash> {
        let by_content = self.by_content(cache);
        locks::read(&self.table)
            .held
            .keys()
            .filter(|hash| !by_content.live(hash))
            .copied()
            .collect()
    }

    /// Embeds the bundled skills `cache`'s revision serves that have no vectors here yet: a
    /// handful of texts, embedded once by each process that searches (milliseconds) and held
    /// in memory only, since their text is the binary's and the index keeps nothing of them.
    /// Without them a bundled skill (the worker's own how-to for finding functions) could only
    /// be found by its words, and never offered beside functions.
    pub fn embed_bundled(&self, embedder: &Embedder, cache: &SkillCache) {
        let missing: Vec<(Hash, &Listed, &str)> = {
            let table = locks::read(&self.table);
            crate::bundled::skill_contents()
                .iter()
                .filter(|(_, hash, _)| !table.held.contains_key(hash))
                .filter_map(|(id, hash, text)| Some((*hash, cache.row(id)?, *text)))
                .filter(|(_, row, _)| row.root.is_none())
                .collect()
        };
        if missing.is_empty() {
            return;
        }
        let contents: Vec<ToEmbed> = missing
            .iter()
            .map(|(hash, row, text)| (*hash, built_as(row), skill_passages(row, text)))
            .collect();
        self.insert(&embed_contents(&contents, |texts| {
            embedder.embed_batch(texts)
        }));
    }

    /// Forgets the vectors of `hashes`, so that their contents are embedded again.
    pub fn forget(&self, hashes: &HashSet<Hash>) {
        if hashes.is_empty() {
            return;
        }
        let mut table = locks::write(&self.table);
        let passages = table.passages.retain(|hash| !hashes.contains(hash));
        table.held.retain(|hash, _| !hashes.contains(hash));
        table.passages = passages;
    }

    /// Drops the vectors of contents `cache`'s rows no longer hold, once they are an eighth of
    /// the table (the index drops them with their content; this keeps the scan short).
    pub fn compact(&self, cache: &SkillCache) {
        let by_content = self.by_content(cache);
        let mut table = locks::write(&self.table);
        let live = |hash: &Hash| by_content.live(hash);
        let dead = table.passages.keys().filter(|h| !live(h)).count();
        if dead == 0 || dead * 8 < table.passages.vectors() {
            return;
        }
        let passages = table.passages.retain(live);
        table.held.retain(|hash, _| live(hash));
        table.passages = passages;
    }

    /// The row positions of each content in `cache`'s revision, resources left out (built on
    /// the revision's first ask).
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
            // A resource is never a search result: its content is not embedded for its row.
            if let Some(hash) = row.content
                && !cache.is_resource(position as u32)
            {
                rows.entry(hash).or_default().push(position as u32);
            }
        }
        let mut bundled: HashMap<Hash, Vec<u32>> = HashMap::new();
        for (id, hash, _) in crate::bundled::skill_contents() {
            if let Some(position) = cache.position_of(id)
                && cache.at(position).root.is_none()
            {
                bundled.entry(*hash).or_default().push(position);
            }
        }
        let map = Arc::new(ByContent {
            epoch: cache.epoch,
            revision: cache.revision,
            rows,
            bundled,
            tags: OnceLock::new(),
        });
        *held = Some(map.clone());
        map
    }

    /// The rows of `cache`'s revision that `keep` admits nearest to `query` (each by its
    /// nearest passage), as positions, best first, at most `limit` (a content two skills share
    /// gives both, at the same similarity).
    pub fn nearest(
        &self,
        query: &Quantized,
        cache: &SkillCache,
        limit: usize,
        keep: &(dyn Fn(&u32) -> bool + Sync),
    ) -> Vec<DenseHit<u32>> {
        let by_content = self.by_content(cache);
        let table = locks::read(&self.table);
        let kept = |hash: &Hash| by_content.positions(hash).any(keep);
        // Unfiltered first (no lookup per vector): dead vectors are under an eighth of the
        // table, and filters mostly keep every row; only when too few of the head are kept is
        // the scan repeated with the filter.
        let mut hits = table.passages.nearest(query, 2 * limit, |_| true);
        if hits.iter().filter(|(hash, _)| kept(hash)).count() < limit
            && table.held.len() > hits.len()
        {
            hits = table.passages.nearest(query, limit, kept);
        }
        let mut out = Vec::with_capacity(limit);
        for (hash, similarity) in hits {
            for &position in by_content.positions(hash) {
                if keep(&position) {
                    out.push(DenseHit::new(position, similarity));
                }
            }
        }
        out.truncate(limit);
        out
    }
}

impl Table {
    /// Adds a content's vectors unless it is held already (see [`SkillVectors::insert`] for
    /// replacing them).
    fn push(&mut self, content: &ContentVectors) {
        if content.passages.is_empty() || self.held.contains_key(&content.hash) {
            return;
        }
        self.held.insert(content.hash, content.tag);
        self.passages.push(content.hash, &content.passages);
    }

    /// Whether `hash` has vectors made from one of the rows holding it (at `positions`, whose
    /// tags are in `tags`): a copy of a skill added under another name leaves them as they are.
    fn is_current(&self, hash: &Hash, positions: &[u32], tags: &[u64]) -> bool {
        self.held.get(hash).is_some_and(|tag| {
            positions
                .iter()
                .any(|&position| tags[position as usize] == *tag)
        })
    }
}

/// The dense lane of one skill search: the embedder, the vectors, and the revision answered (its
/// hits are row positions in that revision).
pub struct SkillLane<'a> {
    pub embedder: &'a Embedder,
    pub vectors: &'a SkillVectors,
    pub cache: &'a SkillCache,
}

impl DenseRanker<u32> for SkillLane<'_> {
    fn nearest(&self, query: &str, limit: usize) -> Option<Vec<DenseHit<u32>>> {
        self.nearest_where(query, limit, &|_| true)
    }

    fn nearest_where(
        &self,
        query: &str,
        limit: usize,
        keep: &(dyn Fn(&u32) -> bool + Sync),
    ) -> Option<Vec<DenseHit<u32>>> {
        self.embedder.on_query_threads_unless_busy(|| {
            let query = self.embedder.embed_query_quantized(query);
            self.vectors.nearest(&query, self.cache, limit, keep)
        })
    }
}
