//! Each command carried out: the configuration loaded, the index opened as the command needs
//! it, the matching library function called, and the answer printed.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::args::{CatalogFormat, Cli, Command, Kind, KindOne};
use super::error::CliError;
use super::output::{emit, print};
use super::progress::ProgressLine;
use super::render::{render_list, render_one, render_search, render_skill_search};
use super::{bundles, check, download, model, reindex};
use iii_directory::config::Config;
use iii_directory::{Directory, ReadFunction, worker};

pub(crate) fn run(cli: Cli) -> Result<(), CliError> {
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
        } => reindex::reindex(config, from_scratch, !no_embed, json),
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
            let lexical_note = model::ready_for_search(&directory)?;
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
            emit(&download::run(config, args)?)?;
            Ok(())
        }
        Command::Bundles { action, json } => {
            warn_missing_folders(&config);
            let outcome = bundles::run(config, action, json)?;
            let written = emit(&outcome.text);
            // A failed bundle fails the command even when the reader stopped reading early.
            outcome.failure.map_or(written, Err)
        }
        Command::Check { json, spec: true } => check::against_the_spec(config, json),
        Command::Check { json, spec: false } => check::files_not_served(config, json),
    }
}

/// The skill whose file is `path` (absolute, or relative to the current directory): `get`
/// prints a skill's `path`, and a person pastes it back. `directory::skills::get` takes the
/// absolute path (the file asked for is the file answered, or a refusal with the reason).
pub(crate) fn get_skill_file(config: Config, path: &str, raw: bool) -> Result<Value, CliError> {
    let file = lexically_absolute(path);
    if !path.ends_with(".md") {
        return Err(iii_directory::no_skill_file(&file).into());
    }
    let request = json!({ "id": file.display().to_string(), "raw": raw });
    Ok(open_fresh(config)?.read(ReadFunction::SkillsGet, &request, None)?)
}

/// `path` made absolute against the current directory, with `.` and `..` folded as written.
pub(crate) fn lexically_absolute(path: impl AsRef<std::path::Path>) -> PathBuf {
    let path = path.as_ref();
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    iii_directory::config::layout::lexical(&absolute)
}

/// Whether a `get skill` argument can only be a path (an id never starts with `/` or `.`).
pub(crate) fn names_a_path(argument: &str) -> bool {
    argument.starts_with('/') || argument.starts_with("./") || argument.starts_with("../")
}

/// Whether a `get skill` argument names an existing markdown file from here (`skills/a.md`):
/// taken as that file rather than as an id.
pub(crate) fn names_a_file(argument: &str) -> bool {
    argument.ends_with(".md") && std::path::Path::new(argument).is_file()
}

/// Says, before any command reads, which folders a person most likely mistyped:
/// `III_COMPOSE_DIR`, `skills_folder`, and a user-global folder that is set, when missing (a missing root serves nothing, silently, by design: it is
/// served as soon as it appears), and any root that is a file. The other roots are often absent
/// on purpose.
pub(crate) fn warn_missing_folders(config: &Config) {
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
pub(crate) fn open_fresh(config: Config) -> Result<Directory, CliError> {
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

pub(crate) fn read(
    config: Config,
    function: ReadFunction,
    request: &Value,
) -> Result<Value, CliError> {
    let directory = open_fresh(config)?;
    // Offline there is no engine to ask which workers are installed, so nothing is hidden.
    let installed: Option<&BTreeSet<String>> = None;
    Ok(directory.read(function, request, installed)?)
}
