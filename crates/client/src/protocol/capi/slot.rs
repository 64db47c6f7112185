//! A pool slot as Triton's callback threads see it: the request in flight (its record and
//! outputs, filled in by the response callbacks), the ring its finished requests go to, and
//! the slot's output buffers.
//!
//! When a request ends, its final callback pushes the finished record to the slot's ring.
//! In closed loop (`Notifier::set_chain`) the same callback then sends the slot's next
//! request at once, with no thread hand-off; the worker collects the records from the ring
//! when it next runs (at its tick, before a window swap, or when the ring is half full). In
//! open loop, or once chaining stops, the callback parks the slot: it sends the slot's index
//! over a channel and wakes the worker, which sends the next request when one is due.
//! No callback unwinds into C: each body runs under `catch_unwind`.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use mio::Waker;

use super::ffi::{Api, TsRequest, TsResponse, RESPONSE_COMPLETE_FINAL};
use super::infer::{response_error, submit, Callbacks, ModelTarget, PreparedStep, SeqFields};
use super::outputs::{write_outputs, BufCache};
use super::ring::{Done, Ring, RING_LEN};
use super::server::Server;
use crate::clock::Clock;
use crate::measure::RequestRecord;

/// `TRITONSERVER_REQUEST_RELEASE_ALL`: the request object is no longer used by the server.
const REQUEST_RELEASE_ALL: u32 = 1;

/// What a pool's requests target and what their callbacks keep.
pub struct Target {
    pub server: Arc<Server>,
    pub model: Arc<ModelTarget>,
    pub steps: Arc<Vec<PreparedStep>>,
    /// Copy every response's outputs (profile export, validation).
    pub keep_outputs: bool,
    /// Keep every response, each framed with its arrival time
    /// (`measure::record::framed_responses`), instead of the last one.
    pub framed: bool,
    /// A request ends at the final flag, after any number of responses.
    pub decoupled: bool,
}

/// What the slots of one pool share.
pub struct Notifier {
    api: Arc<Api>,
    target: Target,
    /// Parked slots go back to the worker through here, with a wake-up.
    parked: Sender<usize>,
    waker: Arc<Waker>,
    clock: Clock,
    /// Closed loop: a finished request's callback sends the slot's next request.
    chain: AtomicBool,
    /// With a request budget (`budgeted`): requests chains may still send.
    budget: AtomicU64,
    budgeted: AtomicBool,
}

impl Notifier {
    pub fn new(target: Target, parked: Sender<usize>, waker: Arc<Waker>, clock: Clock) -> Notifier {
        Notifier {
            api: target.server.api.clone(),
            target,
            parked,
            waker,
            clock,
            chain: AtomicBool::new(false),
            budget: AtomicU64::new(0),
            budgeted: AtomicBool::new(false),
        }
    }

    /// Starts (with the requests still allowed, `None`: no limit) or stops chaining.
    pub fn set_chain(&self, on: bool, budget: Option<u64>) {
        if on {
            self.budget.store(budget.unwrap_or(0), Ordering::Relaxed);
            self.budgeted.store(budget.is_some(), Ordering::Relaxed);
        }
        self.chain.store(on, Ordering::Release);
    }

    /// Closed loop: another request may be sent now (taking it from the budget).
    pub fn may_chain(&self) -> bool {
        if !self.chain.load(Ordering::Acquire) {
            return false;
        }
        !self.budgeted.load(Ordering::Relaxed)
            || self
                .budget
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |b| b.checked_sub(1))
                .is_ok()
    }

    /// Input steps there are.
    pub fn steps(&self) -> usize {
        self.target.steps.len()
    }
}

/// The request in flight of a slot.
#[derive(Default)]
struct Live {
    rec: RequestRecord,
    body: Vec<u8>,
    /// Arrival of the last response with outputs (ns).
    last_output_ns: u64,
    error: Option<String>,
    /// The step a chained request sends next.
    next_step: usize,
}

/// A slot's callback context: its address is its requests' `userp`, so it is boxed and
/// stays alive until every callback owed has run.
pub struct SlotCtx {
    notifier: Arc<Notifier>,
    slot: usize,
    /// Callbacks still to come: 2 per request in the server (the release and the final
    /// response).
    owed: AtomicUsize,
    /// Held while a response callback updates `live` (the responses of one request do not
    /// overlap in practice; the flag makes sure).
    updating: AtomicBool,
    live: UnsafeCell<Live>,
    /// Finished requests for the worker.
    pub ring: Ring,
    bufs: BufCache,
}

// SAFETY: `live` is written by whoever owns the slot's request: the worker before it submits
// (a parked slot), then the request's callbacks one at a time (`updating`), then the final
// callback until it submits the next request or parks the slot (publishing through the
// channel). The server's queues order a submit before the request's callbacks.
unsafe impl Sync for SlotCtx {}
unsafe impl Send for SlotCtx {}

impl SlotCtx {
    pub fn new(notifier: Arc<Notifier>, slot: usize) -> Box<SlotCtx> {
        Box::new(SlotCtx {
            notifier,
            slot,
            owed: AtomicUsize::new(0),
            updating: AtomicBool::new(false),
            live: UnsafeCell::new(Live::default()),
            ring: Ring::new(),
            bufs: BufCache::default(),
        })
    }

    pub fn owed(&self) -> usize {
        self.owed.load(Ordering::Acquire)
    }

    /// Builds and submits a request of `step` for this slot; `stamp` fills the record's
    /// send-side fields. On error the record of the failed send is returned with it.
    ///
    /// # Safety
    /// The caller owns the slot: it is parked (no request of it is in the server, and its
    /// last callback has parked it), or this is its final callback.
    pub unsafe fn launch(
        &self,
        step: usize,
        seq: Option<SeqFields>,
        stamp: impl FnOnce(&mut RequestRecord),
    ) -> Result<(), (RequestRecord, String)> {
        let n = &*self.notifier;
        let live = &mut *self.live.get();
        live.rec = RequestRecord {
            start_ns: n.clock.now_ns(),
            step: step as u32,
            ..RequestRecord::default()
        };
        stamp(&mut live.rec);
        live.body.clear();
        live.last_output_ns = 0;
        live.error = None;
        live.next_step = if step + 1 >= n.steps() { 0 } else { step + 1 };
        let Some(inputs) = n.target.steps.get(step) else {
            live.rec.send_end_ns = live.rec.start_ns;
            return Err((live.rec, format!("input step {step} does not exist")));
        };
        let me = (self as *const SlotCtx).cast_mut().cast();
        let callbacks = Callbacks {
            on_release,
            on_response,
            userp: me,
            alloc_userp: (&self.bufs as *const BufCache).cast_mut().cast(),
        };
        let t = &n.target;
        // The C API's "send" is building the request; the record is complete before the
        // server can answer it.
        let before = || {
            live.rec.send_end_ns = n.clock.now_ns();
            self.owed.fetch_add(2, Ordering::AcqRel);
        };
        let sent = submit(&t.server, &t.model, inputs, seq, callbacks, before);
        sent.map_err(|e| {
            let live = &mut *self.live.get();
            if live.rec.send_end_ns == 0 {
                live.rec.send_end_ns = n.clock.now_ns();
            } else {
                self.owed.fetch_sub(2, Ordering::AcqRel);
            }
            (live.rec, e)
        })
    }

    /// The step this slot's next chained request sends.
    ///
    /// # Safety
    /// As [`SlotCtx::launch`].
    pub unsafe fn next_step(&self) -> usize {
        (*self.live.get()).next_step
    }

    /// One response callback.
    unsafe fn respond(&self, response: *mut TsResponse, flags: u32) {
        let n = &*self.notifier;
        let at = n.clock.now_ns();
        while self.updating.swap(true, Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let live = &mut *self.live.get();
        if !response.is_null() {
            read_response(n, live, response, at);
            let _ = n.api.check((n.api.response_delete)(response));
        }
        if flags & RESPONSE_COMPLETE_FINAL == 0 {
            self.updating.store(false, Ordering::Release);
            return;
        }
        close_record(n, live, at);
        // Room for this record and, should the chained send fail, its failure.
        let chain = live.error.is_none() && self.ring.len() + 2 <= RING_LEN && n.may_chain();
        let waiting = self.hand_over(live, chain);
        self.updating.store(false, Ordering::Release);
        if chain {
            let step = live.next_step;
            match self.launch(step, None, |_| {}) {
                Ok(()) => {
                    if waiting == RING_LEN / 2 {
                        let _ = n.waker.wake();
                    }
                }
                Err((rec, msg)) => {
                    live.rec = RequestRecord { ok: false, ..rec };
                    live.rec.end_ns = rec.send_end_ns;
                    live.error = Some(msg);
                    self.hand_over(live, false);
                    self.park();
                }
            }
        } else {
            self.park();
        }
        // This request's final callback is done (a chained request already added its own).
        self.owed.fetch_sub(1, Ordering::AcqRel);
    }

    /// Pushes the finished request to the ring; the entries then waiting.
    unsafe fn hand_over(&self, live: &mut Live, chained: bool) -> usize {
        let pushed = self.ring.push(|d: &mut Done| {
            d.rec = live.rec;
            std::mem::swap(&mut d.body, &mut live.body);
            d.error = live.error.take();
            d.chained = chained;
            d.parked = !chained;
        });
        // A slot parks before its ring fills, and the worker empties the ring before it
        // sends again, so there is always room.
        debug_assert!(pushed.is_some(), "slot ring overflow");
        pushed.unwrap_or(RING_LEN)
    }

    fn park(&self) {
        let n = &*self.notifier;
        let _ = n.parked.send(self.slot);
        let _ = n.waker.wake();
    }
}

/// Counts a response, stamps it and copies its outputs when they are kept.
unsafe fn read_response(n: &Notifier, live: &mut Live, response: *mut TsResponse, at: u64) {
    if live.error.is_some() {
        return;
    }
    if let Some(e) = response_error(&n.api, response) {
        fail(live, at, e);
        return;
    }
    if live.rec.responses == 0 {
        live.rec.recv_start_ns = at;
    }
    live.rec.responses += 1;
    live.last_output_ns = at;
    if !n.target.keep_outputs {
        return;
    }
    let copied = if n.target.framed {
        // The layout of `measure::record::push_framed_response`, written in place.
        let head = live.body.len();
        live.body.extend_from_slice(&at.to_le_bytes());
        live.body.extend_from_slice(&[0; 4]);
        let copied = write_outputs(&n.api, response, &mut live.body);
        let len = (live.body.len() - head - 12) as u32;
        live.body[head + 8..head + 12].copy_from_slice(&len.to_le_bytes());
        copied
    } else {
        live.body.clear();
        write_outputs(&n.api, response, &mut live.body)
    };
    if let Err(e) = copied {
        fail(live, at, e);
    }
}

fn fail(live: &mut Live, at: u64, msg: String) {
    live.rec.end_ns = at.max(live.rec.start_ns);
    live.error = Some(msg);
}

/// The request's end: latency runs to the last response with outputs (a decoupled request
/// answered only by the final flag ends there).
fn close_record(n: &Notifier, live: &mut Live, at: u64) {
    if live.error.is_none() {
        let rec = &mut live.rec;
        rec.end_ns = if rec.responses > 0 {
            live.last_output_ns
        } else {
            at
        };
        if rec.recv_start_ns == 0 {
            rec.recv_start_ns = rec.end_ns;
        }
        if !n.target.decoupled && rec.responses == 0 {
            live.error = Some("the C API request ended without a response".into());
        }
    }
    live.rec.ok = live.error.is_none();
}

/// Waits up to `limit` until no slot is owed a callback; false if some still are.
pub fn wait_idle(slots: &[Box<SlotCtx>], limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while slots.iter().any(|s| s.owed() > 0) {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Release callback: the server is done with the request object.
unsafe extern "C" fn on_release(request: *mut TsRequest, flags: u32, userp: *mut std::ffi::c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if flags & REQUEST_RELEASE_ALL == 0 || userp.is_null() {
            return;
        }
        // SAFETY: `userp` is the slot context given at setup, alive while callbacks are owed.
        let ctx = unsafe { &*userp.cast::<SlotCtx>() };
        let api = &ctx.notifier.api;
        // SAFETY: the server released the request: it is the slot's to delete.
        let _ = api.check(unsafe { (api.request_delete)(request) });
        ctx.owed.fetch_sub(1, Ordering::AcqRel);
    }));
}

/// Response callback: see [`SlotCtx::respond`].
unsafe extern "C" fn on_response(
    response: *mut TsResponse,
    flags: u32,
    userp: *mut std::ffi::c_void,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if userp.is_null() {
            return;
        }
        // SAFETY: the slot context given at setup, alive while callbacks are owed; the
        // response belongs to the slot until deleted, which `respond` does once.
        unsafe { (*userp.cast::<SlotCtx>()).respond(response, flags) };
    }));
}
