//! `directory::skills::catalog` on the wire: each format, the visibility of `list` (with
//! `filter_unregistered` through `worker::list`) less the skills a model may not invoke, the
//! order by namespace, and the budget with its count of what was left out.

use super::*;

const CATALOG: &str = "directory::skills::catalog";

/// Agent Skills (`SKILL.md` folders) beside the fixture's plain skills: in the installed
/// namespace `mailer`, in `ghost` (no such worker: hidden), in the agents skills root (always
/// shown), one a model may not invoke, and one with nothing to describe it.
const SKILLS: &[(&str, &str)] = &[
    (
        "skills/mailer/send/SKILL.md",
        "---\nname: send\ndescription: Send one email & track it.\n---\n# Send\n",
    ),
    (
        "skills/mailer/bounce/SKILL.md",
        "---\nname: bounce\ndescription: >\n  Handle <bounced>\n  mail.\n---\n# Bounce\n",
    ),
    (
        "skills/mailer/manual/SKILL.md",
        "---\nname: manual\ndescription: Only on request.\ndisable-model-invocation: true\n---\n# Manual\n",
    ),
    (
        "skills/mailer/empty/SKILL.md",
        "---\nname: empty\n---\n# Empty\n",
    ),
    (
        "skills/ghost/haunt/SKILL.md",
        "---\nname: haunt\ndescription: Boo.\n---\n# Haunt\n",
    ),
    (
        ".agents/skills/polish/SKILL.md",
        "---\nname: polish\ndescription: Polish prose.\n---\n# Polish\n",
    ),
];

async fn catalog(h: &Harness, request: Value) -> Value {
    h.call(CATALOG, request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_lists_agent_skills_in_each_format_within_its_budget() {
    let h = Harness::start_with(Installed::Mailer, None, SKILLS, None).await;
    let location = |rel: &str| h.path(rel).display().to_string();

    // json: the entries, in on-disk id order (`mailer/bounce/index` before `mailer/send/…`,
    // `polish` after `mailer`), ghost hidden, the manual and the empty one left out.
    let json = catalog(&h, json!({"format": "json"})).await;
    assert_eq!(
        json["skills"],
        json!([
            {"id": "mailer/bounce", "name": "bounce", "description": "Handle <bounced> mail.", "location": location("skills/mailer/bounce/SKILL.md")},
            {"id": "mailer/send", "name": "send", "description": "Send one email & track it.", "location": location("skills/mailer/send/SKILL.md")},
            {"id": "polish", "name": "polish", "description": "Polish prose.", "location": location(".agents/skills/polish/SKILL.md")},
        ]),
        "{json}"
    );
    assert_eq!(json["count"], 3);
    assert_eq!(json["left_out"], 0);
    assert_eq!(json["max_bytes"], 16384, "the default budget");
    assert_eq!(json["format"], "json");

    // xml (the default): to-prompt's block, which a real XML parser reads back.
    let xml = catalog(&h, json!({})).await;
    assert_eq!(xml["format"], "xml");
    let body = xml["body"].as_str().expect("a body");
    assert_eq!(
        body,
        format!(
            "<available_skills>\n\
             <skill>\n<name>\nbounce\n</name>\n<description>\nHandle &lt;bounced&gt; mail.\n</description>\n<location>\n{}\n</location>\n</skill>\n\
             <skill>\n<name>\nsend\n</name>\n<description>\nSend one email &amp; track it.\n</description>\n<location>\n{}\n</location>\n</skill>\n\
             <skill>\n<name>\npolish\n</name>\n<description>\nPolish prose.\n</description>\n<location>\n{}\n</location>\n</skill>\n\
             </available_skills>",
            location("skills/mailer/bounce/SKILL.md"),
            location("skills/mailer/send/SKILL.md"),
            location(".agents/skills/polish/SKILL.md"),
        )
    );
    let doc = roxmltree::Document::parse(body).expect("the block parses as XML");
    let descriptions: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("description"))
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect();
    assert_eq!(
        descriptions,
        [
            "Handle <bounced> mail.",
            "Send one email & track it.",
            "Polish prose."
        ]
    );

    // markdown: one line each.
    let markdown = catalog(&h, json!({"format": "markdown", "prefix": "mailer/"})).await;
    assert_eq!(
        markdown["body"],
        format!(
            "- **bounce** ({}): Handle <bounced> mail.\n- **send** ({}): Send one email & track it.\n",
            location("skills/mailer/bounce/SKILL.md"),
            location("skills/mailer/send/SKILL.md"),
        )
    );
    assert_eq!(markdown["count"], 2);

    // The budget: the entries stop at the first that does not fit, and the rest are counted.
    let first_two = body
        .find("<skill>\n<name>\npolish")
        .expect("the third entry");
    let budget = first_two + "</available_skills>".len();
    let cut = catalog(&h, json!({"max_bytes": budget})).await;
    assert_eq!(
        (cut["count"].clone(), cut["left_out"].clone()),
        (json!(2), json!(1))
    );
    assert_eq!(
        cut["body"],
        format!("{}</available_skills>", &body[..first_two])
    );
    assert!(cut["body"].as_str().expect("body").len() <= budget);
    let cut = catalog(&h, json!({"max_bytes": budget - 1})).await;
    assert_eq!(
        (cut["count"].clone(), cut["left_out"].clone()),
        (json!(1), json!(2))
    );
    let limited = catalog(&h, json!({"format": "json", "limit": 1})).await;
    assert_eq!(
        (limited["count"].clone(), limited["left_out"].clone()),
        (json!(1), json!(2))
    );
    // Outside the schema's bounds is refused by name, not brought within them.
    for (request, expected) in [
        (
            json!({"max_bytes": 1}),
            "expected a number of at least 256 for `max_bytes`",
        ),
        (
            json!({"limit": 0}),
            "expected a number of at least 1 for `limit`",
        ),
    ] {
        let err = h.call_err(CATALOG, request).await;
        assert!(err.message.contains(expected), "{err}");
    }

    // A bad format is refused.
    let err = h.call_err(CATALOG, json!({"format": "yaml"})).await;
    assert!(err.message.contains("unknown variant"), "{err}");
    h.stop().await;
}

/// With `worker::list` failing, nothing is hidden: the ghost namespace's skill is listed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_fails_open_as_list_does() {
    let h = Harness::start_with(Installed::Error, None, SKILLS, None).await;
    let json = catalog(&h, json!({"format": "json"})).await;
    let ids: Vec<&str> = json["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(
        ids,
        ["ghost/haunt", "mailer/bounce", "mailer/send", "polish"]
    );
    h.stop().await;
}
