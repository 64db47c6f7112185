//! Service kinds: each turns an input step into request bytes and a response into the values
//! the reports need. Triton's KServe v2 over HTTP; over gRPC the messages are ready
//! (`triton_grpc`) and the session that carries them is next.

pub mod triton_grpc;
pub mod triton_http;
mod triton_http_setup;
mod triton_http_values;
