//! The line-based three-way merge an update uses for a file changed both locally and upstream
//! (issue 29). Our own, small diff3 rather than a crate: the crates that do it either pull in
//! more than a merge or are thinly kept, and what is needed here is narrow. Lines keep their
//! terminators, so the merge is byte-exact (a missing final newline survives); a line matching
//! is the longest common subsequence of base and each side, computed on what lies between
//! their common prefix and suffix. Where that middle is too large to compare cheaply, the whole
//! middle counts as one change: a merge that cannot be computed cheaply is a conflict, never a
//! guess.
//!
//! Between lines both sides kept from the base (the stable lines), each stretch the sides
//! changed is resolved: one side equal to the base takes the other, two equal sides take
//! either, and two different changes are a conflict. A merge with any conflict gives `None`:
//! the caller keeps the user's copy and lands the upstream text beside it.

/// The largest base × side middle (in lines²) compared line by line; 4 M cells of one byte.
const MAX_CELLS: usize = 4 << 20;

/// The three-way merge of `local` and `upstream` from their common `base`, or `None` when
/// the two changed the same lines differently.
pub fn merge(base: &[u8], local: &[u8], upstream: &[u8]) -> Option<Vec<u8>> {
    if local == upstream || upstream == base {
        return Some(local.to_vec());
    }
    if local == base {
        return Some(upstream.to_vec());
    }
    let o = lines(base);
    let a = lines(local);
    let b = lines(upstream);
    let match_a = matching(&o, &a);
    let match_b = matching(&o, &b);
    let mut out = Vec::with_capacity(local.len().max(upstream.len()));
    let (mut i, mut ja, mut jb) = (0, 0, 0);
    loop {
        // The stable run: base lines both sides keep in place.
        while i < o.len() && match_a[i] == Some(ja) && match_b[i] == Some(jb) {
            out.extend_from_slice(o[i]);
            i += 1;
            ja += 1;
            jb += 1;
        }
        if i == o.len() && ja == a.len() && jb == b.len() {
            return Some(out);
        }
        // The next base line both sides keep ends this changed stretch.
        let end = (i..o.len()).find(|&k| match_a[k].is_some() && match_b[k].is_some());
        let (ea, eb, eo) = match end {
            Some(k) => (match_a[k]?, match_b[k]?, k),
            None => (a.len(), b.len(), o.len()),
        };
        let (os, as_, bs) = (&o[i..eo], &a[ja..ea], &b[jb..eb]);
        let taken = if as_ == os || as_ == bs {
            bs
        } else if bs == os {
            as_
        } else {
            return None;
        };
        for line in taken {
            out.extend_from_slice(line);
        }
        (i, ja, jb) = (eo, ea, eb);
    }
}

/// `text` cut after each `\n` (the last line may have none).
fn lines(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|&c| c == b'\n').collect()
}

/// For each line of `o`, the line of `x` it is matched with (a longest common subsequence;
/// ties keep the earliest lines).
fn matching(o: &[&[u8]], x: &[&[u8]]) -> Vec<Option<usize>> {
    let mut out = vec![None; o.len()];
    let prefix = o.iter().zip(x).take_while(|(p, q)| p == q).count();
    for (k, slot) in out.iter_mut().enumerate().take(prefix) {
        *slot = Some(k);
    }
    let suffix = o[prefix..]
        .iter()
        .rev()
        .zip(x[prefix..].iter().rev())
        .take_while(|(p, q)| p == q)
        .count();
    for k in 0..suffix {
        out[o.len() - 1 - k] = Some(x.len() - 1 - k);
    }
    let (om, xm) = (&o[prefix..o.len() - suffix], &x[prefix..x.len() - suffix]);
    let (n, m) = (om.len(), xm.len());
    if n == 0 || m == 0 || n.saturating_mul(m) > MAX_CELLS {
        return out;
    }
    // lcs[i][j]: the longest common subsequence of om[i..] and xm[j..], bounded to u16 by
    // MAX_CELLS only in the product, so counted in u32.
    let width = m + 1;
    let mut lcs = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * width + j] = if om[i] == xm[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if om[i] == xm[j] {
            out[prefix + i] = Some(prefix + j);
            i += 1;
            j += 1;
        } else if lcs[(i + 1) * width + j] >= lcs[i * width + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::merge;

    fn m(base: &str, local: &str, upstream: &str) -> Option<String> {
        merge(base.as_bytes(), local.as_bytes(), upstream.as_bytes())
            .map(|v| String::from_utf8(v).expect("utf8"))
    }

    #[test]
    fn separate_changes_merge_and_the_same_change_twice_is_one() {
        let base = "a\nb\nc\nd\ne\n";
        assert_eq!(
            m(base, "A\nb\nc\nd\ne\n", "a\nb\nc\nd\nE\n").as_deref(),
            Some("A\nb\nc\nd\nE\n")
        );
        assert_eq!(
            m(base, "a\nB\nc\nd\ne\n", "a\nB\nc\nd\ne\n").as_deref(),
            Some("a\nB\nc\nd\ne\n")
        );
        // Insertions and a deletion on either side.
        assert_eq!(
            m(base, "a\nnew\nb\nc\nd\ne\n", "a\nb\nc\ne\nmore\n").as_deref(),
            Some("a\nnew\nb\nc\ne\nmore\n")
        );
    }

    #[test]
    fn two_changes_of_the_same_lines_conflict() {
        let base = "a\nb\nc\n";
        assert_eq!(m(base, "a\nmine\nc\n", "a\ntheirs\nc\n"), None);
        // Adjacent edits are one stretch: a conflict, as diff3 has it.
        assert_eq!(m(base, "A\nb\nc\n", "a\nB\nc\n"), None);
    }

    #[test]
    fn the_final_newline_is_kept_exactly() {
        assert_eq!(
            m("a\nb\nc", "A\nb\nc", "a\nb\nC").as_deref(),
            Some("A\nb\nC")
        );
        assert_eq!(m("a\nb\n", "a\nb\n", "a\nb").as_deref(), Some("a\nb"));
    }
}
