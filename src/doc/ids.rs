//! Skill ids, names and their validation (contract §2.3), turning a caller's id input into an id
//! (§3.4 step 1), deriving a skill's id from its path (§3.1), and the edit distance behind
//! "Did you mean" suggestions.
//!
//! Messages carry no code and no trailing period: callers wrap them in their own sentence.
//! Quoted values use Rust's debug quoting, so a hostile id cannot break out of its quotes.

/// Longest segment of a skill id, and longest system prompt name or agent id, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 64;

/// Longest whole skill id, in bytes.
pub const MAX_ID_BYTES: usize = 1024;
use serde::{Deserialize, Serialize};

use crate::error::quoted;

/// The link form `directory::skills::get` accepts in front of an id.
pub(crate) const III_SCHEME: &str = "iii://";

/// File names that stand for a folder's overview document, `<folder>/index`.
const OVERVIEW_FILE_NAMES: [&str; 2] = ["SKILL.md", "SKILLS.md"];

const MARKDOWN_EXTENSION: &str = ".md";

/// The id an overview file maps to.
const INDEX: &str = "index";

/// The characters allowed in id segments, names and (after the first) worker names.
fn is_id_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
}

/// Why a string is not a skill id. The messages carry no code and no trailing period; an id
/// or segment is echoed quoted and cut ([`quoted`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum IdError {
    #[error("id must be non-empty")]
    Empty,
    #[error("id may not have a leading or trailing '/': {}", quoted(.0))]
    EdgeSlash(String),
    #[error("id too long ({} chars; max {MAX_ID_BYTES}): {}", .0.len(), quoted(.0))]
    TooLong(String),
    /// Segment `position` (from 1, for the person reading it) breaks a segment rule.
    #[error("invalid id (segment {position} of {}): {problem}", quoted(id))]
    Segment {
        id: String,
        position: usize,
        problem: SegmentError,
    },
    /// A caller's id input that is no path at all (another scheme than `iii://`).
    #[error("Invalid id (must be a bare skill path, a path ending in .md, or an iii:// URI): {0}")]
    NotAPath(String),
}

/// Why one `/`-separated segment of a skill id is not valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum SegmentError {
    #[error("segment must be non-empty")]
    Empty,
    #[error("segment too long ({} chars; max {MAX_SEGMENT_BYTES}): {}", .0.len(), quoted(.0))]
    TooLong(String),
    #[error(
        "segment may only contain lowercase ASCII letters, digits, '-' and '_': {}",
        quoted(.0)
    )]
    Characters(String),
}

/// Why a string is not a system prompt name or an agent profile id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum NameError {
    #[error("name must be non-empty")]
    Empty,
    #[error("name too long ({0} chars; max {MAX_SEGMENT_BYTES})")]
    TooLong(usize),
    #[error(
        "name may only contain lowercase ASCII letters, digits, '-' and '_': {}",
        quoted(.0)
    )]
    Characters(String),
}

/// Why a string is not a registry worker name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkerNameError {
    #[error("worker name must be non-empty")]
    Empty,
    #[error(
        "worker name must start with a lowercase ASCII letter or digit: {}",
        quoted(.0)
    )]
    Start(String),
    #[error(
        "worker name may only contain lowercase letters, digits, '-', '_': {}",
        quoted(.0)
    )]
    Characters(String),
}

/// Checks a skill id: `/`-separated segments, each 1–64 bytes of `a-z 0-9 - _`, at most 1024
/// bytes in all.
pub fn validate_skill_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.starts_with('/') || id.ends_with('/') {
        return Err(IdError::EdgeSlash(id.to_owned()));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(IdError::TooLong(id.to_owned()));
    }
    for (index, segment) in id.split('/').enumerate() {
        if let Err(problem) = validate_segment(segment) {
            return Err(IdError::Segment {
                id: id.to_owned(),
                position: index + 1,
                problem,
            });
        }
    }
    Ok(())
}

fn validate_segment(segment: &str) -> Result<(), SegmentError> {
    if segment.is_empty() {
        return Err(SegmentError::Empty);
    }
    if segment.len() > MAX_SEGMENT_BYTES {
        return Err(SegmentError::TooLong(segment.to_owned()));
    }
    if !segment.chars().all(is_id_char) {
        return Err(SegmentError::Characters(segment.to_owned()));
    }
    Ok(())
}

/// Checks a system prompt name or an agent profile id: one segment, 1–64 bytes of `a-z 0-9 - _`.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_SEGMENT_BYTES {
        return Err(NameError::TooLong(name.len()));
    }
    if !name.chars().all(is_id_char) {
        return Err(NameError::Characters(name.to_owned()));
    }
    Ok(())
}

/// Longest function id an agent profile's `functions:` may name, in bytes.
pub const MAX_FUNCTION_ID_BYTES: usize = 256;

/// Why a string is not an engine function id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum FunctionIdError {
    #[error("function id must be non-empty")]
    Empty,
    #[error("function id too long ({0} bytes; max {MAX_FUNCTION_ID_BYTES})")]
    TooLong(usize),
    #[error(
        "function id must be namespaced with `::` (e.g. engine::functions::list): {}",
        quoted(.0)
    )]
    NotNamespaced(String),
    #[error(
        "function id segments must be non-empty and hold only ASCII letters, digits, '-', '_' and '.': {}",
        quoted(.0)
    )]
    Segment(String),
}

/// Checks an engine function id, as an agent profile's `functions:` names one: `::`-separated
/// segments (at least two: the worker's namespace and the function), each of ASCII letters,
/// digits, `-`, `_` and `.`, at most [`MAX_FUNCTION_ID_BYTES`] in all. The engine's own ids
/// (`engine::functions::list`, `directory::__on_worker_added`) all pass.
pub fn validate_function_id(id: &str) -> Result<(), FunctionIdError> {
    if id.is_empty() {
        return Err(FunctionIdError::Empty);
    }
    if id.len() > MAX_FUNCTION_ID_BYTES {
        return Err(FunctionIdError::TooLong(id.len()));
    }
    if !id.contains("::") {
        return Err(FunctionIdError::NotNamespaced(id.to_owned()));
    }
    let segment_ok = |segment: &str| {
        !segment.is_empty()
            && segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if !id.split("::").all(segment_ok) {
        return Err(FunctionIdError::Segment(id.to_owned()));
    }
    Ok(())
}

/// Checks a registry worker name before it goes into a registry URL: it must start with a
/// lowercase letter or digit (so never `-`, `.` or `/`), then `a-z 0-9 - _` only.
pub fn validate_worker_name(name: &str) -> Result<(), WorkerNameError> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(WorkerNameError::Empty);
    };
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return Err(WorkerNameError::Start(name.to_owned()));
    }
    if !chars.all(is_id_char) {
        return Err(WorkerNameError::Characters(name.to_owned()));
    }
    Ok(())
}

/// The first `/`-separated segment of an id or relative path: a skill's namespace, the
/// top-level folder a file sits under.
pub fn first_segment(path: &str) -> &str {
    path.split('/').next().unwrap_or(path)
}

/// Turns what a caller passed as a skill id into an id to look up: trimmed, an `iii://` prefix
/// dropped, a path to an overview file (`…/SKILL.md`, `…/SKILLS.md`) mapped to `…/index`, and
/// one `.md` extension dropped. Only the shape of the input is checked here; the result still
/// goes through [`validate_skill_id`].
pub fn normalize_id_input(raw: &str) -> Result<String, IdError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(IdError::Empty);
    }
    let path = trimmed.strip_prefix(III_SCHEME).unwrap_or(trimmed);
    // Any other scheme (https://, file://, even a second iii://) is not something we can serve.
    if path.contains("://") {
        return Err(IdError::NotAPath(trimmed.to_owned()));
    }
    for name in OVERVIEW_FILE_NAMES {
        if path == name {
            return Ok(INDEX.to_owned());
        }
        if let Some(folder) = path
            .strip_suffix(name)
            .and_then(|rest| rest.strip_suffix('/'))
        {
            return Ok(format!("{folder}/{INDEX}"));
        }
    }
    Ok(path
        .strip_suffix(MARKDOWN_EXTENSION)
        .unwrap_or(path)
        .to_owned())
}

/// The id of a skill file from its path relative to the skills root (`/` separators, ending in
/// `.md`): the extension removed, and a file named exactly `SKILL.md` or `SKILLS.md` read as
/// the folder's `index`. Only the file name is looked at; a folder named `SKILL` stays as it is.
/// The result is not validated.
pub fn skill_id_for(rel_path: &str) -> String {
    let (folder, file) = match rel_path.rsplit_once('/') {
        Some((folder, file)) => (Some(folder), file),
        None => (None, rel_path),
    };
    let stem = if OVERVIEW_FILE_NAMES.contains(&file) {
        INDEX
    } else {
        file.strip_suffix(MARKDOWN_EXTENSION).unwrap_or(file)
    };
    match folder {
        Some(folder) => format!("{folder}/{stem}"),
        None => stem.to_owned(),
    }
}

/// The paths [`skill_id_for`] maps to `id`, whether or not they exist: `<id>.md`, and for an
/// `index` id the folder's overview files. What a change to one skill may touch is found by
/// these paths, without a look at the rest of its folder.
pub fn skill_files_for(id: &str) -> Vec<String> {
    let folder = if id == INDEX {
        Some("")
    } else {
        id.strip_suffix(INDEX).and_then(|f| f.strip_suffix('/'))
    };
    let mut paths = vec![format!("{id}{MARKDOWN_EXTENSION}")];
    if let Some(folder) = folder {
        let prefix = if folder.is_empty() {
            String::new()
        } else {
            format!("{folder}/")
        };
        paths.extend(OVERVIEW_FILE_NAMES.map(|name| format!("{prefix}{name}")));
    }
    paths.retain(|path| skill_id_for(path) == id);
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_files_for_is_the_inverse_of_skill_id_for() {
        for (id, paths) in [
            ("a/b", vec!["a/b.md"]),
            ("a/index", vec!["a/index.md", "a/SKILL.md", "a/SKILLS.md"]),
            ("index", vec!["index.md", "SKILL.md", "SKILLS.md"]),
            (
                "a/b/index",
                vec!["a/b/index.md", "a/b/SKILL.md", "a/b/SKILLS.md"],
            ),
            // No file has these ids: an overview file's name is always read as `index`.
            ("a/SKILL", vec![]),
            ("SKILLS", vec![]),
        ] {
            assert_eq!(skill_files_for(id), paths, "{id}");
        }
        for path in [
            "a/b.md",
            "a/SKILL.md",
            "SKILLS.md",
            "x/y/z.md",
            "a/myindex.md",
        ] {
            assert!(
                skill_files_for(&skill_id_for(path)).contains(&path.to_string()),
                "{path}"
            );
        }
    }

    /// The message a validator refuses with, as callers see it; `None` when it accepts.
    fn refusal<T>(checked: Result<T, impl std::fmt::Display>) -> Option<String> {
        checked.err().map(|e| e.to_string())
    }

    fn skill_id(id: &str) -> Option<String> {
        refusal(validate_skill_id(id))
    }

    fn name(name: &str) -> Option<String> {
        refusal(validate_name(name))
    }

    #[test]
    fn function_ids_are_namespaced_segments() {
        for good in [
            "engine::functions::list",
            "directory::__on_worker_added",
            "iii-directory::ui-content",
            "my_worker::v1.2::doThing",
        ] {
            assert_eq!(refusal(validate_function_id(good)), None, "{good}");
        }
        for (bad, why) in [
            ("", "non-empty"),
            ("list", "namespaced"),
            ("engine::", "segments"),
            ("::list", "segments"),
            ("engine:::list", "segments"),
            ("engine::functions list", "segments"),
            ("engine::fünctions", "segments"),
        ] {
            let refused = refusal(validate_function_id(bad)).expect(bad);
            assert!(refused.contains(why), "{bad}: {refused}");
        }
        let long = format!("a::{}", "b".repeat(MAX_FUNCTION_ID_BYTES));
        assert!(
            refusal(validate_function_id(&long))
                .expect("long")
                .contains("too long")
        );
    }

    fn worker_name(name: &str) -> Option<String> {
        refusal(validate_worker_name(name))
    }

    // ---- validate_skill_id ----

    #[test]
    fn valid_skill_ids() {
        for id in [
            "index",
            "shell/exec",
            "resend/emails/send-email",
            "a_b-c/0/x9",
            &"a".repeat(MAX_SEGMENT_BYTES),
        ] {
            assert_eq!(skill_id(id), None, "{id}");
        }
        let longest = format!("{}/{}", "a".repeat(64), vec!["b".repeat(63); 15].join("/"));
        assert_eq!(longest.len(), MAX_ID_BYTES);
        assert_eq!(skill_id(&longest), None);
    }

    #[test]
    fn empty_id() {
        assert_eq!(skill_id(""), Some("id must be non-empty".to_owned()));
    }

    #[test]
    fn leading_or_trailing_slash() {
        for id in ["/etc/passwd", "shell/", "/"] {
            assert_eq!(
                skill_id(id),
                Some(format!("id may not have a leading or trailing '/': {id:?}")),
            );
        }
    }

    #[test]
    fn id_too_long() {
        let id = vec!["a".repeat(64); 16].join("/");
        assert_eq!(id.len(), 1039);
        assert_eq!(
            skill_id(&id),
            Some(format!(
                "id too long (1039 chars; max 1024): \"{}…\"",
                &id[..crate::error::MAX_ECHO_CHARS]
            ))
        );
    }

    #[test]
    fn bad_segments_name_their_position() {
        assert_eq!(
            skill_id("a//b"),
            Some("invalid id (segment 2 of \"a//b\"): segment must be non-empty".to_owned())
        );
        let long = "x".repeat(65);
        assert_eq!(
            skill_id(&format!("ok/{long}")),
            Some(format!(
                "invalid id (segment 2 of \"ok/{long}\"): segment too long (65 chars; max 64): \
                 \"{long}\""
            ))
        );
        assert_eq!(
            skill_id("Shell/exec"),
            Some(
                "invalid id (segment 1 of \"Shell/exec\"): segment may only contain lowercase \
                 ASCII letters, digits, '-' and '_': \"Shell\""
                    .to_owned()
            )
        );
    }

    #[test]
    fn hostile_ids_are_rejected() {
        for id in [
            "../etc/passwd",
            "shell/../../etc",
            "./shell",
            "..",
            "/abs/path",
            "C:/windows",
            "UPPER",
            "café",
            "日本",
            "sh ell",
            "shell.md",
            "a\\b",
            "shell::exec",
            "x?admin=1",
            "x#frag",
            "a\0b",
            "trailing/",
            "double//slash",
        ] {
            assert!(skill_id(id).is_some(), "{id:?} should be rejected");
        }
    }

    #[test]
    fn quoting_escapes_hostile_text() {
        let err = skill_id("a\"b").expect("quote");
        assert!(err.ends_with(r#": "a\"b""#), "{err}");
    }

    // ---- validate_name ----

    #[test]
    fn names() {
        assert_eq!(name("reviewer"), None);
        assert_eq!(name("release-captain_2"), None);
        assert_eq!(name(""), Some("name must be non-empty".to_owned()));
        assert_eq!(
            name(&"n".repeat(65)),
            Some("name too long (65 chars; max 64)".to_owned())
        );
        assert_eq!(name(&"n".repeat(64)), None);
        for bad in ["a/b", "Reviewer", "a b", "é", "a.md"] {
            assert_eq!(
                name(bad),
                Some(format!(
                    "name may only contain lowercase ASCII letters, digits, '-' and '_': {bad:?}"
                ))
            );
        }
    }

    // ---- validate_worker_name ----

    #[test]
    fn worker_names_accepted() {
        for name in [
            "shell",
            "iii-http",
            "iii-database",
            "coder",
            "x2",
            "2x",
            "a_b",
        ] {
            assert_eq!(worker_name(name), None, "{name}");
        }
    }

    #[test]
    fn worker_names_rejected() {
        assert_eq!(
            worker_name(""),
            Some("worker name must be non-empty".to_owned())
        );
        for bad in ["-x", "_x", "../../admin", ".hidden", "Shell", "é"] {
            assert_eq!(
                worker_name(bad),
                Some(format!(
                    "worker name must start with a lowercase ASCII letter or digit: {bad:?}"
                )),
                "{bad}"
            );
        }
        for bad in [
            "shell/../../etc",
            "x?admin=1",
            "x#frag",
            "a/b",
            "shell name",
            "x`y`",
        ] {
            assert_eq!(
                worker_name(bad),
                Some(format!(
                    "worker name may only contain lowercase letters, digits, '-', '_': {bad:?}"
                )),
                "{bad}"
            );
        }
    }

    // ---- normalize_id_input ----

    fn normalized(raw: &str) -> String {
        match normalize_id_input(raw) {
            Ok(id) => id,
            Err(why) => panic!("{raw:?} should normalize: {why}"),
        }
    }

    #[test]
    fn normalize_contract_examples() {
        assert_eq!(normalized("iii://foo"), "foo");
        assert_eq!(normalized("hello-worker/index.md"), "hello-worker/index");
        assert_eq!(normalized("resend/emails/SKILLS.md"), "resend/emails/index");
        assert_eq!(normalized("resend/emails/SKILL.md"), "resend/emails/index");
        assert_eq!(normalized("index_md"), "index_md");
        assert_eq!(normalized("iii://database/index"), "database/index");
        assert_eq!(normalized("database/index.md"), "database/index");
        assert_eq!(normalized("database"), "database");
    }

    #[test]
    fn normalize_trims_and_handles_bare_overview_names() {
        assert_eq!(normalized("  shell/exec \n"), "shell/exec");
        assert_eq!(normalized("SKILL.md"), "index");
        assert_eq!(normalized("SKILLS.md"), "index");
        assert_eq!(normalized("iii://SKILL.md"), "index");
        assert_eq!(normalized("iii://a/SKILLS.md"), "a/index");
    }

    #[test]
    fn normalize_strips_one_extension_only() {
        assert_eq!(normalized("x.md.md"), "x.md");
        assert_eq!(normalized("x.MD"), "x.MD");
        // Overview names are case-sensitive and must be a whole file name.
        assert_eq!(normalized("a/skill.md"), "a/skill");
        assert_eq!(normalized("a/MYSKILL.md"), "a/MYSKILL");
    }

    #[test]
    fn normalize_rejects_empty_and_other_schemes() {
        assert_eq!(normalize_id_input("   "), Err(IdError::Empty));
        let err = refusal(normalize_id_input(" https://example.com/x.md ")).expect("scheme");
        assert_eq!(
            err,
            "Invalid id (must be a bare skill path, a path ending in .md, or an iii:// URI): \
             https://example.com/x.md"
        );
        assert!(err.contains("iii://"));
        assert!(normalize_id_input("file:///etc/passwd").is_err());
        assert!(normalize_id_input("iii://https://x").is_err());
    }

    #[test]
    fn normalize_does_not_validate() {
        assert_eq!(normalized("../Etc"), "../Etc");
        assert_eq!(normalized("iii://"), "");
        assert_eq!(normalized("database::execute"), "database::execute");
    }

    // ---- skill_id_for ----

    #[test]
    fn ids_from_paths() {
        assert_eq!(skill_id_for("index.md"), "index");
        assert_eq!(skill_id_for("shell/exec.md"), "shell/exec");
        assert_eq!(
            skill_id_for("resend/emails/send-email.md"),
            "resend/emails/send-email"
        );
        assert_eq!(skill_id_for("SKILL.md"), "index");
        assert_eq!(skill_id_for("SKILLS.md"), "index");
        assert_eq!(skill_id_for("ns/SKILL.md"), "ns/index");
        assert_eq!(skill_id_for("ns/deep/SKILLS.md"), "ns/deep/index");
    }

    #[test]
    fn only_exact_overview_file_names_are_aliased() {
        assert_eq!(skill_id_for("ns/skill.md"), "ns/skill");
        assert_eq!(skill_id_for("ns/Skill.md"), "ns/Skill");
        assert_eq!(skill_id_for("ns/MY-SKILL.md"), "ns/MY-SKILL");
        assert_eq!(skill_id_for("SKILL/exec.md"), "SKILL/exec");
        assert_eq!(skill_id_for("SKILL.md/x.md"), "SKILL.md/x");
    }
}
