//! Requests composed on the worker at send time, one conversation per pool slot
//! (`--session-concurrency`): a slot's next request depends on the answer to its previous
//! one, so it is written only when the slot may send it. The source of the requests (which
//! conversation, how the history is merged) lives with its caller behind [`Turns`]; the
//! engine only asks it for bytes and tells it how each request ended. A composed request is
//! allocated per send: these runs are not on perf_analyzer mode's hot path. Only the HTTP/1.1
//! pool, where pool slot `i` is connection `i`, reports how turns ended.

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
    /// How long (ns) a request may wait with no byte moving on its connection before it
    /// fails with a timeout, unless the run gives a request timeout (see `deadline.rs`).
    fn idle_limit_ns(&self) -> u64 {
        DEFAULT_IDLE_LIMIT_NS
    }
}

/// A request in flight fails after this long with no byte moving (ten minutes).
pub const DEFAULT_IDLE_LIMIT_NS: u64 = 600_000_000_000;

/// Makes each worker's [`Turns`] for the pool slots it owns.
pub trait TurnPlan: std::marker::Send + Sync {
    fn worker(&self, slots: usize) -> Box<dyn Turns>;
    /// All slots go to one worker (the source keeps one clock for the whole run).
    fn one_worker(&self) -> bool {
        false
    }
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

    /// The next time the worker must wake for a slot's turn to come due.
    pub fn next_due_ns(&self) -> Option<u64> {
        self.turns.next_due_ns()
    }

    /// See [`Turns::idle_limit_ns`].
    pub fn idle_limit_ns(&self) -> u64 {
        self.turns.idle_limit_ns()
    }

    pub fn exhausted(&self) -> bool {
        self.turns.exhausted()
    }
}

#[cfg(test)]
mod tests {
    use super::super::pool::{Feed, Sink};
    use super::*;

    /// Slot 0 sends `left` turns, each due 10 ns after the last one ended.
    struct Countdown {
        left: u32,
        due_ns: u64,
        in_flight: bool,
    }

    impl Turns for Countdown {
        fn compose(&mut self, slot: usize, now_ns: u64, out: &mut Vec<u8>) -> Option<u32> {
            if slot != 0 || self.left == 0 || self.in_flight || now_ns < self.due_ns {
                return None;
            }
            self.left -= 1;
            self.in_flight = true;
            out.extend_from_slice(format!("turn {}", self.left).as_bytes());
            Some(self.left)
        }
        fn ended(&mut self, _slot: usize, end: TurnEnd<'_>) {
            self.in_flight = false;
            self.due_ns = end.now_ns + 10;
        }
        fn next_due_ns(&self) -> Option<u64> {
            (!self.in_flight && self.left > 0).then_some(self.due_ns)
        }
        fn exhausted(&self) -> bool {
            self.left == 0 && !self.in_flight
        }
    }

    #[test]
    fn the_feed_sends_composed_turns_when_the_source_allows() {
        let mut feed = Feed::new(Arc::new(vec![b"unused".to_vec()]), 0, None, None, None);
        let turns = Countdown {
            left: 2,
            due_ns: 0,
            in_flight: false,
        };
        feed.set_turns(TurnFeed::new(Box::new(turns)));
        assert!(feed.timed());
        let mut sink = Sink::new(Vec::new(), true);
        assert_eq!(feed.next(&mut sink, 0, 1), None, "slot 1 has nothing");
        let send = feed.next(&mut sink, 0, 0).unwrap();
        assert!(send.owned);
        assert_eq!(send.step, 1, "the record's step is the turn's id");
        assert_eq!(feed.bytes(&send), b"turn 1");
        assert_eq!(feed.next(&mut sink, 5, 0), None, "in flight");
        let clock = Clock::new();
        let rec = RequestRecord::default();
        feed.turns().unwrap().ended(0, &rec, b"", None, &clock);
        let due = feed.next_due_ns().unwrap();
        assert!(due > 10);
        assert_eq!(feed.next(&mut sink, due - 1, 0), None, "still waiting");
        assert_eq!(feed.next(&mut sink, due, 0).map(|s| s.step), Some(0));
        assert!(!feed.exhausted());
        feed.turns().unwrap().ended(0, &rec, b"", None, &clock);
        assert!(feed.exhausted());
        assert_eq!(feed.sent, 2);
        assert!(!feed.chainable());
    }
}
