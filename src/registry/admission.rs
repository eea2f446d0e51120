//! Turns to read a response that carries a bundle's files (a registry `/skills` answer, or a
//! clone's files): each holds its bundle in memory while it is read and checked, up to twice
//! `download_max_bytes` (a registry answer's JSON escapes its files). Thirty concurrent
//! downloads of a large bundle held 2.9 GiB, one under a raised `download_max_bytes` buffered
//! 2 GiB, and eight `registry::workers::info` calls 3.9 GiB: so every such read takes a turn,
//! admitted against a count ([`MAX_FETCHES`]) and a budget of memory ([`FETCH_BUDGET_MIB`]). A
//! read allowed more than the default runs with fewer beside it, or alone.
//!
//! A turn covers the read alone, never the wait for a remote: a registry request takes it once
//! the registry answered, before the body; a clone, once git is done, before its files are
//! read. A host that never answers would otherwise hold every turn for `download_timeout_ms`,
//! and keep every other caller's registry reads waiting. Clones have a count of their own
//! ([`MAX_CLONES`], held from the clone to the end of its read): each is a git process and a
//! checkout on disk.
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
static FETCHING: Admission = Admission::new(Waited::Read, MAX_FETCHES, FETCH_BUDGET_MIB);
/// Clones (git processes, and their checkouts on disk) at once in this process.
const MAX_CLONES: u32 = 4;
static CLONING: Admission = Admission::new(Waited::Clone, MAX_CLONES, MAX_CLONES);

/// A turn to read up to `bytes` of files (the whole budget at most), waited for up to the call
/// deadline.
pub async fn take_turn(bytes: u64) -> Result<Turn<'static>, TurnRefused> {
    FETCHING.take(bytes, crate::time::call_deadline()).await
}

/// A turn to run a clone, waited for up to the call deadline. Its files are read in a turn of
/// [`take_turn`]'s, taken while this one is held (never the other way round).
pub async fn take_clone_turn() -> Result<Turn<'static>, TurnRefused> {
    CLONING.take(1, crate::time::call_deadline()).await
}

/// What a refused turn waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waited {
    Read,
    Clone,
}

/// A read or a clone that did not get its turn in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} bundles are already being {} at once, as many as this process runs together{}; this \
     one waited {:.1} s for its turn without starting, and nothing was written. Retry in a \
     moment",
    limit,
    match waited_for { Waited::Read => "read", Waited::Clone => "cloned" },
    match waited_for { Waited::Read => " (fewer when download_max_bytes is raised)", Waited::Clone => "" },
    waited.as_secs_f64()
)]
pub struct TurnRefused {
    waited_for: Waited,
    limit: u32,
    waited: Duration,
}

/// Admission: a count and a budget of MiB, both waited for in this order, so two reads never
/// each hold what the other waits for.
struct Admission {
    waited_for: Waited,
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
    const fn new(waited_for: Waited, count: u32, budget_mib: u32) -> Admission {
        Admission {
            waited_for,
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
            waited_for: self.waited_for,
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
        let each = super::super::files_cap(&Settings::default()).div_ceil(MIB);
        assert_eq!(u64::from(FETCH_BUDGET_MIB), u64::from(MAX_FETCHES) * each);
    }

    #[tokio::test]
    async fn a_read_waits_for_its_turn_no_longer_than_asked() {
        let admission = Admission::new(Waited::Read, 2, 10);
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
        let admission = Admission::new(Waited::Read, 4, 10);
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
