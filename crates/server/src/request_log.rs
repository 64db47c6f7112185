//! The request log: when each infer request arrived, per model, for tests that check what the
//! server observed (e.g. "the arrival rate is within 1 % of the target").
//!
//! One ring buffer per model behind its own mutex: a request costs one uncontended lock and
//! one store. Buffers grow on demand up to [`ARRIVALS_KEPT`] entries (8 MB per busy model) and
//! then overwrite the oldest, so a long-running `inferperf serve` stays bounded.

use std::sync::Mutex;

/// Arrivals kept per model; older ones are overwritten.
pub const ARRIVALS_KEPT: usize = 1 << 20;

#[derive(Debug, Default)]
struct Ring {
    /// Arrival times, ns; once full, `next` is the oldest entry.
    times: Vec<u64>,
    next: usize,
}

/// Arrival times (ns of the server's [`inferperf_wire::clock::Clock`]) of the infer requests per model.
#[derive(Debug)]
pub struct ArrivalLog {
    per_model: Vec<Mutex<Ring>>,
    capacity: usize,
}

impl ArrivalLog {
    /// A log for `models` models keeping the last `capacity` arrivals of each.
    pub fn new(models: usize, capacity: usize) -> ArrivalLog {
        ArrivalLog {
            per_model: (0..models).map(|_| Mutex::new(Ring::default())).collect(),
            capacity: capacity.max(1),
        }
    }

    fn ring(&self, model: usize) -> Option<std::sync::MutexGuard<'_, Ring>> {
        // A poisoned lock only means a panic elsewhere; the ring is still consistent.
        let slot = self.per_model.get(model)?;
        Some(slot.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Records one arrival of model `model` (index into `MODELS`) at `at_ns`.
    pub fn record(&self, model: usize, at_ns: u64) {
        let Some(mut ring) = self.ring(model) else {
            return;
        };
        if ring.times.len() < self.capacity {
            ring.times.push(at_ns);
            return;
        }
        let i = ring.next;
        ring.times[i] = at_ns;
        ring.next = (i + 1) % self.capacity;
    }

    /// The kept arrivals of `model`, oldest first (empty for an unknown index).
    pub fn arrivals(&self, model: usize) -> Vec<u64> {
        let Some(ring) = self.ring(model) else {
            return Vec::new();
        };
        let (newer, older) = ring.times.split_at(ring.next);
        let mut out = Vec::with_capacity(ring.times.len());
        out.extend_from_slice(older);
        out.extend_from_slice(newer);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_entries_in_order() {
        let log = ArrivalLog::new(2, 3);
        assert!(log.arrivals(0).is_empty());
        log.record(0, 10);
        log.record(0, 20);
        assert_eq!(log.arrivals(0), vec![10, 20]);
        for t in [30, 40, 50] {
            log.record(0, t);
        }
        assert_eq!(log.arrivals(0), vec![30, 40, 50]);
        log.record(0, 60);
        assert_eq!(log.arrivals(0), vec![40, 50, 60]);
        // Models are separate; unknown indices are ignored.
        log.record(1, 5);
        log.record(9, 5);
        assert_eq!(log.arrivals(1), vec![5]);
        assert!(log.arrivals(9).is_empty());
    }
}
