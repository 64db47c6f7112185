//! One streamed OpenAI answer (`text/event-stream` in HTTP chunked framing), produced lazily:
//! the connection asks it for every event due by now and re-arms a deadline for the next one,
//! so a stream costs a few hundred bytes of state and never blocks the event loop.
//!
//! Event order: chat's role-only chunk (at once), content chunks (the first after TTFT, the
//! others an ITL apart, a stall after the middle one if asked), then usage (its own chunk with
//! `choices: []`, or on the last content chunk), `data: [DONE]` and the chunked terminator.
//! With the error fault, `event: error` follows the first content chunk and the stream ends.
//!
//! Triton's `generate_stream` (endpoint `Generate`) uses the same pacing with its own events:
//! one `data: {"model_name","model_version","text_output"}` per content chunk, no usage, no
//! `[DONE]` (the chunked body just ends); its error fault is `data: {"error": ".."}`.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::request::{Endpoint, GenRequest};
use super::watch::StreamGuard;
use crate::delay::sample_delay;
use crate::delay::Delay;
use crate::models::MODEL_VERSION;

/// The message of the injected mid-stream error (`"inferperf_fault": "error_event"`).
const FAULT_MESSAGE: &str = "injected fault (inferperf_fault=error_event)";

/// Where the token usage goes in a stream that asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageLayout {
    /// Not asked for (`stream_options.include_usage` false).
    Omitted,
    /// A final chunk with `choices: []` and `usage` (OpenAI's layout).
    FinalChunk,
    /// On the last content chunk, beside its `finish_reason` (some servers' layout).
    LastContent,
}

/// What every answer to one request shares: its identity and token counts.
#[derive(Debug, Clone)]
pub struct Answer {
    pub endpoint: Endpoint,
    /// `chatcmpl-N` / `cmpl-N`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub model: Arc<str>,
    pub prompt_tokens: u64,
    pub max_tokens: u32,
    /// The first this many of the `max_tokens` are sent as `reasoning_content` (chat).
    pub reasoning_tokens: u32,
}

impl Answer {
    fn object(&self, streamed: bool) -> &'static str {
        match (self.endpoint, streamed) {
            (Endpoint::Chat, true) => "chat.completion.chunk",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Completions, _) => "text_completion",
            // Triton's generate responses carry no object type; never written.
            (Endpoint::Generate, _) => "",
        }
    }

    fn usage(&self, completion_tokens: u32) -> Value {
        let mut usage = json!({"prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + u64::from(completion_tokens)});
        if self.reasoning_tokens > 0 {
            let reasoning = self.reasoning_tokens.min(completion_tokens);
            usage["completion_tokens_details"] = json!({ "reasoning_tokens": reasoning });
        }
        usage
    }

    /// Chat's message or delta for tokens `from..to`: the reasoning part as
    /// `reasoning_content`, the rest as `content` (either left out when it has no token).
    fn chat_part(&self, from: u32, to: u32) -> Value {
        let split = self.reasoning_tokens.clamp(from, to);
        let mut part = serde_json::Map::new();
        if split > from {
            part.insert("reasoning_content".into(), token_text(from, split).into());
        }
        if to > split || split == from {
            part.insert("content".into(), token_text(split, to).into());
        }
        Value::Object(part)
    }

    fn envelope(&self, streamed: bool, choices: Value) -> Value {
        json!({"id": self.id, "object": self.object(streamed), "created": self.created,
            "model": &*self.model, "choices": choices})
    }

    /// The choice of a stream chunk carrying tokens `from..to` (chat: a delta; completions:
    /// text).
    fn chunk_choice(&self, from: u32, to: u32, finish: Option<&str>) -> Value {
        match self.endpoint {
            Endpoint::Chat => json!({"index": 0, "delta": self.chat_part(from, to),
                "logprobs": null, "finish_reason": finish}),
            Endpoint::Completions | Endpoint::Generate => json!({"index": 0,
                "text": token_text(from, to), "logprobs": null, "finish_reason": finish}),
        }
    }

    /// A Triton generate response carrying `text`.
    fn generate_body(&self, text: &str) -> Value {
        json!({"model_name": &*self.model, "model_version": MODEL_VERSION, "text_output": text})
    }

    /// The whole non-streaming answer: every token at once, with `usage`.
    pub fn full_body(&self) -> Value {
        let text = token_text(0, self.max_tokens);
        let choice = match self.endpoint {
            Endpoint::Generate => return self.generate_body(&text),
            Endpoint::Chat => {
                let mut message = self.chat_part(0, self.max_tokens);
                message["role"] = "assistant".into();
                json!({"index": 0, "message": message, "logprobs": null,
                    "finish_reason": "length"})
            }
            Endpoint::Completions => json!({"index": 0, "text": text, "logprobs": null,
                "finish_reason": "length"}),
        };
        let mut body = self.envelope(false, json!([choice]));
        body["usage"] = self.usage(self.max_tokens);
        body
    }
}

/// The fake model's vocabulary: common English words that are one token each, with their
/// leading space, in both built-in encodings (cl100k_base, o200k_base), so a client that counts
/// output tokens with either gets exactly the number the server sent.
pub const VOCABULARY: [&str; 32] = [
    "the", "of", "and", "to", "in", "is", "that", "it", "for", "on", "with", "as", "was", "at",
    "by", "be", "this", "from", "or", "an", "are", "not", "but", "have", "they", "you", "all",
    "can", "his", "her", "one", "we",
];

/// Tokens `from..to` of the fake vocabulary: ` the of and ...`, one word with its leading
/// space per token, so a client counts tokens by splitting on whitespace or with a built-in
/// tokenizer.
pub fn token_text(from: u32, to: u32) -> String {
    let mut text = String::with_capacity((to.saturating_sub(from) as usize) * 6);
    for k in from..to {
        text.push(' ');
        text.push_str(VOCABULARY[k as usize % VOCABULARY.len()]);
    }
    text
}

/// Number of content chunks for `tokens` tokens at `per_chunk` tokens each.
pub fn chunk_count(tokens: u32, per_chunk: u32) -> u32 {
    tokens.div_ceil(per_chunk.max(1))
}

/// Frames one SSE event (`lines` then a blank line) as one HTTP chunk.
fn write_event(out: &mut Vec<u8>, lines: &[u8]) {
    let len = lines.len() + 2;
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{len:x}\r\n");
    out.extend_from_slice(lines);
    out.extend_from_slice(b"\n\n\r\n");
}

fn write_data(out: &mut Vec<u8>, value: &Value) {
    let mut line = b"data: ".to_vec();
    let _ = serde_json::to_writer(&mut line, value);
    write_event(out, &line);
}

/// The chunked-body terminator.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Role,
    Content,
    Done,
}

/// Timing of a stream: when its content starts and how far apart its chunks are.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// When the first content chunk is due (request ready + TTFT).
    pub first_content_at: Instant,
    pub itl: Delay,
    pub tokens_per_chunk: u32,
    /// The stream's own generator state for ITL samples.
    pub rng: u64,
}

/// A streamed answer in progress.
#[derive(Debug)]
pub struct SseStream {
    answer: Answer,
    pace: Pace,
    usage: UsageLayout,
    error_event: bool,
    stall: Duration,
    /// The stall comes before content chunk number `stall_before` (0-based).
    stall_before: u32,
    tokens_sent: u32,
    chunks_sent: u32,
    phase: Phase,
    next_at: Instant,
    /// Counts the stream among those generating (and as abandoned if dropped unfinished).
    guard: Option<StreamGuard>,
}

impl SseStream {
    /// A stream for `req`; chat's role chunk is due at `now`.
    pub fn new(answer: Answer, req: &GenRequest, pace: Pace, usage: UsageLayout) -> SseStream {
        let chunks = chunk_count(answer.max_tokens, pace.tokens_per_chunk);
        let (phase, next_at) = match answer.endpoint {
            Endpoint::Chat => (Phase::Role, Instant::now().min(pace.first_content_at)),
            Endpoint::Completions | Endpoint::Generate => (Phase::Content, pace.first_content_at),
        };
        SseStream {
            answer,
            pace,
            usage,
            error_event: req.error_event,
            stall: req.stall,
            stall_before: (chunks / 2).max(1),
            tokens_sent: 0,
            chunks_sent: 0,
            phase,
            next_at,
            guard: None,
        }
    }

    /// The stream counted by `guard` until it ends.
    pub fn watched(mut self, guard: StreamGuard) -> SseStream {
        self.guard = Some(guard);
        self
    }

    /// The `Content-Type` of the stream's answer (Triton adds the charset).
    pub fn content_type(&self) -> &'static str {
        match self.answer.endpoint {
            Endpoint::Generate => "text/event-stream; charset=utf-8",
            Endpoint::Chat | Endpoint::Completions => "text/event-stream",
        }
    }

    /// When the next event is due.
    pub fn next_at(&self) -> Instant {
        self.next_at
    }

    /// Appends every event due by `now` to `out`. Returns how many content chunks it wrote
    /// and whether the stream is complete (terminator written).
    pub fn emit_due(&mut self, now: Instant, out: &mut Vec<u8>) -> (usize, bool) {
        let mut content_chunks = 0;
        while self.phase != Phase::Done && self.next_at <= now {
            match self.phase {
                Phase::Role => {
                    let delta = json!({"role": "assistant", "content": ""});
                    let choice = json!({"index": 0, "delta": delta, "logprobs": null,
                        "finish_reason": null});
                    write_data(out, &self.answer.envelope(true, json!([choice])));
                    self.phase = Phase::Content;
                    self.next_at = self.pace.first_content_at;
                }
                Phase::Content => {
                    self.content_chunk(now, out);
                    content_chunks += 1;
                }
                Phase::Done => {}
            }
        }
        let done = self.phase == Phase::Done;
        if done {
            if let Some(g) = self.guard.as_mut() {
                g.finish();
            }
        }
        (content_chunks, done)
    }

    /// Writes the next content chunk, then either schedules the one after or ends the stream.
    fn content_chunk(&mut self, now: Instant, out: &mut Vec<u8>) {
        let from = self.tokens_sent;
        let to = (from + self.pace.tokens_per_chunk.max(1)).min(self.answer.max_tokens);
        let last = to == self.answer.max_tokens;
        self.write_content(from, to, last, out);
        self.tokens_sent = to;
        self.chunks_sent += 1;
        if self.error_event {
            self.write_error(out);
            out.extend_from_slice(LAST_CHUNK);
            self.phase = Phase::Done;
        } else if last {
            self.write_end(to, out);
            out.extend_from_slice(LAST_CHUNK);
            self.phase = Phase::Done;
        } else {
            // Paced from when this chunk went out (a late chunk delays the rest, as a real
            // decode loop would), so every gap is at least one ITL.
            self.next_at = self.next_at.max(now) + sample_delay(&self.pace.itl, &mut self.pace.rng);
            if self.chunks_sent == self.stall_before {
                self.next_at += self.stall;
            }
        }
    }
}

impl SseStream {
    /// The event carrying tokens `from..to`; `last` when it is the final one.
    fn write_content(&self, from: u32, to: u32, last: bool, out: &mut Vec<u8>) {
        if self.answer.endpoint == Endpoint::Generate {
            return write_data(out, &self.answer.generate_body(&token_text(from, to)));
        }
        let finish = (last && !self.error_event).then_some("length");
        let choice = self.answer.chunk_choice(from, to, finish);
        let mut chunk = self.answer.envelope(true, json!([choice]));
        if last && self.usage == UsageLayout::LastContent {
            chunk["usage"] = self.answer.usage(to);
        }
        write_data(out, &chunk);
    }

    /// The injected mid-stream error: OpenAI's `event: error`, or Triton's error object.
    fn write_error(&self, out: &mut Vec<u8>) {
        if self.answer.endpoint == Endpoint::Generate {
            return write_data(out, &json!({ "error": FAULT_MESSAGE }));
        }
        let error = json!({"error": {"message": FAULT_MESSAGE, "type": "server_error",
            "param": null, "code": 500}});
        let mut lines = b"event: error\ndata: ".to_vec();
        let _ = serde_json::to_writer(&mut lines, &error);
        write_event(out, &lines);
    }

    /// What follows the last content chunk (`to` tokens sent): OpenAI's usage chunk and
    /// `[DONE]`; nothing for Triton.
    fn write_end(&self, to: u32, out: &mut Vec<u8>) {
        if self.answer.endpoint == Endpoint::Generate {
            return;
        }
        if self.usage == UsageLayout::FinalChunk {
            let mut chunk = self.answer.envelope(true, json!([]));
            chunk["usage"] = self.answer.usage(to);
            write_data(out, &chunk);
        }
        write_event(out, b"data: [DONE]");
    }
}

/// When a non-streaming answer is complete: as if it had been generated in chunks, so its
/// latency matches the stream's (TTFT, then one ITL per further chunk, plus any stall).
pub fn full_answer_delay(req: &GenRequest, ttft: Duration, pace: &mut Pace) -> Duration {
    let chunks = chunk_count(req.max_tokens, pace.tokens_per_chunk);
    let gaps: Duration = (1..chunks)
        .map(|_| sample_delay(&pace.itl, &mut pace.rng))
        .sum();
    let stall = if chunks > 1 {
        req.stall
    } else {
        Duration::ZERO
    };
    ttft + gaps + stall
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(endpoint: Endpoint, max_tokens: u32) -> Answer {
        Answer {
            endpoint,
            id: "x-1".into(),
            created: 7,
            model: Arc::from("m"),
            prompt_tokens: 3,
            max_tokens,
            reasoning_tokens: 0,
        }
    }

    fn request(endpoint: Endpoint, max_tokens: u32) -> GenRequest {
        GenRequest {
            endpoint,
            prompt_tokens: 3,
            max_tokens,
            stream: true,
            include_usage: true,
            error_event: false,
            stall: Duration::ZERO,
            reasoning_tokens: 0,
            media: Vec::new(),
        }
    }

    /// Runs a zero-delay stream to completion; returns its HTTP chunk payloads.
    fn run(endpoint: Endpoint, max_tokens: u32, per_chunk: u32, usage: UsageLayout) -> Vec<String> {
        let pace = Pace {
            first_content_at: Instant::now(),
            itl: Delay::Fixed(Duration::ZERO),
            tokens_per_chunk: per_chunk,
            rng: 1,
        };
        let req = request(endpoint, max_tokens);
        let mut stream = SseStream::new(answer(endpoint, max_tokens), &req, pace, usage);
        let mut out = Vec::new();
        let (content, done) = stream.emit_due(Instant::now(), &mut out);
        assert!(done);
        assert_eq!(content as u32, chunk_count(max_tokens, per_chunk));
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("0\r\n\r\n"), "{text}");
        let mut payloads = Vec::new();
        let mut rest = &text[..text.len() - 5];
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size, 16).unwrap();
            payloads.push(tail[..n].to_string());
            rest = &tail[n + 2..];
        }
        payloads
    }

    #[test]
    fn chunk_and_token_counts() {
        for (endpoint, tokens, per_chunk, usage) in [
            (Endpoint::Chat, 5, 1, UsageLayout::FinalChunk),
            (Endpoint::Chat, 5, 2, UsageLayout::LastContent),
            (Endpoint::Completions, 6, 3, UsageLayout::Omitted),
            (Endpoint::Completions, 1, 4, UsageLayout::FinalChunk),
        ] {
            let events = run(endpoint, tokens, per_chunk, usage);
            assert_eq!(events.last().unwrap(), "data: [DONE]\n\n");
            let chunks: Vec<Value> = events[..events.len() - 1]
                .iter()
                .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
                .collect();
            let role = usize::from(endpoint == Endpoint::Chat);
            let usage_chunk = usize::from(usage == UsageLayout::FinalChunk);
            let content = chunk_count(tokens, per_chunk) as usize;
            assert_eq!(chunks.len(), role + content + usage_chunk);
            let texts: Vec<&str> = chunks[role..role + content]
                .iter()
                .map(|c| {
                    let choice = &c["choices"][0];
                    choice["text"]
                        .as_str()
                        .or(choice["delta"]["content"].as_str())
                        .unwrap()
                })
                .collect();
            let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
            assert_eq!(words, tokens as usize);
            let last = &chunks[role + content - 1];
            assert_eq!(last["choices"][0]["finish_reason"], "length");
            let usage_at = match usage {
                UsageLayout::Omitted => None,
                UsageLayout::FinalChunk => Some(chunks.last().unwrap()),
                UsageLayout::LastContent => Some(last),
            };
            if let Some(u) = usage_at {
                assert_eq!(u["usage"]["completion_tokens"], tokens);
                assert_eq!(u["usage"]["total_tokens"], tokens + 3);
            }
            if usage == UsageLayout::FinalChunk {
                assert_eq!(chunks.last().unwrap()["choices"], json!([]));
            }
        }
    }

    #[test]
    fn reasoning_tokens_come_first_as_reasoning_content() {
        let mut a = answer(Endpoint::Chat, 5);
        a.reasoning_tokens = 3;
        assert_eq!(a.chat_part(0, 2), json!({"reasoning_content": " the of"}));
        assert_eq!(
            a.chat_part(2, 4),
            json!({"reasoning_content": " and", "content": " to"})
        );
        assert_eq!(a.chat_part(4, 5), json!({"content": " in"}));
        assert_eq!(
            a.usage(5)["completion_tokens_details"]["reasoning_tokens"],
            3
        );
        let whole = a.full_body();
        let message = &whole["choices"][0]["message"];
        assert_eq!(message["reasoning_content"], " the of and");
        assert_eq!(message["content"], " to in");
        assert_eq!(message["role"], "assistant");
        a.reasoning_tokens = 0;
        assert_eq!(a.chat_part(0, 1), json!({"content": " the"}));
        assert!(a.usage(5).get("completion_tokens_details").is_none());
    }

    #[test]
    fn pacing_and_stall() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let pace = Pace {
            first_content_at: start + ms(10),
            itl: Delay::Fixed(ms(2)),
            tokens_per_chunk: 1,
            rng: 1,
        };
        let mut req = request(Endpoint::Completions, 4);
        req.stall = ms(100);
        let mut stream = SseStream::new(
            answer(Endpoint::Completions, 4),
            &req,
            pace,
            UsageLayout::Omitted,
        );
        let mut out = Vec::new();
        let mut due = Vec::new();
        loop {
            due.push(stream.next_at() - start);
            let (n, done) = stream.emit_due(stream.next_at(), &mut out);
            assert_eq!(n, 1);
            if done {
                break;
            }
        }
        // 4 chunks: the stall sits after the second (before chunk index 2).
        assert_eq!(due, vec![ms(10), ms(12), ms(114), ms(116)]);
        let mut pace = pace;
        assert_eq!(full_answer_delay(&req, ms(10), &mut pace), ms(116));
    }

    #[test]
    fn error_event_ends_the_stream() {
        let mut req = request(Endpoint::Chat, 8);
        req.error_event = true;
        let pace = Pace {
            first_content_at: Instant::now(),
            itl: Delay::Fixed(Duration::ZERO),
            tokens_per_chunk: 2,
            rng: 1,
        };
        let mut stream = SseStream::new(
            answer(Endpoint::Chat, 8),
            &req,
            pace,
            UsageLayout::FinalChunk,
        );
        let mut out = Vec::new();
        assert_eq!(stream.emit_due(Instant::now(), &mut out), (1, true));
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\r\nevent: error\ndata: {\"error\""),
            "{text}"
        );
        assert!(!text.contains("[DONE]") && text.ends_with("\n\n\r\n0\r\n\r\n"));
    }

    #[test]
    fn generate_stream_events() {
        let events = run(Endpoint::Generate, 5, 2, UsageLayout::FinalChunk);
        let texts: Vec<String> = events
            .iter()
            .map(|e| {
                let data = e.strip_prefix("data: ").unwrap().trim_end();
                let v: Value = serde_json::from_str(data).unwrap();
                assert_eq!(
                    (v["model_name"].as_str(), v["model_version"].as_str()),
                    (Some("m"), Some("1"))
                );
                v["text_output"].as_str().unwrap().to_string()
            })
            .collect();
        // Three chunks and nothing after them: no usage, no [DONE].
        assert_eq!(texts, [" the of", " and to", " in"]);
        let mut req = request(Endpoint::Generate, 4);
        req.error_event = true;
        let pace = Pace {
            first_content_at: Instant::now(),
            itl: Delay::Fixed(Duration::ZERO),
            tokens_per_chunk: 1,
            rng: 1,
        };
        let mut stream = SseStream::new(
            answer(Endpoint::Generate, 4),
            &req,
            pace,
            UsageLayout::Omitted,
        );
        assert_eq!(stream.content_type(), "text/event-stream; charset=utf-8");
        let mut out = Vec::new();
        assert_eq!(stream.emit_due(Instant::now(), &mut out), (1, true));
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\r\ndata: {\"error\":\"injected fault"),
            "{text}"
        );
        assert_eq!(
            answer(Endpoint::Generate, 2).full_body()["text_output"],
            " the of"
        );
    }

    #[test]
    fn every_word_is_one_token_in_the_built_in_encodings() {
        for name in ["cl100k_base", "o200k_base"] {
            let t = inferperf_client::inputs::tokenizer::Tokenizer::load(name).unwrap();
            for w in VOCABULARY {
                assert_eq!(t.count(&format!(" {w}")), 1, "{name}: '{w}'");
            }
            assert_eq!(t.count(&token_text(0, 100)), 100, "{name}");
        }
    }

    #[test]
    fn full_body_counts() {
        let body = answer(Endpoint::Chat, 3).full_body();
        assert_eq!(body["choices"][0]["message"]["content"], " the of and");
        assert_eq!(body["usage"]["completion_tokens"], 3);
        assert_eq!(body["object"], "chat.completion");
        let body = answer(Endpoint::Completions, 2).full_body();
        assert_eq!(body["choices"][0]["text"], " the of");
        assert_eq!(token_text(9, 11), " on with");
        assert_eq!(
            (chunk_count(5, 2), chunk_count(4, 2), chunk_count(1, 0)),
            (3, 2, 1)
        );
    }
}
