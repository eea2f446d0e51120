//! What a create's file would hide, judged where the reads will see it. In the default layout
//! `local_skills_folder` (`skills/iii`) sits inside `skills_folder`, so a file written under it
//! is read twice, and the local root wins: `iii/pdf/x` starts the local namespace `pdf`, which
//! shadows what `skills_folder/pdf/` would. Each check here therefore looks at the namespace the
//! file lands in ([`Landing`]), never at the id's first segment alone.

use std::path::Path;

use crate::code::Code;
use crate::doc::ids::skill_id_for;
use crate::error::{Error, Result, quoted};
use crate::index::Reader;
use crate::roots::{Root, Roots};
use crate::rules::Source;
use crate::rules::skill::Visibility;
use crate::rules::spec::SKILL_FILE;

/// Where a create's file lands: the root whose reading of it wins, and its path there.
pub(super) struct Landing<'a> {
    pub root: Root,
    pub rel: &'a Path,
}

impl<'a> Landing<'a> {
    /// `path` is the file a create writes, inside `skills_folder`.
    pub fn of(roots: &Roots, path: &'a Path) -> Landing<'a> {
        let (skills, local) = (roots.path(Root::Skills), roots.path(Root::LocalSkills));
        match path.strip_prefix(local) {
            Ok(rel) if local != skills => Landing {
                root: Root::LocalSkills,
                rel,
            },
            _ => Landing {
                root: Root::Skills,
                rel: path.strip_prefix(skills).unwrap_or(path),
            },
        }
    }

    /// The namespace folder the file starts or joins; `None` for a file at the root's top,
    /// which makes a single skill and no folder.
    pub fn namespace(&self) -> Option<&'a str> {
        let mut parts = self.rel.iter();
        let namespace = parts.next()?.to_str()?;
        parts.next().map(|_| namespace)
    }

    /// Whether the file lands in `local_skills_folder` while the id asked for names it through
    /// `skills_folder` (`iii/<ns>/…`).
    pub fn in_local(&self) -> bool {
        self.root == Root::LocalSkills
    }
}

/// Refuses a create whose file would start the folder of a namespace an agents skills root
/// (the project's or the user-global one) serves: the new folder shadows that skill without a
/// word, the global root being the lowest step. Asked as `<ns>/x`, or as `iii/<ns>/x` in the
/// default local folder: both start a `<ns>/` folder of a skills root.
pub(super) fn check_not_hiding_agents_skill(
    reader: &Reader,
    roots: &Roots,
    landing: &Landing<'_>,
    id: &str,
) -> Result<()> {
    let Some(namespace) = landing.namespace() else {
        return Ok(());
    };
    let Some(root) = reader.agents_namespace_root(namespace)? else {
        return Ok(());
    };
    // Through the local folder the id's first segment is not the namespace: say how it gets
    // there.
    let via = match landing.in_local() {
        true => format!(
            ": {id} would start a {namespace}/ folder in local_skills_folder ({}), which would hide it",
            roots.path(Root::LocalSkills).display(),
            id = quoted(id),
        ),
        false => String::new(),
    };
    Err(Error::coded(
        Code::SkillPlacementRefused,
        format!(
            "namespace {ns} is reserved by a system-installed skill under an agents skills root ({}){via}; edit it with its owning tool, or copy it into skills_folder on disk to fork it.",
            roots.path(root).display(),
            ns = quoted(namespace)
        ),
        &[],
    ))
}

/// Refuses a create whose file would start the folder of a namespace the worker's bundled
/// skills serve (`iii-directory/x`, or `iii/iii-directory/x` in the default local folder): the
/// bundled skills give way whole to such a folder (a fork on disk), so all of them would be
/// hidden without a word. (A top-level file `iii/iii-directory.md` would take only the bare id
/// from the overview: [`check_new_local_file`] refuses that.)
pub(super) fn check_not_hiding_bundled(
    reader: &Reader,
    landing: &Landing<'_>,
    id: &str,
) -> Result<()> {
    let Some(namespace) = landing.namespace() else {
        return Ok(());
    };
    let bundled = reader.bundled_skills_served(namespace)?;
    if bundled == 0 {
        return Ok(());
    }
    Err(Error::coded(
        Code::SkillPlacementRefused,
        format!(
            "namespace {ns} holds the worker's {bundled} bundled skills (read-only); creating {id} would start a {namespace}/ folder on disk, which takes the namespace over and would hide them all. Use a namespace of your own, or copy the bundled skills into skills_folder/{namespace}/ on disk (`get --raw` gives each file) to fork them.",
            ns = quoted(namespace),
            id = quoted(id),
        ),
        &[],
    ))
}

/// Refuses a create whose file lands in `local_skills_folder` (inside `skills_folder` by
/// default, as `skills/iii`) where the local root, which wins, would hide what `skills_folder`
/// or a lower root serves: a new local folder overrides that namespace whole
/// ([`check_new_local_namespace`]), a new local file takes its id ([`check_new_local_file`]).
/// `id` is the id asked for.
pub(super) fn check_not_shadowing(
    reader: &Reader,
    roots: &Roots,
    landing: &Landing<'_>,
    id: &str,
) -> Result<()> {
    if !landing.in_local() {
        return Ok(());
    }
    match landing.namespace() {
        Some(namespace) => check_new_local_namespace(roots, landing, namespace, id),
        None => check_new_local_file(reader, roots, landing, id),
    }
}

/// A new folder `namespace` of the local root shadows `skills_folder`'s namespace of that name
/// whole (`iii/pptx/note` hides `pptx`), unless the local root has it already.
fn check_new_local_namespace(
    roots: &Roots,
    landing: &Landing<'_>,
    namespace: &str,
    id: &str,
) -> Result<()> {
    let (skills, local) = (roots.path(Root::Skills), roots.path(Root::LocalSkills));
    let present = |root: &Path| {
        root.join(namespace).exists() || root.join(format!("{namespace}.md")).exists()
    };
    // Already a local namespace: its skills are the local ones, and nothing new is hidden.
    if present(local) || !present(skills) {
        return Ok(());
    }
    let rel = landing.rel.to_string_lossy();
    // A `SKILL.md` is created by naming it (`<folder>/SKILL.md`); another file by its id.
    let local_id = match landing.rel.file_name() == Some(SKILL_FILE.as_ref()) {
        true => &*rel,
        false => rel.trim_end_matches(".md"),
    };
    // The local folder is itself (or lies within) that namespace of `skills_folder`.
    let message = match local.starts_with(skills.join(namespace)) {
        true => format!(
            "skill {} would start a {namespace}/ folder in local_skills_folder ({}), which lies in skills_folder's own namespace {}: the new folder would take that namespace over, hiding every skill skills_folder serves under {}, and the file would be served as {}, not as the id asked for. Create it as {} instead.",
            quoted(id),
            local.display(),
            quoted(namespace),
            quoted(&format!("{namespace}/")),
            quoted(local_id),
            quoted(local_id)
        ),
        false => format!(
            "skill {} would start a {namespace} namespace in local_skills_folder ({}), which overrides skills_folder's {namespace} whole and would hide every skill in it. Create it as {} in skills_folder, or make that override on disk if it is what you want.",
            quoted(id),
            local.display(),
            quoted(local_id)
        ),
    };
    Err(Error::coded(Code::SkillPlacementRefused, message, &[]))
}

/// A new file at the local root's top is skill `<x>` there, which wins: it would take `<x>`
/// from whatever `get <x>` answers now (a file of `skills_folder`, a folder's overview, an
/// agents or bundled skill), hiding it. Every row counts, whoever may see it.
fn check_new_local_file(
    reader: &Reader,
    roots: &Roots,
    landing: &Landing<'_>,
    id: &str,
) -> Result<()> {
    let local_id = skill_id_for(&landing.rel.to_string_lossy());
    let everyone = Visibility {
        filter_unregistered: false,
        installed: None,
    };
    let Some((_, row)) = reader.resolve_skill(everyone, &local_id)? else {
        return Ok(());
    };
    let (held_by, next) = match &row.source {
        Source::File { root, rel, .. } => (
            roots.file(*root, rel).display().to_string(),
            match root {
                // Read-only: an update would be refused (D116) too.
                Root::AgentsSkills | Root::GlobalAgentsSkills => {
                    "It is read-only: choose another id.".to_string()
                }
                _ => format!(
                    "To change that skill, update {}; for a new one, choose another id.",
                    quoted(&local_id)
                ),
            },
        ),
        Source::Bundled => (
            "bundled with the worker".to_string(),
            "It is read-only: choose another id.".to_string(),
        ),
    };
    Err(Error::coded(
        Code::SkillPlacementRefused,
        format!(
            "skill {} would also be served as {} from local_skills_folder ({}), which comes first: it would take that id from the skill that answers it now ({held_by}), hiding it. {next}",
            quoted(id),
            quoted(&local_id),
            roots.path(Root::LocalSkills).display(),
        ),
        &[],
    ))
}
