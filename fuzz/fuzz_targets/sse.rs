//! A `text/event-stream` body as an LLM server might stream it, decoded whole, byte by byte
//! and in data-derived reads: the events must agree, buffers stay under the limit, no panic.
//! The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::protocol::sse::fuzz_sse(data);
});
