//! A slot's hand-off of finished requests from Triton's callback threads to the worker: a
//! fixed ring of preallocated entries with one producer (the callbacks of the slot's
//! requests, which run one after another) and one consumer (the worker thread). Pushing and
//! popping are two atomic loads and one store; an entry's body buffer is swapped, never
//! copied or freed, so after warm-up nothing allocates.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::measure::RequestRecord;

/// Entries per slot: at most this many finished requests wait for the worker.
pub const RING_LEN: usize = 1024;

/// One finished request as the worker receives it.
#[derive(Debug, Default)]
pub struct Done {
    /// Times, step and response count; `ok` false when it failed.
    pub rec: RequestRecord,
    /// Outputs (the last response's, or every response framed; empty when not kept).
    pub body: Vec<u8>,
    /// Why the request failed.
    pub error: Option<String>,
    /// The callback sent the slot's next request right after this one (closed loop).
    pub chained: bool,
    /// Nothing of this slot is in the server any more: the worker owns the slot again.
    pub parked: bool,
}

/// Single-producer single-consumer ring of [`Done`] entries.
pub struct Ring {
    cells: Box<[UnsafeCell<Done>]>,
    /// Next entry to pop (written by the consumer only).
    head: AtomicUsize,
    /// Next entry to fill (written by the producer only).
    tail: AtomicUsize,
}

// SAFETY: a cell is touched either by the producer (between `tail` and `head + len`) or by
// the consumer (between `head` and `tail`), never by both: the Release stores of `tail` and
// `head` publish the entry to the other side, whose Acquire loads see it complete.
unsafe impl Sync for Ring {}

impl Default for Ring {
    fn default() -> Ring {
        Ring::new()
    }
}

impl Ring {
    pub fn new() -> Ring {
        Ring {
            cells: (0..RING_LEN).map(|_| UnsafeCell::default()).collect(),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
        }
    }

    /// Entries waiting (as the producer sees it: never more than the truth).
    pub fn len(&self) -> usize {
        let tail = self.tail.load(Ordering::Relaxed);
        tail.wrapping_sub(self.head.load(Ordering::Acquire))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Producer: fills the next entry with `fill` and publishes it; the number of entries
    /// then waiting, or `None` (and `fill` not called) when the ring is full.
    ///
    /// # Safety
    /// Only one thread at a time may push (the slot's callbacks are serialised).
    pub unsafe fn push(&self, fill: impl FnOnce(&mut Done)) -> Option<usize> {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        if tail.wrapping_sub(head) >= RING_LEN {
            return None;
        }
        fill(&mut *self.cells[tail % RING_LEN].get());
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(tail.wrapping_add(1).wrapping_sub(head))
    }

    /// Consumer: hands the oldest entry to `take` and frees it; false when empty.
    ///
    /// # Safety
    /// Only one thread at a time may pop (the owning worker).
    pub unsafe fn pop(&self, take: impl FnOnce(&mut Done)) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if head == self.tail.load(Ordering::Acquire) {
            return false;
        }
        take(&mut *self.cells[head % RING_LEN].get());
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_out_in_order_and_a_full_ring_refuses() {
        let ring = Ring::new();
        // SAFETY: one thread is both the producer and the consumer.
        unsafe {
            for i in 0..RING_LEN {
                let n = ring.push(|d| d.rec.step = i as u32);
                assert_eq!(n, Some(i + 1));
            }
            assert_eq!(ring.push(|_| unreachable!()), None);
            let mut seen = Vec::new();
            while ring.pop(|d| seen.push(d.rec.step)) {}
            assert_eq!(seen, (0..RING_LEN as u32).collect::<Vec<_>>());
            assert!(ring.is_empty());
        }
    }

    #[test]
    fn a_producer_thread_and_a_consumer_see_every_entry_once() {
        let ring = std::sync::Arc::new(Ring::new());
        let n = 20_000u32;
        let producer = {
            let ring = ring.clone();
            std::thread::spawn(move || {
                let mut i = 0;
                while i < n {
                    // SAFETY: this thread is the only producer.
                    let pushed = unsafe {
                        ring.push(|d| {
                            d.rec.step = i;
                            d.body.clear();
                            d.body.extend_from_slice(&i.to_le_bytes());
                        })
                    };
                    if pushed.is_some() {
                        i += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
            })
        };
        let mut next = 0u32;
        while next < n {
            // SAFETY: this thread is the only consumer.
            let got = unsafe {
                ring.pop(|d| {
                    assert_eq!(d.rec.step, next);
                    assert_eq!(d.body, next.to_le_bytes());
                })
            };
            if got {
                next += 1;
            } else {
                std::thread::yield_now();
            }
        }
        producer.join().unwrap();
    }
}
