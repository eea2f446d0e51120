//! Across families.

use super::*;

#[test]
fn every_write_is_read_at_once_and_reads_publish_nothing() {
    let env = Env::new(standard);
    for i in 0..20 {
        let id = format!("burst/s{i}");
        env.ok(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": format!("# Title {i}\n\nx\n")}),
            Family::Skills,
            skill_event("create", &id),
        );
        assert_eq!(
            env.read(ReadFunction::SkillsGet, json!({"id": id}))["title"],
            format!("Title {i}")
        );
        env.ok(
            WriteFunction::SkillsUpdate,
            json!({"id": id, "content": format!("# Retitled {i}\n\nx\n")}),
            Family::Skills,
            skill_event("update", &id),
        );
        assert_eq!(
            env.read(ReadFunction::SkillsGet, json!({"id": id}))["title"],
            format!("Retitled {i}")
        );
        let rows = env.read(
            ReadFunction::SkillsList,
            json!({"search": format!("retitled {i}")}),
        );
        assert!(names(&rows, "skills", "id").contains(&id));
    }
    let before = env.event_count();
    for f in ReadFunction::ALL {
        let _ = env
            .directory
            .read(f, &json!({"id": "burst/s1", "name": "iii-minimal"}), None);
    }
    env.directory.reconcile().unwrap();
    assert_eq!(
        env.event_count(),
        before,
        "reads and a no-op reconcile publish nothing"
    );
    assert_eq!(temp_files(env.tree.base()), Vec::<String>::new());
}

#[test]
fn write_function_ids_round_trip() {
    for f in WriteFunction::ALL {
        assert_eq!(WriteFunction::from_id(f.id()), Some(f));
    }
    assert_eq!(WriteFunction::from_id("directory::skills::get"), None);
}

/// A text that starts with a byte-order mark (as some editors save) is written as given, and
/// checked and answered for as the scan reads the file back: without the mark, so that its
/// frontmatter is found by the write as by the next read.
#[test]
fn a_leading_byte_order_mark_is_read_by_a_write_as_by_the_scan() {
    let env = Env::new(standard);
    let skill = "\u{feff}---\ntitle: Marked\n---\n# Heading\n\nBody.\n";
    let written = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "marked", "content": skill}),
        Family::Skills,
        skill_event("create", "marked"),
    );
    let got = env.read(ReadFunction::SkillsGet, json!({"id": "marked"}));
    assert_eq!(
        (&written["title"], &got["title"]),
        (&json!("Marked"), &json!("Marked"))
    );
    assert_eq!(written["bytes"], skill.len());
    assert_eq!(
        text(&env.path("skills/marked.md")),
        skill,
        "written as given"
    );

    let prompt = "\u{feff}---\ndescription: Marked prompt.\n---\nBe brief.\n";
    let written = env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "marked", "content": prompt}),
        Family::SystemPrompts,
        named_event("create", "marked"),
    );
    assert_eq!(written["description"], "Marked prompt.");
    let got = env.read(ReadFunction::SystemPromptsGet, json!({"name": "marked"}));
    assert_eq!(got["description"], "Marked prompt.");

    let profile = "\u{feff}---\nname: Marked agent\n---\nShip it.\n";
    let written = env.ok(
        WriteFunction::AgentsCreate,
        json!({"id": "marked", "content": profile}),
        Family::Agents,
        named_event("create", "marked"),
    );
    assert_eq!(written["name"], "Marked agent");
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "marked"}));
    assert_eq!(got["name"], "Marked agent");

    // A body that is only a mark is empty, as the scan finds it.
    let (code, _) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "marked", "content": "\u{feff}---\ntitle: x\n---\n"}),
    );
    assert_eq!(code, Some("D113"));
}

/// A folder setting pointed at a file: every family's create says so, with nothing written
/// (the skills create answered the system's "File exists" for the folders it tried to make).
#[test]
fn a_folder_setting_pointed_at_a_file_is_said_and_nothing_is_written() {
    let env = Env::with_config(
        |t| {
            t.write("a-file.md", "# Not a folder\n\nText.\n");
            t.write("b-file.md", "# Not a folder\n\nText.\n");
        },
        |config| {
            config.paths.skills_folder = config.paths.skills_folder.with_file_name("a-file.md");
            config.paths.agents_folder = config.paths.agents_folder.with_file_name("b-file.md");
        },
    );
    let content = "---\nname: zz\ndescription: d\n---\n# T\n\nBody.\n";
    for (function, request) in [
        (
            WriteFunction::SkillsCreate,
            json!({"id": "zz", "content": content}),
        ),
        (
            WriteFunction::AgentsCreate,
            json!({"id": "zz", "content": content}),
        ),
        (
            WriteFunction::SystemPromptsCreate,
            json!({"name": "zz", "content": content}),
        ),
    ] {
        let message = env.err(function, request).to_string();
        assert!(
            message.contains("-file.md is a file, not a folder")
                && message.contains("point its setting at a folder"),
            "{}: {message}",
            function.id()
        );
    }
}
