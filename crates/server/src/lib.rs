//! The reference server, `inferperf serve`: KServe v2 (Triton-compatible) HTTP/1.1 on mio.
//!
//! Each server thread owns a `mio::Poll` and a clone of the one listening socket, so there is
//! no accept thread and no hand-off: a connection lives on the thread that accepted it, and
//! with the default single thread (the benchmark setup) that is exactly one pinned loop. With
//! several threads every loop sees the accept edge and the kernel hands each connection to one.
//!
//! Layers, top to bottom; a module imports only modules below it, or beside it without a
//! circle: start-up `cli` (serve_main); `fault` (serve --fault MODE: a separate,
//! deliberately faulty server for testing clients, on the listener set-up below it); `serve`
//! (config, listeners, threads, the handle); the front ends `worker` (one thread's mio loop)
//! over `conn` (reads, held answers, writes), `grpc` (gRPC, TF Serving and the HTTPS front on
//! a tokio runtime thread) and `tls` (PEM loading, handshakes); dispatch: `routes` (HTTP URL
//! routing, health, metadata, statistics, trace settings); the endpoints `infer` (KServe v2
//! infer requests) and `torchserve`; `execute` (running a model or an ensemble); `state`
//! (what every thread shares); `metrics` (Prometheus pages of two fake GPUs and the fake LLM,
//! in Triton, vLLM or DCGM style, the style kept in the shared state); stores: `llm` (the
//! fake LLM behind the OpenAI endpoints and Triton's generate extension), `repository` (load
//! state and loaded configs), `shm` (system and CUDA shared memory regions, with their HTTP
//! and gRPC calls); `load_config` (a load's config override), `reply` (what an endpoint hands the
//! connection), `stats`; `models` (definitions and compute), `instances` (when delayed
//! executions run), `http` (request parsing, limits, response framing); the foundation:
//! `settings` (what a load may set), `sequence`, `trace`, `request_log`, `json_data`, `delay`,
//! `limits` (what a client may send: sizes, connections, time), `places` (connection places,
//! and taking them back from idle connections).
//!
//! The protocol codecs, protobuf messages and tensor types come from `inferperf-wire`; the
//! measuring client is no dependency of the server (its tests use it to cross-check).

mod cli;
mod conn;
mod delay;
mod execute;
pub mod fault;
mod grpc;
mod http;
mod infer;
mod instances;
mod json_data;
mod limits;
mod llm;
mod load_config;
mod metrics;
mod models;
mod places;
mod reply;
mod repository;
mod request_log;
mod routes;
pub mod sequence;
mod serve;
mod settings;
mod shm;
mod state;
mod stats;
mod tls;
mod torchserve;
mod trace;
mod worker;

#[cfg(test)]
mod test_certs;
#[cfg(test)]
mod test_client;

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;

pub use cli::{serve_command, serve_main};
pub use delay::{parse_delay, parse_delay_value, Delay};
pub use limits::Limits;
pub use llm::log::TOKEN_LOG_REQUESTS;
pub use llm::media::{fuzz_media, Media, Wav};
pub use llm::state::{Busy, OpenAiConfig, DEFAULT_OPENAI_MODEL};
pub use load_config::fuzz_load_config;
pub use metrics::{LlmCounts, MetricsStyle, KV_CAPACITY};
pub use repository::ControlMode;
pub use request_log::ARRIVALS_KEPT;
pub use serve::{model_names, start, ServeConfig, ServerHandle};
pub use stats::{Counters, ModelCounters};
pub use tls::TlsFiles;
pub use trace::{TraceSettings, TraceUpdate};
