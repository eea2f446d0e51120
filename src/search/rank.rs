//! From BM25 hits to the candidates of a search: each capability is ranked against its own
//! leader (two distinct terms at least, the coverage-aware function floor, the namespace
//! floor), the rankings are merged round-robin so every capability gets a slot before any
//! gets a second, and the merge is capped at 12 candidates from at most 6 workers.
//!
//! Pure functions; scores of different capabilities are never compared.

use std::collections::HashSet;

use super::bm25::{Hit, Index};

/// A document must match at least this many distinct query terms (contract).
pub const MIN_MATCHED_TERMS: usize = 2;
/// A function under this fraction of its capability's leader is a tail (contract: 50%).
pub const FUNCTION_FLOOR: f64 = 0.5;
/// At or above this fraction of the leader a function stays even when it covers fewer terms
/// than the leader (contract: 85%); below it, only full coverage keeps it.
pub const FUNCTION_KEEP: f64 = 0.85;
/// A worker stays only when its best function reaches this fraction of the leader (contract).
pub const NAMESPACE_FLOOR: f64 = 0.4;
/// Candidates per search (contract).
pub const MAX_CANDIDATES: usize = 12;
/// Workers per search (contract).
pub const MAX_WORKERS: usize = 6;

/// Beside an embedder, a lexical hit must match one in this many of its capability's distinct
/// terms, rounded up ([`matched_beside_dense`]).
pub const TERMS_PER_MATCH_BESIDE_DENSE: usize = 5;

/// The documents that match at least [`MIN_MATCHED_TERMS`] distinct terms with a positive
/// score, best first (ties in document order, which is name order in a catalog).
pub fn ranked_hits(index: &Index, query: &[String]) -> Vec<Hit> {
    ranked_hits_matching(index, query, MIN_MATCHED_TERMS)
}

/// How many distinct terms of `query` a lexical hit must match when an embedder ranks beside
/// it: one of every [`TERMS_PER_MATCH_BESIDE_DENSE`], and the contract's two at least. Up to
/// 10 terms that is the contract's two; a longer capability asks more. Why: beside the
/// embedder a lexical hit is enough to answer a capability, and two words of a long need are
/// met by chance (on the `dev` cases, "come over … and help me carry a heavy old piano up two
/// flights of stairs into the new apartment" met `coder::edit_file` on "old" and "new").
/// Reading the whole text, the embedder finds what serves a long need.
pub fn matched_beside_dense(query: &[String]) -> usize {
    let distinct: HashSet<&String> = query.iter().collect();
    distinct
        .len()
        .div_ceil(TERMS_PER_MATCH_BESIDE_DENSE)
        .max(MIN_MATCHED_TERMS)
}

/// [`ranked_hits`] with hits matching at least `min_matched` distinct terms.
pub fn ranked_hits_matching(index: &Index, query: &[String], min_matched: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> = index
        .score(query)
        .into_iter()
        .filter(|h| h.score > 0.0 && h.matched >= min_matched)
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
    hits
}

/// The coverage-aware function floor against the leader (the first hit): a hit stays when it
/// scores at least [`FUNCTION_FLOOR`] of the leader AND either matches as many distinct terms
/// as the leader or scores at least [`FUNCTION_KEEP`] of it. A worker's family members that
/// share only its name and one generic word fall away; co-relevant functions stay.
pub fn coverage_prune(ranked: Vec<Hit>) -> Vec<Hit> {
    let Some(leader) = ranked.first().copied() else {
        return ranked;
    };
    ranked
        .into_iter()
        .filter(|h| {
            h.score >= FUNCTION_FLOOR * leader.score
                && (h.matched >= leader.matched || h.score >= FUNCTION_KEEP * leader.score)
        })
        .collect()
}

/// The namespace floor over a ranking (best first): a worker survives when its first, best
/// entry scores at least `floor` of the top score, and then all its entries stay. `worker`
/// names an id's worker (`Catalog::worker_of`); an id it names none for is dropped.
pub fn namespace_floor<'a, 'w>(
    ranked: Vec<(&'a str, f64)>,
    floor: f64,
    worker: impl Fn(&'a str) -> Option<&'w str>,
) -> Vec<(&'a str, f64)> {
    let Some(&(_, top)) = ranked.first() else {
        return ranked;
    };
    let mut judged: HashSet<&str> = HashSet::new();
    let mut surviving: HashSet<&str> = HashSet::new();
    for &(id, score) in &ranked {
        if let Some(ns) = worker(id)
            && judged.insert(ns)
            && score >= floor * top
        {
            surviving.insert(ns);
        }
    }
    ranked
        .into_iter()
        .filter(|(id, _)| worker(id).is_some_and(|ns| surviving.contains(ns)))
        .collect()
}

/// Merges rankings round-robin: round `r` takes the `r`-th entry of each ranking in order,
/// skipping ids already taken, until `budget` ids or every ranking is exhausted.
pub fn round_robin<'a>(rankings: &[Vec<&'a str>], budget: usize) -> Vec<&'a str> {
    let mut taken: Vec<&str> = Vec::new();
    let longest = rankings.iter().map(Vec::len).max().unwrap_or(0);
    for round in 0..longest {
        for ranking in rankings {
            if taken.len() == budget {
                return taken;
            }
            if let Some(&id) = ranking.get(round)
                && !taken.contains(&id)
            {
                taken.push(id);
            }
        }
    }
    taken
}

/// Keeps the ids of the first `max` workers met (in order; `worker` names an id's worker, as
/// for [`namespace_floor`]); ids of later workers, and ids it names none for, are dropped.
pub fn limit_workers<'a, 'w>(
    selected: Vec<&'a str>,
    max: usize,
    worker: impl Fn(&'a str) -> Option<&'w str>,
) -> Vec<&'a str> {
    let mut workers: Vec<&str> = Vec::new();
    selected
        .into_iter()
        .filter(|id| {
            let Some(ns) = worker(id) else {
                return false;
            };
            if workers.contains(&ns) {
                return true;
            }
            if workers.len() == max {
                return false;
            }
            workers.push(ns);
            true
        })
        .collect()
}

/// Groups ids by worker (as `worker` names it), workers in order of first appearance, ids in
/// order; ids it names none for are left out.
pub fn group_by_worker<'a, 'w>(
    ids: &[&'a str],
    worker: impl Fn(&'a str) -> Option<&'w str>,
) -> Vec<(&'w str, Vec<&'a str>)> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for &id in ids {
        let Some(ns) = worker(id) else {
            continue;
        };
        match groups.iter_mut().find(|(n, _)| *n == ns) {
            Some((_, members)) => members.push(id),
            None => groups.push((ns, vec![id])),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::catalog::namespace;

    fn hit(doc: usize, score: f64, matched: usize) -> Hit {
        Hit {
            doc,
            score,
            matched,
        }
    }

    #[test]
    fn the_coverage_prune_example_of_the_contract() {
        // Leader 10 with 3 terms; 8.9/2 kept (≥85%); 6.0/3 kept (full coverage, ≥50%);
        // 5.2/2 dropped (partial coverage under 85%); 2.0/3 dropped (under 50%).
        let ranked = vec![
            hit(0, 10.0, 3),
            hit(1, 8.9, 2),
            hit(2, 6.0, 3),
            hit(3, 5.2, 2),
            hit(4, 2.0, 3),
        ];
        let kept: Vec<usize> = coverage_prune(ranked).iter().map(|h| h.doc).collect();
        assert_eq!(kept, [0, 1, 2]);
        assert!(coverage_prune(Vec::new()).is_empty());
    }

    #[test]
    fn ranked_hits_need_two_distinct_terms() {
        let docs: Vec<Vec<String>> = [
            "mail send",
            "mail send mail",
            "mail only",
            "send only",
            "nothing",
        ]
        .iter()
        .map(|d| d.split(' ').map(String::from).collect())
        .collect();
        let index = Index::build(&docs);
        let query: Vec<String> = ["mail", "send"].map(String::from).to_vec();
        let docs: Vec<usize> = ranked_hits(&index, &query).iter().map(|h| h.doc).collect();
        assert_eq!(docs.len(), 2);
        assert!(docs.contains(&0) && docs.contains(&1));
        let single: Vec<String> = vec!["mail".into()];
        assert!(ranked_hits(&index, &single).is_empty());
    }

    #[test]
    fn beside_a_dense_lane_a_long_query_asks_one_term_in_five() {
        let words = |text: &str| -> Vec<String> { text.split(' ').map(String::from).collect() };
        // Up to 10 distinct terms, the contract's two; duplicates count once.
        assert_eq!(matched_beside_dense(&[]), MIN_MATCHED_TERMS);
        assert_eq!(matched_beside_dense(&words("send mail")), 2);
        assert_eq!(matched_beside_dense(&words("a b c d e f g h i j")), 2);
        assert_eq!(matched_beside_dense(&words("a b c d e f g h i j a b")), 2);
        assert_eq!(matched_beside_dense(&words("a b c d e f g h i j k")), 3);
        assert_eq!(
            matched_beside_dense(&words("a b c d e f g h i j k l m n o p")),
            4
        );

        let docs: Vec<Vec<String>> = ["old new file edit", "old new a b c", "x y"]
            .iter()
            .map(|d| words(d))
            .collect();
        let index = Index::build(&docs);
        let long = words("carry old piano up new stairs into apartment over a b");
        let matched = |min| -> Vec<usize> {
            ranked_hits_matching(&index, &long, min)
                .iter()
                .map(|h| h.doc)
                .collect()
        };
        // Two words of eleven meet the contract's floor, not one in five.
        assert_eq!(matched(MIN_MATCHED_TERMS), [1, 0]);
        assert_eq!(matched(matched_beside_dense(&long)), [1]);
        assert_eq!(ranked_hits(&index, &long).len(), 2);
    }

    #[test]
    fn the_namespace_floor_keeps_whole_workers_whose_best_entry_reaches_40_percent() {
        let ranked = vec![
            ("mail::send", 10.0),
            ("sms::send", 4.5),
            ("mail::queue", 1.0),
            ("push::notify", 3.9),
            ("sms::status", 0.5),
            ("nonamespace", 9.0),
        ];
        let kept: Vec<&str> = namespace_floor(ranked, NAMESPACE_FLOOR, namespace)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(
            kept,
            ["mail::send", "sms::send", "mail::queue", "sms::status"]
        );
    }

    #[test]
    fn round_robin_gives_every_capability_a_slot_before_any_gets_a_second() {
        let alpha = vec!["a::one", "a::two", "a::three"];
        let beta = vec!["b::one", "a::one", "b::two"];
        assert_eq!(
            round_robin(&[alpha.clone(), beta.clone()], 12),
            ["a::one", "b::one", "a::two", "a::three", "b::two"]
        );
        assert_eq!(
            round_robin(&[alpha, beta], 3),
            ["a::one", "b::one", "a::two"]
        );
        assert!(round_robin(&[], 12).is_empty());
    }

    #[test]
    fn at_most_six_workers_in_order_of_first_appearance() {
        let ids = vec![
            "a::1", "b::1", "a::2", "c::1", "d::1", "e::1", "f::1", "g::1", "b::2", "bare",
        ];
        let kept = limit_workers(ids, MAX_WORKERS, namespace);
        assert_eq!(
            kept,
            [
                "a::1", "b::1", "a::2", "c::1", "d::1", "e::1", "f::1", "b::2"
            ]
        );
        assert_eq!(
            group_by_worker(&kept, namespace),
            [
                ("a", vec!["a::1", "a::2"]),
                ("b", vec!["b::1", "b::2"]),
                ("c", vec!["c::1"]),
                ("d", vec!["d::1"]),
                ("e", vec!["e::1"]),
                ("f", vec!["f::1"]),
            ]
        );
    }
}
