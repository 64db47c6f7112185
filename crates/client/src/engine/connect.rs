//! Closed loop: every connection a worker needs is open before the clock starts.
//!
//! A worker opens its connections at most [`MAX_OUTSTANDING`] at a time (a connect is
//! outstanding from its `connect` call until the pool reports it connected), so thousands of
//! streams never flood the server's listen queue, whose overflow drops handshakes that the
//! client then retries a second later, inside the measured time. Each worker reports how long
//! its connects took ([`ConnectReport`]); the engine waits for every report, then lets the
//! workers send. The connect times are reported apart ([`ConnectSummary::line`]), never as
//! part of a request's latency.

use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use mio::{Events, Poll};

use super::pool::{Cx, Feed, Pool, Ready, Sink};
use super::worker::{Command, WAKE};
use crate::clock::Clock;
use crate::measure::FailKind;

/// Connects one worker has outstanding at most.
pub const MAX_OUTSTANDING: usize = 128;
/// The longest wait in one poll while connecting (so Ctrl-C and the deadline are seen).
const POLL_SLICE: Duration = Duration::from_millis(100);

/// One worker's connects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectReport {
    /// Connections the worker needed.
    pub planned: usize,
    /// How long each connection that opened took (ns), in the order they opened.
    pub times_ns: Vec<u64>,
    /// From the first connect to the last connection open (ns).
    pub elapsed_ns: u64,
    /// Why the worker stopped short of `planned`.
    pub error: Option<String>,
}

impl ConnectReport {
    pub fn opened(&self) -> usize {
        self.times_ns.len()
    }
}

/// Paces connects: at most `limit` outstanding, and the time each one took.
#[derive(Debug)]
pub struct Pacer {
    limit: usize,
    planned: usize,
    /// Connections opened so far (tokens 0..next, in the pool's order).
    next: usize,
    /// Clock ns each outstanding connect started; 0 once done.
    started_ns: Vec<u64>,
    outstanding: usize,
    first_ns: u64,
    last_ns: u64,
    times_ns: Vec<u64>,
}

impl Pacer {
    pub fn new(planned: usize, limit: usize) -> Pacer {
        Pacer {
            limit: limit.max(1),
            planned,
            next: 0,
            started_ns: vec![0; planned],
            outstanding: 0,
            first_ns: 0,
            last_ns: 0,
            times_ns: Vec::with_capacity(planned),
        }
    }

    /// Opens connections with `open` (which returns the new one's token) until `limit` are
    /// outstanding or all are open.
    pub fn open_more(
        &mut self,
        now_ns: u64,
        mut open: impl FnMut() -> Result<usize, String>,
    ) -> Result<(), String> {
        while self.next < self.planned && self.outstanding < self.limit {
            let token = open()?;
            if self.first_ns == 0 {
                self.first_ns = now_ns;
            }
            if let Some(at) = self.started_ns.get_mut(token) {
                *at = now_ns.max(1);
                self.outstanding += 1;
            }
            self.next += 1;
        }
        Ok(())
    }

    /// Connection `token` had an event; `connected`: it is open now.
    pub fn seen(&mut self, token: usize, connected: bool, now_ns: u64) {
        let Some(at) = self.started_ns.get_mut(token) else {
            return;
        };
        if *at == 0 || !connected {
            return;
        }
        self.times_ns.push(now_ns.saturating_sub(*at));
        *at = 0;
        self.outstanding -= 1;
        self.last_ns = now_ns;
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Every planned connection is open.
    pub fn done(&self) -> bool {
        self.times_ns.len() == self.planned
    }

    pub fn report(self, error: Option<String>) -> ConnectReport {
        ConnectReport {
            planned: self.planned,
            elapsed_ns: self.last_ns.saturating_sub(self.first_ns),
            times_ns: self.times_ns,
            error,
        }
    }
}

/// What a worker lends [`establish`].
pub struct Parts<'a, P: Pool> {
    pub pool: &'a mut P,
    pub poll: &'a mut Poll,
    pub clock: &'a Clock,
    pub feed: &'a mut Feed,
    pub sink: &'a mut Sink,
}

/// Opens the pool's planned connections, paced, and waits until all are open, one has failed
/// (its failure is in the sink, as any connect failure), `limit` has passed or the user
/// pressed Ctrl-C. `None`: the engine told the worker to stop meanwhile.
pub fn establish<P: Pool>(
    mut p: Parts<'_, P>,
    commands: &Receiver<Command>,
    limit: Duration,
) -> Option<ConnectReport> {
    let planned = p.pool.planned();
    if planned == 0 {
        // Nothing to pace (the C API has no connection): the pool opens what it has.
        if let Err(msg) = p.pool.open(p.poll.registry()) {
            p.sink.fail(FailKind::Connect, msg);
        }
        return Some(ConnectReport::default());
    }
    let mut pacer = Pacer::new(planned, MAX_OUTSTANDING);
    let fails_before = p.sink.tally.total();
    let deadline = Instant::now() + limit;
    let mut events = Events::with_capacity(1024);
    let error = loop {
        let registry = p.poll.registry();
        let pool = &mut *p.pool;
        if let Err(msg) = pacer.open_more(p.clock.now_ns(), || pool.open_next(registry)) {
            p.sink.fail(FailKind::Connect, msg.clone());
            p.sink.failed = true;
            break Some(msg);
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            let msg = format!("not connected within {} s", limit.as_secs_f64());
            p.sink.fail(FailKind::Timeout, msg.clone());
            p.sink.failed = true;
            break Some(msg);
        }
        if crate::signal::interrupted() {
            // The run is ending: what is open carries on until the coordinator stops it.
            break None;
        }
        if let Err(e) = p.poll.poll(&mut events, Some(wait.min(POLL_SLICE))) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                let msg = format!("epoll failed: {e}");
                p.sink.fail(FailKind::Other, msg.clone());
                break Some(msg);
            }
        }
        for ev in events.iter() {
            if ev.token() == WAKE {
                if stop_asked(commands, p.feed) {
                    return None;
                }
                continue;
            }
            on_event(&mut p, &mut pacer, ev);
        }
        if p.sink.tally.total() > fails_before {
            break Some(
                p.sink
                    .error
                    .clone()
                    .unwrap_or_else(|| "connect failed".into()),
            );
        }
        if pacer.done() {
            break None;
        }
    };
    Some(pacer.report(error))
}

/// Hands a connection's event to the pool; the pacer learns whether it opened.
fn on_event<P: Pool>(p: &mut Parts<'_, P>, pacer: &mut Pacer, ev: &mio::event::Event) {
    let ready = Ready::of(ev);
    let mut cx = Cx {
        registry: p.poll.registry(),
        clock: p.clock,
        feed: &mut *p.feed,
        sink: &mut *p.sink,
    };
    let token = ev.token().0;
    let counted = cx.sink.tally.total();
    p.pool.on_event(token, ready, &mut cx);
    // A connection that failed is not one that opened (its state may say idle).
    let failed = p.sink.tally.total() > counted;
    pacer.seen(token, !failed && p.pool.connected(token), p.clock.now_ns());
}

/// Commands that came while connecting: true when told to stop.
fn stop_asked(commands: &Receiver<Command>, feed: &mut Feed) -> bool {
    while let Ok(cmd) = commands.try_recv() {
        match cmd {
            Command::Stop { .. } => return true,
            Command::Halt => feed.running = false,
            Command::Go | Command::Swap { .. } => {}
        }
    }
    false
}

/// After its report: waits for the engine's go. False when told to stop instead.
pub fn wait_go(commands: &Receiver<Command>, feed: &mut Feed) -> bool {
    loop {
        match commands.recv() {
            Ok(Command::Go) => return true,
            Ok(Command::Halt) => feed.running = false,
            Ok(Command::Stop { .. }) | Err(_) => return false,
            Ok(Command::Swap { .. }) => {}
        }
    }
}

/// Every worker's connects together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectSummary {
    pub planned: usize,
    pub opened: usize,
    /// The slowest worker's time from its first connect to its last connection open (ns).
    pub elapsed_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl ConnectSummary {
    pub fn new(reports: &[ConnectReport]) -> ConnectSummary {
        let mut times: Vec<u64> = reports
            .iter()
            .flat_map(|r| r.times_ns.iter().copied())
            .collect();
        times.sort_unstable();
        // Nearest rank.
        let rank = |p: f64| -> u64 {
            if times.is_empty() {
                return 0;
            }
            let k = ((p * times.len() as f64).ceil() as usize).clamp(1, times.len());
            times[k - 1]
        };
        ConnectSummary {
            planned: reports.iter().map(|r| r.planned).sum(),
            opened: times.len(),
            elapsed_ns: reports.iter().map(|r| r.elapsed_ns).max().unwrap_or(0),
            p50_ns: rank(0.50),
            p99_ns: rank(0.99),
            max_ns: times.last().copied().unwrap_or(0),
        }
    }

    /// The console line, e.g. `Connections: 2048 opened in 412 ms (connect p50 0.21 ms,
    /// p99 3.1 ms, max 4.0 ms)`.
    pub fn line(&self) -> String {
        let count = if self.opened == self.planned {
            self.opened.to_string()
        } else {
            format!("{} of {}", self.opened, self.planned)
        };
        format!(
            "Connections: {count} opened in {} ms (connect p50 {} ms, p99 {} ms, max {} ms)\n",
            ms(self.elapsed_ns),
            ms(self.p50_ns),
            ms(self.p99_ns),
            ms(self.max_ns)
        )
    }
}

/// Milliseconds with two significant decimals below 10 ms, whole ones above.
fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_more_than_the_limit_outstanding() {
        // 1,000 connections, limit 64; they complete in a scrambled order, a few per round.
        let (planned, limit) = (1000, 64);
        let mut pacer = Pacer::new(planned, limit);
        let mut opened: Vec<usize> = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        let mut peak = 0;
        let mut now = 1_000;
        let mut seed = 0x2545_f491_u64;
        while !pacer.done() {
            let before = opened.len();
            pacer
                .open_more(now, || {
                    let t = opened.len();
                    opened.push(t);
                    Ok(t)
                })
                .unwrap();
            pending.extend_from_slice(&opened[before..]);
            peak = peak.max(pacer.outstanding());
            assert_eq!(pacer.outstanding(), pending.len());
            assert!(pacer.outstanding() <= limit);
            now += 10;
            // A few complete; an event on a connection still connecting changes nothing.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let k = 1 + (seed % 7) as usize;
            for _ in 0..k.min(pending.len()) {
                let j = (seed as usize / 7) % pending.len();
                let t = pending.swap_remove(j);
                pacer.seen(t, false, now);
                pacer.seen(t, true, now);
                pacer.seen(t, true, now + 5); // counted once
            }
        }
        assert_eq!(peak, limit, "the limit is reached, never passed");
        assert_eq!(opened.len(), planned);
        let report = pacer.report(None);
        assert_eq!(report.opened(), planned);
        assert!(report.times_ns.iter().all(|&t| t >= 10 && t % 10 == 0));
        assert!(report.elapsed_ns > 0);
    }

    #[test]
    fn an_open_that_fails_stops_the_pacing() {
        let mut pacer = Pacer::new(10, 4);
        let mut n = 0;
        let err = pacer.open_more(5, || {
            n += 1;
            if n == 3 {
                Err("cannot connect to 127.0.0.1:1: refused".to_string())
            } else {
                Ok(n - 1)
            }
        });
        assert!(err.unwrap_err().contains("127.0.0.1:1"));
        assert_eq!(pacer.outstanding(), 2);
        let report = pacer.report(Some("x".into()));
        assert_eq!((report.opened(), report.planned), (0, 10));
    }

    #[test]
    fn summary_merges_workers_and_prints_one_line() {
        let a = ConnectReport {
            planned: 3,
            times_ns: vec![100_000, 200_000, 3_100_000],
            elapsed_ns: 412_000_000,
            error: None,
        };
        let b = ConnectReport {
            planned: 2,
            times_ns: vec![150_000, 250_000],
            elapsed_ns: 12_000_000,
            error: None,
        };
        let s = ConnectSummary::new(&[a.clone(), b]);
        assert_eq!((s.planned, s.opened), (5, 5));
        assert_eq!(
            (s.p50_ns, s.p99_ns, s.max_ns),
            (200_000, 3_100_000, 3_100_000)
        );
        assert_eq!(
            s.line(),
            "Connections: 5 opened in 412 ms (connect p50 0.20 ms, p99 3.1 ms, max 3.1 ms)\n"
        );
        let short = ConnectReport { planned: 4, ..a };
        assert!(ConnectSummary::new(&[short])
            .line()
            .starts_with("Connections: 3 of 4 opened"));
        assert_eq!(ConnectSummary::new(&[]), ConnectSummary::default());
    }
}
