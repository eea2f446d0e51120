//! One figure of the suite with what it is compared against, printed as a table row and saved
//! as JSON (`target/bench-results/<size>.json`) for the report.

use serde::{Deserialize, Serialize};

/// A measured figure beside its rescan baseline and its physical floor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure {
    /// Stable key, for the report and the plot (`list_all`, `warm_boot`, …).
    pub key: String,
    pub name: String,
    /// `ms`, `MiB` or `bytes`.
    pub unit: String,
    /// p50 for timings.
    pub value: f64,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub runs: usize,
    pub baseline: Option<Reference>,
    pub floor: Option<Reference>,
    /// The goals of the issues this figure is judged against (issue 5's, issue 15's).
    #[serde(default)]
    pub targets: Vec<Target>,
    /// Anything a reader needs to read the figure right (CPU use, files read, …).
    pub note: String,
}

/// What a figure is compared with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reference {
    pub name: String,
    pub value: f64,
    /// The reference's own p99, where it is a distribution timed in the same run (the
    /// steady-state twin of a mixed-load figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
}

/// A goal of an issue, and whether this run met it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    /// The issue that states it.
    #[serde(default = "issue_5")]
    pub issue: u32,
    pub text: String,
    /// The tree size the issue states the target for.
    pub at_skills: usize,
    pub met: bool,
}

fn issue_5() -> u32 {
    5
}

/// A target as a comparison: what is measured (the figure's p50, its p99, CPU time over wall
/// time, a ratio to another figure), how, and against what limit.
pub struct Check<'a> {
    pub what: &'a str,
    pub measured: f64,
    pub cmp: Cmp,
    pub limit: f64,
    /// The unit of `measured` and `limit` (`ms`, `MiB`, `×`, or empty for a bare number).
    pub unit: &'a str,
}

#[derive(Clone, Copy, Debug)]
pub enum Cmp {
    Below,
    AtMost,
    AtLeast,
}

impl Check<'_> {
    fn met(&self) -> bool {
        match self.cmp {
            Cmp::Below => self.measured < self.limit,
            Cmp::AtMost => self.measured <= self.limit,
            Cmp::AtLeast => self.measured >= self.limit,
        }
    }

    /// `p99 ≤250 ms (was 180 ms)`: the target, then what this run measured.
    fn text(&self) -> String {
        let sign = match self.cmp {
            Cmp::Below => "<",
            Cmp::AtMost => "≤",
            Cmp::AtLeast => "≥",
        };
        let value = |v: f64| match self.unit {
            "ms" | "MiB" => show(v, self.unit),
            "" => format!("{v:.2}"),
            unit => format!("{v:.2}{unit}"),
        };
        format!(
            "{} {sign}{} (measured {})",
            self.what,
            value(self.limit),
            value(self.measured)
        )
    }
}

impl Figure {
    pub fn new(key: &str, name: &str, unit: &str, value: f64) -> Figure {
        Figure {
            key: key.into(),
            name: name.into(),
            unit: unit.into(),
            value,
            p95: None,
            p99: None,
            runs: 1,
            baseline: None,
            floor: None,
            targets: Vec::new(),
            note: String::new(),
        }
    }

    pub fn timing(key: &str, name: &str, sample: &crate::measure::Sample) -> Figure {
        Figure {
            p95: Some(sample.p95),
            p99: Some(sample.p99),
            runs: sample.runs,
            ..Figure::new(key, name, "ms", sample.p50)
        }
    }

    pub fn baseline(mut self, name: &str, value: f64) -> Figure {
        self.baseline = Some(Reference {
            name: name.into(),
            value,
            p99: None,
        });
        self
    }

    pub fn floor(mut self, name: &str, value: f64) -> Figure {
        self.floor = Some(Reference {
            name: name.into(),
            value,
            p99: None,
        });
        self
    }

    /// The steady-state twin of a mixed-load figure (the same call repeated alone, same run),
    /// as its floor: p50 and p99.
    pub fn twin(mut self, sample: &crate::measure::Sample) -> Figure {
        self.floor = Some(Reference {
            name: "steady state, same run".into(),
            value: sample.p50,
            p99: Some(sample.p99),
        });
        self
    }

    /// A target of issue `issue`, judged by the caller.
    pub fn target(mut self, issue: u32, text: &str, at_skills: usize, met: bool) -> Figure {
        self.targets.push(Target {
            issue,
            text: text.into(),
            at_skills,
            met,
        });
        self
    }

    /// A target of issue `issue`, judged here.
    pub fn check(mut self, issue: u32, at_skills: usize, check: Check<'_>) -> Figure {
        self.targets.push(Target {
            issue,
            text: check.text(),
            at_skills,
            met: check.met(),
        });
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Figure {
        self.note = note.into();
        self
    }

    /// How many times faster than the baseline (baseline / figure).
    pub fn speedup(&self) -> Option<f64> {
        self.baseline.as_ref().map(|b| b.value / self.value)
    }

    /// How many times the floor (figure / floor).
    pub fn over_floor(&self) -> Option<f64> {
        self.floor.as_ref().map(|f| self.value / f.value)
    }
}

/// Everything one run of the suite measured on one tree size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    pub skills: usize,
    /// The title of a part that runs alone and needs no tree (`bundle updates`); `None` for a
    /// run over the tree of `skills` skills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone: Option<String>,
    /// Markdown files the index covers, and their bytes.
    pub files: usize,
    pub content_bytes: u64,
    pub load_start: String,
    pub load_end: String,
    pub seconds: f64,
    pub figures: Vec<Figure>,
    /// Later runs of some sections whose figures replaced this run's, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reruns: Vec<Rerun>,
    /// The sections this run measured, when it measured only some (`BENCH_SECTIONS`) and
    /// there was no whole run of its size to merge into; empty for a whole run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
}

impl Run {
    /// Whether this run judges `target`: a run over a tree judges the targets stated for its
    /// size, a part that needs no tree judges all of its own.
    pub fn judges(&self, target: &Target) -> bool {
        self.alone.is_some() || target.at_skills == self.skills
    }
}

/// A run of some sections only, merged into the saved run of its size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Rerun {
    pub sections: Vec<String>,
    /// When it ran (RFC 3339).
    pub at: String,
    pub seconds: f64,
    pub load_start: String,
}

/// A value with its unit, short.
pub fn show(value: f64, unit: &str) -> String {
    match unit {
        "ms" if value >= 100.0 => format!("{value:.0} ms"),
        "ms" if value >= 1.0 => format!("{value:.2} ms"),
        "ms" => format!("{:.1} µs", value * 1e3),
        "MiB" => format!("{value:.1} MiB"),
        "bytes" => format!("{:.1} MiB", value / (1024.0 * 1024.0)),
        _ => format!("{value:.3} {unit}"),
    }
}

/// A ratio, short: `1234×`, `12×`, `1.5×`.
pub fn ratio(r: f64) -> String {
    if !r.is_finite() {
        "—".into()
    } else if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.2}×")
    }
}

/// A speedup as words: `12× faster`, or `1.80× slower` below 1.
pub fn faster(r: f64) -> String {
    if r >= 1.0 {
        format!("{} faster", ratio(r))
    } else {
        format!("{} slower", ratio(1.0 / r))
    }
}

/// The columns of the table, shared by the terminal and BENCHMARKS.md.
pub const COLUMNS: [&str; 8] = [
    "figure",
    "value (p50)",
    "p95 / p99",
    "baseline",
    "vs baseline",
    "floor",
    "vs floor",
    "target",
];

/// The cells of a figure's row in `run`. A target stated for another size is shown for
/// reference, not judged.
pub fn cells(f: &Figure, run: &Run) -> [String; 8] {
    let tails = match (f.p95, f.p99) {
        (Some(p95), Some(p99)) if f.runs > 1 => {
            format!("{} / {}", show(p95, &f.unit), show(p99, &f.unit))
        }
        _ => String::new(),
    };
    let reference = |r: &Option<Reference>| {
        r.as_ref().map_or(String::new(), |r| match r.p99 {
            Some(p99) => format!(
                "{} / p99 {} ({})",
                show(r.value, &f.unit),
                show(p99, &f.unit),
                r.name
            ),
            None => format!("{} ({})", show(r.value, &f.unit), r.name),
        })
    };
    [
        f.name.clone(),
        show(f.value, &f.unit),
        tails,
        reference(&f.baseline),
        f.speedup().map_or(String::new(), faster),
        reference(&f.floor),
        f.over_floor().map_or(String::new(), ratio),
        f.targets
            .iter()
            .map(|t| {
                if run.judges(t) {
                    format!("{} {}", t.text, if t.met { "✅ met" } else { "❌ missed" })
                } else {
                    format!("({} at {})", t.text, t.at_skills)
                }
            })
            .collect::<Vec<_>>()
            .join("; "),
    ]
}

/// Prints a run as a plain-text table.
pub fn print(run: &Run) {
    let what = match &run.alone {
        Some(name) => crate::part_title(name).to_string(),
        None => format!(
            "{} skills ({} files, {} of markdown)",
            run.skills,
            run.files,
            show(run.content_bytes as f64, "bytes")
        ),
    };
    println!(
        "\n{what}; load {} → {}; {:.0} s",
        run.load_start, run.load_end, run.seconds
    );
    let rows: Vec<[String; 8]> = run.figures.iter().map(|f| cells(f, run)).collect();
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([COLUMNS[i].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..COLUMNS.len()).map(width).collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(COLUMNS.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    for f in run.figures.iter().filter(|f| !f.note.is_empty()) {
        println!("  {}: {}", f.name, f.note);
    }
}
