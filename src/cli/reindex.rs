//! `reindex`: the index brought up to date with the folders (and the skill embeddings with
//! it), or, beside a running worker, every folder walked again by that worker.

use serde_json::json;

use super::error::CliError;
use super::model;
use super::output::emit;
use super::progress::ProgressLine;
use super::run::{open_fresh, warn_missing_folders};
use iii_directory::Directory;
use iii_directory::config::Config;

pub(crate) fn reindex(
    config: Config,
    from_scratch: bool,
    embed: bool,
    json: bool,
) -> Result<(), CliError> {
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
        let embeddings = model::embed_all(&directory, |done, total| {
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
            "indexed {} files in {} ms: {} read, {} parsed, {} removed, {} skipped (not served, or served with a problem; see `iii-directory check`); revision {}{}",
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
pub(crate) fn rescan_by_worker(config: Config, json: bool) -> Result<(), CliError> {
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
            "the running worker walked every folder again: {} files, {} skipped (not \
             served, or served with a problem; see `iii-directory check`); revision {}",
            status["files"], status["skipped_total"], status["revision"]
        ))?;
        emit(&format!("index: {}", index_path.display()))?;
    }
    Ok(())
}
