//! Every call gets an answer. The SDK runs each handler in a task of its own and sends the
//! result when the task ends; a task that panics ends without a result, and one that waits on
//! something that never comes (an engine call whose answer was lost, a lock) keeps its caller
//! waiting out the caller's whole timeout (the SDK's default is 30 s). Both are answered here:
//! a panic becomes `D123 internal`, and a call still running at the deadline becomes
//! `D122 timeout`, sent before the caller's default timeout, so the caller hears why instead
//! of waiting.
//!
//! Each function's entry says whether it is cut (`surface::Deadline`): downloads, restores,
//! a bundle's plan-update and apply, and the worker-added hook are not, as a clone or a bundle
//! has its own timeouts, and callers of a download wait longer than 30 s.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;

use super::error::WorkerError;
use super::surface::Deadline;
use crate::code::Code;
use crate::error::Error;

/// The deadline of a call to a function of class `class`, if it has one.
fn deadline_of(class: Deadline) -> Option<Duration> {
    match class {
        Deadline::Cut | Deadline::CutWrite => crate::time::call_deadline(),
        Deadline::Uncut => None,
    }
}

/// `work`'s outcome, or the coded error that answers the call when `work` panics or is still
/// running at the deadline.
pub async fn answered<T>(
    function: &str,
    class: Deadline,
    work: impl Future<Output = Result<T, WorkerError>>,
) -> Result<T, WorkerError> {
    let goes_on = class == Deadline::CutWrite;
    answered_within(function, deadline_of(class), goes_on, work).await
}

/// [`answered`] with the deadline given; `goes_on` when the work is a write that runs on after
/// the answer.
async fn answered_within<T>(
    function: &str,
    deadline: Option<Duration>,
    goes_on: bool,
    work: impl Future<Output = Result<T, WorkerError>>,
) -> Result<T, WorkerError> {
    let work = AssertUnwindSafe(work).catch_unwind();
    let outcome = match deadline {
        Some(limit) => match tokio::time::timeout(limit, work).await {
            Ok(outcome) => outcome,
            Err(_) => {
                tracing::warn!(
                    function,
                    deadline_ms = limit.as_millis() as u64,
                    "a call ran past its deadline; answered D122"
                );
                return Err(timed_out(function, limit, goes_on).into());
            }
        },
        None => work.await,
    };
    outcome.unwrap_or_else(|_| after_panic(function))
}

/// `work`'s outcome, run at once on the caller's thread, or D123 when it panics.
pub fn answered_at_once<T>(
    function: &str,
    work: impl FnOnce() -> Option<Result<T, WorkerError>>,
) -> Option<Result<T, WorkerError>> {
    std::panic::catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| Some(after_panic(function)))
}

/// The answer to a call whose handler panicked.
fn after_panic<T>(function: &str) -> Result<T, WorkerError> {
    tracing::error!(function, "a handler panicked; answered D123");
    Err(panicked(function).into())
}

/// `goes_on`: the work is a write, which its blocking thread finishes after the answer; a
/// retry on the word alone would find it done (a create: `D114 already exists`).
fn timed_out(function: &str, limit: Duration, goes_on: bool) -> Error {
    let then = if goes_on {
        "The write may still land: read it back (get or list) before retrying it."
    } else {
        "Retry; if it keeps happening, see the worker's log."
    };
    Error::coded(
        Code::DeadlinePassed,
        format!(
            "{function} did not finish within {} ms; the worker answers now rather than leave \
             the caller waiting out its own timeout. {then}",
            limit.as_millis()
        ),
        &[],
    )
}

fn panicked(function: &str) -> Error {
    Error::coded(
        Code::HandlerPanicked,
        format!(
            "{function} failed unexpectedly (a panic in the worker; see its log); the worker \
             goes on serving."
        ),
        &[],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::surface;

    #[tokio::test]
    async fn a_panic_is_answered_d123() {
        let outcome: Result<(), WorkerError> =
            answered("directory::skills::get", Deadline::Cut, async {
                panic!("boom")
            })
            .await;
        let message = outcome.expect_err("answered").to_string();
        assert!(message.starts_with(&format!(
            "{} internal: directory::skills::get failed unexpectedly",
            Code::HandlerPanicked
        )));
    }

    #[test]
    fn a_panic_in_a_call_answered_at_once_is_answered_d123() {
        let outcome: Option<Result<(), WorkerError>> =
            answered_at_once("directory::skills::list", || panic!("boom"));
        let message = outcome
            .expect("answered")
            .expect_err("an error")
            .to_string();
        assert!(message.starts_with(&format!(
            "{} internal: directory::skills::list failed unexpectedly",
            Code::HandlerPanicked
        )));
        assert_eq!(
            answered_at_once("f", || Some(Ok(7))).map(Result::ok),
            Some(Some(7))
        );
        assert!(answered_at_once::<()>("f", || None).is_none());
    }

    #[tokio::test]
    async fn a_call_past_the_deadline_is_answered_d122_and_downloads_are_not_cut() {
        let limit = Some(Duration::from_millis(50));
        let outcome: Result<(), WorkerError> = answered_within(
            "directory::skills::get",
            limit,
            false,
            std::future::pending(),
        )
        .await;
        let message = outcome.expect_err("answered").to_string();
        assert!(
            message.starts_with(&format!(
                "{} timeout: directory::skills::get did not finish within 50 ms",
                Code::DeadlinePassed
            )),
            "{message}"
        );
        let quick = async { Ok(7) };
        assert_eq!(
            answered_within("f", limit, false, quick).await.ok(),
            Some(7)
        );
        let class = |id: &str| {
            let function = surface::functions().into_iter().find(|f| f.id == id);
            deadline_of(function.expect("registered").deadline)
        };
        assert_eq!(class("directory::skills::download_from_repo"), None);
        assert_eq!(class(surface::ON_WORKER_ADDED), None);
        assert_eq!(
            class("directory::skills::get"),
            Some(crate::time::DEFAULT_CALL_DEADLINE)
        );
    }
}
