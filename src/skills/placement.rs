//! What a create's file would hide, judged where the reads will see it. In the default layout
//! `local_skills_folder` (`skills/iii`) sits inside `skills_folder`, so a file written under it
//! is read twice, and the local root wins: `iii/pdf/x` starts the local namespace `pdf`, which
//! shadows what `skills_folder/pdf/` would. Each check here therefore looks at the namespace the
//! file lands in ([`Landing`]), never at the id's first segment alone.

use std::path::Path;

use crate::code::Code;
use crate::error::{Error, Result, quoted};
use crate::index::Reader;
use crate::roots::{Root, Roots};
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
/// hidden without a word. (A top-level file `iii/iii-directory.md` hides none of them: it takes
/// the bare id, and the overview is listed as `iii-directory/index`, as any such pair is.)
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
/// default, as `skills/iii`) and starts there a namespace `skills_folder` serves too: the new
/// local folder (or file) would override that namespace whole, hiding every skill in it
/// (`iii/pptx/note` hides `pptx`). `id` is the id asked for.
pub(super) fn check_not_shadowing(roots: &Roots, landing: &Landing<'_>, id: &str) -> Result<()> {
    if !landing.in_local() {
        return Ok(());
    }
    let (skills, local) = (roots.path(Root::Skills), roots.path(Root::LocalSkills));
    let rel = landing.rel.to_string_lossy();
    let namespace = match rel.split_once('/') {
        Some((first, _)) => first.to_string(),
        None => rel.trim_end_matches(".md").to_string(),
    };
    let present = |root: &Path| {
        root.join(&namespace).exists() || root.join(format!("{namespace}.md")).exists()
    };
    // Already a local namespace: its skills are the local ones, and nothing new is hidden.
    if present(local) || !present(skills) {
        return Ok(());
    }
    // A `SKILL.md` is created by naming it (`<folder>/SKILL.md`); another file by its id.
    let local_id = match landing.rel.file_name() == Some(SKILL_FILE.as_ref()) {
        true => &*rel,
        false => rel.trim_end_matches(".md"),
    };
    // The local folder is itself (or lies within) that namespace of `skills_folder`.
    let message = match local.starts_with(skills.join(&namespace)) {
        true => format!(
            "skill {} would start a {namespace}/ folder in local_skills_folder ({}), which lies in skills_folder's own namespace {}: the new folder would take that namespace over, hiding every skill skills_folder serves under {}, and the file would be served as {}, not as the id asked for. Create it as {} instead.",
            quoted(id),
            local.display(),
            quoted(&namespace),
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
