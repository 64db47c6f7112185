//! Reading OpenAI request bodies (chat, completions, embeddings) into what the fake model
//! needs, and the OpenAI error body. Every bad field becomes an [`ApiError`] naming it.

use std::time::Duration;

use serde_json::{json, Map, Value};

/// Output tokens when the request sets no limit.
pub const DEFAULT_MAX_TOKENS: u32 = 16;
/// Largest output length a request may ask for (bounds a non-streaming body to a few MB).
pub const MAX_OUTPUT_TOKENS: u32 = 1 << 20;
/// Longest `stall_ms` a request may ask for, in ms.
pub const MAX_STALL_MS: u64 = 60_000;
/// Floats per embedding when the request does not set `dimensions`.
pub const DEFAULT_EMBEDDING_DIMS: usize = 8;
/// Largest `dimensions` accepted.
pub const MAX_EMBEDDING_DIMS: usize = 4096;

/// The text-generation endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`
    Chat,
    /// `/v1/completions`
    Completions,
    /// Triton's generate extension, `/v2/models/<m>/generate[_stream]` (see `generate`).
    Generate,
}

/// A validated generation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenRequest {
    pub endpoint: Endpoint,
    /// Whitespace-separated words of the prompt (or the count of given token ids).
    pub prompt_tokens: u64,
    /// Exact number of tokens to generate.
    pub max_tokens: u32,
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// `"inferperf_fault": "error_event"`: an `event: error` after the first content chunk.
    pub error_event: bool,
    /// `stall_ms`: a pause in the middle of the stream.
    pub stall: Duration,
    /// `inferperf_reasoning_tokens`: how many of the `max_tokens` come first as
    /// `reasoning_content` (chat only), as a reasoning model's thinking before its answer.
    pub reasoning_tokens: u32,
    /// The images and audio clips of a chat request's content parts, in order.
    pub media: Vec<super::media::Media>,
}

/// A validated embeddings request: prompt tokens of each input and the vector length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedRequest {
    /// Per input: (prompt tokens, a seed derived from its content for the vector values).
    pub inputs: Vec<(u64, u64)>,
    pub dimensions: usize,
}

/// An OpenAI-style error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    /// The `type` field: `invalid_request_error`, `not_found_error`, ...
    pub kind: &'static str,
    pub param: Option<&'static str>,
}

impl ApiError {
    pub fn invalid(param: Option<&'static str>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param,
        }
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 404,
            message: message.into(),
            kind: "not_found_error",
            param: None,
        }
    }

    /// The body: `{"error":{"message":..,"type":..,"param":..,"code":..}}`.
    pub fn to_json(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param,
            "code": self.status}})
    }
}

pub(crate) fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::invalid(
            None,
            "request body must be a JSON object",
        )),
        Err(e) => Err(ApiError::invalid(
            None,
            format!("request body is not valid JSON: {e}"),
        )),
    }
}

/// Checks `model` names one of the served names (404 otherwise, as OpenAI answers).
fn check_model<S: AsRef<str>>(req: &Map<String, Value>, served: &[S]) -> Result<(), ApiError> {
    match req.get("model") {
        Some(Value::String(name)) if served.iter().any(|s| s.as_ref() == name) => Ok(()),
        Some(Value::String(name)) => Err(ApiError::not_found(format!(
            "The model '{name}' does not exist (served: '{}')",
            served
                .iter()
                .map(AsRef::as_ref)
                .collect::<Vec<_>>()
                .join("', '")
        ))),
        Some(_) => Err(ApiError::invalid(Some("model"), "'model' must be a string")),
        None => Err(ApiError::invalid(Some("model"), "'model' is required")),
    }
}

pub(crate) fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Words of a chat message's `content` (a string, an array of parts with `text`, or
/// null), and the media of its parts appended to `media`.
fn content_words(content: &Value, media: &mut Vec<super::media::Media>) -> Result<u64, ApiError> {
    let bad = || {
        ApiError::invalid(
            Some("messages"),
            "message 'content' must be a string, an array of parts or null",
        )
    };
    match content {
        Value::Null => Ok(0),
        Value::String(text) => Ok(words(text)),
        Value::Array(parts) => parts.iter().try_fold(0, |sum, part| {
            let text = part
                .get("text")
                .map_or(Ok(""), |t| t.as_str().ok_or_else(bad));
            match super::media::part(part) {
                Ok(Some(m)) => media.push(m),
                Ok(None) => {}
                Err(why) => return Err(ApiError::invalid(Some("messages"), why)),
            }
            Ok(sum + words(text?))
        }),
        _ => Err(bad()),
    }
}

/// The prompt words of a chat request's messages and the media of their content parts.
fn chat_prompt(req: &Map<String, Value>) -> Result<(u64, Vec<super::media::Media>), ApiError> {
    let param = Some("messages");
    let messages = match req.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(_) => {
            return Err(ApiError::invalid(
                param,
                "'messages' must be a non-empty array",
            ))
        }
        None => return Err(ApiError::invalid(param, "'messages' is required")),
    };
    let mut media = Vec::new();
    let words = messages.iter().try_fold(0, |sum, message| {
        let content = message
            .get("content")
            .ok_or_else(|| ApiError::invalid(param, "every message needs a 'content'"))?;
        Ok(sum + content_words(content, &mut media)?)
    })?;
    Ok((words, media))
}

/// `prompt`: a string, an array of strings, an array of token ids or an array of such arrays.
fn completion_prompt_tokens(req: &Map<String, Value>) -> Result<u64, ApiError> {
    let bad = || {
        ApiError::invalid(
            Some("prompt"),
            "'prompt' must be a string, an array of strings or an array of token ids",
        )
    };
    let piece = |v: &Value| match v {
        Value::String(text) => Ok(words(text)),
        Value::Number(_) => Ok(1),
        Value::Array(ids) if ids.iter().all(Value::is_number) => Ok(ids.len() as u64),
        _ => Err(bad()),
    };
    match req.get("prompt") {
        None => Err(ApiError::invalid(Some("prompt"), "'prompt' is required")),
        Some(Value::Array(items)) => items.iter().try_fold(0, |sum, v| Ok(sum + piece(v)?)),
        Some(v @ Value::String(_)) => piece(v),
        Some(_) => Err(bad()),
    }
}

/// `max_completion_tokens` (preferred) or `max_tokens`; the default when neither is set.
fn max_tokens(req: &Map<String, Value>) -> Result<u32, ApiError> {
    for name in ["max_completion_tokens", "max_tokens"] {
        match req.get(name) {
            None | Some(Value::Null) => continue,
            Some(v) => return output_tokens(name, v),
        }
    }
    Ok(DEFAULT_MAX_TOKENS)
}

/// An output-length field `name`: an integer in 1..=[`MAX_OUTPUT_TOKENS`].
pub(crate) fn output_tokens(name: &'static str, value: &Value) -> Result<u32, ApiError> {
    value
        .as_u64()
        .filter(|n| (1..=u64::from(MAX_OUTPUT_TOKENS)).contains(n))
        .map(|n| n as u32)
        .ok_or_else(|| {
            let msg = format!("'{name}' must be an integer in 1..={MAX_OUTPUT_TOKENS}");
            ApiError::invalid(Some(name), msg)
        })
}

fn flag(req: &Map<String, Value>, name: &'static str) -> Result<bool, ApiError> {
    match req.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::invalid(
            Some(name),
            format!("'{name}' must be a boolean"),
        )),
    }
}

fn include_usage(req: &Map<String, Value>) -> Result<bool, ApiError> {
    match req.get("stream_options") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Object(options)) => flag(options, "include_usage"),
        Some(_) => Err(ApiError::invalid(
            Some("stream_options"),
            "'stream_options' must be an object",
        )),
    }
}

/// The test faults: `inferperf_fault` and `stall_ms`.
pub(crate) fn faults(req: &Map<String, Value>) -> Result<(bool, Duration), ApiError> {
    let error_event = match req.get("inferperf_fault") {
        None | Some(Value::Null) => false,
        Some(Value::String(f)) if f == "error_event" => true,
        Some(_) => {
            return Err(ApiError::invalid(
                Some("inferperf_fault"),
                "'inferperf_fault' must be \"error_event\"",
            ))
        }
    };
    let stall_ms = match req.get("stall_ms") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64().filter(|ms| *ms <= MAX_STALL_MS).ok_or_else(|| {
            let msg = format!("'stall_ms' must be an integer in 0..={MAX_STALL_MS}");
            ApiError::invalid(Some("stall_ms"), msg)
        })?,
    };
    Ok((error_event, Duration::from_millis(stall_ms)))
}

/// Validates a chat or completions request for one of the served names `served`.
pub fn parse_generation<S: AsRef<str>>(
    endpoint: Endpoint,
    body: &[u8],
    served: &[S],
) -> Result<GenRequest, ApiError> {
    let req = object(body)?;
    check_model(&req, served)?;
    let (prompt_tokens, media) = match endpoint {
        Endpoint::Chat => chat_prompt(&req)?,
        Endpoint::Completions => (completion_prompt_tokens(&req)?, Vec::new()),
        // Its body has another layout: `generate::parse_body` reads it.
        Endpoint::Generate => {
            return Err(ApiError::invalid(None, "not an OpenAI endpoint"));
        }
    };
    let (error_event, stall) = faults(&req)?;
    let mut max_tokens = max_tokens(&req)?;
    // `inferperf_stop_after`: the answer ends early, as at an end-of-sequence token.
    if let Some(v) = req.get("inferperf_stop_after").filter(|v| !v.is_null()) {
        max_tokens = max_tokens.min(output_tokens("inferperf_stop_after", v)?);
    }
    let reasoning_tokens = match req.get("inferperf_reasoning_tokens") {
        None | Some(Value::Null) => 0,
        Some(v) if endpoint == Endpoint::Chat => {
            output_tokens("inferperf_reasoning_tokens", v)?.min(max_tokens)
        }
        Some(_) => {
            let msg = "'inferperf_reasoning_tokens' is for chat completions only";
            return Err(ApiError::invalid(Some("inferperf_reasoning_tokens"), msg));
        }
    };
    Ok(GenRequest {
        endpoint,
        prompt_tokens,
        max_tokens,
        stream: flag(&req, "stream")?,
        include_usage: include_usage(&req)?,
        error_event,
        stall,
        reasoning_tokens,
        media,
    })
}

/// FNV-1a over a value's JSON text: a stable seed so equal inputs get equal vectors.
fn seed_of(value: &Value) -> u64 {
    value
        .to_string()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// Validates an embeddings request: `input` is a string, an array of strings, an array of
/// token ids or an array of such arrays; `dimensions` is optional.
pub fn parse_embeddings<S: AsRef<str>>(
    body: &[u8],
    served: &[S],
) -> Result<EmbedRequest, ApiError> {
    let req = object(body)?;
    check_model(&req, served)?;
    let bad = || {
        ApiError::invalid(
            Some("input"),
            "'input' must be a string, an array of strings or an array of token ids",
        )
    };
    let one = |v: &Value| match v {
        Value::String(text) => Ok((words(text), seed_of(v))),
        Value::Array(ids) if !ids.is_empty() && ids.iter().all(Value::is_number) => {
            Ok((ids.len() as u64, seed_of(v)))
        }
        _ => Err(bad()),
    };
    let inputs = match req.get("input") {
        None => return Err(ApiError::invalid(Some("input"), "'input' is required")),
        Some(Value::Array(items)) if items.is_empty() => return Err(bad()),
        Some(Value::Array(items)) if items.iter().all(Value::is_number) => {
            vec![(items.len() as u64, seed_of(&req["input"]))]
        }
        Some(Value::Array(items)) => items.iter().map(one).collect::<Result<_, _>>()?,
        Some(v) => vec![one(v)?],
    };
    let dimensions = match req.get("dimensions") {
        None | Some(Value::Null) => DEFAULT_EMBEDDING_DIMS,
        Some(v) => v
            .as_u64()
            .filter(|d| (1..=MAX_EMBEDDING_DIMS as u64).contains(d))
            .ok_or_else(|| {
                let msg = format!("'dimensions' must be an integer in 1..={MAX_EMBEDDING_DIMS}");
                ApiError::invalid(Some("dimensions"), msg)
            })? as usize,
    };
    Ok(EmbedRequest { inputs, dimensions })
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &[&str] = &["m"];

    #[test]
    fn adapters_are_served_names_too() {
        let body = |model: &str| format!(r#"{{"model":"{model}","prompt":"a b"}}"#);
        let served = ["base", "lora1", "lora2"];
        for ok in served {
            assert!(parse_generation(Endpoint::Completions, body(ok).as_bytes(), &served).is_ok());
        }
        let e =
            parse_generation(Endpoint::Completions, body("lora3").as_bytes(), &served).unwrap_err();
        assert_eq!(e.status, 404);
        assert!(e.message.contains("'base', 'lora1', 'lora2'"), "{e:?}");
    }

    #[test]
    fn reasoning_and_early_stop_fields() {
        let chat = |extra: &str| {
            let body = format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"a"}}],"max_tokens":8{extra}}}"#
            );
            parse_generation(Endpoint::Chat, body.as_bytes(), M)
        };
        let got = chat(r#","inferperf_reasoning_tokens":3"#).unwrap();
        assert_eq!((got.max_tokens, got.reasoning_tokens), (8, 3));
        let got = chat(r#","inferperf_stop_after":5,"inferperf_reasoning_tokens":9"#).unwrap();
        assert_eq!((got.max_tokens, got.reasoning_tokens), (5, 5));
        assert_eq!(chat(r#","inferperf_stop_after":20"#).unwrap().max_tokens, 8);
        let e = chat(r#","inferperf_reasoning_tokens":"x""#).unwrap_err();
        assert!(e.message.contains("'inferperf_reasoning_tokens'"), "{e:?}");
        let body = br#"{"model":"m","prompt":"a","inferperf_reasoning_tokens":2}"#;
        let e = parse_generation(Endpoint::Completions, body, M).unwrap_err();
        assert!(e.message.contains("chat completions only"), "{e:?}");
    }

    #[test]
    fn generation_fields() {
        let chat = br#"{"model":"m","messages":[{"role":"system","content":"be brief"},
            {"role":"user","content":[{"type":"text","text":"one two  three"},
            {"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}],
            "max_completion_tokens":5,"max_tokens":9,"stream":true,
            "stream_options":{"include_usage":true},"inferperf_fault":"error_event","stall_ms":20}"#;
        let got = parse_generation(Endpoint::Chat, chat, M).unwrap();
        let want = GenRequest {
            endpoint: Endpoint::Chat,
            prompt_tokens: 5,
            max_tokens: 5,
            stream: true,
            include_usage: true,
            error_event: true,
            stall: Duration::from_millis(20),
            reasoning_tokens: 0,
            media: vec![crate::llm::media::Media::ImageLink],
        };
        assert_eq!(got, want);
        let cases: [(&[u8], u64, u32); 4] = [
            (br#"{"model":"m","prompt":"a b c"}"#, 3, DEFAULT_MAX_TOKENS),
            (
                br#"{"model":"m","prompt":["a b","c"],"max_tokens":7}"#,
                3,
                7,
            ),
            (
                br#"{"model":"m","prompt":[1,2,3,4],"max_tokens":null}"#,
                4,
                16,
            ),
            (
                br#"{"model":"m","prompt":[[1,2],[3]],"max_tokens":1}"#,
                3,
                1,
            ),
        ];
        for (body, prompt, max) in cases {
            let got = parse_generation(Endpoint::Completions, body, M).unwrap();
            assert_eq!((got.prompt_tokens, got.max_tokens), (prompt, max));
            assert!(!got.stream && !got.include_usage && !got.error_event);
        }
    }

    #[test]
    fn generation_errors_name_the_field() {
        let cases: [(Endpoint, &[u8], u16, &str); 11] = [
            (Endpoint::Chat, b"{", 400, "not valid JSON"),
            (Endpoint::Chat, b"[1]", 400, "JSON object"),
            (
                Endpoint::Chat,
                br#"{"messages":[]}"#,
                400,
                "'model' is required",
            ),
            (
                Endpoint::Chat,
                br#"{"model":"x","messages":[]}"#,
                404,
                "'x' does not exist",
            ),
            (
                Endpoint::Chat,
                br#"{"model":"m","messages":[]}"#,
                400,
                "'messages'",
            ),
            (
                Endpoint::Chat,
                br#"{"model":"m","messages":[{"content":5}]}"#,
                400,
                "'content'",
            ),
            (
                Endpoint::Completions,
                br#"{"model":"m"}"#,
                400,
                "'prompt' is required",
            ),
            (
                Endpoint::Completions,
                br#"{"model":"m","prompt":"a","max_tokens":0}"#,
                400,
                "'max_tokens'",
            ),
            (
                Endpoint::Completions,
                br#"{"model":"m","prompt":"a","stream":"yes"}"#,
                400,
                "'stream'",
            ),
            (
                Endpoint::Completions,
                br#"{"model":"m","prompt":"a","stall_ms":-1}"#,
                400,
                "'stall_ms'",
            ),
            (
                Endpoint::Completions,
                br#"{"model":"m","prompt":"a","inferperf_fault":"x"}"#,
                400,
                "'inferperf_fault'",
            ),
        ];
        for (endpoint, body, status, needle) in cases {
            let err = parse_generation(endpoint, body, M).unwrap_err();
            assert_eq!(err.status, status, "{}", err.message);
            assert!(err.message.contains(needle), "{}", err.message);
        }
    }

    #[test]
    fn embeddings_inputs() {
        let one = parse_embeddings(br#"{"model":"m","input":"a b"}"#, M).unwrap();
        assert_eq!((one.inputs.len(), one.inputs[0].0), (1, 2));
        assert_eq!(one.dimensions, DEFAULT_EMBEDDING_DIMS);
        let many = parse_embeddings(
            br#"{"model":"m","input":["a b",[1,2,3],"a b"],"dimensions":3}"#,
            M,
        )
        .unwrap();
        assert_eq!(many.dimensions, 3);
        let counts: Vec<u64> = many.inputs.iter().map(|i| i.0).collect();
        assert_eq!(counts, vec![2, 3, 2]);
        assert_eq!(many.inputs[0].1, many.inputs[2].1);
        assert_ne!(many.inputs[0].1, many.inputs[1].1);
        let ids = parse_embeddings(br#"{"model":"m","input":[5,6]}"#, M).unwrap();
        assert_eq!(ids.inputs.len(), 1);
        for bad in [
            &br#"{"model":"m"}"#[..],
            br#"{"model":"m","input":[]}"#,
            br#"{"model":"m","input":{}}"#,
            br#"{"model":"m","input":"a","dimensions":0}"#,
        ] {
            assert_eq!(parse_embeddings(bad, M).unwrap_err().status, 400);
        }
    }

    #[test]
    fn error_body_layout() {
        let err = ApiError::invalid(Some("prompt"), "bad");
        let want = json!({"error": {"message": "bad", "type": "invalid_request_error",
            "param": "prompt", "code": 400}});
        assert_eq!(err.to_json(), want);
    }
}
