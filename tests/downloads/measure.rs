//! The time to download and index a registry bundle of 1,000 markdown files from the loopback
//! registry: the request and the whole-bundle checks, then the landing (staged, fsynced,
//! committed, moved) with the reconcile of what it wrote, until `list` serves every file.
//! It prints the figures; for the numbers in the closing note run it in release:
//!
//! ```sh
//! cargo test --release --test downloads measure -- --nocapture
//! ```

use std::time::Instant;

use iii_directory::download::{self, Source};
use iii_directory::registry::Release;

use crate::{Setup, common};

const FILES: usize = 1_000;
const FOLDERS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_of_1000_files_lands_and_is_indexed() {
    let s = Setup::new();
    let files: Vec<(String, String)> = (0..FILES)
        .map(|i| {
            let path = format!("topic-{}/doc-{i}.md", i % FOLDERS);
            let body = format!(
                "---\ntitle: Doc {i}\ndescription: Document {i} of the bundle.\n---\n# Doc {i}\n\n{}",
                "A line of a realistic skill document, with some words in it.\n".repeat(20)
            );
            (path, body)
        })
        .collect();
    let served: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    s.server.bundle("big", &served);
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();

    let started = Instant::now();
    let source = Source::Registry {
        worker: "big".into(),
        release: Release::latest(),
    };
    let bundle = download::fetch(&s.directory.settings(), &s.registry, source, &|_| {})
        .await
        .expect("fetch");
    let fetched = started.elapsed();
    let directory = s.directory.clone();
    let landed = tokio::task::spawn_blocking(move || {
        download::land(&directory, bundle, download::OnEdited::Keep)
    })
    .await
    .expect("task")
    .expect("land");
    let total = started.elapsed();
    assert_eq!(landed.paths.len(), FILES);
    let listed = common::skill_ids(&s.directory)
        .into_iter()
        .filter(|id| id.starts_with("big/"))
        .count();
    assert_eq!(
        listed, FILES,
        "every file is served when the download returns"
    );
    println!(
        "download of a {FILES}-file registry bundle ({:.1} MB): request and checks {} ms, landing and index {} ms, total {} ms",
        bytes as f64 / 1e6,
        fetched.as_millis(),
        (total - fetched).as_millis(),
        total.as_millis()
    );
    // The bundles lock lists every file, and verify reads each one back against it.
    let paths = s.directory.config().paths.clone();
    let verify_started = Instant::now();
    let verified = download::status::answer(
        &paths,
        download::BundlesFunction::Verify,
        &serde_json::json!({}),
    )
    .expect("verify");
    let verify = verify_started.elapsed();
    assert_eq!(verified["ok"], true, "{verified}");
    assert_eq!(verified["checked"]["files"], FILES);
    let lock_bytes = std::fs::metadata(&paths.bundles_lock).expect("lock").len();
    println!(
        "bundles lock of the {FILES}-file bundle: {:.0} KB; verify of every file against it {} ms",
        lock_bytes as f64 / 1e3,
        verify.as_millis()
    );
}
