//! The bundled files, parsed once per process: what the views and readers need of them.

use std::sync::OnceLock;

use crate::bundled::{self, BundledFile};
use crate::doc::ParsedDoc;
use crate::index::records::Profile;

/// Bundled skills with their parse, sorted by id.
pub fn skills() -> &'static [(&'static BundledFile, ParsedDoc)] {
    static PARSED: OnceLock<Vec<(&'static BundledFile, ParsedDoc)>> = OnceLock::new();
    PARSED.get_or_init(|| {
        bundled::SKILLS
            .iter()
            .map(|f| (f, ParsedDoc::parse(f.raw)))
            .collect()
    })
}

pub fn skill_raw(id: &str) -> Option<&'static str> {
    bundled::skill(id).map(|f| f.raw)
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
        bundled::SYSTEM_PROMPTS
            .iter()
            .map(|f| {
                let doc = ParsedDoc::parse(f.raw);
                let description = doc
                    .fields()
                    .and_then(|x| x.description.clone())
                    .unwrap_or_default();
                let body = f.raw[doc.body_offset as usize..].trim_start_matches(['\n', '\r']);
                Prompt {
                    name: f.id,
                    description: description.trim().to_string(),
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

pub fn agents() -> &'static [Agent] {
    static PARSED: OnceLock<Vec<Agent>> = OnceLock::new();
    PARSED.get_or_init(|| {
        bundled::AGENTS
            .iter()
            .map(|f| {
                let doc = ParsedDoc::parse(f.raw);
                let profile = crate::agents::profile_from_doc(&doc).unwrap_or_else(|why| {
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
