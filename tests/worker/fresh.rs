//! Fresh reads through the wire: a change made on disk by another process (here the test,
//! with `std::fs`) is in the very next call's answer, and still fires one `external`. (The
//! changes are made in `mailer`, the one installed worker: `filter_unregistered` hides the rest.)

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_on_disk_is_in_the_very_next_call() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;
    let mut stale = Vec::new();
    for round in 0..40 {
        let id = format!("mailer/fresh{round}/one");
        write_file(
            h.tree.path(),
            &format!("skills/mailer/fresh{round}/one.md"),
            &format!("# One {round}\n\nFresh.\n"),
        );
        let got = h
            .engine
            .invoke("directory::skills::get", json!({ "id": id }))
            .await;
        let title = got.as_ref().map(|v| v["title"].clone());
        if title != Ok(json!(format!("One {round}"))) {
            stale.push(format!("round {round}: create then get: {got:?}"));
        }
        fs::rename(
            h.path(&format!("skills/mailer/fresh{round}")),
            h.path(&format!("skills/mailer/moved{round}")),
        )
        .expect("rename the folder");
        let listed = ids(&h
            .call(
                "directory::skills::list",
                json!({ "prefix": format!("mailer/moved{round}/") }),
            )
            .await);
        if listed != vec![format!("mailer/moved{round}/one")] {
            stale.push(format!(
                "round {round}: rename a folder then list: {listed:?}"
            ));
        }
        fs::remove_file(h.path(&format!("skills/mailer/moved{round}/one.md"))).expect("delete");
        let gone = h
            .call_err(
                "directory::skills::get",
                json!({ "id": format!("mailer/moved{round}/one") }),
            )
            .await;
        if !gone.message.contains("D110") {
            stale.push(format!("round {round}: delete then get: {}", gone.message));
        }
    }
    write_file(
        h.tree.path(),
        "agents/late.md",
        "---\nname: Late\n---\nHi.\n",
    );
    let agent = h
        .call("directory::agents::get", json!({ "id": "late" }))
        .await;
    assert_eq!(agent["name"], "Late");
    assert!(stale.is_empty(), "{stale:#?}\n{}", h.worker.stderr());
    // The burst still announced itself, once per family it touched.
    tokio::time::sleep(SETTLE).await;
    let mut families: Vec<Value> = h
        .fires()
        .iter()
        .map(|f| f.metadata.clone().unwrap())
        .collect();
    families.dedup();
    assert!(
        families.contains(&json!({"m": 1})) && families.contains(&json!({"m": 3})),
        "{:?}",
        h.fires()
    );
    let status = h.call("directory::index::status", json!({})).await;
    let roots = status["watcher"]["roots"]
        .as_array()
        .expect("roots in status");
    assert_eq!(roots.len(), 4, "{status}");
    assert!(
        roots.iter().all(|r| r["fresh_reads"] == json!(true)),
        "{status}"
    );
    h.stop().await;
}
