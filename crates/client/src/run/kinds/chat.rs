//! `profile --endpoint-type chat`: OpenAI `v1/chat/completions`.

use super::registry::{BeforeRun, Body, Caps, Endpoint, Kind};

/// `--endpoint-type chat` in the registry.
pub const KIND: Kind = Kind {
    name: "chat",
    service_kind: None,
    endpoint_type: Some("chat"),
    caps: Caps {
        grpc: false,
        streaming: true,
        shared_memory: None,
        before_run: BeforeRun::Nothing,
    },
    service: None,
    endpoint: Some(Endpoint {
        about: "OpenAI `v1/chat/completions`.",
        path: "v1/chat/completions",
        stream_path: None,
        body: Body::Chat,
        needs_done: true,
        generates: true,
        family: "openai",
        default_url: "localhost:8000",
    }),
};
