//! Updates as plan, then apply (issue 29), against the loopback registry publishing several
//! versions: a plan lists what upstream added, changed and removed and what was edited
//! locally; apply merges, keeps or takes upstream by `on_conflict`; a plan whose files moved is
//! refused with a fresh one; a download of a locked namespace goes the same way. The property
//! test draws random local edits and upstream changes and holds every outcome to the
//! three-way expectation: no local edit is lost without `take-upstream`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use iii_directory::download::DownloadFunction::FromRegistry;
use iii_directory::download::lock;
use iii_directory::download::plan;
use test_support::generate::Rng;

use crate::Setup;

const NS: &str = "up";

fn publish(s: &Setup, version: &str, files: &BTreeMap<String, String>) {
    let files: Vec<(String, String)> = files.iter().map(|(p, c)| (p.clone(), c.clone())).collect();
    s.server.publish(NS, version, &files);
}

async fn plan_update(s: &Setup, request: Value) -> Result<Value, String> {
    plan::plan_update(&s.directory, &s.registry, &request)
        .await
        .map_err(|e| e.to_string())
}

async fn apply(s: &Setup, request: Value) -> Result<Value, String> {
    plan::apply(&s.directory, &s.registry, &request)
        .await
        .map_err(|e| e.to_string())
}

fn read(s: &Setup, rel: &str) -> Option<String> {
    std::fs::read_to_string(s.tree.path(&format!("skills/{NS}/{rel}"))).ok()
}

fn lines(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix} line {i}\n")).collect()
}

fn row<'a>(plan: &'a Value, path: &str) -> &'a Value {
    plan["files"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["path"] == path))
        .unwrap_or_else(|| panic!("{path} not in the plan: {plan}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_names_each_side_and_apply_merges_keeps_and_removes() {
    let s = Setup::new();
    let mut v1 = BTreeMap::new();
    v1.insert(
        "SKILL.md".to_string(),
        format!("# Up\n\n{}", lines("skill", 8)),
    );
    v1.insert("mine.md".to_string(), lines("mine", 4));
    v1.insert("both.md".to_string(), lines("both", 4));
    v1.insert("gone.md".to_string(), lines("gone", 2));
    v1.insert("stays.md".to_string(), lines("stays", 2));
    publish(&s, "1.0.0", &v1);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("first download");

    // Local: an edit of SKILL.md's first lines, one of mine.md, one of both.md's line 1.
    let skill_local = read(&s, "SKILL.md")
        .expect("skill")
        .replace("skill line 0", "skill line 0, mine");
    s.tree.write(&format!("skills/{NS}/SKILL.md"), &skill_local);
    s.tree.write(&format!("skills/{NS}/mine.md"), "all mine\n");
    let both_local = lines("both", 4).replace("both line 1", "both line 1, mine");
    s.tree.write(&format!("skills/{NS}/both.md"), &both_local);

    // Upstream 2.0.0: SKILL.md's last line, both.md's line 1 too, gone.md removed, new.md added.
    let mut v2 = v1.clone();
    v2.insert(
        "SKILL.md".into(),
        v1["SKILL.md"].replace("skill line 7", "skill line 7, upstream"),
    );
    v2.insert(
        "both.md".into(),
        lines("both", 4).replace("both line 1", "both line 1, theirs"),
    );
    v2.remove("gone.md");
    v2.insert("new.md".into(), "# New\n".into());
    v2.insert("scripts/run.sh".into(), "#!/bin/sh\necho run\n".into());
    publish(&s, "2.0.0", &v2);

    let planned = plan_update(&s, json!({"namespace": NS}))
        .await
        .expect("plan");
    assert_eq!(planned["to"]["version"], "2.0.0", "{planned}");
    assert_eq!(planned["from"]["version"], "1.0.0");
    assert!(planned["expires_in_ms"].as_u64().expect("ms") > 0);
    let skill = row(&planned, "SKILL.md");
    assert_eq!(
        (&skill["upstream"], &skill["local"]),
        (&json!("changed"), &json!("modified"))
    );
    assert_eq!(skill["merge"], "clean");
    assert_eq!(row(&planned, "both.md")["merge"], "conflict");
    assert_eq!(row(&planned, "mine.md")["upstream"], "unchanged");
    assert_eq!(row(&planned, "gone.md")["upstream"], "removed");
    assert_eq!(row(&planned, "new.md")["upstream"], "added");
    assert!(
        planned["files"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|r| r["path"] != "stays.md"),
        "a file nothing happened to is not listed"
    );
    assert_eq!(planned["review"]["executables"], json!(["scripts/run.sh"]));
    assert_eq!(planned["summary"]["conflicts"], 1);
    let before = s.state();
    assert_eq!(s.state(), before, "a plan writes nothing");

    let applied = apply(&s, json!({"plan_id": planned["plan_id"]}))
        .await
        .expect("apply");
    assert_eq!(applied["merged"], json!(["SKILL.md"]), "{applied}");
    assert_eq!(applied["removed"], json!(["gone.md"]));
    assert_eq!(applied["conflicts"][0]["path"], "both.md");
    assert_eq!(applied["conflicts"][0]["upstream_copy"], "both.md.upstream");
    let merged = read(&s, "SKILL.md").expect("merged");
    assert!(merged.contains("skill line 0, mine") && merged.contains("skill line 7, upstream"));
    assert_eq!(read(&s, "mine.md").as_deref(), Some("all mine\n"));
    assert_eq!(read(&s, "both.md"), Some(both_local));
    assert_eq!(read(&s, "both.md.upstream"), Some(v2["both.md"].clone()));
    assert_eq!(read(&s, "gone.md"), None);
    assert_eq!(read(&s, "new.md").as_deref(), Some("# New\n"));
    // The lock names 2.0.0 and upstream's bytes; indexed when apply returns.
    let locked = lock::read(&s.tree.path("skills/iii-bundles.lock.json")).expect("lock");
    let entry = &locked.bundles[NS];
    assert!(
        matches!(&entry.source, lock::LockedSource::Registry { version: Some(v), .. } if v == "2.0.0")
    );
    assert_eq!(entry.files.len(), v2.len());
    let ids = crate::common::skill_ids(&s.directory);
    assert!(ids.iter().any(|id| id == "up/new"), "{ids:?}");
    assert!(!ids.iter().any(|id| id.contains("upstream")), "{ids:?}");
    // `check` names the upstream copy with its reason.
    let skipped = s.directory.skipped().expect("skipped");
    let copy = skipped
        .iter()
        .find(|k| k.path.ends_with("up/both.md.upstream"))
        .unwrap_or_else(|| panic!("the upstream copy is not listed: {skipped:?}"));
    assert!(
        copy.reason.to_string().contains("merge it by hand"),
        "{}",
        copy.reason
    );

    // A merged file holds the user's edit: the next version finds it modified, never the
    // bundle's own bytes to replace.
    let mut v3 = v2.clone();
    v3.insert(
        "SKILL.md".into(),
        v2["SKILL.md"].replace("skill line 4", "skill line 4, v3"),
    );
    publish(&s, "3.0.0", &v3);
    let next = plan_update(&s, json!({"namespace": NS}))
        .await
        .expect("plan v3");
    assert_eq!(row(&next, "SKILL.md")["local"], "modified", "{next}");
    assert_eq!(row(&next, "SKILL.md")["merge"], "clean");

    // A plan is used once; an unknown one is D337.
    let again = apply(&s, json!({"plan_id": planned["plan_id"]}))
        .await
        .expect_err("used");
    assert!(again.starts_with("D337 not_found:"), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_plan_is_refused_with_a_fresh_one_and_downloads_merge_the_same_way() {
    let s = Setup::new();
    let mut v1 = BTreeMap::new();
    v1.insert("SKILL.md".to_string(), lines("skill", 6));
    publish(&s, "1.0.0", &v1);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("first download");
    let mut v2 = v1.clone();
    v2.insert(
        "SKILL.md".into(),
        lines("skill", 6).replace("skill line 5", "skill line 5, up"),
    );
    publish(&s, "2.0.0", &v2);
    let planned = plan_update(&s, json!({"namespace": NS}))
        .await
        .expect("plan");
    // The file changes after the plan: refused, nothing written, a fresh plan in the error.
    let edited = lines("skill", 6).replace("skill line 0", "skill line 0, mine");
    s.tree.write(&format!("skills/{NS}/SKILL.md"), &edited);
    let before = s.state();
    let err = apply(&s, json!({"plan_id": planned["plan_id"]}))
        .await
        .expect_err("stale");
    assert!(err.starts_with("D336 conflict:"), "{err}");
    assert_eq!(s.state(), before, "nothing written");
    let fresh: Value =
        serde_json::from_str(err.split_once("A fresh plan: ").expect("a fresh plan").1)
            .expect("the fresh plan is JSON");
    assert_ne!(fresh["plan_id"], planned["plan_id"]);
    assert_eq!(row(&fresh, "SKILL.md")["merge"], "clean");
    let applied = apply(
        &s,
        json!({"plan_id": fresh["plan_id"], "on_conflict": "keep-local"}),
    )
    .await
    .expect("fresh plan applies");
    assert_eq!(applied["kept_local"], json!(["SKILL.md"]));
    assert_eq!(read(&s, "SKILL.md"), Some(edited.clone()));

    // A download of the locked namespace plans and applies: merged by default...
    let mut v3 = v2.clone();
    v3.insert(
        "SKILL.md".into(),
        v2["SKILL.md"].replace("skill line 3", "skill line 3, v3"),
    );
    publish(&s, "3.0.0", &v3);
    let answer = s
        .download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("download");
    assert_eq!(answer["merged"], json!(["SKILL.md"]), "{answer}");
    assert_eq!(answer["kept_local"], json!(["SKILL.md"]));
    let merged = read(&s, "SKILL.md").expect("merged");
    assert!(
        merged.contains("skill line 0, mine") && merged.contains("skill line 3, v3"),
        "{merged}"
    );
    // ...and force takes upstream.
    let forced = s
        .download(FromRegistry, json!({"worker": NS, "force": true}))
        .await
        .expect("forced");
    assert_eq!(forced["kept_local"], json!([]));
    assert_eq!(read(&s, "SKILL.md"), Some(v3["SKILL.md"].clone()));

    let unknown = plan_update(&s, json!({"namespace": "ghost"}))
        .await
        .expect_err("not locked");
    assert!(unknown.starts_with("D334 not_found:"), "{unknown}");
}

/// A file the bundle installed, edited here, that the next version no longer has: kept as the
/// user has it and named in `kept_local` (and in `conflicts`), by a download and by apply alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_file_upstream_removed_is_kept_and_named_in_kept_local() {
    for through_apply in [false, true] {
        let s = Setup::new();
        let mut v1 = BTreeMap::new();
        v1.insert("SKILL.md".to_string(), "# Up\n".to_string());
        v1.insert("extra.md".to_string(), lines("extra", 3));
        publish(&s, "1.0.0", &v1);
        s.download(FromRegistry, json!({"worker": NS}))
            .await
            .expect("first download");
        let edited = lines("extra", 3).replace("extra line 1", "extra line 1, mine");
        s.tree.write(&format!("skills/{NS}/extra.md"), &edited);
        let mut v2 = v1.clone();
        v2.remove("extra.md");
        publish(&s, "2.0.0", &v2);
        let answer = if through_apply {
            let planned = plan_update(&s, json!({"namespace": NS}))
                .await
                .expect("plan");
            apply(&s, json!({"plan_id": planned["plan_id"]}))
                .await
                .expect("apply")
        } else {
            s.download(FromRegistry, json!({"worker": NS}))
                .await
                .expect("download")
        };
        assert_eq!(answer["kept_local"], json!(["extra.md"]), "{answer}");
        assert_eq!(answer["conflicts"], json!([{"path": "extra.md"}]));
        assert_eq!(answer["removed"], json!([]));
        assert_eq!(read(&s, "extra.md"), Some(edited));
    }
}

/// One file's three sides in the property test: base lines, the lines each side replaced.
#[derive(Clone, Debug)]
struct Drawn {
    lines: usize,
    local: BTreeMap<usize, String>,
    upstream: BTreeMap<usize, String>,
}

fn text(name: &str, n: usize, edits: &[&BTreeMap<usize, String>]) -> String {
    (0..n)
        .map(|i| {
            edits
                .iter()
                .find_map(|e| e.get(&i).cloned())
                .unwrap_or_else(|| format!("{name} line {i}"))
                + "\n"
        })
        .collect()
}

fn draw_edits(rng: &mut Rng, n: usize, side: &str, round: usize) -> BTreeMap<usize, String> {
    let mut edits = BTreeMap::new();
    for _ in 0..=rng.below(3) {
        let at = rng.below(n);
        edits.insert(at, format!("{side} {round} edit of line {at}"));
    }
    edits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_edits_on_both_sides_land_as_the_three_way_expectation() {
    let rounds: usize = std::env::var("PLAN_PROPERTY_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let mut rng = Rng::new(0x0029_7A11);
    let choices = ["merge", "keep-local", "take-upstream"];
    for round in 0..rounds {
        let s = Setup::new();
        let count = 3 + rng.below(5);
        let mut drawn: BTreeMap<String, Drawn> = BTreeMap::new();
        let mut v1 = BTreeMap::new();
        for f in 0..count {
            let name = format!("f{f}");
            let lines = 3 + rng.below(8);
            v1.insert(format!("{name}.md"), text(&name, lines, &[]));
            drawn.insert(
                name,
                Drawn {
                    lines,
                    local: BTreeMap::new(),
                    upstream: BTreeMap::new(),
                },
            );
        }
        publish(&s, "1.0.0", &v1);
        s.download(FromRegistry, json!({"worker": NS}))
            .await
            .expect("first download");

        let mut v2 = v1.clone();
        let mut removed = Vec::new();
        let mut added = Vec::new();
        for (name, d) in drawn.iter_mut() {
            if rng.chance(50) {
                d.local = draw_edits(&mut rng, d.lines, "local", round);
                let local = text(name, d.lines, &[&d.local]);
                s.tree.write(&format!("skills/{NS}/{name}.md"), &local);
            }
            match rng.below(10) {
                0 => {
                    v2.remove(&format!("{name}.md"));
                    removed.push(name.clone());
                }
                1..=5 => {
                    d.upstream = draw_edits(&mut rng, d.lines, "upstream", round);
                    v2.insert(format!("{name}.md"), text(name, d.lines, &[&d.upstream]));
                }
                _ => {}
            }
        }
        if rng.chance(50) {
            v2.insert("added.md".into(), "# Added\n".into());
            added.push("added.md");
        }
        publish(&s, "2.0.0", &v2);
        let choice = choices[rng.below(3)];
        let planned = plan_update(&s, json!({"namespace": NS}))
            .await
            .expect("plan");
        let applied = apply(
            &s,
            json!({"plan_id": planned["plan_id"], "on_conflict": choice}),
        )
        .await
        .unwrap_or_else(|e| panic!("round {round}: {e}"));

        for (name, d) in &drawn {
            let file = format!("{name}.md");
            let at = |what: &str| format!("round {round} ({choice}): {file} {what}; {applied}");
            let on_disk = read(&s, &file);
            let beside = read(&s, &format!("{file}.upstream"));
            let local = text(name, d.lines, &[&d.local]);
            let edited = !d.local.is_empty();
            if removed.contains(name) {
                let expected = (edited && choice != "take-upstream").then_some(local);
                assert_eq!(on_disk, expected, "{}", at("removed upstream"));
                continue;
            }
            let upstream = text(name, d.lines, &[&d.upstream]);
            let both = edited && !d.upstream.is_empty();
            // Diff3 merges edits that no unchanged line separates as one stretch: a conflict.
            let touching = d
                .local
                .keys()
                .any(|i| d.upstream.keys().any(|j| i.abs_diff(*j) <= 1));
            let (expected, side) = match choice {
                "take-upstream" => (upstream, None),
                _ if !edited => (upstream, None),
                _ if !both => (local, None),
                "keep-local" => (local, None),
                _ if touching => (local, Some(upstream)),
                _ => (text(name, d.lines, &[&d.local, &d.upstream]), None),
            };
            assert_eq!(on_disk.as_ref(), Some(&expected), "{}", at("content"));
            assert_eq!(beside, side, "{}", at("upstream copy"));
        }
        for name in added {
            assert_eq!(
                read(&s, name).as_deref(),
                Some("# Added\n"),
                "round {round}"
            );
        }
        // The lock records 2.0.0's files and bytes.
        let locked = lock::read(&s.tree.path("skills/iii-bundles.lock.json")).expect("lock");
        let shas: BTreeMap<String, String> = locked.bundles[NS]
            .files
            .iter()
            .map(|f| {
                (
                    f.path.trim_start_matches("up/").to_string(),
                    f.sha256.clone(),
                )
            })
            .collect();
        let expected: BTreeMap<String, String> = v2
            .iter()
            .map(|(p, c)| (p.clone(), lock::sha256_hex(c.as_bytes())))
            .collect();
        assert_eq!(shas, expected, "round {round}: the lock");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_adding_an_executable_is_refused_at_apply_when_the_setting_says_so() {
    let s = Setup::with(|config| config.settings.download_allow_executables = false);
    let mut v1 = BTreeMap::new();
    v1.insert("SKILL.md".to_string(), "# Up\n".to_string());
    publish(&s, "1.0.0", &v1);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("first download");
    let mut v2 = v1.clone();
    v2.insert("SKILL.md".into(), "# Up, 2.0.0\n".into());
    v2.insert("scripts/send.sh".into(), "#!/bin/sh\necho sent\n".into());
    publish(&s, "2.0.0", &v2);
    // The plan shows what the update brings; apply refuses it whole.
    let planned = plan_update(&s, json!({"namespace": NS}))
        .await
        .expect("plan");
    assert_eq!(planned["review"]["executables"], json!(["scripts/send.sh"]));
    let before = s.state();
    let err = apply(&s, json!({"plan_id": planned["plan_id"]}))
        .await
        .expect_err("refused");
    assert!(err.starts_with("D333 invalid_input:"), "{err}");
    assert!(err.contains("\"scripts/send.sh\""), "{err}");
    assert_eq!(s.state(), before, "nothing written, the lock untouched");
}
