//! One request per question at a time: calls that ask the registry what it is already being
//! asked share that request's outcome, a failure included, rather than each sending its own.
//! Twenty identical `info` calls on a cold cache sent twenty pairs of requests, and each
//! skills leg took one of the few turns a read carrying files gets (`admission`), so they
//! queued behind each other and, past the call deadline, were refused.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use super::RegistryError;
use crate::locks;

type Outcome<T> = Result<T, RegistryError>;

/// The requests under way, by what they ask.
pub struct Flights<K, T> {
    under_way: Mutex<HashMap<K, Arc<OnceCell<Outcome<T>>>>>,
}

impl<K, T> Default for Flights<K, T> {
    fn default() -> Self {
        Flights {
            under_way: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone, T: Clone> Flights<K, T> {
    /// The outcome of the request under way for `key`, or of `ask`, run as that request when
    /// none is. A caller that gives up (its call cancelled) leaves `ask` to one that waited.
    pub async fn join(&self, key: &K, ask: impl Future<Output = Outcome<T>>) -> Outcome<T> {
        let flight = locks::lock(&self.under_way)
            .entry(key.clone())
            .or_default()
            .clone();
        let outcome = flight.get_or_init(|| ask).await.clone();
        // Done: the next call asks again (a success is in the cache by then, a failure never is).
        let mut under_way = locks::lock(&self.under_way);
        if under_way
            .get(key)
            .is_some_and(|current| Arc::ptr_eq(current, &flight))
        {
            under_way.remove(key);
        }
        outcome
    }
}
