//! inferperf: a load generator and profiler for inference servers, a drop-in for Triton's
//! perf_analyzer.
//!
//! Data flows one way: `cli` -> `Config` -> `engine` (workers speaking a `protocol`) ->
//! `measure` (records to statistics) -> `report` (plain data to text). `llm` is the LLM
//! benchmark (`inferperf profile`) on the same engine.
//!
//! Layers, top to bottom; a folder imports only folders below it: `cli`; `run`, `llm` (a
//! run mode) and `mpi` (multi-rank runs); `shm`; `engine`; `report`; `inputs`; `service`
//! (one module per service kind); `protocol` (HTTP/1, HTTP/2 + gRPC, SSE, Prometheus text,
//! the C API); `transport` (TCP and TLS connections); then the foundation: `measure`,
//! `tensor`, `text`, `config`, `clock`, `error`, `random`, `signal`, `timerfd`.

pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod error;
pub mod inputs;
#[cfg(feature = "llm")]
pub mod llm;
pub mod measure;
pub mod mpi;
pub mod protocol;
pub mod random;
pub mod report;
pub mod run;
pub mod service;
pub mod shm;
pub mod signal;
pub mod tensor;
pub mod text;
pub mod timerfd;
pub mod transport;

/// The version string printed by `--version` and written into the profile export.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
