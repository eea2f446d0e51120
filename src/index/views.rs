//! From files to rows: the merge of the roots (precedence, shadowing, duplicates, display ids)
//! and each family's rows, computed as a pure function of what reconcile knows about the files.
//! Reconcile stores the result; a fresh scan computes the same function from scratch, which is
//! what makes "the index equals a fresh scan" checkable.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::records::{AgentRow, FileMeta, Hash, PromptRow, Root, ServeIssue, SkillRow, Source};
use crate::doc::ParsedDoc;
use crate::doc::classify::{PathClass, classify};
use crate::doc::ids::{skill_id_for, validate_name, validate_skill_id};
use crate::{agents, bundled_docs, skills, system_prompts};

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

pub fn compute(inputs: &Inputs<'_>) -> Views {
    let mut views = Views::default();
    for ((root, rel), why) in inputs.unreadable {
        views.skipped.insert((*root, rel.clone()), why.clone());
    }
    let local_ns = top_dirs(inputs, Root::LocalSkills);
    let global_ns = top_dirs(inputs, Root::Skills);

    let mut skill_files: BTreeMap<String, (Root, &str, &FileMeta)> = BTreeMap::new();
    let mut prompt_files: Vec<(Root, &str, &FileMeta)> = Vec::new();
    // Local first: its whole namespaces win, and a local file wins over a global one with the
    // same id.
    for root in [Root::LocalSkills, Root::Skills] {
        let shadowing = if root == Root::Skills {
            Some(&local_ns)
        } else {
            None
        };
        let mut own_ids: BTreeMap<String, &str> = BTreeMap::new();
        for ((_, rel), meta) in files_of(inputs, root) {
            let shadowed = shadowing.is_some_and(|ns| ns.contains(first_segment(rel)));
            match classify(rel) {
                PathClass::SystemPrompt if shadowed => {
                    views
                        .skipped
                        .insert((root, rel.clone()), shadowed_reason(rel));
                }
                PathClass::SystemPrompt => prompt_files.push((root, rel, meta)),
                PathClass::Prompts => {
                    views.skipped.insert(
                        (root, rel.clone()),
                        "ignored: paths with a `prompts` segment hold neither skills nor system prompts".into(),
                    );
                }
                PathClass::Agents => {
                    views.skipped.insert(
                        (root, rel.clone()),
                        "ignored: `agents` is a reserved path segment under a skills root (agent profiles live in agents_folder)".into(),
                    );
                }
                PathClass::Skill => {
                    let id = skill_id_for(rel);
                    if let Err(why) = validate_skill_id(&id) {
                        views
                            .skipped
                            .insert((root, rel.clone()), format!("invalid id {id:?}: {why}"));
                    } else if let Some(first) = own_ids.get(&id) {
                        views.skipped.insert(
                            (root, rel.clone()),
                            format!("duplicate id {id:?} also produced by {first}"),
                        );
                    } else {
                        own_ids.insert(id.clone(), rel);
                        if shadowed {
                            views
                                .skipped
                                .insert((root, rel.clone()), shadowed_reason(rel));
                        } else if let Entry::Vacant(slot) = skill_files.entry(id) {
                            slot.insert((root, rel, meta));
                        } else {
                            views.skipped.insert(
                                (root, rel.clone()),
                                "shadowed: local_skills_folder has a skill with the same id".into(),
                            );
                        }
                    }
                }
            }
        }
    }

    let mut agents_ns = BTreeSet::new();
    for ((_, rel), meta) in files_of(inputs, Root::AgentsSkills) {
        let dir = first_segment(rel);
        let id = format!("{dir}/index");
        if let Err(why) = validate_skill_id(&id) {
            views.skipped.insert(
                (Root::AgentsSkills, rel.clone()),
                format!("invalid id {id:?}: {why}"),
            );
        } else if local_ns.contains(dir) || global_ns.contains(dir) {
            views.skipped.insert(
                (Root::AgentsSkills, rel.clone()),
                format!("shadowed: namespace {dir:?} is also a folder of a higher-precedence skills root"),
            );
        } else {
            agents_ns.insert(dir.to_string());
            skill_files.insert(id, (Root::AgentsSkills, rel, meta));
        }
    }

    let mut bundled: BTreeMap<String, &'static ParsedDoc> = BTreeMap::new();
    for (file, doc) in bundled_docs::skills() {
        let ns = first_segment(file.id);
        let taken = local_ns.contains(ns) || global_ns.contains(ns) || agents_ns.contains(ns);
        if !taken && !skill_files.contains_key(file.id) {
            bundled.insert(file.id.to_string(), doc);
        }
    }

    let all_ids: BTreeSet<String> = skill_files.keys().chain(bundled.keys()).cloned().collect();
    for (id, (root, rel, meta)) in &skill_files {
        let display = display_id(id, &all_ids);
        let served = served_doc(inputs, meta);
        // Listed with defaults (contract 3.3), but not served: `check` says why.
        if let Err(issue) = &served {
            views
                .skipped
                .insert((*root, rel.to_string()), issue.to_string());
        }
        let row = skills::row_for(
            id,
            display,
            served.as_ref().ok().copied(),
            meta.stat.size,
            meta.stat.mtime.rfc3339(),
            Source::File {
                root: *root,
                rel: rel.to_string(),
                content: served_hash(meta, &served),
            },
            *root == Root::AgentsSkills,
            &agents_ns,
        );
        views.skills.insert(id.clone(), row);
    }
    for (id, doc) in bundled {
        let display = display_id(&id, &all_ids);
        let bytes = bundled_docs::skill_raw(&id).map_or(0, |raw| raw.len() as u64);
        let row = skills::row_for(
            &id,
            display,
            Some(doc),
            bytes,
            String::new(),
            Source::Bundled,
            false,
            &agents_ns,
        );
        views.skills.insert(id, row);
    }

    for (root, rel, meta) in prompt_files {
        let stem = file_stem(rel);
        let doc = match &meta.content {
            Err(issue) => {
                views.skipped.insert(
                    (root, rel.to_string()),
                    ServeIssue::Read(issue.clone()).to_string(),
                );
                continue;
            }
            Ok(hash) => &inputs.docs[hash],
        };
        match system_prompts::from_doc(doc, stem) {
            Err(why) => {
                views.skipped.insert((root, rel.to_string()), why);
            }
            Ok((name, _)) if views.prompts.contains_key(&name) => {
                views.skipped.insert(
                    (root, rel.to_string()),
                    format!("duplicate system prompt name {name:?}"),
                );
            }
            Ok((name, description)) => {
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
                views.prompts.insert(name, row);
            }
        }
    }

    for ((_, rel), meta) in files_of(inputs, Root::Agents) {
        let id = file_stem(rel);
        let key = (Root::Agents, rel.clone());
        if let Err(why) = validate_name(id) {
            views
                .skipped
                .insert(key, format!("invalid agent id {id:?}: {why}"));
            continue;
        }
        let doc = match &meta.content {
            Err(issue) => {
                views
                    .skipped
                    .insert(key, ServeIssue::Read(issue.clone()).to_string());
                continue;
            }
            Ok(hash) => &inputs.docs[hash],
        };
        match agents::profile_from_doc(doc) {
            Err(why) => {
                views.skipped.insert(key, why);
            }
            Ok(profile) => {
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
                views.agents.insert(id.to_string(), row);
            }
        }
    }
    views
}

/// The id callers see: `<ns>/index` is shown as `<ns>` unless `<ns>` is itself an id.
pub fn display_id(id: &str, all_ids: &BTreeSet<String>) -> String {
    match id.strip_suffix("/index") {
        Some(bare) if !all_ids.contains(bare) => bare.to_string(),
        _ => id.to_string(),
    }
}

pub fn first_segment(path: &str) -> &str {
    path.split('/').next().unwrap_or(path)
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
