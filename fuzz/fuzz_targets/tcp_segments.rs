//! Packets as the packet socket hands them over (IP header on, cut to the headers), decoded
//! and fed to the segment table that times streamed chunks, with range questions between
//! them. The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::transport::packet_stamps::fuzz_packets(data);
});
