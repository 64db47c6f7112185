//! The C API pool: requests go straight into the in-process Triton server
//! (`ServerInferAsync`), no sockets. A worker's concurrency is a number of slots; each slot
//! has a boxed callback context (`protocol::capi::slot`) whose address is its requests'
//! `userp`.
//!
//! Finished requests reach the worker through each slot's ring. In closed loop the final
//! callback of a request sends the slot's next one itself, so the server never waits for
//! the worker; the worker collects the records at its tick (`TICK_EVERY`), before every
//! window swap ([`Pool::flush`]) and when a ring is half full. In open loop, and whenever a
//! chain stops, the callback parks the slot and wakes the worker (`mio::Waker`, WAKE token),
//! which sends on schedule. Every record is written into the sink on the worker thread, in
//! each slot's order.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver};
use mio::{Registry, Token, Waker};

use super::pool::{Cx, Feed, Pool, Ready, Send, Sink};
use crate::clock::Clock;
use crate::measure::{FailKind, RequestRecord};
use crate::protocol::capi::{
    wait_idle, Done, ModelTarget, Notifier, PreparedStep, SeqFields, Server, SlotCtx, Target,
};
use crate::timerfd::DeadlineTimer;

/// How long closing waits for callbacks the server still owes before it gives up and leaks
/// the slot contexts (freeing them could let a late callback touch freed memory).
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// What a run's C API requests need: the server, the model, and the inputs of each step
/// (indexed like `EngineSpec::requests`).
#[derive(Clone)]
pub struct CapiWire {
    pub server: Arc<Server>,
    pub model: Arc<ModelTarget>,
    pub steps: Arc<Vec<PreparedStep>>,
    /// The model is decoupled: a request ends at the final flag, after any number of
    /// responses.
    pub decoupled: bool,
    /// Keep every response of a request (`--streaming`), framed with its arrival time.
    pub framed: bool,
}

impl std::fmt::Debug for CapiWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapiWire")
            .field("model", &self.model)
            .field("steps", &self.steps.len())
            .field("decoupled", &self.decoupled)
            .field("framed", &self.framed)
            .finish()
    }
}

/// Same server and same steps (the server has no meaningful value equality).
impl PartialEq for CapiWire {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.server, &other.server)
            && Arc::ptr_eq(&self.steps, &other.steps)
            && self.model == other.model
            && self.decoupled == other.decoupled
            && self.framed == other.framed
    }
}
impl Eq for CapiWire {}

/// The closed-loop tick: how often the worker collects chained records (and so publishes
/// its completed count) when nothing else wakes it.
const TICK_EVERY: Duration = Duration::from_millis(2);
/// The tick timer's token (the pool has no sockets).
const TICK: usize = 0;

pub struct CapiPool {
    notifier: Arc<Notifier>,
    parked: Receiver<usize>,
    /// Slots to create at open.
    initial: usize,
    /// Boxed: a slot's address is its requests' `userp` and must not move when the Vec
    /// grows (open loop adds slots).
    #[allow(clippy::vec_box)]
    slots: Vec<Box<SlotCtx>>,
    /// Slots with nothing in the server, owned by the worker.
    free: Vec<usize>,
    /// Closed loop, decided at the first `fill`: slots send their next request from the
    /// callback (`Some(true)`), until stopped (`chain_on` false).
    chaining: Option<bool>,
    chain_on: bool,
    tick: Option<DeadlineTimer>,
}

impl CapiPool {
    /// `waker` is the worker's own (WAKE token): parked slots wake the worker with it.
    /// `keep_outputs`: copy outputs out of every response (profile export, validation).
    pub fn new(
        wire: CapiWire,
        waker: Arc<Waker>,
        clock: Clock,
        keep_outputs: bool,
        slots: usize,
    ) -> CapiPool {
        let (tx, rx) = unbounded();
        let target = Target {
            server: wire.server.clone(),
            model: wire.model.clone(),
            steps: wire.steps.clone(),
            keep_outputs,
            framed: wire.framed,
            decoupled: wire.decoupled,
        };
        CapiPool {
            notifier: Arc::new(Notifier::new(target, tx, waker, clock)),
            parked: rx,
            initial: slots,
            slots: Vec::with_capacity(slots),
            free: Vec::with_capacity(slots),
            chaining: None,
            chain_on: false,
            tick: None,
        }
    }

    fn add_slot(&mut self) {
        let index = self.slots.len();
        self.slots.push(SlotCtx::new(self.notifier.clone(), index));
        self.free.push(index);
    }

    /// Open loop with a send due and no free slot (within `--max-inflight`), or a periodic
    /// ramp that allows another request: adds a slot. True when one was added.
    fn grow(&mut self, cx: &mut Cx<'_>, now_ns: u64) -> bool {
        let wanted = match cx.feed.open_loop() {
            Some(cap) => {
                !cap.is_some_and(|c| self.slots.len() >= c) && cx.feed.due(cx.sink, now_ns)
            }
            None => cx.feed.ramp_allows(cx.sink),
        };
        if wanted {
            self.add_slot();
        }
        wanted
    }

    /// Hands one request from the feed to the server. A refused request is a failed record.
    fn start(&mut self, s: usize, send: Send, cx: &mut Cx<'_>) {
        let seq = send.seq.map(|q| SeqFields {
            correlation_id: q.fields.id,
            start: q.fields.start,
            end: q.fields.end,
        });
        // SAFETY: slot `s` was free: the worker owns it.
        let sent = unsafe { self.slots[s].launch(send.step, seq, |rec| send.stamp(rec)) };
        cx.sink.started();
        if let Err((rec, msg)) = sent {
            self.refused(s, rec, msg, cx.sink);
        }
    }

    /// Closed loop: sends the slot's next step (the chain's own, as its callback would).
    fn restart(&mut self, s: usize, cx: &mut Cx<'_>) {
        let ctx = &self.slots[s];
        // SAFETY: slot `s` was free: the worker owns it.
        let sent = unsafe { ctx.launch(ctx.next_step(), None, |_| {}) };
        cx.sink.started();
        cx.feed.sent += 1;
        if let Err((rec, msg)) = sent {
            self.refused(s, rec, msg, cx.sink);
        }
    }

    fn refused(&mut self, s: usize, rec: RequestRecord, msg: String, sink: &mut Sink) {
        let rec = RequestRecord {
            ok: false,
            end_ns: rec.send_end_ns,
            ..rec
        };
        sink.finish(rec, &[]);
        sink.fail(FailKind::Other, msg);
        self.free.push(s);
    }

    /// Moves slot `s`'s finished requests into the sink, in order; frees the slot when its
    /// callbacks parked it.
    fn drain_slot(&mut self, s: usize, cx: &mut Cx<'_>) {
        let Some(ctx) = self.slots.get(s) else {
            return;
        };
        let mut parked = false;
        let (sink, feed) = (&mut *cx.sink, &mut *cx.feed);
        // SAFETY: the worker is the only consumer of its slots' rings.
        while unsafe { ctx.ring.pop(|d| take(d, sink, feed, &mut parked)) } {}
        if parked {
            self.free.push(s);
        }
    }

    fn drain_all(&mut self, cx: &mut Cx<'_>) {
        for s in 0..self.slots.len() {
            self.drain_slot(s, cx);
        }
    }

    /// The first `fill`: sends the first requests, and in closed loop hands the rest of the
    /// budget to the chains and starts the tick.
    fn begin(&mut self, cx: &mut Cx<'_>) {
        let chain = cx.feed.chainable();
        self.chaining = Some(chain);
        if !chain {
            self.feed_slots(cx);
            return;
        }
        // Chains are on before the first sends: a request that completes while the other
        // slots are still being started goes on by itself instead of parking, so every slot
        // has its chain from the start (a parked slot would wait for the worker's next
        // wake-up while the others spend the budget).
        let rest = cx.feed.share_budget(self.free.len() as u64);
        self.notifier.set_chain(true, rest);
        self.chain_on = true;
        self.feed_slots(cx);
        match DeadlineTimer::new(cx.registry, Token(TICK)) {
            Ok(t) => {
                let _ = t.arm(TICK_EVERY);
                self.tick = Some(t);
            }
            Err(e) => cx.sink.fail(
                FailKind::Other,
                format!("cannot create the C API tick timer: {e}"),
            ),
        }
    }

    /// Starts requests from the feed on free slots (and new ones, open loop).
    fn feed_slots(&mut self, cx: &mut Cx<'_>) {
        let now_ns = cx.feed.now_if_paced(cx.clock);
        loop {
            let Some(&s) = self.free.last() else {
                if self.grow(cx, now_ns) {
                    continue;
                }
                break;
            };
            let Some(send) = cx.feed.next(cx.sink, now_ns, s) else {
                break;
            };
            self.free.pop();
            self.start(s, send, cx);
        }
    }
}

/// One finished request into the sink.
fn take(d: &mut Done, sink: &mut Sink, feed: &mut Feed, parked: &mut bool) {
    let mut rec = d.rec;
    match d.error.take() {
        Some(msg) => {
            rec.ok = false;
            sink.finish(rec, &[]);
            sink.fail(FailKind::Other, msg);
        }
        None => {
            // Periodic concurrency counts requests that reached their period.
            sink.response(rec.responses.min(sink.period));
            sink.finish(rec, &d.body);
        }
    }
    if d.chained {
        sink.started();
        feed.sent += 1;
    }
    *parked |= d.parked;
}

impl Pool for CapiPool {
    fn open(&mut self, _registry: &Registry) -> Result<(), String> {
        for _ in 0..self.initial {
            self.add_slot();
        }
        Ok(())
    }

    /// The closed-loop tick: collects the chains' records.
    fn on_event(&mut self, token: usize, _ready: Ready, cx: &mut Cx<'_>) {
        if token != TICK {
            return;
        }
        if let Some(t) = &self.tick {
            t.drain();
            let _ = t.arm(TICK_EVERY);
        }
        self.drain_all(cx);
    }

    fn fill(&mut self, cx: &mut Cx<'_>) {
        // Parked slots first: their records, then the slot is free.
        while let Ok(s) = self.parked.try_recv() {
            self.drain_slot(s, cx);
        }
        match self.chaining {
            None => self.begin(cx),
            Some(false) => self.feed_slots(cx),
            Some(true) => {
                if self.chain_on && (!cx.feed.running || cx.sink.failed) {
                    self.chain_on = false;
                    self.notifier.set_chain(false, None);
                }
                // A chain that parked (its ring was full) goes on from here.
                while let Some(&s) = self.free.last() {
                    if !self.chain_on || !self.notifier.may_chain() {
                        break;
                    }
                    self.free.pop();
                    self.restart(s, cx);
                }
            }
        }
    }

    fn flush(&mut self, cx: &mut Cx<'_>) {
        self.drain_all(cx);
    }

    fn close(&mut self, _registry: &Registry) {
        self.notifier.set_chain(false, None);
        wait_idle(&self.slots, CLOSE_WAIT);
    }
}

impl Drop for CapiPool {
    fn drop(&mut self) {
        if self.slots.iter().all(|s| s.owed() == 0) {
            return;
        }
        // The server still holds requests that point at the pool's slot contexts (which hold the
        // server and the step data): leak them rather than free memory a late callback
        // would touch.
        for slot in self.slots.drain(..) {
            std::mem::forget(slot);
        }
    }
}

#[cfg(test)]
#[path = "capi_pool_tests.rs"]
mod tests;
