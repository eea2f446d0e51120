//! Fresh reads: a change made on disk by anyone (here `std::fs`, with no call to the library in
//! between) is in the very next read, for every family, every kind of change, and roots that
//! appear and go; concurrent reads are linearizable against a writer; and catching up costs no
//! subscriber its `external` event, nor sends one twice.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::*;

impl Env {
    fn read(&self, function: ReadFunction, request: Value) -> Result<Value, String> {
        self.directory
            .read(function, &request, None)
            .map_err(|e| e.to_string())
    }

    fn prefix_ids(&self, prefix: &str) -> Vec<String> {
        let list = self
            .read(ReadFunction::SkillsList, json!({ "prefix": prefix }))
            .expect("list");
        list["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    }

    fn prompt_description(&self, name: &str) -> Option<String> {
        let got = self
            .read(ReadFunction::SystemPromptsGet, json!({ "name": name }))
            .ok()?;
        got["description"].as_str().map(str::to_string)
    }
}

fn skill(title: &str) -> String {
    format!("# {title}\n\nAbout {title}.\n")
}

/// A tree of `namespaces` × 20 skills.
fn wide(tree: &Tree, namespaces: usize) {
    for ns in 0..namespaces {
        for s in 0..20 {
            tree.write(
                &format!("skills/ns{ns}/s{s}.md"),
                &skill(&format!("ns{ns} s{s}")),
            );
        }
    }
}

/// 1,000 rounds of random changes made with `std::fs` on a tree of 2,000 skills, each read at
/// once: every read shows its change (0 stale), for skills, system prompts and agent profiles.
#[test]
fn a_random_change_on_disk_is_in_the_very_next_read() {
    let rounds: usize = std::env::var("FRESH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let env = Env::start(|tree| wide(tree, 100));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // What the test made, so that changes target things that exist.
    let mut files: Vec<String> = Vec::new(); // skill ids of loose files under `made/`
    let mut folders: Vec<String> = Vec::new(); // namespace folders made by the test
    let mut prompts: BTreeMap<String, u64> = BTreeMap::new();
    let mut agents: BTreeMap<String, u64> = BTreeMap::new();
    let mut stale: Vec<String> = Vec::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for round in 0..rounds {
        let op = rng.below(12);
        let v = rng.next() % 1_000_000;
        let name = match op {
            0 => {
                let id = format!("made/f{round}");
                env.tree
                    .write(&format!("skills/{id}.md"), &skill(&format!("t{v}")));
                files.push(id.clone());
                if env.title(&id) != Some(format!("t{v}")) {
                    stale.push(format!("round {round}: create {id}"));
                }
                "create a skill file"
            }
            1 if !files.is_empty() => {
                let id = files[rng.below(files.len())].clone();
                env.tree
                    .write(&format!("skills/{id}.md"), &skill(&format!("o{v}")));
                if env.title(&id) != Some(format!("o{v}")) {
                    stale.push(format!("round {round}: overwrite {id}"));
                }
                "overwrite a skill file"
            }
            2 if !files.is_empty() => {
                let id = files.swap_remove(rng.below(files.len()));
                env.tree.remove(&format!("skills/{id}.md"));
                if env.title(&id).is_some() {
                    stale.push(format!("round {round}: delete {id}"));
                }
                "delete a skill file"
            }
            3 if !files.is_empty() => {
                let from = files.swap_remove(rng.below(files.len()));
                let to = format!("made/r{round}");
                env.tree
                    .rename(&format!("skills/{from}.md"), &format!("skills/{to}.md"));
                let listed = env.prefix_ids("made/");
                if !listed.contains(&to) || listed.contains(&from) {
                    stale.push(format!("round {round}: rename {from} to {to}"));
                }
                files.push(to);
                "rename a skill file"
            }
            4 => {
                let ns = format!("fold{round}");
                for s in 0..3 {
                    env.tree
                        .write(&format!("skills/{ns}/deep/s{s}.md"), &skill("in a folder"));
                }
                if env.prefix_ids(&format!("{ns}/")).len() != 3 {
                    stale.push(format!("round {round}: new folder {ns}"));
                }
                folders.push(ns);
                "make a folder with skills"
            }
            5 if !folders.is_empty() => {
                let from = folders.swap_remove(rng.below(folders.len()));
                let to = format!("moved{round}");
                env.tree
                    .rename(&format!("skills/{from}"), &format!("skills/{to}"));
                if env.prefix_ids(&format!("{to}/")).len() != 3
                    || !env.prefix_ids(&format!("{from}/")).is_empty()
                {
                    stale.push(format!("round {round}: rename folder {from} to {to}"));
                }
                folders.push(to);
                "rename a folder"
            }
            6 if !folders.is_empty() => {
                let ns = folders.swap_remove(rng.below(folders.len()));
                env.tree.remove(&format!("skills/{ns}"));
                if !env.prefix_ids(&format!("{ns}/")).is_empty() {
                    stale.push(format!("round {round}: remove folder {ns}"));
                }
                "remove a folder"
            }
            7 => {
                let id = format!("ns{}/s{}", rng.below(100), rng.below(20));
                let before = env.title(&id);
                env.tree.set_mtime(&format!("skills/{id}.md"));
                if env.title(&id) != before {
                    stale.push(format!("round {round}: touch {id}"));
                }
                "touch without change"
            }
            8 | 9 => {
                let name = format!("p{}", rng.below(30));
                let path = format!("skills/prompts/system-prompts/{name}.md");
                if prompts.contains_key(&name) && op == 9 {
                    env.tree.remove(&path);
                    prompts.remove(&name);
                    if env.prompt_description(&name).is_some() {
                        stale.push(format!("round {round}: delete prompt {name}"));
                    }
                    "delete a system prompt"
                } else {
                    env.tree
                        .write(&path, &format!("---\ndescription: d{v}\n---\nSpeak {v}.\n"));
                    prompts.insert(name.clone(), v);
                    if env.prompt_description(&name) != Some(format!("d{v}")) {
                        stale.push(format!("round {round}: write prompt {name}"));
                    }
                    "write a system prompt"
                }
            }
            _ => {
                let id = format!("a{}", rng.below(30));
                let path = format!("agents/{id}.md");
                if agents.contains_key(&id) && op == 10 {
                    env.tree.remove(&path);
                    agents.remove(&id);
                    if agent_name(&env.directory, &id).is_some() {
                        stale.push(format!("round {round}: delete agent {id}"));
                    }
                    "delete an agent profile"
                } else {
                    env.tree
                        .write(&path, &format!("---\nname: n{v}\n---\nHelp {v}.\n"));
                    agents.insert(id.clone(), v);
                    if agent_name(&env.directory, &id) != Some(format!("n{v}")) {
                        stale.push(format!("round {round}: write agent {id}"));
                    }
                    "write an agent profile"
                }
            }
        };
        *counts.entry(name).or_default() += 1;
    }
    eprintln!(
        "fresh reads: {rounds} rounds, {} stale; {counts:?}",
        stale.len()
    );
    assert!(stale.is_empty(), "{} stale reads: {stale:#?}", stale.len());
    // And the index is what a fresh scan gives.
    let fresh = common::fresh_index(&env.tree.config());
    let diff = common::dump_diff(&common::dump(&fresh), &common::dump(&env.directory));
    assert!(diff.is_empty(), "{diff:#?}");
}

/// A configured root absent at start is served as soon as it exists, dropped when it goes,
/// and served again when it comes back; status says which state it is in.
#[test]
fn a_root_made_after_start_is_served_then_gone_then_served_again() {
    let env = Env::start(|_| {});
    // The fixture has the agents skills folder: it goes away first.
    env.tree.remove(".agents");
    let state = || {
        env.watcher
            .as_ref()
            .unwrap()
            .status()
            .roots
            .into_iter()
            .find(|r| r.root == "agents_skills_folder")
            .unwrap()
    };
    assert_eq!(state().state, iii_directory::RootState::Absent);
    assert!(state().fresh_reads);
    let polish = ".agents/skills/polish/SKILL.md";
    let text = "---\nname: polish\ndescription: Polish things.\n---\nPolish.\n";
    for round in 0..3 {
        env.tree.write(polish, text);
        assert!(
            env.title("polish").is_some(),
            "round {round}: the new root is served at once"
        );
        assert_eq!(state().state, iii_directory::RootState::Watched);
        env.tree.remove(".agents");
        assert!(
            env.title("polish").is_none(),
            "round {round}: the removed root is dropped at once"
        );
        assert_eq!(state().state, iii_directory::RootState::Absent);
    }
    // A writable root removed and made again, too.
    env.tree.remove("skills");
    assert!(
        env.prefix_ids("")
            .iter()
            .all(|id| id.starts_with("iii-directory"))
    );
    env.tree.write("skills/back/index.md", &skill("Back"));
    assert_eq!(env.title("back").as_deref(), Some("Back"));
    env.tree.write("skills/back/more.md", &skill("More"));
    assert_eq!(env.title("back/more").as_deref(), Some("More"));
}

/// A link whose folder could not be entered when the links were resolved again (another link
/// made meanwhile) leads nowhere known; once the folder may be entered again, a change under
/// the link's target is in the next read through the link, as a rescan finds it.
#[test]
fn a_link_in_a_folder_whose_mode_came_back_follows_its_target_again() {
    where_modes_hold("a_link_in_a_folder_whose_mode_came_back_in_a_child", || {
        a_link_in_a_folder_whose_mode_came_back_here()
    });
}

/// [`a_link_in_a_folder_whose_mode_came_back_follows_its_target_again`], as `nobody`.
#[test]
#[ignore = "run by a_link_in_a_folder_whose_mode_came_back_follows_its_target_again, as nobody"]
fn a_link_in_a_folder_whose_mode_came_back_in_a_child() {
    a_link_in_a_folder_whose_mode_came_back_here();
}

fn a_link_in_a_folder_whose_mode_came_back_here() {
    let env = Env::start(|_| {});
    for (what, script) in [
        (
            "a link to a folder",
            "ln -s ../alpha/deep skills/mailer/more",
        ),
        (
            "its folder closed, a link made, its folder opened",
            "chmod 000 skills/mailer && ln -s alpha skills/zeta && chmod 755 skills/mailer",
        ),
        (
            "a file written in the target",
            "printf '# Two\\n\\nT.\\n' > skills/alpha/deep/two.md",
        ),
    ] {
        sh(&env, script);
        assert_as_rescan(&env, what);
    }
}

/// A folder this process could not list (or watch) when it came, made with mode 000 or renamed
/// while closed, is watched once its mode lets it: what is written in it afterwards, and what
/// its links lead to, is in the next read, as a rescan finds it.
#[test]
fn a_folder_that_came_closed_is_watched_once_opened() {
    where_modes_hold("a_folder_that_came_closed_in_a_child", || {
        a_folder_that_came_closed_here()
    });
}

/// [`a_folder_that_came_closed_is_watched_once_opened`], as `nobody`.
#[test]
#[ignore = "run by a_folder_that_came_closed_is_watched_once_opened, as nobody"]
fn a_folder_that_came_closed_in_a_child() {
    a_folder_that_came_closed_here();
}

fn a_folder_that_came_closed_here() {
    let env = Env::start(|_| {});
    for (what, script) in [
        ("a folder made closed", "mkdir -m 000 skills/came"),
        ("opened", "chmod 755 skills/came"),
        (
            "written in",
            "mkdir skills/came/inner && printf '# Y\\n\\nY.\\n' > skills/came/inner/y.md \
             && printf '# Z\\n\\nZ.\\n' > skills/came/z.md",
        ),
        (
            "a folder holding a link renamed while closed, then opened",
            "ln -s ../../alpha/deep skills/came/inner/more && chmod 000 skills/came/inner \
             && mv skills/came/inner skills/came/went && chmod 755 skills/came/went",
        ),
        (
            "a file written where the link leads",
            "printf '# Three\\n\\nT.\\n' > skills/alpha/deep/three.md",
        ),
    ] {
        sh(&env, script);
        assert_as_rescan(&env, what);
    }
}

/// A root moved into another root (`mv agents skills/team`) is gone from its place in the next
/// read, served as what it is in its new place, and served again when moved back, with what
/// was written meanwhile. The kernel keeps the moved folder's watch, which the folder's new
/// path then takes over: its own move event names the new path, not the root's.
#[test]
fn a_root_moved_into_another_root_and_back_is_in_the_next_read() {
    let env = Env::start(|_| {});
    for (what, script) in [
        (
            "the agents folder moved into the skills folder",
            "mv agents skills/team",
        ),
        (
            "a file written there",
            "printf -- '---\\nname: Z\\n---\\nZ.\\n' > skills/team/z.md",
        ),
        ("moved back", "mv skills/team agents"),
        (
            "a profile written in its place",
            "printf -- '---\\nname: Y\\n---\\nY.\\n' > agents/y.md",
        ),
    ] {
        sh(&env, script);
        assert_as_rescan(&env, what);
    }
}

/// A link to a folder named like a file (`alpha.v2 -> alpha`) is walked as the folder it
/// leads to, so its files' rows (here `check`'s, the name being no valid id segment) come with
/// it and go with it; the kernel reports a link as a file, whose name alone does not say it
/// matters.
#[test]
fn a_link_to_a_folder_named_like_a_file_is_in_the_next_check() {
    let env = Env::start(|_| {});
    for (what, script) in [
        ("the link made", "ln -s alpha skills/alpha.v2"),
        ("the link removed", "rm skills/alpha.v2"),
        (
            "the link renamed in",
            "ln -s mailer skills/m.lnk && mv skills/m.lnk skills/m.old",
        ),
        ("the link renamed away", "mv skills/m.old m.old"),
    ] {
        sh(&env, script);
        assert_as_rescan(&env, what);
    }
}

/// Whether this process may read a file of mode 000 (root may): a mode change cannot hide
/// anything from it then.
fn permissions_ignored() -> bool {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let probe = dir.path().join("probe");
    fs::write(&probe, "x").expect("write");
    fs::set_permissions(&probe, fs::Permissions::from_mode(0o000)).expect("chmod");
    fs::read(&probe).is_ok()
}

/// A root's own mode changed by another process (`chmod 000 agents`, and back) is in the very
/// next read: what it served goes, `check` lists the folder it cannot list, and what was
/// written into it meanwhile is served once it may be listed again, as a rescan finds. The
/// kernel reports a folder's mode change to its parent's watch, which a root's parent is
/// not, and to the folder's own, without a name. Run as `nobody` (through `setpriv`) when
/// run as root, which reads whatever the modes say.
#[test]
fn a_roots_mode_changed_is_in_the_next_read() {
    where_modes_hold("a_roots_mode_changed_in_a_child", || {
        a_roots_mode_changed_is_in_the_next_read_here()
    });
}

/// Runs `here`, or, when this process reads whatever the modes say (root), the ignored test
/// `child` (which runs `here`) as `nobody` through `setpriv`, if it can.
fn where_modes_hold(child: &str, here: impl FnOnce()) {
    if !permissions_ignored() {
        here();
        return;
    }
    let has_setpriv = std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_setpriv {
        println!("note: running as root without setpriv: a mode change hides nothing, skipped");
        return;
    }
    let test = common::child::test_path(module_path!(), child);
    let exe = std::env::current_exe().expect("test binary");
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(exe)
        .args([
            "--exact",
            &test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// [`a_roots_mode_changed_is_in_the_next_read`], as `nobody`.
#[test]
#[ignore = "run by a_roots_mode_changed_is_in_the_next_read, as nobody"]
fn a_roots_mode_changed_in_a_child() {
    a_roots_mode_changed_is_in_the_next_read_here();
}

fn a_roots_mode_changed_is_in_the_next_read_here() {
    let env = Env::start(|_| {});
    for (what, script) in [
        ("the agents folder made unlistable", "chmod 000 agents"),
        (
            "a profile written into it meanwhile",
            "chmod 700 agents && printf -- '---\\nname: Q\\n---\\nQ.\\n' > agents/q.md \
             && chmod 000 agents",
        ),
        ("the agents folder listable again", "chmod 755 agents"),
        ("the skills folder made unlistable", "chmod 000 skills"),
        ("the skills folder listable again", "chmod 755 skills"),
    ] {
        sh(&env, script);
        assert_as_rescan(&env, what);
    }
}

/// `check` lists two kinds of files that are not documents, an update's `.upstream` conflict
/// copy and a writer's temporary file. Made and removed on disk by another process while the
/// watcher runs, each is in the very next `check`, as a rescan lists it, and in no answer.
#[test]
fn a_conflict_copy_or_a_temporary_file_on_disk_is_in_the_next_check() {
    let env = Env::start(|tree| wide(tree, 3));
    let reasons = |env: &Env| -> BTreeMap<String, String> {
        env.directory
            .skipped()
            .expect("check")
            .into_iter()
            .map(|s| {
                let value = serde_json::to_value(&s).expect("row");
                let path = value["path"].as_str().expect("path").to_string();
                let name = path.rsplit('/').next().expect("name").to_string();
                (name, value["reason"].to_string())
            })
            .collect()
    };
    let skills_before = env.prefix_ids("");
    // pid 1 always runs: its temporary file is a write in progress, listed and left alone.
    let files = ["s1.md.upstream", "s2.md.1-7.tmp"];
    for name in files {
        env.tree
            .write(&format!("skills/ns1/{name}"), "not a document\n");
        assert!(
            reasons(&env).contains_key(name),
            "{name} is in the next check"
        );
        assert_as_rescan(&env, &format!("{name} made"));
    }
    let listed = reasons(&env);
    assert!(listed["s1.md.upstream"].contains("upstream"), "{listed:?}");
    assert!(listed["s2.md.1-7.tmp"].contains("process 1"), "{listed:?}");
    assert_eq!(env.prefix_ids(""), skills_before, "no answer changes");
    for name in files {
        env.tree.remove(&format!("skills/ns1/{name}"));
        assert!(
            !reasons(&env).contains_key(name),
            "{name} is gone from the next check"
        );
        assert_as_rescan(&env, &format!("{name} removed"));
    }
    // A document whose name is not UTF-8 is listed too, as it comes and goes.
    use std::os::unix::ffi::OsStrExt;
    let raw = env
        .tree
        .path("skills/ns1")
        .join(std::ffi::OsStr::from_bytes(b"n\xe9.md"));
    fs::write(&raw, "# N\n\nx\n").expect("write");
    assert!(
        reasons(&env)["n\\xE9.md"].contains("not valid UTF-8"),
        "{:?}",
        reasons(&env)
    );
    assert_as_rescan(&env, "a name that is not UTF-8 made");
    fs::remove_file(&raw).expect("remove");
    assert!(!reasons(&env).contains_key("n\\xE9.md"));
    assert_as_rescan(&env, "a name that is not UTF-8 removed");
    assert_eq!(env.prefix_ids(""), skills_before, "no answer changes");
}

/// A writer thread replaces files (atomically, by rename) while reader threads read: every
/// answer is what disk held at some moment between the read's start and its end.
#[test]
fn concurrent_reads_see_disk_as_it_was_during_the_read() {
    let env = Arc::new(Env::start(|tree| {
        wide(tree, 10);
        for f in 0..4 {
            tree.write(&format!("skills/race/f{f}.md"), &skill("v0"));
        }
    }));
    // Per file: the last version whose write completed, and the last one begun.
    let completed: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    let begun: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (env, completed, begun, stop) =
            (env.clone(), completed.clone(), begun.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut version = 0u64;
            while !stop.load(Ordering::SeqCst) && version < 3_000 {
                version += 1;
                let f = (version % 4) as usize;
                begun[f].store(version, Ordering::SeqCst);
                let path = env.tree.path(&format!("skills/race/f{f}.md"));
                let tmp = env.tree.path(&format!("race-f{f}.part"));
                fs::write(&tmp, skill(&format!("v{version}"))).unwrap();
                fs::rename(&tmp, &path).unwrap();
                completed[f].store(version, Ordering::SeqCst);
            }
        })
    };
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (env, completed, begun) = (env.clone(), completed.clone(), begun.clone());
            std::thread::spawn(move || {
                let mut checked = 0;
                let mut wrong = Vec::new();
                for i in 0..400 {
                    let f = (i + r) % 4;
                    let low = completed[f].load(Ordering::SeqCst);
                    let title = env.title(&format!("race/f{f}")).expect("a race file");
                    let high = begun[f].load(Ordering::SeqCst);
                    let seen: u64 = title.trim_start_matches('v').parse().unwrap();
                    if seen < low || seen > high {
                        wrong.push(format!("f{f}: saw v{seen}, disk held v{low}..=v{high}"));
                    }
                    checked += 1;
                }
                (checked, wrong)
            })
        })
        .collect();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for reader in readers {
        let (n, w) = reader.join().unwrap();
        checked += n;
        wrong.extend(w);
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    eprintln!(
        "concurrent reads: {checked} checked, {} outside their window",
        wrong.len()
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A burst made on disk while reads catch up with it, change by change, still announces one
/// `external` per family it touched, once.
#[test]
fn catching_up_keeps_one_external_per_family_per_burst() {
    // A burst long enough to hold the whole loop on a loaded machine: the point is that reads
    // catching up inside one burst neither add announcements nor take them away.
    let options = WatchOptions {
        quiet: Duration::from_millis(400),
        max_delay: Duration::from_secs(20),
        ..WatchOptions::default()
    };
    let env = Env::start_with(|tree| wide(tree, 5), options, None);
    std::thread::sleep(SETTLE);
    let mark = env.mark();
    for i in 0..10 {
        env.tree
            .write(&format!("skills/ns1/burst{i}.md"), &skill(&format!("b{i}")));
        assert_eq!(env.title(&format!("ns1/burst{i}")), Some(format!("b{i}")));
        env.tree.write(
            &format!("skills/ns1/system-prompts/p{i}.md"),
            "---\ndescription: p\n---\nP.\n",
        );
        assert!(env.prompt_description(&format!("p{i}")).is_some());
        env.tree
            .write(&format!("agents/b{i}.md"), "---\nname: B\n---\nB.\n");
        assert!(agent_name(&env.directory, &format!("b{i}")).is_some());
    }
    std::thread::sleep(SETTLE + Duration::from_millis(400));
    let mut got = env.since(mark);
    got.sort_by_key(|e| e.family);
    assert_eq!(
        got,
        vec![
            ChangeEvent::external(Family::Skills),
            ChangeEvent::external(Family::SystemPrompts),
            ChangeEvent::external(Family::Agents),
        ]
    );
    // Reads with nothing changed announce nothing.
    let mark = env.mark();
    for _ in 0..20 {
        env.title("ns1/burst3");
    }
    std::thread::sleep(SETTLE + Duration::from_millis(400));
    assert_eq!(env.since(mark), vec![]);
}

/// The global roots are watched like the others: a file another process writes there (here a
/// shell), even into a global folder that did not exist when the watcher started, is in the
/// very next read, and the status lists both roots.
#[test]
fn a_file_another_process_writes_into_a_global_root_is_in_the_next_read() {
    let env = Env::start_configured(
        |tree| {
            tree.mkdir("home/.iii/agents");
        },
        WatchOptions::default(),
        None,
        |config| {
            let base = config
                .paths
                .skills_folder
                .parent()
                .expect("base")
                .to_path_buf();
            config.paths.global_agents_folder = Some(base.join("home/.iii/agents"));
            config.paths.global_agents_skills_folder = Some(base.join("home/.agents/skills"));
        },
    );
    let watched: Vec<(String, iii_directory::RootState)> = env
        .watcher
        .as_ref()
        .expect("watcher")
        .status()
        .roots
        .into_iter()
        .map(|r| (r.root.to_string(), r.state))
        .collect();
    assert!(
        watched.contains(&(
            "global_agents_folder".into(),
            iii_directory::RootState::Watched
        )),
        "{watched:?}"
    );
    assert!(
        watched.contains(&(
            "global_agents_skills_folder".into(),
            iii_directory::RootState::Absent
        )),
        "{watched:?}"
    );
    let shell = |script: &str| {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(env.tree.base())
            .status()
            .expect("sh");
        assert!(status.success(), "{script}");
    };
    for round in 0..20 {
        shell(&format!(
            "printf -- '---\\nname: Global {round}\\n---\\nBody.\\n' > home/.iii/agents/g{round}.md"
        ));
        let got = env
            .read(
                ReadFunction::AgentsGet,
                json!({ "id": format!("g{round}") }),
            )
            .expect("the profile just written");
        assert_eq!(got["name"], format!("Global {round}"));
        shell(&format!(
            "mkdir -p home/.agents/skills/s{round} && printf -- '---\\nname: s{round}\\ndescription: S.\\n---\\nUse it.\\n' > home/.agents/skills/s{round}/SKILL.md"
        ));
        let got = env
            .read(
                ReadFunction::SkillsGet,
                json!({ "id": format!("s{round}") }),
            )
            .expect("the skill just written");
        assert_eq!(got["title"], format!("s{round}"));
        shell(&format!("rm home/.iii/agents/g{round}.md"));
        assert!(
            env.read(
                ReadFunction::AgentsGet,
                json!({ "id": format!("g{round}") })
            )
            .is_err(),
            "removed in round {round}"
        );
    }
    assert_matches_fresh(&env.directory);
}

/// Runs `script` with `sh` in the tree's base folder: another process's change.
fn sh(env: &Env, script: &str) {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(env.tree.base())
        .status()
        .expect("sh");
    assert!(status.success(), "{script}");
}

/// The next read answers what a from-scratch rescan answers (the skipped files too: a link
/// made broken is reported as such).
fn assert_as_rescan(env: &Env, what: &str) {
    let ours = common::dump(&env.directory);
    let fresh = common::fresh_index(&env.tree.config());
    let diff = common::dump_diff(&ours, &common::dump(&fresh));
    assert!(
        diff.is_empty(),
        "{what}: the read differs from a rescan:{diff}"
    );
}

/// What is reached through a symbolic link to a folder (in the same root, and from
/// `agents_skills_folder` into `skills_folder`, as installers lay skills out) is refreshed by
/// the next read when the target changes: the watcher hears the change under the target only.
#[test]
fn a_change_under_a_linked_folder_is_in_the_next_read_through_the_link() {
    let env = Env::start(|tree| {
        tree.write("skills/tgt/index.md", "# T1\n\nx\n").write(
            "skills/real-skill/SKILL.md",
            "---\nname: linked-skill\ndescription: A skill.\n---\nFirst.\n",
        );
        std::os::unix::fs::symlink("tgt", tree.path("skills/ali")).unwrap();
        std::os::unix::fs::symlink(
            tree.path("skills/real-skill"),
            tree.path(".agents/skills/linked-skill"),
        )
        .unwrap();
    });
    assert_eq!(env.title("ali").as_deref(), Some("T1"));
    sh(
        &env,
        "printf '# T2\\n\\nx\\n' > skills/tgt/t.tmp && mv skills/tgt/t.tmp skills/tgt/index.md",
    );
    assert_eq!(env.title("ali").as_deref(), Some("T2"), "a save by rename");
    sh(&env, "printf '# new\\n' > skills/tgt/new.md");
    assert_eq!(env.title("ali/new").as_deref(), Some("new"), "a new file");
    sh(&env, "rm skills/tgt/index.md");
    assert_eq!(env.title("ali"), None, "a removed file");
    assert_as_rescan(&env, "folder link");
    let body = || {
        env.get("linked-skill")
            .and_then(|v| v["body"].as_str().map(|b| b.trim().to_string()))
    };
    assert_eq!(body().as_deref(), Some("First."));
    sh(
        &env,
        "printf -- '---\\nname: linked-skill\\ndescription: A skill.\\n---\\nSecond.\\n' \
         > skills/real-skill/SKILL.md",
    );
    assert_eq!(body().as_deref(), Some("Second."), "across roots");
    // The target folder renamed away, then back.
    sh(&env, "mv skills/tgt skills/tgt2");
    assert_eq!(env.title("ali/new"), None, "its target renamed away");
    assert_as_rescan(&env, "broken folder link");
    sh(&env, "mv skills/tgt2 skills/tgt");
    assert_eq!(env.title("ali/new").as_deref(), Some("new"), "and back");
    assert_as_rescan(&env, "mended folder link");
}

/// A watched tree holding `files` (path, text) and the symbolic links `links` (path, text),
/// where `script` then writes: the next read answers what a rescan does.
fn written_below_links(files: &[(&str, &str)], links: &[(&str, &str)], script: &str) -> Env {
    let env = Env::start(|tree| {
        for (path, text) in files {
            tree.write(path, text);
        }
        for (path, text) in links {
            std::os::unix::fs::symlink(text, tree.path(path)).unwrap();
        }
    });
    sh(&env, script);
    assert_as_rescan(&env, script);
    env
}

/// A link back up (`a/b/up -> ..`) is a loop on its own path but not on one through another
/// link (`x -> a/b`): `x/up` lists `a`, and a change there is in the next read through it.
#[test]
fn a_change_reached_through_a_link_back_up_is_in_the_next_read() {
    let env = written_below_links(
        &[
            ("skills/a/index.md", "# A1\n\nx\n"),
            ("skills/a/b/.keep", ""),
        ],
        &[("skills/a/b/up", ".."), ("skills/x", "a/b")],
        "printf '# A2\\n\\nx\\n' > skills/a/index.md",
    );
    assert_eq!(env.title("x/up").as_deref(), Some("A2"));
}

/// Two links back up in a row, entered through another link (`y -> a/b/c`, `a/b/c/up2 -> ..`,
/// `a/b/up -> ..`): the walk passes `c`, `b`, `a`, no folder twice, and serves `a` as
/// `y/up2/up`.
#[test]
fn a_change_reached_through_two_links_back_up_is_in_the_next_read() {
    let env = written_below_links(
        &[
            ("skills/a/index.md", "# A1\n\nx\n"),
            ("skills/a/b/c/.keep", ""),
        ],
        &[
            ("skills/a/b/up", ".."),
            ("skills/a/b/c/up2", ".."),
            ("skills/y", "a/b/c"),
        ],
        "printf '# A2\\n\\nx\\n' > skills/a/index.md",
    );
    assert_eq!(env.title("y/up2/up").as_deref(), Some("A2"));
}

/// The local root lies inside the skills root (the default layout), and its walk starts at
/// it: a link from it up to the skills root serves the skills root again under the local
/// root, and so does a link into another root that links back to the skills root
/// (`skills/iii/l -> .agents/skills`, `.agents/skills/s -> skills`): the skills root is not a
/// folder the local root's walk passed, though its path holds it. A change there is in the
/// next read through either.
#[test]
fn a_change_reached_from_the_local_root_through_links_is_in_the_next_read() {
    let write = "printf '# F2\\n\\nx\\n' > skills/foo/index.md";
    let files = [("skills/foo/index.md", "# F1\n\nx\n")];
    let env = written_below_links(&files, &[("skills/iii/up", "..")], write);
    assert_eq!(env.title("up/foo").as_deref(), Some("F2"));
    written_below_links(
        &files,
        &[
            ("skills/iii/l", "../../.agents/skills"),
            (".agents/skills/s", "../../skills"),
        ],
        write,
    );
}

/// A folder of the agents skills root that is a link to the root itself (`x -> .`) serves the
/// root's own `SKILL.md` as `x`: that walk looks at each folder's `SKILL.md` by its path and
/// meets no loop, so a write to it is in the next read through the link.
#[test]
fn a_change_reached_through_a_link_to_a_shallow_root_itself_is_in_the_next_read() {
    written_below_links(
        &[],
        &[(".agents/skills/x", ".")],
        "printf -- '---\\nname: x\\ndescription: Itself.\\n---\\nBody.\\n' \
         > .agents/skills/SKILL.md",
    );
}

/// A link from the skills tree into a folder of a shallow root (`skills/foo ->
/// ../.agents/skills/x`, `skills/team -> ../agents`) is walked as a tree: the files below it,
/// deeper than the shallow root's own walk looks, are served through the link, and a change
/// there (a file written, folders made with a file in them) is in the next read.
#[test]
fn a_change_below_a_shallow_root_reached_from_the_tree_through_a_link_is_in_the_next_read() {
    let env = written_below_links(
        &[
            (".agents/skills/x/sub/f.md", "# F1\n\nx\n"),
            ("agents/sub/p.md", "# P1\n\nx\n"),
        ],
        &[
            ("skills/foo", "../.agents/skills/x"),
            ("skills/team", "../agents"),
        ],
        "printf '# F2\\n\\nx\\n' > .agents/skills/x/sub/f.md",
    );
    assert_eq!(env.title("foo/sub/f").as_deref(), Some("F2"));
    sh(&env, "printf '# P2\\n\\nx\\n' > agents/sub/p.md");
    assert_eq!(env.title("team/sub/p").as_deref(), Some("P2"));
    sh(
        &env,
        "mkdir -p .agents/skills/x/sub/new/deeper && \
         printf '# N\\n\\nx\\n' > .agents/skills/x/sub/new/deeper/n.md",
    );
    assert_as_rescan(&env, "folders made below the link's target");
    sh(
        &env,
        "printf '# N2\\n\\nx\\n' > .agents/skills/x/sub/new/deeper/n.md",
    );
    assert_as_rescan(&env, "a file written in them");
    assert_eq!(env.title("foo/sub/new/deeper/n").as_deref(), Some("N2"));
    // A link made later, into a folder the agents skills root watched one level deep.
    sh(
        &env,
        "mkdir -p .agents/skills/z/sub && printf '# G1\\n\\nx\\n' > .agents/skills/z/sub/g.md",
    );
    sh(&env, "ln -s ../.agents/skills/z skills/bar");
    assert_as_rescan(&env, "a link made later");
    sh(&env, "printf '# G2\\n\\nx\\n' > .agents/skills/z/sub/g.md");
    assert_as_rescan(&env, "a write below a link made later");
    assert_eq!(env.title("bar/sub/g").as_deref(), Some("G2"));
}

/// A link to a file below a shallow root's depth (`skills/notes.md ->
/// ../.agents/skills/x/docs/notes.md`, an agents skill folder's `SKILL.md` linked to one deeper
/// in the root) is read through its target, whose folder the root's own watch does not reach:
/// a write there is in the next read. So is a target made later, below folders made with it,
/// for a broken link to a file and for one to a folder.
#[test]
fn a_change_to_a_link_target_below_a_shallow_root_is_in_the_next_read() {
    let skill = "---\nname: y\ndescription: Deep.\n---\nOne.\n";
    let env = written_below_links(
        &[
            (".agents/skills/x/docs/notes.md", "# N1\n\nx\n"),
            (".agents/skills/x/sub/SKILL.md", skill),
            (".agents/skills/y/.keep", ""),
        ],
        &[
            ("skills/notes.md", "../.agents/skills/x/docs/notes.md"),
            (".agents/skills/y/SKILL.md", "../x/sub/SKILL.md"),
            ("skills/later.md", "../.agents/skills/x/new/deeper/later.md"),
            ("skills/gone", "../.agents/skills/w/inner"),
        ],
        "printf '# N2\\n\\nx\\n' > .agents/skills/x/docs/notes.md",
    );
    assert_eq!(env.title("notes").as_deref(), Some("N2"));
    sh(
        &env,
        "printf -- '---\\nname: y\\ndescription: Deep.\\n---\\nTwo.\\n' \
         > .agents/skills/x/sub/SKILL.md",
    );
    assert_as_rescan(&env, "a skill folder's SKILL.md linked deeper");
    sh(
        &env,
        "mkdir -p .agents/skills/x/new/deeper && \
         printf '# L1\\n\\nx\\n' > .agents/skills/x/new/deeper/later.md",
    );
    assert_as_rescan(&env, "a broken link's file made below new folders");
    sh(
        &env,
        "printf '# L2\\n\\nx\\n' > .agents/skills/x/new/deeper/later.md",
    );
    assert_as_rescan(&env, "and written again");
    assert_eq!(env.title("later").as_deref(), Some("L2"));
    sh(
        &env,
        "mkdir -p .agents/skills/w/inner/sub && \
         printf '# G1\\n\\nx\\n' > .agents/skills/w/inner/sub/g.md",
    );
    assert_as_rescan(&env, "a broken link's folder made with a skill below it");
    sh(
        &env,
        "printf '# G2\\n\\nx\\n' > .agents/skills/w/inner/sub/g.md",
    );
    assert_as_rescan(&env, "and written again");
    assert_eq!(env.title("gone/sub/g").as_deref(), Some("G2"));
}

/// A link from the skills tree through a link in the agents skills root
/// (`skills/foo -> ../.agents/skills/hop`, `hop -> x`) leads elsewhere when that link is
/// re-pointed (`hop -> z`): the folders below its new target are watched as deep, and a write
/// there is in the next read.
#[test]
fn a_link_re_pointed_below_a_shallow_root_is_followed_as_deep() {
    let env = written_below_links(
        &[
            (".agents/skills/x/sub/f.md", "# X\n\nx\n"),
            (".agents/skills/z/sub/f.md", "# Z1\n\nx\n"),
        ],
        &[
            (".agents/skills/hop", "x"),
            ("skills/foo", "../.agents/skills/hop"),
        ],
        "ln -sfn z .agents/skills/hop",
    );
    assert_eq!(env.title("foo/sub/f").as_deref(), Some("Z1"));
    sh(&env, "printf '# Z2\\n\\nx\\n' > .agents/skills/z/sub/f.md");
    assert_as_rescan(&env, "a write below the new target");
    assert_eq!(env.title("foo/sub/f").as_deref(), Some("Z2"));
}

/// A skill folder of the agents skills root that is a link to a folder deeper in it
/// (`y -> x/sub`) serves that folder's `SKILL.md` as `y`, one level deeper than the root's own
/// walk looks: a write to it is in the next read.
#[test]
fn a_change_a_shallow_root_reaches_deeper_in_itself_through_a_link_is_in_the_next_read() {
    let skill = |body: &str| format!("---\nname: y\ndescription: Deep.\n---\n{body}\n");
    let env = written_below_links(
        &[(".agents/skills/x/sub/SKILL.md", &skill("One."))],
        &[(".agents/skills/y", "x/sub")],
        "printf -- '---\\nname: y\\ndescription: Deep.\\n---\\nTwo.\\n' \
         > .agents/skills/x/sub/SKILL.md",
    );
    let body = env
        .get("y")
        .and_then(|v| v["body"].as_str().map(str::to_string));
    assert_eq!(body.as_deref().map(str::trim), Some("Two."));
}

/// A broken link whose text crosses another link before it goes up (`hop/../gone.md` with
/// `hop -> deep/inner`) leads where the system resolves it, `deep/gone.md`: the file made
/// there is served through the link at the next read.
#[test]
fn a_broken_link_through_another_link_comes_alive_in_the_next_read() {
    let env = Env::start(|tree| {
        tree.mkdir("skills/deep/inner");
        std::os::unix::fs::symlink("deep/inner", tree.path("skills/hop")).unwrap();
        std::os::unix::fs::symlink("hop/../gone.md", tree.path("skills/mend.md")).unwrap();
    });
    // A change heard first: the watcher's first burst resolves every link it listed again.
    sh(&env, "printf '# Other\\n\\nx\\n' > skills/deep/other.md");
    assert_eq!(env.title("deep/other").as_deref(), Some("Other"));
    sh(&env, "printf '# Gone\\n\\nx\\n' > skills/deep/gone.md");
    // A list first: a `get` of an id the index lacks looks at the disk itself.
    assert_as_rescan(&env, "a link made whole");
    assert_eq!(env.title("mend").as_deref(), Some("Gone"));
}

/// A symbolic link to a file (a skill, a system prompt, an agent profile) follows its target:
/// an in-place write shows through the link, and a removed target leaves a broken link.
#[test]
fn a_linked_file_follows_its_target_in_the_next_read() {
    let env = Env::start(|tree| {
        tree.write("skills/fl/a.md", "# A1\n\nx\n")
            .write(
                "skills/fl/system-prompts/a.md",
                "---\ndescription: P1\n---\nSpeak.\n",
            )
            .write("agents/a.md", "---\nname: Agent1\n---\nHelp.\n");
        for link in [
            "skills/fl/b.md",
            "skills/fl/system-prompts/b.md",
            "agents/b.md",
        ] {
            std::os::unix::fs::symlink("a.md", tree.path(link)).unwrap();
        }
    });
    assert_eq!(env.title("fl/b").as_deref(), Some("A1"));
    sh(&env, "printf '# A2\\n\\nx\\n' > skills/fl/a.md");
    assert_eq!(env.title("fl/b").as_deref(), Some("A2"), "skill");
    sh(
        &env,
        "printf -- '---\\ndescription: P2\\n---\\nSpeak.\\n' > skills/fl/system-prompts/a.md",
    );
    assert_eq!(env.prompt_description("b").as_deref(), Some("P2"), "prompt");
    sh(
        &env,
        "printf -- '---\\nname: Agent2\\n---\\nHelp.\\n' > agents/a.md",
    );
    assert_eq!(
        agent_name(&env.directory, "b").as_deref(),
        Some("Agent2"),
        "profile"
    );
    sh(
        &env,
        "rm skills/fl/a.md skills/fl/system-prompts/a.md agents/a.md",
    );
    assert_eq!(env.title("fl/b"), None);
    assert_eq!(env.prompt_description("b"), None);
    assert_eq!(agent_name(&env.directory, "b"), None);
    assert_as_rescan(&env, "broken file links");
    sh(&env, "printf '# A3\\n\\nx\\n' > skills/fl/a.md");
    assert_eq!(
        env.title("fl/b").as_deref(),
        Some("A3"),
        "target made again"
    );
}

/// A link made, retargeted or removed while the watcher runs is itself picked up: what it
/// reaches is served, and followed from then on.
#[test]
fn a_link_made_or_changed_later_is_followed_from_then_on() {
    let env = Env::start(|tree| {
        tree.write("skills/one/index.md", "# One\n\nx\n")
            .write("skills/two/index.md", "# Two\n\nx\n");
    });
    sh(&env, "ln -s one skills/ali");
    assert_eq!(env.title("ali").as_deref(), Some("One"));
    sh(&env, "printf '# One b\\n\\nx\\n' > skills/one/index.md");
    assert_eq!(env.title("ali").as_deref(), Some("One b"));
    sh(&env, "ln -sfn two skills/ali");
    assert_eq!(env.title("ali").as_deref(), Some("Two"), "retargeted");
    sh(&env, "printf '# Two b\\n\\nx\\n' > skills/two/index.md");
    assert_eq!(env.title("ali").as_deref(), Some("Two b"));
    // A link through a link: `via` leads to `ali/sub`, so to `two/sub` now.
    sh(
        &env,
        "mkdir -p skills/one/sub skills/two/sub && printf '# Sub two\\n\\nx\\n' > skills/two/sub/index.md && printf '# Sub one\\n\\nx\\n' > skills/one/sub/index.md && ln -s ali/sub skills/via",
    );
    assert_eq!(env.title("via").as_deref(), Some("Sub two"));
    sh(&env, "ln -sfn one skills/ali");
    assert_eq!(
        env.title("via").as_deref(),
        Some("Sub one"),
        "its link moved"
    );
    sh(&env, "rm skills/ali");
    assert_eq!(env.title("ali"), None);
    assert_as_rescan(&env, "links made and removed");
}

/// A hard link shares its file: an in-place write through one name is in the next read of the
/// other (the watcher reports it under the name written through only).
#[test]
fn an_in_place_write_shows_through_a_hard_link() {
    let env = Env::start(|tree| {
        tree.write("skills/hlr/a.md", "# H1\n\nx\n")
            .write("agents/a.md", "---\nname: Hard1\n---\nHelp.\n");
        fs::hard_link(tree.path("skills/hlr/a.md"), tree.path("skills/hlr/b.md")).unwrap();
        fs::hard_link(tree.path("agents/a.md"), tree.path("agents/b.md")).unwrap();
    });
    assert_eq!(env.title("hlr/b").as_deref(), Some("H1"));
    sh(&env, "printf '# H2\\n\\nx\\n' > skills/hlr/a.md");
    assert_eq!(env.title("hlr/b").as_deref(), Some("H2"));
    sh(
        &env,
        "printf -- '---\\nname: Hard2\\n---\\nHelp.\\n' > agents/a.md",
    );
    assert_eq!(agent_name(&env.directory, "b").as_deref(), Some("Hard2"));
    // Removing one name leaves the other as it is.
    sh(&env, "rm skills/hlr/a.md");
    assert_eq!(env.title("hlr/b").as_deref(), Some("H2"));
    assert_as_rescan(&env, "hard links");
}

/// A root that went partial at the watch limit is watched whole again by the safety net once
/// the limit is raised (here the watcher's own cap, a stand-in for
/// `fs.inotify.max_user_watches`), and its reads are fresh again.
#[test]
fn raising_the_watch_limit_makes_a_partial_root_fresh_again() {
    let limit = Arc::new(std::sync::atomic::AtomicUsize::new(3));
    let options = WatchOptions {
        watch_limit: Some(limit.clone()),
        ..WatchOptions::default()
    };
    let env = Env::start_with(|tree| wide(tree, 5), options, Some(200));
    let skills = || {
        env.watcher
            .as_ref()
            .unwrap()
            .status()
            .roots
            .into_iter()
            .find(|r| r.root == "skills_folder")
            .unwrap()
    };
    assert!(
        matches!(skills().state, iii_directory::RootState::Partial(_)),
        "{:?}",
        skills()
    );
    assert!(!skills().fresh_reads);
    limit.store(usize::MAX, Ordering::SeqCst);
    env.wait_for("the partial root watched again", |_| {
        skills().state == iii_directory::RootState::Watched
    });
    let status = env.watcher.as_ref().unwrap().status();
    assert!(skills().fresh_reads, "{status:?}");
    assert!(!status.degraded && status.problems.is_empty(), "{status:?}");
    // Fresh without the safety net: every folder has its watch back.
    let mut settings = env.directory.settings();
    settings.safety_net_interval_ms = 0;
    env.directory.apply_settings(settings).expect("tunable");
    std::thread::sleep(Duration::from_millis(300));
    for ns in 0..5 {
        sh(
            &env,
            &format!("printf '# Late {ns}\\n\\nx\\n' > skills/ns{ns}/late.md"),
        );
        assert_eq!(
            env.title(&format!("ns{ns}/late")),
            Some(format!("Late {ns}"))
        );
    }
}

// Trees the randomized test (`links_fuzz`) found a read differing from a rescan in, each
// shrunk to the change that shows it. `WARM` is a first change: the watcher's first burst
// resolves every link it listed again.

const WARM: &str = "printf '# Warm\\n\\nx\\n' > skills/warm.md";

fn warmed(setup: impl FnOnce(&Tree)) -> Env {
    let env = Env::start(setup);
    sh(&env, WARM);
    assert_as_rescan(&env, "the warm-up");
    env
}

/// A link out of the roots inside an agents skill folder leaves its skill served (the scoped
/// walk judged the changed path, not the skill folder), and a `SKILL.md` linked out of the
/// roots is listed as such.
#[test]
fn a_link_out_of_the_roots_in_a_skill_folder_keeps_its_skill() {
    let env = warmed(|tree| {
        tree.write(
            ".agents/skills/polish/SKILL.md",
            "---\nname: polish\ndescription: Polish.\n---\nBody.\n",
        );
        tree.mkdir(".agents/skills/x");
    });
    sh(&env, "ln -s ../../.. .agents/skills/polish/up");
    assert_as_rescan(&env, "a link out of the roots inside a skill folder");
    sh(&env, "ln -s ../.. .agents/skills/x/SKILL.md");
    assert_as_rescan(&env, "a SKILL.md linked to a folder out of the roots");
}

/// The agents folder's scoped walk judges a link only where the whole walk does: a folder link
/// not named like a profile, or a link nested in a subfolder, is no `check` row.
#[test]
fn a_link_in_the_agents_folder_that_is_no_profile_is_no_check_row() {
    let env = warmed(|tree| {
        tree.mkdir("agents/sub").mkdir("skills/alpha");
        std::os::unix::fs::symlink("../../agents/sub", tree.path("skills/alpha/ali")).unwrap();
    });
    sh(&env, "ln -s .. agents/up");
    assert_as_rescan(&env, "a folder link out of the roots in the agents folder");
    sh(&env, "ln -s gone.md agents/sub/b.md");
    assert_as_rescan(&env, "a broken link nested in the agents folder");
}

/// A link back up made below a linked folder (`c/sub/up -> ..`, reached as `iii/hop/sub/up`
/// with `iii/hop -> ../c`) is listed through the link as a loop, and a link re-pointed into a
/// loop (`y -> iii`, where `iii/m -> ..` served `m/y/f`) drops what it served through it.
#[test]
fn a_link_that_loops_at_the_end_of_a_path_through_links_is_listed_as_a_loop() {
    let env = warmed(|tree| {
        tree.mkdir("skills/c/sub");
        std::os::unix::fs::symlink("../c", tree.path("skills/iii/hop")).unwrap();
    });
    sh(&env, "ln -s .. skills/c/sub/up");
    assert_as_rescan(
        &env,
        "a link back up below `c`, reached as `iii/hop/sub/up`",
    );
    let env = warmed(|tree| {
        tree.write("skills/a/f.md", "# F\n\nx\n");
        std::os::unix::fs::symlink("..", tree.path("skills/iii/m")).unwrap();
        std::os::unix::fs::symlink("a", tree.path("skills/y")).unwrap();
    });
    assert_eq!(env.title("m/y/f").as_deref(), Some("F"));
    sh(&env, "ln -sfn iii skills/y");
    assert_as_rescan(
        &env,
        "`y` re-pointed to the local root, which `iii/m` leads up from",
    );
}

/// A file a link leads to in a subfolder of the agents folder is heard when written, and a
/// broken link into one comes alive when its target is made there as a link.
#[test]
fn a_link_target_in_a_subfolder_of_the_agents_folder_is_followed() {
    let env = warmed(|tree| {
        tree.write("agents/sub/p.md", "# P1\n\nx\n");
        std::os::unix::fs::symlink("../agents/sub/p.md", tree.path("skills/p.md")).unwrap();
    });
    sh(&env, "printf '# P2\\n\\nx\\n' > agents/sub/p.md");
    assert_as_rescan(&env, "the linked file written in place");
    let env = warmed(|tree| {
        tree.mkdir("agents/deep");
        tree.write("skills/sub/f.md", "# F\n\nx\n");
        std::os::unix::fs::symlink("../agents/deep/sub", tree.path("skills/l")).unwrap();
    });
    sh(&env, "ln -s ../../skills/sub agents/deep/sub");
    assert_as_rescan(&env, "the missing target made, as a link");
}

/// A folder a link leads into below the agents folder's depth, renamed away, or a folder on
/// the way to it renamed: each is reported only in the folder above it, which is watched for
/// it, so the skills served through the link go at the next read.
#[test]
fn a_link_target_below_the_agents_folder_renamed_away_is_in_the_next_read() {
    let setup = |tree: &Tree| {
        tree.write("agents/sub/c/deep/t/a.md", "# A\n\nx\n");
        std::os::unix::fs::symlink("../../agents/sub/c/deep/t", tree.path("skills/alpha/ali"))
            .unwrap();
    };
    let env = warmed(setup);
    assert_eq!(env.title("alpha/ali/a").as_deref(), Some("A"));
    sh(&env, "mv -T agents/sub/c/deep/t agents/sub/b");
    assert_as_rescan(&env, "the link's target renamed away");
    let env = warmed(setup);
    sh(&env, "mv -T agents/sub/c agents/sub/d");
    assert_as_rescan(&env, "a folder on the way to the target renamed");
}

/// A link looping at the end of a path that also passes a folder twice on the way in one root
/// (`skills/mailer/k.md -> ..`) but not in another (the local root's `SKILL.md -> ../mailer`)
/// is listed as a loop through the second: a loop at the end is no reason to look no further.
#[test]
fn a_link_that_loops_at_the_end_of_a_path_another_root_lists_is_listed_as_a_loop() {
    let env = warmed(|tree| {
        tree.mkdir("skills/alpha/deep").mkdir("skills/mailer");
        std::os::unix::fs::symlink("../mailer", tree.path("skills/iii/SKILL.md")).unwrap();
        std::os::unix::fs::symlink("..", tree.path("skills/mailer/k.md")).unwrap();
    });
    sh(&env, "ln -s .. skills/alpha/deep/up");
    assert_as_rescan(
        &env,
        "a link back up, reached as `iii/SKILL.md/k.md/alpha/deep/up`",
    );
}

/// A link whose text passes through another link keeps leading to the same place when that
/// link goes or comes, but fails otherwise: a loop through the two (`hop -> l/../b`,
/// `l -> hop/../x`) is a broken link once `l` goes, and a broken link is a loop once the link on
/// its way is made. Its `check` row says so at the next read.
#[test]
fn a_link_that_fails_otherwise_through_a_link_on_its_way_is_in_the_next_check() {
    let env = warmed(|tree| {
        tree.mkdir("skills/alpha/deep");
        std::os::unix::fs::symlink("l/../b", tree.path("skills/alpha/deep/hop")).unwrap();
        std::os::unix::fs::symlink("hop/../x", tree.path("skills/alpha/deep/l")).unwrap();
    });
    sh(&env, "rm skills/alpha/deep/l");
    assert_as_rescan(&env, "a loop on the way gone");
    let env = warmed(|tree| {
        tree.mkdir("agents/b/c");
        std::os::unix::fs::symlink("../../agents/b/c/hop/../iii", tree.path("skills/alpha/up"))
            .unwrap();
    });
    sh(
        &env,
        "ln -sfn '../../../skills/alpha/up/../system-prompts' agents/b/c/hop",
    );
    assert_as_rescan(&env, "a link made on the way, closing a loop");
}

// Replaced roots and waits on the way: found by a review.

/// A root that is a link to a versioned folder beside it (`root -> old`), re-pointed
/// atomically to a new version (`ln -s new tmp && mv -T tmp root`), while the skills-tree link
/// `link` (path, text) leads below it: the tree walk lists what is below the link's target
/// through the link, so the new version's folders there are watched as deep. `file` (relative
/// to the root) is served through the link as `id`.
fn a_re_pointed_root_keeps_a_link_target_watched_deep(
    root: &str,
    (old, new): (&str, &str),
    (link, text): (&str, &str),
    (file, id): (&str, &str),
) {
    let beside = |name: &str| match root.rsplit_once('/') {
        Some((parent, _)) => format!("{parent}/{name}"),
        None => name.to_string(),
    };
    let env = warmed(|tree| {
        fs::rename(tree.path(root), tree.path(&beside(old))).unwrap();
        tree.write(&format!("{}/{file}", beside(old)), "# Old\n\nx\n");
        tree.write(&format!("{}/{file}", beside(new)), "# New\n\nx\n");
        std::os::unix::fs::symlink(old, tree.path(root)).unwrap();
        std::os::unix::fs::symlink(text, tree.path(link)).unwrap();
    });
    assert_eq!(env.title(id).as_deref(), Some("Old"));
    let tmp = beside("tmp");
    sh(&env, &format!("ln -s {new} {tmp} && mv -T {tmp} {root}"));
    assert_as_rescan(&env, "the root re-pointed");
    assert_eq!(env.title(id).as_deref(), Some("New"));
    // Out of the racy window of the files the re-point made the index read.
    std::thread::sleep(Duration::from_millis(2_100));
    sh(
        &env,
        &format!("printf '# Written\\n\\nx\\n' > {root}/{file}"),
    );
    assert_as_rescan(&env, "a write below the link's target in the new version");
}

#[test]
fn a_shallow_root_re_pointed_keeps_a_linked_folder_watched_deep() {
    a_re_pointed_root_keeps_a_link_target_watched_deep(
        ".agents/skills",
        ("v1", "v2"),
        ("skills/foo", "../.agents/skills/x"),
        ("x/sub/f.md", "foo/sub/f"),
    );
}

#[test]
fn the_agents_folder_re_pointed_keeps_a_linked_subfolder_watched_deep() {
    a_re_pointed_root_keeps_a_link_target_watched_deep(
        "agents",
        ("a1", "a2"),
        ("skills/team", "../agents/sub"),
        ("sub/deep/p.md", "team/deep/p"),
    );
}

/// The agents skills root moved away and back (a reinstall restoring it) while
/// `skills/foo -> ../.agents/skills/x` leads into it: only `x` is watched deep again, not
/// every folder of every skill (300 asset folders of another would take it past a watch limit
/// of 150 that the layout is far within, and its reads would no longer be fresh).
#[test]
fn a_shallow_root_moved_away_and_back_is_watched_as_its_links_need() {
    let limit = Arc::new(std::sync::atomic::AtomicUsize::new(150));
    let options = WatchOptions {
        watch_limit: Some(limit.clone()),
        ..WatchOptions::default()
    };
    let env = Env::start_with(
        |tree| {
            tree.write(".agents/skills/x/sub/f.md", "# F1\n\nx\n");
            tree.write(
                ".agents/skills/big/SKILL.md",
                "---\nname: big\ndescription: Big.\n---\nBody.\n",
            );
            for i in 0..300 {
                tree.mkdir(&format!(".agents/skills/big/assets/a{i}"));
            }
            std::os::unix::fs::symlink("../.agents/skills/x", tree.path("skills/foo")).unwrap();
        },
        options,
        None,
    );
    sh(&env, WARM);
    let agents_skills = || {
        env.watcher
            .as_ref()
            .unwrap()
            .status()
            .roots
            .into_iter()
            .find(|r| r.root == "agents_skills_folder")
            .unwrap()
    };
    assert_eq!(agents_skills().state, iii_directory::RootState::Watched);
    sh(&env, "mv .agents/skills .agents/saved");
    assert_as_rescan(&env, "the root moved away");
    // A link made meanwhile has every link resolved again, `foo` to nowhere.
    sh(&env, "ln -s alpha skills/other");
    assert_as_rescan(&env, "a link made while the root is away");
    sh(&env, "mv .agents/saved .agents/skills");
    assert_as_rescan(&env, "the root moved back");
    std::thread::sleep(Duration::from_millis(2_100));
    sh(
        &env,
        "printf -- '---\\nname: polish\\ndescription: Changed.\\n---\\nNew.\\n' \
         > .agents/skills/polish/SKILL.md",
    );
    assert_as_rescan(&env, "a skill of the root written after it came back");
    sh(&env, "printf '# F2\\n\\nx\\n' > .agents/skills/x/sub/f.md");
    assert_as_rescan(&env, "a write below the link's target after it came back");
    assert_eq!(
        agents_skills().state,
        iii_directory::RootState::Watched,
        "{:?}",
        env.watcher.as_ref().unwrap().status().problems
    );
}

/// A broken link from the tree into a skill folder of the agents skills root
/// (`skills/later -> ../.agents/skills/big/assets/later`, its target to come) is waited for in
/// `big/assets` alone, not in every asset folder of it (past a watch limit of 150 that the
/// layout is far within, the root would go partial and a write in another skill be missed).
#[test]
fn a_link_target_to_come_does_not_watch_its_whole_folder() {
    let limit = Arc::new(std::sync::atomic::AtomicUsize::new(150));
    let options = WatchOptions {
        watch_limit: Some(limit.clone()),
        ..WatchOptions::default()
    };
    let env = Env::start_with(
        |tree| {
            tree.write(
                ".agents/skills/big/SKILL.md",
                "---\nname: big\ndescription: Big.\n---\nBody.\n",
            );
            for i in 0..300 {
                tree.mkdir(&format!(".agents/skills/big/assets/a{i}"));
            }
            std::os::unix::fs::symlink(
                "../.agents/skills/big/assets/later",
                tree.path("skills/later"),
            )
            .unwrap();
        },
        options,
        None,
    );
    sh(&env, WARM);
    let agents_skills = env
        .watcher
        .as_ref()
        .unwrap()
        .status()
        .roots
        .into_iter()
        .find(|r| r.root == "agents_skills_folder")
        .unwrap();
    std::thread::sleep(Duration::from_millis(2_100));
    sh(
        &env,
        "printf -- '---\\nname: polish\\ndescription: Changed.\\n---\\nNew.\\n' \
         > .agents/skills/polish/SKILL.md",
    );
    assert_as_rescan(&env, "a skill folder's SKILL.md written");
    assert_eq!(agents_skills.state, iii_directory::RootState::Watched);
}

/// A link renamed over another (`ln -s … tmp && mv -T tmp y`, as `ln -sfn` does) into the
/// agents skills root: the folder the first name needed is needed by the second when the
/// first goes, so a folder made there later is still watched as deep.
#[test]
fn a_link_renamed_into_place_keeps_what_it_needs_when_its_first_name_goes() {
    let env = warmed(|tree| {
        tree.mkdir(".agents/skills/polish/sub");
    });
    sh(
        &env,
        "ln -s ../../.agents/skills skills/iii/tmp && mv -T skills/iii/tmp skills/iii/y",
    );
    assert_as_rescan(&env, "the link renamed into place");
    sh(&env, "mkdir -p .agents/skills/polish/sub/x/deep");
    assert_as_rescan(&env, "folders made below the link's target");
    std::thread::sleep(Duration::from_millis(2_100));
    sh(
        &env,
        "printf '# G\\n\\nx\\n' > .agents/skills/polish/sub/x/deep/g.md",
    );
    assert_as_rescan(&env, "a file written in the folders made later");
}
