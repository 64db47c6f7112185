//! The token send log: for each OpenAI generation request, when the server wrote each of its
//! token-bearing pieces (content chunks of a stream, or the whole non-streaming response), so
//! tests can compare what a client measured with what the server did.
//!
//! A ring of the last [`TOKEN_LOG_REQUESTS`] requests behind one mutex: each request costs a
//! lock to open its entry and one per chunk; streams are paced in ms, so it is uncontended.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

/// Requests whose send times are kept; older ones are dropped.
pub const TOKEN_LOG_REQUESTS: usize = 4096;

#[derive(Debug, Default)]
struct Entries {
    /// Id of `times.front()`; ids are handed out consecutively, so entry `id` sits at
    /// index `id - first_id`.
    first_id: u64,
    times: VecDeque<Vec<u64>>,
}

/// Send times (ns of the server's [`crate::clock::Clock`]) per generation request.
#[derive(Debug)]
pub struct TokenLog {
    entries: Mutex<Entries>,
    capacity: usize,
}

impl TokenLog {
    /// A log keeping the last `capacity` requests (at least one).
    pub fn new(capacity: usize) -> TokenLog {
        TokenLog {
            entries: Mutex::new(Entries::default()),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // A poisoned lock only means a panic elsewhere; the entries are still consistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens the entry of a new request and returns its id.
    pub fn begin(&self) -> u64 {
        let mut entries = self.lock();
        let id = entries.first_id + entries.times.len() as u64;
        entries.times.push_back(Vec::new());
        if entries.times.len() > self.capacity {
            entries.times.pop_front();
            entries.first_id += 1;
        }
        id
    }

    /// Records that request `id` wrote a token-bearing piece at `at_ns`; ignored once the
    /// entry has been dropped from the ring.
    pub fn record(&self, id: u64, at_ns: u64) {
        let mut entries = self.lock();
        let Some(index) = id.checked_sub(entries.first_id) else {
            return;
        };
        if let Some(times) = entries.times.get_mut(index as usize) {
            times.push(at_ns);
        }
    }

    /// The kept requests' send times, oldest request first.
    pub fn snapshot(&self) -> Vec<Vec<u64>> {
        self.lock().times.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_requests_in_order() {
        let log = TokenLog::new(2);
        assert!(log.snapshot().is_empty());
        let a = log.begin();
        let b = log.begin();
        log.record(b, 5);
        log.record(a, 1);
        log.record(a, 2);
        assert_eq!(log.snapshot(), vec![vec![1, 2], vec![5]]);
        let c = log.begin();
        // `a` fell out of the ring: its late chunks are dropped, not misfiled.
        log.record(a, 3);
        log.record(c, 7);
        assert_eq!(log.snapshot(), vec![vec![5], vec![7]]);
        assert_eq!((a, b, c), (0, 1, 2));
        log.record(99, 1);
        assert_eq!(log.snapshot().len(), 2);
    }
}
