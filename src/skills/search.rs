//! `directory::skills::search {query, limit?, prefix?, type?}` (beyond the contract): the skills
//! ranked for a task, as `{mode, results: [{id, title, description, type, score,
//! disable_model_invocation}]}`.
//!
//! Each skill is a document of its name (the shown id), title, description and the leading
//! [`BODY_CHARS`] of its body, ranked by BM25 (`retrieval::lexical`) and, when a dense lane is
//! handed in and ready, fused with it (`retrieval::fusion`). The floors keep a task no skill
//! serves empty in both modes. Rows are filtered as `list` filters them (visibility, `prefix` on
//! the on-disk id, `type`) after ranking, so the ranking is the same whoever asks.
//!
//! **Keeping it current.** A skill's counted terms are computed once per distinct content
//! ([`SkillTerms`], keyed by id and content hash, kept across revisions); the index of one
//! revision is built on its first search from those counts (two passes over integers) and kept
//! with the revision's rows (`SkillCache`), so a reconcile that changed one file costs one
//! file's tokenizing and one integer rebuild.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::{Value, json};

use super::cache::SkillCache;
use super::listed::Listed;
use crate::code::Code;
use crate::doc::Hash;
use crate::doc::frontmatter;
use crate::error::{Error, Result};
use crate::index::Reader;
use crate::request;
use crate::retrieval::fusion::{DenseRanker, Mode, fuse};
use crate::retrieval::lexical::{DocTerms, Index, Vocabulary};
use crate::retrieval::tokenize::{terms, truncate_at_char_boundary};
use crate::rules::skill::Visibility;

/// How much of a body is searched (bytes, cut on a char boundary): the part that says what a
/// skill is for. More adds words of its procedures, which match tasks it does not serve.
pub const BODY_CHARS: usize = 2000;
/// Results when the request names no `limit`.
pub const DEFAULT_LIMIT: usize = 10;
/// The most results one answer holds.
pub const MAX_LIMIT: usize = 50;
/// The name (shown id) counts this many times, as a function name does in function search.
pub const NAME_WEIGHT: usize = 2;
/// The description counts this many times: it is written to say when to use the skill.
pub const DESCRIPTION_WEIGHT: usize = 2;

#[derive(Deserialize)]
struct SearchRequest {
    query: String,
    limit: Option<usize>,
    prefix: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// The counted terms of every skill text seen, keyed by on-disk id and content hash; shared by
/// the indexes of successive revisions.
#[derive(Default)]
pub struct SkillTerms {
    vocabulary: Vocabulary,
    docs: HashMap<(Box<str>, Hash), Arc<DocTerms>>,
}

/// What a row is searched as: name, title, description, the leading body.
fn row_terms(listed: &Listed, body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let name = terms(&listed.shown_id());
    for _ in 0..NAME_WEIGHT {
        out.extend(name.iter().cloned());
    }
    out.extend(terms(&listed.title()));
    let description = terms(&listed.description());
    for _ in 0..DESCRIPTION_WEIGHT {
        out.extend(description.iter().cloned());
    }
    out.extend(terms(body));
    out
}

/// The leading part of a skill's body (after its frontmatter).
fn leading_body(text: &str) -> &str {
    let body = &text[frontmatter::split(text).body_offset..];
    truncate_at_char_boundary(body, BODY_CHARS)
}

impl SkillTerms {
    /// The BM25 index of `cache`'s revision (a hit's `doc` is a row's position): each row's counts reused when its id and content were
    /// seen before, computed (the text read from `reader`) when not. Counts no row uses any
    /// more are dropped once they outnumber the rows.
    pub fn index(&mut self, reader: &Reader, cache: &SkillCache) -> Result<Index> {
        let rows = cache.rows();
        let mut docs: Vec<Arc<DocTerms>> = Vec::with_capacity(rows.len());
        for listed in rows {
            // A bundled or unservable row is searched by its row alone (no hash, no body).
            let key = (listed.id.clone(), listed.content.unwrap_or_default());
            if let Some(doc) = self.docs.get(&key) {
                docs.push(doc.clone());
                continue;
            }
            let text = match listed.content {
                Some(hash) => reader.content(&hash)?.unwrap_or_default(),
                None => String::new(),
            };
            let counted = row_terms(listed, leading_body(&text));
            let doc = Arc::new(DocTerms::count(
                &mut self.vocabulary,
                counted.iter().map(String::as_str),
            ));
            self.docs.insert(key, doc.clone());
            docs.push(doc);
        }
        if self.docs.len() > 2 * rows.len().max(1024) {
            let live: std::collections::HashSet<(Box<str>, Hash)> = rows
                .iter()
                .map(|r| (r.id.clone(), r.content.unwrap_or_default()))
                .collect();
            self.docs.retain(|key, _| live.contains(key));
        }
        let refs: Vec<&DocTerms> = docs.iter().map(|d| &**d).collect();
        Ok(Index::build(&refs, self.vocabulary.size()))
    }
}

/// `directory::skills::search`. `terms` holds the counted terms across revisions; `dense` is
/// the embedder's lane for skills, when there is one.
pub fn search(
    reader: &Reader,
    cache: &SkillCache,
    terms_store: &Mutex<SkillTerms>,
    visibility: Visibility<'_>,
    request: &Value,
    dense: Option<&dyn DenseRanker>,
) -> Result<Value> {
    let req: SearchRequest = request::parse(request)?;
    if req.query.trim().is_empty() {
        return Err(Error::coded(
            Code::SkillsRequestRefused,
            "query must not be blank.".to_string(),
            &[],
        ));
    }
    let limit = req.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let index = cache.search_index(|| {
        let mut store = crate::locks::lock(terms_store);
        store.index(reader, cache)
    })?;
    let rows = cache.rows();
    let admits = |listed: &Listed| {
        visibility.allows_id(&listed.id, listed.always_visible)
            && req
                .prefix
                .as_deref()
                .is_none_or(|p| listed.id.starts_with(p))
            && req
                .kind
                .as_deref()
                .is_none_or(|t| listed.kind().as_deref() == Some(t))
    };
    let query = crate::locks::lock(terms_store)
        .vocabulary
        .resolve(&terms(&req.query));
    let lexical: Vec<(u32, f64)> = index
        .search(&query)
        .into_iter()
        .map(|h| (h.doc, f64::from(h.score)))
        .collect();
    // The dense lane is asked for more than the answer holds: filters apply after ranking.
    let depth = (limit * 4).max(40);
    let nearest = dense.and_then(|d| d.nearest(&req.query, depth));
    let (mode, ranked): (Mode, Vec<(&Listed, f64)>) = match nearest {
        None => (
            Mode::Lexical,
            lexical
                .iter()
                .map(|&(doc, score)| (&*rows[doc as usize], score))
                .collect(),
        ),
        Some(nearest) => {
            let keys: Vec<String> = lexical
                .iter()
                .take(depth)
                .map(|&(doc, _)| rows[doc as usize].id.to_string())
                .collect();
            let fused = fuse(&keys, &nearest);
            (
                Mode::Hybrid,
                fused
                    .into_iter()
                    .filter_map(|f| cache.row(&f.key).map(|row| (row, f.score)))
                    .collect(),
            )
        }
    };
    let results: Vec<Value> = ranked
        .into_iter()
        .filter(|(listed, _)| admits(listed))
        .take(limit)
        .map(|(listed, score)| {
            json!({
                "id": listed.shown_id(),
                "title": listed.title(),
                "description": listed.description(),
                "type": listed.kind(),
                "score": (score * 1e4).round() / 1e4,
                "disable_model_invocation": listed.disable_model_invocation(),
            })
        })
        .collect();
    Ok(json!({ "mode": mode, "results": results }))
}
