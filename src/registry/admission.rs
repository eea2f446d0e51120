//! Turns to read a response that carries a bundle's files (a registry `/skills` answer, or a
//! clone's files): each holds its bundle in memory while it is read and checked, up to twice
//! `download_max_bytes` (a registry answer's JSON escapes its files). Thirty concurrent
//! downloads of a large bundle held 2.9 GiB, one under a raised `download_max_bytes` buffered
//! 2 GiB, and eight `registry::workers::info` calls 3.9 GiB: so every such read takes a turn,
//! admitted against a count ([`MAX_FETCHES`]) and a budget of memory ([`FETCH_BUDGET_MIB`]). A
//! read allowed more than the default runs with fewer beside it, or alone.
//!
//! The others wait their turn no longer than a call may last on the bus
//! ([`crate::time::call_deadline`]), then are refused: a read that waited past its caller's
//! deadline is never started, and the caller hears why (twenty downloads from a source that
//! never answered held every other caller's download back for minutes).

use std::time::Duration;

/// Reads carrying files at once in this process.
const MAX_FETCHES: u32 = 4;
/// What the reads running at once may hold together, in MiB: four at the default
/// `download_max_bytes` (each reserves twice it and 1 MiB).
const FETCH_BUDGET_MIB: u32 = MAX_FETCHES * 129;
static FETCHING: Admission = Admission::new(MAX_FETCHES, FETCH_BUDGET_MIB);

/// A turn to read up to `bytes` of files (the whole budget at most), waited for up to the call
/// deadline.
pub async fn take_turn(bytes: u64) -> Result<Turn<'static>, TurnRefused> {
    FETCHING.take(bytes, crate::time::call_deadline()).await
}

/// A read that did not get its turn in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "this worker is already reading as many bundles as it holds in memory at once (at most \
     {limit}, fewer when download_max_bytes is raised), and this one waited {} s for its turn \
     without starting; nothing was written. Retry in a moment",
    waited.as_secs()
)]
pub struct TurnRefused {
    limit: u32,
    waited: Duration,
}

/// Admission: a count and a budget of MiB, both waited for in this order, so two reads never
/// each hold what the other waits for.
struct Admission {
    count: tokio::sync::Semaphore,
    mib: tokio::sync::Semaphore,
    limit: u32,
    budget: u32,
}

/// A read's turn: held while it runs.
pub struct Turn<'a> {
    _count: tokio::sync::SemaphorePermit<'a>,
    _mib: tokio::sync::SemaphorePermit<'a>,
}

impl Admission {
    const fn new(count: u32, budget_mib: u32) -> Admission {
        Admission {
            count: tokio::sync::Semaphore::const_new(count as usize),
            mib: tokio::sync::Semaphore::const_new(budget_mib as usize),
            limit: count,
            budget: budget_mib,
        }
    }

    /// A turn for a read that may hold `bytes` (the whole budget at most), waited for up to
    /// `wait` (`None`: as long as it takes).
    async fn take(&self, bytes: u64, wait: Option<Duration>) -> Result<Turn<'_>, TurnRefused> {
        let mib = u32::try_from(bytes.div_ceil(1024 * 1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.budget);
        let turn = async {
            // Never closed: an acquire only waits.
            let count = self.count.acquire().await.ok()?;
            let mib = self.mib.acquire_many(mib).await.ok()?;
            Some(Turn {
                _count: count,
                _mib: mib,
            })
        };
        let turn = match wait {
            Some(wait) => tokio::time::timeout(wait, turn).await.ok().flatten(),
            None => turn.await,
        };
        turn.ok_or(TurnRefused {
            limit: self.limit,
            waited: wait.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::config::Settings;

    const MIB: u64 = 1024 * 1024;
    const SHORT: Option<Duration> = Some(Duration::from_millis(100));

    #[test]
    fn the_budget_admits_four_reads_at_the_default_size() {
        let each = super::super::Endpoint::from_settings(&Settings::default())
            .max_response_bytes
            .div_ceil(MIB);
        assert_eq!(u64::from(FETCH_BUDGET_MIB), u64::from(MAX_FETCHES) * each);
    }

    #[tokio::test]
    async fn a_read_waits_for_its_turn_no_longer_than_asked() {
        let admission = Admission::new(2, 10);
        let first = admission.take(MIB, None).await.expect("a turn");
        let _second = admission.take(MIB, None).await.expect("a turn");
        let started = Instant::now();
        let refused = admission.take(MIB, SHORT).await.err().expect("no turn");
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(
            refused.to_string().contains("nothing was written"),
            "{refused}"
        );
        drop(first);
        admission
            .take(MIB, SHORT)
            .await
            .expect("a turn once one ends");
    }

    #[tokio::test]
    async fn a_read_that_may_hold_the_whole_budget_runs_alone() {
        let admission = Admission::new(4, 10);
        let small = admission.take(3 * MIB, None).await.expect("a turn");
        // Allowed more than the budget: it takes the whole of it, so waits for the small one.
        assert!(admission.take(20 * MIB, SHORT).await.is_err());
        drop(small);
        let large = admission.take(20 * MIB, SHORT).await.expect("alone");
        assert!(
            admission.take(1, SHORT).await.is_err(),
            "nothing runs beside it"
        );
        drop(large);
        admission.take(1, SHORT).await.expect("a turn once it ends");
    }
}
