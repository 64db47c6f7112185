//! The CUDA runtime (`libcudart`), loaded at run time so builds need no CUDA:
//! the few entry points CUDA shared memory uses, resolved once per process.
//!
//! Search order: the path in `INFERPERF_CUDART_LIB` (tests point it at a stand-in), then
//! the names in [`LIBRARY_NAMES`]. The client and the reference server share this loader.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use libloading::Library;

use crate::error::{Error, Result};

/// Environment variable naming the library to load instead of the usual names.
pub const LIBRARY_ENV: &str = "INFERPERF_CUDART_LIB";

/// Names tried, in order, when `INFERPERF_CUDART_LIB` is not set.
pub const LIBRARY_NAMES: [&str; 3] = ["libcudart.so", "libcudart.so.12", "libcudart.so.11.0"];

/// `cudaMemcpyKind` values.
const HOST_TO_DEVICE: c_int = 1;
const DEVICE_TO_HOST: c_int = 2;

/// `cudaIpcMemLazyEnablePeerAccess`, the flag servers open handles with.
const IPC_LAZY_PEER_ACCESS: c_uint = 1;

/// Bytes of a `cudaIpcMemHandle_t`.
pub const IPC_HANDLE_BYTES: usize = 64;

/// `cudaIpcMemHandle_t`: opaque bytes, passed by value to `cudaIpcOpenMemHandle`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcMemHandle {
    pub reserved: [u8; IPC_HANDLE_BYTES],
}

type CountFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type SetDeviceFn = unsafe extern "C" fn(c_int) -> c_int;
type MallocFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type MemcpyFn = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int;
type IpcGetFn = unsafe extern "C" fn(*mut IpcMemHandle, *mut c_void) -> c_int;
type IpcOpenFn = unsafe extern "C" fn(*mut *mut c_void, IpcMemHandle, c_uint) -> c_int;
type IpcCloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// The loaded runtime. The function pointers stay valid while `_lib` is loaded, which is
/// for the life of the process (it lives in a static).
pub struct CudaRuntime {
    /// What was loaded (the path or name), for messages.
    pub source: String,
    get_device_count: CountFn,
    set_device: SetDeviceFn,
    malloc: MallocFn,
    free: FreeFn,
    memcpy: MemcpyFn,
    ipc_get_mem_handle: IpcGetFn,
    ipc_open_mem_handle: IpcOpenFn,
    ipc_close_mem_handle: IpcCloseFn,
    get_error_string: ErrorStringFn,
    _lib: Library,
}

/// The process's CUDA runtime, loaded on first use; the load error is kept too, so every
/// caller gets the same message.
pub fn runtime() -> Result<&'static CudaRuntime> {
    static RUNTIME: OnceLock<std::result::Result<CudaRuntime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(load)
        .as_ref()
        .map_err(|msg| Error::usage(msg.clone()))
}

/// The candidates in search order: the env path alone when it is set.
fn candidates() -> Vec<String> {
    match std::env::var(LIBRARY_ENV) {
        Ok(path) if !path.is_empty() => vec![path],
        _ => LIBRARY_NAMES.iter().map(|s| s.to_string()).collect(),
    }
}

fn load() -> std::result::Result<CudaRuntime, String> {
    let from_env = matches!(std::env::var(LIBRARY_ENV), Ok(p) if !p.is_empty());
    load_from(&candidates(), from_env)
}

/// The first of `tried` that loads and has every symbol.
fn load_from(tried: &[String], from_env: bool) -> std::result::Result<CudaRuntime, String> {
    let mut reasons = Vec::with_capacity(tried.len());
    for name in tried {
        // SAFETY: loading a shared library runs its initialisers; libcudart's are sound.
        match unsafe { Library::new(name) } {
            Ok(lib) => return resolve(lib, name),
            Err(e) => reasons.push(load_error_text(&e)),
        }
    }
    let from = if from_env {
        format!(" (from {LIBRARY_ENV})")
    } else {
        String::new()
    };
    Err(format!(
        "--shared-memory cuda needs CUDA: none of {}{from} could be loaded ({})",
        tried.join(", "),
        reasons.join("; ")
    ))
}

/// The loader's own words (`dlerror`), which libloading keeps as the error's source.
fn load_error_text(e: &libloading::Error) -> String {
    use std::error::Error as _;
    e.source().map_or_else(|| e.to_string(), |s| s.to_string())
}

fn resolve(lib: Library, source: &str) -> std::result::Result<CudaRuntime, String> {
    macro_rules! symbol {
        ($name:literal) => {
            // SAFETY: the type matches the CUDA runtime API's C prototype of $name.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{source}: symbol {} not found: {e}", $name))?
        };
    }
    Ok(CudaRuntime {
        source: source.to_string(),
        get_device_count: symbol!("cudaGetDeviceCount"),
        set_device: symbol!("cudaSetDevice"),
        malloc: symbol!("cudaMalloc"),
        free: symbol!("cudaFree"),
        memcpy: symbol!("cudaMemcpy"),
        ipc_get_mem_handle: symbol!("cudaIpcGetMemHandle"),
        ipc_open_mem_handle: symbol!("cudaIpcOpenMemHandle"),
        ipc_close_mem_handle: symbol!("cudaIpcCloseMemHandle"),
        get_error_string: symbol!("cudaGetErrorString"),
        _lib: lib,
    })
}

impl CudaRuntime {
    /// `Ok` for `cudaSuccess`, else an error naming `call` and CUDA's description.
    fn check(&self, call: &str, code: c_int) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: cudaGetErrorString accepts any code and returns a static string or null.
        let text = unsafe { (self.get_error_string)(code) };
        let text = if text.is_null() {
            "unknown error".to_string()
        } else {
            // SAFETY: non-null, NUL-terminated, static in the library.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        };
        Err(Error::generic(format!(
            "{call} failed: {text} (error {code})"
        )))
    }

    pub fn device_count(&self) -> Result<i32> {
        let mut count: c_int = 0;
        // SAFETY: a valid out pointer.
        self.check("cudaGetDeviceCount", unsafe {
            (self.get_device_count)(&mut count)
        })?;
        Ok(count)
    }

    pub fn set_device(&self, device: i32) -> Result<()> {
        // SAFETY: plain integer argument.
        self.check("cudaSetDevice", unsafe { (self.set_device)(device) })
    }

    /// `len` bytes of device memory on the current device (the address, as an integer).
    pub fn malloc(&self, len: usize) -> Result<usize> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid out pointer.
        self.check("cudaMalloc", unsafe { (self.malloc)(&mut ptr, len) })?;
        Ok(ptr as usize)
    }

    /// Frees what [`Self::malloc`] returned.
    pub fn free(&self, device_ptr: usize) -> Result<()> {
        // SAFETY: the caller passes an address cudaMalloc returned, freed once.
        self.check("cudaFree", unsafe {
            (self.free)(device_ptr as *mut c_void)
        })
    }

    /// Copies `data` to `device_ptr`. The caller keeps the range inside its allocation.
    pub fn copy_to_device(&self, device_ptr: usize, data: &[u8]) -> Result<()> {
        let (dst, src) = (device_ptr as *mut c_void, data.as_ptr().cast());
        // SAFETY: `src` is valid for data.len() bytes; the device range is the caller's.
        let code = unsafe { (self.memcpy)(dst, src, data.len(), HOST_TO_DEVICE) };
        self.check("cudaMemcpy (host to device)", code)
    }

    /// `len` bytes from `device_ptr`.
    pub fn copy_from_device(&self, device_ptr: usize, len: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        let (dst, src) = (out.as_mut_ptr().cast(), device_ptr as *const c_void);
        // SAFETY: `dst` is valid for len bytes; the device range is the caller's.
        let code = unsafe { (self.memcpy)(dst, src, len, DEVICE_TO_HOST) };
        self.check("cudaMemcpy (device to host)", code)?;
        Ok(out)
    }

    /// The IPC handle of an allocation, for another process to open.
    pub fn ipc_handle(&self, device_ptr: usize) -> Result<[u8; IPC_HANDLE_BYTES]> {
        let mut handle = IpcMemHandle {
            reserved: [0; IPC_HANDLE_BYTES],
        };
        // SAFETY: a valid out pointer; the address came from cudaMalloc.
        let code = unsafe { (self.ipc_get_mem_handle)(&mut handle, device_ptr as *mut c_void) };
        self.check("cudaIpcGetMemHandle", code)?;
        Ok(handle.reserved)
    }

    /// Maps another process's allocation (on the current device); returns its address here.
    pub fn open_ipc_handle(&self, handle: &[u8; IPC_HANDLE_BYTES]) -> Result<usize> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let handle = IpcMemHandle { reserved: *handle };
        // SAFETY: a valid out pointer; the handle is plain bytes the runtime validates.
        let code = unsafe { (self.ipc_open_mem_handle)(&mut ptr, handle, IPC_LAZY_PEER_ACCESS) };
        self.check("cudaIpcOpenMemHandle", code)?;
        Ok(ptr as usize)
    }

    /// Unmaps what [`Self::open_ipc_handle`] returned.
    pub fn close_ipc_handle(&self, device_ptr: usize) -> Result<()> {
        // SAFETY: an address cudaIpcOpenMemHandle returned, closed once.
        let code = unsafe { (self.ipc_close_mem_handle)(device_ptr as *mut c_void) };
        self.check("cudaIpcCloseMemHandle", code)
    }

    /// Checks `device` against `cudaGetDeviceCount` and makes it current.
    pub fn use_device(&self, device: i32, flag: &str) -> Result<()> {
        let count = self.device_count()?;
        if device < 0 || device >= count {
            return Err(Error::usage(format!(
                "{flag} {device}: no such CUDA device ({count} device(s) found by {}, numbered \
                 from 0)",
                self.source
            )));
        }
        self.set_device(device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_library_names_every_candidate() {
        let tried = vec![
            "/nonexistent/libcudart_a.so".to_string(),
            "/nonexistent/libcudart_b.so".to_string(),
        ];
        let err = load_from(&tried, true).err().expect("nothing to load");
        assert!(
            err.starts_with("--shared-memory cuda needs CUDA: none of "),
            "{err}"
        );
        assert!(
            err.contains("libcudart_a.so, /nonexistent/libcudart_b.so"),
            "{err}"
        );
        assert!(err.contains(LIBRARY_ENV), "{err}");
        let err = load_from(&tried[..1], false).err().unwrap();
        assert!(!err.contains(LIBRARY_ENV), "{err}");
    }

    #[test]
    fn a_library_without_the_symbols_is_refused_by_name() {
        // libc loads everywhere this builds, and has no CUDA entry points.
        let err = load_from(&["libc.so.6".to_string()], false).err().unwrap();
        assert!(
            err.contains("libc.so.6: symbol cudaGetDeviceCount not found"),
            "{err}"
        );
    }
}
