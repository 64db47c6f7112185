//! The Triton in-process C API (`--service-kind triton_c_api`): `libtritonserver.so` is
//! loaded at run time with `libloading`, so the default build needs no Triton install.
//!
//! - [`ffi`]: raw declarations and the entry-point table, resolved once.
//! - [`server`]: the server's lifetime, readiness and the JSON documents the setup reads.
//! - [`infer`]: prepared inputs and building/submitting a request.
//! - [`slot`]: a pool slot's callbacks: records, outputs, closed-loop chaining.
//! - [`ring`]: the slot's lock-free hand-off of finished requests to the worker.
//! - [`outputs`]: the response allocator (reused buffers) and the outputs' copy.

pub mod ffi;
pub mod infer;
pub mod outputs;
pub mod ring;
pub mod server;
pub mod slot;

pub use infer::{prepare_step, submit, ModelTarget, PreparedStep, SeqFields};
pub use ring::{Done, Ring, RING_LEN};
pub use server::{Server, ServerOptions};
pub use slot::{wait_idle, Notifier, SlotCtx, Target};

#[cfg(test)]
pub(crate) mod stub_tests;
