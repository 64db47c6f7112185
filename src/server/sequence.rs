//! Sequence (stateful) models: the correlation-ID protocol of Triton's sequence batcher.
//!
//! A request to a sequence model carries `sequence_id` (non-zero number or non-empty string),
//! `sequence_start` on the first request of a sequence and `sequence_end` on the last. The
//! table below holds every live sequence's state; we refuse what Triton's Oldest/Direct
//! strategies would mishandle silently, so client bugs show up as errors in tests:
//! no id, a first request without START, START on an id that is still live, and a request
//! for an id that is not live (never started, or already ended).

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
            SeqId::Text(s) => write!(f, "'{s}'"),
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

/// Live sequences of every sequence model, and how many started and ended.
#[derive(Debug, Default)]
pub struct Sequences {
    /// (model index, id) -> the model's per-sequence state (the running sum).
    live: Mutex<HashMap<(usize, SeqId), i32>>,
    started: AtomicU64,
    ended: AtomicU64,
}

impl Sequences {
    /// Sequences started and ended so far (accepted START / END requests).
    pub fn started_ended(&self) -> (u64, u64) {
        (
            self.started.load(Ordering::Relaxed),
            self.ended.load(Ordering::Relaxed),
        )
    }

    /// Sequences currently live.
    pub fn live(&self) -> usize {
        self.table().len()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, SeqId), i32>> {
        // A poisoned lock means a panic elsewhere mid-update; the map itself is still valid.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One request of the accumulate model: checks the protocol, adds `value` to the running
    /// sum (wrapping, INT32) and returns the new sum. END frees the id.
    pub fn accumulate(
        &self,
        model: (usize, &str),
        ctl: &SeqControl,
        value: i32,
    ) -> Result<i32, String> {
        let (index, name) = model;
        let Some(id) = ctl.id.clone() else {
            return Err(format!(
                "inference request to model '{name}' must specify a non-zero or non-empty \
                 correlation ID (parameter 'sequence_id')"
            ));
        };
        let mut table = self.table();
        let key = (index, id);
        let sum = match (ctl.start, table.get(&key)) {
            (true, Some(_)) => {
                return Err(format!(
                    "sequence {} of model '{name}' is still live: START on an id that has not \
                     ended (sequence id reused before its END)",
                    key.1
                ))
            }
            (true, None) => {
                self.started.fetch_add(1, Ordering::Relaxed);
                value
            }
            (false, Some(&sum)) => sum.wrapping_add(value),
            (false, None) => {
                return Err(format!(
                    "sequence {} of model '{name}' is not live (never started, or already \
                     ended): the first request of a sequence must set 'sequence_start'",
                    key.1
                ))
            }
        };
        if ctl.end {
            table.remove(&key);
            self.ended.fetch_add(1, Ordering::Relaxed);
        } else {
            table.insert(key, sum);
        }
        Ok(sum)
    }
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
    fn protocol_violations() {
        let s = Sequences::default();
        let m = (0, "acc");
        s.accumulate(m, &ctl(3, true, false), 1).unwrap();
        let cases = [
            (
                ctl(0, true, false),
                "must specify a non-zero or non-empty correlation ID",
            ),
            (
                ctl(4, false, false),
                "sequence 4 of model 'acc' is not live",
            ),
            (
                ctl(3, true, false),
                "sequence 3 of model 'acc' is still live",
            ),
        ];
        for (c, want) in cases {
            let err = s.accumulate(m, &c, 1).unwrap_err();
            assert!(err.contains(want), "{c:?}: {err}");
        }
        s.accumulate(m, &ctl(3, false, true), 1).unwrap();
        let err = s.accumulate(m, &ctl(3, false, false), 1).unwrap_err();
        assert!(err.contains("already ended"), "{err}");
        // Refused requests change no counter.
        assert_eq!(s.started_ended(), (1, 1));
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
