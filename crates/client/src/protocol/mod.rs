//! Wire protocols spoken by the load generator: hand-rolled HTTP/1.1 client framing on
//! `httparse`, HTTP/2 + gRPC codecs, and blocking HTTP/1 and gRPC clients for setup calls.

pub mod capi;
pub mod grpc;
pub mod http1;
pub mod prometheus;
pub mod sse;
