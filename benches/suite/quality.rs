//! `cargo bench --bench suite -- quality`: the retrieval quality of function search on the
//! project's evaluation sets (`tests/fixtures/search_eval/`, scored by
//! `test_support::search_eval`), lexical and, with the model (`III_DIRECTORY_SEARCH_MODEL`),
//! hybrid through the worker's own function lane (`FunctionLane`, the texts it embeds and the
//! floors it fuses with): recall@12, nDCG@12, MRR, multi-capability coverage and the no-match
//! answers, per kind of case, for the `dev` and held-out splits. Then skill search's, with the
//! shared corpus (`III_DIRECTORY_SHARED`): recall@5 and @10, nDCG@10, MRR and the no-match
//! answers of `skills::search` over its 2,217 real skills, lexical and, with the model, hybrid
//! (the corpus's vectors cached under `target/tmp/search-eval-vectors/` with the quality tests,
//! so only the first run embeds them), then the skills `search_functions` offers beside
//! functions (its side lane). Printed, not saved: these are not timings.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use iii_directory::embed::Embedder;
use iii_directory::retrieval::fusion::DenseRanker;
use iii_directory::search::vectors::FunctionLane;
use iii_directory::search::{query, select_with};
use test_support::search_eval::lanes::{
    Layout, catalog, corpus_directory_as, listed_rows, side_lanes, skill_ids, skill_lane,
};
use test_support::search_eval::{
    FunctionCase, Report, SideLane, function_cases, score_functions, score_skills, skill_tasks,
};

pub fn print() {
    let model = std::env::var_os("III_DIRECTORY_SEARCH_MODEL")
        .map(|folder| Arc::new(Embedder::load(Path::new(&folder)).expect("load the model")));
    if model.is_none() {
        println!(
            "hybrid: skipped (needs the embedding model: export \
             III_DIRECTORY_SEARCH_MODEL=$(tools/search-model))"
        );
    }
    functions(model.clone());
    skills(model.as_deref(), Layout::AgentsSkills);
    skills(model.as_deref(), Layout::Downloaded);
}

/// Function search's tables, the hybrid ones through the worker's own lane.
fn functions(model: Option<Arc<Embedder>>) {
    let catalog = Arc::new(catalog());
    let splits = [
        ("dev", function_cases("dev")),
        ("held-out", function_cases("heldout")),
        ("held-out long", function_cases("heldout_long")),
    ];
    let score = |cases: &[FunctionCase], dense: Option<&dyn DenseRanker>| -> Report {
        score_functions(cases, |capabilities| {
            select_with(&catalog, &query::prepare(capabilities), dense)
        })
    };
    for (name, cases) in &splits {
        println!(
            "{}",
            score(cases, None).table(&format!("functions, {name} (lexical)"))
        );
    }
    let Some(model) = model else {
        return;
    };
    let lane = FunctionLane::new(model);
    lane.follow(|| catalog.clone());
    for (name, cases) in &splits {
        println!(
            "{}",
            score(cases, Some(&lane)).table(&format!("functions, {name} (hybrid)"))
        );
    }
}

/// Skill search's tables over the shared corpus laid out as `layout`, when it is there
/// (`corpus_directory_as` says how to point at it otherwise); the side lane's with the first
/// layout only.
fn skills(model: Option<&Embedder>, layout: Layout) {
    let Some((_dir, directory)) = corpus_directory_as(layout) else {
        return;
    };
    let tree = match layout {
        Layout::AgentsSkills => "",
        Layout::Downloaded => ", downloaded tree",
    };
    let splits = [
        ("dev", skill_tasks("dev")),
        ("held-out", skill_tasks("heldout")),
    ];
    let table = |mode: &str, dense: Option<&dyn DenseRanker>| {
        for (name, tasks) in &splits {
            let report = score_skills(tasks, |task| skill_ids(&directory, task, dense));
            println!(
                "{}",
                report.table(&format!("skills, {name}{tree} ({mode})"))
            );
        }
    };
    table("lexical", None);
    if let Some(model) = model {
        let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("search-eval-vectors");
        let lane = skill_lane(model, &directory, &listed_rows(&directory), &cache);
        table("hybrid", Some(&lane));
        // The skills `search_functions` offers beside functions.
        if layout == Layout::AgentsSkills {
            let side = side_lanes(&directory, Some(&lane));
            println!("{}", SideLane::table("side lane (hybrid)", &side));
        }
    }
}
