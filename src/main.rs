//! The `iii-directory` command line: offline access to the index (`reindex`, `list`, `get`,
//! `index`, `check`, `catalog`) and downloads (`download`), with the same configuration file as the worker.

#![warn(clippy::unwrap_used)]

mod cli_bundles;
mod cli_download;
mod cli_error;
mod cli_model;
mod cli_open_files;

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};
use tracing_subscriber::prelude::*;

use cli_error::CliError;
use iii_directory::config::Config;
use iii_directory::{Directory, Progress, ReadFunction, SpecSeverity, worker};

/// Large answers' values are built in the answer arena (`arena.rs`), the rest on glibc's malloc.
#[global_allocator]
static ALLOCATOR: iii_directory::arena::AnswerAllocator = iii_directory::arena::AnswerAllocator;

/// Where the engine listens by default (contract).
const DEFAULT_URL: &str = "ws://127.0.0.1:49134";

const AFTER_HELP: &str = "\
Folders and the index file come from the configuration (see config.yaml.example); relative
paths resolve against III_COMPOSE_DIR, else the current directory.

Examples:
  iii-directory                              run the worker against ws://127.0.0.1:49134
  iii-directory serve --url ws://host:49134  run the worker against another engine
  iii-directory reindex                      build or refresh the index (and the skill
                                             embeddings, with the model here), with a summary
  iii-directory list skills --prefix resend/ the skills of one namespace
  iii-directory list skills --since-revision N  only the skills changed since revision N
  iii-directory get skill resend/index       one skill's body
  iii-directory get agent iii --json         the exact response of directory::agents::get
  iii-directory check                        every file that is not served, and why
  iii-directory check --spec                 every SKILL.md against the Agent Skills spec
  iii-directory search 'send an email'       functions for a capability, from a running engine
  iii-directory search --skills 'deploy a site to Netlify'  skills ranked for a task
  iii-directory search --skills --prefix netlify/ 'roll back a deploy'  within one namespace
  iii-directory catalog > skills.xml          the Agent Skills catalog for a prompt
  iii-directory download --worker mailer     a worker's skills bundle from the registry
  iii-directory download --repo https://github.com/anthropics/skills --skill frontend-design

While a worker runs, the read commands answer from its live index; without one, they bring
the index up to date first.";

#[derive(Parser)]
#[command(name = "iii-directory", version, about = "Skills, system prompts and agent profiles for the iii engine, served from folders on disk through an embedded index.", after_help = AFTER_HELP)]
struct Cli {
    /// YAML configuration (the same file the worker takes); defaults apply without one.
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Log level: error, warn, info, debug, trace or off (RUST_LOG, when set, takes precedence);
    /// the worker defaults to info, the other commands to warn.
    #[arg(
        long,
        global = true,
        value_name = "LEVEL",
        ignore_case = true,
        value_parser = ["error", "warn", "info", "debug", "trace", "off"]
    )]
    log_level: Option<String>,
    /// The engine's WebSocket address (the worker, and `search` of functions).
    #[arg(long, global = true, env = "III_URL", default_value = DEFAULT_URL)]
    url: String,
    /// Print the functions and trigger types the worker registers, as JSON, and exit.
    #[arg(long)]
    manifest: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The engine listens for workers on a WebSocket: anything else would be retried forever.
fn engine_url(url: &str) -> Result<String, String> {
    let scheme_ok = ["ws://", "wss://"]
        .iter()
        .any(|scheme| url.len() > scheme.len() && url[..scheme.len()].eq_ignore_ascii_case(scheme));
    match scheme_ok {
        true => Ok(url.to_string()),
        false => Err(format!(
            "the engine's address is a WebSocket URL, ws://HOST:PORT or wss://HOST:PORT (the engine's default is {DEFAULT_URL})"
        )),
    }
}

/// A `--since-revision` value. Negative numbers reach this parser (rather than clap's tip to
/// write `-- -1`, which cannot help) so the error says what a revision is.
fn revision(value: &str) -> Result<u64, String> {
    value.parse().map_err(|_| {
        "a revision is a whole number, 0 or more: the `revision` of an earlier `list skills --json` answer (0 for the whole list)".to_string()
    })
}

/// A count the matching function bounds (`--limit`, `--max-bytes`): refused outside its range,
/// as the bus refuses it, rather than brought within it.
fn count_in(range: std::ops::RangeInclusive<u64>) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |value| match value.parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ if *range.end() == u64::MAX => Err(format!("a whole number, {} or more", range.start())),
        _ => Err(format!(
            "a whole number from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the worker on the iii engine bus (the default when no command is given).
    Serve,
    /// Bring the index up to date with the folders (reading only what changed), and its skill
    /// embeddings when the search model is on this machine; then summarize.
    ///
    /// Beside a running worker (which owns the index), asks it to walk every folder again, as
    /// its safety net does, and waits until it has: for a change the kernel reports to no
    /// watch (a write through a hard link from outside the folders, or through a shared
    /// memory mapping still open).
    Reindex {
        /// Delete the index first and rebuild it from every file.
        #[arg(long)]
        from_scratch: bool,
        /// Do not compute skill embeddings. Without this, when the search model is on this
        /// machine (search_model_path, or the copy the worker fetched), every skill content
        /// without an embedding is embedded, as the worker does in the background (tens of
        /// skills a second).
        #[arg(long)]
        no_embed: bool,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List skills, system prompts or agent profiles.
    List {
        #[arg(value_enum)]
        kind: Kind,
        /// Only skills whose id starts with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Only skills whose id, title or description contains this (any case).
        #[arg(long)]
        search: Option<String>,
        /// Only skills of this frontmatter `type`.
        #[arg(long = "type")]
        kind_filter: Option<String>,
        /// Only what changed since this revision (from an earlier answer's `revision`; 0 for
        /// the whole list with its revision).
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = revision)]
        since_revision: Option<u64>,
        /// Print the exact response of the matching directory:: function.
        #[arg(long)]
        json: bool,
    },
    /// Show one skill, system prompt or agent profile.
    Get {
        #[arg(value_enum)]
        kind: KindOne,
        /// Skill id (also `iii://…`, the id's path ending in .md, or the path of its file, as
        /// `get` prints it), prompt name or agent id.
        id: String,
        /// Include the whole file, frontmatter too.
        #[arg(long)]
        raw: bool,
        /// Print the exact response of the matching directory:: function.
        #[arg(long)]
        json: bool,
    },
    /// Render the per-worker skills index (directory::skills::index): one entry per skill whose
    /// frontmatter says `type: index`.
    Index {
        /// Print the exact response of directory::skills::index.
        #[arg(long)]
        json: bool,
    },
    /// List every file the index does not serve, with the reason; with --spec, every served
    /// SKILL.md that breaks a rule of the Agent Skills specification instead.
    Check {
        /// Print the list (or with --spec the report) as JSON.
        #[arg(long)]
        json: bool,
        /// Check every served SKILL.md against the Agent Skills specification (agentskills.io):
        /// one coded rule per violation, S100-S171. The checks inform; nothing is hidden.
        #[arg(long)]
        spec: bool,
    },
    /// Find functions for one to six capabilities on a running engine
    /// (directory::search_functions through the iii-directory worker), or with `--skills` the
    /// skills for a task, from the index (directory::skills::search).
    Search {
        /// Capabilities, each a short English phrase: "send an email" "store a file"; with
        /// `--skills`, the words of one task.
        #[arg(required = true, value_name = "CAPABILITY")]
        capabilities: Vec<String>,
        /// Rank skills for the task instead of functions, offline from the index: hybrid, as
        /// the worker ranks, when the search model is on this machine and the skills are
        /// embedded (`reindex` embeds them), else lexical.
        #[arg(long)]
        skills: bool,
        /// How many skills at most (with `--skills`; 1 to 50, default 10).
        #[arg(long, requires = "skills", allow_negative_numbers = true, value_parser = count_in(1..=50))]
        limit: Option<u64>,
        /// Only skills whose on-disk id starts with this (with `--skills`).
        #[arg(long, requires = "skills")]
        prefix: Option<String>,
        /// Only skills of this frontmatter `type` (with `--skills`).
        #[arg(long = "type", requires = "skills")]
        kind_filter: Option<String>,
        /// Print the exact response of directory::search_functions (or skills::search).
        #[arg(long)]
        json: bool,
    },
    /// Print the Agent Skills catalog an agent loads into its prompt (directory::skills::catalog):
    /// the name, description and SKILL.md location of each skill a model may pick, in id
    /// order, within a byte budget. `xml` is the <available_skills> block of the reference
    /// library's `skills-ref to-prompt`; how many entries did not fit goes to stderr.
    #[command(after_help = "\
Examples:
  iii-directory catalog                              the XML block, at most 16384 bytes
  iii-directory catalog --format markdown            one line per skill
  iii-directory catalog --prefix resend/ --max-bytes 65536
  iii-directory catalog --format json --json         the exact response")]
    Catalog {
        /// xml (the default), markdown or json.
        #[arg(long, value_enum, default_value = "xml")]
        format: CatalogFormat,
        /// Only skills whose on-disk id starts with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Only skills of this frontmatter `type`.
        #[arg(long = "type")]
        kind_filter: Option<String>,
        /// At most this many entries (1 or more).
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count_in(1..=u64::MAX))]
        limit: Option<u64>,
        /// The budget in bytes (default 16384, about 4,000 tokens; 256 to 8388608): entries
        /// stop at the first that does not fit.
        #[arg(long, value_name = "BYTES", allow_negative_numbers = true, value_parser = count_in(256..=8_388_608))]
        max_bytes: Option<u64>,
        /// Print the exact response of directory::skills::catalog.
        #[arg(long)]
        json: bool,
    },
    /// Download a skill bundle: `--repo URL --skill NAME [--branch B]` (a folder skills/NAME/ of
    /// a git repository) or `--worker NAME [--version V | --tag T]` (a published worker's
    /// bundle). Checked whole, landed all or nothing; the index is current when it returns.
    Download(cli_download::Args),
    /// Downloaded bundles against the bundles lock: `list` (the default), `get NAMESPACE`,
    /// `verify` (exit 1 when a file differs, is missing or is untracked), `check-updates
    /// [NAMESPACE]` (has a source moved on?), `restore [NAMESPACE]` (land exactly what the
    /// lock records).
    Bundles {
        #[command(subcommand)]
        action: Option<cli_bundles::Action>,
        /// Print the exact response of the matching directory::skills::bundles:: function.
        #[arg(long, global = true)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    Skills,
    SystemPrompts,
    Agents,
}

#[derive(Clone, Copy, ValueEnum)]
enum CatalogFormat {
    Xml,
    Markdown,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum KindOne {
    Skill,
    SystemPrompt,
    Agent,
}

fn main() -> ExitCode {
    let_ctrl_c_stop();
    leave_payloads_out_of_traces();
    let cli = Cli::parse();
    check_usage(&cli);
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
    if let Err(message) = cli_open_files::ensure() {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    match start_threads().and_then(|()| run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader stopped reading (`| head -1`): what it wanted, it has.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {}", for_the_command_line(&message.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// The library's errors name what to do next as bus calls (`Next: call
/// directory::skills::list …`); on the command line, those with a command of their own are
/// named as that command.
fn for_the_command_line(message: &str) -> String {
    const COMMANDS: [(&str, &str); 7] = [
        (
            "call directory::skills::list",
            "run `iii-directory list skills`",
        ),
        ("call directory::skills::index", "run `iii-directory index`"),
        (
            "call directory::skills::get",
            "run `iii-directory get skill`",
        ),
        (
            "call directory::skills::download",
            "run `iii-directory download`",
        ),
        (
            "call directory::system-prompts::list",
            "run `iii-directory list system-prompts`",
        ),
        (
            "call directory::agents::list",
            "run `iii-directory list agents`",
        ),
        (
            "call directory::skills::bundles::list",
            "run `iii-directory bundles`",
        ),
    ];
    COMMANDS
        .iter()
        .fold(message.to_string(), |text, (call, command)| {
            text.replace(&format!("{call} "), &format!("{command} "))
        })
}

/// Large buffers (at least this) are mapped on their own and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: libc::c_int = 1 << 20;
/// Arenas glibc's malloc may create (its default is 8 per core).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MALLOC_ARENAS: libc::c_int = 2;

/// Ctrl-C (SIGINT) stops every command, and the worker at any moment. A process started in the
/// background of a script inherits SIGINT ignored (a shell without job control does that), and
/// so `reindex` ran to its end and the worker missed a Ctrl-C until it listened for one itself
/// (`worker::serve`, which then stops gracefully). Put back to its default action before
/// anything else runs: the process ends at once, exit status 130 as a shell shows it, and an
/// interrupted `reindex` leaves the index as any killed writer does: its last commit, brought
/// up to date by the next command or worker that opens it (the rows and their completeness
/// are committed together).
fn let_ctrl_c_stop() {
    #[cfg(unix)]
    // SAFETY: no other thread exists yet; SIG_DFL installs no handler.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

/// The SDK's variable that keeps call payloads out of its trace spans.
const TRACE_PAYLOADS_OFF: &str = "III_DISABLE_TRACE_PAYLOADS";

/// With OpenTelemetry on (the SDK's default), the SDK copies every call's request and answer
/// into its trace spans unless `III_DISABLE_TRACE_PAYLOADS` says not to: a full copy of the
/// value, then its JSON text, held until the span is exported to the engine. This worker's
/// answers are whole lists of up to 16 MiB, so that doubled its memory per call: at 50,000
/// skills the benchmark's peak was 235 MiB with payloads in the spans and 147 MiB without
/// (issue 15). Left out unless the operator set the variable (`0` keeps them). Set before any
/// thread starts.
fn leave_payloads_out_of_traces() {
    if std::env::var_os(TRACE_PAYLOADS_OFF).is_none() {
        // SAFETY: no other thread exists yet, so nothing reads the environment meanwhile.
        unsafe { std::env::set_var(TRACE_PAYLOADS_OFF, "1") };
    }
}

/// glibc's malloc, tuned for a worker whose threads build and drop answers of up to 16 MiB of
/// JSON (the most the engine carries in one message, `worker/wire.rs`), and several times that
/// as the value the SDK sends. By default each thread gets an arena of its own that keeps
/// what it frees, and the threshold for mapping a large buffer on its own rises to the largest
/// one freed, after which such buffers stay in the arenas too: the worker's resident set
/// settled near its peak (issue 15: 371 MiB at 50,000 skills in the benchmark suite's `memory`
/// section). Two arenas, not one: a single arena peaked about 20 MiB lower, but under the load
/// test every thread then waited on its lock (`list` p50 44 ms instead of 1.5 ms). Measured
/// again with the skill cache (issue 15): one arena was 3 to 10 MiB lower at 50,000 skills,
/// and the wire load test's reads took 1.4 to 1.8 times as long. mimalloc,
/// tried instead, peaked higher (273 MiB against 211). `worker/trim.rs` gives the arenas'
/// free pages back around large answers. Set before any thread starts.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets malloc parameters; no other thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
}

/// Starts rayon's pool (reading and parsing files, views, searches) before any command uses
/// it: rayon would panic at its first use when the process cannot start its threads (a small
/// address space, a thread limit), where this says so. Its one attempt is made here.
fn start_threads() -> Result<(), CliError> {
    match rayon::ThreadPoolBuilder::new().build_global() {
        Ok(()) => Ok(()),
        // Only a failure to start a thread has an I/O error as its source.
        Err(e) if std::error::Error::source(&e).is_some() => {
            let cause = std::io::Error::other(e);
            Err(iii_directory::Error::thread("the pool that reads files")(cause).into())
        }
        // Started already: the pool is there.
        Err(_) => Ok(()),
    }
}

/// What the command line cannot say in clap's terms: which flags a kind takes, and an engine
/// address checked only by the commands that use one (a wrong `III_URL` in the environment
/// must not break `list`). Exits as clap does (status 2) when the usage is wrong.
fn check_usage(cli: &Cli) {
    let fail = |message: String| -> ! {
        Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, message)
            .exit()
    };
    if let Some(Command::List {
        kind: kind @ (Kind::SystemPrompts | Kind::Agents),
        prefix,
        search,
        kind_filter,
        ..
    }) = &cli.command
    {
        let given: Vec<&str> = [
            ("--prefix", prefix.is_some()),
            ("--search", search.is_some()),
            ("--type", kind_filter.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect();
        if !given.is_empty() {
            let name = kind.to_possible_value().expect("a listed kind");
            fail(format!(
                "{} filter skills only; `list {}` always lists them all",
                given.join(", "),
                name.get_name()
            ));
        }
    }
    let uses_engine = matches!(
        cli.command,
        None | Some(Command::Serve) | Some(Command::Search { skills: false, .. })
    );
    if uses_engine && let Err(why) = engine_url(&cli.url) {
        let from_env = std::env::var("III_URL").is_ok_and(|value| value == cli.url)
            && !std::env::args().any(|arg| arg == "--url" || arg.starts_with("--url="));
        let source = if from_env { "III_URL" } else { "--url" };
        fail(format!("invalid {source} {:?}: {why}", cli.url));
    }
}

/// Logs at `level`, or as `RUST_LOG` says when it is set and not empty. Either way the SDK's
/// retry notices (every 2 s without an engine) and its telemetry exporter's complaints stay
/// quiet, unless `RUST_LOG` names those targets itself: the worker says those things once.
fn init_logging(level: &str) {
    const QUIET: [&str; 3] = ["iii_sdk=error", "iii_helpers=off", "opentelemetry=off"];
    let asked = std::env::var("RUST_LOG")
        .ok()
        .filter(|value| !value.trim().is_empty());
    let with_quiet = |base: &str| {
        QUIET
            .iter()
            .filter(|quiet| !base.contains(quiet.split('=').next().unwrap_or_default()))
            .fold(base.to_string(), |all, quiet| format!("{all},{quiet}"))
    };
    let filter = asked
        .and_then(
            |asked| match tracing_subscriber::EnvFilter::try_new(with_quiet(&asked)) {
                Ok(filter) => Some(filter),
                Err(e) => {
                    eprintln!(
                        "warning: RUST_LOG={asked:?} is not a log filter ({e}); logging at {level}"
                    );
                    None
                }
            },
        )
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(with_quiet(level)));
    let output = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(Stderr::now().colour)
        .with_filter(filter);
    // Beside the output, with a filter of its own: the SDK's connection events, whatever the
    // log level, tell the worker each (re)connection (src/worker/connection.rs).
    tracing_subscriber::registry()
        .with(output)
        .with(worker::connection_layer())
        .init();
}

/// What stderr shows a person: colour, and a line redrawn in place (`\r\x1b[2K`, cursor
/// control). Both only on a terminal: a service manager's journal or a pipe gets plain text.
/// `TERM=dumb` is a terminal without either (an editor's shell buffer, a serial console);
/// `NO_COLOR` (https://no-color.org) takes the colour away and leaves the redraw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stderr {
    colour: bool,
    redraw: bool,
}

impl Stderr {
    /// As this process's stderr and environment say.
    fn now() -> Stderr {
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

impl Command {
    /// What the process is, in the note an index's writer leaves (`index::holder`): a worker
    /// holds the index for good, a command lets go when done.
    fn role(&self) -> &'static str {
        match self {
            Command::Serve => iii_directory::WORKER_ROLE,
            Command::Reindex { .. } => "reindex",
            Command::List { .. } => "list",
            Command::Get { .. } => "get",
            Command::Index { .. } => "index",
            Command::Check { .. } => "check",
            Command::Search { .. } => "search",
            Command::Catalog { .. } => "catalog",
            Command::Download(_) => "download",
            Command::Bundles { .. } => "bundles",
        }
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    let (config, warnings) = Config::load(cli.config.as_deref())?;
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    if cli.manifest {
        emit(&serde_json::to_string_pretty(&worker::surface::manifest())?)?;
        return Ok(());
    }
    let command = cli.command.unwrap_or(Command::Serve);
    iii_directory::declare_process_role(command.role());
    match command {
        Command::Serve => {
            let seed = cli.config.is_some().then(|| config.settings.to_json());
            worker::serve(worker::ServeOptions {
                url: cli.url,
                config,
                seed,
                seed_warnings: warnings,
            })
            .map_err(CliError::Serve)
        }
        Command::Reindex {
            from_scratch,
            no_embed,
            json,
        } => reindex(config, from_scratch, !no_embed, json),
        Command::List {
            kind,
            prefix,
            search,
            kind_filter,
            since_revision,
            json,
        } => {
            let (function, mut request) = match kind {
                Kind::Skills => (
                    ReadFunction::SkillsList,
                    json!({ "prefix": prefix, "search": search, "type": kind_filter }),
                ),
                Kind::SystemPrompts => (ReadFunction::SystemPromptsList, json!({})),
                Kind::Agents => (ReadFunction::AgentsList, json!({})),
            };
            if let Some(since) = since_revision {
                request["since_revision"] = json!(since);
            }
            let response = read(config, function, &request)?;
            print(&response, json, || render_list(kind, &response))
        }
        Command::Get {
            kind,
            id,
            raw,
            json,
        } => {
            let (function, request) = match kind {
                KindOne::Skill if names_a_path(&id) || names_a_file(&id) => {
                    let response = get_skill_file(config, &id, raw)?;
                    return print(&response, json, || render_one(kind, &response, raw));
                }
                KindOne::Skill => (ReadFunction::SkillsGet, json!({ "id": id, "raw": raw })),
                KindOne::SystemPrompt => (
                    ReadFunction::SystemPromptsGet,
                    json!({ "name": id, "raw": raw }),
                ),
                KindOne::Agent => (ReadFunction::AgentsGet, json!({ "id": id, "raw": raw })),
            };
            let response = read(config, function, &request)?;
            print(&response, json, || render_one(kind, &response, raw))
        }
        Command::Index { json } => {
            let response = read(config, ReadFunction::SkillsIndex, &json!({}))?;
            print(&response, json, || {
                response["body"].as_str().unwrap_or_default().to_string()
            })
        }
        Command::Search {
            capabilities,
            skills: true,
            limit,
            prefix,
            kind_filter,
            json,
        } => {
            let directory = open_fresh(config)?;
            let lexical_note = cli_model::ready_for_search(&directory)?;
            let request = json!({
                "query": capabilities.join(" "), "limit": limit, "prefix": prefix, "type": kind_filter,
            });
            // Offline there is no engine to ask which workers are installed: nothing hidden.
            let response = directory.search_skills(&request, None, None)?;
            print(&response, json, || render_skill_search(&response))?;
            if let Some(note) = lexical_note {
                eprintln!("{note}");
            }
            Ok(())
        }
        Command::Search {
            capabilities, json, ..
        } => {
            let response = worker::search_over_bus(&cli.url, &capabilities)?;
            print(&response, json, || render_search(&response))
        }
        Command::Catalog {
            format,
            prefix,
            kind_filter,
            limit,
            max_bytes,
            json,
        } => {
            let format = match format {
                CatalogFormat::Xml => "xml",
                CatalogFormat::Markdown => "markdown",
                CatalogFormat::Json => "json",
            };
            let request = json!({
                "format": format, "prefix": prefix, "type": kind_filter,
                "limit": limit, "max_bytes": max_bytes,
            });
            let response = read(config, ReadFunction::SkillsCatalog, &request)?;
            print(&response, json, || match response.get("body") {
                Some(body) => body.as_str().unwrap_or_default().to_string(),
                None => serde_json::to_string_pretty(&response["skills"]).unwrap_or_default(),
            })?;
            let left_out = response["left_out"].as_u64().unwrap_or_default();
            if !json && left_out > 0 {
                eprintln!(
                    "{} skills shown, {left_out} left out (over --max-bytes {} or --limit): raise them, or narrow with --prefix",
                    response["count"], response["max_bytes"]
                );
            }
            Ok(())
        }
        Command::Download(args) => {
            warn_missing_folders(&config);
            emit(&cli_download::run(config, args)?)?;
            Ok(())
        }
        Command::Bundles { action, json } => {
            warn_missing_folders(&config);
            let outcome = cli_bundles::run(config, action, json)?;
            let written = emit(&outcome.text);
            // A failed bundle fails the command even when the reader stopped reading early.
            outcome.failure.map_or(written, Err)
        }
        Command::Check { json, spec: true } => {
            let summary = open_fresh(config)?.spec_check()?;
            if json {
                emit(&serde_json::to_string_pretty(&summary)?)?;
                return Ok(());
            }
            emit(&format!(
                "{} SKILL.md files checked against the Agent Skills specification: {} valid, {} invalid, {} with warnings",
                summary.checked,
                summary.valid,
                summary.checked - summary.valid,
                summary.breaking(SpecSeverity::Warning),
            ))?;
            let rows: Vec<[String; 4]> = summary
                .files
                .iter()
                .flat_map(|file| {
                    file.problems.iter().map(|rule| {
                        [
                            file.id.clone(),
                            rule.code().to_string(),
                            rule.severity().as_str().to_string(),
                            rule.to_string(),
                        ]
                    })
                })
                .collect();
            if !rows.is_empty() {
                print_table(["ID", "RULE", "SEVERITY", "PROBLEM"], &rows)?;
            }
            if !summary.notes.is_empty() {
                emit(&format!(
                    "{} SKILL.md files the worker does not serve as written:",
                    summary.notes.len()
                ))?;
                let notes: Vec<[String; 2]> = summary
                    .notes
                    .iter()
                    .map(|n| [n.path.clone(), n.note.clone()])
                    .collect();
                print_table(["PATH", "NOTE"], &notes)?;
            }
            Ok(())
        }
        Command::Check { json, spec: false } => {
            let directory = open_fresh(config)?;
            let skipped = directory.skipped()?;
            if json {
                emit(&serde_json::to_string_pretty(&skipped)?)?;
            } else if skipped.is_empty() {
                emit("every file is served")?;
            } else {
                let rows: Vec<[String; 3]> = skipped
                    .into_iter()
                    .map(|s| [s.root.to_string(), s.path, s.reason.to_string()])
                    .collect();
                print_table(["ROOT", "PATH", "REASON"], &rows)?;
            }
            Ok(())
        }
    }
}

/// The skill whose file is `path` (absolute, or relative to the current directory): `get`
/// prints a skill's `path`, and a person pastes it back. `directory::skills::get` takes the
/// absolute path (the file asked for is the file answered, or a refusal with the reason).
fn get_skill_file(config: Config, path: &str, raw: bool) -> Result<Value, CliError> {
    let file = lexically_absolute(path);
    if !path.ends_with(".md") {
        return Err(iii_directory::no_skill_file(&file).into());
    }
    let request = json!({ "id": file.display().to_string(), "raw": raw });
    Ok(open_fresh(config)?.read(ReadFunction::SkillsGet, &request, None)?)
}

/// `path` made absolute against the current directory, with `.` and `..` folded as written.
fn lexically_absolute(path: impl AsRef<std::path::Path>) -> PathBuf {
    let path = path.as_ref();
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    iii_directory::config::layout::lexical(&absolute)
}

/// Whether a `get skill` argument can only be a path (an id never starts with `/` or `.`).
fn names_a_path(argument: &str) -> bool {
    argument.starts_with('/') || argument.starts_with("./") || argument.starts_with("../")
}

/// Whether a `get skill` argument names an existing markdown file from here (`skills/a.md`):
/// taken as that file rather than as an id.
fn names_a_file(argument: &str) -> bool {
    argument.ends_with(".md") && std::path::Path::new(argument).is_file()
}

/// Says, before any command reads, which folders a person most likely mistyped:
/// `III_COMPOSE_DIR`, `skills_folder`, and a user-global folder that is set, when missing (a missing root serves nothing, silently, by design: it is
/// served as soon as it appears), and any root that is a file. The other roots are often absent
/// on purpose.
fn warn_missing_folders(config: &Config) {
    let compose = std::env::var_os(iii_directory::config::COMPOSE_DIR_ENV)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from);
    if let Some(compose) = compose.filter(|dir| !dir.exists()) {
        tracing::warn!(
            "III_COMPOSE_DIR {} does not exist (a typo?): relative folders resolve inside it, and the index is made there",
            compose.display()
        );
    }
    let paths = &config.paths;
    let named = [
        ("skills_folder", Some(&paths.skills_folder)),
        (
            "global_agents_skills_folder",
            paths.global_agents_skills_folder.as_ref(),
        ),
        ("global_agents_folder", paths.global_agents_folder.as_ref()),
    ];
    for (key, folder) in named {
        // Only what is known to be missing: a folder under one this user cannot enter is
        // said below, as its unlistable parent root.
        if let Some(folder) = folder.filter(|folder| matches!(folder.try_exists(), Ok(false))) {
            tracing::warn!(
                "{key} {} does not exist: nothing is served from it until it does (relative paths resolve against III_COMPOSE_DIR, else the current directory)",
                folder.display()
            );
        }
    }
    let roots = iii_directory::Roots::from_paths(paths);
    // Outer folders first, so that one inside another is seen after it.
    let mut active: Vec<_> = roots.active().collect();
    active.sort_by_key(|(_, folder)| folder.components().count());
    let mut unlistable: Vec<&std::path::Path> = Vec::new();
    for (root, folder) in active {
        root.warn_if_a_file(folder);
        if let Err(e) = std::fs::read_dir(folder)
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            // A root inside one said already (the local folder in the skills folder) is
            // unlistable because its parent is, whether it exists or not.
            if unlistable.iter().any(|outer| folder.starts_with(outer)) {
                continue;
            }
            unlistable.push(folder);
            tracing::warn!(
                "{} {} cannot be listed ({e}): nothing is served from it to this user (fix its \
                 mode, or run as its owner)",
                root.config_key(),
                folder.display()
            );
        }
    }
}

/// Opens the index to answer reads: a follower of a running worker, or the writer, brought up
/// to date first.
fn open_fresh(config: Config) -> Result<Directory, CliError> {
    warn_missing_folders(&config);
    let directory = Directory::open_shared(config)?;
    if directory.is_writer() {
        // Usually a moment; a first index (or one rebuilt after a crash) of a large tree takes
        // seconds, shown as `reindex` shows them (stderr: the answer on stdout stays whole).
        let progress = ProgressLine::after(false, Duration::from_secs(1));
        directory.reconcile_with_progress(&|p| progress.update(p))?;
        progress.finish();
    } else {
        tracing::info!(
            "another process (a worker, or a reindex past its rows) holds the index; answering from its live copy"
        );
    }
    Ok(directory)
}

fn read(config: Config, function: ReadFunction, request: &Value) -> Result<Value, CliError> {
    let directory = open_fresh(config)?;
    // Offline there is no engine to ask which workers are installed, so nothing is hidden.
    let installed: Option<&BTreeSet<String>> = None;
    Ok(directory.read(function, request, installed)?)
}

fn print(response: &Value, json: bool, human: impl FnOnce() -> String) -> Result<(), CliError> {
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
fn shown_on_a_terminal(text: &str, one_line: bool) -> String {
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
fn emit(text: &str) -> Result<(), CliError> {
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

/// Whether the process was started with its stdout closed (`>&-`), noted before Rust's
/// runtime starts: the runtime then opens /dev/null in its place, where the output would
/// vanish without an error.
#[cfg(target_os = "linux")]
fn stdout_closed_at_start() -> bool {
    closed_stdout::CLOSED.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(not(target_os = "linux"))]
fn stdout_closed_at_start() -> bool {
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

fn reindex(config: Config, from_scratch: bool, embed: bool, json: bool) -> Result<(), CliError> {
    warn_missing_folders(&config);
    let index_path = config.paths.index_path.clone();
    let as_writer = |e| CliError::open_as_writer(e, &index_path);
    if from_scratch && index_path.exists() {
        // Only the writer may delete it: opening first proves no worker holds it.
        drop(Directory::open(config.clone()).map_err(as_writer)?);
        iii_directory::remove_index(&index_path)?;
    }
    let directory = match Directory::open(config.clone()) {
        // A running worker owns the index: it walks every folder again when asked.
        Err(iii_directory::OpenError::Busy(_)) if !from_scratch => {
            return match CliError::busy(&index_path) {
                CliError::WorkerOwnsIndex(_) => rescan_by_worker(config, json),
                other => Err(other),
            };
        }
        opened => opened.map_err(as_writer)?,
    };
    let progress = ProgressLine::new(json);
    let report = directory.reconcile_with_progress(&|p| progress.update(p))?;
    progress.finish();
    // The rows are complete: a read started while the embeddings are computed follows them.
    directory.note_rows_complete();
    let embeddings = if embed {
        let embeddings = cli_model::embed_all(&directory, |done, total| {
            progress.show(&format!("embedded {done}/{total} skill contents"))
        })?;
        progress.finish();
        Some(embeddings)
    } else {
        None
    };
    if json {
        let mut summary = serde_json::to_value(&report)?;
        if let Some(embeddings) = &embeddings {
            summary["embeddings"] = serde_json::to_value(embeddings)?;
        }
        emit(&serde_json::to_string_pretty(&summary)?)?;
    } else {
        emit(&format!(
            "indexed {} files in {} ms: {} read, {} parsed, {} removed, {} skipped (see `iii-directory check`); revision {}{}",
            report.files,
            report.duration_ms,
            report.read,
            report.parsed,
            report.removed,
            report.skipped,
            report.revision,
            if report.changed {
                ""
            } else {
                " (nothing changed)"
            },
        ))?;
        if let Some(embeddings) = &embeddings {
            emit(&embeddings.line())?;
        }
        emit(&format!("index: {}", index_path.display()))?;
    }
    Ok(())
}

/// `reindex` beside a running worker: asks it to walk every folder again, as its safety net
/// does (for a change the kernel reported to no watch: a write through a hard link from
/// outside the folders, or through a shared memory mapping), waits until it has, and says
/// where the index stands.
fn rescan_by_worker(config: Config, json: bool) -> Result<(), CliError> {
    let index_path = config.paths.index_path.clone();
    let progress = ProgressLine::new(json);
    progress.show("the running worker is walking every folder again");
    let synced = iii_directory::ask_writer(&index_path, iii_directory::WriterAsk::Rescan);
    progress.finish();
    match synced {
        iii_directory::Synced::Answered => {}
        iii_directory::Synced::NotRecorded(why) => return Err(CliError::RescanNotRecorded(why)),
        iii_directory::Synced::NoWriter | iii_directory::Synced::GaveUp => {
            return Err(CliError::RescanNotConfirmed(index_path));
        }
    }
    let status = open_fresh(config)?.status()?;
    if json {
        let summary = json!({
            "rescanned_by_worker": true,
            "revision": status["revision"],
            "files": status["files"],
            "skipped": status["skipped_total"],
        });
        emit(&serde_json::to_string_pretty(&summary)?)?;
    } else {
        emit(&format!(
            "the running worker walked every folder again: {} files, {} skipped (see \
             `iii-directory check`); revision {}",
            status["files"], status["skipped_total"], status["revision"]
        ))?;
        emit(&format!("index: {}", index_path.display()))?;
    }
    Ok(())
}

/// Progress of long work on stderr: on a terminal one line redrawn in place; elsewhere (a log,
/// a CI job, a terminal without cursor control: `Stderr`) and with `--json`, a plain line now
/// and then, so that a long `reindex` is seen to move.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ProgressOutput {
    Terminal,
    Lines,
}

struct ProgressLine {
    output: ProgressOutput,
    started: Instant,
    /// Nothing is shown before the work has lasted this long.
    quiet_for: Duration,
    last: Mutex<Option<Instant>>,
}

impl ProgressLine {
    /// Progress shown from the start on a terminal (a `reindex`).
    fn new(json: bool) -> ProgressLine {
        ProgressLine::after(json, Duration::ZERO)
    }

    /// Progress shown only once the work has lasted `quiet_for` (a read that usually takes a
    /// moment), or the plain lines' interval if longer.
    fn after(json: bool, quiet_for: Duration) -> ProgressLine {
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

    fn update(&self, progress: Progress) {
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
    fn show(&self, line: &str) {
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
    fn finish(&self) {
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
fn end_the_line_on_ctrl_c(on: bool) {
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

fn render_list(kind: Kind, response: &Value) -> String {
    let field = |v: &Value, k: &str| match &v[k] {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let (key, headers, columns): (&str, [&str; 3], [&str; 3]) = match kind {
        Kind::Skills => ("skills", ["ID", "TYPE", "TITLE"], ["id", "type", "title"]),
        Kind::SystemPrompts => (
            "prompts",
            ["NAME", "BUILTIN", "DESCRIPTION"],
            ["name", "builtin", "description"],
        ),
        Kind::Agents => (
            "agents",
            ["ID", "NAME", "DESCRIPTION"],
            ["id", "name", "description"],
        ),
    };
    let revision = response["revision"].as_u64();
    if response["unchanged"] == json!(true) {
        return format!("unchanged at revision {}", revision.unwrap_or_default());
    }
    let delta = response.get("changed").is_some();
    let listed = if delta { "changed" } else { key };
    let rows: Vec<[String; 3]> = response[listed]
        .as_array()
        .map(|rows| rows.iter().map(|r| columns.map(|c| field(r, c))).collect())
        .unwrap_or_default();
    let mut out = table(headers, &rows);
    if delta {
        // `removed` names both forms of an id (`ns/index` is shown as `ns`) for clients that
        // hold either; a person reading the summary is told once of each row that is gone.
        let changed: BTreeSet<&str> = rows.iter().map(|row| row[0].as_str()).collect();
        let named: BTreeSet<&str> = response["removed"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let removed: Vec<&str> = named
            .iter()
            .copied()
            .filter(|id| {
                let other_form = id.strip_suffix("/index");
                !changed.contains(id)
                    && !other_form
                        .is_some_and(|shown| changed.contains(shown) || named.contains(shown))
            })
            .collect();
        out.push_str(&format!("\n{} {key} changed", rows.len()));
        if !removed.is_empty() {
            out.push_str(&format!("; removed: {}", removed.join(", ")));
        }
    } else {
        out.push_str(&format!("\n{} {key}", rows.len()));
    }
    if let Some(revision) = revision {
        out.push_str(&format!(" (revision {revision}"));
        if response["full"] == json!(true) {
            out.push_str("; the whole list");
        }
        out.push(')');
    }
    out
}

fn render_one(kind: KindOne, response: &Value, raw: bool) -> String {
    if raw {
        return response["raw"].as_str().unwrap_or_default().to_string();
    }
    let s = |k: &str| response[k].as_str().unwrap_or_default().to_string();
    match kind {
        KindOne::Skill => format!(
            "# {} ({})\npath: {}\n\n{}",
            s("title"),
            s("id"),
            s("path"),
            s("body")
        ),
        KindOne::SystemPrompt => format!("{}: {}\n\n{}", s("name"), s("description"), s("body")),
        KindOne::Agent => {
            let mut out = format!("{} ({}): {}\n", s("name"), s("id"), s("description"));
            if let Some(error) = response["inheritance_error"].as_str() {
                out.push_str(&format!("inheritance error: {error}\n"));
            }
            out.push('\n');
            out.push_str(&s("system_prompt"));
            out
        }
    }
}

/// Ranked skills: id and title, then the description, and the mode that ranked them.
fn render_skill_search(response: &Value) -> String {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let results = response["results"].as_array().cloned().unwrap_or_default();
    let mut out = String::new();
    if results.is_empty() {
        out.push_str("no skill matched\n");
    }
    for row in &results {
        // A skill whose frontmatter sets `disable-model-invocation` is for a user to invoke.
        let mark = match row["disable_model_invocation"].as_bool() {
            Some(true) => "  [user-invoked only]",
            _ => "",
        };
        out.push_str(&format!("{}  {}{mark}\n", s(row, "id"), s(row, "title")));
        let description = one_line(&s(row, "description"));
        if !description.is_empty() {
            out.push_str(&format!("  {description}\n"));
        }
    }
    out.push_str(&format!("({})", s(response, "mode")));
    out
}

/// `text` on one line: a description's line breaks would break the layout of its row.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Ranked workers with their candidate functions, then installable registry workers.
fn render_search(response: &Value) -> String {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let functions = |worker: &Value| -> Vec<[String; 2]> {
        worker["functions"]
            .as_array()
            .map(|f| {
                f.iter()
                    .map(|f| {
                        // A function of another engine namespace is called there.
                        let id = match f["engine_namespace"].as_str() {
                            Some(ns) => {
                                format!("  {} (engine namespace {ns})", s(f, "function_id"))
                            }
                            None => format!("  {}", s(f, "function_id")),
                        };
                        [id, s(f, "description")]
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = String::new();
    let workers = response["workers"].as_array().cloned().unwrap_or_default();
    if workers.is_empty() {
        out.push_str("no installed function matched\n");
    }
    for worker in &workers {
        out.push_str(&format!("{}\n", s(worker, "namespace")));
        out.push_str(table(["", ""], &functions(worker)).trim_start_matches('\n'));
        out.push('\n');
    }
    for worker in response["installable"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{} {} (not installed; install with compose::add {{\"worker\": \"{}\"}}): {}\n",
            s(worker, "name"),
            s(worker, "version"),
            s(worker, "name"),
            s(worker, "description")
        ));
        out.push_str(table(["", ""], &functions(worker)).trim_start_matches('\n'));
        out.push('\n');
    }
    // The side lane: the skills to read for each capability a skill serves.
    for lane in response["skills"].as_array().into_iter().flatten() {
        out.push_str(&format!("skills for \"{}\"\n", s(lane, "capability")));
        let rows: Vec<[String; 2]> = lane["skills"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|skill| {
                [
                    format!("  {}", s(skill, "id")),
                    one_line(&s(skill, "description")),
                ]
            })
            .collect();
        out.push_str(table(["", ""], &rows).trim_start_matches('\n'));
        out.push('\n');
    }
    out.push_str(&format!(
        "({:.1} ms)",
        response["latency_ms"].as_f64().unwrap_or_default()
    ));
    out
}

fn table<const N: usize>(headers: [&str; N], rows: &[[String; N]]) -> String {
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

fn print_table<const N: usize>(headers: [&str; N], rows: &[[String; N]]) -> Result<(), CliError> {
    emit(&table(headers, rows))
}

#[cfg(test)]
mod tests {
    use super::for_the_command_line;

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

    /// A candidate of another engine namespace is shown with it: the id alone cannot be called.
    #[test]
    fn a_search_shows_a_functions_engine_namespace() {
        let response = serde_json::json!({ "workers": [{ "namespace": "ledger", "functions": [
            { "function_id": "ledger::close", "description": "Close.", "engine_namespace": "team-b" },
            { "function_id": "ledger::open", "description": "Open." },
        ]}]});
        let text = super::render_search(&response);
        assert!(
            text.contains("ledger::close (engine namespace team-b)  Close."),
            "{text}"
        );
        assert!(text.contains("  ledger::open  "), "{text}");
    }

    #[test]
    fn next_steps_with_a_command_of_their_own_are_named_as_that_command() {
        let bus = "D110 not_found: skill \"pdff\" does not exist. Did you mean: pdf. Next: call directory::skills::list to browse skill ids; or call directory::skills::download_from_registry to fetch one; or call directory::skills::create to author a new skill.";
        assert_eq!(
            for_the_command_line(
                "D334 not_found: bundle \"nope\" is not in the bundles lock; x. Next: call directory::skills::bundles::list to see the bundles the lock records."
            ),
            "D334 not_found: bundle \"nope\" is not in the bundles lock; x. Next: run `iii-directory bundles` to see the bundles the lock records."
        );
        assert_eq!(
            for_the_command_line(bus),
            "D110 not_found: skill \"pdff\" does not exist. Did you mean: pdf. Next: run `iii-directory list skills` to browse skill ids; or call directory::skills::download_from_registry to fetch one; or call directory::skills::create to author a new skill."
        );
    }
}
