//! Wall-clock nanoseconds from a monotonic source.
//!
//! perf_analyzer stamps requests with `system_clock` (ns since the Unix epoch) and the profile
//! export carries those values. One wall-clock reading at start plus monotonic elapsed time
//! gives the stamps, so timestamps are epoch-based but never jump with NTP adjustments.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base: Instant,
    base_wall_ns: u64,
}

impl Clock {
    pub fn new() -> Self {
        let base = Instant::now();
        let base_wall_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Clock { base, base_wall_ns }
    }

    /// Nanoseconds since the Unix epoch, monotonic within this process.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.base_wall_ns + self.base.elapsed().as_nanos() as u64
    }

    /// The wall-clock ns value that corresponds to `at`.
    #[inline]
    pub fn at_ns(&self, at: Instant) -> u64 {
        self.base_wall_ns + at.saturating_duration_since(self.base).as_nanos() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
