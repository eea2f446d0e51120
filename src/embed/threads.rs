//! The threads embeddings are computed on. A query someone waits for runs on the query threads
//! (normal priority, one pool per embedder); work nobody waits for (a cold tree's skills, a
//! changed catalog's functions and their hubness) runs on the process's one background pool,
//! at a lower scheduling priority, so that it never delays an answer.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The query threads: as many as cores, at most 4 (a query's products are split in two, and
/// the scan of the vectors after it in chunks); `None` on one core.
pub(super) fn query_threads() -> Option<rayon::ThreadPool> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        return None;
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(cores.min(4))
        .thread_name(|i| format!("iii-directory-query-{i}"))
        .build()
        .ok()
}

/// How many queries may wait for the query threads or run on them at once, per thread: a
/// short query takes a few milliseconds, so a full queue is a wait of tens of milliseconds,
/// and one of heavy queries (six capabilities of a thousand characters) stays under a second.
const QUERIES_PER_THREAD: usize = 4;

/// Counts the queries waiting for the query threads or running on them, and turns away those
/// past its bound.
pub struct QueryGate {
    inside: AtomicUsize,
    most: usize,
}

/// A query let through a [`QueryGate`]; it leaves when dropped.
pub struct Entered<'a>(&'a AtomicUsize);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl QueryGate {
    /// A gate for queries run on `pool` (the calling thread alone when `None`).
    pub fn for_threads(pool: Option<&rayon::ThreadPool>) -> QueryGate {
        let threads = pool.map_or(1, rayon::ThreadPool::current_num_threads);
        QueryGate::new(threads * QUERIES_PER_THREAD)
    }

    /// A gate that lets every query in (tests that share one embedder across many test
    /// threads: on a machine of many cores they would be turned away as a burst).
    #[cfg(any(test, feature = "testing"))]
    pub fn open() -> QueryGate {
        QueryGate::new(usize::MAX)
    }

    fn new(most: usize) -> QueryGate {
        QueryGate {
            inside: AtomicUsize::new(0),
            most,
        }
    }

    /// Lets a query in, unless `most` are inside already.
    pub fn enter(&self) -> Option<Entered<'_>> {
        let entered = Entered(&self.inside);
        (self.inside.fetch_add(1, Ordering::AcqRel) < self.most).then_some(entered)
    }
}

/// Runs `f` on the background threads (as many as cores, at nice 10; started on first use and
/// shared by every embedding nobody waits for), or on the calling thread when they cannot be
/// started. The caller waits for `f`.
pub fn in_background<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match background_threads() {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

fn background_threads() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let built = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("iii-directory-embed-{i}"))
            .start_handler(|_| lower_priority())
            .build();
        built
            .map_err(|e| tracing::warn!("cannot start the embedding threads: {e}"))
            .ok()
    })
    .as_ref()
}

/// Lowers the calling thread's scheduling priority (nice 10); best effort. Once lowered, a
/// thread's priority stays lowered.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take no pointers; on Linux, PRIO_PROCESS with a
        // thread id sets that one thread's nice value.
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's nice value.
    #[cfg(target_os = "linux")]
    fn nice() -> i32 {
        // SAFETY: as in `lower_priority`; errno is not consulted (a nice of -1 is not expected
        // in a test run).
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[test]
    fn an_open_gate_lets_every_query_in() {
        let gate = QueryGate::open();
        let inside: Vec<_> = (0..1000).map(|_| gate.enter()).collect();
        assert!(inside.iter().all(Option::is_some));
    }

    #[test]
    fn the_gate_turns_away_queries_past_its_bound_until_one_leaves() {
        let gate = QueryGate::new(2);
        let first = gate.enter().expect("let in");
        let _second = gate.enter().expect("let in");
        assert!(gate.enter().is_none(), "a third is turned away");
        assert!(gate.enter().is_none(), "and one after it");
        drop(first);
        assert!(gate.enter().is_some(), "let in once one left");
    }

    #[test]
    fn background_work_runs_on_the_embedding_threads_at_a_lower_priority() {
        let name = in_background(|| std::thread::current().name().map(str::to_string));
        let name = name.expect("a named thread");
        assert!(name.starts_with("iii-directory-embed-"), "{name}");
        #[cfg(target_os = "linux")]
        {
            let caller = nice();
            let background = in_background(nice);
            assert!(background >= 10, "nice {background}");
            assert_eq!(nice(), caller, "the caller's priority is left as it was");
        }
    }
}
