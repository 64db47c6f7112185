//! gRPC: the codecs, `Session` and prost messages of `inferperf-wire`, plus a blocking unary
//! client on the same `Session` for setup calls.

pub use inferperf_wire::protocol::grpc::*;

pub mod blocking;
