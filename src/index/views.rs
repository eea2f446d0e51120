//! From files to rows: the merge of the roots (precedence, shadowing, duplicates, display ids)
//! and each family's rows, computed as a pure function of what reconcile knows about the files.
//! Reconcile stores the result; a fresh scan computes the same function from scratch, which is
//! what makes "the index equals a fresh scan" checkable.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    pub docs: &'a HashMap<Hash, ParsedDoc>,
    pub top_dirs: &'a BTreeSet<(Root, String)>,
    pub unreadable: &'a BTreeMap<(Root, String), String>,
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
    for ns in &namespaces {
        let (rows, skipped) = namespace_rows(inputs, &shadows, ns);
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

/// Brings `views` up to date after changes confined to the skill namespaces `dirty` (see
/// [`dirty_namespaces`]), with the folders that cannot be listed unchanged: the skill rows of
/// those namespaces are recomputed, the (few) system prompts and agent profiles in full, and
/// everything else is left as it is. Equal to [`compute`] under those conditions, at a cost
/// that follows the change rather than the tree.
pub fn update(inputs: &Inputs<'_>, views: &mut Views, dirty: &BTreeSet<String>) -> Changes {
    let shadows = Shadows::of(inputs);
    let mut changes = Changes::default();
    for ns in dirty {
        let old_rows = take_namespace_rows(&mut views.skills, ns);
        let old_skipped: BTreeMap<(Root, String), String> = views
            .skipped
            .iter()
            .filter(|(key, _)| owner(inputs, key) == Owner::Namespace(ns))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (rows, skipped) = namespace_rows(inputs, &shadows, ns);
        changes.skills.extend(changed_keys(&old_rows, &rows));
        replace_skipped(views, &mut changes, old_skipped, skipped);
        views.skills.extend(rows);
    }

    let (prompts, skipped) = prompt_rows(inputs, &shadows);
    changes.prompts = changed_keys(&views.prompts, &prompts);
    views.prompts = prompts;
    let old_skipped = owned_skipped(inputs, views, Owner::Prompts);
    replace_skipped(views, &mut changes, old_skipped, skipped);

    let (agents, skipped) = agent_rows(inputs);
    changes.agents = changed_keys(&views.agents, &agents);
    views.agents = agents;
    let old_skipped = owned_skipped(inputs, views, Owner::Agents);
    replace_skipped(views, &mut changes, old_skipped, skipped);
    changes
}

/// The skill namespaces whose rows may differ after these files (added, changed or removed)
/// and these top-level folders (added or removed) changed.
pub fn dirty_namespaces<'a>(
    files: impl IntoIterator<Item = &'a (Root, String)>,
    top_dirs: impl IntoIterator<Item = &'a (Root, String)>,
) -> BTreeSet<String> {
    let mut dirty = BTreeSet::new();
    for (root, rel) in files {
        if *root != Root::Agents {
            dirty.insert(namespace_of(*root, rel).to_string());
        }
    }
    // A top-level folder shadows (or stops shadowing) the namespace of its name, and a file of
    // a lower root that sits beside it with the same name.
    for (_, name) in top_dirs {
        dirty.insert(name.clone());
        dirty.insert(namespace_of(Root::Skills, name).to_string());
    }
    dirty
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

fn owned_skipped(
    inputs: &Inputs<'_>,
    views: &Views,
    who: Owner<'_>,
) -> BTreeMap<(Root, String), String> {
    views
        .skipped
        .iter()
        .filter(|(key, _)| owner(inputs, key) == who)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Swaps one part's skip reasons for its recomputed ones, noting the keys that changed.
fn replace_skipped(
    views: &mut Views,
    changes: &mut Changes,
    old: BTreeMap<(Root, String), String>,
    new: BTreeMap<(Root, String), String>,
) {
    changes.skipped.extend(changed_keys(&old, &new));
    for key in old.keys() {
        views.skipped.remove(key);
    }
    views.skipped.extend(new);
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

/// Removes and returns the rows of namespace `ns`: the id `ns` itself and ids under `ns/`.
fn take_namespace_rows(
    rows: &mut BTreeMap<String, SkillRow>,
    ns: &str,
) -> BTreeMap<String, SkillRow> {
    let mut taken = BTreeMap::new();
    if let Some(row) = rows.remove(ns) {
        taken.insert(ns.to_string(), row);
    }
    let under: Vec<String> = rows
        .range(format!("{ns}/")..format!("{ns}0"))
        .map(|(id, _)| id.clone())
        .collect();
    for id in under {
        if let Some(row) = rows.remove(&id) {
            taken.insert(id, row);
        }
    }
    taken
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
    let mut files: Vec<(&String, &FileMeta)> = inputs
        .files
        .range((root, format!("{ns}/"))..(root, format!("{ns}0")))
        .map(|((_, rel), meta)| (rel, meta))
        .collect();
    let mut tops = vec![format!("{ns}.md")];
    if ns == "index" {
        tops.extend(["SKILL.md".to_string(), "SKILLS.md".to_string()]);
    }
    for top in tops {
        if let Some(((_, rel), meta)) = inputs.files.get_key_value(&(root, top)) {
            files.push((rel, meta));
        }
    }
    files.sort_by(|a, b| a.0.cmp(b.0));
    files
}

/// System prompts under the two skills roots (local first; the first file of a name wins).
fn prompt_rows(
    inputs: &Inputs<'_>,
    shadows: &Shadows<'_>,
) -> (BTreeMap<String, PromptRow>, Skipped) {
    let mut rows = BTreeMap::new();
    let mut skipped = Skipped::new();
    for root in [Root::LocalSkills, Root::Skills] {
        for ((_, rel), meta) in files_of(inputs, root) {
            if classify(rel) != PathClass::SystemPrompt {
                continue;
            }
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
