//! Service kinds: each turns an input step into request bytes and a response into the values
//! the reports need. Only Triton's KServe v2 over HTTP so far.

pub mod triton_http;
mod triton_http_setup;
mod triton_http_values;
