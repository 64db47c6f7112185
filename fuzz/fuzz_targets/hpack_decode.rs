//! HPACK header blocks as a server might send them (the input, and its halves) on one
//! connection's decoder, checked against a decoder that never replays repeated blocks, and once
//! with a small table. The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::protocol::grpc::hpack::fuzz_hpack(data);
});
