//! The function catalog's refresh on an engine push, at 6,000 functions with kilobyte
//! descriptions and twenty-argument schemas (the size at which the complexity tester of stop 61
//! saw a push cost a second and a half): the refresh as the worker runs it on a push (it keeps
//! the contracts whose list entry and worker connection did not change) beside the baseline,
//! a refresh that asks `engine::functions::info` for every function, as each push did before.
//! Nothing changed between refreshes, as when a short-lived client comes and goes.
//!
//! The engine answers in process from JSON text decoded on every call, so each figure pays
//! what the worker pays for the engine's answers but the socket.
//!
//! Runs in the full suite's `search` section, or alone: `cargo bench --bench suite -- search`.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use iii_directory::search::EngineError;
use iii_directory::search::FunctionSearch;
use iii_directory::search::service::{Engine, Reuse};
use serde_json::{Value, json};
use test_support::generate::Rng;

use crate::Settings;
use crate::measure::measure;
use crate::results::Figure;

/// Functions in the catalog.
const FUNCTIONS: usize = 6_000;
/// Functions per worker (each worker one connection).
const PER_WORKER: usize = 100;
/// Arguments per function.
const ARGUMENTS: usize = 20;

/// An engine answering from prepared JSON text: the list, the workers, each function's detail.
struct Prepared {
    list: String,
    workers: String,
    details: HashMap<String, String>,
}

impl Prepared {
    fn new() -> Prepared {
        let mut rng = Rng::new(62);
        let word = |rng: &mut Rng| format!("w{:x}", rng.below(1 << 20));
        let mut entries = Vec::with_capacity(FUNCTIONS);
        let mut details = HashMap::with_capacity(FUNCTIONS);
        for i in 0..FUNCTIONS {
            let worker = format!("svc{}", i / PER_WORKER);
            let id = format!("{worker}::op{i}");
            let words: Vec<String> = (0..300).map(|_| word(&mut rng)).collect();
            let description = format!("Does {}. {}", words[..8].join(" "), words.join(" "));
            let properties: serde_json::Map<String, Value> = (0..ARGUMENTS)
                .map(|a| {
                    let about: Vec<String> = (0..12).map(|_| word(&mut rng)).collect();
                    (
                        format!("arg{a}_{}", word(&mut rng)),
                        json!({ "type": "string", "description": about.join(" ") }),
                    )
                })
                .collect();
            entries.push(json!({
                "function_id": id, "namespace": "default", "worker_name": worker,
                "description": description,
            }));
            let detail = json!({
                "function_id": id, "namespace": "default", "worker_name": worker,
                "description": description,
                "request_schema": { "type": "object", "properties": properties },
                "response_schema": { "type": "object" },
            });
            details.insert(id, detail.to_string());
        }
        let workers: Vec<Value> = (0..FUNCTIONS.div_ceil(PER_WORKER))
            .map(|w| json!({ "name": format!("svc{w}"), "namespace": "default", "id": format!("conn-{w}") }))
            .collect();
        Prepared {
            list: json!({ "functions": entries }).to_string(),
            workers: json!({ "workers": workers }).to_string(),
            details,
        }
    }

    fn bytes(&self) -> usize {
        self.list.len() + self.details.values().map(String::len).sum::<usize>()
    }
}

#[async_trait]
impl Engine for Prepared {
    async fn call(
        &self,
        function_id: &str,
        payload: Value,
        _: Duration,
    ) -> Result<Value, EngineError> {
        let text = match function_id {
            "engine::functions::list" => self.list.clone(),
            "engine::workers::list" => self.workers.clone(),
            "engine::functions::info" => {
                let asked: Vec<&str> = payload["function_ids"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let entries: Vec<&str> = asked
                    .iter()
                    .filter_map(|id| self.details.get(*id).map(String::as_str))
                    .collect();
                format!("{{\"functions\":[{}]}}", entries.join(","))
            }
            other => return Err(format!("{other} is not answered here").into()),
        };
        Ok(serde_json::from_str(&text)?)
    }
}

pub fn figures(settings: &Settings) -> Vec<Figure> {
    let engine = Prepared::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let search = FunctionSearch::new();
    let refresh = |reuse| {
        runtime
            .block_on(search.catalog().refresh(&engine, reuse))
            .expect("refresh")
    };
    refresh(Reuse::Nothing);
    assert_eq!(search.catalog().current().len(), FUNCTIONS);
    let runs = settings.iterations.clamp(3, 10);
    let every_contract = measure(1, runs, || {
        refresh(Reuse::Nothing);
    });
    let on_a_push = measure(1, runs, || {
        refresh(Reuse::Unchanged);
    });
    vec![
        Figure::timing(
            "catalog_push_refresh",
            "function catalog refreshed on a push, 6,000 functions, nothing changed",
            &on_a_push,
        )
        .baseline("every contract asked for (each push, before stop 62)", every_contract.p50)
        .note(format!(
            "{} MB of engine answers in all (2 KB descriptions, {ARGUMENTS} documented arguments); the engine answers in process from JSON text decoded per call, so the socket is left out; the periodic refresh (every 60 s) asks the same way, and for every contract one round in ten",
            engine.bytes() / 1_000_000
        )),
    ]
}
