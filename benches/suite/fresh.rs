//! Fresh reads (issue 26): what catching up with the disk costs a read. The same reads with
//! the watcher's catch-up and without it (the watcher stopped), in alternating blocks so that
//! both see the same load; a `get` right after one file changed on disk; and a `get` right
//! after a burst of 1,000 changed files, beside the scoped reconcile of the same files; a
//! `get` right after one change in a tree that is a single folder of as many skills; and one
//! through a symbolic link right after a change under the folder it leads to.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iii_directory::{Directory, ReadFunction, WatchOptions, Watcher};
use serde_json::{Value, json};

use crate::Settings;
use crate::measure::Sample;
use crate::results::{Check, Cmp, Figure};

/// The targets: an idle read within 10% of today's, a read after one change at most
/// 2 ms over the idle read.
const IDLE_MAX_OVER: f64 = 1.10;
const ONE_CHANGE_MAX_EXTRA_MS: f64 = 2.0;
const BURST_FILES: usize = 1_000;
/// Blocks of alternating runs (with and without the catch-up).
const BLOCKS: usize = 6;
const TARGET_SIZES: [usize; 2] = [10_000, 50_000];

fn get(directory: &Directory, id: &str) -> Value {
    directory
        .read(ReadFunction::SkillsGet, &json!({ "id": id }), None)
        .unwrap_or_else(|e| panic!("get {id}: {e}"))
}

/// Skill ids with their files, spread over the tree.
fn targets(directory: &Directory, count: usize) -> Vec<(String, PathBuf)> {
    let list = directory
        .read(ReadFunction::SkillsList, &json!({}), None)
        .expect("list");
    let rows: Vec<&Value> = list["skills"]
        .as_array()
        .expect("rows")
        .iter()
        // Files of the tree (the bundled skills have no file).
        .filter(|r| {
            r["id"]
                .as_str()
                .is_some_and(|id| id.contains('/') && !id.starts_with("iii-directory"))
        })
        .collect();
    let step = (rows.len() / count.max(1)).max(1);
    rows.iter()
        .step_by(step)
        .take(count)
        .map(|row| {
            let id = row["id"].as_str().expect("id").to_string();
            let path = get(directory, &id)["path"].as_str().expect("path").into();
            (id, path)
        })
        .collect()
}

/// Replaces a file whole, as an editor's save does.
fn replace(path: &PathBuf, text: &str) {
    let tmp = path.with_extension("bench-part");
    std::fs::write(&tmp, text).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
    std::fs::rename(&tmp, path).expect("rename");
}

/// Times `read` in blocks with a watcher running and with none, alternately.
fn with_and_without(
    settings: &Settings,
    directory: &Arc<Directory>,
    read: &dyn Fn(),
) -> (Sample, Sample) {
    let per_block = (settings.iterations / BLOCKS).max(1);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..BLOCKS {
        let watcher = Watcher::start(directory.clone(), WatchOptions::default());
        for _ in 0..per_block / 10 + 1 {
            read();
        }
        for _ in 0..per_block {
            let start = Instant::now();
            read();
            with.push(start.elapsed());
        }
        watcher.stop();
        for _ in 0..per_block / 10 + 1 {
            read();
        }
        for _ in 0..per_block {
            let start = Instant::now();
            read();
            without.push(start.elapsed());
        }
    }
    (Sample::of(with), Sample::of(without))
}

pub fn figures(settings: &Settings, directory: Arc<Directory>) -> Vec<Figure> {
    let mut out = Vec::new();
    let probes = targets(&directory, BURST_FILES);
    let (id, _) = probes[0].clone();
    let namespace = id.split('/').next().expect("namespace").to_string();
    let at = |skills: usize| TARGET_SIZES.contains(&skills).then_some(skills);

    let read_get = || {
        black_box(get(&directory, &id));
    };
    let (get_with, get_without) = with_and_without(settings, &directory, &read_get);
    let prefix = json!({ "prefix": format!("{namespace}/") });
    let read_prefix = || {
        black_box(
            directory
                .read_json(ReadFunction::SkillsList, &prefix, None)
                .expect("list"),
        );
    };
    let (prefix_with, prefix_without) = with_and_without(settings, &directory, &read_prefix);
    for (key, name, with, without) in [
        (
            "fresh_get_idle",
            "skills::get, nothing changed, with catch-up",
            &get_with,
            &get_without,
        ),
        (
            "fresh_prefix_idle",
            "skills::list {prefix}, nothing changed, with catch-up",
            &prefix_with,
            &prefix_without,
        ),
    ] {
        let mut figure = Figure::timing(key, name, with)
            .baseline("the same read without a watcher", without.p50)
            .note("alternating blocks with the watcher running and stopped");
        if let Some(skills) = at(settings.skills) {
            figure = figure.check(
                26,
                skills,
                Check {
                    what: "p50 over the same read without catch-up",
                    measured: with.p50 / without.p50,
                    cmp: Cmp::AtMost,
                    limit: IDLE_MAX_OVER,
                    unit: "×",
                },
            );
        }
        out.push(figure);
    }

    // One file changed on disk, then at once a get of it.
    let watcher = Watcher::start(directory.clone(), WatchOptions::default());
    let runs = settings.iterations.clamp(5, 200);
    let mut after_one = Vec::with_capacity(runs);
    let run = std::process::id();
    for i in 0..runs {
        let (id, path) = &probes[i % probes.len()];
        let title = format!("fresh probe {run} {i}");
        replace(path, &format!("# {title}\n\nChanged on disk.\n"));
        let start = Instant::now();
        let got = get(&directory, id);
        after_one.push(start.elapsed());
        assert_eq!(got["title"], title.as_str(), "a stale read");
    }
    let after_one = Sample::of(after_one);
    let mut figure = Figure::timing(
        "fresh_get_one_change",
        "skills::get right after its file changed on disk",
        &after_one,
    )
    .baseline("the same get, nothing changed", get_with.p50)
    .note("includes the scoped reconcile of the file");
    if let Some(skills) = at(settings.skills) {
        figure = figure.check(
            26,
            skills,
            Check {
                what: "p50 over the idle get",
                measured: after_one.p50 - get_with.p50,
                cmp: Cmp::AtMost,
                limit: ONE_CHANGE_MAX_EXTRA_MS,
                unit: " ms",
            },
        );
    }
    out.push(figure);

    // A burst of files changed on disk, then at once one get; beside the scoped reconcile of
    // the same number of files (watcher stopped, reconciled by hand).
    let burst_runs = 3;
    let burst = probes.len();
    let mut after_burst = Vec::new();
    for round in 0..burst_runs {
        for (i, (_, path)) in probes.iter().enumerate() {
            replace(path, &format!("# burst {run} {round} {i}\n\nBurst.\n"));
        }
        let (id, _) = &probes[burst / 2];
        let start = Instant::now();
        let got = get(&directory, id);
        after_burst.push(start.elapsed());
        assert_eq!(
            got["title"],
            format!("burst {run} {round} {}", burst / 2),
            "a stale read after a burst"
        );
        // Let the burst end before the next.
        std::thread::sleep(Duration::from_millis(600));
    }
    watcher.stop();
    let mut scoped = Vec::new();
    for round in 0..burst_runs {
        for (i, (_, path)) in probes.iter().enumerate() {
            replace(path, &format!("# scoped {run} {round} {i}\n\nScoped.\n"));
        }
        let paths: Vec<PathBuf> = probes.iter().map(|(_, p)| p.clone()).collect();
        let start = Instant::now();
        directory.reconcile_paths(paths).expect("scoped reconcile");
        scoped.push(start.elapsed());
    }
    let after_burst = Sample::of(after_burst);
    let scoped = Sample::of(scoped);
    out.push(
        Figure::timing(
            "fresh_get_after_burst",
            &format!("skills::get right after {burst} files changed on disk"),
            &after_burst,
        )
        .floor(&format!("scoped reconcile of {burst} files"), scoped.p50)
        .note("the read catches up on the whole burst first"),
    );
    // Leave the tree as the index holds it.
    directory.reconcile().expect("reconcile");
    out.push(one_change_in_one_folder(settings));
    out.push(one_change_below_a_link(settings));
    out
}

/// A `get` right after one file changed, in a tree whose skills are all in one folder: the
/// namespace is the whole tree, and only the changed skill's rows may be recomputed.
fn one_change_in_one_folder(settings: &Settings) -> Figure {
    let work = tempfile::tempdir().expect("temp dir");
    let folder = work.path().join("skills").join("flat");
    write_skills(&folder, 0..settings.skills);
    let directory = open_indexed(work.path());
    let runs = settings.iterations.clamp(5, 200);
    let step = (settings.skills / runs).max(1);
    let probes: Vec<(PathBuf, String)> = (0..runs)
        .map(|i| {
            let n = (i * step) % settings.skills;
            (folder.join(format!("s{n:06}.md")), format!("flat/s{n:06}"))
        })
        .collect();
    let (idle, after_one) = idle_and_after_one_change(&directory, &probes);
    Figure::timing(
        "fresh_get_one_change_one_folder",
        &format!(
            "skills::get right after its file changed, {} skills in one folder",
            settings.skills
        ),
        &after_one,
    )
    .baseline("the same get, nothing changed", idle.p50)
    .note("the namespace is the whole tree: only the changed skill's rows are recomputed")
}

/// A `get`, by a path through a symbolic link, right after the file changed under the folder
/// the link leads to: `skills/alias -> team`, in a tree of as many skills in folders of 100. The
/// watcher hears the change under `team` only and names the paths through the link too; they
/// are walked by themselves, not as the whole tree.
fn one_change_below_a_link(settings: &Settings) -> Figure {
    const PER_FOLDER: usize = 100;
    let work = tempfile::tempdir().expect("temp dir");
    let skills = work.path().join("skills");
    write_skills(&skills.join("team"), 0..PER_FOLDER);
    for (k, first) in (PER_FOLDER..settings.skills.max(PER_FOLDER))
        .step_by(PER_FOLDER)
        .enumerate()
    {
        write_skills(&skills.join(format!("ns{k:04}")), first..first + PER_FOLDER);
    }
    std::os::unix::fs::symlink("team", skills.join("alias")).expect("link");
    let directory = open_indexed(work.path());
    let runs = settings.iterations.clamp(5, 200);
    let probes: Vec<(PathBuf, String)> = (0..runs)
        .map(|i| {
            let n = i % PER_FOLDER;
            let file = skills.join("team").join(format!("s{n:06}.md"));
            (file, format!("alias/s{n:06}"))
        })
        .collect();
    let (idle, after_one) = idle_and_after_one_change(&directory, &probes);
    Figure::timing(
        "fresh_get_one_change_below_a_link",
        &format!(
            "skills::get through a link right after its file changed, {} skills",
            settings.skills
        ),
        &after_one,
    )
    .baseline("the same get, nothing changed", idle.p50)
    .note("the change is heard under the link's target; its paths through the link are walked")
}

/// Writes a skill `s<n>.md` for each `n` into `folder`.
fn write_skills(folder: &std::path::Path, numbers: std::ops::Range<usize>) {
    std::fs::create_dir_all(folder).expect("folder");
    for i in numbers {
        let text = format!("---\ndescription: Skill {i}.\n---\n# Skill {i}\n\nBody {i}.\n");
        std::fs::write(folder.join(format!("s{i:06}.md")), text).expect("write");
    }
}

/// A directory over the tree at `root` (its `skills` folder), indexed.
fn open_indexed(root: &std::path::Path) -> Arc<Directory> {
    let mut config = iii_directory::config::Config::for_root(root);
    config.paths.index_path = root.join("bench.redb");
    let directory = Arc::new(Directory::open(config).expect("open"));
    directory.reconcile().expect("index");
    directory
}

/// For each `(file, id)` probe with a watcher running: the `get` of the id with nothing
/// changed, then the file replaced and at once the `get` again, which must see the change.
fn idle_and_after_one_change(
    directory: &Arc<Directory>,
    probes: &[(PathBuf, String)],
) -> (Sample, Sample) {
    let watcher = Watcher::start(directory.clone(), WatchOptions::default());
    let (mut idle, mut after_one) = (Vec::new(), Vec::new());
    for (i, (file, id)) in probes.iter().enumerate() {
        let start = Instant::now();
        black_box(get(directory, id));
        idle.push(start.elapsed());
        let title = format!("probe {i}");
        replace(file, &format!("# {title}\n\nChanged.\n"));
        let start = Instant::now();
        let got = get(directory, id);
        after_one.push(start.elapsed());
        assert_eq!(got["title"], title.as_str(), "a stale read of {id}");
    }
    watcher.stop();
    (Sample::of(idle), Sample::of(after_one))
}
