//! The retrieval evaluation sets (`tests/fixtures/search_eval/`) and their scorer: recall@k,
//! nDCG@k, MRR, multi-capability coverage and the no-match rate, per kind of case, printed as
//! a table. Shared by the quality tests (`tests/search/quality.rs`) and the benchmark suite;
//! [`lanes`] holds what both score over (the catalog, the corpus, the dense lanes).
//!
//! The sets were written for this project: a catalog of 680 engine functions of plausible
//! workers with graded function cases, and task-phrased skill queries over the shared corpus,
//! graded by reading the candidates. Each case is `dev` (what a ranking may be tuned on) or
//! `heldout` (only ever reported). Grades: 2 = serves the need, 1 = related but partial; how they
//! are given, and how both sets' grades were audited, is in the sets' `JUDGING.md`.

pub mod lanes;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

/// Function answers are judged at this depth (the search's own cap).
pub const FUNCTION_K: usize = 12;
/// Skill answers are judged at these depths.
pub const SKILL_KS: [usize; 2] = [5, 10];

/// A grade at or above this counts for recall and MRR ("serves the need").
pub const SERVES: u8 = 2;

fn fixture_text(name: &str) -> String {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/search_eval"
    ))
    .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn fixture(name: &str) -> Value {
    serde_json::from_str(&fixture_text(name)).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

/// The function catalog: an `engine::functions::info` answer (`{functions: [...]}`).
pub fn function_catalog() -> Value {
    fixture("functions_catalog.json")
}

#[derive(Clone, Debug, Deserialize)]
pub struct Capability {
    pub text: String,
    /// Function id → grade; empty for a no-match case.
    pub relevant: BTreeMap<String, u8>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct FunctionCase {
    pub id: String,
    pub split: String,
    /// `direct`, `paraphrased`, `multi` or `no_match`.
    pub kind: String,
    pub capabilities: Vec<Capability>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct SkillTask {
    pub id: String,
    pub split: String,
    /// `direct`, `indirect` or `no_match`.
    pub kind: String,
    pub query: String,
    /// Display id → grade; empty for a no-match task.
    pub relevant: BTreeMap<String, u8>,
}

#[derive(Deserialize)]
struct FunctionCases {
    cases: Vec<FunctionCase>,
}

#[derive(Deserialize)]
struct SkillTasks {
    tasks: Vec<SkillTask>,
}

/// The function cases of one split (`dev`, `heldout`, or `heldout_long`: held-out needs of 12
/// terms and more, reported apart so the short held-out figures stay comparable).
pub fn function_cases(split: &str) -> Vec<FunctionCase> {
    let all: FunctionCases =
        serde_json::from_value(fixture("functions_cases.json")).expect("function cases");
    all.cases.into_iter().filter(|c| c.split == split).collect()
}

/// One pooled (need, answer) pair of a judgment audit (`JUDGING.md`): the case and its need
/// (a function case's capability, a skill task's query), the function or skill id, the grade the
/// set held (`None` for a pair first judged by the audit: a task added later, or an answer no
/// ranking had returned before), the two judges' grades, and the grade the set holds since.
#[derive(Clone, Debug, Deserialize)]
pub struct AuditedJudgment {
    pub case: String,
    pub need: String,
    pub id: String,
    pub before: Option<u8>,
    pub judges: [u8; 2],
    pub after: u8,
}

/// An audit's record (`function_judgments_audit.jsonl` or `skill_judgments_audit.jsonl`): every
/// pooled pair that anyone graded above 0 (the rest were 0 for all).
pub fn judgments_audit(name: &str) -> Vec<AuditedJudgment> {
    fixture_text(name)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

/// The skill tasks of one split (`dev` or `heldout`).
pub fn skill_tasks(split: &str) -> Vec<SkillTask> {
    let all: SkillTasks =
        serde_json::from_value(fixture("skills_tasks.json")).expect("skill tasks");
    all.tasks.into_iter().filter(|t| t.split == split).collect()
}

/// 1 when an answer that serves the need is among the first `k`, else 0.
pub fn recall_at(ranked: &[String], relevant: &BTreeMap<String, u8>, k: usize) -> f64 {
    let hit = ranked
        .iter()
        .take(k)
        .any(|id| relevant.get(id).is_some_and(|&g| g >= SERVES));
    if hit { 1.0 } else { 0.0 }
}

/// Normalized discounted cumulative gain at `k`, gains `2^grade − 1`, each id counted once.
pub fn ndcg_at(ranked: &[String], relevant: &BTreeMap<String, u8>, k: usize) -> f64 {
    let gain = |g: u8| f64::from((1u32 << g) - 1);
    let discount = |i: usize| 1.0 / ((i + 2) as f64).log2();
    let mut seen = Vec::new();
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, id)| {
            if seen.contains(&id) {
                return 0.0;
            }
            seen.push(id);
            relevant.get(id).map_or(0.0, |&g| gain(g) * discount(i))
        })
        .sum();
    let mut ideal: Vec<u8> = relevant.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, &g)| gain(g) * discount(i))
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// The reciprocal rank of the first answer that serves the need (0 when none does).
pub fn reciprocal_rank(ranked: &[String], relevant: &BTreeMap<String, u8>) -> f64 {
    ranked
        .iter()
        .position(|id| relevant.get(id).is_some_and(|&g| g >= SERVES))
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// Sums of one group of cases.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub cases: usize,
    /// Σ recall at each depth the table reports.
    pub recall: Vec<f64>,
    pub ndcg: f64,
    pub mrr: f64,
    /// Multi-capability cases: Σ share of capabilities served within the depth.
    pub coverage: f64,
    /// No-match cases: how many got any answer at all.
    pub answered: usize,
    /// Function cases: Σ candidates answered, and Σ share of them judged related to the case
    /// (any grade; an answer of none counts 1). What the recall columns cannot see: a
    /// candidate an agent must read past.
    pub candidates: f64,
    pub precision: f64,
}

impl Row {
    fn mean(&self, sum: f64) -> f64 {
        if self.cases == 0 {
            0.0
        } else {
            sum / self.cases as f64
        }
    }

    pub fn recall(&self, i: usize) -> f64 {
        self.mean(self.recall[i])
    }

    pub fn ndcg(&self) -> f64 {
        self.mean(self.ndcg)
    }

    pub fn mrr(&self) -> f64 {
        self.mean(self.mrr)
    }

    pub fn coverage(&self) -> f64 {
        self.mean(self.coverage)
    }

    pub fn candidates(&self) -> f64 {
        self.mean(self.candidates)
    }

    pub fn precision(&self) -> f64 {
        self.mean(self.precision)
    }
}

/// A scored set: one row per kind, and the match cases together (`all`).
#[derive(Clone, Debug)]
pub struct Report {
    pub ks: Vec<usize>,
    pub kinds: BTreeMap<String, Row>,
    /// Every case that has an answer (not `no_match`).
    pub all: Row,
}

impl Report {
    fn new(ks: &[usize]) -> Report {
        Report {
            ks: ks.to_vec(),
            kinds: BTreeMap::new(),
            all: Row {
                recall: vec![0.0; ks.len()],
                ..Row::default()
            },
        }
    }

    fn row(&mut self, kind: &str) -> &mut Row {
        let ks = self.ks.len();
        self.kinds.entry(kind.to_string()).or_insert_with(|| Row {
            recall: vec![0.0; ks],
            ..Row::default()
        })
    }

    /// The kind's row (an empty one when the set has no such case).
    pub fn kind(&self, kind: &str) -> Row {
        self.kinds.get(kind).cloned().unwrap_or_else(|| Row {
            recall: vec![0.0; self.ks.len()],
            ..Row::default()
        })
    }

    /// For function cases: how many candidates the match cases were answered with, and the
    /// share of them judged related to the case, one line.
    pub fn candidates_line(&self) -> String {
        format!(
            "match cases: {:.1} candidates an answer, {:.3} of them judged related\n",
            self.all.candidates(),
            self.all.precision()
        )
    }

    /// A markdown table: one line per kind, then the match cases together.
    pub fn table(&self, title: &str) -> String {
        let recall_heads: String = self.ks.iter().map(|k| format!(" recall@{k} |")).collect();
        let last = self.ks.last().copied().unwrap_or(0);
        let mut out = format!(
            "{title}\n| kind | cases |{recall_heads} nDCG@{last} | MRR | coverage@{last} | no-match answered |\n|---|---|{}---|---|---|---|\n",
            "---|".repeat(self.ks.len())
        );
        let mut line = |name: &str, row: &Row| {
            let recalls: String = (0..self.ks.len())
                .map(|i| format!(" {:.3} |", row.recall(i)))
                .collect();
            let no_match = name == "no_match";
            let cell = |v: f64| {
                if no_match {
                    "".into()
                } else {
                    format!("{v:.3}")
                }
            };
            let coverage = if name == "multi" {
                format!("{:.3}", row.coverage())
            } else {
                String::new()
            };
            let answered = if no_match {
                format!("{}/{}", row.answered, row.cases)
            } else {
                String::new()
            };
            let recalls = if no_match {
                " |".repeat(self.ks.len())
            } else {
                recalls
            };
            out.push_str(&format!(
                "| {name} | {} |{recalls} {} | {} | {coverage} | {answered} |\n",
                row.cases,
                cell(row.ndcg()),
                cell(row.mrr()),
            ));
        };
        for (kind, row) in &self.kinds {
            line(kind, row);
        }
        line("all", &self.all);
        out
    }
}

/// Scores function cases. `search` answers a case's capabilities with the selected ids, in
/// merge order.
pub fn score_functions(
    cases: &[FunctionCase],
    mut search: impl FnMut(&[String]) -> Vec<String>,
) -> Report {
    let mut report = Report::new(&[FUNCTION_K]);
    for case in cases {
        let texts: Vec<String> = case.capabilities.iter().map(|c| c.text.clone()).collect();
        let answer = search(&texts);
        let row = report.row(&case.kind);
        row.cases += 1;
        if case.kind == "no_match" {
            row.answered += usize::from(!answer.is_empty());
            continue;
        }
        // Every capability's relevant ids, the best grade kept.
        let mut union: BTreeMap<String, u8> = BTreeMap::new();
        for capability in &case.capabilities {
            for (id, &grade) in &capability.relevant {
                let slot = union.entry(id.clone()).or_default();
                *slot = (*slot).max(grade);
            }
        }
        let served = case
            .capabilities
            .iter()
            .map(|c| recall_at(&answer, &c.relevant, FUNCTION_K))
            .sum::<f64>()
            / case.capabilities.len() as f64;
        let ndcg = ndcg_at(&answer, &union, FUNCTION_K);
        let mrr = reciprocal_rank(&answer, &union);
        let related = answer.iter().filter(|id| union.contains_key(*id)).count();
        let precision = match answer.len() {
            0 => 1.0,
            n => related as f64 / n as f64,
        };
        let add = |row: &mut Row, count: bool| {
            if count {
                row.cases += 1;
            }
            row.recall[0] += served;
            row.ndcg += ndcg;
            row.mrr += mrr;
            row.coverage += served;
            row.candidates += answer.len() as f64;
            row.precision += precision;
        };
        add(report.row(&case.kind), false);
        add(&mut report.all, true);
    }
    report
}

/// Scores skill tasks. `search` answers a query with ranked display ids.
pub fn score_skills(tasks: &[SkillTask], mut search: impl FnMut(&str) -> Vec<String>) -> Report {
    let mut report = Report::new(&SKILL_KS);
    let deepest = SKILL_KS[SKILL_KS.len() - 1];
    for task in tasks {
        let answer = search(&task.query);
        report.row(&task.kind).cases += 1;
        if task.kind == "no_match" {
            report.row(&task.kind).answered += usize::from(!answer.is_empty());
            continue;
        }
        let recalls: Vec<f64> = SKILL_KS
            .iter()
            .map(|&k| recall_at(&answer, &task.relevant, k))
            .collect();
        let ndcg = ndcg_at(&answer, &task.relevant, deepest);
        let mrr = reciprocal_rank(&answer, &task.relevant);
        let add = |row: &mut Row| {
            for (sum, r) in row.recall.iter_mut().zip(&recalls) {
                *sum += r;
            }
            row.ndcg += ndcg;
            row.mrr += mrr;
        };
        add(report.row(&task.kind));
        report.all.cases += 1;
        add(&mut report.all);
    }
    report
}

/// How `search_functions`' side lane does on one split: the skills it offers (at most
/// `worker::SKILLS_PER_CAPABILITY`) for the skill tasks, and for the capabilities of the function cases, where a
/// need no function serves mostly has no skill either (a household chore, an errand).
#[derive(Debug, Default)]
pub struct SideLane {
    pub split: String,
    /// Skill tasks a skill serves, and of them those offered a serving skill.
    pub tasks: usize,
    pub found: usize,
    /// Skills offered for those tasks, and of them the ones serving their task.
    pub offered: usize,
    pub serving: usize,
    /// Skill tasks no skill serves, and of them those offered skills anyway.
    pub no_match_tasks: usize,
    pub no_match_tasks_offered: usize,
    /// Distinct capabilities of the function cases, and those offered skills.
    pub needs: usize,
    pub needs_offered: usize,
    /// Capabilities of the no-match function cases, and those offered skills.
    pub no_match_needs: usize,
    pub no_match_needs_offered: usize,
}

/// Scores the side lane on `split`: `offer` answers a capability or task with the display ids
/// of the skills offered for it.
pub fn score_side_lane(split: &str, mut offer: impl FnMut(&str) -> Vec<String>) -> SideLane {
    let mut lane = SideLane {
        split: split.to_string(),
        ..SideLane::default()
    };
    for task in skill_tasks(split) {
        let offered = offer(&task.query);
        if task.kind == "no_match" {
            lane.no_match_tasks += 1;
            lane.no_match_tasks_offered += usize::from(!offered.is_empty());
            continue;
        }
        let serving = offered
            .iter()
            .filter(|id| task.relevant.get(*id).is_some_and(|&g| g >= SERVES))
            .count();
        lane.tasks += 1;
        lane.found += usize::from(serving > 0);
        lane.offered += offered.len();
        lane.serving += serving;
    }
    let mut needs: BTreeMap<String, bool> = BTreeMap::new();
    for case in function_cases(split) {
        for capability in case.capabilities {
            *needs.entry(capability.text).or_default() |= case.kind == "no_match";
        }
    }
    for (need, no_match) in needs {
        let offered = !offer(&need).is_empty();
        lane.needs += 1;
        lane.needs_offered += usize::from(offered);
        if no_match {
            lane.no_match_needs += 1;
            lane.no_match_needs_offered += usize::from(offered);
        }
    }
    lane
}

impl SideLane {
    /// A Markdown table of `lanes` (one row each) under `title`.
    pub fn table(title: &str, lanes: &[SideLane]) -> String {
        let mut out = format!(
            "{title}\n| split | skill tasks offered a serving skill | offered skills serving | \
             skill tasks nothing serves, offered skills | function needs offered skills | \
             function needs nothing serves, offered skills |\n|---|---|---|---|---|---|\n"
        );
        for l in lanes {
            out.push_str(&format!(
                "| {} | {}/{} | {}/{} | {}/{} | {}/{} | {}/{} |\n",
                l.split,
                l.found,
                l.tasks,
                l.serving,
                l.offered,
                l.no_match_tasks_offered,
                l.no_match_tasks,
                l.needs_offered,
                l.needs,
                l.no_match_needs_offered,
                l.no_match_needs,
            ));
        }
        out
    }
}
