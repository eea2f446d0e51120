//! The Agent Skills catalog (`directory::skills::catalog`, issue 30) and the specification's
//! checks (`check --spec`), on a tree of `BENCH_SKILLS` Agent Skills: every skill a `SKILL.md`
//! folder (the generated trees hold only 1% of those, in `.agents/skills`), so a catalog's
//! filters admit nearly every row and the budget cuts it. The tree is written once under
//! `target/bench-trees/agent-skills-<size>` and only read; its index sits in the work folder.
//!
//! *Baseline*: what a harness without an index pays for the same block, as `skills-ref
//! to-prompt` does: walk the tree, read and parse every file (the rescan), then write the
//! entries of the `SKILL.md` rows. *Floor*: serializing the same answer, already a value.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use iii_directory::config::Config;
use iii_directory::testing::{Source, fresh_views};
use iii_directory::{Directory, ReadFunction, Roots};
use serde_json::{Value, json};

use crate::Settings;
use crate::measure::{manifest_dir, measure};
use crate::results::{Check, Cmp, Figure};

/// p50 of a catalog with the default budget at 50,000 skills (ms, issue 30).
const CATALOG_P50_MAX_MS: f64 = 5.0;
const TARGET_AT: usize = 50_000;
/// The default budget (`skills::catalog`'s `DEFAULT_MAX_BYTES`), which the baseline keeps to.
const DEFAULT_MAX_BYTES: usize = 16 * 1024;

const WORDS: [&str; 16] = [
    "deploy",
    "review",
    "email",
    "invoice",
    "schema",
    "alert",
    "test",
    "report",
    "migrate",
    "scan",
    "search",
    "render",
    "backup",
    "audit",
    "translate",
    "summarize",
];

/// The tree: `skills/<namespace>/<word>-<i>/SKILL.md`, forty skills a namespace, one in ten
/// not for a model (`disable-model-invocation`), and a body of a few lines.
fn tree(skills: usize) -> PathBuf {
    let base = manifest_dir().join(format!("target/bench-trees/agent-skills-{skills}"));
    let done = base.join(".complete");
    if done.exists() {
        return base;
    }
    let _ = std::fs::remove_dir_all(&base);
    let namespaces = (skills / 40).max(1);
    for i in 0..skills {
        let ns = format!("{}-{}", WORDS[(i / 40) % WORDS.len()], i % namespaces);
        let name = format!("{}-{i}", WORDS[i % WORDS.len()]);
        let dir = base.join("skills").join(ns).join(&name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let (a, b) = (WORDS[(i * 7) % WORDS.len()], WORDS[(i * 11) % WORDS.len()]);
        let manual = if i % 10 == 9 {
            "disable-model-invocation: true\n"
        } else {
            ""
        };
        let text = format!(
            "---\nname: {name}\ndescription: Use this to {a} and {b} a project's files, when the task asks to {a} something or to check what {b} would change.\n{manual}---\n# {name}\n\nSteps to {a}, then {b}.\n\n1. Read the inputs.\n2. Run the tool.\n3. Report.\n"
        );
        std::fs::write(dir.join("SKILL.md"), text).expect("write");
    }
    std::fs::write(&done, "").expect("marker");
    // Past the racy window, so a warm reconcile reads nothing.
    std::thread::sleep(Duration::from_millis(2100));
    base
}

/// The block a harness writes by rescanning: every file read and parsed, then the `SKILL.md`
/// rows' entries up to the budget.
fn rescan_block(roots: &Roots) -> String {
    let views = fresh_views(roots);
    let mut out = String::from("<available_skills>\n");
    for row in views.skills.values() {
        let Source::File { root, rel, .. } = &row.source else {
            continue;
        };
        if !rel.ends_with("/SKILL.md") || row.disable_model_invocation {
            continue;
        }
        let mut entry = String::new();
        let _ = write!(
            entry,
            "<skill>\n<name>\n{}\n</name>\n<description>\n{}\n</description>\n<location>\n{}\n</location>\n</skill>\n",
            row.name.as_deref().unwrap_or_default(),
            row.description,
            roots.file(*root, rel).display()
        );
        if out.len() + entry.len() + "</available_skills>".len() > DEFAULT_MAX_BYTES {
            break;
        }
        out.push_str(&entry);
    }
    out.push_str("</available_skills>");
    out
}

pub fn figures(settings: &Settings, work: &Path) -> Vec<Figure> {
    let source = tree(settings.skills);
    std::fs::create_dir_all(work).expect("work folder");
    let mut config = Config::for_root(&source);
    config.paths.index_path = work.join("agent-skills.redb");
    let directory = Directory::open(config).expect("open");
    directory.reconcile().expect("index the tree");
    let roots = directory.roots().clone();
    let runs = settings.iterations;
    let mut out = Vec::new();

    let read = |request: &Value| {
        directory
            .read_json(ReadFunction::SkillsCatalog, request, None)
            .expect("catalog")
    };
    let value = |request: &Value| {
        directory
            .read(ReadFunction::SkillsCatalog, request, None)
            .expect("catalog")
    };
    let floor = |answer: &Value| {
        measure(1, runs, || {
            black_box(serde_json::to_vec(answer).expect("serialize"));
        })
        .p50
    };
    let baseline = measure(0, settings.baseline_runs, || {
        black_box(rescan_block(&roots));
    });

    for (key, name, request) in [
        (
            "catalog_xml",
            "skills::catalog, xml, default budget",
            json!({}),
        ),
        (
            "catalog_json",
            "skills::catalog, json, default budget",
            json!({ "format": "json" }),
        ),
        (
            "catalog_large",
            "skills::catalog, xml, 1 MiB budget",
            json!({ "max_bytes": 1 << 20 }),
        ),
    ] {
        let answer = value(&request);
        let sample = measure(3, runs, || {
            black_box(read(&request));
        });
        let mut figure = Figure::timing(key, name, &sample)
            .baseline(
                "rescan, then the SKILL.md rows' block (16 KiB)",
                baseline.p50,
            )
            .floor("to_vec of the answer", floor(&answer))
            .note(format!(
                "{} entries, {} left out",
                answer["count"], answer["left_out"]
            ));
        if key == "catalog_xml" {
            figure = figure.check(
                30,
                TARGET_AT,
                Check {
                    what: "p50",
                    measured: sample.p50,
                    cmp: Cmp::AtMost,
                    limit: CATALOG_P50_MAX_MS,
                    unit: "ms",
                },
            );
        }
        out.push(figure);
    }

    // `check --spec` over every served SKILL.md, beside plain `check` on the same index.
    let check_runs = settings.cold_runs.max(1);
    let spec = measure(1, check_runs, || {
        black_box(directory.spec_check().expect("check --spec"));
    });
    let plain = measure(1, check_runs, || {
        black_box(directory.skipped().expect("check"));
    });
    let summary = directory.spec_check().expect("check --spec");
    out.push(
        Figure::timing("spec_check", "check --spec, every SKILL.md", &spec).note(format!(
            "{} SKILL.md checked, {} valid; plain check on the same index {:.1} ms",
            summary.checked, summary.valid, plain.p50
        )),
    );
    out
}
