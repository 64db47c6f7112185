//! The token send log: for each OpenAI generation request, when the server wrote each of its
//! token-bearing pieces (content chunks of a stream, or the whole non-streaming response), so
//! tests can compare what a client measured with what the server did.
//!
//! A ring of the last [`TOKEN_LOG_REQUESTS`] requests behind one mutex: each request costs a
//! lock to open its entry and one per chunk; streams are paced in ms, so it is uncontended.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Requests whose send times are kept; older ones are dropped.
pub const TOKEN_LOG_REQUESTS: usize = 16_384;

#[derive(Debug, Default)]
struct Entries {
    /// Id of `times.front()`; ids are handed out consecutively, so entry `id` sits at
    /// index `id - first_id`.
    first_id: u64,
    /// Per request, per piece: [paced for, written at] (ns).
    times: VecDeque<Vec<[u64; 2]>>,
    /// Per request, when its entry was opened (the request was read and parsed).
    began: VecDeque<Instant>,
}

/// Send times (ns of the server's [`inferperf_wire::clock::Clock`]) per generation request.
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

    /// Opens the entry of a new request (read and parsed now) and returns its id.
    pub fn begin(&self) -> u64 {
        let now = Instant::now();
        let mut entries = self.lock();
        let id = entries.first_id + entries.times.len() as u64;
        entries.times.push_back(Vec::new());
        entries.began.push_back(now);
        if entries.times.len() > self.capacity {
            entries.times.pop_front();
            entries.began.pop_front();
            entries.first_id += 1;
        }
        id
    }

    /// When the kept requests' entries were opened, oldest request first (the order of
    /// [`TokenLog::snapshot`]).
    pub fn began(&self) -> Vec<Instant> {
        self.lock().began.iter().copied().collect()
    }

    /// Records that request `id` wrote a token-bearing piece at `at_ns`; ignored once the
    /// entry has been dropped from the ring.
    pub fn record(&self, id: u64, at_ns: u64) {
        self.record_paced(id, at_ns, at_ns);
    }

    /// Like [`TokenLog::record`] for a paced piece: the time it was due (`paced_ns`, the
    /// loop turn that released it) and when this connection's turn came to write it
    /// (`written_ns`), which is later when one turn writes many streams.
    pub fn record_paced(&self, id: u64, paced_ns: u64, written_ns: u64) {
        let mut entries = self.lock();
        let Some(index) = id.checked_sub(entries.first_id) else {
            return;
        };
        if let Some(times) = entries.times.get_mut(index as usize) {
            times.push([paced_ns, written_ns]);
        }
    }

    /// The kept requests' send times (when each piece was due), oldest request first.
    pub fn snapshot(&self) -> Vec<Vec<u64>> {
        self.column(0)
    }

    /// The kept requests' write times (when each piece was handed to the socket).
    pub fn written(&self) -> Vec<Vec<u64>> {
        self.column(1)
    }

    fn column(&self, k: usize) -> Vec<Vec<u64>> {
        let entries = self.lock();
        entries
            .times
            .iter()
            .map(|t| t.iter().map(|p| p[k]).collect())
            .collect()
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
        let began = log.began();
        assert_eq!(
            began.len(),
            2,
            "begin times leave the ring with their entries"
        );
        assert!(began[0] <= began[1]);
        log.record(99, 1);
        assert_eq!(log.snapshot().len(), 2);
        log.record_paced(c, 8, 11);
        assert_eq!(log.snapshot(), vec![vec![5], vec![7, 8]]);
        assert_eq!(log.written(), vec![vec![5], vec![7, 11]]);
    }
}
