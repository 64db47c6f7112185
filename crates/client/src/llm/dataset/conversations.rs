//! Multi-turn conversations of a dataset (`multi_turn` files, sessions of a mooncake trace
//! or of a GenAI-Perf payload file) on the engine's session turns (`engine::turns`, as
//! `--session-concurrency` uses them): `--concurrency N` slots each run one conversation
//! at a time; a later turn carries the history (every earlier message and the assistant's
//! reply, merged into `messages` by `inputs::openai::sessions::History`) and waits its
//! `delay` after the previous answer.
//! A failed turn ends its conversation. Each conversation runs at most once, in the
//! sampling strategy's order, until the turns or `--request-count` run out.
//!
//! Turn k of a conversation is request step `steps[k]`, so the records meet their entries
//! as in a single-turn run.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::formats::{Format, Record};
use super::Sampling;
use crate::engine::turns::{TurnEnd, TurnPlan, TurnSource, Turns};
use crate::error::{Error, Result};
use crate::inputs::openai::sessions::{reply_of_body, reply_of_event, History, TurnBody};
use crate::llm::cli::ProfileConfig;
use crate::llm::payload::Entry;
use crate::measure::llm::LlmRequest;
use crate::measure::record::framed_responses;

/// One conversation: its turns' request steps and the pause before each (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub steps: Vec<u32>,
    pub delays_ms: Vec<u64>,
}

/// Everything a run of conversations needs, built once.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationPlan {
    pub conversations: Vec<Conversation>,
    /// Conversation indices in the order slots start them.
    pub order: Vec<usize>,
    /// The JSON body of each step (without history) and the HTTP request head's parts.
    pub bodies: Vec<Vec<u8>>,
    pub paths: Vec<String>,
    pub host: String,
    pub headers: Vec<(String, String)>,
    /// Turns to send at most.
    pub turns: u64,
}

impl ConversationPlan {
    /// A fresh run of the plan (one per load point).
    pub fn source(self: &Arc<Self>) -> TurnSource {
        TurnSource(Arc::new(Run {
            plan: self.clone(),
            shared: Arc::new(Shared {
                next: AtomicUsize::new(0),
                turns_left: AtomicU64::new(self.turns),
            }),
        }))
    }

    /// The input lengths of later turns include the history they carried: the earlier
    /// turns' prompts and the replies to them (client token counts). `by_step[s]` is the
    /// request of step `s`, if it was sent.
    pub fn count_history(&self, requests: &mut [LlmRequest], by_step: &[Option<usize>]) {
        for conv in &self.conversations {
            let mut carried = 0u64;
            for &step in &conv.steps {
                let Some(r) = by_step
                    .get(step as usize)
                    .copied()
                    .flatten()
                    .and_then(|i| requests.get_mut(i))
                else {
                    break;
                };
                let own = r.isl;
                r.isl += carried;
                carried += own + r.osl;
            }
        }
    }
}

/// What every worker's slots share: where the next unstarted conversation is, and the
/// turns left to send.
struct Shared {
    next: AtomicUsize,
    turns_left: AtomicU64,
}

struct Run {
    plan: Arc<ConversationPlan>,
    shared: Arc<Shared>,
}

impl TurnPlan for Run {
    fn worker(&self, slots: usize) -> Box<dyn Turns> {
        Box::new(Slots {
            plan: self.plan.clone(),
            shared: self.shared.clone(),
            slots: (0..slots).map(|_| None).collect(),
        })
    }
}

/// The conversation a slot is running.
struct Active {
    conv: usize,
    /// The turn to send next (or in flight).
    turn: usize,
    history: History,
    /// Clock ns from which the next turn may go.
    due_ns: u64,
    in_flight: Option<TurnBody>,
}

/// One worker's slots.
struct Slots {
    plan: Arc<ConversationPlan>,
    shared: Arc<Shared>,
    slots: Vec<Option<Active>>,
}

impl Slots {
    /// Takes one turn of the budget; `false` when none is left.
    fn take_turn(&self) -> bool {
        self.shared
            .turns_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    fn out_of_turns(&self) -> bool {
        self.shared.turns_left.load(Ordering::Relaxed) == 0
    }
}

impl Turns for Slots {
    fn compose(&mut self, slot: usize, now_ns: u64, out: &mut Vec<u8>) -> Option<u32> {
        if self.slots.get(slot)?.is_none() {
            if self.out_of_turns() {
                return None;
            }
            let k = self.shared.next.fetch_add(1, Ordering::Relaxed);
            let conv = *self.plan.order.get(k)?;
            self.slots[slot] = Some(Active {
                conv,
                turn: 0,
                history: History::default(),
                due_ns: 0,
                in_flight: None,
            });
        }
        let active = self.slots[slot].as_ref()?;
        if active.in_flight.is_some() || now_ns < active.due_ns {
            return None;
        }
        if !self.take_turn() {
            self.slots[slot] = None;
            return None;
        }
        let active = self.slots[slot].as_mut()?;
        let step = self.plan.conversations[active.conv].steps[active.turn];
        let s = step as usize;
        let body = active.history.compose(&self.plan.bodies[s]);
        out.extend_from_slice(&crate::service::openai::encode_request(
            &self.plan.host,
            &self.plan.paths[s],
            &self.plan.headers,
            &body.body,
        ));
        active.in_flight = Some(body);
        Some(step)
    }

    fn ended(&mut self, slot: usize, end: TurnEnd<'_>) {
        let Some(current) = self.slots.get_mut(slot) else {
            return;
        };
        let Some(active) = current.as_mut() else {
            return;
        };
        let Some(body) = active.in_flight.take() else {
            return;
        };
        if end.error.is_some() {
            // The later turns would carry a broken history.
            *current = None;
            return;
        }
        let reply: String = if end.rec.sse {
            framed_responses(end.body)
                .filter_map(|(_, payload)| reply_of_event(payload))
                .collect()
        } else {
            reply_of_body(end.body)
        };
        active.history.commit(body, &reply);
        active.turn += 1;
        let conv = &self.plan.conversations[active.conv];
        match conv.delays_ms.get(active.turn) {
            None => *current = None,
            Some(&delay) => {
                active.due_ns = end.now_ns.saturating_add(delay.saturating_mul(1_000_000));
            }
        }
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.slots
            .iter()
            .flatten()
            .filter(|a| a.in_flight.is_none())
            .map(|a| a.due_ns)
            .min()
    }

    fn exhausted(&self) -> bool {
        self.slots.iter().all(Option::is_none)
            && (self.out_of_turns()
                || self.shared.next.load(Ordering::Relaxed) >= self.plan.order.len())
    }
}

/// The conversations of `records` (steps and delays) when any has several turns; `None`:
/// every record is a request of its own. AIPerf's single_turn entries sharing a session are
/// self-contained, so they are never grouped.
pub(super) fn conversations_of(records: &[Record], format: Format) -> Option<Vec<Conversation>> {
    if format == Format::SingleTurn {
        return None;
    }
    let mut index = std::collections::HashMap::new();
    let mut convs: Vec<Conversation> = Vec::new();
    for (step, r) in records.iter().enumerate() {
        let delay = r.delay_ms.map_or(0, |d| d.round() as u64);
        let k = match &r.session {
            Some(s) => *index.entry(s.as_str()).or_insert_with(|| {
                convs.push(Conversation {
                    steps: Vec::new(),
                    delays_ms: Vec::new(),
                });
                convs.len() - 1
            }),
            None => {
                convs.push(Conversation {
                    steps: Vec::new(),
                    delays_ms: Vec::new(),
                });
                convs.len() - 1
            }
        };
        convs[k].steps.push(step as u32);
        convs[k].delays_ms.push(delay);
    }
    convs.iter().any(|c| c.steps.len() > 1).then_some(convs)
}

/// The run of `convs`: closed loop on chat only (the history lives in `messages`), each
/// conversation once in the sampling order, `--request-count` turns at most.
pub(super) fn conversation_plan(
    cfg: &ProfileConfig,
    entries: &[Entry],
    conversations: Vec<Conversation>,
) -> Result<ConversationPlan> {
    let a = &cfg.args;
    let refuse = |why: &str| {
        Err(Error::usage(format!(
            "profile: multi-turn conversations (a multi-turn dataset, or \
             --conversation-turn-mean above 1) {why}"
        )))
    };
    if cfg.endpoint_type != crate::llm::cli::EndpointType::Chat {
        return refuse("need --endpoint-type chat (the history is sent in 'messages')");
    }
    if !a.request_rate.is_empty() {
        return refuse("run as a closed loop: give --concurrency N (slots), not --request-rate");
    }
    if a.dataset.fixed_schedule {
        return refuse("run as a closed loop: give --concurrency N (slots), not --fixed-schedule");
    }
    if a.warmup_request_count > 0 {
        return refuse("do not support --warmup-request-count");
    }
    if let Some(f) = a.dataset.replay_flag() {
        return refuse(&format!("do not support {f}"));
    }
    let total: u64 = conversations.iter().map(|c| c.steps.len() as u64).sum();
    let n = conversations.len();
    let order = match a.dataset.dataset_sampling_strategy {
        // Each conversation runs once: random draws are a permutation here.
        Some(Sampling::Random | Sampling::Shuffle) => {
            super::order(Some(Sampling::Shuffle), n, n, a.random_seed).unwrap_or_default()
        }
        _ => (0..n).collect(),
    };
    let models = crate::llm::payload::pick_models(cfg, entries.len());
    let model = |i: usize| cfg.models[models[i] as usize].as_str();
    Ok(ConversationPlan {
        bodies: entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                crate::llm::payload::body(cfg, model(i), e)
                    .to_string()
                    .into_bytes()
            })
            .collect(),
        paths: (0..entries.len())
            .map(|i| crate::llm::endpoint_for(cfg, model(i)))
            .collect(),
        host: cfg.address.clone(),
        headers: cfg.headers.clone(),
        turns: a.request_count.map_or(total, |c| c.min(total)),
        conversations,
        order,
    })
}

/// Later turns of conversations: their input length includes the history they carried
/// (unless the server's counts are used, which include it already).
pub fn count_history(
    cfg: &ProfileConfig,
    records: &[crate::measure::RequestRecord],
    requests: &mut [crate::measure::llm::LlmRequest],
) {
    let Some(conv) = cfg
        .args
        .dataset
        .plan
        .as_ref()
        .and_then(|p| p.conversations.as_ref())
    else {
        return;
    };
    if cfg.args.use_server_token_count || records.len() != requests.len() {
        return;
    }
    let mut by_step = vec![None; conv.bodies.len()];
    for (i, r) in records.iter().enumerate() {
        if let Some(slot) = by_step.get_mut(r.step as usize) {
            *slot = Some(i);
        }
    }
    conv.count_history(requests, &by_step);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::RequestRecord;

    fn plan(turns: u64) -> Arc<ConversationPlan> {
        let bodies = (0..3)
            .map(|i| {
                format!(
                    "{{\"model\":\"m\",\"messages\":[{{\"role\":\"user\",\"content\":\"t{i}\"}}]}}"
                )
                .into_bytes()
            })
            .collect();
        Arc::new(ConversationPlan {
            conversations: vec![
                Conversation {
                    steps: vec![0, 1],
                    delays_ms: vec![0, 5],
                },
                Conversation {
                    steps: vec![2],
                    delays_ms: vec![0],
                },
            ],
            order: vec![0, 1],
            bodies,
            paths: vec!["v1/chat/completions".into(); 3],
            host: "h:1".into(),
            headers: Vec::new(),
            turns,
        })
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
    fn turns_carry_the_history_and_wait_their_delay() {
        let p = plan(10);
        let mut slots = p.source().0.worker(1);
        let mut out = Vec::new();
        assert_eq!(slots.compose(0, 0, &mut out), Some(0));
        assert!(out.starts_with(b"POST /v1/chat/completions HTTP/1.1\r\n"));
        assert_eq!(slots.compose(0, 1, &mut out), None, "in flight");
        let rec = RequestRecord::default();
        let answer = br#"{"choices":[{"message":{"role":"assistant","content":"R0"}}]}"#;
        slots.ended(0, end(&rec, answer, None));
        assert_eq!(slots.next_due_ns(), Some(5_001_000));
        assert_eq!(slots.compose(0, 5_000_999, &mut out), None, "in its delay");
        out.clear();
        assert_eq!(slots.compose(0, 5_001_000, &mut out), Some(1));
        let text = String::from_utf8(out.clone()).unwrap();
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        assert_eq!(
            body,
            r#"{"model":"m","messages":[{"role":"user","content":"t0"},{"role":"assistant","content":"R0"},{"role":"user","content":"t1"}]}"#
        );
        slots.ended(0, end(&rec, answer, None));
        assert_eq!(
            slots.compose(0, 0, &mut out),
            Some(2),
            "the next conversation"
        );
        slots.ended(0, end(&rec, b"", Some("HTTP 500")));
        assert!(slots.exhausted());
    }

    #[test]
    fn the_turn_budget_and_failures_end_conversations() {
        let p = plan(1);
        let mut a = p.source().0.worker(1);
        let mut out = Vec::new();
        assert_eq!(a.compose(0, 0, &mut out), Some(0));
        let rec = RequestRecord::default();
        a.ended(0, end(&rec, b"{}", None));
        assert_eq!(a.compose(0, u64::MAX, &mut out), None, "no turn left");
        assert!(a.exhausted());
        // Two workers share one budget and one queue of conversations.
        let src = plan(10).source();
        let (mut w0, mut w1) = (src.0.worker(1), src.0.worker(1));
        assert_eq!(w0.compose(0, 0, &mut out), Some(0));
        assert_eq!(w1.compose(0, 0, &mut out), Some(2));
        w0.ended(0, end(&rec, b"", Some("reset")));
        assert_eq!(
            w0.compose(0, 0, &mut out),
            None,
            "a failed turn ends its conversation"
        );
        assert!(w0.exhausted());
    }

    #[test]
    fn later_turns_count_the_history() {
        let p = plan(10);
        let req = |isl, osl| LlmRequest {
            isl,
            osl,
            ..LlmRequest::default()
        };
        let mut reqs = vec![req(3, 4), req(5, 6), req(7, 1)];
        p.count_history(&mut reqs, &[Some(0), Some(1), Some(2)]);
        assert_eq!(
            reqs.iter().map(|r| r.isl).collect::<Vec<_>>(),
            vec![3, 12, 7]
        );
    }
}
