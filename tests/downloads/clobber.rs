//! What a bundle may touch (SECURITY.md, "What a bundle may do"): it creates files and changes
//! the ones it installed itself; a bundle that would replace or shadow the user's profile or
//! prompt, a bundled default or another namespace's file, that names a reserved namespace, or
//! whose files another root would read as another namespace, is refused with a coded error
//! naming the file, and the tree stays byte for byte as it was. The explicit downloads and the
//! auto-download path (`download::install_worker`) go through the same landing.

use iii_directory::download::{self, DownloadFunction::FromRegistry};
use iii_directory::registry::Release;
use iii_directory::{ReadFunction, WriteFunction};
use serde_json::{Value, json};

use crate::{Setup, common};

const PROFILE: &str = "---\nname: Mine\ndescription: The user's own.\n---\nI am the user's.\n";
const PROMPT: &str = "---\ndescription: The user's reviewer.\n---\nReview like the user.\n";

/// A registry download of `worker` that must be refused with `code`, naming `file`, with
/// the tree, the answers and the events unchanged. Returns the error.
async fn refused(s: &Setup, worker: &str, code: &str, file: &str) -> String {
    let before = s.state();
    let answers = common::dump(&s.directory);
    let events = s.events().len();
    let err = s
        .download(FromRegistry, json!({"worker": worker}))
        .await
        .expect_err(&format!("{worker}: {file} should be refused"));
    assert!(err.starts_with(code), "{worker}/{file}: {err}");
    assert!(err.contains(&format!("{file:?}")), "{file}: {err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(
        s.state(),
        before,
        "{worker}/{file}: the tree changed ({err})"
    );
    assert!(
        common::dump(&s.directory) == answers,
        "{worker}/{file}: the answers changed"
    );
    assert_eq!(s.events().len(), events, "{worker}/{file}: an event fired");
    err
}

fn write(s: &Setup, function: WriteFunction, request: Value) {
    s.directory
        .write(function, &request, None)
        .unwrap_or_else(|e| panic!("{request}: {e}"));
}

/// The user's own profile `mine`, prompt `reviewer` and skill `mailer/notes`, made through the
/// worker's create functions.
/// The system prompt [`users_own`] made is still the one served.
fn assert_users_prompt_is_theirs(s: &Setup) {
    let prompt = common::call(
        &s.directory,
        ReadFunction::SystemPromptsGet,
        json!({"name": "reviewer"}),
    );
    assert_eq!(prompt["description"], "The user's reviewer.");
}

fn users_own(s: &Setup) {
    write(
        s,
        WriteFunction::AgentsCreate,
        json!({"id": "mine", "content": PROFILE}),
    );
    write(
        s,
        WriteFunction::SystemPromptsCreate,
        json!({"name": "reviewer", "content": PROMPT}),
    );
    write(
        s,
        WriteFunction::SkillsCreate,
        json!({"id": "mailer/notes", "content": "# My notes\n\nMine.\n"}),
    );
    write(
        s,
        WriteFunction::SkillsCreate,
        json!({"id": "mailer/notes/index", "content": "# My notes overview\n\nMine.\n"}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_never_replaces_or_shadows_the_users_own_files() {
    let s = Setup::new();
    users_own(&s);
    let cases: [(&str, &str, &str); 5] = [
        // The user's profile, made with agents::create.
        ("agents/mine.md", "---\nname: Evil\n---\nEvil.\n", "D330"),
        // The user's prompt, from another namespace: the same stem, and another stem declaring
        // the same name.
        (
            "system-prompts/reviewer.md",
            "---\ndescription: Evil.\n---\nEvil.\n",
            "D330",
        ),
        (
            "system-prompts/other.md",
            "---\nname: reviewer\ndescription: Evil.\n---\nEvil.\n",
            "D330",
        ),
        // The user's skill in the bundle's own namespace, made with skills::create, replaced
        // or shadowed by a twin overview file of the same id.
        ("notes.md", "# Evil notes\n", "D330"),
        ("notes/SKILL.md", "# Evil notes\n", "D330"),
    ];
    for (path, content, code) in cases {
        // From another namespace, and from the namespace the user's skill is in.
        let workers: &[&str] = if path.starts_with("notes") {
            &["mailer"]
        } else {
            &["aaa", "mailer"]
        };
        for worker in workers {
            s.server
                .bundle(worker, &[("index.md", "# Fine\n"), (path, content)]);
            refused(&s, worker, code, path).await;
        }
    }
    // What the user made is still what they get.
    let agent = common::call(&s.directory, ReadFunction::AgentsGet, json!({"id": "mine"}));
    assert_eq!(agent["name"], "Mine");
    assert_users_prompt_is_theirs(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_never_shadows_the_bundled_defaults() {
    let s = Setup::new();
    for (path, content) in [
        ("agents/iii.md", "---\nname: Evil iii\n---\nEvil.\n"),
        ("agents/iii-minimal.md", "---\nname: Evil\n---\nEvil.\n"),
        (
            "system-prompts/iii-runtime.md",
            "---\ndescription: Evil.\n---\nEvil.\n",
        ),
        (
            "system-prompts/iii-minimal.md",
            "---\ndescription: Evil.\n---\nEvil.\n",
        ),
        (
            "system-prompts/innocent.md",
            "---\nname: iii-runtime\ndescription: Evil.\n---\nEvil.\n",
        ),
    ] {
        s.server
            .bundle("mailer", &[("index.md", "# Fine\n"), (path, content)]);
        let err = refused(&s, "mailer", "D330", path).await;
        assert!(err.contains("bundled with the worker"), "{err}");
    }
    let agent = common::call(&s.directory, ReadFunction::AgentsGet, json!({"id": "iii"}));
    assert_eq!(agent["builtin"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_never_replaces_another_namespaces_files() {
    let s = Setup::new();
    s.server.bundle(
        "first",
        &[
            ("index.md", "# First\n"),
            ("agents/shared.md", "---\nname: First's\n---\nFirst.\n"),
            (
                "system-prompts/helper.md",
                "---\ndescription: First's helper.\n---\nHelp.\n",
            ),
        ],
    );
    s.download(FromRegistry, json!({"worker": "first"}))
        .await
        .expect("first lands");
    s.server.bundle(
        "second",
        &[("agents/shared.md", "---\nname: Second's\n---\nSecond.\n")],
    );
    refused(&s, "second", "D330", "agents/shared.md").await;
    s.server.bundle(
        "second",
        &[(
            "system-prompts/helper.md",
            "---\ndescription: Second's.\n---\nSecond.\n",
        )],
    );
    let err = refused(&s, "second", "D330", "system-prompts/helper.md").await;
    assert!(
        err.contains("skills_folder/first/system-prompts/helper.md"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_download_updates_the_files_it_wrote_and_nothing_the_user_changed() {
    let s = Setup::new();
    let v = |n: u32| {
        vec![
            ("index.md".to_string(), format!("# Mailer v{n}\n")),
            (
                "agents/captain.md".to_string(),
                format!("---\nname: Captain v{n}\n---\nShip.\n"),
            ),
            (
                "system-prompts/reviewer.md".to_string(),
                format!("---\ndescription: Reviews v{n}.\n---\nReview.\n"),
            ),
            ("scripts/run.sh".to_string(), format!("echo v{n}\n")),
        ]
    };
    let publish = |n: u32| {
        let files = v(n);
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        s.server.bundle("mailer", &files);
    };
    publish(1);
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("v1");
    // The same bundle again, then a new version: both land over the files it wrote.
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("v1 again");
    publish(2);
    let response = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("v2");
    assert_eq!(response["agents_written"], json!(["captain"]));
    assert_eq!(response["system_prompts_written"], json!(["reviewer"]));
    let read = |rel: &str| std::fs::read_to_string(s.tree.path(rel)).expect(rel);
    assert_eq!(read("skills/mailer/index.md"), "# Mailer v2\n");
    assert_eq!(read("skills/mailer/scripts/run.sh"), "echo v2\n");
    assert!(read("agents/captain.md").contains("Captain v2"));
    let prompt = common::call(
        &s.directory,
        ReadFunction::SystemPromptsGet,
        json!({"name": "reviewer"}),
    );
    assert_eq!(prompt["description"], "Reviews v2.");
    // The record is never served and never in a list.
    assert!(s.tree.path("skills/mailer/.iii-bundle-files").is_file());
    let ids = common::skill_ids(&s.directory);
    assert!(ids.iter().all(|id| !id.contains("iii-bundle")), "{ids:?}");

    // A file the bundle wrote and the user changed is the user's now: a new version updates
    // the other files and keeps it, saying so.
    s.tree
        .write("skills/mailer/index.md", "# Mailer, edited by hand\n");
    s.tree
        .write("agents/captain.md", "---\nname: My captain\n---\nMine.\n");
    s.directory.reconcile().expect("reconcile");
    publish(3);
    let response = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("v3 keeps the edits");
    assert_eq!(
        response["kept_local"],
        json!(["index.md", "agents/captain.md"])
    );
    assert_eq!(response["skills_written"], json!(["scripts/run.sh"]));
    assert_eq!(response["agents_written"], json!([]));
    assert_eq!(read("skills/mailer/index.md"), "# Mailer, edited by hand\n");
    assert!(read("agents/captain.md").contains("My captain"));
    assert_eq!(read("skills/mailer/scripts/run.sh"), "echo v3\n");
    // And again: still edited, still kept.
    let again = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("v3 again");
    assert_eq!(
        again["kept_local"],
        json!(["index.md", "agents/captain.md"])
    );
    // Once the user puts it back as the bundle left it, the bundle updates it again.
    s.tree.write("skills/mailer/index.md", "# Mailer v2\n");
    s.directory.reconcile().expect("reconcile");
    let response = s
        .download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("v3 over v2");
    assert_eq!(response["kept_local"], json!(["agents/captain.md"]));
    assert_eq!(read("skills/mailer/index.md"), "# Mailer v3\n");
    // `force: true` replaces the edited profile as well.
    let forced = s
        .download(FromRegistry, json!({"worker": "mailer", "force": true}))
        .await
        .expect("forced");
    assert_eq!(forced["kept_local"], json!([]));
    assert!(read("agents/captain.md").contains("Captain v3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_landed_before_records_existed_re_downloads() {
    let s = Setup::new();
    // What an older worker left: the bundle's files, no record.
    s.tree.write("skills/mailer/index.md", "# Mailer\n");
    s.tree.write("skills/mailer/a.md", "# A\n");
    s.directory.reconcile().expect("reconcile");
    s.server
        .bundle("mailer", &[("index.md", "# Mailer\n"), ("a.md", "# A\n")]);
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("the same bytes are adopted");
    s.server.bundle(
        "mailer",
        &[("index.md", "# Mailer v2\n"), ("a.md", "# A\n")],
    );
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("then updated");
    assert_eq!(
        std::fs::read_to_string(s.tree.path("skills/mailer/index.md")).expect("index"),
        "# Mailer v2\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_namespaces_are_refused_as_workers_and_skills() {
    let s = Setup::new();
    users_own(&s);
    for worker in ["system-prompts", "agents", "prompts", "iii-directory"] {
        s.server.bundle(
            worker,
            &[(
                "system-prompts/reviewer.md",
                "---\ndescription: Evil.\n---\nEvil.\n",
            )],
        );
        let before = s.state();
        let err = s
            .download(FromRegistry, json!({"worker": worker}))
            .await
            .expect_err(worker);
        assert!(err.starts_with("D331 invalid_input"), "{worker}: {err}");
        assert!(err.contains(&format!("{worker:?}")), "{err}");
        assert_eq!(s.state(), before, "{worker}");
        assert!(s.server.hits(&format!("/w/{worker}/skills")).is_empty());
        // Auto-download refuses them the same way.
        let err = download::install_worker(&s.directory, &s.registry, worker, Release::latest())
            .await
            .expect_err(worker)
            .to_string();
        assert!(err.starts_with("D331"), "{err}");
        assert_eq!(s.state(), before, "{worker}");
    }
    for skill in ["system-prompts", "Agents", "iii-directory"] {
        let err = s
            .download(
                download::DownloadFunction::FromRepo,
                json!({"repo": "https://127.0.0.1:9/skills.git", "skill": skill}),
            )
            .await
            .expect_err(skill);
        assert!(err.starts_with("D331"), "{skill}: {err}");
    }
    assert_users_prompt_is_theirs(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_download_lands_through_the_same_checks() {
    let s = Setup::new();
    users_own(&s);
    s.server.bundle(
        "mailer",
        &[
            ("index.md", "# Mailer\n"),
            ("agents/mine.md", "---\nname: Evil\n---\nEvil.\n"),
        ],
    );
    let before = s.state();
    let err = download::install_worker(&s.directory, &s.registry, "mailer", Release::latest())
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        err.starts_with("D330") && err.contains("\"agents/mine.md\""),
        "{err}"
    );
    assert_eq!(s.state(), before, "no file and no completion marker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_iii_bundle_in_the_default_layout_stays_in_its_namespace() {
    let s = Setup::new();
    s.server.bundle(
        "iii",
        &[
            ("skills/SKILL.md", "# iii\n\nThe engine.\n"),
            ("skills/mailer/index.md", "# Not the mailer\n"),
        ],
    );
    s.server
        .bundle("mailer", &[("send.md", "# Send\n\nSends mail.\n")]);
    s.download(FromRegistry, json!({"worker": "mailer"}))
        .await
        .expect("mailer");
    // As the boot reconcile fetches it.
    download::install_worker(&s.directory, &s.registry, "iii", Release::latest())
        .await
        .expect("iii");
    assert!(s.tree.path("skills/iii/iii/SKILL.md").is_file());
    assert!(s.tree.path("skills/iii/iii/mailer/index.md").is_file());
    assert!(s.tree.path("skills/iii/.iii-skill-complete").is_file());
    let ids = common::skill_ids(&s.directory);
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids, unique, "nothing listed twice");
    for id in &ids {
        assert!(
            id == "iii"
                || id.starts_with("iii/")
                || id.starts_with("mailer/")
                || id.starts_with("iii-directory"),
            "{id}: {ids:?}"
        );
    }
    assert!(ids.contains(&"iii".to_string()), "{ids:?}");
    assert!(ids.contains(&"iii/mailer".to_string()), "{ids:?}");
    let send = common::call(
        &s.directory,
        ReadFunction::SkillsGet,
        json!({"id": "mailer/send"}),
    );
    assert_eq!(send["title"], "Send");
    // And again: the bundle updates what it wrote.
    download::install_worker(&s.directory, &s.registry, "iii", Release::latest())
        .await
        .expect("iii again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_file_another_root_would_read_as_another_namespace_is_refused() {
    // A local folder inside a namespace folder: a bundle file landing in it would be read as
    // the namespace of its first folder there.
    let s = Setup::with(|c| {
        c.paths.local_skills_folder = c.paths.skills_folder.join("mailer/local");
    });
    s.server.bundle(
        "mailer",
        &[
            ("index.md", "# Mailer\n"),
            ("local/other/x.md", "# Other\n"),
        ],
    );
    let err = refused(&s, "mailer", "D330", "local/other/x.md").await;
    assert!(err.contains("reads as namespace \"other\""), "{err}");
    // A namespace folder that is a link to another namespace's folder inside the root.
    let s = Setup::new();
    s.tree.write("skills/other/index.md", "# Other\n");
    std::os::unix::fs::symlink("other", s.tree.path("skills/mailer")).expect("link");
    s.directory.reconcile().expect("reconcile");
    s.server.bundle("mailer", &[("send.md", "# Send\n")]);
    let err = refused(&s, "mailer", "D330", "send.md").await;
    assert!(err.contains("(through a link)"), "{err}");
    // An agents folder inside the skills folder (a profile would be read as a skill) cannot be
    // configured at all: the layout check refuses it at open (`config::tests::layout_*`).
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_paths_that_could_never_be_served_are_refused() {
    let s = Setup::new();
    for path in ["agents/UPPER.md", "agents/a/b.md", "docs/agents/x.md"] {
        s.server.bundle(
            "mailer",
            &[("index.md", "# Mailer\n"), (path, "---\nname: X\n---\nx\n")],
        );
        refused(&s, "mailer", "D332", path).await;
    }
}
