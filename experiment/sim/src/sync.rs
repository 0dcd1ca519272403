//! The one poison-tolerant lock of the workspace. A panic while a lock is
//! held (a failed request handler, a writer thread) must not take the run's
//! other tasks down with it: the data behind these locks (the model, which
//! never panics midway on valid input, counters, queues, caches) stay
//! usable when an update is cut short, and serving or recording on beats
//! failing every later request, so a poisoned lock is taken as it is. It lives here, in the lowest crate that
//! both the simulator and the harness (`snowleak::sim::sync`) use, so that
//! there is one.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking it over even if a thread panicked while holding it.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::lock;
    use std::sync::Mutex;

    #[test]
    fn a_poisoned_lock_is_taken_with_what_it_holds() {
        let m = Mutex::new(1);
        let _ = std::panic::catch_unwind(|| {
            let mut g = m.lock().unwrap();
            *g = 2;
            panic!("a holder panics");
        });
        assert!(m.is_poisoned());
        assert_eq!(*lock(&m), 2);
    }
}
