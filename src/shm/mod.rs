//! Shared memory tensor transport (`--shared-memory system`, spec §6): POSIX regions, the
//! client's registered regions of a run, and requests that reference them.

pub mod client;
pub mod encode;
pub mod plan;
pub mod system;

use crate::config::{Config, ServiceKind, SharedMemory};
use crate::error::{Error, Result};

/// `--shared-memory cuda`: CUDA regions are not built yet; say first whether the CUDA
/// runtime is even there, since that is what a user can act on.
pub fn cuda_unavailable() -> Error {
    // SAFETY: loading the CUDA runtime runs its initialisers; nothing is called from it.
    let found = unsafe { libloading::Library::new("libcudart.so") }.is_ok();
    if found {
        Error::usage("--shared-memory cuda is not supported yet by inferperf (planned)")
    } else {
        Error::usage("--shared-memory cuda needs CUDA: libcudart.so not found")
    }
}

/// Shared memory is a Triton (HTTP or gRPC) feature here.
pub fn check_service(cfg: &Config) -> Result<()> {
    if cfg.shared_memory == SharedMemory::System && cfg.service_kind != ServiceKind::Triton {
        return Err(Error::usage(
            "--shared-memory system is supported with --service-kind triton only",
        ));
    }
    Ok(())
}
