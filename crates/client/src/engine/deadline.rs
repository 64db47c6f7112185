//! Time limits on requests in flight, checked without a timer per request.
//!
//! A worker sweeps its connections every [`Deadlines::period_ns`] from the wake-ups it
//! already has (and a poll timeout while anything is in flight): each request (or connecting
//! socket) carries a [`Watch`] that remembers a mark of its progress (bytes read or written,
//! state, start time) and when that mark last changed. A request whose mark has not changed
//! for the limit has stalled: no response head, no further byte, no connect within the limit.
//! So a stall is found between the limit and the limit plus one period after its last
//! progress, and the hot path pays nothing but a compare per wake-up.

use std::time::Duration;

/// The default request timeout's floor (ns): 30 s.
pub const DEFAULT_FLOOR_NS: u64 = 30_000_000_000;
/// The default request timeout is this many times the slowest request completed so far.
pub const SLOWEST_FACTOR: u64 = 10;
/// Sweeps come at least this often (ns) and at most this often; between, a tenth of the limit.
const MIN_PERIOD_NS: u64 = 1_000_000;
const MAX_PERIOD_NS: u64 = 1_000_000_000;

/// A worker's request timeout: a given one, or the default that grows with the slowest
/// request completed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// `--request-timeout` (ns); `None`: max(30 s, 10x the slowest completed request).
    pub fixed_ns: Option<u64>,
}

impl Deadlines {
    pub fn new(fixed: Option<Duration>) -> Deadlines {
        Deadlines {
            fixed_ns: fixed.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)),
        }
    }

    /// The limit now, given the slowest successful request so far (ns).
    pub fn limit_ns(&self, slowest_ns: u64) -> u64 {
        self.fixed_ns
            .unwrap_or_else(|| DEFAULT_FLOOR_NS.max(slowest_ns.saturating_mul(SLOWEST_FACTOR)))
    }

    /// How often to sweep for a limit of `limit_ns`: a tenth of it, within 1 ms..1 s.
    pub fn period_ns(limit_ns: u64) -> u64 {
        (limit_ns / 10).clamp(MIN_PERIOD_NS, MAX_PERIOD_NS)
    }
}

/// What a stalled request was waiting for, for its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    Connecting,
    /// The request could not be written (the server does not read).
    Sending,
    Head,
    Body,
    /// gRPC: the response headers or first message.
    FirstResponse,
    /// gRPC: the rest of a response (streaming: the next response).
    NextResponse,
}

impl Waiting {
    fn text(self) -> &'static str {
        match self {
            Waiting::Connecting => "connecting",
            Waiting::Sending => "waiting to send the request",
            Waiting::Head => "waiting for the response head",
            Waiting::Body => "waiting for the rest of the response body",
            Waiting::FirstResponse => "waiting for the first response",
            Waiting::NextResponse => "waiting for the rest of the response",
        }
    }
}

/// "timed out after 30 s waiting for the response head".
pub fn timeout_message(limit_ns: u64, waiting: Waiting) -> String {
    let secs = Duration::from_nanos(limit_ns).as_secs_f64();
    format!("timed out after {secs} s {}", waiting.text())
}

/// One request's (or socket's) progress as the sweeps saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watch {
    mark: u64,
    since_ns: u64,
}

impl Watch {
    /// At a sweep at `now_ns`: true when `mark` has not changed for `limit_ns`. A new mark
    /// restarts the wait from now.
    pub fn stalled(&mut self, mark: u64, now_ns: u64, limit_ns: u64) -> bool {
        if mark != self.mark || self.since_ns == 0 {
            self.mark = mark;
            self.since_ns = now_ns;
            return false;
        }
        now_ns.saturating_sub(self.since_ns) >= limit_ns
    }

    /// Forgets the progress seen (the request ended or the socket was replaced).
    pub fn reset(&mut self) {
        *self = Watch::default();
    }
}

/// A mark of progress from a few counters: any change in one changes the mark.
#[inline]
pub fn mark(parts: [u64; 4]) -> u64 {
    parts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &p| {
        (h ^ p).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_grows_with_the_slowest_request() {
        let d = Deadlines::new(None);
        assert_eq!(d.limit_ns(0), DEFAULT_FLOOR_NS);
        assert_eq!(d.limit_ns(1_000_000_000), DEFAULT_FLOOR_NS);
        assert_eq!(d.limit_ns(5_000_000_000), 50_000_000_000);
        assert_eq!(d.limit_ns(u64::MAX), u64::MAX);
        let given = Deadlines::new(Some(Duration::from_millis(300)));
        assert_eq!(given.limit_ns(100_000_000_000), 300_000_000, "used exactly");
        assert_eq!(Deadlines::period_ns(300_000_000), 30_000_000);
        assert_eq!(Deadlines::period_ns(1), MIN_PERIOD_NS);
        assert_eq!(Deadlines::period_ns(DEFAULT_FLOOR_NS), MAX_PERIOD_NS);
    }

    #[test]
    fn a_watch_fires_only_after_the_limit_without_progress() {
        let mut w = Watch::default();
        assert!(!w.stalled(7, 100, 50), "first sight starts the wait");
        assert!(!w.stalled(7, 149, 50));
        assert!(!w.stalled(8, 160, 50), "progress restarts it");
        assert!(!w.stalled(8, 209, 50));
        assert!(w.stalled(8, 210, 50));
        w.reset();
        assert!(!w.stalled(8, 300, 50));
    }

    #[test]
    fn messages_name_the_limit_and_the_wait() {
        assert_eq!(
            timeout_message(30_000_000_000, Waiting::Head),
            "timed out after 30 s waiting for the response head"
        );
        assert_eq!(
            timeout_message(300_000_000, Waiting::Body),
            "timed out after 0.3 s waiting for the rest of the response body"
        );
        assert_eq!(
            timeout_message(1_500_000_000, Waiting::Connecting),
            "timed out after 1.5 s connecting"
        );
        assert_ne!(mark([1, 2, 3, 4]), mark([1, 2, 3, 5]));
        assert_ne!(mark([0, 0, 0, 1]), mark([0, 0, 1, 0]));
    }
}
