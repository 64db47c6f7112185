//! The conversations as the engine's request source ([`TurnPlan`]): each worker's slots run
//! one conversation at a time. A slot composes turn i+1 (the history merged into
//! `messages`) once turn i's whole answer is in and the turn's `delay` has passed; a failed
//! turn ends its conversation; a slot whose conversation ended takes the next one nobody has
//! started. Every composed turn is logged in the [`Book`] (its conversation and the body as
//! sent), which the run reads back to match the engine's records to their turns.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::engine::turns::{TurnEnd, TurnPlan, Turns, DEFAULT_IDLE_LIMIT_NS};
use crate::inputs::openai::sessions::{reply_of_body, reply_of_event, History, Session, TurnBody};
use crate::measure::record::framed_responses;
use crate::service::openai::{encode_request, request_inputs_json};

/// One composed turn, by id (the engine record's `step`).
#[derive(Debug, Clone, Default)]
pub struct Logged {
    /// The conversation (index in data order).
    pub session: usize,
    /// The export's `request_inputs` object: the body as sent, history included.
    pub inputs: String,
    /// When it was composed (clock ns).
    pub composed_ns: u64,
    /// Why it failed, once it ended.
    pub error: Option<String>,
}

/// What every worker's slots share: the conversations, where the next unstarted one is,
/// and the log of composed turns.
pub struct Book {
    /// `Host` header value, endpoint and extra headers of every request.
    host: String,
    endpoint: String,
    headers: Vec<(String, String)>,
    pub sessions: Vec<Session>,
    /// The next conversation nobody has started.
    next: AtomicUsize,
    log: Mutex<Vec<Logged>>,
    /// How long a turn may wait with no byte moving (see `Turns::idle_limit_ns`).
    idle_limit_ns: u64,
}

impl Book {
    pub fn new(
        host: String,
        endpoint: String,
        headers: Vec<(String, String)>,
        sessions: Vec<Session>,
    ) -> Book {
        Book {
            host,
            endpoint,
            headers,
            sessions,
            next: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
            idle_limit_ns: DEFAULT_IDLE_LIMIT_NS,
        }
    }

    /// A turn fails after `limit` with no byte moving on its connection (default: ten
    /// minutes; tests shorten it).
    #[cfg(test)]
    pub fn with_idle_limit(mut self, limit: std::time::Duration) -> Book {
        self.idle_limit_ns = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
        self
    }

    /// Conversations started so far.
    pub fn started(&self) -> usize {
        self.next.load(Ordering::Relaxed).min(self.sessions.len())
    }

    /// The composed turns, by id (the log is left empty).
    pub fn take_log(&self) -> Vec<Logged> {
        self.log
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }

    fn log_turn(&self, turn: Logged) -> u32 {
        let Ok(mut log) = self.log.lock() else {
            return u32::MAX;
        };
        log.push(turn);
        u32::try_from(log.len() - 1).unwrap_or(u32::MAX)
    }

    fn log_error(&self, id: u32, error: &str) {
        if let Ok(mut log) = self.log.lock() {
            if let Some(t) = log.get_mut(id as usize) {
                t.error = Some(error.to_string());
            }
        }
    }
}

/// A shared book is the run's turn plan.
pub struct Plan(pub Arc<Book>);

impl TurnPlan for Plan {
    fn worker(&self, slots: usize) -> Box<dyn Turns> {
        Box::new(Slots {
            book: self.0.clone(),
            slots: (0..slots).map(|_| None).collect(),
        })
    }
}

/// The conversation a slot is running.
struct Conversation {
    session: usize,
    /// The turn to send next (or in flight).
    turn: usize,
    history: History,
    /// Clock ns from which the next turn may go.
    due_ns: u64,
    /// The turn in flight: its id and body (committed to the history once answered).
    in_flight: Option<(u32, TurnBody)>,
}

/// One worker's slots.
struct Slots {
    book: Arc<Book>,
    slots: Vec<Option<Conversation>>,
}

impl Turns for Slots {
    fn idle_limit_ns(&self) -> u64 {
        self.book.idle_limit_ns
    }

    fn compose(&mut self, slot: usize, now_ns: u64, out: &mut Vec<u8>) -> Option<u32> {
        let book = &self.book;
        let current = self.slots.get_mut(slot)?;
        if current.is_none() {
            let k = book.next.fetch_add(1, Ordering::Relaxed);
            if k >= book.sessions.len() {
                return None;
            }
            *current = Some(Conversation {
                session: k,
                turn: 0,
                history: History::default(),
                due_ns: 0,
                in_flight: None,
            });
        }
        let conv = current.as_mut()?;
        if conv.in_flight.is_some() || now_ns < conv.due_ns {
            return None;
        }
        let turn = &book.sessions[conv.session].turns[conv.turn];
        let body = conv.history.compose(&turn.payload);
        out.extend_from_slice(&encode_request(
            &book.host,
            &book.endpoint,
            &book.headers,
            &body.body,
        ));
        let id = book.log_turn(Logged {
            session: conv.session,
            inputs: request_inputs_json(&body.body),
            composed_ns: now_ns,
            error: None,
        });
        conv.in_flight = Some((id, body));
        Some(id)
    }

    fn ended(&mut self, slot: usize, end: TurnEnd<'_>) {
        let Some(current) = self.slots.get_mut(slot) else {
            return;
        };
        let Some((id, body)) = current.as_mut().and_then(|c| c.in_flight.take()) else {
            return;
        };
        if let Some(error) = end.error {
            // The later turns would carry a broken history.
            self.book.log_error(id, error);
            *current = None;
            return;
        }
        let Some(conv) = current.as_mut() else {
            return;
        };
        let reply = if end.rec.sse {
            framed_responses(end.body)
                .filter_map(|(_, payload)| reply_of_event(payload))
                .collect()
        } else {
            reply_of_body(end.body)
        };
        conv.history.commit(body, &reply);
        let turns = &self.book.sessions[conv.session].turns;
        let delay_ms = turns[conv.turn].delay_ms;
        conv.turn += 1;
        if conv.turn == turns.len() {
            *current = None;
        } else {
            conv.due_ns = end
                .now_ns
                .saturating_add(delay_ms.saturating_mul(1_000_000));
        }
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.slots
            .iter()
            .flatten()
            .filter(|c| c.in_flight.is_none())
            .map(|c| c.due_ns)
            .min()
    }

    fn exhausted(&self) -> bool {
        self.slots.iter().all(Option::is_none)
            && self.book.next.load(Ordering::Relaxed) >= self.book.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::openai::sessions::Turn;
    use crate::measure::RequestRecord;

    fn book(turns: &[usize], delay_ms: u64) -> Arc<Book> {
        let sessions = turns
            .iter()
            .enumerate()
            .map(|(s, &n)| Session {
                id: format!("s{s}"),
                turns: (0..n)
                    .map(|t| Turn {
                        payload: format!(
                            "{{\"messages\":[{{\"role\":\"user\",\"content\":\"s{s}t{t}\"}}]}}"
                        )
                        .into_bytes(),
                        delay_ms,
                    })
                    .collect(),
            })
            .collect();
        Arc::new(Book::new(
            "h:1".into(),
            "v1/chat".into(),
            Vec::new(),
            sessions,
        ))
    }

    fn end<'a>(rec: &'a RequestRecord, body: &'a [u8], error: Option<&'a str>) -> TurnEnd<'a> {
        TurnEnd {
            rec,
            body,
            error,
            now_ns: 1_000,
        }
    }

    #[test]
    fn a_slot_waits_for_the_answer_and_the_delay_and_carries_the_history() {
        let book = book(&[2], 5);
        let mut slots = Plan(book.clone()).worker(1);
        let mut out = Vec::new();
        assert_eq!(slots.compose(0, 0, &mut out), Some(0));
        assert!(out.starts_with(b"POST /v1/chat HTTP/1.1\r\n"));
        assert_eq!(slots.compose(0, 10, &mut out), None, "turn 0 is in flight");
        let rec = RequestRecord::default();
        let answer = br#"{"choices":[{"message":{"role":"assistant","content":"hi there"}}]}"#;
        slots.ended(0, end(&rec, answer, None));
        assert_eq!(slots.next_due_ns(), Some(5_001_000));
        assert_eq!(
            slots.compose(0, 5_000_999, &mut out),
            None,
            "still in its delay"
        );
        out.clear();
        assert_eq!(slots.compose(0, 5_001_000, &mut out), Some(1));
        let log = book.take_log();
        assert!(log[1].inputs.contains("hi there"), "{}", log[1].inputs);
        assert!(log[1].inputs.contains("s0t0") && log[1].inputs.contains("s0t1"));
        slots.ended(0, end(&rec, answer, None));
        assert!(slots.exhausted());
        assert_eq!(book.started(), 1);
    }

    #[test]
    fn a_failed_turn_ends_its_conversation_and_the_slot_takes_the_next() {
        let book = book(&[3, 1], 0);
        let mut slots = Plan(book.clone()).worker(1);
        let mut out = Vec::new();
        let rec = RequestRecord::default();
        assert_eq!(slots.compose(0, 0, &mut out), Some(0));
        slots.ended(0, end(&rec, b"", Some("HTTP 500: boom")));
        assert_eq!(slots.compose(0, 0, &mut out), Some(1));
        assert!(!slots.exhausted());
        slots.ended(0, end(&rec, b"{}", None));
        assert_eq!(slots.compose(0, 0, &mut out), None);
        assert!(slots.exhausted());
        let log = book.take_log();
        assert_eq!((log[0].session, log[1].session), (0, 1));
        assert_eq!(log[0].error.as_deref(), Some("HTTP 500: boom"));
        assert_eq!(book.started(), 2);
    }
}
