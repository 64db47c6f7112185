//! The C API pool: requests go straight into the in-process Triton server
//! (`ServerInferAsync`), no sockets. A worker's concurrency is a number of slots; each slot
//! has a boxed callback context whose address is its requests' `userp`.
//!
//! Completions come back on Triton's threads; the callbacks (`protocol::capi::infer`) send
//! them over a channel and wake the worker's own `mio::Waker` (WAKE token). The worker calls
//! [`Pool::fill`] after every wake-up, and `fill` first drains the channel, so every record
//! is written on the worker thread and `worker.rs` needs no change.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver};
use mio::{Registry, Waker};

use super::pool::{Cx, Pool, Ready, Send, Sink};
use crate::clock::Clock;
use crate::measure::RequestRecord;
use crate::protocol::capi::{
    infer_async, Completion, ModelTarget, Notifier, PreparedStep, SeqFields, Server, SlotCtx,
};

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
}

impl std::fmt::Debug for CapiWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapiWire")
            .field("model", &self.model)
            .field("steps", &self.steps.len())
            .field("decoupled", &self.decoupled)
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
    }
}
impl Eq for CapiWire {}

struct Slot {
    ctx: Box<SlotCtx>,
    /// A request is in the server (its final callback has not come yet).
    busy: bool,
    /// The request already ended in error; its remaining callbacks are only drained.
    failed: bool,
    rec: RequestRecord,
    /// Outputs of the last response with outputs (kept for the export and validation).
    body: Vec<u8>,
    /// Arrival of the last response with outputs (ns).
    last_output_ns: u64,
}

pub struct CapiPool {
    wire: CapiWire,
    notifier: Arc<Notifier>,
    completions: Receiver<Completion>,
    /// Slots to create at open.
    initial: usize,
    slots: Vec<Slot>,
    /// Slots with nothing in the server.
    free: Vec<usize>,
}

impl CapiPool {
    /// `waker` is the worker's own (WAKE token): the callbacks wake the worker with it.
    /// `keep_outputs`: copy outputs out of every response (profile export, validation).
    pub fn new(
        wire: CapiWire,
        waker: Arc<Waker>,
        clock: Clock,
        keep_outputs: bool,
        slots: usize,
    ) -> CapiPool {
        let (tx, rx) = unbounded();
        let notifier = Notifier::new(&wire.server, tx, waker, clock, keep_outputs);
        CapiPool {
            wire,
            notifier,
            completions: rx,
            initial: slots,
            slots: Vec::with_capacity(slots),
            free: Vec::with_capacity(slots),
        }
    }

    fn add_slot(&mut self) {
        let index = self.slots.len();
        self.slots.push(Slot {
            ctx: SlotCtx::new(self.notifier.clone(), index),
            busy: false,
            failed: false,
            rec: RequestRecord::default(),
            body: Vec::new(),
            last_output_ns: 0,
        });
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

    /// Hands one request to the server. A refused request is a failed record.
    fn start(&mut self, s: usize, send: Send, cx: &mut Cx<'_>) {
        let seq = send.seq.map(|q| SeqFields {
            correlation_id: q.fields.id,
            start: q.fields.start,
            end: q.fields.end,
        });
        let slot = &mut self.slots[s];
        let start_ns = cx.clock.now_ns();
        let result = match self.wire.steps.get(send.step) {
            Some(step) => infer_async(&self.wire.server, &self.wire.model, step, seq, &slot.ctx),
            None => Err(format!("input step {} does not exist", send.step)),
        };
        // The C API's "send" is building the request and queueing it in the server.
        let send_end_ns = cx.clock.now_ns();
        slot.rec = RequestRecord {
            start_ns,
            send_end_ns,
            step: send.step as u32,
            ..RequestRecord::default()
        };
        send.stamp(&mut slot.rec);
        slot.body.clear();
        slot.last_output_ns = 0;
        cx.sink.started();
        match result {
            Ok(()) => {
                slot.busy = true;
                slot.failed = false;
            }
            Err(msg) => {
                slot.rec.end_ns = send_end_ns;
                cx.sink.finish(slot.rec, &[]);
                cx.sink.fail(msg);
                self.free.push(s);
            }
        }
    }

    fn drain(&mut self, sink: &mut Sink) {
        while let Ok(done) = self.completions.try_recv() {
            self.complete(done, sink);
        }
    }

    /// One callback's news for a slot's request.
    fn complete(&mut self, done: Completion, sink: &mut Sink) {
        let Some(slot) = self.slots.get_mut(done.slot) else {
            return;
        };
        if !slot.busy {
            return;
        }
        if !slot.failed {
            if let Some(msg) = done.error {
                slot.failed = true;
                slot.rec.end_ns = done.at_ns.max(slot.rec.start_ns);
                slot.rec.ok = false;
                sink.finish(slot.rec, &[]);
                sink.fail(msg);
            } else if done.has_response {
                if slot.rec.responses == 0 {
                    slot.rec.recv_start_ns = done.at_ns;
                }
                slot.rec.responses += 1;
                slot.last_output_ns = done.at_ns;
                if sink.keep_bodies {
                    slot.body = done.body;
                }
                sink.response(slot.rec.responses);
            }
        }
        if !done.last {
            return;
        }
        slot.busy = false;
        self.free.push(done.slot);
        if slot.failed {
            return;
        }
        // Latency runs to the last response with outputs; a decoupled request answered
        // only by the final flag ends there.
        slot.rec.end_ns = if slot.rec.responses > 0 {
            slot.last_output_ns
        } else {
            done.at_ns
        };
        if slot.rec.recv_start_ns == 0 {
            slot.rec.recv_start_ns = slot.rec.end_ns;
        }
        if !self.wire.decoupled && slot.rec.responses == 0 {
            slot.rec.ok = false;
            sink.finish(slot.rec, &[]);
            sink.fail("the C API request ended without a response".into());
            return;
        }
        slot.rec.ok = true;
        sink.finish(slot.rec, &slot.body);
    }
}

impl Pool for CapiPool {
    fn open(&mut self, _registry: &Registry) -> Result<(), String> {
        for _ in 0..self.initial {
            self.add_slot();
        }
        Ok(())
    }

    /// No sockets: completions arrive through the channel, drained in `fill`.
    fn on_event(&mut self, _token: usize, _ready: Ready, _cx: &mut Cx<'_>) {}

    fn fill(&mut self, cx: &mut Cx<'_>) {
        // Completions that arrived since the last wake-up free their slots first.
        self.drain(cx.sink);
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

    fn close(&mut self, _registry: &Registry) {
        self.notifier.wait_idle(CLOSE_WAIT);
    }
}

impl Drop for CapiPool {
    fn drop(&mut self) {
        if self.notifier.owed() == 0 {
            return;
        }
        // The server still holds requests that point at our slot contexts and step data:
        // leak them (and keep the server alive) rather than free memory a late callback
        // would touch.
        for slot in self.slots.drain(..) {
            std::mem::forget(slot.ctx);
        }
        std::mem::forget(self.wire.steps.clone());
        std::mem::forget(self.wire.server.clone());
    }
}

#[cfg(test)]
#[path = "capi_pool_tests.rs"]
mod tests;
