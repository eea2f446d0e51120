//! `directory::skills::get`: one skill by id, and what to answer when the id is not visible
//! (a worker's overview when the id names an installed worker, else a coded not-found with
//! the closest ids).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::cache::{Posting, SkillCache};
use super::listed::Listed;
use super::spec;
use crate::code::Code;
use crate::config::layout::lexical;
use crate::doc::classify::{PathClass, classify};
use crate::doc::distance::{Pattern, SUGGESTIONS, Shape};
use crate::doc::frontmatter;
use crate::doc::ids::first_segment;
use crate::error::{EchoedPath, Error, IndexError, Next, Result, next, quoted};
use crate::index::Reader;
use crate::request;
use crate::roots::{Layout, Root, Roots};
use crate::rules::Source;
use crate::rules::skill::{NEXT_ON_MISS, SkillRow, Visibility, parse_id};
use crate::rules::skip::SkipReason;

/// `directory::skills::get`. `cache` gives the cached rows of `reader`'s revision; it is
/// called only on a miss, which looks for a worker overview or the closest ids among them.
pub fn get(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
    cache: impl FnOnce() -> Result<Arc<SkillCache>>,
) -> Result<Value> {
    let req: request::GetById = request::parse(request)?;
    // An absolute path to a markdown file, or to any file under a skill root (a script an
    // Agent Skill names), is a file's: no id starts with `/`. The id rules answer any other
    // such request as the contract does, a function id first.
    let asked = req.id.trim();
    if asked.starts_with('/')
        && !asked.contains("::")
        && (asked.ends_with(".md") || skill_root_of(roots, &lexical(Path::new(asked))).is_some())
    {
        return get_file(reader, roots, visibility, Path::new(asked), req.raw);
    }
    let id = parse_id(&req.id)?;
    if let Some((found, row)) = reader.resolve_skill(visibility, &id)? {
        return serve(reader, roots, &found, row, req.raw, None);
    }
    recover_miss(reader, roots, &*cache()?, visibility, &id, req.raw)
}

/// The skill whose file is `file` (an absolute path: the catalog's `location`, `get`'s own
/// `path`), for an agent handed a location and no file access. The file asked for is the file
/// answered: one the scan skips (shadowed, an invalid name, …) is refused with the reason
/// `check` gives, never answered with another file's skill, while a served file with a note in
/// `check` is answered as its id is; a path in a folder of system prompts or agent profiles
/// says so; a path under no skill root, or to no file, is no skill's. Nothing is read but the
/// index and the served file.
fn get_file(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    file: &Path,
    raw: bool,
) -> Result<Value> {
    let file = lexical(file);
    let (root, rel) = match skill_root_of(roots, &file) {
        Some((root, rel)) if file.is_file() => (root, rel.to_str().unwrap_or_default()),
        _ => match profiles_root_of(roots, &file) {
            Some((root, rel)) if file.is_file() => {
                let note = reader.skip_reason(root, rel.to_str().unwrap_or_default())?;
                return Err(another_family(&file, Family::Agents, note));
            }
            _ => return Err(no_skill_file(&file)),
        },
    };
    // The skill served for the path's id, when its path is this very path, is answered even
    // with a note in `check` (a frontmatter ignored, a content `get` refuses, which `get` by id
    // says as well). Any other path with a note is refused with it: a shadowed copy too, even
    // when a link makes it the served file.
    let resolved = match parse_id(rel) {
        Ok(id) => reader.resolve_skill(visibility, &id)?,
        Err(_) => None,
    };
    let served_here = (resolved.as_ref()).is_some_and(|(_, row)| is_at(roots, &row.source, &file));
    if !served_here {
        let note = reader.skip_reason(root, rel)?;
        if classify(rel) == PathClass::SystemPrompt {
            return Err(another_family(&file, Family::SystemPrompts, note));
        }
        if let Some(why) = note {
            return Err(file_not_served(&file, &why.to_string()));
        }
    }
    let Some((found, row)) = resolved else {
        return Err(no_skill_file(&file));
    };
    if !served_here && !same_file(roots, &row.source, &file) {
        let why = format!(
            "the skill it would be is served from {}",
            path_of(roots, &row.source)
        );
        return Err(file_not_served(&file, &why));
    }
    serve(reader, roots, &found, row, raw, None)
}

/// Whether `source` is the file at the path `file`, as written.
fn is_at(roots: &Roots, source: &Source, file: &Path) -> bool {
    matches!(source, Source::File { root, rel, .. } if roots.file(*root, rel) == file)
}

/// Whether `source` is `file` reached through links.
fn same_file(roots: &Roots, source: &Source, file: &Path) -> bool {
    let Source::File { root, rel, .. } = source else {
        return false;
    };
    let real = |path: &Path| fs::canonicalize(path).ok();
    real(&roots.file(*root, rel)).is_some_and(|answered| real(file) == Some(answered))
}

/// The deepest skill root holding `file` (`local_skills_folder` sits inside `skills_folder`),
/// and the path below it; told by the paths alone, nothing is read.
fn skill_root_of<'a>(roots: &Roots, file: &'a Path) -> Option<(Root, &'a Path)> {
    roots
        .active()
        .filter(|(root, _)| root.layout() != Layout::Profiles)
        .filter_map(|(root, dir)| Some((root, file.strip_prefix(lexical(dir)).ok()?)))
        .min_by_key(|(_, rel)| rel.components().count())
}

/// The agent profiles root holding `file`, and the path below it (told by the paths alone).
fn profiles_root_of<'a>(roots: &Roots, file: &'a Path) -> Option<(Root, &'a Path)> {
    roots
        .active()
        .filter(|(root, _)| root.layout() == Layout::Profiles)
        .find_map(|(root, dir)| Some((root, file.strip_prefix(lexical(dir)).ok()?)))
}

/// The folders of the other families, which may hold a path asked for as a skill's.
#[derive(Clone, Copy)]
enum Family {
    SystemPrompts,
    Agents,
}

/// `D110` for a path in a folder of system prompts or of agent profiles, asked for as a
/// skill's: where it is, what `check` notes of it (why it is not served, or served with a
/// problem), and the call that lists that family, rather than a claim that no file is there.
fn another_family(file: &Path, family: Family, note: Option<SkipReason>) -> Error {
    const PROMPTS: [Next; 1] = [next(
        "directory::system-prompts::list",
        "browse system prompt names, then get one by name",
    )];
    const AGENTS: [Next; 1] = [next(
        "directory::agents::list",
        "browse agent profile ids, then get one by id",
    )];
    let (folder, steps) = match family {
        Family::SystemPrompts => ("a system prompts folder", &PROMPTS),
        Family::Agents => ("an agent profiles folder", &AGENTS),
    };
    let note = note.map_or(String::new(), |why| {
        format!(" `iii-directory check` notes of it: {why}.")
    });
    Error::coded(
        Code::SkillNotFound,
        format!(
            "{} is in {folder}, not a skill's file.{note}",
            EchoedPath(file)
        ),
        steps,
    )
}

/// `D110` for a path that is no skill's file, rather than the id rule's complaint about a
/// leading `/`.
pub fn no_skill_file(file: &Path) -> Error {
    Error::coded(
        Code::SkillNotFound,
        format!(
            "no skill file at {}: a skill's path is an existing .md file under a skill root (skills_folder, local_skills_folder or an agents skills folder) that the scan serves.",
            EchoedPath(file)
        ),
        &NEXT_ON_MISS,
    )
}

/// `D110` for a file under a skill root that the scan does not serve, with why.
fn file_not_served(file: &Path, why: &str) -> Error {
    Error::coded(
        Code::SkillNotFound,
        format!(
            "{} is not served: {why}. `iii-directory check` lists every file the scan skips, and why.",
            EchoedPath(file)
        ),
        &[],
    )
}

/// The absolute path of a row's file ("" for bundled content).
fn path_of(roots: &Roots, source: &Source) -> String {
    match source {
        Source::File { root, rel, .. } => roots.file(*root, rel).display().to_string(),
        Source::Bundled => String::new(),
    }
}

fn serve(
    reader: &Reader,
    roots: &Roots,
    id: &str,
    row: SkillRow,
    raw: bool,
    note: Option<String>,
) -> Result<Value> {
    let display = row.display_id.clone();
    let text = reader.text(roots, &row.source, id, || {
        Error::not_found(Code::SkillNotFound, "skill", &display, &[], &NEXT_ON_MISS)
    })?;
    let body = &text[frontmatter::split(&text).body_offset..];
    let body = match note {
        Some(note) => format!("{note}\n\n---\n\n{body}"),
        None => body.to_string(),
    };
    let mut out = Map::new();
    out.insert("id".into(), json!(display));
    out.insert("title".into(), json!(row.title));
    out.insert("type".into(), json!(row.r#type));
    out.insert("function_id".into(), json!(row.function_id));
    out.insert(
        "disable_model_invocation".into(),
        json!(row.disable_model_invocation),
    );
    out.insert("path".into(), json!(path_of(roots, &row.source)));
    out.insert("body".into(), json!(body));
    out.insert("modified_at".into(), json!(row.modified_at));
    if raw {
        out.insert("raw".into(), json!(text));
    }
    spec_fields(reader, roots, &row, &mut out)?;
    Ok(Value::Object(out))
}

/// The Agent Skills fields (issue 30), added to the contract's answer: `license`,
/// `compatibility`, `metadata` and `allowed_tools` when the file has them (absent otherwise,
/// as `raw` is), and for a `SKILL.md` its `problems` against the specification (`[]` when it
/// breaks none), all as the index stored them at reconcile.
fn spec_fields(
    reader: &Reader,
    roots: &Roots,
    row: &SkillRow,
    out: &mut Map<String, Value>,
) -> Result<()> {
    let stored = spec::conformance(reader, row)?;
    if let Some(fields) = stored.as_ref().map(|c| &c.fields) {
        if let Some(license) = &fields.license {
            out.insert("license".into(), json!(license));
        }
        if let Some(compatibility) = &row.compatibility {
            out.insert("compatibility".into(), json!(compatibility));
        }
        if let Some(metadata) = &fields.metadata {
            let entries: Map<String, Value> = metadata
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            out.insert("metadata".into(), Value::Object(entries));
        }
        if let Some(tools) = &fields.allowed_tools {
            out.insert("allowed_tools".into(), json!(tools));
        }
    }
    if let Some(problems) = spec::problems(roots, row, stored.as_ref()) {
        out.insert("problems".into(), spec::problems_json(&problems));
    }
    Ok(())
}

/// What `get` does when the id is not visible: serve a worker's overview when the id names an
/// installed worker, else a coded not-found with the closest ids.
fn recover_miss(
    reader: &Reader,
    roots: &Roots,
    cache: &SkillCache,
    visibility: Visibility<'_>,
    missed: &str,
    raw: bool,
) -> Result<Value> {
    let visible = |row: &&Listed| visibility.allows_id(row.id(), row.always_visible);
    let top = first_segment(missed);
    if top != "iii" && !top.is_empty() {
        let mut names: BTreeSet<&str> = visibility
            .installed
            .map(|s| s.iter().map(String::as_str).collect())
            .unwrap_or_default();
        names.extend(["directory", "iii-directory"]);
        if let Some(worker) = resolve_worker(top, &names) {
            let docs: Vec<&Listed> = cache.namespace(worker).filter(visible).collect();
            let overview_id = format!("{worker}/index");
            if let Some(overview) = docs.iter().find(|row| row.id() == overview_id) {
                if !missed.contains('/') || docs.len() == 1 {
                    let row = stored(reader, overview.id())?;
                    let note = format!(
                        "> Note: there is no skill `{missed}`; this is `{shown}`, the worker's overview. For its callable functions call `engine::functions::list` with worker={worker}; for the other skills it ships call `directory::skills::list` with prefix=\"{worker}/\".",
                        shown = row.display_id
                    );
                    return serve(reader, roots, overview.id(), row, raw, Some(note));
                }
            } else if docs.is_empty() {
                if cache.row("iii/index").as_ref().is_some_and(visible) {
                    let engine = stored(reader, "iii/index")?;
                    let note = format!(
                        "> Note: the worker `{worker}` is installed but ships no skill doc, so it has no overview; below is the iii engine overview. For `{worker}`'s own API call `engine::functions::list` with worker={worker}, or `engine::workers::info` with name={worker}."
                    );
                    return serve(reader, roots, "iii/index", engine, raw, Some(note));
                }
                return Err(Error::coded(
                    Code::SkillNotFound,
                    format!(
                        "{missed} does not exist; the worker `{worker}` is installed but ships no skill doc. Next: call engine::functions::list with worker={worker} to list its functions; or engine::workers::info with name={worker}.",
                        missed = quoted(missed)
                    ),
                    &[],
                ));
            }
        }
    }
    Err(Error::not_found(
        Code::SkillNotFound,
        "skill",
        missed,
        &suggestions(missed, cache, visibility),
        &NEXT_ON_MISS,
    ))
}

/// The row of an id the cache of the same snapshot holds.
fn stored(reader: &Reader, id: &str) -> Result<SkillRow> {
    reader
        .skill(id)?
        .ok_or_else(|| IndexError::Missing(format!("skill row {id} in its snapshot")).into())
}

/// Matches a requested top segment to an installed worker: a case-insensitive exact match wins,
/// else the unique shortest case-insensitive substring match.
fn resolve_worker<'a>(top: &str, names: &BTreeSet<&'a str>) -> Option<&'a str> {
    let wanted = top.to_lowercase();
    if wanted.is_empty() || wanted == "iii" {
        return None;
    }
    if let Some(exact) = names.iter().find(|n| n.to_lowercase() == wanted) {
        return Some(exact);
    }
    let mut matches: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.to_lowercase().contains(&wanted))
        .collect();
    matches.sort_by_key(|n| n.len());
    match matches.as_slice() {
        [only] => Some(only),
        [a, b, ..] if a.len() < b.len() => Some(a),
        _ => None,
    }
}

/// Up to three visible ids closest to a missed one: each segment of the missed id that the id
/// has counts 100, minus the edit distance of the lowercase ids; non-positive scores are
/// dropped; equal scores keep id order.
///
/// Scoring every row would cost the whole tree per miss. An id sharing no segment scores at
/// most 0, so the candidates are the rows of the missed segments' postings. The postings are
/// taken shortest first, and a longer one only when the rows it adds could still make the
/// cut (a common segment's thousands of rows are mostly never looked at); within a posting the
/// rows sharing most go first, and a row whose best possible score cannot make the cut is
/// never measured (its distance is at least what the [`Shape`] kept beside it in the posting
/// bounds, read without touching the row).
fn suggestions(missed: &str, cache: &SkillCache, visibility: Visibility<'_>) -> Vec<String> {
    let missed_lower = missed.to_lowercase();
    let missed_shape = Shape::of(&missed_lower);
    let pattern = Pattern::new(&missed_lower);
    // Each distinct segment's posting, with how often the missed id repeats the segment.
    let mut postings: Vec<(&str, Posting<'_>, i64)> = Vec::new();
    for segment in missed.split('/') {
        match postings.iter_mut().find(|(s, _, _)| *s == segment) {
            Some((_, _, times)) => *times += 1,
            None => postings.push((segment, cache.sharing_segment(segment), 1)),
        }
    }
    postings.sort_by_key(|(_, posting, _)| posting.positions().len());

    let mut best = Best::default();
    for (j, &(_, posting, times)) in postings.iter().enumerate() {
        let (earlier, later) = (&postings[..j], &postings[j + 1..]);
        let later_times: i64 = later.iter().map(|(_, _, t)| t).sum();
        if best.beats(100 * (times + later_times), 0) {
            break;
        }
        // The rows an earlier (shorter) posting did not already score, grouped by how many
        // segments they share with the later (longer) postings, each group in id order. All
        // postings ascend, so each is searched from where the search for the previous row
        // ended.
        let mut earlier_from = vec![0; earlier.len()];
        let mut later_from = vec![0; later.len()];
        let mut by_later: Vec<Vec<(u32, &Shape)>> = vec![Vec::new(); later_times as usize + 1];
        for (position, shape) in posting.rows() {
            let scored = earlier
                .iter()
                .zip(&mut earlier_from)
                .any(|((_, p, _), from)| holds_from(p.positions(), from, position));
            if scored {
                continue;
            }
            let shared_later: i64 = later
                .iter()
                .zip(&mut later_from)
                .map(|((_, p, t), from)| {
                    if holds_from(p.positions(), from, position) {
                        *t
                    } else {
                        0
                    }
                })
                .sum();
            by_later[shared_later as usize].push((position, shape));
        }
        // Rows sharing most first.
        for (shared_later, rows) in by_later.iter().enumerate().rev() {
            let shared = times + shared_later as i64;
            for &(position, shape) in rows {
                if best.beats(100 * shared, 0) {
                    break;
                }
                let Some(limit) = best.distance_limit(shared, position) else {
                    continue;
                };
                if shape.distance_at_least(&missed_shape) >= limit {
                    continue;
                }
                let Some(distance) = pattern.distance_under(cache.lowercase_id_at(position), limit)
                else {
                    continue;
                };
                let row = cache.at(position);
                if visibility.allows_id(row.id(), row.always_visible) {
                    best.offer(100 * shared - distance as i64, position, row);
                }
            }
        }
    }
    best.ids()
}

/// Whether the ascending `positions` hold `target`, searched from `*from`, which moves past
/// every position below `target`. A walk's targets ascend, so each search starts where the last
/// ended (wherever that is below `target`), and gallops (1, 2, 4… ahead) before a binary search
/// of the last stride.
fn holds_from(positions: &[u32], from: &mut usize, target: u32) -> bool {
    let rest = &positions[*from..];
    let mut stride = 1;
    while stride < rest.len() && rest[stride] < target {
        stride *= 2;
    }
    *from += rest[..stride.min(rest.len())].partition_point(|&p| p < target);
    positions.get(*from) == Some(&target)
}

/// The best [`SUGGESTIONS`] scored rows so far: highest score first, the earlier id first
/// among equal scores (what a stable sort of every row by score gives).
#[derive(Default)]
struct Best<'a> {
    kept: Vec<Scored<'a>>,
}

struct Scored<'a> {
    score: i64,
    /// In id order.
    position: u32,
    row: &'a Listed,
}

impl Scored<'_> {
    fn outranks(&self, score: i64, position: u32) -> bool {
        self.score > score || (self.score == score && self.position < position)
    }
}

impl<'a> Best<'a> {
    /// Whether a row at `position` scoring `score` would not be kept: it is not positive, or
    /// every kept row outranks it.
    fn beats(&self, score: i64, position: u32) -> bool {
        score <= 0
            || self.kept.len() == SUGGESTIONS
                && self.kept[SUGGESTIONS - 1].outranks(score, position)
    }

    /// The edit distance a row at `position` sharing `shared` segments must stay below to be
    /// kept; `None` when no distance would do.
    fn distance_limit(&self, shared: i64, position: u32) -> Option<usize> {
        let best_possible = 100 * shared;
        let limit = match self.kept.get(SUGGESTIONS - 1) {
            // Beat the third's score, or equal it from an earlier id.
            Some(third) => best_possible - third.score + i64::from(position < third.position),
            // Any positive score.
            None => best_possible,
        };
        (limit > 0).then_some(limit as usize)
    }

    fn offer(&mut self, score: i64, position: u32, row: &'a Listed) {
        if self.beats(score, position) {
            return;
        }
        let at = self.kept.partition_point(|k| k.outranks(score, position));
        self.kept.insert(
            at,
            Scored {
                score,
                position,
                row,
            },
        );
        self.kept.truncate(SUGGESTIONS);
    }

    fn ids(self) -> Vec<String> {
        self.kept
            .into_iter()
            .map(|k| k.row.shown_id().to_string())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::doc::distance::levenshtein;

    /// A small deterministic generator (xorshift), so a failure reproduces.
    struct Draw(u64);

    impl Draw {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        /// An id of 1 to 4 segments from a few that repeat, so ids share segments, differ by
        /// case and by a letter, and sometimes repeat a segment.
        fn id(&mut self) -> String {
            const SEGMENTS: [&str; 12] = [
                "a", "b", "ab", "cache", "Cache", "caches", "mem", "memory", "x1", "data", "index",
                "iii",
            ];
            let n = 1 + self.below(4);
            (0..n)
                .map(|_| SEGMENTS[self.below(SEGMENTS.len())])
                .collect::<Vec<_>>()
                .join("/")
        }
    }

    use std::borrow::Cow;

    fn listed(id: &str, always_visible: bool) -> Listed {
        let display = id.strip_suffix("/index").unwrap_or(id);
        let row = SkillRow {
            always_visible,
            ..SkillRow::blank(display)
        };
        Listed::new(id.to_string(), &row)
    }

    /// The rule as the contract words it, scoring every visible row: each segment of the
    /// missed id that the id has counts 100, minus the edit distance of the lowercase ids; the
    /// three best positive scores, earlier ids first among equals.
    fn every_row_scored(
        missed: &str,
        cache: &SkillCache,
        visibility: Visibility<'_>,
    ) -> Vec<String> {
        let missed_lower = missed.to_lowercase();
        let mut scored: Vec<(i64, Cow<'_, str>)> = cache
            .rows()
            .iter()
            .filter(|r| visibility.allows_id(r.id(), r.always_visible))
            .map(|r| {
                let segments: Vec<&str> = r.id().split('/').collect();
                let shared = missed.split('/').filter(|s| segments.contains(s)).count() as i64;
                let distance = levenshtein(&missed_lower, &r.id().to_lowercase()) as i64;
                (100 * shared - distance, r.shown_id())
            })
            .collect();
        scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
        scored
            .into_iter()
            .filter(|(score, _)| *score > 0)
            .take(SUGGESTIONS)
            .map(|(_, id)| id.to_string())
            .collect()
    }

    #[test]
    fn a_galloping_search_finds_ascending_targets() {
        let positions: Vec<u32> = (0..300).map(|i| i * 3).collect();
        let mut from = 0;
        for target in 0..900 {
            let held = holds_from(&positions, &mut from, target);
            assert_eq!(held, target % 3 == 0, "{target}");
            // Every position before `from` is below the target.
            assert!(positions[..from].iter().all(|p| *p < target));
        }
        // Past the last position (897), nothing is held and the search stays at the end.
        assert_eq!(from, positions.len());
        assert!(!holds_from(&positions, &mut from, 10_000));
        assert_eq!(from, positions.len());
        assert!(!holds_from(&[], &mut 0, 1));
    }

    #[test]
    fn suggestions_are_those_of_scoring_every_row() {
        let mut draw = Draw(0x5eed_1234_abcd_9876);
        let installed: BTreeSet<String> = ["a", "cache", "data"].map(String::from).into();
        for tree in 0..60 {
            let size = [0, 1, 5, 40, 300][tree % 5];
            let ids: BTreeSet<String> = (0..size).map(|_| draw.id()).collect();
            let rows = ids
                .iter()
                .map(|id| listed(id, draw.below(4) == 0))
                .collect();
            let cache = SkillCache::of_rows(rows);
            for filter_unregistered in [false, true] {
                let visibility = Visibility {
                    filter_unregistered,
                    installed: Some(&installed),
                };
                for _ in 0..40 {
                    let missed = draw.id();
                    assert_eq!(
                        suggestions(&missed, &cache, visibility),
                        every_row_scored(&missed, &cache, visibility),
                        "missed {missed:?} among {ids:?}, filter {filter_unregistered}"
                    );
                }
            }
        }
    }
}
