//! A pinned worker thread: its own `mio::Poll`, its own connections, its own record buffer.
//!
//! Nothing on the per-request path allocates, locks or touches an atomic: records go into a
//! preallocated Vec that the coordinator swaps at window edges (through a channel, woken by a
//! `mio::Waker`), and the completed-request counter is published at most once a millisecond.
//! The one exception is `profile --prefill-concurrency`, whose run-wide gate each request
//! takes and gives back (see `prefill.rs`); without it no gate exists.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::{Events, Poll, Token};

use super::connect::{self, ConnectReport};
use super::deadline::{Deadlines, RequestLimits};
use super::pool::{Cx, Feed, Pace, Pool, Ramp, Ready, Sink};
use super::seq_feed::SeqFeed;
use super::slots::SlotShare;
use super::timer::Timer;
use super::turns::TurnFeed;
use crate::clock::Clock;
use crate::measure::{FailKind, FailTally, RequestRecord};

/// Token of the coordinator's waker; connection tokens are their index.
pub const WAKE: Token = Token(usize::MAX);
/// Token of the open-loop send timer.
const TIMER: Token = Token(usize::MAX - 1);

/// How often (at most) a worker publishes its completed-request count.
const PUBLISH_EVERY: Duration = Duration::from_millis(1);
/// Batched reads: a shorter sleep than this costs more than it gathers.
const MIN_NAP: Duration = Duration::from_micros(50);

/// What the coordinator asks of a worker.
pub enum Command {
    /// Hand over the records that ended at or before `until_ns`, and continue with `fresh`.
    Swap {
        until_ns: u64,
        fresh: Vec<RequestRecord>,
        fresh_bodies: Vec<u8>,
    },
    /// Send nothing new; finish what is in flight until `deadline`, then exit.
    Stop { deadline: Instant },
    /// Send nothing new, but keep running and answering swaps, so the requests in flight
    /// still reach the coordinator (`--benchmark-duration`).
    Halt,
    /// Closed loop: every worker's connections are open; start sending (see `connect.rs`).
    Go,
}

/// Records handed from a worker to the coordinator.
pub struct Batch {
    pub worker: usize,
    pub records: Vec<RequestRecord>,
    pub bodies: Vec<u8>,
    /// Requests started since the previous batch.
    pub sent: u64,
    /// Thread CPU time used since the previous batch (ns).
    pub cpu_ns: u64,
}

/// State a worker shares with the coordinator; touched off the per-request path only.
#[repr(align(64))]
#[derive(Default)]
pub struct Shared {
    /// Requests completed so far (published at most every `PUBLISH_EVERY`).
    pub completed: AtomicU64,
    /// The request budget is spent and nothing is in flight.
    pub finished: AtomicBool,
    pub has_error: AtomicBool,
    pub error: Mutex<Option<String>>,
    /// The worker's failures by kind and its completed requests when it published them
    /// (at its first failure, each window swap and its exit).
    pub tally: Mutex<(FailTally, u64)>,
    /// Closed loop: the worker's connects, once its connections are open (or it gave up).
    pub connected: Mutex<Option<ConnectReport>>,
}

pub struct WorkerParams {
    pub index: usize,
    pub requests: Arc<Vec<Vec<u8>>>,
    /// Requests this worker may start; `None`: until told to stop.
    pub budget: Option<u64>,
    pub keep_bodies: bool,
    /// Count failed requests and go on, instead of stopping at the first (LLM `profile`).
    pub keep_going: bool,
    /// Record each request's HTTP phases (HTTP/1.1 `profile`; see `Sink::tracing`).
    pub http_trace: bool,
    pub clock: Clock,
    pub records: Vec<RequestRecord>,
    /// First input step this worker sends; workers interleave through the steps.
    pub first_step: usize,
    /// Open loop: this worker's schedule; `None`: closed loop.
    pub pace: Option<Pace>,
    /// Sequence models: this worker's sequences.
    pub seq: Option<SeqFeed>,
    /// Steps between this worker's requests (1; the worker count for a fixed schedule).
    pub stride: usize,
    /// Periodic concurrency: the ramp.
    pub ramp: Option<Ramp>,
    /// Shared memory output slots: the run's slots and this worker's first one.
    pub slots: Option<SlotShare>,
    /// Reads timed by kernel stamps: the shortest time between wake-ups (see `gather`).
    pub read_batch: Option<Duration>,
    /// Session turns: this worker's slots' requests, composed at send time.
    pub turns: Option<TurnFeed>,
    /// `--request-timeout` and `--request-idle-timeout` (see `deadline.rs`); session turns
    /// take their source's idle limit as the default.
    pub request_limits: RequestLimits,
    /// Requests cancelled on purpose (see `super::Cancel`).
    pub cancel: Option<super::Cancel>,
}

pub struct Worker<P: Pool> {
    index: usize,
    clock: Clock,
    poll: Poll,
    pool: P,
    feed: Feed,
    sink: Sink,
    /// The sink's error was handed to the coordinator.
    error_published: bool,
    /// Open loop: wakes the loop when the next send is due.
    timer: Option<Timer>,
    cpu_mark: u64,
    shared: Arc<Shared>,
    out: Sender<Batch>,
    /// Batched reads: the shortest time between wake-ups (see `gather`).
    read_batch: Option<Duration>,
    /// The request time limits, checked by sweeps (see `sweep`).
    deadlines: Deadlines,
}

impl<P: Pool> Worker<P> {
    pub fn new(
        mut p: WorkerParams,
        pool: P,
        poll: Poll,
        shared: Arc<Shared>,
        out: Sender<Batch>,
    ) -> Worker<P> {
        let records = std::mem::take(&mut p.records);
        let mut sink = Sink::new(records, p.keep_bodies);
        sink.keep_going = p.keep_going;
        sink.tracing = p.http_trace;
        sink.ride_out = p.pace.is_some();
        let stride = p.stride;
        sink.period = p.ramp.map_or(0, |r| r.period);
        let ramp = p.ramp;
        sink.seq_busy = vec![false; p.seq.as_ref().map_or(0, SeqFeed::slots)];
        sink.capture = p.slots.clone().filter(|s| s.slots.captures());
        let slots = p.slots;
        let session_limit = p
            .turns
            .as_ref()
            .map(|t| Duration::from_nanos(t.idle_limit_ns()));
        let deadlines = Deadlines::new(p.request_limits, session_limit);
        Worker {
            index: p.index,
            clock: p.clock,
            poll,
            pool,
            feed: {
                let mut feed = Feed::new(p.requests, p.first_step, p.budget, p.pace, p.seq);
                feed.set_stride(stride);
                feed.ramp = ramp;
                feed.cancel = p.cancel;
                if let Some(share) = slots {
                    feed.set_slots(share);
                }
                if let Some(turns) = p.turns {
                    feed.set_turns(turns);
                }
                feed
            },
            sink,
            error_published: false,
            timer: None,
            cpu_mark: thread_cpu_ns(),
            read_batch: p.read_batch,
            deadlines,
            shared,
            out,
        }
    }

    /// The thread body: connect, then run the event loop until stopped.
    pub fn run(mut self, commands: Receiver<Command>) {
        if self.feed.open_loop().is_some() {
            if let Err(msg) = self.pool.open(self.poll.registry()) {
                self.sink.fail(FailKind::Connect, msg);
            }
        } else if !self.connect_first(&commands) {
            self.pool.close(self.poll.registry());
            return;
        }
        if self.feed.timed() {
            match Timer::new(self.poll.registry(), TIMER) {
                Ok(t) => self.timer = Some(t),
                Err(e) => self.sink.fail(
                    FailKind::Other,
                    format!("cannot create the send timer: {e}"),
                ),
            }
        }
        let mut events = Events::with_capacity(1024);
        let mut last_publish = Instant::now();
        let mut deadline: Option<Instant> = None;
        // Batched reads: the last two wake-ups with events.
        let (mut woke, mut before): (Option<Instant>, Option<Instant>) = (None, None);
        // Request timeouts: the next sweep, and whether the last one watched anything.
        let (mut sweep_at, mut watching) = (last_publish, true);
        let mut now = last_publish;
        loop {
            if let (Some(at), Some(prev)) = (woke, before) {
                self.gather(at, at - prev);
            }
            let sweep_in = (watching || self.sink.in_flight > 0)
                .then(|| sweep_at.saturating_duration_since(now));
            let timeout = self.poll_timeout(deadline, sweep_in);
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    self.sink
                        .fail(FailKind::Other, format!("epoll failed: {e}"));
                    deadline = Some(Instant::now());
                }
            }
            if !events.is_empty() {
                (before, woke) = (woke, Some(Instant::now()));
            }
            if let Some(d) = self.on_events(&events, &commands) {
                deadline = Some(d);
            }
            now = Instant::now();
            if now >= sweep_at {
                let period = self.sweep(&mut watching);
                sweep_at = now + period;
            }
            self.fill();
            if self.sink.error.is_some() && !self.error_published {
                self.error_published = true;
                self.publish_tally();
                set_error(&self.shared, self.sink.error.clone().unwrap_or_default());
            }
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                self.publish_completed();
                last_publish = now;
            }
            // Live sequences still owe their END request after a stop.
            let idle = self.sink.in_flight == 0 && !self.feed.closing_pending();
            if idle && (self.feed.exhausted() || self.sink.failed) {
                self.publish_completed();
                self.shared.finished.store(true, Ordering::Release);
            }
            // Ctrl-C cuts a stop's wait for the requests in flight short: the run ends now.
            if let Some(d) = deadline {
                if idle || now >= d || crate::signal::interrupted() {
                    break;
                }
            }
        }
        self.publish_tally();
        self.pool.close(self.poll.registry());
    }

    /// Closed loop: opens every connection (paced), reports the connects, and waits for
    /// the engine's go. False when told to stop instead.
    fn connect_first(&mut self, commands: &Receiver<Command>) -> bool {
        let limit = Duration::from_nanos(self.deadlines.idle_ns(0));
        let parts = connect::Parts {
            pool: &mut self.pool,
            poll: &mut self.poll,
            clock: &self.clock,
            feed: &mut self.feed,
            sink: &mut self.sink,
        };
        let Some(report) = connect::establish(parts, commands, limit) else {
            return false;
        };
        if let Ok(mut slot) = self.shared.connected.lock() {
            *slot = Some(report);
        }
        connect::wait_go(commands, &mut self.feed)
    }

    /// Hands each event to the pool, the timer or the command queue; returns a stop
    /// deadline when told to stop.
    fn on_events(&mut self, events: &Events, commands: &Receiver<Command>) -> Option<Instant> {
        let mut stop = None;
        for ev in events.iter() {
            if ev.token() == WAKE {
                stop = self.handle_commands(commands).or(stop);
            } else if ev.token() == TIMER {
                if let Some(t) = &mut self.timer {
                    t.fired();
                }
            } else {
                let ready = Ready::of(ev);
                let mut cx = Cx {
                    registry: self.poll.registry(),
                    clock: &self.clock,
                    feed: &mut self.feed,
                    sink: &mut self.sink,
                };
                self.pool.on_event(ev.token().0, ready, &mut cx);
            }
        }
        stop
    }

    /// Fails the requests that made no progress for the idle limit or ran past the total
    /// limit (see `deadline.rs`); returns the time to the next sweep.
    fn sweep(&mut self, watching: &mut bool) -> Duration {
        let sweep = self
            .deadlines
            .sweep(self.clock.now_ns(), self.sink.slowest_ns);
        let mut cx = Cx {
            registry: self.poll.registry(),
            clock: &self.clock,
            feed: &mut self.feed,
            sink: &mut self.sink,
        };
        *watching = self.pool.expire(&sweep, &mut cx);
        let period = Duration::from_nanos(sweep.period_ns());
        match &self.feed.cancel {
            // Cancellations are found within a tenth of their delay (at least 1 ms).
            Some(c) => period.min((c.after / 10).max(Duration::from_millis(1))),
            None => period,
        }
    }

    /// Hands the failure tally (copied only when it changed) and the completed count to
    /// the coordinator.
    fn publish_tally(&self) {
        if let Ok(mut t) = self.shared.tally.lock() {
            if t.0.total() != self.sink.tally.total() {
                t.0 = self.sink.tally.clone();
            }
            t.1 = self.sink.completed;
        }
    }

    /// How long the next poll may sleep: until the stop `deadline` (at most 10 ms at a time)
    /// or the next time-out sweep (`sweep_in`, measured from the last wake-up: no clock read
    /// for it, and kept even when every request has stalled), and not at all while sends
    /// are still due (`Sink::backlog`).
    fn poll_timeout(
        &self,
        deadline: Option<Instant>,
        sweep_in: Option<Duration>,
    ) -> Option<Duration> {
        if self.sink.backlog {
            return Some(Duration::ZERO);
        }
        let stop_in = deadline.map(|d| {
            d.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(10))
        });
        match (stop_in, sweep_in) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn fill(&mut self) {
        self.sink.backlog = false;
        let mut cx = Cx {
            registry: self.poll.registry(),
            clock: &self.clock,
            feed: &mut self.feed,
            sink: &mut self.sink,
        };
        self.pool.fill(&mut cx);
        // A send that is already due found no free slot: the completion or connect that
        // frees one calls `fill` again, so the timer is only for sends still ahead.
        if let (Some(timer), Some(due)) = (&mut self.timer, self.feed.next_due_ns()) {
            let now = self.clock.now_ns();
            if due > now {
                timer.arm(due, due - now);
            }
        }
    }

    /// Batched reads: when wake-ups come closer together than the batch interval (data
    /// trickling in stream by stream; `since` is the time between the last two), sleeps out
    /// the rest of the interval after the last one (`at`), so the data of several streams
    /// gathers in the socket buffers and one wake-up reads it all; the kernel's stamps keep
    /// each read's arrival time. Sparse or bursty arrivals are left alone (a sleep would only
    /// add a wake-up). Never sleeps past a due send.
    fn gather(&self, at: Instant, since: Duration) {
        let Some(gap) = self.read_batch else {
            return;
        };
        if self.sink.backlog {
            return;
        }
        let due_in = self.feed.next_due_ns().map(|due| {
            let ahead = due.saturating_sub(self.clock.now_ns());
            Duration::from_nanos(ahead)
        });
        if let Some(nap) = gather_nap(gap, since, at.elapsed(), due_in) {
            std::thread::sleep(nap);
        }
    }

    fn publish_completed(&self) {
        self.shared
            .completed
            .store(self.sink.completed, Ordering::Relaxed);
    }

    /// Returns a stop deadline when told to stop.
    fn handle_commands(&mut self, commands: &Receiver<Command>) -> Option<Instant> {
        let mut stop = None;
        while let Ok(cmd) = commands.try_recv() {
            match cmd {
                Command::Swap {
                    until_ns,
                    fresh,
                    fresh_bodies,
                } => {
                    let mut cx = Cx {
                        registry: self.poll.registry(),
                        clock: &self.clock,
                        feed: &mut self.feed,
                        sink: &mut self.sink,
                    };
                    self.pool.flush(&mut cx);
                    self.publish_tally();
                    let batch = self.swap(until_ns, fresh, fresh_bodies);
                    let _ = self.out.send(batch);
                }
                Command::Stop { deadline } => {
                    self.feed.running = false;
                    stop = Some(deadline);
                }
                Command::Halt => self.feed.running = false,
                Command::Go => {}
            }
        }
        stop
    }

    /// Hands over the records that ended by `until_ns`; later ones stay for the next window.
    fn swap(
        &mut self,
        until_ns: u64,
        mut fresh: Vec<RequestRecord>,
        mut fresh_bodies: Vec<u8>,
    ) -> Batch {
        fresh.clear();
        fresh_bodies.clear();
        let mut batch = self.take_batch(fresh, fresh_bodies);
        let mut kept = 0;
        for j in 0..batch.records.len() {
            let mut r = batch.records[j];
            if r.end_ns > until_ns {
                if r.has_region() {
                    let (o, end) = (r.region_start(), r.body_off as usize + r.body_len as usize);
                    let lead = r.body_off as usize - o;
                    r.body_off = (self.sink.bodies.len() + lead) as u32;
                    self.sink.bodies.extend_from_slice(&batch.bodies[o..end]);
                }
                self.sink.records.push(r);
            } else {
                batch.records[kept] = r;
                kept += 1;
            }
        }
        batch.records.truncate(kept);
        batch
    }

    fn take_batch(&mut self, fresh: Vec<RequestRecord>, fresh_bodies: Vec<u8>) -> Batch {
        let cpu = thread_cpu_ns();
        let batch = Batch {
            worker: self.index,
            records: std::mem::replace(&mut self.sink.records, fresh),
            bodies: std::mem::replace(&mut self.sink.bodies, fresh_bodies),
            sent: self.feed.sent,
            cpu_ns: cpu.saturating_sub(self.cpu_mark),
        };
        self.feed.sent = 0;
        self.cpu_mark = cpu;
        batch
    }
}

fn set_error(shared: &Shared, msg: String) {
    if let Ok(mut slot) = shared.error.lock() {
        if slot.is_none() {
            *slot = Some(msg);
        }
    }
    shared.has_error.store(true, Ordering::Release);
}

/// How long to sleep before the next poll when batching reads every `gap`: only when the
/// last two wake-ups came closer together than `gap` (`since`), for the rest of `gap` after
/// the last one (`elapsed` ago), never past a due send (`due_in`), and not at all when the
/// nap would be too short to gather anything.
fn gather_nap(
    gap: Duration,
    since: Duration,
    elapsed: Duration,
    due_in: Option<Duration>,
) -> Option<Duration> {
    if since >= gap {
        return None;
    }
    let mut nap = gap.saturating_sub(elapsed);
    if let Some(due) = due_in {
        nap = nap.min(due);
    }
    (nap >= MIN_NAP).then_some(nap)
}

/// CPU time of the calling thread (ns).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec passed in.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_naps_only_when_wake_ups_crowd() {
        let us = Duration::from_micros;
        let gap = us(1000);
        // Wake-ups 300 µs apart, 100 µs spent since the last: sleep the other 900 µs.
        assert_eq!(gather_nap(gap, us(300), us(100), None), Some(us(900)));
        // Sparse (or bursty) arrivals: waking up again would only cost.
        assert_eq!(gather_nap(gap, us(1000), us(100), None), None);
        assert_eq!(gather_nap(gap, us(5000), us(0), None), None);
        // A send due in 200 µs bounds the nap.
        assert_eq!(
            gather_nap(gap, us(300), us(100), Some(us(200))),
            Some(us(200))
        );
        // Nothing worth sleeping for: the interval is (nearly) spent, or a send is due.
        assert_eq!(gather_nap(gap, us(300), us(980), None), None);
        assert_eq!(gather_nap(gap, us(300), us(100), Some(us(0))), None);
        assert_eq!(gather_nap(Duration::ZERO, us(0), us(0), None), None);
    }
}
