//! LLM metrics: from per-request records ([`record::LlmRequest`]) to the statistics GenAI-Perf
//! and AIPerf report, with our definitions written out.

pub mod record;

pub use record::{Chunk, LlmRequest, RequestError, Usage};
