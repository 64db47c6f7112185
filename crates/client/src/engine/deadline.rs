//! Time limits on requests in flight, checked without a timer per request.
//!
//! Each request has two limits: an idle limit (no byte moved for that long) and a total limit
//! (from its start to its last byte; a stream's whole stream). A worker sweeps its
//! connections every [`Sweep::period_ns`] from the wake-ups it already has (and a poll
//! timeout while anything is in flight): each request (or connecting socket) carries a
//! [`Watch`] that remembers a mark of its progress (bytes read or written, state, start time)
//! and when that mark last changed. A request whose mark has not changed for the idle limit
//! has stalled: no response head, no further byte, no connect within the limit; one that
//! started the total limit ago has run too long, however steadily its bytes drip. So a limit
//! fires between its time and its time plus one period, and the hot path pays nothing but a
//! compare per wake-up.

use std::time::Duration;

/// The default idle limit's floor (ns): 30 s.
pub const DEFAULT_IDLE_FLOOR_NS: u64 = 30_000_000_000;
/// The default total limit's floor (ns): 10 min.
pub const DEFAULT_TOTAL_FLOOR_NS: u64 = 600_000_000_000;
/// A default limit is this many times the slowest request completed so far.
pub const SLOWEST_FACTOR: u64 = 10;
/// The flag that sets the idle limit, named when it fires.
pub const IDLE_FLAG: &str = "--request-idle-timeout";
/// The flag that sets the total limit in perf_analyzer mode.
pub const TOTAL_FLAG: &str = "--request-timeout";
/// Sweeps come at least this often (ns) and at most this often; between, a tenth of the
/// shorter limit.
const MIN_PERIOD_NS: u64 = 1_000_000;
const MAX_PERIOD_NS: u64 = 1_000_000_000;

/// A run's two limits on each request as given; `None`: the default, which grows with the
/// slowest request completed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// From the request's start to its last byte (a stream: the whole stream); `None`:
    /// max(10 min, 10x the slowest completed request).
    pub total: Option<Duration>,
    /// With no byte moved (or a connect not finished); `None`: max(30 s, 10x the slowest
    /// completed request).
    pub idle: Option<Duration>,
    /// The flag that set `total`, named when it fires.
    pub total_flag: &'static str,
}

impl Default for RequestLimits {
    fn default() -> RequestLimits {
        RequestLimits {
            total: None,
            idle: None,
            total_flag: TOTAL_FLAG,
        }
    }
}

/// A worker's request limits: the given ones, or the defaults that grow with the slowest
/// request completed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    total_ns: Option<u64>,
    idle_ns: Option<u64>,
    total_flag: &'static str,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

impl Deadlines {
    /// `idle_default` replaces the default idle limit (session turns: their source's).
    pub fn new(limits: RequestLimits, idle_default: Option<Duration>) -> Deadlines {
        Deadlines {
            total_ns: limits.total.map(nanos),
            idle_ns: limits.idle.or(idle_default).map(nanos),
            total_flag: limits.total_flag,
        }
    }

    /// The idle limit now, given the slowest successful request so far (ns).
    pub fn idle_ns(&self, slowest_ns: u64) -> u64 {
        self.idle_ns
            .unwrap_or_else(|| grown(DEFAULT_IDLE_FLOOR_NS, slowest_ns))
    }

    /// The total limit now, given the slowest successful request so far (ns).
    pub fn total_ns(&self, slowest_ns: u64) -> u64 {
        self.total_ns
            .unwrap_or_else(|| grown(DEFAULT_TOTAL_FLOOR_NS, slowest_ns))
    }

    /// The limits of a sweep at `now_ns`.
    pub fn sweep(&self, now_ns: u64, slowest_ns: u64) -> Sweep {
        Sweep {
            now_ns,
            idle_ns: self.idle_ns(slowest_ns),
            total_ns: self.total_ns(slowest_ns),
            total_flag: self.total_flag,
        }
    }
}

/// max(`floor`, 10x the slowest request).
fn grown(floor: u64, slowest_ns: u64) -> u64 {
    floor.max(slowest_ns.saturating_mul(SLOWEST_FACTOR))
}

/// Which limit a request ran past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No byte moved for the idle limit.
    Idle,
    /// The total limit passed since the request started.
    Total,
}

/// What a request had received when its limit fired, for its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Response bytes (head included).
    Bytes(u64),
    /// Responses of a stream.
    Responses(u32),
    /// Nothing worth counting (a unary gRPC call: its one message completes it).
    Uncounted,
}

/// One sweep: when it runs and the limits in force (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    pub now_ns: u64,
    pub idle_ns: u64,
    pub total_ns: u64,
    pub total_flag: &'static str,
}

impl Sweep {
    /// How often to sweep: a tenth of the shorter limit, within 1 ms..1 s.
    pub fn period_ns(&self) -> u64 {
        (self.idle_ns.min(self.total_ns) / 10).clamp(MIN_PERIOD_NS, MAX_PERIOD_NS)
    }

    /// Which limit the request (or connect) that `watch` follows has run past, if any: the
    /// total since `start_ns` (`None`: no request, only a connect) first, then the idle time
    /// since `mark` last changed.
    pub fn over(&self, watch: &mut Watch, mark: u64, start_ns: Option<u64>) -> Option<Limit> {
        let stalled = watch.stalled(mark, self.now_ns, self.idle_ns);
        if start_ns.is_some_and(|s| self.over_total(s)) {
            Some(Limit::Total)
        } else if stalled {
            Some(Limit::Idle)
        } else {
            None
        }
    }

    /// A request that started at `start_ns` has run past the total limit.
    pub fn over_total(&self, start_ns: u64) -> bool {
        self.now_ns.saturating_sub(start_ns) >= self.total_ns
    }

    /// The failure message of `limit`: which limit, its flag, what the request waited for
    /// and (total) what it had received.
    pub fn message(&self, limit: Limit, waiting: Waiting, received: Received) -> String {
        match limit {
            Limit::Idle => timeout_message(self.idle_ns, waiting),
            Limit::Total => {
                let secs = Duration::from_nanos(self.total_ns).as_secs_f64();
                let flag = self.total_flag;
                let got = match received {
                    Received::Bytes(n) => format!(", {} bytes received", grouped(n)),
                    Received::Responses(n) => format!(", {} responses received", grouped(n.into())),
                    Received::Uncounted => String::new(),
                };
                format!(
                    "timed out after {secs} s in total ({flag}) {}{got}",
                    waiting.text()
                )
            }
        }
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

/// The idle limit's message: "timed out after 30 s idle (--request-idle-timeout) waiting for
/// the response head".
pub fn timeout_message(limit_ns: u64, waiting: Waiting) -> String {
    let secs = Duration::from_nanos(limit_ns).as_secs_f64();
    format!(
        "timed out after {secs} s idle ({IDLE_FLAG}) {}",
        waiting.text()
    )
}

/// `n` with a comma between groups of three digits ("1,234").
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
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

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    #[test]
    fn the_default_limits_grow_with_the_slowest_request() {
        let d = Deadlines::new(RequestLimits::default(), None);
        assert_eq!(d.idle_ns(0), DEFAULT_IDLE_FLOOR_NS);
        assert_eq!(d.idle_ns(S), DEFAULT_IDLE_FLOOR_NS);
        assert_eq!(d.idle_ns(5 * S), 50 * S);
        assert_eq!(d.idle_ns(u64::MAX), u64::MAX);
        assert_eq!(d.total_ns(0), DEFAULT_TOTAL_FLOOR_NS);
        assert_eq!(d.total_ns(100 * S), 1000 * S);
        let given = RequestLimits {
            total: Some(Duration::from_secs(2)),
            idle: Some(Duration::from_millis(300)),
            total_flag: "--request-timeout-seconds",
        };
        let d = Deadlines::new(given, Some(Duration::from_secs(600)));
        let sweep = d.sweep(7, 100 * S);
        assert_eq!(
            (sweep.idle_ns, sweep.total_ns),
            (300 * MS, 2 * S),
            "used exactly"
        );
        assert_eq!(sweep.period_ns(), 30 * MS, "a tenth of the shorter limit");
        // A session source's idle limit replaces the default, not a given one.
        let turns = Deadlines::new(RequestLimits::default(), Some(Duration::from_secs(600)));
        assert_eq!(turns.idle_ns(0), 600 * S);
        let tiny = Sweep {
            idle_ns: 1,
            ..sweep
        };
        assert_eq!(tiny.period_ns(), MIN_PERIOD_NS);
        assert_eq!(d.sweep(0, 0).period_ns(), 30 * MS);
        let defaults = Deadlines::new(RequestLimits::default(), None).sweep(0, 0);
        assert_eq!(defaults.period_ns(), MAX_PERIOD_NS);
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

    /// A sweep at `now_ns` with a 50 ns idle and a 200 ns total limit.
    fn at(now_ns: u64) -> Sweep {
        Sweep {
            now_ns,
            idle_ns: 50,
            total_ns: 200,
            total_flag: TOTAL_FLAG,
        }
    }

    #[test]
    fn the_total_limit_fires_however_steady_the_progress() {
        let mut w = Watch::default();
        // A byte between every two sweeps: never idle, but over the total at 200 ns.
        for (now, mark) in [(100, 1), (140, 2), (180, 3), (299, 4)] {
            assert_eq!(at(now).over(&mut w, mark, Some(100)), None, "at {now}");
        }
        assert_eq!(at(300).over(&mut w, 5, Some(100)), Some(Limit::Total));
        // Both run out at once: the total is named.
        let mut w = Watch::default();
        assert_eq!(at(100).over(&mut w, 1, Some(100)), None);
        assert_eq!(at(300).over(&mut w, 1, Some(100)), Some(Limit::Total));
        // Idle first; a connect (no request) has no total.
        let mut w = Watch::default();
        assert_eq!(at(100).over(&mut w, 1, Some(100)), None);
        assert_eq!(at(150).over(&mut w, 1, Some(100)), Some(Limit::Idle));
        let mut w = Watch::default();
        assert_eq!(at(0).over(&mut w, 1, None), None);
        assert_eq!(at(10_000).over(&mut w, 2, None), None);
        assert_eq!(at(10_050).over(&mut w, 2, None), Some(Limit::Idle));
    }

    #[test]
    fn messages_name_the_limit_its_flag_and_the_wait() {
        assert_eq!(
            timeout_message(30 * S, Waiting::Head),
            "timed out after 30 s idle (--request-idle-timeout) waiting for the response head"
        );
        assert_eq!(
            timeout_message(1_500 * MS, Waiting::Connecting),
            "timed out after 1.5 s idle (--request-idle-timeout) connecting"
        );
        let sweep = Sweep {
            now_ns: 0,
            idle_ns: 300 * MS,
            total_ns: 10 * S,
            total_flag: "--request-timeout-seconds",
        };
        assert_eq!(
            sweep.message(Limit::Total, Waiting::Body, Received::Bytes(1234)),
            "timed out after 10 s in total (--request-timeout-seconds) waiting for the rest of \
             the response body, 1,234 bytes received"
        );
        assert_eq!(
            sweep.message(Limit::Total, Waiting::NextResponse, Received::Responses(3)),
            "timed out after 10 s in total (--request-timeout-seconds) waiting for the rest of \
             the response, 3 responses received"
        );
        assert_eq!(
            sweep.message(Limit::Total, Waiting::FirstResponse, Received::Uncounted),
            "timed out after 10 s in total (--request-timeout-seconds) waiting for the first \
             response"
        );
        assert_eq!(
            sweep.message(Limit::Idle, Waiting::Body, Received::Bytes(9)),
            "timed out after 0.3 s idle (--request-idle-timeout) waiting for the rest of the \
             response body"
        );
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(12_345_678), "12,345,678");
        assert_ne!(mark([1, 2, 3, 4]), mark([1, 2, 3, 5]));
        assert_ne!(mark([0, 0, 0, 1]), mark([0, 0, 1, 0]));
    }
}
