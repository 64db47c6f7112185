//! Wire protocols spoken by the load generator: hand-rolled HTTP/1.1 client framing on
//! `httparse` (this module), later HTTP/2 + gRPC.

pub mod grpc;
pub mod http1;
