//! Bytes of one KServe v2 HTTP infer reply body (and, from the first byte, a header
//! length), read by the in-place reply check the load engine applies to every 2xx reply.
//! The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::service::reply_check::fuzz_kserve_http(data);
});
