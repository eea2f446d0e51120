//! Gives the memory of large answers back to the system once they are sent. A whole
//! `skills::list` of a large tree becomes a value of tens of megabytes inside the SDK, built
//! and freed on whichever thread serves it; glibc keeps what each of its arenas freed, so the
//! resident set would stay near the sum of every arena's largest answer long after the calls
//! (issue 15: about 200 MiB at rest after lists of 50,000 skills, 125 MiB with this). A trim
//! costs milliseconds after such an answer and little otherwise, so it runs off the call path,
//! on the blocking pool, shortly after a large answer went out (the SDK frees it once sent).
//! One also runs just before a large answer is handed over, so that what an earlier one left
//! in the other arena is not resident beside it (at 50,000 skills the worker's peak ranged
//! over 137 to 152 MiB from run to run without it, 145 with it; a whole list over the wire
//! took about 2% longer). The delayed trim also returns the pages of the answer arena
//! (`arena.rs`), where the SDK's value of a long list is built, once nothing in it is alive.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Answers at least this large (JSON bytes) are worth a trim once freed.
pub const LARGE_ANSWER_BYTES: usize = 4 << 20;
/// How long after a large answer the trim runs: time for the SDK to send and free it, and for
/// a burst of such answers to pass.
const AFTER: Duration = Duration::from_millis(500);
/// How many times in all, [`AFTER`] apart, a trim gives the answer arena's pages back while it
/// finds an answer's value still alive there. The trim of a burst runs half a second after its
/// first answer, so the last answer can be on its way out then, and no later answer schedules
/// another; with one try its pages stayed resident at rest, by the timing of the calls (the
/// benchmark's worker at rest: 97 or 137 MiB from one run to the next). Bounded, since a block
/// that is never freed keeps the region from ever being given back.
const TRIES: usize = 8;

/// See the module doc.
#[derive(Default)]
pub struct Trimmer {
    scheduled: AtomicBool,
}

impl Trimmer {
    /// Gives back what earlier answers left in the arenas before a large answer is built: the
    /// SDK builds it in whichever arena its thread holds, and the pages another arena kept
    /// would otherwise add to this answer's.
    pub async fn before_large_answer() {
        let _ = tokio::task::spawn_blocking(give_back).await;
    }

    /// Notes that large buffers were just let go (a large answer handed to the SDK, a bundle's
    /// files read): a trim runs shortly after, once for a burst of them.
    pub fn trim_soon(self: &Arc<Self>) {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(AFTER).await;
            // Cleared before the first try: an answer handed over from now on schedules a trim
            // of its own, so none is left to a trim that already gave up.
            this.scheduled.store(false, Ordering::Release);
            for _ in 0..TRIES {
                let given = tokio::task::spawn_blocking(|| {
                    give_back();
                    crate::arena::give_back()
                })
                .await
                .unwrap_or(true);
                if given {
                    return;
                }
                tokio::time::sleep(AFTER).await;
                // A later answer's trim, scheduled meanwhile, covers what this one left.
                if this.scheduled.load(Ordering::Acquire) {
                    return;
                }
            }
        });
    }
}

/// Returns the arenas' free pages to the system.
fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists, under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
