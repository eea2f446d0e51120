//! `directory::system-prompts::{create,update,delete}`. Creates land at
//! `<skills_folder>/system-prompts/<name>.md`; an update of a bundled prompt writes the file that
//! shadows it there.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::bundled;
use crate::code::Code;
use crate::doc::distance::closest;
use crate::doc::ids::validate_name;
use crate::doc::{ParsedDoc, as_read};
use crate::error::{Error, Next, Result, next};
use crate::events::{ChangeEvent, Family};
use crate::family_writes::{
    Outcome, check_content, check_inside, check_not_overridden, file_exists, modified_at,
    store_error, touched, writable_roots, write_update,
};
use crate::index::Reader;
use crate::request;
use crate::roots::{Root, Roots};
use crate::rules::prompt;
use crate::rules::{Reading, Source};
use crate::store::{self, Mode};

/// The folder under `skills_folder` where created system prompts go.
pub const FOLDER: &str = "system-prompts";

const NEXT_ON_CONFLICT: [Next; 2] = [
    next(
        "directory::system-prompts::update",
        "edit the existing system prompt",
    ),
    next(
        "directory::system-prompts::list",
        "browse system prompt names",
    ),
];
const NEXT_ON_CHANGED: [Next; 1] = [next(
    "directory::system-prompts::get",
    "read the prompt as it is now (raw: true), merge your edit into it, and update with it as base",
)];
const NEXT_ON_MISS: [Next; 1] = [next(
    "directory::system-prompts::list",
    "browse system prompt names",
)];

fn target(roots: &Roots, name: &str) -> PathBuf {
    roots
        .path(Root::Skills)
        .join(FOLDER)
        .join(format!("{name}.md"))
}

/// Refuses a new prompt file (D214) that the scan would not read: behind a link out of
/// `skills_folder`, or in its `system-prompts` folder while `local_skills_folder` has its own.
fn check_placement(roots: &Roots, name: &str, path: &Path) -> Result<()> {
    check_inside(roots.path(Root::Skills), path, Code::PromptExists, &[])?;
    check_not_overridden(
        roots,
        FOLDER,
        &format!("system prompt {name:?}"),
        Code::PromptExists,
    )
}

/// The scan's rules for the prompt being written under `name` (D213): its declared name, when
/// it declares one, and its description.
pub(crate) fn check_frontmatter(content: &str, name: &str) -> Result<(Option<String>, String)> {
    let prompt = prompt::read(&ParsedDoc::parse(as_read(content)), name, Reading::Write)
        .map_err(|problem| problem.write_error())?;
    Ok((prompt.declared, prompt.description))
}

/// A declared name must be the requested one when the request names the file.
fn check_declared(declared: &Option<String>, requested: &str) -> Result<()> {
    match declared {
        Some(name) if name != requested => Err(Error::coded(
            Code::PromptFrontmatterRefused,
            format!(
                "frontmatter `name` ({name:?}) must match the requested system prompt name ({requested:?})."
            ),
            &[],
        )),
        _ => Ok(()),
    }
}

fn response(name: &str, description: &str, content: &str, path: &Path) -> Value {
    json!({ "name": name, "description": description, "bytes": content.len(), "modified_at": modified_at(path) })
}

/// `directory::system-prompts::create`.
pub fn create(reader: &Reader, roots: &Roots, request: &Value) -> Result<Outcome> {
    let req: request::NameContent = request::parse(request)?;
    validate_name(&req.name).map_err(Error::invalid)?;
    if reader.prompt(&req.name)?.is_some() {
        return Err(Error::coded(
            Code::PromptExists,
            format!("system prompt {:?} already exists.", req.name),
            &NEXT_ON_CONFLICT,
        ));
    }
    let path = target(roots, &req.name);
    check_placement(roots, &req.name, &path)?;
    if path.exists() {
        return Err(taken_file(reader, roots, &path)?);
    }
    // A file of that name the scan skips (unreadable, say) elsewhere: once it is served again,
    // one of the two would be skipped as a duplicate name.
    if let Some((other, _)) = super::skipped_prompt_file(reader, roots, &req.name)? {
        return Err(file_exists(Code::PromptExists, &other, &NEXT_ON_CONFLICT));
    }
    check_content(&req.content)?;
    let (declared, description) = check_frontmatter(&req.content, &req.name)?;
    check_declared(&declared, &req.name)?;
    store::write_atomic(
        &[roots.path(Root::Skills)],
        &path,
        req.content.as_bytes(),
        Mode::CreateNew,
    )
    .map_err(|e| store_error(e, Code::PromptExists, Code::PromptExists, &NEXT_ON_CONFLICT))?;
    Ok(Outcome {
        response: response(&req.name, &description, &req.content, &path),
        touched: vec![path],
        event: ChangeEvent::named(Family::SystemPrompts, "create", &req.name),
    })
}

/// `directory::system-prompts::update`: overwrite the file (a declared `name` may rename the
/// prompt), or shadow a bundled prompt with a new file. With `base`, only a file (or bundled
/// text) that still holds it, or holds `content` already, is written over (`D215`).
pub fn update(reader: &Reader, roots: &Roots, request: &Value) -> Result<Outcome> {
    let req: request::NameUpdate = request::parse(request)?;
    validate_name(&req.name).map_err(Error::invalid)?;
    let (path, mode, stem) = match existing_file(reader, roots, &req.name)? {
        Some(path) => {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (path, Mode::Update, stem)
        }
        None if bundled::prompt(&req.name).is_some() => {
            let path = target(roots, &req.name);
            check_placement(roots, &req.name, &path)?;
            if path.exists() {
                return Err(taken_file(reader, roots, &path)?);
            }
            (path, Mode::CreateNew, req.name.clone())
        }
        None => return Err(miss(reader, roots, &req.name)?),
    };
    check_content(&req.content)?;
    let (declared, description) = check_frontmatter(&req.content, &req.name)?;
    if mode == Mode::CreateNew {
        check_declared(&declared, &req.name)?;
    }
    if let Some(to) = &declared {
        check_one_name(reader, roots, &path, &req.name, to)?;
    }
    let name = declared.unwrap_or(stem);
    if name != req.name {
        check_rename(reader, &req.name, &name)?;
    }
    // A bundled prompt with no file yet: what `get` answered the caller is the bundled text.
    // A content that renames the prompt is compared under the name it is updated by: that
    // file is the one the write replaces.
    let bundled = bundled::prompt(&req.name).map_or("", |prompt| prompt.raw);
    let landed = write_update(
        &writable_roots(roots),
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
                Code::PromptChangedOnDisk,
                &format!("system prompt {:?}", req.name),
                &NEXT_ON_CHANGED,
                || miss(reader, roots, &req.name),
                |e| store_error(e, Code::PromptExists, Code::PromptExists, &NEXT_ON_CONFLICT),
            )?);
        }
    };
    Ok(Outcome {
        response: response(&name, &description, &req.content, &path),
        touched: touched(path, target),
        event: ChangeEvent::named(Family::SystemPrompts, "update", &name),
    })
}

/// An update whose frontmatter `name` renames prompt `from` may not take the name of another
/// prompt's file: the scan keeps one of two files declaring a name and skips the other, so the
/// written prompt (or the one it collided with) could no longer be read, updated or deleted.
/// Taking a bundled prompt's name shadows it, as a create may.
pub(crate) fn check_rename(reader: &Reader, from: &str, to: &str) -> Result<()> {
    match reader.prompt(to)?.map(|row| row.source) {
        Some(Source::File { .. }) => Err(Error::coded(
            Code::PromptExists,
            format!(
                "system prompt {to:?} already exists: this content's frontmatter `name` would rename {from:?} onto it, and the next scan would skip one of the two files. Keep the name {from:?}, choose a free one, or delete {to:?} first."
            ),
            &NEXT_ON_CONFLICT,
        )),
        _ => Ok(()),
    }
}

/// A file read under more than one name (a symbolic link to it, or it a link to another's
/// file) takes each name from its file name: a declared `name` would give them all one name,
/// and the next scan would skip every file declaring it. Refused unless the file has no other
/// name.
fn check_one_name(reader: &Reader, roots: &Roots, path: &Path, from: &str, to: &str) -> Result<()> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
    let real = path.canonicalize().ok();
    let mut others = Vec::new();
    for (name, row) in reader.prompts()? {
        if let Source::File { root, rel, .. } = &row.source {
            let file = roots.file(*root, rel);
            if name != from && file != path && real.is_some() && file.canonicalize().ok() == real {
                others.push(name);
            }
        }
    }
    if !is_link && others.is_empty() {
        return Ok(());
    }
    let names = match others.is_empty() {
        true => "another name".to_string(),
        false => format!("{} too", others.join(", ")),
    };
    Err(Error::coded(
        Code::PromptExists,
        format!(
            "system prompt {from:?} is read from a file with more than one name (a symbolic link: {names}): a frontmatter `name` ({to:?}) would give every one of them that name, and the next scan would skip them. Leave `name` out (each name comes from its file name), or rename the files themselves."
        ),
        &NEXT_ON_CONFLICT,
    ))
}

/// `directory::system-prompts::delete`: only files can be deleted (a bundled prompt has none).
pub fn delete(reader: &Reader, roots: &Roots, request: &Value) -> Result<Outcome> {
    let req: request::ByName = request::parse(request)?;
    validate_name(&req.name).map_err(Error::invalid)?;
    let Some(path) = existing_file(reader, roots, &req.name)? else {
        return Err(miss(reader, roots, &req.name)?);
    };
    store::remove(&writable_roots(roots), &path)
        .map_err(|e| store_error(e, Code::PromptExists, Code::PromptExists, &[]))?;
    Ok(Outcome {
        response: json!({ "name": req.name }),
        touched: vec![path],
        event: ChangeEvent::named(Family::SystemPrompts, "delete", &req.name),
    })
}

/// The file of a system prompt the index knows, if it is still on disk (disk is the truth: a
/// file removed behind the index's back is missing, and an update must not re-create it).
fn existing_file(reader: &Reader, roots: &Roots, name: &str) -> Result<Option<PathBuf>> {
    Ok(match reader.prompt(name)?.map(|row| row.source) {
        Some(Source::File { root, rel, .. }) => {
            Some(roots.file(root, &rel)).filter(|p| p.is_file())
        }
        _ => None,
    })
}

/// The refusal of a write whose file is already there: the contract's "currently skipped"
/// message, unless the file is served under the name its frontmatter declares (a prompt
/// renamed by an update), which the refusal then names.
fn taken_file(reader: &Reader, roots: &Roots, path: &Path) -> Result<Error> {
    let served = reader
        .prompts()?
        .into_iter()
        .find(|(_, row)| match &row.source {
            Source::File { root, rel, .. } => roots.file(*root, rel) == path,
            _ => false,
        });
    Ok(match served {
        Some((name, _)) => Error::coded(
            Code::PromptExists,
            format!(
                "a file already exists at {}: it holds the system prompt {name:?} (its frontmatter names it); pick another name, or edit {name:?}.",
                path.display()
            ),
            &NEXT_ON_CONFLICT,
        ),
        None => file_exists(Code::PromptExists, path, &NEXT_ON_CONFLICT),
    })
}

fn miss(reader: &Reader, roots: &Roots, name: &str) -> Result<Error> {
    if let Some(skipped) = super::skipped_prompt(reader, roots, name)? {
        return Ok(skipped);
    }
    let names: Vec<String> = reader.prompts()?.into_iter().map(|(n, _)| n).collect();
    Ok(Error::not_found(
        Code::PromptNotFound,
        "system prompt",
        name,
        &closest(name, names),
        &NEXT_ON_MISS,
    ))
}
