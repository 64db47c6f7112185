//! Multi-turn conversations of a dataset (`multi_turn` files, sessions of a mooncake trace
//! or of a GenAI-Perf payload file) on the engine's session turns (`engine::turns`, as
//! `--session-concurrency` uses them): each slot (connection) runs one conversation at a
//! time; a later turn carries the history (every earlier message and the assistant's
//! reply, merged into `messages` by `inputs::openai::sessions::History`). A failed turn
//! ends its conversation. Each conversation runs at most once, in the sampling strategy's
//! order, until the turns or `--request-count` run out.
//!
//! When turns go ([`Timing`]): closed loop (`--concurrency N`: N slots, a later turn waits
//! its `delay` after the previous answer, a free slot starts the next conversation at
//! once); `--request-rate` (every turn takes a tick of the rate's schedule, later turns of
//! running conversations first, `--concurrency` capping the conversations under way); or
//! `--user-centric-rate` (fixed per-user gaps; see `conversation_timing`). The open-loop
//! timings run on one worker, which holds the whole run's clock.
//!
//! Turn k of a conversation is request step `steps[k]`, so the records meet their entries
//! as in a single-turn run.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::conversation_timing::{Ticks, Users};
use super::formats::{Format, Record};
use super::Sampling;
use crate::engine::pace::Schedule;
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
    /// `--user-centric-rate` and `--num-users`: the run's timing at any rate point.
    pub user_centric: Option<UserCentric>,
}

/// AIPerf's user-centric mode: `users` users sending `rate` turns per second in all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UserCentric {
    pub rate: f64,
    pub users: u64,
}

/// When the turns of a run go.
#[derive(Debug, Clone, PartialEq)]
pub enum Timing {
    /// Closed loop: a slot sends as soon as its turn may go.
    Closed,
    /// `--request-rate`: each turn takes a tick of this schedule.
    Rate(Schedule),
    /// `--user-centric-rate`.
    Users(UserCentric),
}

impl ConversationPlan {
    /// A fresh closed-loop run of the plan (one per load point).
    pub fn source(self: &Arc<Self>) -> TurnSource {
        self.timed(Timing::Closed)
    }

    /// A fresh run of the plan with `timing` (one per load point).
    pub fn timed(self: &Arc<Self>, timing: Timing) -> TurnSource {
        TurnSource(Arc::new(Run {
            plan: self.clone(),
            shared: Arc::new(Shared {
                next: AtomicUsize::new(0),
                turns_left: AtomicU64::new(self.turns),
            }),
            timing,
        }))
    }

    /// Turns per conversation on average.
    pub fn mean_turns(&self) -> f64 {
        let n = self.conversations.len().max(1) as f64;
        self.conversations
            .iter()
            .map(|c| c.steps.len())
            .sum::<usize>() as f64
            / n
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
    timing: Timing,
}

impl TurnPlan for Run {
    fn worker(&self, slots: usize) -> Box<dyn Turns> {
        let pacing = match &self.timing {
            Timing::Closed => Pacing::Closed,
            Timing::Rate(schedule) => Pacing::Rate(Ticks::new(schedule)),
            Timing::Users(u) => Pacing::Users(Users::new(u.rate, u.users, self.plan.mean_turns())),
        };
        Box::new(Slots {
            plan: self.plan.clone(),
            shared: self.shared.clone(),
            slots: (0..slots).map(|_| None).collect(),
            free_since: vec![0; slots],
            pacing,
        })
    }

    fn one_worker(&self) -> bool {
        self.timing != Timing::Closed
    }
}

/// A worker's clock of the run's timing.
enum Pacing {
    Closed,
    Rate(Ticks),
    Users(Users),
}

/// The conversation a slot is running.
struct Active {
    conv: usize,
    /// The turn to send next (or in flight).
    turn: usize,
    history: History,
    /// Clock ns from which the next turn may go (user-centric: when it is due).
    due_ns: u64,
    in_flight: Option<TurnBody>,
    /// Turns to send of the conversation (fewer for a user with a virtual history).
    turns: usize,
}

/// Which slot a rate tick sends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Winner {
    /// The slot whose later turn has waited longest.
    Slot(usize),
    /// Any slot free since the tick: a new conversation.
    Free,
}

/// One worker's slots.
struct Slots {
    plan: Arc<ConversationPlan>,
    shared: Arc<Shared>,
    slots: Vec<Option<Active>>,
    /// Clock ns at which each slot last became free.
    free_since: Vec<u64>,
    pacing: Pacing,
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

    /// A new conversation may start (one is left, and a turn for it).
    fn can_start(&self) -> bool {
        !self.out_of_turns() && self.shared.next.load(Ordering::Relaxed) < self.plan.order.len()
    }

    /// Starts the next conversation on free `slot`, due at `due_ns`, with `turns` turns at
    /// most; `false` when none is left.
    fn start(&mut self, slot: usize, due_ns: u64, turns: Option<usize>) -> bool {
        let k = self.shared.next.fetch_add(1, Ordering::Relaxed);
        let Some(&conv) = self.plan.order.get(k) else {
            return false;
        };
        let len = self.plan.conversations[conv].steps.len();
        self.slots[slot] = Some(Active {
            conv,
            turn: 0,
            history: History::default(),
            due_ns,
            in_flight: None,
            turns: turns.map_or(len, |t| t.min(len)),
        });
        true
    }

    /// The slot rate tick `tick_ns` sends on: the later turn ready longest, else a new
    /// conversation on a slot free by then; `None`: nothing is ready for it.
    fn rate_winner(&self, tick_ns: u64) -> Option<Winner> {
        let waiting = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, a)| Some((i, a.as_ref()?)))
            .filter(|(_, a)| a.in_flight.is_none() && a.due_ns <= tick_ns)
            .min_by_key(|(i, a)| (a.due_ns, *i));
        if let Some((i, _)) = waiting {
            return Some(Winner::Slot(i));
        }
        let free =
            (0..self.slots.len()).any(|i| self.slots[i].is_none() && self.free_since[i] <= tick_ns);
        (free && self.can_start()).then_some(Winner::Free)
    }

    /// Rate timing: whether `slot` takes the tick due by `now_ns` (taking it). Ticks that
    /// nothing was ready for pass unused.
    fn rate_allows(&mut self, slot: usize, now_ns: u64) -> bool {
        let (winner, tick) = loop {
            let tick = match &self.pacing {
                Pacing::Rate(ticks) => ticks.next_ns(),
                _ => return true,
            };
            let Some(tick) = tick.filter(|&t| t <= now_ns) else {
                return false;
            };
            match self.rate_winner(tick) {
                Some(w) => break (w, tick),
                None => {
                    if let Pacing::Rate(ticks) = &mut self.pacing {
                        ticks.skip();
                    }
                }
            }
        };
        let ours = match winner {
            Winner::Slot(w) => w == slot,
            Winner::Free => self.slots[slot].is_none() && self.free_since[slot] <= tick,
        };
        if let (true, Pacing::Rate(ticks)) = (ours, &mut self.pacing) {
            ticks.take(now_ns);
        }
        ours
    }

    /// The rate's or the users' clock starts at the first call.
    fn start_clock(&mut self, now_ns: u64) {
        match &mut self.pacing {
            Pacing::Closed => {}
            Pacing::Rate(t) => t.start(now_ns),
            Pacing::Users(u) => u.start(now_ns),
        }
    }

    /// A free `slot` may start a conversation at `now_ns`: it has started one.
    fn open(&mut self, slot: usize, now_ns: u64) -> bool {
        if !self.can_start() {
            return false;
        }
        match &mut self.pacing {
            Pacing::Closed | Pacing::Rate(_) => self.start(slot, 0, None),
            Pacing::Users(users) => {
                let Some((due, turns)) = users.pop_due(now_ns) else {
                    return false;
                };
                if !self.start(slot, due, turns) {
                    return false;
                }
                let turns = self.slots[slot].as_ref().map_or(0, |a| a.turns);
                if let Pacing::Users(users) = &mut self.pacing {
                    users.started(due, turns);
                }
                true
            }
        }
    }
}

impl Turns for Slots {
    fn compose(&mut self, slot: usize, now_ns: u64, out: &mut Vec<u8>) -> Option<u32> {
        self.start_clock(now_ns);
        let free = self.slots.get(slot)?.is_none();
        if let Some(active) = &self.slots[slot] {
            if active.in_flight.is_some() || now_ns < active.due_ns {
                return None;
            }
        }
        if !self.rate_allows(slot, now_ns) {
            return None;
        }
        if free && !self.open(slot, now_ns) {
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
            self.free_since[slot] = end.now_ns;
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
        let delay = conv
            .delays_ms
            .get(active.turn)
            .filter(|_| active.turn < active.turns);
        match (delay, &self.pacing) {
            (None, _) => {
                *current = None;
                self.free_since[slot] = end.now_ns;
            }
            (Some(_), Pacing::Users(users)) => {
                active.due_ns = users.next_turn_ns(active.due_ns, end.now_ns);
            }
            (Some(&delay), _) => {
                active.due_ns = end.now_ns.saturating_add(delay.saturating_mul(1_000_000));
            }
        }
    }

    fn next_due_ns(&self) -> Option<u64> {
        let waiting = self
            .slots
            .iter()
            .flatten()
            .filter(|a| a.in_flight.is_none())
            .map(|a| a.due_ns)
            .min();
        let free = || {
            (0..self.slots.len())
                .filter(|&i| self.slots[i].is_none())
                .map(|i| self.free_since[i])
                .min()
                .filter(|_| self.can_start())
        };
        match &self.pacing {
            Pacing::Closed => waiting,
            Pacing::Rate(ticks) => {
                let ready = [waiting, free()].into_iter().flatten().min()?;
                Some(ready.max(ticks.next_ns()?))
            }
            Pacing::Users(users) => {
                let start = free().and_then(|_| users.next_start_ns());
                [waiting, start].into_iter().flatten().min()
            }
        }
    }

    fn exhausted(&self) -> bool {
        if let Pacing::Rate(ticks) = &self.pacing {
            if ticks.next_ns().is_none() {
                return true;
            }
        }
        self.slots.iter().all(Option::is_none) && !self.can_start()
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

/// The run of `convs`: on chat only (the history lives in `messages`), each conversation
/// once in the sampling order, `--request-count` turns at most.
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
    if cfg.endpoint_type.input() != crate::run::kinds::codec::Input::Messages {
        return refuse("need --endpoint-type chat (the history is sent in 'messages')");
    }
    if a.dataset.fixed_schedule {
        return refuse(
            "run at --concurrency N, --request-rate R or --user-centric-rate R, \
             not --fixed-schedule",
        );
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
        user_centric: a.user_centric_rate.map(|rate| UserCentric {
            rate,
            users: a.num_users.unwrap_or(1),
        }),
    })
}

/// AIPerf's shared system prompt (`text`, `tokens` long) in conversations: the system
/// message opens each conversation's first turn, and later turns carry it in their history
/// (so their own entries' ISL leaves it out; `prefix::apply` counted it in every entry).
pub fn add_system(cfg: &mut ProfileConfig, entries: &mut [Entry], text: &str, tokens: u64) {
    let system = serde_json::json!({"role": "system", "content": text});
    edit_first_turns(cfg, |c, messages| {
        for &s in &c.steps[1..] {
            if let Some(e) = entries.get_mut(s as usize) {
                e.isl = e.isl.saturating_sub(tokens);
            }
        }
        if let Some(m) = messages {
            m.insert(0, system.clone());
        }
    });
}

/// AIPerf's `--user-context-prompt-length`: each conversation opens with a user message of
/// its own, `len` tokens of fresh synthetic text (seeded by `--random-seed`), put first in
/// its first turn's messages (a system prompt added later goes before it); later turns carry
/// it in their history, so only the first turn's ISL grows by it here.
pub fn add_user_context(
    cfg: &mut ProfileConfig,
    entries: &mut [Entry],
    tok: &crate::inputs::tokenizer::Tokenizer,
    len: u64,
) -> Result<()> {
    let mut gen = crate::inputs::prompts::PromptGen::new(
        tok.clone(),
        cfg.args.random_seed ^ USER_CONTEXT_STREAM,
    );
    let found = edit_first_turns(cfg, |c, messages| {
        let Some(m) = messages else {
            return;
        };
        let p = gen.prompt(len as usize);
        m.insert(0, serde_json::json!({"role": "user", "content": p.text}));
        if let Some(e) = entries.get_mut(c.steps[0] as usize) {
            e.isl += p.tokens as u64;
        }
    });
    if !found {
        return Err(Error::usage(
            "profile: --user-context-prompt-length applies to multi-turn conversations \
             (--conversation-turn-mean above 1, or a multi-turn dataset)",
        ));
    }
    Ok(())
}

/// Rewrites the first turn of every conversation of `cfg`'s plan: `edit` gets the
/// conversation and its first turn's chat `messages` (None when that body has none); the
/// plan is swapped for the edited copy. False when the run has no conversations.
fn edit_first_turns(
    cfg: &mut ProfileConfig,
    mut edit: impl FnMut(&Conversation, Option<&mut Vec<serde_json::Value>>),
) -> bool {
    let Some(plan) = cfg.args.dataset.plan.as_mut() else {
        return false;
    };
    let Some(conv) = plan.conversations.as_ref() else {
        return false;
    };
    let conv = first_turns_edited(conv, |_, c, messages| edit(c, messages));
    let mut with = super::Plan::clone(plan);
    with.conversations = Some(Arc::new(conv));
    *plan = Arc::new(with);
    true
}

/// A copy of `plan` with the first turn of every conversation rewritten: `edit` gets the
/// conversation's index, the conversation and its first turn's chat `messages` (None when
/// that body has none).
pub fn first_turns_edited(
    plan: &ConversationPlan,
    mut edit: impl FnMut(usize, &Conversation, Option<&mut Vec<serde_json::Value>>),
) -> ConversationPlan {
    let mut conv = ConversationPlan::clone(plan);
    let ConversationPlan {
        conversations,
        bodies,
        ..
    } = &mut conv;
    for (i, c) in conversations.iter().enumerate() {
        let Some(&first) = c.steps.first() else {
            continue;
        };
        let Some(body) = bodies.get_mut(first as usize) else {
            edit(i, c, None);
            continue;
        };
        let mut value = serde_json::from_slice::<serde_json::Value>(body).ok();
        let messages = value
            .as_mut()
            .and_then(|v| v.get_mut("messages"))
            .and_then(|m| m.as_array_mut());
        let edited = messages.is_some();
        edit(i, c, messages);
        if let (true, Some(v)) = (edited, value) {
            *body = v.to_string().into_bytes();
        }
    }
    conv
}

/// Seeds the user context prompts apart from the prompts' own.
const USER_CONTEXT_STREAM: u64 = 0x0075_7365_7263_7478;

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
            user_centric: None,
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

    fn answered<'a>(rec: &'a RequestRecord, now_ns: u64) -> TurnEnd<'a> {
        TurnEnd {
            rec,
            body: br#"{"choices":[{"message":{"role":"assistant","content":"R"}}]}"#,
            error: None,
            now_ns,
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn at_a_rate_every_turn_takes_a_tick_and_later_turns_go_first() {
        // 10 per second: ticks 100 ms apart from the start at 0 (the first at 100 ms).
        let p = plan(10);
        let src = p.timed(Timing::Rate(Schedule::Constant { rate: 10.0 }));
        assert!(src.0.one_worker());
        let mut w = src.0.worker(2);
        let mut out = Vec::new();
        assert_eq!(
            w.next_due_ns(),
            Some(0),
            "the clock starts at the first call"
        );
        assert_eq!(w.compose(0, 0, &mut out), None, "no tick yet");
        assert_eq!(w.next_due_ns(), Some(100 * MS));
        assert_eq!(
            w.compose(0, 100 * MS, &mut out),
            Some(0),
            "first turn of conv 0"
        );
        assert_eq!(w.compose(1, 100 * MS, &mut out), None, "one turn per tick");
        let rec = RequestRecord::default();
        // Answered at 150 ms: its pause (5 ms) ends at 155 ms, before the 200 ms tick,
        // which it takes ahead of a new conversation on the free slot.
        w.ended(0, answered(&rec, 150 * MS));
        assert_eq!(w.next_due_ns(), Some(200 * MS));
        assert_eq!(
            w.compose(1, 200 * MS, &mut out),
            None,
            "the later turn goes first"
        );
        assert_eq!(w.compose(0, 200 * MS, &mut out), Some(1));
        // The 300 ms tick starts conversation 1 on the free slot.
        assert_eq!(w.compose(1, 300 * MS, &mut out), Some(2));
        w.ended(0, answered(&rec, 310 * MS));
        w.ended(1, answered(&rec, 320 * MS));
        assert!(w.exhausted());
    }

    #[test]
    fn at_a_rate_unused_ticks_pass_and_a_late_tick_moves_the_clock() {
        let p = plan(10);
        let mut w = p
            .timed(Timing::Rate(Schedule::Constant { rate: 10.0 }))
            .0
            .worker(1);
        let mut out = Vec::new();
        w.compose(0, 0, &mut out);
        assert_eq!(w.compose(0, 100 * MS, &mut out), Some(0));
        let rec = RequestRecord::default();
        // Answered at 450 ms (ticks at 200, 300, 400 ms pass unused); its pause ends at
        // 455 ms, so it waits for the 500 ms tick.
        w.ended(0, answered(&rec, 450 * MS));
        assert_eq!(w.next_due_ns(), Some(455 * MS));
        assert_eq!(w.compose(0, 455 * MS, &mut out), None);
        assert_eq!(w.next_due_ns(), Some(500 * MS));
        // Taken 30 ms late: the next tick is a whole gap later, at 630 ms.
        assert_eq!(w.compose(0, 530 * MS, &mut out), Some(1));
        w.ended(0, answered(&rec, 540 * MS));
        assert_eq!(w.next_due_ns(), Some(630 * MS));
        assert_eq!(w.compose(0, 629 * MS, &mut out), None);
        assert_eq!(w.compose(0, 630 * MS, &mut out), Some(2));
    }

    #[test]
    fn users_send_their_turns_a_gap_apart() {
        // One user at 2 per second: a turn every 500 ms, the dataset's pauses unused.
        let p = plan(10);
        let src = p.timed(Timing::Users(UserCentric {
            rate: 2.0,
            users: 1,
        }));
        assert!(src.0.one_worker());
        let mut w = src.0.worker(2);
        let mut out = Vec::new();
        assert_eq!(
            w.compose(0, 1_000, &mut out),
            Some(0),
            "the new user at once"
        );
        assert_eq!(
            w.compose(1, 1_000, &mut out),
            None,
            "the next user is not due"
        );
        let rec = RequestRecord::default();
        w.ended(0, answered(&rec, 2_000));
        assert_eq!(w.next_due_ns(), Some(500 * MS + 1_000));
        assert_eq!(w.compose(0, 500 * MS, &mut out), None);
        assert_eq!(w.compose(0, 500 * MS + 1_000, &mut out), Some(1));
        // Conversation 0 has two turns: its replacement is due two gaps after its start.
        w.ended(0, answered(&rec, 600 * MS));
        assert_eq!(w.next_due_ns(), Some(1_000 * MS + 1_000));
        assert_eq!(w.compose(1, 1_000 * MS + 1_000, &mut out), Some(2));
    }

    #[test]
    fn a_late_answer_sends_the_users_next_turn_at_once() {
        let p = plan(10);
        let mut w = p
            .timed(Timing::Users(UserCentric {
                rate: 2.0,
                users: 1,
            }))
            .0
            .worker(1);
        let mut out = Vec::new();
        assert_eq!(w.compose(0, 0, &mut out), Some(0));
        let rec = RequestRecord::default();
        w.ended(0, answered(&rec, 700 * MS));
        assert_eq!(w.next_due_ns(), Some(700 * MS));
        assert_eq!(w.compose(0, 700 * MS, &mut out), Some(1));
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
