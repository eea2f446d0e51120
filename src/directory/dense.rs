//! The embedder's side of the directory: the model's state (set by whoever loads or fetches
//! it: the worker), the skill vectors in memory, and the background pass that embeds the
//! contents lacking a vector after each reconcile.
//!
//! Nothing waits for any of it. Skill search stays lexical until the model is loaded and a
//! first pass has embedded every content (a cold tree embeds at tens of skills a second);
//! from then on it is hybrid, a content new since then being ranked lexically alone until its
//! vector is stored (a batch later). The pass reads a content's text from a snapshot of its
//! own, embeds a batch outside any transaction on the process's low-priority background threads
//! (one per core, `embed::in_background`), and stores the batch in one short commit of the
//! index's `vectors` table. A pass that fails (a full disk, say) is tried again after a wait
//! that grows with each failure in a row, or at once when the tree changes.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Directory;
use crate::embed::fetch::{self, Source};
use crate::embed::{Embedder, TOKENS_REVISION, in_background, lower_priority};
use crate::error::Result;
use crate::index::Reader;
use crate::locks;
use crate::retrieval::fusion::Mode;
use crate::skills::{
    SkillCache, SkillLane, SkillVectors, built_as, embed_contents, skill_passages,
    skill_passages_digest,
};

/// The model this worker embeds with (`embed::fetch::Source::pinned`).
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// Contents embedded, then stored, per commit: about a second on a two-core machine.
pub const BATCH: usize = 32;
/// How often the background pass looks for a new revision when nothing woke it.
const POLL: Duration = Duration::from_millis(500);
/// How long after a failed embedding pass (a full disk, say) the next one starts, doubled after
/// each failure in a row up to [`RETRY_LONGEST`]; a change to the tree starts one at once.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_LONGEST: Duration = Duration::from_secs(300);

/// Where the embedding model stands.
#[derive(Clone)]
pub enum ModelState {
    /// None configured and no download: lexical for good.
    Absent,
    /// Being fetched into the cache folder.
    Downloading,
    /// Read from its folder.
    Loading,
    /// Loaded; skill vectors are stored and read under its [`vectors_model`] name.
    Ready(Arc<Embedder>),
    /// The fetch or the load failed: lexical, and why.
    Failed(String),
}

impl ModelState {
    fn name(&self) -> &'static str {
        match self {
            ModelState::Absent => "absent",
            ModelState::Downloading => "downloading",
            ModelState::Loading => "loading",
            ModelState::Ready(_) => "ready",
            ModelState::Failed(_) => "failed",
        }
    }
}

/// See the module doc.
pub struct Dense {
    state: RwLock<ModelState>,
    /// The [`vectors_model`] name of the ready model.
    model: RwLock<Option<Arc<str>>>,
    vectors: SkillVectors,
    /// Whether the index's vectors were read into memory (once, when the model is ready).
    loaded: AtomicBool,
    /// Set when a pass left nothing pending: from then on skill search is hybrid.
    caught_up: AtomicBool,
    /// Contents this process embedded.
    embedded: AtomicU64,
    wake: Arc<Wake>,
    /// How many of the next vector stores fail as a full disk would (tests of the retry).
    #[cfg(any(test, feature = "testing"))]
    failing_stores: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Wake {
    woken: Mutex<bool>,
    signal: Condvar,
}

impl Wake {
    fn notify(&self) {
        *locks::lock(&self.woken) = true;
        self.signal.notify_all();
    }

    /// Waits for a notice or `POLL`; returns whether it was noticed.
    fn wait(&self) -> bool {
        let woken = locks::lock(&self.woken);
        let (mut woken, _) = self
            .signal
            .wait_timeout_while(woken, POLL, |woken| !*woken)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut *woken)
    }
}

/// When the background pass tries again after failing: [`RETRY_FIRST`] after a failure, twice
/// as long after each further one in a row, never longer than [`RETRY_LONGEST`].
#[derive(Default)]
struct Retry {
    /// Failures in a row.
    failures: u32,
    at: Option<Instant>,
}

impl Retry {
    /// Records a failure; returns how long until the next try.
    fn failed(&mut self) -> Duration {
        let wait = RETRY_FIRST
            .saturating_mul(1 << self.failures.min(16))
            .min(RETRY_LONGEST);
        self.failures += 1;
        self.at = Some(Instant::now() + wait);
        wait
    }

    /// Whether a failed pass is waiting and its time has come.
    fn due(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }
}

impl Default for Dense {
    fn default() -> Self {
        Dense {
            state: RwLock::new(ModelState::Absent),
            model: RwLock::new(None),
            vectors: SkillVectors::default(),
            loaded: AtomicBool::new(false),
            caught_up: AtomicBool::new(false),
            embedded: AtomicU64::new(0),
            wake: Arc::default(),
            #[cfg(any(test, feature = "testing"))]
            failing_stores: Default::default(),
        }
    }
}

impl Dense {
    fn ready(&self) -> Option<Arc<Embedder>> {
        match &*locks::read(&self.state) {
            ModelState::Ready(embedder) => Some(embedder.clone()),
            _ => None,
        }
    }

    /// The ready model and its [`vectors_model`] name.
    fn ready_model(&self) -> Option<(Arc<Embedder>, Arc<str>)> {
        let embedder = self.ready()?;
        let model = locks::read(&self.model).clone()?;
        Some((embedder, model))
    }

    /// A test's injected failure of the next vector store, if one is left.
    fn injected_store_failure(&self) -> Result<()> {
        #[cfg(any(test, feature = "testing"))]
        {
            let take = |n: usize| n.checked_sub(1);
            if self
                .failing_stores
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, take)
                .is_ok()
            {
                let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
                let at = std::path::Path::new("the index (an injected failure)");
                return Err(crate::error::io_error("store skill embeddings in", at)(full).into());
            }
        }
        Ok(())
    }
}

/// The layout of a stored value (`index::ContentVectors`: 2, the tag of the row the passages
/// were made from, then the passages).
const VECTORS_LAYOUT: u32 = 2;

/// The name skill vectors are stored under (`meta.vectors_model`): the model's name, its
/// files' fingerprint and the tokens it reads, a digest of the text a skill is embedded
/// as (`skills::skill_passages` of a fixed skill), and the layout of a stored value. Vectors
/// stored under another name were made by another model, from other texts or kept otherwise:
/// they are never compared with this one's, and are embedded again.
pub fn vectors_model(embedder: &Embedder) -> Arc<str> {
    format!(
        "{MODEL_NAME} {} text:{} layout:{VECTORS_LAYOUT}",
        embedder.fingerprint(),
        skill_passages_digest()
    )
    .into()
}

impl Directory {
    /// Sets where the embedding model stands. `Ready` first reads the vectors the index keeps
    /// of that model into memory (once; another model's are embedded again), then says so and
    /// starts the background pass. In that order: a pass that saw the model ready before its
    /// vectors were read would find every content pending and embed the whole tree again (at
    /// 100,000 skills the read takes a third of a second, and the pass an hour).
    pub fn set_model_state(&self, state: ModelState) {
        let model = match &state {
            ModelState::Ready(embedder) => Some(vectors_model(embedder)),
            _ => None,
        };
        if let Some(model) = &model {
            // The model's loader is the one caller: no other thread reads the vectors twice.
            let switched = locks::read(&self.dense.model)
                .as_ref()
                .is_some_and(|before| before != model);
            if switched || !self.dense.loaded.load(Ordering::SeqCst) {
                // Another model's vectors are never compared with this one's: no pass embeds
                // with the old one meanwhile, and search is lexical again until the tree is
                // embedded with the new one.
                *locks::write(&self.dense.state) = ModelState::Loading;
                self.dense.caught_up.store(false, Ordering::SeqCst);
                let loaded = self
                    .index
                    .read()
                    .and_then(|reader| self.dense.vectors.load(&reader, model));
                if let Err(e) = loaded {
                    tracing::warn!("cannot read the stored skill embeddings: {e}");
                }
                // A tree this model embedded once before (in this process or another) is
                // searched hybrid at once, as the pass that embedded it left it.
                let caught_up = self
                    .index
                    .read()
                    .and_then(|reader| reader.vectors_caught_up(model));
                if caught_up.unwrap_or(false) {
                    self.dense.caught_up.store(true, Ordering::SeqCst);
                }
                self.dense.loaded.store(true, Ordering::SeqCst);
            }
            *locks::write(&self.dense.model) = Some(model.clone());
        }
        *locks::write(&self.dense.state) = state;
        if model.is_some() {
            self.dense.wake.notify();
        }
    }

    /// The model's folder when it is on this machine already: `search_model_path`, or the
    /// [fetched copy](Self::fetched_model_folder) when every file is there at its pinned size,
    /// whatever `search_model_download` says now (it stops the network, not the use of a copy
    /// fetched before). `None` otherwise: the offline commands then rank lexically, and only the
    /// worker fetches.
    pub fn local_model_folder(&self) -> Option<PathBuf> {
        if let Some(path) = &self.config().paths.search_model_path {
            return Some(path.clone());
        }
        let folder = self.fetched_model_folder();
        fetch::is_complete(&folder, &Source::pinned()).then_some(folder)
    }

    /// Where the worker lands the model it fetches (`search_model_download`): a folder of the
    /// cache beside the index, named for the pinned revision.
    pub fn fetched_model_folder(&self) -> PathBuf {
        fetch::model_folder(&self.config().paths.model_cache(), &Source::pinned())
    }

    /// For a process that runs no background pass (the offline commands): once the model is
    /// ready and its stored vectors read, turns skill search hybrid when every skill content
    /// of the latest revision has a vector, as a pass that finds nothing pending does. (It is
    /// hybrid already when the index records that the model embedded the tree once.)
    /// Returns how many contents have none (all of them before the model is ready).
    pub fn hybrid_when_embedded(&self) -> Result<u64> {
        let reader = self.index.read()?;
        let cache = self.skill_cache(&reader)?;
        if self.dense.ready().is_none() || !self.dense.loaded.load(Ordering::SeqCst) {
            return Ok(self.dense.vectors.contents(&cache));
        }
        let (_, pending) = self.dense.vectors.progress(&cache);
        if pending == 0 {
            self.dense.caught_up.store(true, Ordering::SeqCst);
        }
        Ok(pending)
    }

    /// Whether skill search ranks hybrid here (the model ready, and the tree embedded once).
    pub fn skill_search_is_hybrid(&self) -> bool {
        self.dense.ready().is_some() && self.dense.caught_up.load(Ordering::SeqCst)
    }

    /// Whether the index holds skill embeddings made by another model than the one loaded here
    /// (another copy of its files, say): a follower then has none it can use, however many the
    /// writer has made.
    pub fn embeddings_of_another_model(&self) -> Result<bool> {
        let stored = self.index.read()?.vectors_model()?;
        let own = locks::read(&self.dense.model).clone();
        Ok(matches!((stored, own), (Some(stored), Some(own)) if *stored != *own))
    }

    /// The loaded model, once it is ready (function search embeds with it too).
    pub fn embedder(&self) -> Option<Arc<Embedder>> {
        self.dense.ready()
    }

    /// The dense lane of skill search for `cache`'s revision, once the model is ready and
    /// the tree has been embedded once.
    pub(super) fn skill_lane<'a>(
        &'a self,
        cache: &'a SkillCache,
        embedder: Option<&'a Embedder>,
    ) -> Option<SkillLane<'a>> {
        let embedder = embedder?;
        if !self.dense.caught_up.load(Ordering::SeqCst) {
            return None;
        }
        // Once per process (a handful of texts): see `SkillVectors::embed_bundled`.
        self.dense.vectors.embed_bundled(embedder, cache);
        Some(SkillLane {
            embedder,
            vectors: &self.dense.vectors,
            cache,
        })
    }

    /// `index::status`'s `search`: `{mode, model, state, embedded, pending}`, and `error`
    /// when the model could not be fetched or loaded. `embedded` and `pending` count the
    /// distinct skill contents with and without a stored vector.
    pub fn search_status(&self) -> Result<Value> {
        let reader = self.index.read()?;
        let cache = self.skill_cache(&reader)?;
        let state = locks::read(&self.dense.state).clone();
        let (embedded, pending) = if self.dense.loaded.load(Ordering::SeqCst) {
            self.dense.vectors.progress(&cache)
        } else {
            let contents = self.dense.vectors.contents(&cache);
            let stored = reader.vector_count()?.min(contents);
            (stored, contents - stored)
        };
        let mode = if self.skill_search_is_hybrid() {
            Mode::Hybrid
        } else {
            Mode::Lexical
        };
        let mut status = json!({
            "mode": mode,
            "model": (!matches!(state, ModelState::Absent)).then_some(MODEL_NAME),
            "state": state.name(),
            "embedded": embedded,
            "pending": pending,
        });
        if let ModelState::Failed(reason) = &state {
            status["error"] = json!(reason);
        }
        Ok(status)
    }

    /// Drops the stored vectors whose text this build cuts into other tokens than the build
    /// that embedded them (an index whose `vectors_tokens` is older than
    /// `embed::TOKENS_REVISION`), so that the pass embeds those again, and only those: a
    /// change of the tokenizer that touches a few texts costs a few embeddings, not the tree.
    /// Reads each embedded content once, the first time a newer build runs on the index.
    fn retokenize_stored(&self, embedder: &Embedder) -> Result<()> {
        let reader = self.index.read()?;
        let revision = reader.vectors_tokens()?.unwrap_or(0);
        if revision >= TOKENS_REVISION {
            return Ok(());
        }
        let cache = self.skill_cache(&reader)?;
        let mut seen = HashSet::new();
        let mut stale = HashSet::new();
        for row in cache.rows().iter() {
            let Some(hash) = row.content else { continue };
            if !seen.insert(hash) || !reader.has_vector(&hash)? {
                continue;
            }
            let Some(text) = reader.content(&hash)? else {
                continue;
            };
            let passages = skill_passages(row, &text);
            if passages
                .iter()
                .any(|p| embedder.retokenized_since(revision, p))
            {
                stale.insert(hash);
            }
        }
        drop(reader);
        let hashes: Vec<_> = stale.iter().copied().collect();
        self.index.retokenized(&hashes)?;
        self.dense.vectors.forget(&stale);
        if !stale.is_empty() {
            tracing::info!(
                contents = stale.len(),
                "embedding again the skills whose text this version cuts into other tokens"
            );
        }
        Ok(())
    }

    /// Embeds every skill content of the latest revision that has no vector yet, a batch at a
    /// time, each batch stored in its own commit. Returns how many were stored. Nothing to do
    /// without a ready model, or on a read-only follower (its writer embeds).
    ///
    /// A worker waiting for the index ([`Directory::wanted_by_a_worker`]) ends a command's pass
    /// early, between batches.
    pub fn embed_pending(&self) -> Result<usize> {
        let Some((embedder, model)) = self.dense.ready_model() else {
            return Ok(0);
        };
        if !self.index.is_writer() {
            return Ok(0);
        }
        self.retokenize_stored(&embedder)?;
        let started = Instant::now();
        let mut stored = 0;
        // Contents tried in this pass: one whose text could not be read is not tried again.
        let mut tried = HashSet::new();
        loop {
            let reader = self.index.read()?;
            let cache = self.skill_cache(&reader)?;
            self.dense.vectors.forget_dropped(&reader, &cache)?;
            self.hold_stored(&reader, &model, &cache)?;
            drop(reader);
            let mut pending = self.dense.vectors.pending(&cache);
            pending.retain(|p| !tried.contains(&p.hash));
            if pending.is_empty() {
                // Recorded for the next start and for the commands beside this process, which
                // then rank as it does.
                if let Err(e) = self.index.note_vectors_caught_up(&model) {
                    tracing::warn!("cannot record that the skill embeddings are complete: {e}");
                }
                self.drop_unused_vectors(&cache)?;
                self.dense.vectors.compact(&cache);
                // Here rather than on the first search, which would wait for it.
                in_background(|| self.dense.vectors.embed_bundled(&embedder, &cache));
                break;
            }
            if pending.len() > BATCH {
                // Once caught up, search stays hybrid: skills still pending rank by words.
                match self.dense.caught_up.load(Ordering::SeqCst) {
                    true => tracing::info!(
                        pending = pending.len(),
                        "embedding changed skills in the background; they rank by their words meanwhile"
                    ),
                    false => tracing::info!(
                        pending = pending.len(),
                        "embedding skills in the background; search ranks lexically meanwhile"
                    ),
                }
            }
            for chunk in pending.chunks(BATCH) {
                // A command's pass (a `reindex`) lets a waiting worker have the index: the
                // worker embeds the rest in the background, serving meanwhile.
                if self.index.wanted_by_a_worker().is_some() {
                    return Ok(stored);
                }
                tried.extend(chunk.iter().map(|p| p.hash));
                // A snapshot per batch: no read transaction stays open across a long pass.
                let reader = self.index.read()?;
                let mut contents = Vec::with_capacity(chunk.len());
                for p in chunk {
                    if let Some(text) = reader.content(&p.hash)? {
                        let row = cache.at(p.position);
                        contents.push((p.hash, built_as(row), skill_passages(row, &text)));
                    }
                }
                drop(reader);
                // Over every background thread.
                let batch = embed_contents(&contents, |texts| {
                    in_background(|| embedder.embed_batch(texts))
                });
                self.dense.injected_store_failure()?;
                let kept = self.index.store_vectors(&model, &batch)?;
                let kept: HashSet<_> = kept.into_iter().collect();
                let batch: Vec<_> = batch
                    .into_iter()
                    .filter(|c| kept.contains(&c.hash))
                    .collect();
                self.dense.vectors.insert(&batch);
                stored += batch.len();
                self.dense
                    .embedded
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                // Contents that left the index stay pending in this list: its next pass,
                // from a newer snapshot, no longer names them.
                if batch.len() < chunk.len() {
                    break;
                }
            }
        }
        if !self.dense.caught_up.swap(true, Ordering::SeqCst) || stored > BATCH {
            let seconds = started.elapsed().as_secs_f64();
            tracing::info!(
                embedded = stored,
                seconds = (seconds * 10.0).round() / 10.0,
                per_second = (stored as f64 / seconds.max(1e-3)).round(),
                "skill embeddings up to date; skill search is hybrid"
            );
        }
        Ok(stored)
    }

    /// Takes into memory the vectors the index keeps of contents pending here: a content that
    /// left and came back (a `git switch` away and back) had its vectors retired and taken back
    /// by the index (`reconcile::retired`), while memory let them go.
    fn hold_stored(&self, reader: &Reader, model: &str, cache: &SkillCache) -> Result<()> {
        let (held, _) = self.dense.vectors.progress(cache);
        if reader.vector_count()? <= held {
            return Ok(());
        }
        let pending = self.dense.vectors.pending(cache);
        let stored = reader.vectors_of(model, pending.iter().map(|p| &p.hash))?;
        self.dense.vectors.insert(&stored);
        Ok(())
    }

    /// Drops from the index (and from memory) the vectors of contents a file still holds but no
    /// row embeds: resources an earlier build embedded before skill search left them out. A
    /// reconcile drops only the vectors of contents no file holds. Looks only when the index
    /// keeps more vectors than the revision's contents have.
    fn drop_unused_vectors(&self, cache: &SkillCache) -> Result<()> {
        let (embedded, _) = self.dense.vectors.progress(cache);
        if self.index.read()?.vector_count()? <= embedded {
            return Ok(());
        }
        let unused = self.dense.vectors.unused(cache);
        if unused.is_empty() {
            return Ok(());
        }
        let hashes: Vec<_> = unused.iter().copied().collect();
        self.index.drop_vectors(&hashes)?;
        self.dense.vectors.forget(&unused);
        tracing::info!(
            contents = hashes.len(),
            "dropped the stored embeddings of skill resources, which search does not rank"
        );
        Ok(())
    }

    /// Stores stand-in passage vectors for each skill content lacking them (`passages(i)` for
    /// the i-th), as [`Directory::embed_pending`] stores real ones, under `embedder`'s name:
    /// the benchmarks time the scan, the fusion and the worker's memory at sizes whose
    /// embedding would take an hour.
    #[cfg(any(test, feature = "testing"))]
    pub fn store_stand_in_vectors(
        &self,
        embedder: &Embedder,
        passages: impl Fn(usize) -> Vec<crate::embed::Quantized>,
    ) -> Result<usize> {
        let model = vectors_model(embedder);
        let cache = self.skill_cache(&self.index.read()?)?;
        let pending = self.dense.vectors.pending(&cache);
        let mut stored = 0;
        for chunk in pending.chunks(4096) {
            let batch: Vec<_> = chunk
                .iter()
                .enumerate()
                .map(|(i, p)| crate::index::ContentVectors {
                    hash: p.hash,
                    tag: built_as(cache.at(p.position)),
                    passages: passages(stored + i),
                })
                .collect();
            self.index.store_vectors(&model, &batch)?;
            self.dense.vectors.insert(&batch);
            stored += batch.len();
        }
        Ok(stored)
    }

    /// Makes the next `n` stores of skill embeddings fail as on a full disk (tests of the
    /// background pass's retry).
    #[cfg(any(test, feature = "testing"))]
    pub fn fail_next_vector_stores(&self, n: usize) {
        self.dense.failing_stores.store(n, Ordering::SeqCst);
    }

    /// The worker (its pid) waiting for this process, a command holding the index, to let go.
    pub fn wanted_by_a_worker(&self) -> Option<u32> {
        self.index.wanted_by_a_worker().map(|holder| holder.pid)
    }

    /// How many skill contents this process has embedded.
    pub fn embedded_count(&self) -> u64 {
        self.dense.embedded.load(Ordering::Relaxed)
    }

    /// Builds the skill search index of the latest revision, so that no search pays for it
    /// (the first build reads every skill text: seconds at 50,000 skills).
    pub fn warm_skill_search(&self) -> Result<()> {
        let reader = self.index.read()?;
        let cache = self.skill_cache(&reader)?;
        cache.search_index(|| locks::lock(&self.skill_terms).index(&reader, &cache))?;
        // And which rows are resources, which a search reads too.
        cache.resources();
        Ok(())
    }

    /// Starts the background work of each new revision, until the directory is dropped: its
    /// skill search index built once a skill search was asked for (a worker nobody searches
    /// never pays its memory), then the contents lacking a vector embedded, once the model is
    /// ready.
    pub fn start_background(self: &Arc<Self>) {
        let directory: Weak<Directory> = Arc::downgrade(self);
        let wake = self.dense.wake.clone();
        let spawned = std::thread::Builder::new()
            .name("iii-directory-background".into())
            .spawn(move || {
                lower_priority();
                let mut done_at = None;
                let mut retry = Retry::default();
                loop {
                    let woken = wake.wait();
                    let Some(directory) = directory.upgrade() else {
                        return;
                    };
                    let latest = directory.index.latest();
                    if !woken && latest == done_at && !retry.due() {
                        continue;
                    }
                    if latest != done_at && directory.skill_search_wanted() {
                        let started = Instant::now();
                        // On the low-priority threads: boot's registration and the first
                        // calls go first.
                        let warmed = in_background(|| directory.warm_skill_search());
                        match warmed {
                            Ok(()) => tracing::debug!(
                                ms = started.elapsed().as_millis() as u64,
                                "skill search index built"
                            ),
                            Err(e) => tracing::warn!("cannot build the skill search index: {e}"),
                        }
                    }
                    if directory.dense.ready().is_none() {
                        // A failed pass is tried again once a model is ready (that wakes it).
                        retry = Retry::default();
                        done_at = latest;
                        continue;
                    }
                    match directory.embed_pending() {
                        Ok(_) => retry = Retry::default(),
                        Err(e) => {
                            let wait = retry.failed();
                            tracing::warn!(
                                retry_in_s = wait.as_secs(),
                                "embedding skills failed; trying again then, or at the next \
                                 change: {e}"
                            );
                        }
                    }
                    done_at = latest;
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the background thread of skill search: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_pass_is_tried_again_later_and_later_up_to_the_longest_wait() {
        let mut retry = Retry::default();
        assert!(!retry.due(), "nothing failed, nothing to try again");
        let waits: Vec<u64> = (0..12).map(|_| retry.failed().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert!(!retry.due(), "the next try is minutes away");
        for _ in 0..100 {
            assert_eq!(retry.failed(), RETRY_LONGEST);
        }
        retry.at = Some(Instant::now());
        assert!(retry.due());
    }
}
