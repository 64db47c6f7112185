//! A `profile` reply decoded: from what the engine stored of one request (each SSE event or
//! stream response with its read time, or a whole body) to its text chunks, usage and error.
//! [`Reply`] is what a kind's [`Service::decode`](super::Service::decode)
//! reads and [`Parsed`] what it returns; the parsers here are the OpenAI-style default
//! ([`decode_openai`]: SSE events or a whole JSON body, in the chat, completions and Triton
//! generate layouts). Timestamps were taken at read time; nothing here changes them, parsing
//! only decides which events carried output text.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::reply_error::ReplyError;
use crate::measure::llm::Usage;
use crate::measure::record::framed_responses;

/// What the engine stored of one request's reply, as a kind decodes it.
#[derive(Clone, Copy, Debug)]
pub struct Reply<'a> {
    /// The reply was an SSE stream: `body` holds its events, framed with their read times.
    pub sse: bool,
    /// The request completed with a success status.
    pub ok: bool,
    /// When the reply completed (ns).
    pub end_ns: u64,
    /// The stored bytes: framed responses (SSE events, gRPC stream responses) each with its
    /// read time, or the whole body.
    pub body: &'a [u8],
}

/// The output of one request, before token counting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// Events (or the whole response) that carried output text: (read time ns, text).
    pub chunks: Vec<(u64, String)>,
    /// The last `usage` the server reported.
    pub usage: Option<Usage>,
    /// The first error inside the 2xx response: an error object (OpenAI's `{"error": ..}`,
    /// vLLM's `{"object": "error", ..}`, as a chunk, an `event: error` packet's data or the
    /// whole body), or data that is not JSON.
    pub error: Option<ReplyError>,
    /// `[DONE]` (or a finish reason) was seen: the stream ended properly.
    pub finished: bool,
    /// Reasoning text (`reasoning_content`), joined; it is part of `chunks` too.
    pub reasoning: String,
    /// Read time of the first event that carried answer text (not reasoning): AIPerf's
    /// time to first output token ends here.
    pub first_output_ns: Option<u64>,
    /// The reply came as a stream of events or responses: its errors are worded as a
    /// stream's.
    pub streamed: bool,
}

impl Parsed {
    /// All output text, joined.
    pub fn text(&self) -> String {
        self.chunks.iter().map(|(_, t)| t.as_str()).collect()
    }

    /// Forgets the output: a reply that carried an error counts no token, not even those
    /// that came before the error.
    pub fn drop_output(&mut self) {
        self.chunks.clear();
        self.usage = None;
        self.reasoning.clear();
        self.first_output_ns = None;
    }
}

/// The OpenAI-style reading of a reply, the default decoder: the events of an SSE reply,
/// the whole JSON body of a successful one, nothing of a failed one.
pub fn decode_openai(reply: &Reply<'_>) -> Parsed {
    if reply.sse {
        parse_events(framed_responses(reply.body))
    } else if reply.ok {
        parse_whole(reply.end_ns, reply.body)
    } else {
        Parsed::default()
    }
}

/// Parses streamed events: `(read time, data)`; an empty payload is the `[DONE]` marker.
pub fn parse_events<'a>(events: impl Iterator<Item = (u64, &'a [u8])>) -> Parsed {
    parse_with(events, true)
}

/// [`parse_events`] on the general path alone (every message as a `Value`): what the typed
/// fast path must agree with. For tests and the fuzz target.
#[cfg(feature = "llm")]
pub fn parse_events_general<'a>(events: impl Iterator<Item = (u64, &'a [u8])>) -> Parsed {
    parse_with(events, false)
}

fn parse_with<'a>(events: impl Iterator<Item = (u64, &'a [u8])>, typed: bool) -> Parsed {
    let mut out = Parsed {
        streamed: true,
        ..Parsed::default()
    };
    for (at, data) in events {
        // The empty payload is the engine's `[DONE]`; a named event may still carry it.
        if data.is_empty() || data.trim_ascii() == b"[DONE]" {
            out.finished = true;
            continue;
        }
        // An error object takes the general path, which words the error.
        let fast = typed
            .then(|| serde_json::from_slice::<Message<'_>>(data).ok())
            .flatten();
        if let Some(m) = fast.filter(|m| !m.is_error()) {
            m.absorb(at, &mut out);
        } else if let Ok(v) = serde_json::from_slice::<Value>(data) {
            absorb(&v, at, &mut out);
        } else {
            out.error.get_or_insert_with(|| ReplyError::not_json(data));
        }
    }
    out
}

/// Whether one streamed event's data carries output text (reasoning included): the event
/// that ends a request's prefill (`--prefill-concurrency`). Role-only and usage-only chunks,
/// error objects and `[DONE]` do not.
#[cfg(feature = "llm")]
pub fn has_output(data: &[u8]) -> bool {
    let parsed = parse_events(std::iter::once((0, data)));
    parsed.error.is_none() && !parsed.chunks.is_empty()
}

/// Parses a whole (non-streamed) JSON response that completed at `end_ns`.
pub fn parse_whole(end_ns: u64, body: &[u8]) -> Parsed {
    let mut out = Parsed::default();
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => {
            absorb(&v, end_ns, &mut out);
            out.finished = true;
        }
        Err(_) => out.error = Some(ReplyError::not_json(body)),
    }
    out
}

/// The common shape of a streamed message, read without building a JSON tree: borrowed
/// strings, everything else skipped. Any message that does not fit these types exactly (a
/// number where text was expected, a duplicate key) fails here, and an error object is
/// refused; both go through the general [`absorb`] on a `Value`, so both paths give the same
/// result.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    choices: Option<Vec<Choice<'a>>>,
    usage: Option<UsageCounts>,
    #[serde(borrow)]
    text_output: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Present,
    #[serde(borrow)]
    object: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow)]
    delta: Option<Part<'a>>,
    #[serde(borrow)]
    message: Option<Part<'a>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    finish_reason: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct UsageCounts {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    completion_tokens_details: Option<UsageDetails>,
    prompt_tokens_details: Option<UsageDetails>,
}

/// `completion_tokens_details` / `prompt_tokens_details` (only the members read).
#[derive(Deserialize)]
struct UsageDetails {
    reasoning_tokens: Option<u64>,
    cached_tokens: Option<u64>,
}

/// True when the member is there and not `null`, whatever its value.
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<IgnoredAny>::deserialize(d).map(|v| Present(v.is_some()))
    }
}

impl Message<'_> {
    /// An error object, as [`ReplyError::of_message`] reads one.
    fn is_error(&self) -> bool {
        self.error.0 || self.object.as_deref() == Some("error")
    }

    /// What [`absorb`] does with the same message (without an `error`) as a `Value`.
    fn absorb(self, at: u64, out: &mut Parsed) {
        if let Some(u) = self.usage {
            out.usage = Some(Usage {
                prompt_tokens: u.prompt_tokens.unwrap_or(0),
                completion_tokens: u.completion_tokens.unwrap_or(0),
                total_tokens: u.total_tokens,
                reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
                cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
            });
        }
        let (mut text, mut reasoning) = (String::new(), 0);
        let first = self.choices.and_then(|c| c.into_iter().next());
        match first {
            Some(c) => {
                let parts = [c.delta, c.message].into_iter().flatten();
                for p in parts {
                    if let Some(r) = p.reasoning_content {
                        text.push_str(&r);
                        out.reasoning.push_str(&r);
                        reasoning += r.len();
                    }
                    text.extend(p.content);
                }
                text.extend(c.text);
                out.finished |= c.finish_reason.is_some();
            }
            None => text.extend(self.text_output),
        }
        push_chunk(out, at, text, reasoning);
    }
}

/// One JSON message: its text (any known layout), usage, error and finish reason.
fn absorb(v: &Value, at: u64, out: &mut Parsed) {
    if let Some(e) = ReplyError::of_message(v) {
        out.error.get_or_insert(e);
        return;
    }
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        let get = |k: &str| u.pointer(k).and_then(Value::as_u64);
        out.usage = Some(Usage {
            prompt_tokens: get("/prompt_tokens").unwrap_or(0),
            completion_tokens: get("/completion_tokens").unwrap_or(0),
            total_tokens: get("/total_tokens"),
            reasoning_tokens: get("/completion_tokens_details/reasoning_tokens"),
            cached_tokens: get("/prompt_tokens_details/cached_tokens"),
        });
    }
    let before = out.reasoning.len();
    let text = text_of(v, &mut out.reasoning);
    let reasoning = out.reasoning.len() - before;
    push_chunk(out, at, text, reasoning);
    let finish = v
        .pointer("/choices/0/finish_reason")
        .is_some_and(|f| !f.is_null());
    out.finished |= finish;
}

/// Adds a chunk carrying `text` (none when empty), of which the last `reasoning` bytes of
/// `out.reasoning` are the reasoning part; the first chunk with more than reasoning marks
/// the first output.
fn push_chunk(out: &mut Parsed, at: u64, text: String, reasoning: usize) {
    if text.is_empty() {
        return;
    }
    if out.first_output_ns.is_none() && text.len() > reasoning {
        out.first_output_ns = Some(at);
    }
    out.chunks.push((at, text));
}

/// Output text in the OpenAI chat (delta or message, reasoning included), completions, and
/// Triton generate layouts; the reasoning part is added to `reasoning` too.
fn text_of(v: &Value, reasoning: &mut String) -> String {
    let mut text = String::new();
    if let Some(choice) = v.pointer("/choices/0") {
        for path in [
            "/delta/reasoning_content",
            "/delta/content",
            "/message/reasoning_content",
            "/message/content",
            "/text",
        ] {
            if let Some(s) = choice.pointer(path).and_then(Value::as_str) {
                text.push_str(s);
                if path.ends_with("reasoning_content") {
                    reasoning.push_str(s);
                }
            }
        }
    } else if let Some(s) = v.get("text_output").and_then(Value::as_str) {
        text.push_str(s);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(list: &[(u64, &'static str)]) -> Parsed {
        parse_events(list.iter().map(|(t, d)| (*t, d.as_bytes())))
    }

    #[test]
    fn chat_stream_keeps_only_text_events() {
        let p = ev(&[
            (1, r#"{"choices":[{"delta":{"role":"assistant"}}]}"#),
            (2, r#"{"choices":[{"delta":{"content":"tok1 "}}]}"#),
            (2, r#"{"choices":[{"delta":{"content":""}}]}"#),
            (
                3,
                r#"{"choices":[{"delta":{"content":"tok2 "},"finish_reason":"length"}]}"#,
            ),
            (
                4,
                r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
            ),
            (5, ""),
        ]);
        assert_eq!(p.chunks, vec![(2, "tok1 ".into()), (3, "tok2 ".into())]);
        assert_eq!(p.text(), "tok1 tok2 ");
        assert_eq!(
            p.usage,
            Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 2,
                ..Usage::default()
            })
        );
        assert!(p.finished);
        assert_eq!(p.error, None);
    }

    #[test]
    fn completions_generate_and_errors() {
        let p = ev(&[
            (7, r#"{"choices":[{"text":"a"}]}"#),
            (8, r#"{"text_output":"b"}"#),
        ]);
        assert_eq!(p.chunks, vec![(7, "a".into()), (8, "b".into())]);
        assert!(!p.finished);
    }

    #[test]
    fn errors_inside_the_stream() {
        use crate::run::kinds::reply_error::ReplyErrorKind as K;
        let error = |list: &[(u64, &'static str)]| {
            let e = ev(list).error.expect("an error");
            (e.kind, e.detail)
        };
        let object = r#"{"error":{"message":"overloaded","type":"server_error"}}"#;
        let want = (
            K::ErrorObject,
            "overloaded (type: server_error)".to_string(),
        );
        assert_eq!(error(&[(1, object)]), want);
        let vllm = r#"{"object":"error","message":"bad","code":400}"#;
        assert_eq!(
            error(&[(1, vllm)]),
            (K::ErrorObject, "bad (code: 400)".into())
        );
        assert_eq!(
            error(&[(1, "plain words")]),
            (K::NotJson, "plain words".into())
        );
        // Mid-stream: the chunks before the error are still parsed; the first error wins.
        let text = r#"{"choices":[{"delta":{"content":"a"}}]}"#;
        let p = ev(&[(1, text), (2, "{not json"), (3, object), (4, "")]);
        assert_eq!(p.chunks.len(), 1);
        assert_eq!(p.error.as_ref().unwrap().detail, "{not json");
        assert!(p.finished);
        let mut p = p;
        p.drop_output();
        assert!(p.chunks.is_empty() && p.first_output_ns.is_none());
        // `"error": null` is no error; a `[DONE]` in a named event ends the stream.
        let p = ev(&[
            (1, r#"{"error":null,"choices":[{"text":"a"}]}"#),
            (2, " [DONE] "),
        ]);
        assert_eq!(
            (&p.error, p.text().as_str(), p.finished),
            (&None, "a", true)
        );
    }

    #[test]
    fn typed_and_general_parsing_agree() {
        let messages = [
            r#"{"choices":[{"delta":{"content":"a\u00e9\n"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"r","content":"c"},"message":{"content":"m"},"text":"t"}]}"#,
            r#"{"choices":[{"delta":{"content":null},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"},{"text":"second"}]}"#,
            r#"{"choices":[],"text_output":"only when no choice"}"#,
            r#"{"choices":null,"text_output":"t"}"#,
            r#"{"choices":[null],"text_output":"t"}"#,
            r#"{"choices":{"0":{"text":"object"}}}"#,
            r#"{"choices":[{"delta":{"content":7}}]}"#,
            r#"{"choices":[{"delta":"text"}]}"#,
            r#"{"usage":null}"#,
            r#"{"usage":{}}"#,
            r#"{"usage":{"prompt_tokens":-1,"completion_tokens":2.5}}"#,
            r#"{"usage":{"prompt_tokens":3,"completion_tokens":4},"choices":[]}"#,
            r#"{"usage":5}"#,
            r#"{"usage":{"prompt_tokens":3,"total_tokens":9,"completion_tokens_details":{"reasoning_tokens":2},"prompt_tokens_details":{"cached_tokens":1,"audio_tokens":0}}}"#,
            r#"{"usage":{"total_tokens":-9,"completion_tokens_details":null,"prompt_tokens_details":{"cached_tokens":null}}}"#,
            r#"{"usage":{"completion_tokens_details":7,"prompt_tokens_details":[1]}}"#,
            r#"{"error":null}"#,
            r#"{"error":null,"choices":[{"text":"e"}]}"#,
            r#"{"object":"error","message":"v","code":500}"#,
            r#"{"object":"text_completion","choices":[{"text":"o"}]}"#,
            r#"{"object":5,"choices":[{"text":"n"}]}"#,
            r#"{"object":"error","object":"x"}"#,
            r#"{"error":{"message":"m"},"choices":[{"text":"ignored"}]}"#,
            r#"{"error":"plain"}"#,
            r#"{"text_output":"a","text_output":"b"}"#,
            r#"{"choices":[{"text":"x","extra":{"deep":[1,{"k":null}]}}],"id":"c1"}"#,
            r#"[1,2]"#,
            r#""just a string""#,
            "not json at all",
            "",
        ];
        for m in messages {
            let one = [(9u64, m.as_bytes())];
            let fast = parse_events(one.iter().copied());
            let general = parse_events_general(one.iter().copied());
            assert_eq!(fast, general, "{m}");
        }
        let all: Vec<(u64, &[u8])> = messages.iter().map(|m| (1, m.as_bytes())).collect();
        let fast = parse_events(all.iter().copied());
        assert_eq!(fast, parse_events_general(all.iter().copied()));
        assert_eq!(fast.chunks.len(), 11);
        assert!(fast.finished && fast.error.is_some() && fast.usage.is_some());
    }

    #[test]
    fn usage_details_are_read_on_both_paths() {
        let m = r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9,"completion_tokens_details":{"reasoning_tokens":3},"prompt_tokens_details":{"cached_tokens":2}}}"#;
        let want = Some(Usage {
            prompt_tokens: 5,
            completion_tokens: 4,
            total_tokens: Some(9),
            reasoning_tokens: Some(3),
            cached_tokens: Some(2),
        });
        let one = [(1u64, m.as_bytes())];
        assert_eq!(parse_events(one.iter().copied()).usage, want);
        assert_eq!(parse_events_general(one.iter().copied()).usage, want);
        assert_eq!(parse_whole(1, m.as_bytes()).usage, want);
        // Without the optional members: only the two counts.
        let p = ev(&[(1, r#"{"usage":{"prompt_tokens":1,"completion_tokens":2}}"#)]);
        let u = p.usage.unwrap();
        assert_eq!(
            (u.total_tokens, u.reasoning_tokens, u.cached_tokens),
            (None, None, None)
        );
    }

    #[test]
    fn reasoning_is_kept_apart_and_marks_the_first_output() {
        let p = ev(&[
            (
                1,
                r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            ),
            (
                2,
                r#"{"choices":[{"delta":{"reasoning_content":" think"}}]}"#,
            ),
            (
                3,
                r#"{"choices":[{"delta":{"reasoning_content":" more","content":""}}]}"#,
            ),
            (
                4,
                r#"{"choices":[{"delta":{"reasoning_content":" last","content":" an"}}]}"#,
            ),
            (
                5,
                r#"{"choices":[{"delta":{"content":"swer"},"finish_reason":"stop"}]}"#,
            ),
        ]);
        assert_eq!(p.reasoning, " think more last");
        assert_eq!(p.first_output_ns, Some(4));
        assert_eq!(p.text(), " think more last answer");
        assert_eq!(p.chunks.len(), 4);
        let p = ev(&[(7, r#"{"choices":[{"text":"a"}]}"#)]);
        assert_eq!((p.reasoning.as_str(), p.first_output_ns), ("", Some(7)));
        let p = ev(&[(7, r#"{"choices":[{"delta":{"reasoning_content":"r"}}]}"#)]);
        assert_eq!(p.first_output_ns, None, "reasoning alone is no output");
        let body = br#"{"choices":[{"message":{"reasoning_content":"r","content":"c"}}]}"#;
        let p = parse_whole(9, body);
        assert_eq!((p.reasoning.as_str(), p.first_output_ns), ("r", Some(9)));
    }

    #[test]
    fn the_default_decoder_reads_events_a_whole_body_or_nothing() {
        let mut events = Vec::new();
        crate::measure::record::push_framed_response(
            &mut events,
            3,
            br#"{"choices":[{"delta":{"content":"a"}}]}"#,
        );
        fn reply(sse: bool, ok: bool, body: &[u8]) -> Reply<'_> {
            Reply {
                sse,
                ok,
                end_ns: 8,
                body,
            }
        }
        let p = decode_openai(&reply(true, false, &events));
        assert_eq!((p.chunks, p.streamed), (vec![(3, "a".into())], true));
        let body = br#"{"choices":[{"text":"b"}]}"#;
        let p = decode_openai(&reply(false, true, body));
        assert_eq!((p.chunks, p.streamed), (vec![(8, "b".into())], false));
        let p = decode_openai(&reply(false, false, body));
        assert_eq!(p, Parsed::default(), "a failed whole reply is not read");
    }

    #[test]
    fn whole_responses() {
        let body = br#"{"choices":[{"message":{"content":"hi there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        let p = parse_whole(42, body);
        assert_eq!(p.chunks, vec![(42, "hi there".into())]);
        assert_eq!(p.usage.unwrap().completion_tokens, 2);
        let p = parse_whole(42, br#"{"data":[{"embedding":[0.1]}]}"#);
        assert!(p.chunks.is_empty() && p.finished);
        let p = parse_whole(1, b"not json");
        assert!(p.chunks.is_empty() && !p.finished);
        assert_eq!(p.error.unwrap().detail, "not json");
        let p = parse_whole(1, br#"{"object":"error","message":"no"}"#);
        assert_eq!(p.error.unwrap().detail, "no");
    }

    #[test]
    fn the_first_token_is_an_event_with_output_text() {
        for (data, token) in [
            (r#"{"choices":[{"delta":{"role":"assistant"}}]}"#, false),
            (
                r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
                false,
            ),
            (r#"{"choices":[],"usage":{"completion_tokens":3}}"#, false),
            (r#"{"error":{"message":"boom"}}"#, false),
            ("not json", false),
            ("[DONE]", false),
            ("", false),
            (r#"{"choices":[{"delta":{"content":"a"}}]}"#, true),
            (r#"{"choices":[{"delta":{"reasoning_content":"r"}}]}"#, true),
            (r#"{"choices":[{"text":" t"}]}"#, true),
            (r#"{"model_name":"m","text_output":"x"}"#, true),
        ] {
            assert_eq!(has_output(data.as_bytes()), token, "{data}");
        }
    }
}
