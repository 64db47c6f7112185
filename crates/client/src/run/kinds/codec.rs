//! What a kind's `profile` methods ([`super::Service::body`] to
//! [`super::Service::sends_json`]) take: one [`Prompt`] with the run's settings, where an
//! HTTP request goes ([`Post`]), what an endpoint's requests are made of ([`Input`]); and
//! the helpers for the fields several OpenAI-style bodies share.

use serde_json::{json, Map, Value};

use crate::service::kserve_llm::LlmBackend;

/// One prompt to encode, with the run's settings that shape a body.
#[derive(Clone, Copy, Debug)]
pub struct Prompt<'a> {
    /// The model the request goes to.
    pub model: &'a str,
    /// The prompt text.
    pub text: &'a str,
    /// Output tokens to ask for (`None`: the server decides).
    pub osl: Option<u64>,
    /// Ask for exactly `osl` tokens (`--output-tokens-mean-deterministic`).
    pub deterministic: bool,
    /// `--streaming`.
    pub streaming: bool,
    /// `--extra-inputs`, in the order given.
    pub extra: &'a [(String, Value)],
    /// `--backend`: the Triton backend whose tensors a tensor request carries.
    pub backend: LlmBackend,
}

/// Where an HTTP request goes and what it carries besides its body.
#[derive(Clone, Copy, Debug)]
pub struct Post<'a> {
    /// The `host` header's value.
    pub address: &'a str,
    /// The request path.
    pub path: &'a str,
    /// `-H` headers.
    pub headers: &'a [(String, String)],
}

/// What a `profile` endpoint's requests are made of, beyond one text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// One text per request.
    Text,
    /// Role-tagged messages: system prompts, images, audio, per-user context and multi-turn
    /// history apply.
    Messages,
    /// A query with its passages (a rankings dataset has `queries` and `passages`).
    QueryPassages,
}

/// A body object holding `model`.
pub fn with_model(model: &str) -> Map<String, Value> {
    let mut obj = Map::new();
    obj.insert("model".into(), json!(model));
    obj
}

/// Adds the fields of a text-generation request: `stream` (and, for the OpenAI APIs,
/// `stream_options` asking for the closing usage chunk, as AIPerf 0.13 does for every
/// streaming chat/completions run), `max_tokens`, and for deterministic lengths
/// `min_tokens` and `ignore_eos`.
pub fn add_generation(obj: &mut Map<String, Value>, prompt: &Prompt<'_>, usage_chunk: bool) {
    if prompt.streaming {
        obj.insert("stream".into(), json!(true));
        if usage_chunk {
            obj.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    if let Some(n) = prompt.osl {
        obj.insert("max_tokens".into(), json!(n));
        if prompt.deterministic {
            obj.insert("min_tokens".into(), json!(n));
            obj.insert("ignore_eos".into(), json!(true));
        }
    }
}

/// The body with `--extra-inputs` added (each replaces a field of the same name).
pub fn finish(mut obj: Map<String, Value>, prompt: &Prompt<'_>) -> Value {
    for (k, v) in prompt.extra {
        obj.insert(k.clone(), v.clone());
    }
    Value::Object(obj)
}
