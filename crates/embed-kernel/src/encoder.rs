//! The BERT encoder's forward pass for one sequence on the CPU: activations in f32, the linear
//! layers' products by this crate's kernel ([`Linear`]), attention with `gemm` (pure Rust,
//! runtime-dispatched SIMD kernels). One sequence at a time: each layer product of a sequence
//! is split in two halves run side by side when a thread is free (see `product_then`), and
//! a batch runs its sequences side by side (`iii_directory::embed::Embedder::embed_batch`),
//! with no padding.
//!
//! Here rather than in iii-directory, which reads the model's files and builds an [`Encoder`]
//! from them, so that the test profile compiles the whole pass optimized: unoptimized, its
//! layer norms, GELU and softmax took more time than the products, and the tests that embed
//! the evaluation corpus paid for it.
//!
//! The query, key and value projections are fused into one layer of `3 * hidden` outputs, so
//! one pass over the input computes all three.

use crate::{Linear, f16_to_f32};

/// One transformer layer's weights, as the encoder reads them.
pub struct Layer {
    /// The query, key and value projections, fused: `3 * hidden` outputs.
    pub qkv: Linear,
    pub qkv_bias: Vec<f32>,
    pub out: Linear,
    pub out_bias: Vec<f32>,
    pub attention_norm: Norm,
    pub up: Linear,
    pub up_bias: Vec<f32>,
    pub down: Linear,
    pub down_bias: Vec<f32>,
    pub output_norm: Norm,
}

/// A layer normalization's gain and bias, `hidden` values each.
pub struct Norm {
    pub gain: Vec<f32>,
    pub bias: Vec<f32>,
}

/// The tables a token's first state is summed from, and the norm applied to the sum.
pub struct Embeddings {
    /// The word embeddings as f16 bits (the largest table: 30,522 rows, of which a query reads
    /// a few), rounded as the linear layers' weights are.
    pub words: Vec<u16>,
    /// `hidden` values per position.
    pub positions: Vec<f32>,
    /// Token type 0's row comes first (a single sequence uses no other).
    pub token_type: Vec<f32>,
    pub norm: Norm,
}

/// The sizes of an encoder.
pub struct Shape {
    /// Values per token state.
    pub hidden: usize,
    /// Attention heads; `hidden` is a multiple of them.
    pub heads: usize,
    /// Values per token in the feed-forward layers.
    pub intermediate: usize,
    /// The layer norms' epsilon.
    pub eps: f32,
}

/// A loaded encoder.
pub struct Encoder {
    shape: Shape,
    embeddings: Embeddings,
    layers: Vec<Layer>,
    gelu: GeluTable,
}

impl Encoder {
    /// An encoder of `shape` from weights of its sizes.
    pub fn new(shape: Shape, embeddings: Embeddings, layers: Vec<Layer>) -> Encoder {
        assert!(
            shape.heads > 0 && shape.hidden.is_multiple_of(shape.heads),
            "whole attention heads"
        );
        Encoder {
            shape,
            embeddings,
            layers,
            gelu: GeluTable::new(),
        }
    }

    /// The mean of the last layer's token states over all of `ids` (one unpadded sequence,
    /// so every token counts), scaled to unit length. `ids` holds at least one id, each a row
    /// of the word table, and no more ids than the position table has rows.
    pub fn embed(&self, ids: &[u32]) -> Vec<f32> {
        let Shape {
            hidden: h,
            heads,
            intermediate: inter,
            eps,
        } = self.shape;
        let n = ids.len();
        let head = h / heads;
        let scale = 1.0 / (head as f32).sqrt();
        let mut x = vec![0.0f32; n * h];
        for (t, &id) in ids.iter().enumerate() {
            let word = &self.embeddings.words[id as usize * h..][..h];
            let position = &self.embeddings.positions[t * h..][..h];
            for (((out, &w), p), s) in x[t * h..][..h]
                .iter_mut()
                .zip(word)
                .zip(position)
                .zip(&self.embeddings.token_type[..h])
            {
                *out = f16_to_f32(w) + p + s;
            }
        }
        self.embeddings.norm.apply(&mut x, h, eps);

        let mut qkv = vec![0.0f32; n * 3 * h];
        let mut scores = vec![0.0f32; n * n];
        let mut context = vec![0.0f32; n * h];
        let mut sum = vec![0.0f32; n * h];
        let mut up = vec![0.0f32; n * inter];
        for layer in &self.layers {
            fill_rows(&mut qkv, &layer.qkv_bias);
            product(&layer.qkv, h, &x, &mut qkv);
            for hd in 0..heads {
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
            layer.attention_norm.apply(&mut sum, h, eps);
            std::mem::swap(&mut x, &mut sum);

            fill_rows(&mut up, &layer.up_bias);
            let gelu = |rows: &mut [f32]| rows.iter_mut().for_each(|v| *v = self.gelu.apply(*v));
            product_then(&layer.up, h, &x, &mut up, gelu);
            add_rows(&mut sum, &x, &layer.down_bias);
            product(&layer.down, inter, &up, &mut sum);
            layer.output_norm.apply(&mut sum, h, eps);
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
struct GeluTable(Vec<f32>);

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
