//! The rescan-on-every-read baseline: what a worker without an index pays on each call. Every
//! answer starts with [`fresh_views`] (walk, read and parse every file with the project's own
//! parser and merge rules), then answers from those rows, so the comparison isolates the index.
//! Answers carry the contract's fields; their exact text does not matter to the timing.

use std::collections::BTreeSet;

use iii_directory::Roots;
use iii_directory::testing::Source;
use iii_directory::testing::fresh_views;
use iii_directory::testing::{OverviewEntry, render_index};
use serde::Serialize;
use serde_json::json;

/// A `skills::list` row as the original worker serializes it.
#[derive(Serialize)]
struct ListRow<'a> {
    id: &'a str,
    title: &'a str,
    #[serde(rename = "type")]
    kind: Option<&'a str>,
    function_id: Option<&'a str>,
    disable_model_invocation: bool,
    description: &'a str,
    bytes: u64,
    modified_at: &'a str,
}

#[derive(Serialize)]
struct ListAnswer<'a> {
    skills: Vec<ListRow<'a>>,
}

/// `skills::list` (optionally with `prefix` or `search`) as JSON text.
pub fn list(roots: &Roots, prefix: Option<&str>, search: Option<&str>) -> String {
    let views = fresh_views(roots);
    let needle = search.map(str::to_lowercase);
    let skills = views
        .skills
        .iter()
        .filter(|(id, _)| prefix.is_none_or(|p| id.starts_with(p)))
        .filter(|(_, row)| {
            needle.as_deref().is_none_or(|n| {
                [&row.display_id, &row.title, &row.description]
                    .iter()
                    .any(|f| f.to_lowercase().contains(n))
            })
        })
        .map(|(_, row)| ListRow {
            id: &row.display_id,
            title: &row.title,
            kind: row.r#type.as_deref(),
            function_id: row.function_id.as_deref(),
            disable_model_invocation: row.disable_model_invocation,
            description: &row.description,
            bytes: row.bytes,
            modified_at: &row.modified_at,
        })
        .collect();
    serde_json::to_string(&ListAnswer { skills }).expect("serialize")
}

/// `skills::get`: rescan, look the id up, read its file.
pub fn get(roots: &Roots, id: &str) -> String {
    let views = fresh_views(roots);
    // Ids in `list` are display ids (`ns` for `ns/index`); the rows are keyed on disk ids.
    let row = views
        .skills
        .get(id)
        .or_else(|| views.skills.values().find(|row| row.display_id == id))
        .expect("the skill exists");
    let (path, content) = match &row.source {
        Source::File { root, rel, .. } => {
            let path = roots.file(*root, rel);
            let content = std::fs::read_to_string(&path).expect("read the skill");
            (path.display().to_string(), content)
        }
        Source::Bundled => (String::new(), String::new()),
    };
    serde_json::to_string(&json!({
        "id": row.display_id,
        "title": row.title,
        "path": path,
        "content": content,
        "modified_at": row.modified_at,
    }))
    .expect("serialize")
}

/// `skills::index`: rescan, then the same rendering of the worker overviews.
pub fn index(roots: &Roots) -> String {
    let views = fresh_views(roots);
    let overviews: Vec<OverviewEntry<'_>> = views
        .skills
        .iter()
        .filter(|(_, row)| !row.agents_skill && row.r#type.as_deref() == Some("index"))
        .map(|(id, row)| OverviewEntry {
            id,
            title: &row.title,
            description: &row.description,
        })
        .collect();
    serde_json::to_string(&json!({
        "body": render_index(&overviews),
        "workers_count": overviews.len(),
    }))
    .expect("serialize")
}

/// `agents::get`: rescan, then follow the `extends` chain through the profiles on disk and
/// merge their skills.
pub fn agent(roots: &Roots, id: &str) -> String {
    let views = fresh_views(roots);
    let top = views.agents.get(id).expect("the agent exists");
    let mut skills: BTreeSet<&str> = BTreeSet::new();
    let mut chain = vec![id.to_string()];
    let mut at = Some(top);
    while let Some(row) = at {
        skills.extend(row.profile.skills.iter().map(String::as_str));
        at = row.profile.extends.as_ref().and_then(|parent| {
            (!chain.contains(parent)).then(|| {
                chain.push(parent.clone());
                views.agents.get(parent)
            })?
        });
    }
    serde_json::to_string(&json!({
        "id": id,
        "name": top.profile.name,
        "description": top.profile.description,
        "extends_chain": chain,
        "skills": skills,
        "modified_at": top.modified_at,
    }))
    .expect("serialize")
}
