//! The configured folders, by the role each plays. Every file the index knows is named by its
//! root and its `/`-separated path relative to that root. Four roots are always configured;
//! the two user-global ones (`global_agents_skills_folder`, `global_agents_folder`) are off
//! unless set, and an off root has no folder: it is never walked, watched or written.

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
    /// `global_agents_skills_folder`: the user's skills for all agents, laid out as
    /// `agents_skills_folder`; read-only, below every other skill root.
    GlobalAgentsSkills = 4,
    /// `global_agents_folder`: the user's agent profiles for all projects, laid out as
    /// `agents_folder`; edited in place, below `agents_folder`.
    GlobalAgents = 5,
}

/// How a root's files are laid out, which decides how it is walked and watched and what its
/// files are to the families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Recursive: skills and system prompts anywhere below.
    Tree,
    /// Shallow: only `<dir>/SKILL.md`, served as skill `<dir>/index`.
    SkillFolders,
    /// Flat: only direct `<id>.md` agent profiles.
    Profiles,
}

impl Root {
    pub const ALL: [Root; 6] = [
        Root::Skills,
        Root::LocalSkills,
        Root::AgentsSkills,
        Root::Agents,
        Root::GlobalAgentsSkills,
        Root::GlobalAgents,
    ];

    pub fn from_u8(v: u8) -> Option<Root> {
        Root::ALL.into_iter().find(|r| *r as u8 == v)
    }

    /// Whether the worker writes and deletes files in the root (on a caller's request over the
    /// bus). The user-global agents folder is: its profiles are updated and deleted in place.
    /// The two agents skills roots belong to other tools and are only read. (`config::layout`
    /// checks the configured folders by the same list, below this module.)
    pub fn writable(self) -> bool {
        matches!(
            self,
            Root::Skills | Root::LocalSkills | Root::Agents | Root::GlobalAgents
        )
    }

    /// The configuration key naming this root, for messages.
    pub fn config_key(self) -> &'static str {
        match self {
            Root::Skills => "skills_folder",
            Root::LocalSkills => "local_skills_folder",
            Root::AgentsSkills => "agents_skills_folder",
            Root::Agents => "agents_folder",
            Root::GlobalAgentsSkills => "global_agents_skills_folder",
            Root::GlobalAgents => "global_agents_folder",
        }
    }

    /// Warns, and says so, when this root's `path` is a file rather than a folder: a setting
    /// pointed at the wrong path, from which nothing is ever served.
    pub fn warn_if_a_file(self, path: &Path) -> bool {
        let a_file = path.exists() && !path.is_dir();
        if a_file {
            tracing::warn!(
                "{} {} is a file, not a folder: nothing is served from it; point the setting at a folder",
                self.config_key(),
                path.display()
            );
        }
        a_file
    }

    pub fn layout(self) -> Layout {
        match self {
            Root::Skills | Root::LocalSkills => Layout::Tree,
            Root::AgentsSkills | Root::GlobalAgentsSkills => Layout::SkillFolders,
            Root::Agents | Root::GlobalAgents => Layout::Profiles,
        }
    }
}

/// The roots' folders, by role; `None` for an off root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    paths: [Option<PathBuf>; 6],
}

impl Roots {
    /// The four roots that are always configured; the global ones off.
    pub fn new(
        skills: PathBuf,
        local_skills: PathBuf,
        agents_skills: PathBuf,
        agents: PathBuf,
    ) -> Roots {
        Roots {
            paths: [
                Some(skills),
                Some(local_skills),
                Some(agents_skills),
                Some(agents),
                None,
                None,
            ],
        }
    }

    /// The same roots with the user-global ones set (each `None` stays off).
    pub fn with_globals(
        mut self,
        global_agents_skills: Option<PathBuf>,
        global_agents: Option<PathBuf>,
    ) -> Roots {
        self.paths[Root::GlobalAgentsSkills as usize] = global_agents_skills;
        self.paths[Root::GlobalAgents as usize] = global_agents;
        self
    }

    pub fn from_paths(paths: &Paths) -> Roots {
        Roots::new(
            paths.skills_folder.clone(),
            paths.local_skills_folder.clone(),
            paths.agents_skills_folder.clone(),
            paths.agents_folder.clone(),
        )
        .with_globals(
            paths.global_agents_skills_folder.clone(),
            paths.global_agents_folder.clone(),
        )
    }

    /// The folder of a root, `None` when the root is off.
    pub fn get(&self, root: Root) -> Option<&Path> {
        self.paths[root as usize].as_deref()
    }

    /// The folder of a root that is always configured (or of a global one known to be on). An
    /// off root has no folder, and this gives the empty path, which no root's file is under.
    pub fn path(&self, root: Root) -> &Path {
        self.get(root).unwrap_or(Path::new(""))
    }

    /// The roots that are on, with their folders.
    pub fn active(&self) -> impl Iterator<Item = (Root, &Path)> {
        Root::ALL
            .into_iter()
            .filter_map(|root| self.get(root).map(|path| (root, path)))
    }

    /// The absolute path of a file given by root and relative path.
    pub fn file(&self, root: Root, rel: &str) -> PathBuf {
        if rel.is_empty() {
            // The root itself (a folder `check` lists), without the slash `join` would add.
            return self.path(root).to_path_buf();
        }
        self.path(root).join(rel)
    }
}
