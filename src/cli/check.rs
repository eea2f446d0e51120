//! `check`: the files the index does not serve and why, or with `--spec` the served SKILL.md
//! files against the Agent Skills specification.

use super::error::{CliError, for_the_command_line};
use super::output::{emit, print_table};
use super::run::open_fresh;
use iii_directory::config::Config;
use iii_directory::{AgentProblem, Skipped, SpecSeverity};

/// `check --spec`: a summary line, one row per rule broken, and the SKILL.md files the worker
/// serves otherwise than as written.
pub(crate) fn against_the_spec(config: Config, json: bool) -> Result<(), CliError> {
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

/// `check`: every file the index does not serve, with the reason, then every agent profile
/// served with a problem (in JSON, rows of one shape: `root`, `path`, `family`, `id`,
/// `reason`).
pub(crate) fn files_not_served(config: Config, json: bool) -> Result<(), CliError> {
    let directory = open_fresh(config)?;
    let skipped = directory.skipped()?;
    // Offline there is no engine to say which workers are installed: nothing hidden.
    let profiles = directory.profile_problems(None)?;
    if json {
        let files = skipped.iter().map(Row::File);
        let rows: Vec<Row<'_>> = files.chain(profiles.iter().map(Row::Profile)).collect();
        emit(&serde_json::to_string_pretty(&rows)?)?;
    } else if skipped.is_empty() && profiles.is_empty() {
        emit("every file is served")?;
    } else {
        let files = skipped
            .into_iter()
            .map(|s| [s.root.to_string(), s.path, s.reason.to_string()]);
        let profiles = profiles
            .into_iter()
            .map(|p| [p.root.to_string(), p.path, for_the_command_line(&p.reason)]);
        let rows: Vec<[String; 3]> = files.chain(profiles).collect();
        print_table(["ROOT", "PATH", "REASON"], &rows)?;
    }
    Ok(())
}

/// A row of `check --json`: both kinds serialize to the same fields.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Row<'a> {
    File(&'a Skipped),
    Profile(&'a AgentProblem),
}
