//! The in-process cache of successful registry answers. Each entry remembers when it was
//! stored; it is served while younger than the TTL read at the time of the lookup, so a
//! shorter `registry_cache_ttl_ms` applies at once. Failures are never stored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Release, WorkerInfo, WorkerPage};

/// Most entries kept. Searches are free text, so without a bound a caller could grow the map
/// without end; past it, expired entries go first, then the oldest.
const MAX_ENTRIES: usize = 1024;

/// What an answer was asked with. The base URL is part of the key, so an answer is never
/// served for another registry even before a configuration change clears the cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    List {
        base: String,
        search: Option<String>,
        cursor: Option<String>,
    },
    Info {
        base: String,
        name: String,
        release: Release,
    },
}

#[derive(Clone, Debug)]
pub enum Cached {
    Page(Arc<WorkerPage>),
    Info(Arc<WorkerInfo>),
}

#[derive(Default)]
pub struct Cache {
    entries: Mutex<HashMap<Key, (Instant, Cached)>>,
}

impl Cache {
    /// The answer stored under `key`, if younger than `ttl`.
    pub fn get(&self, key: &Key, ttl: Duration) -> Option<Cached> {
        let entries = self.entries.lock().ok()?;
        let (at, value) = entries.get(key)?;
        (at.elapsed() < ttl).then(|| value.clone())
    }

    /// Stores an answer; nothing when the cache is off (`ttl` zero).
    pub fn put(&self, key: Key, value: Cached, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (at, _)| at.elapsed() < ttl);
        }
        if entries.len() >= MAX_ENTRIES {
            let oldest = entries
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        entries.insert(key, (Instant::now(), value));
    }

    pub fn clear(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> Key {
        Key::List {
            base: "http://r".into(),
            search: Some(n.to_string()),
            cursor: None,
        }
    }

    fn page() -> Cached {
        Cached::Page(Arc::new(WorkerPage::default()))
    }

    #[test]
    fn entries_expire_with_the_ttl_read_at_lookup() {
        let cache = Cache::default();
        cache.put(key(1), page(), Duration::from_secs(60));
        assert!(cache.get(&key(1), Duration::from_secs(60)).is_some());
        assert!(cache.get(&key(1), Duration::ZERO).is_none());
        assert!(cache.get(&key(2), Duration::from_secs(60)).is_none());
        cache.clear();
        assert!(cache.get(&key(1), Duration::from_secs(60)).is_none());
    }

    #[test]
    fn a_zero_ttl_stores_nothing() {
        let cache = Cache::default();
        cache.put(key(1), page(), Duration::ZERO);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = Cache::default();
        for n in 0..MAX_ENTRIES + 10 {
            cache.put(key(n), page(), Duration::from_secs(60));
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        assert!(
            cache
                .get(&key(MAX_ENTRIES + 9), Duration::from_secs(60))
                .is_some()
        );
    }
}
