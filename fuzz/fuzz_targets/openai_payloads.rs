//! An `--input-data` file of OpenAI `payload` entries (with session ids, delays and
//! timestamps): entries or an error, never a panic.
//! The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::inputs::openai::fuzz_payloads(data);
});
