//! Conditional updates: `base`, the text the caller's edit started from (`raw` from `get`),
//! makes an update write only a file that still holds it, or holds the new content already.
//! Another writer's change between the caller's read and its update is refused (`D118`,
//! `D215`, `D416`) with that writer's bytes left on disk; without `base`, an update writes
//! as it always did.

use super::*;

/// One family's update as these tests drive it.
#[derive(Clone, Copy)]
struct Family3 {
    update: WriteFunction,
    get: ReadFunction,
    key: &'static str,
    family: Family,
    code: &'static str,
}

const SKILLS: Family3 = Family3 {
    update: WriteFunction::SkillsUpdate,
    get: ReadFunction::SkillsGet,
    key: "id",
    family: Family::Skills,
    code: "D118",
};
const PROMPTS: Family3 = Family3 {
    update: WriteFunction::SystemPromptsUpdate,
    get: ReadFunction::SystemPromptsGet,
    key: "name",
    family: Family::SystemPrompts,
    code: "D215",
};
const AGENTS: Family3 = Family3 {
    update: WriteFunction::AgentsUpdate,
    get: ReadFunction::AgentsGet,
    key: "id",
    family: Family::Agents,
    code: "D416",
};

/// Each family's document, its file, and three texts it accepts.
struct Case {
    f: Family3,
    id: &'static str,
    file: &'static str,
    texts: [&'static str; 3],
}

const CASES: [Case; 3] = [
    Case {
        f: SKILLS,
        id: "mailer/send",
        file: "skills/mailer/send.md",
        texts: [
            "# Send\n\nSend one mail.\n",
            "# Send\n\nThe caller's edit.\n",
            "# Send\n\nAnother writer's edit.\n",
        ],
    },
    Case {
        f: PROMPTS,
        id: "pirate",
        file: "skills/system-prompts/pirate.md",
        texts: [
            PIRATE,
            "---\ndescription: Talk like a pirate\n---\nThe caller's edit.\n",
            "---\ndescription: Talk like a pirate\n---\nAnother writer's edit.\n",
        ],
    },
    Case {
        f: AGENTS,
        id: "helper",
        file: "agents/helper.md",
        texts: [
            "---\nname: Helper\n---\nHelp.\n",
            "---\nname: Helper\n---\nThe caller's edit.\n",
            "---\nname: Helper\n---\nAnother writer's edit.\n",
        ],
    },
];

fn tree(t: &Tree) {
    standard(t);
    for case in &CASES {
        t.write(case.file, case.texts[0]);
    }
}

impl Case {
    fn event(&self) -> Value {
        match self.f.family {
            Family::Skills => skill_event("update", self.id),
            _ => named_event("update", self.id),
        }
    }

    /// What `get` answers in `raw`: the text a caller's edit starts from.
    fn read_raw(&self, env: &Env) -> String {
        let got = env.read(self.f.get, json!({self.f.key: self.id, "raw": true}));
        got["raw"].as_str().expect("raw").to_string()
    }

    fn update(&self, content: &str, base: Option<&str>) -> Value {
        let mut request = json!({self.f.key: self.id, "content": content});
        if let Some(base) = base {
            request["base"] = json!(base);
        }
        request
    }
}

#[test]
fn an_update_with_the_base_it_read_lands() {
    let env = Env::new(tree);
    for case in &CASES {
        let base = case.read_raw(&env);
        assert_eq!(base, case.texts[0]);
        let response = env.ok(
            case.f.update,
            case.update(case.texts[1], Some(&base)),
            case.f.family,
            case.event(),
        );
        assert_eq!(response["bytes"], case.texts[1].len(), "{}", case.id);
        assert_eq!(text(&env.path(case.file)), case.texts[1], "{}", case.id);
        assert_eq!(case.read_raw(&env), case.texts[1], "{}", case.id);
    }
}

/// The defect: the console page read the file, another process wrote it, and the page's
/// update wrote over that write without a word.
#[test]
fn an_update_whose_file_another_writer_changed_since_is_refused_and_writes_nothing() {
    let env = Env::new(tree);
    for case in &CASES {
        let base = case.read_raw(&env);
        // Another writer, after the caller's read.
        fs::write(env.path(case.file), case.texts[2]).expect("another writer");
        let (code, message) = env.coded(case.f.update, case.update(case.texts[1], Some(&base)));
        assert_eq!(code, Some(case.f.code), "{message}");
        assert!(
            message.contains("changed on disk since your edit began")
                && message.contains(&env.path(case.file).display().to_string())
                && message.contains("nothing was written")
                && message.contains("Read it again")
                && message.contains("merge")
                && message.contains("get"),
            "{message}"
        );
        assert!(message.contains(" conflict: "), "{message}");
        // The other writer's bytes, exactly (`err` checked the whole tree too).
        assert_eq!(text(&env.path(case.file)), case.texts[2], "{}", case.id);
        // Read again (the worker's watcher takes the change in; here, a reconcile), merged,
        // saved with the new base: it lands.
        env.directory.reconcile().expect("reconcile");
        let base = case.read_raw(&env);
        assert_eq!(base, case.texts[2], "{}", case.id);
        env.ok(
            case.f.update,
            case.update(case.texts[1], Some(&base)),
            case.f.family,
            case.event(),
        );
        assert_eq!(text(&env.path(case.file)), case.texts[1], "{}", case.id);
    }
}

#[test]
fn without_a_base_an_update_writes_as_before() {
    let env = Env::new(tree);
    for case in &CASES {
        let _read = case.read_raw(&env);
        fs::write(env.path(case.file), case.texts[2]).expect("another writer");
        // The contract's update: the file is overwritten, whatever it held.
        env.ok(
            case.f.update,
            case.update(case.texts[1], None),
            case.f.family,
            case.event(),
        );
        assert_eq!(text(&env.path(case.file)), case.texts[1], "{}", case.id);
        // `null` is absent, as for every field.
        let mut request = case.update(case.texts[0], None);
        request["base"] = Value::Null;
        env.ok(case.f.update, request, case.f.family, case.event());
        assert_eq!(text(&env.path(case.file)), case.texts[0], "{}", case.id);
    }
}

/// A call repeated after its answer was lost (or two tabs saving the same text): the file
/// already holds the content, and the update answers as it does without `base`.
#[test]
fn an_update_whose_file_already_holds_its_content_lands() {
    let env = Env::new(tree);
    for case in &CASES {
        let stale = case.texts[0];
        fs::write(env.path(case.file), case.texts[1]).expect("the same text, already there");
        let response = env.ok(
            case.f.update,
            case.update(case.texts[1], Some(stale)),
            case.f.family,
            case.event(),
        );
        assert_eq!(response["bytes"], case.texts[1].len(), "{}", case.id);
        assert_eq!(text(&env.path(case.file)), case.texts[1], "{}", case.id);
    }
}

/// `get` drops a leading byte-order mark: the `base` a caller got from it matches the file.
#[test]
fn a_file_with_a_byte_order_mark_matches_the_base_get_answered() {
    let env = Env::new(tree);
    for case in &CASES {
        fs::write(env.path(case.file), format!("\u{feff}{}", case.texts[2])).expect("bom");
        env.directory.reconcile().expect("reconcile");
        let base = case.read_raw(&env);
        assert_eq!(base, case.texts[2], "{}: get drops the mark", case.id);
        env.ok(
            case.f.update,
            case.update(case.texts[1], Some(&base)),
            case.f.family,
            case.event(),
        );
        assert_eq!(text(&env.path(case.file)), case.texts[1], "{}", case.id);
    }
}

/// A file removed since the caller read it answers the family's not-found, as without `base`.
#[test]
fn an_update_of_a_file_removed_since_is_not_found_as_before() {
    let env = Env::new(tree);
    for (case, code) in CASES.iter().zip(["D110", "D210", "D410"]) {
        let base = case.read_raw(&env);
        fs::remove_file(env.path(case.file)).expect("another writer removes it");
        let (got, message) = env.coded(case.f.update, case.update(case.texts[1], Some(&base)));
        assert_eq!(got, Some(code), "{message}");
        let (without, _) = env.coded(case.f.update, case.update(case.texts[1], None));
        assert_eq!(without, Some(code));
        assert!(!env.path(case.file).exists());
    }
}

/// A system prompt whose content renames it: `base` is checked against the file the requested
/// name reads, and the rename lands (or, refused, leaves both names as they were).
#[test]
fn a_renaming_prompt_update_checks_the_file_it_renames() {
    let env = Env::new(tree);
    let renamed = "---\nname: buccaneer\ndescription: Talk like a buccaneer\n---\nArr.\n";
    let base = CASES[1].read_raw(&env);
    fs::write(env.path(CASES[1].file), CASES[1].texts[2]).expect("another writer");
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "pirate", "content": renamed, "base": base}),
    );
    assert_eq!(code, Some("D215"), "{message}");
    env.directory.reconcile().expect("reconcile");
    let base = CASES[1].read_raw(&env);
    let response = env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "pirate", "content": renamed, "base": base}),
        Family::SystemPrompts,
        named_event("update", "buccaneer"),
    );
    assert_eq!(response["name"], "buccaneer");
    assert_eq!(text(&env.path(CASES[1].file)), renamed);
}

/// A bundled prompt or profile has no file until its first update writes the one that shadows
/// it: what `get` answered is the bundled text, and a `base` that is not it is refused, with
/// no file written.
#[test]
fn a_bundled_document_s_base_is_its_bundled_text() {
    let env = Env::new(tree);
    let cases = [
        (
            WriteFunction::SystemPromptsUpdate,
            ReadFunction::SystemPromptsGet,
            "name",
            "iii-minimal",
            "skills/system-prompts/iii-minimal.md",
            "---\ndescription: Mine\n---\nMine.\n",
            Family::SystemPrompts,
            "D215",
        ),
        (
            WriteFunction::AgentsUpdate,
            ReadFunction::AgentsGet,
            "id",
            "iii-minimal",
            "agents/iii-minimal.md",
            "---\nname: Mine\n---\nMine.\n",
            Family::Agents,
            "D416",
        ),
    ];
    for (update, get, key, id, file, content, family, code) in cases {
        let bundled = env.read(get, json!({key: id, "raw": true}))["raw"]
            .as_str()
            .expect("raw")
            .to_string();
        let (got, message) = env.coded(
            update,
            json!({key: id, "content": content, "base": "---\nname: Other\n---\nAnother text.\n"}),
        );
        assert_eq!(got, Some(code), "{message}");
        assert!(message.contains("changed on disk"), "{message}");
        assert!(!env.path(file).exists());
        env.ok(
            update,
            json!({key: id, "content": content, "base": bundled}),
            family,
            named_event("update", id),
        );
        assert_eq!(text(&env.path(file)), content);
    }
}

/// A file the update reaches through a symbolic link is compared where the write would land.
#[test]
fn a_linked_file_is_compared_where_the_update_writes() {
    let env = Env::new(|t| {
        tree(t);
        t.write("skills/real/doc.md", "# Doc\n\nReal.\n");
    });
    std::os::unix::fs::symlink(
        env.path("skills/real/doc.md"),
        env.path("skills/mailer/doc.md"),
    )
    .expect("link");
    env.directory.reconcile().expect("reconcile");
    let request =
        |content: &str, base: &str| json!({"id": "mailer/doc", "content": content, "base": base});
    let base = env.read(
        ReadFunction::SkillsGet,
        json!({"id": "mailer/doc", "raw": true}),
    )["raw"]
        .as_str()
        .expect("raw")
        .to_string();
    fs::write(env.path("skills/real/doc.md"), "# Doc\n\nTheirs.\n").expect("another writer");
    let (code, message) = env.coded(
        WriteFunction::SkillsUpdate,
        request("# Doc\n\nMine.\n", &base),
    );
    assert_eq!(code, Some("D118"), "{message}");
    assert_eq!(text(&env.path("skills/real/doc.md")), "# Doc\n\nTheirs.\n");
    env.directory.reconcile().expect("reconcile");
    let base = "# Doc\n\nTheirs.\n";
    let before = env.event_count();
    env.directory
        .write(
            WriteFunction::SkillsUpdate,
            &request("# Doc\n\nMine.\n", base),
            None,
        )
        .expect("the update lands");
    assert!(env.event_count() > before);
    assert_eq!(text(&env.path("skills/real/doc.md")), "# Doc\n\nMine.\n");
    assert!(
        fs::symlink_metadata(env.path("skills/mailer/doc.md"))
            .unwrap()
            .is_symlink()
    );
}
