//! inferperf: a load generator and profiler for inference servers, a drop-in for Triton's
//! perf_analyzer.
//!
//! Data flows one way: `cli` -> `Config` -> `engine` (workers speaking a `protocol`) ->
//! `measure` (records to statistics) -> `report` (plain data to text). `llm` is the LLM
//! benchmark (`inferperf profile`) on the same engine.
//!
//! Layers, top to bottom; a folder imports only folders below it: `cli`; `run`, `llm` (a
//! run mode) and `mpi` (multi-rank runs); `shm`; `engine`; `report`; `inputs`; `service`
//! (one module per service kind); `protocol` (the wire codecs under their usual paths, the
//! blocking setup clients, the C API); `transport` (TCP and TLS connections); then the
//! foundation: `measure`, `config`, `random`, `signal`; under everything the modules of the
//! wire crate (inferperf-wire, shared with the server) re-exported here: `tensor`, `text`,
//! `clock`, `error`, `timerfd`.
//!
//! The wire crate holds what the client and the server both speak (protocol codecs, protobuf
//! messages, tensor types and the foundations under them) and depends on neither.

pub mod cli;
pub mod config;
pub mod engine;
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
pub mod transport;

pub use inferperf_wire::{clock, error, tensor, text, timerfd};

/// The version string printed by `--version` and written into the profile export.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
