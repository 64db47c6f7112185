//! What a worker's connections of one protocol look like to the worker's event loop: a
//! [`Pool`] opens its connections, handles their readiness events and starts requests while
//! it has free slots. The loop, the window swaps and the bookkeeping are shared
//! (`worker.rs`); only the wire differs (`http_pool.rs`, `grpc_pool.rs`).

use std::sync::Arc;

use mio::Registry;

use super::deadline::Sweep;
use super::pace::WorkerSchedule;
use super::seq_feed::{SeqFeed, SeqSend};
pub use super::sink::{Sink, RIDE_OUT_LIMIT};
use super::slots::SlotShare;
use super::turns::TurnFeed;
use crate::clock::Clock;
use crate::measure::RequestRecord;

/// A worker's connections: HTTP/1.1 (one request per connection) or HTTP/2 (many streams).
pub trait Pool: std::marker::Send + 'static {
    /// Starts connecting. An error message names what could not be opened.
    fn open(&mut self, registry: &Registry) -> Result<(), String>;
    /// Closed loop: the connections [`Pool::open_next`] opens one by one before the clock
    /// starts (see `connect.rs`); 0: none to pace, [`Pool::open`] opens what is needed.
    fn planned(&self) -> usize {
        0
    }
    /// Starts opening the next of the planned connections; returns its token.
    fn open_next(&mut self, _registry: &Registry) -> Result<usize, String> {
        Err("this pool opens no connection".into())
    }
    /// The connection with this token is open (ready to carry requests).
    fn connected(&self, _token: usize) -> bool {
        true
    }
    /// A readiness event for the connection with this token. `closed`: the peer's FIN (or an
    /// error) came with it, so a short read does not mean the socket is drained: read on to
    /// the EOF.
    fn on_event(&mut self, token: usize, ready: Ready, cx: &mut Cx<'_>);
    /// Starts requests on free slots while `cx.feed` hands out steps.
    fn fill(&mut self, cx: &mut Cx<'_>);
    /// Unregisters every socket (the worker is exiting).
    fn close(&mut self, registry: &Registry);
    /// Moves requests that finished off the worker thread into `cx.sink` (called before
    /// every window swap, so the swap sees them).
    fn flush(&mut self, _cx: &mut Cx<'_>) {}
    /// A sweep: every request (or connect) that made no progress for the idle limit, and
    /// every request that started the total limit ago, fails with
    /// [`crate::measure::FailKind::Timeout`] (see `deadline.rs`). Returns whether anything
    /// is still being watched (in flight or connecting).
    fn expire(&mut self, _sweep: &Sweep, _cx: &mut Cx<'_>) -> bool {
        false
    }
}

/// What an event reports about a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    pub writable: bool,
    pub readable: bool,
    /// The peer closed its side (or the socket failed): read until EOF.
    pub closed: bool,
}

impl Ready {
    /// What a readiness event says about its socket (a close or error reads as readable).
    pub fn of(ev: &mio::event::Event) -> Ready {
        let closed = ev.is_read_closed() || ev.is_error();
        Ready {
            writable: ev.is_writable(),
            readable: ev.is_readable() || closed,
            closed,
        }
    }
}

/// What a pool may touch while it handles an event.
pub struct Cx<'a> {
    pub registry: &'a Registry,
    pub clock: &'a Clock,
    pub feed: &'a mut Feed,
    pub sink: &'a mut Sink,
}

/// An open-loop worker's schedule: sends are due at `origin_ns + offset`.
#[derive(Debug, Clone)]
pub struct Pace {
    plan: WorkerSchedule,
    /// Clock ns at which the level's schedule starts.
    origin_ns: u64,
    /// This worker's share of `--max-inflight`.
    pub max_inflight: Option<usize>,
}

impl Pace {
    pub fn new(plan: WorkerSchedule, origin_ns: u64, max_inflight: Option<usize>) -> Pace {
        Pace {
            plan,
            origin_ns,
            max_inflight,
        }
    }

    /// Clock ns of the next send, if any is left.
    #[inline]
    fn due_ns(&self) -> Option<u64> {
        self.plan.peek().map(|o| self.origin_ns.saturating_add(o))
    }
}

/// `--periodic-concurrency-range start:end:step` with `--request-period P`: `start` requests
/// at first; each time every request launched so far has had P responses, `step` more, up
/// to `end` requests in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ramp {
    pub start: usize,
    pub end: usize,
    pub step: usize,
    pub period: u32,
    /// Requests the ramp allows so far, and launched so far.
    allowed: usize,
    launched: usize,
}

impl Ramp {
    pub fn new(start: usize, end: usize, step: usize, period: u32) -> Ramp {
        Ramp {
            start,
            end,
            step,
            period,
            allowed: start.min(end),
            launched: 0,
        }
    }

    /// Opens the next batch once every launched request reached its period.
    fn update(&mut self, reached: usize) {
        if self.launched == self.allowed && reached >= self.launched {
            self.allowed = (self.allowed + self.step).min(self.end);
        }
    }
}

/// One request to start: its input step and, open loop, when it was meant to go (clock ns;
/// 0 for closed loop, where it goes as soon as a slot frees); for a sequence model, which
/// sequence and flags (its bytes are then `Feed::bytes`, patched).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Send {
    pub step: usize,
    /// Index of the pre-encoded request in `Feed::requests`: `step`, or with output slots
    /// the step's variant for the slot it goes on (see `slots.rs`).
    pub request: usize,
    pub intended_ns: u64,
    pub seq: Option<SeqSend>,
    /// The bytes were composed for this send (sequence patch or session turn): they are
    /// `Feed::bytes`, valid until the next `next`, and the connection keeps its own copy.
    pub owned: bool,
}

impl Send {
    /// Fills a new request record's send-side fields (the record names the input step, not
    /// the slot's variant of it).
    #[inline]
    pub fn stamp(&self, rec: &mut RequestRecord) {
        rec.step = self.step as u32;
        rec.intended_ns = self.intended_ns;
        if let Some(s) = &self.seq {
            rec.seq_slot = s.slot as u32 + 1;
            rec.seq_id = s.fields.id;
            rec.seq_end = s.fields.end;
        }
    }
}

/// The requests to send: which input step comes next, and how many may still start.
pub struct Feed {
    pub requests: Arc<Vec<Vec<u8>>>,
    /// Input steps: `requests.len()`, or that divided by the slot count with output slots.
    steps: usize,
    /// Output slots: the run's slots and this worker's first one.
    slots: Option<SlotShare>,
    next_step: usize,
    /// Steps between this worker's requests: 1, or the worker count for a fixed schedule,
    /// where worker w sends entries w, w + n, ... (the ones its schedule share is for).
    stride: usize,
    /// Requests this worker may still start; `None`: until told to stop.
    budget: Option<u64>,
    /// Open loop: the schedule; `None`: closed loop.
    pace: Option<Pace>,
    /// Sequence models: the sequences and their request bytes.
    seq: Option<SeqFeed>,
    /// Periodic concurrency: how many requests may have been launched by now.
    pub ramp: Option<Ramp>,
    /// Session turns: requests composed per slot at send time (see `turns.rs`).
    turns: Option<TurnFeed>,
    /// Requests cancelled on purpose (HTTP/1.1 pools).
    pub cancel: Option<super::Cancel>,
    /// Cleared by the coordinator's Stop: nothing new starts.
    pub running: bool,
    /// Requests started since the last window swap.
    pub sent: u64,
}

impl Feed {
    pub fn new(
        requests: Arc<Vec<Vec<u8>>>,
        first_step: usize,
        budget: Option<u64>,
        pace: Option<Pace>,
        seq: Option<SeqFeed>,
    ) -> Feed {
        let steps = requests.len().max(1);
        let next_step = first_step % steps;
        Feed {
            requests,
            steps,
            slots: None,
            next_step,
            stride: 1,
            budget,
            pace,
            seq,
            ramp: None,
            turns: None,
            cancel: None,
            running: true,
            sent: 0,
        }
    }

    /// The next request if one may start at `now_ns` on the pool's slot `pool_slot`,
    /// counting it as sent; `None` when stopped, out of budget, after a failure
    /// (`sink.failed`), (open loop) when the next send is not due yet, or (sequences) when
    /// the sequence cannot take a request now, or (session turns) when the slot's next turn
    /// cannot go yet. After a stop, sequence models still get the END requests of their live
    /// sequences.
    #[inline]
    pub fn next(&mut self, sink: &mut Sink, now_ns: u64, pool_slot: usize) -> Option<Send> {
        if sink.failed {
            return None;
        }
        if !self.running {
            let seq = self.seq.as_mut()?.closing(&sink.seq_busy)?;
            return Some(seq_send(seq, 0, sink));
        }
        if self.budget == Some(0) {
            return None;
        }
        if let Some(t) = &mut self.turns {
            let id = t.compose(pool_slot, now_ns)?;
            self.sent += 1;
            return Some(Send {
                step: id as usize,
                request: 0,
                intended_ns: 0,
                seq: None,
                owned: true,
            });
        }
        if let Some(r) = &mut self.ramp {
            r.update(sink.period_reached);
            if r.launched >= r.allowed {
                return None;
            }
            r.launched += 1;
        }
        let intended_ns = match &self.pace {
            None => 0,
            Some(p) => p.due_ns().filter(|&d| d <= now_ns)?,
        };
        let seq = match &mut self.seq {
            None => None,
            Some(feed) => Some(feed.prepare(pool_slot, &sink.seq_busy)?),
        };
        if let Some(p) = &mut self.pace {
            p.plan.advance();
        }
        if let Some(b) = &mut self.budget {
            *b -= 1;
        }
        self.sent += 1;
        if let Some(seq) = seq {
            return Some(seq_send(seq, intended_ns, sink));
        }
        let step = self.next_step;
        self.next_step += self.stride;
        if self.next_step >= self.steps {
            self.next_step %= self.steps;
        }
        let request = match &self.slots {
            None => step,
            Some(s) => s
                .slots
                .request_index(step, s.slots.global(s.base, pool_slot)),
        };
        Some(Send {
            step,
            request,
            intended_ns,
            seq: None,
            owned: false,
        })
    }

    /// Output slots: `requests` hold `share.slots.count()` variants of each input step, and
    /// this worker's requests go on the slots from `share.base` on.
    pub fn set_slots(&mut self, share: SlotShare) {
        self.steps = (self.requests.len() / share.slots.count()).max(1);
        self.next_step %= self.steps;
        self.slots = Some(share);
    }

    /// Steps between this worker's requests (see `stride`).
    pub fn set_stride(&mut self, stride: usize) {
        self.stride = stride.max(1);
    }

    /// The bytes of `send` (valid until the next `next`).
    #[inline]
    pub fn bytes(&self, send: &Send) -> &[u8] {
        match (&send.seq, &self.seq, &self.turns) {
            (Some(_), Some(feed), _) => &feed.scratch,
            (None, _, Some(turns)) if send.owned => &turns.scratch,
            _ => &self.requests[send.request],
        }
    }

    /// Session turns: the slots' requests are composed at send time by `turns`.
    pub fn set_turns(&mut self, turns: TurnFeed) {
        self.turns = Some(turns);
    }

    /// Session turns: their source, to be told how each request ended.
    #[inline]
    pub fn turns(&mut self) -> Option<&mut TurnFeed> {
        self.turns.as_mut()
    }

    /// Sends wait for a time (a schedule or a turn's delay), so the worker needs a timer.
    pub fn timed(&self) -> bool {
        self.pace.is_some() || self.turns.is_some()
    }

    /// After a stop, live sequences still wait for their END request.
    pub fn closing_pending(&self) -> bool {
        !self.running && self.seq.as_ref().is_some_and(SeqFeed::has_live)
    }

    /// Open loop: a send is due at `now_ns` (whether or not a slot is free for it) and,
    /// for a sequence model, the sequence it is dealt to has no request in flight (it waits
    /// for that response, so no connection needs to open for it).
    #[inline]
    pub fn due(&self, sink: &Sink, now_ns: u64) -> bool {
        self.running
            && !sink.failed
            && self.budget != Some(0)
            && self
                .pace
                .as_ref()
                .and_then(Pace::due_ns)
                .is_some_and(|d| d <= now_ns)
            && self.seq.as_ref().map_or(true, |s| s.ready(&sink.seq_busy))
    }

    /// The time `next` and `due` compare sends against: the clock when sends wait for a
    /// time (a schedule, a session turn's delay), else 0 (closed loop sends whenever a slot
    /// frees; no clock read needed).
    #[inline]
    pub fn now_if_paced(&self, clock: &Clock) -> u64 {
        if self.timed() {
            clock.now_ns()
        } else {
            0
        }
    }

    /// Open loop: clock ns of the next send (for the worker's timer); session turns: of the
    /// first slot whose delay ends.
    pub fn next_due_ns(&self) -> Option<u64> {
        if !self.running || self.budget == Some(0) {
            return None;
        }
        if let Some(t) = &self.turns {
            return t.next_due_ns();
        }
        self.pace.as_ref().and_then(Pace::due_ns)
    }

    /// Open loop, and how many requests this worker may have in flight (`None`: no cap;
    /// the engine always sets one, see `share::default_cap`).
    pub fn open_loop(&self) -> Option<Option<usize>> {
        self.pace.as_ref().map(|p| p.max_inflight)
    }

    /// Periodic concurrency: the ramp allows another request now (a new slot may open).
    pub fn ramp_allows(&mut self, sink: &Sink) -> bool {
        self.running
            && !sink.failed
            && self.ramp.as_mut().is_some_and(|r| {
                r.update(sink.period_reached);
                r.launched < r.allowed
            })
    }

    /// Closed loop with nothing decided per request but the input step (no schedule,
    /// sequences, ramp, output slots or stride): a slot may send its next request itself.
    pub fn chainable(&self) -> bool {
        self.pace.is_none()
            && self.seq.is_none()
            && self.ramp.is_none()
            && self.slots.is_none()
            && self.turns.is_none()
            && self.stride == 1
    }

    /// Keeps at most `keep` requests of the budget for the feed's own next sends and hands
    /// the rest to the caller (`None`: no budget).
    pub fn share_budget(&mut self, keep: u64) -> Option<u64> {
        self.budget.as_mut().map(|b| {
            let rest = b.saturating_sub(keep);
            *b -= rest;
            rest
        })
    }

    /// No request may start any more (budget spent, stopped, or a one-shot schedule used up).
    pub fn exhausted(&self) -> bool {
        !self.running
            || self.budget == Some(0)
            || self.pace.as_ref().is_some_and(|p| p.due_ns().is_none())
            || self.turns.as_ref().is_some_and(TurnFeed::exhausted)
    }
}

/// Marks the sequence busy and wraps it as a send.
fn seq_send(seq: SeqSend, intended_ns: u64, sink: &mut Sink) -> Send {
    if let Some(b) = sink.seq_busy.get_mut(seq.slot) {
        *b = true;
    }
    Send {
        step: seq.flat_step as usize,
        request: seq.flat_step as usize,
        intended_ns,
        seq: Some(seq),
        owned: true,
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
