//! The writer's failing reconciles, while they last. A reconcile that cannot commit (the disk
//! under the index is full, say) fails the same way every time until someone frees space, and
//! each attempt reopens the files and walks every root again: tried on every watcher turn and
//! every read, it kept a core busy and the log full. So the writer notes the failure, later
//! attempts from the watcher and from reads wait out a growing pause, and the status says why
//! reads are behind the disk. A write through the worker always tries at once (see
//! `Directory::change`): its caller is waiting for the answer.

use std::time::{Duration, Instant};

use crate::time::Stamp;

/// The first pause after a failure; it doubles with each failure after that.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between two attempts.
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// A reconcile failure that has not been followed by a success.
#[derive(Clone, Debug)]
pub struct Trouble {
    /// The last attempt's error.
    pub error: String,
    /// When the first of these failures happened.
    pub since: Stamp,
    /// Failed attempts in a row.
    pub attempts: u32,
    last: Instant,
}

impl Trouble {
    /// The first failure.
    pub fn new(error: String) -> Trouble {
        Trouble {
            error,
            since: Stamp::now(),
            attempts: 1,
            last: Instant::now(),
        }
    }

    /// One more failure.
    pub fn again(&mut self, error: String) {
        self.error = error;
        self.attempts = self.attempts.saturating_add(1);
        self.last = Instant::now();
    }

    /// When the watcher or a read may try again.
    pub fn retry_at(&self) -> Instant {
        self.last + pause_after(self.attempts)
    }
}

/// The pause after `attempts` failures in a row: 250 ms, doubling, at most 30 s.
fn pause_after(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    (FIRST_PAUSE * 2u32.pow(doublings)).min(LONGEST_PAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_from_a_quarter_second_to_half_a_minute() {
        let pauses: Vec<u64> = (1..=9).map(|n| pause_after(n).as_millis() as u64).collect();
        assert_eq!(
            pauses,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]
        );
        assert_eq!(pause_after(u32::MAX), LONGEST_PAUSE);
    }

    #[test]
    fn each_failure_pushes_the_next_attempt_further_and_keeps_when_it_began() {
        let mut trouble = Trouble::new("disk full".into());
        let since = trouble.since;
        let first = trouble.retry_at();
        trouble.again("still full".into());
        assert!(trouble.retry_at() > first);
        assert_eq!(
            (trouble.attempts, trouble.error.as_str()),
            (2, "still full")
        );
        assert_eq!(trouble.since, since);
    }
}
