//! The four configured folders, by the role each plays. Every file the index knows is named by
//! its root and its `/`-separated path relative to that root.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::Paths;

/// The folders the index watches, by role. The discriminant is part of the file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum Root {
    /// `skills_folder`: skills and system prompts, recursive.
    Skills = 0,
    /// `local_skills_folder`: project overrides, whole namespaces win over `skills_folder`.
    LocalSkills = 1,
    /// `agents_skills_folder`: read-only, shallow `<dir>/SKILL.md` entries.
    AgentsSkills = 2,
    /// `agents_folder`: direct `<id>.md` agent profiles.
    Agents = 3,
}

impl Root {
    pub const ALL: [Root; 4] = [
        Root::Skills,
        Root::LocalSkills,
        Root::AgentsSkills,
        Root::Agents,
    ];

    pub fn from_u8(v: u8) -> Option<Root> {
        Root::ALL.into_iter().find(|r| *r as u8 == v)
    }

    /// The configuration key naming this root, for messages.
    pub fn config_key(self) -> &'static str {
        match self {
            Root::Skills => "skills_folder",
            Root::LocalSkills => "local_skills_folder",
            Root::AgentsSkills => "agents_skills_folder",
            Root::Agents => "agents_folder",
        }
    }
}

/// The four roots' folders, by role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    paths: [PathBuf; 4],
}

impl Roots {
    pub fn new(
        skills: PathBuf,
        local_skills: PathBuf,
        agents_skills: PathBuf,
        agents: PathBuf,
    ) -> Roots {
        Roots {
            paths: [skills, local_skills, agents_skills, agents],
        }
    }

    pub fn from_paths(paths: &Paths) -> Roots {
        Roots::new(
            paths.skills_folder.clone(),
            paths.local_skills_folder.clone(),
            paths.agents_skills_folder.clone(),
            paths.agents_folder.clone(),
        )
    }

    pub fn path(&self, root: Root) -> &Path {
        &self.paths[root as usize]
    }

    /// The absolute path of a file given by root and relative path.
    pub fn file(&self, root: Root, rel: &str) -> PathBuf {
        self.path(root).join(rel)
    }
}
