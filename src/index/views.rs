//! From files to rows: the merge of the roots (precedence, shadowing, duplicates, display ids)
//! and each family's rows, computed as a pure function of what reconcile knows about the files.
//! Reconcile stores the result; a fresh scan computes the same function from scratch, which is
//! what makes "the index equals a fresh scan" checkable.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use rayon::prelude::*;

use super::records::FileMeta;
use super::walk::Unreadable;
use crate::bundled;
use crate::doc::classify::{PathClass, classify};
use crate::doc::ids::{
    first_segment, skill_files_for, skill_id_for, validate_name, validate_skill_id,
};
use crate::doc::{Hash, ParsedDoc, ServeIssue};
use crate::roots::{Layout, Root};
use crate::rules::agent::{self, AgentRow};
use crate::rules::prompt::{self, PromptRow};
use crate::rules::skill::{Placement, SkillRow, display_id, row_for};
use crate::rules::skip::SkipReason;
use crate::rules::{Reading, Source};

/// The roots that hold skills, highest precedence first.
const SKILL_ROOTS: [Root; 4] = [
    Root::LocalSkills,
    Root::Skills,
    Root::AgentsSkills,
    Root::GlobalAgentsSkills,
];

/// The roots that hold agent profiles, highest precedence first.
const PROFILE_ROOTS: [Root; 2] = [Root::Agents, Root::GlobalAgents];

/// What reconcile knows about the files of all roots.
pub struct Inputs<'a> {
    pub files: &'a BTreeMap<(Root, String), FileMeta>,
    /// The parsed documents by content hash: at least those of the files the computed parts
    /// look at (see [`files_needed`]).
    pub docs: &'a HashMap<Hash, ParsedDoc>,
    pub top_dirs: &'a BTreeSet<(Root, String)>,
    pub unreadable: &'a Unreadable,
    /// The system prompt files of the two skills roots (see [`prompt_files`]), so that the
    /// prompts are recomputed without looking at every file.
    pub prompt_files: &'a BTreeSet<(Root, String)>,
}

/// The parts of the views a change touched: the skill namespaces whose rows may differ (whole,
/// or only some of their ids), whether the system prompts or the agent profiles may, and the
/// file notes (see [`SkipReason::is_file_note`]) that came, went or changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dirty {
    pub namespaces: BTreeSet<String>,
    /// Namespaces where only these ids may differ: each a folder of a skills root before and
    /// after the change, so that no agents skill or bundled skill takes part in it and every id
    /// is decided by its own files (see [`dirty_parts`]). A namespace of 30,000 skills then
    /// costs an edit the few rows it touches, not 30,000.
    pub skill_ids: BTreeMap<String, BTreeSet<String>>,
    pub prompts: bool,
    pub agents: bool,
    pub notes: BTreeSet<(Root, String)>,
}

/// The keys whose entry differs between two sets of walk facts when every difference is a
/// file note coming, going or changing; `None` when any other fact differs (a folder that
/// cannot be listed, a link), which only a computation from scratch follows.
pub fn changed_notes(old: &Unreadable, new: &Unreadable) -> Option<BTreeSet<(Root, String)>> {
    let is_note = |why: Option<&SkipReason>| why.is_none_or(SkipReason::is_file_note);
    let mut notes = BTreeSet::new();
    for key in old.keys().chain(new.keys()) {
        let (before, after) = (old.get(key), new.get(key));
        if before == after {
            continue;
        }
        if !is_note(before) || !is_note(after) {
            return None;
        }
        notes.insert(key.clone());
    }
    Some(notes)
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
    /// Files (or folders) that are not served, or served with a problem, with why.
    pub skipped: Skipped,
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
    for root in SKILL_ROOTS {
        namespaces.extend(
            files_of(inputs, root).map(|((_, rel), _)| namespace_of(root, rel).to_string()),
        );
    }
    let parts = namespaces.iter().map(|ns| (ns, Part::Whole));
    for (rows, skipped) in all_namespace_rows(inputs, &shadows, parts) {
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
    let parts = (dirty.namespaces.iter().map(|ns| (ns, Part::Whole)))
        .chain(dirty.skill_ids.iter().map(|(ns, ids)| (ns, Part::Ids(ids))));
    for (rows, skipped) in all_namespace_rows(inputs, &shadows, parts) {
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
    for key in &dirty.notes {
        if let Some(why) = inputs.unreadable.get(key) {
            views.skipped.insert(key.clone(), why.clone());
        }
    }
    views
}

/// Which rows of a namespace are computed.
#[derive(Clone, Copy)]
enum Part<'d> {
    Whole,
    /// These ids, of a namespace that is a folder of a skills root (see [`Dirty::skill_ids`]).
    Ids(&'d BTreeSet<String>),
}

/// The rows of these parts of namespaces, computed on every core (each is independent).
fn all_namespace_rows<'n>(
    inputs: &Inputs<'_>,
    shadows: &Shadows<'_>,
    parts: impl IntoIterator<Item = (&'n String, Part<'n>)>,
) -> Vec<(BTreeMap<String, SkillRow>, Skipped)> {
    let parts: Vec<(&String, Part<'_>)> = parts.into_iter().collect();
    parts
        .into_par_iter()
        .map(|(ns, part)| namespace_rows(inputs, shadows, ns, part))
        .collect()
}

/// The parts of the views whose rows may differ after these files (added, changed or removed)
/// changed, with the top-level folders of the roots as they were (`old_dirs`) and are
/// (`new_dirs`).
pub fn dirty_parts<'a>(
    files: impl IntoIterator<Item = &'a (Root, String)>,
    old_dirs: &BTreeSet<(Root, String)>,
    new_dirs: &BTreeSet<(Root, String)>,
) -> Dirty {
    let mut dirty = Dirty::default();
    for (root, rel) in files {
        match root {
            Root::Agents | Root::GlobalAgents => dirty.agents = true,
            Root::Skills | Root::LocalSkills if is_prompt_file(*root, rel) => dirty.prompts = true,
            // A file inside a namespace folder: the ids its own change may touch.
            Root::Skills | Root::LocalSkills if rel.contains('/') => {
                let ids = dirty
                    .skill_ids
                    .entry(first_segment(rel).to_string())
                    .or_default();
                ids.extend(ids_touched_by(&skill_id_for(rel)));
            }
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
    for (root, name) in old_dirs.symmetric_difference(new_dirs) {
        dirty.namespaces.insert(name.clone());
        dirty
            .namespaces
            .insert(namespace_of(Root::Skills, name).to_string());
        if *root == Root::LocalSkills {
            dirty.prompts = true;
        }
    }
    // Narrowed to ids only where the namespace stays a folder of a skills root (a folder that
    // came or went made it whole above) and nothing else of it changed.
    let is_folder = |ns: &str| {
        [Root::LocalSkills, Root::Skills]
            .iter()
            .any(|r| new_dirs.contains(&(*r, ns.to_string())))
    };
    let narrowed = std::mem::take(&mut dirty.skill_ids);
    for (ns, ids) in narrowed {
        if dirty.namespaces.contains(&ns) {
            continue;
        }
        if is_folder(&ns) {
            dirty.skill_ids.insert(ns, ids);
        } else {
            dirty.namespaces.insert(ns);
        }
    }
    dirty
}

/// The skill ids whose rows a change to the files of skill `id` may change: its own, and the
/// ids whose display id depends on whether it is served (`<id>/index` shows as `<id>` when no
/// `<id>` is served); its bare form for an `index` id, so that its own display id can be
/// decided within the part.
fn ids_touched_by(id: &str) -> Vec<String> {
    let mut ids = vec![id.to_string(), format!("{id}/index")];
    if let Some(bare) = id.strip_suffix("/index") {
        ids.push(bare.to_string());
    }
    ids
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
        for root in SKILL_ROOTS {
            needed.extend(namespace_entries(files, root, ns));
        }
    }
    for ids in dirty.skill_ids.values() {
        needed.extend(id_file_keys(ids).filter_map(|key| files.get_key_value(&key)));
    }
    if dirty.prompts {
        needed.extend(
            prompt_files
                .iter()
                .filter_map(|key| files.get_key_value(key)),
        );
    }
    if dirty.agents {
        for profiles in PROFILE_ROOTS {
            needed.extend(
                files
                    .range((profiles, String::new())..)
                    .take_while(|((root, _), _)| *root == profiles),
            );
        }
    }
    needed
}

/// The key ranges of a table keyed by `(root, relative path)` (the skip reasons) that can hold
/// keys of namespace `ns`, as `(root, from, to)` half-open ranges; what [`owns`] accepts among
/// them is the namespace's.
pub fn namespace_key_ranges(ns: &str) -> Vec<(Root, String, String)> {
    let mut ranges = Vec::new();
    for root in SKILL_ROOTS {
        ranges.push((root, format!("{ns}/"), format!("{ns}0")));
        if root.layout() == Layout::Tree {
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
        Owner::Namespace(ns) => dirty.namespaces.contains(ns) || dirty.skill_ids.contains_key(ns),
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
        Root::Agents | Root::GlobalAgents => Owner::Agents,
        Root::AgentsSkills | Root::GlobalAgentsSkills => Owner::Namespace(first_segment(rel)),
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

    /// Whether either skills root has a top-level folder of this name.
    fn has_folder(&self, name: &str) -> bool {
        self.local.contains(name) || self.global.contains(name)
    }
}

/// Skip reasons by `(root, relative path)`.
pub type Skipped = BTreeMap<(Root, String), SkipReason>;

/// The file chosen for each skill id of a namespace: its root, relative path and record.
type SkillFiles<'a> = BTreeMap<String, (Root, &'a str, &'a FileMeta)>;

/// The skill rows of one namespace, and the skip reasons of its files. Precedence, highest
/// first: `local_skills_folder`, `skills_folder`, `agents_skills_folder`, the bundled skills,
/// `global_agents_skills_folder`; each step below takes what the steps before it left.
/// For [`Part::Ids`], only the files of those ids take part: the namespace is a folder of a
/// skills root, which leaves the agents skills and bundled skills out of it.
fn namespace_rows(
    inputs: &Inputs<'_>,
    shadows: &Shadows<'_>,
    ns: &str,
    part: Part<'_>,
) -> (BTreeMap<String, SkillRow>, Skipped) {
    let mut skipped = Skipped::new();
    let mut files = skills_root_files(inputs, shadows, ns, part, &mut skipped);
    let bundled = match part {
        Part::Whole => agents_and_bundled(inputs, shadows, ns, &mut files, &mut skipped),
        Part::Ids(_) => {
            debug_assert!(shadows.has_folder(ns), "{ns} is narrowed but not a folder");
            BTreeMap::new()
        }
    };
    let agents_namespace = agents_namespace(inputs, ns);
    let all_ids: BTreeSet<String> = files.keys().chain(bundled.keys()).cloned().collect();
    let mut rows = BTreeMap::new();
    for (id, file) in &files {
        let row = file_row(inputs, id, *file, &all_ids, agents_namespace, &mut skipped);
        rows.insert(id.clone(), row);
    }
    for (id, doc) in bundled {
        let row = bundled_row(&id, doc, &all_ids, agents_namespace);
        rows.insert(id, row);
    }
    (rows, skipped)
}

/// Whether `ns` is an agents namespace: an agents skills root (the project's or the global one)
/// has a valid skill of that name, served or shadowed by a skills root folder of the name. Its
/// skills bypass `filter_unregistered`, the contract's "agents namespaces" being every valid
/// agents skill's: a project fork of an agents skill (`skills/<ns>/SKILL.md`, as a read-only
/// skill's refusal advises) stays visible.
fn agents_namespace(inputs: &Inputs<'_>, ns: &str) -> bool {
    validate_skill_id(&format!("{ns}/index")).is_ok()
        && [Root::AgentsSkills, Root::GlobalAgentsSkills]
            .into_iter()
            .any(|root| namespace_entries(inputs.files, root, ns).next().is_some())
}

/// Steps 2 to 4 of a whole namespace: its agents skills and bundled skills. Returns the
/// bundled skills it serves.
fn agents_and_bundled<'a>(
    inputs: &'a Inputs<'_>,
    shadows: &Shadows<'_>,
    ns: &str,
    files: &mut SkillFiles<'a>,
    skipped: &mut Skipped,
) -> BTreeMap<String, &'static ParsedDoc> {
    let served_by_agents_skill = add_agents_skill(
        inputs,
        Root::AgentsSkills,
        shadows,
        ns,
        None,
        files,
        skipped,
    );
    let bundled = bundled_fallbacks(shadows, ns, served_by_agents_skill, files);
    if !served_by_agents_skill {
        let taken = (!bundled.is_empty()).then_some(Taken::Bundled);
        add_agents_skill(
            inputs,
            Root::GlobalAgentsSkills,
            shadows,
            ns,
            taken,
            files,
            skipped,
        );
    } else {
        shadow_global_agents_skill(inputs, ns, skipped);
    }
    bundled
}

/// What one file of a skills root is to its namespace, before the roots are merged.
enum Verdict {
    /// A system prompt: the prompts' part of the views looks at it.
    NotASkill,
    Skipped(SkipReason),
    /// A skill with this id, the first file of its root to give it.
    Skill(String),
}

/// Step 1: the skill files of the two skills roots, local first: a local folder shadows the
/// whole global namespace of its name, and a local file wins over a global one with the same
/// id. Within a root, the first file (in path order) of an id wins.
fn skills_root_files<'a>(
    inputs: &'a Inputs<'_>,
    shadows: &Shadows<'_>,
    ns: &str,
    part: Part<'_>,
    skipped: &mut Skipped,
) -> SkillFiles<'a> {
    let mut chosen = SkillFiles::new();
    for root in [Root::LocalSkills, Root::Skills] {
        let mut own_ids: BTreeMap<String, &str> = BTreeMap::new();
        let files = match part {
            Part::Whole => namespace_files(inputs, root, ns),
            Part::Ids(ids) => sorted(
                id_file_keys_in(root, ids).filter_map(|key| inputs.files.get_key_value(&key)),
            ),
        };
        for (rel, meta) in files {
            let shadowed = root == Root::Skills && shadows.local.contains(first_segment(rel));
            let id = match verdict(rel, shadowed, &mut own_ids) {
                Verdict::NotASkill => continue,
                Verdict::Skipped(reason) => {
                    skipped.insert((root, rel.clone()), reason);
                    continue;
                }
                Verdict::Skill(id) => id,
            };
            match chosen.entry(id) {
                Entry::Vacant(slot) => {
                    slot.insert((root, rel, meta));
                }
                Entry::Occupied(_) => {
                    skipped.insert((root, rel.clone()), SkipReason::SkillShadowed);
                }
            }
        }
    }
    chosen
}

/// One file of a skills root: what its path makes it, and whether an earlier file of its root
/// (`own_ids`, which this adds it to) or a local folder (`shadowed`) takes its place.
fn verdict<'a>(rel: &'a str, shadowed: bool, own_ids: &mut BTreeMap<String, &'a str>) -> Verdict {
    match classify(rel) {
        PathClass::SystemPrompt => Verdict::NotASkill,
        PathClass::Prompts => Verdict::Skipped(SkipReason::PromptsSegment),
        PathClass::Agents => Verdict::Skipped(SkipReason::AgentsSegment),
        PathClass::Skill => {
            let id = skill_id_for(rel);
            if let Err(problem) = validate_skill_id(&id) {
                return Verdict::Skipped(SkipReason::InvalidId { id, problem });
            }
            if let Some(first) = own_ids.get(&id) {
                let first = first.to_string();
                return Verdict::Skipped(SkipReason::DuplicateId { id, first });
            }
            own_ids.insert(id.clone(), rel);
            if shadowed {
                Verdict::Skipped(SkipReason::namespace_shadowed(rel))
            } else {
                Verdict::Skill(id)
            }
        }
    }
}

/// What already claims a namespace when the global agents skills root comes to it.
#[derive(Clone, Copy)]
enum Taken {
    /// The bundled skills of the namespace.
    Bundled,
    /// The project's agents skills root.
    AgentsSkill,
}

/// Step 2 (`agents_skills_folder`) and step 4 (`global_agents_skills_folder`): the root's
/// `<ns>/SKILL.md`, served as `<ns>/index` unless a folder of either skills root has the
/// namespace's name, or (for the global root) a higher step already serves the namespace
/// (`taken`). Returns whether it serves the namespace (the bundled skills then stay out).
fn add_agents_skill<'a>(
    inputs: &'a Inputs<'_>,
    root: Root,
    shadows: &Shadows<'_>,
    ns: &str,
    taken: Option<Taken>,
    files: &mut SkillFiles<'a>,
    skipped: &mut Skipped,
) -> bool {
    let mut served = false;
    for (rel, meta) in namespace_files(inputs, root, ns) {
        let id = format!("{ns}/index");
        let reason = if let Err(problem) = validate_skill_id(&id) {
            SkipReason::InvalidId { id, problem }
        } else if shadows.has_folder(ns) {
            SkipReason::AgentsSkillShadowed {
                namespace: ns.to_string(),
            }
        } else if let Some(taken) = taken {
            global_shadowed(ns, taken)
        } else {
            served = true;
            files.insert(id, (root, rel, meta));
            continue;
        };
        skipped.insert((root, rel.clone()), reason);
    }
    served
}

/// Why a global agents skill is not served when a higher step claims its namespace.
fn global_shadowed(ns: &str, taken: Taken) -> SkipReason {
    SkipReason::GlobalSkillShadowed {
        namespace: ns.to_string(),
        bundled: matches!(taken, Taken::Bundled),
    }
}

/// The global agents skills of a namespace the project's agents skills root serves: shadowed
/// (a skills root folder of the name is [`add_agents_skill`]'s reason instead).
fn shadow_global_agents_skill(inputs: &Inputs<'_>, ns: &str, skipped: &mut Skipped) {
    for (rel, _) in namespace_files(inputs, Root::GlobalAgentsSkills, ns) {
        skipped.insert(
            (Root::GlobalAgentsSkills, rel.clone()),
            global_shadowed(ns, Taken::AgentsSkill),
        );
    }
}

/// Step 3: the bundled skills of the namespace, when no folder on disk and no agents skill
/// claims it; a file with a bundled skill's id shadows that one skill.
fn bundled_fallbacks(
    shadows: &Shadows<'_>,
    ns: &str,
    agents_namespace: bool,
    files: &SkillFiles<'_>,
) -> BTreeMap<String, &'static ParsedDoc> {
    if shadows.has_folder(ns) || agents_namespace {
        return BTreeMap::new();
    }
    bundled::parsed_skills()
        .iter()
        .filter(|(file, _)| first_segment(file.id) == ns && !files.contains_key(file.id))
        .map(|(file, doc)| (file.id.to_string(), doc))
        .collect()
}

/// Step 4, for a file: its row, listed with defaults when its content cannot be served
/// (contract 3.3; `check` says why), and served with a note in `check` when its frontmatter
/// could not be read as YAML.
fn file_row(
    inputs: &Inputs<'_>,
    id: &str,
    (root, rel, meta): (Root, &str, &FileMeta),
    all_ids: &BTreeSet<String>,
    agents_namespace: bool,
    skipped: &mut Skipped,
) -> SkillRow {
    let served = served_doc(inputs, meta);
    let problem = match &served {
        Err(issue) => Some(SkipReason::Unservable(issue.clone())),
        Ok(doc) => SkipReason::of_frontmatter(&doc.frontmatter),
    };
    if let Some(problem) = problem {
        skipped.insert((root, rel.to_string()), problem);
    }
    row_for(
        id,
        served.as_ref().ok().copied(),
        Placement {
            display_id: display_id(id, all_ids),
            bytes: meta.stat.size,
            modified_at: meta.stat.mtime.rfc3339(),
            source: Source::File {
                root,
                rel: rel.to_string(),
                content: served_hash(meta, &served),
            },
            agents_skill: root.layout() == Layout::SkillFolders,
            agents_namespace,
        },
    )
}

/// Step 4, for a bundled skill: its row.
fn bundled_row(
    id: &str,
    doc: &ParsedDoc,
    all_ids: &BTreeSet<String>,
    agents_namespace: bool,
) -> SkillRow {
    let bytes = bundled::skill_raw(id).map_or(0, |raw| raw.len() as u64);
    row_for(
        id,
        Some(doc),
        Placement {
            display_id: display_id(id, all_ids),
            bytes,
            modified_at: String::new(),
            source: Source::Bundled,
            agents_skill: false,
            agents_namespace,
        },
    )
}

/// The files of `root` whose skill id falls in namespace `ns`, in path order: everything under
/// the folder `ns/`, the file `ns.md` at the top, and for `index` the top overview files.
fn namespace_files<'a>(
    inputs: &'a Inputs<'_>,
    root: Root,
    ns: &str,
) -> Vec<(&'a String, &'a FileMeta)> {
    sorted(namespace_entries(inputs.files, root, ns))
}

/// Entries of the file table as `(relative path, record)`, in path order.
fn sorted<'a>(
    entries: impl Iterator<Item = (&'a (Root, String), &'a FileMeta)>,
) -> Vec<(&'a String, &'a FileMeta)> {
    let mut files: Vec<(&String, &FileMeta)> =
        entries.map(|((_, rel), meta)| (rel, meta)).collect();
    files.sort_by(|a, b| a.0.cmp(b.0));
    files
}

/// The keys a file of either skills root whose skill id is one of `ids` has (see
/// [`skill_files_for`]), whether or not such a file exists: what a [`Part::Ids`] part looks at.
pub fn id_file_keys(ids: &BTreeSet<String>) -> impl Iterator<Item = (Root, String)> + '_ {
    [Root::LocalSkills, Root::Skills]
        .into_iter()
        .flat_map(move |root| id_file_keys_in(root, ids))
}

/// [`id_file_keys`] of one skills root.
fn id_file_keys_in(
    root: Root,
    ids: &BTreeSet<String>,
) -> impl Iterator<Item = (Root, String)> + '_ {
    ids.iter()
        .flat_map(|id| skill_files_for(id))
        .map(move |rel| (root, rel))
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
                skipped.insert(key, SkipReason::namespace_shadowed(rel));
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
                    skipped.insert(key, SkipReason::NotAPrompt(problem));
                }
                Ok(found) if rows.contains_key(&found.name) => {
                    skipped.insert(key, SkipReason::DuplicatePromptName { name: found.name });
                }
                Ok(prompt::Prompt {
                    name, description, ..
                }) => {
                    // Listed as the contract lists it, while `get` refuses an empty body:
                    // `check` says so, as for a skill.
                    let served = served_doc(inputs, meta);
                    let problem = match &served {
                        Err(issue) => Some(SkipReason::Unservable(issue.clone())),
                        Ok(_) => SkipReason::of_frontmatter(&doc.frontmatter),
                    };
                    if let Some(problem) = problem {
                        skipped.insert(key, problem);
                    }
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

/// Agent profiles of `agents_folder`, then those of `global_agents_folder` whose id the first
/// does not serve (a project profile wins; a file there that is no profile does not shadow).
fn agent_rows(inputs: &Inputs<'_>) -> (BTreeMap<String, AgentRow>, Skipped) {
    let mut rows = BTreeMap::new();
    let mut skipped = Skipped::new();
    for root in PROFILE_ROOTS {
        for ((_, rel), meta) in files_of(inputs, root) {
            let id = file_stem(rel);
            let key = (root, rel.clone());
            if let Err(problem) = validate_name(id) {
                let id = id.to_string();
                skipped.insert(key, SkipReason::InvalidAgentId { id, problem });
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
                Err(problem) => {
                    skipped.insert(key, SkipReason::NotAProfile(problem));
                }
                Ok(_) if rows.contains_key(id) => {
                    skipped.insert(key, SkipReason::ProfileShadowed);
                }
                Ok(profile) => {
                    if let Some(problem) = SkipReason::of_frontmatter(&doc.frontmatter) {
                        skipped.insert(key, problem);
                    }
                    let row = AgentRow {
                        profile,
                        modified_at: meta.stat.mtime.rfc3339(),
                        bytes: meta.stat.size,
                        source: Source::File {
                            root,
                            rel: rel.clone(),
                            content: meta.content.clone().map_err(ServeIssue::Read),
                        },
                    };
                    rows.insert(id.to_string(), row);
                }
            }
        }
    }
    (rows, skipped)
}

fn file_stem(rel: &str) -> &str {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.strip_suffix(".md").unwrap_or(name)
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
fn parsed_doc<'a>(inputs: &'a Inputs<'_>, meta: &FileMeta) -> Result<&'a ParsedDoc, SkipReason> {
    match &meta.content {
        Ok(hash) => Ok(&inputs.docs[hash]),
        Err(issue) => Err(SkipReason::Unservable(ServeIssue::Read(issue.clone()))),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rel: &str) -> (Root, String) {
        (Root::Skills, rel.to_string())
    }

    #[test]
    fn an_edit_inside_a_namespace_folder_touches_only_its_own_ids() {
        let dirs: BTreeSet<(Root, String)> = [key("big"), (Root::LocalSkills, "loc".into())].into();
        let ids = |ns: &str, ids: &[&str]| {
            (
                ns.to_string(),
                ids.iter().map(|id| id.to_string()).collect(),
            )
        };
        let dirty = dirty_parts(
            &[
                key("big/a.md"),
                key("big/sub/SKILL.md"),
                (Root::LocalSkills, "loc/x.md".into()),
            ],
            &dirs,
            &dirs,
        );
        assert!(dirty.namespaces.is_empty(), "{dirty:?}");
        let want: BTreeMap<String, BTreeSet<String>> = [
            ids(
                "big",
                &[
                    "big/a",
                    "big/a/index",
                    "big/sub",
                    "big/sub/index",
                    "big/sub/index/index",
                ],
            ),
            ids("loc", &["loc/x", "loc/x/index"]),
        ]
        .into();
        assert_eq!(dirty.skill_ids, want);

        // A folder that came makes its namespace whole; so does a file at the top, a file of an
        // agents skills root, or a file whose first folder is not a folder of a skills root.
        let more: BTreeSet<(Root, String)> = dirs.iter().cloned().chain([key("new")]).collect();
        let dirty = dirty_parts(
            &[
                key("new/a.md"),
                key("big.md"),
                (Root::AgentsSkills, "loc/SKILL.md".into()),
                key("gone/a.md"),
            ],
            &dirs,
            &more,
        );
        let whole: BTreeSet<String> = ["new", "big", "loc", "gone"].map(String::from).into();
        assert_eq!((dirty.namespaces, dirty.skill_ids.len()), (whole, 0));
    }

    #[test]
    fn file_notes_alone_are_followed_part_by_part_and_other_facts_from_scratch() {
        let copy = (key("ns/a.md.upstream"), SkipReason::UpstreamCopy);
        let temp = (
            key("ns/b.md.1-2.tmp"),
            SkipReason::UnfinishedWrite { pid: 1 },
        );
        let folder = (key("locked"), SkipReason::Unlistable("denied".into()));
        let old: Unreadable = [copy.clone(), folder.clone()].into();
        // A copy went and a temporary file came: those two keys.
        let new: Unreadable = [temp.clone(), folder.clone()].into();
        assert_eq!(
            changed_notes(&old, &new),
            Some(BTreeSet::from([copy.0.clone(), temp.0.clone()]))
        );
        assert_eq!(changed_notes(&old, &old), Some(BTreeSet::new()));
        // A folder that became listable, or a note that became a folder fact: from scratch.
        let listable: Unreadable = [copy.clone()].into();
        assert_eq!(changed_notes(&old, &listable), None);
        let turned: Unreadable = [(copy.0.clone(), folder.1.clone()), folder].into();
        assert_eq!(changed_notes(&old, &turned), None);
    }
}
