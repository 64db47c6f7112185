//! `--enable-mpi`: several inferperf processes cooperating through MPI.
//!
//! Two modes: perf_analyzer's multi-model mode (each rank profiles its own model and writes its
//! own report; a level is done only when every rank is stable) and scale-out (one model, the
//! load split across ranks, windows aligned, one merged report from rank 0).
//!
//! Everything above the bindings talks to [`Collective`], so the coordination logic is tested
//! with an in-process implementation and runs unchanged over libmpi.
//!
//! The libmpi bindings (`ffi`, `world`) come with the `mpi` feature; without it the
//! coordination logic stays and `--enable-mpi` is refused with a usage error.

pub mod codec;
pub mod coord;
#[cfg(feature = "mpi")]
pub mod ffi;
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod local;
mod peers;
pub mod run;
#[cfg(feature = "mpi")]
pub mod world;

pub use run::rank_config;

use std::time::Duration;

use crate::error::Result;

/// The collective operations the coordination needs. Every call is made by every rank in the
/// same order; none blocks forever: a rank that died or stopped answering makes the call fail
/// once `timeout` has passed (or at once when the transport notices).
pub trait Collective {
    /// This process's rank, 0-based.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Every rank waits until all have arrived.
    fn barrier(&self, timeout: Duration) -> Result<()>;
    /// `root`'s bytes to every rank; `data` may have a different length on each rank before the
    /// call and holds root's bytes on every rank after it.
    fn broadcast(&self, root: usize, data: &mut Vec<u8>, timeout: Duration) -> Result<()>;
    /// Every rank's bytes (any length, zero included) to `root`: on root, one entry per rank in
    /// rank order; `None` on the other ranks.
    fn gather(&self, root: usize, data: &[u8], timeout: Duration) -> Result<Option<Vec<Vec<u8>>>>;
    /// Ends the session cleanly (MPI_Finalize); only called when no collective failed.
    fn finalize(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}
