//! Which family a markdown file under a skills root belongs to, decided by the folder words in
//! its relative path (contract §3.1).

/// The folder that holds system prompts, at any depth.
const SYSTEM_PROMPTS_DIR: &str = "system-prompts";
/// The pre-1.2.8 prompts folder, now ignored.
const PROMPTS_DIR: &str = "prompts";
/// Agent profiles live in their own root; this folder name under a skills root is reserved.
const AGENTS_DIR: &str = "agents";

/// The family of a `.md` file found under a skills root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathClass {
    /// An ordinary skill document.
    Skill,
    /// A system prompt (some component is `system-prompts`).
    SystemPrompt,
    /// A legacy prompt (some component is `prompts`): ignored by every family.
    Prompts,
    /// Under an `agents` folder: reserved, ignored by skills.
    Agents,
}

/// Classifies a path relative to a skills root, with `/` separators. Components must match
/// exactly (`promptsx`, `prompts-extra`, `agentsx` are ordinary folders), and the words rank
/// `system-prompts` over `prompts` over `agents` wherever each appears in the path.
pub fn classify(rel_path: &str) -> PathClass {
    let mut prompts = false;
    let mut agents = false;
    for component in rel_path.split('/') {
        match component {
            SYSTEM_PROMPTS_DIR => return PathClass::SystemPrompt,
            PROMPTS_DIR => prompts = true,
            AGENTS_DIR => agents = true,
            _ => {}
        }
    }
    if prompts {
        PathClass::Prompts
    } else if agents {
        PathClass::Agents
    } else {
        PathClass::Skill
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills() {
        for path in [
            "index.md",
            "shell/exec.md",
            "ns/SKILL.md",
            "promptsx/a.md",
            "prompts-extra/a.md",
            "agentsx/a.md",
            "my-agents/a.md",
            "system-promptsx/a.md",
            "a/Prompts/b.md",
            "prompts.md",
            "agents.md",
            "system-prompts.md",
        ] {
            assert_eq!(classify(path), PathClass::Skill, "{path}");
        }
    }

    #[test]
    fn system_prompts_at_any_depth() {
        for path in [
            "system-prompts/reviewer.md",
            "ns/system-prompts/reviewer.md",
            "a/b/system-prompts/c/d.md",
        ] {
            assert_eq!(classify(path), PathClass::SystemPrompt, "{path}");
        }
    }

    #[test]
    fn prompts_are_ignored_family() {
        for path in ["prompts/say-hello.md", "with-prompts/prompts/say-hello.md"] {
            assert_eq!(classify(path), PathClass::Prompts, "{path}");
        }
    }

    #[test]
    fn agents_are_reserved() {
        for path in ["agents/foo.md", "ns/agents/foo.md", "a/agents/b/c.md"] {
            assert_eq!(classify(path), PathClass::Agents, "{path}");
        }
    }

    #[test]
    fn precedence_does_not_depend_on_order_in_the_path() {
        assert_eq!(
            classify("prompts/system-prompts/x.md"),
            PathClass::SystemPrompt
        );
        assert_eq!(
            classify("system-prompts/prompts/x.md"),
            PathClass::SystemPrompt
        );
        assert_eq!(
            classify("agents/system-prompts/x.md"),
            PathClass::SystemPrompt
        );
        assert_eq!(classify("agents/prompts/x.md"), PathClass::Prompts);
        assert_eq!(classify("prompts/agents/x.md"), PathClass::Prompts);
    }
}
