//! What the three families' write functions (`skills/write.rs`, `system_prompts/write.rs`,
//! `agents/write.rs`) share: the outcome a family's write hands back to the directory
//! (which reconciles the touched paths and publishes the event under its write lock), the
//! content checks, a conditional update's check of its `base`, and the rendering of store
//! errors.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::code::Code;
use crate::doc::{MAX_FILE_BYTES, as_read, decode, frontmatter};
use crate::error::{Error, Next, Result};
use crate::events::ChangeEvent;
use crate::roots::{Root, Roots};
use crate::store::way::{Blocked, check_way};
use crate::store::{self, StoreError};
use crate::time::Stamp;

/// A write done on disk: its response, the paths to reconcile, and the event to publish.
pub struct Outcome {
    pub response: Value,
    pub touched: Vec<PathBuf>,
    pub event: ChangeEvent,
}

/// The paths a write reconciles: the file the id resolved to and, when a symbolic link led the
/// write elsewhere (the file is a link, or a folder on its way is), the file written, which
/// the scan serves under its own id as well (`store::write_atomic`).
pub fn touched(path: PathBuf, written: PathBuf) -> Vec<PathBuf> {
    if written == path {
        vec![path]
    } else {
        vec![path, written]
    }
}

/// The contract's checks on full-file content for skills and system prompts (D113).
pub fn check_content(content: &str) -> Result<()> {
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::coded(
            Code::ContentRefused,
            format!(
                "content is too large ({} bytes; max {MAX_FILE_BYTES}).",
                content.len()
            ),
            &[],
        ));
    }
    let content = as_read(content);
    if content[frontmatter::split(content).body_offset..]
        .trim()
        .is_empty()
    {
        return Err(Error::coded(
            Code::ContentRefused,
            "content has an empty body after the frontmatter block; readers reject empty bodies.",
            &[],
        ));
    }
    Ok(())
}

/// Why an update wrote nothing.
pub enum Unwritten {
    /// With `base`, the file it would replace is gone: the family answers its not-found.
    Gone,
    /// With `base`, what it would replace no longer holds it: the family answers
    /// [`changed_on_disk`], naming `file` (none for a bundled text).
    Changed { file: Option<PathBuf> },
    /// The write failed or was refused (the family renders it, `store_error`).
    Store(StoreError),
}

impl Unwritten {
    /// A family's answer to an update that wrote nothing: `miss` (its not-found) for a file
    /// gone, [`changed_on_disk`] with `code`, `what` and `next` for one changed, and `store`
    /// (its rendering of store errors) for the rest.
    pub fn answer(
        self,
        code: Code,
        what: &str,
        next: &[Next],
        miss: impl FnOnce() -> Result<Error>,
        store: impl FnOnce(StoreError) -> Error,
    ) -> Result<Error> {
        Ok(match self {
            Unwritten::Gone => miss()?,
            Unwritten::Changed { file } => changed_on_disk(code, what, file.as_deref(), next),
            Unwritten::Store(e) => store(e),
        })
    }
}

/// An update's write of `content` over `path` (`mode` [`store::Mode::Update`], or
/// [`store::Mode::CreateNew`] for the first copy of a bundled document, whose text is
/// `bundled`). With `base` it is conditional: a file is compared by
/// [`store::write_atomic_expecting`] just before its rename, a bundled text here, both by
/// [`holds_base`].
pub fn write_update(
    may_write: &[&Path],
    path: &Path,
    content: &str,
    mode: store::Mode,
    base: Option<&str>,
    bundled: &str,
) -> std::result::Result<PathBuf, Unwritten> {
    let replaces_a_file = mode != store::Mode::CreateNew;
    if let Some(base) = base
        && !replaces_a_file
        && !holds_base(bundled.as_bytes(), base, content)
    {
        return Err(Unwritten::Changed { file: None });
    }
    let holds = |now: &[u8]| base.is_some_and(|base| holds_base(now, base, content));
    let expected = base.filter(|_| replaces_a_file).map(|_| store::Expected {
        limit: MAX_FILE_BYTES + 1,
        holds: &holds,
    });
    store::write_atomic_expecting(may_write, path, content.as_bytes(), mode, expected).map_err(
        |e| match e {
            StoreError::Unexpected { gone: true, .. } => Unwritten::Gone,
            StoreError::Unexpected { path, .. } => Unwritten::Changed { file: Some(path) },
            e => Unwritten::Store(e),
        },
    )
}

/// A conditional update's rule: `now`, what the update would write over (a file's bytes, or a
/// bundled text the write would shadow), must read as `base`, the text the caller's edit
/// started from (nobody wrote it since the caller read it), or as `content` (the update is
/// there already: a repeated call whose answer was lost). Both are compared as `get` answers
/// `raw`, a leading byte-order mark dropped ([`decode`]), so a caller's `base` is what `get`
/// gave it; a file over the size cap or not UTF-8 holds neither.
fn holds_base(now: &[u8], base: &str, content: &str) -> bool {
    decode(now).is_ok_and(|now| now == as_read(base) || now == as_read(content))
}

/// The refusal of a conditional update whose document another writer changed since the caller
/// read it: `what` names it (`skill "a/b"`), `file` is where it changed (none for a bundled
/// text that came back), `next` the family's `get`.
fn changed_on_disk(code: Code, what: &str, file: Option<&Path>, next: &[Next]) -> Error {
    let place = match file {
        Some(path) => format!("its file {}", path.display()),
        // A bundled document without a file of its own (removed since, say): `get` answers the
        // bundled text.
        None => "it has no file of its own now, so it reads as the bundled text, which".to_string(),
    };
    Error::coded(
        code,
        format!(
            "{what} changed on disk since your edit began: {place} no longer holds the text the edit started from (base), and the update would write over that change, so nothing was written. Read it again (raw), merge your edit into what it holds now, and save that, with the text you read as base."
        ),
        next,
    )
}

/// Refuses, with the family's coded message, a target that a symbolic link on its way would
/// put outside `root` (design, bad input: a write never lands outside the configured roots),
/// or that it reaches through a link loop, which the walk never enters: the rule of
/// `store::way`, which the downloads follow too. Anything else in the way (a file
/// where a folder is needed) is left to the atomic write, which fails with the system's error.
/// The guarantee is the write's own (`store::beneath`): a link swapped in after this check
/// makes the write fail with the same refusal, never land outside.
pub fn check_inside(root: &Path, target: &Path, code: Code, next: &[Next]) -> Result<()> {
    let Ok(rel) = target.strip_prefix(root) else {
        return Ok(());
    };
    match check_way(root, rel) {
        Err(Blocked::LinkOutside { .. }) => Err(outside(code, target, root, next)),
        Err(Blocked::LinkLoop { at }) => Err(through_loop(code, target, &at, next)),
        Ok(()) | Err(Blocked::NotAFolder { .. } | Blocked::Unreadable { .. }) => Ok(()),
    }
}

/// Refuses a create in `skills_folder` under a top-level folder `top` that `local_skills_folder`
/// overrides: the scan reads a namespace (and the `system-prompts` folder) from the local root
/// alone when it has a folder of that name, even an empty one, so the file written would be
/// hidden from every read. `what` names what was to be written ("skill \"docx/x\"").
pub fn check_not_overridden(roots: &Roots, top: &str, what: &str, code: Code) -> Result<()> {
    let (skills, local) = (roots.path(Root::Skills), roots.path(Root::LocalSkills));
    let overriding = local.join(top);
    if local == skills || !overriding.is_dir() {
        return Ok(());
    }
    Err(Error::coded(
        code,
        format!(
            "{what} would be written in skills_folder/{top}/, which local_skills_folder overrides with its own {top}/ folder ({}): no read would see it. Write it on disk in that folder, or move that folder away.",
            overriding.display()
        ),
        &[],
    ))
}

/// The modification time of a file just written, as the contract prints it.
pub fn modified_at(path: &Path) -> String {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(|t| Stamp::from_system(t).rfc3339())
        .unwrap_or_default()
}

/// A store error as the library reports it; a target that appeared meanwhile is the coded
/// "file already exists" error of the family (`code`), and a link on the way (found, or
/// swapped in while the write ran) its coded refusal to write outside the root (`link_code`).
pub fn store_error(e: StoreError, code: Code, link_code: Code, next: &[Next]) -> Error {
    match e {
        StoreError::Exists(path) => file_exists(code, &path, next),
        StoreError::Link { path, root } => outside(link_code, &path, &root, &[]),
        e @ StoreError::LinkToNonDocument { .. } => Error::coded(link_code, e.to_string(), &[]),
        other => other.into(),
    }
}

/// The roots an update or delete may act in: the file the index resolved may have been reached
/// through a link from one of them into another (the agents skills root is read-only).
pub fn writable_roots(roots: &Roots) -> Vec<&Path> {
    [Root::Skills, Root::LocalSkills, Root::Agents]
        .into_iter()
        .map(|root| roots.path(root))
        .collect()
}

fn outside(code: Code, target: &Path, root: &Path, next: &[Next]) -> Error {
    Error::coded(
        code,
        format!(
            "{} would lead outside {} through a symbolic link; writes stay inside the configured folders.",
            target.display(),
            root.display()
        ),
        next,
    )
}

fn through_loop(code: Code, target: &Path, link: &Path, next: &[Next]) -> Error {
    Error::coded(
        code,
        format!(
            "{} would be written through {}, a symbolic link back to a folder above it: the scan never enters such a link, so the file would be served under another id, or not at all. Name the path without the link.",
            target.display(),
            link.display()
        ),
        next,
    )
}

/// `a file already exists at <path> (currently skipped by the scanner); …`
pub fn file_exists(code: Code, path: &Path, next: &[Next]) -> Error {
    Error::coded(
        code,
        format!(
            "a file already exists at {} (currently skipped by the scanner); edit or remove it on disk.",
            path.display()
        ),
        next,
    )
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// The writes follow the landing's rule for links (`store::way`), and differ on what else
    /// is in the way: a file where a folder is needed is left to the write's own error, which
    /// the landing refuses up front ("a file where the bundle needs a folder").
    #[test]
    fn only_a_link_leading_out_or_back_up_is_refused_before_the_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("skills");
        let outside = dir.path().join("outside");
        fs::create_dir_all(root.join("ns")).expect("mkdir");
        fs::create_dir_all(&outside).expect("mkdir");
        fs::write(root.join("file"), "x").expect("write");
        std::os::unix::fs::symlink(&outside, root.join("out")).expect("link");
        let check =
            |rel: &str| check_inside(&root, &root.join(rel), Code::SkillPlacementRefused, &[]);
        let refused = check("out/x.md").expect_err("a link out");
        assert_eq!(refused.code(), Some(Code::SkillPlacementRefused));
        assert!(
            refused.to_string().contains("through a symbolic link"),
            "{refused}"
        );
        std::os::unix::fs::symlink("..", root.join("ns/up")).expect("link");
        let refused = check("ns/up/ns/x.md").expect_err("a loop");
        assert_eq!(refused.code(), Some(Code::SkillPlacementRefused));
        assert!(refused.to_string().contains("link back"), "{refused}");
        for rel in ["ns/x.md", "new/x.md", "file/x.md"] {
            assert!(check(rel).is_ok(), "{rel}");
        }
        let landing = check_way(&root, Path::new("file/x.md")).expect_err("a file");
        assert!(matches!(landing, Blocked::NotAFolder { .. }), "{landing}");
    }
}
