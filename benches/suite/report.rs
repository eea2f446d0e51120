//! `report`: BENCHMARKS.md (the machine, the command, the targets, one table per size) and
//! `bench/plot.svg` (each timed figure beside its baseline and floor, per size, on log scales)
//! from the results the runs saved.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::Settings;
use crate::measure::load_average;
use crate::results::{COLUMNS, Figure, Run, cells, show};

/// The figures the plot shows, with a short title each.
const PLOTTED: [(&str, &str); 8] = [
    ("list_all", "skills::list, all rows"),
    ("get", "skills::get"),
    ("index", "skills::index"),
    ("agent_get", "agents::get (extends)"),
    ("cold_reindex", "cold reindex"),
    ("warm_boot", "warm boot, nothing changed"),
    ("boot_1pct", "warm boot, 1% changed"),
    ("visible", "change to visible"),
];

/// Bar colours: the index, the rescan baseline, the floor.
const COLOURS: [(&str, &str); 3] = [
    ("iii-directory (indexed)", "#2b6cb0"),
    ("baseline: rescan on every read", "#c53030"),
    ("floor", "#718096"),
];

pub fn write(settings: &Settings) {
    let runs = load_runs(&settings.results);
    assert!(
        !runs.is_empty(),
        "no results in {}: run the suite first",
        settings.results.display()
    );
    let plot = settings.out.join("bench/plot.svg");
    std::fs::create_dir_all(plot.parent().expect("folder")).expect("create bench/");
    std::fs::write(&plot, svg(&runs)).expect("write the plot");
    let markdown = settings.out.join("BENCHMARKS.md");
    std::fs::write(&markdown, benchmarks_md(&runs)).expect("write BENCHMARKS.md");
    for run in &runs {
        crate::results::print(run);
    }
    println!("\nwrote {} and {}", markdown.display(), plot.display());
}

/// The saved runs: the trees of the sizes in `BENCH_SIZES` (all saved sizes when unset),
/// smallest first, then the parts that need no tree.
fn load_runs(folder: &Path) -> Vec<Run> {
    let sizes: Option<Vec<usize>> = std::env::var("BENCH_SIZES").ok().map(|s| {
        s.split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect()
    });
    let mut runs: Vec<Run> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
        .filter(|run: &Run| {
            run.alone.is_some() || sizes.as_ref().is_none_or(|s| s.contains(&run.skills))
        })
        .collect();
    runs.sort_by_key(|r| (r.alone.clone(), r.skills));
    runs
}

fn shell(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The machine, in one list.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim())
        })
        .unwrap_or("unknown")
        .to_string();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or("unknown".into(), |kb| {
            format!("{:.1} GiB", kb / 1024.0 / 1024.0)
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_string())
        .unwrap_or_default();
    format!(
        "- CPU: {model}; `nproc` = {}\n- memory: {memory}\n- kernel: Linux {kernel}\n- {}\n",
        shell("nproc", &[]),
        shell("rustc", &["--version"])
    )
}

fn separated(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The commands that wrote the saved runs, each in backticks.
fn command_line(runs: &[Run]) -> String {
    let sizes: Vec<String> = runs
        .iter()
        .filter(|r| r.alone.is_none() && r.only.is_empty())
        .map(|r| r.skills.to_string())
        .collect();
    let trees = if sizes.is_empty() {
        None
    } else if sizes == ["1000", "10000", "50000"] {
        Some("`bench/run`".to_string())
    } else {
        Some(format!("`BENCH_SIZES=\"{}\" bench/run`", sizes.join(" ")))
    };
    let some_sections = runs.iter().filter(|r| !r.only.is_empty()).map(|r| {
        format!(
            "`BENCH_SKILLS={} BENCH_SECTIONS=\"{}\" cargo bench --bench suite`",
            r.skills,
            r.only.join(" ")
        )
    });
    let parts = runs
        .iter()
        .filter_map(|r| r.alone.as_ref())
        .map(|name| format!("`cargo bench --bench suite -- {name}`"));
    let commands: Vec<String> = trees
        .into_iter()
        .chain(some_sections)
        .chain(parts)
        .collect();
    in_words(&commands)
}

/// `a`, `a and b`, `a, b and c`.
fn in_words(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn benchmarks_md(runs: &[Run]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Written by {} on {} (the suite is `benches/suite/`; see README, \"Benchmarks\"). \
         Every figure stands beside the rescan-on-every-read baseline (walk, read and parse every \
         file with the project's parser, then answer) and the physical floor (walk and stat the \
         tree; serialize the same answer to JSON; …), as ratios. Timings are medians (p50) unless \
         marked; p95/p99 where a figure is a distribution.\n",
        command_line(runs),
        iii_directory::testing::Stamp::now().rfc3339()
    );
    let _ = writeln!(md, "## Machine\n\n{}", machine());
    let _ = writeln!(
        md,
        "- load average (1, 5, 15 min): {} at the start of the first size, {} at the end of the \
         report. The machine is shared with other builds: timings are noisy, compare ratios \
         taken in the same run rather than absolute times across runs.\n",
        runs.first().map_or("?".into(), |r| r.load_start.clone()),
        load_average()
    );

    let mut issues: Vec<u32> = runs
        .iter()
        .flat_map(|run| run.figures.iter().flat_map(|f| f.targets.iter()))
        .map(|t| t.issue)
        .collect();
    issues.sort_unstable();
    issues.dedup();
    let issues: Vec<String> = issues.iter().map(u32::to_string).collect();
    let noun = if issues.len() == 1 { "issue" } else { "issues" };
    let _ = writeln!(md, "## Targets ({noun} {})\n", in_words(&issues));
    let _ = writeln!(
        md,
        "| issue | figure | target | at | result |\n| --- | --- | --- | --- | --- |"
    );
    let mut any = false;
    let mut judged: Vec<(u32, &Run, &Figure, &crate::results::Target)> = runs
        .iter()
        .flat_map(|run| {
            run.figures.iter().flat_map(move |f| {
                f.targets
                    .iter()
                    .filter(|t| run.judges(t))
                    .map(move |t| (t.issue, run, f, t))
            })
        })
        .collect();
    judged.sort_by_key(|(issue, run, _, _)| (*issue, run.alone.is_some(), run.skills));
    for (issue, run, f, t) in judged {
        any = true;
        let at = match &run.alone {
            Some(name) => crate::part_title(name).to_string(),
            None => format!("{} skills", separated(run.skills)),
        };
        let _ = writeln!(
            md,
            "| {issue} | {} | {} | {at} | {} {} |",
            f.name,
            t.text,
            if t.met { "✅ met" } else { "❌ missed" },
            headline(f)
        );
    }
    if !any {
        let _ = writeln!(
            md,
            "| | | the targets are stated for 10,000 and 50,000 skills; neither size was run | | |"
        );
    }
    let _ = writeln!(
        md,
        "\n## Plot\n\n![Each timed figure beside its baseline and floor, per tree size (log scale)](bench/plot.svg)\n"
    );

    for run in runs {
        heading(&mut md, run);
        let (mixed, steady): (Vec<&Figure>, Vec<&Figure>) = run
            .figures
            .iter()
            .partition(|f| f.key.starts_with("mixed_"));
        let _ = writeln!(md, "| {} |", COLUMNS.join(" | "));
        let _ = writeln!(md, "|{}", " --- |".repeat(COLUMNS.len()));
        for f in &steady {
            let row = cells(f, run);
            let _ = writeln!(md, "| {} |", row.map(|c| c.replace('|', "\\|")).join(" | "));
        }
        if !mixed.is_empty() {
            mixed_table(&mut md, run, &mixed);
        }
        let notes: Vec<&Figure> = run.figures.iter().filter(|f| !f.note.is_empty()).collect();
        if !notes.is_empty() {
            let _ = writeln!(md);
            for f in notes {
                let _ = writeln!(md, "- {}: {}", f.name, f.note);
            }
        }
        let _ = writeln!(md);
    }
    if let Some(reach) = exact_scan_reach(runs) {
        md.push_str(&reach);
    }
    md.push_str(WHAT_IS_MEASURED);
    md
}

/// How far an exact scan of the skill vectors keeps `skills::search` hybrid within its p50
/// target (issue 28 asks where an approximate index would start to pay): the growth of that
/// p50 between the two largest tree sizes measured, and where the line through them crosses
/// the target; the passage scan's share of that growth (the embed part), the part an
/// approximate index would win back; and the query's embedding, which no index shortens.
/// `None` without two sizes of hybrid rows.
fn exact_scan_reach(runs: &[Run]) -> Option<String> {
    let figure = |run: &Run, key: &str| run.figures.iter().find(|f| f.key == key).cloned();
    let mut hybrid: Vec<(usize, Figure)> = runs
        .iter()
        .filter(|r| r.alone.is_none())
        .filter_map(|r| Some((r.skills, figure(r, "skill_search_hybrid")?)))
        .collect();
    hybrid.sort_by_key(|(skills, _)| *skills);
    let [.., (small, a), (large, b)] = hybrid.as_slice() else {
        return None;
    };
    let per_10k = (b.value - a.value) / (*large - *small) as f64 * 10_000.0;
    let mut md = format!(
        "## How far the exact vector scan goes (issue 28)\n\n`skills::search` hybrid p50 went \
         from {} at {} skills to {} at {} skills: {} more per 10,000 skills.",
        show(a.value, "ms"),
        separated(*small),
        show(b.value, "ms"),
        separated(*large),
        show(per_10k, "ms")
    );
    let target = crate::hybrid::P50_MAX_MS;
    if per_10k > 0.0 && a.value < target {
        // Where the line through the two sizes crosses the target (beyond the larger size, or
        // between the two when the larger is over it already).
        let reach = *large as f64 + (target - b.value) / per_10k * 10_000.0;
        let _ = write!(
            md,
            " On that line the search stays within its {} target up to about {} skills on \
             this machine.",
            show(target, "ms"),
            separated((reach / 1_000.0).round() as usize * 1_000)
        );
    }
    let scan = runs
        .iter()
        .filter(|r| r.alone.as_deref() == Some("embed"))
        .find_map(|r| {
            Some((
                figure(r, "passage_scan_50k")?,
                figure(r, "passage_scan_100k")?,
            ))
        });
    if let (Some((scan_50k, scan_100k)), true) = (scan, per_10k > 0.0) {
        let scan_per_10k = (scan_100k.value - scan_50k.value) / 5.0;
        let _ = write!(
            md,
            " The passage scan alone (the Sentence embeddings part) grows by {} per 10,000 \
             skills, from {} at 50,000 to {} at 100,000: that share of the growth, {:.0}%, is \
             what an approximate index over the int8 vectors (cells of nearby vectors, a few \
             probed per query) would win back; the rest (the lexical lane over more skills, the \
             fusion and the answer) it would not.",
            show(scan_per_10k, "ms"),
            show(scan_50k.value, "ms"),
            show(scan_100k.value, "ms"),
            (scan_per_10k / per_10k * 100.0).min(100.0)
        );
    }
    if let Some(embedding) = &b.floor {
        let _ = write!(
            md,
            " The query's embedding ({} at {} skills) is the same at any size, and no index \
             shortens it.",
            show(embedding.value, "ms"),
            separated(*large)
        );
    }
    md.push_str("\n\n");
    Some(md)
}

/// A run's heading: the tree it measured (or the part it is), how long it took, under what
/// load, and which sections were measured again later.
fn heading(md: &mut String, run: &Run) {
    let took = format!(
        "run took {:.0} s; load average {} → {}",
        run.seconds, run.load_start, run.load_end
    );
    match &run.alone {
        Some(name) => {
            let _ = writeln!(
                md,
                "## {}\n\n`cargo bench --bench suite -- {name}`; {took}.\n",
                crate::part_title(name)
            );
        }
        None => {
            let only = if run.only.is_empty() {
                String::new()
            } else {
                let noun = if run.only.len() == 1 {
                    "section"
                } else {
                    "sections"
                };
                format!(
                    "Only the {noun} {} were measured at this size. ",
                    in_words(&run.only)
                )
            };
            let _ = writeln!(
                md,
                "## {} skills\n\n{only}{} markdown files, {} of markdown; {took}.\n",
                separated(run.skills),
                separated(run.files),
                show(run.content_bytes as f64, "bytes"),
            );
        }
    }
    for rerun in &run.reruns {
        let noun = if rerun.sections.len() == 1 {
            "section"
        } else {
            "sections"
        };
        let _ = writeln!(
            md,
            "The figures of the {noun} {} are from a later run (`BENCH_SECTIONS`) at {}, which \
             took {:.0} s from a load average of {}.\n",
            in_words(&rerun.sections),
            rerun.at,
            rerun.seconds,
            rerun.load_start
        );
    }
}

/// The mixed-load figures of one size (issue 31): each call's p50 and p99 in the mixed rounds
/// beside its steady-state twin, in the library and over the engine socket.
fn mixed_table(md: &mut String, run: &Run, mixed: &[&Figure]) {
    let _ = writeln!(
        md,
        "\n### Mixed load (issue 31)\n\nRounds of \"update one skill, then one each of get hit, get \
         miss, `index`, prefix `list`, `agents::get`\" (and rounds of a whole `list`, then a `get`), \
         each call beside its steady-state twin: the same call repeated alone in the same run.\n"
    );
    let _ = writeln!(
        md,
        "| call | where | mixed p50 / p99 | steady p50 / p99 | mixed / steady (p50) | target |\n\
         | --- | --- | --- | --- | --- | --- |"
    );
    for f in mixed {
        let place = if f.key.starts_with("mixed_wire") || f.key.starts_with("mixed_floor") {
            "engine socket"
        } else if f.key.starts_with("mixed_lib") {
            "library"
        } else if f.key.starts_with("mixed_real") {
            "real iii engine"
        } else {
            "worker"
        };
        let name = f
            .name
            .trim_end_matches(", library")
            .trim_end_matches(", engine socket")
            .trim_end_matches(", real iii engine");
        let tail =
            |p99: Option<f64>| p99.map_or(String::new(), |p| format!(" / {}", show(p, &f.unit)));
        let measured = format!("{}{}", show(f.value, &f.unit), tail(f.p99));
        let steady = f.floor.as_ref().map_or(String::new(), |r| {
            format!("{}{}", show(r.value, &f.unit), tail(r.p99))
        });
        let over = f.over_floor().map_or(String::new(), crate::results::ratio);
        let targets: Vec<String> = f
            .targets
            .iter()
            .map(|t| {
                if run.judges(t) {
                    format!("{} {}", t.text, if t.met { "✅" } else { "❌" })
                } else {
                    format!("({} at {})", t.text, separated(t.at_skills))
                }
            })
            .collect();
        let _ = writeln!(
            md,
            "| {name} | {place} | {measured} | {steady} | {over} | {} |",
            targets.join("; ")
        );
    }
}

/// A figure with its ratios, for the targets table.
fn headline(f: &Figure) -> String {
    let mut parts = vec![show(f.value, &f.unit)];
    if let (Some(p95), Some(p99), true) = (f.p95, f.p99, f.key == "visible") {
        parts.push(format!("p95 {}", show(p95, &f.unit)));
        parts.push(format!("p99 {}", show(p99, &f.unit)));
    }
    if let Some(s) = f.speedup() {
        parts.push(format!("{} than the baseline", crate::results::faster(s)));
    }
    if let (Some(r), Some(floor)) = (f.over_floor(), f.floor.as_ref()) {
        parts.push(format!("{} {}", crate::results::ratio(r), floor.name));
    }
    if matches!(f.key.as_str(), "cold_reindex" | "update" | "worker_rss") {
        parts.push(f.note.clone());
    }
    parts.join(", ")
}

const WHAT_IS_MEASURED: &str = "## What is measured

- **Read functions** (`skills::list` all rows, with `prefix`, with `search`; `skills::get`;
  `skills::index`; `agents::get` of a profile with an `extends` chain): `Directory::read_json`,
  the answer as JSON text, on an up-to-date index. *Baseline*: a fresh rescan
  (`fresh_views`: walk, read and parse every file) and then the answer, on every call. *Floor*:
  `serde_json::to_vec` of the same answer already in memory. `list as a Value` is
  `Directory::read`: the cached rows serialized into a `serde_json::Value`, which is what the
  worker hands the SDK for a whole list.
- **Cold reindex**: delete the index, open, reconcile; CPU time over wall time shows how many
  cores worked. *Baseline*: the rescan. *Floor*: walk and read every byte (in parallel). Also
  the real binary, `iii-directory reindex --from-scratch --no-embed`, with its peak RSS.
- **Warm boot**: open an existing index and reconcile with nothing changed (a restart), and
  reconcile alone on an open index; with 1% of the skill files rewritten while nothing ran.
  *Floor*: walk and stat the tree (what any reconcile must pay).
- **Change to visible**: the watcher running, a file rewritten on disk, `skills::get` polled every
  millisecond until the new title shows. *Baseline*: a rescan-on-read worker shows it on the next
  read, one rescan. *Floor*: the scoped reconcile of that one file (the watcher also waits for
  its 50 ms quiet period). `skills::update` through the library beside an fsync'd atomic write.
- **Worker process**: the real `iii-directory` binary against a loopback fake engine, booted on
  an existing index: its peak RSS (`VmHWM`) over rounds of full `skills::list`, `skills::get`
  misses and `skills::update` calls, its RSS at boot and at rest, beside the peak of the
  minimal worker on the same SDK answering the same full lists from memory; and `list` over
  the wire (whole, and an unchanged `if_revision` poll) beside that minimal worker.
- **Index size**: the index file against the bytes of the markdown files it covers.
- **Mixed load** (issue 31): the calls of real traffic interleaved. A round is one
  `skills::update`, then one each of `skills::get` (hit), `skills::get` (miss, D110),
  `skills::index`, `skills::list` with a prefix and `agents::get`; another round is a whole
  `skills::list`, then a `get`. Each call's p50 and p99 stand beside its *steady-state twin*, the
  same call repeated alone in the same run: in the library (`read_json` / `write`) and over the
  engine socket (the real binary behind the loopback fake engine, with the minimal worker's
  `{}` as the trivial call), and the worker's peak RSS through the whole run. The same whole
  list, then `{}`, on the minimal worker shows what the SDK alone makes a call after a whole
  list wait. With `BENCH_ENGINE_URL` (a real iii engine on loopback; never in CI) the rounds
  also run through that engine, called by an SDK client of it: that engine parses, copies and
  frees every answer it passes on, which the fake engine does not imitate.
- **Hybrid search** (issue 28, section `hybrid`, with `III_DIRECTORY_SEARCH_MODEL`):
  `skills::search` with the model ready and every content's vector in memory, p50 with the
  query's embedding (stand-in vectors: the real embeddings of 24 skill-like texts in turn, since
  embedding 50,000 skills takes most of an hour and the scan costs the same whatever they hold),
  beside the query's embedding alone as its floor (what any hybrid search pays); a cold tree of 200 skills really embedded in the
  background (skills/s) while lexical searches are served (their p50 and p99 beside the idle
  p50); `search_functions`' ranking with the dense lane on the 2,000 generated functions, and
  that catalog's first embedding; the worker's peak RSS with the model loaded, serving rounds of
  40 hybrid searches.
- **Sentence embeddings** (issue 28; `cargo bench --bench suite -- embed`, `embed.json`, with
  `III_DIRECTORY_SEARCH_MODEL`): a query's embedding on the embedder's query threads (both
  cores, as a search runs it; the process's CPU time per query in its note), the same with an
  exact top 12 of 2,000 function vectors, the exact top 10 of 50,000 and 100,000 int8 vectors,
  the top 80 of 50,000 and 100,000 skills of two passages each as skills are stored (random
  vectors: a scan costs the same whatever they hold), and real skill texts from
  `../shared/corpus` embedded on every core at most 128 and at most 256 tokens a text
  (texts/s, and texts per second of CPU time).
- **Skills catalog** (issue 30; section `catalog`): on a tree of as many Agent Skills as the
  size (every skill a `SKILL.md` folder, one in ten not for a model, written once under
  `target/bench-trees/agent-skills-<size>`), `skills::catalog` as JSON text (`read_json`) in
  `xml` and `json` with the default 16 KiB budget, and `xml` with 1 MiB. *Baseline*: what a
  harness without an index pays for the same block, as `skills-ref to-prompt` does: the rescan,
  then the `SKILL.md` rows' entries. *Floor*: `serde_json::to_vec` of the same answer. Beside
  them, `check --spec` (`Directory::spec_check`) over every `SKILL.md` of that tree, with plain
  `check` on the same index in its note.
- **Bundle updates** (issue 29; `cargo bench --bench suite -- bundles`, `bundles.json`): a
  1,000-file bundle from the loopback registry with 10 files edited locally; each new version
  changes 20 files, 5 of them edited ones (clean three-way merges). `plan-update` (fetch, the
  sha256 of every file, the base fetched again, the merges) and `apply` of that plan until it
  returns with the index updated, one per version; and `check-updates` over 50 locked bundles
  with the answers cached (the cold call, 50 requests in parallel, in its note).

Trees come from `examples/generate_tree.rs` (deterministic; bodies drawn from
`../shared/corpus`); the suite reads `target/bench-trees/<size>` and edits only its own copy
under `target/bench-work/<size>`.
";

/// Log-scale small multiples: one panel per plotted figure, one group of bars per tree size.
fn svg(runs: &[Run]) -> String {
    const PANEL_W: f64 = 290.0;
    const PANEL_H: f64 = 230.0;
    const COLUMNS_PER_ROW: usize = 4;
    const TOP: f64 = 70.0;
    const LEFT: f64 = 20.0;
    let panels: Vec<(&str, &str)> = PLOTTED
        .iter()
        .copied()
        .filter(|(key, _)| runs.iter().any(|r| r.figures.iter().any(|f| f.key == *key)))
        .collect();
    let rows = panels.len().div_ceil(COLUMNS_PER_ROW).max(1);
    let width = LEFT * 2.0 + PANEL_W * COLUMNS_PER_ROW as f64;
    let height = TOP + PANEL_H * rows as f64 + 20.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">iii-directory: indexed vs rescan-on-every-read baseline vs floor (p50, log scale; lower is better)</text>"#
    );
    let mut x = LEFT;
    for (name, colour) in COLOURS {
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="36" width="12" height="12" fill="{colour}"/><text x="{}" y="46">{name}</text>"#,
            x + 16.0
        );
        x += 30.0 + name.len() as f64 * 6.2;
    }
    let _ = writeln!(
        s,
        r##"<text x="{x}" y="46" fill="#2b6cb0">N× above a blue bar: baseline ÷ indexed</text>"##
    );
    for (i, (key, title)) in panels.iter().enumerate() {
        let px = LEFT + PANEL_W * (i % COLUMNS_PER_ROW) as f64;
        let py = TOP + PANEL_H * (i / COLUMNS_PER_ROW) as f64;
        panel(&mut s, runs, key, title, px, py, PANEL_W, PANEL_H);
    }
    s.push_str("</svg>\n");
    s
}

/// A time in ms as a short axis label.
fn axis_label(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{} s", ms / 1000.0)
    } else if ms >= 1.0 {
        format!("{ms} ms")
    } else if ms < 0.001 {
        format!("{} ns", (ms * 1e6).round())
    } else {
        format!("{} µs", (ms * 1000.0).round())
    }
}

#[allow(clippy::too_many_arguments)]
fn panel(s: &mut String, runs: &[Run], key: &str, title: &str, x: f64, y: f64, w: f64, h: f64) {
    let (left, right, top, bottom) = (x + 48.0, x + w - 12.0, y + 22.0, y + h - 34.0);
    let bars: Vec<(usize, [Option<f64>; 3])> = runs
        .iter()
        .filter_map(|run| {
            let f = run.figures.iter().find(|f| f.key == key)?;
            Some((
                run.skills,
                [
                    Some(f.value),
                    f.baseline.as_ref().map(|b| b.value),
                    f.floor.as_ref().map(|b| b.value),
                ],
            ))
        })
        .collect();
    let values: Vec<f64> = bars
        .iter()
        .flat_map(|(_, b)| b.iter().flatten().copied())
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    if values.is_empty() {
        return;
    }
    let lo = values
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .log10()
        .floor();
    let hi = values
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .log10()
        .ceil()
        .max(lo + 1.0);
    let to_y = |v: f64| bottom - (v.log10() - lo) / (hi - lo) * (bottom - top);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="12" font-weight="bold" text-anchor="middle">{title}</text>"#,
        (left + right) / 2.0,
        y + 12.0
    );
    let step = ((hi - lo) / 6.0).ceil().max(1.0) as i32;
    let mut decade = lo as i32;
    while decade as f64 <= hi {
        let v = 10f64.powi(decade);
        let gy = to_y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{gy:.1}" x2="{right}" y2="{gy:.1}" stroke="#e2e8f0"/><text x="{}" y="{:.1}" text-anchor="end" fill="#4a5568">{}</text>"##,
            left - 4.0,
            gy + 4.0,
            axis_label(v)
        );
        decade += step;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#4a5568"/>"##
    );
    let group = (right - left) / bars.len().max(1) as f64;
    let bar = (group - 16.0) / 3.0;
    for (g, (skills, values)) in bars.iter().enumerate() {
        let gx = left + group * g as f64 + 8.0;
        for (b, value) in values.iter().enumerate() {
            let Some(v) = value.filter(|v| *v > 0.0 && v.is_finite()) else {
                continue;
            };
            let top_y = to_y(v).min(bottom - 1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{top_y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} skills, {}: {}</title></rect>"#,
                gx + bar * b as f64,
                bar - 2.0,
                bottom - top_y,
                COLOURS[b].1,
                skills,
                COLOURS[b].0,
                show(v, "ms")
            );
        }
        if let (Some(indexed), Some(baseline)) = (values[0], values[1]) {
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#2b6cb0">{}</text>"##,
                gx + bar / 2.0,
                to_y(indexed).min(bottom - 1.0) - 3.0,
                crate::results::ratio(baseline / indexed)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{} skills</text>"#,
            gx + (group - 16.0) / 2.0,
            bottom + 14.0,
            separated(*skills)
        );
    }
}
