//! `profile --endpoint-type rankings`: `v1/ranking` (NIM-style query + passages).

use super::registry::{BeforeRun, Body, Caps, Endpoint, Kind};

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
    service: None,
    endpoint: Some(Endpoint {
        about: "`v1/ranking` (NIM-style query + passages).",
        path: "v1/ranking",
        stream_path: None,
        body: Body::Rankings,
        needs_done: false,
        generates: false,
        family: "openai",
        default_url: "localhost:8000",
    }),
};
