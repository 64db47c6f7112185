//! OpenAI-compatible endpoints of the reference server: `GET /v1/models`,
//! `POST /v1/chat/completions`, `POST /v1/completions` (streamed or whole) and
//! `POST /v1/embeddings`, backed by a fake model with exact output lengths and configurable
//! pacing, so LLM-metric clients can be tested against known TTFT, ITL and token counts.
//!
//! This file routes and writes whole answers; `request` parses bodies, `stream` writes the
//! SSE stream, `state` holds the settings and `log` when tokens were sent.
//! The connection layer (`conn`) paces both kinds of answer on its deadline queue.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::request::{parse_embeddings, parse_generation, ApiError, Endpoint, GenRequest};
use super::state::OpenAiState;
use super::stream::{full_answer_delay, Answer, Pace, SseStream, UsageLayout};
use super::watch::StreamGuard;
use crate::delay::{next_random, sample_delay};
use crate::http::Method;
use crate::reply::Request;

/// How the connection must send an OpenAI answer.
#[derive(Debug)]
pub enum OaiReply {
    /// A whole JSON body (already written to the caller's buffer) with this status, held
    /// until `ready_at` when it is a paced generation. `log_id`: its token-log entry.
    Whole {
        status: u16,
        ready_at: Option<Instant>,
        log_id: Option<u64>,
    },
    /// An SSE stream: send the head now, then the stream's events as they fall due.
    Stream { stream: Box<SseStream>, log_id: u64 },
}

impl OaiReply {
    fn now(status: u16) -> OaiReply {
        OaiReply::Whole {
            status,
            ready_at: None,
            log_id: None,
        }
    }
}

fn write_json(out: &mut Vec<u8>, value: &Value) {
    // Serialising a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

fn error(out: &mut Vec<u8>, err: &ApiError) -> OaiReply {
    out.clear();
    write_json(out, &err.to_json());
    OaiReply::now(err.status)
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Answers a `/v1/...` request, writing any whole body into `out` (empty on entry); None
/// when the path is not an OpenAI one.
pub fn route(
    req: &Request,
    state: &OpenAiState,
    rng: &mut u64,
    out: &mut Vec<u8>,
) -> Option<OaiReply> {
    let path = req.path.strip_prefix("/v1/")?;
    if path == "inferperf/token-log" && req.method == Method::Get {
        // When each content piece was due and written (ns), for benches that run the
        // server as a separate process.
        let log = json!({"paced": state.log.snapshot(), "written": state.log.written()});
        write_json(out, &log);
        return Some(OaiReply::now(200));
    }
    let wanted = if path == "models" {
        Method::Get
    } else {
        Method::Post
    };
    let known = matches!(
        path,
        "models" | "chat/completions" | "completions" | "embeddings"
    );
    if !known {
        let msg = format!("Unknown endpoint '{}'", req.path);
        return Some(error(out, &ApiError::not_found(msg)));
    }
    if req.method != wanted {
        let mut err = ApiError::invalid(None, format!("method not allowed for '{}'", req.path));
        err.status = 405;
        return Some(error(out, &err));
    }
    let reply = match path {
        "models" => {
            let model = json!({"id": &*state.model, "object": "model", "created": 0,
                "owned_by": "inferperf"});
            write_json(out, &json!({"object": "list", "data": [model]}));
            OaiReply::now(200)
        }
        "embeddings" => embeddings(req.body, state, out),
        "chat/completions" => generate(Endpoint::Chat, req.body, state, rng, out),
        _ => generate(Endpoint::Completions, req.body, state, rng, out),
    };
    Some(reply)
}

/// A chat or completions request: a stream, or the whole answer held for its generation time.
fn generate(
    endpoint: Endpoint,
    body: &[u8],
    state: &OpenAiState,
    rng: &mut u64,
    out: &mut Vec<u8>,
) -> OaiReply {
    state.watch.keep_body(body);
    match parse_generation(endpoint, body, &state.names) {
        Ok(req) => {
            state.media.record(&req.media);
            start_generation(&req, state, rng, out)
        }
        Err(e) => error(out, &e),
    }
}

/// Starts generating for a validated request: opens its token-log entry and returns its
/// stream, or writes its whole body into `out` (empty on entry) with its ready time.
pub fn start_generation(
    req: &GenRequest,
    state: &OpenAiState,
    rng: &mut u64,
    out: &mut Vec<u8>,
) -> OaiReply {
    let log_id = state.log.begin();
    state
        .load
        .admit(req.prompt_tokens, u64::from(req.max_tokens));
    let prefix = match req.endpoint {
        Endpoint::Chat => "chatcmpl",
        Endpoint::Completions => "cmpl",
        Endpoint::Generate => "gen",
    };
    let answer = Answer {
        endpoint: req.endpoint,
        id: format!("{prefix}-{log_id}"),
        created: unix_seconds(),
        model: Arc::clone(&state.model),
        prompt_tokens: req.prompt_tokens,
        max_tokens: req.max_tokens,
        reasoning_tokens: req.reasoning_tokens,
    };
    let now = Instant::now();
    let ttft = sample_delay(&state.cfg.ttft, rng);
    let mut pace = Pace {
        first_content_at: now + ttft,
        itl: state.cfg.itl,
        tokens_per_chunk: state.cfg.tokens_per_chunk,
        // Each stream draws its ITLs from its own generator, seeded from the thread's.
        rng: sample_seed(rng),
    };
    if req.stream {
        let usage = match (req.include_usage, state.cfg.usage_on_last) {
            (false, _) => UsageLayout::Omitted,
            (true, false) => UsageLayout::FinalChunk,
            (true, true) => UsageLayout::LastContent,
        };
        let (guard, generating) = StreamGuard::enter(&state.watch);
        if let Some(busy) = state.cfg.busy.filter(|b| generating > b.streams) {
            pace.first_content_at += busy.extra_ttft;
        }
        let stream = SseStream::new(answer, req, pace, usage).watched(guard);
        return OaiReply::Stream {
            stream: Box::new(stream),
            log_id,
        };
    }
    let delay = full_answer_delay(req, ttft, &mut pace);
    write_json(out, &answer.full_body());
    OaiReply::Whole {
        status: 200,
        ready_at: Some(now + delay),
        log_id: Some(log_id),
    }
}

/// A fresh non-zero generator state drawn from `rng` (xorshift needs a non-zero state).
pub fn sample_seed(rng: &mut u64) -> u64 {
    next_random(rng) | 1
}

/// One deterministic unit-free vector per input, values in [-1, 1).
fn embeddings(body: &[u8], state: &OpenAiState, out: &mut Vec<u8>) -> OaiReply {
    let req = match parse_embeddings(body, &state.names) {
        Ok(req) => req,
        Err(e) => return error(out, &e),
    };
    let mut prompt_tokens = 0;
    let data: Vec<Value> = req
        .inputs
        .iter()
        .enumerate()
        .map(|(index, &(tokens, seed))| {
            prompt_tokens += tokens;
            let mut state = seed | 1;
            let vector: Vec<f64> = (0..req.dimensions)
                .map(|_| {
                    // xorshift64: deterministic per input, so equal inputs get equal vectors.
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
                })
                .collect();
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    let body = json!({"object": "list", "data": data, "model": &*state.model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}});
    write_json(out, &body);
    OaiReply::now(200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delay::Delay;
    use crate::llm::state::OpenAiConfig;
    use std::time::Duration;

    fn call(method: Method, path: &str, body: &str, state: &OpenAiState) -> (OaiReply, Value) {
        let req = Request {
            method,
            path,
            inference_header_len: None,
            body: body.as_bytes(),
        };
        let mut out = Vec::new();
        let mut rng = 7;
        let reply = route(&req, state, &mut rng, &mut out).expect("an OpenAI path");
        let value = serde_json::from_slice(&out).unwrap_or(Value::Null);
        (reply, value)
    }

    fn status(reply: &OaiReply) -> u16 {
        match reply {
            OaiReply::Whole { status, .. } => *status,
            OaiReply::Stream { .. } => 200,
        }
    }

    #[test]
    fn routing_table() {
        let state = OpenAiState::default();
        let chat = r#"{"model":"inferperf-llm","messages":[{"role":"user","content":"hi"}]}"#;
        let cases: [(Method, &str, &str, u16, &str); 7] = [
            (Method::Get, "/v1/models", "", 200, "/data/0/id"),
            (Method::Post, "/v1/models", "", 405, "/error/message"),
            (Method::Get, "/v1/completions", "", 405, "/error/message"),
            (Method::Post, "/v1/nope", "{}", 404, "/error/message"),
            (
                Method::Post,
                "/v1/chat/completions",
                "{",
                400,
                "/error/message",
            ),
            (
                Method::Post,
                "/v1/chat/completions",
                chat,
                200,
                "/usage/completion_tokens",
            ),
            (
                Method::Post,
                "/v1/embeddings",
                r#"{"model":"inferperf-llm","input":"a"}"#,
                200,
                "/data/0/embedding/7",
            ),
        ];
        for (method, path, body, want, pointer) in cases {
            let (reply, value) = call(method, path, body, &state);
            assert_eq!(status(&reply), want, "{path}: {value}");
            assert!(value.pointer(pointer).is_some(), "{path}: {value}");
        }
        assert_eq!(state.log.snapshot().len(), 1, "one generation logged");
        let req = Request {
            method: Method::Get,
            path: "/v2/health/live",
            inference_header_len: None,
            body: &[],
        };
        assert!(route(&req, &state, &mut 1, &mut Vec::new()).is_none());
    }

    #[test]
    fn whole_answer_waits_for_its_generation_time() {
        let cfg = OpenAiConfig {
            model: "m".into(),
            ttft: Delay::Fixed(Duration::from_millis(30)),
            itl: Delay::Fixed(Duration::from_millis(2)),
            tokens_per_chunk: 2,
            usage_on_last: false,
            ..OpenAiConfig::default()
        };
        let state = OpenAiState::new(cfg).unwrap();
        let before = Instant::now();
        let body = r#"{"model":"m","prompt":"a b","max_tokens":5}"#;
        let (reply, value) = call(Method::Post, "/v1/completions", body, &state);
        let OaiReply::Whole {
            ready_at: Some(at), ..
        } = reply
        else {
            panic!("expected a held whole answer")
        };
        // 3 chunks: TTFT + 2 ITLs.
        assert!(at - before >= Duration::from_millis(34));
        assert_eq!(value["usage"]["prompt_tokens"], 2);
        let (reply, _) = call(
            Method::Post,
            "/v1/completions",
            r#"{"model":"m","prompt":"a","stream":true}"#,
            &state,
        );
        assert!(matches!(reply, OaiReply::Stream { log_id: 1, .. }));
    }
}

#[cfg(test)]
#[path = "openai_http_tests.rs"]
mod http_tests;
