//! Markdown compiled into the binary: the bundled system prompts (`iii-minimal`, `iii-runtime`),
//! the bundled agent profiles (`iii`, `iii-minimal`) and the worker's own skill docs under the
//! `iii-directory/` namespace.
//!
//! These are served as read-only fallbacks: a file on disk with the same name or id shadows
//! them, and nothing here is ever written to disk. The texts live as plain files under
//! `skills/` and `agents/` at the crate root so they can be read and edited as markdown; each
//! is parsed once per process, by the same rules the files on disk are read with.

use std::sync::OnceLock;

use crate::doc::ParsedDoc;
use crate::rules::Reading;
use crate::rules::agent::{self as agent_rules, Profile};
use crate::rules::prompt;

/// One bundled file: its name or id, and its full text, frontmatter included.
#[derive(Debug)]
pub struct BundledFile {
    pub id: &'static str,
    pub raw: &'static str,
}

/// Bundled system prompts by name, sorted by name: iii-minimal, iii-runtime.
pub const SYSTEM_PROMPTS: &[BundledFile] = &[
    BundledFile {
        id: "iii-minimal",
        raw: include_str!("../skills/system-prompts/iii-minimal.md"),
    },
    BundledFile {
        id: "iii-runtime",
        raw: include_str!("../skills/system-prompts/iii-runtime.md"),
    },
];

/// Bundled agent profiles by id, sorted: iii, iii-minimal.
pub const AGENTS: &[BundledFile] = &[
    BundledFile {
        id: "iii",
        raw: include_str!("../agents/iii.md"),
    },
    BundledFile {
        id: "iii-minimal",
        raw: include_str!("../agents/iii-minimal.md"),
    },
];

/// Bundled skills by skill id (e.g. "iii-directory/index", "iii-directory/authoring-skills"), sorted by id.
pub const SKILLS: &[BundledFile] = &[
    BundledFile {
        id: "iii-directory/agent-profiles",
        raw: include_str!("../skills/iii-directory/agent-profiles.md"),
    },
    BundledFile {
        id: "iii-directory/authoring-skills",
        raw: include_str!("../skills/iii-directory/authoring-skills.md"),
    },
    BundledFile {
        id: "iii-directory/finding-functions",
        raw: include_str!("../skills/iii-directory/finding-functions.md"),
    },
    BundledFile {
        id: "iii-directory/index",
        raw: include_str!("../skills/iii-directory/index.md"),
    },
];

/// The entry of a sorted list with this id. The lists are a handful of entries, so a binary
/// search is about readability, not speed: it relies on the order the tests check.
fn find(list: &'static [BundledFile], id: &str) -> Option<&'static BundledFile> {
    list.binary_search_by(|f| f.id.cmp(id))
        .ok()
        .and_then(|i| list.get(i))
}

/// The bundled skill file with this id.
fn skill_file(id: &str) -> Option<&'static BundledFile> {
    find(SKILLS, id)
}

/// Bundled skills with their parse, sorted by id.
pub fn parsed_skills() -> &'static [(&'static BundledFile, ParsedDoc)] {
    static PARSED: OnceLock<Vec<(&'static BundledFile, ParsedDoc)>> = OnceLock::new();
    PARSED.get_or_init(|| {
        SKILLS
            .iter()
            .map(|f| (f, ParsedDoc::parse(f.raw)))
            .collect()
    })
}

pub fn skill_raw(id: &str) -> Option<&'static str> {
    skill_file(id).map(|f| f.raw)
}

/// Each bundled skill's id, the content hash of its text (BLAKE3, as a file's content is
/// hashed) and its text: what skill search keys its vectors by (it has no file, so the index
/// keeps nothing of it).
pub fn skill_contents() -> &'static [(&'static str, crate::doc::Hash, &'static str)] {
    static CONTENTS: OnceLock<Vec<(&'static str, crate::doc::Hash, &'static str)>> =
        OnceLock::new();
    CONTENTS.get_or_init(|| {
        SKILLS
            .iter()
            .map(|f| (f.id, *blake3::hash(f.raw.as_bytes()).as_bytes(), f.raw))
            .collect()
    })
}

/// A bundled system prompt: name, description, body and whole file.
pub struct Prompt {
    pub name: &'static str,
    pub description: String,
    pub body: &'static str,
    pub raw: &'static str,
}

pub fn prompts() -> &'static [Prompt] {
    static PARSED: OnceLock<Vec<Prompt>> = OnceLock::new();
    PARSED.get_or_init(|| {
        SYSTEM_PROMPTS
            .iter()
            .map(|f| {
                let doc = ParsedDoc::parse(f.raw);
                let read = prompt::read(&doc, f.id, Reading::Write).unwrap_or_else(|why| {
                    panic!("bundled system prompt {} is invalid: {why:?}", f.id)
                });
                let body = f.raw[doc.body_offset as usize..].trim_start_matches(['\n', '\r']);
                Prompt {
                    name: f.id,
                    description: read.description,
                    body,
                    raw: f.raw,
                }
            })
            .collect()
    })
}

pub fn prompt(name: &str) -> Option<&'static Prompt> {
    prompts().iter().find(|p| p.name == name)
}

/// A bundled agent profile: its validated frontmatter, body and whole file.
pub struct Agent {
    pub id: &'static str,
    pub profile: Profile,
    pub raw: &'static str,
}

/// The bundled agent profile with this id.
pub fn agent(id: &str) -> Option<&'static Agent> {
    agents().iter().find(|a| a.id == id)
}

pub fn agents() -> &'static [Agent] {
    static PARSED: OnceLock<Vec<Agent>> = OnceLock::new();
    PARSED.get_or_init(|| {
        AGENTS
            .iter()
            .map(|f| {
                let doc = ParsedDoc::parse(f.raw);
                let profile = agent_rules::profile(&doc, Reading::Write).unwrap_or_else(|why| {
                    panic!("bundled agent profile {} is invalid: {why}", f.id)
                });
                Agent {
                    id: f.id,
                    profile,
                    raw: f.raw,
                }
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt_file(name: &str) -> Option<&'static BundledFile> {
        find(SYSTEM_PROMPTS, name)
    }

    fn agent_file(id: &str) -> Option<&'static BundledFile> {
        find(AGENTS, id)
    }
    use yaml_rust2::{Yaml, YamlLoader};

    const FENCE: &str = "---\n";

    /// The frontmatter YAML and the body of a bundled file. Bundled files are written with plain
    /// `\n` line ends, so a simple split is enough here; the real reader lives in `doc`.
    fn split(file: &BundledFile) -> (&'static str, &'static str) {
        let Some(rest) = file.raw.strip_prefix(FENCE) else {
            panic!("{} does not start with a `---` frontmatter line", file.id);
        };
        let Some(end) = rest.find("\n---\n") else {
            panic!("{} has no closing `---` frontmatter line", file.id);
        };
        (&rest[..=end], &rest[end + 1 + FENCE.len()..])
    }

    /// One frontmatter key of a bundled file, as a string.
    fn field(file: &BundledFile, key: &str) -> Option<String> {
        let (yaml, _) = split(file);
        let docs = YamlLoader::load_from_str(yaml)
            .unwrap_or_else(|e| panic!("{}: frontmatter is not valid YAML: {e}", file.id));
        let Some(Yaml::Hash(map)) = docs.first() else {
            panic!("{}: frontmatter is not a mapping", file.id);
        };
        map.get(&Yaml::String(key.to_owned()))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    }

    fn assert_sorted(list: &[BundledFile]) {
        let ids: Vec<&str> = list.iter().map(|f| f.id).collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(ids, sorted);
    }

    fn assert_valid_id(id: &str) {
        for segment in id.split('/') {
            assert!(
                (1..=64).contains(&segment.len())
                    && segment.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b == b'-'
                        || b == b'_'),
                "invalid id {id:?}"
            );
        }
    }

    #[test]
    fn lists_are_sorted_with_valid_ids() {
        for list in [SYSTEM_PROMPTS, AGENTS, SKILLS] {
            assert_sorted(list);
            for f in list {
                assert_valid_id(f.id);
            }
        }
        assert_eq!(
            SYSTEM_PROMPTS.iter().map(|f| f.id).collect::<Vec<_>>(),
            ["iii-minimal", "iii-runtime"]
        );
        assert_eq!(
            AGENTS.iter().map(|f| f.id).collect::<Vec<_>>(),
            ["iii", "iii-minimal"]
        );
    }

    #[test]
    fn lookups_find_every_entry_and_nothing_else() {
        for (list, lookup) in [
            (
                SYSTEM_PROMPTS,
                prompt_file as fn(&str) -> Option<&'static BundledFile>,
            ),
            (AGENTS, agent_file),
            (SKILLS, skill_file),
        ] {
            for f in list {
                assert!(lookup(f.id).is_some_and(|found| found.id == f.id && found.raw == f.raw));
            }
            assert!(lookup("missing").is_none());
            assert!(lookup("").is_none());
        }
        assert!(skill_file("iii-directory/index").is_some());
    }

    #[test]
    fn system_prompts_declare_their_name_and_a_description() {
        for f in SYSTEM_PROMPTS {
            assert_eq!(field(f, "name").as_deref(), Some(f.id));
            assert!(field(f, "description").is_some_and(|d| !d.trim().is_empty()));
            assert!(!split(f).1.trim().is_empty(), "{} has an empty body", f.id);
        }
    }

    #[test]
    fn agents_declare_name_logo_icon_and_color() {
        for f in AGENTS {
            assert_eq!(field(f, "name").as_deref(), Some(f.id));
            assert!(field(f, "description").is_some_and(|d| !d.trim().is_empty()));
            let logo = field(f, "logo").unwrap_or_default();
            assert!(
                !logo.is_empty()
                    && logo.len() <= 16
                    && !logo.contains(['/', '\\'])
                    && !logo.contains(char::is_whitespace),
                "{}: bad logo {logo:?}",
                f.id
            );
            assert_eq!(field(f, "icon").as_deref(), Some("agent"));
        }
        assert_eq!(field(&AGENTS[0], "color").as_deref(), Some("blue"));
        assert_eq!(field(&AGENTS[1], "color").as_deref(), Some("neutral"));
        assert!(
            field(&AGENTS[0], "description").is_some_and(|d| d.contains("extends: iii")),
            "the base agent tells others how to build on it"
        );
    }

    #[test]
    fn skills_declare_their_type() {
        for f in SKILLS {
            let expected = if f.id.ends_with("/index") {
                "index"
            } else {
                "how-to"
            };
            assert_eq!(field(f, "type").as_deref(), Some(expected), "{}", f.id);
            assert!(field(f, "description").is_some_and(|d| !d.trim().is_empty()));
            assert!(field(f, "title").is_some_and(|t| !t.trim().is_empty()));
        }
        assert_eq!(
            skill_file("iii-directory/index")
                .and_then(|f| field(f, "title"))
                .as_deref(),
            Some("iii-directory")
        );
    }

    #[test]
    fn minimal_agent_body_is_the_minimal_prompt_body() {
        let (Some(prompt), Some(agent)) = (prompt_file("iii-minimal"), agent_file("iii-minimal"))
        else {
            panic!("iii-minimal is bundled as both a system prompt and an agent");
        };
        assert_eq!(split(agent).1, split(prompt).1);
    }
}
