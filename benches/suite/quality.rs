//! `cargo bench --bench suite -- quality`: the retrieval quality of function search on the
//! project's evaluation sets (`tests/fixtures/search_eval/`, scored by
//! `test_support::search_eval`), lexical and, with the model (`III_DIRECTORY_SEARCH_MODEL`),
//! hybrid through the worker's own function lane (`FunctionLane`, the texts it embeds and the
//! floors it fuses with): recall@12, nDCG@12, MRR, multi-capability coverage and the no-match
//! answers, per kind of case, for the `dev` and held-out splits. Printed, not saved: these are
//! not timings. The skill tables need the shared corpus and its 2,217 embedded skills, which the
//! quality test caches (`cargo test --test search quality -- --nocapture`).

use std::path::Path;
use std::sync::Arc;

use iii_directory::embed::Embedder;
use iii_directory::retrieval::fusion::DenseRanker;
use iii_directory::search::catalog::{Catalog, info_entries, parse_list, tools_from_info};
use iii_directory::search::vectors::FunctionLane;
use iii_directory::search::{query, select_with};
use test_support::search_eval::{
    FunctionCase, Report, function_cases, function_catalog, score_functions,
};

pub fn print() {
    let answer = function_catalog();
    let ids = parse_list(&answer).expect("the evaluation catalog lists its functions");
    let catalog = Catalog::build(&tools_from_info(&ids, info_entries(&answer)));
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
    let Some(folder) = std::env::var_os("III_DIRECTORY_SEARCH_MODEL") else {
        println!(
            "functions, hybrid: skipped (needs the embedding model: export \
             III_DIRECTORY_SEARCH_MODEL=$(tools/search-model))"
        );
        return;
    };
    let embedder = Arc::new(Embedder::load(Path::new(&folder)).expect("load the model"));
    let lane = FunctionLane::new(embedder);
    lane.update(&catalog);
    for (name, cases) in &splits {
        println!(
            "{}",
            score(cases, Some(&lane)).table(&format!("functions, {name} (hybrid)"))
        );
    }
}
