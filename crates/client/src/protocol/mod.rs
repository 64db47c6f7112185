//! Wire protocols spoken by the load generator. The codecs live in `inferperf-wire` and are
//! re-exported here under their usual paths; the client adds blocking HTTP/1 and gRPC clients
//! for setup calls (over its `transport`) and the Triton C API.

pub use inferperf_wire::protocol::{prometheus, sse};

pub mod capi;
pub mod grpc;
pub mod http1;
