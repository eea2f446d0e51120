//! `skills::list` with `since_revision` (issue 16) beside the whole list it replaces: a delta
//! after one changed skill, and the unchanged answer. Each is timed alternately with the whole
//! list (the baseline here: what a client polling with `if_revision` gets after any change),
//! and beside the floor of serializing the same small answer. Edits the suite's own copy.

use std::hint::black_box;

use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::{Value, json};

use crate::Settings;
use crate::measure::{Sample, measure, measure_pair};
use crate::results::Figure;

fn answer(directory: &Directory, request: &Value) -> String {
    directory
        .read_json(ReadFunction::SkillsList, request, None)
        .unwrap_or_else(|e| panic!("skills::list {request}: {e}"))
}

fn value(directory: &Directory, request: &Value) -> Value {
    serde_json::from_str(&answer(directory, request)).expect("JSON")
}

/// `request` timed alternately with the whole list, and the floor of serializing `answered`
/// (what `request` answers).
fn timed(
    settings: &Settings,
    directory: &Directory,
    request: &Value,
    answered: &Value,
) -> (Sample, Sample, Sample) {
    let runs = settings.iterations;
    let whole = json!({});
    let (sample, base) = measure_pair(
        1,
        runs,
        || {
            black_box(answer(directory, request));
        },
        || {
            black_box(answer(directory, &whole));
        },
    );
    let floor = measure(1, runs * 10, || {
        black_box(serde_json::to_vec(answered).expect("serialize"));
    });
    (sample, base, floor)
}

pub fn figures(settings: &Settings, directory: &Directory) -> Vec<Figure> {
    let whole = json!({});
    let first = value(directory, &json!({ "since_revision": 0 }));
    let held = first["revision"].as_u64().expect("a revision");
    let id = first["skills"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .find(|id| id.contains('/') && !id.ends_with("/index"))
        .expect("a skill to update")
        .to_string();
    let mut out = Vec::new();

    // The unchanged answer: the poll of an idle UI.
    let current = json!({ "since_revision": held });
    let unchanged = value(directory, &current);
    assert_eq!(unchanged["unchanged"], true, "{unchanged}");
    let (sample, base, floor) = timed(settings, directory, &current, &unchanged);
    out.push(
        Figure::timing(
            "list_unchanged",
            "skills::list, since_revision, nothing changed",
            &sample,
        )
        .baseline("the whole list", base.p50)
        .floor("to_vec of the answer", floor.p50),
    );

    // One skill changed since the held revision: the poll after a write.
    directory
        .write(
            WriteFunction::SkillsUpdate,
            &json!({ "id": id, "content": "---\ntitle: Changed for the delta\n---\n# Changed\n\nOne changed skill.\n" }),
            None,
        )
        .expect("update one skill");
    let delta = value(directory, &current);
    assert_eq!(
        delta["changed"].as_array().map(Vec::len),
        Some(1),
        "one changed row: {delta}"
    );
    // The first whole list after the write decodes the new revision's rows; time the cached one.
    answer(directory, &whole);
    let (sample, base, floor) = timed(settings, directory, &current, &delta);
    let bytes = serde_json::to_vec(&delta).expect("serialize").len();
    let whole_bytes = answer(directory, &whole).len();
    out.push(
        Figure::timing(
            "list_delta",
            "skills::list, since_revision, one skill changed",
            &sample,
        )
        .baseline("the whole list", base.p50)
        .floor("to_vec of the answer", floor.p50)
        .note(format!(
            "{bytes} bytes against {whole_bytes} for the whole list; the first whole list after a write also decodes every row (not timed here)"
        )),
    );
    out
}
