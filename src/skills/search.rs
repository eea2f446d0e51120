//! `directory::skills::search {query, limit?, prefix?, type?}` (beyond the contract): the skills
//! ranked for a task, as `{mode, results: [{id, title, description, type, score,
//! disable_model_invocation}]}`.
//!
//! Each skill is a document of its name (the shown id), title, description and the leading
//! [`BODY_CHARS`] of its body, ranked by BM25 (`retrieval::lexical`) and, when a dense lane is
//! handed in and ready, fused with it (`retrieval::fusion`). The floors keep a task no skill
//! serves empty in both modes. Rows are filtered as `list` filters them (visibility, `prefix` on
//! the on-disk id, `type`) after ranking, so the ranking is the same whoever asks. The resources
//! of an Agent Skill (its `scripts/`, `references/` and `assets/` documents) are never results
//! (`skills::resources`): its `SKILL.md` is, and points at them.
//!
//! **Keeping it current.** A skill's counted terms are computed once per distinct content
//! ([`SkillTerms`], keyed by id and content hash, kept across revisions); the index of one
//! revision is built on its first search from those counts (two passes over integers) and kept
//! with the revision's rows (`SkillCache`), so a reconcile that changed one file costs one
//! file's tokenizing and one integer rebuild. Counts no row uses are dropped, and the terms
//! numbered again once most are no longer used, so a long-running worker's term table follows
//! its tree; an index built under an earlier numbering is never searched with a later one's.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

use super::cache::SkillCache;
use super::doubled::Doubled;
use super::listed::Listed;
use crate::code::Code;
use crate::doc::Hash;
use crate::doc::frontmatter;
use crate::error::{Error, Result};
use crate::index::Reader;
use crate::request;
use crate::retrieval::fusion::{DenseHit, DenseRanker, Fused, Mode, SKILL_FLOORS, fuse};
use crate::retrieval::lexical::{Counted, DocTerms, Index, TermTally, Vocabulary};
use crate::retrieval::script_terms::{for_each_script_term, script_terms};
use crate::retrieval::texts::encoder_reads;
use crate::retrieval::tokenize::{
    MAX_CAPABILITY_BYTES, content_terms, truncate_at_char_boundary, truncate_at_word_boundary,
};
use crate::rules::skill::Visibility;

/// How much of a body is searched (bytes, cut on a char boundary): the part that says what a
/// skill is for. More adds words of its procedures, which match tasks it does not serve.
pub const BODY_CHARS: usize = 2000;
/// Results when the request names no `limit`.
pub const DEFAULT_LIMIT: usize = 10;
/// The most results one answer holds.
pub const MAX_LIMIT: usize = 50;
/// The name (shown id) counts this many times, as a function name does in function search.
pub const NAME_WEIGHT: u32 = 2;
/// The description counts this many times: it is written to say when to use the skill.
pub const DESCRIPTION_WEIGHT: u32 = 2;

/// Texts counted at a time when counting many (a first build).
const COUNT_CHUNK: usize = 512;
/// The fewest numbered terms worth numbering again (see `SkillTerms::renumber_when_mostly_stale`).
const RENUMBER_FROM: usize = 4096;

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
    /// The newest revision an index was built for (the index file's epoch, the revision): only
    /// its builds drop counts and number terms again, so a search of an older snapshot never
    /// drops the counts of the newer one, nor makes its index stale.
    newest: Option<(u64, u64)>,
}

/// What a row is searched as, counted: its name, title, description and leading body, the name
/// and description weighted.
fn row_counts(listed: &Listed, body: &str) -> Counted {
    let mut tally = TermTally::default();
    let mut add = |text: &str, weight| for_each_script_term(text, |term| tally.add(term, weight));
    add(&listed.shown_id(), NAME_WEIGHT);
    add(&listed.title(), 1);
    add(&listed.description(), DESCRIPTION_WEIGHT);
    add(body, 1);
    tally.finish()
}

/// What a task is searched as: its terms without the personal pronouns
/// (`tokenize::content_terms`). "Our", "my", "we" say whose work a task is, never which skill
/// serves it, yet skills written in the first person ("write our messaging", "how do we talk
/// about the product") hold them often enough that a pronoun and one chance word made a hit:
/// a task about giving an agent tools for "our database" ranked a marketing-copy skill first.
/// Measured on the `dev` tasks (`tests/search/quality.rs`, 77 match and 20 no-match): lexical
/// recall@10 0.325 → 0.351; hybrid level (48 of 77 at the similarity floor of the time, 0.33);
/// no more no-match tasks answered in either mode.
fn query_terms(query: &str) -> Vec<String> {
    content_terms(&script_terms(query))
}

/// The leading part of a skill's body (after its frontmatter).
pub(super) fn leading_body(text: &str) -> &str {
    let body = &text[frontmatter::split(text).body_offset..];
    truncate_at_char_boundary(body, BODY_CHARS)
}

impl SkillTerms {
    /// The BM25 index of `cache`'s revision (a hit's `doc` is a row's position): each row's
    /// counts reused when its id and content were seen before, computed (the text read from
    /// `reader`) when not. When the revision is the newest built for, counts no row of it uses
    /// are dropped once they outnumber its rows.
    pub fn index(&mut self, reader: &Reader, cache: &SkillCache) -> Result<Index> {
        let rows = cache.rows();
        let key = |listed: &Listed| {
            (
                Box::<str>::from(listed.id()),
                listed.content.unwrap_or_default(),
            )
        };
        // The texts not counted yet are read, split into terms and counted across the cores;
        // only the numbering of each text's distinct terms is sequential.
        let missing: Vec<&Listed> = rows
            .iter()
            .map(|r| &**r)
            .filter(|listed| !self.docs.contains_key(&key(listed)))
            .collect();
        // A chunk at a time: the counted terms of every text at once (a first build at 50,000
        // skills) would hold hundreds of MiB.
        for chunk in missing.chunks(COUNT_CHUNK) {
            let counted: Vec<Result<Counted>> = chunk
                .par_iter()
                .map(|listed| {
                    // A bundled or unservable row is searched by its row alone (no body): the
                    // bundled how-tos' bodies are full of example tasks they do not serve
                    // ("send an email"), which would make them answer those tasks.
                    let text = match listed.content {
                        Some(hash) => reader.content(&hash)?.unwrap_or_default(),
                        None => String::new(),
                    };
                    Ok(row_counts(listed, leading_body(&text)))
                })
                .collect();
            for (listed, counted) in chunk.iter().zip(counted) {
                let doc = DocTerms::number(&mut self.vocabulary, &counted?);
                self.docs.insert(key(listed), Arc::new(doc));
            }
        }
        if self.is_newest(cache) && self.docs.len() > 2 * rows.len().max(1024) {
            let live: HashSet<(Box<str>, Hash)> = rows.iter().map(|r| key(r)).collect();
            self.docs.retain(|key, _| live.contains(key));
            self.renumber_when_mostly_stale();
        }
        let docs: Vec<Arc<DocTerms>> = rows
            .iter()
            .map(|listed| self.docs[&key(listed)].clone())
            .collect();
        let refs: Vec<&DocTerms> = docs.iter().map(|d| &**d).collect();
        Ok(Index::build(&refs, &self.vocabulary))
    }

    /// Whether `cache`'s revision is the newest an index was built for (then it is noted as
    /// such). A rebuilt index file starts its revisions again: its first revision is the newest.
    fn is_newest(&mut self, cache: &SkillCache) -> bool {
        let newest = self
            .newest
            .is_none_or(|(epoch, revision)| cache.epoch != epoch || cache.revision >= revision);
        if newest {
            self.newest = Some((cache.epoch, cache.revision));
        }
        newest
    }

    /// Numbers the terms again (`Vocabulary::renumber`) once most of those numbered are no
    /// longer counted in any kept text: the words of skills since changed or deleted. Runs
    /// right after counts are dropped (once the kept texts have doubled), and leaves at most
    /// twice as many terms numbered as the kept texts use: a tree whose words keep changing
    /// holds a bounded multiple of its live terms.
    fn renumber_when_mostly_stale(&mut self) {
        let size = self.vocabulary.size();
        if size < RENUMBER_FROM
            || size <= 2 * self.vocabulary.terms_in(self.docs.values().map(|d| &**d))
        {
            return;
        }
        // Every count is held here alone (an index keeps postings, not counts): none is
        // copied by `make_mut`, and none outside keeps the old numbers.
        debug_assert!(self.docs.values().all(|d| Arc::strong_count(d) == 1));
        self.vocabulary
            .renumber(self.docs.values_mut().map(Arc::make_mut));
        tracing::debug!(
            before = size,
            after = self.vocabulary.size(),
            "skill search terms numbered again"
        );
    }

    /// The query's terms numbered as `index` was built, with `index`, or with an index of
    /// `cache`'s revision built again, and kept in its place, when the terms were numbered
    /// again since `index` was (a search of one revision racing the build of another).
    fn resolve(
        &mut self,
        index: Arc<Index>,
        reader: &Reader,
        cache: &SkillCache,
        query: &[String],
    ) -> Result<(Arc<Index>, Vec<Option<u32>>)> {
        let index = if index.numbered_by(&self.vocabulary) {
            index
        } else {
            match cache.kept_search_index() {
                // Another search of this revision built it again first.
                Some(kept) if kept.numbered_by(&self.vocabulary) => kept,
                _ => {
                    let fresh = Arc::new(self.index(reader, cache)?);
                    cache.replace_search_index(fresh.clone());
                    fresh
                }
            }
        };
        Ok((index, self.vocabulary.resolve(query)))
    }
}

/// A dense lane keyed by skill id (a caller's own, as the evaluation's) answering as the
/// search reads hits: by row position in `cache`'s revision. Ids not in it are dropped.
pub struct ById<'a> {
    pub lane: &'a dyn DenseRanker,
    pub cache: &'a SkillCache,
}

impl DenseRanker<u32> for ById<'_> {
    fn nearest(&self, query: &str, limit: usize) -> Option<Vec<DenseHit<u32>>> {
        let hits = self.lane.nearest(query, limit)?;
        let rows = self.cache.rows();
        Some(
            hits.into_iter()
                .filter_map(|hit| {
                    let position = rows.search(&hit.key).ok()?;
                    Some(DenseHit {
                        key: position as u32,
                        similarity: hit.similarity,
                        hubness: hit.hubness,
                    })
                })
                .collect(),
        )
    }
}

/// Who a skill search picks for: a caller shown every row it may see, or a model, offered skills
/// it did not ask for (the side lane of `search_functions`): the skills whose frontmatter says
/// `disable-model-invocation` are left out while ranking, and in hybrid mode so are the skills
/// only the lexical lane found (see [`offered_unasked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Audience {
    Caller,
    Model,
}

/// Who asks, and which rows read a file another row reads too (each file is ranked once).
#[derive(Clone, Copy, Debug)]
pub struct Asker<'a> {
    pub audience: Audience,
    pub doubled: &'a Doubled,
}

/// Keeps, of a hybrid ranking, the skills the dense lane found at or above its floor: a skill
/// offered beside functions, unasked, must be near the capability in meaning, not only share
/// words with it. Why: a capability is a few words, and a skill sharing two of them is mostly
/// a coincidence ("store a value under a key" found security skills through "key" and "value").
/// Measured on the `dev` sets over the shared corpus, three skills a query (the side lane's
/// table of `cargo test --test search quality`): of the 54 function needs nothing serves, 9 are
/// offered skills instead of 19; of the 20 skill tasks nothing serves, none instead of 2; of
/// the 77 skill tasks a skill serves, 43 are offered a serving one instead of 46, with as many
/// serving skills offered (69 of 206 instead of 69 of 210).
fn offered_unasked(fused: &mut Vec<Fused<u32>>, nearest: &[DenseHit<u32>]) {
    let near: HashSet<u32> = nearest
        .iter()
        .filter(|hit| hit.similarity >= SKILL_FLOORS.similarity)
        .map(|hit| hit.key)
        .collect();
    fused.retain(|f| near.contains(&f.key));
}

/// `directory::skills::search`. `terms` holds the counted terms across revisions; `dense` is
/// the embedder's lane for skills, when there is one, its hits row positions in `cache`'s
/// revision (as the lexical lane's are: no id is looked up while ranking).
pub fn search(
    reader: &Reader,
    cache: &SkillCache,
    terms_store: &Mutex<SkillTerms>,
    visibility: Visibility<'_>,
    asker: Asker<'_>,
    request: &Value,
    dense: Option<&dyn DenseRanker<u32>>,
) -> Result<Value> {
    let Asker { audience, doubled } = asker;
    let req: SearchRequest = request::parse(request)?;
    // Trimmed, then capped, as a capability of function search is: a task is a sentence or
    // two, and a query of megabytes must not hold the shared term store while it is split.
    let query_text = truncate_at_word_boundary(req.query.trim(), MAX_CAPABILITY_BYTES);
    if query_text.is_empty() {
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
        visibility.allows_id(listed.id(), listed.always_visible)
            && (audience == Audience::Caller || !listed.disable_model_invocation())
            && req
                .prefix
                .as_deref()
                .is_none_or(|p| listed.id().starts_with(p))
            && req
                .kind
                .as_deref()
                .is_none_or(|t| listed.kind().as_deref() == Some(t))
    };
    // An Agent Skill's resources are reached through its `SKILL.md`, never ranked beside it,
    // unless the caller narrowed the search into a resource folder.
    let resources_asked = req
        .prefix
        .as_deref()
        .is_some_and(super::resources::reaches_into_resources);
    // A file the local folder and `skills_folder` both read is ranked once: as its local row
    // when the filters admit that row, else as its second reading (`skills::doubled`).
    let local_in = |id: &str| rows.search(id).is_ok_and(|at| admits(rows.at(at)));
    let admitted = |position: &u32| {
        let listed = rows.at(*position as usize);
        (resources_asked || !cache.is_resource(*position))
            && admits(listed)
            && !doubled.answered_as_local(listed, local_in)
    };
    let split = query_terms(query_text);
    let (index, query) = crate::locks::lock(terms_store).resolve(index, reader, cache, &split)?;
    // Both lanes rank the admitted rows only: a row the filters drop never takes the place of
    // one they keep. The lexical hits are filtered as they are taken, no further than needed.
    let hits = index.search(&query);
    let lexical = hits
        .iter()
        .filter(|h| admitted(&h.doc))
        .map(|h| (h.doc, f64::from(h.score)));
    // The dense lane is asked for more than the answer holds: the fusion's floors drop some.
    let depth = (limit * 4).max(40);
    // The encoder reads English: a task mostly in another script skips it (the lexical lane
    // reads every script). Skills written mostly in another script stay dense hits: on the
    // corpus's 80 such skills (translations of English ones), leaving them out of the dense
    // lane lowered hybrid nDCG@10 (dev 0.568 to 0.557) and offered skills to 2 fewer held-out
    // function needs, for the same recall.
    let nearest = dense
        .filter(|_| encoder_reads(query_text))
        .and_then(|d| d.nearest_where(query_text, depth, &admitted));
    let (mode, ranked): (Mode, Vec<(&Listed, f64)>) = match nearest {
        None => (
            Mode::Lexical,
            lexical
                .take(limit)
                .map(|(doc, score)| (&**rows.at(doc as usize), score))
                .collect(),
        ),
        Some(nearest) => {
            let keys: Vec<u32> = lexical.take(depth).map(|(doc, _)| doc).collect();
            let mut fused = fuse(&keys, &nearest, SKILL_FLOORS);
            if audience == Audience::Model {
                offered_unasked(&mut fused, &nearest);
            }
            (
                Mode::Hybrid,
                fused
                    .into_iter()
                    .map(|f| (cache.at(f.key), f.score))
                    .collect(),
            )
        }
    };
    let mut ranked = ranked;
    let admitted_row = |id: &str| {
        let position = rows.search(id).ok()? as u32;
        admitted(&position).then(|| &**rows.at(position as usize))
    };
    // A doubled file's second reading (`iii/pdf`) names its local row (`pdf`).
    if let Some(named) = named_row(query_text, |id| {
        admitted_row(id).or_else(|| doubled.local_id(id).and_then(admitted_row))
    }) {
        named_first(&mut ranked, named);
    }
    let results: Vec<Value> = ranked
        .into_iter()
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

/// The row a task names by its id (`pdf`, `mailer/send-email`, `iii://pdf`, any case), when
/// the task is one id and the search admits that row: an agent that knows a skill's id and
/// searches for it wants that skill first, whatever the lanes make of the word (a longer id
/// holding it, `netlify-deploy-2`, may rank above it).
fn named_row<'a>(task: &str, find: impl Fn(&str) -> Option<&'a Listed>) -> Option<&'a Listed> {
    let id = task.trim().to_lowercase();
    let id = id.strip_prefix("iii://").unwrap_or(&id);
    let id = id.strip_suffix(".md").unwrap_or(id);
    if id.is_empty() || id.contains(char::is_whitespace) {
        return None;
    }
    find(id).or_else(|| find(&format!("{id}/index")))
}

/// Puts `named` first in `ranked` (moved there when it was ranked lower), at the leader's score
/// or its own, whichever is higher.
fn named_first<'a>(ranked: &mut Vec<(&'a Listed, f64)>, named: &'a Listed) {
    let own = ranked
        .iter()
        .position(|(listed, _)| std::ptr::eq(*listed, named))
        .map(|at| ranked.remove(at).1);
    let leader = ranked.first().map(|(_, score)| *score);
    let score = own.into_iter().chain(leader).fold(0.0, f64::max);
    ranked.insert(0, (named, score));
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use serde_json::json;

    use super::{Asker, Doubled};
    use crate::Directory;
    use crate::config::Config;
    use crate::retrieval::tokenize::MAX_CAPABILITY_BYTES;

    /// A row's counted terms are those of its parts as plain term lists, the name and the
    /// description repeated by their weights (how rows were counted before the tally).
    #[test]
    fn a_row_counts_as_its_weighted_parts_listed_term_by_term() {
        use crate::retrieval::lexical::{DocTerms, Vocabulary};
        use crate::retrieval::script_terms::script_terms;
        use crate::rules::skill::SkillRow;
        use crate::skills::listed::Listed;

        let row = SkillRow {
            title: "Deploy Sites".into(),
            description: "Use when deploying static sites to the edge; rolls back failures.".into(),
            ..SkillRow::blank("ops/deploySite")
        };
        let listed = Listed::new("ops/deploySite".into(), &row);
        let body = "Run the deploy. The deploys of sites roll back when a check fails.";
        let mut listed_terms = Vec::new();
        for (text, weight) in [
            (listed.shown_id(), super::NAME_WEIGHT),
            (listed.title(), 1),
            (listed.description(), super::DESCRIPTION_WEIGHT),
            (body.into(), 1),
        ] {
            for _ in 0..weight {
                listed_terms.extend(script_terms(&text));
            }
        }
        let mut v = Vocabulary::default();
        let counted = DocTerms::number(&mut v, &super::row_counts(&listed, body));
        let listed = DocTerms::count(&mut v, listed_terms.iter().map(String::as_str));
        assert_eq!(counted, listed);
    }

    fn write_skill(skills: &Path, id: &str, description: &str, body: &str) {
        let file = skills.join(format!("{id}.md"));
        fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        let text = format!("---\ndescription: {description}\n---\n# {id}\n\n{body}\n");
        fs::write(file, text).expect("write");
    }

    fn answer(directory: &Directory, query: &str) -> serde_json::Value {
        directory
            .search_skills(&json!({ "query": query, "limit": 50 }), None, None)
            .expect("search")["results"]
            .clone()
    }

    /// The ids `request` answers, in order.
    fn result_ids(directory: &Directory, request: serde_json::Value) -> Vec<String> {
        directory
            .search_skills(&request, None, None)
            .expect("search")["results"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["id"].as_str().expect("id").to_string())
            .collect()
    }

    const QUERIES: [&str; 4] = [
        "send an email report",
        "deploy the site",
        "rotate database credentials",
        "plan a garden",
    ];

    #[test]
    fn a_later_revision_ranks_as_a_directory_opened_on_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = Config::for_root(dir.path());
        let skills = config.paths.skills_folder.clone();
        let topics = [
            "email report",
            "site deploy",
            "database credentials",
            "queue retries",
        ];
        for i in 0..40 {
            let topic = topics[i % topics.len()];
            write_skill(
                &skills,
                &format!("s{i:02}"),
                &format!("Work with {topic}."),
                topic,
            );
        }
        let directory = Directory::open(config.clone()).expect("open");
        directory.reconcile().expect("reconcile");
        for query in QUERIES {
            answer(&directory, query);
        }
        // Edits, an addition and a removal: the next index reuses the other skills' counts.
        write_skill(&skills, "s03", "Send an email report every week.", "email");
        write_skill(
            &skills,
            "s41",
            "Deploy the site to production.",
            "deploy site",
        );
        fs::remove_file(skills.join("s05.md")).expect("remove");
        directory.reconcile().expect("reconcile");
        let later: Vec<_> = QUERIES.iter().map(|q| answer(&directory, q)).collect();
        drop(directory);
        let fresh = Directory::open(config).expect("reopen");
        let anew: Vec<_> = QUERIES.iter().map(|q| answer(&fresh, q)).collect();
        assert_eq!(later, anew);
        assert!(later[0].as_array().expect("rows").len() > 1);
        assert_eq!(later[0][0]["id"], "s03");
        assert!(
            !later[1]
                .as_array()
                .expect("rows")
                .iter()
                .any(|r| r["id"] == "s05")
        );
        assert_eq!(later[3], json!([]));
    }

    /// Skills written in other scripts are found by the words they are written in, whichever
    /// spelling the task uses (accents, case, composed or decomposed), and only by them.
    #[test]
    fn a_skill_in_any_script_is_found_by_its_own_words() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = Config::for_root(dir.path());
        let skills = config.paths.skills_folder.clone();
        let skill =
            |id: &str, description: &str, body: &str| write_skill(&skills, id, description, body);
        skill(
            "zh/fanyi",
            "将英文技术文档翻译成简体中文，保持术语一致。",
            "翻译助手",
        );
        skill(
            "ja/honyaku",
            "英語のドキュメントを日本語に翻訳する。",
            "翻訳ガイド",
        );
        skill(
            "de/rechnung",
            "Prüft eingehende Rechnungen auf Fehler.",
            "Rechnungsprüfung",
        );
        skill(
            "ru/otchet",
            "Составляет ежемесячный отчёт о продажах.",
            "Отчёт",
        );
        skill("en/email", "Send an email report every week.", "email");
        let directory = Directory::open(config).expect("open");
        directory.reconcile().expect("reconcile");
        let found = |query: &str| result_ids(&directory, json!({ "query": query }));
        assert_eq!(found("翻译成中文"), ["zh/fanyi"]);
        assert_eq!(found("日本語に翻訳"), ["ja/honyaku"]);
        assert_eq!(found("rechnungsprufung"), ["de/rechnung"]);
        assert_eq!(found("RECHNUNGSPRÜFUNG"), ["de/rechnung"]);
        assert_eq!(found("Rechnungspru\u{308}fung"), ["de/rechnung"]);
        assert_eq!(found("ОТЧЁТ о продажах"), ["ru/otchet"]);
        assert_eq!(found("email report"), ["en/email"]);
        // Words no skill holds find nothing, in any script.
        assert_eq!(found("天气预报"), Vec::<String>::new());
        assert_eq!(found("Wettervorhersage für morgen"), Vec::<String>::new());
    }

    #[test]
    fn a_pronoun_in_the_task_is_no_evidence() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = Config::for_root(dir.path());
        let skills = config.paths.skills_folder.clone();
        write_skill(
            &skills,
            "messaging",
            "Write our messaging: what our headline says and how we talk about our product.",
            "Our voice, our proof points, our calls to action.",
        );
        write_skill(
            &skills,
            "db-tools",
            "Let an agent talk to a database through tools.",
            "Expose queries as tools.",
        );
        for (i, topic) in ["garden plans", "email reports", "site deploys"]
            .iter()
            .enumerate()
        {
            write_skill(
                &skills,
                &format!("s{i}"),
                &format!("Work with {topic}."),
                topic,
            );
        }
        let directory = Directory::open(config).expect("open");
        directory.reconcile().expect("reconcile");
        let ids = |query: &str| result_ids(&directory, json!({ "query": query, "limit": 50 }));
        // "our" and "talk" would carry two thirds of the task: the messaging skill is about
        // neither databases nor agents.
        assert_eq!(ids("talk to our database"), ["db-tools"]);
        assert!(ids("our lasagna").is_empty());
    }

    #[test]
    fn a_task_that_is_a_skills_id_answers_that_skill_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::for_root(dir.path());
        config.settings.filter_unregistered = false;
        let skills = config.paths.skills_folder.clone();
        // Longer ids and texts that repeat the word outrank the skill the word names.
        for id in ["netlify-deploy-2", "netlify-cli-and-deploy"] {
            write_skill(
                &skills,
                id,
                "Deploy to Netlify: netlify deploy, netlify deploy --prod, netlify deploy logs.",
                "netlify deploy netlify deploy",
            );
        }
        write_skill(&skills, "netlify-deploy", "Ship a site.", "Static hosting.");
        write_skill(&skills, "pdf/index", "Read PDF files.", "Forms.");
        let directory = Directory::open(config).expect("open");
        directory.reconcile().expect("reconcile");
        let first = |query: &str| result_ids(&directory, json!({ "query": query }))[0].clone();
        for query in [
            "netlify-deploy",
            " Netlify-Deploy ",
            "iii://netlify-deploy",
            "netlify-deploy.md",
        ] {
            assert_eq!(first(query), "netlify-deploy", "{query:?}");
        }
        assert_eq!(first("pdf"), "pdf");
        // A task of several words, or a prefix that leaves the skill out, names nothing.
        assert_ne!(first("netlify deploy"), "netlify-deploy");
        let narrowed = result_ids(
            &directory,
            json!({ "query": "netlify-deploy", "prefix": "netlify-deploy-" }),
        );
        assert!(
            !narrowed.contains(&"netlify-deploy".to_string()),
            "{narrowed:?}"
        );
    }

    #[test]
    fn filters_apply_after_ranking_and_the_limit_is_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::for_root(dir.path());
        config.settings.filter_unregistered = false;
        let skills = config.paths.skills_folder.clone();
        write_skill(&skills, "mailer/report", "Send an email report.", "email");
        write_skill(
            &skills,
            "other/report",
            "Send an email report daily.",
            "email",
        );
        fs::write(
            skills.join("mailer/index.md"),
            "---\ntype: index\ndescription: The mailer worker sends email.\n---\n# Mailer\n",
        )
        .expect("write");
        let directory = Directory::open(config).expect("open");
        directory.reconcile().expect("reconcile");
        let ids = |request: serde_json::Value| result_ids(&directory, request);
        let all = ids(json!({ "query": "send email report" }));
        assert_eq!(all.len(), 3, "{all:?}");
        let mailer: Vec<String> = all
            .iter()
            .filter(|id| id.starts_with("mailer"))
            .cloned()
            .collect();
        assert_eq!(mailer.len(), 2);
        assert_eq!(
            ids(json!({ "query": "send email report", "prefix": "mailer/" })),
            mailer
        );
        assert_eq!(
            ids(json!({ "query": "send email report", "type": "index" })),
            ["mailer"]
        );
        assert_eq!(
            ids(json!({ "query": "send email report", "limit": 1 })),
            all[..1]
        );
        assert_eq!(
            ids(json!({ "query": "send email report", "limit": 500 })),
            all
        );
        // A task longer than the cap is read up to it: words past it change nothing.
        let past_the_cap = " ".repeat(MAX_CAPABILITY_BYTES);
        let long = format!("send email report{past_the_cap}queue jobs");
        assert_eq!(ids(json!({ "query": long })), all);
        // The cap counts from the task's first word: leading blanks are not the task.
        let indented = format!("{past_the_cap}  send email report");
        assert_eq!(ids(json!({ "query": indented })), all);
        // A word the cap cuts in two is left out, not searched as its first letters.
        let repeated = "report ".repeat(MAX_CAPABILITY_BYTES / 7 + 1);
        assert!(!ids(json!({ "query": repeated })).is_empty());
        let blank = directory.search_skills(&json!({ "query": " " }), None, None);
        assert!(blank.is_err());
    }

    #[test]
    fn an_agent_skills_resources_are_listed_and_served_but_ranked_only_when_asked_for() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::for_root(dir.path());
        config.settings.filter_unregistered = false;
        let skills = config.paths.skills_folder.clone();
        let write = |rel: &str, text: &str| {
            let file = skills.join(rel);
            fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            fs::write(file, text).expect("write");
        };
        // An Agent Skill: its entry, a resource in each of the three folders (one nested
        // deeper), and a page beside the entry, which is no resource.
        write(
            "pdf/SKILL.md",
            "---\nname: pdf\ndescription: Read, merge and split PDF files.\n---\n# PDF\n\nTo fill a form, read references/forms.md.\n",
        );
        let resource = "---\ndescription: Fill the form fields of a PDF form.\n---\n# Forms\n\nFill each PDF form field.\n";
        write("pdf/references/forms.md", resource);
        write("pdf/assets/forms/template.md", resource);
        write("pdf/scripts/fill-form.md", resource);
        write(
            "pdf/forms-guide.md",
            "---\ndescription: A guide to PDF form fields.\n---\n# Guide\n\nForm fields.\n",
        );
        // An iii worker bundle's entry is an `index.md`: its `references/` pages are skills.
        write(
            "mailer/index.md",
            "---\ndescription: The mailer worker.\n---\n# Mailer\n",
        );
        write(
            "mailer/references/api.md",
            "---\ndescription: Fill PDF form fields for mail merges.\n---\n# API\n",
        );
        let directory = Directory::open(config).expect("open");
        directory.reconcile().expect("reconcile");
        let found = result_ids(&directory, json!({ "query": "fill pdf form fields" }));
        assert_eq!(found.len(), 3, "{found:?}");
        for id in ["pdf", "pdf/forms-guide", "mailer/references/api"] {
            assert!(found.iter().any(|f| f == id), "{id} in {found:?}");
        }
        // Narrowed to the skill's own folder (`prefix` is on the on-disk id, so its entry
        // `pdf/index` is in it), its resources still are not results.
        let mut narrowed = result_ids(
            &directory,
            json!({ "query": "fill pdf form fields", "prefix": "pdf/" }),
        );
        narrowed.sort();
        assert_eq!(narrowed, ["pdf", "pdf/forms-guide"]);
        // Narrowed into a resource folder, the caller asks for its resources: they are found.
        for (prefix, resource) in [
            ("pdf/references/", "pdf/references/forms"),
            ("pdf/assets", "pdf/assets/forms/template"),
        ] {
            let inside = result_ids(
                &directory,
                json!({ "query": "fill pdf form fields", "prefix": prefix }),
            );
            assert_eq!(inside, [resource], "{prefix}");
        }
        // `list` and `get` serve them as any other row.
        let listed = directory
            .read(
                crate::ReadFunction::SkillsList,
                &json!({ "prefix": "pdf/" }),
                None,
            )
            .expect("list");
        let ids: Vec<&str> = listed["skills"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["id"].as_str().expect("id"))
            .collect();
        assert_eq!(
            ids,
            [
                "pdf/assets/forms/template",
                "pdf/forms-guide",
                "pdf",
                "pdf/references/forms",
                "pdf/scripts/fill-form"
            ]
        );
        let got = directory
            .read(
                crate::ReadFunction::SkillsGet,
                &json!({ "id": "pdf/references/forms" }),
                None,
            )
            .expect("get");
        assert!(
            got["body"]
                .as_str()
                .expect("body")
                .contains("Fill each PDF form field.")
        );
        // Nor are they embedded: the status counts the four other contents (the three
        // resources share one).
        let status = directory.search_status().expect("status");
        assert_eq!(
            (status["embedded"].as_u64(), status["pending"].as_u64()),
            (Some(0), Some(4))
        );
    }

    /// A word of letters only, distinct for each `n` (the tokenizer keeps such words whole).
    fn word(mut n: usize) -> String {
        let mut out = String::from("qz");
        loop {
            out.push((b'a' + (n % 26) as u8) as char);
            n /= 26;
            if n == 0 {
                return out;
            }
        }
    }

    #[test]
    fn words_of_skills_long_changed_are_numbered_again_and_an_older_snapshot_still_searches() {
        use std::sync::{Arc, Mutex};

        use super::{Audience, SkillTerms, search};
        use crate::rules::skill::Visibility;
        use crate::skills::SkillCache;

        const SKILLS: usize = 1030;
        const WORDS: usize = 4;
        let dir = tempfile::tempdir().expect("tempdir");
        let config = Config::for_root(dir.path());
        let skills = config.paths.skills_folder.clone();
        let directory = Directory::open(config).expect("open");
        let terms = Mutex::new(SkillTerms::default());
        let everyone = Visibility {
            filter_unregistered: false,
            installed: None,
        };
        // Each round gives every skill words of its own that no other round uses.
        let unique = |round: usize, skill: usize| -> Vec<String> {
            (0..WORDS)
                .map(|w| word((round * SKILLS + skill) * WORDS + w))
                .collect()
        };
        let found = |reader: &crate::index::Reader, cache: &SkillCache, query: String| {
            let request = json!({ "query": query });
            search(
                reader,
                cache,
                &terms,
                everyone,
                Asker {
                    audience: Audience::Caller,
                    doubled: &Doubled::default(),
                },
                &request,
                None,
            )
            .expect("search")["results"]
                .as_array()
                .expect("rows")
                .iter()
                .map(|r| r["id"].as_str().expect("id").to_string())
                .collect::<Vec<_>>()
        };
        let mut snapshots = Vec::new();
        for round in 0..3 {
            for i in 0..SKILLS {
                let words = unique(round, i).join(" ");
                write_skill(&skills, &format!("s{i:04}"), "Keep the ledger.", &words);
            }
            directory.reconcile().expect("reconcile");
            let reader = directory.index().read().expect("reader");
            let cache = SkillCache::build(&reader).expect("cache");
            let query = unique(round, 7)[..2].join(" ");
            assert_eq!(found(&reader, &cache, query), ["s0007"], "round {round}");
            snapshots.push((reader, cache));
        }
        // Three rounds were counted; the first two rounds' words are counted nowhere now.
        let vocabulary_size = || crate::locks::lock(&terms).vocabulary.size();
        let live = WORDS * SKILLS + 2;
        assert!(
            vocabulary_size() <= 2 * live,
            "{} numbered for {live} live",
            vocabulary_size()
        );
        let index_of = |cache: &SkillCache| cache.kept_search_index().expect("built");
        let (latest_reader, latest) = &snapshots[2];
        let latest_index = index_of(latest);
        // The snapshot of round 0, whose index was built under the first numbering, still
        // finds its own words, and not those of the last round.
        let (reader, cache) = &snapshots[0];
        let stale = index_of(cache);
        assert_eq!(found(reader, cache, unique(0, 9)[1..].join(" ")), ["s0009"]);
        assert!(found(reader, cache, unique(2, 9).join(" ")).is_empty());
        // The index built again is kept in the stale one's place, and a second search that
        // took the stale one before it was replaced uses it too: none builds it again.
        let kept = index_of(cache);
        assert!(!Arc::ptr_eq(&kept, &stale));
        let query = unique(0, 3);
        let (again, _) = crate::locks::lock(&terms)
            .resolve(stale, reader, cache, &query)
            .expect("resolve");
        assert!(Arc::ptr_eq(&again, &kept));
        // Searches of the older snapshots count their words again, more than twice the rows,
        // yet drop nothing and number nothing again: the newest revision's index stays good.
        let (reader, cache) = &snapshots[1];
        assert_eq!(found(reader, cache, unique(1, 4).join(" ")), ["s0004"]);
        assert!(Arc::ptr_eq(&index_of(latest), &latest_index));
        assert!(latest_index.numbered_by(&crate::locks::lock(&terms).vocabulary));
        let query = unique(2, 5).join(" ");
        assert_eq!(found(latest_reader, latest, query), ["s0005"]);
        assert!(Arc::ptr_eq(&index_of(latest), &latest_index));
    }
}
