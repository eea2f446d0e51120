//! The user-global folders over the wire: their precedence, their writes and the profiles'
//! `functions` and `skills_index`, with both folders set by the `--config` seed.

use super::*;

const SEED: &str = "global_agents_folder: home/.iii/agents\n\
                    global_agents_skills_folder: home/.agents/skills\n";

const PDF: &str = "---\nname: pdf\ndescription: Read PDFs.\n---\nUse pdftotext.\n";
const GLOBAL_MAILER: &str = "---\nname: global-mailer\ndescription: Mail.\n---\nMail.\n";
const OPS: &str = "---\nname: Ops\nfunctions:\n  - engine::functions::list\n  - mailer::send\nskills_index: false\n---\nRun ops.\n";
const ONCALL: &str = "---\nname: Oncall\nextends: ops\n---\nBe on call.\n";

async fn start() -> Harness {
    Harness::start_with(
        Installed::Mailer,
        Some(SEED),
        &[
            ("home/.agents/skills/pdf/SKILL.md", PDF),
            // `skills/mailer/` is a folder of skills_folder: it shadows the global skill.
            ("home/.agents/skills/mailer/SKILL.md", GLOBAL_MAILER),
            ("home/.iii/agents/ops.md", OPS),
            (
                "home/.iii/agents/helper.md",
                "---\nname: Global helper\n---\nG.\n",
            ),
            ("agents/helper.md", "---\nname: Project helper\n---\nP.\n"),
            ("agents/oncall.md", ONCALL),
        ],
        None,
    )
    .await
}

fn agent<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|row| row["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {list}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn global_folders_serve_below_the_project_and_say_so_in_status() {
    let h = start().await;
    // A global skill is served, and no installed worker hides it (`pdf` is not one).
    let ids = h.skill_ids().await;
    assert!(ids.contains(&"pdf".to_string()), "{ids:?}");
    let pdf = h.call("directory::skills::get", json!({"id": "pdf"})).await;
    assert_eq!(
        pdf["path"],
        h.path("home/.agents/skills/pdf/SKILL.md")
            .display()
            .to_string()
    );
    let mailer = h
        .call("directory::skills::get", json!({"id": "mailer"}))
        .await;
    assert_eq!(
        mailer["path"],
        h.path("skills/mailer/index.md").display().to_string()
    );

    // The project profile wins; a global one is listed with the new fields.
    let list = h.call("directory::agents::list", json!({})).await;
    assert_eq!(agent(&list, "helper")["name"], "Project helper");
    let ops = agent(&list, "ops");
    assert_eq!(
        ops["functions"],
        json!(["engine::functions::list", "mailer::send"])
    );
    assert_eq!(ops["skills_index"], false);
    // Inherited through extends, across the two folders.
    let oncall = h
        .call("directory::agents::get", json!({"id": "oncall"}))
        .await;
    assert_eq!(oncall["functions"], ops["functions"]);
    assert_eq!(oncall["skills_index"], false);
    assert_eq!(oncall["system_prompt"], "Run ops.\n\nBe on call.\n");
    // A profile using neither keeps the 1.2.8 shape.
    let helper = h
        .call("directory::agents::get", json!({"id": "helper"}))
        .await;
    assert!(helper.get("functions").is_none() && helper.get("skills_index").is_none());

    let status = h.call("directory::index::status", json!({})).await;
    let roots: Vec<(String, String)> = status["watcher"]["roots"]
        .as_array()
        .expect("roots")
        .iter()
        .map(|r| {
            (
                r["root"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for root in ["global_agents_folder", "global_agents_skills_folder"] {
        assert!(
            roots.contains(&(root.to_string(), "watched".to_string())),
            "{root}: {roots:?}"
        );
    }
    let skipped = status["skipped"].as_array().expect("skipped");
    let reason = |path: &str| {
        skipped
            .iter()
            .find(|s| s["path"] == h.path(path).display().to_string())
            .map(|s| (s["root"].clone(), s["reason"].clone()))
    };
    assert_eq!(
        reason("home/.iii/agents/helper.md"),
        Some((
            json!("global_agents_folder"),
            json!("shadowed: agents_folder has a profile with the same id")
        ))
    );
    assert_eq!(
        reason("home/.agents/skills/mailer/SKILL.md").map(|(root, _)| root),
        Some(json!("global_agents_skills_folder"))
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn global_writes_edit_profiles_in_place_and_refuse_global_skills() {
    let h = start().await;
    // A global skill is read-only.
    let refused = h
        .call_err(
            "directory::skills::update",
            json!({"id": "pdf", "content": "# Mine\n\nx\n"}),
        )
        .await;
    assert!(refused.message.contains("D116 "), "{refused}");
    let refused = h
        .call_err(
            "directory::skills::create",
            json!({"id": "pdf/notes", "content": "# Notes\n\nx\n"}),
        )
        .await;
    assert!(refused.message.contains("D115 "), "{refused}");
    assert_eq!(
        fs::read_to_string(h.path("home/.agents/skills/pdf/SKILL.md")).expect("kept"),
        PDF
    );

    // A global profile is updated where it is.
    let v2 = "---\nname: Ops two\nfunctions: [engine::triggers::list]\n---\nRun more ops.\n";
    h.call(
        "directory::agents::update",
        json!({"id": "ops", "content": v2}),
    )
    .await;
    assert_eq!(
        fs::read_to_string(h.path("home/.iii/agents/ops.md")).expect("updated"),
        v2
    );
    assert!(!h.path("agents/ops.md").exists());
    let ops = h.call("directory::agents::get", json!({"id": "ops"})).await;
    assert_eq!(ops["functions"], json!(["engine::triggers::list"]));
    assert!(ops.get("skills_index").is_none(), "{ops}");
    // A bad function id is refused, and nothing is written.
    let refused = h
        .call_err(
            "directory::agents::update",
            json!({"id": "ops", "content": "---\nname: Ops\nfunctions: [send]\n---\nx\n"}),
        )
        .await;
    assert!(
        refused.message.contains("`functions` entry \"send\""),
        "{refused}"
    );
    assert_eq!(
        fs::read_to_string(h.path("home/.iii/agents/ops.md")).expect("kept"),
        v2
    );
    // Create writes the project folder and shadows the global profile; delete brings it back,
    // then removes the global file.
    let own = "---\nname: Project ops\n---\nMine.\n";
    h.call(
        "directory::agents::create",
        json!({"id": "ops", "content": own}),
    )
    .await;
    assert_eq!(
        fs::read_to_string(h.path("agents/ops.md")).expect("created"),
        own
    );
    let ops = h.call("directory::agents::get", json!({"id": "ops"})).await;
    assert_eq!(ops["name"], "Project ops");
    h.call("directory::agents::delete", json!({"id": "ops"}))
        .await;
    let ops = h.call("directory::agents::get", json!({"id": "ops"})).await;
    assert_eq!(ops["name"], "Ops two");
    h.call("directory::agents::delete", json!({"id": "ops"}))
        .await;
    assert!(!h.path("home/.iii/agents/ops.md").exists());
    let missed = h
        .call_err("directory::agents::get", json!({"id": "ops"}))
        .await;
    assert!(missed.message.contains("D410 "), "{missed}");
    h.stop().await;
}
