//! A compact Okapi BM25 index for many documents (tens of thousands of skills), and the
//! weighted-coverage floor that keeps a query no document serves empty.
//!
//! Terms are numbered by a [`Vocabulary`] that outlives any one index, so a document's counted
//! terms ([`DocTerms`]) can be computed once per distinct content and reused by every later
//! index: building an index is then two passes over integers (size, then place), with no
//! string hashing. Postings are one flat byte array, each term's run of (document, count)
//! pairs gap-coded ([`super::gaps`]), as are each document's counted terms: at 50,000
//! skills (6 million pairs) both take about 2 bytes a pair where a packed `u32` took 4.

use std::collections::HashMap;
use std::hash::BuildHasher;

use super::gaps::{self, Coded, Pairs};

/// The hasher of term texts: numbering a first build's 6 million (document, term) pairs spent
/// a tenth of its time in the standard library's SipHash. foldhash is several times faster on
/// short keys and still seeded per process, so terms in a hostile bundle cannot be chosen to
/// collide.
type TermHasher = foldhash::fast::RandomState;

/// Term-frequency saturation (the function search's: 1.2).
pub const K1: f32 = 1.2;
/// Document-length normalization (the function search's: 0.75).
pub const B: f32 = 0.75;

/// A hit is kept only when the terms it matches carry at least this share of the query's
/// total idf: a query about something no document mentions (its rare words unmatched) stays
/// empty even when its common words match. Tuned on the `dev` skill tasks.
pub const COVERAGE_FLOOR: f32 = 0.4;

/// The most terms numbered (2^24): a bound on the vocabulary's memory, far above any tree's.
const TERM_BITS: u32 = 24;
/// Occurrences are counted up to 255 (BM25 saturates long before).
const MAX_COUNT: u32 = 0xff;

/// Term text to term number. A number stays its term's until [`Vocabulary::renumber`], which
/// keeps only the terms still counted somewhere and starts a new numbering: an [`Index`] is
/// searched only with the numbering it was built under ([`Index::numbered_by`]).
#[derive(Default)]
pub struct Vocabulary {
    ids: HashMap<Box<str>, u32, TermHasher>,
    /// Which numbering this is: one more after each renumbering.
    numbering: u32,
}

impl Vocabulary {
    /// The number of `term`, assigned when new. `None` once 2^24 terms exist (a document then
    /// loses the words not numbered yet; [`Vocabulary::renumber`] keeps a long-lived
    /// vocabulary far from that).
    pub fn intern(&mut self, term: &str) -> Option<u32> {
        if let Some(&id) = self.ids.get(term) {
            return Some(id);
        }
        let id = u32::try_from(self.ids.len())
            .ok()
            .filter(|&n| n < 1 << TERM_BITS)?;
        self.ids.insert(term.into(), id);
        Some(id)
    }

    pub fn get(&self, term: &str) -> Option<u32> {
        self.ids.get(term).copied()
    }

    /// A query's distinct terms (in order of first appearance), numbered; `None` for a term
    /// never seen.
    pub fn resolve(&self, query: &[String]) -> Vec<Option<u32>> {
        let mut seen = std::collections::HashSet::with_capacity(query.len());
        query
            .iter()
            .filter(|term| seen.insert(term.as_str()))
            .map(|term| self.get(term))
            .collect()
    }

    /// How many term numbers were handed out.
    pub fn size(&self) -> usize {
        self.ids.len()
    }

    /// How many distinct terms `docs` hold between them.
    pub fn terms_in<'a>(&self, docs: impl IntoIterator<Item = &'a DocTerms>) -> usize {
        self.live(docs).iter().filter(|&&live| live).count()
    }

    /// Keeps only the terms `docs` hold, numbered again from 0 in their old order, rewrites
    /// `docs` to the new numbers and starts a new numbering. Why: terms are numbered as texts
    /// are first counted and never given back otherwise, so a long-running worker whose skills
    /// keep changing words would grow the table, and every index's per-term offsets, for
    /// good (and at 2^24 terms lose words). Every document counted under the old numbering
    /// must be among `docs`: any other would keep numbers that now name other terms.
    pub fn renumber<'a>(&mut self, docs: impl IntoIterator<Item = &'a mut DocTerms>) {
        let docs: Vec<&mut DocTerms> = docs.into_iter().collect();
        let live = self.live(docs.iter().map(|d| &**d));
        let mut next = 0u32;
        let renumbered: Vec<u32> = live
            .iter()
            .map(|&live| {
                let id = next;
                next += u32::from(live);
                id
            })
            .collect();
        self.ids.retain(|_, id| live[*id as usize]);
        for id in self.ids.values_mut() {
            *id = renumbered[*id as usize];
        }
        self.ids.shrink_to_fit();
        for doc in docs {
            // The old order of the terms is kept, so the pairs stay ascending.
            doc.packed = gaps::encode(
                Pairs::new(&doc.packed).map(|(term, count)| (renumbered[term as usize], count)),
            );
        }
        self.numbering = self.numbering.wrapping_add(1);
    }

    /// Which term numbers `docs` hold, by number.
    fn live<'a>(&self, docs: impl IntoIterator<Item = &'a DocTerms>) -> Vec<bool> {
        let mut live = vec![false; self.ids.len()];
        for doc in docs {
            for (term, _) in doc.pairs() {
                live[term as usize] = true;
            }
        }
        live
    }
}

/// A document's distinct terms with their counts, sorted by term number, and its length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DocTerms {
    /// `(term, count)` pairs, gap-coded.
    packed: Box<[u8]>,
    length: u32,
}

impl DocTerms {
    /// Counts `terms` (numbering new ones in `vocabulary`): tests' way to make a document.
    #[cfg(test)]
    pub fn count<'a>(
        vocabulary: &mut Vocabulary,
        terms: impl IntoIterator<Item = &'a str>,
    ) -> DocTerms {
        let mut tally = TermTally::default();
        for term in terms {
            tally.add(term, 1);
        }
        DocTerms::number(vocabulary, &tally.finish())
    }

    /// `counted`'s terms numbered in `vocabulary` (new ones numbered now). A term refused a
    /// number (the vocabulary is full) is left out but still counts in the length.
    pub fn number(vocabulary: &mut Vocabulary, counted: &Counted) -> DocTerms {
        let mut pairs: Vec<(u32, u32)> = counted
            .terms()
            .filter_map(|(term, count)| Some((vocabulary.intern(term)?, count.min(MAX_COUNT))))
            .collect();
        pairs.sort_unstable();
        DocTerms {
            packed: gaps::encode(pairs),
            length: counted.length,
        }
    }

    /// The `(term, count)` pairs, by term number.
    fn pairs(&self) -> Pairs<'_> {
        Pairs::new(&self.packed)
    }
}

/// Collects one document's terms, with a weight each, to count them away from the vocabulary
/// (so on any thread): every term goes into one buffer, and [`finish`](Self::finish) sorts
/// them and adds up each one's weights.
#[derive(Default)]
pub struct TermTally {
    text: String,
    added: Vec<Span>,
    length: u32,
}

/// A term in a tally's buffer (`start..end`), a hash of it to sort by, and its weight, or once
/// finished its count.
#[derive(Clone, Copy)]
struct Span {
    hash: u64,
    start: usize,
    end: usize,
    weight: u32,
}

impl TermTally {
    /// Adds `term`, as if it occurred `weight` times.
    pub fn add(&mut self, term: &str, weight: u32) {
        let start = self.text.len();
        self.text.push_str(term);
        let end = self.text.len();
        let hash = foldhash::fast::FixedState::default().hash_one(term);
        self.added.push(Span {
            hash,
            start,
            end,
            weight,
        });
        self.length = self.length.saturating_add(weight);
    }

    /// The distinct terms, each with its summed weight. Sorted by hash first: equal terms end
    /// up side by side while most comparisons are of two integers, not two strings. The hash
    /// is unseeded (unlike the vocabulary's): a collision here costs one string comparison,
    /// never a wrong count.
    pub fn finish(mut self) -> Counted {
        let text = &self.text;
        let term = |span: &Span| &text[span.start..span.end];
        self.added
            .sort_unstable_by(|a, b| a.hash.cmp(&b.hash).then_with(|| term(a).cmp(term(b))));
        // `dedup_by` hands the later span first and keeps the earlier one.
        self.added.dedup_by(|later, kept| {
            let same = later.hash == kept.hash && term(later) == term(kept);
            if same {
                kept.weight = kept.weight.saturating_add(later.weight);
            }
            same
        });
        Counted {
            text: self.text,
            distinct: self.added,
            length: self.length,
        }
    }
}

/// One document's distinct terms and their counts, not yet numbered ([`TermTally::finish`]).
pub struct Counted {
    text: String,
    distinct: Vec<Span>,
    length: u32,
}

impl Counted {
    /// `(term, count)`, each distinct term once.
    pub fn terms(&self) -> impl Iterator<Item = (&str, u32)> {
        self.distinct
            .iter()
            .map(|span| (&self.text[span.start..span.end], span.weight))
    }
}

/// One document's result for a query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// The document's position in the list the index was built from.
    pub doc: u32,
    pub score: f32,
    /// How many distinct query terms the document contains.
    pub matched: u32,
    /// The share of the query's idf those terms carry (0 to 1).
    pub coverage: f32,
}

/// A BM25 index over documents given as [`DocTerms`].
#[derive(Default)]
pub struct Index {
    /// The [`Vocabulary::numbering`] its terms are numbered by.
    numbering: u32,
    /// `offsets[t]..offsets[t + 1]` are the bytes of term `t`'s postings.
    offsets: Vec<usize>,
    /// How many documents hold each term.
    df: Vec<u32>,
    /// Each term's `(document, count)` pairs in document order, gap-coded.
    postings: Box<[u8]>,
    /// `K1 · (1 − B + B · length / average length)` per document.
    norms: Vec<f32>,
}

impl Index {
    /// Indexes `docs` (in order: a hit's `doc` is a position here), counted by `vocabulary`.
    pub fn build(docs: &[&DocTerms], vocabulary: &Vocabulary) -> Index {
        let terms = vocabulary.size();
        // Each posting is coded as the gap from the term's previous document.
        let mut previous = vec![0u32; terms];
        let mut df = vec![0u32; terms];
        let mut offsets = vec![0usize; terms + 1];
        for (i, doc) in docs.iter().enumerate() {
            for (term, count) in doc.pairs() {
                let t = term as usize;
                offsets[t + 1] += Coded::new(i as u32 - previous[t], count).as_bytes().len();
                previous[t] = i as u32;
                df[t] += 1;
            }
        }
        for t in 0..terms {
            offsets[t + 1] += offsets[t];
        }
        let mut fill = offsets.clone();
        previous.fill(0);
        let mut postings = vec![0u8; offsets[terms]].into_boxed_slice();
        for (i, doc) in docs.iter().enumerate() {
            for (term, count) in doc.pairs() {
                let t = term as usize;
                let coded = Coded::new(i as u32 - previous[t], count);
                let bytes = coded.as_bytes();
                postings[fill[t]..fill[t] + bytes.len()].copy_from_slice(bytes);
                fill[t] += bytes.len();
                previous[t] = i as u32;
            }
        }
        let total: f64 = docs.iter().map(|d| f64::from(d.length)).sum();
        let average = if docs.is_empty() {
            0.0
        } else {
            total / docs.len() as f64
        };
        let norms = docs
            .iter()
            .map(|d| {
                let relative = if average > 0.0 {
                    f64::from(d.length) / average
                } else {
                    0.0
                };
                K1 * (1.0 - B + B * relative as f32)
            })
            .collect();
        Index {
            numbering: vocabulary.numbering,
            offsets,
            df,
            postings,
            norms,
        }
    }

    /// Whether a query numbered by `vocabulary` may be searched here: it has not been
    /// renumbered since this index was built.
    pub fn numbered_by(&self, vocabulary: &Vocabulary) -> bool {
        self.numbering == vocabulary.numbering
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.norms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.norms.is_empty()
    }

    fn idf(&self, df: usize) -> f32 {
        let n = self.norms.len() as f32;
        (((n - df as f32 + 0.5) / (df as f32 + 0.5)) + 1.0).ln()
    }

    /// Term `term`'s `(document, count)` pairs, in document order.
    fn postings_of(&self, term: u32) -> Pairs<'_> {
        let t = term as usize;
        if t + 1 >= self.offsets.len() {
            return Pairs::new(&[]);
        }
        Pairs::new(&self.postings[self.offsets[t]..self.offsets[t + 1]])
    }

    /// How many documents hold `term`.
    fn df(&self, term: u32) -> usize {
        self.df.get(term as usize).map_or(0, |&n| n as usize)
    }

    /// Every document holding a query term that passes the floors (the weighted coverage, and
    /// two distinct terms when the query has two), best first, ties in document order. `query`
    /// is the query's distinct terms as [`Vocabulary::resolve`] numbers them; a term the
    /// vocabulary never saw (or no document holds) counts in the query's idf as the rarest term
    /// would, so a query about something absent stays uncovered.
    pub fn search(&self, query: &[Option<u32>]) -> Vec<Hit> {
        if query.is_empty() || self.is_empty() {
            return Vec::new();
        }
        let terms: Vec<(Option<u32>, f32)> = query
            .iter()
            .map(|&id| {
                let df = id.map_or(0, |id| self.df(id));
                (id.filter(|_| df > 0), self.idf(df))
            })
            .collect();
        let total_idf: f32 = terms.iter().map(|(_, idf)| idf).sum();
        // Dense accumulators (a hash map per query cost more than zeroing these at 50,000
        // documents once a common term touched thousands of them).
        let n = self.norms.len();
        let mut score = vec![0f32; n];
        let mut matched = vec![0u32; n];
        let mut covered = vec![0f32; n];
        let mut touched: Vec<u32> = Vec::new();
        for &(id, idf) in &terms {
            let Some(id) = id else { continue };
            for (doc, count) in self.postings_of(id) {
                let d = doc as usize;
                let tf = count as f32;
                if matched[d] == 0 {
                    touched.push(doc);
                }
                score[d] += idf * tf * (K1 + 1.0) / (tf + self.norms[d]);
                matched[d] += 1;
                covered[d] += idf;
            }
        }
        let needed = query.len().min(2) as u32;
        let mut hits: Vec<Hit> = touched
            .into_iter()
            .map(|doc| {
                let d = doc as usize;
                Hit {
                    doc,
                    score: score[d],
                    matched: matched[d],
                    coverage: if total_idf > 0.0 {
                        covered[d] / total_idf
                    } else {
                        0.0
                    },
                }
            })
            .filter(|h| h.matched >= needed && h.coverage >= COVERAGE_FLOOR && h.score > 0.0)
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::seeded::Xorshift;

    fn docs(vocabulary: &mut Vocabulary, texts: &[&str]) -> Vec<DocTerms> {
        texts
            .iter()
            .map(|t| DocTerms::count(vocabulary, t.split_whitespace()))
            .collect()
    }

    fn q(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    fn index(vocabulary: &Vocabulary, docs: &[DocTerms]) -> Index {
        Index::build(&docs.iter().collect::<Vec<_>>(), vocabulary)
    }

    #[test]
    fn scores_follow_the_okapi_formula() {
        let mut v = Vocabulary::default();
        let d = docs(&mut v, &["send email email", "store file", "send file now"]);
        let index = index(&v, &d);
        let hits = index.search(&v.resolve(&q("email")));
        assert_eq!(hits.len(), 1);
        let idf = ((2.5f32 / 1.5) + 1.0).ln();
        let norm = K1 * (1.0 - B + B * 3.0 / (8.0 / 3.0));
        let expected = idf * 2.0 * (K1 + 1.0) / (2.0 + norm);
        assert!((hits[0].score - expected).abs() < 1e-5);
        assert_eq!((hits[0].doc, hits[0].matched), (0, 1));
        assert!((hits[0].coverage - 1.0).abs() < 1e-6);
    }

    #[test]
    fn two_terms_are_needed_when_the_query_has_two() {
        let mut v = Vocabulary::default();
        let d = docs(&mut v, &["mail send", "mail only", "send only", "other"]);
        let index = index(&v, &d);
        let found: Vec<u32> = index
            .search(&v.resolve(&q("mail send")))
            .iter()
            .map(|h| h.doc)
            .collect();
        assert_eq!(found, [0]);
        assert_eq!(index.search(&v.resolve(&q("mail mail"))).len(), 2);
    }

    #[test]
    fn an_unknown_rare_word_leaves_a_query_uncovered() {
        let mut v = Vocabulary::default();
        let d = docs(
            &mut v,
            &[
                "plan care routine",
                "care plan team",
                "deploy site",
                "deploy app",
                "write docs",
            ],
        );
        let index = index(&v, &d);
        // `bonsai` is in no document: `care plan` alone does not carry enough of the query.
        assert!(index.search(&v.resolve(&q("bonsai care"))).is_empty());
        assert!(!index.search(&v.resolve(&q("care plan"))).is_empty());
    }

    #[test]
    fn an_index_built_from_reused_doc_terms_equals_a_fresh_one() {
        let mut v = Vocabulary::default();
        let mut d = docs(&mut v, &["alpha beta", "beta gamma", "gamma delta alpha"]);
        let before = index(&v, &d);
        // A later revision: one document replaced, one added; the others' counts are reused.
        d[1] = DocTerms::count(&mut v, "epsilon beta".split_whitespace());
        d.push(DocTerms::count(&mut v, "alpha epsilon".split_whitespace()));
        let after = index(&v, &d);
        let mut fresh_v = Vocabulary::default();
        let fresh_d = docs(
            &mut fresh_v,
            &[
                "alpha beta",
                "epsilon beta",
                "gamma delta alpha",
                "alpha epsilon",
            ],
        );
        let fresh = index(&fresh_v, &fresh_d);
        for query in ["alpha", "beta epsilon", "gamma alpha", "zeta"] {
            let a = after.search(&v.resolve(&q(query)));
            let b = fresh.search(&fresh_v.resolve(&q(query)));
            assert_eq!(a, b, "{query}");
        }
        assert_eq!(before.len(), 3);
        assert!(Index::default().search(&v.resolve(&q("alpha"))).is_empty());
    }

    #[test]
    fn numbering_again_keeps_the_live_terms_and_their_ranking() {
        let mut v = Vocabulary::default();
        let d = docs(
            &mut v,
            &[
                "alpha beta beta",
                "gone words only",
                "gamma alpha",
                "more gone",
            ],
        );
        let before = index(&v, &d);
        // Documents 1 and 3 are dropped: their words ("gone", "words", "only", "more") are
        // numbered nowhere else.
        let mut kept = vec![d[0].clone(), d[2].clone()];
        assert_eq!(v.terms_in(&kept), 3);
        v.renumber(kept.iter_mut());
        assert_eq!(v.size(), 3);
        assert!(v.get("gone").is_none() && v.get("beta").is_some());
        assert!(
            !before.numbered_by(&v),
            "an index of the old numbering is refused"
        );
        let after = index(&v, &kept);
        assert!(after.numbered_by(&v));
        let mut fresh_v = Vocabulary::default();
        let fresh_d = docs(&mut fresh_v, &["alpha beta beta", "gamma alpha"]);
        let fresh = index(&fresh_v, &fresh_d);
        for query in ["alpha", "beta", "gamma alpha", "gone", "beta zeta"] {
            assert_eq!(
                after.search(&v.resolve(&q(query))),
                fresh.search(&fresh_v.resolve(&q(query))),
                "{query}"
            );
        }
        // New words are numbered after the kept ones.
        let added = DocTerms::count(&mut v, "delta alpha".split_whitespace());
        assert_eq!(v.get("delta"), Some(3));
        kept.push(added);
        assert_eq!(index(&v, &kept).search(&v.resolve(&q("delta"))).len(), 1);
    }

    #[test]
    fn a_weight_counts_as_that_many_occurrences() {
        let mut v = Vocabulary::default();
        let mut tally = TermTally::default();
        let added = [
            ("alpha", 2),
            ("beta", 1),
            ("alpha", 1),
            ("gamma", 200),
            ("gamma", 100),
        ];
        for (term, weight) in added {
            tally.add(term, weight);
        }
        let doc = DocTerms::number(&mut v, &tally.finish());
        let mut counts: Vec<(u32, u32)> = doc.pairs().collect();
        counts.sort_unstable();
        let mut expected = vec![
            (v.get("alpha").unwrap(), 3),
            (v.get("beta").unwrap(), 1),
            (v.get("gamma").unwrap(), MAX_COUNT),
        ];
        expected.sort_unstable();
        assert_eq!(counts, expected, "summed, the count capped at 255");
        assert_eq!(doc.length, 304, "the length uncapped");
    }

    /// Documents of a fixed-seed random corpus: Zipf-like words (a few common, many rare),
    /// some repeated so that counts above 1 and the 255 cap occur.
    fn random_corpus(documents: usize) -> Vec<String> {
        let mut random = Xorshift::new(0x2545_f491_4f6c_dd1d);
        (0..documents)
            .map(|_| {
                let mut words: Vec<String> = (0..1 + random.below(60))
                    .map(|_| {
                        let spread = 1 + random.below(5_000);
                        format!("w{}", random.below(spread))
                    })
                    .collect();
                if random.below(50) == 0 {
                    words.extend(std::iter::repeat_n("flood".to_string(), 300));
                }
                words.join(" ")
            })
            .collect()
    }

    /// [`random_corpus`] counted and indexed: the texts, vocabulary, counts and index.
    fn random_index(documents: usize) -> (Vec<String>, Vocabulary, Vec<DocTerms>, Index) {
        let texts = random_corpus(documents);
        let mut v = Vocabulary::default();
        let d = docs(
            &mut v,
            &texts.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let index = index(&v, &d);
        (texts, v, d, index)
    }

    #[test]
    fn the_index_ranks_as_bm25_computed_from_the_documents_themselves() {
        let (texts, v, _, index) = random_index(3_000);
        // Each document's words counted directly, without the index.
        let counted: Vec<HashMap<&str, u32>> = texts
            .iter()
            .map(|t| {
                let mut counts = HashMap::new();
                for word in t.split_whitespace() {
                    *counts.entry(word).or_default() += 1;
                }
                counts
            })
            .collect();
        let average = texts
            .iter()
            .map(|t| t.split_whitespace().count() as f32)
            .sum::<f32>()
            / texts.len() as f32;
        for query in [
            "w0",
            "w1 w2",
            "w7 w4000 w3",
            "flood w0",
            "w4999 nowhere",
            "w3 w3",
        ] {
            let mut distinct: Vec<&str> = query.split_whitespace().collect();
            distinct.dedup();
            let idf = |term: &str| {
                let df = counted.iter().filter(|c| c.contains_key(term)).count();
                index.idf(df)
            };
            let total_idf: f32 = distinct.iter().map(|t| idf(t)).sum();
            let mut expected: Vec<(u32, u32, f32)> = Vec::new();
            for (doc, counts) in counted.iter().enumerate() {
                let length = texts[doc].split_whitespace().count() as f32;
                let norm = K1 * (1.0 - B + B * length / average);
                let held: Vec<&&str> = distinct
                    .iter()
                    .filter(|t| counts.contains_key(**t))
                    .collect();
                let score: f32 = held
                    .iter()
                    .map(|t| {
                        let tf = counts[**t].min(MAX_COUNT) as f32;
                        idf(t) * tf * (K1 + 1.0) / (tf + norm)
                    })
                    .sum();
                let coverage = held.iter().map(|t| idf(t)).sum::<f32>() / total_idf;
                let needed = distinct.len().min(2);
                if held.len() >= needed && coverage >= COVERAGE_FLOOR && score > 0.0 {
                    expected.push((doc as u32, held.len() as u32, score));
                }
            }
            let hits = index.search(&v.resolve(&q(query)));
            let mut found: Vec<(u32, u32, f32)> =
                hits.iter().map(|h| (h.doc, h.matched, h.score)).collect();
            found.sort_by_key(|&(doc, ..)| doc);
            assert_eq!(found.len(), expected.len(), "{query}");
            for (f, e) in found.iter().zip(&expected) {
                assert_eq!((f.0, f.1), (e.0, e.1), "{query}");
                assert!(
                    (f.2 - e.2).abs() <= 1e-4 * e.2.max(1.0),
                    "{query}: {f:?} {e:?}"
                );
            }
        }
    }

    #[test]
    fn postings_and_counts_take_about_two_bytes_a_pair() {
        let (_, _, d, index) = random_index(3_000);
        let pairs: usize = index.df.iter().map(|&n| n as usize).sum();
        let counts: usize = d.iter().map(|doc| doc.packed.len()).sum();
        assert_eq!(
            pairs,
            d.iter().map(|doc| doc.pairs().count()).sum::<usize>()
        );
        // A packed u32 a pair would be 4 bytes.
        assert!(
            index.postings.len() * 2 <= pairs * 5,
            "{} for {pairs}",
            index.postings.len()
        );
        assert!(counts * 2 <= pairs * 5, "{counts} for {pairs}");
    }
}
