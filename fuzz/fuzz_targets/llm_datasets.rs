//! The `profile` dataset readers (ShareGPT JSON, AIPerf's single_turn, multi_turn,
//! random_pool and mooncake_trace JSONL) and the trace schedule built from them: records
//! or an error, never a panic.
//! The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::llm::dataset::fuzz_datasets(data);
});
