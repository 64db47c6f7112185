//! Bytes of one gRPC reply message, read by the in-place checks the load engine applies to
//! every `ModelInferResponse`, `ModelStreamInferResponse` and TF Serving reply. The seed
//! corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::service::reply_check::fuzz_kserve_grpc(data);
});
