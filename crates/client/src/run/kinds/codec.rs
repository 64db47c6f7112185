//! The interface of a `profile` endpoint: how one prompt becomes a request body and the
//! bytes on the wire, how a reply is decoded into its output, what input the endpoint takes
//! and which report it gets. Each kind file with a `profile` endpoint implements
//! [`RequestCodec`]; `profile` asks it instead of matching on the endpoint type. The helpers
//! here hold the fields several OpenAI-style bodies share.

use serde_json::{json, Map, Value};

use super::reply::{self, Parsed, Reply};
use crate::engine::wire::Wire;
use crate::error::Result;
use crate::report::llm::ReportKind;
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

/// A `profile` endpoint: encodes requests, decodes replies and says what it takes. Only
/// [`body`](Self::body) is required; the rest default to an HTTP/1.1 JSON endpoint of one
/// text per request, replying in the OpenAI layouts, with the text-generation report.
pub trait RequestCodec: Sync {
    /// The request body for one prompt, as `inputs.json` records it (for an endpoint that
    /// sends no JSON, the JSON view of what it sends).
    fn body(&self, prompt: &Prompt<'_>) -> Value;

    /// The bytes of one request: `payload` is [`body`](Self::body)'s JSON after any
    /// additions (media, system messages, verbatim payloads). By default an HTTP/1.1 POST.
    fn encode(&self, _prompt: &Prompt<'_>, payload: &[u8], post: &Post<'_>) -> Result<Vec<u8>> {
        Ok(crate::service::openai::encode_request(
            post.address,
            post.path,
            post.headers,
            payload,
        ))
    }

    /// One reply's output text, usage and error. By default the OpenAI-style reading
    /// ([`reply::decode_openai`]): SSE events, or the whole JSON body of a successful reply,
    /// in the chat, completions and Triton generate layouts.
    fn decode(&self, reply: &Reply<'_>) -> Parsed {
        reply::decode_openai(reply)
    }

    /// A streamed reply is complete only at `data: [DONE]` or a finish reason (the OpenAI
    /// APIs); one that stops before was cut off. A kind whose stream just ends says false.
    fn needs_done(&self) -> bool {
        true
    }

    /// The engine's wire for these requests (by default HTTP/1.1).
    fn wire(&self, _authority: &str, _headers: &[(String, String)]) -> Wire {
        Wire::Http1
    }

    /// What the requests are made of.
    fn input(&self) -> Input {
        Input::Text
    }

    /// The tables and exports the run gets.
    fn report(&self) -> ReportKind {
        ReportKind::Llm
    }

    /// A request can carry several texts (`--batch-size-text`).
    fn takes_batches(&self) -> bool {
        false
    }

    /// Puts the texts of a batch (the request's own first) into `body`; called only when
    /// [`takes_batches`](Self::takes_batches) and the batch has more than one text.
    fn put_batch(&self, _body: &mut Value, _texts: &[&str]) {}

    /// The body of one query with its own passages (a rankings dataset: GenAI-Perf's
    /// rankings folder or synthetic `queries,passages`); `None`: the endpoint has no such
    /// body, and the query and passages are sent as one text.
    fn query_body(
        &self,
        _model: &str,
        _query: &str,
        _passages: &[String],
        _extra: &[(String, Value)],
    ) -> Option<Value> {
        None
    }

    /// The requests depend on `--backend` (the artifact folder names it).
    fn takes_backend(&self) -> bool {
        false
    }

    /// The requests carry a JSON body, so input-file fields can go into it.
    fn sends_json(&self) -> bool {
        true
    }
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
