//! Progress of long work on stderr, and Ctrl-C while a line is drawn in place.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::output::Stderr;
use iii_directory::Progress;

/// Progress of long work on stderr: on a terminal one line redrawn in place; elsewhere (a log,
/// a CI job, a terminal without cursor control: `Stderr`) and with `--json`, a plain line now
/// and then, so that a long `reindex` is seen to move.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProgressOutput {
    Terminal,
    Lines,
}

pub(crate) struct ProgressLine {
    output: ProgressOutput,
    started: Instant,
    /// Nothing is shown before the work has lasted this long.
    quiet_for: Duration,
    last: Mutex<Option<Instant>>,
}

impl ProgressLine {
    /// Progress shown from the start on a terminal (a `reindex`).
    pub(crate) fn new(json: bool) -> ProgressLine {
        ProgressLine::after(json, Duration::ZERO)
    }

    /// Progress shown only once the work has lasted `quiet_for` (a read that usually takes a
    /// moment), or the plain lines' interval if longer.
    pub(crate) fn after(json: bool, quiet_for: Duration) -> ProgressLine {
        // With `--json`, a script reads stdout; stderr still shows that long work goes on,
        // as plain lines (a cron job's log, a CI step), never a line redrawn in place.
        let output = match (json, Stderr::now().redraw) {
            (false, true) => ProgressOutput::Terminal,
            _ => ProgressOutput::Lines,
        };
        ProgressLine {
            output,
            started: Instant::now(),
            quiet_for,
            last: Mutex::new(None),
        }
    }

    /// How often the display changes: a redraw is cheap, a plain line is read by a person.
    fn every(&self) -> Duration {
        match self.output {
            ProgressOutput::Lines => Duration::from_secs(5),
            _ => Duration::from_millis(200),
        }
    }

    pub(crate) fn update(&self, progress: Progress) {
        let line = match progress {
            Progress::Walked { files, to_read } => {
                format!("found {files} files, {to_read} to read")
            }
            Progress::Read { done, total } => format!("read {done}/{total} files"),
        };
        let last = matches!(progress, Progress::Read { done, total } if done == total);
        self.emit(&line, matches!(progress, Progress::Walked { .. }) || last);
    }

    /// Shows `line` in place of the previous one (now and then, when not on a terminal).
    pub(crate) fn show(&self, line: &str) {
        self.emit(line, false);
    }

    /// Shows `line` when one is due, or at once when `always` (on a terminal). Plain lines
    /// wait for the work to have lasted a while: a short `reindex` in a script says nothing.
    fn emit(&self, line: &str, always: bool) {
        let now = Instant::now();
        let lasted = now.duration_since(self.started);
        let quiet = match self.output {
            ProgressOutput::Terminal => lasted < self.quiet_for,
            ProgressOutput::Lines => lasted < self.every().max(self.quiet_for),
        };
        if quiet {
            return;
        }
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let always = always && self.output == ProgressOutput::Terminal;
        if !always && last.is_some_and(|t| now.duration_since(t) < self.every()) {
            return;
        }
        let first = last.is_none();
        *last = Some(now);
        match self.output {
            ProgressOutput::Terminal => {
                if first {
                    end_the_line_on_ctrl_c(true);
                }
                eprint!("\r\x1b[2K{line}")
            }
            _ => eprintln!("{line}"),
        }
    }

    /// Ends the line (a later `show` starts a new one).
    pub(crate) fn finish(&self) {
        let shown = self.last.lock().is_ok_and(|mut last| last.take().is_some());
        if self.output == ProgressOutput::Terminal && shown {
            end_the_line_on_ctrl_c(false);
            eprint!("\r\x1b[2K");
        }
    }
}

/// While a progress line is drawn in place, Ctrl-C ends it with a newline before the process
/// stops as it always does (the default action, exit status 130): the shell's prompt then
/// starts a line of its own instead of following the progress text.
pub(crate) fn end_the_line_on_ctrl_c(on: bool) {
    extern "C" fn end_line_then_stop(signal: libc::c_int) {
        const NEWLINE: &[u8] = b"\n";
        // SAFETY: write, signal and raise are async-signal-safe; the buffer is static.
        unsafe {
            libc::write(libc::STDERR_FILENO, NEWLINE.as_ptr().cast(), NEWLINE.len());
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    let action = if on {
        end_line_then_stop as extern "C" fn(libc::c_int) as libc::sighandler_t
    } else {
        libc::SIG_DFL
    };
    // SAFETY: the handler only makes async-signal-safe calls.
    unsafe {
        libc::signal(libc::SIGINT, action);
    }
}
