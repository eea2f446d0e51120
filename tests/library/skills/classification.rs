//! Classification of files under a skills root.

use super::*;

#[test]
fn system_prompts_segment_is_not_a_skill() {
    let tree = no_bundled();
    tree.write("skills/ns/a.md", "# A\n");
    tree.write(
        "skills/ns/system-prompts/reviewer.md",
        "---\ndescription: Reviews.\n---\nBody.\n",
    );
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/a"]));
    let prompts = call(&d, ReadFunction::SystemPromptsList, json!({}));
    assert!(
        prompts["prompts"]
            .as_array()
            .expect("prompts")
            .iter()
            .any(|p| p["name"] == "reviewer")
    );
}

#[test]
fn prompts_segment_is_ignored_with_a_reason() {
    let tree = no_bundled();
    tree.write("skills/ns/a.md", "# A\n");
    tree.write(
        "skills/ns/prompts/say-hello.md",
        "---\ndescription: Hi.\n---\nHello.\n",
    );
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/a"]));
    let prompts = call(&d, ReadFunction::SystemPromptsList, json!({}));
    assert!(
        !prompts["prompts"]
            .as_array()
            .expect("prompts")
            .iter()
            .any(|p| p["name"] == "say-hello")
    );
    let reason = skipped(
        &d,
        "skills_folder",
        &tree.abs("skills/ns/prompts/say-hello.md"),
    )
    .expect("skipped");
    assert_eq!(reason, SkipReason::PromptsSegment);
}

#[test]
fn agents_segment_is_reserved_under_a_skills_root() {
    let tree = no_bundled();
    tree.write(
        "skills/ns/agents/helper.md",
        "---\nname: Helper\n---\nBody.\n",
    );
    tree.write("skills/agents/top.md", "---\nname: Top\n---\nBody.\n");
    tree.write("skills/ns/a.md", "# A\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/a"]));
    for rel in ["skills/ns/agents/helper.md", "skills/agents/top.md"] {
        let reason = skipped(&d, "skills_folder", &tree.abs(rel));
        assert_eq!(reason, Some(SkipReason::AgentsSegment), "{rel}");
    }
    // Nor are they agent profiles: only the bundled ones are listed.
    let agents = call(&d, ReadFunction::AgentsList, json!({}));
    let agent_ids: Vec<&str> = agents["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| a["id"].as_str().expect("id"))
        .collect();
    assert_eq!(agent_ids, ["iii", "iii-minimal"]);
}

#[test]
fn segments_that_only_contain_the_reserved_words_are_skills() {
    let tree = no_bundled();
    tree.write("skills/promptsx/a.md", "# A\n");
    tree.write("skills/agentsx/b.md", "# B\n");
    tree.write("skills/prompts-extra/c.md", "# C\n");
    tree.write("skills/ns/system-promptsx/d.md", "# D\n");
    tree.write("skills/ns/my-agents/e.md", "# E\n");
    let d = tree.open();
    assert_eq!(
        skill_ids(&d),
        strings(&[
            "agentsx/b",
            "ns/my-agents/e",
            "ns/system-promptsx/d",
            "prompts-extra/c",
            "promptsx/a",
        ])
    );
}

#[test]
fn skill_md_is_the_folder_overview() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILL.md", "# Overview\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns"]));
    assert_eq!(get(&d, "ns/index")["id"], "ns");
    assert_eq!(get(&d, "ns/index")["path"], tree.abs("skills/ns/SKILL.md"));
}

#[test]
fn skills_md_is_the_folder_overview() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILLS.md", "# Overview\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns"]));
    assert_eq!(get(&d, "ns/index")["path"], tree.abs("skills/ns/SKILLS.md"));
}

#[test]
fn lowercase_skill_md_is_not_an_overview_alias() {
    let tree = no_bundled();
    tree.write("skills/ns/skill.md", "# Lower\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/skill"]));
}

#[test]
fn skill_md_beats_skills_md_beats_index_md() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILL.md", "From SKILL.md\n");
    tree.write("skills/ns/SKILLS.md", "From SKILLS.md\n");
    tree.write("skills/ns/index.md", "From index.md\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns"]));
    assert_eq!(get(&d, "ns")["body"], "From SKILL.md\n");
    for rel in ["skills/ns/SKILLS.md", "skills/ns/index.md"] {
        assert_eq!(
            skipped(&d, "skills_folder", &tree.abs(rel)),
            Some(SkipReason::DuplicateId {
                id: "ns/index".into(),
                first: "ns/SKILL.md".into()
            }),
            "{rel}"
        );
    }
}

#[test]
fn skills_md_beats_index_md() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILLS.md", "From SKILLS.md\n");
    tree.write("skills/ns/index.md", "From index.md\n");
    let d = tree.open();
    assert_eq!(get(&d, "ns")["body"], "From SKILLS.md\n");
    assert_eq!(
        skipped(&d, "skills_folder", &tree.abs("skills/ns/index.md")),
        Some(SkipReason::DuplicateId {
            id: "ns/index".into(),
            first: "ns/SKILLS.md".into()
        })
    );
}

#[test]
fn root_level_skill_md_is_index() {
    let tree = no_bundled();
    tree.write("skills/SKILL.md", "# Root overview\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["index"]));
    assert_eq!(get(&d, "index")["path"], tree.abs("skills/SKILL.md"));
}

#[test]
fn folder_named_skill_is_not_renamed() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILL/x.md", "# X\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), Vec::<String>::new());
    assert_eq!(
        skipped(&d, "skills_folder", &tree.abs("skills/ns/SKILL/x.md")),
        Some(bad_characters("ns/SKILL/x", 2))
    );
}

#[test]
fn invalid_ids_are_skipped_with_their_reason() {
    let tree = no_bundled();
    let long = "a".repeat(65);
    tree.write("skills/Upper.md", "# U\n");
    tree.write("skills/has space.md", "# S\n");
    tree.write("skills/ns/Bad/x.md", "# B\n");
    tree.write("skills/ns/README.md", "# R\n");
    tree.write("skills/dotted.name.md", "# D\n");
    tree.write(&format!("skills/{long}.md"), "# L\n");
    tree.write("skills/ok.md", "# Ok\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ok"]));
    let expected = [
        ("skills/Upper.md".to_string(), bad_characters("Upper", 1)),
        (
            "skills/has space.md".to_string(),
            bad_characters("has space", 1),
        ),
        (
            "skills/ns/Bad/x.md".to_string(),
            bad_characters("ns/Bad/x", 2),
        ),
        (
            "skills/ns/README.md".to_string(),
            bad_characters("ns/README", 2),
        ),
        (
            "skills/dotted.name.md".to_string(),
            bad_characters("dotted.name", 1),
        ),
        (
            format!("skills/{long}.md"),
            invalid_segment(&long, 1, SegmentError::TooLong(long.clone())),
        ),
    ];
    for (rel, reason) in expected {
        assert_eq!(
            skipped(&d, "skills_folder", &tree.abs(&rel)),
            Some(reason),
            "{rel}"
        );
    }
}

#[test]
fn non_markdown_files_are_ignored() {
    let tree = no_bundled();
    tree.write("skills/ns/a.md", "# A\n");
    tree.write("skills/ns/notes.txt", "# not markdown\n");
    tree.write("skills/ns/run.py", "print('hi')\n");
    tree.write("skills/ns/old.md.bak", "# backup\n");
    tree.write("skills/ns/upper.MD", "# upper extension\n");
    tree.write("skills/ns/.md", "# only an extension\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/a"]));
    assert_eq!(d.skipped().expect("skipped"), Vec::new());
}
