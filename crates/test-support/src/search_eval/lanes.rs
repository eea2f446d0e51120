//! What the quality tables are scored over, shared by the quality tests (`tests/search/quality.rs`)
//! and the benchmark suite's `quality` command: the evaluation catalog, a `Directory` over the
//! shared corpus, and the dense lanes of both catalogs with the model.
//!
//! A lane embeds the same texts the worker embeds (`retrieval::texts`), quantizes them and scans
//! them exactly, as the worker's dense lane does; the search itself fuses them. Embedding the
//! 2,217 corpus skills takes minutes on two cores, so vectors are kept in a cache file keyed by
//! the model revision, the encoder's length and each text's hash: only the first run, or a
//! changed text, pays.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use iii_directory::config::Config;
use iii_directory::embed::fetch::REVISION;
use iii_directory::embed::{Embedder, MAX_TOKENS, PassageTable, QUANTIZED_BYTES, Quantized};
use iii_directory::retrieval::fusion::{DenseHit, DenseRanker, HUBNESS_NEIGHBOURS};
use iii_directory::retrieval::texts::{function_text, skill_passages};
use iii_directory::search::catalog::{Catalog, info_entries, parse_list, tools_from_info};
use iii_directory::search::vectors::function_query;
use iii_directory::worker::SKILLS_PER_CAPABILITY;
use iii_directory::{Directory, ReadFunction, skill_resource_owners};
use serde_json::{Value, json};

use super::{SideLane, function_catalog, score_side_lane};
use crate::common::{result_ids, shared_path};

/// The evaluation catalog, as the worker builds its own from `engine::functions::info`.
pub fn catalog() -> Catalog {
    let answer = function_catalog();
    let ids = parse_list(&answer).expect("the evaluation catalog lists its functions");
    Catalog::build(&tools_from_info(&ids, info_entries(&answer)))
}

/// How the shared corpus is laid out for an evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The community skills as the read-only agents skills root (only each folder's
    /// `SKILL.md` is read, in place, never written) and the Anthropic skills' `SKILL.md` files
    /// copied under `anthropic/` in a temporary skills folder.
    AgentsSkills,
    /// Every skill folder copied whole into a temporary skills folder, as downloaded bundles
    /// land: each community skill a namespace of its own, the Anthropic skills under
    /// `anthropic/`. Their resources (`references/`, `assets/`, `scripts/`) and other pages are
    /// rows too.
    Downloaded,
}

/// A directory over the shared corpus laid out as [`Layout::AgentsSkills`] (`None`, the skip
/// said, without it).
pub fn corpus_directory() -> Option<(tempfile::TempDir, Directory)> {
    corpus_directory_as(Layout::AgentsSkills)
}

/// A directory over the shared corpus laid out as `layout`, nothing hidden by
/// `filter_unregistered` (`None`, the skip said, without the corpus). The folder lives as long
/// as the `TempDir`.
pub fn corpus_directory_as(layout: Layout) -> Option<(tempfile::TempDir, Directory)> {
    let corpus = shared_path("corpus")?;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::for_root(dir.path());
    config.settings.filter_unregistered = false;
    let skills = config.paths.skills_folder.clone();
    match layout {
        Layout::AgentsSkills => {
            config.paths.agents_skills_folder = corpus.join("community-skills");
        }
        Layout::Downloaded => copy_folder(&corpus.join("community-skills"), &skills),
    }
    for entry in std::fs::read_dir(corpus.join("anthropic-skills")).expect("anthropic skills") {
        let entry = entry.expect("entry");
        let skill = entry.path().join("SKILL.md");
        if !skill.is_file() {
            continue;
        }
        let target = skills.join("anthropic").join(entry.file_name());
        match layout {
            Layout::AgentsSkills => {
                std::fs::create_dir_all(&target).expect("mkdir");
                std::fs::copy(&skill, target.join("SKILL.md")).expect("copy");
            }
            Layout::Downloaded => copy_folder(&entry.path(), &target),
        }
    }
    let directory = Directory::open(config).expect("open");
    directory.reconcile().expect("reconcile");
    Some((dir, directory))
}

/// Copies the folder `from` to `to`, recursively.
fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read folder") {
        let entry = entry.expect("entry");
        let path = entry.path();
        if path.is_dir() {
            copy_folder(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).expect("copy");
        }
    }
}

/// `skills::list {}` over `directory`: every listed row.
pub fn listed_rows(directory: &Directory) -> Value {
    directory
        .read(ReadFunction::SkillsList, &json!({}), None)
        .expect("list")
}

/// The ids `skills::search` answers for `query` (10 at most), lexical without a lane.
pub fn skill_ids(
    directory: &Directory,
    query: &str,
    dense: Option<&dyn DenseRanker>,
) -> Vec<String> {
    let answer = directory
        .search_skills(&json!({ "query": query, "limit": 10 }), None, dense)
        .expect("search");
    let mode = if dense.is_some() { "hybrid" } else { "lexical" };
    assert_eq!(answer["mode"], mode);
    result_ids(&answer)
}

/// `search_functions`' side lane over `directory`, scored on the `dev` and held-out splits
/// (lexical without a lane).
pub fn side_lanes(directory: &Directory, dense: Option<&dyn DenseRanker>) -> Vec<SideLane> {
    ["dev", "heldout"]
        .into_iter()
        .map(|split| score_side_lane(split, |q| offered_skill_ids(directory, q, dense)))
        .collect()
}

/// The ids `search_functions`' side lane offers for `capability` (`search_skills_for_model`,
/// [`SKILLS_PER_CAPABILITY`] at most, as the worker asks), lexical without a lane.
fn offered_skill_ids(
    directory: &Directory,
    capability: &str,
    dense: Option<&dyn DenseRanker>,
) -> Vec<String> {
    let request = json!({ "query": capability, "limit": SKILLS_PER_CAPABILITY });
    let answer = directory
        .search_skills_for_model(&request, None, dense)
        .expect("search");
    result_ids(&answer)
}

/// One catalog's dense lane: every text embedded once, quantized, and scanned for a query asked
/// as the worker asks it; a key with several texts (a skill's passages) scores by its nearest.
pub struct Embedded<'m> {
    model: &'m Embedder,
    table: PassageTable<String>,
    /// The query's vector, and the factor its cosines are scaled by.
    query: fn(&Embedder, &str) -> (Quantized, f32),
    /// Each key's hubness, where the worker measures it (functions).
    hubness: HashMap<String, f32>,
}

/// A skill search's query: the task as written.
fn task_query(model: &Embedder, task: &str) -> (Quantized, f32) {
    (model.embed_query_quantized(task), 1.0)
}

/// The function catalog's lane, with each function's hubness as the worker measures it;
/// vectors cached in `cache` (a folder).
pub fn function_lane<'m>(model: &'m Embedder, catalog: &Catalog, cache: &Path) -> Embedded<'m> {
    let texts = catalog
        .tools()
        .iter()
        .map(|tool| {
            (
                tool.name.clone(),
                vec![function_text(&tool.name, &tool.description)],
            )
        })
        .collect();
    // An evaluation asks one query at a time: the query threads are never busy.
    let query = |model: &Embedder, capability: &str| {
        function_query(model, capability).expect("the query threads are free")
    };
    Embedded::new(model, &cache.join("functions"), texts, query).with_hubness()
}

/// The lane of the skills `rows` lists (a `skills::list` answer): each skill's passages from its
/// row and its body (`get`), keyed by its id in the index (a folder's `SKILL.md` is
/// `<folder>/index`, shown without the suffix); vectors cached in `cache` (a folder).
pub fn skill_lane<'m>(
    model: &'m Embedder,
    directory: &Directory,
    rows: &Value,
    cache: &Path,
) -> Embedded<'m> {
    let skills: Vec<(String, &Value, Value)> = rows["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|row| {
            let shown = row["id"].as_str().expect("id");
            let got = directory
                .read(ReadFunction::SkillsGet, &json!({ "id": shown }), None)
                .expect("get");
            let file = got["path"].as_str().expect("path");
            let folder_index = ["/SKILL.md", "/SKILLS.md", "/index.md"]
                .iter()
                .any(|end| file.ends_with(end));
            let key = if folder_index && !shown.ends_with("/index") && shown != "index" {
                format!("{shown}/index")
            } else {
                shown.to_string()
            };
            (key, row, got)
        })
        .collect();
    // An Agent Skill's resources are never ranked (`skills::resources`), so never embedded.
    let entries: HashSet<&str> = skills
        .iter()
        .filter(|(_, _, got)| {
            got["path"]
                .as_str()
                .is_some_and(|f| f.ends_with("/SKILL.md"))
        })
        .map(|(key, _, _)| key.as_str())
        .collect();
    let texts = skills
        .iter()
        .filter(|(key, _, _)| {
            !skill_resource_owners(key)
                .iter()
                .any(|owner| entries.contains(owner.as_str()))
        })
        .map(|(key, row, got)| {
            let text = |field: &str| row[field].as_str().unwrap_or_default().to_string();
            let body = got["body"].as_str().unwrap_or_default();
            let shown = row["id"].as_str().expect("id");
            (
                key.clone(),
                skill_passages(shown, &text("title"), &text("description"), body),
            )
        })
        .collect();
    Embedded::new(model, &cache.join("skills"), texts, task_query)
}

impl<'m> Embedded<'m> {
    /// `texts` is `(key, its texts)`; `cache` is the file their vectors are kept in.
    fn new(
        model: &'m Embedder,
        cache: &Path,
        texts: Vec<(String, Vec<String>)>,
        query: fn(&Embedder, &str) -> (Quantized, f32),
    ) -> Embedded<'m> {
        let all = texts.iter().flat_map(|(_, t)| t.iter().map(String::as_str));
        let mut vectors = cached_vectors(model, cache, all).into_iter();
        let mut table = PassageTable::with_capacity(texts.len());
        for (key, passages) in texts {
            let passages: Vec<Quantized> = vectors.by_ref().take(passages.len()).collect();
            table.push(key, &passages);
        }
        Embedded {
            model,
            table,
            query,
            hubness: HashMap::new(),
        }
    }

    /// Measures each key's hubness over its first texts' vectors, as the function lane does.
    fn with_hubness(mut self) -> Embedded<'m> {
        let leads = self.table.leads();
        let hubness = leads.hubness(HUBNESS_NEIGHBOURS);
        self.hubness = leads.keys().iter().cloned().zip(hubness).collect();
        self
    }
}

impl DenseRanker for Embedded<'_> {
    fn nearest(&self, query: &str, limit: usize) -> Option<Vec<DenseHit>> {
        let (query, scale) = (self.query)(self.model, query);
        Some(
            self.table
                .nearest(&query, limit, |_| true)
                .into_iter()
                .map(|(key, score)| DenseHit {
                    key: key.clone(),
                    similarity: score * scale,
                    hubness: self.hubness.get(key).copied().unwrap_or_default(),
                })
                .collect(),
        )
    }
}

/// The vectors of `texts`, in order: read from the file `path` when an earlier run embedded the
/// same text with the same model and length, the rest embedded on every core and added to it.
fn cached_vectors<'a>(
    model: &Embedder,
    path: &Path,
    texts: impl Iterator<Item = &'a str>,
) -> Vec<Quantized> {
    let key = |text: &str| -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(format!("{REVISION}\0{MAX_TOKENS}\0").as_bytes());
        hasher.update(text.as_bytes());
        *hasher.finalize().as_bytes()
    };
    let mut known: HashMap<[u8; 32], Quantized> = HashMap::new();
    if let Ok(bytes) = std::fs::read(path) {
        for record in bytes.chunks_exact(32 + QUANTIZED_BYTES) {
            let (k, v) = record.split_at(32);
            if let Some(vector) = Quantized::from_bytes(v) {
                known.insert(k.try_into().expect("32 bytes"), vector);
            }
        }
    }
    let texts: Vec<(&str, [u8; 32])> = texts.map(|t| (t, key(t))).collect();
    let missing: Vec<&str> = texts
        .iter()
        .filter(|(_, k)| !known.contains_key(k))
        .map(|&(t, _)| t)
        .collect();
    if !missing.is_empty() {
        let started = std::time::Instant::now();
        let vectors = model.embed_batch(&missing);
        eprintln!(
            "embedded {} texts for {} in {:.1} s",
            missing.len(),
            path.display(),
            started.elapsed().as_secs_f64()
        );
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        // One append of every record: tests running side by side append to the same file, and
        // a key and its vector written apart interleaved with another test's, shifting every
        // record after them (one quality test then ranked with another text's vectors).
        let mut records = Vec::with_capacity(missing.len() * (32 + QUANTIZED_BYTES));
        for (text, vector) in missing.iter().zip(vectors) {
            let vector = Quantized::from_vector(&vector);
            let k = key(text);
            records.extend_from_slice(&k);
            records.extend_from_slice(&vector.to_bytes());
            known.insert(k, vector);
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(&records))
            .expect("append to the vector cache");
    }
    texts.iter().map(|(_, k)| known[k].clone()).collect()
}
