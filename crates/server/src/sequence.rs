//! Sequence (stateful) models: the correlation-ID protocol of Triton's sequence batcher.
//!
//! A request to a sequence model carries `sequence_id` (non-zero number or non-empty string),
//! `sequence_start` on the first request of a sequence and `sequence_end` on the last. The
//! table below holds every live sequence's state, and the rules and error texts are those of
//! Triton 2.51's sequence batcher (checked against the real server):
//! - no id, or id 0 / "": refused, "must specify a non-zero or non-empty correlation ID";
//! - a request without START for an id that is not live (never started, or already ended,
//!   which is what a step overtaking its predecessor looks like): refused, "must specify
//!   the START flag on the first request of the sequence";
//! - START on an id that is still live: accepted; the old sequence ends early and a new one
//!   starts (Triton logs the conflict as a warning), counted in `restarted`.
//!
//! Refusals are Triton's INVALID_ARG: HTTP 400, gRPC INVALID_ARGUMENT. Every request the
//! table checks is logged in arrival order (`arrivals`), refused ones too, so tests can check
//! the order a client's steps reached the server in.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::Value;

/// A correlation ID as the request gave it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SeqId {
    Number(u64),
    Text(String),
}

impl std::fmt::Display for SeqId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SeqId::Number(n) => write!(f, "{n}"),
            SeqId::Text(s) => write!(f, "{s}"),
        }
    }
}

/// The sequence parameters of one request (all absent for ordinary requests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqControl {
    /// None when the request had no id, or id 0 / "" (Triton's "no correlation ID").
    pub id: Option<SeqId>,
    pub start: bool,
    pub end: bool,
}

impl SeqControl {
    /// Reads `sequence_id` / `sequence_start` / `sequence_end` from HTTP JSON `parameters`.
    pub fn from_json(params: Option<&serde_json::Map<String, Value>>) -> Result<Self, String> {
        let Some(params) = params else {
            return Ok(SeqControl::default());
        };
        let id = match params.get("sequence_id") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) => SeqId::Number(v).non_zero(),
                None => {
                    return Err(format!(
                        "parameter 'sequence_id' must be an unsigned integer or a string, got {n}"
                    ))
                }
            },
            Some(Value::String(s)) => SeqId::Text(s.clone()).non_zero(),
            Some(other) => {
                return Err(format!(
                    "parameter 'sequence_id' must be an unsigned integer or a string, got {other}"
                ))
            }
        };
        let flag = |key: &str| match params.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("parameter '{key}' must be a bool, got {other}")),
        };
        Ok(SeqControl {
            id,
            start: flag("sequence_start")?,
            end: flag("sequence_end")?,
        })
    }
}

impl SeqId {
    /// Triton treats 0 and "" as "no correlation ID".
    pub fn non_zero(self) -> Option<SeqId> {
        match &self {
            SeqId::Number(0) => None,
            SeqId::Text(s) if s.is_empty() => None,
            _ => Some(self),
        }
    }
}

/// One request the sequence table checked, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqArrival {
    /// Index of the model (see `models::find_model`).
    pub model: usize,
    /// The correlation id (`None`: the request had none).
    pub id: Option<SeqId>,
    pub start: bool,
    pub end: bool,
    /// The request was accepted.
    pub ok: bool,
}

/// Arrivals kept in the log (the oldest are dropped beyond this).
pub const SEQ_ARRIVALS_KEPT: usize = 1 << 16;

/// Live sequences of every sequence model, how many started and ended, and the last
/// [`SEQ_ARRIVALS_KEPT`] arrivals.
#[derive(Debug, Default)]
pub struct Sequences {
    state: Mutex<State>,
    started: AtomicU64,
    ended: AtomicU64,
    restarted: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// (model index, id) -> the model's per-sequence state (the running sum).
    live: HashMap<(usize, SeqId), i32>,
    /// Ring of arrivals; `next` is the oldest once it is full.
    log: Vec<SeqArrival>,
    next: usize,
}

impl State {
    fn record(&mut self, arrival: SeqArrival) {
        if self.log.len() < SEQ_ARRIVALS_KEPT {
            self.log.push(arrival);
        } else {
            self.log[self.next] = arrival;
            self.next = (self.next + 1) % SEQ_ARRIVALS_KEPT;
        }
    }
}

impl Sequences {
    /// Sequences started and ended so far (accepted START / END requests).
    pub fn started_ended(&self) -> (u64, u64) {
        (
            self.started.load(Ordering::Relaxed),
            self.ended.load(Ordering::Relaxed),
        )
    }

    /// STARTs that arrived while the id was still live (the old sequence ended early).
    pub fn restarted(&self) -> u64 {
        self.restarted.load(Ordering::Relaxed)
    }

    /// Sequences currently live.
    pub fn live(&self) -> usize {
        self.table().live.len()
    }

    /// The logged arrivals, oldest first.
    pub fn arrivals(&self) -> Vec<SeqArrival> {
        let t = self.table();
        let (newer, older) = t.log.split_at(t.next);
        older.iter().chain(newer).cloned().collect()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock means a panic elsewhere mid-update; the map itself is still valid.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One request of the accumulate model: checks the protocol, adds `value` to the running
    /// sum (wrapping, INT32) and returns the new sum. END frees the id.
    pub fn accumulate(
        &self,
        model: (usize, &str),
        ctl: &SeqControl,
        value: i32,
    ) -> Result<i32, String> {
        let mut table = self.table();
        let result = Self::step(&mut table, model, ctl, value);
        let (started, restarted) = match &result {
            Ok(step) => (step.started, step.restarted),
            Err(_) => (false, false),
        };
        self.started
            .fetch_add(u64::from(started), Ordering::Relaxed);
        self.restarted
            .fetch_add(u64::from(restarted), Ordering::Relaxed);
        if result.is_ok() && ctl.end {
            self.ended.fetch_add(1, Ordering::Relaxed);
        }
        table.record(SeqArrival {
            model: model.0,
            id: ctl.id.clone(),
            start: ctl.start,
            end: ctl.end,
            ok: result.is_ok(),
        });
        result.map(|step| step.sum)
    }

    fn step(
        table: &mut State,
        (index, name): (usize, &str),
        ctl: &SeqControl,
        value: i32,
    ) -> Result<Step, String> {
        let Some(id) = ctl.id.clone() else {
            return Err(format!(
                "inference request to model '{name}' must specify a non-zero or non-empty \
                 correlation ID"
            ));
        };
        let key = (index, id);
        let live = table.live.get(&key).copied();
        let sum = match (ctl.start, live) {
            (true, _) => value,
            (false, Some(sum)) => sum.wrapping_add(value),
            (false, None) => {
                return Err(format!(
                    "inference request for sequence {} to model '{name}' must specify the \
                     START flag on the first request of the sequence",
                    key.1
                ))
            }
        };
        if ctl.end {
            table.live.remove(&key);
        } else {
            table.live.insert(key, sum);
        }
        Ok(Step {
            sum,
            started: ctl.start,
            restarted: ctl.start && live.is_some(),
        })
    }
}

/// An accepted request: the new sum, and whether it started (or restarted) a sequence.
struct Step {
    sum: i32,
    started: bool,
    restarted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctl(id: u64, start: bool, end: bool) -> SeqControl {
        SeqControl {
            id: SeqId::Number(id).non_zero(),
            start,
            end,
        }
    }

    #[test]
    fn running_sum_per_sequence_and_counts() {
        let s = Sequences::default();
        let m = (4, "acc");
        assert_eq!(s.accumulate(m, &ctl(7, true, false), 5), Ok(5));
        assert_eq!(s.accumulate(m, &ctl(8, true, false), 100), Ok(100));
        assert_eq!(s.accumulate(m, &ctl(7, false, false), -2), Ok(3));
        assert_eq!(s.live(), 2);
        assert_eq!(s.accumulate(m, &ctl(7, false, true), 10), Ok(13));
        assert_eq!(s.started_ended(), (2, 1));
        // Ended: the id is free for a new sequence, which starts from zero.
        assert_eq!(s.accumulate(m, &ctl(7, true, true), 1), Ok(1));
        assert_eq!(s.started_ended(), (3, 2));
        assert_eq!(s.live(), 1);
        // Same id on another model is another sequence.
        assert_eq!(s.accumulate((5, "b"), &ctl(8, true, false), 1), Ok(1));
        // Wrapping INT32 sum.
        assert_eq!(
            s.accumulate(m, &ctl(9, true, false), i32::MAX),
            Ok(i32::MAX)
        );
        assert_eq!(s.accumulate(m, &ctl(9, false, false), 1), Ok(i32::MIN));
    }

    #[test]
    fn protocol_violations_have_tritons_texts() {
        let s = Sequences::default();
        let m = (0, "acc");
        s.accumulate(m, &ctl(3, true, false), 1).unwrap();
        let no_start = "must specify the START flag on the first request of the sequence";
        let cases = [
            (
                ctl(0, true, false),
                "inference request to model 'acc' must specify a non-zero or non-empty \
                 correlation ID"
                    .to_string(),
            ),
            (
                ctl(4, false, false),
                format!("inference request for sequence 4 to model 'acc' {no_start}"),
            ),
        ];
        for (c, want) in cases {
            assert_eq!(s.accumulate(m, &c, 1), Err(want), "{c:?}");
        }
        s.accumulate(m, &ctl(3, false, true), 1).unwrap();
        // After END the id is not live: the next step must START again.
        let err = s.accumulate(m, &ctl(3, false, false), 1).unwrap_err();
        assert!(err.contains(no_start), "{err}");
        let text = SeqControl {
            id: Some(SeqId::Text("abc".into())),
            ..SeqControl::default()
        };
        let err = s.accumulate(m, &text, 1).unwrap_err();
        assert!(err.contains("for sequence abc to model"), "{err}");
        // Refused requests change no counter, and every request is logged in order.
        assert_eq!(s.started_ended(), (1, 1));
        let log = s.arrivals();
        assert_eq!(log.len(), 6);
        let oks: Vec<bool> = log.iter().map(|a| a.ok).collect();
        assert_eq!(oks, [true, false, false, true, false, false]);
        assert_eq!(log[1].id, None);
        assert_eq!(log[3].id, Some(SeqId::Number(3)));
        assert!(log[3].end && !log[3].start);
    }

    #[test]
    fn start_on_a_live_id_restarts_the_sequence() {
        let s = Sequences::default();
        let m = (0, "acc");
        assert_eq!(s.accumulate(m, &ctl(5, true, false), 10), Ok(10));
        assert_eq!(s.accumulate(m, &ctl(5, true, false), 2), Ok(2));
        assert_eq!(s.accumulate(m, &ctl(5, false, true), 3), Ok(5));
        assert_eq!(s.started_ended(), (2, 1));
        assert_eq!(s.restarted(), 1);
        assert_eq!(s.live(), 0);
    }

    #[test]
    fn json_parameters() {
        let parse = |v: Value| SeqControl::from_json(v.as_object());
        assert_eq!(parse(json!({})), Ok(SeqControl::default()));
        assert_eq!(SeqControl::from_json(None), Ok(SeqControl::default()));
        assert_eq!(
            parse(json!({"sequence_id": 7, "sequence_start": true, "sequence_end": false})),
            Ok(ctl(7, true, false))
        );
        let text = parse(json!({"sequence_id": "abc", "sequence_end": true})).unwrap();
        assert_eq!(text.id, Some(SeqId::Text("abc".into())));
        assert!(text.end && !text.start);
        assert_eq!(parse(json!({"sequence_id": ""})).unwrap().id, None);
        for (bad, want) in [
            (
                json!({"sequence_id": -1}),
                "'sequence_id' must be an unsigned integer",
            ),
            (
                json!({"sequence_id": 1.5}),
                "'sequence_id' must be an unsigned integer",
            ),
            (json!({"sequence_id": [1]}), "'sequence_id' must be"),
            (
                json!({"sequence_start": "yes"}),
                "'sequence_start' must be a bool",
            ),
        ] {
            let err = parse(bad.clone()).unwrap_err();
            assert!(err.contains(want), "{bad}: {err}");
        }
    }
}
