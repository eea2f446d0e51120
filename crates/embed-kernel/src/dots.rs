//! Integer dot products of one int8 query with many int8 rows: the exact scan of the stored
//! embeddings (`iii_directory::embed::VectorTable`). Here rather than in the main crate so that
//! the AVX-512 form can be compiled (its target features need this crate's newer Rust).
//!
//! One plain-Rust loop, which the compiler vectorizes; it is compiled three times, for AVX-512
//! with VNNI (16-bit multiply-adds fused into one instruction, 64-byte vectors), for AVX2, and
//! for the default target, and the widest this processor runs is chosen at run time. Every
//! form computes the same exact integer sums.

/// `out[i] = Σ_j query[j] · rows[i][j]` for every row, in order (`out` holds `rows.len()`).
pub fn int8_dots<const D: usize>(query: &[i8; D], rows: &[[i8; D]], out: &mut [i32]) {
    assert_eq!(out.len(), rows.len(), "one sum per row");
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
        {
            // SAFETY: the processor has the features `dots_avx512` is compiled for.
            unsafe { dots_avx512(query, rows, out) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2, the one feature `dots_avx2` is compiled for.
            unsafe { dots_avx2(query, rows, out) };
            return;
        }
    }
    dots(query, rows, out);
}

/// The loop every form compiles (at most 127² · D per sum: far inside i32 for any embedding).
#[inline(always)]
fn dots<const D: usize>(query: &[i8; D], rows: &[[i8; D]], out: &mut [i32]) {
    for (sum, row) in out.iter_mut().zip(rows) {
        *sum = query
            .iter()
            .zip(row)
            .map(|(&q, &v)| i32::from(i16::from(q) * i16::from(v)))
            .sum();
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn dots_avx512<const D: usize>(query: &[i8; D], rows: &[[i8; D]], out: &mut [i32]) {
    dots(query, rows, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dots_avx2<const D: usize>(query: &[i8; D], rows: &[[i8; D]], out: &mut [i32]) {
    dots(query, rows, out);
}

/// `out[i]` = how many bits `query` and `rows[i]` differ in (the Hamming distance of two sign
/// codes), for every row, in order: with the POPCNT instruction when the processor has it (the
/// default target counts bits with a dozen instructions per word).
pub fn bit_distances<const W: usize>(query: &[u64; W], rows: &[[u64; W]], out: &mut [u16]) {
    assert_eq!(out.len(), rows.len(), "one distance per row");
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the processor has POPCNT, the one feature `distances_popcnt` is compiled
            // for.
            unsafe { distances_popcnt(query, rows, out) };
            return;
        }
    }
    distances(query, rows, out);
}

/// The loop every form of [`bit_distances`] compiles (at most 64 · W: W ≤ 1023 fits in u16).
#[inline(always)]
fn distances<const W: usize>(query: &[u64; W], rows: &[[u64; W]], out: &mut [u16]) {
    for (distance, row) in out.iter_mut().zip(rows) {
        *distance = query
            .iter()
            .zip(row)
            .map(|(q, r)| (q ^ r).count_ones() as u16)
            .sum();
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn distances_popcnt<const W: usize>(query: &[u64; W], rows: &[[u64; W]], out: &mut [u16]) {
    distances(query, rows, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_distances_count_the_differing_bits() {
        let query = [0u64, u64::MAX, 0b1011];
        let rows = [
            [0u64, u64::MAX, 0b1011],
            [u64::MAX, 0, 0],
            [1, u64::MAX, 0b0011],
        ];
        let mut got = [0u16; 3];
        bit_distances(&query, &rows, &mut got);
        assert_eq!(got, [0, 64 + 64 + 3, 2]);
        let mut plain = [0u16; 3];
        distances(&query, &rows, &mut plain);
        assert_eq!(plain, got);
    }

    #[test]
    fn every_form_gives_the_exact_sums() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 255) as i32 - 127
        };
        let query: [i8; 384] = std::array::from_fn(|_| next() as i8);
        let mut rows: Vec<[i8; 384]> = (0..37)
            .map(|_| std::array::from_fn(|_| next() as i8))
            .collect();
        rows.push([127; 384]);
        rows.push([-127; 384]);
        let want: Vec<i32> = rows
            .iter()
            .map(|row| {
                query
                    .iter()
                    .zip(row)
                    .map(|(&q, &v)| i32::from(q) * i32::from(v))
                    .sum()
            })
            .collect();
        let mut got = vec![0; rows.len()];
        int8_dots(&query, &rows, &mut got);
        assert_eq!(got, want);
        let mut plain = vec![0; rows.len()];
        dots(&query, &rows, &mut plain);
        assert_eq!(plain, want);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut avx2 = vec![0; rows.len()];
            // SAFETY: checked just above.
            unsafe { dots_avx2(&query, &rows, &mut avx2) };
            assert_eq!(avx2, want);
        }
    }
}
