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
        let seat = Seat {
            flights: self,
            key,
            flight,
        };
        seat.flight.get_or_init(|| ask).await.clone()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        locks::lock(&self.under_way).len()
    }
}

/// A caller's place on a flight. Leaving it (answered, or cancelled) retires the flight once
/// it is done, so the next call asks again (a success is in the cache by then, a failure never
/// is), or once its last caller left without an answer: the search's registry phase gives up
/// on slow answers all the time, and each question it left would otherwise stay for good.
struct Seat<'a, K: Eq + Hash, T> {
    flights: &'a Flights<K, T>,
    key: &'a K,
    flight: Arc<OnceCell<Outcome<T>>>,
}

impl<K: Eq + Hash, T> Drop for Seat<'_, K, T> {
    fn drop(&mut self) {
        let mut under_way = locks::lock(&self.flights.under_way);
        let ours = under_way
            .get(self.key)
            .is_some_and(|current| Arc::ptr_eq(current, &self.flight));
        // Under the lock, so no caller joins in between: the map's and this seat's are the last.
        let deserted = Arc::strong_count(&self.flight) == 2;
        if ours && (self.flight.initialized() || deserted) {
            under_way.remove(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_flight_every_caller_left_is_retired() {
        let flights: Flights<u32, u32> = Flights::default();
        for key in 0..10 {
            let gave_up = tokio::time::timeout(
                Duration::from_millis(5),
                flights.join(&key, std::future::pending()),
            )
            .await;
            assert!(gave_up.is_err());
        }
        assert_eq!(flights.len(), 0);
        assert_eq!(flights.join(&1, async { Ok(7) }).await, Ok(7));
        assert_eq!(flights.len(), 0);
    }

    #[tokio::test]
    async fn callers_at_once_share_one_outcome() {
        let flights: Flights<u32, u32> = Flights::default();
        let asked = std::sync::atomic::AtomicU32::new(0);
        let ask = || async {
            asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err(RegistryError::Unreachable)
        };
        let outcomes =
            futures_util::future::join_all((0..5).map(|_| flights.join(&1, ask()))).await;
        assert!(
            outcomes
                .iter()
                .all(|o| *o == Err(RegistryError::Unreachable))
        );
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(flights.len(), 0);
    }
}
