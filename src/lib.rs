//! inferperf: a load generator and profiler for inference servers, a drop-in for Triton's
//! perf_analyzer.
//!
//! This package is the `inferperf` command: [`app`] wires the measuring client
//! (`inferperf-client`, re-exported here whole) and, with the `server` feature, the reference
//! server (`inferperf-server`, as [`server`]).

pub use inferperf_client::*;

pub mod app;
pub mod completions;
#[cfg(feature = "server")]
mod demo;

#[cfg(feature = "server")]
pub use inferperf_server as server;
