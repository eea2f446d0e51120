//! Sentence embeddings in process: all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions), its
//! token states mean-pooled and scaled to unit length, as sentence-transformers computes them.
//! Pure Rust on the CPU: the tokenizer (`tokenize`), the safetensors reader (`weights`) and
//! the encoder (`bert`) are this module's own; the matrix products are the `gemm` crate's.
//!
//! **Architecture Invariant:** pure apart from reading the model's files: it knows no index,
//! no family and no configuration; callers hand it a folder and texts.

mod bert;
pub mod fetch;
mod passages;
mod threads;
mod tokenize;
mod vectors;
mod weights;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

pub use iii_embed_kernel::encoder::mean_pool;
pub use passages::{PREFILTER_FROM, PassageTable, candidates};
pub use threads::{in_background, lower_priority};
pub use vectors::{Hit, QUANTIZED_BYTES, Quantized, VectorTable, join_bytes, split_bytes};

/// Length of every embedding.
pub const DIMENSIONS: usize = 384;

/// Most tokens of a text that are embedded, `[CLS]` and `[SEP]` included; the rest of a longer
/// text is dropped. sentence-transformers cuts this model at 256; 128 embeds a cold tree more
/// than twice as fast, and a skill's name, title, description and the start of its body fit
/// (see BENCHMARKS.md, "Sentence embeddings"). A query is far shorter either way.
pub const MAX_TOKENS: usize = 128;

/// How this build cuts a text into tokens, recorded with the stored vectors
/// (`meta.vectors_tokens`). 1: added tokens spelled out in a text (`[MASK]`, …) are matched
/// first, as the reference does; before, they were read as plain words. A stored vector of an
/// older revision is embedded again only if its text reads differently now.
pub const TOKENS_REVISION: u64 = 1;

/// The files of a model folder.
pub const MODEL_FILE: &str = "model.safetensors";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const CONFIG_FILE: &str = "config.json";

/// The longest `config.json` and `tokenizer.json` read: all-MiniLM-L6-v2's are 612 bytes and
/// 466 KB, and a WordPiece vocabulary of the most words `bert::Config` accepts (a million) some
/// 30 MB. A longer file is refused rather than read whole: its length bounded nothing, a sparse
/// file claims gigabytes for nothing, and the tokenizer's was held twice (its bytes and their
/// text), so the process aborted or was killed instead of failing the load.
const MOST_CONFIG_BYTES: u64 = 1 << 20;
const MOST_TOKENIZER_BYTES: u64 = 64 << 20;

/// Why a model folder could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("cannot read model file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the model's tokenizer.json is not valid: {0}")]
    TokenizerJson(#[source] serde_json::Error),
    #[error("the model's config.json is not valid: {0}")]
    ConfigJson(#[source] serde_json::Error),
    #[error("the model's safetensors header is not valid: {0}")]
    WeightsHeader(#[source] serde_json::Error),
    #[error("the model's safetensors file is damaged: {0}")]
    Weights(&'static str),
    #[error("the model's safetensors file has no tensor {0}")]
    MissingTensor(String),
    #[error("the model's tensor {name} is {dtype} {found:?}, expected F32 {expected:?}")]
    TensorShape {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
        dtype: String,
    },
    #[error("the model's tensor {0} holds a value that is not a finite number")]
    NotFinite(String),
    #[error("unsupported model: {0}")]
    Unsupported(&'static str),
}

/// A loaded model: tokenizer and encoder. Shared by reference across threads; every call is
/// independent.
pub struct Embedder {
    tokenizer: tokenize::Tokenizer,
    model: bert::Bert,
    max_tokens: usize,
    /// BLAKE3 of the three files, hex: which model this is, whatever its folder is called.
    files: String,
    /// The threads a single query is embedded on (one per core, at most 4, at normal
    /// priority; `None` on one core or when they could not be started: the calling thread
    /// alone).
    query_threads: Option<rayon::ThreadPool>,
    /// The queries waiting for the query threads or running on them, bounded (see
    /// [`Embedder::on_query_threads_unless_busy`]).
    queries: threads::QueryGate,
}

impl Embedder {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` from `dir`; refuses a
    /// model whose width is not [`DIMENSIONS`] or whose tokenizer or architecture this module
    /// does not implement.
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        let read = |name: &str, most: u64| {
            let path = dir.join(name);
            let mut bytes = Vec::new();
            open_regular(&path)
                .and_then(|file| {
                    // A byte past the bound tells a longer file, whatever its length says.
                    let mut head = std::io::Read::take(file, most + 1);
                    std::io::Read::read_to_end(&mut head, &mut bytes)?;
                    if bytes.len() as u64 > most {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::FileTooLarge,
                            format!("larger than any model's ({most} bytes at most)"),
                        ));
                    }
                    Ok(())
                })
                .map_err(|source| EmbedError::Read { path, source })?;
            Ok(bytes)
        };
        let config_bytes = read(CONFIG_FILE, MOST_CONFIG_BYTES)?;
        let config: bert::Config =
            serde_json::from_slice(&config_bytes).map_err(EmbedError::ConfigJson)?;
        if config.hidden_size != DIMENSIONS {
            return Err(EmbedError::Unsupported("the model's width is not 384"));
        }
        let tokenizer_bytes = read(TOKENIZER_FILE, MOST_TOKENIZER_BYTES)?;
        let tokenizer_text = String::from_utf8_lossy(&tokenizer_bytes).into_owned();
        let tokenizer = tokenize::Tokenizer::from_json(&tokenizer_text)?;
        let model_path = dir.join(MODEL_FILE);
        let model = bert::Bert::load(&config, &weights::Weights::open(&model_path)?)?;
        let files = fingerprint(&config_bytes, &tokenizer_bytes, &model_path)?;
        if tokenizer.max_id() as usize >= model.vocab() {
            return Err(EmbedError::Unsupported(
                "tokenizer.json has ids beyond the model's vocabulary",
            ));
        }
        let query_threads = threads::query_threads();
        Ok(Embedder {
            max_tokens: MAX_TOKENS.min(model.max_positions()),
            tokenizer,
            model,
            files,
            queries: threads::QueryGate::for_threads(query_threads.as_ref()),
            query_threads,
        })
    }

    /// This embedder with no bound on the queries at once (see [`threads::QueryGate::open`]).
    #[cfg(any(test, feature = "testing"))]
    pub fn without_query_bound(mut self) -> Embedder {
        self.queries = threads::QueryGate::open();
        self
    }

    /// What identifies the vectors this embedder makes: its files' BLAKE3 and the tokens it
    /// reads of a text. Two embedders with the same fingerprint embed every text alike;
    /// vectors stored under another fingerprint are not comparable with its own.
    pub fn fingerprint(&self) -> String {
        format!("blake3:{} max_tokens:{}", self.files, self.max_tokens)
    }

    /// Uses at most `max_tokens` tokens of each text from now on (clamped to 2 and to the
    /// model's positions): the benchmarks compare lengths with it.
    pub fn with_max_tokens(mut self, max_tokens: usize) -> Embedder {
        self.max_tokens = max_tokens.clamp(2, self.model.max_positions());
        self
    }

    /// Whether this embedder cuts `text` into other tokens than tokens revision `revision`
    /// did (see [`TOKENS_REVISION`]).
    pub fn retokenized_since(&self, revision: u64, text: &str) -> bool {
        revision < 1 && self.tokenizer.spells_added_token(text)
    }

    /// The token ids `text` is embedded from, `[CLS]` and `[SEP]` included.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, self.max_tokens)
    }

    /// One text's embedding, unit length, its layers' products split over this embedder's
    /// query threads (a search waits for it: more threads shorten the wait).
    pub fn embed_query(&self, text: &str) -> Vec<f32> {
        let ids = self.tokenize(text);
        self.on_query_threads(|| self.model.embed(&ids))
    }

    /// Runs `f` on this embedder's query threads (the caller waits): a search's embedding and
    /// its scan of the vectors then share the same threads, with no hop between pools.
    pub fn on_query_threads<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.query_threads {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    /// [`Embedder::on_query_threads`], unless the query threads are already busy with as many
    /// queries as [`threads::QueryGate`] lets wait: `None` then, and the search answers from its
    /// lexical lane at once instead of queueing behind a burst (a hundred heavy searches at
    /// once ran past the call deadline, every one of them, and kept the threads busy after).
    pub fn on_query_threads_unless_busy<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Option<R> {
        let _entered = self.queries.enter()?;
        Some(self.on_query_threads(f))
    }

    /// One text's embedding quantized as the vectors it is compared with are
    /// ([`VectorTable::top_k`]).
    pub fn embed_query_quantized(&self, text: &str) -> Quantized {
        Quantized::from_vector(&self.embed_query(text))
    }

    /// Many texts' embeddings, in order, spread over the rayon pool the caller runs on (the
    /// background embedder's low-priority one, or the global pool); each text is one unpadded
    /// sequence, so a short one costs what it is.
    pub fn embed_batch(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        texts
            .par_iter()
            .with_max_len(1)
            .map(|text| self.model.embed(&self.tokenize(text)))
            .collect()
    }
}

/// Opens one of the model's files for reading, refusing anything but a regular file (a link to
/// one is followed) without blocking on it: a FIFO named like a model file would otherwise
/// block the open for good, and with it the worker's shutdown and the commands that load the
/// model.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// BLAKE3 over the model's three files (each preceded by its length, so no two sets of files
/// hash alike by shifting bytes between them), hex; the weights are streamed from disk.
fn fingerprint(config: &[u8], tokenizer: &[u8], model: &Path) -> Result<String, EmbedError> {
    let mut hasher = blake3::Hasher::new();
    for bytes in [config, tokenizer] {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    let read_error = |source| EmbedError::Read {
        path: model.to_path_buf(),
        source,
    };
    let file = open_regular(model).map_err(read_error)?;
    let len = file.metadata().map_err(read_error)?.len();
    hasher.update(&len.to_le_bytes());
    hasher.update_reader(file).map_err(read_error)?;
    Ok(hasher.finalize().to_hex().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `config.json` or `tokenizer.json` far longer than any model's is refused by its
    /// length, not read whole: a sparse file of a gigabyte costs no disk, and reading one took a
    /// buffer of its length (and, for the tokenizer, a copy of it): the process aborted once
    /// the allocator refused the copy, or was killed for the memory it touched.
    #[test]
    fn a_json_file_longer_than_any_models_is_refused_without_reading_it_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = serde_json::json!({"hidden_size": 384, "num_attention_heads": 12,
            "num_hidden_layers": 6, "intermediate_size": 1536, "max_position_embeddings": 512,
            "vocab_size": 30522, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
            "hidden_act": "gelu"})
        .to_string();
        for name in [TOKENIZER_FILE, CONFIG_FILE] {
            std::fs::write(dir.path().join(CONFIG_FILE), &config).expect("config");
            let file = std::fs::File::create(dir.path().join(name)).expect("create");
            file.set_len(1 << 30).expect("a sparse file");
            let error = Embedder::load(dir.path()).err().map(|e| e.to_string());
            assert!(
                error.as_deref().is_some_and(|e| e.contains("larger than")),
                "{name}: {error:?}"
            );
        }
    }

    /// A FIFO named like a model file is refused at once: opened without blocking (nothing
    /// writes to it, so a plain open would wait for good, and the worker's shutdown with it).
    #[test]
    fn a_fifo_named_like_a_model_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [CONFIG_FILE, TOKENIZER_FILE, MODEL_FILE] {
            let path = dir.path().join(name);
            let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
            // SAFETY: mkfifo reads a NUL-terminated path and touches nothing else.
            assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
        }
        let (sent, answer) = std::sync::mpsc::channel();
        let folder = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = sent.send(Embedder::load(&folder).err().map(|e| e.to_string()));
        });
        let refused = answer
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the load returned instead of blocking");
        assert!(
            refused.is_some_and(|e| e.contains("not a regular file")),
            "refused, naming why"
        );
        for name in [TOKENIZER_FILE, MODEL_FILE] {
            let err = open_regular(&dir.path().join(name)).expect_err("a FIFO");
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        }
    }
}
