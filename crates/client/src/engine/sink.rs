//! Where a worker's finished requests go: the record buffer the coordinator swaps at window
//! edges, the failure tally, and the rule that decides whether a failure ends the run.

use super::slots::SlotShare;
use crate::measure::{FailKind, FailTally, HttpTrace, RequestRecord};

/// Where finished requests go: the record buffer the coordinator swaps at window edges.
pub struct Sink {
    pub records: Vec<RequestRecord>,
    /// Response bodies for the profile export (`keep_bodies`).
    pub bodies: Vec<u8>,
    pub keep_bodies: bool,
    /// A failed request is counted and the run goes on (LLM `profile`); perf_analyzer's
    /// rule, the default, is to stop at the first failure.
    pub keep_going: bool,
    pub completed: u64,
    pub in_flight: usize,
    /// A request failed: nothing new starts (perf_analyzer stops at the first failure).
    pub failed: bool,
    /// The first failure's message, for the coordinator.
    pub error: Option<String>,
    /// Failures counted by kind, with the first message of each.
    pub tally: FailTally,
    /// Latency of the slowest successful request so far (ns): the default request timeout
    /// grows with it (see `deadline.rs`).
    pub slowest_ns: u64,
    /// Sequence models: sequence slots with a request in flight.
    pub seq_busy: Vec<bool>,
    /// Periodic concurrency: responses a request needs before the next batch (0: off), and
    /// requests that got them.
    pub period: u32,
    pub period_reached: usize,
    /// Output slots whose regions are copied into the kept body at completion.
    pub capture: Option<SlotShare>,
    /// Open loop: a request lost with its connection (reset or closed by the server, as
    /// overloaded servers do) is counted and its connection reopened, and the run goes on,
    /// up to `RIDE_OUT_LIMIT` such losses in a row without a success.
    pub ride_out: bool,
    /// Connection losses ridden out since the last successful request.
    ridden: u32,
    /// A pool stopped sending for this loop turn with sends still due (`SENDS_PER_TURN`):
    /// the worker polls without sleeping and sends the rest next turn.
    pub backlog: bool,
    /// HTTP tracing (`profile` over HTTP/1.1): every finished record stores `trace` before
    /// its body (see `RequestRecord::traced`).
    pub tracing: bool,
    /// The trace of the request being finished, set by the pool just before `finish`.
    pub trace: HttpTrace,
}

/// Sends one pool makes per loop turn at most: between two turns the worker reads what has
/// arrived, so answers to the first of thousands of requests sent at once are read (and
/// stamped) while the later ones are still going out.
pub const SENDS_PER_TURN: u32 = 256;

/// Open loop: connection losses in a row (no success between them) that are counted and
/// ridden out; the next one fails the run as any failure does (the server is gone, not busy).
pub const RIDE_OUT_LIMIT: u32 = 1000;

impl Sink {
    pub fn new(records: Vec<RequestRecord>, keep_bodies: bool) -> Sink {
        Sink {
            records,
            bodies: Vec::new(),
            keep_bodies,
            keep_going: false,
            completed: 0,
            in_flight: 0,
            failed: false,
            error: None,
            tally: FailTally::default(),
            slowest_ns: 0,
            backlog: false,
            seq_busy: Vec::new(),
            period: 0,
            period_reached: 0,
            capture: None,
            ride_out: false,
            ridden: 0,
            tracing: false,
            trace: HttpTrace::default(),
        }
    }

    /// Whether a failure of `kind` is counted and ridden out (see `ride_out`): the pool then
    /// reopens the connection and the run goes on.
    pub fn rides_out(&self, kind: FailKind) -> bool {
        self.ride_out
            && matches!(kind, FailKind::Reset | FailKind::Closed)
            && self.ridden < RIDE_OUT_LIMIT
    }

    /// A streamed request got another response with outputs (`count` so far).
    #[inline]
    pub fn response(&mut self, count: u32) {
        if self.period > 0 && count == self.period {
            self.period_reached += 1;
        }
    }

    /// Frees the sequence slot of a request that ended.
    #[inline]
    fn release_seq(&mut self, rec: &RequestRecord) {
        if rec.seq_slot > 0 {
            if let Some(b) = self.seq_busy.get_mut(rec.seq_slot as usize - 1) {
                *b = false;
            }
        }
    }

    /// A request started.
    #[inline]
    pub fn started(&mut self) {
        self.in_flight += 1;
    }

    /// A request ended (ok or not); `body` is kept for the export when asked.
    #[inline]
    pub fn finish(&mut self, mut rec: RequestRecord, body: &[u8]) {
        if self.period > 0 && rec.ok && rec.responses < self.period && !self.failed {
            self.fail(
                FailKind::Invalid,
                format!(
                    "a request ended with {} responses, fewer than --request-period {}",
                    rec.responses, self.period
                ),
            );
        }
        if rec.ok {
            self.ridden = 0;
            self.slowest_ns = self.slowest_ns.max(rec.latency_ns());
        } else if rec.fail == FailKind::None {
            rec.fail = FailKind::Other;
        }
        if self.tracing {
            self.bodies.extend_from_slice(&self.trace.to_bytes());
            self.trace = HttpTrace::default();
            rec.traced = true;
            rec.body_off = self.bodies.len() as u32;
        }
        if self.keep_bodies && !body.is_empty() {
            rec.body_off = self.bodies.len() as u32;
            rec.body_len = body.len() as u32;
            self.bodies.extend_from_slice(body);
        }
        self.release_seq(&rec);
        self.records.push(rec);
        self.completed += 1;
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// `finish` for a request that ran on the pool's slot `pool_slot`: with output capture
    /// (and the body kept), a successful request's body is the response followed by the
    /// slot's output regions (`OutputSlots::capture`), taken before the slot is reused.
    #[inline]
    pub fn finish_in_slot(&mut self, mut rec: RequestRecord, body: &[u8], pool_slot: usize) {
        match &self.capture {
            Some(share) if rec.ok && self.keep_bodies => {
                let slot = share.slots.global(share.base, pool_slot);
                rec.body_off = self.bodies.len() as u32;
                rec.body_len = share.slots.capture(slot, body, &mut self.bodies) as u32;
                // The body is in place: `finish` keeps the record's offsets as they are.
                self.finish(rec, &[]);
            }
            _ => self.finish(rec, body),
        }
    }

    /// A request that was started but never reached the server (e.g. refused by GOAWAY): it
    /// leaves no record.
    #[inline]
    pub fn abandon(&mut self, rec: &RequestRecord) {
        self.release_seq(rec);
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Records a failure of `kind`: it is counted, the first message is kept (and the
    /// first of each kind, as the tally's example) and, unless `keep_going`, no new request
    /// starts.
    pub fn fail(&mut self, kind: FailKind, msg: String) {
        if self.rides_out(kind) {
            self.ridden += 1;
            self.tally.add(kind, || msg);
            return;
        }
        self.failed |= !self.keep_going;
        if self.error.is_none() {
            self.error = Some(msg.clone());
        }
        self.tally.add(kind, || msg);
    }
}
