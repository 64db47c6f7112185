//! `profile --endpoint-type completions`: OpenAI `v1/completions`.

use super::registry::{BeforeRun, Body, Caps, Endpoint, Kind};

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
    service: None,
    endpoint: Some(Endpoint {
        about: "OpenAI `v1/completions`.",
        path: "v1/completions",
        stream_path: None,
        body: Body::Completions,
        needs_done: true,
        generates: true,
        family: "openai",
        default_url: "localhost:8000",
    }),
};
