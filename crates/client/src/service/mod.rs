//! Service kinds: each turns an input step into request bytes and a response into the values
//! the reports need. Triton's KServe v2 over HTTP (`triton_http`) and gRPC (`triton_grpc`,
//! plus `stream_scan` for reading stream responses on the hot path).

pub mod dynamic_grpc;
pub mod kserve_llm;
pub mod openai;
mod pb_wire;
pub mod reply_check;
mod reply_grpc;
mod reply_http;
mod reply_json;
mod reply_values;
pub mod seq_patch;
pub mod stream_scan;
pub mod tfserving;
pub mod torchserve;
pub mod triton_grpc;
pub mod triton_http;
mod triton_http_setup;
mod triton_http_values;
