//! AIPerf's `--cache-bust`: a marker put in each chat request's prompt so that a server's
//! prefix (KV) cache cannot serve one request's prompt to another.
//!
//! Two families of targets, as in AIPerf 0.13:
//!
//! - RID targets (`system_prefix`, `system_suffix`, `first_turn_prefix`,
//!   `first_turn_suffix`): every session (a single-turn request, or a whole multi-turn
//!   conversation) gets its own marker `[rid:<12 hex>]`, the first 12 hex digits of the
//!   SHA-256 of `<run key>:<pass>:<pass>:<trace>`, where `pass` counts the sessions of the
//!   level (warm-up first, then the measured requests) and `trace` is the session's entry
//!   or conversation index. Prefix targets send `[rid:…]\n\n` before the text, suffix
//!   targets `\n\n[rid:…]` after it. `system_*` marks the system message (`--system-prompt`,
//!   `--shared-system-prompt-length`, or one in the dataset's messages), else the first user
//!   message; `first_turn_*` marks the first user message. Later turns of a conversation
//!   carry the marked message in their history.
//! - Warm-up isolation targets (`warmup_isolation_system`, `warmup_isolation_first_turn`):
//!   only the warm-up requests carry the constant `[warmup]\n\n` before the system message
//!   (or the first user message); the measured requests carry no marker.
//!
//! The run key is `--random-seed`, the `--num-profile-runs` run and the level's label, so
//! the same command with the same seed sends the same markers, while levels of a sweep and
//! repeated runs never share one. In a message whose content is a list of parts, the marker
//! goes into the first (prefix) or last (suffix) text part, or becomes a text part of its
//! own when there is none. The ISL counts the marker's tokens.

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use super::cli::{LoadPoint, ProfileConfig};
use super::dataset::conversations::first_turns_edited;
use super::payload::Entry;
use crate::engine::EngineSpec;
use crate::error::{Error, Result};
use crate::inputs::tokenizer::Tokenizer;
use crate::run::kinds::codec::Input;

/// Hex digits of the SHA-256 kept in a RID marker (AIPerf's length).
const DIGEST_HEX: usize = 12;
/// The warm-up isolation marker.
pub const WARMUP_MARKER: &str = "[warmup]\n\n";
/// Markers made at most for a run bounded by `--benchmark-duration` alone (beyond them the
/// requests, and so the markers, repeat).
pub const DURATION_MARKERS: u64 = 16_384;

/// Where the marker goes (AIPerf's `CacheBustTarget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Target {
    /// No marker.
    #[default]
    None,
    /// `[rid:…]\n\n` before the system message (the first user message when there is none).
    SystemPrefix,
    /// `\n\n[rid:…]` after the system message (the first user message when there is none).
    SystemSuffix,
    /// `[rid:…]\n\n` before the first user message.
    FirstTurnPrefix,
    /// `\n\n[rid:…]` after the first user message.
    FirstTurnSuffix,
    /// `[warmup]\n\n` before the system message of warm-up requests only.
    WarmupIsolationSystem,
    /// `[warmup]\n\n` before the first user message of warm-up requests only.
    WarmupIsolationFirstTurn,
}

impl Target {
    /// A per-session digest marker (not a warm-up isolation one, not none).
    pub fn is_rid(self) -> bool {
        matches!(
            self,
            Target::SystemPrefix
                | Target::SystemSuffix
                | Target::FirstTurnPrefix
                | Target::FirstTurnSuffix
        )
    }

    fn is_warmup_isolation(self) -> bool {
        matches!(
            self,
            Target::WarmupIsolationSystem | Target::WarmupIsolationFirstTurn
        )
    }

    fn is_prefix(self) -> bool {
        !matches!(self, Target::SystemSuffix | Target::FirstTurnSuffix)
    }

    fn on_system(self) -> bool {
        matches!(
            self,
            Target::SystemPrefix | Target::SystemSuffix | Target::WarmupIsolationSystem
        )
    }

    fn name(self) -> &'static str {
        match self {
            Target::None => "none",
            Target::SystemPrefix => "system_prefix",
            Target::SystemSuffix => "system_suffix",
            Target::FirstTurnPrefix => "first_turn_prefix",
            Target::FirstTurnSuffix => "first_turn_suffix",
            Target::WarmupIsolationSystem => "warmup_isolation_system",
            Target::WarmupIsolationFirstTurn => "warmup_isolation_first_turn",
        }
    }
}

/// AIPerf's Cache Bust group.
#[derive(Args, Debug, Clone, Default)]
pub struct CacheBustArgs {
    /// AIPerf: put a cache-bust marker in each chat request's prompt: a per-session
    /// `[rid:<digest>]` (system_prefix, system_suffix, first_turn_prefix, first_turn_suffix),
    /// or `[warmup]` in warm-up requests only (warmup_isolation_system,
    /// warmup_isolation_first_turn); none (the default) sends none.
    #[arg(long, value_enum, default_value_t = Target::None, value_name = "TARGET")]
    pub cache_bust: Target,
}

/// The flag against the run: chat only (the marker goes into `messages`);
/// `warmup_isolation_system` needs a system message on synthetic prompts.
pub fn check(cfg: &ProfileConfig) -> Result<()> {
    let target = cfg.args.cache_bust.cache_bust;
    if target == Target::None {
        return Ok(());
    }
    if cfg.endpoint_type.input() != Input::Messages {
        return Err(Error::usage(format!(
            "profile: --cache-bust {} applies to --endpoint-type chat (the marker goes into \
             the messages)",
            target.name()
        )));
    }
    let s = &cfg.args.sweep;
    let system = s.system_prompt.is_some()
        || s.system_prompt_file.is_some()
        || s.shared_system_prompt_length.is_some();
    if target == Target::WarmupIsolationSystem && !system && cfg.args.input_file.is_none() {
        return Err(Error::usage(
            "profile: --cache-bust warmup_isolation_system needs a system message: give \
             --system-prompt, --system-prompt-file or --shared-system-prompt-length, or use \
             warmup_isolation_first_turn",
        ));
    }
    Ok(())
}

/// The key of a level's markers: the seed, the profile run and the level.
pub fn run_key(cfg: &ProfileConfig, point: LoadPoint) -> String {
    format!(
        "{}:{}:{}",
        cfg.args.random_seed,
        cfg.args.multi_run.run_index,
        point.label()
    )
}

/// The RID marker of session `pass` of trace `trace`, placed for `target`.
pub fn rid_marker(key: &str, pass: u64, trace: u64, target: Target) -> String {
    let unique = format!("{key}:{pass}:{pass}:{trace}");
    let digest = ring::digest::digest(&ring::digest::SHA256, unique.as_bytes());
    let hex: String = digest
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..DIGEST_HEX]
        .to_string();
    if target.is_prefix() {
        format!("[rid:{hex}]\n\n")
    } else {
        format!("\n\n[rid:{hex}]")
    }
}

/// The marker of a session: `pass` counts the level's sessions from 0 (warm-up first).
/// None: this session carries none.
pub fn marker_for(
    target: Target,
    key: &str,
    pass: u64,
    trace: u64,
    warmup: bool,
) -> Option<String> {
    if target.is_rid() {
        return Some(rid_marker(key, pass, trace, target));
    }
    (target.is_warmup_isolation() && warmup).then(|| WARMUP_MARKER.to_string())
}

/// Puts `marker` where `target` says in a chat body's `messages`. False when the body has
/// no message to carry it.
pub fn mark(body: &mut Value, marker: &str, target: Target) -> bool {
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return false;
    };
    mark_messages(messages, marker, target)
}

/// [`mark`] on a `messages` array.
pub fn mark_messages(messages: &mut [Value], marker: &str, target: Target) -> bool {
    let role_at = |role: &str| {
        messages
            .iter()
            .position(|m| m.get("role").and_then(Value::as_str) == Some(role))
    };
    let at = if target.on_system() {
        role_at("system").or_else(|| role_at("user"))
    } else {
        role_at("user")
    };
    let Some(message) = at.and_then(|i| messages.get_mut(i)) else {
        return false;
    };
    let prefix = target.is_prefix();
    match message.get_mut("content") {
        Some(Value::String(s)) => {
            *s = if prefix {
                format!("{marker}{s}")
            } else {
                format!("{s}{marker}")
            };
            true
        }
        Some(Value::Array(parts)) => {
            let is_text = |p: &Value| p.get("type").and_then(Value::as_str) == Some("text");
            let at = if prefix {
                parts.iter().position(is_text)
            } else {
                parts.iter().rposition(is_text)
            };
            match at.and_then(|i| parts[i].get_mut("text")) {
                Some(Value::String(s)) => {
                    *s = if prefix {
                        format!("{marker}{s}")
                    } else {
                        format!("{s}{marker}")
                    };
                }
                _ => {
                    let part = json!({"type": "text", "text": marker.trim()});
                    if prefix {
                        parts.insert(0, part);
                    } else {
                        parts.push(part);
                    }
                }
            }
            true
        }
        _ => false,
    }
}

/// Requests the measured run of a level sends at most, when every one is to carry a marker
/// of its own: the request count (the default one when no bound is given), else
/// [`DURATION_MARKERS`].
pub fn wanted_requests(cfg: &ProfileConfig) -> u64 {
    match (cfg.args.request_count, cfg.args.benchmark_duration) {
        (Some(n), _) => n,
        (None, Some(_)) => DURATION_MARKERS,
        (None, None) => super::runner::DEFAULT_REQUEST_COUNT,
    }
}

/// A level's requests with their markers.
pub struct Marked {
    /// The entries with the markers' tokens in their ISL.
    pub entries: Vec<Entry>,
    /// The measured requests' bodies and their JSON text.
    pub bodies: Vec<Value>,
    pub payloads: Vec<String>,
    /// The measured run's engine, and the warm-up's when its requests differ.
    pub spec: EngineSpec,
    pub warm: Option<EngineSpec>,
    /// The run's settings with the conversations' marked first turns.
    pub cfg: Option<ProfileConfig>,
}

/// What a level sends as it is, before the markers.
pub struct Unmarked<'a> {
    pub entries: &'a [Entry],
    pub models: &'a [u32],
    pub bodies: &'a [Value],
    pub spec: &'a EngineSpec,
}

/// The requests of level `point` with their markers; None when `--cache-bust` is off.
/// Single requests: session k of the warm-up sends entry k (wrapping) with marker pass k;
/// measured request k sends entry k with pass `warm-up count + k`. Conversations: each
/// conversation's first turn, with the pass of its place in the start order.
pub fn level(
    cfg: &ProfileConfig,
    point: LoadPoint,
    tok: &Tokenizer,
    u: Unmarked<'_>,
) -> Option<Marked> {
    let target = cfg.args.cache_bust.cache_bust;
    if target == Target::None {
        return None;
    }
    let key = run_key(cfg, point);
    let conversations = cfg
        .args
        .dataset
        .plan
        .as_ref()
        .and_then(|p| p.conversations.as_ref());
    if let Some(conv) = conversations {
        if !target.is_rid() {
            return None;
        }
        let mut entries = u.entries.to_vec();
        let mut place = vec![0u64; conv.conversations.len()];
        for (k, &c) in conv.order.iter().enumerate() {
            if let Some(p) = place.get_mut(c) {
                *p = k as u64;
            }
        }
        let edited = first_turns_edited(conv, |i, c, messages| {
            let Some(m) = messages else {
                return;
            };
            let marker = rid_marker(&key, place[i], i as u64, target);
            if mark_messages(m, &marker, target) {
                if let Some(e) = entries.get_mut(c.steps[0] as usize) {
                    e.isl += tok.count(&marker) as u64;
                }
            }
        });
        let mut c = cfg.clone();
        if let Some(plan) = c.args.dataset.plan.as_mut() {
            let mut with = super::dataset::Plan::clone(plan);
            with.conversations = Some(std::sync::Arc::new(edited));
            *plan = std::sync::Arc::new(with);
        }
        return Some(Marked {
            entries,
            bodies: u.bodies.to_vec(),
            payloads: u.bodies.iter().map(Value::to_string).collect(),
            spec: u.spec.clone(),
            warm: None,
            cfg: Some(c),
        });
    }
    let n = u.bodies.len();
    if n == 0 {
        return None;
    }
    let warm_count = cfg.args.warmup_request_count;
    let encode = |i: usize, body: &Value| -> (String, Vec<u8>) {
        let text = body.to_string();
        let model = cfg.models[u.models[i] as usize].as_str();
        let path = super::endpoint_for(cfg, model);
        let bytes = crate::service::openai::encode_request(
            &cfg.address,
            &path,
            &cfg.headers,
            text.as_bytes(),
        );
        (text, bytes)
    };
    let warm = (warm_count > 0).then(|| {
        let requests: Vec<Vec<u8>> = (0..warm_count.min(MAX_WARM))
            .map(|k| {
                let i = (k % n as u64) as usize;
                let mut body = u.bodies[i].clone();
                if let Some(m) = marker_for(target, &key, k, i as u64, true) {
                    mark(&mut body, &m, target);
                }
                encode(i, &body).1
            })
            .collect();
        EngineSpec {
            requests: std::sync::Arc::new(requests),
            ..u.spec.clone()
        }
    });
    if !target.is_rid() {
        return Some(Marked {
            entries: u.entries.to_vec(),
            bodies: u.bodies.to_vec(),
            payloads: u.bodies.iter().map(Value::to_string).collect(),
            spec: u.spec.clone(),
            warm,
            cfg: None,
        });
    }
    let mut entries = u.entries.to_vec();
    let mut bodies = u.bodies.to_vec();
    let mut payloads = Vec::with_capacity(n);
    let mut requests = Vec::with_capacity(n);
    for (i, body) in bodies.iter_mut().enumerate() {
        let m = rid_marker(&key, warm_count + i as u64, i as u64, target);
        if mark(body, &m, target) {
            if let Some(e) = entries.get_mut(i) {
                e.isl += tok.count(&m) as u64;
            }
        }
        let (text, bytes) = encode(i, body);
        payloads.push(text);
        requests.push(bytes);
    }
    Some(Marked {
        entries,
        bodies,
        payloads,
        spec: EngineSpec {
            requests: std::sync::Arc::new(requests),
            ..u.spec.clone()
        },
        warm,
        cfg: None,
    })
}

/// Warm-up requests made at most (beyond them the warm-up's requests repeat).
const MAX_WARM: u64 = 1 << 16;

/// Entries repeated (in their order) up to the requests a run with a marker per request
/// sends (see [`wanted_requests`]); a trace replayed on its timestamps, and conversations,
/// keep theirs.
pub fn expand(cfg: &ProfileConfig, entries: &mut Vec<Entry>) {
    if !cfg.args.cache_bust.cache_bust.is_rid() {
        return;
    }
    if let Some(plan) = &cfg.args.dataset.plan {
        if plan.fixed_ns.is_some() || plan.conversations.is_some() {
            return;
        }
    }
    let n = entries.len();
    let wanted = wanted_requests(cfg).min(MAX_EXPANDED) as usize;
    for k in n..wanted.max(n) {
        let e = entries[k % n].clone();
        entries.push(e);
    }
}

/// Requests given a marker of their own at most (beyond them the markers repeat).
const MAX_EXPANDED: u64 = 1 << 20;

#[cfg(test)]
#[path = "cache_bust_tests.rs"]
mod tests;
