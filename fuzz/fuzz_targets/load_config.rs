//! Bytes as the `config` of a model load on the reference server (Triton's config override),
//! for every model: settings or a refusal, never a panic; loaded settings show as a config
//! that reads back the same. The seed corpus is also run by `tests/it/fuzz_corpus.rs` on
//! stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf_server::fuzz_load_config(data);
});
