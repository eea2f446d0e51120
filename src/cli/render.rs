//! Answers as a person reads them: lists and single records, ranked skills, and the functions
//! `search` found (`--json` prints the answer itself instead).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::args::{Kind, KindOne};
use super::error::for_the_command_line;
use super::output::{one_line, table};

pub(crate) fn render_list(kind: Kind, response: &Value) -> String {
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

pub(crate) fn render_one(kind: KindOne, response: &Value, raw: bool) -> String {
    if raw {
        return response["raw"].as_str().unwrap_or_default().to_string();
    }
    let s = |k: &str| response[k].as_str().unwrap_or_default().to_string();
    // A heading's fields on one line each, so none of their text reads as another heading line.
    let line = |k: &str| one_line(&s(k));
    match kind {
        KindOne::Skill => format!(
            "# {} ({})\npath: {}\n{}\n{}",
            line("title"),
            line("id"),
            s("path"),
            spec_problems(&response["problems"]),
            s("body")
        ),
        KindOne::SystemPrompt => {
            format!("{}: {}\n\n{}", line("name"), line("description"), s("body"))
        }
        KindOne::Agent => {
            let mut out = format!(
                "{} ({}): {}\n",
                line("name"),
                line("id"),
                line("description")
            );
            if let Some(error) = response["inheritance_error"].as_str() {
                let error = for_the_command_line(error);
                out.push_str(&format!("inheritance error: {error}\n"));
            }
            let unknown: Vec<&str> = (response["unknown_skills"].as_array().into_iter())
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !unknown.is_empty() {
                out.push_str(&format!(
                    "skills it names that are not served: {} (`iii-directory list skills` lists those that are)\n",
                    unknown.join(", ")
                ));
            }
            out.push('\n');
            out.push_str(&s("system_prompt"));
            out
        }
    }
}

/// A served `SKILL.md`'s Agent Skills problems (the answer's `problems`), a line each, as
/// `check --spec` lists them; nothing when it has none.
fn spec_problems(problems: &Value) -> String {
    let lines: Vec<String> = problems
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or_default();
            format!(
                "{} {}: {}\n",
                s("code"),
                s("severity"),
                one_line(s("message"))
            )
        })
        .collect();
    match lines.is_empty() {
        true => String::new(),
        false => format!("Agent Skills problems (check --spec):\n{}", lines.concat()),
    }
}

/// Ranked skills: id and title, then the description, and the mode that ranked them.
pub(crate) fn render_skill_search(response: &Value) -> String {
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
        // One result, one line: a title written over several lines (in YAML, or with escaped
        // newlines) must not read as results of its own.
        let (id, title) = (one_line(&s(row, "id")), one_line(&s(row, "title")));
        out.push_str(&format!("{id}  {title}{mark}\n"));
        let description = one_line(&s(row, "description"));
        if !description.is_empty() {
            out.push_str(&format!("  {description}\n"));
        }
    }
    out.push_str(&format!("({})", s(response, "mode")));
    out
}

/// Ranked workers with their candidate functions, then installable registry workers.
pub(crate) fn render_search(response: &Value) -> String {
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
        out.push_str(&format!("{}\n", one_line(&s(worker, "namespace"))));
        out.push_str(table(["", ""], &functions(worker)).trim_start_matches('\n'));
        out.push('\n');
    }
    for worker in response["installable"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{} {} (not installed; install with compose::add {{\"worker\": \"{}\"}}): {}\n",
            s(worker, "name"),
            s(worker, "version"),
            s(worker, "name"),
            one_line(&s(worker, "description"))
        ));
        out.push_str(table(["", ""], &functions(worker)).trim_start_matches('\n'));
        out.push('\n');
    }
    // The side lane: the skills to read for each capability a skill serves.
    for lane in response["skills"].as_array().into_iter().flatten() {
        // The capability as the caller wrote it, newlines and all: on its heading's line.
        let capability = one_line(&s(lane, "capability"));
        out.push_str(&format!("skills for \"{capability}\"\n"));
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

#[cfg(test)]
mod tests {
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

    /// A capability written over several lines heads its skills on one line: its lines cannot
    /// pass for rows of the answer.
    #[test]
    fn a_capability_over_several_lines_heads_its_skills_on_one() {
        let response = serde_json::json!({ "workers": [], "skills": [{
            "capability": "send an email\nmailer\n  mailer::wipe  Wipe.",
            "skills": [{ "id": "email-etiquette", "description": "Write\npolitely." }],
        }], "latency_ms": 1.0 });
        let text = super::render_search(&response);
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "no installed function matched",
                "skills for \"send an email mailer mailer::wipe Wipe.\"",
                "  email-etiquette  Write politely.",
                "(1.0 ms)"
            ],
            "{text}"
        );
    }

    /// A skill's Agent Skills problems are printed under its path, one line each, as `--json`
    /// answers them; a skill without problems keeps the plain heading.
    #[test]
    fn a_skill_is_shown_with_its_agent_skills_problems() {
        let response = serde_json::json!({
            "id": "pdf", "title": "Pdf", "path": "/p/pdf/SKILL.md", "body": "# Pdf\n",
            "problems": [{ "code": "S117", "severity": "error", "message": "the name\ndiffers" }],
        });
        let text = super::render_one(super::KindOne::Skill, &response, false);
        assert_eq!(
            text,
            "# Pdf (pdf)\npath: /p/pdf/SKILL.md\nAgent Skills problems (check --spec):\nS117 error: the name differs\n\n# Pdf\n"
        );
        let mut clean = response.clone();
        clean.as_object_mut().unwrap().remove("problems");
        let text = super::render_one(super::KindOne::Skill, &clean, false);
        assert_eq!(text, "# Pdf (pdf)\npath: /p/pdf/SKILL.md\n\n# Pdf\n");
    }
}
