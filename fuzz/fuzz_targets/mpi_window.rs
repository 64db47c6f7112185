//! One rank's per-window message as rank 0 decodes it in an MPI scale-out run (statistics,
//! then records and bodies): any bytes give a value or an error, never a panic.
//! The seed corpus is also run by `tests/it/fuzz_corpus.rs` on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf::mpi::codec::fuzz_window_message(data);
});
