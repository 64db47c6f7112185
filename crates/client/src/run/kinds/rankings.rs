//! `profile --endpoint-type rankings`: `v1/ranking` (NIM-style query + passages).

use serde_json::{json, Map, Value};

use super::codec::{self, Input, Prompt};
use crate::report::llm::ReportKind;
use super::Service;
use super::registry::{BeforeRun, Caps, Endpoint, Kind};

/// `--endpoint-type rankings` in the registry.
pub const KIND: Kind = Kind {
    name: "rankings",
    service_kind: None,
    endpoint_type: Some("rankings"),
    caps: Caps {
        grpc: false,
        streaming: false,
        shared_memory: None,
        before_run: BeforeRun::Nothing,
    },
    service: &Rankings,
    endpoint: Some(Endpoint {
        about: "`v1/ranking` (NIM-style query + passages).",
        path: "v1/ranking",
        stream_path: None,
        generates: false,
        family: "openai",
        default_url: "localhost:8000",
    }),
};

/// A `query` and its `passages`, split from each text at its first sentence end.
pub struct Rankings;

impl Service for Rankings {
    fn body(&self, p: &Prompt<'_>) -> Value {
        let mut obj = codec::with_model(p.model);
        let (query, passage) = split_query(p.text);
        obj.insert("query".into(), json!({"text": query}));
        obj.insert("passages".into(), json!([{"text": passage}]));
        codec::finish(obj, p)
    }

    fn input(&self) -> Input {
        Input::QueryPassages
    }

    /// Rankings come as one body; a stream of them has no `[DONE]` to wait for.
    fn needs_done(&self) -> bool {
        false
    }

    fn report(&self) -> ReportKind {
        ReportKind::Rankings
    }

    fn takes_batches(&self) -> bool {
        true
    }

    /// The passages of the batch's texts follow the request's own query.
    fn put_batch(&self, body: &mut Value, texts: &[&str]) {
        let passages: Vec<Value> = texts
            .iter()
            .map(|t| json!({"text": split_query(t).1}))
            .collect();
        body["passages"] = Value::Array(passages);
    }

    /// GenAI-Perf's rankings body: `model`, `query: {"text": Q}` and
    /// `passages: [{"text": P}, ...]`, the extra inputs added; with `--extra-inputs
    /// rankings:tei` (Hugging Face Text Embeddings Inference) `{"query": Q, "texts": [P, ...]}`
    /// instead, that input itself left out.
    fn query_body(
        &self,
        model: &str,
        query: &str,
        passages: &[String],
        extra: &[(String, Value)],
    ) -> Option<Value> {
        let is_tei = |(k, v): &(String, Value)| k == "rankings" && v.as_str() == Some("tei");
        let tei = extra.iter().any(is_tei);
        let mut body = Map::new();
        if tei {
            body.insert("query".into(), json!(query));
            body.insert("texts".into(), json!(passages));
        } else {
            let list: Vec<Value> = passages.iter().map(|p| json!({"text": p})).collect();
            body.insert("query".into(), json!({"text": query}));
            body.insert("passages".into(), Value::Array(list));
            body.insert("model".into(), json!(model));
        }
        for pair in extra.iter().filter(|pair| !is_tei(pair)) {
            body.insert(pair.0.clone(), pair.1.clone());
        }
        Some(Value::Object(body))
    }
}

/// The first sentence is the query, the rest the passage.
fn split_query(text: &str) -> (&str, &str) {
    match text.find(['.', '?', '!']) {
        Some(i) if i + 1 < text.len() => (&text[..=i], text[i + 1..].trim_start()),
        _ => (text, text),
    }
}
