//! System-prompts.

use super::*;

fn prompts_tree(t: &Tree) {
    t.write(
        "skills/system-prompts/helper.md",
        "---\nname: helper\ndescription: Helps.\n---\nHelp.\n",
    )
    .write("skills/system-prompts/broken.md", "no frontmatter here\n");
}

#[test]
fn system_prompts_create_update_delete() {
    let env = Env::new(prompts_tree);
    let response = env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "pirate", "content": PIRATE}),
        Family::SystemPrompts,
        named_event("create", "pirate"),
    );
    assert_eq!(
        keys(&response),
        ["bytes", "description", "modified_at", "name"]
    );
    assert_eq!(response["name"], "pirate");
    assert_eq!(response["description"], "Talk like a pirate");
    assert_eq!(response["bytes"], PIRATE.len());
    let path = env.path("skills/system-prompts/pirate.md");
    assert_eq!(text(&path), PIRATE);
    let got = env.read(
        ReadFunction::SystemPromptsGet,
        json!({"name": "pirate", "raw": true}),
    );
    assert_eq!(got["body"], "Arr.\n");
    assert_eq!(got["raw"], PIRATE);
    assert_eq!(got["modified_at"], response["modified_at"]);
    assert!(got.get("builtin").is_none());

    // Declared name equal to the request is fine on create.
    env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "named", "content": "---\nname: named\ndescription: D\n---\nx\n"}),
        Family::SystemPrompts,
        named_event("create", "named"),
    );

    let v2 = "---\ndescription: Pirate v2\n---\nArr arr.\n";
    let response = env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "pirate", "content": v2}),
        Family::SystemPrompts,
        named_event("update", "pirate"),
    );
    assert_eq!(response["name"], "pirate");
    assert_eq!(response["description"], "Pirate v2");
    assert_eq!(text(&path), v2);
    assert_eq!(
        env.read(ReadFunction::SystemPromptsGet, json!({"name": "pirate"}))["body"],
        "Arr arr.\n"
    );

    // Rename via the declared name: the file stays, the prompt's name changes.
    let renamed = "---\nname: corsair\ndescription: Now a corsair\n---\nYo.\n";
    let response = env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "pirate", "content": renamed}),
        Family::SystemPrompts,
        named_event("update", "corsair"),
    );
    assert_eq!(response["name"], "corsair");
    assert_eq!(text(&path), renamed);
    let listed = env.read(ReadFunction::SystemPromptsList, json!({}));
    let listed_names = names(&listed, "prompts", "name");
    assert!(listed_names.contains(&"corsair".to_string()));
    assert!(!listed_names.contains(&"pirate".to_string()));
    assert!(
        env.read_err(ReadFunction::SystemPromptsGet, json!({"name": "pirate"}))
            .starts_with("D210")
    );

    let response = env.ok(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "corsair"}),
        Family::SystemPrompts,
        named_event("delete", "corsair"),
    );
    assert_eq!(response, json!({"name": "corsair"}));
    assert!(!path.exists());
    // No parent cleanup for prompts, but the folder still holds the others anyway.
    assert!(env.path("skills/system-prompts").is_dir());
    assert!(
        env.read_err(ReadFunction::SystemPromptsGet, json!({"name": "corsair"}))
            .starts_with("D210")
    );
}

#[test]
fn system_prompts_errors() {
    let env = Env::new(prompts_tree);
    let next_list = " Next: call directory::system-prompts::list to browse system prompt names.";
    // D210 on update and delete, with the closest file names.
    for function in [
        WriteFunction::SystemPromptsUpdate,
        WriteFunction::SystemPromptsDelete,
    ] {
        let (code, message) = env.coded(function, json!({"name": "helpr", "content": PIRATE}));
        assert_eq!(code, Some("D210"));
        assert_eq!(
            message,
            format!(
                "D210 not_found: system prompt \"helpr\" does not exist. Did you mean: helper.{next_list}"
            )
        );
    }
    // A bundled prompt without a file has nothing to delete.
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "iii-minimal"}),
    );
    assert_eq!(code, Some("D210"));
    assert!(message.starts_with("D210 not_found: system prompt \"iii-minimal\" does not exist."));

    // Plain name validation.
    for name in ["", "Bad", "a/b", "../x"] {
        let (code, _) = env.coded(
            WriteFunction::SystemPromptsCreate,
            json!({"name": name, "content": PIRATE}),
        );
        assert_eq!(code, None, "{name:?}");
    }

    // D213, each message (create).
    let d213 = [
        (
            "no frontmatter\n",
            "D213 invalid_input: missing YAML frontmatter (expected --- ... --- block at file start).",
        ),
        (
            "---\ndescription: [unclosed\n---\nx\n",
            "D213 invalid_input: invalid frontmatter YAML: ",
        ),
        // The scan would serve this one from its lines, but a write does not create it.
        (
            "---\ndescription: Reviews code: carefully.\n---\nx\n",
            "D213 invalid_input: invalid frontmatter YAML: ",
        ),
        (
            "---\nname: fresh\n---\nx\n",
            "D213 invalid_input: frontmatter is missing a non-empty `description`; the next scan would skip this prompt.",
        ),
        (
            "---\ndescription: '   '\n---\nx\n",
            "D213 invalid_input: frontmatter is missing a non-empty `description`; the next scan would skip this prompt.",
        ),
        (
            "---\nname: Bad Name\ndescription: d\n---\nx\n",
            "D213 invalid_input: frontmatter `name` is invalid (name may only contain lowercase ASCII letters, digits, '-' and '_': \"Bad Name\"); the next scan would skip this prompt.",
        ),
        (
            "---\nname: other\ndescription: d\n---\nx\n",
            "D213 invalid_input: frontmatter `name` (\"other\") must match the requested system prompt name (\"fresh\").",
        ),
    ];
    for (content, expected) in d213 {
        let (code, message) = env.coded(
            WriteFunction::SystemPromptsCreate,
            json!({"name": "fresh", "content": content}),
        );
        assert_eq!(code, Some("D213"), "{content:?}: {message}");
        assert!(message.starts_with(expected), "{content:?}: {message}");
        if !expected.ends_with(": ") {
            assert_eq!(message, expected);
        }
    }
    // D213 on update (declared name invalid; description missing).
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "helper", "content": "---\nname: Nope!\ndescription: d\n---\nx\n"}),
    );
    assert_eq!(code, Some("D213"));
    assert!(
        message.contains("frontmatter `name` is invalid"),
        "{message}"
    );
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "helper", "content": "---\nname: helper\n---\nx\n"}),
    );
    assert_eq!(code, Some("D213"));
    // D113 for prompts.
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "fresh", "content": "---\ndescription: d\n---\n"}),
    );
    assert_eq!(code, Some("D113"));
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "helper", "content": format!("---\ndescription: d\n---\n{}", "x".repeat(262_144))}),
    );
    assert_eq!(code, Some("D113"));

    // D214, both texts.
    let next_conflict = " Next: call directory::system-prompts::update to edit the existing system prompt; or call directory::system-prompts::list to browse system prompt names.";
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "helper", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"));
    assert_eq!(
        message,
        format!("D214 invalid_input: system prompt \"helper\" already exists.{next_conflict}")
    );
    let broken = env.path("skills/system-prompts/broken.md");
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "broken", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"));
    assert_eq!(
        message,
        format!(
            "D214 invalid_input: a file already exists at {} (currently skipped by the scanner); edit or remove it on disk.{next_conflict}",
            broken.display()
        )
    );
    assert_eq!(text(&broken), "no frontmatter here\n");
}

#[test]
fn system_prompts_bundled_copy_on_write_and_fallback() {
    let env = Env::new(|_| {});
    let before = env.read(ReadFunction::SystemPromptsList, json!({}));
    let row = before["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "iii-minimal")
        .unwrap()
        .clone();
    assert_eq!(row["builtin"], true);
    assert_eq!(row["modified_at"], "");
    // Declared name must match on copy-on-write.
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "iii-minimal", "content": "---\nname: other\ndescription: d\n---\nx\n"}),
    );
    assert_eq!(code, Some("D213"));
    let content = "---\ndescription: My minimal\n---\nMine.\n";
    let response = env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "iii-minimal", "content": content}),
        Family::SystemPrompts,
        named_event("update", "iii-minimal"),
    );
    assert_eq!(response["name"], "iii-minimal");
    let path = env.path("skills/system-prompts/iii-minimal.md");
    assert_eq!(text(&path), content);
    let listed = env.read(ReadFunction::SystemPromptsList, json!({}));
    let row = listed["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "iii-minimal")
        .unwrap()
        .clone();
    assert!(row.get("builtin").is_none(), "{row}");
    assert_eq!(row["description"], "My minimal");
    assert_eq!(row["modified_at"], response["modified_at"]);
    let got = env.read(
        ReadFunction::SystemPromptsGet,
        json!({"name": "iii-minimal"}),
    );
    assert_eq!(got["body"], "Mine.\n");
    // An ordinary update of it now.
    env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "iii-minimal", "content": "---\ndescription: v3\n---\nv3\n"}),
        Family::SystemPrompts,
        named_event("update", "iii-minimal"),
    );
    // Delete falls back to the bundled prompt.
    env.ok(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "iii-minimal"}),
        Family::SystemPrompts,
        named_event("delete", "iii-minimal"),
    );
    assert!(!path.exists());
    assert_eq!(env.read(ReadFunction::SystemPromptsList, json!({})), before);
    let got = env.read(
        ReadFunction::SystemPromptsGet,
        json!({"name": "iii-minimal"}),
    );
    assert_eq!(got["builtin"], true);
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "iii-minimal"}),
    );
    assert_eq!(code, Some("D210"));
    // Creating a bundled name is allowed and shadows it.
    env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "iii-runtime", "content": "---\ndescription: Mine\n---\nr\n"}),
        Family::SystemPrompts,
        named_event("create", "iii-runtime"),
    );
    let got = env.read(
        ReadFunction::SystemPromptsGet,
        json!({"name": "iii-runtime"}),
    );
    assert!(got.get("builtin").is_none());
    assert_eq!(got["body"], "r\n");
}

#[test]
fn system_prompts_bundled_update_with_a_skipped_file_in_the_way_is_d214() {
    let env = Env::new(|t| {
        t.write("skills/system-prompts/iii-minimal.md", "not a prompt\n");
    });
    let path = env.path("skills/system-prompts/iii-minimal.md");
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "iii-minimal", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"));
    assert!(
        message.starts_with(&format!(
            "D214 invalid_input: a file already exists at {} (currently skipped by the scanner)",
            path.display()
        )),
        "{message}"
    );
}

/// An update cannot rename a prompt onto the name of another prompt's file: the scan keeps one
/// of two files declaring a name and skips the other, which no call could then reach.
#[test]
fn system_prompts_update_cannot_rename_onto_another_prompts_file() {
    let env = Env::new(prompts_tree);
    env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "pirate", "content": PIRATE}),
        Family::SystemPrompts,
        named_event("create", "pirate"),
    );
    let onto = "---\nname: helper\ndescription: Helps too.\n---\nAlso.\n";
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "pirate", "content": onto}),
    );
    assert_eq!(code, Some("D214"));
    assert!(
        message.starts_with(
            "D214 invalid_input: system prompt \"helper\" already exists: this content's frontmatter `name` would rename \"pirate\" onto it"
        ),
        "{message}"
    );
    // Both are read as they were.
    let description = |name: &str| {
        env.read(ReadFunction::SystemPromptsGet, json!({ "name": name }))["description"].clone()
    };
    assert_eq!(description("helper"), "Helps.");
    assert_eq!(description("pirate"), "Talk like a pirate");
    // Taking a bundled prompt's name shadows it, as a create of that name may.
    let shadow = "---\nname: iii-minimal\ndescription: My minimal.\n---\nLess.\n";
    env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "pirate", "content": shadow}),
        Family::SystemPrompts,
        named_event("update", "iii-minimal"),
    );
    assert_eq!(description("iii-minimal"), "My minimal.");
    // The renamed prompt's file is in the way of its old name; the refusal says what it holds.
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "pirate", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"));
    assert!(
        message.starts_with(&format!(
            "D214 invalid_input: a file already exists at {}: it holds the system prompt \"iii-minimal\" (its frontmatter names it)",
            env.path("skills/system-prompts/pirate.md").display()
        )),
        "{message}"
    );
    assert_eq!(description("iii-minimal"), "My minimal.");
}

/// A `system-prompts` folder in `local_skills_folder` overrides `skills_folder`'s whole: a
/// prompt created there, or the copy a bundled prompt's update writes, would be read by no
/// call. Both are refused, and nothing is written.
#[test]
fn system_prompts_writes_refuse_a_file_the_local_folder_would_hide() {
    let env = Env::new(|tree| {
        prompts_tree(tree);
        tree.write(
            "skills/iii/system-prompts/local.md",
            "---\ndescription: Local one.\n---\nL.\n",
        );
    });
    for (function, name) in [
        (WriteFunction::SystemPromptsCreate, "pirate"),
        (WriteFunction::SystemPromptsUpdate, "iii-minimal"),
    ] {
        let (code, message) = env.coded(function, json!({"name": name, "content": PIRATE}));
        assert_eq!(code, Some("D214"), "{message}");
        assert!(
            message.starts_with(&format!(
                "D214 invalid_input: system prompt {name:?} would be written in skills_folder/system-prompts/, which local_skills_folder overrides"
            )),
            "{message}"
        );
    }
    // The local folder's own prompts are updated where they are.
    env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "local", "content": PIRATE}),
        Family::SystemPrompts,
        named_event("update", "local"),
    );
    assert_eq!(
        text(&env.path("skills/iii/system-prompts/local.md")),
        PIRATE
    );
}

/// A create whose folder is a symbolic link leading outside the roots is refused with the
/// family's code, nothing written where the link leads: for a skill (`D115`) and for a system
/// prompt (`D214`, its `system-prompts` folder a link out).
#[test]
fn creates_through_a_link_leading_outside_the_roots_are_refused_and_write_nothing() {
    let env = Env::new(|t| {
        t.mkdir("outside/prompts").mkdir("skills");
        std::os::unix::fs::symlink(t.path("outside"), t.path("skills/out")).expect("link");
        std::os::unix::fs::symlink(t.path("outside/prompts"), t.path("skills/system-prompts"))
            .expect("link");
    });
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "out/pwn", "content": "# Pwn\n\nx\n"}),
    );
    assert_eq!(code, Some("D115"), "{message}");
    assert!(message.contains("through a symbolic link"), "{message}");
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "pwn", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"), "{message}");
    assert!(message.contains("through a symbolic link"), "{message}");
    let landed: Vec<String> = snapshot(&env.path("outside")).into_keys().collect();
    assert_eq!(landed, ["prompts/"], "nothing lands where the links lead");
}
