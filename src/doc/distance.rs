//! Edit distance, and the "Did you mean" list built on it: the names closest to one that was
//! not found. Used for missing skills, system prompts, agent profiles and configuration keys.

/// How many names a "Did you mean" list offers (contract: 3).
pub const SUGGESTIONS: usize = 3;

/// Edit distance (insertions, deletions, substitutions) between two strings, counted in chars.
/// Runs over a single row of the classic table, sized by the shorter string.
pub fn levenshtein(a: &str, b: &str) -> usize {
    // Shared ends never change the distance; dropping them keeps the table small for the common
    // case of near-identical ids.
    let prefix: usize = a
        .chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.len_utf8())
        .sum();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let suffix: usize = a
        .chars()
        .rev()
        .zip(b.chars().rev())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.len_utf8())
        .sum();
    let (a, b) = (&a[..a.len() - suffix], &b[..b.len() - suffix]);

    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let short_len = short.chars().count();
    if short_len == 0 {
        return long.chars().count();
    }
    // row[j] = distance between the part of `long` seen so far and the first j chars of `short`.
    let mut row: Vec<usize> = (0..=short_len).collect();
    for (i, long_char) in long.chars().enumerate() {
        let mut diagonal = i;
        row[0] = i + 1;
        for (j, short_char) in short.chars().enumerate() {
            let above = row[j + 1];
            let substitution = diagonal + usize::from(long_char != short_char);
            row[j + 1] = substitution.min(above + 1).min(row[j] + 1);
            diagonal = above;
        }
    }
    row[short_len]
}

/// One string measured against many (a missed id against candidates): for an ASCII string of at
/// most 64 bytes, the bit-parallel edit distance (Myers, in Hyyrö's form), which computes a
/// column of the table in a few word operations instead of one cell at a time.
pub struct Pattern<'a> {
    text: &'a str,
    /// Bit `i` of `positions[c]` is set when byte `i` of the text is `c`; `None` when the text
    /// is not ASCII or longer than a word.
    positions: Option<Box<[u64; 128]>>,
}

impl<'a> Pattern<'a> {
    pub fn new(text: &'a str) -> Pattern<'a> {
        let positions = (text.is_ascii() && !text.is_empty() && text.len() <= 64).then(|| {
            let mut positions = Box::new([0u64; 128]);
            for (i, byte) in text.bytes().enumerate() {
                positions[usize::from(byte)] |= 1 << i;
            }
            positions
        });
        Pattern { text, positions }
    }

    /// [`levenshtein`] between the pattern's text and `other` when it is under `limit`, else
    /// `None`, often without reading all of `other`: after each `/` of `other` it stops when
    /// no way of ending `other` could bring the distance under `limit` (the smallest cell of the
    /// table's column so far is a lower bound of the last cell). Ids that differ in their
    /// first segment are told apart there, before the rest is measured.
    pub fn distance_under(&self, other: &str, limit: usize) -> Option<usize> {
        let Some(positions) = self.positions.as_deref().filter(|_| other.is_ascii()) else {
            return Some(levenshtein(self.text, other)).filter(|d| *d < limit);
        };
        let len = self.text.len();
        let last = 1u64 << (len - 1);
        let mask = u64::MAX >> (64 - len);
        // Bit i of `plus` (`minus`) is set when the column's cell i+1 is one more (less) than
        // cell i; the first cell of column j is j.
        let (mut plus, mut minus) = (mask, 0u64);
        let mut distance = len;
        for (j, byte) in other.bytes().enumerate() {
            let equal = positions[usize::from(byte)];
            let vertical = equal | minus;
            let horizontal = ((equal & plus).wrapping_add(plus) ^ plus) | equal;
            let mut h_plus = minus | !(horizontal | plus);
            let mut h_minus = plus & horizontal;
            if h_plus & last != 0 {
                distance += 1;
            }
            if h_minus & last != 0 {
                distance -= 1;
            }
            // The table's first row grows by one per column.
            h_plus = (h_plus << 1) | 1;
            h_minus <<= 1;
            plus = h_minus | !(vertical | h_plus);
            minus = h_plus & vertical;
            if byte == b'/' && column_min(j + 1, plus & mask, minus & mask) >= limit {
                return None;
            }
        }
        (distance < limit).then_some(distance)
    }
}

/// The smallest cell of a column of the edit-distance table whose first cell is `first` and
/// whose steps down are +1 at the bits of `plus` and -1 at those of `minus`, four rows at a
/// time.
fn column_min(first: usize, mut plus: u64, mut minus: u64) -> usize {
    let (mut cell, mut lowest) = (first as i64, first as i64);
    while plus | minus != 0 {
        let (sum, min) = NIBBLE_STEPS[((plus & 0xf) | (minus & 0xf) << 4) as usize];
        lowest = lowest.min(cell + i64::from(min));
        cell += i64::from(sum);
        plus >>= 4;
        minus >>= 4;
    }
    lowest as usize
}

/// For four rows' steps (the low nibble +1 bits, the high nibble -1 bits): their sum, and the
/// lowest of their running sums.
static NIBBLE_STEPS: [(i8, i8); 256] = {
    let mut table = [(0i8, 0i8); 256];
    let mut index = 0;
    while index < 256 {
        let (mut sum, mut min) = (0i8, 0i8);
        let mut bit = 0;
        while bit < 4 {
            sum += ((index >> bit) & 1) as i8 - ((index >> (bit + 4)) & 1) as i8;
            if sum < min {
                min = sum;
            }
            bit += 1;
        }
        table[index] = (sum, min);
        index += 1;
    }
    table
};

/// What a cheap lower bound of the edit distance needs of a string, kept beside many candidates
/// so that most are passed over without reading them: its length in chars and, for an ASCII
/// string, how many of its bytes fall in each of 32 buckets (byte mod 32). Both saturate (the
/// length at `u16::MAX`, a count at 15, two counts to a byte), which keeps the bound a bound
/// and a shape at 20 bytes: a miss reads one per candidate, thousands in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Bucket `2i` in the low nibble of byte `i`, bucket `2i + 1` in the high one.
    buckets: [u8; 16],
    chars: u16,
    ascii: bool,
}

impl Shape {
    pub fn of(s: &str) -> Shape {
        let mut counts = [0u8; 32];
        for byte in s.bytes() {
            let count = &mut counts[usize::from(byte % 32)];
            *count = count.saturating_add(1);
        }
        let mut buckets = [0u8; 16];
        for (packed, pair) in buckets.iter_mut().zip(counts.chunks_exact(2)) {
            *packed = pair[0].min(15) | pair[1].min(15) << 4;
        }
        Shape {
            buckets,
            chars: u16::try_from(s.chars().count()).unwrap_or(u16::MAX),
            ascii: s.is_ascii(),
        }
    }

    /// A lower bound of [`levenshtein`] between the strings of `self` and `other`: the
    /// difference in length, and for ASCII strings the larger side of the difference of their
    /// bucket counts (an edit changes at most one count on each side; counts cut at the same
    /// ceiling differ by no more than the counts do).
    pub fn distance_at_least(&self, other: &Shape) -> usize {
        let length = usize::from(self.chars.abs_diff(other.chars));
        if !(self.ascii && other.ascii) {
            return length;
        }
        // Branch-free, so that it compiles to a few vector instructions.
        let excess = |a: &[u8; 16], b: &[u8; 16]| -> usize {
            a.iter()
                .zip(b)
                .map(|(x, y)| {
                    usize::from((x & 15).saturating_sub(y & 15))
                        + usize::from((x >> 4).saturating_sub(y >> 4))
                })
                .sum()
        };
        let only_self = excess(&self.buckets, &other.buckets);
        let only_other = excess(&other.buckets, &self.buckets);
        length.max(only_self).max(only_other)
    }
}

/// The `max` items whose key is closest to `missed` by edit distance, compared in lowercase,
/// ties broken by key; each with its distance.
pub fn closest_by<'a, T>(
    missed: &str,
    items: impl IntoIterator<Item = &'a T>,
    key: impl Fn(&T) -> &str,
    max: usize,
) -> Vec<(usize, &'a T)>
where
    T: ?Sized + 'a,
{
    let missed = missed.to_lowercase();
    let mut ranked: Vec<(usize, &str, &T)> = items
        .into_iter()
        .map(|item| {
            let k = key(item);
            (levenshtein(&missed, &k.to_lowercase()), k, item)
        })
        .collect();
    ranked.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    ranked
        .into_iter()
        .take(max)
        .map(|(distance, _, item)| (distance, item))
        .collect()
}

/// The [`SUGGESTIONS`] names closest to `missed` (duplicates counted once).
pub fn closest(missed: &str, names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort();
    names.dedup();
    closest_by(missed, &names, String::as_str, SUGGESTIONS)
        .into_iter()
        .map(|(_, name)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words close to each other: transpositions, doubled and missing letters, multibyte
    /// chars, ids with segments.
    const WORDS: [&str; 19] = [
        "",
        "a",
        "ab",
        "ba",
        "abc",
        "acb",
        "aabbcc",
        "database",
        "databse",
        "data-base",
        "é☕x",
        "x☕é",
        "index",
        "iii/index",
        "sandbox",
        "iii-sandbox",
        "ns/cache/memory-1",
        "ns/cache/memory-1x",
        "other/cache/memory-2",
    ];

    // ---- levenshtein ----

    #[test]
    fn edit_distances() {
        assert_eq!(levenshtein("", ""), 0);
        assert_eq!(levenshtein("abc", ""), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("sitting", "kitten"), 3);
        assert_eq!(levenshtein("flaw", "lawn"), 2);
        assert_eq!(levenshtein("shell/exec", "shell/exec"), 0);
        assert_eq!(
            levenshtein("sandbox/exec", "sandbox/skills/sandbox/exec"),
            15
        );
        assert_eq!(levenshtein("abc", "xabcx"), 2);
        assert_eq!(levenshtein("aaaa", "aa"), 2);
    }

    #[test]
    fn edit_distance_counts_chars_not_bytes() {
        assert_eq!(levenshtein("café", "cafe"), 1);
        assert_eq!(levenshtein("日本語", "日本"), 1);
        assert_eq!(levenshtein("é", "ü"), 1);
        assert_eq!(levenshtein("☕a☕", "☕b☕"), 1);
    }

    #[test]
    fn edit_distance_matches_a_plain_table() {
        fn reference(a: &str, b: &str) -> usize {
            let a: Vec<char> = a.chars().collect();
            let b: Vec<char> = b.chars().collect();
            let mut table = vec![vec![0; b.len() + 1]; a.len() + 1];
            for (i, row) in table.iter_mut().enumerate() {
                row[0] = i;
            }
            for (j, cell) in table[0].iter_mut().enumerate() {
                *cell = j;
            }
            for i in 1..=a.len() {
                for j in 1..=b.len() {
                    let cost = usize::from(a[i - 1] != b[j - 1]);
                    table[i][j] = (table[i - 1][j] + 1)
                        .min(table[i][j - 1] + 1)
                        .min(table[i - 1][j - 1] + cost);
                }
            }
            table[a.len()][b.len()]
        }
        for a in WORDS {
            for b in WORDS {
                assert_eq!(levenshtein(a, b), reference(a, b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn a_pattern_cut_short_agrees_with_the_distance() {
        let ids = [
            "agent-http-296/chart-47796",
            "agent-http-296/chart-477966",
            "audio-memory-823/video/stream-495733",
            "other-ns-12/video/stream-49573",
            "a/b/c/d/e",
            "a//b/",
            "/",
            "x",
        ];
        for a in WORDS.iter().chain(&ids) {
            let pattern = Pattern::new(a);
            for b in WORDS.iter().chain(&ids) {
                let distance = levenshtein(a, b);
                for limit in 0..=distance + 2 {
                    let expected = (distance < limit).then_some(distance);
                    assert_eq!(
                        pattern.distance_under(b, limit),
                        expected,
                        "{a:?} {b:?} {limit}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_column_minimum_is_the_lowest_cell() {
        // Cells 5, 6, 5, 4, 3, 4 (steps +, -, -, -, +).
        assert_eq!(column_min(5, 0b10001, 0b01110), 3);
        assert_eq!(column_min(2, 0, 0), 2);
        assert_eq!(column_min(0, u64::MAX, 0), 0);
        assert_eq!(column_min(64, 0, u64::MAX), 0);
    }

    #[test]
    fn a_pattern_measures_the_distance() {
        let long = "a".repeat(64);
        let longer = "ab".repeat(40);
        let extra = [long.as_str(), longer.as_str(), "x", "xa", "aax"];
        for a in WORDS.iter().chain(&extra) {
            let pattern = Pattern::new(a);
            for b in WORDS.iter().chain(&extra) {
                let whole = pattern.distance_under(b, usize::MAX);
                assert_eq!(whole, Some(levenshtein(a, b)), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn a_shape_bound_never_exceeds_the_distance() {
        for a in WORDS {
            for b in WORDS {
                let bound = Shape::of(a).distance_at_least(&Shape::of(b));
                assert!(bound <= levenshtein(a, b), "{a:?} {b:?}: {bound}");
            }
        }
        // It is not a trivial bound.
        assert_eq!(Shape::of("abc").distance_at_least(&Shape::of("xyz")), 3);
        // Counts past the ceiling stay a bound: 20 `a` against 20 `b` are 20 edits apart, and
        // counts cut at 15 show 15 of them.
        let (a, b) = ("a".repeat(20), "b".repeat(20));
        assert_eq!(Shape::of(&a).distance_at_least(&Shape::of(&b)), 15);
        assert_eq!(size_of::<Shape>(), 20);
    }

    #[test]
    fn closest_names_are_ranked_by_distance_then_name() {
        let names = ["beta", "alpha", "alpine", "zeta", "alpha"].map(String::from);
        assert_eq!(closest("alph", names.clone()), ["alpha", "alpine", "beta"]);
        assert_eq!(closest("ZETA", names), ["zeta", "beta", "alpha"]);
        assert!(closest("x", Vec::new()).is_empty());
        let keys = ["skills_folder", "agents_folder"];
        let ranked = closest_by("skils_folder", &keys, |k| k, 1);
        assert_eq!(ranked, [(1, &"skills_folder")]);
    }
}
