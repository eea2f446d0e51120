//! The `<name>.upstream` copies a conflicting update leaves (issue 29): status and verify tell
//! a live copy (its conflict still open) from a stale one (the file is clean again, or upstream
//! moved past the copy's text), the plan says which copies its apply removes, and the apply
//! that lands a version where the file is no longer in conflict removes them in the same
//! landing, while a copy whose conflict is still open stays.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use iii_directory::download::BundlesFunction;
use iii_directory::download::DownloadFunction::FromRegistry;
use iii_directory::download::{guard, plan, status};

use crate::Setup;

const NS: &str = "copies";

fn lines(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix} line {i}\n")).collect()
}

fn publish(s: &Setup, version: &str, files: &BTreeMap<String, String>) {
    let files: Vec<(String, String)> = files.iter().map(|(p, c)| (p.clone(), c.clone())).collect();
    s.server.publish(NS, version, &files);
}

fn path(s: &Setup, rel: &str) -> std::path::PathBuf {
    s.tree.path(&format!("skills/{NS}/{rel}"))
}

fn read(s: &Setup, rel: &str) -> Option<String> {
    std::fs::read_to_string(path(s, rel)).ok()
}

fn status_of(s: &Setup, function: BundlesFunction) -> Value {
    status::answer(
        &s.directory.config().paths,
        function,
        &json!({ "namespace": NS }),
    )
    .expect("status")
}

fn row<'a>(plan: &'a Value, path: &str) -> &'a Value {
    plan["files"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["path"] == path))
        .unwrap_or_else(|| panic!("{path} not in the plan: {plan}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_conflict_loses_its_upstream_copy_and_an_open_one_keeps_it() {
    let s = Setup::new();
    let names = ["both.md", "taken.md", "open.md"];
    let v1: BTreeMap<String, String> = names.iter().map(|n| (n.to_string(), lines(n, 6))).collect();
    publish(&s, "1.0.0", &v1);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("first download");

    // Line 1 of every file edited here and upstream alike: three conflicts.
    let mut v2 = v1.clone();
    for name in names {
        let text = lines(name, 6);
        s.tree.write(
            &format!("skills/{NS}/{name}"),
            &text.replace(&format!("{name} line 1"), &format!("{name} line 1, mine")),
        );
        v2.insert(
            name.into(),
            text.replace(&format!("{name} line 1"), &format!("{name} line 1, theirs")),
        );
    }
    publish(&s, "2.0.0", &v2);
    let planned = plan::plan_update(&s.directory, &s.registry, &json!({"namespace": NS}))
        .await
        .expect("plan v2");
    let applied = plan::apply(
        &s.directory,
        &s.registry,
        &json!({"plan_id": planned["plan_id"]}),
    )
    .await
    .expect("apply v2");
    assert_eq!(
        applied["conflicts"].as_array().map(Vec::len),
        Some(3),
        "{applied}"
    );
    assert_eq!(applied["upstream_copies_removed"], json!([]));
    for name in names {
        assert_eq!(
            read(&s, &format!("{name}.upstream")),
            Some(v2[name].clone())
        );
    }

    // Status: three live copies, none stale; the copies are not untracked files.
    let listed = status_of(&s, BundlesFunction::Get);
    assert_eq!(listed["state"], "modified", "{listed}");
    assert_eq!(
        listed["upstream_copies"],
        json!(["both.md.upstream", "open.md.upstream", "taken.md.upstream"])
    );
    assert_eq!(listed["stale_upstream_copies"], json!([]));
    assert_eq!(listed["untracked"], json!([]));

    // The user settles taken.md by taking the upstream text, and leaves the copy behind.
    s.tree
        .write(&format!("skills/{NS}/taken.md"), &v2["taken.md"]);
    let listed = status_of(&s, BundlesFunction::Get);
    assert_eq!(
        listed["stale_upstream_copies"],
        json!(["taken.md.upstream"]),
        "{listed}"
    );
    let verified = status_of(&s, BundlesFunction::Verify);
    assert_eq!(verified["ok"], false);
    assert_eq!(
        verified["bundles"][0]["stale_upstream_copies"],
        json!(["taken.md.upstream"]),
        "{verified}"
    );

    // 3.0.0 changes both.md's line 4 (which merges with the edit of line 1) and nothing else.
    let mut v3 = v2.clone();
    v3.insert(
        "both.md".into(),
        v2["both.md"].replace("both.md line 4", "both.md line 4, v3"),
    );
    publish(&s, "3.0.0", &v3);
    let planned = plan::plan_update(&s.directory, &s.registry, &json!({"namespace": NS}))
        .await
        .expect("plan v3");
    let all = json!(["merge", "keep-local", "take-upstream"]);
    let both = row(&planned, "both.md");
    assert_eq!(both["merge"], "clean", "{planned}");
    assert_eq!(both["upstream_copy"]["path"], "both.md.upstream");
    assert_eq!(both["upstream_copy"]["removed_by"], all);
    // Clean again, with a copy beside it: listed, for the copy.
    let taken = row(&planned, "taken.md");
    assert_eq!(
        (&taken["upstream"], &taken["local"]),
        (&json!("unchanged"), &json!("clean"))
    );
    assert_eq!(taken["upstream_copy"]["removed_by"], all);
    // Still in conflict (edited here, upstream's text the copy's): no choice removes it but
    // take-upstream, which overwrites the file.
    let open = row(&planned, "open.md");
    assert_eq!(
        open["upstream_copy"]["removed_by"],
        json!(["take-upstream"]),
        "{planned}"
    );
    assert_eq!(planned["summary"]["upstream_copies_removed"], 2);

    let before_open = read(&s, "open.md");
    let applied = plan::apply(
        &s.directory,
        &s.registry,
        &json!({"plan_id": planned["plan_id"]}),
    )
    .await
    .expect("apply v3");
    assert_eq!(
        applied["upstream_copies_removed"],
        json!(["both.md.upstream", "taken.md.upstream"]),
        "{applied}"
    );
    assert_eq!(applied["merged"], json!(["both.md"]));
    assert!(!path(&s, "both.md.upstream").exists());
    assert!(!path(&s, "taken.md.upstream").exists());
    assert_eq!(read(&s, "open.md.upstream"), Some(v2["open.md"].clone()));
    assert_eq!(read(&s, "open.md"), before_open);
    let merged = read(&s, "both.md").expect("both.md");
    assert!(merged.contains("both.md line 1, mine") && merged.contains("both.md line 4, v3"));
    let listed = status_of(&s, BundlesFunction::Get);
    assert_eq!(
        listed["upstream_copies"],
        json!(["open.md.upstream"]),
        "{listed}"
    );
    assert_eq!(listed["stale_upstream_copies"], json!([]));

    // The bundle's record no longer names the removed copies: a copy made again by hand is
    // the user's, never a file the bundle may overwrite unasked.
    let record = std::fs::read_to_string(path(&s, guard::RECORD_FILE)).expect("the record");
    assert!(!record.contains("both.md.upstream"), "{record}");
    assert!(record.contains("open.md.upstream"), "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_of_the_locked_namespace_removes_a_settled_copy_too() {
    let s = Setup::new();
    let v1: BTreeMap<String, String> = [("a.md".to_string(), lines("a", 4))].into();
    publish(&s, "1.0.0", &v1);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("first download");
    s.tree.write(
        &format!("skills/{NS}/a.md"),
        &lines("a", 4).replace("a line 1", "a line 1, mine"),
    );
    let v2: BTreeMap<String, String> = [(
        "a.md".to_string(),
        lines("a", 4).replace("a line 1", "a line 1, theirs"),
    )]
    .into();
    publish(&s, "2.0.0", &v2);
    let landed = s
        .download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("download 2.0.0");
    assert_eq!(
        landed["conflicts"][0]["upstream_copy"], "a.md.upstream",
        "{landed}"
    );
    assert_eq!(landed["upstream_copies_removed"], json!([]));
    // Settled by taking upstream's text; the next download says it removed the copy.
    s.tree.write(&format!("skills/{NS}/a.md"), &v2["a.md"]);
    let again = s
        .download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("download again");
    assert_eq!(
        again["upstream_copies_removed"],
        json!(["a.md.upstream"]),
        "{again}"
    );
    assert!(!path(&s, "a.md.upstream").exists());
    let listed = status_of(&s, BundlesFunction::Get);
    assert_eq!(listed["state"], "clean", "{listed}");
    assert_eq!(listed["upstream_copies"], json!([]));
}

/// How the user settles the conflict a hand-made file met when a new version added it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Settle {
    /// `mv notes.md.upstream notes.md`.
    TakeUpstream,
    /// `rm notes.md.upstream`.
    KeepMine,
}

async fn download_answer(s: &Setup, request: Value) -> Value {
    s.download(FromRegistry, request.clone())
        .await
        .unwrap_or_else(|e| panic!("download {request}: {e}"))
}

/// A file made here by hand that a new version of the bundle adds: the download keeps it and
/// lands upstream's text beside it. Once the user settles that conflict, the file is the
/// bundle's like any file it installed: the next versions update it, merge with it or keep an
/// edit of it with upstream's text beside it, and `force` replaces it. (The bundle's record,
/// which decides what a landing may replace, once left such a file out while the lock listed
/// it, and every later update was refused whole with D330, forced or not.)
async fn a_settled_collision_with_a_hand_made_file_is_the_bundles_file(settle: Settle) {
    let s = Setup::new();
    let v1: BTreeMap<String, String> = [("SKILL.md".to_string(), "# Demo\n".to_string())].into();
    publish(&s, "1.0.0", &v1);
    download_answer(&s, json!({"worker": NS})).await;
    let mine = lines("notes", 6).replace("notes line 0", "notes line 0, mine");
    s.tree.write(&format!("skills/{NS}/notes.md"), &mine);

    // 2.0.0 adds notes.md: the user's stays, upstream's lands beside it.
    let mut v2 = v1.clone();
    v2.insert("notes.md".into(), lines("notes", 6));
    publish(&s, "2.0.0", &v2);
    let landed = download_answer(&s, json!({"worker": NS})).await;
    assert_eq!(
        landed["conflicts"],
        json!([{"path": "notes.md", "upstream_copy": "notes.md.upstream"}]),
        "{landed}"
    );
    assert_eq!(landed["kept_local"], json!(["notes.md"]));
    assert_eq!(read(&s, "notes.md"), Some(mine.clone()));
    assert_eq!(read(&s, "notes.md.upstream"), Some(v2["notes.md"].clone()));

    // Settled as the README says.
    match settle {
        Settle::TakeUpstream => {
            std::fs::rename(path(&s, "notes.md.upstream"), path(&s, "notes.md"))
        }
        Settle::KeepMine => std::fs::remove_file(path(&s, "notes.md.upstream")),
    }
    .expect("settle");
    let listed = status_of(&s, BundlesFunction::Get);
    let (state, modified) = match settle {
        Settle::TakeUpstream => ("clean", json!([])),
        Settle::KeepMine => ("modified", json!(["notes.md"])),
    };
    assert_eq!(listed["state"], state, "{listed}");
    assert_eq!(listed["modified"], modified);
    assert_eq!(listed["upstream_copies"], json!([]));

    // 3.0.0 changes line 4: taken as is where the user took upstream's text, merged with the
    // user's line 0 where they kept theirs.
    let mut v3 = v2.clone();
    v3.insert(
        "notes.md".into(),
        v2["notes.md"].replace("notes line 4", "notes line 4, v3"),
    );
    publish(&s, "3.0.0", &v3);
    let landed = download_answer(&s, json!({"worker": NS})).await;
    assert_eq!(landed["conflicts"], json!([]), "{landed}");
    assert_eq!(landed["skills_written"], json!(["SKILL.md", "notes.md"]));
    match settle {
        Settle::TakeUpstream => {
            assert_eq!(landed["kept_local"], json!([]), "{landed}");
            assert_eq!(read(&s, "notes.md"), Some(v3["notes.md"].clone()));
        }
        Settle::KeepMine => {
            assert_eq!(landed["merged"], json!(["notes.md"]), "{landed}");
            assert_eq!(landed["kept_local"], json!(["notes.md"]));
            assert_eq!(
                read(&s, "notes.md"),
                Some(v3["notes.md"].replace("notes line 0", "notes line 0, mine"))
            );
        }
    }

    // An edit here of the line 4.0.0 changes too: kept, upstream's text beside it.
    let edited = read(&s, "notes.md")
        .expect("notes.md")
        .replace("notes line 2", "notes line 2, edited here");
    s.tree.write(&format!("skills/{NS}/notes.md"), &edited);
    let mut v4 = v3.clone();
    v4.insert(
        "notes.md".into(),
        v3["notes.md"].replace("notes line 2", "notes line 2, v4"),
    );
    publish(&s, "4.0.0", &v4);
    let landed = download_answer(&s, json!({"worker": NS})).await;
    assert_eq!(
        landed["conflicts"],
        json!([{"path": "notes.md", "upstream_copy": "notes.md.upstream"}]),
        "{landed}"
    );
    assert_eq!(landed["kept_local"], json!(["notes.md"]));
    assert_eq!(read(&s, "notes.md"), Some(edited));
    assert_eq!(read(&s, "notes.md.upstream"), Some(v4["notes.md"].clone()));

    // force replaces it with upstream's bytes, and the copy goes with the conflict.
    let forced = download_answer(&s, json!({"worker": NS, "force": true})).await;
    assert_eq!(forced["kept_local"], json!([]), "{forced}");
    assert_eq!(
        forced["upstream_copies_removed"],
        json!(["notes.md.upstream"])
    );
    assert_eq!(read(&s, "notes.md"), Some(v4["notes.md"].clone()));
    assert!(!path(&s, "notes.md.upstream").exists());
    let listed = status_of(&s, BundlesFunction::Get);
    assert_eq!(listed["state"], "clean", "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collision_settled_by_taking_upstreams_text_is_the_bundles_file() {
    a_settled_collision_with_a_hand_made_file_is_the_bundles_file(Settle::TakeUpstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collision_settled_by_keeping_ones_own_text_is_the_bundles_file() {
    a_settled_collision_with_a_hand_made_file_is_the_bundles_file(Settle::KeepMine).await;
}

/// A forced download never replaces a file made here by hand, which the bundle never installed:
/// like a plain download it keeps it and lands upstream's text beside it (a forced one was
/// refused whole with D330 where the plain one landed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_download_keeps_a_hand_made_file_a_new_version_adds() {
    let s = Setup::new();
    let v1: BTreeMap<String, String> = [("SKILL.md".to_string(), "# Demo\n".to_string())].into();
    publish(&s, "1.0.0", &v1);
    download_answer(&s, json!({"worker": NS})).await;
    let mine = "# Mine\n\nprecious\n";
    s.tree.write(&format!("skills/{NS}/mine.md"), mine);
    let mut v2 = v1.clone();
    v2.insert("mine.md".into(), "# Theirs\n".into());
    v2.insert("SKILL.md".into(), "# Demo 2\n".into());
    publish(&s, "2.0.0", &v2);
    let forced = download_answer(&s, json!({"worker": NS, "force": true})).await;
    assert_eq!(
        forced["conflicts"],
        json!([{"path": "mine.md", "upstream_copy": "mine.md.upstream"}]),
        "{forced}"
    );
    assert_eq!(read(&s, "mine.md").as_deref(), Some(mine));
    assert_eq!(read(&s, "mine.md.upstream").as_deref(), Some("# Theirs\n"));
    assert_eq!(read(&s, "SKILL.md").as_deref(), Some("# Demo 2\n"));
}

/// A new version that adds an agent profile where the user has one of that id is refused, as
/// the first download of such a bundle is (`D330`), forced or not: a profile in the shared
/// `agents_folder` never becomes a bundle's (it once did: kept with `.upstream` beside it, listed
/// in the lock as the bundle's, and every later `force` refused). Nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_never_takes_over_a_users_agent_profile() {
    let s = Setup::new();
    let v1: BTreeMap<String, String> = [("SKILL.md".to_string(), "# Demo\n".to_string())].into();
    publish(&s, "1.0.0", &v1);
    download_answer(&s, json!({"worker": NS})).await;
    let profile = "---\nname: mine\ndescription: my own\n---\nmine\n";
    s.tree.write("agents/mine.md", profile);
    let lock_before = std::fs::read(&s.directory.config().paths.bundles_lock).expect("lock");
    let mut v2 = v1.clone();
    v2.insert(
        "agents/mine.md".into(),
        "---\nname: mine\ndescription: the bundle's\n---\ntheirs\n".into(),
    );
    publish(&s, "2.0.0", &v2);
    for request in [json!({"worker": NS}), json!({"worker": NS, "force": true})] {
        let refused = s
            .download(FromRegistry, request.clone())
            .await
            .expect_err("a user's profile in the way");
        assert!(
            refused.starts_with("D330 conflict: bundle file \"agents/mine.md\" would replace the agent profile \"mine\""),
            "{request}: {refused}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(s.tree.path("agents/mine.md")).expect("profile"),
        profile
    );
    assert!(!s.tree.path("agents/mine.md.upstream").exists());
    assert_eq!(
        std::fs::read(&s.directory.config().paths.bundles_lock).expect("lock"),
        lock_before
    );
}

/// A bundle whose record of what it wrote is missing (`.iii-bundle-files` not committed beside
/// the lock, say) owns nothing, so an update that changes its files is refused; the refusal
/// says how to have the record again.
/// A namespace whose record is lost (`.iii-bundle-files` not committed beside the lock) takes
/// the bundle's files back from the lock: those holding the locked bytes, agent profile
/// included, are the bundle's, so an update and a restore land and write the record again. A
/// file of the bundle edited here is not taken (nothing says whose edit it is): an update keeps
/// it and lands upstream's text beside it, as for any edit; a restore refuses it, naming it and
/// the way out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_record_is_taken_back_from_the_lock() {
    let s = Setup::new();
    let mut files: BTreeMap<String, String> = [
        ("SKILL.md".to_string(), "# Demo\n".to_string()),
        ("b.md".to_string(), lines("b", 3)),
        (
            "agents/copier.md".to_string(),
            "---\nname: Copier\n---\nCopies.\n".to_string(),
        ),
    ]
    .into();
    publish(&s, "1.0.0", &files);
    download_answer(&s, json!({"worker": NS})).await;
    assert_eq!(status_of(&s, BundlesFunction::Get)["recorded"], true);
    let lose_record = || std::fs::remove_file(path(&s, guard::RECORD_FILE)).expect("remove");
    let restore = |force: bool| {
        let s = &s;
        async move {
            let request = json!({ "namespace": NS, "force": force });
            iii_directory::download::restore::restore(&s.directory, &s.registry, &request).await
        }
    };

    // Lost, with every file as locked: the state reads clean, `recorded` tells, and an update
    // lands (it used to be refused for every file), writing the record again.
    lose_record();
    let listed = status_of(&s, BundlesFunction::Get);
    assert_eq!(listed["state"], "clean", "{listed}");
    assert_eq!(listed["recorded"], false, "{listed}");
    files.insert("b.md".into(), lines("b2", 3));
    publish(&s, "2.0.0", &files);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("an update with the record lost");
    assert_eq!(read(&s, "b.md").as_deref(), Some(lines("b2", 3).as_str()));
    assert_eq!(status_of(&s, BundlesFunction::Get)["recorded"], true);

    // A restore of a bundle with an agent profile, record lost: the profile is the bundle's.
    lose_record();
    restore(false).await.expect("restore with the record lost");
    assert_eq!(status_of(&s, BundlesFunction::Get)["recorded"], true);

    // Lost, with b.md edited here: a restore refuses it, even forced, and says what to do.
    lose_record();
    std::fs::write(path(&s, "b.md"), "mine\n").expect("edit");
    for force in [false, true] {
        let refused = restore(force)
            .await
            .expect_err("an edited file nobody owns")
            .to_string();
        assert!(refused.starts_with("D330 conflict"), "{refused}");
        assert!(
            refused.contains(&format!(
                "this file does not hold the bytes the bundles lock lists for it. If it is the bundle's file edited here, move your copy aside and run `iii-directory bundles restore {NS}`"
            )),
            "{refused}"
        );
        assert_eq!(
            read(&s, "b.md").as_deref(),
            Some("mine\n"),
            "nothing written"
        );
    }
    // The way out it names.
    std::fs::rename(path(&s, "b.md"), path(&s, "b.md.mine")).expect("move aside");
    restore(false).await.expect("restore");
    assert_eq!(read(&s, "b.md").as_deref(), Some(lines("b2", 3).as_str()));
    assert_eq!(status_of(&s, BundlesFunction::Get)["recorded"], true);
}

/// `apply` (beyond the contract) fires an event for each family it changed and no other: one
/// skill updated in a bundle that also brings a system prompt and an agent profile is one
/// `skills` event, while a re-pull by `download` fires all three, as the contract's download
/// does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_fires_events_only_for_the_families_it_changed() {
    let s = Setup::new();
    let v1: BTreeMap<String, String> = [
        ("SKILL.md".to_string(), "# Demo\n".to_string()),
        ("b.md".to_string(), lines("b", 3)),
        (
            "system-prompts/clerk.md".to_string(),
            "---\ndescription: Files things.\n---\nFile.\n".to_string(),
        ),
        (
            "agents/copier.md".to_string(),
            "---\nname: Copier\n---\nCopies.\n".to_string(),
        ),
    ]
    .into();
    publish(&s, "1.0.0", &v1);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("first download");
    let families = |from: usize| -> Vec<String> {
        s.events()[from..]
            .iter()
            .map(|e| e["family"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let mut v2 = v1.clone();
    v2.insert("b.md".into(), lines("b2", 3));
    publish(&s, "2.0.0", &v2);
    let before = s.events().len();
    let planned = plan::plan_update(&s.directory, &s.registry, &json!({"namespace": NS}))
        .await
        .expect("plan v2");
    plan::apply(
        &s.directory,
        &s.registry,
        &json!({"plan_id": planned["plan_id"]}),
    )
    .await
    .expect("apply v2");
    assert_eq!(families(before), ["directory::skills::on-change"]);

    let before = s.events().len();
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("re-pull");
    assert_eq!(
        families(before),
        [
            "directory::skills::on-change",
            "directory::system-prompts::on-change",
            "directory::agents::on-change"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_edited_here_is_never_removed_nor_written_over() {
    let s = Setup::new();
    let v1: BTreeMap<String, String> = [
        ("skill.md".to_string(), lines("skill", 4)),
        ("notes.md".to_string(), lines("notes", 4)),
    ]
    .into();
    publish(&s, "1.0.0", &v1);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("first download");
    let mine = lines("notes", 4).replace("notes line 1", "notes line 1, mine");
    s.tree.write(&format!("skills/{NS}/notes.md"), &mine);
    let mut v2 = v1.clone();
    v2.insert(
        "notes.md".into(),
        lines("notes", 4).replace("notes line 1", "notes line 1, theirs"),
    );
    publish(&s, "2.0.0", &v2);
    let landed = s
        .download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("download 2.0.0");
    assert_eq!(landed["conflicts"][0]["path"], "notes.md", "{landed}");
    // The user starts merging in the copy.
    let merging = format!("{}my merge notes\n", v2["notes.md"]);
    s.tree
        .write(&format!("skills/{NS}/notes.md.upstream"), &merging);
    let listed = status_of(&s, BundlesFunction::Get);
    assert_eq!(listed["upstream_copies"], json!(["notes.md.upstream"]));
    assert_eq!(listed["stale_upstream_copies"], json!([]), "{listed}");

    // 3.0.0 changes another file only: the conflict is still open, the copy stays.
    let mut v3 = v2.clone();
    v3.insert("skill.md".into(), lines("skill v3", 4));
    publish(&s, "3.0.0", &v3);
    let planned = plan::plan_update(&s.directory, &s.registry, &json!({"namespace": NS}))
        .await
        .expect("plan v3");
    let notes = row(&planned, "notes.md");
    assert_eq!(notes["upstream_copy"]["edited"], true, "{planned}");
    assert_eq!(notes["upstream_copy"]["removed_by"], json!([]), "{planned}");
    let landed = s
        .download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("download 3.0.0");
    assert_eq!(landed["upstream_copies_removed"], json!([]), "{landed}");
    assert_eq!(read(&s, "notes.md.upstream"), Some(merging.clone()));
    assert_eq!(read(&s, "notes.md"), Some(mine.clone()));
    assert_eq!(read(&s, "skill.md"), Some(v3["skill.md"].clone()));

    // 4.0.0 changes notes.md again: a new conflict would write over the copy; refused whole,
    // forced or not, until the user moves the copy aside.
    let mut v4 = v3.clone();
    v4.insert(
        "notes.md".into(),
        lines("notes", 4).replace("notes line 1", "notes line 1, theirs again"),
    );
    v4.insert("skill.md".into(), lines("skill v4", 4));
    publish(&s, "4.0.0", &v4);
    let refused = s
        .download(FromRegistry, json!({"worker": NS}))
        .await
        .expect_err("a conflict over an edited copy");
    let text = refused.to_string();
    assert!(text.starts_with("D330"), "{text}");
    assert!(text.contains("notes.md.upstream"), "{text}");
    assert_eq!(read(&s, "notes.md.upstream"), Some(merging.clone()));
    assert_eq!(
        read(&s, "skill.md"),
        Some(v3["skill.md"].clone()),
        "nothing landed"
    );
    // Asked for upstream's file, the landing takes it and leaves the copy, the user's.
    let forced = s
        .download(FromRegistry, json!({"worker": NS, "force": true}))
        .await
        .expect("forced");
    assert_eq!(forced["upstream_copies_removed"], json!([]), "{forced}");
    assert_eq!(read(&s, "notes.md"), Some(v4["notes.md"].clone()));
    assert_eq!(read(&s, "notes.md.upstream"), Some(merging));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_emptying_a_locked_bundle_moves_the_lock_and_keeps_every_file() {
    let s = Setup::new();
    let v1: BTreeMap<String, String> = [("a.md".to_string(), lines("a", 3))].into();
    publish(&s, "1.0.0", &v1);
    s.download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("first download");
    publish(&s, "2.0.0", &BTreeMap::new());
    let landed = s
        .download(FromRegistry, json!({"worker": NS}))
        .await
        .expect("download the empty 2.0.0");
    // The answer of a locked namespace's download, with nothing written and nothing removed.
    assert_eq!(landed["skills_written"], json!([]), "{landed}");
    assert_eq!(landed["removed"], json!([]), "{landed}");
    assert_eq!(landed["conflicts"], json!([]), "{landed}");
    assert_eq!(read(&s, "a.md"), Some(v1["a.md"].clone()), "siblings stay");
    // The lock follows upstream: the next look for updates finds none to offer again.
    let listed = status_of(&s, BundlesFunction::Get);
    assert_eq!(listed["source"]["version"], "2.0.0", "{listed}");
    assert_eq!(listed["files"], 0, "{listed}");
    assert_eq!(listed["untracked"], json!(["a.md"]), "{listed}");
}
