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

/// [`levenshtein`] when it is below `limit`, else `None`, usually without filling the table: the
/// distance is at least the difference in length, and at least the larger side of the
/// difference between the strings' multisets of characters (checked for ASCII strings).
pub fn levenshtein_below(a: &str, b: &str, limit: usize) -> Option<usize> {
    if a.chars().count().abs_diff(b.chars().count()) >= limit {
        return None;
    }
    if a.is_ascii() && b.is_ascii() {
        let mut counts = [0i32; 128];
        for byte in a.bytes() {
            counts[byte as usize] += 1;
        }
        for byte in b.bytes() {
            counts[byte as usize] -= 1;
        }
        let only_a: i32 = counts.iter().filter(|c| **c > 0).sum();
        let only_b: i32 = -counts.iter().filter(|c| **c < 0).sum::<i32>();
        if only_a.max(only_b) as usize >= limit {
            return None;
        }
    }
    let distance = levenshtein(a, b);
    (distance < limit).then_some(distance)
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
        let words = [
            "",
            "a",
            "ab",
            "ba",
            "abc",
            "acb",
            "database",
            "databse",
            "data-base",
            "é☕x",
            "x☕é",
            "index",
            "iii/index",
            "sandbox",
            "iii-sandbox",
        ];
        for a in words {
            for b in words {
                assert_eq!(levenshtein(a, b), reference(a, b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn a_bounded_distance_is_the_distance_below_its_limit() {
        let words = [
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
        for a in words {
            for b in words {
                let distance = levenshtein(a, b);
                for limit in 0..=25 {
                    let expected = (distance < limit).then_some(distance);
                    assert_eq!(
                        levenshtein_below(a, b, limit),
                        expected,
                        "{a:?} {b:?} {limit}"
                    );
                }
            }
        }
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
