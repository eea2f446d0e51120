//! Sync cookies: how a process that reads the index but does not write it (a read-only
//! follower, such as the command line while a worker runs) gets reads as fresh as the
//! writer's. It leaves an empty file in a folder beside the index that the writer's watcher
//! watches with the roots. The kernel queues that file's event after every event queued before
//! it, so once the watcher has seen the cookie it has seen every earlier change: it takes them
//! in, commits, and removes the cookie, which is what the follower waits for (the technique
//! of watchman's sync cookies).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a follower waits for the writer's watcher to answer its cookie.
const COOKIE_WAIT: Duration = Duration::from_secs(1);

/// The folder beside the index where followers leave sync cookies. Only a watching writer
/// makes it, and it removes it when it stops.
pub fn sync_folder(index_path: &Path) -> PathBuf {
    crate::store::beside(index_path, ".sync")
}

/// Leaves a cookie for the writer's watcher and waits until it is answered. Without a
/// watching writer (no sync folder) it returns at once; a writer that does not answer in time
/// costs one warning, and the read goes on from the index as it is.
pub fn sync_with_writer(index_path: &Path) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let folder = sync_folder(index_path);
    if !folder.is_dir() {
        return;
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let cookie = folder.join(format!("{}-{n}", std::process::id()));
    if let Err(e) = std::fs::write(&cookie, b"") {
        tracing::debug!("cannot leave a sync cookie in {}: {e}", folder.display());
        return;
    }
    let started = Instant::now();
    let mut pause = Duration::from_micros(50);
    while cookie.exists() {
        if started.elapsed() > COOKIE_WAIT {
            let _ = std::fs::remove_file(&cookie);
            tracing::warn!(
                "the worker did not confirm within {} ms that it had taken in the latest \
                 changes; answering from the index as it is",
                COOKIE_WAIT.as_millis()
            );
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}
