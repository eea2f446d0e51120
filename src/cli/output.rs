//! What the command line writes: stdout through one door (`emit`), text from files made safe
//! for a terminal, tables, and what stderr can show.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use iii_directory::Code;

use serde_json::Value;

use super::error::CliError;

/// What stderr shows a person: colour, and a line redrawn in place (`\r\x1b[2K`, cursor
/// control). Both only on a terminal: a service manager's journal or a pipe gets plain text.
/// `TERM=dumb` is a terminal without either (an editor's shell buffer, a serial console);
/// `NO_COLOR` (https://no-color.org) takes the colour away and leaves the redraw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stderr {
    pub(crate) colour: bool,
    pub(crate) redraw: bool,
}

impl Stderr {
    /// As this process's stderr and environment say.
    pub(crate) fn now() -> Stderr {
        Stderr::of(
            std::io::stderr().is_terminal(),
            std::env::var_os("TERM").as_deref(),
            std::env::var_os("NO_COLOR").is_some(),
        )
    }

    fn of(terminal: bool, term: Option<&std::ffi::OsStr>, no_colour: bool) -> Stderr {
        let redraw = terminal && term.is_none_or(|term| term != "dumb");
        Stderr {
            colour: redraw && !no_colour,
            redraw,
        }
    }
}

pub(crate) fn print(
    response: &Value,
    json: bool,
    human: impl FnOnce() -> String,
) -> Result<(), CliError> {
    let text = if json {
        // The exact response, as the bus gives it (JSON escapes what a terminal would act on).
        serde_json::to_string_pretty(response)?
    } else {
        shown_on_a_terminal(&human(), false)
    };
    emit(&text)
}

/// `text` from files (names, descriptions, bodies) as a terminal may show it: characters that
/// act on the terminal or turn text around (`doc::acts_on_display`) as U+FFFD, and in a table
/// cell (`one_line`) newlines and tabs as spaces, so a row stays a row.
pub(crate) fn shown_on_a_terminal(text: &str, one_line: bool) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' if one_line => ' ',
            '\n' | '\t' => c,
            c if iii_directory::doc::acts_on_display(c) => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// Writes a line to stdout, flushed: every byte of the command's output goes through here, so
/// an output that cannot be written (a full disk, `> /dev/full`, a closed stdout) fails the
/// command with the reason instead of leaving a truncated answer behind an exit code 0. A
/// reader that stopped reading (`| head`) is told apart in `main`, which exits quietly.
pub(crate) fn emit(text: &str) -> Result<(), CliError> {
    // Noted before the write, which may fail part way: a failure then adds nothing after it.
    EMITTED.store(true, Ordering::Relaxed);
    if stdout_closed_at_start() {
        return Err(CliError::Output(std::io::Error::from_raw_os_error(
            libc::EBADF,
        )));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", text.trim_end_matches('\n'))
        .and_then(|()| out.flush())
        .map_err(CliError::Output)
}

/// Whether anything went to stdout (`emit`).
static EMITTED: AtomicBool = AtomicBool::new(false);

/// A failed command run with `--json`: when it printed nothing yet, its error goes to stdout
/// too, as one JSON object a script can read instead of an empty output:
/// `{"error": {"code": "D110", "class": "not_found", "message": "D110 not_found: …"}}`, with
/// `code` and `class` null for an uncoded error (a configuration, a file, a lock). A command
/// that printed its report before failing on it (`bundles verify` with differences) has said
/// it all: one document stays on stdout. Best effort: stderr has the message regardless.
pub(crate) fn emit_failure(message: &str) {
    if !EMITTED.load(Ordering::Relaxed) {
        let _ = emit(&failure_json(message).to_string());
    }
}

fn failure_json(message: &str) -> Value {
    let code = message
        .split_once(": ")
        .and_then(|(head, _)| head.split_once(' '))
        .and_then(|(code, class)| {
            Code::from_text(code).filter(|code| code.class().as_str() == class)
        });
    serde_json::json!({"error": {
        "code": code.map(Code::text),
        "class": code.map(|code| code.class().as_str()),
        "message": message,
    }})
}

/// Whether the process was started with its stdout closed (`>&-`), noted before Rust's
/// runtime starts: the runtime then opens /dev/null in its place, where the output would
/// vanish without an error.
#[cfg(target_os = "linux")]
pub(crate) fn stdout_closed_at_start() -> bool {
    closed_stdout::CLOSED.load(Ordering::Relaxed)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn stdout_closed_at_start() -> bool {
    false
}

#[cfg(target_os = "linux")]
mod closed_stdout {
    use std::sync::atomic::{AtomicBool, Ordering};

    pub static CLOSED: AtomicBool = AtomicBool::new(false);

    /// Run by the loader before `main` and before Rust's runtime puts /dev/null on a closed
    /// standard descriptor.
    #[used]
    #[unsafe(link_section = ".init_array")]
    static NOTE: extern "C" fn() = note;

    extern "C" fn note() {
        // SAFETY: fcntl(F_GETFD) reads a descriptor's flags and touches no memory.
        let closed = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1;
        CLOSED.store(closed, Ordering::Relaxed);
    }
}

/// `text` on one line: a description's line breaks would break the layout of its row.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn table<const N: usize>(headers: [&str; N], rows: &[[String; N]]) -> String {
    // A cell holds text from files: one line of it, shown safely.
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| row.each_ref().map(|cell| shown_on_a_terminal(cell, true)))
        .collect();
    let rows = rows.as_slice();
    // Columns are counted as a terminal shows them: a CJK character or an emoji takes two, a
    // combining mark none.
    let columns = |cell: &str| unicode_width::UnicodeWidthStr::width(cell);
    let mut widths = headers.map(columns);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(columns(cell)).min(60);
        }
    }
    let line = |cells: [&str; N]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < N {
                let pad = widths[i].saturating_sub(columns(cell)) + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(headers);
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.each_ref().map(String::as_str)));
    }
    out
}

pub(crate) fn print_table<const N: usize>(
    headers: [&str; N],
    rows: &[[String; N]],
) -> Result<(), CliError> {
    emit(&table(headers, rows))
}

#[cfg(test)]
mod tests {
    /// A coded error is split into its code and class; anything else (an uncoded error, a
    /// message that merely starts like one) keeps them null, and the message whole.
    #[test]
    fn a_failure_names_its_code_and_class_when_it_has_them() {
        use serde_json::json;
        let coded = "D110 not_found: skill \"x\" does not exist.";
        assert_eq!(
            super::failure_json(coded),
            json!({"error": {"code": "D110", "class": "not_found", "message": coded}})
        );
        for uncoded in [
            "config: unknown key `foo`",
            "D999 not_found: no such code",
            "D110 conflict: the class is not D110's",
            "D110not_found: x",
            "",
        ] {
            assert_eq!(
                super::failure_json(uncoded),
                json!({"error": {"code": null, "class": null, "message": uncoded}}),
                "{uncoded}"
            );
        }
    }

    #[test]
    fn a_dumb_terminal_gets_plain_lines_and_no_colour_and_no_color_only_drops_the_colour() {
        use super::Stderr;
        fn term(name: &str) -> Option<&std::ffi::OsStr> {
            Some(std::ffi::OsStr::new(name))
        }
        let both = Stderr {
            colour: true,
            redraw: true,
        };
        let plain = Stderr {
            colour: false,
            redraw: false,
        };
        assert_eq!(Stderr::of(true, term("xterm-256color"), false), both);
        assert_eq!(Stderr::of(true, None, false), both);
        assert_eq!(Stderr::of(true, term("dumb"), false), plain);
        assert_eq!(Stderr::of(true, term("dumb"), true), plain);
        assert_eq!(
            Stderr::of(true, term("xterm"), true),
            Stderr {
                colour: false,
                redraw: true
            }
        );
        assert_eq!(Stderr::of(false, term("xterm"), false), plain);
    }

    #[test]
    fn text_from_files_reaches_the_terminal_as_text() {
        use super::{shown_on_a_terminal, table};
        assert_eq!(
            shown_on_a_terminal("bell\u{7} esc\u{1b}[2J \u{202e}rtl\nnext\tline", false),
            "bell\u{fffd} esc\u{fffd}[2J \u{fffd}rtl\nnext\tline"
        );
        assert_eq!(
            table(["ID", "TITLE"], &[["nl".into(), "line1\nline2".into()]]),
            "ID  TITLE\nnl  line1 line2"
        );
        // Wide and combining characters take the columns a terminal gives them.
        assert_eq!(
            table(
                ["NAME", "X"],
                &[
                    ["船長".into(), "a".into()],
                    ["cafe\u{301}".into(), "b".into()],
                    ["ab".into(), "c".into()]
                ]
            ),
            "NAME  X\n船長  a\ncafe\u{301}  b\nab    c"
        );
    }
}
