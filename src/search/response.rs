//! The `directory::search_functions` answer: `{guidance, workers[], installable?, latency_ms}`,
//! and the guidance texts that tell the model what to do with it.
//!
//! The texts are ours; they carry the facts the contract requires: capabilities in English with
//! proper names, URLs and ids kept; no searching for intrinsic reasoning, summarization,
//! planning or formatting; contracts fetched in ONE `engine::functions::info {function_ids}`;
//! installable functions fail with `function_not_found` until installed with `compose::add`.

use serde::Serialize;
use serde_json::{Value, json};

/// The function that installs a registry worker (contract).
pub const INSTALL_FUNCTION: &str = "compose::add";

/// Candidates were found.
pub const GUIDANCE: &str = "These are installed candidates for the requested capabilities only; use them instead of walking the catalog with engine::functions::list. Pick the fewest functions the task needs and, before the first call to any of them, fetch all of their contracts in ONE engine::functions::info call: {\"function_ids\": [\"<chosen id>\", \"<another chosen id>\"]}. Call each with the request schema it returns, directly when it is one of your tools and through agent_trigger otherwise. If a capability got no candidate, search again once, at the next decision point, with every external capability still unmet. Write each capability in English even when the user writes in another language, keeping proper names, URLs and function ids exactly as given. Never search for what you do yourself (reasoning, summarization, planning, formatting), nor for needs already met or already covered here. If a chosen id is refused, fall back to ordinary discovery.";

/// Nothing matched, and the registry offered nothing either.
pub const REFINE_GUIDANCE: &str = "No installed function matched these capabilities. If the task is to build something no function does (write a worker, register a new engine function, run custom code), the instructions are in the skills: call directory::skills::list, then directory::skills::get {\"id\": \"<id>\"} for the matching how-to, and follow it. Otherwise, at the next decision point, search once more with every external capability still unmet. Write each capability in English even when the user writes in another language, keeping proper names, URLs and function ids exactly as given. Never search for intrinsic reasoning, summarization, planning or formatting, and do not repeat needs already met or already covered in the conversation.";

/// Nothing installed matched, but registry workers would.
pub const INSTALL_GUIDANCE: &str = "No installed function matched these capabilities, but the `installable` registry workers (verified authors) have functions that would. They are NOT installed: calling one of their functions now fails with function_not_found. To use one, say which worker you would install and why, and unless the operator has already allowed installs, ask first (how workers are installed differs between deployments); then make its `install` call exactly as given (compose::add), wait until it reports the new worker ready, then search again for the newly registered functions and fetch the contracts you pick in ONE engine::functions::info call with {\"function_ids\": [...]}. If none fits, search once more with concrete unmet capabilities; to build something no function does (write a worker, register a new engine function), read the shipped how-to instead: directory::skills::list, then directory::skills::get {\"id\": \"<id>\"}. Never search for intrinsic reasoning, summarization, planning or formatting. Write each capability in English even when the user writes in another language, keeping proper names, URLs and function ids exactly as given.";

/// Appended when installed candidates and installable workers both came back.
pub const INSTALL_NOTE: &str = "Choose from `workers` first. The `installable` entries are registry workers that are NOT installed: calling their functions now fails with function_not_found, and their ids must not be passed to engine::functions::info. Only when no `workers` entry fits, and the operator allows it (ask when unsure), first make the given install call (compose::add), wait until it reports the worker ready, then search again and fetch the chosen contracts in one batched engine::functions::info call; never call an installable function before installing it.";

/// Appended when the answer names skills for its capabilities (`search_functions`' side lane).
pub const SKILLS_NOTE: &str = "The `skills` field names installed skills that serve some of these capabilities (matched by `capability`): read the one that fits with directory::skills::get {\"id\": \"<id>\"} before acting, beside or instead of the functions.";

/// The sentence naming skills the side lane named earlier in the session and leaves out now.
pub fn skills_repeated_note(repeated: &[String]) -> String {
    format!(
        "Skills named earlier in this session for these capabilities, left out of `skills` (read the one that fits with directory::skills::get if you no longer have it): {}.",
        repeated.join(", ")
    )
}

/// Appended when a capability was matched by its words alone although the worker has a search
/// model (busy with a burst of searches, or still embedding the catalog): an empty answer is
/// then no proof that nothing installed serves it.
pub const WORDS_ONLY_NOTE: &str = "Some capabilities were matched by their words only this time (the worker's search model was busy, or is still reading the catalog): one put in other words than a function's description may find it when searched again in a moment.";

/// Appended when a candidate carries an `engine_namespace`.
pub const NAMESPACE_NOTE: &str = "A candidate with an `engine_namespace` is registered in that engine namespace, not the default one: call it with that namespace (the invocation's `namespace`; `iii trigger --namespace <ns>`), or it fails with function_not_found.";

/// The sentence naming candidates the session already has (contract wording).
pub fn repeated_note(repeated: &[String]) -> String {
    format!(
        "Already provided earlier in this session (candidates unchanged — reuse the earlier result): {}.",
        repeated.join(", ")
    )
}

/// The guidance for an answer with these parts.
pub fn guidance(has_workers: bool, repeated: &[String], has_installable: bool) -> String {
    if !has_workers && repeated.is_empty() {
        return if has_installable {
            INSTALL_GUIDANCE
        } else {
            REFINE_GUIDANCE
        }
        .to_string();
    }
    let mut text = GUIDANCE.to_string();
    if !repeated.is_empty() {
        text.push(' ');
        text.push_str(&repeated_note(repeated));
    }
    if has_installable {
        text.push(' ');
        text.push_str(INSTALL_NOTE);
    }
    text
}

/// [`guidance`] for `workers`, with [`NAMESPACE_NOTE`] when one of them needs it, and
/// [`WORDS_ONLY_NOTE`] when a capability was matched `by_words_only`.
pub fn guidance_for(
    workers: &[Worker],
    repeated: &[String],
    has_installable: bool,
    by_words_only: bool,
) -> String {
    let mut text = guidance(!workers.is_empty(), repeated, has_installable);
    let namespaced = workers
        .iter()
        .flat_map(|w| &w.functions)
        .any(|f| f.engine_namespace.is_some());
    for (wanted, note) in [
        (namespaced, NAMESPACE_NOTE),
        (by_words_only, WORDS_ONLY_NOTE),
    ] {
        if wanted {
            text.push(' ');
            text.push_str(note);
        }
    }
    text
}

/// A candidate: its id and the first sentence of its description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub function_id: String,
    pub description: String,
    /// The engine namespace the function is registered in, when not the default one
    /// (beyond the contract; absent otherwise): the engine finds an id in one namespace only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_namespace: Option<String>,
}

/// Installed candidates of one worker, best first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Worker {
    pub namespace: String,
    pub functions: Vec<Candidate>,
}

/// A registry worker that is not installed, with the functions that would match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Installable {
    pub name: String,
    pub version: String,
    pub description: String,
    pub functions: Vec<Candidate>,
    pub install: Install,
}

/// The ready-made call that installs an [`Installable`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Install {
    pub function: String,
    pub payload: Value,
}

impl Install {
    pub fn worker(name: &str) -> Install {
        Install {
            function: INSTALL_FUNCTION.to_string(),
            payload: json!({ "worker": name }),
        }
    }
}

/// The whole answer; `installable` is omitted when empty.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Response {
    pub guidance: String,
    pub workers: Vec<Worker>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub installable: Vec<Installable>,
    pub latency_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts every text must carry, as key phrases.
    fn carries_language_rule(text: &str) {
        assert!(text.contains("in English"), "{text}");
        assert!(
            text.contains("proper names, URLs and function ids"),
            "{text}"
        );
    }

    fn carries_intrinsic_rule(text: &str) {
        for word in ["reasoning", "summarization", "planning", "formatting"] {
            assert!(text.contains(word), "{word}: {text}");
        }
    }

    #[test]
    fn every_guidance_text_carries_the_contract_facts() {
        for text in [GUIDANCE, REFINE_GUIDANCE, INSTALL_GUIDANCE] {
            carries_language_rule(text);
            carries_intrinsic_rule(text);
        }
        for text in [GUIDANCE, INSTALL_GUIDANCE, INSTALL_NOTE] {
            assert!(
                text.contains("ONE engine::functions::info")
                    || text.contains("one batched engine::functions::info"),
                "{text}"
            );
        }
        assert!(GUIDANCE.contains("function_ids"));
        for text in [INSTALL_GUIDANCE, INSTALL_NOTE] {
            assert!(text.contains("function_not_found"), "{text}");
            assert!(text.contains("compose::add"), "{text}");
            assert!(text.contains("NOT installed"), "{text}");
        }
    }

    #[test]
    fn guidance_is_chosen_by_what_the_answer_holds() {
        assert_eq!(guidance(false, &[], false), REFINE_GUIDANCE);
        assert_eq!(guidance(false, &[], true), INSTALL_GUIDANCE);
        assert_eq!(guidance(true, &[], false), GUIDANCE);
        let repeated = vec!["a::x".to_string(), "b::y".to_string()];
        let text = guidance(false, &repeated, true);
        assert!(text.starts_with(GUIDANCE));
        assert!(text.contains(
            "Already provided earlier in this session (candidates unchanged — reuse the earlier result): a::x, b::y."
        ));
        assert!(text.ends_with(INSTALL_NOTE));
    }

    #[test]
    fn installable_is_omitted_when_empty() {
        let response = Response {
            guidance: "g".into(),
            workers: Vec::new(),
            installable: Vec::new(),
            latency_ms: 0.5,
        };
        let value = serde_json::to_value(&response).unwrap_or_default();
        assert_eq!(
            value,
            json!({ "guidance": "g", "workers": [], "latency_ms": 0.5 })
        );
        assert_eq!(
            serde_json::to_value(Install::worker("resend")).unwrap_or_default(),
            json!({ "function": "compose::add", "payload": { "worker": "resend" } })
        );
    }
}
