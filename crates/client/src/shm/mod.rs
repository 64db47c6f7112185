//! Shared memory tensor transport (`--shared-memory system|cuda`): POSIX regions,
//! CUDA device regions, the client's registered regions of a run, and requests that
//! reference them.
//!
//! Layer: above `engine` (it stages the engine's request variants and output slots) and
//! below `run` (which hands it the server and model as a `plan::ShmTarget`).

pub mod client;
pub mod cuda;
pub use inferperf_wire::cuda_ffi;
pub mod encode;
pub mod plan;
pub mod system;
pub mod validate;

use crate::config::Config;
use crate::error::{Error, Result};

/// The API a service kind registers shared memory regions through and references them in
/// requests with (a kind's `shared_memory` capability).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmApi {
    /// Triton's shared memory extension over HTTP/REST; JSON inference requests.
    Http,
    /// Triton's shared memory extension over gRPC; `ModelInferRequest` messages.
    Grpc,
}

/// Shared memory is a Triton (HTTP or gRPC) feature here: `supported` says whether the run's
/// service kind has it.
pub fn check_service(cfg: &Config, supported: bool) -> Result<()> {
    if let Some(kind) = client::RegionKind::of(cfg) {
        if !supported {
            return Err(Error::usage(format!(
                "--shared-memory {} is supported with --service-kind triton only",
                kind.flag_value()
            )));
        }
        // Before connecting: a missing runtime or device is the first thing to fix.
        if let client::RegionKind::Cuda { device } = kind {
            cuda_ffi::runtime()?.use_device(device, cuda::DEVICE_FLAG)?;
        }
    }
    Ok(())
}
