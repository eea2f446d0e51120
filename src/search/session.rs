//! Per-session memory: which candidates a session was already given (so a repeated search
//! sends only what is new), and which turn and step the hint last went out in.
//!
//! Sessions are keyed by a caller-supplied id (OTel baggage `iii.session.id`, or the hook's
//! `session_id`): a cache key, never a security boundary; a wrong or missing id only costs a
//! full resend or an extra hint. Both the number of sessions and the ids remembered per
//! session are bounded; the oldest go first. A session is remembered by a digest of its id,
//! so an id of megabytes costs what a short one does.

use std::collections::{HashMap, HashSet, VecDeque};

/// Sessions remembered (contract: 1024, first in, first out).
pub const MAX_SESSIONS: usize = 1024;
/// Delivered candidate ids remembered per session; the oldest are forgotten first (a session
/// that outgrows this only gets an old candidate again).
pub const MAX_DELIVERED_PER_SESSION: usize = 512;

/// What a caller-supplied id (a session's, a turn's) is remembered as: 16 bytes of its
/// blake3 digest, whatever its length.
pub type Digest = [u8; 16];

/// The [`Digest`] of `id`.
pub fn digest(id: &str) -> Digest {
    let mut out = [0; 16];
    out.copy_from_slice(&blake3::hash(id.as_bytes()).as_bytes()[..16]);
    out
}

/// A map of at most `capacity` sessions that forgets the oldest-created one when full.
#[derive(Debug)]
pub struct Sessions<V> {
    capacity: usize,
    entries: HashMap<Digest, V>,
    order: VecDeque<Digest>,
}

impl<V: Default> Sessions<V> {
    pub fn new(capacity: usize) -> Sessions<V> {
        Sessions {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// The session's record, created (evicting the oldest when full) if new.
    pub fn entry(&mut self, session: &str) -> &mut V {
        let key = digest(session);
        if !self.entries.contains_key(&key) {
            while self.order.len() >= self.capacity {
                if let Some(oldest) = self.order.pop_front() {
                    self.entries.remove(&oldest);
                }
            }
            self.order.push_back(key);
        }
        self.entries.entry(key).or_default()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn get(&self, session: &str) -> Option<&V> {
        self.entries.get(&digest(session))
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<V: Default> Default for Sessions<V> {
    fn default() -> Self {
        Sessions::new(MAX_SESSIONS)
    }
}

/// What one session was given, for one catalog fingerprint.
#[derive(Debug, Default)]
pub struct Delivered {
    fingerprint: String,
    ids: HashSet<String>,
    order: VecDeque<String>,
}

impl Delivered {
    fn remember(&mut self, id: &str) {
        if self.ids.insert(id.to_string()) {
            self.order.push_back(id.to_string());
            while self.order.len() > MAX_DELIVERED_PER_SESSION {
                if let Some(oldest) = self.order.pop_front() {
                    self.ids.remove(&oldest);
                }
            }
        }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }
}

/// A selection split against what the session was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Ids to send.
    pub send: Vec<String>,
    /// Ids the session already has (named in the guidance instead).
    pub repeated: Vec<String>,
}

/// The search side of session memory.
#[derive(Debug, Default)]
pub struct Memory {
    sessions: Sessions<Delivered>,
}

impl Memory {
    #[cfg(any(test, feature = "testing"))]
    pub fn with_capacity(sessions: usize) -> Memory {
        Memory {
            sessions: Sessions::new(sessions),
        }
    }

    /// Splits `selected` into new and repeated ids for `session` and remembers the new ones. A
    /// catalog whose fingerprint changed makes the session forget what it was given. When
    /// nothing is new but something repeats, everything is sent again: the caller most likely
    /// lost the earlier result (context compaction).
    pub fn split(&mut self, session: &str, fingerprint: &str, selected: &[String]) -> Split {
        let delivered = self.sessions.entry(session);
        if delivered.fingerprint != fingerprint {
            delivered.fingerprint = fingerprint.to_string();
            delivered.ids.clear();
            delivered.order.clear();
        }
        let (repeated, new): (Vec<String>, Vec<String>) = selected
            .iter()
            .cloned()
            .partition(|id| delivered.contains(id));
        if new.is_empty() && !repeated.is_empty() {
            return Split {
                send: repeated,
                repeated: Vec::new(),
            };
        }
        for id in &new {
            delivered.remember(id);
        }
        Split {
            send: new,
            repeated,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn first_search_sends_everything() {
        let mut memory = Memory::default();
        let split = memory.split("s1", "fp", &ids(&["a::x", "b::y"]));
        assert_eq!(split.send, ids(&["a::x", "b::y"]));
        assert!(split.repeated.is_empty());
    }

    #[test]
    fn a_later_search_sends_only_new_ids_and_names_the_repeats() {
        let mut memory = Memory::default();
        memory.split("s1", "fp", &ids(&["a::x", "b::y"]));
        let split = memory.split("s1", "fp", &ids(&["b::y", "c::z", "a::x"]));
        assert_eq!(split.send, ids(&["c::z"]));
        assert_eq!(split.repeated, ids(&["b::y", "a::x"]));
    }

    #[test]
    fn an_all_repeat_search_resends_everything() {
        let mut memory = Memory::default();
        memory.split("s1", "fp", &ids(&["a::x", "b::y"]));
        let split = memory.split("s1", "fp", &ids(&["b::y", "a::x"]));
        assert_eq!(split.send, ids(&["b::y", "a::x"]));
        assert!(split.repeated.is_empty());
        // And it still counts as delivered afterwards.
        let again = memory.split("s1", "fp", &ids(&["a::x", "c::z"]));
        assert_eq!(again.send, ids(&["c::z"]));
    }

    #[test]
    fn a_new_catalog_fingerprint_clears_what_was_delivered() {
        let mut memory = Memory::default();
        memory.split("s1", "fp1", &ids(&["a::x"]));
        let split = memory.split("s1", "fp2", &ids(&["a::x", "b::y"]));
        assert_eq!(split.send, ids(&["a::x", "b::y"]));
        assert!(split.repeated.is_empty());
    }

    #[test]
    fn sessions_are_isolated() {
        let mut memory = Memory::default();
        memory.split("s1", "fp", &ids(&["a::x"]));
        let other = memory.split("s2", "fp", &ids(&["a::x", "b::y"]));
        assert_eq!(other.send, ids(&["a::x", "b::y"]));
    }

    #[test]
    fn an_empty_selection_sends_nothing() {
        let mut memory = Memory::default();
        assert_eq!(memory.split("s1", "fp", &[]), Split::default());
    }

    #[test]
    fn the_oldest_session_is_forgotten_when_full() {
        let mut memory = Memory::with_capacity(2);
        memory.split("s1", "fp", &ids(&["a::x"]));
        memory.split("s2", "fp", &ids(&["a::x"]));
        memory.split("s3", "fp", &ids(&["a::x"]));
        assert_eq!(memory.sessions(), 2);
        // s1 was evicted: a::x is new to it again; s3 still remembers.
        let s1 = memory.split("s1", "fp", &ids(&["a::x", "b::y"]));
        assert_eq!(s1.send, ids(&["a::x", "b::y"]));
        let s3 = memory.split("s3", "fp", &ids(&["a::x", "b::y"]));
        assert_eq!(s3.send, ids(&["b::y"]));
    }

    #[test]
    fn delivered_ids_per_session_are_bounded() {
        let mut memory = Memory::default();
        let many: Vec<String> = (0..MAX_DELIVERED_PER_SESSION + 10)
            .map(|i| format!("w::f{i}"))
            .collect();
        memory.split("s1", "fp", &many);
        // The first ten were forgotten, the rest remembered.
        let split = memory.split("s1", "fp", &ids(&["w::f0", "w::f20"]));
        assert_eq!(split.send, ids(&["w::f0"]));
        assert_eq!(split.repeated, ids(&["w::f20"]));
    }
}
