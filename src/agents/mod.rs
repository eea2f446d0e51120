//! `directory::agents::*` reads: `list` and `get`, over the catalog of agent profiles found in
//! `agents_folder` plus the bundled `iii` and `iii-minimal` bases (a file shadows a bundled id),
//! with `extends` chains resolved at read time.

pub mod write;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::doc::frontmatter;
use crate::doc::ids::validate_name;
use crate::doc::{Fields, Frontmatter, ParsedDoc};
use crate::error::next;
use crate::index::records::{AgentRow, Profile};
use crate::index::{Reader, Roots};
use crate::skills::{self, Visibility, text_of};
use crate::system_prompts::{closest, required_fields};
use crate::{Error, Result, bundled_docs, request};

/// Longest `extends` chain, in hops from a profile to its farthest ancestor (contract: 8).
pub const MAX_EXTENDS_HOPS: usize = 8;
/// Longest `logo`, in bytes (contract: 16; emoji only).
pub const MAX_LOGO_BYTES: usize = 16;
pub const ICONS: [&str; 9] = [
    "agent", "code", "search", "terminal", "database", "test", "review", "docs", "design",
];
pub const COLORS: [&str; 7] = [
    "neutral", "blue", "purple", "teal", "green", "amber", "rose",
];

/// Validates an agent profile's frontmatter as the scan reads it (a block that is not YAML is
/// read from its `key: value` lines); writes use [`profile_to_write`].
pub fn profile_from_doc(doc: &ParsedDoc) -> Result<Profile, String> {
    let fields = required_fields(&doc.frontmatter, true)?;
    profile_from_fields(fields).map_err(|why| match &doc.frontmatter {
        Frontmatter::Salvaged { error, .. } => format!("invalid frontmatter YAML: {error}"),
        _ => why,
    })
}

/// Validates the frontmatter of a profile being written: the scan's rules, and YAML that parses.
pub fn profile_to_write(doc: &ParsedDoc) -> Result<Profile, String> {
    profile_from_fields(required_fields(&doc.frontmatter, false)?)
}

fn profile_from_fields(fields: &Fields) -> Result<Profile, String> {
    let trimmed = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let name = trimmed(&fields.name).ok_or("frontmatter missing non-empty `name`")?;
    let logo = match fields.logo.as_deref().map(str::trim) {
        None => None,
        Some("") => return Err("`logo` must be non-empty when present (emoji only)".into()),
        Some(logo) if logo.len() > MAX_LOGO_BYTES => {
            return Err(format!(
                "`logo` too long ({} bytes; max {MAX_LOGO_BYTES}) — emoji only",
                logo.len()
            ));
        }
        Some(logo)
            if logo
                .chars()
                .any(|c| c == '/' || c == '\\' || c.is_whitespace()) =>
        {
            return Err("`logo` may not contain path separators or whitespace — emoji only".into());
        }
        Some(logo) => Some(logo.to_string()),
    };
    let icon = trimmed(&fields.icon);
    if let Some(icon) = &icon {
        if !ICONS.contains(&icon.as_str()) {
            return Err(format!(
                "`icon` must be one of {} (got {icon:?})",
                ICONS.join(", ")
            ));
        }
    }
    let color = trimmed(&fields.color);
    if let Some(color) = &color {
        if !COLORS.contains(&color.as_str()) {
            return Err(format!(
                "`color` must be one of {} (got {color:?})",
                COLORS.join(", ")
            ));
        }
    }
    Ok(Profile {
        name,
        description: fields
            .description
            .as_deref()
            .map(str::trim)
            .unwrap_or_default()
            .to_string(),
        logo,
        skills: fields.skills.clone().unwrap_or_default(),
        model: trimmed(&fields.model),
        reasoning_effort: trimmed(&fields.reasoning_effort),
        icon,
        color,
        extends: trimmed(&fields.extends),
    })
}

/// One profile of the catalog.
enum Entry {
    File(Box<AgentRow>),
    Bundled(&'static bundled_docs::Agent),
}

impl Entry {
    fn profile(&self) -> &Profile {
        match self {
            Entry::File(row) => &row.profile,
            Entry::Bundled(agent) => &agent.profile,
        }
    }

    fn builtin(&self) -> bool {
        matches!(self, Entry::Bundled(_))
    }

    fn modified_at(&self) -> &str {
        match self {
            Entry::File(row) => &row.modified_at,
            Entry::Bundled(_) => "",
        }
    }

    /// The whole file.
    fn raw(&self, reader: &Reader, roots: &Roots) -> Result<String> {
        match self {
            Entry::File(row) => text_of(reader, roots, &row.source, || None),
            Entry::Bundled(agent) => Ok(agent.raw.to_string()),
        }
    }

    fn body(&self, reader: &Reader, roots: &Roots) -> Result<String> {
        let raw = self.raw(reader, roots)?;
        Ok(raw[frontmatter::split(&raw).body_offset..].to_string())
    }
}

/// Every profile: files plus the bundled ids no file shadows, sorted by id.
struct Catalog {
    entries: Vec<(String, Entry)>,
}

impl Catalog {
    fn load(reader: &Reader) -> Result<Catalog> {
        let mut entries: Vec<(String, Entry)> = reader
            .agents()?
            .into_iter()
            .map(|(id, row)| (id, Entry::File(Box::new(row))))
            .collect();
        for agent in bundled_docs::agents() {
            if !entries.iter().any(|(id, _)| id == agent.id) {
                entries.push((agent.id.to_string(), Entry::Bundled(agent)));
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Catalog { entries })
    }

    fn get(&self, id: &str) -> Option<&Entry> {
        self.entries
            .binary_search_by(|(k, _)| k.as_str().cmp(id))
            .ok()
            .map(|i| &self.entries[i].1)
    }

    /// The profile and its ancestors, nearest first; or the D415 text when the chain does not
    /// resolve.
    fn chain<'a>(&'a self, id: &'a str, entry: &'a Entry) -> Result<Vec<&'a Entry>, String> {
        extends_chain(
            id,
            entry,
            |entry| entry.profile().extends.as_deref(),
            |parent| self.get(parent),
        )
    }
}

/// Follows `extends` from the profile `start` (whose id is `id`): the profile and its ancestors,
/// nearest first, each parent found with `lookup`; or the D415 text for a loop, a chain of more
/// than [`MAX_EXTENDS_HOPS`] hops, or an unknown parent. Pure, so it can be checked (and fuzzed)
/// without an index.
#[doc(hidden)]
pub fn extends_chain<'a, P>(
    id: &'a str,
    start: &'a P,
    parent_of: impl Fn(&'a P) -> Option<&'a str>,
    lookup: impl Fn(&str) -> Option<&'a P>,
) -> Result<Vec<&'a P>, String> {
    let mut chain = vec![start];
    let mut trail = vec![id];
    let mut current = start;
    while let Some(parent) = parent_of(current) {
        if trail.contains(&parent) {
            trail.push(parent);
            return Err(inheritance_error(
                id,
                &format!("has an extends loop: {}", trail.join(" → ")),
            ));
        }
        trail.push(parent);
        if chain.len() > MAX_EXTENDS_HOPS {
            return Err(inheritance_error(
                id,
                &format!(
                    "extends chain is deeper than {MAX_EXTENDS_HOPS} levels: {}",
                    trail.join(" → ")
                ),
            ));
        }
        current = lookup(parent).ok_or_else(|| {
            inheritance_error(id, &format!("extends unknown agent profile {parent:?}"))
        })?;
        chain.push(current);
    }
    Ok(chain)
}

fn inheritance_error(id: &str, problem: &str) -> String {
    Error::invalid_input(
        "D415",
        format!("agent profile {id:?} {problem}."),
        &[next("directory::agents::list", "browse agent profile ids")],
    )
    .to_string()
}

/// What a profile inherits along its chain.
struct Resolved<'a> {
    chain: Vec<&'a Entry>,
    error: Option<String>,
}

impl<'a> Resolved<'a> {
    fn new(catalog: &'a Catalog, id: &'a str, entry: &'a Entry) -> Resolved<'a> {
        match catalog.chain(id, entry) {
            Ok(chain) => Resolved { chain, error: None },
            Err(error) => Resolved {
                chain: vec![entry],
                error: Some(error),
            },
        }
    }

    /// The first non-empty `skills` list along the chain (empty = every skill).
    fn skills(&self) -> &[String] {
        self.chain
            .iter()
            .map(|e| e.profile().skills.as_slice())
            .find(|s| !s.is_empty())
            .unwrap_or_default()
    }

    fn model(&self) -> Option<&str> {
        self.chain.iter().find_map(|e| e.profile().model.as_deref())
    }

    fn reasoning_effort(&self) -> Option<&str> {
        self.chain
            .iter()
            .find_map(|e| e.profile().reasoning_effort.as_deref())
    }

    /// Bodies root-first, one blank line between non-blank parts.
    fn system_prompt(&self, reader: &Reader, roots: &Roots) -> Result<String> {
        let mut prompt = String::new();
        for entry in self.chain.iter().rev() {
            let body = entry.body(reader, roots)?;
            if body.trim().is_empty() {
                continue;
            }
            if prompt.is_empty() {
                prompt = body;
            } else {
                prompt.truncate(prompt.trim_end_matches('\n').len());
                prompt.push_str("\n\n");
                prompt.push_str(&body);
            }
        }
        Ok(prompt)
    }
}

/// The fields `list` and `get` share, in the contract's shape.
fn common_fields(id: &str, entry: &Entry, resolved: &Resolved<'_>) -> Map<String, Value> {
    let p = entry.profile();
    let mut out = Map::new();
    out.insert("id".into(), json!(id));
    out.insert("name".into(), json!(p.name));
    out.insert("description".into(), json!(p.description));
    out.insert("logo".into(), json!(p.logo));
    out.insert("model".into(), json!(resolved.model()));
    out.insert(
        "reasoning_effort".into(),
        json!(resolved.reasoning_effort()),
    );
    out.insert("icon".into(), json!(p.icon));
    out.insert("color".into(), json!(p.color));
    out.insert("extends".into(), json!(p.extends));
    if entry.builtin() {
        out.insert("builtin".into(), json!(true));
    }
    if let Some(error) = &resolved.error {
        out.insert("inheritance_error".into(), json!(error));
    }
    out.insert("modified_at".into(), json!(entry.modified_at()));
    out
}

/// `directory::agents::list`: `{ agents: [row…] }` sorted by id. Never fails on a bad chain.
pub fn list(reader: &Reader) -> Result<Value> {
    let catalog = Catalog::load(reader)?;
    let rows: Vec<Value> = catalog
        .entries
        .iter()
        .map(|(id, entry)| {
            let resolved = Resolved::new(&catalog, id, entry);
            let mut row = common_fields(id, entry, &resolved);
            let count = resolved.skills().len();
            row.insert(
                "skill_count".into(),
                if count == 0 {
                    Value::Null
                } else {
                    json!(count)
                },
            );
            Value::Object(row)
        })
        .collect();
    Ok(json!({ "agents": rows }))
}

#[derive(Deserialize)]
struct GetRequest {
    id: String,
    #[serde(default)]
    raw: bool,
}

/// `directory::agents::get`: the profile with its resolved system prompt and skill filter.
pub fn get(
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Value> {
    let req: GetRequest = request::parse(request)?;
    validate_name(&req.id).map_err(Error::Invalid)?;
    let catalog = Catalog::load(reader)?;
    let Some(entry) = catalog.get(&req.id) else {
        let ids = catalog.entries.iter().map(|(id, _)| id.clone()).collect();
        return Err(Error::not_found(
            "D410",
            "agent profile",
            &req.id,
            &closest(&req.id, ids),
            &[next("directory::agents::list", "browse agent profile ids")],
        ));
    };
    let resolved = Resolved::new(&catalog, &req.id, entry);
    let mut out = common_fields(&req.id, entry, &resolved);
    out.insert(
        "system_prompt".into(),
        json!(resolved.system_prompt(reader, roots)?),
    );
    let skills = resolved.skills();
    let mut unknown = Vec::new();
    for skill in skills {
        if skills::resolve(reader, visibility, skill)?.is_none() {
            unknown.push(skill.clone());
        }
    }
    out.insert("skills".into(), json!(skills));
    out.insert("unknown_skills".into(), json!(unknown));
    if req.raw {
        out.insert("raw".into(), json!(entry.raw(reader, roots)?));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(id, parent)` pairs, resolved the way the catalog resolves its entries.
    fn resolve<'a>(
        profiles: &'a [(&'a str, Option<&'a str>)],
        id: &'a str,
    ) -> Result<Vec<&'a str>, String> {
        let lookup = |wanted: &str| profiles.iter().find(|(id, _)| *id == wanted);
        let start = lookup(id).expect("the start profile exists");
        extends_chain(id, start, |(_, parent)| *parent, lookup)
            .map(|chain| chain.iter().map(|(id, _)| *id).collect())
    }

    /// `p0` extends `p1` … up to `p{hops}`, which extends nothing.
    fn line_of(hops: usize) -> Vec<(String, Option<String>)> {
        (0..=hops)
            .map(|i| (format!("p{i}"), (i < hops).then(|| format!("p{}", i + 1))))
            .collect()
    }

    fn borrowed(owned: &[(String, Option<String>)]) -> Vec<(&str, Option<&str>)> {
        owned
            .iter()
            .map(|(id, parent)| (id.as_str(), parent.as_deref()))
            .collect()
    }

    #[test]
    fn chain_follows_extends_nearest_first() {
        let profiles = [("a", Some("b")), ("b", Some("c")), ("c", None)];
        assert_eq!(resolve(&profiles, "a"), Ok(vec!["a", "b", "c"]));
        assert_eq!(resolve(&profiles, "c"), Ok(vec!["c"]));
    }

    #[test]
    fn eight_hops_resolve_and_nine_are_refused() {
        let eight = line_of(MAX_EXTENDS_HOPS);
        let eight = borrowed(&eight);
        let chain = resolve(&eight, "p0").expect("8 hops are allowed");
        assert_eq!(chain.len(), MAX_EXTENDS_HOPS + 1);

        let nine = line_of(MAX_EXTENDS_HOPS + 1);
        let nine = borrowed(&nine);
        let err = resolve(&nine, "p0").expect_err("9 hops are too many");
        assert!(err.starts_with("D415 invalid_input: agent profile \"p0\" extends chain is deeper than 8 levels: p0 → p1"), "{err}");
    }

    #[test]
    fn loops_and_unknown_parents_are_d415() {
        let profiles = [
            ("a", Some("b")),
            ("b", Some("a")),
            ("s", Some("s")),
            ("u", Some("gone")),
        ];
        let err = resolve(&profiles, "a").expect_err("loop");
        assert!(
            err.contains("\"a\" has an extends loop: a → b → a."),
            "{err}"
        );
        let err = resolve(&profiles, "s").expect_err("self loop");
        assert!(err.contains("\"s\" has an extends loop: s → s."), "{err}");
        let err = resolve(&profiles, "u").expect_err("unknown");
        assert!(
            err.contains("\"u\" extends unknown agent profile \"gone\"."),
            "{err}"
        );
    }
}
