//! The watcher: external changes become visible without a call to `reconcile`, each burst
//! publishes exactly one `external` per family whose answers changed, and nothing else fires
//! (our own writes, non-documents, temporary files, reads, nested agent files).

use test_support::common;
mod fresh;
mod links_fuzz;

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Tree;
use iii_directory::Root;
use iii_directory::{ChangeEvent, Family};
use iii_directory::{Directory, ReadFunction, WriteFunction};
use iii_directory::{WatchOptions, Watcher};
use serde_json::{Value, json};

/// A small deterministic generator (xorshift), so a failing round can be replayed: from a raw
/// state (`Rng(state)`, not 0), or from any seed through splitmix64 ([`Rng::new`]).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

/// How long the index may take to catch up with an external change.
const CATCH_UP: Duration = Duration::from_secs(2);
/// How long to wait after catching up, beyond the watcher's quiet period, for any extra event
/// of the same burst (or a second burst) to show up.
const SETTLE: Duration = Duration::from_millis(600);

struct Env {
    tree: Tree,
    directory: Arc<Directory>,
    events: Arc<Mutex<Vec<ChangeEvent>>>,
    watcher: Option<Watcher>,
    /// The watcher's quiet period: a burst's events go out this long after its last change.
    quiet: Duration,
}

impl Env {
    fn start(setup: impl FnOnce(&Tree)) -> Env {
        Env::start_with(setup, WatchOptions::default(), None)
    }

    /// With `safety_net_ms`, the live setting `safety_net_interval_ms` is set to it.
    fn start_with(
        setup: impl FnOnce(&Tree),
        options: WatchOptions,
        safety_net_ms: Option<u64>,
    ) -> Env {
        Env::start_configured(setup, options, safety_net_ms, |_| {})
    }

    /// [`Env::start_with`] with the configuration adjusted before the open.
    fn start_configured(
        setup: impl FnOnce(&Tree),
        options: WatchOptions,
        safety_net_ms: Option<u64>,
        adjust: impl FnOnce(&mut iii_directory::config::Config),
    ) -> Env {
        let tree = Tree::new();
        tree.mkdir("skills/iii")
            .mkdir("agents")
            .mkdir(".agents/skills");
        tree.write("skills/mailer/index.md", "# Mailer\n\nSend mail.\n")
            .write("skills/mailer/send.md", "# Send\n\nSend one.\n")
            .write("skills/alpha/index.md", "# Alpha\n\nA.\n")
            .write("skills/alpha/deep/one.md", "# Alpha one\n\nA1.\n")
            .write(
                "skills/alpha/system-prompts/alpha-voice.md",
                "---\ndescription: Alpha voice\n---\nSpeak alpha.\n",
            )
            .write("agents/helper.md", "---\nname: Helper\n---\nHelp.\n")
            .write(
                ".agents/skills/polish/SKILL.md",
                "---\nname: Polish\ndescription: Polish.\n---\nPolish things.\n",
            );
        setup(&tree);
        let mut config = tree.config();
        adjust(&mut config);
        let directory = Arc::new(tree.open_with(config));
        if let Some(ms) = safety_net_ms {
            let mut settings = directory.settings();
            settings.safety_net_interval_ms = ms;
            directory
                .apply_settings(settings)
                .expect("a tunable setting");
        }
        let events: Arc<Mutex<Vec<ChangeEvent>>> = Arc::default();
        let sink = events.clone();
        directory.subscribe(Arc::new(move |e: &ChangeEvent| {
            sink.lock().unwrap().push(e.clone())
        }));
        let quiet = options.quiet;
        let watcher = Watcher::start(directory.clone(), options);
        // Let the watch settle (inotify registration is synchronous, but be generous).
        std::thread::sleep(Duration::from_millis(100));
        Env {
            tree,
            directory,
            events,
            watcher: Some(watcher),
            quiet,
        }
    }

    fn mark(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    fn since(&self, mark: usize) -> Vec<ChangeEvent> {
        self.events.lock().unwrap()[mark..].to_vec()
    }

    /// Polls until `check` holds (at most [`CATCH_UP`]), returning how long it took.
    fn wait_for(&self, what: &str, check: impl Fn(&Directory) -> bool) -> Duration {
        let start = Instant::now();
        loop {
            if check(&self.directory) {
                return start.elapsed();
            }
            if start.elapsed() > CATCH_UP {
                panic!(
                    "the index did not catch up within {CATCH_UP:?}: {what}; events: {:?}",
                    self.events.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// After a burst: exactly these `external` families since `mark`, nothing else.
    fn expect_externals(&self, mark: usize, families: &[Family], what: &str) {
        std::thread::sleep(SETTLE + self.quiet);
        let got = self.since(mark);
        let mut expected: Vec<ChangeEvent> =
            families.iter().map(|f| ChangeEvent::external(*f)).collect();
        let mut sorted = got.clone();
        sorted.sort_by_key(|e| e.family);
        expected.sort_by_key(|e| e.family);
        assert_eq!(sorted, expected, "{what}: events {got:?}");
    }

    fn expect_nothing(&self, mark: usize, what: &str) {
        self.expect_externals(mark, &[], what);
    }

    fn get(&self, id: &str) -> Option<Value> {
        self.directory
            .read(ReadFunction::SkillsGet, &json!({"id": id}), None)
            .ok()
    }

    fn title(&self, id: &str) -> Option<String> {
        self.get(id)
            .and_then(|v| v["title"].as_str().map(str::to_string))
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(w) = self.watcher.take() {
            w.stop();
        }
    }
}

fn has_skill(d: &Directory, id: &str) -> bool {
    d.read(ReadFunction::SkillsGet, &json!({"id": id}), None)
        .is_ok()
}

fn title_of(d: &Directory, id: &str) -> Option<String> {
    d.read(ReadFunction::SkillsGet, &json!({"id": id}), None)
        .ok()
        .and_then(|v| v["title"].as_str().map(str::to_string))
}

fn prompt_names(d: &Directory) -> Vec<String> {
    let v = common::call(d, ReadFunction::SystemPromptsList, json!({}));
    v["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

fn agent_name(d: &Directory, id: &str) -> Option<String> {
    d.read(ReadFunction::AgentsGet, &json!({"id": id}), None)
        .ok()
        .and_then(|v| v["name"].as_str().map(str::to_string))
}

/// After the watcher caught up, the index equals a fresh one.
fn assert_matches_fresh(directory: &Directory) {
    let fresh = common::fresh_index(directory.config());
    let dump = |d: &Directory| {
        let mut out = BTreeMap::new();
        for f in [
            ReadFunction::SkillsList,
            ReadFunction::SkillsIndex,
            ReadFunction::SystemPromptsList,
            ReadFunction::AgentsList,
        ] {
            out.insert(f.id(), common::call(d, f, json!({})));
        }
        out
    };
    assert_eq!(dump(directory), dump(&fresh), "index != fresh index");
}

#[test]
fn external_create_edit_delete_one_event_each() {
    let env = Env::start(|_| {});
    let mark = env.mark();
    env.tree.write("skills/mailer/new.md", "# New one\n\nx\n");
    env.wait_for("create", |d| {
        title_of(d, "mailer/new").as_deref() == Some("New one")
    });
    env.expect_externals(mark, &[Family::Skills], "create");

    let mark = env.mark();
    env.tree.write("skills/mailer/new.md", "# Edited\n\nx\n");
    env.wait_for("edit", |d| {
        title_of(d, "mailer/new").as_deref() == Some("Edited")
    });
    env.expect_externals(mark, &[Family::Skills], "edit");

    // The same size and a new title: still seen (stat differs by mtime, or racy re-read).
    let mark = env.mark();
    env.tree.write("skills/mailer/new.md", "# Edite2\n\nx\n");
    env.wait_for("same-size edit", |d| {
        title_of(d, "mailer/new").as_deref() == Some("Edite2")
    });
    env.expect_externals(mark, &[Family::Skills], "same-size edit");

    let mark = env.mark();
    env.tree.remove("skills/mailer/new.md");
    env.wait_for("delete", |d| !has_skill(d, "mailer/new"));
    env.expect_externals(mark, &[Family::Skills], "delete");

    // Rewriting a file with identical content still changes its `modified_at`: one event.
    let before = env.get("mailer/send").unwrap()["modified_at"].clone();
    std::thread::sleep(Duration::from_millis(20));
    let mark = env.mark();
    env.tree
        .write("skills/mailer/send.md", "# Send\n\nSend one.\n");
    env.wait_for("identical rewrite", |d| {
        d.read(ReadFunction::SkillsGet, &json!({"id": "mailer/send"}), None)
            .unwrap()["modified_at"]
            != before
    });
    env.expect_externals(mark, &[Family::Skills], "identical rewrite");
    assert_matches_fresh(&env.directory);
}

#[test]
fn external_rename_of_a_file_and_an_editor_style_save() {
    let env = Env::start(|_| {});
    let mark = env.mark();
    env.tree
        .rename("skills/mailer/send.md", "skills/mailer/dispatch.md");
    env.wait_for("rename", |d| {
        has_skill(d, "mailer/dispatch") && !has_skill(d, "mailer/send")
    });
    env.expect_externals(mark, &[Family::Skills], "rename");

    // An editor's atomic save: write a temporary sibling, then rename it over the file.
    let mark = env.mark();
    env.tree
        .write("skills/mailer/dispatch.md.tmp", "# Saved by editor\n\nx\n");
    env.tree
        .rename("skills/mailer/dispatch.md.tmp", "skills/mailer/dispatch.md");
    env.wait_for("atomic save", |d| {
        title_of(d, "mailer/dispatch").as_deref() == Some("Saved by editor")
    });
    env.expect_externals(mark, &[Family::Skills], "atomic save");
    assert_matches_fresh(&env.directory);
}

#[test]
fn external_rename_of_a_namespace_folder_and_moves_between_roots() {
    let env = Env::start(|_| {});
    // Global → global: skills and the system prompt inside the namespace both move.
    let mark = env.mark();
    env.tree.rename("skills/alpha", "skills/beta");
    env.wait_for("namespace rename", |d| {
        has_skill(d, "beta/deep/one") && !has_skill(d, "alpha/deep/one") && has_skill(d, "beta")
    });
    // The prompt's name did not change (it lives under any system-prompts folder), but its
    // row (path) did: the system prompts family changes too.
    env.expect_externals(
        mark,
        &[Family::Skills, Family::SystemPrompts],
        "namespace rename",
    );
    assert!(prompt_names(&env.directory).contains(&"alpha-voice".to_string()));

    // Global → local: the namespace now comes from the local root.
    let mark = env.mark();
    env.tree.rename("skills/beta", "skills/iii/beta");
    env.wait_for("move to local", |d| {
        let got = d
            .read(ReadFunction::SkillsGet, &json!({"id": "beta"}), None)
            .ok();
        got.is_some_and(|v| {
            v["path"]
                .as_str()
                .unwrap()
                .ends_with("skills/iii/beta/index.md")
        }) && has_skill(d, "iii/beta/deep/one")
    });
    env.expect_externals(
        mark,
        &[Family::Skills, Family::SystemPrompts],
        "move to local",
    );

    // Local → global again.
    let mark = env.mark();
    env.tree.rename("skills/iii/beta", "skills/gamma");
    env.wait_for("move to global", |d| {
        has_skill(d, "gamma/deep/one") && !has_skill(d, "beta") && !has_skill(d, "iii/beta")
    });
    env.expect_externals(
        mark,
        &[Family::Skills, Family::SystemPrompts],
        "move to global",
    );
    assert_matches_fresh(&env.directory);

    // Moving a namespace out of the roots altogether is a delete.
    let mark = env.mark();
    fs::rename(env.tree.path("skills/mailer"), env.tree.path("outside")).unwrap();
    env.wait_for("move out", |d| !has_skill(d, "mailer/send"));
    env.expect_externals(mark, &[Family::Skills], "move out");
    // And moving it back in is a create.
    let mark = env.mark();
    fs::rename(env.tree.path("outside"), env.tree.path("skills/mailer")).unwrap();
    env.wait_for("move in", |d| has_skill(d, "mailer/send"));
    env.expect_externals(mark, &[Family::Skills], "move in");
    assert_matches_fresh(&env.directory);
}

#[test]
fn an_empty_local_folder_shadows_a_global_namespace() {
    let env = Env::start(|_| {});
    let mark = env.mark();
    env.tree.mkdir("skills/iii/mailer");
    env.wait_for("empty local folder shadows", |d| {
        !has_skill(d, "mailer/send")
    });
    env.expect_externals(mark, &[Family::Skills], "local folder");
    // Removing the folder brings the global namespace back.
    let mark = env.mark();
    fs::remove_dir(env.tree.path("skills/iii/mailer")).unwrap();
    env.wait_for("shadow lifted", |d| has_skill(d, "mailer/send"));
    env.expect_externals(mark, &[Family::Skills], "local folder removed");
    assert_matches_fresh(&env.directory);
}

#[test]
fn agents_skills_root_edits_are_seen() {
    let env = Env::start(|_| {});
    assert_eq!(env.title("polish").as_deref(), Some("Polish"));
    let mark = env.mark();
    env.tree.write(
        ".agents/skills/polish/SKILL.md",
        "---\nname: Polished\n---\nNew text.\n",
    );
    env.wait_for("agents skill edit", |d| {
        title_of(d, "polish").as_deref() == Some("Polished")
    });
    env.expect_externals(mark, &[Family::Skills], "agents skill edit");

    let mark = env.mark();
    env.tree.write(
        ".agents/skills/lint/SKILL.md",
        "---\nname: Lint\n---\nLint.\n",
    );
    env.wait_for("agents skill create", |d| has_skill(d, "lint"));
    env.expect_externals(mark, &[Family::Skills], "agents skill create");

    // Support files are never listed: no event.
    let mark = env.mark();
    env.tree
        .write(".agents/skills/lint/reference/notes.md", "# Notes\n\nx\n");
    env.expect_nothing(mark, "agents skill support file");

    let mark = env.mark();
    env.tree.remove(".agents/skills/lint");
    env.wait_for("agents skill delete", |d| !has_skill(d, "lint"));
    env.expect_externals(mark, &[Family::Skills], "agents skill delete");
    assert_matches_fresh(&env.directory);
}

#[test]
fn agent_profile_edits_and_nested_files() {
    let env = Env::start(|_| {});
    let mark = env.mark();
    env.tree
        .write("agents/bot.md", "---\nname: Bot\n---\nBeep.\n");
    env.wait_for("agent create", |d| {
        agent_name(d, "bot").as_deref() == Some("Bot")
    });
    env.expect_externals(mark, &[Family::Agents], "agent create");

    let mark = env.mark();
    env.tree
        .write("agents/bot.md", "---\nname: Robot\n---\nBeep.\n");
    env.wait_for("agent edit", |d| {
        agent_name(d, "bot").as_deref() == Some("Robot")
    });
    env.expect_externals(mark, &[Family::Agents], "agent edit");

    let mark = env.mark();
    env.tree.remove("agents/bot.md");
    env.wait_for("agent delete", |d| agent_name(d, "bot").is_none());
    env.expect_externals(mark, &[Family::Agents], "agent delete");

    // Nested files are not profiles.
    let mark = env.mark();
    env.tree
        .write("agents/sub/x.md", "---\nname: Nested\n---\nx\n");
    env.expect_nothing(mark, "nested agent file");
    assert!(agent_name(&env.directory, "x").is_none());
    let mark = env.mark();
    env.tree
        .write("agents/sub/x.md", "---\nname: Nested 2\n---\nx\n");
    env.tree.remove("agents/sub");
    env.expect_nothing(mark, "nested agent folder removed");
    assert_matches_fresh(&env.directory);
}

#[test]
fn fifty_files_in_a_loop_are_one_event() {
    // A quiet period that outlasts a writer's pause on a loaded machine (two cores running the
    // whole suite): the default 50 ms split a loop of writes in two there now and then.
    let options = WatchOptions {
        quiet: Duration::from_millis(300),
        ..WatchOptions::default()
    };
    let env = Env::start_with(|_| {}, options, None);
    let mark = env.mark();
    for i in 0..50 {
        env.tree.write(
            &format!("skills/mailer/bulk-{i}.md"),
            &format!("# Bulk {i}\n\nx\n"),
        );
    }
    env.wait_for("50 files", |d| {
        (0..50).all(|i| has_skill(d, &format!("mailer/bulk-{i}")))
    });
    env.expect_externals(mark, &[Family::Skills], "50 files");

    // A burst touching all three families: one event per family.
    let mark = env.mark();
    for i in 0..10 {
        env.tree.write(
            &format!("skills/mailer/bulk-{i}.md"),
            &format!("# Again {i}\n\nx\n"),
        );
    }
    env.tree.write(
        "skills/system-prompts/burst.md",
        "---\ndescription: Burst\n---\nx\n",
    );
    env.tree
        .write("agents/burst.md", "---\nname: Burst\n---\nx\n");
    env.wait_for("three families", |d| {
        title_of(d, "mailer/bulk-9").as_deref() == Some("Again 9")
            && prompt_names(d).contains(&"burst".to_string())
            && agent_name(d, "burst").is_some()
    });
    env.expect_externals(
        mark,
        &[Family::Skills, Family::SystemPrompts, Family::Agents],
        "three families",
    );

    // Deleting them all: one event.
    let mark = env.mark();
    for i in 0..50 {
        env.tree.remove(&format!("skills/mailer/bulk-{i}.md"));
    }
    env.wait_for("50 deletes", |d| {
        (0..50).all(|i| !has_skill(d, &format!("mailer/bulk-{i}")))
    });
    env.expect_externals(mark, &[Family::Skills], "50 deletes");
    assert_matches_fresh(&env.directory);
}

#[test]
fn non_documents_and_temporary_files_fire_nothing() {
    let env = Env::start(|_| {});
    let mark = env.mark();
    env.tree.write("skills/mailer/notes.txt", "text");
    env.tree.write("skills/mailer/x.md.tmp", "# tmp\n\nx\n");
    env.tree
        .write("skills/mailer/send.md.123-4.tmp", "# tmp\n\nx\n");
    env.tree.write("skills/mailer/y.tmp", "tmp");
    env.tree.write("agents/readme.txt", "text");
    env.tree
        .write("agents/bot.md.tmp", "---\nname: Tmp\n---\nx\n");
    env.tree.write(".agents/skills/polish/notes.txt", "text");
    env.tree.remove("skills/mailer/notes.txt");
    env.tree.remove("skills/mailer/y.tmp");
    env.expect_nothing(mark, "non-documents");
    let ids = common::skill_ids(&env.directory);
    assert!(ids.iter().all(|id| !id.contains("tmp")), "{ids:?}");
    assert_matches_fresh(&env.directory);
}

#[test]
fn library_writes_publish_only_their_own_event() {
    let env = Env::start(|_| {});
    let writes: Vec<(WriteFunction, Value, Family, Value)> = vec![
        (
            WriteFunction::SkillsCreate,
            json!({"id": "newns/deep/doc", "content": "# Doc\n\nx\n"}),
            Family::Skills,
            json!({"op": "create", "namespace": "newns", "id": "newns/deep/doc"}),
        ),
        (
            WriteFunction::SkillsUpdate,
            json!({"id": "mailer", "content": "# Mailer v2\n\nx\n"}),
            Family::Skills,
            json!({"op": "update", "namespace": "mailer", "id": "mailer"}),
        ),
        (
            WriteFunction::SkillsDelete,
            json!({"id": "newns/deep/doc"}),
            Family::Skills,
            json!({"op": "delete", "namespace": "newns", "id": "newns/deep/doc"}),
        ),
        (
            WriteFunction::SystemPromptsCreate,
            json!({"name": "pirate", "content": "---\ndescription: Arr\n---\nArr.\n"}),
            Family::SystemPrompts,
            json!({"op": "create", "name": "pirate"}),
        ),
        (
            WriteFunction::SystemPromptsUpdate,
            json!({"name": "pirate", "content": "---\ndescription: Arr 2\n---\nArr.\n"}),
            Family::SystemPrompts,
            json!({"op": "update", "name": "pirate"}),
        ),
        (
            WriteFunction::SystemPromptsUpdate,
            json!({"name": "iii-minimal", "content": "---\ndescription: Mine\n---\nMine.\n"}),
            Family::SystemPrompts,
            json!({"op": "update", "name": "iii-minimal"}),
        ),
        (
            WriteFunction::SystemPromptsDelete,
            json!({"name": "pirate"}),
            Family::SystemPrompts,
            json!({"op": "delete", "name": "pirate"}),
        ),
        (
            WriteFunction::AgentsCreate,
            json!({"id": "captain", "content": "---\nname: Captain\n---\nLead.\n"}),
            Family::Agents,
            json!({"op": "create", "name": "captain"}),
        ),
        (
            WriteFunction::AgentsUpdate,
            json!({"id": "iii", "content": "---\nname: My iii\n---\nMine.\n"}),
            Family::Agents,
            json!({"op": "update", "name": "iii"}),
        ),
        (
            WriteFunction::AgentsDelete,
            json!({"id": "captain"}),
            Family::Agents,
            json!({"op": "delete", "name": "captain"}),
        ),
    ];
    for (function, request, family, payload) in writes {
        let mark = env.mark();
        env.directory
            .write(function, &request, None)
            .unwrap_or_else(|e| panic!("{} {request}: {e}", function.id()));
        std::thread::sleep(Duration::from_millis(500));
        let got = env.since(mark);
        assert_eq!(
            got,
            vec![ChangeEvent { family, payload }],
            "{} {request}: only its own event",
            function.id()
        );
    }
    // A quick succession of writes: still one event each, no external.
    let mark = env.mark();
    for i in 0..20 {
        env.directory
            .write(
                WriteFunction::SkillsCreate,
                &json!({"id": format!("quick/q{i}"), "content": "# Q\n\nx\n"}),
                None,
            )
            .unwrap();
    }
    std::thread::sleep(SETTLE);
    let got = env.since(mark);
    assert_eq!(got.len(), 20, "{got:?}");
    assert!(got.iter().all(|e| e.payload["op"] == "create"), "{got:?}");
    assert_matches_fresh(&env.directory);
    assert!(!env.watcher.as_ref().unwrap().status().degraded);
}

#[test]
fn reads_fire_nothing() {
    let env = Env::start(|_| {});
    let mark = env.mark();
    for _ in 0..20 {
        for f in ReadFunction::ALL {
            let _ = env
                .directory
                .read(f, &json!({"id": "mailer", "name": "iii-minimal"}), None);
        }
        let _ = env.directory.read(
            ReadFunction::SkillsGet,
            &json!({"id": "mailer/send", "raw": true}),
            None,
        );
        let _ = env.directory.read(
            ReadFunction::AgentsGet,
            &json!({"id": "helper", "raw": true}),
            None,
        );
    }
    env.expect_nothing(mark, "reads");
}

#[test]
fn the_safety_net_interval_applies_live() {
    // Nothing watched and the safety net off: a change on disk stays unseen.
    let options = WatchOptions {
        fail_roots: vec![Root::Skills],
        ..WatchOptions::default()
    };
    let env = Env::start_with(|_| {}, options, Some(0));
    env.tree.write("skills/mailer/late.md", "# Late\n\nx\n");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!has_skill(&env.directory, "mailer/late"));
    // Turned on through the live settings, it runs within a second or so.
    let mut settings = env.directory.settings();
    settings.safety_net_interval_ms = 200;
    env.directory.apply_settings(settings).expect("tunable");
    env.wait_for("safety net turned on", |d| has_skill(d, "mailer/late"));
}

#[test]
fn a_failed_watch_is_degraded_and_the_safety_net_catches_up() {
    let options = WatchOptions {
        fail_roots: vec![Root::Skills],
        ..WatchOptions::default()
    };
    let env = Env::start_with(|_| {}, options, Some(300));
    let status = env.watcher.as_ref().unwrap().status();
    assert!(status.degraded, "{status:?}");
    assert!(
        status
            .problems
            .iter()
            .any(|p| p.contains("skills_folder") && p.contains("injected failure")),
        "{status:?}"
    );
    assert!(
        !status
            .watched
            .iter()
            .any(|w| w == &env.tree.path("skills").display().to_string()),
        "{status:?}"
    );
    let mark = env.mark();
    let start = Instant::now();
    env.tree.write("skills/mailer/late.md", "# Late\n\nx\n");
    env.wait_for("safety net", |d| has_skill(d, "mailer/late"));
    let took = start.elapsed();
    assert!(
        took < Duration::from_millis(1200),
        "the safety net took {took:?}"
    );
    env.expect_externals(mark, &[Family::Skills], "safety net");
    let status = env.watcher.as_ref().unwrap().status();
    assert!(status.last_safety_net.is_some(), "{status:?}");
    // Quiet safety-net passes publish nothing.
    let mark = env.mark();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(env.since(mark), vec![]);
}

#[test]
fn stopping_the_watcher_stops_events() {
    let mut env = Env::start(|_| {});
    env.watcher.take().unwrap().stop();
    let mark = env.mark();
    env.tree.write("skills/mailer/after.md", "# After\n\nx\n");
    std::thread::sleep(SETTLE);
    assert_eq!(env.since(mark), vec![]);
    assert!(!has_skill(&env.directory, "mailer/after"));
    env.directory.reconcile().unwrap();
    assert!(has_skill(&env.directory, "mailer/after"));
    assert_eq!(env.since(mark), vec![ChangeEvent::external(Family::Skills)]);
}

#[test]
fn edits_inside_a_renamed_or_new_folder_are_seen() {
    let env = Env::start(|_| {});
    // A folder created with files deep inside, in one go.
    let mark = env.mark();
    env.tree.write("skills/fresh/a/b/c/x.md", "# Deep x\n\nx\n");
    env.wait_for("deep new folder", |d| {
        title_of(d, "fresh/a/b/c/x").as_deref() == Some("Deep x")
    });
    env.expect_externals(mark, &[Family::Skills], "deep new folder");
    // An edit inside the new folder (watched since it appeared).
    let mark = env.mark();
    env.tree
        .write("skills/fresh/a/b/c/x.md", "# Deep x2\n\nx\n");
    env.wait_for("edit in new folder", |d| {
        title_of(d, "fresh/a/b/c/x").as_deref() == Some("Deep x2")
    });
    env.expect_externals(mark, &[Family::Skills], "edit in new folder");

    // Rename a namespace, then edit a file inside it under its new name.
    env.tree.rename("skills/alpha", "skills/beta");
    env.wait_for("rename", |d| has_skill(d, "beta/deep/one"));
    std::thread::sleep(SETTLE);
    let mark = env.mark();
    env.tree
        .write("skills/beta/deep/one.md", "# Beta one edited\n\nx\n");
    env.wait_for("edit in renamed folder", |d| {
        title_of(d, "beta/deep/one").as_deref() == Some("Beta one edited")
    });
    env.expect_externals(mark, &[Family::Skills], "edit in renamed folder");
    let mark = env.mark();
    env.tree
        .write("skills/beta/deep/two.md", "# Beta two\n\nx\n");
    env.wait_for("create in renamed folder", |d| {
        has_skill(d, "beta/deep/two")
    });
    env.expect_externals(mark, &[Family::Skills], "create in renamed folder");

    // Out of the roots and back in, then an edit inside.
    fs::rename(env.tree.path("skills/beta"), env.tree.path("parked")).unwrap();
    env.wait_for("move out", |d| !has_skill(d, "beta/deep/one"));
    fs::rename(env.tree.path("parked"), env.tree.path("skills/delta")).unwrap();
    env.wait_for("move in", |d| has_skill(d, "delta/deep/one"));
    std::thread::sleep(SETTLE);
    let mark = env.mark();
    env.tree
        .write("skills/delta/deep/one.md", "# Delta one\n\nx\n");
    env.wait_for("edit in moved-in folder", |d| {
        title_of(d, "delta/deep/one").as_deref() == Some("Delta one")
    });
    env.expect_externals(mark, &[Family::Skills], "edit in moved-in folder");
    // The old names are not resurrected by late events.
    assert!(!has_skill(&env.directory, "beta/deep/one"));
    assert!(!has_skill(&env.directory, "alpha/deep/one"));
    assert_matches_fresh(&env.directory);
}

/// Every folder of a wide tree is watched (the watch opens folders, and opens are not events,
/// so watching adds nothing to the kernel's queue): an edit deep inside is in the very next read,
/// and is one `external`, with no rescan and nothing degraded.
#[test]
fn a_tree_of_many_folders_is_watched_whole_without_a_rescan() {
    let folders = 5_000;
    let env = Env::start(|tree| {
        for i in 0..folders {
            fs::create_dir_all(tree.path(&format!("skills/wide/f{:02}/g{i}", i % 90))).unwrap();
        }
    });
    let status = env.watcher.as_ref().unwrap().status();
    assert!(!status.degraded, "{status:?}");
    assert_eq!(status.rescans, 0, "{status:?}");
    let mark = env.mark();
    env.tree.write(
        "skills/wide/f07/g4597/late.md",
        "# Late\n\nIn a deep folder.\n",
    );
    assert!(has_skill(&env.directory, "wide/f07/g4597/late"));
    env.expect_externals(mark, &[Family::Skills], "an edit in a wide tree");
    assert_eq!(env.watcher.as_ref().unwrap().status().rescans, 0);
}

/// A sync cookie whose event an overflow of the kernel's queue lost is still answered: the
/// full reconcile the overflow asks for covers every change made before it, so the process
/// waiting on the cookie (the command line beside a worker) gets its answer instead of giving
/// up and reading stale rows.
#[test]
fn a_cookie_an_overflow_swallowed_is_answered_by_the_full_reconcile() {
    let env = Env::start(|_| {});
    let index = env.directory.config().paths.index_path.clone();
    let sync = PathBuf::from(format!("{}.sync", index.display()));
    assert!(
        sync.is_dir(),
        "the writer's watcher makes {}",
        sync.display()
    );
    let cookie = sync.join("4242-0");
    env.watcher.as_ref().unwrap().lose_events_of(|| {
        env.tree.write(
            "skills/mailer/send.md",
            "# Sent\n\nChanged before the cookie.\n",
        );
        fs::write(&cookie, b"").unwrap();
    });
    let deadline = Instant::now() + CATCH_UP;
    while cookie.exists() {
        assert!(
            Instant::now() < deadline,
            "the swallowed cookie was never answered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Answered after the change before it was taken in: a follower reading now sees it.
    let title = env.directory.read(
        ReadFunction::SkillsGet,
        &json!({ "id": "mailer/send" }),
        None,
    );
    assert_eq!(title.unwrap()["title"], "Sent");
    assert_eq!(env.watcher.as_ref().unwrap().status().rescans, 0);
}

/// A write takes in the watcher's echo of its own files before it answers (issue 31), so the
/// read after it has nothing to catch up with; a change made behind the library's back still
/// waits for that read, and the read serves it.
#[test]
fn a_write_leaves_no_echo_for_the_next_read() {
    let env = Env::start(|_| {});
    let mark = env.mark();
    for n in 0..5 {
        let content = format!("# Send {n}\n\nSend one.\n");
        let request = json!({"id": "mailer/send", "content": content});
        env.directory
            .write(WriteFunction::SkillsUpdate, &request, None)
            .expect("update");
        assert!(!env.directory.changes_pending(), "write {n} left its echo");
        assert_eq!(env.title("mailer/send"), Some(format!("Send {n}")));
    }
    env.tree.write(
        "skills/mailer/send.md",
        "# Outside\n\nEdited behind its back.\n",
    );
    assert!(env.directory.changes_pending(), "the edit is heard at once");
    assert_eq!(env.title("mailer/send").as_deref(), Some("Outside"));
    assert!(!env.directory.changes_pending());
    // The five updates' own events, then one external for the edit.
    let mut expected = vec![Family::Skills; 5];
    expected.push(Family::Skills);
    std::thread::sleep(SETTLE);
    let families: Vec<Family> = env.since(mark).iter().map(|e| e.family).collect();
    assert_eq!(families, expected, "{:?}", env.since(mark));
}

/// A change on disk that keeps the disk busy for longer than `max_delay` (a `git checkout` of
/// thousands of files) is one burst: its changes are taken in as they come, and it fires one
/// `external` per family once the disk is quiet, not one every half second.
#[test]
fn a_long_busy_change_on_disk_fires_one_external_per_family() {
    // A quiet period the writer's 5 ms pauses never reach, even on a loaded machine; the
    // reconcile still comes every 500 ms, and the burst may last 5 s.
    let options = WatchOptions {
        quiet: Duration::from_millis(250),
        ..WatchOptions::default()
    };
    let env = Env::start_with(|_| {}, options, None);
    let mark = env.mark();
    let started = Instant::now();
    let mut written = 0;
    while started.elapsed() < Duration::from_millis(1600) {
        env.tree.write(
            &format!("skills/churn/s{}.md", written % 40),
            &format!("# Churn {written}\n\nBody.\n"),
        );
        written += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let last = written - 1;
    let id = format!("churn/s{}", last % 40);
    env.wait_for("the last write", |d| {
        title_of(d, &id) == Some(format!("Churn {last}"))
    });
    env.expect_externals(mark, &[Family::Skills], "1.6 s of writes");
}

/// A writer that lets go of its sync folder as it shuts down: the watcher, still running,
/// does not take the folder's removal for a loss and make it again (it was left behind, marked,
/// after every stop).
#[test]
fn a_released_sync_folder_is_not_made_again() {
    let env = Env::start(|_| {});
    let sync = env
        .directory
        .config()
        .paths
        .index_path
        .with_file_name("index.redb.sync");
    assert!(sync.is_dir(), "claimed at start");
    let watcher = env.watcher.as_ref().expect("watcher");
    watcher.release_sync_folder();
    assert!(!sync.exists(), "released");
    // A change, so that a burst runs (and with it the repair of a lost sync folder).
    env.tree
        .write("skills/late.md", "# Late\n\nAfter the release.\n");
    env.wait_for("the late skill", |d| has_skill(d, "late"));
    std::thread::sleep(SETTLE);
    assert!(!sync.exists(), "made again after its release");
}
