//! `profile --endpoint-type kserve`: Triton gRPC `ModelStreamInfer` with `text_input` /
//! `max_tokens` / `stream` tensors (TensorRT-LLM and vLLM backends).

use super::registry::{BeforeRun, Body, Caps, Endpoint, Kind};

/// `--endpoint-type kserve` in the registry.
pub const KIND: Kind = Kind {
    name: "kserve_llm",
    service_kind: None,
    endpoint_type: Some("kserve"),
    caps: Caps {
        grpc: true,
        streaming: true,
        shared_memory: None,
        before_run: BeforeRun::Nothing,
    },
    service: None,
    endpoint: Some(Endpoint {
        about: "Triton gRPC `ModelStreamInfer` with `text_input` / `max_tokens` / `stream` tensors (TensorRT-LLM and vLLM backends).",
        path: "",
        stream_path: None,
        body: Body::LlmTensors,
        needs_done: false,
        generates: true,
        family: "triton",
        default_url: "localhost:8001",
    }),
};
