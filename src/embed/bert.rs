//! The BERT encoder's forward pass for one sequence on the CPU: activations in f32, the
//! linear layers' weights in f16 with our own product (`iii_embed_kernel`), attention with
//! `gemm` (pure Rust, runtime-dispatched SIMD kernels). One sequence at a time: each layer
//! product of a sequence is split in two halves run side by side when a thread is free (see
//! [`product_then`]), and a batch runs its sequences side by side (see
//! `Embedder::embed_batch`), with no padding.
//!
//! The query, key and value projections are fused into one layer of `3 * hidden` outputs, so
//! one pass over the input computes all three.

use serde::Deserialize;

use super::EmbedError;
use super::weights::Weights;
use iii_embed_kernel::{Kernel, Linear, f16_bits, f16_to_f32};

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

struct Layer {
    qkv: Linear,
    qkv_bias: Vec<f32>,
    out: Linear,
    out_bias: Vec<f32>,
    attention_norm: Norm,
    up: Linear,
    up_bias: Vec<f32>,
    down: Linear,
    down_bias: Vec<f32>,
    output_norm: Norm,
}

struct Norm {
    gain: Vec<f32>,
    bias: Vec<f32>,
}

/// A loaded encoder.
pub struct Bert {
    hidden: usize,
    heads: usize,
    intermediate: usize,
    max_positions: usize,
    vocab: usize,
    eps: f32,
    /// The word embeddings as f16 bits (the largest table: 30,522 rows, of which a query reads
    /// a few), rounded as the linear layers' weights are.
    words: Vec<u16>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    gelu: GeluTable,
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
        Ok(Bert {
            hidden: h,
            heads,
            intermediate: i,
            max_positions: config.max_position_embeddings,
            vocab: config.vocab_size,
            eps: config.layer_norm_eps as f32,
            words,
            positions: tensor(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type: tensor(
                "embeddings.token_type_embeddings.weight",
                &[config.type_vocab_size, h],
            )?,
            embedding_norm: norm("embeddings")?,
            layers,
            gelu: GeluTable::new(),
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
        let (h, n, inter) = (self.hidden, ids.len(), self.intermediate);
        let head = h / self.heads;
        let scale = 1.0 / (head as f32).sqrt();
        let mut x = vec![0.0f32; n * h];
        for (t, &id) in ids.iter().enumerate() {
            let word = &self.words[id as usize * h..][..h];
            let position = &self.positions[t * h..][..h];
            for (((out, &w), p), s) in x[t * h..][..h]
                .iter_mut()
                .zip(word)
                .zip(position)
                .zip(&self.token_type[..h])
            {
                *out = f16_to_f32(w) + p + s;
            }
        }
        self.embedding_norm.apply(&mut x, h, self.eps);

        let mut qkv = vec![0.0f32; n * 3 * h];
        let mut scores = vec![0.0f32; n * n];
        let mut context = vec![0.0f32; n * h];
        let mut sum = vec![0.0f32; n * h];
        let mut up = vec![0.0f32; n * inter];
        for layer in &self.layers {
            fill_rows(&mut qkv, &layer.qkv_bias);
            product(&layer.qkv, h, &x, &mut qkv);
            for hd in 0..self.heads {
                let q = Mat::strided(&qkv[hd * head..], n, head, 3 * h, 1);
                // The keys read as their transpose: column `j` of the view is token `j`'s key.
                let k = Mat::strided(&qkv[h + hd * head..], head, n, 1, 3 * h);
                scores.fill(0.0);
                matmul(&mut scores, n, q, k, scale);
                for row in scores.chunks_exact_mut(n) {
                    softmax(row);
                }
                let v = Mat::strided(&qkv[2 * h + hd * head..], n, head, 3 * h, 1);
                let out = &mut context[hd * head..];
                zero_rows(out, n, head, h);
                matmul(out, h, Mat::rows(&scores, n, n), v, 1.0);
            }
            // Residual and bias go into the destination first; the product adds onto them.
            add_rows(&mut sum, &x, &layer.out_bias);
            product(&layer.out, h, &context, &mut sum);
            layer.attention_norm.apply(&mut sum, h, self.eps);
            std::mem::swap(&mut x, &mut sum);

            fill_rows(&mut up, &layer.up_bias);
            let gelu = |rows: &mut [f32]| rows.iter_mut().for_each(|v| *v = self.gelu.apply(*v));
            product_then(&layer.up, h, &x, &mut up, gelu);
            add_rows(&mut sum, &x, &layer.down_bias);
            product(&layer.down, inter, &up, &mut sum);
            layer.output_norm.apply(&mut sum, h, self.eps);
            std::mem::swap(&mut x, &mut sum);
        }
        mean_pool(&x, h)
    }
}

/// `dst += x · Wᵀ` for rows of `inp` inputs, on two threads (see [`product_then`]).
fn product(linear: &Linear, inp: usize, x: &[f32], dst: &mut [f32]) {
    product_then(linear, inp, x, dst, |_| {});
}

/// Tokens from which a product's two halves are halves of the tokens rather than of the
/// outputs.
const SPLIT_TOKENS_FROM: usize = 7;

/// `dst += x · Wᵀ` for rows of `inp` inputs, then `then` on every value of `dst`, in two
/// halves run side by side on the rayon pool the caller runs on (`rayon::join`: the other half
/// runs on this thread when no thread is free). A short query's cost is reading the weights:
/// below [`SPLIT_TOKENS_FROM`] tokens each half takes half of the outputs, so it reads half of
/// the weights, and `then` runs once both are done. From there each half takes half of the
/// tokens and applies `then` to its own rows (the intermediate layer's GELU: a tenth of a
/// query's time while one thread did it alone); within the whole model, halves of the tokens
/// measured faster than halves of the outputs for sequences that long.
fn product_then(
    linear: &Linear,
    inp: usize,
    x: &[f32],
    dst: &mut [f32],
    then: impl Fn(&mut [f32]) + Sync,
) {
    let n = x.len() / inp;
    if n >= SPLIT_TOKENS_FROM {
        let out = dst.len() / n;
        let half = n.div_ceil(2);
        let (x_a, x_b) = x.split_at(half * inp);
        let (dst_a, dst_b) = dst.split_at_mut(half * out);
        let run = |x: &[f32], dst: &mut [f32]| {
            linear.add_product(x, dst);
            then(dst);
        };
        rayon::join(|| run(x_a, dst_a), || run(x_b, dst_b));
        return;
    }
    let panels = linear.panels();
    let half = panels.len() / 2;
    if half == 0 {
        linear.add_product(x, dst);
        then(dst);
        return;
    }
    // An even count of panels in the first half where it can be: AVX-512 reads them in pairs.
    let middle = panels.start
        + if half % 2 == 1 && half + 1 < panels.len() {
            half + 1
        } else {
            half
        };
    let (first, second) = (panels.start..middle, middle..panels.end);
    let (width_a, width_b) = (
        linear.outputs_of(&first).len(),
        linear.outputs_of(&second).len(),
    );
    let (mut a, mut b) = (vec![0.0f32; n * width_a], vec![0.0f32; n * width_b]);
    rayon::join(
        || linear.add_product_of(first, x, &mut a),
        || linear.add_product_of(second, x, &mut b),
    );
    let rows = a.chunks_exact(width_a).zip(b.chunks_exact(width_b));
    for (row, (a, b)) in dst.chunks_exact_mut(width_a + width_b).zip(rows) {
        let (to_a, to_b) = row.split_at_mut(width_a);
        for (d, s) in to_a.iter_mut().zip(a).chain(to_b.iter_mut().zip(b)) {
            *d += s;
        }
    }
    then(dst);
}

impl Norm {
    /// Layer normalization of each `width`-long row in place.
    fn apply(&self, rows: &mut [f32], width: usize, eps: f32) {
        for row in rows.chunks_exact_mut(width) {
            let mean = row.iter().sum::<f32>() / width as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gain).zip(&self.bias) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

/// The mean of the `width`-long rows of `states`, scaled to unit length (a zero mean stays
/// zero).
pub fn mean_pool(states: &[f32], width: usize) -> Vec<f32> {
    let rows = states.len() / width;
    let mut mean = vec![0.0f32; width];
    for row in states.chunks_exact(width) {
        for (m, v) in mean.iter_mut().zip(row) {
            *m += v;
        }
    }
    for m in &mut mean {
        *m /= rows.max(1) as f32;
    }
    let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        for m in &mut mean {
            *m /= norm;
        }
    }
    mean
}

/// GELU as BERT defines it, with the exact error function.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU values are tabulated over [-GELU_RANGE, GELU_RANGE]; outside it GELU is 0 or `x` to
/// within 1e-8.
const GELU_RANGE: f32 = 6.0;
/// Table points per unit: linear interpolation between them is off by at most
/// `step² / 8 · max|GELU''|` = `(1/1024)² / 8 · 0.8` ≈ 1e-7; rounding the offset into the
/// table to f32 adds up to about 6e-7.
const GELU_STEPS: f32 = 1024.0;

/// GELU by linear interpolation in a table of exact values: the exact error function costs
/// more than the matrix products for a short query (a call per intermediate value, 9,216 per
/// token), the table a load and a multiply-add, with no visible change to the embeddings.
pub struct GeluTable(Vec<f32>);

impl GeluTable {
    fn new() -> GeluTable {
        let points = (2.0 * GELU_RANGE * GELU_STEPS) as usize + 2;
        GeluTable(
            (0..points)
                .map(|i| gelu(i as f32 / GELU_STEPS - GELU_RANGE))
                .collect(),
        )
    }

    fn apply(&self, x: f32) -> f32 {
        // NaN passes through, as in the exact form.
        if x >= GELU_RANGE || x.is_nan() {
            return x;
        }
        if x <= -GELU_RANGE {
            return 0.0;
        }
        let at = (x + GELU_RANGE) * GELU_STEPS;
        let i = at as usize;
        let frac = at - i as f32;
        let (a, b) = (self.0[i], self.0[i + 1]);
        a + (b - a) * frac
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        total += *v;
    }
    for v in row.iter_mut() {
        *v /= total;
    }
}

/// Every `bias.len()`-long row of `dst` set to `bias`.
fn fill_rows(dst: &mut [f32], bias: &[f32]) {
    for row in dst.chunks_exact_mut(bias.len()) {
        row.copy_from_slice(bias);
    }
}

/// Every row of `dst` set to the same row of `x` plus `bias`.
fn add_rows(dst: &mut [f32], x: &[f32], bias: &[f32]) {
    for (row, xs) in dst
        .chunks_exact_mut(bias.len())
        .zip(x.chunks_exact(bias.len()))
    {
        for ((d, v), b) in row.iter_mut().zip(xs).zip(bias) {
            *d = v + b;
        }
    }
}

/// The first `cols` values of each of `rows` rows `stride` apart set to zero.
fn zero_rows(dst: &mut [f32], rows: usize, cols: usize, stride: usize) {
    for r in 0..rows {
        dst[r * stride..][..cols].fill(0.0);
    }
}

/// A matrix laid out in a slice with arbitrary row and column strides.
#[derive(Clone, Copy)]
struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> Mat<'a> {
    fn rows(data: &'a [f32], rows: usize, cols: usize) -> Mat<'a> {
        Mat::strided(data, rows, cols, cols, 1)
    }

    fn strided(
        data: &'a [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Mat<'a> {
        Mat {
            data,
            rows,
            cols,
            row_stride,
            col_stride,
        }
    }

    /// One past the largest index the view reads.
    fn extent(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            0
        } else {
            (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride + 1
        }
    }
}

/// `dst += scale * lhs · rhs`, where `dst` is `lhs.rows` rows `dst_stride` apart of
/// `rhs.cols` values each.
fn matmul(dst: &mut [f32], dst_stride: usize, lhs: Mat<'_>, rhs: Mat<'_>, scale: f32) {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    assert_eq!(k, rhs.rows, "inner dimensions differ");
    assert!(lhs.extent() <= lhs.data.len() && rhs.extent() <= rhs.data.len());
    assert!(m == 0 || n == 0 || (m - 1) * dst_stride + n <= dst.len());
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the asserts above keep every index the product reads within `lhs.data` and
    // `rhs.data`, and every index it writes within `dst`, which is borrowed mutably and so
    // overlaps neither operand.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_stride as isize,
            true,
            lhs.data.as_ptr(),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.data.as_ptr(),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_matches_the_naive_product_with_strides() {
        let a: Vec<f32> = (0..12).map(|v| v as f32 * 0.5 - 2.0).collect();
        let b: Vec<f32> = (0..12).map(|v| (v as f32).sin()).collect();
        // a as 3x4, b read as the transpose of a 3x4 (so 4x3).
        let mut dst = vec![1.0f32; 9];
        matmul(
            &mut dst,
            3,
            Mat::rows(&a, 3, 4),
            Mat::strided(&b, 4, 3, 1, 4),
            2.0,
        );
        for i in 0..3 {
            for j in 0..3 {
                let want: f32 =
                    1.0 + 2.0 * (0..4).map(|k| a[i * 4 + k] * b[j * 4 + k]).sum::<f32>();
                assert!((dst[i * 3 + j] - want).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn the_gelu_table_follows_the_exact_form() {
        let table = GeluTable::new();
        let mut worst = 0.0f32;
        for i in -9_000..9_000 {
            let x = i as f32 * 0.000_931;
            // Interpolation error, plus f32 rounding of the offset into the table (an ulp of 6
            // is 5e-7) and of values up to 8.
            let allowed = 1e-6 + 1.2e-7 * x.abs();
            worst = worst.max((table.apply(x) - gelu(x)).abs() / allowed);
        }
        assert!(worst <= 1.0, "largest difference {worst} of the allowed");
        assert_eq!(table.apply(-100.0), 0.0);
        assert_eq!(table.apply(100.0), 100.0);
        assert!(table.apply(f32::NAN).is_nan());
    }

    #[test]
    fn gelu_and_softmax_known_values() {
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((gelu(-3.0) + 0.004_049_7).abs() < 1e-6);
        let mut row = [1.0, 2.0, 3.0];
        softmax(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((row[2] - 0.665_240_9).abs() < 1e-6);
    }
}
