//! `directory::agents::*` reads: `list` and `get`, over the catalog of agent profiles found in
//! `agents_folder` and `global_agents_folder` (the index keeps one per id, the project's first)
//! plus the bundled `iii` and `iii-minimal` bases (a file shadows a bundled id), with `extends`
//! chains resolved at read time.

mod delta;
pub mod write;

use serde_json::{Map, Value, json};

use crate::bundled;
use crate::code::Code;
use crate::doc::distance::closest;
use crate::doc::frontmatter;
use crate::doc::ids::validate_name;
use crate::error::{Error, Result, next};
use crate::index::Reader;
use crate::index::changelog::Logged;
use crate::list_revision;
use crate::request;
use crate::roots::{Root, Roots};
use crate::rules::agent::{AgentRow, MAX_EXTENDS_HOPS, Profile, extends_chain};
use crate::rules::skill::Visibility;
use crate::rules::skip::SkipReason;

/// One profile of the catalog.
enum Entry {
    File(Box<AgentRow>),
    Bundled(&'static bundled::Agent),
}

impl Entry {
    /// The profile of `id`: its file, else the bundled profile of that id.
    fn lookup(reader: &Reader, id: &str) -> Result<Option<Entry>> {
        Ok(match reader.agent(id)? {
            Some(row) => Some(Entry::File(Box::new(row))),
            None => bundled::agents()
                .iter()
                .find(|agent| agent.id == id)
                .map(Entry::Bundled),
        })
    }

    fn profile(&self) -> &Profile {
        match self {
            Entry::File(row) => &row.profile,
            Entry::Bundled(agent) => &agent.profile,
        }
    }

    fn builtin(&self) -> bool {
        matches!(self, Entry::Bundled(_))
    }

    fn modified_at(&self) -> &str {
        match self {
            Entry::File(row) => &row.modified_at,
            Entry::Bundled(_) => "",
        }
    }

    /// The whole file.
    fn raw(&self, reader: &Reader, roots: &Roots) -> Result<String> {
        match self {
            Entry::File(row) => reader.text(roots, &row.source, "", || {
                let id = match &row.source {
                    crate::rules::Source::File { rel, .. } => rel.trim_end_matches(".md"),
                    crate::rules::Source::Bundled => "",
                };
                Error::not_found(Code::AgentNotFound, "agent profile", id, &[], &[])
            }),
            Entry::Bundled(agent) => Ok(agent.raw.to_string()),
        }
    }

    fn body(&self, reader: &Reader, roots: &Roots) -> Result<String> {
        let raw = self.raw(reader, roots)?;
        Ok(raw[frontmatter::split(&raw).body_offset..].to_string())
    }
}

/// Every profile: files plus the bundled ids no file shadows, sorted by id.
struct Catalog {
    entries: Vec<(String, Entry)>,
}

impl Catalog {
    fn load(reader: &Reader) -> Result<Catalog> {
        let mut entries: Vec<(String, Entry)> = reader
            .agents()?
            .into_iter()
            .map(|(id, row)| (id, Entry::File(Box::new(row))))
            .collect();
        for agent in bundled::agents() {
            if !entries.iter().any(|(id, _)| id == agent.id) {
                entries.push((agent.id.to_string(), Entry::Bundled(agent)));
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Catalog { entries })
    }

    /// Only the profile `id` and the ancestors its `extends` names, looked up one by one: what
    /// `get` needs, at a cost that does not grow with the number of profiles. A chain that
    /// loops, runs too deep or names an unknown parent stops where it goes wrong, and
    /// [`Catalog::chain`] reports it as over the whole catalog.
    fn of_chain(reader: &Reader, id: &str) -> Result<Catalog> {
        let mut entries: Vec<(String, Entry)> = Vec::new();
        let mut next = Some(id.to_string());
        while let Some(id) = next.take() {
            if entries.len() > MAX_EXTENDS_HOPS + 1 || entries.iter().any(|(k, _)| *k == id) {
                break;
            }
            let Some(entry) = Entry::lookup(reader, &id)? else {
                break;
            };
            next = entry.profile().extends.clone();
            entries.push((id, entry));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Catalog { entries })
    }

    fn get(&self, id: &str) -> Option<&Entry> {
        self.entries
            .binary_search_by(|(k, _)| k.as_str().cmp(id))
            .ok()
            .map(|i| &self.entries[i].1)
    }

    /// The profile and its ancestors, nearest first; or the D415 error when the chain does not
    /// resolve.
    fn chain<'a>(&'a self, id: &'a str, entry: &'a Entry) -> Result<Vec<&'a Entry>> {
        extends_chain(
            id,
            entry,
            |entry| entry.profile().extends.as_deref(),
            |parent| self.get(parent),
        )
    }
}

/// What a profile inherits along its chain.
struct Resolved<'a> {
    chain: Vec<&'a Entry>,
    /// The D415 error, carried as `inheritance_error`.
    error: Option<Error>,
}

impl<'a> Resolved<'a> {
    fn new(catalog: &'a Catalog, id: &'a str, entry: &'a Entry) -> Resolved<'a> {
        match catalog.chain(id, entry) {
            Ok(chain) => Resolved { chain, error: None },
            Err(error) => Resolved {
                chain: vec![entry],
                error: Some(error),
            },
        }
    }

    /// The first non-empty `skills` list along the chain (empty = every skill).
    fn skills(&self) -> &[String] {
        self.chain
            .iter()
            .map(|e| e.profile().skills.as_slice())
            .find(|s| !s.is_empty())
            .unwrap_or_default()
    }

    /// The first non-empty `functions` list along the chain, as `skills` inherits (a child's
    /// list replaces its parent's; empty = none preloaded).
    fn functions(&self) -> &[String] {
        self.chain
            .iter()
            .map(|e| e.profile().functions.as_slice())
            .find(|f| !f.is_empty())
            .unwrap_or_default()
    }

    /// The nearest `skills_index` set along the chain, as `model` inherits; true when none is.
    fn skills_index(&self) -> bool {
        self.chain
            .iter()
            .find_map(|e| e.profile().skills_index)
            .unwrap_or(true)
    }

    fn model(&self) -> Option<&str> {
        self.chain.iter().find_map(|e| e.profile().model.as_deref())
    }

    fn reasoning_effort(&self) -> Option<&str> {
        self.chain
            .iter()
            .find_map(|e| e.profile().reasoning_effort.as_deref())
    }

    /// Bodies root-first, one blank line between non-blank parts.
    fn system_prompt(&self, reader: &Reader, roots: &Roots) -> Result<String> {
        let mut prompt = String::new();
        for entry in self.chain.iter().rev() {
            let body = entry.body(reader, roots)?;
            if body.trim().is_empty() {
                continue;
            }
            if prompt.is_empty() {
                prompt = body;
            } else {
                prompt.truncate(prompt.trim_end_matches('\n').len());
                prompt.push_str("\n\n");
                prompt.push_str(&body);
            }
        }
        Ok(prompt)
    }
}

/// The fields `list` and `get` share, in the contract's shape.
fn common_fields(id: &str, entry: &Entry, resolved: &Resolved<'_>) -> Map<String, Value> {
    let p = entry.profile();
    let mut out = Map::new();
    out.insert("id".into(), json!(id));
    out.insert("name".into(), json!(p.name));
    out.insert("description".into(), json!(p.description));
    out.insert("logo".into(), json!(p.logo));
    out.insert("model".into(), json!(resolved.model()));
    out.insert(
        "reasoning_effort".into(),
        json!(resolved.reasoning_effort()),
    );
    out.insert("icon".into(), json!(p.icon));
    out.insert("color".into(), json!(p.color));
    out.insert("extends".into(), json!(p.extends));
    // Added after 1.2.8, so present only when they say something, as `builtin` is: a profile
    // that uses neither keeps the contract's shape.
    if !resolved.functions().is_empty() {
        out.insert("functions".into(), json!(resolved.functions()));
    }
    if !resolved.skills_index() {
        out.insert("skills_index".into(), json!(false));
    }
    if entry.builtin() {
        out.insert("builtin".into(), json!(true));
    }
    if let Some(error) = &resolved.error {
        out.insert("inheritance_error".into(), json!(error.to_string()));
    }
    out.insert("modified_at".into(), json!(entry.modified_at()));
    out
}

/// `directory::agents::list`: `{ agents: [row…] }` sorted by id. Never fails on a bad chain.
pub fn list(reader: &Reader) -> Result<Value> {
    let rows: Vec<Value> = list_rows(&Catalog::load(reader)?)
        .into_iter()
        .map(|(_, row)| row)
        .collect();
    Ok(json!({ "agents": rows }))
}

/// `directory::agents::list` with the revision fields of `list_revision` (the plain answer
/// without them).
pub fn list_answer(reader: &Reader, request: &Value) -> Result<Value> {
    list_revision::answer_keyed(reader, Logged::Agents, request, || {
        let catalog = Catalog::load(reader)?;
        let rows = list_rows(&catalog);
        Ok(delta::Listed { catalog, rows })
    })
}

/// The list rows, by id.
fn list_rows(catalog: &Catalog) -> Vec<(String, Value)> {
    catalog
        .entries
        .iter()
        .map(|(id, entry)| {
            let resolved = Resolved::new(catalog, id, entry);
            let mut row = common_fields(id, entry, &resolved);
            let count = resolved.skills().len();
            row.insert(
                "skill_count".into(),
                if count == 0 {
                    Value::Null
                } else {
                    json!(count)
                },
            );
            (id.clone(), Value::Object(row))
        })
        .collect()
}

/// A profile served with a problem, as `check` lists it beside the files not served: the
/// shape of a [`crate::Skipped`] row in JSON.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AgentProblem {
    /// The configuration key of the root its file sits under.
    pub root: &'static str,
    pub path: String,
    /// Always `agents`.
    pub family: &'static str,
    pub id: String,
    /// The sentence: a chain that does not resolve (the D415 text `get` carries as
    /// `inheritance_error`), or the skills its filter names that nothing serves.
    pub reason: String,
}

/// Every profile file served with a problem: `extends` that does not resolve, or skills its
/// filter names that no visible skill is (`unknown_skills`). The worker's own profiles are
/// not the user's to fix, and are left out.
pub fn problems(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
) -> Result<Vec<AgentProblem>> {
    let catalog = Catalog::load(reader)?;
    let mut problems = Vec::new();
    for (id, entry) in &catalog.entries {
        let Entry::File(row) = entry else { continue };
        let crate::rules::Source::File { root, rel, .. } = &row.source else {
            continue;
        };
        let resolved = Resolved::new(&catalog, id, entry);
        let unknown = unknown_skills(reader, visibility, resolved.skills())?;
        let unknown = (!unknown.is_empty()).then(|| {
            format!(
                "its skills filter names skills nothing serves: {}",
                unknown.join(", ")
            )
        });
        let inheritance = resolved.error.as_ref().map(Error::to_string);
        for reason in inheritance.into_iter().chain(unknown) {
            let problem = AgentProblem {
                root: root.config_key(),
                path: roots.file(*root, rel).display().to_string(),
                family: "agents",
                id: id.clone(),
                reason,
            };
            problems.push((*root, problem));
        }
    }
    // In the order of the files `check` lists before them: by root, then path (stable, so a
    // profile's inheritance comes before its skills).
    problems.sort_by(|(a_root, a), (b_root, b)| (a_root, &a.path).cmp(&(b_root, &b.path)));
    Ok(problems.into_iter().map(|(_, problem)| problem).collect())
}

/// The skills of a filter that no visible skill is.
fn unknown_skills(
    reader: &Reader,
    visibility: Visibility<'_>,
    skills: &[String],
) -> Result<Vec<String>> {
    let mut unknown = Vec::new();
    for skill in skills {
        if reader.resolve_skill(visibility, skill)?.is_none() {
            unknown.push(skill.clone());
        }
    }
    Ok(unknown)
}

/// `directory::agents::get`: the profile with its resolved system prompt and skill filter.
pub fn get(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Value> {
    let req: request::GetById = request::parse(request)?;
    validate_name(&req.id).map_err(Error::invalid)?;
    let catalog = Catalog::of_chain(reader, &req.id)?;
    let Some(entry) = catalog.get(&req.id) else {
        if let Some(skipped) = skipped_profile(reader, roots, &req.id)? {
            return Err(skipped);
        }
        let ids: Vec<String> = Catalog::load(reader)?
            .entries
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        return Err(Error::not_found(
            Code::AgentNotFound,
            "agent profile",
            &req.id,
            &closest(&req.id, ids),
            &[next("directory::agents::list", "browse agent profile ids")],
        ));
    };
    let resolved = Resolved::new(&catalog, &req.id, entry);
    let mut out = common_fields(&req.id, entry, &resolved);
    out.insert(
        "system_prompt".into(),
        json!(resolved.system_prompt(reader, roots)?),
    );
    let skills = resolved.skills();
    let unknown = unknown_skills(reader, visibility, skills)?;
    out.insert("skills".into(), json!(skills));
    out.insert("unknown_skills".into(), json!(unknown));
    if req.raw {
        out.insert("raw".into(), json!(entry.raw(reader, roots)?));
    }
    Ok(Value::Object(out))
}
/// The answer for a profile id no file serves while its file is there, skipped by the scan
/// (unreadable, or not a profile), or the folder of profiles cannot be listed:
/// [`Error::not_served`], naming the file (or folder) and why. A file the project's profile
/// shadows is no such case.
pub(crate) fn skipped_profile(reader: &Reader, roots: &Roots, id: &str) -> Result<Option<Error>> {
    let file = format!("{id}.md");
    let skipped = reader.skipped_where(|root, rel, why| {
        matches!(root, Root::Agents | Root::GlobalAgents)
            && (rel == file || rel.is_empty())
            && *why != SkipReason::ProfileShadowed
    })?;
    Ok(skipped.map(|(root, rel, why)| {
        let path = roots.file(root, &rel);
        Error::not_served(Code::AgentNotFound, "agent profile", id, &path, why)
    }))
}
