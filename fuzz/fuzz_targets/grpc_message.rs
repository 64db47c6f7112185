//! The DATA bytes of one gRPC response stream (length-prefixed messages). The seed corpus is
//! also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::protocol::grpc::message::fuzz_grpc_messages(data);
});
