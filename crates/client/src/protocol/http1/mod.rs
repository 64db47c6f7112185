//! HTTP/1.1: the request writer and response parser of `inferperf-wire`, plus a blocking
//! client for setup calls.

pub use inferperf_wire::protocol::http1::*;

pub mod blocking;
