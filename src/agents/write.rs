//! `directory::agents::{create,update,delete}` on direct `<agents_folder>/<id>.md` files. A
//! bundled profile is shadowed by creating or updating its id, and comes back when that file is
//! deleted. A profile of `global_agents_folder` is updated and deleted where it is; creating its
//! id writes a project profile to `agents_folder`, which shadows it (as a bundled one is), and
//! deleting that brings it back.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::bundled;
use crate::code::Code;
use crate::doc::distance::closest;
use crate::doc::ids::validate_name;
use crate::doc::{MAX_FILE_BYTES, ParsedDoc, as_read};
use crate::error::{Error, Next, Result, next, quoted};
use crate::events::{ChangeEvent, Family};
use crate::family_writes::{
    Outcome, file_exists, modified_at, store_error, touched, writable_roots, write_update,
};
use crate::index::Reader;
use crate::request;
use crate::roots::{Root, Roots};
use crate::rules::agent::{self, Profile};
use crate::rules::{Reading, Source};
use crate::store::{self, Mode};

const NEXT_ON_CONFLICT: [Next; 2] = [
    next(
        "directory::agents::update",
        "edit the existing agent profile",
    ),
    next("directory::agents::list", "browse agent profile ids"),
];
const NEXT_ON_MISS: [Next; 1] = [next("directory::agents::list", "browse agent profile ids")];
const NEXT_ON_CHANGED: [Next; 1] = [next(
    "directory::agents::get",
    "read the profile as it is now (raw: true), merge your edit into it, and update with it as base",
)];

fn target(roots: &Roots, id: &str) -> PathBuf {
    roots.path(Root::Agents).join(format!("{id}.md"))
}

/// The scanner's rules for a profile being written (plain messages, not coded).
pub(crate) fn check(content: &str) -> Result<Profile> {
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::Invalid(format!(
            "content too large ({} bytes; max {MAX_FILE_BYTES})",
            content.len()
        )));
    }
    agent::profile(&ParsedDoc::parse(as_read(content)), Reading::Write).map_err(Error::invalid)
}

fn response(id: &str, profile: &Profile, content: &str, path: &Path) -> Value {
    json!({
        "id": id,
        "name": profile.name,
        "description": profile.description,
        "logo": profile.logo,
        "bytes": content.len(),
        "modified_at": modified_at(path),
    })
}

/// The file of a profile the index serves, with the root it is in, when it is still on disk
/// (disk is the truth: a file removed behind the index's back is missing, and an update must
/// not re-create it).
fn served_file(reader: &Reader, roots: &Roots, id: &str) -> Result<Option<(Root, PathBuf)>> {
    let Some(row) = reader.agent(id)? else {
        return Ok(None);
    };
    Ok(match row.source {
        Source::File { root, rel, .. } => {
            let path = roots.file(root, &rel);
            path.is_file().then_some((root, path))
        }
        Source::Bundled => None,
    })
}

fn miss(reader: &Reader, roots: &Roots, id: &str) -> Result<Error> {
    if let Some(skipped) = super::skipped_profile(reader, roots, id)? {
        return Ok(skipped);
    }
    let mut ids: Vec<String> = reader.agents()?.into_iter().map(|(i, _)| i).collect();
    ids.extend(bundled::agents().iter().map(|a| a.id.to_string()));
    Ok(Error::not_found(
        Code::AgentNotFound,
        "agent profile",
        id,
        &closest(id, ids),
        &NEXT_ON_MISS,
    ))
}

/// `directory::agents::create`; creating a bundled id shadows the bundled profile.
pub fn create(reader: &Reader, roots: &Roots, request: &Value) -> Result<Outcome> {
    let req: request::IdContent = request::parse(request)?;
    validate_name(&req.id).map_err(Error::invalid)?;
    let served_from = reader.agent(&req.id)?.map(|row| match row.source {
        Source::File { root, .. } => Some(root),
        Source::Bundled => None,
    });
    // Only a project profile is in the way: a global one is shadowed, as a bundled one is.
    if served_from.is_some_and(|root| root != Some(Root::GlobalAgents)) {
        return Err(Error::coded(
            Code::AgentExists,
            format!("agent profile {} already exists.", quoted(&req.id)),
            &NEXT_ON_CONFLICT,
        ));
    }
    let path = target(roots, &req.id);
    if path.exists() {
        return Err(file_exists(Code::AgentExists, &path, &NEXT_ON_CONFLICT));
    }
    let profile = check(&req.content)?;
    store::write_atomic(
        &[roots.path(Root::Agents)],
        &path,
        req.content.as_bytes(),
        Mode::CreateNew,
    )
    .map_err(|e| store_error(e, Code::AgentExists, Code::AgentExists, &NEXT_ON_CONFLICT))?;
    Ok(Outcome {
        response: response(&req.id, &profile, &req.content, &path),
        touched: vec![path],
        event: ChangeEvent::named(Family::Agents, "create", &req.id),
    })
}

/// `directory::agents::update`: overwrite the file, or copy-on-write a bundled profile. With
/// `base`, only a file (or bundled text) that still holds it, or holds `content` already, is
/// written over (`D416`).
pub fn update(reader: &Reader, roots: &Roots, request: &Value) -> Result<Outcome> {
    let req: request::IdUpdate = request::parse(request)?;
    validate_name(&req.id).map_err(Error::invalid)?;
    let (root, path, mode) = if let Some((root, path)) = served_file(reader, roots, &req.id)? {
        (root, path, Mode::Update)
    } else if bundled::agent(&req.id).is_some() {
        let path = target(roots, &req.id);
        if path.exists() {
            return Err(file_exists(Code::AgentExists, &path, &NEXT_ON_CONFLICT));
        }
        (Root::Agents, path, Mode::CreateNew)
    } else {
        return Err(miss(reader, roots, &req.id)?);
    };
    let profile = check(&req.content)?;
    // The profile's own root (a global one is edited in place), and the roots a link from it
    // may lead into, as the scan follows it.
    let mut may_write = writable_roots(roots);
    if !may_write.contains(&roots.path(root)) {
        may_write.push(roots.path(root));
    }
    // A bundled profile with no file yet: what `get` answered the caller is the bundled text.
    let bundled = bundled::agent(&req.id).map_or("", |agent| agent.raw);
    let landed = write_update(
        &may_write,
        &path,
        &req.content,
        mode,
        req.base.as_deref(),
        bundled,
    );
    let target = match landed {
        Ok(target) => target,
        Err(unwritten) => {
            return Err(unwritten.answer(
                Code::AgentChangedOnDisk,
                &format!("agent profile {}", quoted(&req.id)),
                &NEXT_ON_CHANGED,
                || miss(reader, roots, &req.id),
                |e| store_error(e, Code::AgentExists, Code::AgentExists, &NEXT_ON_CONFLICT),
            )?);
        }
    };
    Ok(Outcome {
        response: response(&req.id, &profile, &req.content, &path),
        touched: touched(path, target),
        event: ChangeEvent::named(Family::Agents, "update", &req.id),
    })
}

/// `directory::agents::delete`: only a file can be deleted; a bundled profile then comes back.
pub fn delete(reader: &Reader, roots: &Roots, request: &Value) -> Result<Outcome> {
    let req: request::ById = request::parse(request)?;
    validate_name(&req.id).map_err(Error::invalid)?;
    let Some((root, path)) = served_file(reader, roots, &req.id)? else {
        if bundled::agent(&req.id).is_some() {
            return Err(Error::coded(
                Code::AgentExists,
                format!(
                    "agent profile {} is bundled with the worker and has no local file to delete.",
                    quoted(&req.id)
                ),
                &NEXT_ON_CONFLICT,
            ));
        }
        return Err(miss(reader, roots, &req.id)?);
    };
    store::remove(&[roots.path(root)], &path)
        .map_err(|e| store_error(e, Code::AgentExists, Code::AgentExists, &[]))?;
    Ok(Outcome {
        response: json!({ "id": req.id }),
        touched: vec![path],
        event: ChangeEvent::named(Family::Agents, "delete", &req.id),
    })
}
