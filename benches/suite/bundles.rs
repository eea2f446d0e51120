//! Bundle updates (issue 29): `plan-update` and `apply` of a 1,000-file registry bundle with
//! 10 files edited locally (each new version changes 20 files, 5 of them edited ones, which
//! merge), the apply timed until it returns with the index updated; and `check-updates` over
//! 50 locked bundles with the answers cached (`registry_cache_ttl_ms`). Against the loopback
//! registry stand-in, so the figures are the worker's own work plus loopback HTTP.
//!
//! Runs alone: `cargo bench --bench suite -- bundles` (target/bench-results/bundles.json). The
//! bundle does not depend on the tree size.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iii_directory::Directory;
use iii_directory::download::{self, DownloadFunction, plan, updates};
use iii_directory::registry::{Endpoint, Registry};
use serde_json::{Value, json};
use test_support::common::Tree;
use test_support::loopback::registry::FakeRegistry;

use crate::Settings;
use crate::measure::{Sample, measure};
use crate::reads::TARGET_SKILLS;
use crate::results::Figure;

const FILES: usize = 1_000;
const EDITED: usize = 10;
const CHANGED: usize = 20;
const BUNDLES: usize = 50;
const PLAN_MAX_MS: f64 = 200.0;
const APPLY_MAX_MS: f64 = 1_000.0;

fn doc(i: usize, version: usize) -> String {
    let mut text = format!(
        "---\ntitle: Doc {i}\ndescription: Document {i} of the bundle.\n---\n# Doc {i}\n\nversion line {}\n",
        if i < CHANGED { version } else { 1 }
    );
    text.push_str(&"A line of a realistic skill document, with some words in it.\n".repeat(20));
    text
}

/// The bundle at `version`: files 0..CHANGED carry the version on their first body line.
fn files(version: usize) -> Vec<(String, String)> {
    (0..FILES)
        .map(|i| (format!("topic-{}/doc-{i}.md", i % 50), doc(i, version)))
        .collect()
}

struct Bench {
    tree: Tree,
    directory: Arc<Directory>,
    registry: Registry,
    server: FakeRegistry,
    runtime: tokio::runtime::Runtime,
}

fn setup() -> Bench {
    let server = FakeRegistry::start();
    let tree = Tree::new();
    tree.mkdir("skills/iii").mkdir("agents");
    let mut config = tree.config();
    config.settings.registry_url = format!("{}/", server.url());
    config.settings.registry_cache_ttl_ms = 600_000;
    let directory = Arc::new(tree.open_with(config));
    let live = directory.clone();
    let registry = Registry::new(move || Endpoint::from_settings(&live.settings()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    Bench {
        tree,
        directory,
        registry,
        server,
        runtime,
    }
}

pub fn figures(settings: &Settings) -> Vec<Figure> {
    let runs = settings.iterations.clamp(3, 10);
    let b = setup();
    b.server.publish("big", "1", &files(1));
    b.runtime
        .block_on(download::run(
            &b.directory,
            &b.registry,
            DownloadFunction::FromRegistry,
            &json!({"worker": "big"}),
            &|_| {},
        ))
        .expect("first download");
    // Ten local edits on the last line, five of them in files each version changes.
    for i in (CHANGED - 5..CHANGED).chain(500..500 + EDITED - 5) {
        let rel = format!("skills/big/topic-{}/doc-{i}.md", i % 50);
        let mut text = std::fs::read_to_string(b.tree.path(&rel)).expect("read");
        text.push_str("A local note.\n");
        b.tree.write(&rel, &text);
    }
    let (mut plans, mut applies) = (Vec::new(), Vec::new());
    for version in 2..2 + runs {
        b.server
            .publish("big", &version.to_string(), &files(version));
        let started = Instant::now();
        let planned = b
            .runtime
            .block_on(plan::plan_update(
                &b.directory,
                &b.registry,
                &json!({"namespace": "big"}),
            ))
            .expect("plan");
        plans.push(started.elapsed());
        assert_eq!(
            planned["summary"]["merges"],
            5,
            "{} {:?}",
            planned["summary"],
            planned["files"]
                .as_array()
                .map(|f| f.iter().take(8).collect::<Vec<_>>())
        );
        let started = Instant::now();
        let applied = b
            .runtime
            .block_on(plan::apply(
                &b.directory,
                &b.registry,
                &json!({"plan_id": planned["plan_id"]}),
            ))
            .expect("apply");
        applies.push(started.elapsed());
        assert_eq!(applied["merged"].as_array().map(Vec::len), Some(5));
    }
    let plan = Sample::of(plans);
    let apply = Sample::of(applies);

    // Fifty locked bundles, then check-updates with every answer cached.
    let c = setup();
    for n in 0..BUNDLES {
        let name = format!("w{n}");
        let files: Vec<(String, String)> = vec![("SKILL.md".into(), format!("# Worker {n}\n"))];
        c.server.publish(&name, "1.0.0", &files);
        c.runtime
            .block_on(download::run(
                &c.directory,
                &c.registry,
                DownloadFunction::FromRegistry,
                &json!({"worker": name}),
                &|_| {},
            ))
            .expect("download");
    }
    let lock = c.directory.config().paths.bundles_lock.clone();
    let check = || -> Value {
        c.runtime
            .block_on(updates::check_updates(
                &c.directory.settings(),
                &lock,
                &c.registry,
                &json!({}),
            ))
            .expect("check-updates")
    };
    let cold = Instant::now();
    let first = check();
    let cold = cold.elapsed();
    let states: BTreeMap<String, usize> = first["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .fold(BTreeMap::new(), |mut m, b| {
            *m.entry(b["state"].as_str().unwrap_or("").to_string())
                .or_default() += 1;
            m
        });
    assert_eq!(states.get("current"), Some(&BUNDLES), "{states:?}");
    let warm = measure(2, runs.max(20), || {
        std::hint::black_box(check());
    });
    vec![
        Figure::timing(
            "bundle_plan",
            "bundles plan-update, 1,000 files, 10 local edits, 20 changed upstream",
            &plan,
        )
        .target(29, "≤200 ms", TARGET_SKILLS, plan.p50 <= PLAN_MAX_MS)
        .note(
            "loopback registry fetch, sha256 of every file, the base kept from the fetch that landed it, 5 merges",
        ),
        Figure::timing(
            "bundle_apply",
            "bundles apply of that plan, until indexed",
            &apply,
        )
        .target(29, "≤1 s", TARGET_SKILLS, apply.p50 <= APPLY_MAX_MS)
        .note(
            "staleness check, staged landing of 20 files with the record and the lock, reconcile",
        ),
        Figure::timing(
            "check_updates_50",
            "bundles check-updates, 50 bundles, warm cache",
            &warm,
        )
        .note(format!(
            "cold (50 loopback registry requests in parallel): {:.1} ms",
            ms(cold)
        )),
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
