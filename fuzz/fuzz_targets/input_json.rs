//! Bytes of an `--input-data` JSON file, read against a fixed model (every value form),
//! then batched, and the same bytes as a response body for output validation. Any content
//! must give data or an error, never a panic. The seed corpus is also run by
//! `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::inputs::fuzz_input_json(data);
});
