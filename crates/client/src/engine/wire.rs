//! What the load connections speak: HTTP/1.1 with whole pre-encoded requests, or gRPC over
//! HTTP/2 with one pre-encoded HEADERS block and length-prefixed messages.

/// The protocol of a run's load connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wire {
    /// `EngineSpec::requests` are complete HTTP/1.1 requests.
    Http1,
    /// `EngineSpec::requests` are length-prefixed `ModelInferRequest` messages.
    Grpc(GrpcWire),
    /// Triton C API, in process: `EngineSpec::requests` only name the steps; the inputs are
    /// in the wire's prepared steps.
    Capi(super::capi_pool::CapiWire),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcWire {
    /// HPACK block of every call's HEADERS frame (`ModelInfer` or `ModelStreamInfer`).
    pub headers: Vec<u8>,
    /// Requests go over long-lived `ModelStreamInfer` streams, one per concurrency slot.
    pub streaming: bool,
    /// The model is decoupled: a request is complete at the response flagged
    /// `triton_final_response`, and may have any number of responses before it.
    pub decoupled: bool,
}
