//! Merge precedence: local > global > agents skills > bundled.

use super::*;

#[test]
fn default_local_root_is_also_seen_by_the_global_scan() {
    let tree = no_bundled();
    tree.write("skills/iii/team/notes.md", "# Notes\n");
    let d = tree.open();
    // Local id `team/notes`, and the same file as the global id `iii/team/notes` (spec 2.6).
    assert_eq!(skill_ids(&d), strings(&["iii/team/notes", "team/notes"]));
}

#[test]
fn local_namespace_shadows_the_global_namespace_wholesale() {
    let tree = no_bundled();
    tree.write("skills/shell/index.md", "# Global shell\n");
    tree.write("skills/shell/exec.md", "# Global exec\n");
    tree.write("skills/iii/shell/index.md", "# Local shell\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["iii/shell", "shell"]));
    let shell = get(&d, "shell");
    assert_eq!(shell["title"], "Local shell");
    assert_eq!(shell["path"], tree.abs("skills/iii/shell/index.md"));
    assert!(get_err(&d, "shell/exec").starts_with("D110 not_found: skill \"shell/exec\""));
    assert_eq!(
        skipped(&d, "skills_folder", &tree.abs("skills/shell/exec.md")),
        Some(SkipReason::NamespaceShadowed {
            namespace: "shell".into()
        })
    );
}

#[test]
fn empty_local_namespace_folder_shadows_the_global_namespace() {
    let tree = no_bundled();
    tree.write("skills/shell/exec.md", "# Global exec\n");
    tree.mkdir("skills/iii/shell");
    let d = tree.open();
    assert_eq!(skill_ids(&d), Vec::<String>::new());
}

#[test]
fn empty_local_root_shadows_nothing() {
    let tree = no_bundled();
    tree.write("skills/shell/exec.md", "# Global exec\n");
    tree.mkdir("skills/iii");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["shell/exec"]));
}

#[test]
fn local_file_wins_over_a_global_file_with_the_same_id() {
    let tree = no_bundled();
    tree.write("skills/solo.md", "# Global solo\n");
    tree.write("skills/iii/solo.md", "# Local solo\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["iii/solo", "solo"]));
    let solo = get(&d, "solo");
    assert_eq!(solo["title"], "Local solo");
    assert_eq!(solo["path"], tree.abs("skills/iii/solo.md"));
    assert_eq!(
        skipped(&d, "skills_folder", &tree.abs("skills/solo.md")),
        Some(SkipReason::SkillShadowed)
    );
}

#[test]
fn global_namespace_shadows_the_agents_skills_namespace() {
    let tree = no_bundled();
    tree.write("skills/tool/other.md", "# Global other\n");
    tree.write(".agents/skills/tool/SKILL.md", "# Agents tool\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["tool/other"]));
    assert_eq!(
        skipped(
            &d,
            "agents_skills_folder",
            &tree.abs(".agents/skills/tool/SKILL.md")
        ),
        Some(SkipReason::AgentsSkillShadowed {
            namespace: "tool".into()
        })
    );
}

#[test]
fn empty_global_folder_shadows_the_agents_skills_namespace() {
    let tree = no_bundled();
    tree.mkdir("skills/tool");
    tree.write(".agents/skills/tool/SKILL.md", "# Agents tool\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), Vec::<String>::new());
}

#[test]
fn local_folder_shadows_the_agents_skills_namespace() {
    let tree = no_bundled();
    tree.write("skills/iii/tool/index.md", "# Local tool\n");
    tree.write(".agents/skills/tool/SKILL.md", "# Agents tool\n");
    let d = tree.open();
    assert_eq!(get(&d, "tool")["title"], "Local tool");
    assert_eq!(skill_ids(&d), strings(&["iii/tool", "tool"]));
}

#[test]
fn agents_skills_scan_is_shallow() {
    let tree = no_bundled();
    tree.write(".agents/skills/tool/SKILL.md", "# Tool\n");
    tree.write(".agents/skills/tool/reference/api.md", "# Ref\n");
    tree.write(".agents/skills/tool/scripts/run.md", "# Run\n");
    tree.write(".agents/skills/tool/notes.md", "# Notes\n");
    tree.write(".agents/skills/tool/sub/SKILL.md", "# Nested skill\n");
    tree.write(".agents/skills/stray.md", "# Stray\n");
    tree.write(".agents/skills/nodoc/readme.md", "# No SKILL.md\n");
    tree.write(".agents/skills/plural/SKILLS.md", "# Plural\n");
    tree.write(".agents/skills/idx/index.md", "# Index\n");
    tree.mkdir(".agents/skills/empty");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["tool"]));
    assert_eq!(d.skipped().expect("skipped"), Vec::new());
}

#[test]
fn agents_skills_uppercase_folder_is_skipped_with_a_reason() {
    let tree = no_bundled();
    tree.write(".agents/skills/Upper/SKILL.md", "# Upper\n");
    tree.write(".agents/skills/ok/SKILL.md", "# Ok\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ok"]));
    assert_eq!(
        skipped(
            &d,
            "agents_skills_folder",
            &tree.abs(".agents/skills/Upper/SKILL.md")
        ),
        Some(bad_characters("Upper/index", 1))
    );
}

#[test]
fn agents_skill_is_displayed_and_served_as_its_folder_name() {
    let tree = no_bundled();
    tree.write(
        ".agents/skills/tool/SKILL.md",
        "---\nname: Tool\n---\nUse the tool.\n",
    );
    let d = tree.open();
    for id in ["tool", "tool/index", "iii://tool", "tool/SKILL.md"] {
        let skill = get(&d, id);
        assert_eq!(skill["id"], "tool", "{id}");
        assert_eq!(
            skill["path"],
            tree.abs(".agents/skills/tool/SKILL.md"),
            "{id}"
        );
    }
    assert_eq!(row(&d, "tool")["title"], "Tool");
}

#[test]
fn missing_roots_are_empty() {
    let tree = Tree::new();
    // Only the agents folder exists; no skills root, no local root, no agents skills root.
    tree.write("agents/helper.md", "---\nname: Helper\n---\nBody.\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&BUNDLED_IDS));
    assert_eq!(d.skipped().expect("skipped"), Vec::new());
}

/// The default layout's doubled files (`iii/pdf` and `pdf` read one file): `list` shows both,
/// as the contract does, but what offers files to read (the catalog, skill search, the spec
/// check) takes each once, as its local row, unless the request narrows into `iii/`.
#[test]
fn answers_that_offer_files_take_a_local_file_once() {
    let tree = no_bundled();
    let pdf = "---\nname: pdf\ndescription: Fill in PDF forms and pull tables out of PDF files.\n---\nUse it for PDF forms.\n";
    tree.write("skills/iii/pdf/SKILL.md", pdf);
    tree.write(
        "skills/cooking/SKILL.md",
        "---\nname: cooking\ndescription: Plan a week of dinners.\n---\nRecipes.\n",
    );
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["cooking", "iii/pdf", "pdf"]));

    let catalog_ids = |request: Value| -> Vec<String> {
        let mut request = request;
        request["format"] = json!("json");
        let answer = call(&d, ReadFunction::SkillsCatalog, request);
        answer["skills"]
            .as_array()
            .expect("skills")
            .iter()
            .map(|s| s["id"].as_str().expect("id").to_string())
            .collect()
    };
    assert_eq!(catalog_ids(json!({})), strings(&["cooking", "pdf"]));
    assert_eq!(
        catalog_ids(json!({"prefix": "iii/"})),
        strings(&["iii/pdf"])
    );
    // A prefix short of `iii/` leaves the local row out too: the file comes as its second
    // reading, as `list` shows it under that prefix.
    assert_eq!(catalog_ids(json!({"prefix": "ii"})), strings(&["iii/pdf"]));
    // Counted once among what a limit leaves out, too.
    let limited = call(
        &d,
        ReadFunction::SkillsCatalog,
        json!({"format": "json", "limit": 1}),
    );
    assert_eq!(
        (limited["count"].clone(), limited["left_out"].clone()),
        (json!(1), json!(1))
    );

    let search_ids = |request: Value| -> Vec<String> {
        let answer = d.search_skills(&request, None, None).expect("search");
        ids_of(answer["results"].as_array().expect("results"))
    };
    assert_eq!(
        search_ids(json!({"query": "fill a pdf form"})),
        strings(&["pdf"])
    );
    for prefix in ["iii", "iii/", "ii"] {
        assert_eq!(
            search_ids(json!({"query": "fill a pdf form", "prefix": prefix})),
            strings(&["iii/pdf"]),
            "{prefix}"
        );
    }
    // A query naming the second reading's id answers the local row first.
    assert_eq!(search_ids(json!({"query": "iii/pdf"}))[0], "pdf");

    let spec = d.spec_check().expect("spec check");
    assert_eq!(spec.checked, 2, "pdf and cooking, each once");
}

/// A local file of a namespace that is not an installed worker: `filter_unregistered` hides
/// its local row (`mailer/send`), and `list` shows the file as its second reading alone
/// (`iii/mailer/send`, the `iii` namespace is always visible). The answers that take each file
/// once offer that reading then, rather than nothing.
#[test]
fn a_local_file_whose_local_row_is_hidden_is_offered_as_its_second_reading() {
    let tree = no_bundled();
    tree.write(
        "skills/iii/mailer/send/SKILL.md",
        "---\nname: send\ndescription: Send an email through the mailer worker.\n---\nSMTP.\n",
    );
    tree.write(
        "skills/iii/shell/exec/SKILL.md",
        "---\nname: exec\ndescription: Run a shell command and read its output.\n---\nRun it.\n",
    );
    let d = tree.open();
    let installed = ["shell"];
    assert_eq!(
        installed_ids(&d, &installed),
        strings(&["iii/mailer/send", "iii/shell/exec", "shell/exec"])
    );
    let catalog = call_installed(
        &d,
        ReadFunction::SkillsCatalog,
        json!({"format": "json"}),
        &installed,
    );
    let entries = ids_of(catalog["skills"].as_array().expect("skills"));
    assert_eq!(entries, strings(&["iii/mailer/send", "shell/exec"]));
    assert_eq!(catalog["left_out"], json!(0), "{catalog}");
    // Counted the same way among what a limit leaves out.
    let limited = call_installed(
        &d,
        ReadFunction::SkillsCatalog,
        json!({"format": "json", "limit": 1}),
        &installed,
    );
    assert_eq!(limited["left_out"], json!(1), "{limited}");

    let set = installed.iter().map(|s| s.to_string()).collect();
    let search_ids = |query: &str| -> Vec<String> {
        let answer = d
            .search_skills(&json!({ "query": query }), Some(&set), None)
            .expect("search");
        ids_of(answer["results"].as_array().expect("results"))
    };
    assert_eq!(search_ids("send an email"), strings(&["iii/mailer/send"]));
    assert_eq!(search_ids("run a shell command"), strings(&["shell/exec"]));
    // With every namespace visible, each file is offered once, as its local row.
    let everyone = d
        .search_skills(&json!({ "query": "send an email" }), None, None)
        .expect("search");
    assert_eq!(
        ids_of(everyone["results"].as_array().expect("results")),
        strings(&["mailer/send"])
    );
}

/// `get` takes a skill file's absolute path, as the catalog's `location` gives it, for an
/// agent handed the catalog and no file access: every location answers the skill the catalog
/// listed there, whatever its `name` says. The file asked for is the file answered: a path the
/// scan does not serve, or under no skill root, is refused with why.
#[test]
fn get_takes_the_location_the_catalog_gives() {
    let tree = no_bundled();
    tree.write(
        "skills/0-research/SKILL.md",
        "---\nname: research\ndescription: Research a topic.\n---\n# Research\n\nx\n",
    );
    tree.write(
        "skills/iii/notes/SKILL.md",
        "---\nname: notes\ndescription: Keep notes.\n---\n# Notes\n\nx\n",
    );
    tree.write(
        ".agents/skills/review/SKILL.md",
        "---\nname: review\ndescription: Review code.\n---\n# Review\n\nx\n",
    );
    // Shadowed by the local namespace of the same name.
    tree.write(
        ".agents/skills/notes/SKILL.md",
        "---\nname: notes\ndescription: Other notes.\n---\n# Other\n\nx\n",
    );
    let d = tree.open();
    let catalog = call(&d, ReadFunction::SkillsCatalog, json!({ "format": "json" }));
    let entries = catalog["skills"].as_array().expect("skills");
    assert_eq!(entries.len(), 3, "{catalog}");
    for entry in entries {
        let location = entry["location"].as_str().expect("location");
        let by_location = get(&d, location);
        assert_eq!(by_location["path"], location);
        assert_eq!(by_location, get(&d, entry["id"].as_str().expect("id")));
    }
    let shadowed = tree.abs(".agents/skills/notes/SKILL.md");
    let refused = get_err(&d, &shadowed);
    assert!(
        refused.starts_with(&format!("D110 not_found: {shadowed} is not served: ")),
        "{refused}"
    );
    // A function id is refused as one, path or not.
    assert!(get_err(&d, "/a::b.md").starts_with("D112"));
    // A path in a folder of agent profiles or of system prompts is said to be there, with what
    // `check` notes of it (why it is not served, or served with a problem) and the call that
    // lists that family.
    tree.write("agents/steady.md", "---\nname: Steady\n---\nx\n");
    tree.write("agents/README.md", "# About these profiles\n");
    tree.write("agents/sub/nested.md", "---\nname: Nested\n---\nx\n");
    tree.write(
        "skills/system-prompts/terse.md",
        "---\ndescription: Terse.\n---\nBe terse.\n",
    );
    tree.write(
        "skills/system-prompts/salvaged.md",
        "---\ndescription: Salv: x: [\n---\nBody.\n",
    );
    d.reconcile().expect("reconcile");
    let agents = ("an agent profiles folder", "directory::agents::list");
    let prompts = ("a system prompts folder", "directory::system-prompts::list");
    for (file, (folder, call), note) in [
        ("agents/steady.md", agents, None),
        (
            "agents/README.md",
            agents,
            Some("invalid agent id \"README\""),
        ),
        ("agents/sub/nested.md", agents, None),
        ("skills/system-prompts/terse.md", prompts, None),
        (
            "skills/system-prompts/salvaged.md",
            prompts,
            Some("frontmatter"),
        ),
    ] {
        let path = tree.abs(file);
        let refused = get_err(&d, &path);
        assert!(
            refused.starts_with(&format!(
                "D110 not_found: {path} is in {folder}, not a skill's file."
            )),
            "{refused}"
        );
        assert!(
            refused.contains(&format!(" Next: call {call} ")),
            "{refused}"
        );
        match note {
            Some(note) => assert!(
                refused.contains(&format!("`iii-directory check` notes of it: {note}")),
                "{refused}"
            ),
            None => assert!(!refused.contains("notes of it"), "{refused}"),
        }
    }
    // The prompt with a note is still served, as a prompt.
    let prompts = call(&d, ReadFunction::SystemPromptsList, json!({}));
    assert!(prompts.to_string().contains("salvaged"), "{prompts}");
    // A shadowed copy is refused with its reason, even when a link makes it the served file.
    tree.write(
        "skills/linked/SKILL.md",
        "---\nname: linked\ndescription: Linked.\n---\n# Linked\n\nx\n",
    );
    std::os::unix::fs::symlink("../../skills/linked", tree.path(".agents/skills/linked"))
        .expect("symlink");
    d.reconcile().expect("reconcile");
    let copy = tree.abs(".agents/skills/linked/SKILL.md");
    let refused = get_err(&d, &copy);
    assert!(
        refused.starts_with(&format!("D110 not_found: {copy} is not served: shadowed")),
        "{refused}"
    );
    for nowhere in [
        tree.abs("outside.md"),
        tree.abs("skills/missing.md"),
        tree.abs("agents/missing.md"),
    ] {
        let refused = get_err(&d, &nowhere);
        assert!(
            refused.starts_with(&format!("D110 not_found: no skill file at {nowhere}")),
            "{refused}"
        );
    }
    // A long path is echoed cut, as every caller's string is.
    let long = format!("{}/{}.md", tree.abs("skills"), "a".repeat(5_000));
    let refused = get_err(&d, &long);
    assert!(
        refused.starts_with("D110 not_found: no skill file at /"),
        "{refused}"
    );
    assert!(refused.contains("a…: a skill's path"), "{refused}");
    assert!(refused.len() < 1_000, "{refused}");
    // A script an Agent Skill names, by its path, is no skill either: coded as a miss, where
    // the id rules would complain of the leading `/`. A path outside the roots keeps the id
    // rules' answer (nothing is looked up there).
    tree.write("skills/pdf-suite/scripts/extract.py", "print(1)\n");
    let script = tree.abs("skills/pdf-suite/scripts/extract.py");
    let refused = get_err(&d, &script);
    assert!(
        refused.starts_with(&format!("D110 not_found: no skill file at {script}")),
        "{refused}"
    );
    // A served file with a note in `check` is answered by its path as by its id: a frontmatter
    // ignored for a value of the wrong type, a content `get` refuses (the same refusal).
    tree.write(
        "skills/odd/index.md",
        "---\ntitle: [1, 2]\ndescription: Odd.\n---\n# Odd\n\nbody\n",
    );
    tree.write(
        "skills/huge/index.md",
        &format!("# Huge\n\n{}\n", "x".repeat(300_000)),
    );
    d.reconcile().expect("reconcile");
    assert_eq!(get(&d, &tree.abs("skills/odd/index.md")), get(&d, "odd"));
    assert_eq!(
        get_err(&d, &tree.abs("skills/huge/index.md")),
        get_err(&d, "huge")
    );
    let outside = tree.abs("elsewhere/run.py");
    assert!(
        get_err(&d, &outside).starts_with("id may not have a leading or trailing '/'"),
        "{}",
        get_err(&d, &outside)
    );
}
