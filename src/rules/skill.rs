//! What a skill is: its row (title, type, description, flags) from its parsed document, the
//! id it is shown under, and who may see it (`filter_unregistered`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{Source, trimmed};
use crate::code::Code;
use crate::doc::ParsedDoc;
use crate::doc::ids::{first_segment, normalize_id_input, validate_skill_id};
use crate::error::{Error, Next, Result, next, quoted};

/// Namespaces `filter_unregistered` never hides: this worker's (`directory` in the contract,
/// and `iii-directory`, where its own bundled skills live) and the engine's (`iii`).
pub const ALWAYS_VISIBLE_NAMESPACES: [&str; 3] = ["directory", "iii-directory", "iii"];

/// What to try after a skill id is not found.
pub const NEXT_ON_MISS: [Next; 2] = [
    next("directory::skills::list", "browse skill ids"),
    next("directory::skills::index", "see the per-worker overview"),
];

/// One visible skill, before `filter_unregistered` (which depends on the engine and is applied
/// at read time).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillRow {
    pub display_id: String,
    pub title: String,
    pub r#type: Option<String>,
    pub function_id: Option<String>,
    pub disable_model_invocation: bool,
    pub description: String,
    /// Frontmatter `name`, trimmed, when it is a non-empty string: the Agent Skills name
    /// `skills::catalog` shows (the title may come from a `title` key instead).
    pub name: Option<String>,
    /// Frontmatter `compatibility` (Agent Skills), trimmed, when it is a non-empty string.
    pub compatibility: Option<String>,
    pub bytes: u64,
    pub modified_at: String,
    pub source: Source,
    /// The row survives `filter_unregistered` whatever is installed: a single-segment id, one
    /// of [`ALWAYS_VISIBLE_NAMESPACES`], or a namespace served by the agents skills root.
    pub always_visible: bool,
    /// Served from `agents_skills_folder`: read-only and left out of `skills::index`.
    pub agents_skill: bool,
}

impl SkillRow {
    /// A bundled row shown as `display_id` with every other field empty, for callers that set
    /// only what they look at (tests, the skill text's probe row).
    pub fn blank(display_id: &str) -> SkillRow {
        SkillRow {
            display_id: display_id.to_string(),
            title: String::new(),
            r#type: None,
            function_id: None,
            disable_model_invocation: false,
            description: String::new(),
            name: None,
            compatibility: None,
            bytes: 0,
            modified_at: String::new(),
            source: Source::Bundled,
            always_visible: false,
            agents_skill: false,
        }
    }
}

/// Which skills a caller may see: `filter_unregistered` hides a namespace that is not an
/// installed worker. `installed: None` means the set is unknown, and then nothing is hidden.
#[derive(Clone, Copy, Debug)]
pub struct Visibility<'a> {
    pub filter_unregistered: bool,
    pub installed: Option<&'a BTreeSet<String>>,
}

impl Visibility<'_> {
    pub fn allows(&self, id: &str, row: &SkillRow) -> bool {
        self.allows_id(id, row.always_visible)
    }

    pub fn allows_id(&self, id: &str, always_visible: bool) -> bool {
        match (self.filter_unregistered, self.installed) {
            (true, Some(installed)) => always_visible || installed.contains(first_segment(id)),
            _ => true,
        }
    }

    /// Whether a skill created under `id` would be hidden right away (its namespace is not an
    /// installed worker and nothing else keeps it visible).
    pub fn would_hide(&self, id: &str) -> bool {
        !self.allows_id(id, id_always_visible(id))
    }
}

/// Whether a skill id stays visible whatever is installed, by its shape alone.
fn id_always_visible(id: &str) -> bool {
    !id.contains('/') || ALWAYS_VISIBLE_NAMESPACES.contains(&first_segment(id))
}

/// What a skill's document says about itself.
pub struct Identity {
    /// Frontmatter `title`, then `name`, then the body's title line, then the fallback (the id).
    pub title: String,
    pub r#type: Option<String>,
    pub function_id: Option<String>,
}

pub fn identity(doc: Option<&ParsedDoc>, fallback_title: &str) -> Identity {
    let fields = doc.and_then(ParsedDoc::fields);
    Identity {
        title: trimmed(fields.and_then(|f| f.title.as_ref()))
            .or_else(|| trimmed(fields.and_then(|f| f.name.as_ref())))
            .or_else(|| doc.and_then(|d| d.h1.clone()))
            .unwrap_or_else(|| fallback_title.to_string()),
        r#type: trimmed(fields.and_then(|f| f.r#type.as_ref())),
        function_id: trimmed(fields.and_then(|f| f.function_id.as_ref())),
    }
}

/// Where a skill row's file is and what it is, beyond its parsed document.
pub struct Placement {
    pub display_id: String,
    pub bytes: u64,
    pub modified_at: String,
    pub source: Source,
    /// Served from `agents_skills_folder`.
    pub agents_skill: bool,
    /// Its namespace is an agents namespace (a valid agents skill has its name, served or
    /// shadowed by a skills root folder), whose skills bypass the filter.
    pub agents_namespace: bool,
}

/// Builds a skill row from its parsed document (`None` when the file cannot be served, in which
/// case the row carries defaults, as the contract asks).
pub fn row_for(id: &str, doc: Option<&ParsedDoc>, at: Placement) -> SkillRow {
    let fields = doc.and_then(ParsedDoc::fields);
    let identity = identity(doc, &at.display_id);
    let description = trimmed(fields.and_then(|f| f.description.as_ref()))
        .or_else(|| doc.map(|d| d.first_paragraph.clone()))
        .unwrap_or_default();
    SkillRow {
        title: identity.title,
        r#type: identity.r#type,
        function_id: identity.function_id,
        disable_model_invocation: fields.is_some_and(|f| f.disable_model_invocation),
        description,
        name: trimmed(fields.and_then(|f| f.name.as_ref())),
        compatibility: trimmed(fields.and_then(|f| f.compatibility.as_ref())),
        bytes: at.bytes,
        modified_at: at.modified_at,
        source: at.source,
        always_visible: id_always_visible(id) || at.agents_namespace,
        agents_skill: at.agents_skill,
        display_id: at.display_id,
    }
}

/// The id callers see: `<ns>/index` is shown as `<ns>` unless `<ns>` is itself an id.
pub fn display_id(id: &str, all_ids: &BTreeSet<String>) -> String {
    match id.strip_suffix("/index") {
        Some(bare) if !all_ids.contains(bare) => bare.to_string(),
        _ => id.to_string(),
    }
}

/// Normalizes and checks an id as `get`, `update`, `create` and `delete` take it.
pub fn parse_id(raw: &str) -> Result<String> {
    let id = normalize_id_input(raw).map_err(Error::invalid)?;
    if id.contains("::") {
        return Err(Error::coded(
            Code::FunctionIdForSkill,
            format!(
                "{id} looks like a FUNCTION id (service::name), not a skill id. Skill ids use '/' (e.g. \"database/index\"). To CALL that function pass the id to agent_trigger; to READ its skill doc, look up the skill id.",
                id = quoted(&id)
            ),
            &NEXT_ON_MISS,
        ));
    }
    validate_skill_id(&id).map_err(Error::invalid)?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_follows_the_installed_workers() {
        let installed: BTreeSet<String> = ["mailer".to_string()].into();
        let filter = Visibility {
            filter_unregistered: true,
            installed: Some(&installed),
        };
        for (id, hidden) in [
            ("solo", false),
            ("mailer/send", false),
            ("directory/x", false),
            ("iii-directory/x", false),
            ("iii/x", false),
            ("ghost/x", true),
        ] {
            assert_eq!(filter.would_hide(id), hidden, "{id}");
        }
        let unknown = Visibility {
            filter_unregistered: true,
            installed: None,
        };
        assert!(!unknown.would_hide("ghost/x"));
    }

    #[test]
    fn display_ids_drop_index_unless_the_bare_id_exists() {
        let ids: BTreeSet<String> = ["a/index", "b", "b/index"].map(String::from).into();
        assert_eq!(display_id("a/index", &ids), "a");
        assert_eq!(display_id("b/index", &ids), "b/index");
        assert_eq!(display_id("index", &ids), "index");
    }
}
