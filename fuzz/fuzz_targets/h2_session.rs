//! Bytes a server might send on one HTTP/2 connection, fed to a client session with three
//! streams open. The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::protocol::grpc::session::fuzz_session(data);
});
