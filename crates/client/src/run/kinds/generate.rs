//! `profile --endpoint-type generate`: Triton HTTP `v2/models/<m>/generate_stream` (SSE),
//! or `generate` without `--streaming`.

use super::registry::{BeforeRun, Body, Caps, Endpoint, Kind};

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
    service: None,
    endpoint: Some(Endpoint {
        about: "Triton HTTP `v2/models/<m>/generate_stream` (SSE), or `generate` without `--streaming`.",
        path: "v2/models/{model}/generate",
        stream_path: Some("v2/models/{model}/generate_stream"),
        body: Body::TextInput,
        needs_done: false,
        generates: true,
        family: "openai",
        default_url: "localhost:8000",
    }),
};
