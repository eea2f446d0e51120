//! What the engine can carry in one answer. The iii engine reads a worker's socket with
//! tungstenite's default limits, and the SDK sends each message as one frame, so an invocation
//! result over 16 MiB is never delivered: the engine drops the connection, and the SDK, having
//! queued the unsent result, sends it again on every reconnection, so the worker never comes
//! back (seen with a full `skills::list` of 50,000 skills, 17.7 MB, through iii 0.23). Callers
//! read with the same limit. An answer that cannot fit is refused here, before the SDK builds
//! any of it, with an error that says how to ask for less.

use crate::directory::ReadFunction;
use crate::error::{Error, next};

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
    Err(Error::coded("D120", "too_large", &problem, &narrower))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_fits_up_to_the_limit_and_is_refused_past_it() {
        assert!(check("directory::skills::list", MAX_ANSWER_BYTES).is_ok());
        let refused = check("directory::skills::list", MAX_ANSWER_BYTES + 1)
            .expect_err("one byte over")
            .to_string();
        assert!(
            refused.starts_with(&format!(
                "D120 too_large: the answer is {} bytes of JSON, more than the {MAX_ANSWER_BYTES}",
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
