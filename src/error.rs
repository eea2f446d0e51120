//! The library's error type. Contract errors carry their `D…` code and are rendered as the
//! original worker renders them (`D110 not_found: skill "x" does not exist. Did you mean: …`);
//! the worker sends its text (`to_string`) on the wire, the CLI prints it.

mod index;
mod io;

use std::fmt::{self, Write as _};

pub use index::{ContentError, IndexError, UNNOTED_HOLDER};
pub use io::{IoError, io_error, short_of_resources};

use crate::code::{Class, Code};

/// How many characters of a caller's string an error echoes; a longer one is cut there and
/// ends in "…". Names, segments and ordinary ids are far shorter; a caller may send megabytes.
pub const MAX_ECHO_CHARS: usize = 256;

/// The longest message of any error the worker hands to the SDK, whatever built it (see
/// `worker::wire::bounded_error`).
pub const MAX_ERROR_BYTES: usize = 64 << 10;

/// A caller's string as every error echoes it: in double quotes, in display form (each
/// printable character as itself, `é` or `日` included), with only the quote, the backslash and
/// control characters escaped as `{:?}` would (so the message stays one line and its quotes
/// unambiguous), and cut after [`MAX_ECHO_CHARS`] characters with "…". So an echo is at most a
/// few KiB whatever was sent, and a short, ordinary id renders exactly as `{:?}` renders it
/// (`"foo/bar"`).
#[derive(Clone, Copy)]
pub struct Quoted<'a>(pub &'a str);

/// [`Quoted`] for `s`: `format!("skill {} …", quoted(id))`.
pub fn quoted(s: &str) -> Quoted<'_> {
    Quoted(s)
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        write_cut(f, self.0, true)?;
        f.write_char('"')
    }
}

/// A path a caller gave, as an error echoes it: unquoted (a path reads as itself in a
/// sentence), cut and with control characters escaped as [`Quoted`] does.
#[derive(Clone, Copy)]
pub struct EchoedPath<'a>(pub &'a std::path::Path);

impl fmt::Display for EchoedPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_cut(f, &self.0.to_string_lossy(), false)
    }
}

/// `s` cut after [`MAX_ECHO_CHARS`] characters with "…", control characters escaped (and
/// the quote and the backslash too, inside quotes).
fn write_cut(f: &mut fmt::Formatter<'_>, s: &str, in_quotes: bool) -> fmt::Result {
    for (n, c) in s.chars().enumerate() {
        if n == MAX_ECHO_CHARS {
            return f.write_char('…');
        }
        match c {
            '"' | '\\' if in_quotes => write!(f, "\\{c}")?,
            c if c.is_control() => write!(f, "{}", c.escape_debug())?,
            c => f.write_char(c)?,
        }
    }
    Ok(())
}

impl fmt::Debug for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An error's text without the `index: ` its own message starts with, for a message that
/// says `index:` once already.
fn unprefixed(e: &Error) -> String {
    let text = e.to_string();
    match text.strip_prefix("index: ") {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

/// `message` cut to at most `max` bytes on a character boundary, ending in "…" when cut.
pub fn bounded(mut message: String, max: usize) -> String {
    if message.len() <= max {
        return message;
    }
    let ellipsis = '…'.len_utf8();
    let mut end = max.saturating_sub(ellipsis);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push('…');
    message
}

/// A follow-up the caller can make, rendered in the `Next:` tail of a coded message.
#[derive(Clone, Copy, Debug)]
pub struct Next {
    pub function: &'static str,
    pub why: &'static str,
}

pub const fn next(function: &'static str, why: &'static str) -> Next {
    Next { function, why }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error with a code (`D110` …), rendered `{code} {class}: {problem}`; the problem is
    /// one or more full sentences, with the `Next:` steps when there are any.
    #[error("{code} {class}: {problem}", class = code.class())]
    Coded { code: Code, problem: String },
    /// A validation error the contract leaves uncoded (bad id syntax, bad request fields).
    #[error("{0}")]
    Invalid(String),
    /// A file-system step failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A file the scan recorded as not servable (too large, not UTF-8, unreadable, an empty
    /// body): the recorded reason, naming the file.
    #[error("{0}")]
    Unservable(String),
    /// The index could not be opened, read or written.
    #[error("index: {0}")]
    Index(#[from] IndexError),
    /// The index cannot record changes (its reconciles fail: the disk under it is full, say),
    /// so a write was refused before it touched anything.
    #[error(
        "index: the index at {} cannot record changes ({}); nothing was written. Fix what \
         that names (free space, when the disk under the index is full), then try again",
        index.display(),
        unprefixed(source)
    )]
    Stalled {
        index: std::path::PathBuf,
        source: Box<Error>,
    },
    /// A change is on disk, but the index could not record it: the caller must not take the
    /// failure for "nothing happened".
    #[error(
        "index: {}. The change is on disk ({}), but the index at {} could not record it; \
         reads serve it once the index can",
        unprefixed(source),
        written.join(", "),
        index.display()
    )]
    Unrecorded {
        written: Vec<String>,
        index: std::path::PathBuf,
        source: Box<Error>,
    },
    /// A write through an index another process owns.
    #[error("this index is open read-only (a running worker owns it); write through the worker")]
    ReadOnly,
    /// A panic in another thread left this lock poisoned.
    #[error("{0} was poisoned by a panic in another thread; restart the worker")]
    Poisoned(&'static str),
    /// A response or record could not be encoded or decoded as JSON (a bug, not bad input).
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A thread could not be started: the process is at a limit of threads or memory.
    #[error(
        "could not start a thread for {task} ({source}): the process is at its limit of \
         threads or memory (ulimit -u or -v, a container's pids or memory limit); raise the \
         limit and run it again"
    )]
    Thread {
        task: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A task the library ran on another thread ended without an answer (a panic, a
    /// shutdown).
    #[error("{task} failed: {source}")]
    Task {
        task: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// For `map_err` on a thread's spawn (`std::thread::Builder`), which fails with an error
    /// where `std::thread::spawn` would panic.
    pub fn thread(task: &'static str) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Thread { task, source }
    }

    /// The error's code, when it has one.
    pub fn code(&self) -> Option<Code> {
        match self {
            Error::Coded { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// `{CODE} not_found: {kind} "{missed}" does not exist.` with optional suggestions and next
    /// steps.
    pub fn not_found(
        code: Code,
        kind: &str,
        missed: &str,
        candidates: &[String],
        next: &[Next],
    ) -> Error {
        debug_assert_eq!(code.class(), Class::NotFound, "{code:?}");
        let mut problem = format!("{kind} {} does not exist.", quoted(missed));
        if !candidates.is_empty() {
            let _ = write!(problem, " Did you mean: {}.", candidates.join(", "));
        }
        push_next(&mut problem, next);
        Error::Coded { code, problem }
    }

    /// A `not_found` for an id whose file is there but skipped by the scan (unreadable, not a
    /// document of its family): the file and why, instead of "does not exist", which sent a
    /// caller from `get` to `create`, and from `create` ("a file already exists") back again.
    pub fn not_served(
        code: Code,
        kind: &str,
        id: &str,
        path: &std::path::Path,
        why: impl fmt::Display,
    ) -> Error {
        debug_assert_eq!(code.class(), Class::NotFound, "{code:?}");
        Error::Coded {
            code,
            problem: format!(
                "{kind} {} is not served: {} is skipped ({why}). Fix it, or remove it; \
                 `iii-directory check` lists every file that is not served.",
                quoted(id),
                path.display()
            ),
        }
    }

    /// `{CODE} {class}: {problem}` with optional next steps; `problem` is a full sentence.
    pub fn coded(code: Code, problem: impl Into<String>, next: &[Next]) -> Error {
        let mut problem = problem.into();
        push_next(&mut problem, next);
        Error::Coded { code, problem }
    }

    /// An uncoded validation error: the validator's own message (`Error::Invalid`).
    pub(crate) fn invalid(problem: impl fmt::Display) -> Error {
        Error::Invalid(problem.to_string())
    }

    /// redb's error of any operation, as an index error (for `map_err`).
    pub(crate) fn index(e: impl Into<redb::Error>) -> Error {
        Error::Index(IndexError::Database(e.into()))
    }

    pub(crate) fn json(e: serde_json::Error) -> Error {
        Error::Json(e)
    }

    /// A `Task` error of `task`, for `map_err` on a join.
    pub(crate) fn task(task: &'static str) -> impl FnOnce(tokio::task::JoinError) -> Error {
        move |source| Error::Task { task, source }
    }
}

fn push_next(message: &mut String, next: &[Next]) {
    if next.is_empty() {
        return;
    }
    let steps: Vec<String> = next
        .iter()
        .map(|n| format!("call {} to {}", n.function, n.why))
        .collect();
    let _ = write!(message, " Next: {}.", steps.join("; or "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_not_found_like_the_contract() {
        let e = Error::not_found(
            Code::SkillNotFound,
            "skill",
            "foo/bar",
            &["foo".into(), "foo/baz".into()],
            &[
                next("directory::skills::list", "browse skill ids"),
                next("directory::skills::index", "see the per-worker overview"),
            ],
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{} not_found: skill \"foo/bar\" does not exist. Did you mean: foo, foo/baz. Next: call directory::skills::list to browse skill ids; or call directory::skills::index to see the per-worker overview.",
                Code::SkillNotFound
            )
        );
        assert_eq!(e.code(), Some(Code::SkillNotFound));
        let bare = Error::not_found(Code::AgentNotFound, "agent profile", "x", &[], &[]);
        assert_eq!(
            bare.to_string(),
            format!(
                "{} not_found: agent profile \"x\" does not exist.",
                Code::AgentNotFound
            )
        );
    }

    #[test]
    fn quotes_caller_input_in_display_form_and_cuts_it() {
        for id in [
            "foo/bar",
            "x",
            "a-b_c/d",
            "",
            "é/ü",
            "say \"hi\"",
            "back\\slash",
            "tab\there",
        ] {
            assert_eq!(quoted(id).to_string(), format!("{id:?}"), "{id:?}");
        }
        // A C1 control costs its escape, but only up to the cut.
        let long = "\u{80}".repeat(2_500_000);
        let shown = quoted(&long).to_string();
        assert_eq!(shown, format!("\"{}…\"", "\\u{80}".repeat(MAX_ECHO_CHARS)));
        assert!(shown.len() < 2 * 1024, "{}", shown.len());
        // Printable characters are shown as themselves.
        let wide = "日".repeat(1000);
        let shown = quoted(&wide).to_string();
        assert_eq!(shown, format!("\"{}…\"", "日".repeat(MAX_ECHO_CHARS)));
        let exact = "a".repeat(MAX_ECHO_CHARS);
        assert_eq!(quoted(&exact).to_string(), format!("{exact:?}"));
        let e = Error::not_found(Code::SkillNotFound, "skill", &long, &[], &[]);
        assert!(e.to_string().len() < 2 * 1024);
        assert!(e.to_string().starts_with(&format!(
            "{} not_found: skill \"\\u{{80}}",
            Code::SkillNotFound
        )));
    }

    #[test]
    fn bounded_cuts_on_a_character_boundary() {
        assert_eq!(bounded("short".into(), 10), "short");
        let cut = bounded("ééééé".into(), 6);
        assert_eq!(cut, "é…");
        assert!(cut.len() <= 6);
        let big = bounded("x".repeat(1 << 20), MAX_ERROR_BYTES);
        assert_eq!(big.len(), MAX_ERROR_BYTES);
        assert!(big.ends_with('…'));
    }

    #[test]
    fn renders_invalid_input() {
        let e = Error::coded(
            Code::ContentRefused,
            "content is too large (5 bytes; max 4).",
            &[],
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{} invalid_input: content is too large (5 bytes; max 4).",
                Code::ContentRefused
            )
        );
    }
}
