//! What an agent profile is: a direct `<agents_folder>/<id>.md` file whose frontmatter names
//! it (`name`) and may set a logo, icon, colour, skill filter, model, effort, the engine
//! functions a session preloads (`functions`), whether a session gets the skills index
//! (`skills_index`) and a parent to `extends`; and how an `extends` chain resolves.

use serde::{Deserialize, Serialize};

use super::{FrontmatterProblem, Reading, Source, trimmed, with_required_fields};
use crate::code::Code;
use crate::doc::ids::{FunctionIdError, validate_function_id};
use crate::doc::{Fields, Lenient, ParsedDoc};
use crate::error::{Error, Result, next, quoted};

/// The frontmatter of an agent profile, validated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub logo: Option<String>,
    pub skills: Vec<String>,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
    pub icon: Option<String>,
    pub color: Option<String>,
    pub extends: Option<String>,
    /// `functions:`, each a function id (trimmed); empty when absent.
    pub functions: Vec<String>,
    /// `skills_index:` when set (a reader's default is true).
    pub skills_index: Option<bool>,
}

/// One agent profile found on disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRow {
    pub profile: Profile,
    pub modified_at: String,
    pub bytes: u64,
    pub source: Source,
}

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

/// Why a file is not an agent profile; `Display` gives the reason the scan records, and the
/// (uncoded) message a write refuses with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ProfileProblem {
    #[error(transparent)]
    Frontmatter(#[from] FrontmatterProblem),
    #[error("frontmatter missing non-empty `name`")]
    NoName,
    #[error("`logo` must be non-empty when present (emoji only)")]
    EmptyLogo,
    #[error("`logo` too long ({0} bytes; max {MAX_LOGO_BYTES}) — emoji only")]
    LogoTooLong(usize),
    #[error("`logo` may not contain path separators or whitespace — emoji only")]
    LogoCharacters,
    #[error("`icon` must be one of {} (got {})", ICONS.join(", "), quoted(.0))]
    Icon(String),
    #[error("`color` must be one of {} (got {})", COLORS.join(", "), quoted(.0))]
    Color(String),
    #[error("`functions` must be a list of function ids")]
    FunctionsShape,
    #[error("`functions` entry {}: {problem}", quoted(entry))]
    Function {
        entry: String,
        problem: FunctionIdError,
    },
    #[error("`skills_index` must be true or false")]
    SkillsIndexShape,
}

/// Validates an agent profile's frontmatter; the scan and the writes use the same rules (see
/// [`Reading`] for the one difference).
pub fn profile(doc: &ParsedDoc, reading: Reading) -> Result<Profile, ProfileProblem> {
    with_required_fields(&doc.frontmatter, reading, profile_from_fields)
}

fn profile_from_fields(fields: &Fields) -> Result<Profile, ProfileProblem> {
    let name = trimmed(fields.name.as_ref()).ok_or(ProfileProblem::NoName)?;
    let logo = match fields.logo.as_deref().map(str::trim) {
        None => None,
        Some("") => return Err(ProfileProblem::EmptyLogo),
        Some(logo) if logo.len() > MAX_LOGO_BYTES => {
            return Err(ProfileProblem::LogoTooLong(logo.len()));
        }
        Some(logo)
            if logo
                .chars()
                .any(|c| c == '/' || c == '\\' || c.is_whitespace()) =>
        {
            return Err(ProfileProblem::LogoCharacters);
        }
        Some(logo) => Some(logo.to_string()),
    };
    let icon = trimmed(fields.icon.as_ref());
    if let Some(icon) = &icon {
        if !ICONS.contains(&icon.as_str()) {
            return Err(ProfileProblem::Icon(icon.clone()));
        }
    }
    let color = trimmed(fields.color.as_ref());
    if let Some(color) = &color {
        if !COLORS.contains(&color.as_str()) {
            return Err(ProfileProblem::Color(color.clone()));
        }
    }
    let functions = match &fields.functions {
        None => Vec::new(),
        Some(Lenient::Misshapen) => return Err(ProfileProblem::FunctionsShape),
        Some(Lenient::Value(entries)) => entries
            .iter()
            .map(|entry| {
                let id = entry.trim();
                validate_function_id(id)
                    .map(|()| id.to_string())
                    .map_err(|problem| ProfileProblem::Function {
                        entry: entry.clone(),
                        problem,
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let skills_index = match fields.skills_index {
        None => None,
        Some(Lenient::Misshapen) => return Err(ProfileProblem::SkillsIndexShape),
        Some(Lenient::Value(flag)) => Some(flag),
    };
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
        model: trimmed(fields.model.as_ref()),
        reasoning_effort: trimmed(fields.reasoning_effort.as_ref()),
        icon,
        color,
        extends: trimmed(fields.extends.as_ref()),
        functions,
        skills_index,
    })
}

/// Follows `extends` from the profile `start` (whose id is `id`): the profile and its ancestors,
/// nearest first, each parent found with `lookup`; or the D415 text for a loop, a chain of more
/// than [`MAX_EXTENDS_HOPS`] hops, or an unknown parent. Pure, so it can be checked (and fuzzed)
/// without an index.
pub fn extends_chain<'a, P>(
    id: &'a str,
    start: &'a P,
    parent_of: impl Fn(&'a P) -> Option<&'a str>,
    lookup: impl Fn(&str) -> Option<&'a P>,
) -> Result<Vec<&'a P>> {
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
            // The contract's sentence names the missing parent; a chain that reaches it through
            // others also shows the way, or the user looks for it in the wrong file.
            let through = match trail.len() {
                2 => String::new(),
                _ => format!(" ({})", trail.join(" → ")),
            };
            inheritance_error(
                id,
                &format!(
                    "extends unknown agent profile {parent}{through}",
                    parent = quoted(parent)
                ),
            )
        })?;
        chain.push(current);
    }
    Ok(chain)
}

fn inheritance_error(id: &str, problem: &str) -> Error {
    Error::coded(
        Code::AgentInheritance,
        format!("agent profile {id} {problem}.", id = quoted(id)),
        &[next("directory::agents::list", "browse agent profile ids")],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(id, parent)` pairs, resolved the way the catalog resolves its entries.
    fn resolve<'a>(
        profiles: &'a [(&'a str, Option<&'a str>)],
        id: &'a str,
    ) -> Result<Vec<&'a str>> {
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

    fn profile_of(text: &str) -> Result<Profile, ProfileProblem> {
        profile(&ParsedDoc::parse(text), Reading::Scan)
    }

    #[test]
    fn functions_and_skills_index_are_read_and_checked() {
        let read = profile_of(
            "---\nname: Ops\nfunctions:\n  - ' engine::functions::list '\n  - directory::skills::get\nskills_index: false\n---\nbody\n",
        )
        .expect("a profile");
        assert_eq!(
            read.functions,
            ["engine::functions::list", "directory::skills::get"]
        );
        assert_eq!(read.skills_index, Some(false));
        let plain = profile_of("---\nname: Ops\n---\n").expect("a profile");
        assert_eq!((plain.functions, plain.skills_index), (vec![], None));

        let bad = profile_of("---\nname: Ops\nfunctions: [engine::functions::list, list]\n---\n")
            .expect_err("an id without a namespace");
        assert!(matches!(&bad, ProfileProblem::Function { entry, .. } if entry == "list"));
        assert!(
            bad.to_string()
                .starts_with("`functions` entry \"list\": function id must be namespaced"),
            "{bad}"
        );
        assert_eq!(
            profile_of("---\nname: Ops\nfunctions: engine::functions::list\n---\n"),
            Err(ProfileProblem::FunctionsShape)
        );
        assert_eq!(
            profile_of("---\nname: Ops\nskills_index: nope\n---\n"),
            Err(ProfileProblem::SkillsIndexShape)
        );
    }

    #[test]
    fn chain_follows_extends_nearest_first() {
        let profiles = [("a", Some("b")), ("b", Some("c")), ("c", None)];
        assert_eq!(resolve(&profiles, "a").expect("a"), ["a", "b", "c"]);
        assert_eq!(resolve(&profiles, "c").expect("c"), ["c"]);
    }

    #[test]
    fn eight_hops_resolve_and_nine_are_refused() {
        let eight = line_of(MAX_EXTENDS_HOPS);
        let eight = borrowed(&eight);
        let chain = resolve(&eight, "p0").expect("8 hops are allowed");
        assert_eq!(chain.len(), MAX_EXTENDS_HOPS + 1);

        let nine = line_of(MAX_EXTENDS_HOPS + 1);
        let nine = borrowed(&nine);
        let err = resolve(&nine, "p0")
            .expect_err("9 hops are too many")
            .to_string();
        assert!(err.starts_with(&format!("{} invalid_input: agent profile \"p0\" extends chain is deeper than 8 levels: p0 → p1", Code::AgentInheritance)), "{err}");
    }

    #[test]
    fn loops_and_unknown_parents_are_d415() {
        let profiles = [
            ("a", Some("b")),
            ("b", Some("a")),
            ("s", Some("s")),
            ("u", Some("gone")),
            ("x3", Some("x4")),
            ("x4", Some("gone")),
        ];
        let err = resolve(&profiles, "a").expect_err("loop").to_string();
        assert!(
            err.contains("\"a\" has an extends loop: a → b → a."),
            "{err}"
        );
        let err = resolve(&profiles, "s").expect_err("self loop").to_string();
        assert!(err.contains("\"s\" has an extends loop: s → s."), "{err}");
        let err = resolve(&profiles, "u").expect_err("unknown").to_string();
        assert!(
            err.contains("\"u\" extends unknown agent profile \"gone\"."),
            "{err}"
        );
        let err = resolve(&profiles, "x3").expect_err("unknown").to_string();
        assert!(
            err.contains("\"x3\" extends unknown agent profile \"gone\" (x3 → x4 → gone)."),
            "{err}"
        );
    }
}
