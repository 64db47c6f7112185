//! What inferperf's measuring client and its reference server both speak: the protobuf
//! messages of `proto/` (built by `build.rs`), the HTTP/1, HTTP/2 + gRPC, SSE and Prometheus
//! text codecs, tensor types, and the foundations under them. Depends on neither side; both
//! depend on it.
//!
//! Layers, top to bottom; a module imports only modules below it: `tfserving` (TF Serving
//! messages and dtype mapping); `protocol` (HTTP/1, HTTP/2 + gRPC, SSE, Prometheus text);
//! `tensor` (datatypes, shapes, BYTES framing) and `cuda_ffi` (the CUDA runtime loader); then
//! the foundation: `error`, `fail`, `clock`, `timerfd`; `text`.

pub mod clock;
pub mod cuda_ffi;
pub mod error;
pub mod fail;
pub mod protocol;
pub mod tensor;
pub mod text;
pub mod tfserving;
pub mod timerfd;

#[cfg(any(test, feature = "test-support"))]
pub mod layers;

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
