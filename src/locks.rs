//! Taking a lock whose last holder panicked. What these locks guard stays whole whatever a
//! panicking holder was doing (a cache, a set of names in flight, the last values noted, a
//! gate with no data), so a poisoned lock is taken as it is: one panicked call must not turn
//! into a failure of every later one. The locks whose data a panic can leave half-changed do
//! not use these: the directory's write lock and skill cache fail with `Error::Poisoned`, and
//! an index read or reconcile that finds the index's mirror, gate or file slot poisoned fails
//! with `IndexError::Unavailable` ("index state poisoned by a panic").

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// `mutex.lock()`, taking it over from a holder that panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `lock.read()`, taking it over from a writer that panicked.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `lock.write()`, taking it over from a holder that panicked.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `lock.get_mut()`, taking it over from a holder that panicked.
pub fn get_mut<T: ?Sized>(lock: &mut RwLock<T>) -> &mut T {
    lock.get_mut()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_as_it_is() {
        let mutex = Mutex::new(vec![1]);
        let rw = RwLock::new(7);
        std::thread::scope(|scope| {
            let _ = scope
                .spawn(|| {
                    let _held = mutex.lock();
                    let _written = rw.write();
                    panic!("a holder panics");
                })
                .join();
        });
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        lock(&mutex).push(2);
        assert_eq!(*lock(&mutex), [1, 2]);
        *write(&rw) += 1;
        assert_eq!(*read(&rw), 8);
    }
}
