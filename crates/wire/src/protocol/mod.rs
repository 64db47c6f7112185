//! Wire protocols: hand-rolled HTTP/1.1 client framing on `httparse`, HTTP/2 + gRPC codecs
//! and the prost messages, the SSE stream decoder and the Prometheus text parser.

pub mod grpc;
pub mod http1;
pub mod prometheus;
pub mod sse;
