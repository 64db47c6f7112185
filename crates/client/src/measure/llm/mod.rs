//! LLM metrics: from per-request records ([`record::LlmRequest`]) to the statistics GenAI-Perf
//! and AIPerf report, with inferperf's definitions written out.

pub mod checks;
pub mod definitions;
pub mod goodput;
pub mod http;
pub mod media;
pub mod metrics;
pub mod record;
pub mod request;
pub mod slices;
pub mod stats;
pub mod sweeps;

pub use metrics::{compute, LlmMetrics, MetricOptions};
pub use record::{copy_receive_timing, Chunk, LlmRequest, RequestError, Usage};
pub use request::RequestMetrics;
pub use stats::Stats;
