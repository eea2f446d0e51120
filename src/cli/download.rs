//! `iii-directory download`: a download from the command line, answered as the worker answers
//! it. Without a running worker the command is the index's writer: it brings the index up to
//! date, lands the bundle and reconciles what it wrote, so the index is current when it
//! returns. With a worker running (it owns the index), the bundle lands on disk the same safe
//! way (staged, all or nothing, under the same cross-process lock) and the command follows the
//! worker's live index read-only until it shows every markdown file written, or says why not.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::error::{CliError, cli_runtime};
use iii_directory::config::Config;
use iii_directory::download::{self, DownloadFunction, Step};
use iii_directory::registry::{Endpoint, Registry};
use iii_directory::{Directory, Synced, WriterAsk};

/// How long to wait for a running worker's index to show the files.
const FOLLOW_TIMEOUT: Duration = Duration::from_secs(30);
const FOLLOW_POLL: Duration = Duration::from_millis(100);
/// Entries of a list shown in the summary before "… and N more".
const SUMMARY_ENTRIES: usize = 12;

/// What the command was given: a repository's skill or a registry worker, one or the other.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["repo", "worker"])))]
pub struct Args {
    /// https://, ssh:// or git@ URL of a git repository.
    #[arg(long, conflicts_with_all = ["worker", "version", "tag"], requires = "skill")]
    pub repo: Option<String>,
    /// The folder under the repository's skills/ to copy.
    #[arg(long, requires = "repo", conflicts_with = "worker")]
    pub skill: Option<String>,
    /// The branch to clone (default main).
    #[arg(long, requires = "repo", conflicts_with = "worker")]
    pub branch: Option<String>,
    /// A worker published in the registry.
    #[arg(long)]
    pub worker: Option<String>,
    /// An exact published version of the worker.
    #[arg(long, requires = "worker", conflicts_with = "tag")]
    pub version: Option<String>,
    /// A release tag of the worker (default latest).
    #[arg(long, requires = "worker")]
    pub tag: Option<String>,
    /// Replace files the bundle installed even where they were edited since (by default
    /// they are kept and listed as kept locally).
    #[arg(long)]
    pub force: bool,
    /// Print the exact response of directory::skills::download.
    #[arg(long)]
    pub json: bool,
}

pub fn run(config: Config, args: Args) -> Result<String, CliError> {
    let request = json!({
        "repo": args.repo, "skill": args.skill, "branch": args.branch,
        "worker": args.worker, "version": args.version, "tag": args.tag,
        "force": args.force,
    });
    let source = download::source::parse(DownloadFunction::Download, &request)?;
    let on_edited = download::source::on_edited(&request)?;
    // Fetched before the index is opened: a command holds the index while it runs, and the
    // reads beside it would wait for a slow registry or clone too (they waited a minute).
    let settings = Directory::config_beside_worker(config.clone()).settings;
    let registry = Registry::fixed(Endpoint::from_settings(&settings));
    let started = Instant::now();
    let quiet = args.json;
    let progress = move |step: Step| {
        if !quiet {
            eprintln!("{}", describe(&step, started));
        }
    };
    let runtime = cli_runtime()?;
    let bundle = runtime.block_on(download::fetch(&settings, &registry, source, &progress))?;
    // Said before the index is opened, which may wait for another command: the time is the
    // fetch's.
    progress(Step::Landing {
        files: bundle.files.len(),
    });
    let directory = Arc::new(Directory::open_to_write(config.clone())?);
    let writer = directory.is_writer();
    if writer {
        directory.reconcile()?;
    }
    let landed = runtime.block_on(download::settle(&directory, &registry, bundle, on_edited))?;
    let indexed = if writer {
        let revision = directory.revision()?;
        format!("index updated (revision {revision})")
    } else {
        follow(&directory, &landed.paths)?
    };
    if args.json {
        return Ok(serde_json::to_string_pretty(&landed.response)?);
    }
    Ok(summary(&landed.response, &indexed, started.elapsed()))
}

fn describe(step: &Step, started: Instant) -> String {
    match step {
        Step::Cloning { repo, branch } => format!("cloning {repo} (branch {branch})…"),
        Step::Requesting { worker, release } => {
            format!("requesting the skills bundle of {worker}@{release} from the registry…")
        }
        Step::Landing { files } => format!(
            "bundle checked in {:.1} s: {files} file(s); landing…",
            started.elapsed().as_secs_f64()
        ),
    }
}

/// Waits until the running worker's index holds every markdown file written, as written.
fn follow(directory: &Directory, written: &[PathBuf]) -> Result<String, CliError> {
    // Asked once the files are on disk, even if this process gave up on the worker a moment
    // ago (opening the index): one that answers has taken them in; one that does not is said
    // at once rather than waited on.
    let index_path = &directory.config().paths.index_path;
    let synced = iii_directory::ask_writer_afresh(index_path, WriterAsk::CatchUp);
    let deadline = Instant::now() + FOLLOW_TIMEOUT;
    let waiting = super::output::Stderr::now().redraw;
    loop {
        let missing = download::unindexed(directory, written)?;
        if missing == 0 {
            return Ok("indexed by the running worker".into());
        }
        if synced == Synced::GaveUp {
            return Err(CliError::WorkerUnanswered { missing });
        }
        if Instant::now() >= deadline {
            return Err(CliError::NotIndexed {
                missing,
                waited: FOLLOW_TIMEOUT,
            });
        }
        if waiting {
            eprint!("\r\x1b[2Kwaiting for the running worker to index {missing} file(s)…");
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}

fn summary(response: &Value, indexed: &str, took: Duration) -> String {
    // Entries are paths, or for a conflict `{path, upstream_copy}`.
    let list = |value: &Value| -> Vec<String> {
        let entry = |item: &Value| match (item.as_str(), item["path"].as_str()) {
            (Some(path), _) => Some(path.to_string()),
            (None, Some(path)) => Some(match item["upstream_copy"].as_str() {
                Some(copy) => format!("{path} (upstream's text in {copy})"),
                None => path.to_string(),
            }),
            (None, None) => None,
        };
        value
            .as_array()
            .map(|v| v.iter().filter_map(entry).collect())
            .unwrap_or_default()
    };
    // `kept_local` names the merged files too (the contract's list); here "kept as you have
    // them" says only what stayed untouched.
    let merged = list(&response["merged"]);
    let kept: Vec<Value> = list(&response["kept_local"])
        .into_iter()
        .filter(|path| !merged.contains(path))
        .map(Value::from)
        .collect();
    let kept = Value::from(kept);
    let source = &response["source"];
    let from = match source["kind"].as_str() {
        Some("repo") => format!(
            "{} (skills/{}, branch {})",
            source["repo"].as_str().unwrap_or_default(),
            source["skill"].as_str().unwrap_or_default(),
            source["branch"].as_str().unwrap_or_default()
        ),
        _ => {
            let release = source["version"]
                .as_str()
                .or_else(|| source["tag"].as_str())
                .unwrap_or_default();
            format!(
                "the registry ({}@{release})",
                source["worker"].as_str().unwrap_or_default()
            )
        }
    };
    let mut out = format!(
        "downloaded {} from {from} in {:.1} s",
        response["namespace"].as_str().unwrap_or_default(),
        took.as_secs_f64()
    );
    let review = &response["review"];
    for (value, label) in [
        (&response["skills_written"], "skill files"),
        (&response["system_prompts_written"], "system prompts"),
        (&response["agents_written"], "agent profiles"),
        (
            &kept,
            "kept as you have them (--force replaces those the bundle installed and you edited)",
        ),
        (&response["merged"], "merged with your edits"),
        (
            &response["conflicts"],
            "conflicts: yours kept, merge upstream's text by hand, then delete its copy",
        ),
        (&review["executables"], "review: executable"),
        (&review["scripts"], "review: scripts"),
        (&review["hidden"], "review: hidden names, not downloaded"),
        (&review["large"], "review: large files"),
    ] {
        let items = list(value);
        if items.is_empty() {
            continue;
        }
        let shown: Vec<&str> = items
            .iter()
            .take(SUMMARY_ENTRIES)
            .map(String::as_str)
            .collect();
        let more = items.len().saturating_sub(SUMMARY_ENTRIES);
        out.push_str(&format!(
            "\n  {label} ({}): {}",
            items.len(),
            shown.join(", ")
        ));
        if more > 0 {
            out.push_str(&format!(", … and {more} more"));
        }
    }
    if let Some(problem) = response["base_problem"].as_str() {
        out.push_str(&format!(
            "\n  no three-way merge was tried, so edits that would have merged are conflicts: {problem}"
        ));
    }
    out.push_str(&format!("\n{indexed}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_why_no_merge_was_tried_and_keeps_merged_files_out_of_kept() {
        let response = json!({
            "namespace": "mailer",
            "source": {"kind": "registry", "worker": "mailer", "tag": "latest"},
            "skills_written": ["a.md"],
            "kept_local": ["a.md", "b.md"],
            "merged": ["a.md"],
            "conflicts": [{"path": "b.md", "upstream_copy": "b.md.upstream"}],
            "base_problem": "the registry no longer serves mailer@1.0.0",
            "review": {},
        });
        let text = summary(&response, "index updated", Duration::from_secs(1));
        assert!(
            text.contains("\n  merged with your edits (1): a.md"),
            "{text}"
        );
        assert!(text.contains("(1): b.md\n"), "{text}");
        assert!(
            text.contains(
                "no three-way merge was tried, so edits that would have merged are conflicts: the registry no longer serves mailer@1.0.0"
            ),
            "{text}"
        );
        let without = summary(
            &json!({"namespace": "mailer", "source": {}, "review": {}}),
            "index updated",
            Duration::from_secs(1),
        );
        assert!(!without.contains("three-way"), "{without}");
    }
}
