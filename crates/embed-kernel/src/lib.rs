//! The arithmetic of iii-directory's sentence encoder (`iii_directory::embed`): the forward
//! pass ([`encoder`]), its linear layers (this module: weights rounded to f16 once at load and
//! packed for the way a short sequence reads them, with the product `dst += x · Wᵀ` computed by
//! a kernel of this crate's own), and the int8 scans of the stored embeddings. A crate of its
//! own so the test profile compiles it optimized (see its manifest).
//!
//! **Why not a general matrix product.** A query is 5 to 20 tokens; its cost is the weights'
//! ~10.6 M values read once per layer product, not arithmetic. Halving their bytes (f16, whose
//! 11-bit mantissa moves an embedding by ~1e-5 in cosine) halves that traffic, and a kernel that
//! keeps a tile of outputs for every token of the tile in registers reads each weight once per
//! tile instead of packing the operands first, as a general product does.
//!
//! **Layout.** Outputs are grouped in panels of [`PANEL`]; a panel stores, for each input
//! position `k`, its outputs' weights side by side (`panel[k * PANEL + j] = W[o0 + j, k]`), so
//! the kernel streams a panel front to back. Every output count of the model is a multiple of
//! `PANEL` (a stray remainder is padded with zero weights and never written back).
//!
//! **Kernels.** On x86-64 with AVX2, FMA and F16C (checked at run time), panels stay f16 and are
//! widened in registers. Elsewhere the same f16-rounded values are kept as f32 and the same loop
//! runs in plain Rust (which the compiler vectorizes for the target): every machine computes
//! with the same weights, so every machine's embeddings agree to rounding.

mod dots;
pub mod encoder;

use std::ops::Range;

pub use dots::{bit_distances, int8_dots};

/// Outputs per panel: one 16-lane (AVX-512) or two 8-lane (AVX2) f32 vectors.
pub const PANEL: usize = 16;

/// A linear layer's weight matrix (`out` × `inp`, as the file stores it), packed.
pub struct Linear {
    out: usize,
    inp: usize,
    kernel: Kernel,
    weights: Packed,
}

enum Packed {
    /// f16 bits, for the x86-64 kernels.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Half(Vec<u16>),
    /// The same f16-rounded values widened to f32, for the portable kernel.
    Full(Vec<f32>),
}

/// Which kernel this machine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// x86-64 with AVX-512F: two panels and up to 12 tokens a call.
    Avx512,
    /// x86-64 with AVX2, FMA and F16C: one panel and up to 6 tokens a call.
    Avx2,
    /// Plain Rust: one panel and up to 6 tokens a call.
    Portable,
}

impl Kernel {
    /// The fastest kernel this CPU supports.
    pub fn detect() -> Kernel {
        if Kernel::avx512_ok() {
            return Kernel::Avx512;
        }
        if Kernel::avx2_ok() {
            return Kernel::Avx2;
        }
        Kernel::Portable
    }

    /// Every kernel this CPU can run, fastest first (the tests compare them).
    pub fn available() -> Vec<Kernel> {
        [Kernel::Avx512, Kernel::Avx2, Kernel::Portable]
            .into_iter()
            .filter(|&k| k.runs_here())
            .collect()
    }

    /// Whether this CPU can run this kernel.
    fn runs_here(self) -> bool {
        match self {
            Kernel::Avx512 => Kernel::avx512_ok(),
            Kernel::Avx2 => Kernel::avx2_ok(),
            Kernel::Portable => true,
        }
    }

    /// Whether this CPU has what the AVX-512 kernel needs: AVX-512F.
    fn avx512_ok() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Whether this CPU has what the AVX2 kernel needs: AVX2, FMA and F16C.
    fn avx2_ok() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("f16c")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Panels and tokens one kernel call covers: as many sums as the vector registers hold
    /// beside the weights being read and the broadcast input (AVX-512: 2 × 12 of 32; AVX2:
    /// 2 × 6 of 16).
    fn shape(self) -> (usize, usize) {
        match self {
            Kernel::Avx512 => (2, 12),
            Kernel::Avx2 | Kernel::Portable => (1, 6),
        }
    }
}

/// The most sums one kernel call holds (`panels × PANEL × tokens`).
const MOST_SUMS: usize = 2 * PANEL * 12;

impl Linear {
    /// Packs `w` (`out` rows of `inp` values) for `kernel`, or for the portable one when this
    /// CPU cannot run `kernel` (its instructions are only ever run where they exist); `None`
    /// when a weight does not fit in f16 (beyond ±65504, or not a number; no BERT weight comes
    /// near).
    pub fn new(w: &[f32], out: usize, inp: usize, kernel: Kernel) -> Option<Linear> {
        assert!(inp > 0, "a weight matrix has inputs");
        assert_eq!(w.len(), out * inp, "a weight matrix of {out} × {inp}");
        let kernel = if kernel.runs_here() {
            kernel
        } else {
            Kernel::Portable
        };
        let panels = out.div_ceil(PANEL);
        let mut half = vec![0u16; panels * inp * PANEL];
        for (o, row) in w.chunks_exact(inp).enumerate() {
            let (panel, j) = (o / PANEL, o % PANEL);
            for (k, &v) in row.iter().enumerate() {
                let bits = f16_bits(v);
                if bits & 0x7c00 == 0x7c00 {
                    return None;
                }
                half[(panel * inp + k) * PANEL + j] = bits;
            }
        }
        let weights = match kernel {
            Kernel::Avx512 | Kernel::Avx2 => Packed::Half(half),
            Kernel::Portable => Packed::Full(half.into_iter().map(f16_to_f32).collect()),
        };
        Some(Linear {
            out,
            inp,
            kernel,
            weights,
        })
    }

    /// `dst[t][o] += Σ_k x[t][k] · W[o][k]` for every token `t`: `x` holds rows of `inp`
    /// values, `dst` as many rows of `out`.
    pub fn add_product(&self, x: &[f32], dst: &mut [f32]) {
        self.add_product_of(self.panels(), x, dst);
    }

    /// The panels this layer's outputs fill ([`PANEL`] outputs each, the last one padded).
    pub fn panels(&self) -> Range<usize> {
        0..self.out.div_ceil(PANEL)
    }

    /// The outputs panels `panels` hold (the padding of the last one left out).
    pub fn outputs_of(&self, panels: &Range<usize>) -> Range<usize> {
        (panels.start * PANEL).min(self.out)..(panels.end * PANEL).min(self.out)
    }

    /// [`Linear::add_product`] for the outputs of `panels` alone: `dst` holds, for each row of
    /// `x`, the row of outputs [`Linear::outputs_of`] `panels`. Disjoint panels share no
    /// weight, so two threads that each take half of them read the weights once between them.
    pub fn add_product_of(&self, panels: Range<usize>, x: &[f32], dst: &mut [f32]) {
        let inp = self.inp;
        let n = x.len() / inp;
        let outputs = self.outputs_of(&panels);
        let width = outputs.len();
        assert!(panels.end <= self.panels().end, "panels of this layer");
        assert_eq!(x.len(), n * inp, "whole input rows");
        assert_eq!(dst.len(), n * width, "one output row per input row");
        let (group, tile) = self.kernel.shape();
        let mut scratch = [0.0f32; MOST_SUMS];
        // Panels outer, tokens inner: a panel group's weights (12 KiB each) stay in the first
        // cache level while every tile of tokens reads them.
        for first in panels.clone().step_by(group) {
            let count = group.min(panels.end - first);
            let cols = count * PANEL;
            let w = first * inp * PANEL..(first + count) * inp * PANEL;
            for t0 in (0..n).step_by(tile) {
                let tokens = tile.min(n - t0);
                let rows = &x[t0 * inp..(t0 + tokens) * inp];
                let acc = &mut scratch[..tokens * cols];
                acc.fill(0.0);
                match &self.weights {
                    #[cfg(target_arch = "x86_64")]
                    Packed::Half(half) => {
                        // SAFETY: `Packed::Half` is built for the x86 kernels only, each chosen
                        // by `Kernel::detect` (or `available`) because the CPU has its
                        // features; the slices hold `tokens` rows of `inp` inputs, `count`
                        // panels of `inp * PANEL` weights and `tokens` rows of `cols` sums,
                        // within the kernel's shape.
                        unsafe {
                            if self.kernel == Kernel::Avx512 {
                                avx512::tile(rows, inp, &half[w.clone()], acc)
                            } else {
                                avx2::tile(rows, inp, &half[w.clone()], acc)
                            }
                        }
                    }
                    #[cfg(not(target_arch = "x86_64"))]
                    Packed::Half(_) => unreachable!("f16 panels are built for x86-64 only"),
                    Packed::Full(full) => portable_tile(rows, inp, &full[w.clone()], acc),
                }
                for (t, sums) in acc.chunks_exact(cols).enumerate() {
                    let from = first * PANEL - outputs.start;
                    let filled = cols.min(width - from);
                    let row = &mut dst[(t0 + t) * width + from..][..filled];
                    for (d, s) in row.iter_mut().zip(sums) {
                        *d += s;
                    }
                }
            }
        }
    }
}

/// `acc[t][j] += Σ_k rows[t][k] · panel[k][j]`, in plain Rust.
fn portable_tile(rows: &[f32], inp: usize, panel: &[f32], acc: &mut [f32]) {
    for (x, sums) in rows.chunks_exact(inp).zip(acc.chunks_exact_mut(PANEL)) {
        let sums: &mut [f32; PANEL] = sums.try_into().expect("a panel's width");
        for (&xk, w) in x.iter().zip(panel.chunks_exact(PANEL)) {
            // Not `mul_add`: without a fused multiply-add in the target it is a library call.
            for (s, &wj) in sums.iter_mut().zip(w) {
                *s += xk * wj;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::PANEL;

    const TILE: usize = 6;

    /// `acc[t][j] += Σ_k rows[t][k] · panel[k][j]` for up to `TILE` rows, the panel's f16
    /// widened in registers; every row's sums stay in registers across the whole `k` loop.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `rows` holds `t` rows of `inp`, `panel` `inp * PANEL`
    /// values and `acc` `t * PANEL`, with `1 <= t <= TILE`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn tile(rows: &[f32], inp: usize, panel: &[u16], acc: &mut [f32]) {
        let tokens = rows.len() / inp;
        assert!((1..=TILE).contains(&tokens) && acc.len() == tokens * PANEL);
        assert_eq!(panel.len(), inp * PANEL);
        // SAFETY: the caller's bounds: each of the `tokens` instantiations reads `tokens`
        // rows of `inp` inputs and `inp * PANEL` weights, and writes `tokens * PANEL` sums.
        unsafe {
            match tokens {
                1 => rows_of::<1>(rows.as_ptr(), inp, panel.as_ptr(), acc.as_mut_ptr()),
                2 => rows_of::<2>(rows.as_ptr(), inp, panel.as_ptr(), acc.as_mut_ptr()),
                3 => rows_of::<3>(rows.as_ptr(), inp, panel.as_ptr(), acc.as_mut_ptr()),
                4 => rows_of::<4>(rows.as_ptr(), inp, panel.as_ptr(), acc.as_mut_ptr()),
                5 => rows_of::<5>(rows.as_ptr(), inp, panel.as_ptr(), acc.as_mut_ptr()),
                _ => rows_of::<6>(rows.as_ptr(), inp, panel.as_ptr(), acc.as_mut_ptr()),
            }
        }
    }

    /// The kernel for exactly `T` rows (a constant, so the sums are registers).
    ///
    /// # Safety
    /// As [`tile`], with `T` rows.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn rows_of<const T: usize>(x: *const f32, inp: usize, w: *const u16, acc: *mut f32) {
        let mut lo = [_mm256_setzero_ps(); T];
        let mut hi = [_mm256_setzero_ps(); T];
        for k in 0..inp {
            // SAFETY: `k < inp`, so the panel's step `k` (16 halves: two 128-bit loads) and
            // each row's input `k` are in bounds (the caller's contract).
            unsafe {
                let step = w.add(k * PANEL);
                let w_lo = _mm256_cvtph_ps(_mm_loadu_si128(step.cast()));
                let w_hi = _mm256_cvtph_ps(_mm_loadu_si128(step.add(8).cast()));
                for t in 0..T {
                    let xv = _mm256_broadcast_ss(&*x.add(t * inp + k));
                    lo[t] = _mm256_fmadd_ps(xv, w_lo, lo[t]);
                    hi[t] = _mm256_fmadd_ps(xv, w_hi, hi[t]);
                }
            }
        }
        for t in 0..T {
            // SAFETY: row `t < T` of `acc` holds `PANEL` (16) values.
            unsafe {
                let out = acc.add(t * PANEL);
                _mm256_storeu_ps(out, _mm256_add_ps(_mm256_loadu_ps(out), lo[t]));
                _mm256_storeu_ps(
                    out.add(8),
                    _mm256_add_ps(_mm256_loadu_ps(out.add(8)), hi[t]),
                );
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::PANEL;

    const TILE: usize = 12;

    /// `acc[t][p·PANEL + j] += Σ_k rows[t][k] · panel_p[k][j]` for one or two panels and up to
    /// `TILE` rows, the panels' f16 widened in registers; every sum stays in a register across
    /// the whole `k` loop.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `rows` holds `t` rows of `inp`, `panels` `p * inp * PANEL` values
    /// and `acc` `t * p * PANEL`, with `1 <= t <= TILE` and `p` 1 or 2.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn tile(rows: &[f32], inp: usize, panels: &[u16], acc: &mut [f32]) {
        let tokens = rows.len() / inp;
        let count = panels.len() / (inp * PANEL);
        assert!((1..=TILE).contains(&tokens) && (1..=2).contains(&count));
        assert_eq!(acc.len(), tokens * count * PANEL);
        let (x, w, a) = (rows.as_ptr(), panels.as_ptr(), acc.as_mut_ptr());
        macro_rules! by_tokens {
            ($p:literal) => {
                match tokens {
                    1 => rows_of::<1, $p>(x, inp, w, a),
                    2 => rows_of::<2, $p>(x, inp, w, a),
                    3 => rows_of::<3, $p>(x, inp, w, a),
                    4 => rows_of::<4, $p>(x, inp, w, a),
                    5 => rows_of::<5, $p>(x, inp, w, a),
                    6 => rows_of::<6, $p>(x, inp, w, a),
                    7 => rows_of::<7, $p>(x, inp, w, a),
                    8 => rows_of::<8, $p>(x, inp, w, a),
                    9 => rows_of::<9, $p>(x, inp, w, a),
                    10 => rows_of::<10, $p>(x, inp, w, a),
                    11 => rows_of::<11, $p>(x, inp, w, a),
                    _ => rows_of::<12, $p>(x, inp, w, a),
                }
            };
        }
        // SAFETY: the caller's bounds: each instantiation reads `tokens` rows of `inp` inputs
        // and `count` panels of `inp * PANEL` weights, and writes `tokens * count * PANEL` sums.
        unsafe {
            if count == 2 {
                by_tokens!(2)
            } else {
                by_tokens!(1)
            }
        }
    }

    /// The kernel for exactly `T` rows and `P` panels (constants, so the sums are registers).
    ///
    /// # Safety
    /// As [`tile`], with `T` rows and `P` panels.
    #[target_feature(enable = "avx512f")]
    unsafe fn rows_of<const T: usize, const P: usize>(
        x: *const f32,
        inp: usize,
        w: *const u16,
        acc: *mut f32,
    ) {
        let mut sums = [[_mm512_setzero_ps(); P]; T];
        for k in 0..inp {
            let mut weights = [_mm512_setzero_ps(); P];
            for (p, weight) in weights.iter_mut().enumerate() {
                // SAFETY: `k < inp` and `p < P`: step `k` of panel `p` (16 halves) is in
                // bounds (the caller's contract).
                *weight = unsafe {
                    _mm512_cvtph_ps(_mm256_loadu_si256(w.add((p * inp + k) * PANEL).cast()))
                };
            }
            for row in sums.iter_mut().enumerate() {
                let (t, row) = row;
                // SAFETY: `t < T` and `k < inp`: row `t`'s input `k` is in bounds.
                let xv = _mm512_set1_ps(unsafe { *x.add(t * inp + k) });
                for (sum, weight) in row.iter_mut().zip(&weights) {
                    *sum = _mm512_fmadd_ps(xv, *weight, *sum);
                }
            }
        }
        for (t, row) in sums.iter().enumerate() {
            for (p, sum) in row.iter().enumerate() {
                // SAFETY: row `t < T` of `acc` holds `P * PANEL` values.
                unsafe {
                    let out = acc.add((t * P + p) * PANEL);
                    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), *sum));
                }
            }
        }
    }
}

/// `v` rounded to the nearest f16 (ties to even), as bits; beyond the f16 range it is infinite,
/// and a NaN stays a NaN.
pub fn f16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let mantissa = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mantissa != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal in f16 (or zero): the 24-bit significand shifted down to units of 2^-24.
        if e < -10 {
            return sign;
        }
        let m = mantissa | 0x80_0000;
        let shift = (14 - e) as u32;
        let rounded = (m + (1 << (shift - 1)) - 1 + ((m >> shift) & 1)) >> shift;
        return sign | rounded as u16;
    }
    let base = ((e as u32) << 10) | (mantissa >> 13);
    let rest = mantissa & 0x1fff;
    // A carry out of the mantissa moves the exponent up, to infinity at the top: still right.
    let rounded = base + u32::from(rest > 0x1000 || (rest == 0x1000 && base & 1 == 1));
    sign | rounded as u16
}

/// The f32 value of f16 bits.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    match exp {
        0 => sign * mantissa as f32 * (1.0 / 16_777_216.0),
        0x1f if mantissa == 0 => sign * f32::INFINITY,
        0x1f => f32::NAN,
        _ => f32::from_bits((u32::from(h & 0x8000) << 16) | ((exp + 112) << 23) | (mantissa << 13)),
    }
}
