//! A metrics page as `profile --server-metrics-url` reads it: the recognised Triton, vLLM and
//! DCGM names picked out, kept and reported (console, JSON, HTML) within their bounds, no
//! panic. The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::llm::telemetry::fuzz_telemetry(data);
});
