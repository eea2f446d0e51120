//! The embedding model in the offline commands, when it is on this machine already
//! (`search_model_path`, or the copy the worker fetched): `search --skills` ranks as the worker
//! does, and `reindex` stores the skill embeddings the worker would otherwise compute in the
//! background. Nothing here fetches the model; without it both stay lexical, as before.

use std::sync::Arc;
use std::time::{Duration, Instant};

use iii_directory::embed::Embedder;
use iii_directory::embed::fetch::{self, Source};
use iii_directory::{Directory, MODEL_NAME, ModelState};

use super::error::CliError;

/// The most skill contents `search --skills` embeds before it answers (about a second of both
/// cores, the files just edited while no worker ran); with more pending it says so and names
/// the command that embeds them (answering lexically if the tree was never embedded).
const EMBED_BEFORE_SEARCH: u64 = 32;

/// How often `reindex` redraws its embedding progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// What became of the model on this machine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Model {
    Loaded,
    /// None here: no `search_model_path`, and the worker fetched none.
    Absent,
    /// Here, but it could not be loaded (said on stderr).
    Unloadable,
}

/// Loads the model on this machine into `directory`, which reads the vectors its index keeps of
/// it. Without it, or when it cannot be loaded (said on stderr), the command goes on lexically.
fn load(directory: &Directory) -> Model {
    let Some(folder) = directory.local_model_folder() else {
        return Model::Absent;
    };
    match Embedder::load(&folder) {
        Ok(embedder) => {
            directory.set_model_state(ModelState::Ready(Arc::new(embedder)));
            Model::Loaded
        }
        Err(e) => {
            eprintln!(
                "warning: cannot load the search model from {}: {e}; ranking lexically{}",
                folder.display(),
                damage_note(directory)
            );
            Model::Unloadable
        }
    }
}

/// What a fetched copy that did not load has lost, for the warning: this command never fetches
/// nor removes it, a worker does (empty for `search_model_path`, or a copy that hashes as pinned).
fn damage_note(directory: &Directory) -> String {
    if directory.config().paths.search_model_path.is_some() {
        return String::new();
    }
    match fetch::damaged_files(&directory.fetched_model_folder(), &Source::pinned()) {
        Ok(damaged) if !damaged.is_empty() => format!(
            " ({} no longer as fetched: a worker started with search_model_download on \
             fetches the copy again)",
            damaged.join(", ")
        ),
        _ => String::new(),
    }
}

/// Readies `directory` for `search --skills`: hybrid when the model is here and every skill
/// content has its embedding (a few missing ones are embedded first, by the index's writer),
/// or the index records that this model embedded the tree once, as the worker ranks.
/// Returns a note for stderr when contents lack an embedding although the model is here.
pub fn ready_for_search(directory: &Directory) -> Result<Option<String>, CliError> {
    if load(directory) != Model::Loaded {
        return Ok(None);
    }
    let mut pending = directory.hybrid_when_embedded()?;
    if pending > 0 && pending <= EMBED_BEFORE_SEARCH && directory.is_writer() {
        directory.embed_pending()?;
        pending = directory.hybrid_when_embedded()?;
    }
    if pending == 0 {
        return Ok(None);
    }
    if directory.skill_search_is_hybrid() {
        // The tree was embedded once: as the worker does, the contents changed since rank by
        // their words until embedded.
        return Ok(Some(format!(
            "{pending} skill contents changed since they were embedded rank by their words \
             until {}",
            if directory.is_writer() {
                "`iii-directory reindex` embeds them (a running worker does so in the background)"
            } else {
                "the process holding the index (the worker, or a reindex) embeds them"
            }
        )));
    }
    Ok(Some(if directory.is_writer() {
        format!(
            "ranked lexically: {pending} skill contents have no embedding yet; \
             `iii-directory reindex` computes them (a running worker does so in the background)"
        )
    } else if directory.embeddings_of_another_model()? {
        "ranked lexically: the running worker's skill embeddings were made by another copy of \
         the search model than this command loaded (their files differ); point \
         search_model_path at the worker's model folder"
            .to_string()
    } else {
        format!(
            "ranked lexically: the process holding the index (the worker, or a reindex) has not embedded {pending} skill contents yet"
        )
    }))
}

/// What `reindex` did about skill embeddings (its JSON summary's `embeddings`).
#[derive(serde::Serialize)]
pub struct Embeddings {
    /// The model's name; `null` when none is on this machine (`pending` then counts every
    /// distinct skill content).
    pub model: Option<&'static str>,
    /// The model is on this machine but could not be loaded (the warning says why).
    #[serde(skip)]
    pub unloadable: bool,
    /// Skill contents embedded by this run.
    pub embedded: u64,
    /// Skill contents still without an embedding (a text that could not be read, or the rest
    /// of a pass a waiting worker ended).
    pub pending: u64,
    pub ms: u64,
    /// The pid of the worker that was waiting for the index, when the pass stopped early for
    /// it: the worker embeds the rest in the background, when it has the model.
    pub yielded_to_worker: Option<u32>,
}

/// Embeds every skill content of the index that lacks an embedding, calling `progress(done,
/// total)` as it goes (total: those lacking one at the start).
pub fn embed_all(
    directory: &Directory,
    progress: impl Fn(u64, u64),
) -> Result<Embeddings, CliError> {
    let model = load(directory);
    if model != Model::Loaded {
        return Ok(Embeddings {
            model: None,
            unloadable: model == Model::Unloadable,
            embedded: 0,
            pending: directory.hybrid_when_embedded()?,
            ms: 0,
            yielded_to_worker: None,
        });
    }
    let started = Instant::now();
    let total = directory.hybrid_when_embedded()?;
    let embedded = if total == 0 {
        // Nothing to embed, but the pass still tidies: it drops the vectors no row uses.
        directory.embed_pending()? as u64
    } else {
        std::thread::scope(|scope| {
            let pass = std::thread::Builder::new()
                .name("iii-directory-embed-pass".into())
                .spawn_scoped(scope, || directory.embed_pending())
                .map_err(iii_directory::Error::thread("the embedding pass"))?;
            while !pass.is_finished() {
                progress(directory.embedded_count(), total);
                std::thread::sleep(PROGRESS_EVERY);
            }
            pass.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })? as u64
    };
    let pending = directory.hybrid_when_embedded()?;
    Ok(Embeddings {
        model: Some(MODEL_NAME),
        unloadable: false,
        embedded,
        pending,
        ms: started.elapsed().as_millis() as u64,
        yielded_to_worker: directory.wanted_by_a_worker().filter(|_| pending > 0),
    })
}

impl Embeddings {
    /// The summary's line about embeddings.
    pub fn line(&self) -> String {
        if self.unloadable {
            return "skill embeddings: none computed, the search model could not be loaded (see \
                    the warning above); skill search ranks lexically"
                .to_string();
        }
        if self.model.is_none() {
            return "skill embeddings: no search model on this machine (set search_model_path, \
                    or let the worker fetch it); skill search ranks lexically"
                .to_string();
        }
        let mut line = if self.embedded == 0 && self.yielded_to_worker.is_some() {
            "skill embeddings: none computed".to_string()
        } else if self.embedded == 0 {
            "skill embeddings up to date".to_string()
        } else {
            let seconds = self.ms as f64 / 1000.0;
            format!(
                "embedded {} skill contents in {seconds:.1} s ({:.0}/s)",
                self.embedded,
                self.embedded as f64 / seconds.max(1e-3)
            )
        };
        match self.yielded_to_worker {
            Some(pid) if self.pending > 0 => line.push_str(&format!(
                "; stopped there for the worker (pid {pid}) waiting for the index; it embeds \
                 the other {} in the background if it has the search model (`search.state` in \
                 its directory::index::status says), else the next `iii-directory reindex` \
                 does",
                self.pending
            )),
            _ if self.pending > 0 => {
                line.push_str(&format!("; {} could not be embedded", self.pending))
            }
            _ => {}
        }
        line
    }
}
