//! What tests of load shapes need to see on the server side: how many streams are
//! generating at once (and an optional slow-down above a number of them, so a goodput limit
//! has a known breaking point), how many streams the client abandoned before their end, and,
//! when asked, the request bodies received.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Request bodies kept at most (the oldest are dropped).
const BODIES_KEPT: usize = 4096;

/// Above `streams` streams generating at once, a new stream's first token comes `extra`
/// later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy {
    pub streams: u64,
    pub extra_ttft: Duration,
}

/// Counters shared by every server thread.
#[derive(Debug, Default)]
pub struct LoadWatch {
    active: AtomicU64,
    abandoned: AtomicU64,
    /// `Some` when bodies are kept (`OpenAiConfig::keep_bodies`).
    bodies: Option<Mutex<VecDeque<Vec<u8>>>>,
}

impl LoadWatch {
    pub fn new(keep_bodies: bool) -> LoadWatch {
        LoadWatch {
            bodies: keep_bodies.then(Mutex::default),
            ..LoadWatch::default()
        }
    }

    /// Keeps a copy of a generation request's body, when bodies are kept.
    pub fn keep_body(&self, body: &[u8]) {
        if let Some(bodies) = &self.bodies {
            let mut b = bodies.lock().unwrap_or_else(|e| e.into_inner());
            if b.len() == BODIES_KEPT {
                b.pop_front();
            }
            b.push_back(body.to_vec());
        }
    }

    /// The bodies kept, oldest first.
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        self.bodies.as_ref().map_or_else(Vec::new, |b| {
            b.lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect()
        })
    }

    /// Streams ended by the client (connection closed) before their last event.
    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// Streams generating now.
    pub fn active(&self) -> u64 {
        self.active.load(Ordering::Relaxed)
    }
}

/// One generating stream, counted from its start until it finishes or is dropped.
#[derive(Debug)]
pub struct StreamGuard {
    watch: Arc<LoadWatch>,
    finished: bool,
}

impl StreamGuard {
    /// Counts a new stream; returns the guard and how many streams generate now, this one
    /// included.
    pub fn enter(watch: &Arc<LoadWatch>) -> (StreamGuard, u64) {
        let now = watch.active.fetch_add(1, Ordering::Relaxed) + 1;
        let guard = StreamGuard {
            watch: Arc::clone(watch),
            finished: false,
        };
        (guard, now)
    }

    /// The stream wrote its last event: no longer generating (before the bytes leave, so a
    /// closed-loop client's next request never sees it still counted).
    pub fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.watch.active.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.watch.abandoned.fetch_add(1, Ordering::Relaxed);
            self.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_counted_and_abandoned_ones_told_apart() {
        let watch = Arc::new(LoadWatch::new(true));
        let (mut a, n) = StreamGuard::enter(&watch);
        assert_eq!(n, 1);
        let (b, n) = StreamGuard::enter(&watch);
        assert_eq!(n, 2);
        a.finish();
        drop(a);
        assert_eq!((watch.active(), watch.abandoned()), (1, 0));
        drop(b);
        assert_eq!((watch.active(), watch.abandoned()), (0, 1));
        watch.keep_body(b"{}");
        assert_eq!(watch.bodies(), vec![b"{}".to_vec()]);
        assert!(LoadWatch::new(false).bodies().is_empty());
    }
}
