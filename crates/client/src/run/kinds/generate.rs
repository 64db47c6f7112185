//! `profile --endpoint-type generate`: Triton HTTP `v2/models/<m>/generate_stream` (SSE),
//! or `generate` without `--streaming`.

use serde_json::{json, Value};

use super::codec::{self, Prompt};
use super::Service;
use super::registry::{BeforeRun, Caps, Endpoint, Kind};

/// `--endpoint-type generate` in the registry.
pub const KIND: Kind = Kind {
    name: "generate",
    service_kind: None,
    endpoint_type: Some("generate"),
    caps: Caps {
        grpc: false,
        streaming: true,
        shared_memory: None,
        before_run: BeforeRun::Nothing,
    },
    service: &TextInput,
    endpoint: Some(Endpoint {
        about: "Triton HTTP `v2/models/<m>/generate_stream` (SSE), or `generate` without `--streaming`.",
        path: "v2/models/{model}/generate",
        stream_path: Some("v2/models/{model}/generate_stream"),
        generates: true,
        family: "openai",
        default_url: "localhost:8000",
    }),
};

/// `text_input` (the model is in the path).
pub struct TextInput;

impl Service for TextInput {
    fn body(&self, p: &Prompt<'_>) -> Value {
        let mut obj = serde_json::Map::new();
        obj.insert("text_input".into(), json!(p.text));
        codec::add_generation(&mut obj, p, false);
        codec::finish(obj, p)
    }

    /// Triton's generate stream just ends, with no `[DONE]`.
    fn needs_done(&self) -> bool {
        false
    }
}
