//! The bundles lock (issue 29): every landing records the bundle's resolved source and the
//! sha256 of every file it brought, in one JSON file written in the same all-or-nothing step as
//! the files; the index never serves it; its path is a setting; a lock that is not ours refuses
//! the download with nothing written. (A repo bundle's resolved commit is checked in
//! `from_repo.rs`, SIGKILL in `crash.rs`.)

use std::path::Path;

use iii_directory::download::DownloadFunction::FromRegistry;
use iii_directory::download::lock::{self, Route};
use serde_json::{Value, json};

use crate::{Setup, common};

fn read_lock(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("the lock")).expect("json")
}

/// Every file the entry lists has its size and sha256 on disk.
pub fn assert_entry_matches_disk(setup: &Setup, entry: &lock::Entry) {
    let paths = &setup.directory.config().paths;
    for file in &entry.files {
        let root = match file.route {
            Route::Agents => &paths.agents_folder,
            _ => &paths.skills_folder,
        };
        let on_disk = lock::file_sha256(&root.join(&file.path));
        assert_eq!(
            on_disk,
            Some((file.size, file.sha256.clone())),
            "{}",
            file.path
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_download_is_locked_with_its_version_digest_and_every_file() {
    let s = Setup::new();
    s.server.bundle(
        "mailer",
        &[
            ("SKILL.md", "# Mailer\n"),
            ("emails/send.md", "# Send\n"),
            (
                "system-prompts/clerk.md",
                "---\ndescription: Files mail.\n---\nFile it.\n",
            ),
            ("agents/captain.md", "---\nname: Captain\n---\nShip.\n"),
            ("prompts/old.md", "# skipped\n"),
        ],
    );
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("download");
    let path = s.tree.path("skills/iii-bundles.lock.json");
    let text = std::fs::read_to_string(&path).expect("lock");
    assert!(
        text.ends_with("}\n") && text.contains("\n  \"bundles\""),
        "{text}"
    );
    let value = read_lock(&path);
    let entry = &value["bundles"]["mailer"];
    assert_eq!(entry["namespace"], "mailer");
    let digest = lock::registry_digest(
        [
            ("SKILL.md", "# Mailer\n"),
            ("emails/send.md", "# Send\n"),
            (
                "system-prompts/clerk.md",
                "---\ndescription: Files mail.\n---\nFile it.\n",
            ),
            ("agents/captain.md", "---\nname: Captain\n---\nShip.\n"),
            ("prompts/old.md", "# skipped\n"),
        ]
        .into_iter(),
    );
    assert_eq!(
        entry["source"],
        json!({"kind": "registry", "worker": "mailer", "tag": "latest", "version": "1.0.0", "digest": digest})
    );
    let files: Vec<(String, String)> = entry["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().expect("path").to_string(),
                f["route"].as_str().expect("route").to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("mailer/SKILL.md", "skills"),
        ("mailer/emails/send.md", "skills"),
        ("mailer/system-prompts/clerk.md", "system-prompts"),
        ("captain.md", "agents"),
    ]
    .iter()
    .map(|(p, r)| (p.to_string(), r.to_string()))
    .collect();
    assert_eq!(files, expected);
    assert!(
        entry["landed_at"]
            .as_str()
            .expect("landed_at")
            .ends_with("+00:00")
    );
    let parsed = lock::read(&path).expect("our reader");
    assert_entry_matches_disk(&s, &parsed.bundles["mailer"]);

    // Never served, never skipped as a document, nowhere in an answer.
    let ids = common::skill_ids(&s.directory);
    assert!(ids.iter().all(|id| !id.contains("lock")), "{ids:?}");
    let skipped = s.directory.skipped().expect("skipped");
    assert!(
        skipped.iter().all(|f| !f.path.contains("iii-bundles")),
        "{skipped:?}"
    );

    // A second bundle gets its own entry; the first stays as it was, text and all.
    let before = parsed.bundles["mailer"].clone();
    s.server.bundle("other", &[("SKILL.md", "# Other\n")]);
    s.download(FromRegistry, json!({"worker": "other", "version": "1.0.0"}))
        .await
        .expect("second");
    let after = lock::read(&path).expect("lock");
    assert_eq!(after.bundles["mailer"], before);
    assert_eq!(
        after.bundles.keys().collect::<Vec<_>>(),
        ["mailer", "other"]
    );
    let other = serde_json::to_value(&after.bundles["other"].source).expect("json");
    assert_eq!(other["version"], "1.0.0");
    assert!(other.get("tag").is_none(), "{other}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_path_is_a_setting_and_a_lock_not_ours_refuses_with_nothing_written() {
    let s = Setup::with(|config| {
        config.settings.bundles_lock_path = "locks/bundles.json".into();
        config.paths.bundles_lock = config
            .paths
            .skills_folder
            .parent()
            .expect("base")
            .join("locks/bundles.json");
    });
    s.server.bundle("mailer", &[("SKILL.md", "# Mailer\n")]);
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("download");
    assert!(!s.tree.path("skills/iii-bundles.lock.json").exists());
    let locked = lock::read(&s.tree.path("locks/bundles.json")).expect("lock");
    assert_eq!(locked.bundles["mailer"].files.len(), 1);
    let staging: Vec<_> = std::fs::read_dir(s.tree.path("locks"))
        .expect("locks")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(staging, ["bundles.json"], "no staging folder left");

    // A file at the lock's path that is not a lock: refused, nothing written.
    s.tree.write("locks/bundles.json", "my notes, not JSON\n");
    s.server.bundle("mailer", &[("SKILL.md", "# Mailer v2\n")]);
    let before = s.state();
    let err = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect_err("refused");
    assert!(err.contains("fix or move it away"), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(s.state(), before);
}

/// The lock a git merge of two branches leaves when each downloaded a bundle: `ours` and
/// `theirs` each add one entry to an empty `base` (`git merge-file`, as `git merge` does).
fn merged_with_conflicts(base: &lock::Lock, ours: &lock::Lock, theirs: &lock::Lock) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp");
    let sides = [("ours", ours), ("base", base), ("theirs", theirs)];
    for (name, side) in sides {
        std::fs::write(dir.path().join(name), side.to_bytes().expect("bytes")).expect("write");
    }
    let out = std::process::Command::new("git")
        .args(["merge-file", "-p", "ours", "base", "theirs"])
        .current_dir(dir.path())
        .output()
        .expect("git merge-file");
    assert_eq!(out.status.code(), Some(1), "one conflict");
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_lock_with_conflict_markers_says_so_and_how_to_resolve_it() {
    let s = Setup::new();
    s.server.bundle("mailer", &[("SKILL.md", "# Mailer\n")]);
    s.server.bundle("other", &[("SKILL.md", "# Other\n")]);
    for worker in ["mailer", "other"] {
        s.download(FromRegistry, json!({"worker": worker}))
            .await
            .expect("download");
    }
    let path = s.tree.path("skills/iii-bundles.lock.json");
    let both = lock::read(&path).expect("lock");
    let only = |namespace: &str| {
        let mut one = both.clone();
        one.bundles.retain(|name, _| name == namespace);
        one
    };
    let base = only("none");
    std::fs::write(
        &path,
        merged_with_conflicts(&base, &only("mailer"), &only("other")),
    )
    .expect("write");

    let before = s.state();
    let err = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect_err("refused");
    for part in [
        "holds unresolved git merge-conflict markers",
        "keep the entries of both sides",
        "`git checkout --ours",
        "download again each bundle only the other side had",
        "iii-directory bundles restore",
        "nothing was written",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(!err.contains("key must be a string"), "{err}");
    assert_eq!(s.state(), before);

    // As the message says: take their side, then download again the bundle only ours had.
    std::fs::write(&path, only("other").to_bytes().expect("bytes")).expect("write");
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("downloaded again");
    let mended = lock::read(&path).expect("lock");
    assert_eq!(
        mended.bundles.keys().collect::<Vec<_>>(),
        ["mailer", "other"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_local_edit_stays_locked_with_the_upstream_bytes() {
    let s = Setup::new();
    s.server
        .bundle("mailer", &[("SKILL.md", "# v1\n"), ("a.md", "# a v1\n")]);
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("v1");
    s.tree.write("skills/mailer/a.md", "# a, mine\n");
    s.server
        .bundle("mailer", &[("SKILL.md", "# v2\n"), ("a.md", "# a v2\n")]);
    let response = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("v2");
    assert_eq!(response["kept_local"], json!(["a.md"]));
    let locked = lock::read(&s.tree.path("skills/iii-bundles.lock.json")).expect("lock");
    let a = locked.bundles["mailer"]
        .files
        .iter()
        .find(|f| f.path == "mailer/a.md")
        .expect("a.md locked");
    assert_eq!(a.sha256, lock::sha256_hex(b"# a v2\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_modified_missing_and_untracked_files_and_never_our_own() {
    use iii_directory::download::status::{self, BundlesFunction, State};
    let s = Setup::new();
    s.server.bundle(
        "mailer",
        &[
            ("SKILL.md", "# Mailer\n"),
            ("scripts/run.sh", "echo hi\n"),
            ("agents/captain.md", "---\nname: Captain\n---\nShip.\n"),
        ],
    );
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("download");
    let paths = s.directory.config().paths.clone();
    let state = |ns: &str| {
        status::statuses(&paths)
            .expect("statuses")
            .into_iter()
            .find(|b| b.namespace == ns)
            .expect("listed")
    };
    // The record of what the bundle wrote, a marker and a staging-named folder are ours.
    s.tree.write("skills/mailer/.iii-skill-complete", "{}\n");
    s.tree
        .write("skills/mailer/.iii-staging-1/files/x.md", "x\n");
    let clean = state("mailer");
    assert_eq!(clean.state, State::Clean, "{clean:?}");
    assert_eq!(clean.files, 3);

    s.tree.write("skills/mailer/extra/new.md", "# new\n");
    assert_eq!(state("mailer").state, State::Untracked);
    s.tree.write("agents/captain.md", "---\nname: Mine\n---\n");
    let modified = state("mailer");
    assert_eq!(modified.state, State::Modified);
    assert_eq!(modified.modified, ["agents/captain.md"]);
    assert_eq!(modified.untracked, ["extra/new.md"]);
    std::fs::remove_file(s.tree.path("skills/mailer/scripts/run.sh")).expect("rm");
    let missing = state("mailer");
    assert_eq!(missing.state, State::Missing);
    assert_eq!(missing.missing, ["scripts/run.sh"]);

    let verified = status::answer(&paths, BundlesFunction::Verify, &json!({})).expect("verify");
    assert_eq!(verified["ok"], false);
    assert_eq!(verified["checked"], json!({"bundles": 1, "files": 3}));
    let err = status::answer(&paths, BundlesFunction::Get, &json!({"namespace": "nope"}))
        .expect_err("not locked");
    assert_eq!(
        err.code(),
        Some(iii_directory::Code::BundleNotLocked),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executables_are_refused_whole_when_the_setting_says_so() {
    let s = Setup::with(|config| config.settings.download_allow_executables = false);
    s.server.bundle(
        "mailer",
        &[
            ("SKILL.md", "# Mailer\n"),
            ("scripts/send.sh", "#!/bin/sh\necho sent\n"),
        ],
    );
    let before = s.state();
    let err = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect_err("refused");
    assert!(err.starts_with("D333 invalid_input:"), "{err}");
    assert!(err.contains("\"scripts/send.sh\""), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(s.state(), before);
    // A script that is not executable lands, named in the review.
    s.server.bundle(
        "mailer",
        &[
            ("SKILL.md", "# Mailer\n"),
            ("scripts/send.py", "print(1)\n"),
        ],
    );
    let response = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("lands");
    assert_eq!(response["review"]["scripts"], json!(["scripts/send.py"]));
    assert_eq!(response["review"]["executables"], json!([]));
}
