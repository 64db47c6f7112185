//! `profile --endpoint-type embeddings`: OpenAI `v1/embeddings`.

use serde_json::{json, Value};

use super::codec::{self, Prompt};
use crate::report::llm::ReportKind;
use super::Service;
use super::registry::{BeforeRun, Caps, Endpoint, Kind};

/// `--endpoint-type embeddings` in the registry.
pub const KIND: Kind = Kind {
    name: "embeddings",
    service_kind: None,
    endpoint_type: Some("embeddings"),
    caps: Caps {
        grpc: false,
        streaming: false,
        shared_memory: None,
        before_run: BeforeRun::Nothing,
    },
    service: &Embeddings,
    endpoint: Some(Endpoint {
        about: "OpenAI `v1/embeddings`.",
        path: "v1/embeddings",
        stream_path: None,
        generates: false,
        family: "openai",
        default_url: "localhost:8000",
    }),
};

/// `input`: a list of texts.
pub struct Embeddings;

impl Service for Embeddings {
    fn body(&self, p: &Prompt<'_>) -> Value {
        let mut obj = codec::with_model(p.model);
        obj.insert("input".into(), json!([p.text]));
        codec::finish(obj, p)
    }

    fn report(&self) -> ReportKind {
        ReportKind::Embeddings
    }

    /// Embeddings come as one body; a stream of them has no `[DONE]` to wait for.
    fn needs_done(&self) -> bool {
        false
    }

    fn takes_batches(&self) -> bool {
        true
    }

    /// The batch's texts are the `input` list.
    fn put_batch(&self, body: &mut Value, texts: &[&str]) {
        body["input"] = json!(texts);
    }
}
