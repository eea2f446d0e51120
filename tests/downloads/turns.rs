//! Turns (`registry::admission`): a read of a bundle's files holds one while it reads, never
//! while it waits for a remote. A git host or a registry that never answers, or answers late,
//! keeps no other caller's read waiting.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use test_support::loopback::registry::Reply;

use iii_directory::download::DownloadFunction::{FromRegistry, FromRepo};
use iii_directory::download::updates;

use crate::Setup;

/// A git host that accepts connections and never answers; the count of connections so far.
fn silent_git_host() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (
        format!("https://127.0.0.1:{port}/team/skills.git"),
        accepted,
    )
}

/// Four clones waiting on a host that never answers took every turn, and a registry download
/// beside them waited the whole call deadline (25 s), then was refused `D122`, though the
/// registry answers at once. The clones now hold clone turns only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_waiting_on_a_silent_host_keep_no_registry_download_waiting() {
    let s = Arc::new(Setup::with(|c| c.settings.download_timeout_ms = 6_000));
    s.server
        .bundle("quick", &[("SKILL.md", "# quick\n\nBody.\n")]);
    let (repo, accepted) = silent_git_host();
    let clones: Vec<_> = (0..4)
        .map(|_| {
            let (s, repo) = (s.clone(), repo.clone());
            tokio::spawn(async move {
                s.download(FromRepo, json!({"repo": repo, "skill": "team"}))
                    .await
            })
        })
        .collect();
    let waiting = Instant::now();
    while accepted.load(Ordering::SeqCst) < 4 && waiting.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        4,
        "four clones on the host"
    );

    let started = Instant::now();
    let landed = s.download(FromRegistry, json!({"worker": "quick"})).await;
    let took = started.elapsed();
    assert!(landed.is_ok(), "{landed:?}");
    assert!(
        took < Duration::from_secs(3),
        "waited {took:?} beside the clones"
    );
    for clone in clones {
        let refused = clone
            .await
            .expect("clone task")
            .expect_err("the host never answers");
        assert!(refused.contains("timed out"), "{refused}");
    }
}

/// `check-updates` asks every bundle's source at once, each question a read of the bundle: with
/// the turn taken before the registry answered, twelve questions to a registry answering in
/// 1.5 s ran four at a time, and the last ones were `unknown` past the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_to_a_slow_registry_wait_for_it_side_by_side() {
    let s = Setup::with(|c| {
        c.settings.download_timeout_ms = 4_000;
        c.settings.registry_cache_ttl_ms = 0;
    });
    let workers: Vec<String> = (0..12).map(|i| format!("slow-{i}")).collect();
    for worker in &workers {
        s.server
            .bundle(worker, &[("SKILL.md", "# slow\n\nBody.\n")]);
        s.download(FromRegistry, json!({"worker": worker}))
            .await
            .expect(worker);
    }
    for worker in &workers {
        let path = format!("/w/{worker}/skills");
        let body = json!({"name": worker, "version": "1.0.0",
            "skills": [{"path": "SKILL.md", "content": "# slow\n\nBody.\n"}]});
        s.server.reply(
            &path,
            Reply::Slow(
                Duration::from_millis(1_500),
                Box::new(Reply::Json(200, body)),
            ),
        );
    }
    let started = Instant::now();
    let answer = updates::check_updates(
        &s.directory.settings(),
        &s.directory.config().paths.bundles_lock,
        &s.registry,
        &json!({}),
    )
    .await
    .expect("check-updates");
    let took = started.elapsed();
    let states: Vec<String> = answer["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .map(|b| format!("{} {} {}", b["namespace"], b["state"], b["reason"]))
        .collect();
    assert_eq!(states.len(), 12, "{states:?}");
    assert!(
        states.iter().all(|state| state.contains("\"current\"")),
        "after {took:?}: {states:#?}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
}
