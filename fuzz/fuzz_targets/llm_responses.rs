//! What `inferperf profile` decodes: whole JSON responses, framed SSE events, Triton stream
//! responses and `--input-file` JSONL; results or errors, never a panic.
//! The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::llm::fuzz_llm_responses(data);
});
