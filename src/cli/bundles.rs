//! `iii-directory bundles`: the bundles lock against the disk, answered as
//! `directory::skills::bundles::{list, get, verify, check-updates}` answer it, reading the lock
//! and the files only (never the index), so the same beside a running worker; and `restore`,
//! which lands through the index as a download does.

use serde_json::{Value, json};

use super::error::{CliError, cli_runtime};
use std::sync::Arc;

use iii_directory::Directory;
use iii_directory::config::Config;
use iii_directory::download::lock::Entry;
use iii_directory::download::{Bundle, BundlesFunction, OnEdited};
use iii_directory::download::{guard, restore, status, updates};
use iii_directory::registry::{Endpoint, Registry};

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
    /// Ask each bundle's source whether it moved on (the registry for the locked tag, git
    /// ls-remote for the branch); a source that fails is unknown, with the reason.
    CheckUpdates {
        /// Only this bundle (default: every locked bundle).
        namespace: Option<String>,
    },
    /// Fetch exactly the locked commits and versions and land them, every file checked
    /// against its locked sha256 (nothing written for a bundle that differs).
    Restore {
        /// Only this bundle (default: every locked bundle).
        namespace: Option<String>,
        /// Replace files edited locally (by default they are kept).
        #[arg(long)]
        force: bool,
    },
}

/// What the command prints, and for a verify that found differences, how many bundles differ
/// (the command then exits 1, after printing the report).
pub struct Outcome {
    pub text: String,
    /// Printed, then the command fails with it (a verify that found differences, a restore
    /// that could not restore every bundle).
    pub failure: Option<CliError>,
}

/// Runs the command.
pub fn run(config: Config, action: Option<Action>, json: bool) -> Result<Outcome, CliError> {
    config.check()?;
    let config = Directory::config_beside_worker(config);
    if let Some(Action::Restore { namespace, force }) = &action {
        return restore(config.clone(), namespace.clone(), *force, json);
    }
    if let Some(Action::CheckUpdates { namespace }) = &action {
        return check_updates(&config, namespace.clone(), json);
    }
    let paths = &config.paths;
    let (function, request) = match &action {
        None | Some(Action::List) => (BundlesFunction::List, json!({})),
        Some(Action::Get { namespace }) => {
            (BundlesFunction::Get, json!({ "namespace": namespace }))
        }
        Some(Action::Verify) => (BundlesFunction::Verify, json!({})),
        Some(Action::Restore { .. } | Action::CheckUpdates { .. }) => {
            unreachable!("answered above")
        }
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
    let failure =
        (function == BundlesFunction::Verify && response["ok"] != json!(true)).then(|| {
            CliError::NotVerified {
                bundles: response["bundles"].as_array().map_or(0, Vec::len),
            }
        });
    Ok(Outcome { text, failure })
}

/// `bundles check-updates`: one line per bundle.
fn check_updates(
    config: &Config,
    namespace: Option<String>,
    json: bool,
) -> Result<Outcome, CliError> {
    let registry = Registry::fixed(Endpoint::from_settings(&config.settings));
    let runtime = cli_runtime()?;
    let request = json!({ "namespace": namespace });
    let response = runtime.block_on(updates::check_updates(
        &config.settings,
        &config.paths.bundles_lock,
        &registry,
        &request,
    ))?;
    let text = if json {
        serde_json::to_string_pretty(&response)?
    } else {
        let rows: Vec<String> = response["bundles"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| {
                let now = &b["upstream"];
                let detail = now["commit"]
                    .as_str()
                    .map(|c| format!("branch at {}", &c[..c.len().min(12)]))
                    .or_else(|| now["version"].as_str().map(|v| format!("now {v}")))
                    .or_else(|| b["reason"].as_str().map(str::to_string))
                    .unwrap_or_default();
                format!(
                    "{:<24} {:<16} {detail}",
                    b["namespace"].as_str().unwrap_or_default(),
                    b["state"].as_str().unwrap_or_default()
                )
            })
            .collect();
        if rows.is_empty() {
            "no bundle in the bundles lock".to_string()
        } else {
            rows.join("\n")
        }
    };
    Ok(Outcome {
        text,
        failure: None,
    })
}

/// Lands one restored bundle, the index opened for it alone. A failure to open or bring it up
/// to date is this bundle's, as a landing's is: the report still names the bundles landed
/// before it.
fn land_restored(
    config: &Config,
    runtime: &tokio::runtime::Runtime,
    entry: &Entry,
    bundle: Bundle,
    on_edited: OnEdited,
) -> iii_directory::Result<Value> {
    let directory = match Directory::open_to_write(config.clone()) {
        Ok(directory) => Arc::new(directory),
        Err(e) => return Err(iii_directory::Error::Invalid(CliError::from(e).to_string())),
    };
    if directory.is_writer() {
        directory.reconcile()?;
    }
    runtime.block_on(restore::land_checked(&directory, entry, bundle, on_edited))
}

/// `bundles restore`: the same landing as a download (the index brought up to date when no
/// worker owns it; with a worker running, its watcher picks the files up).
fn restore(
    config: Config,
    namespace: Option<String>,
    force: bool,
    json: bool,
) -> Result<Outcome, CliError> {
    // `run` took the running worker's live settings already.
    let settings = &config.settings;
    let registry = Registry::fixed(Endpoint::from_settings(settings));
    let runtime = cli_runtime()?;
    let request = json!({ "namespace": namespace, "force": force });
    let asked = restore::Restore::asked(&config.paths, &request)?;
    let mut outcomes = Vec::new();
    for entry in asked.entries() {
        // Each bundle is fetched and checked before the index is opened, and the index is
        // let go once it lands: a command holds the index while it runs, and the reads beside
        // it would wait for the network too.
        let fetched = runtime.block_on(restore::fetch_checked(
            settings,
            &config.paths,
            &registry,
            entry,
        ));
        let outcome = match fetched {
            Ok(bundle) => land_restored(&config, &runtime, entry, bundle, asked.on_edited()),
            Err(e) => Err(e),
        };
        outcomes.push(outcome);
    }
    let response = asked.answer(outcomes)?;
    let one = |r: &Value| {
        let kept = strings(&r["kept_local"]);
        let mut line = format!(
            "restored {} ({} file(s), each as locked)",
            r["namespace"].as_str().unwrap_or_default(),
            r["files"]
        );
        if !kept.is_empty() {
            line.push_str(&format!("; kept as you edited them: {}", kept.join(", ")));
        }
        line
    };
    let failed = response["failed"].as_array().map_or(0, Vec::len);
    let text = if json {
        serde_json::to_string_pretty(&response)?
    } else if namespace.is_some() {
        one(&response)
    } else {
        let mut lines: Vec<String> = response["restored"]
            .as_array()
            .into_iter()
            .flatten()
            .map(one)
            .collect();
        for f in response["failed"].as_array().into_iter().flatten() {
            lines.push(format!(
                "not restored {}: {}",
                f["namespace"].as_str().unwrap_or_default(),
                f["error"].as_str().unwrap_or_default()
            ));
        }
        if lines.is_empty() {
            lines.push("no bundle in the bundles lock".to_string());
        }
        lines.join("\n")
    };
    Ok(Outcome {
        text,
        failure: (failed > 0).then_some(CliError::NotRestored { bundles: failed }),
    })
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

/// The lines naming a bundle's modified, missing and untracked files, and its `.upstream`
/// copies: every one the answer names (`upstream_copies`), each open conflict's as well as the
/// stale ones, since an open copy is work left to do as much as a stale one.
fn problems(bundle: &Value) -> String {
    let mut out = String::new();
    for key in ["modified", "missing", "untracked"] {
        for path in strings(&bundle[key]) {
            out.push_str(&format!("\n  {key:<9} {path}"));
        }
    }
    let stale = strings(&bundle["stale_upstream_copies"]);
    for path in strings(&bundle["upstream_copies"]) {
        let word = if stale.contains(&path) {
            "stale"
        } else {
            "copy"
        };
        let what = copy_note(stale.contains(&path));
        out.push_str(&format!("\n  {word:<9} {path} ({what})"));
    }
    out.push_str(&record_note(bundle));
    out
}

/// A line for a bundle whose namespace lost its record of what the bundle wrote, which its
/// files' state cannot show.
fn record_note(bundle: &Value) -> String {
    if bundle["recorded"] != Value::Bool(false) {
        return String::new();
    }
    let namespace = bundle["namespace"].as_str().unwrap_or_default();
    format!(
        "\n  {:<9} no {} in the namespace: the files holding the locked bytes count as the bundle's; `iii-directory bundles restore {namespace}` writes the record again",
        "record",
        guard::RECORD_FILE
    )
}

/// What to do about an `.upstream` copy, stale or still open.
fn copy_note(stale: bool) -> &'static str {
    if stale {
        "its conflict is settled: delete it"
    } else {
        "upstream's text of a conflict: merge it by hand, then delete it"
    }
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
            "\n  {:<9} {:<14} {}",
            file["state"].as_str().unwrap_or_default(),
            file["route"].as_str().unwrap_or_default(),
            file["path"].as_str().unwrap_or_default()
        ));
    }
    for path in strings(&bundle["untracked"]) {
        out.push_str(&format!("\n  {:<9} {:<14} {path}", "untracked", "-"));
    }
    let stale = strings(&bundle["stale_upstream_copies"]);
    for path in strings(&bundle["upstream_copies"]) {
        let what = copy_note(stale.contains(&path));
        out.push_str(&format!("\n  {:<9} {:<14} {path} ({what})", "copy", "-"));
    }
    out.push_str(&record_note(bundle));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_copies_open_and_stale_are_named_with_what_to_do() {
        let bundle = json!({
            "namespace": "mailer",
            "state": "untracked",
            "landed_at": "2026-12-02T17:00:00Z",
            "files": 2,
            "source": { "kind": "registry", "worker": "mailer", "version": "2.0.0" },
            "modified": [],
            "missing": [],
            "untracked": [],
            "upstream_copies": ["a.md.upstream", "b.md.upstream"],
            "stale_upstream_copies": ["b.md.upstream"],
        });
        let listed = render_list(&json!({ "bundles": [bundle] }));
        assert!(
            listed.contains("stale     b.md.upstream (its conflict is settled: delete it)"),
            "{listed}"
        );
        assert!(
            listed.contains(
                "copy      a.md.upstream (upstream's text of a conflict: merge it by hand, then delete it)"
            ),
            "{listed}"
        );
        let one = render_one(&bundle);
        assert!(
            one.contains(
                "a.md.upstream (upstream's text of a conflict: merge it by hand, then delete it)"
            ),
            "{one}"
        );
        assert!(
            one.contains("b.md.upstream (its conflict is settled: delete it)"),
            "{one}"
        );
    }

    #[test]
    fn a_bundle_without_its_record_says_how_to_have_it_again() {
        let mut bundle = json!({
            "namespace": "mailer",
            "state": "clean",
            "landed_at": "2026-12-02T17:00:00Z",
            "files": 2,
            "source": { "kind": "registry", "worker": "mailer", "version": "2.0.0" },
            "modified": [], "missing": [], "untracked": [],
            "upstream_copies": [], "stale_upstream_copies": [],
            "recorded": false,
        });
        let line = "record    no .iii-bundle-files in the namespace: the files holding the locked bytes count as the bundle's; `iii-directory bundles restore mailer` writes the record again";
        for shown in [
            render_list(&json!({ "bundles": [&bundle] })),
            render_one(&bundle),
        ] {
            assert!(shown.contains(line), "{shown}");
        }
        bundle["recorded"] = json!(true);
        for shown in [
            render_list(&json!({ "bundles": [&bundle] })),
            render_one(&bundle),
        ] {
            assert!(!shown.contains("record "), "{shown}");
        }
    }

    #[test]
    fn a_bundles_files_line_up_in_columns_whatever_their_state() {
        let bundle = json!({
            "namespace": "mailer",
            "state": "untracked",
            "source": { "kind": "registry", "worker": "mailer", "version": "2.0.0" },
            "detail": [{ "state": "modified", "route": "skills", "path": "SKILL.md" }],
            "untracked": ["notes.md"],
            "upstream_copies": ["SKILL.md.upstream"],
        });
        let one = render_one(&bundle);
        let columns: Vec<usize> = one
            .lines()
            .filter(|line| line.starts_with("  "))
            .map(|line| {
                let path = ["SKILL.md", "notes.md"].iter().find_map(|p| line.find(p));
                path.expect("a path")
            })
            .collect();
        assert_eq!(columns.len(), 3, "{one}");
        assert!(columns.windows(2).all(|pair| pair[0] == pair[1]), "{one}");
    }
}
