//! `profile --prefill-concurrency N` (AIPerf's flag): at most N requests, over all workers,
//! are in their prefill phase at once, that is sent and still waiting for their first
//! output token. A request takes a slot of the run's [`PrefillGate`] before it is sent and
//! gives it back at the first event of its stream that carries output text, or when it ends
//! in any other way (completed without such an event, failed, timed out, cancelled).
//!
//! A worker that finds every slot taken leaves its next request unsent and registers its
//! waker; the worker that gives a slot back wakes the waiting ones, which try again on that
//! wake-up. Nothing spins, and a run without the flag has no gate: no atomic is touched on
//! its per-request path.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mio::Waker;

/// The prefill cap of an engine, as its [`super::EngineSpec`] gives it.
#[derive(Clone, Copy, Debug)]
pub struct PrefillCap {
    /// Requests in prefill at once, at most (at least 1).
    pub limit: usize,
    /// Whether one event's data (an SSE `data:` payload) carries output text: the request's
    /// first token has arrived and its slot is given back.
    pub is_token: fn(&[u8]) -> bool,
}

/// The slots shared by every worker of one engine.
pub struct PrefillGate {
    /// Slots not taken.
    free: AtomicUsize,
    limit: usize,
    /// Workers waiting for a slot: (worker index, its waker); `waiting` is its length.
    waiters: Mutex<Vec<(usize, Arc<Waker>)>>,
    waiting: AtomicUsize,
}

impl PrefillGate {
    pub fn new(limit: usize) -> PrefillGate {
        let limit = limit.max(1);
        PrefillGate {
            free: AtomicUsize::new(limit),
            limit,
            waiters: Mutex::new(Vec::new()),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Takes a slot if one is free.
    pub fn try_take(&self) -> bool {
        self.free
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1))
            .is_ok()
    }

    /// Takes a slot for `worker`; when none is free, `waker` is woken once one is given back
    /// (the caller tries again on that wake-up) and false is returned.
    pub fn take_or_wait(&self, worker: usize, waker: &Arc<Waker>) -> bool {
        if self.try_take() {
            return true;
        }
        if let Ok(mut w) = self.waiters.lock() {
            if !w.iter().any(|(i, _)| *i == worker) {
                w.push((worker, waker.clone()));
                self.waiting.store(w.len(), Ordering::SeqCst);
            }
        }
        // A slot given back between the first try and the registration woke nobody: try
        // once more (the registration stays; a spare wake-up costs one empty loop turn).
        self.try_take()
    }

    /// Gives a slot back and wakes the workers waiting for one.
    pub fn give_back(&self) {
        let before = self.free.fetch_add(1, Ordering::SeqCst);
        debug_assert!(before < self.limit, "prefill slot given back twice");
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let woken = match self.waiters.lock() {
            Ok(mut w) => {
                self.waiting.store(0, Ordering::SeqCst);
                std::mem::take(&mut *w)
            }
            Err(_) => return,
        };
        for (_, waker) in woken {
            let _ = waker.wake();
        }
    }

    /// Slots taken now.
    pub fn taken(&self) -> usize {
        self.limit - self.free.load(Ordering::SeqCst).min(self.limit)
    }
}

/// One worker's view of the gate: the gate, the worker's index and its event loop's waker.
#[derive(Clone)]
pub struct PrefillShare {
    pub gate: Arc<PrefillGate>,
    pub is_token: fn(&[u8]) -> bool,
    worker: usize,
    waker: Arc<Waker>,
}

impl PrefillShare {
    pub fn new(
        gate: Arc<PrefillGate>,
        is_token: fn(&[u8]) -> bool,
        worker: usize,
        waker: Arc<Waker>,
    ) -> Self {
        PrefillShare {
            gate,
            is_token,
            worker,
            waker,
        }
    }

    /// Takes a slot for the next send; false when none is free (this worker is woken when
    /// one is given back).
    #[inline]
    pub fn take(&self) -> bool {
        self.gate.take_or_wait(self.worker, &self.waker)
    }

    #[inline]
    pub fn give_back(&self) {
        self.gate.give_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::time::Duration;

    fn loop_with_waker() -> (Poll, Arc<Waker>) {
        let poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), Token(7)).unwrap());
        (poll, waker)
    }

    /// Whether the loop has a wake-up pending (without waiting for one).
    fn woken(poll: &mut Poll) -> bool {
        let mut events = Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        events.iter().any(|e| e.token() == Token(7))
    }

    #[test]
    fn at_most_limit_slots_are_taken() {
        let gate = PrefillGate::new(2);
        assert!(gate.try_take());
        assert!(gate.try_take());
        assert!(!gate.try_take(), "a third slot of two");
        assert_eq!(gate.taken(), 2);
        gate.give_back();
        assert_eq!(gate.taken(), 1);
        assert!(gate.try_take());
        assert!(!gate.try_take());
        gate.give_back();
        gate.give_back();
        assert_eq!(gate.taken(), 0);
        assert_eq!(
            PrefillGate::new(0).limit,
            1,
            "a limit of 0 would stall every send"
        );
    }

    #[test]
    fn a_waiting_worker_is_woken_when_a_slot_is_given_back() {
        let gate = Arc::new(PrefillGate::new(1));
        let (mut poll_a, waker_a) = loop_with_waker();
        let (mut poll_b, waker_b) = loop_with_waker();
        let a = PrefillShare::new(gate.clone(), |_| true, 0, waker_a);
        let b = PrefillShare::new(gate.clone(), |_| true, 1, waker_b);
        assert!(a.take());
        // B finds the gate full, twice: it is registered once, and nobody is woken yet.
        assert!(!b.take());
        assert!(!b.take());
        assert_eq!(gate.waiters.lock().unwrap().len(), 1);
        assert!(!woken(&mut poll_b));
        a.give_back();
        assert!(woken(&mut poll_b), "B waits for the slot A gave back");
        assert!(!woken(&mut poll_a), "A did not wait");
        assert!(gate.waiters.lock().unwrap().is_empty());
        assert!(b.take(), "B takes the slot on its wake-up");
        // Nobody waits: giving back wakes nobody.
        b.give_back();
        assert!(!woken(&mut poll_a) && !woken(&mut poll_b));
    }

    #[test]
    fn threads_never_hold_more_than_the_limit() {
        let gate = Arc::new(PrefillGate::new(3));
        let peak = Arc::new(AtomicUsize::new(0));
        let held = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let (gate, peak, held) = (gate.clone(), peak.clone(), held.clone());
                std::thread::spawn(move || {
                    let mut done = 0;
                    while done < 2000 {
                        if !gate.try_take() {
                            std::thread::yield_now();
                            continue;
                        }
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        held.fetch_sub(1, Ordering::SeqCst);
                        gate.give_back();
                        done += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let peak = peak.load(Ordering::SeqCst);
        assert!((1..=3).contains(&peak), "peak {peak}");
        assert_eq!(gate.taken(), 0, "every slot came back");
    }
}
