//! No engine, or an engine that refuses the worker.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_reports_its_own_version_to_the_engine() {
    let h = Harness::start(Installed::Mailer, None).await;
    let ready = h.engine.ready().expect("engine::workers::register");
    assert_eq!(ready["name"], "iii-directory");
    assert_eq!(ready["version"], env!("CARGO_PKG_VERSION"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_worker_of_the_same_name_says_so_and_exits() {
    let h = Harness::start(Installed::Mailer, None).await;
    let mut worker = h.worker;
    // What the engine sends a second `iii-directory` on the same engine, before it closes.
    h.engine
        .send_to_worker(json!({
            "type": "registrationrejected",
            "code": "WORKER_NAMESPACE_CONFLICT",
            "namespace": "default",
            "worker_name": "iii-directory",
            "owner_worker_id": "00000000-0000-4000-8000-000000000009",
        }))
        .expect("send the rejection");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = worker.try_wait() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the worker kept running after the rejection; stderr:\n{}",
            worker.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stderr = worker.stderr();
    assert!(!status.success(), "exit status {status}; stderr:\n{stderr}");
    assert!(
        stderr.contains("another iii-directory worker is already registered")
            && stderr.contains("WORKER_NAMESPACE_CONFLICT"),
        "{stderr}"
    );
    assert!(!stderr.contains("lost the iii engine"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_engine_it_says_once_that_it_waits_and_stops_cleanly() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = format!("ws://127.0.0.1:{port}");
    let tree = fixture_tree();
    let worker = spawn_worker(&url, tree.path(), None, &[]);
    let needle = "waiting for the iii engine";
    let stderr = worker.wait_stderr(needle, Duration::from_secs(5)).await;
    let line = stderr
        .lines()
        .find(|l| l.contains(needle))
        .expect("the line");
    assert!(line.contains(&url), "the address is named: {line}");
    // Another retry period (2 s) later it has not said it again.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let stderr = worker.stderr();
    assert_eq!(stderr.matches(needle).count(), 1, "{stderr}");
    // RUST_LOG=info (as the harness sets it) keeps the SDK's own notice of every retry quiet.
    assert!(!stderr.contains("retrying"), "{stderr}");
    worker.stop().await;
}

/// A worker stopped with SIGTERM closes its index cleanly: the clean-close stamps are there,
/// so the next start skips verifying every page. The SDK's handlers and the watcher still
/// share the directory at shutdown, so only an explicit close leaves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_with_sigterm_leaves_its_index_cleanly_closed() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.call("directory::skills::list", json!({})).await;
    let index = h.path("data/iii-directory/index.redb");
    let stamps = [
        h.path("data/iii-directory/index.redb.clean"),
        h.path("data/iii-directory/index.redb.texts.clean"),
    ];
    // The open consumed the last stamps.
    for stamp in &stamps {
        assert!(!stamp.exists(), "{} while the worker runs", stamp.display());
    }
    let Harness { worker, tree, .. } = h;
    worker.stop().await;
    for stamp in &stamps {
        let line = fs::read_to_string(stamp)
            .unwrap_or_else(|e| panic!("no stamp at {}: {e}", stamp.display()));
        assert!(!line.is_empty(), "{}", stamp.display());
    }
    let size = fs::metadata(&index).expect("the index").len();
    assert!(
        fs::read_to_string(&stamps[0])
            .expect("stamp")
            .starts_with(&format!("{size} ")),
        "the stamp describes the index file as it was closed"
    );
    drop(tree);
}
