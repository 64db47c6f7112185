//! Synthetic multi-turn conversations (AIPerf's `--conversation-turn-*` flags, GenAI-Perf's
//! `--session-turn*` names): `--conversation-num` conversations, each of a drawn number of
//! turns, each turn a synthetic prompt of the usual lengths, each later turn after a drawn
//! pause. They run as the conversations of a `multi_turn` file do
//! ([`super::conversations`]): a later turn carries the history.

use super::conversations::Conversation;
use crate::error::{Error, Result};
use crate::inputs::prompts::PromptGen;
use crate::inputs::tokenizer::Tokenizer;
use crate::llm::cli::ProfileConfig;
use crate::llm::payload::Entry;

/// The turn flags (numbers are checked by [`build`]).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TurnArgs {
    /// Mean number of turns of each synthetic conversation (default 1: single-turn
    /// requests); above 1 (or with --conversation-turn-stddev) each of the
    /// --conversation-num conversations is a chat whose later turns carry the history.
    #[arg(long, visible_alias = "session-turns-mean", value_name = "N")]
    pub conversation_turn_mean: Option<f64>,
    /// Standard deviation of the number of turns (each conversation has at least one).
    #[arg(
        long,
        visible_alias = "session-turns-stddev",
        value_name = "N",
        default_value_t = 0.0
    )]
    pub conversation_turn_stddev: f64,
    /// Mean pause in ms before each later turn, after the answer to the one before.
    #[arg(
        long,
        visible_alias = "session-turn-delay-mean",
        value_name = "MS",
        default_value_t = 0.0
    )]
    pub conversation_turn_delay_mean: f64,
    /// Standard deviation of the pause in ms (pauses below 0 are 0).
    #[arg(
        long,
        visible_alias = "session-turn-delay-stddev",
        value_name = "MS",
        default_value_t = 0.0
    )]
    pub conversation_turn_delay_stddev: f64,
}

/// Turns of one conversation at most.
const MAX_TURNS: f64 = 10_000.0;
/// Turns of all conversations at most (each is a prepared request body).
const MAX_TOTAL_TURNS: u64 = 1 << 20;
/// A pause of one day at most.
const MAX_DELAY_MS: f64 = 86_400_000.0;
/// Salt of the turn counts' and pauses' stream, apart from the prompts' (arbitrary, odd).
const TURN_STREAM: u64 = 0x7475_726e_7300_0005;

impl TurnArgs {
    /// Whether conversations of more than one turn are asked for.
    fn multi_turn(&self) -> bool {
        self.conversation_turn_mean.is_some_and(|m| m != 1.0)
            || self.conversation_turn_stddev != 0.0
    }

    /// The first of the flags given (with a value other than its default), if any.
    pub(super) fn first_given(&self) -> Option<&'static str> {
        self.given(true)
    }

    /// The first flag given; `counts`: the turn-count flags too, else the pauses only.
    fn given(&self, counts: bool) -> Option<&'static str> {
        let mean = self.conversation_turn_mean.is_some_and(|m| m != 1.0);
        [
            (counts && mean, "--conversation-turn-mean"),
            (
                counts && self.conversation_turn_stddev != 0.0,
                "--conversation-turn-stddev",
            ),
            (
                self.conversation_turn_delay_mean != 0.0,
                "--conversation-turn-delay-mean",
            ),
            (
                self.conversation_turn_delay_stddev != 0.0,
                "--conversation-turn-delay-stddev",
            ),
        ]
        .into_iter()
        .find_map(|(set, flag)| set.then_some(flag))
    }
}

/// One of the flags' numbers: from `min` to `max` (a usage error naming the flag).
fn check(flag: &str, v: f64, min: f64, max: f64) -> Result<()> {
    if v.is_finite() && (min..=max).contains(&v) {
        return Ok(());
    }
    Err(Error::usage(format!(
        "profile: {flag} must be from {min} to {max} (got {v})"
    )))
}

/// The synthetic conversations and their entries (turn k of conversation c is entry
/// `conversations[c].steps[k]`), or `None` when the flags ask for single turns.
/// `synthetic` makes the prompts, `--conversation-num` of them per turn index in all.
pub(super) fn build(
    cfg: &ProfileConfig,
    tok: &Tokenizer,
    synthetic: fn(&ProfileConfig, &Tokenizer) -> Result<Vec<Entry>>,
) -> Result<Option<(Vec<Entry>, Vec<Conversation>)>> {
    let t = &cfg.args.dataset.turns;
    if !t.multi_turn() {
        if let Some(flag) = t.given(false) {
            return Err(Error::usage(format!(
                "profile: {flag} applies to conversations of more than one turn \
                 (--conversation-turn-mean above 1)"
            )));
        }
        return Ok(None);
    }
    let mean = t.conversation_turn_mean.unwrap_or(1.0);
    check("--conversation-turn-mean", mean, 1.0, MAX_TURNS)?;
    check(
        "--conversation-turn-stddev",
        t.conversation_turn_stddev,
        0.0,
        MAX_TURNS,
    )?;
    check(
        "--conversation-turn-delay-mean",
        t.conversation_turn_delay_mean,
        0.0,
        MAX_DELAY_MS,
    )?;
    check(
        "--conversation-turn-delay-stddev",
        t.conversation_turn_delay_stddev,
        0.0,
        MAX_DELAY_MS,
    )?;
    let mut draws = PromptGen::new(tok.clone(), cfg.args.random_seed ^ TURN_STREAM);
    let counts: Vec<u64> = (0..cfg.args.num_prompts)
        .map(|_| (draws.sample_len(mean, t.conversation_turn_stddev) as u64).min(MAX_TURNS as u64))
        .collect();
    let total: u64 = counts.iter().sum();
    if total > MAX_TOTAL_TURNS {
        return Err(Error::usage(format!(
            "profile: --conversation-num {} x --conversation-turn-mean {mean} makes {total} \
             turns; at most {MAX_TOTAL_TURNS}",
            cfg.args.num_prompts
        )));
    }
    let mut prompts = cfg.clone();
    prompts.args.num_prompts = total;
    let entries = synthetic(&prompts, tok)?;
    let mut next = 0u32;
    let conversations = counts
        .iter()
        .map(|&n| {
            let steps: Vec<u32> = (next..next + n as u32).collect();
            next += n as u32;
            let delays_ms = (0..n)
                .map(|k| match k {
                    0 => 0,
                    _ => draws.sample_nonnegative(
                        t.conversation_turn_delay_mean,
                        t.conversation_turn_delay_stddev,
                    ),
                })
                .collect();
            Conversation { steps, delays_ms }
        })
        .collect();
    Ok(Some((entries, conversations)))
}
