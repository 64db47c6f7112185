//! `profile --endpoint-type completions`: OpenAI `v1/completions`.

use serde_json::{json, Value};

use super::codec::{self, Prompt};
use super::Service;
use super::registry::{BeforeRun, Caps, Endpoint, Kind};

/// `--endpoint-type completions` in the registry.
pub const KIND: Kind = Kind {
    name: "completions",
    service_kind: None,
    endpoint_type: Some("completions"),
    caps: Caps {
        grpc: false,
        streaming: true,
        shared_memory: None,
        before_run: BeforeRun::Nothing,
    },
    service: &Completions,
    endpoint: Some(Endpoint {
        about: "OpenAI `v1/completions`.",
        path: "v1/completions",
        stream_path: None,
        generates: true,
        family: "openai",
        default_url: "localhost:8000",
    }),
};

/// `prompt`: the text.
pub struct Completions;

impl Service for Completions {
    fn body(&self, p: &Prompt<'_>) -> Value {
        let mut obj = codec::with_model(p.model);
        obj.insert("prompt".into(), json!(p.text));
        codec::add_generation(&mut obj, p, true);
        codec::finish(obj, p)
    }
}
