//! Sentence embeddings in process: all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions), its
//! token states mean-pooled and scaled to unit length, as sentence-transformers computes them.
//! Pure Rust on the CPU: the tokenizer (`tokenize`), the safetensors reader (`weights`) and
//! the encoder (`bert`) are this module's own; the matrix products are the `gemm` crate's.
//!
//! **Architecture Invariant:** pure apart from reading the model's files: it knows no index,
//! no family and no configuration; callers hand it a folder and texts.

mod bert;
pub mod fetch;
mod tokenize;
mod vectors;
mod weights;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

pub use bert::mean_pool;
pub use vectors::{Hit, QUANTIZED_BYTES, Quantized, VectorTable};

/// Length of every embedding.
pub const DIMENSIONS: usize = 384;

/// Most tokens of a text that are embedded, `[CLS]` and `[SEP]` included; the rest of a longer
/// text is dropped. sentence-transformers cuts this model at 256; 128 embeds a cold tree more
/// than twice as fast, and a skill's name, title, description and the start of its body fit
/// (see BENCHMARKS.md, "Embedding"). A query is far shorter either way.
pub const MAX_TOKENS: usize = 128;

/// The files of a model folder.
pub const MODEL_FILE: &str = "model.safetensors";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const CONFIG_FILE: &str = "config.json";

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
    #[error("unsupported model: {0}")]
    Unsupported(&'static str),
}

/// A loaded model: tokenizer and encoder. Shared by reference across threads; every call is
/// independent.
pub struct Embedder {
    tokenizer: tokenize::Tokenizer,
    model: bert::Bert,
    max_tokens: usize,
}

impl Embedder {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` from `dir`; refuses a
    /// model whose width is not [`DIMENSIONS`] or whose tokenizer or architecture this module
    /// does not implement.
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| EmbedError::Read { path, source })
        };
        let config: bert::Config =
            serde_json::from_slice(&read(CONFIG_FILE)?).map_err(EmbedError::ConfigJson)?;
        let tokenizer_text = String::from_utf8_lossy(&read(TOKENIZER_FILE)?).into_owned();
        let tokenizer = tokenize::Tokenizer::from_json(&tokenizer_text)?;
        let model = bert::Bert::load(&config, &weights::Weights::parse(read(MODEL_FILE)?)?)?;
        if model.hidden() != DIMENSIONS {
            return Err(EmbedError::Unsupported("the model's width is not 384"));
        }
        if tokenizer.max_id() as usize >= model.vocab() {
            return Err(EmbedError::Unsupported(
                "tokenizer.json has ids beyond the model's vocabulary",
            ));
        }
        Ok(Embedder {
            max_tokens: MAX_TOKENS.min(model.max_positions()),
            tokenizer,
            model,
        })
    }

    /// Uses at most `max_tokens` tokens of each text from now on (clamped to 2 and to the
    /// model's positions): the benchmarks compare lengths with it.
    pub fn with_max_tokens(mut self, max_tokens: usize) -> Embedder {
        self.max_tokens = max_tokens.clamp(2, self.model.max_positions());
        self
    }

    /// The token ids `text` is embedded from, `[CLS]` and `[SEP]` included.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, self.max_tokens)
    }

    /// One text's embedding, unit length, on the calling thread.
    pub fn embed_query(&self, text: &str) -> Vec<f32> {
        self.model.embed(&self.tokenize(text))
    }

    /// One text's embedding quantized as the vectors it is compared with are
    /// ([`VectorTable::top_k`]).
    pub fn embed_query_quantized(&self, text: &str) -> Quantized {
        Quantized::from_vector(&self.embed_query(text))
    }

    /// Many texts' embeddings, in order, spread over the rayon pool (every core); each text
    /// is one unpadded sequence, so a short one costs what it is.
    pub fn embed_batch(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        texts
            .par_iter()
            .with_max_len(1)
            .map(|text| self.embed_query(text))
            .collect()
    }
}
