//! Okapi BM25 over a fixed set of documents: term postings, per-term idf and per-document
//! length norms are computed once when the index is built, so a query only walks the postings
//! of its own terms.
//!
//! Pure and in memory; an index never changes after it is built.

use std::collections::HashMap;

/// Term-frequency saturation (contract: 1.2).
pub const K1: f64 = 1.2;
/// Document-length normalization (contract: 0.75).
pub const B: f64 = 0.75;

/// One document's result for a query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// The document's position in the list the index was built from.
    pub doc: usize,
    pub score: f64,
    /// How many distinct query terms the document contains.
    pub matched: usize,
}

/// A BM25 index.
#[derive(Clone, Debug, Default)]
pub struct Index {
    terms: HashMap<String, Term>,
    /// `K1 · (1 − B + B · length / average length)` per document.
    norms: Vec<f64>,
}

#[derive(Clone, Debug)]
struct Term {
    idf: f64,
    /// (document, occurrences), in document order.
    postings: Vec<(u32, u32)>,
}

impl Index {
    /// Indexes documents given as their term lists (a document's length is its term count).
    pub fn build(documents: &[Vec<String>]) -> Index {
        let count = documents.len();
        let total: usize = documents.iter().map(Vec::len).sum();
        let average = if count == 0 {
            0.0
        } else {
            total as f64 / count as f64
        };
        let mut postings: HashMap<&str, Vec<(u32, u32)>> = HashMap::new();
        for (doc, terms) in documents.iter().enumerate() {
            let mut counts: HashMap<&str, u32> = HashMap::new();
            for term in terms {
                *counts.entry(term.as_str()).or_default() += 1;
            }
            for (term, occurrences) in counts {
                postings
                    .entry(term)
                    .or_default()
                    .push((doc as u32, occurrences));
            }
        }
        let n = count as f64;
        let terms = postings
            .into_iter()
            .map(|(term, mut postings)| {
                postings.sort_unstable_by_key(|(doc, _)| *doc);
                let df = postings.len() as f64;
                let idf = (((n - df + 0.5) / (df + 0.5)) + 1.0).ln();
                (term.to_string(), Term { idf, postings })
            })
            .collect();
        let norms = documents
            .iter()
            .map(|terms| {
                let relative = if average > 0.0 {
                    terms.len() as f64 / average
                } else {
                    0.0
                };
                K1 * (1.0 - B + B * relative)
            })
            .collect();
        Index { terms, norms }
    }

    /// How many documents the index holds.
    #[cfg(any(test, feature = "testing"))]
    pub fn len(&self) -> usize {
        self.norms.len()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.norms.is_empty()
    }

    /// Every document that contains at least one of the query's terms (repeated query terms
    /// count once), in document order.
    pub fn score(&self, query: &[String]) -> Vec<Hit> {
        let mut distinct: Vec<&str> = Vec::with_capacity(query.len());
        for term in query {
            if !distinct.contains(&term.as_str()) {
                distinct.push(term);
            }
        }
        let mut scores: HashMap<u32, (f64, usize)> = HashMap::new();
        for term in distinct {
            let Some(entry) = self.terms.get(term) else {
                continue;
            };
            for &(doc, occurrences) in &entry.postings {
                let tf = f64::from(occurrences);
                let gain = entry.idf * tf * (K1 + 1.0) / (tf + self.norms[doc as usize]);
                let slot = scores.entry(doc).or_default();
                slot.0 += gain;
                slot.1 += 1;
            }
        }
        let mut hits: Vec<Hit> = scores
            .into_iter()
            .map(|(doc, (score, matched))| Hit {
                doc: doc as usize,
                score,
                matched,
            })
            .collect();
        hits.sort_unstable_by_key(|h| h.doc);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    fn q(text: &str) -> Vec<String> {
        doc(text)
    }

    #[test]
    fn scores_follow_the_okapi_formula() {
        let docs = vec![
            doc("send email email"),
            doc("store file"),
            doc("send file now"),
        ];
        let index = Index::build(&docs);
        let hits = index.score(&q("email"));
        assert_eq!(hits.len(), 1);
        // N = 3, df = 1: idf = ln((3 - 1 + 0.5) / (1 + 0.5) + 1); avgdl = 8/3, dl = 3, tf = 2.
        let idf = ((2.5f64 / 1.5) + 1.0).ln();
        let norm = K1 * (1.0 - B + B * 3.0 / (8.0 / 3.0));
        let expected = idf * 2.0 * (K1 + 1.0) / (2.0 + norm);
        assert!((hits[0].score - expected).abs() < 1e-12);
        assert_eq!((hits[0].doc, hits[0].matched), (0, 1));
    }

    #[test]
    fn repeated_query_terms_count_once_and_matched_counts_distinct_terms() {
        let docs = vec![doc("send email"), doc("send file"), doc("other thing")];
        let index = Index::build(&docs);
        let once = index.score(&q("send email"));
        let twice = index.score(&q("send email send email"));
        assert_eq!(once, twice);
        assert_eq!(
            once.iter().map(|h| (h.doc, h.matched)).collect::<Vec<_>>(),
            [(0, 2), (1, 1)]
        );
        assert!(index.score(&q("nothing here")).is_empty());
    }

    #[test]
    fn a_rarer_term_weighs_more_and_a_longer_document_less() {
        let docs = vec![
            doc("queue push"),
            doc("queue pop"),
            doc("queue peek"),
            doc("push notification"),
        ];
        let index = Index::build(&docs);
        let hits = index.score(&q("queue push"));
        let by_doc: HashMap<usize, f64> = hits.iter().map(|h| (h.doc, h.score)).collect();
        // `push` is rarer than `queue`.
        assert!(by_doc[&3] > by_doc[&1]);
        let long = Index::build(&[doc("email"), doc("email padding padding padding")]);
        let hits = long.score(&q("email"));
        assert!(hits[0].score > hits[1].score);
    }

    #[test]
    fn an_empty_index_answers_nothing() {
        let index = Index::build(&[]);
        assert!(index.is_empty());
        assert!(index.score(&q("anything")).is_empty());
    }
}
