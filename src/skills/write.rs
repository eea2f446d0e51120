//! `directory::skills::{create,update,delete}`: validation in the contract's order, then an
//! atomic write. Creates always land in `skills_folder`; updates and deletes act on the file
//! the id resolves to; read-only skills (the agents skills roots, project and user-global, and
//! the bundled ones) are refused.

use std::path::Path;

use serde_json::{Value, json};

use crate::code::Code;
use crate::doc::classify::{PathClass, classify};
use crate::doc::distance::{SUGGESTIONS, closest_by};
use crate::doc::ids::first_segment;
use crate::doc::{ParsedDoc, as_read};
use crate::error::{Error, Next, Result, next, quoted};
use crate::events::ChangeEvent;
use crate::family_writes::{
    Outcome, check_content, check_inside, check_not_overridden, file_exists, modified_at,
    store_error, touched, writable_roots, write_update,
};
use crate::index::Reader;
use crate::request;
use crate::roots::{Root, Roots};
use crate::rules::Source;
use crate::rules::skill::{Visibility, identity, parse_id};
use crate::store::{self, Mode};

use super::placement::{
    Landing, check_not_hiding_agents_skill, check_not_hiding_bundled, check_not_shadowing,
};

const NEXT_ON_CONFLICT: [Next; 2] = [
    next("directory::skills::update", "edit the existing skill"),
    next("directory::skills::list", "browse skill ids"),
];
/// A create of an id a read-only skill serves: its update would be refused too.
const NEXT_ON_READ_ONLY_CONFLICT: [Next; 1] = [next("directory::skills::list", "browse skill ids")];
const NEXT_ON_CHANGED: [Next; 1] = [next(
    "directory::skills::get",
    "read the file as it is now (raw: true), merge your edit into it, and update with it as base",
)];
const NEXT_ON_MISS: [Next; 3] = [
    next("directory::skills::list", "browse skill ids"),
    next(
        "directory::skills::download",
        "materialize a missing bundle first",
    ),
    next("directory::skills::create", "author a new skill"),
];

/// `directory::skills::create`.
pub fn create(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Outcome> {
    let req: request::IdContent = request::parse(request)?;
    let id = parse_id(&req.id)?;
    check_reserved(&id)?;
    let namespace = first_segment(&id);
    let path = roots.path(Root::Skills).join(file_for(&req.id, &id));
    let landing = Landing::of(roots, &path);
    // Before the existence check: `<ns>/index` of an agents skill is the namespace's own.
    check_not_hiding_agents_skill(reader, roots, &landing, &id)?;
    if visibility.would_hide(&id) {
        return Err(Error::coded(
            Code::SkillPlacementRefused,
            format!(
                "id {id} would be hidden by filter_unregistered: its top namespace segment {namespace} is not an installed worker. Use a single-segment id, install the worker first, or set filter_unregistered: false.",
                id = quoted(&id),
                namespace = quoted(namespace)
            ),
            &[],
        ));
    }
    if let Some((_, row)) = reader.resolve_skill(visibility, &id)? {
        let exists = format!("skill {id} already exists.", id = quoted(&id));
        // Its update would be refused too: say so, rather than send the caller there.
        return Err(match read_only(roots, &id, &row.source, Asked::Create) {
            Some(why) => Error::coded(
                Code::SkillExists,
                format!("{exists} It is not yours to write: {why}"),
                &NEXT_ON_READ_ONLY_CONFLICT,
            ),
            None => Error::coded(Code::SkillExists, exists, &NEXT_ON_CONFLICT),
        });
    }
    check_inside(
        roots.path(Root::Skills),
        &path,
        Code::SkillPlacementRefused,
        &[],
    )?;
    if path.exists() {
        return Err(file_exists(Code::SkillExists, &path, &NEXT_ON_CONFLICT));
    }
    check_not_hiding_bundled(reader, &landing, &id)?;
    // After the existence checks: an id the local folder serves, or a file skipped at the
    // target, exists (D114).
    check_not_overridden(
        roots,
        namespace,
        &format!("skill {}", quoted(&id)),
        Code::SkillPlacementRefused,
    )?;
    check_not_shadowing(reader, roots, &landing, &id)?;
    check_content(&req.content)?;
    store::write_atomic(
        &[roots.path(Root::Skills)],
        &path,
        req.content.as_bytes(),
        Mode::CreateNew,
    )
    .map_err(|e| {
        store_error(
            e,
            Code::SkillExists,
            Code::SkillPlacementRefused,
            &NEXT_ON_CONFLICT,
        )
    })?;
    Ok(Outcome {
        response: written(&id, &req.content, &path),
        touched: vec![path],
        event: ChangeEvent::skill("create", &id),
    })
}

/// `prompts`, `system-prompts` and `agents` segments make a path something other than a skill.
fn check_reserved(id: &str) -> Result<()> {
    let problem = match classify(&format!("{id}.md")) {
        PathClass::Skill => return Ok(()),
        PathClass::Prompts => {
            format!(
                "id {id} contains the reserved `prompts` path segment; rename that segment before creating the skill.",
                id = quoted(id)
            )
        }
        PathClass::SystemPrompt => format!(
            "id {id} contains a `system-prompts` path segment, which the scanner classifies as a prompt — the created file would be invisible to directory::skills::list. Use directory::system-prompts::create for prompt files.",
            id = quoted(id)
        ),
        PathClass::Agents => format!(
            "id {id} contains an `agents` path segment, which the scanner classifies as an agent — the created file would be invisible to directory::skills::list. Use directory::agents::create for agent profiles.",
            id = quoted(id)
        ),
    };
    Err(Error::coded(Code::SkillPlacementRefused, problem, &[]))
}

/// The response of create and update: the new content's identity.
fn written(id: &str, content: &str, path: &Path) -> Value {
    let identity = identity(Some(&ParsedDoc::parse(as_read(content))), id);
    json!({
        "id": id,
        "title": identity.title,
        "type": identity.r#type,
        "function_id": identity.function_id,
        "bytes": content.len(),
        "modified_at": modified_at(path),
    })
}

/// The file a create writes, relative to `skills_folder`: `<id>.md`, or `<folder>/SKILL.md` when
/// the caller asked for that file by name (an Agent Skill; the id is `<folder>/index` either
/// way, which both files serve).
fn file_for(asked: &str, id: &str) -> String {
    let asked = asked.trim();
    let asked = asked
        .strip_prefix(crate::doc::ids::III_SCHEME)
        .unwrap_or(asked);
    match id.strip_suffix("/index") {
        Some(folder) if asked.ends_with(&format!("/{}", crate::rules::spec::SKILL_FILE)) => {
            format!("{folder}/{}", crate::rules::spec::SKILL_FILE)
        }
        _ => format!("{id}.md"),
    }
}

/// Finds the file an update or delete acts on, refusing read-only skills.
fn writable(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    id: &str,
) -> Result<(String, Root, std::path::PathBuf)> {
    let Some((found, row)) = reader.resolve_skill(visibility, id)? else {
        return Err(miss(reader, visibility, id)?);
    };
    if let Some(why) = read_only(roots, id, &row.source, Asked::Update) {
        return Err(Error::coded(Code::SkillReadOnly, why, &[]));
    }
    match row.source {
        // Disk is the truth: a file removed behind the index's back is missing, not writable.
        Source::File { root, rel, .. } if roots.file(root, &rel).is_file() => {
            Ok((found, root, roots.file(root, &rel)))
        }
        Source::File { .. } | Source::Bundled => Err(miss(reader, visibility, id)?),
    }
}

/// `D110` for `id`, with the visible ids closest to it.
fn miss(reader: &Reader, visibility: Visibility<'_>, id: &str) -> Result<Error> {
    let rows = reader.visible_skills(visibility)?;
    let closest: Vec<String> = closest_by(id, &rows, |(id, _)| id, SUGGESTIONS)
        .into_iter()
        .map(|(_, (_, row))| row.display_id.clone())
        .collect();
    Ok(Error::not_found(
        Code::SkillNotFound,
        "skill",
        id,
        &closest,
        &NEXT_ON_MISS,
    ))
}

/// The write that found a skill read-only: what to do instead depends on it.
#[derive(Clone, Copy)]
enum Asked {
    Create,
    Update,
}

/// Why a skill served from `source` cannot be written, when it cannot: bundled with the
/// worker, or under an agents skills root (another tool owns it).
fn read_only(roots: &Roots, id: &str, source: &Source, asked: Asked) -> Option<String> {
    match source {
        Source::File {
            root: root @ (Root::AgentsSkills | Root::GlobalAgentsSkills),
            ..
        } => Some(format!(
            "skill {id} is system-installed under an agents skills root ({}) and read-only; edit it with its owning tool, or copy it into skills_folder on disk to fork it.",
            roots.path(*root).display(),
            id = quoted(id)
        )),
        Source::Bundled => Some(format!(
            "skill {id} is bundled with the worker and read-only; {instead}",
            id = quoted(id),
            instead = match asked {
                Asked::Update => {
                    "create a skill of your own (directory::skills::create) to say something else."
                }
                Asked::Create => "create yours under another id.",
            }
        )),
        Source::File { .. } => None,
    }
}

/// The refusal an update of `id` answers because the skill is read-only (bundled, or under an
/// agents skills root), for the console page's dry run: [`writable`]'s own rule, so that the
/// two never disagree. A missing skill is left to the update itself (the dry run also reads
/// texts for ids not written yet).
pub(crate) fn check_not_read_only(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    id: &str,
) -> Result<()> {
    match writable(reader, roots, visibility, id) {
        Err(refused) if refused.code() == Some(Code::SkillReadOnly) => Err(refused),
        _ => Ok(()),
    }
}

/// `directory::skills::update`: overwrite an existing skill file; never creates. With `base`,
/// only a file that still holds it (or holds `content` already) is written (`D118`).
pub fn update(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Outcome> {
    let req: request::IdUpdate = request::parse(request)?;
    let id = parse_id(&req.id)?;
    check_content(&req.content)?;
    let (_, _, path) = writable(reader, roots, visibility, &id)?;
    // A replaced file keeps its mode: one this process may not read would stay unserved, yet
    // the update answer as if it were written and served.
    if !store::may_read(&path) && path.exists() {
        return Err(Error::coded(
            Code::SkillReadOnly,
            format!(
                "skill {} cannot be updated: this worker may not read its file {}, and an update keeps a file's permissions, so the new text would not be served either. Make the file readable (chmod u+r), then update it.",
                quoted(&id),
                path.display()
            ),
            &[],
        ));
    }
    let landed = write_update(
        &writable_roots(roots),
        &path,
        &req.content,
        Mode::Update,
        req.base.as_deref(),
        "",
    );
    let target = match landed {
        Ok(target) => target,
        Err(unwritten) => {
            return Err(unwritten.answer(
                Code::SkillChangedOnDisk,
                &format!("skill {}", quoted(&id)),
                &NEXT_ON_CHANGED,
                || miss(reader, visibility, &id),
                |e| store_error(e, Code::SkillExists, Code::SkillPlacementRefused, &[]),
            )?);
        }
    };
    Ok(Outcome {
        response: written(&id, &req.content, &path),
        touched: touched(path, target),
        event: ChangeEvent::skill("update", &id),
    })
}

/// `directory::skills::delete`: remove the file and the folders it leaves empty (never a
/// root), so that an emptied namespace stops shadowing lower roots.
pub fn delete(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Outcome> {
    let req: request::ById = request::parse(request)?;
    let id = parse_id(&req.id)?;
    let (found, _, path) = writable(reader, roots, visibility, &id)?;
    let keep: Vec<&Path> = roots.active().map(|(_, path)| path).collect();
    store::remove_beneath(&writable_roots(roots), &path, true, &keep)
        .map_err(|e| store_error(e, Code::SkillExists, Code::SkillPlacementRefused, &[]))?;
    // A scoped reconcile lists the roots' top-level folders again, so an emptied namespace
    // folder that was removed stops shadowing too.
    Ok(Outcome {
        response: json!({ "id": found }),
        touched: vec![path],
        event: ChangeEvent::skill("delete", &found),
    })
}
