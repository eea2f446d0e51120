//! The BERT sentence encoder's configuration (`config.json`) and its loading from the weights
//! file into the forward pass, `iii_embed_kernel::encoder` (a crate the test profile compiles
//! optimized). The query, key and value projections are fused into one layer of
//! `3 * hidden` outputs, so one pass over the input computes all three.

use serde::Deserialize;

use super::EmbedError;
use super::weights::Weights;
use iii_embed_kernel::encoder::{Embeddings, Encoder, Layer, Norm, Shape};
use iii_embed_kernel::{Kernel, Linear, f16_bits};

/// The fields of `config.json` the forward pass needs.
#[derive(Debug, Deserialize)]
pub struct Config {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub hidden_act: String,
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
}

fn absolute() -> String {
    "absolute".to_owned()
}

/// The largest sizes `config.json` may give, checked before anything is sized from them:
/// generous for any BERT sentence encoder (all-MiniLM-L6-v2: 384 wide, 6 layers, 1,536
/// intermediate, 512 positions, 30,522 words, 2 token types), small enough that a damaged or
/// hostile file is refused instead of asking for memory the process cannot have.
const MOST_HIDDEN: usize = 4_096;
const MOST_LAYERS: usize = 48;
const MOST_INTERMEDIATE: usize = 16_384;
const MOST_POSITIONS: usize = 8_192;
const MOST_WORDS: usize = 1_000_000;
const MOST_TOKEN_TYPES: usize = 16;

impl Config {
    /// Refuses sizes out of range, fewer than 2 positions (every text is at least `[CLS]`
    /// and `[SEP]`), and a LayerNorm epsilon that is not a small positive number (one of
    /// 1e300 makes every text's embedding the same).
    fn check(&self) -> Result<(), EmbedError> {
        let within = |value: usize, least: usize, most: usize| (least..=most).contains(&value);
        let sizes = within(self.hidden_size, 1, MOST_HIDDEN)
            && within(self.num_hidden_layers, 1, MOST_LAYERS)
            && within(self.intermediate_size, 1, MOST_INTERMEDIATE)
            && within(self.max_position_embeddings, 2, MOST_POSITIONS)
            && within(self.vocab_size, 1, MOST_WORDS)
            && within(self.type_vocab_size, 1, MOST_TOKEN_TYPES);
        if !sizes {
            return Err(EmbedError::Unsupported(
                "config.json gives a size out of range for a sentence encoder",
            ));
        }
        let heads = self.num_attention_heads;
        if heads == 0 || self.hidden_size % heads != 0 {
            return Err(EmbedError::Unsupported(
                "config.json's hidden size is not a multiple of its attention heads",
            ));
        }
        if !(self.layer_norm_eps > 0.0 && self.layer_norm_eps <= 1e-3) {
            return Err(EmbedError::Unsupported(
                "config.json's layer_norm_eps is not a small positive number",
            ));
        }
        Ok(())
    }
}

/// A loaded encoder: the forward pass (`iii_embed_kernel::encoder`) and the sizes the
/// tokenizer keeps to.
pub struct Bert {
    max_positions: usize,
    vocab: usize,
    encoder: Encoder,
}

impl Bert {
    /// Builds the encoder from its configuration and weights; refuses sizes out of range
    /// ([`Config::check`]), what this pass does not implement (another activation or position
    /// embedding), and a tensor holding a value that is not a finite number (it would make
    /// every embedding NaN, stored as a zero vector that matches nothing).
    pub fn load(config: &Config, weights: &Weights) -> Result<Bert, EmbedError> {
        config.check()?;
        if config.hidden_act != "gelu" || config.position_embedding_type != "absolute" {
            return Err(EmbedError::Unsupported(
                "config.json asks for an activation or position embedding other than gelu and absolute",
            ));
        }
        let (h, i, heads) = (
            config.hidden_size,
            config.intermediate_size,
            config.num_attention_heads,
        );
        let tensor = |name: &str, shape: &[usize]| -> Result<Vec<f32>, EmbedError> {
            let values = weights.tensor(name, shape)?;
            if values.iter().all(|v| v.is_finite()) {
                Ok(values)
            } else {
                Err(EmbedError::NotFinite(name.to_owned()))
            }
        };
        let norm = |prefix: &str| -> Result<Norm, EmbedError> {
            Ok(Norm {
                gain: tensor(&format!("{prefix}.LayerNorm.weight"), &[h])?,
                bias: tensor(&format!("{prefix}.LayerNorm.bias"), &[h])?,
            })
        };
        let kernel = Kernel::detect();
        let too_large = || EmbedError::Unsupported("a weight does not fit in f16");
        // A linear layer's weight (`[out, in]`, as stored), packed for the product. Sized by
        // what the file holds, not reserved from the configuration beforehand.
        let linear = |names: &[String], out: usize, inp: usize| -> Result<Linear, EmbedError> {
            let mut w = Vec::new();
            for name in names {
                w.extend(weights.tensor(&format!("{name}.weight"), &[out, inp])?);
            }
            Linear::new(&w, names.len() * out, inp, kernel).ok_or_else(too_large)
        };
        let bias = |name: &str, out: usize| tensor(&format!("{name}.bias"), &[out]);
        let mut layers = Vec::new();
        for l in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let attention = |part: &str| format!("{p}.attention.{part}");
            let (q, k, v) = (
                attention("self.query"),
                attention("self.key"),
                attention("self.value"),
            );
            let mut qkv_bias = bias(&q, h)?;
            qkv_bias.extend(bias(&k, h)?);
            qkv_bias.extend(bias(&v, h)?);
            layers.push(Layer {
                qkv: linear(&[q, k, v], h, h)?,
                qkv_bias,
                out: linear(&[attention("output.dense")], h, h)?,
                out_bias: bias(&attention("output.dense"), h)?,
                attention_norm: norm(&attention("output"))?,
                up: linear(&[format!("{p}.intermediate.dense")], i, h)?,
                up_bias: bias(&format!("{p}.intermediate.dense"), i)?,
                down: linear(&[format!("{p}.output.dense")], h, i)?,
                down_bias: bias(&format!("{p}.output.dense"), h)?,
                output_norm: norm(&format!("{p}.output"))?,
            });
        }
        // Rounded to f16 as it is read: the F32 table (47 MB) is never held whole.
        // Reserved whole once the header has vouched for the table (the first slice), so it
        // never grows by doubling.
        let mut words = Vec::new();
        weights.read_tensor(
            "embeddings.word_embeddings.weight",
            &[config.vocab_size, h],
            |values| {
                words.reserve_exact(config.vocab_size * h - words.len());
                words.extend(values.iter().copied().map(f16_bits));
            },
        )?;
        if words.iter().any(|&b| b & 0x7c00 == 0x7c00) {
            return Err(too_large());
        }
        let embeddings = Embeddings {
            words,
            positions: tensor(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type: tensor(
                "embeddings.token_type_embeddings.weight",
                &[config.type_vocab_size, h],
            )?,
            norm: norm("embeddings")?,
        };
        let shape = Shape {
            hidden: h,
            heads,
            intermediate: i,
            eps: config.layer_norm_eps as f32,
        };
        Ok(Bert {
            max_positions: config.max_position_embeddings,
            vocab: config.vocab_size,
            encoder: Encoder::new(shape, embeddings, layers),
        })
    }

    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The mean of the last layer's token states over all of `ids` (one unpadded sequence,
    /// so every token counts), scaled to unit length. `ids` holds at least one id, each below
    /// `vocab`, and at most `max_positions` of them (the tokenizer's truncation sees to it).
    pub fn embed(&self, ids: &[u32]) -> Vec<f32> {
        self.encoder.embed(ids)
    }
}
