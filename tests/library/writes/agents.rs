//! Agents.

use super::*;

const CAPTAIN: &str =
    "---\nname: Captain\ndescription: Leads releases.\nlogo: \"🚀\"\n---\nYou lead.\n";

fn agents_tree(t: &Tree) {
    t.write("agents/helper.md", "---\nname: Helper\n---\nHelp.\n")
        .write("agents/broken.md", "no frontmatter\n")
        .write("agents/sub/nested.md", "---\nname: Nested\n---\nx\n");
}

#[test]
fn agents_create_update_delete() {
    let env = Env::new(agents_tree);
    let response = env.ok(
        WriteFunction::AgentsCreate,
        json!({"id": "captain", "content": CAPTAIN}),
        Family::Agents,
        named_event("create", "captain"),
    );
    assert_eq!(
        keys(&response),
        ["bytes", "description", "id", "logo", "modified_at", "name"]
    );
    assert_eq!(response["id"], "captain");
    assert_eq!(response["name"], "Captain");
    assert_eq!(response["description"], "Leads releases.");
    assert_eq!(response["logo"], "🚀");
    assert_eq!(response["bytes"], CAPTAIN.len());
    let path = env.path("agents/captain.md");
    assert_eq!(text(&path), CAPTAIN);
    let got = env.read(
        ReadFunction::AgentsGet,
        json!({"id": "captain", "raw": true}),
    );
    assert_eq!(got["system_prompt"], "You lead.\n");
    assert_eq!(got["raw"], CAPTAIN);
    assert_eq!(got["modified_at"], response["modified_at"]);
    // Without a logo the response says null; an empty body is allowed; unknown `extends` too.
    let response = env.ok(
        WriteFunction::AgentsCreate,
        json!({"id": "quiet", "content": "---\nname: Quiet\nextends: nobody\n---\n"}),
        Family::Agents,
        named_event("create", "quiet"),
    );
    assert_eq!(response["logo"], Value::Null);
    assert_eq!(response["description"], "");
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "quiet"}));
    assert!(
        got["inheritance_error"]
            .as_str()
            .unwrap()
            .starts_with("D415")
    );

    // Update keeps the id; the display name may change.
    let v2 = "---\nname: Skipper\n---\nYou skip.\n";
    let response = env.ok(
        WriteFunction::AgentsUpdate,
        json!({"id": "captain", "content": v2}),
        Family::Agents,
        named_event("update", "captain"),
    );
    assert_eq!(response["id"], "captain");
    assert_eq!(response["name"], "Skipper");
    assert_eq!(text(&path), v2);
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "captain"}));
    assert_eq!(got["name"], "Skipper");
    assert_eq!(got["system_prompt"], "You skip.\n");

    let response = env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "captain"}),
        Family::Agents,
        named_event("delete", "captain"),
    );
    assert_eq!(response, json!({"id": "captain"}));
    assert!(!path.exists());
    assert!(env.path("agents").is_dir());
    assert!(
        env.read_err(ReadFunction::AgentsGet, json!({"id": "captain"}))
            .starts_with("D410")
    );
}

#[test]
fn agents_errors() {
    let env = Env::new(agents_tree);
    let next_list = " Next: call directory::agents::list to browse agent profile ids.";
    for function in [WriteFunction::AgentsUpdate, WriteFunction::AgentsDelete] {
        let (code, message) = env.coded(function, json!({"id": "helpr", "content": CAPTAIN}));
        assert_eq!(code, Some("D410"));
        assert_eq!(
            message,
            format!(
                "D410 not_found: agent profile \"helpr\" does not exist. Did you mean: helper, iii, iii-minimal.{next_list}"
            )
        );
    }
    // A nested file is not a profile.
    let (code, _) = env.coded(
        WriteFunction::AgentsUpdate,
        json!({"id": "nested", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D410"));

    let next_conflict = " Next: call directory::agents::update to edit the existing agent profile; or call directory::agents::list to browse agent profile ids.";
    let (code, message) = env.coded(
        WriteFunction::AgentsCreate,
        json!({"id": "helper", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D414"));
    assert_eq!(
        message,
        format!("D414 invalid_input: agent profile \"helper\" already exists.{next_conflict}")
    );
    let broken = env.path("agents/broken.md");
    let (code, message) = env.coded(
        WriteFunction::AgentsCreate,
        json!({"id": "broken", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D414"));
    assert_eq!(
        message,
        format!(
            "D414 invalid_input: a file already exists at {} (currently skipped by the scanner); edit or remove it on disk.{next_conflict}",
            broken.display()
        )
    );
    let (code, message) = env.coded(WriteFunction::AgentsDelete, json!({"id": "iii"}));
    assert_eq!(code, Some("D414"));
    assert_eq!(
        message,
        format!(
            "D414 invalid_input: agent profile \"iii\" is bundled with the worker and has no local file to delete.{next_conflict}"
        )
    );
    // Plain (uncoded) frontmatter and size errors.
    let plain = [
        (
            "You lead.\n".to_string(),
            "missing YAML frontmatter (expected --- ... --- block at file start)".to_string(),
        ),
        (
            "---\nname: [x\n---\nx\n".to_string(),
            "invalid frontmatter YAML: ".to_string(),
        ),
        (
            "---\ndescription: d\n---\nx\n".to_string(),
            "frontmatter missing non-empty `name`".to_string(),
        ),
        (
            "---\nname: '  '\n---\nx\n".to_string(),
            "frontmatter missing non-empty `name`".to_string(),
        ),
        (
            "---\nname: A\nlogo: ''\n---\nx\n".to_string(),
            "`logo` must be non-empty when present (emoji only)".to_string(),
        ),
        (
            "---\nname: A\nlogo: abcdefghijklmnopq\n---\nx\n".to_string(),
            "`logo` too long (17 bytes; max 16) — emoji only".to_string(),
        ),
        (
            "---\nname: A\nlogo: a/b\n---\nx\n".to_string(),
            "`logo` may not contain path separators or whitespace — emoji only".to_string(),
        ),
        (
            "---\nname: A\nicon: rocket\n---\nx\n".to_string(),
            "`icon` must be one of agent, code, search, terminal, database, test, review, docs, design (got \"rocket\")".to_string(),
        ),
        (
            "---\nname: A\ncolor: pink\n---\nx\n".to_string(),
            "`color` must be one of neutral, blue, purple, teal, green, amber, rose (got \"pink\")".to_string(),
        ),
        (
            format!("---\nname: A\n---\n{}", "x".repeat(262_144)),
            format!(
                "content too large ({} bytes; max 262144)",
                262_144 + "---\nname: A\n---\n".len()
            ),
        ),
    ];
    for (content, expected) in &plain {
        for function in [WriteFunction::AgentsCreate, WriteFunction::AgentsUpdate] {
            let id = if function == WriteFunction::AgentsCreate {
                "fresh"
            } else {
                "helper"
            };
            let (code, message) = env.coded(function, json!({"id": id, "content": content}));
            assert_eq!(code, None, "{content:?}: {message}");
            assert!(
                message.starts_with(expected.as_str()),
                "{content:?}: {message}"
            );
        }
    }
    for id in ["", "Bad", "a/b", "a.b"] {
        let (code, _) = env.coded(
            WriteFunction::AgentsCreate,
            json!({"id": id, "content": CAPTAIN}),
        );
        assert_eq!(code, None, "{id:?}");
    }
    assert_eq!(
        text(&env.path("agents/helper.md")),
        "---\nname: Helper\n---\nHelp.\n"
    );
}

#[test]
fn agents_bundled_copy_on_write_fallback_and_shadow() {
    let env = Env::new(|_| {});
    let before = env.read(ReadFunction::AgentsList, json!({}));
    assert_eq!(names(&before, "agents", "id"), ["iii", "iii-minimal"]);
    assert_eq!(before["agents"][0]["builtin"], true);
    let content = "---\nname: My iii\n---\nMine.\n";
    let response = env.ok(
        WriteFunction::AgentsUpdate,
        json!({"id": "iii", "content": content}),
        Family::Agents,
        named_event("update", "iii"),
    );
    assert_eq!(response["id"], "iii");
    assert_eq!(response["name"], "My iii");
    let path = env.path("agents/iii.md");
    assert_eq!(text(&path), content);
    let listed = env.read(ReadFunction::AgentsList, json!({}));
    assert!(listed["agents"][0].get("builtin").is_none(), "{listed}");
    assert_eq!(listed["agents"][0]["name"], "My iii");
    assert_eq!(
        env.read(ReadFunction::AgentsGet, json!({"id": "iii"}))["system_prompt"],
        "Mine.\n"
    );
    env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "iii"}),
        Family::Agents,
        named_event("delete", "iii"),
    );
    assert!(!path.exists());
    assert_eq!(env.read(ReadFunction::AgentsList, json!({})), before);
    let (code, _) = env.coded(WriteFunction::AgentsDelete, json!({"id": "iii"}));
    assert_eq!(code, Some("D414"));
    // Creating a bundled id shadows it.
    env.ok(
        WriteFunction::AgentsCreate,
        json!({"id": "iii-minimal", "content": "---\nname: Min\n---\nmin\n"}),
        Family::Agents,
        named_event("create", "iii-minimal"),
    );
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "iii-minimal"}));
    assert!(got.get("builtin").is_none());
    assert_eq!(got["name"], "Min");
    // …and a second create of it meets the file.
    let (code, _) = env.coded(
        WriteFunction::AgentsCreate,
        json!({"id": "iii-minimal", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D414"));
    env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "iii-minimal"}),
        Family::Agents,
        named_event("delete", "iii-minimal"),
    );
    assert_eq!(env.read(ReadFunction::AgentsList, json!({})), before);
}

#[test]
fn agents_bundled_update_with_a_skipped_file_in_the_way_is_d414() {
    let env = Env::new(|t| {
        t.write("agents/iii.md", "not a profile\n");
    });
    let (code, message) = env.coded(
        WriteFunction::AgentsUpdate,
        json!({"id": "iii", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D414"));
    assert!(
        message.contains("currently skipped by the scanner"),
        "{message}"
    );
}
