//! The error codes the worker answers with, in one table: the contract's codes (`D110` …
//! `D415`, `spec/reference-behavior.md` §2.2) and the worker's own (`D117`, `D120`…`D123`,
//! `D212`, `D312`, `D330`…`D337`, `D412`). Each [`Code`] names what went wrong; [`Code::text`]
//! is the code a caller sees and [`Code::class`] the word after it
//! (`D110 not_found: skill "x" does not exist.`). Nothing else in the crate spells a code.

use std::fmt;

/// The word after the code in a rendered error: what kind of failure it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    NotFound,
    InvalidInput,
    Conflict,
    TooLarge,
    Timeout,
    Internal,
    RegistryError,
}

impl Class {
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::NotFound => "not_found",
            Class::InvalidInput => "invalid_input",
            Class::Conflict => "conflict",
            Class::TooLarge => "too_large",
            Class::Timeout => "timeout",
            Class::Internal => "internal",
            Class::RegistryError => "registry_error",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One error code. The variants are named for what they report; [`Code::text`] holds the code
/// itself, in the one table below.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// `D110`: no visible skill has the id (skills get, update, delete).
    SkillNotFound,
    /// `D112`: a skill id that is a function id (`service::name`).
    FunctionIdForSkill,
    /// `D113`: skill or system prompt content too large, or with an empty body.
    ContentRefused,
    /// `D114`: a skill that already exists, or a file already at the target.
    SkillExists,
    /// `D115`: a skill id the create may not take (a reserved segment or namespace, hidden by
    /// `filter_unregistered`), or a target a link would put outside the root.
    SkillPlacementRefused,
    /// `D116`: a read-only skill (agents skills root, bundled).
    SkillReadOnly,
    /// `D117`: a request to a skills function that the screen refuses (worker's own).
    SkillsRequestRefused,
    /// `D118`: a skill update with a `base` whose file another writer changed since the
    /// caller read it: the file holds neither `base` nor the new content (worker's own).
    SkillChangedOnDisk,
    /// `D120`: an answer longer than the engine carries in one message (worker's own).
    AnswerTooLarge,
    /// `D121`: a request to one of the worker's other functions that the screen refuses.
    WorkerRequestRefused,
    /// `D122`: a call still running at the worker's deadline (worker's own).
    DeadlinePassed,
    /// `D123`: a handler that panicked (worker's own).
    HandlerPanicked,
    /// `D210`: no system prompt has the name.
    PromptNotFound,
    /// `D212`: a request to a system prompts function that the screen refuses (worker's own).
    PromptsRequestRefused,
    /// `D213`: a system prompt's frontmatter the next scan would skip, or a declared name that
    /// is not the requested one.
    PromptFrontmatterRefused,
    /// `D214`: a system prompt that already exists, a file already at the target, or a target
    /// a link would put outside the root.
    PromptExists,
    /// `D215`: a system prompt update with a `base` whose file (or bundled text) changed since
    /// the caller read it (worker's own).
    PromptChangedOnDisk,
    /// `D310`: the registry has no such worker, or no bundle for it.
    RegistryWorkerNotFound,
    /// `D311`: a registry worker name the validator refuses.
    RegistryWorkerNameInvalid,
    /// `D312`: a request to a download or registry function that the screen refuses (worker's
    /// own).
    DownloadRequestRefused,
    /// `D320`: the registry could not be reached, failed, or answered what cannot be decoded.
    RegistryUnavailable,
    /// `D330`: a bundle file that would touch what is not the bundle's own (worker's own).
    BundleConflict,
    /// `D331`: a namespace no bundle may land in (worker's own).
    BundleNamespaceReserved,
    /// `D332`: a bundle file that could never be served as what its path says (worker's own).
    BundleFileUnservable,
    /// `D333`: a bundle holding executable files while `download_allow_executables` is false
    /// (worker's own).
    BundleExecutableRefused,
    /// `D334`: a namespace the bundles lock has no entry for (worker's own).
    BundleNotLocked,
    /// `D335`: a restore whose source answers other bytes than the lock records (worker's own).
    BundleDiffersFromLock,
    /// `D336`: an update plan whose files or lock entry changed since it was made; the error
    /// carries a fresh plan (worker's own).
    BundlePlanStale,
    /// `D337`: an update plan id that is unknown or expired (worker's own).
    BundlePlanUnknown,
    /// `D410`: no agent profile has the id.
    AgentNotFound,
    /// `D412`: a request to an agent profiles function that the screen refuses (worker's own).
    AgentsRequestRefused,
    /// `D414`: an agent profile that already exists, a file already at the target, or a
    /// bundled profile with no file to delete.
    AgentExists,
    /// `D415`: an `extends` chain that does not resolve (carried as `inheritance_error`).
    AgentInheritance,
    /// `D416`: an agent profile update with a `base` whose file (or bundled text) changed since
    /// the caller read it (worker's own).
    AgentChangedOnDisk,
}

impl Code {
    /// Every code, in the table's order.
    pub const ALL: [Code; 34] = [
        Code::SkillNotFound,
        Code::FunctionIdForSkill,
        Code::ContentRefused,
        Code::SkillExists,
        Code::SkillPlacementRefused,
        Code::SkillReadOnly,
        Code::SkillsRequestRefused,
        Code::SkillChangedOnDisk,
        Code::AnswerTooLarge,
        Code::WorkerRequestRefused,
        Code::DeadlinePassed,
        Code::HandlerPanicked,
        Code::PromptNotFound,
        Code::PromptsRequestRefused,
        Code::PromptFrontmatterRefused,
        Code::PromptExists,
        Code::PromptChangedOnDisk,
        Code::RegistryWorkerNotFound,
        Code::RegistryWorkerNameInvalid,
        Code::DownloadRequestRefused,
        Code::RegistryUnavailable,
        Code::BundleConflict,
        Code::BundleNamespaceReserved,
        Code::BundleFileUnservable,
        Code::BundleExecutableRefused,
        Code::BundleNotLocked,
        Code::BundleDiffersFromLock,
        Code::BundlePlanStale,
        Code::BundlePlanUnknown,
        Code::AgentNotFound,
        Code::AgentsRequestRefused,
        Code::AgentExists,
        Code::AgentInheritance,
        Code::AgentChangedOnDisk,
    ];

    /// The table: each code's text and class.
    const fn entry(self) -> (&'static str, Class) {
        use Class::*;
        match self {
            Code::SkillNotFound => ("D110", NotFound),
            Code::FunctionIdForSkill => ("D112", InvalidInput),
            Code::ContentRefused => ("D113", InvalidInput),
            Code::SkillExists => ("D114", InvalidInput),
            Code::SkillPlacementRefused => ("D115", InvalidInput),
            Code::SkillReadOnly => ("D116", InvalidInput),
            Code::SkillsRequestRefused => ("D117", InvalidInput),
            Code::SkillChangedOnDisk => ("D118", Conflict),
            Code::AnswerTooLarge => ("D120", TooLarge),
            Code::WorkerRequestRefused => ("D121", InvalidInput),
            Code::DeadlinePassed => ("D122", Timeout),
            Code::HandlerPanicked => ("D123", Internal),
            Code::PromptNotFound => ("D210", NotFound),
            Code::PromptsRequestRefused => ("D212", InvalidInput),
            Code::PromptFrontmatterRefused => ("D213", InvalidInput),
            Code::PromptExists => ("D214", InvalidInput),
            Code::PromptChangedOnDisk => ("D215", Conflict),
            Code::RegistryWorkerNotFound => ("D310", NotFound),
            Code::RegistryWorkerNameInvalid => ("D311", InvalidInput),
            Code::DownloadRequestRefused => ("D312", InvalidInput),
            Code::RegistryUnavailable => ("D320", RegistryError),
            Code::BundleConflict => ("D330", Conflict),
            Code::BundleNamespaceReserved => ("D331", InvalidInput),
            Code::BundleFileUnservable => ("D332", InvalidInput),
            Code::BundleExecutableRefused => ("D333", InvalidInput),
            Code::BundleNotLocked => ("D334", NotFound),
            Code::BundleDiffersFromLock => ("D335", Conflict),
            Code::BundlePlanStale => ("D336", Conflict),
            Code::BundlePlanUnknown => ("D337", NotFound),
            Code::AgentNotFound => ("D410", NotFound),
            Code::AgentsRequestRefused => ("D412", InvalidInput),
            Code::AgentExists => ("D414", InvalidInput),
            Code::AgentInheritance => ("D415", InvalidInput),
            Code::AgentChangedOnDisk => ("D416", Conflict),
        }
    }

    /// The code as a caller sees it: `D110`.
    pub const fn text(self) -> &'static str {
        self.entry().0
    }

    /// The class rendered after the code: `not_found`.
    pub const fn class(self) -> Class {
        self.entry().1
    }

    /// The code whose text is `text`, if there is one.
    pub fn from_text(text: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|code| code.text() == text)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_code_is_listed_once_with_a_distinct_text() {
        let texts: HashSet<&str> = Code::ALL.iter().map(|c| c.text()).collect();
        assert_eq!(texts.len(), Code::ALL.len());
        for code in Code::ALL {
            let text = code.text();
            assert!(
                text.len() == 4
                    && text.starts_with('D')
                    && text[1..].bytes().all(|b| b.is_ascii_digit()),
                "{text}"
            );
            assert_eq!(Code::from_text(text), Some(code));
        }
        assert_eq!(Code::from_text("D111"), None);
    }
}
