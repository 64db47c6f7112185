//! CUDA shared memory regions: device memory from `cudaMalloc` on the chosen
//! device, filled from host bytes, exported with its 64-byte IPC handle for the server to
//! open. Dropping a region frees the device memory.
//!
//! Unlike POSIX regions, nothing is left behind if the process dies without destructors
//! (second Ctrl-C): the driver frees a process's device memory when it exits.

use crate::error::{Error, Result};

use super::cuda_ffi::{runtime, CudaRuntime, IPC_HANDLE_BYTES};

/// The flag that picks the device, for messages.
pub const DEVICE_FLAG: &str = "--cuda-device";

/// A device buffer this process allocated, with its IPC handle.
pub struct CudaRegion {
    name: String,
    device: i32,
    /// Device address from cudaMalloc (kept as an integer: it is never dereferenced here).
    device_ptr: usize,
    len: usize,
    handle: [u8; IPC_HANDLE_BYTES],
    cuda: &'static CudaRuntime,
}

impl CudaRegion {
    /// Allocates `len` bytes (zero-filled) on `device` and takes its IPC handle.
    pub fn create(name: &str, device: i32, len: usize) -> Result<CudaRegion> {
        CudaRegion::new(name, device, len, None)
    }

    /// A new region holding `data`.
    pub fn with_data(name: &str, device: i32, data: &[u8]) -> Result<CudaRegion> {
        CudaRegion::new(name, device, data.len(), Some(data))
    }

    /// `len` bytes holding `data`, or zeros (device memory is not zeroed by cudaMalloc).
    fn new(name: &str, device: i32, len: usize, data: Option<&[u8]>) -> Result<CudaRegion> {
        let cuda = runtime()?;
        cuda.use_device(device, DEVICE_FLAG)?;
        let fail = |e: Error| {
            Error::generic(format!(
                "CUDA shared memory region '{name}' ({len} bytes, device {device}): {}",
                e.msg
            ))
        };
        // cudaMalloc(0) may return a null pointer, which has no IPC handle: keep one byte.
        let device_ptr = cuda.malloc(len.max(1)).map_err(fail)?;
        // From here on the memory is this process's to free: build the region so a failure below
        // frees it.
        let mut region = CudaRegion {
            name: name.to_string(),
            device,
            device_ptr,
            len,
            handle: [0; IPC_HANDLE_BYTES],
            cuda,
        };
        let zeros;
        let fill = match data {
            Some(bytes) => bytes,
            None => {
                zeros = vec![0u8; len];
                &zeros
            }
        };
        cuda.copy_to_device(device_ptr, fill).map_err(fail)?;
        region.handle = cuda.ipc_handle(device_ptr).map_err(fail)?;
        Ok(region)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn device(&self) -> i32 {
        self.device
    }

    /// Size in bytes (as registered with the server).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `cudaIpcMemHandle_t` bytes the server opens.
    pub fn raw_handle(&self) -> &[u8; IPC_HANDLE_BYTES] {
        &self.handle
    }

    /// Copies `data` into the region at `offset` (host to device).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.bounds(offset, data.len())?;
        self.cuda.copy_to_device(self.device_ptr + offset, data)
    }

    /// `len` bytes at `offset` (device to host).
    pub fn read(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.bounds(offset, len)?;
        self.cuda.copy_from_device(self.device_ptr + offset, len)
    }

    fn bounds(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::generic(format!(
                "CUDA shared memory region '{}': {len} bytes at offset {offset} exceed its {} \
                 bytes",
                self.name, self.len
            ))),
        }
    }
}

impl Drop for CudaRegion {
    fn drop(&mut self) {
        if let Err(e) = self.cuda.free(self.device_ptr) {
            eprintln!("warning: CUDA shared memory region '{}': {e}", self.name);
        }
    }
}

impl std::fmt::Debug for CudaRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaRegion")
            .field("name", &self.name)
            .field("device", &self.device)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Builds `tests/cuda_stub/cudart_stub.c` once, points [`super::cuda_ffi::LIBRARY_ENV`] at
/// it before anything loads the runtime, and loads it; `None` (test skipped) without gcc.
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub fn test_runtime() -> Option<&'static CudaRuntime> {
    static LOADED: std::sync::OnceLock<Option<&'static CudaRuntime>> = std::sync::OnceLock::new();
    *LOADED.get_or_init(|| {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/cuda_stub/cudart_stub.c");
        let dir =
            std::env::temp_dir().join(format!("inferperf-cudastub-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let lib = dir.join("libcudart.so");
        let status = std::process::Command::new("gcc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&lib)
            .arg(&src)
            .args(["-lpthread", "-lrt"])
            .status();
        let loaded = match status {
            Ok(s) if s.success() => {
                std::env::set_var(super::cuda_ffi::LIBRARY_ENV, &lib);
                Some(runtime().expect("the stub loads"))
            }
            Ok(s) => panic!("gcc failed to build the CUDA stub: {s}"),
            Err(e) => {
                eprintln!("skipped: gcc is not available ({e})");
                None
            }
        };
        // Loaded libraries stay mapped after their file is gone.
        let _ = std::fs::remove_dir_all(&dir);
        loaded
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_hold_bytes_and_bounds_are_checked() {
        let Some(cuda) = test_runtime() else { return };
        let r = CudaRegion::with_data("unit_in", 0, b"abcdef").unwrap();
        assert_eq!((r.name(), r.device(), r.len()), ("unit_in", 0, 6));
        assert_eq!(r.read(0, 6).unwrap(), b"abcdef");
        r.write(2, b"XY").unwrap();
        assert_eq!(r.read(1, 4).unwrap(), b"bXYe");
        // The handle opens elsewhere and shows the same bytes (what the server does).
        let there = cuda.open_ipc_handle(r.raw_handle()).unwrap();
        assert_eq!(cuda.copy_from_device(there, 6).unwrap(), b"abXYef");
        cuda.close_ipc_handle(there).unwrap();
        let rows: &[(usize, usize)] = &[(0, 7), (6, 1), (usize::MAX, 2)];
        for &(offset, len) in rows {
            assert!(r.read(offset, len).is_err(), "{offset} {len}");
            assert!(
                r.write(offset, &vec![1; len.min(8)]).is_err(),
                "{offset} {len}"
            );
        }
        let zeroed = CudaRegion::create("unit_out", 0, 4).unwrap();
        assert_eq!(zeroed.read(0, 4).unwrap(), [0; 4]);
        assert!(CudaRegion::create("unit_empty", 0, 0).unwrap().is_empty());
    }

    #[test]
    fn a_missing_device_is_a_usage_error_naming_the_flag() {
        if test_runtime().is_none() {
            return;
        }
        for device in [1, 7, -1] {
            let err = CudaRegion::create("unit_dev", device, 4).err().unwrap();
            assert_eq!(err.kind, crate::error::ErrorKind::Usage, "{err}");
            assert!(
                err.msg
                    .contains(&format!("--cuda-device {device}: no such CUDA device")),
                "{err}"
            );
            assert!(err.msg.contains("1 device(s)"), "{err}");
        }
    }
}
