//! The read functions in-process, as JSON text (`Directory::read_json`), beside the rescan
//! baseline and the floor: serializing the same answer, already in memory as a
//! `serde_json::Value`, to JSON. (The worker hands the SDK a value instead: `list as a Value`.)

use std::hint::black_box;

use iii_directory::{Directory, ReadFunction};
use serde_json::{Value, json};

use crate::Settings;
use crate::baseline;
use crate::measure::{Sample, measure};
use crate::results::{Check, Cmp, Figure};

/// `list` with every row: at least this many times faster than the rescan baseline…
const LIST_MIN_SPEEDUP: f64 = 100.0;
/// … and within this many times the JSON floor (issue 5, 10,000 skills).
const LIST_MAX_OVER_FLOOR: f64 = 3.0;
/// The tree size the issue states most targets for.
pub const TARGET_SKILLS: usize = 10_000;
/// The tree size issue 15 states its read targets for, and the targets (ms; a miss as a
/// multiple of a hit).
const LARGE: usize = 50_000;
const LIST_PREFIX_MAX_MS: f64 = 0.5;
const INDEX_MAX_MS: f64 = 2.0;
const AGENT_GET_MAX_MS: f64 = 0.05;
const GET_MISS_MAX_OVER_HIT: f64 = 2.0;
/// The agent with an `extends` chain in generated trees (`agent-3` extends `agent-2`), and the
/// one small trees have (`agent-0` extends the bundled `iii`).
const AGENTS_WITH_CHAIN: [&str; 2] = ["agent-3", "agent-0"];

/// The answer in-process (the wire's JSON text).
fn answer(directory: &Directory, function: ReadFunction, request: &Value) -> String {
    directory
        .read_json(function, request, None)
        .unwrap_or_else(|e| panic!("{} {request}: {e}", function.id()))
}

/// What serializing `value` to JSON costs.
fn json_floor(settings: &Settings, value: &Value) -> Sample {
    measure(1, settings.iterations, || {
        black_box(serde_json::to_vec(value).expect("serialize"));
    })
}

/// Every read figure on an up-to-date directory. `rescan` is the bare rescan's p50 (ms).
pub fn figures(settings: &Settings, directory: &Directory) -> Vec<Figure> {
    let roots = directory.roots().clone();
    let runs = settings.iterations;
    let base_runs = settings.baseline_runs;
    let mut out = Vec::new();

    // skills::list, every row.
    let all: Value = directory
        .read(ReadFunction::SkillsList, &json!({}), None)
        .expect("list");
    let ids: Vec<String> = all["skills"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect();
    let list = measure(1, runs, || {
        black_box(answer(directory, ReadFunction::SkillsList, &json!({})));
    });
    let list_value = measure(1, runs, || {
        black_box(
            directory
                .read(ReadFunction::SkillsList, &json!({}), None)
                .expect("list"),
        );
    });
    let list_base = measure(0, base_runs, || {
        black_box(baseline::list(&roots, None, None));
    });
    let list_floor = json_floor(settings, &all);
    let speedup = list_base.p50 / list.p50;
    let over_floor = list.p50 / list_floor.p50;
    out.push(
        Figure::timing(
            "list_all",
            &format!("skills::list, all rows ({})", ids.len()),
            &list,
        )
        .baseline("rescan + list", list_base.p50)
        .floor("to_vec of the rows", list_floor.p50)
        .target(
            5,
            "≥100× baseline, ≤3× floor",
            TARGET_SKILLS,
            speedup >= LIST_MIN_SPEEDUP && over_floor <= LIST_MAX_OVER_FLOOR,
        ),
    );
    out.push(
        Figure::timing("list_value", "skills::list as a Value (read)", &list_value)
            .baseline("rescan + list", list_base.p50)
            .floor("to_vec of the rows", list_floor.p50)
            .note("Directory::read: the cached rows serialized into a Value, as the worker hands the SDK a whole list"),
    );

    // skills::list with a prefix (one namespace) and with a search word.
    let namespace = ids
        .iter()
        .find(|id| id.contains('/'))
        .and_then(|id| id.split('/').next())
        .unwrap_or("")
        .to_string();
    let filtered = [
        (
            "list_prefix",
            "skills::list, prefix",
            json!({ "prefix": format!("{namespace}/") }),
            Some(namespace.as_str()),
            None,
        ),
        (
            "list_search",
            "skills::list, search",
            json!({ "search": "email" }),
            None,
            Some("email"),
        ),
    ];
    for (key, name, request, prefix, search) in filtered {
        let response: Value = directory
            .read(ReadFunction::SkillsList, &request, None)
            .expect("list");
        let rows = response["skills"].as_array().map_or(0, Vec::len);
        let sample = measure(1, runs, || {
            black_box(answer(directory, ReadFunction::SkillsList, &request));
        });
        let base = measure(0, base_runs, || {
            black_box(baseline::list(&roots, prefix, search));
        });
        let floor = json_floor(settings, &response);
        let mut figure = Figure::timing(key, &format!("{name} ({rows} rows)"), &sample)
            .baseline("rescan + filter", base.p50)
            .floor("to_vec of the rows", floor.p50)
            .note(format!("request {request}"));
        if key == "list_prefix" {
            figure = figure.check(
                15,
                LARGE,
                Check {
                    what: "p50",
                    measured: sample.p50,
                    cmp: Cmp::AtMost,
                    limit: LIST_PREFIX_MAX_MS,
                    unit: "ms",
                },
            );
        }
        out.push(figure);
    }

    // skills::get over many ids.
    let mut i = 0;
    let get = measure(10, runs * 10, || {
        i = (i + 7919) % ids.len();
        black_box(answer(
            directory,
            ReadFunction::SkillsGet,
            &json!({ "id": ids[i] }),
        ));
    });
    let mut j = 0;
    let get_base = measure(0, base_runs, || {
        j = (j + 7919) % ids.len();
        black_box(baseline::get(&roots, &ids[j]));
    });
    let one = directory
        .read(
            ReadFunction::SkillsGet,
            &json!({ "id": ids[ids.len() / 2] }),
            None,
        )
        .expect("get");
    let get_floor = json_floor(settings, &one);
    out.push(
        Figure::timing("get", "skills::get", &get)
            .baseline("rescan + lookup + read", get_base.p50)
            .floor("to_vec of one answer", get_floor.p50),
    );

    // skills::get of ids that are not there (D110 with suggestions): each a real id with its
    // last letter doubled, so it shares segments with many rows and is close to one.
    let missing: Vec<Value> = ids
        .iter()
        .step_by(ids.len().div_ceil(200).max(1))
        .map(|id| json!({ "id": format!("{id}{}", id.chars().last().unwrap_or('x')) }))
        .filter(|request| {
            directory
                .read(ReadFunction::SkillsGet, request, None)
                .is_err()
        })
        .collect();
    assert!(!missing.is_empty(), "no missing ids to ask for");
    let mut k = 0;
    let miss = measure(10, runs * 10, || {
        k = (k + 1) % missing.len();
        let answer = directory.read_json(ReadFunction::SkillsGet, &missing[k], None);
        black_box(answer.expect_err("a miss"));
    });
    let miss_over_hit = miss.p50 / get.p50;
    out.push(
        Figure::timing("get_miss", "skills::get, miss (D110)", &miss)
            .floor("skills::get, hit", get.p50)
            .check(
                15,
                LARGE,
                Check {
                    what: "p50 over a hit's",
                    measured: miss_over_hit,
                    cmp: Cmp::AtMost,
                    limit: GET_MISS_MAX_OVER_HIT,
                    unit: "×",
                },
            )
            .note(format!(
                "{} missing ids, each a real id with its last letter doubled",
                missing.len()
            )),
    );

    // skills::index.
    let index = measure(1, runs, || {
        black_box(answer(directory, ReadFunction::SkillsIndex, &json!({})));
    });
    let index_base = measure(0, base_runs, || {
        black_box(baseline::index(&roots));
    });
    let response = directory
        .read(ReadFunction::SkillsIndex, &json!({}), None)
        .expect("index");
    let index_floor = json_floor(settings, &response);
    out.push(
        Figure::timing("index", "skills::index", &index)
            .baseline("rescan + render", index_base.p50)
            .floor("to_vec of the answer", index_floor.p50)
            .check(
                15,
                LARGE,
                Check {
                    what: "p50",
                    measured: index.p50,
                    cmp: Cmp::AtMost,
                    limit: INDEX_MAX_MS,
                    unit: "ms",
                },
            )
            .note(format!(
                "{} worker overviews",
                response["workers_count"].as_u64().unwrap_or(0)
            )),
    );

    // check --spec: every served SKILL.md against the Agent Skills specification, from the
    // checks the index stored at reconcile (issue 30).
    let spec = measure(1, runs, || {
        black_box(directory.spec_check().expect("spec check"));
    });
    let checked = directory.spec_check().expect("spec check").checked;
    out.push(
        Figure::timing("check_spec", "check --spec", &spec).note(format!(
            "{checked} SKILL.md files checked among every skill row"
        )),
    );

    // agents::get with an extends chain.
    let chained = AGENTS_WITH_CHAIN
        .into_iter()
        .find(|id| {
            directory
                .read(ReadFunction::AgentsGet, &json!({ "id": id }), None)
                .is_ok()
        })
        .expect("a generated agent with an extends chain");
    let request = json!({ "id": chained });
    let agent = measure(10, runs * 10, || {
        black_box(answer(directory, ReadFunction::AgentsGet, &request));
    });
    let agent_base = measure(0, base_runs, || {
        black_box(baseline::agent(&roots, chained));
    });
    let response = directory
        .read(ReadFunction::AgentsGet, &request, None)
        .expect("agent");
    let agent_floor = json_floor(settings, &response);
    out.push(
        Figure::timing(
            "agent_get",
            &format!("agents::get, extends chain ({chained})"),
            &agent,
        )
        .baseline("rescan + resolve", agent_base.p50)
        .floor("to_vec of the answer", agent_floor.p50)
        .check(
            15,
            LARGE,
            Check {
                what: "p50",
                measured: agent.p50,
                cmp: Cmp::AtMost,
                limit: AGENT_GET_MAX_MS,
                unit: "ms",
            },
        ),
    );
    out
}
