//! Text retrieval shared by function search and skill search, pure and in memory:
//!
//! - `tokenize`: text to terms, the same for documents and queries (function search's, the
//!   contract's: ASCII words);
//! - `script_terms`: skill search's terms, of text in any script (accents folded, pairs of
//!   characters for scripts written without spaces), ASCII words as `tokenize` makes them;
//! - `lexical`: a compact BM25 index over many documents (skills), its weighted-coverage floor;
//! - `gaps`: the gap-coded `(key, count)` lists that index keeps its postings and counts in;
//! - `fusion`: the dense lane a sentence embedder plugs into ([`fusion::DenseRanker`]), and the
//!   reciprocal-rank fusion of the lexical and dense rankings with the floors that keep a query
//!   no document serves empty. Without a dense lane the answer is lexical, floors included;
//! - `texts`: what a skill and a function are embedded as (one choice for stored vectors and
//!   the evaluation alike).
//!
//! **Architecture invariant:** no I/O; callers hand in texts and get ranked positions back.

pub mod fusion;
mod gaps;
pub mod lexical;
pub mod script_terms;
#[cfg(test)]
mod seeded;
pub mod texts;
pub mod tokenize;
