//! The `iii-directory` command line: offline access to the index (`reindex`, `list`, `get`,
//! `index`, `check`, `catalog`) and downloads (`download`), with the same configuration file as the worker.

#![warn(clippy::unwrap_used)]

mod cli;

use std::process::ExitCode;

use cli::args::Command;
use cli::error::{CliError, for_the_command_line};
use cli::output::emit_failure;
use cli::process::{
    init_logging, leave_payloads_out_of_traces, let_ctrl_c_stop, start_threads, tune_malloc,
};

/// Large answers' values are built in the answer arena (`arena.rs`), the rest on glibc's malloc.
#[global_allocator]
static ALLOCATOR: iii_directory::arena::AnswerAllocator = iii_directory::arena::AnswerAllocator;

fn main() -> ExitCode {
    let_ctrl_c_stop();
    leave_payloads_out_of_traces();
    let cli = cli::args::parse();
    let serving = matches!(cli.command, None | Some(Command::Serve));
    if serving {
        // Only the long-lived worker: a command that runs to its end (a cold `reindex`, whose
        // reading, storing and texts threads would wait on two arenas' locks) keeps glibc's
        // defaults. Parsing the command line starts no thread.
        tune_malloc();
    }
    let level = cli
        .log_level
        .as_deref()
        .map(str::to_ascii_lowercase)
        .unwrap_or_else(|| if serving { "info" } else { "warn" }.into());
    init_logging(&level);
    let json = cli.command.as_ref().is_some_and(Command::json);
    let fail = |message: &str| {
        eprintln!("error: {message}");
        if json {
            emit_failure(message);
        }
        ExitCode::FAILURE
    };
    if let Err(message) = cli::open_files::ensure() {
        return fail(&message);
    }
    match start_threads().and_then(|()| cli::run::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader stopped reading (`| head -1`): what it wanted, it has.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => fail(&for_the_command_line(&error.to_string())),
    }
}
