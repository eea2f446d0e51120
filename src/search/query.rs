//! The `directory::search_functions` request: validation with the contract's plain error texts,
//! and each capability prepared for ranking (JSON keys stripped, terms, intrinsic ones dropped).

use serde::Deserialize;
use serde_json::Value;

use super::SearchError;
use super::tokenize::{is_intrinsic, prepare_capability, terms};

/// Capabilities per request (contract: one to six).
pub const MAX_CAPABILITIES: usize = 6;

/// The request; anything else in it (`_caller_worker_id`, …) is ignored, a legacy `{query}`
/// without `capabilities` is refused.
#[derive(Debug, Deserialize)]
struct Request {
    capabilities: Vec<String>,
}

/// A capability as it is searched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capability {
    /// Trimmed, capped, JSON keys stripped: what the registry is asked.
    pub text: String,
    /// Its search terms, in order (duplicates kept).
    pub terms: Vec<String>,
}

/// The capabilities of a request, validated; intrinsic ones (summarizing provided text) are
/// dropped here, so they reach neither the catalog nor the registry.
pub fn parse(request: &Value) -> Result<Vec<Capability>, SearchError> {
    let request: Request = serde_json::from_value(request.clone()).map_err(SearchError::Request)?;
    validate(&request.capabilities)?;
    Ok(prepare(&request.capabilities))
}

/// The contract's checks, in order.
pub fn validate(capabilities: &[String]) -> Result<(), SearchError> {
    if capabilities.is_empty() {
        return Err(SearchError::NoCapability);
    }
    if capabilities.len() > MAX_CAPABILITIES {
        return Err(SearchError::TooManyCapabilities);
    }
    if capabilities.iter().any(|c| c.trim().is_empty()) {
        return Err(SearchError::BlankCapability);
    }
    Ok(())
}

/// Prepares capabilities that passed [`validate`], dropping the intrinsic ones.
pub fn prepare(capabilities: &[String]) -> Vec<Capability> {
    capabilities
        .iter()
        .map(|c| {
            let text = prepare_capability(c);
            let terms = terms(&text);
            Capability { text, terms }
        })
        .filter(|c| !is_intrinsic(&c.terms))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The message a request is refused with.
    fn refusal(request: Value) -> String {
        parse(&request).expect_err("refused").to_string()
    }

    #[test]
    fn the_contract_errors_in_order() {
        assert_eq!(
            refusal(json!({ "capabilities": [] })),
            "provide at least one capability"
        );
        let seven = json!({ "capabilities": ["a b", "c d", "e f", "g h", "i j", "k l", "m n"] });
        assert_eq!(refusal(seven), "provide at most 6 capabilities");
        assert_eq!(
            refusal(json!({ "capabilities": ["send mail", "  "] })),
            "capabilities must not be blank"
        );
        // Too many wins over blank.
        let seven_blank = json!({ "capabilities": ["", "", "", "", "", "", ""] });
        assert!(matches!(
            parse(&seven_blank),
            Err(SearchError::TooManyCapabilities)
        ));
    }

    #[test]
    fn a_legacy_query_or_a_wrong_type_is_refused() {
        let legacy = refusal(json!({ "query": "send mail" }));
        assert!(legacy.starts_with("invalid request: "), "{legacy}");
        assert!(legacy.contains("capabilities"), "{legacy}");
        assert!(parse(&json!({ "capabilities": "send mail" })).is_err());
        assert!(parse(&json!({ "capabilities": [1] })).is_err());
    }

    #[test]
    fn unknown_fields_are_ignored_and_intrinsic_capabilities_dropped() {
        let parsed = parse(&json!({
            "capabilities": ["Summarize the provided text", "  send an Email "],
            "_caller_worker_id": "w-1",
        }))
        .unwrap_or_default();
        assert_eq!(
            parsed,
            [Capability {
                text: "send an Email".into(),
                terms: vec!["send".into(), "email".into()],
            }]
        );
    }
}
