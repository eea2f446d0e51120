//! From files to rows: the merge of the roots (precedence, shadowing, duplicates, display ids)
//! and each family's rows, computed as a pure function of what reconcile knows about the files.
//! Reconcile stores the result; a fresh scan computes the same function from scratch, which is
//! what makes "the index equals a fresh scan" checkable.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use rayon::prelude::*;

use super::records::FileMeta;
use crate::bundled;
use crate::doc::classify::{PathClass, classify};
use crate::doc::ids::{first_segment, skill_id_for, validate_name, validate_skill_id};
use crate::doc::{Hash, ParsedDoc, ServeIssue};
use crate::roots::Root;
use crate::rules::agent::{self, AgentRow};
use crate::rules::prompt::{self, PromptRow};
use crate::rules::skill::{Placement, SkillRow, display_id, row_for};
use crate::rules::{Reading, Source};

/// What reconcile knows about the files of all roots.
pub struct Inputs<'a> {
    pub files: &'a BTreeMap<(Root, String), FileMeta>,
    /// The parsed documents by content hash: at least those of the files the computed parts
    /// look at (see [`files_needed`]).
    pub docs: &'a HashMap<Hash, ParsedDoc>,
    pub top_dirs: &'a BTreeSet<(Root, String)>,
    pub unreadable: &'a BTreeMap<(Root, String), String>,
    /// The system prompt files of the two skills roots (see [`prompt_files`]), so that the
    /// prompts are recomputed without looking at every file.
    pub prompt_files: &'a BTreeSet<(Root, String)>,
}

/// The parts of the views a change touched: the skill namespaces whose rows may differ, and
/// whether the system prompts or the agent profiles may.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dirty {
    pub namespaces: BTreeSet<String>,
    pub prompts: bool,
    pub agents: bool,
}

/// Every row the read functions serve, plus every file that is not served and why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Views {
    /// Visible skills by on-disk id (before `filter_unregistered`).
    pub skills: BTreeMap<String, SkillRow>,
    /// System prompts found on disk, by name (bundled ones are added at read time).
    pub prompts: BTreeMap<String, PromptRow>,
    /// Agent profiles found on disk, by id (bundled ones are added at read time).
    pub agents: BTreeMap<String, AgentRow>,
    /// Files (or folders) that are not served, with why.
    pub skipped: BTreeMap<(Root, String), String>,
}

/// Which keys of each table an update changed (inserted, replaced or removed).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub skills: BTreeSet<String>,
    pub prompts: BTreeSet<String>,
    pub agents: BTreeSet<String>,
    pub skipped: BTreeSet<(Root, String)>,
}

impl Changes {
    /// Every key whose row differs between `old` and `new`.
    pub fn between(old: &Views, new: &Views) -> Changes {
        Changes {
            skills: changed_keys(&old.skills, &new.skills),
            prompts: changed_keys(&old.prompts, &new.prompts),
            agents: changed_keys(&old.agents, &new.agents),
            skipped: changed_keys(&old.skipped, &new.skipped),
        }
    }
}

/// The rows of all roots, from scratch.
pub fn compute(inputs: &Inputs<'_>) -> Views {
    let mut views = Views::default();
    for ((root, rel), why) in inputs.unreadable {
        views.skipped.insert((*root, rel.clone()), why.clone());
    }
    let shadows = Shadows::of(inputs);
    let mut namespaces: BTreeSet<String> = bundled::parsed_skills()
        .iter()
        .map(|(file, _)| first_segment(file.id).to_string())
        .collect();
    for root in [Root::LocalSkills, Root::Skills, Root::AgentsSkills] {
        namespaces.extend(
            files_of(inputs, root).map(|((_, rel), _)| namespace_of(root, rel).to_string()),
        );
    }
    for (rows, skipped) in all_namespace_rows(inputs, &shadows, &namespaces) {
        views.skills.extend(rows);
        views.skipped.extend(skipped);
    }
    let (prompts, skipped) = prompt_rows(inputs, &shadows);
    views.prompts = prompts;
    views.skipped.extend(skipped);
    let (agents, skipped) = agent_rows(inputs);
    views.agents = agents;
    views.skipped.extend(skipped);
    views
}

/// The rows of the parts `dirty` names, recomputed: the skill rows of its namespaces, the
/// system prompts and the agent profiles when it names them, and the skip reasons each of
/// those parts owns (see [`owns`]). With the folders that cannot be listed unchanged, replacing
/// those parts of the views by these gives what [`compute`] gives, at a cost that follows the
/// change rather than the tree.
pub fn compute_parts(inputs: &Inputs<'_>, dirty: &Dirty) -> Views {
    let shadows = Shadows::of(inputs);
    let mut views = Views::default();
    for (rows, skipped) in all_namespace_rows(inputs, &shadows, &dirty.namespaces) {
        views.skills.extend(rows);
        views.skipped.extend(skipped);
    }
    if dirty.prompts {
        let (prompts, skipped) = prompt_rows(inputs, &shadows);
        views.prompts = prompts;
        views.skipped.extend(skipped);
    }
    if dirty.agents {
        let (agents, skipped) = agent_rows(inputs);
        views.agents = agents;
        views.skipped.extend(skipped);
    }
    views
}

/// The rows of these namespaces, computed on every core (each namespace is independent).
fn all_namespace_rows<'n>(
    inputs: &Inputs<'_>,
    shadows: &Shadows<'_>,
    namespaces: impl IntoIterator<Item = &'n String>,
) -> Vec<(BTreeMap<String, SkillRow>, Skipped)> {
    let namespaces: Vec<&String> = namespaces.into_iter().collect();
    namespaces
        .into_par_iter()
        .map(|ns| namespace_rows(inputs, shadows, ns))
        .collect()
}

/// The parts of the views whose rows may differ after these files (added, changed or removed)
/// and these top-level folders (added or removed) changed.
pub fn dirty_parts<'a>(
    files: impl IntoIterator<Item = &'a (Root, String)>,
    top_dirs: impl IntoIterator<Item = &'a (Root, String)>,
) -> Dirty {
    let mut dirty = Dirty::default();
    for (root, rel) in files {
        match root {
            Root::Agents => dirty.agents = true,
            Root::Skills | Root::LocalSkills if is_prompt_file(*root, rel) => dirty.prompts = true,
            _ => {
                dirty
                    .namespaces
                    .insert(namespace_of(*root, rel).to_string());
            }
        }
    }
    // A top-level folder shadows (or stops shadowing) the namespace of its name, and a file of
    // a lower root that sits beside it with the same name; a local one also shadows the
    // system prompts of the namespace of its name.
    for (root, name) in top_dirs {
        dirty.namespaces.insert(name.clone());
        dirty
            .namespaces
            .insert(namespace_of(Root::Skills, name).to_string());
        if *root == Root::LocalSkills {
            dirty.prompts = true;
        }
    }
    dirty
}

/// Whether a file is a system prompt: under a skills root, with a `system-prompts` segment.
pub fn is_prompt_file(root: Root, rel: &str) -> bool {
    matches!(root, Root::Skills | Root::LocalSkills) && classify(rel) == PathClass::SystemPrompt
}

/// The system prompt files among `files` (for [`Inputs::prompt_files`] when computing from
/// scratch).
pub fn prompt_files<'a>(
    files: impl IntoIterator<Item = &'a (Root, String)>,
) -> BTreeSet<(Root, String)> {
    files
        .into_iter()
        .filter(|(root, rel)| is_prompt_file(*root, rel))
        .cloned()
        .collect()
}

/// The files whose parsed documents [`compute_parts`] looks at for `dirty` (`files` and
/// `prompt_files` as in [`Inputs`]).
pub fn files_needed<'a>(
    files: &'a BTreeMap<(Root, String), FileMeta>,
    prompt_files: &BTreeSet<(Root, String)>,
    dirty: &Dirty,
) -> Vec<(&'a (Root, String), &'a FileMeta)> {
    let mut needed = Vec::new();
    for ns in &dirty.namespaces {
        for root in [Root::LocalSkills, Root::Skills, Root::AgentsSkills] {
            needed.extend(namespace_entries(files, root, ns));
        }
    }
    if dirty.prompts {
        needed.extend(
            prompt_files
                .iter()
                .filter_map(|key| files.get_key_value(key)),
        );
    }
    if dirty.agents {
        needed.extend(
            files
                .range((Root::Agents, String::new())..)
                .take_while(|((root, _), _)| *root == Root::Agents),
        );
    }
    needed
}

/// The key ranges of a table keyed by `(root, relative path)` (the skip reasons) that can hold
/// keys of namespace `ns`, as `(root, from, to)` half-open ranges; what [`owns`] accepts among
/// them is the namespace's.
pub fn namespace_key_ranges(ns: &str) -> Vec<(Root, String, String)> {
    let mut ranges = Vec::new();
    for root in [Root::LocalSkills, Root::Skills, Root::AgentsSkills] {
        ranges.push((root, format!("{ns}/"), format!("{ns}0")));
        if root != Root::AgentsSkills {
            for top in top_files(ns) {
                let mut end = top.clone();
                end.push('\0');
                ranges.push((root, top, end));
            }
        }
    }
    ranges
}

/// The skill ids of namespace `ns` are `ns` itself and the ids in `[from, to)` of this.
pub fn namespace_id_range(ns: &str) -> (String, String) {
    (format!("{ns}/"), format!("{ns}0"))
}

/// Whether the skip reason of `key` belongs to one of the parts `dirty` names (else it
/// belongs to another part, or to a folder that cannot be listed).
pub fn owns(inputs: &Inputs<'_>, dirty: &Dirty, key: &(Root, String)) -> bool {
    match owner(inputs, key) {
        Owner::Folder => false,
        Owner::Namespace(ns) => dirty.namespaces.contains(ns),
        Owner::Prompts => dirty.prompts,
        Owner::Agents => dirty.agents,
    }
}

/// The skill namespace a file of a skills root or of the agents skills root belongs to: the
/// first segment of the id it would have.
/// A file at the top of a skills root is its own namespace (`x.md` is `x`, `SKILL.md` is
/// `index`); anything deeper belongs to its first folder.
fn namespace_of(root: Root, rel: &str) -> &str {
    match (root, rel.contains('/')) {
        (Root::Skills | Root::LocalSkills, false) => top_file_namespace(rel),
        _ => first_segment(rel),
    }
}

/// Which part of the views a skip reason belongs to.
#[derive(Debug, PartialEq, Eq)]
enum Owner<'a> {
    /// A folder that cannot be listed (recomputed only by [`compute`]).
    Folder,
    Namespace(&'a str),
    Prompts,
    Agents,
}

fn owner<'k>(inputs: &Inputs<'_>, key: &'k (Root, String)) -> Owner<'k> {
    let (root, rel) = key;
    if inputs.unreadable.contains_key(key) {
        return Owner::Folder;
    }
    match root {
        Root::Agents => Owner::Agents,
        Root::AgentsSkills => Owner::Namespace(first_segment(rel)),
        Root::Skills | Root::LocalSkills => match classify(rel) {
            PathClass::SystemPrompt => Owner::Prompts,
            _ => Owner::Namespace(namespace_of(*root, rel)),
        },
    }
}

/// The namespace of a file at the top of a skills root: the id it has.
fn top_file_namespace(name: &str) -> &str {
    match name {
        "SKILL.md" | "SKILLS.md" => "index",
        _ => name.strip_suffix(".md").unwrap_or(name),
    }
}

fn changed_keys<K: Ord + Clone, V: PartialEq>(
    old: &BTreeMap<K, V>,
    new: &BTreeMap<K, V>,
) -> BTreeSet<K> {
    let mut keys: BTreeSet<K> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    keys.extend(old.keys().filter(|k| !new.contains_key(*k)).cloned());
    keys
}

/// Top-level folders of the two skills roots: a local folder shadows the global namespace of
/// the same name, and either shadows an agents skill of that name.
struct Shadows<'a> {
    local: BTreeSet<&'a str>,
    global: BTreeSet<&'a str>,
}

impl<'a> Shadows<'a> {
    fn of(inputs: &'a Inputs<'_>) -> Shadows<'a> {
        Shadows {
            local: top_dirs(inputs, Root::LocalSkills),
            global: top_dirs(inputs, Root::Skills),
        }
    }
}

type Skipped = BTreeMap<(Root, String), String>;

/// The skill rows of one namespace, and the skip reasons of its files.
fn namespace_rows(
    inputs: &Inputs<'_>,
    shadows: &Shadows<'_>,
    ns: &str,
) -> (BTreeMap<String, SkillRow>, Skipped) {
    let mut rows = BTreeMap::new();
    let mut skipped = Skipped::new();
    let mut skill_files: BTreeMap<String, (Root, &str, &FileMeta)> = BTreeMap::new();
    // Local first: its whole namespaces win, and a local file wins over a global one with the
    // same id.
    for root in [Root::LocalSkills, Root::Skills] {
        let shadowing = (root == Root::Skills).then_some(&shadows.local);
        let mut own_ids: BTreeMap<String, &str> = BTreeMap::new();
        for (rel, meta) in namespace_files(inputs, root, ns) {
            let shadowed = shadowing.is_some_and(|local| local.contains(first_segment(rel)));
            match classify(rel) {
                PathClass::SystemPrompt => {}
                PathClass::Prompts => {
                    skipped.insert(
                        (root, rel.clone()),
                        "ignored: paths with a `prompts` segment hold neither skills nor system prompts".into(),
                    );
                }
                PathClass::Agents => {
                    skipped.insert(
                        (root, rel.clone()),
                        "ignored: `agents` is a reserved path segment under a skills root (agent profiles live in agents_folder)".into(),
                    );
                }
                PathClass::Skill => {
                    let id = skill_id_for(rel);
                    if let Err(why) = validate_skill_id(&id) {
                        skipped.insert((root, rel.clone()), format!("invalid id {id:?}: {why}"));
                    } else if let Some(first) = own_ids.get(&id) {
                        skipped.insert(
                            (root, rel.clone()),
                            format!("duplicate id {id:?} also produced by {first}"),
                        );
                    } else {
                        own_ids.insert(id.clone(), rel);
                        if shadowed {
                            skipped.insert((root, rel.clone()), shadowed_reason(rel));
                        } else if let Entry::Vacant(slot) = skill_files.entry(id) {
                            slot.insert((root, rel, meta));
                        } else {
                            skipped.insert(
                                (root, rel.clone()),
                                "shadowed: local_skills_folder has a skill with the same id".into(),
                            );
                        }
                    }
                }
            }
        }
    }

    let mut served_by_agents_skills = false;
    for (rel, meta) in namespace_files(inputs, Root::AgentsSkills, ns) {
        let id = format!("{ns}/index");
        if let Err(why) = validate_skill_id(&id) {
            skipped.insert(
                (Root::AgentsSkills, rel.clone()),
                format!("invalid id {id:?}: {why}"),
            );
        } else if shadows.local.contains(ns) || shadows.global.contains(ns) {
            skipped.insert(
                (Root::AgentsSkills, rel.clone()),
                format!(
                    "shadowed: namespace {ns:?} is also a folder of a higher-precedence skills root"
                ),
            );
        } else {
            served_by_agents_skills = true;
            skill_files.insert(id, (Root::AgentsSkills, rel, meta));
        }
    }

    let mut bundled: BTreeMap<String, &'static ParsedDoc> = BTreeMap::new();
    let taken =
        shadows.local.contains(ns) || shadows.global.contains(ns) || served_by_agents_skills;
    for (file, doc) in bundled::parsed_skills() {
        if first_segment(file.id) == ns && !taken && !skill_files.contains_key(file.id) {
            bundled.insert(file.id.to_string(), doc);
        }
    }

    let all_ids: BTreeSet<String> = skill_files.keys().chain(bundled.keys()).cloned().collect();
    for (id, (root, rel, meta)) in &skill_files {
        let display = display_id(id, &all_ids);
        let served = served_doc(inputs, meta);
        // Listed with defaults (contract 3.3), but not served: `check` says why. A served
        // file whose frontmatter could not be read as YAML is listed there too.
        match &served {
            Err(issue) => {
                skipped.insert((*root, rel.to_string()), issue.to_string());
            }
            Ok(doc) => {
                if let Some(problem) = doc.frontmatter.problem() {
                    skipped.insert((*root, rel.to_string()), problem);
                }
            }
        }
        let row = row_for(
            id,
            served.as_ref().ok().copied(),
            Placement {
                display_id: display,
                bytes: meta.stat.size,
                modified_at: meta.stat.mtime.rfc3339(),
                source: Source::File {
                    root: *root,
                    rel: rel.to_string(),
                    content: served_hash(meta, &served),
                },
                agents_skill: *root == Root::AgentsSkills,
                agents_namespace: served_by_agents_skills,
            },
        );
        rows.insert(id.clone(), row);
    }
    for (id, doc) in bundled {
        let display = display_id(&id, &all_ids);
        let bytes = bundled::skill_raw(&id).map_or(0, |raw| raw.len() as u64);
        let row = row_for(
            &id,
            Some(doc),
            Placement {
                display_id: display,
                bytes,
                modified_at: String::new(),
                source: Source::Bundled,
                agents_skill: false,
                agents_namespace: served_by_agents_skills,
            },
        );
        rows.insert(id, row);
    }
    (rows, skipped)
}

/// The files of `root` whose skill id falls in namespace `ns`, in path order: everything under
/// the folder `ns/`, the file `ns.md` at the top, and for `index` the top overview files.
fn namespace_files<'a>(
    inputs: &'a Inputs<'_>,
    root: Root,
    ns: &str,
) -> Vec<(&'a String, &'a FileMeta)> {
    let mut files: Vec<(&String, &FileMeta)> = namespace_entries(inputs.files, root, ns)
        .map(|((_, rel), meta)| (rel, meta))
        .collect();
    files.sort_by(|a, b| a.0.cmp(b.0));
    files
}

/// The entries of [`namespace_files`], unsorted.
fn namespace_entries<'a>(
    files: &'a BTreeMap<(Root, String), FileMeta>,
    root: Root,
    ns: &str,
) -> impl Iterator<Item = (&'a (Root, String), &'a FileMeta)> {
    let under = files.range((root, format!("{ns}/"))..(root, format!("{ns}0")));
    let tops = top_files(ns)
        .into_iter()
        .filter_map(move |top| files.get_key_value(&(root, top)));
    under.chain(tops)
}

/// The files at the top of a skills root that belong to namespace `ns`.
fn top_files(ns: &str) -> Vec<String> {
    let mut tops = vec![format!("{ns}.md")];
    if ns == "index" {
        tops.extend(["SKILL.md".to_string(), "SKILLS.md".to_string()]);
    }
    tops
}

/// System prompts under the two skills roots (local first; the first file of a name wins).
fn prompt_rows(
    inputs: &Inputs<'_>,
    shadows: &Shadows<'_>,
) -> (BTreeMap<String, PromptRow>, Skipped) {
    let mut rows = BTreeMap::new();
    let mut skipped = Skipped::new();
    for root in [Root::LocalSkills, Root::Skills] {
        let prompt_files = inputs
            .prompt_files
            .range((root, String::new())..)
            .take_while(|(r, _)| *r == root)
            .filter_map(|key| inputs.files.get_key_value(key));
        for ((_, rel), meta) in prompt_files {
            let key = (root, rel.clone());
            if root == Root::Skills && shadows.local.contains(first_segment(rel)) {
                skipped.insert(key, shadowed_reason(rel));
                continue;
            }
            let doc = match parsed_doc(inputs, meta) {
                Ok(doc) => doc,
                Err(why) => {
                    skipped.insert(key, why);
                    continue;
                }
            };
            match prompt::read(doc, file_stem(rel), Reading::Scan) {
                Err(problem) => {
                    skipped.insert(key, problem.skip_reason());
                }
                Ok(found) if rows.contains_key(&found.name) => {
                    skipped.insert(
                        key,
                        format!("duplicate system prompt name {:?}", found.name),
                    );
                }
                Ok(prompt::Prompt {
                    name, description, ..
                }) => {
                    if let Some(problem) = doc.frontmatter.problem() {
                        skipped.insert(key, problem);
                    }
                    let served = served_doc(inputs, meta);
                    let row = PromptRow {
                        description,
                        modified_at: meta.stat.mtime.rfc3339(),
                        bytes: meta.stat.size,
                        source: Source::File {
                            root,
                            rel: rel.to_string(),
                            content: served_hash(meta, &served),
                        },
                    };
                    rows.insert(name, row);
                }
            }
        }
    }
    (rows, skipped)
}

/// Agent profiles of `agents_folder`.
fn agent_rows(inputs: &Inputs<'_>) -> (BTreeMap<String, AgentRow>, Skipped) {
    let mut rows = BTreeMap::new();
    let mut skipped = Skipped::new();
    for ((_, rel), meta) in files_of(inputs, Root::Agents) {
        let id = file_stem(rel);
        let key = (Root::Agents, rel.clone());
        if let Err(why) = validate_name(id) {
            skipped.insert(key, format!("invalid agent id {id:?}: {why}"));
            continue;
        }
        let doc = match parsed_doc(inputs, meta) {
            Ok(doc) => doc,
            Err(why) => {
                skipped.insert(key, why);
                continue;
            }
        };
        match agent::profile(doc, Reading::Scan) {
            Err(why) => {
                skipped.insert(key, why);
            }
            Ok(profile) => {
                if let Some(problem) = doc.frontmatter.problem() {
                    skipped.insert(key, problem);
                }
                let row = AgentRow {
                    profile,
                    modified_at: meta.stat.mtime.rfc3339(),
                    bytes: meta.stat.size,
                    source: Source::File {
                        root: Root::Agents,
                        rel: rel.clone(),
                        content: meta.content.clone().map_err(ServeIssue::Read),
                    },
                };
                rows.insert(id.to_string(), row);
            }
        }
    }
    (rows, skipped)
}

fn file_stem(rel: &str) -> &str {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.strip_suffix(".md").unwrap_or(name)
}

fn shadowed_reason(rel: &str) -> String {
    format!(
        "shadowed: local_skills_folder has a {:?} folder, which overrides this namespace",
        first_segment(rel)
    )
}

fn top_dirs<'a>(inputs: &'a Inputs<'_>, root: Root) -> BTreeSet<&'a str> {
    inputs
        .top_dirs
        .iter()
        .filter(|(r, _)| *r == root)
        .map(|(_, name)| name.as_str())
        .collect()
}

fn files_of<'a>(
    inputs: &'a Inputs<'_>,
    root: Root,
) -> impl Iterator<Item = (&'a (Root, String), &'a FileMeta)> {
    inputs
        .files
        .range((root, String::new())..)
        .take_while(move |((r, _), _)| *r == root)
}

/// The parsed document of a file that could be read, or the skip reason of one that could not.
fn parsed_doc<'a>(inputs: &'a Inputs<'_>, meta: &FileMeta) -> Result<&'a ParsedDoc, String> {
    match &meta.content {
        Ok(hash) => Ok(&inputs.docs[hash]),
        Err(issue) => Err(ServeIssue::Read(issue.clone()).to_string()),
    }
}

/// The parsed document of a file when its content can be served.
fn served_doc<'a>(inputs: &'a Inputs<'_>, meta: &FileMeta) -> Result<&'a ParsedDoc, ServeIssue> {
    match &meta.content {
        Err(issue) => Err(ServeIssue::Read(issue.clone())),
        Ok(hash) => {
            let doc = &inputs.docs[hash];
            if doc.body_empty {
                Err(ServeIssue::EmptyBody)
            } else {
                Ok(doc)
            }
        }
    }
}

fn served_hash(
    meta: &FileMeta,
    served: &Result<&ParsedDoc, ServeIssue>,
) -> Result<Hash, ServeIssue> {
    match (served, &meta.content) {
        (Ok(_), Ok(hash)) => Ok(*hash),
        (Err(issue), _) => Err(issue.clone()),
        (Ok(_), Err(issue)) => Err(ServeIssue::Read(issue.clone())),
    }
}
