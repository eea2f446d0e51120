//! `iii-directory bundles`: the bundles lock against the disk, answered as
//! `directory::skills::bundles::{list, get, verify}` answer it. It reads the lock and the files
//! only (never the index), so it works the same beside a running worker.

use serde_json::{Value, json};

use crate::cli_error::CliError;
use iii_directory::config::Config;
use iii_directory::download::BundlesFunction;
use iii_directory::download::status;

/// What `bundles` does.
#[derive(clap::Subcommand)]
pub enum Action {
    /// Every locked bundle and its state (the default).
    List,
    /// One bundle: its source and every file's state.
    Get {
        /// The bundle's namespace (a skill or worker name).
        namespace: String,
    },
    /// Every locked file checked against its sha256; exits 1 when anything differs.
    Verify,
}

/// What the command prints, and for a verify that found differences, how many bundles differ
/// (the command then exits 1, after printing the report).
pub struct Outcome {
    pub text: String,
    pub differing: Option<usize>,
}

/// Runs the command.
pub fn run(config: Config, action: Option<Action>, json: bool) -> Result<Outcome, CliError> {
    config.check()?;
    let paths = &config.paths;
    let (function, request) = match &action {
        None | Some(Action::List) => (BundlesFunction::List, json!({})),
        Some(Action::Get { namespace }) => {
            (BundlesFunction::Get, json!({ "namespace": namespace }))
        }
        Some(Action::Verify) => (BundlesFunction::Verify, json!({})),
    };
    let response = status::answer(paths, function, &request)?;
    let text = if json {
        serde_json::to_string_pretty(&response)?
    } else {
        match function {
            BundlesFunction::List => render_list(&response),
            BundlesFunction::Get => render_one(&response),
            BundlesFunction::Verify => render_verify(&response),
        }
    };
    let differing = (function == BundlesFunction::Verify && response["ok"] != json!(true))
        .then(|| response["bundles"].as_array().map_or(0, Vec::len));
    Ok(Outcome { text, differing })
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `registry mailer@1.2.3` or `repo <url> skills/x @ <commit>`.
fn source(source: &Value) -> String {
    let text = |key: &str| source[key].as_str().unwrap_or("?");
    match text("kind") {
        "repo" => {
            let commit = source["commit"]
                .as_str()
                .map_or("?", |c| &c[..c.len().min(12)]);
            format!("repo {} {} @ {commit}", text("repo"), text("folder"))
        }
        _ => format!("registry {}@{}", text("worker"), text("version")),
    }
}

/// The lines naming a bundle's modified, missing and untracked files.
fn problems(bundle: &Value) -> String {
    let mut out = String::new();
    for key in ["modified", "missing", "untracked"] {
        for path in strings(&bundle[key]) {
            out.push_str(&format!("\n  {key:<9} {path}"));
        }
    }
    out
}

fn render_list(response: &Value) -> String {
    let bundles = response["bundles"].as_array().cloned().unwrap_or_default();
    if bundles.is_empty() {
        return "no bundle in the bundles lock".to_string();
    }
    bundles
        .iter()
        .map(|b| {
            format!(
                "{:<24} {:<9} {:>5} file(s)  {}{}",
                b["namespace"].as_str().unwrap_or_default(),
                b["state"].as_str().unwrap_or_default(),
                b["files"],
                source(&b["source"]),
                problems(b)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn render_one(bundle: &Value) -> String {
    let mut out = format!(
        "{} ({}), landed {}\nsource: {}",
        bundle["namespace"].as_str().unwrap_or_default(),
        bundle["state"].as_str().unwrap_or_default(),
        bundle["landed_at"].as_str().unwrap_or_default(),
        source(&bundle["source"])
    );
    if let Some(digest) = bundle["source"]["digest"].as_str() {
        out.push_str(&format!("\ndigest: {digest}"));
    }
    for file in bundle["detail"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "\n  {:<8} {:<14} {}",
            file["state"].as_str().unwrap_or_default(),
            file["route"].as_str().unwrap_or_default(),
            file["path"].as_str().unwrap_or_default()
        ));
    }
    for path in strings(&bundle["untracked"]) {
        out.push_str(&format!("\n  {:<8} {:<14} {path}", "untracked", "-"));
    }
    out
}

fn render_verify(response: &Value) -> String {
    let checked = &response["checked"];
    if response["ok"] == json!(true) {
        return format!(
            "every locked file matches: {} bundle(s), {} file(s)",
            checked["bundles"], checked["files"]
        );
    }
    let mut out = format!(
        "checked {} bundle(s), {} file(s); these differ from the lock:",
        checked["bundles"], checked["files"]
    );
    for bundle in response["bundles"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "\n{} ({}){}",
            bundle["namespace"].as_str().unwrap_or_default(),
            bundle["state"].as_str().unwrap_or_default(),
            problems(bundle)
        ));
    }
    out
}
