//! `profile --endpoint-type embeddings`: OpenAI `v1/embeddings`.

use super::registry::{BeforeRun, Body, Caps, Endpoint, Kind};

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
    service: None,
    endpoint: Some(Endpoint {
        about: "OpenAI `v1/embeddings`.",
        path: "v1/embeddings",
        stream_path: None,
        body: Body::Embeddings,
        needs_done: false,
        generates: false,
        family: "openai",
        default_url: "localhost:8000",
    }),
};
