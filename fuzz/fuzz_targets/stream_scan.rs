//! Bytes of one `ModelStreamInferResponse` as a server might send them, read by the
//! allocation-free scanner the load engine uses (checked against prost where prost accepts
//! the bytes). The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::service::stream_scan::fuzz_stream_scan(data);
});
