//! Bytes a server might send on one HTTP/1.1 connection. The seed corpus is also run by
//! `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::protocol::http1::fuzz_response(data);
});
