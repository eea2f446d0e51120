//! The command line's grammar: its commands and flags (clap), the values they take, and the
//! usage rules clap cannot state.

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use super::output::emit_failure;
use super::{bundles, download};

/// Where the engine listens by default (contract).
pub(crate) const DEFAULT_URL: &str = "ws://127.0.0.1:49134";

pub(crate) const AFTER_HELP: &str = "\
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
  iii-directory check                        every file not served (or served with a
                                             problem), and why
  iii-directory check --spec                 every SKILL.md against the Agent Skills spec
  iii-directory search 'send an email'       functions for a capability, from a running engine
  iii-directory search --skills 'deploy a site to Netlify'  skills ranked for a task
  iii-directory search --skills --prefix netlify/ 'roll back a deploy'  within one namespace
  iii-directory catalog > skills.xml          the Agent Skills catalog for a prompt
  iii-directory download --worker mailer     a worker's skills bundle from the registry
  iii-directory download --repo https://github.com/anthropics/skills --skill frontend-design

While a worker runs, the read commands answer from its live index; without one, they bring
the index up to date first.

Errors go to stderr, with exit status 1 (2 for a wrong use of the command line). With --json,
a failure also prints one object on stdout, {\"error\": {\"code\", \"class\", \"message\"}}
(code and class null when uncoded).";

#[derive(Parser)]
#[command(name = "iii-directory", version, about = "Skills, system prompts and agent profiles for the iii engine, served from folders on disk through an embedded index.", after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// YAML configuration (the same file the worker takes); defaults apply without one.
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// Log level: error, warn, info, debug, trace or off (RUST_LOG, when set, takes precedence);
    /// the worker defaults to info, the other commands to warn.
    #[arg(
        long,
        global = true,
        value_name = "LEVEL",
        ignore_case = true,
        value_parser = ["error", "warn", "info", "debug", "trace", "off"]
    )]
    pub(crate) log_level: Option<String>,
    /// The engine's WebSocket address (the worker, and `search` of functions).
    #[arg(long, global = true, env = "III_URL", default_value = DEFAULT_URL)]
    pub(crate) url: String,
    /// Print the functions and trigger types the worker registers, as JSON, and exit.
    #[arg(long)]
    pub(crate) manifest: bool,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// The engine listens for workers on a WebSocket: anything else would be retried forever.
pub(crate) fn engine_url(url: &str) -> Result<String, String> {
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
pub(crate) fn revision(value: &str) -> Result<u64, String> {
    value.parse().map_err(|_| {
        "a revision is a whole number, 0 or more: the `revision` of an earlier `list skills --json` answer (0 for the whole list)".to_string()
    })
}

/// A count the matching function bounds (`--limit`, `--max-bytes`): refused outside its range,
/// as the bus refuses it, rather than brought within it.
pub(crate) fn count_in(
    range: std::ops::RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<u64, String> + Clone {
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
pub(crate) enum Command {
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
    /// List every file the index does not serve, or serves with a problem (its frontmatter
    /// ignored, a content `get` refuses, an agent profile whose `extends` leads nowhere or
    /// whose `skills` name skills nothing serves), with the reason; with --spec, every served
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
    Download(download::Args),
    /// Downloaded bundles against the bundles lock: `list` (the default), `get NAMESPACE`,
    /// `verify` (exit 1 when a file differs, is missing or is untracked), `check-updates
    /// [NAMESPACE]` (has a source moved on?), `restore [NAMESPACE]` (land exactly what the
    /// lock records).
    Bundles {
        #[command(subcommand)]
        action: Option<bundles::Action>,
        /// Print the exact response of the matching directory::skills::bundles:: function.
        #[arg(long, global = true)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Kind {
    Skills,
    SystemPrompts,
    Agents,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum CatalogFormat {
    Xml,
    Markdown,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum KindOne {
    Skill,
    SystemPrompt,
    Agent,
}

/// The command line, parsed and its usage checked. A wrong use exits as clap does (status 2,
/// the reason and the usage on stderr), and with `--json` among the arguments it also prints
/// the reason on stdout as the object any failure prints there (`output::emit_failure`).
pub(crate) fn parse() -> Cli {
    let checked = Cli::try_parse().and_then(|cli| check_usage(&cli).map(|()| cli));
    checked.unwrap_or_else(|error| {
        // `--help` and `--version` are "errors" to clap that print to stdout.
        if error.use_stderr() && asked_for_json() {
            // clap's reason is its first paragraph, which may run over lines (the missing
            // arguments, the values a flag takes); the usage and the hint follow.
            let text = error.to_string();
            let reason = text.split("\n\n").next().unwrap_or_default();
            let reason = reason.strip_prefix("error: ").unwrap_or(reason);
            emit_failure(&reason.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        error.exit()
    })
}

/// Whether `--json` is among the arguments, when they could not be parsed (before a `--`,
/// after which words are values).
fn asked_for_json() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|arg| arg != "--")
        .any(|arg| arg == "--json")
}

/// What the command line cannot say in clap's terms: which flags a kind takes, and an engine
/// address checked only by the commands that use one (a wrong `III_URL` in the environment
/// must not break `list`).
fn check_usage(cli: &Cli) -> Result<(), clap::Error> {
    // The usage clap prints after the reason is the command's own (`iii-directory list …`).
    let fail = |message: String| {
        let mut command = Cli::command();
        command.build();
        let named = (cli.command.as_ref())
            .and_then(|given| command.find_subcommand(given.name()))
            .cloned();
        Err(named
            .unwrap_or(command)
            .error(clap::error::ErrorKind::ArgumentConflict, message))
    };
    if cli.manifest && cli.command.is_some() {
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "--manifest prints what the worker registers and exits; give it no command",
        ));
    }
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
            return fail(format!(
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
        return fail(format!("invalid {source} {:?}: {why}", cli.url));
    }
    Ok(())
}

impl Command {
    /// Whether the command was asked for JSON (`--json`), its failure included.
    pub(crate) fn json(&self) -> bool {
        match self {
            Command::Serve => false,
            Command::Download(args) => args.json,
            Command::Reindex { json, .. }
            | Command::List { json, .. }
            | Command::Get { json, .. }
            | Command::Index { json }
            | Command::Check { json, .. }
            | Command::Search { json, .. }
            | Command::Catalog { json, .. }
            | Command::Bundles { json, .. } => *json,
        }
    }

    /// What the process is, in the note an index's writer leaves (`index::holder`): a worker
    /// holds the index for good, a command lets go when done.
    pub(crate) fn role(&self) -> &'static str {
        match self {
            Command::Serve => iii_directory::WORKER_ROLE,
            command => command.name(),
        }
    }

    /// The command's name on the command line.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Command::Serve => "serve",
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
