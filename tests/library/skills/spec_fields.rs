//! The Agent Skills fields (issue 30) in `get` and `list`: `license`, `compatibility`,
//! `metadata`, `allowed_tools` when the file has them, and for a `SKILL.md` its `problems`
//! against the specification, as stored at reconcile; other files keep the contract's answer.

use super::*;

const FULL: &str = "---\nname: pdf-tools\ndescription: Reads PDFs.\nlicense: Apache-2.0\ncompatibility: Needs poppler\nmetadata:\n  author: someone\n  version: \"1.0\"\nallowed-tools: [Read, Bash]\n---\n# PDF\n\nBody.\n";

#[test]
fn get_adds_the_spec_fields_and_problems_of_a_skill_md() {
    let tree = no_bundled();
    tree.write("skills/pdf-tools/SKILL.md", FULL);
    tree.set_mtime("skills/pdf-tools/SKILL.md");
    let d = tree.open();
    assert_eq!(
        get(&d, "pdf-tools"),
        json!({
            "id": "pdf-tools",
            "title": "pdf-tools",
            "type": null,
            "function_id": null,
            "disable_model_invocation": false,
            "path": tree.abs("skills/pdf-tools/SKILL.md"),
            "body": "# PDF\n\nBody.\n",
            "modified_at": MTIME_TEXT,
            "license": "Apache-2.0",
            "compatibility": "Needs poppler",
            "metadata": {"author": "someone", "version": "1.0"},
            "allowed_tools": "Read Bash",
            "problems": [{
                "code": "S151",
                "severity": "warning",
                "message": "`allowed-tools` is a list; the specification writes it as one string of space-separated tools",
            }],
        })
    );
    assert_eq!(row(&d, "pdf-tools")["compatibility"], "Needs poppler");
}

#[test]
fn problems_follow_the_folder_and_the_file_stays_served() {
    let tree = no_bundled();
    tree.write(
        "skills/renamed/SKILL.md",
        "---\nname: Old_Name\n---\n# Old\n\nBody.\n",
    );
    tree.write(
        "skills/fine/SKILL.md",
        "---\nname: fine\ndescription: Fine.\n---\n# Fine\n\nBody.\n",
    );
    let d = tree.open();
    let codes = |id: &str| -> Vec<String> {
        get(&d, id)["problems"]
            .as_array()
            .unwrap_or_else(|| panic!("problems for {id}"))
            .iter()
            .map(|p| p["code"].as_str().expect("code").to_owned())
            .collect()
    };
    assert_eq!(codes("renamed"), ["S113", "S114", "S117", "S120"]);
    assert_eq!(codes("fine"), Vec::<String>::new());
    assert!(skill_ids(&d).contains(&"renamed".to_owned()));

    // A name equal to its folder's breaks no folder rule (ids are lowercase, so this one keeps
    // its underscore).
    tree.write(
        "skills/old_name/SKILL.md",
        "---\nname: old_name\n---\n# Old\n\nBody.\n",
    );
    d.reconcile().expect("reconcile");
    assert_eq!(codes("old_name"), ["S114", "S120"]);

    // An edit is checked again at its reconcile.
    tree.write(
        "skills/renamed/SKILL.md",
        "---\nname: renamed\ndescription: Now valid.\n---\n# R\n\nBody.\n",
    );
    d.reconcile().expect("reconcile");
    assert_eq!(codes("renamed"), Vec::<String>::new());
}

#[test]
fn other_files_keep_the_contract_answer() {
    let tree = no_bundled();
    tree.write(
        "skills/shell/exec.md",
        "---\ntitle: Exec\n---\n# Exec\n\nRuns.\n",
    );
    tree.write(
        "skills/shell/env.md",
        "---\ntitle: Env\ncompatibility: Linux only\n---\n# Env\n\nReads.\n",
    );
    let d = tree.open();
    let exec = get(&d, "shell/exec");
    for key in [
        "license",
        "compatibility",
        "metadata",
        "allowed_tools",
        "problems",
    ] {
        assert!(exec.get(key).is_none(), "{key} absent: {exec}");
    }
    assert!(row(&d, "shell/exec").get("compatibility").is_none());
    // Spec fields are answered wherever they are written; problems only for a SKILL.md.
    let env = get(&d, "shell/env");
    assert_eq!(env["compatibility"], "Linux only");
    assert!(env.get("problems").is_none(), "{env}");
    assert_eq!(row(&d, "shell/env")["compatibility"], "Linux only");
}

/// The checks are stored at reconcile only for a content first seen as a `SKILL.md`; the same
/// text indexed first under another name is checked when `get` asks, with the same answer.
#[test]
fn a_content_first_indexed_under_another_name_gets_its_problems_too() {
    let tree = no_bundled();
    let text = "---\nname: Old_Name\n---\n# Old\n\nBody.\n";
    tree.write("skills/notes/first.md", text);
    let d = tree.open();
    assert!(get(&d, "notes/first").get("problems").is_none());
    drop(d);
    tree.write("skills/renamed/SKILL.md", text);
    let d = tree.open();
    let codes: Vec<String> = get(&d, "renamed")["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| p["code"].as_str().expect("code").to_owned())
        .collect();
    assert_eq!(codes, ["S113", "S114", "S117", "S120"]);
}

/// `check --spec` too: a `SKILL.md` whose content the index first read under another name (a
/// file renamed or copied to `SKILL.md`) is checked, and reported as a fresh index reports it,
/// never left out of the count.
#[test]
fn check_spec_covers_a_content_first_indexed_under_another_name() {
    let tree = no_bundled();
    let text = "---\nname: Old_Name\n---\n# Old\n\nBody.\n";
    tree.write("skills/notes/first.md", text);
    let d = tree.open();
    tree.write("skills/renamed/SKILL.md", text);
    d.reconcile().expect("reconcile");
    let spec = d.spec_check().expect("spec check");
    let fresh = common::fresh_index(&tree.config());
    assert_eq!(spec, fresh.spec_check().expect("spec check"));
    assert_eq!(spec.checked, 1, "{spec:?}");
    let codes: Vec<String> = spec.files[0]
        .problems
        .iter()
        .map(|p| p.to_json()["code"].as_str().expect("code").to_owned())
        .collect();
    assert_eq!(codes, ["S113", "S114", "S117", "S120"]);
}
