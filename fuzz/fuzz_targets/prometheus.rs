//! A Prometheus text exposition as a metrics endpoint might serve it: the strict and the
//! lossy parse must agree, every sample read must be well formed, no panic.
//! The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::protocol::prometheus::fuzz_prometheus(data);
});
