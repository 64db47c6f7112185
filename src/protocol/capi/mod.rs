//! The Triton in-process C API (`--service-kind triton_c_api`): `libtritonserver.so` is
//! loaded at run time with `libloading`, so the default build needs no Triton install.
//!
//! - [`ffi`]: raw declarations and the entry-point table, resolved once.
//! - [`server`]: the server's lifetime, readiness and the JSON documents the setup reads.
//! - [`infer`]: requests, the host-memory response allocator and the completion callbacks.

pub mod ffi;
pub mod infer;
pub mod server;

pub use infer::{
    infer_async, prepare_step, Completion, ModelTarget, Notifier, PreparedStep, SeqFields, SlotCtx,
};
pub use server::{Server, ServerOptions};

#[cfg(test)]
pub(crate) mod stub_tests;
