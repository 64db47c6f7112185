//! The fake LLM's load for the `/metrics` pages: generation requests in flight and ended,
//! and their tokens, counted by every front end (HTTP and gRPC) with one guard per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The fake LLM's load, counted by every front end (HTTP and gRPC).
#[derive(Debug, Default)]
pub struct LlmLoad {
    started: AtomicU64,
    ended: AtomicU64,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
}

/// A generation request in flight; dropping it (answer released, or connection gone) ends it.
#[derive(Debug)]
pub struct InFlight(Arc<LlmLoad>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::Relaxed);
    }
}

impl LlmLoad {
    /// A generation request is admitted: its tokens count from now (as vLLM counts prompt
    /// tokens at prefill).
    pub fn admit(&self, prompt_tokens: u64, generation_tokens: u64) {
        self.prompt_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        self.generation_tokens
            .fetch_add(generation_tokens, Ordering::Relaxed);
    }

    /// A generation request is in flight until the guard drops.
    pub fn enter(self: &Arc<Self>) -> InFlight {
        self.started.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }

    /// The counters now.
    pub fn snapshot(&self) -> LlmCounts {
        // `ended` first: a request that ends between the two loads is never negative.
        let ended = self.ended.load(Ordering::Relaxed);
        let started = self.started.load(Ordering::Relaxed);
        LlmCounts {
            running: started.saturating_sub(ended),
            ended,
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            generation_tokens: self.generation_tokens.load(Ordering::Relaxed),
        }
    }
}

/// One reading of [`LlmLoad`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LlmCounts {
    pub running: u64,
    pub ended: u64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_guards_count_running_and_ended() {
        let load = Arc::new(LlmLoad::default());
        load.admit(10, 4);
        let a = load.enter();
        load.admit(20, 8);
        let b = load.enter();
        let now = load.snapshot();
        assert_eq!((now.running, now.ended), (2, 0));
        assert_eq!((now.prompt_tokens, now.generation_tokens), (30, 12));
        drop(a);
        assert_eq!((load.snapshot().running, load.snapshot().ended), (1, 1));
        drop(b);
        assert_eq!((load.snapshot().running, load.snapshot().ended), (0, 2));
    }
}
