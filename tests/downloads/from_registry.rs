//! `download_from_registry` (and the alias) against the loopback registry: routing, the index
//! and events after a landing, re-pulls, and every refusal leaving the tree byte for byte as it
//! was.

use std::time::Duration;

use iii_directory::ReadFunction;
use iii_directory::download::DownloadFunction::{self, Download, FromRegistry};
use serde_json::{Value, json};

use crate::{Setup, common};
use test_support::loopback::registry::Reply;

const REVIEWER: &str = "---\ndescription: Reviews code.\n---\nYou review code.\n";
const CAPTAIN: &str = "---\nname: Captain\ndescription: Ships releases.\n---\nYou ship releases.\n";

fn full_bundle(s: &Setup) {
    s.server.bundle(
        "mailer",
        &[
            (
                "skills/SKILL.md",
                "---\ntype: index\n---\n# Mailer\n\nSends mail.\n",
            ),
            ("skills/index.md", "# Legacy overview, dropped\n"),
            ("emails/send-email.md", "# Send email\n\nHow to send.\n"),
            ("prompts/old.md", "# An old command prompt\n"),
            ("agents/captain.md", CAPTAIN),
            ("system-prompts/reviewer.md", REVIEWER),
            ("scripts/send.sh", "#!/bin/sh\necho sent\n"),
        ],
    );
}

/// The events a download of `mailer` from the registry fires: one per family, in order.
fn mailer_download_events() -> [Value; 3] {
    [
        "directory::skills::on-change",
        "directory::system-prompts::on-change",
        "directory::agents::on-change",
    ]
    .map(|family| json!({"family": family, "payload": {"op": "download", "namespace": "mailer", "source": "registry"}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_bundle_lands_routed_indexed_and_announced() {
    let s = Setup::new();
    full_bundle(&s);
    let response = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("download");
    assert_eq!(
        response,
        json!({
            "namespace": "mailer",
            "skills_written": ["SKILL.md", "emails/send-email.md", "scripts/send.sh"],
            "system_prompts_written": ["reviewer"],
            "agents_written": ["captain"],
            "source": {"kind": "registry", "worker": "mailer", "tag": "latest"},
            "kept_local": [],
            "review": {"executables": ["scripts/send.sh"], "scripts": ["scripts/send.sh"], "hidden": [], "large": []},
        })
    );
    let hits = s.server.hits("/w/mailer/skills");
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].param("version").as_deref(), Some("latest"));
    assert_eq!(
        hits[0].header("user-agent"),
        Some(format!("iii-directory/{}", env!("CARGO_PKG_VERSION")).as_str())
    );

    let base = s.tree.base();
    assert!(base.join("skills/mailer/SKILL.md").is_file());
    assert!(
        !base.join("skills/mailer/index.md").exists(),
        "SKILL.md beats index.md"
    );
    assert!(!base.join("skills/mailer/prompts").exists());
    assert!(!base.join("skills/mailer/agents").exists());
    assert_eq!(
        std::fs::read_to_string(base.join("agents/captain.md")).expect("agent"),
        CAPTAIN
    );
    assert_eq!(
        std::fs::read_to_string(base.join("skills/mailer/scripts/send.sh")).expect("payload"),
        "#!/bin/sh\necho sent\n"
    );

    // Read your writes: the index serves them now.
    let d = &s.directory;
    let skill = common::call(d, ReadFunction::SkillsGet, json!({"id": "mailer"}));
    assert_eq!(skill["title"], "Mailer");
    let ids = common::skill_ids(d);
    assert!(
        ids.contains(&"mailer/emails/send-email".to_string()),
        "{ids:?}"
    );
    let prompt = common::call(
        d,
        ReadFunction::SystemPromptsGet,
        json!({"name": "reviewer"}),
    );
    assert_eq!(prompt["description"], "Reviews code.");
    let agent = common::call(d, ReadFunction::AgentsGet, json!({"id": "captain"}));
    assert_eq!(agent["name"], "Captain");

    assert_eq!(s.events(), mailer_download_events());
}

/// The contract fires a download's event for every family its answer names files of: a
/// re-pull of the same version, whose bytes are all already there, still answers them as
/// written, and so still fires the three events a caller may wait for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_pull_of_the_same_bytes_fires_the_events_its_answer_names() {
    let s = Setup::new();
    full_bundle(&s);
    let first = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("first");
    let before = s.state();
    let events = s.events().len();
    let again = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("again");
    assert_eq!(s.state(), before, "the same bytes: nothing changed on disk");
    for key in ["skills_written", "system_prompts_written", "agents_written"] {
        assert_eq!(again[key], first[key], "{key}");
    }
    assert_eq!(s.events()[events..], mailer_download_events());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_pull_overwrites_file_by_file_and_keeps_siblings() {
    let s = Setup::new();
    s.server
        .bundle("mailer", &[("index.md", "# v1\n"), ("a.md", "# a1\n")]);
    s.download(Download, json!({"worker": "mailer", "version": "1.0.0"}))
        .await
        .expect("first");
    assert_eq!(
        s.server.hits("/w/mailer/skills")[0]
            .param("version")
            .as_deref(),
        Some("1.0.0")
    );
    s.tree.write("skills/mailer/mine.md", "# Hand-written\n");
    s.directory
        .reconcile()
        .expect("reconcile the hand-written file");
    s.server
        .bundle("mailer", &[("index.md", "# v2\n"), ("b.md", "# b2\n")]);
    let response = s
        .download(Download, json!({"worker": "mailer", "tag": "beta"}))
        .await
        .expect("second");
    assert_eq!(
        response["source"],
        json!({"kind": "registry", "worker": "mailer", "tag": "beta"})
    );
    let read = |rel: &str| std::fs::read_to_string(s.tree.path(rel)).expect(rel);
    assert_eq!(read("skills/mailer/index.md"), "# v2\n");
    assert_eq!(
        read("skills/mailer/a.md"),
        "# a1\n",
        "not in the new bundle: kept"
    );
    assert_eq!(read("skills/mailer/b.md"), "# b2\n");
    assert_eq!(read("skills/mailer/mine.md"), "# Hand-written\n");
    let ids = common::skill_ids(&s.directory);
    for id in ["mailer", "mailer/a", "mailer/b", "mailer/mine"] {
        assert!(ids.contains(&id.to_string()), "{id}: {ids:?}");
    }
    assert_eq!(
        common::call(
            &s.directory,
            ReadFunction::SkillsGet,
            json!({"id": "mailer"})
        )["title"],
        "v2"
    );
}

/// Runs a download that must be refused and checks that the tree and the index did not change
/// and no event fired. Returns the error.
async fn refused(s: &Setup, function: DownloadFunction, request: Value) -> String {
    let before = s.state();
    let answers = common::dump(&s.directory);
    let events = s.events().len();
    let err = s
        .download(function, request.clone())
        .await
        .expect_err(&format!("{request} should be refused"));
    assert_eq!(s.state(), before, "{request}: the tree changed ({err})");
    assert!(
        common::dump(&s.directory) == answers,
        "{request}: the answers changed"
    );
    assert_eq!(s.events().len(), events, "{request}: an event fired");
    err
}

/// A tree with something in it, so "unchanged" means something.
fn seed(s: &Setup) {
    s.tree.write("skills/mailer/index.md", "# Old overview\n");
    s.tree.write("skills/mailer/a.md", "# Old a\n");
    s.tree.write("agents/captain.md", CAPTAIN);
    s.directory.reconcile().expect("reconcile");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_failures_are_coded_and_change_nothing() {
    let s = Setup::with(|c| c.settings.download_timeout_ms = 400);
    seed(&s);
    let worker = json!({"worker": "mailer"});
    assert_eq!(
        refused(&s, FromRegistry, json!({"worker": "ghost"})).await,
        "D310 not_found: registry worker \"ghost\" has no published skills bundle. Next: call directory::registry::workers::list to browse worker names."
    );
    s.server.reply(
        "/w/mailer/skills",
        Reply::Raw(500, b"internal detail".to_vec()),
    );
    let err = refused(&s, FromRegistry, worker.clone()).await;
    assert_eq!(
        err,
        "D320 registry_error: registry returned HTTP 500. Next: retry shortly."
    );
    s.server.reply(
        "/w/mailer/skills",
        Reply::Raw(200, b"{\"skills\": [".to_vec()),
    );
    assert_eq!(
        refused(&s, FromRegistry, worker.clone()).await,
        "D320 registry_error: could not decode the registry response."
    );
    s.server.reply(
        "/w/mailer/skills",
        Reply::Slow(
            Duration::from_secs(3),
            Box::new(Reply::Json(
                200,
                json!({"skills": [{"path": "late.md", "content": "# late\n"}]}),
            )),
        ),
    );
    assert_eq!(
        refused(&s, FromRegistry, worker.clone()).await,
        "D320 registry_error: could not reach the registry. Next: retry shortly."
    );
    s.server.json(
        "/w/mailer/skills",
        json!({"name": "impostor", "skills": [{"path": "index.md", "content": "# x\n"}]}),
    );
    assert_eq!(
        refused(&s, FromRegistry, worker.clone()).await,
        "registry returned worker name \"impostor\", expected \"mailer\""
    );
    for bad in ["../../etc", "Mailer", "a/b", "-x"] {
        let err = refused(&s, FromRegistry, json!({"worker": bad})).await;
        assert!(err.starts_with("worker name"), "{bad}: {err}");
    }
    let url = s.server.url();
    for err in [
        refused(&s, FromRegistry, json!({"worker": "ghost"})).await,
        refused(&s, FromRegistry, worker).await,
    ] {
        assert!(!err.contains(&url) && !err.contains("127.0.0.1"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_path_refuses_the_whole_bundle() {
    let s = Setup::new();
    seed(&s);
    let long = format!("{}.md", "a".repeat(238));
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![("../escape.md", "x")], "invalid skill path"),
        (vec![("skills/../../escape.md", "x")], "invalid skill path"),
        (vec![("/etc/escape.md", "x")], "invalid skill path"),
        (vec![("a\\..\\escape.md", "x")], "invalid skill path"),
        (vec![(".hidden/x.md", "x")], "invalid skill path"),
        (vec![("scripts/.env", "SECRET=1")], "invalid skill path"),
        (vec![(".iii-skill-complete", "{}")], "invalid skill path"),
        (vec![("C:escape.md", "x")], "invalid skill path"),
        (vec![("a/./b.md", "x")], "invalid skill path"),
        (vec![("a//b.md", "x")], "invalid skill path"),
        (vec![("a/b.md/", "x")], "invalid skill path"),
        (vec![("", "x")], "invalid skill path"),
        (vec![("a\u{0}.md", "x")], "invalid skill path"),
        (vec![(long.as_str(), "x")], "too long"),
        (
            vec![("Guide.md", "x"), ("guide.md", "y")],
            "differ only by case",
        ),
        (vec![("x.md", "x"), ("x.md", "y")], "twice"),
        (
            vec![("a.md", "x"), ("a.md/b.md", "y")],
            "both a file and a folder",
        ),
        (
            vec![("agents/One.md", "x"), ("agents/one.md", "y")],
            "is not a valid agent profile id",
        ),
        (vec![("n.md.123-4.tmp", "x")], "temporary file"),
    ];
    for (files, why) in cases {
        // A good file first: a refusal must undo nothing because nothing was written.
        let mut all = vec![("index.md", "# New overview\n"), ("fresh.md", "# fresh\n")];
        all.extend(files.iter().copied());
        s.server.bundle("mailer", &all);
        let err = refused(&s, FromRegistry, json!({"worker": "mailer"})).await;
        assert!(err.contains(why), "{files:?}: {err}");
        assert!(
            err.contains("nothing was written") || err.starts_with("invalid skill path"),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targets_on_disk_that_would_leave_the_root_are_refused() {
    let s = Setup::new();
    seed(&s);
    let outside = s.tree.path("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::os::unix::fs::symlink(&outside, s.tree.path("skills/linked")).expect("link");
    s.server
        .bundle("linked", &[("index.md", "# through a link\n")]);
    let err = refused(&s, FromRegistry, json!({"worker": "linked"})).await;
    assert!(err.contains("symbolic link leading outside"), "{err}");
    assert_eq!(std::fs::read_dir(&outside).expect("outside").count(), 0);
    // A folder where a file goes.
    std::fs::create_dir_all(s.tree.path("skills/mailer/b.md")).expect("mkdir");
    s.directory.reconcile().expect("reconcile");
    s.server
        .bundle("mailer", &[("new.md", "# new\n"), ("b.md", "# b\n")]);
    let err = refused(&s, FromRegistry, json!({"worker": "mailer"})).await;
    assert!(err.contains("not a regular file"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bundles_are_refused_by_files_and_by_bytes() {
    let s = Setup::with(|c| {
        c.settings.download_max_files = 5;
        c.settings.download_max_bytes = 10_000;
    });
    seed(&s);
    let names: Vec<String> = (0..6).map(|i| format!("f{i}.md")).collect();
    let six: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "# x\n")).collect();
    s.server.bundle("mailer", &six);
    let err = refused(&s, FromRegistry, json!({"worker": "mailer"})).await;
    assert!(
        err.contains("more than 5 files (download_max_files)"),
        "{err}"
    );
    // Ignored entries count too.
    let ignored: Vec<(String, &str)> = (0..6)
        .map(|i| (format!("prompts/p{i}.md"), "# p\n"))
        .collect();
    let ignored: Vec<(&str, &str)> = ignored.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    s.server.bundle("mailer", &ignored);
    refused(&s, FromRegistry, json!({"worker": "mailer"})).await;

    let big = "x".repeat(6_000);
    s.server.bundle(
        "mailer",
        &[("a.bin", big.as_str()), ("b.bin", big.as_str())],
    );
    let err = refused(&s, FromRegistry, json!({"worker": "mailer"})).await;
    assert!(
        err.contains("larger than 10000 bytes (download_max_bytes)"),
        "{err}"
    );

    // One markdown file over the 256 KiB read cap, whatever the bundle limits.
    let s = Setup::new();
    seed(&s);
    let huge = format!("# Huge\n\n{}", "y".repeat(262_144));
    s.server.bundle(
        "mailer",
        &[("index.md", "# ok\n"), ("huge.md", huge.as_str())],
    );
    let err = refused(&s, FromRegistry, json!({"worker": "mailer"})).await;
    assert!(err.contains("too large") && err.contains("262144"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alias_and_the_explicit_form_check_their_inputs_before_any_request() {
    let s = Setup::new();
    seed(&s);
    for (function, request, expected) in [
        (
            Download,
            json!({}),
            "specify either {repo, skill, branch?} OR {worker, version?|tag?}",
        ),
        (
            Download,
            json!({"repo": "https://x/y", "skill": "s", "worker": "w"}),
            "specify either {repo, skill, branch?} OR {worker, version?|tag?}, not both",
        ),
        (
            Download,
            json!({"version": "1"}),
            "worker is required when version or tag is set",
        ),
        (
            Download,
            json!({"worker": "w", "version": "1", "tag": "t"}),
            "specify either version OR tag, not both",
        ),
        (
            FromRegistry,
            json!({"worker": " "}),
            "worker must be non-empty",
        ),
    ] {
        assert_eq!(refused(&s, function, request).await, expected);
    }
    assert!(s.server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_bundle_writes_nothing_and_fires_nothing() {
    let s = Setup::new();
    seed(&s);
    s.server
        .bundle("mailer", &[("prompts/only.md", "# ignored\n")]);
    let (before, events) = (s.state(), s.events().len());
    let response = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("ok");
    assert_eq!(response["skills_written"], json!([]));
    assert_eq!(s.state(), before);
    assert_eq!(s.events().len(), events, "no event for an empty download");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_tree_sees_no_external_echo_of_a_download() {
    let s = Setup::new();
    let watcher =
        iii_directory::Watcher::start(s.directory.clone(), iii_directory::WatchOptions::default());
    // Let the watch settle on the roots.
    std::thread::sleep(Duration::from_millis(300));
    full_bundle(&s);
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("download");
    // Longer than a burst (50 ms quiet, 500 ms at most) and its reconcile.
    std::thread::sleep(Duration::from_millis(1_500));
    let ops: Vec<Value> = s
        .events()
        .iter()
        .map(|e| e["payload"]["op"].clone())
        .collect();
    assert_eq!(
        ops,
        [json!("download"), json!("download"), json!("download")],
        "{:?}",
        s.events()
    );
    let status = watcher.status();
    assert!(status.bursts > 0, "the watcher saw the landing: {status:?}");
    watcher.stop();
}

/// Each fetch holds its bundle's bytes while it reads and checks them, so at most four read at
/// once in a process (thirty at once held 2.9 GiB; `registry::admission`'s tests count them).
/// The turn is taken once the registry answered: fetches waiting on a slow registry wait side by
/// side, and none holds a turn the others need meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_wait_for_a_slow_registry_side_by_side() {
    use iii_directory::download::{self, Source};
    use iii_directory::registry::Release;
    let s = std::sync::Arc::new(Setup::new());
    for i in 0..8 {
        let body = json!({ "name": format!("w{i}"), "version": "1.0.0", "skills": [
            { "path": "skills/SKILL.md", "content": format!("# W{i}\n\nBody.\n") }
        ]});
        s.server.reply(
            &format!("/w/w{i}/skills"),
            Reply::Slow(Duration::from_millis(800), Box::new(Reply::Json(200, body))),
        );
    }
    let fetches: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let source = Source::Registry {
                    worker: format!("w{i}"),
                    release: Release::latest(),
                };
                download::fetch(&s.directory.settings(), &s.registry, source, &|_| {}).await
            })
        })
        .collect();
    // Every fetch has asked, and is being answered slowly.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(s.server.requests().len(), 8, "the fetches ask at once");
    let started = std::time::Instant::now();
    for fetch in fetches {
        fetch.await.expect("task").expect("fetch");
    }
    let rest = started.elapsed();
    assert!(
        rest < Duration::from_millis(1_200),
        "answered one after another: {rest:?}"
    );
}

/// A `skills_folder` pointed at a file: the download says so, with nothing written (it said
/// "… cannot be read (Not a directory)").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_into_a_skills_folder_that_is_a_file_says_so() {
    let s = Setup::with(|config| {
        let file = config.paths.skills_folder.with_file_name("a-file");
        std::fs::write(&file, "not a folder\n").expect("write");
        config.paths.skills_folder = file;
    });
    full_bundle(&s);
    let refused = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect_err("a file for a folder");
    assert!(
        refused.contains("a-file is a file, not a folder")
            && refused.contains("nothing was written"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(s.tree.path("a-file")).expect("the file"),
        "not a folder\n"
    );
}
