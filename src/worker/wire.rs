//! What the engine can carry in one answer. The iii engine reads a worker's socket with
//! tungstenite's default limits, and the SDK sends each message as one frame, so an invocation
//! result over 16 MiB is never delivered: the engine drops the connection, and the SDK, having
//! queued the unsent result, sends it again on every reconnection, so the worker never comes
//! back (seen with a full `skills::list` of 50,000 skills, 17.7 MB, through iii 0.23). Callers
//! read with the same limit. An answer that cannot fit is refused here, before the SDK builds
//! any of it, with an error that says how to ask for less.

use crate::code::Code;
use crate::directory::ReadFunction;
use crate::error::{Error, MAX_ERROR_BYTES, bounded, next};

/// The largest frame the engine accepts from a worker (tungstenite's default
/// `max_frame_size`, which the engine does not change).
const ENGINE_FRAME_BYTES: usize = 16 << 20;
/// Room in that frame for the invocation result's envelope: the message type, invocation and
/// function ids, and the trace and baggage headers the SDK adds.
const ENVELOPE_BYTES: usize = 16 << 10;
/// The longest answer (compact JSON) the worker hands to the SDK.
const MAX_ANSWER_BYTES: usize = ENGINE_FRAME_BYTES - ENVELOPE_BYTES;

/// `Ok` when an answer of `len` bytes fits one engine message, else the coded refusal for
/// `function` (`D120 too_large`).
pub fn check(function: &str, len: usize) -> Result<(), Error> {
    if len <= MAX_ANSWER_BYTES {
        return Ok(());
    }
    let problem = format!(
        "the answer is {len} bytes of JSON, more than the {MAX_ANSWER_BYTES} the iii engine \
         carries in one message."
    );
    let list = ReadFunction::SkillsList.id();
    let narrower = if function == list {
        vec![next(
            list,
            "ask for less: one namespace at a time with prefix, or search, type, or include_description: false",
        )]
    } else {
        Vec::new()
    };
    Err(Error::coded(Code::AnswerTooLarge, problem, &narrower))
}

/// An error's message as the worker hands it to the SDK: at most [`MAX_ERROR_BYTES`] (64 KiB,
/// far inside the frame with its envelope), cut on a character boundary and ending in "…" when
/// longer. Every error that echoes a caller's string quotes it cut (`error::quoted`) and every
/// request is screened first (`screen.rs`), so this only ever cuts what a bug built; but it
/// holds whatever built the message, so no error can end the connection.
pub fn bounded_error(message: String) -> String {
    const _: () = assert!(MAX_ERROR_BYTES + ENVELOPE_BYTES < ENGINE_FRAME_BYTES);
    bounded(message, MAX_ERROR_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_of_any_length_fits_the_frame() {
        assert_eq!(
            bounded_error(format!("{} not_found: x", Code::SkillNotFound)),
            format!("{} not_found: x", Code::SkillNotFound)
        );
        for len in [MAX_ERROR_BYTES, MAX_ERROR_BYTES + 1, 20 << 20] {
            let message = bounded_error("\u{80}".repeat(len / 2 + 1));
            assert!(message.len() <= MAX_ERROR_BYTES, "{}", message.len());
            assert!(message.ends_with('…'));
            // Escaped as JSON (a C1 control becomes \u0080, 6 bytes for each 2), still in one frame.
            let json = serde_json::to_string(&message).expect("json");
            assert!(
                json.len() + ENVELOPE_BYTES < ENGINE_FRAME_BYTES,
                "{}",
                json.len()
            );
        }
    }

    #[test]
    fn an_answer_fits_up_to_the_limit_and_is_refused_past_it() {
        assert!(check("directory::skills::list", MAX_ANSWER_BYTES).is_ok());
        let refused = check("directory::skills::list", MAX_ANSWER_BYTES + 1)
            .expect_err("one byte over")
            .to_string();
        assert!(
            refused.starts_with(&format!(
                "{} too_large: the answer is {} bytes of JSON, more than the {MAX_ANSWER_BYTES}",
                Code::AnswerTooLarge,
                MAX_ANSWER_BYTES + 1
            )),
            "{refused}"
        );
        assert!(
            refused.contains(" Next: call directory::skills::list to ask for less: one namespace"),
            "{refused}"
        );
        let other = check("directory::agents::list", usize::MAX)
            .expect_err("far over")
            .to_string();
        assert!(other.ends_with("in one message."), "{other}");
    }
}
