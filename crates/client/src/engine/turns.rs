//! Requests composed on the worker at send time, one conversation per pool slot
//! (`--session-concurrency`): a slot's next request depends on the answer to its previous
//! one, so it is written only when the slot may send it. The source of the requests (which
//! conversation, how the history is merged) lives with its caller behind [`Turns`]; the
//! engine only asks it for bytes and tells it how each request ended. A composed request is
//! allocated per send: these runs are not on perf_analyzer mode's hot path.

use std::sync::Arc;

use crate::clock::Clock;
use crate::measure::RequestRecord;

/// How a request of a slot ended, as its connection saw it.
#[derive(Debug, Clone, Copy)]
pub struct TurnEnd<'a> {
    /// The request's record (`step` is the id [`Turns::compose`] gave it).
    pub rec: &'a RequestRecord,
    /// The whole answer, or the framed events of a streamed one.
    pub body: &'a [u8],
    /// Why the request failed; `None` when it was answered.
    pub error: Option<&'a str>,
    /// When the connection finished with it (clock ns).
    pub now_ns: u64,
}

/// One worker's request source, slot by slot.
pub trait Turns: std::marker::Send {
    /// Writes `slot`'s next request (complete HTTP bytes) into `out` when the slot may send
    /// at `now_ns`, and returns its id, which becomes the record's `step`.
    fn compose(&mut self, slot: usize, now_ns: u64, out: &mut Vec<u8>) -> Option<u32>;
    /// The request in flight on `slot` ended.
    fn ended(&mut self, slot: usize, end: TurnEnd<'_>);
    /// Clock ns at which a waiting slot may send next (`None`: no slot is waiting).
    fn next_due_ns(&self) -> Option<u64>;
    /// No slot will send again.
    fn exhausted(&self) -> bool;
}

/// Makes each worker's [`Turns`] for the pool slots it owns.
pub trait TurnPlan: std::marker::Send + Sync {
    fn worker(&self, slots: usize) -> Box<dyn Turns>;
}

/// A run's turn plan, as a [`super::Load`] carries it.
#[derive(Clone)]
pub struct TurnSource(pub Arc<dyn TurnPlan>);

impl std::fmt::Debug for TurnSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnSource")
    }
}

impl PartialEq for TurnSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A worker's turns and the bytes of the last composed request.
pub struct TurnFeed {
    turns: Box<dyn Turns>,
    pub scratch: Vec<u8>,
}

impl TurnFeed {
    pub fn new(turns: Box<dyn Turns>) -> TurnFeed {
        TurnFeed {
            turns,
            scratch: Vec::new(),
        }
    }

    /// `slot`'s next request into `scratch`, and its id.
    pub fn compose(&mut self, slot: usize, now_ns: u64) -> Option<u32> {
        self.scratch.clear();
        self.turns.compose(slot, now_ns, &mut self.scratch)
    }

    /// Tells the source how `slot`'s request ended.
    pub fn ended(
        &mut self,
        slot: usize,
        rec: &RequestRecord,
        body: &[u8],
        error: Option<&str>,
        clock: &Clock,
    ) {
        let now_ns = clock.now_ns();
        let end = TurnEnd {
            rec,
            body,
            error,
            now_ns,
        };
        self.turns.ended(slot, end);
    }

    pub fn next_due_ns(&self) -> Option<u64> {
        self.turns.next_due_ns()
    }

    pub fn exhausted(&self) -> bool {
        self.turns.exhausted()
    }
}
