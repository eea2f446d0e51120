//! The dense lane of function search: each catalog function's text (its id and slim
//! description) embedded once per distinct text, and an exact scan of the current catalog's
//! vectors per capability, asked in the forms `retrieval::texts::function_query_forms` gives.
//!
//! A catalog change embeds only the functions whose text is new (the vectors are kept by the
//! text's hash, across catalogs), off the search's path: until the lane has the new catalog,
//! searches fuse with the vectors of the functions whose text did not change, so a changed
//! description ranks by its words meanwhile. The catalog embedded is the one current when the
//! lane is free (`FunctionLane::follow`), so a burst of changes embeds the newest catalog
//! once, not every superseded one. That work runs
//! on the low-priority background threads (`embed::in_background`). It also measures
//! each function's hubness in the new catalog (`VectorTable::hubness`), which the confidence
//! gate discounts (`retrieval::fusion::FUNCTION_FLOORS`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::catalog::{Catalog, SlimTool};
use crate::embed::{Embedder, Quantized, VectorTable, in_background};
use crate::locks;
use crate::retrieval::fusion::{DenseHit, DenseRanker, HUBNESS_NEIGHBOURS};
use crate::retrieval::texts;

/// The text a function is embedded as (`retrieval::texts` decides, for the evaluation too).
pub fn function_text(tool: &SlimTool) -> String {
    texts::function_text(&tool.name, &tool.description)
}

/// A capability as the function lane compares it: the mean of its forms' embeddings
/// (`texts::function_query_forms`, embedded side by side on the query threads), quantized, and
/// the norm of that mean. The forms are unit vectors, so a function's cosine with the quantized
/// mean times that norm is the mean of its cosines with the forms: the similarity the floors
/// were tuned on.
/// `None` when the query threads are busy (`Embedder::on_query_threads_unless_busy`).
pub fn function_query(embedder: &Embedder, capability: &str) -> Option<(Quantized, f32)> {
    let forms = texts::function_query_forms(capability);
    let refs: Vec<&str> = forms.iter().map(String::as_str).collect();
    let vectors = embedder.on_query_threads_unless_busy(|| embedder.embed_batch(&refs))?;
    let mut mean = vec![0.0f32; vectors[0].len()];
    for vector in &vectors {
        for (m, v) in mean.iter_mut().zip(vector) {
            *m += v / vectors.len() as f32;
        }
    }
    let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
    Some((Quantized::from_vector(&mean), norm))
}

/// See the module doc.
pub struct FunctionLane {
    embedder: Arc<Embedder>,
    /// The current catalog's vectors, by function id.
    table: RwLock<Arc<Scanned>>,
    /// Text hash → vector, for every function text embedded so far.
    known: Mutex<HashMap<blake3::Hash, Quantized>>,
    /// The catalog fingerprint `table` was built for.
    fingerprint: Mutex<Option<String>>,
    /// Set as the worker shuts down: an embedding in progress ends at its next chunk, so a
    /// catalog of thousands of new functions does not hold the shutdown for a minute.
    stopped: AtomicBool,
}

/// Texts embedded between two looks at [`FunctionLane::stop`].
const CHUNK: usize = 64;

/// One catalog's vectors, each one's hubness and the hash of the text it was made from, at
/// the same position.
#[derive(Default)]
struct Scanned {
    table: VectorTable<String>,
    hubness: Vec<f32>,
    texts: Vec<blake3::Hash>,
}

impl FunctionLane {
    pub fn new(embedder: Arc<Embedder>) -> FunctionLane {
        FunctionLane {
            embedder,
            table: RwLock::default(),
            known: Mutex::default(),
            fingerprint: Mutex::default(),
            stopped: AtomicBool::new(false),
        }
    }

    /// Ends the embedding in progress at its next chunk, and any later one at once: what it
    /// embedded so far is kept, and searches keep the table the lane had (a catalog part way
    /// through: the functions whose text it did not change).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Brings the lane to the catalog `current` gives once this call holds the lane, and
    /// again while a newer one arrived during the embedding. Returns how many texts were
    /// embedded. Why the catalog current now rather than the one of the change that asked: a
    /// burst of changes would embed, one after another, catalogs already replaced, and could
    /// end on an older one than the newest.
    ///
    /// Until a catalog's new texts are embedded, the lane answers with the vectors of its
    /// functions whose text is unchanged ([`Scanned::unchanged_in`], swapped in here, on the
    /// caller's thread, not behind the background pool's queue): a function whose description
    /// changed ranks by its words meanwhile, as a new one does, never by its old description's
    /// vector.
    pub fn follow(&self, current: impl Fn() -> Arc<Catalog> + Sync) -> usize {
        let mut fingerprint = locks::lock(&self.fingerprint);
        let mut embedded = 0;
        loop {
            let catalog = current();
            if self.is_stopped() || fingerprint.as_deref() == Some(catalog.fingerprint()) {
                return embedded;
            }
            let texts = texts_of(&catalog);
            // Even when every text is known (a description changed back): the new table waits
            // for the background pool, and the old one holds the other text's vector.
            let unchanged = locks::read(&self.table).unchanged_in(&catalog, &texts);
            *locks::write(&self.table) = Arc::new(unchanged);
            // The table is no longer that of the catalog the lane had: should that catalog
            // come back before this one is embedded, it is swapped in again.
            *fingerprint = None;
            let missing = self.missing(&texts);
            let held: &mut Option<String> = &mut fingerprint;
            embedded +=
                in_background(|| self.embed_and_swap(held, &catalog, &texts, &missing, &current));
        }
    }

    /// The texts of `texts` the lane has not embedded, each once.
    fn missing<'t>(&self, texts: &'t [(blake3::Hash, String)]) -> Vec<&'t (blake3::Hash, String)> {
        let known = locks::lock(&self.known);
        let mut seen = std::collections::HashSet::new();
        texts
            .iter()
            .filter(|(hash, _)| !known.contains_key(hash) && seen.insert(*hash))
            .collect()
    }

    /// Embeds `missing`, the texts of `catalog` (`texts`) not seen before (batched over the
    /// cores of the pool the caller runs on: `follow` runs it on the low-priority background
    /// threads, so that searches meanwhile keep their pace), then swaps its table in;
    /// `fingerprint` is the lane's, held. A catalog `current` no longer gives is left after
    /// the chunk in progress, its table not swapped in (the texts embedded stay known, so the
    /// newer catalog does not embed them again): thousands of functions that left held both
    /// cores for minutes.
    fn embed_and_swap(
        &self,
        fingerprint: &mut Option<String>,
        catalog: &Catalog,
        texts: &[(blake3::Hash, String)],
        missing: &[&(blake3::Hash, String)],
        current: &(impl Fn() -> Arc<Catalog> + Sync),
    ) -> usize {
        let mut embedded = 0;
        for chunk in missing.chunks(CHUNK) {
            if self.is_stopped() {
                return embedded;
            }
            let refs: Vec<&str> = chunk.iter().map(|(_, text)| text.as_str()).collect();
            let vectors = self.embedder.embed_batch(&refs);
            let mut known = locks::lock(&self.known);
            for ((hash, _), vector) in chunk.iter().zip(&vectors) {
                known.insert(*hash, Quantized::from_vector(vector));
            }
            embedded += chunk.len();
            if embedded < missing.len() && current().fingerprint() != catalog.fingerprint() {
                return embedded;
            }
        }
        let mut known = locks::lock(&self.known);
        let mut scanned = Scanned::default();
        for (tool, (hash, _)) in catalog.tools().iter().zip(texts) {
            if let Some(vector) = known.get(hash) {
                // Its hubness is measured below, over the whole table.
                scanned.push(&tool.name, vector, *hash, 0.0);
            }
        }
        // Texts of functions that left the catalog go once they outnumber the live ones.
        if known.len() > 2 * texts.len().max(256) {
            let live: std::collections::HashSet<&blake3::Hash> =
                texts.iter().map(|(hash, _)| hash).collect();
            known.retain(|hash, _| live.contains(hash));
        }
        scanned.hubness = scanned.table.hubness(HUBNESS_NEIGHBOURS);
        *locks::write(&self.table) = Arc::new(scanned);
        *fingerprint = Some(catalog.fingerprint().to_string());
        missing.len()
    }
}

/// Each function of `catalog` with its embedded text's hash and the text, in catalog order.
fn texts_of(catalog: &Catalog) -> Vec<(blake3::Hash, String)> {
    catalog
        .tools()
        .iter()
        .map(|tool| {
            let text = function_text(tool);
            (blake3::hash(text.as_bytes()), text)
        })
        .collect()
}

impl Scanned {
    /// Adds `key`'s vector, made from the text hashed `text`, at the next position.
    fn push(&mut self, key: &str, vector: &Quantized, text: blake3::Hash, hubness: f32) {
        self.table.push(key.to_string(), vector);
        self.texts.push(text);
        self.hubness.push(hubness);
    }

    /// This table kept to the functions of `catalog` (its `texts`, in order) whose text is the
    /// one their vector here was made from, each with the hubness measured here (its neighbours
    /// barely move between two catalogs, and measuring it again costs as much as the table).
    fn unchanged_in(&self, catalog: &Catalog, texts: &[(blake3::Hash, String)]) -> Scanned {
        let at: HashMap<&String, usize> = self.table.keys().iter().zip(0..).collect();
        let mut kept = Scanned::default();
        for (tool, (hash, _)) in catalog.tools().iter().zip(texts) {
            let Some(&i) = at.get(&tool.name).filter(|&&i| self.texts[i] == *hash) else {
                continue;
            };
            if let Some((_, vector)) = self.table.get(i) {
                kept.push(&tool.name, &vector, *hash, self.hubness[i]);
            }
        }
        kept
    }
}

impl DenseRanker for FunctionLane {
    fn nearest(&self, query: &str, limit: usize) -> Option<Vec<DenseHit>> {
        self.nearest_where(query, limit, &|_| true)
    }

    fn nearest_where(
        &self,
        query: &str,
        limit: usize,
        keep: &(dyn Fn(&String) -> bool + Sync),
    ) -> Option<Vec<DenseHit>> {
        let scanned = locks::read(&self.table).clone();
        if scanned.table.is_empty() {
            return None;
        }
        let (query, norm) = function_query(&self.embedder, query)?;
        Some(
            scanned
                .table
                .top_k_where(&query, limit, keep)
                .into_iter()
                .map(|hit| DenseHit {
                    key: hit.key.clone(),
                    similarity: hit.score * norm,
                    hubness: scanned.hubness[hit.index],
                })
                .collect(),
        )
    }
}
