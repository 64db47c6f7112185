//! The reference server's system shared memory extension (HTTP
//! `/v2/systemsharedmemory/...`, gRPC `SystemSharedMemoryRegister/Unregister`): a client's
//! POSIX region is mapped by key on register; infer requests then read inputs from and
//! write outputs to it. The server never creates or unlinks regions: they are the client's.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::{MmapMut, MmapOptions};
use serde_json::{json, Value};

use inferperf_wire::protocol::grpc::pb::inference as pb;

use table::{remove_named, status_entries, status_of, RegionTable};

/// One registered region, mapped for the server's lifetime of the registration.
struct Mapped {
    key: String,
    offset: usize,
    byte_size: usize,
    map: Mutex<MmapMut>,
    /// The region's object, to check it still covers the mapping before each access.
    file: File,
}

/// The registered regions of one server.
#[derive(Default)]
pub struct ShmRegions {
    regions: Mutex<HashMap<String, Arc<Mapped>>>,
    /// Input bytes read from regions since start (tests compare it with what was staged).
    bytes_read: AtomicU64,
    /// Output bytes written into regions since start.
    bytes_written: AtomicU64,
    /// Registered CUDA regions; tensors name either kind (see `read`, `write`).
    pub cuda: cuda::CudaRegions,
    /// Names of the regions outputs were written into (the first `OUTPUT_REGIONS_KEPT`), so
    /// tests can tell how many regions a client's requests in flight used.
    output_regions: Mutex<BTreeSet<String>>,
}

/// Output region names kept by `ShmRegions::output_regions` at most.
const OUTPUT_REGIONS_KEPT: usize = 65_536;

impl ShmRegions {
    /// Maps `key` and registers it as `name` (an existing name is an error, as in Triton).
    pub fn register(
        &self,
        name: &str,
        key: &str,
        offset: u64,
        byte_size: u64,
    ) -> Result<(), String> {
        let fail = |why: String| format!("failed to register shared memory region '{name}': {why}");
        let offset = usize::try_from(offset).map_err(|_| fail("offset too large".into()))?;
        let byte_size = usize::try_from(byte_size).map_err(|_| fail("size too large".into()))?;
        let end = offset
            .checked_add(byte_size)
            .ok_or_else(|| fail("offset + byte_size overflows".into()))?;
        let mut regions = self.lock();
        if regions.contains_key(name) {
            return Err(fail("a region of that name is already registered".into()));
        }
        let file = open_key(key).map_err(|e| fail(format!("cannot open key '{key}': {e}")))?;
        let len = file.metadata().map_err(|e| fail(e.to_string()))?.len();
        if (len as u128) < end as u128 {
            return Err(fail(format!(
                "offset {offset} + byte_size {byte_size} exceeds the {len} bytes of '{key}'"
            )));
        }
        // SAFETY: a shared mapping of the client's region; its bytes are only copied in and
        // out under the region's lock, never trusted for layout.
        let map = unsafe { MmapOptions::new().len(end.max(1)).map_mut(&file) }
            .map_err(|e| fail(format!("mmap: {e}")))?;
        let mapped = Mapped {
            key: key.to_string(),
            offset,
            byte_size,
            map: Mutex::new(map),
            file,
        };
        regions.insert(name.to_string(), Arc::new(mapped));
        Ok(())
    }

    /// Unregisters `name` (unknown names are fine, as in Triton), or every region.
    pub fn unregister(&self, name: Option<&str>) {
        remove_named(&mut self.lock(), name);
    }

    /// The status list: `[{"name","key","offset","byte_size"}]`, all or one region.
    pub fn status(&self, name: Option<&str>) -> Result<Value, String> {
        let entry = |n: &str, m: &Arc<Mapped>| json!({"name": n, "key": m.key, "offset": m.offset, "byte_size": m.byte_size});
        status_of(&self.lock(), name, "system", entry)
    }

    /// Number of registered regions.
    pub fn registered(&self) -> usize {
        self.lock().len()
    }

    /// (input bytes read, output bytes written) since the server started.
    pub fn traffic(&self) -> (u64, u64) {
        (
            self.bytes_read.load(Ordering::Relaxed),
            self.bytes_written.load(Ordering::Relaxed),
        )
    }

    /// A copy of the tensor's bytes.
    pub fn read(&self, r: &ShmRef) -> Result<Vec<u8>, String> {
        if let Some(from_cuda) = self.cuda.read(r) {
            return from_cuda;
        }
        let mapped = self.find(r)?;
        let map = mapped.map.lock().unwrap_or_else(|e| e.into_inner());
        let start = mapped.offset + r.offset;
        let bytes = map[start..start + r.byte_size].to_vec();
        self.bytes_read
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(bytes)
    }

    /// Writes an output tensor; it must fit the space the request gave it.
    pub fn write(&self, tensor: &str, r: &ShmRef, data: &[u8]) -> Result<(), String> {
        if data.len() > r.byte_size {
            return Err(format!(
                "shared memory size specified with the request for output '{tensor}' ({} \
                 bytes) should be at least {} bytes to hold the results",
                r.byte_size,
                data.len()
            ));
        }
        if let Some(to_cuda) = self.cuda.write(r, data) {
            return to_cuda;
        }
        let mapped = self.find(r)?;
        let mut map = mapped.map.lock().unwrap_or_else(|e| e.into_inner());
        let start = mapped.offset + r.offset;
        map[start..start + data.len()].copy_from_slice(data);
        drop(map);
        self.bytes_written
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let mut names = self
            .output_regions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if names.len() < OUTPUT_REGIONS_KEPT && !names.contains(&r.region) {
            names.insert(r.region.clone());
        }
        Ok(())
    }

    /// Names of the regions outputs were written into since start, sorted.
    pub fn output_regions(&self) -> Vec<String> {
        let names = self
            .output_regions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        names.iter().cloned().collect()
    }

    /// The region of `r`, checked to hold `r`'s whole byte range.
    fn find(&self, r: &ShmRef) -> Result<Arc<Mapped>, String> {
        let mapped =
            self.lock().get(&r.region).cloned().ok_or_else(|| {
                format!("Unable to find system shared memory region: '{}'", r.region)
            })?;
        let fits = r
            .offset
            .checked_add(r.byte_size)
            .is_some_and(|end| end <= mapped.byte_size);
        if !fits {
            return Err(format!(
                "{} bytes at offset {} exceed shared memory region '{}' ({} bytes)",
                r.byte_size, r.offset, r.region, mapped.byte_size
            ));
        }
        // A client that shrinks its object after registering would make touching the mapping
        // past the new end a SIGBUS; its current size is checked first.
        let end = (mapped.offset + mapped.byte_size) as u64;
        match mapped.file.metadata() {
            Ok(meta) if meta.len() >= end => Ok(mapped),
            Ok(meta) => Err(format!(
                "shared memory region '{}': '{}' shrank to {} bytes, the region needs {end}",
                r.region,
                mapped.key,
                meta.len()
            )),
            Err(e) => Err(format!("shared memory region '{}': {e}", r.region)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Mapped>>> {
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for ShmRegions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmRegions")
            .field("registered", &self.registered())
            .finish_non_exhaustive()
    }
}

/// Opens an existing region read-write (never creates one).
fn open_key(key: &str) -> std::io::Result<File> {
    let c_key = CString::new(key)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in key"))?;
    // SAFETY: a valid C string; the fd is checked and then owned by the File.
    let fd = unsafe { libc::shm_open(c_key.as_ptr(), libc::O_RDWR, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Register body: `{"key":"/name","offset":0,"byte_size":N}`.
fn register_json(regions: &ShmRegions, name: &str, body: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("failed to parse the register request: {e}"))?;
    let key = v["key"]
        .as_str()
        .ok_or("register request: 'key' must be a string")?;
    let offset = match &v["offset"] {
        Value::Null => 0,
        o => o
            .as_u64()
            .ok_or("register request: 'offset' must be an unsigned int")?,
    };
    let size = v["byte_size"]
        .as_u64()
        .ok_or("register request: 'byte_size' must be an unsigned int")?;
    regions.register(name, key, offset, size)
}

impl RegionTable for ShmRegions {
    const EXTENSION: &'static str = "systemsharedmemory";
    fn status_list(&self, name: Option<&str>) -> Result<Value, String> {
        self.status(name)
    }
    fn unregister_named(&self, name: Option<&str>) {
        self.unregister(name)
    }
    fn register_json(&self, name: &str, body: &[u8]) -> Result<(), String> {
        register_json(self, name, body)
    }
}

pub fn grpc_register(
    regions: &ShmRegions,
    q: &pb::SystemSharedMemoryRegisterRequest,
) -> Result<pb::SystemSharedMemoryRegisterResponse, String> {
    regions.register(&q.name, &q.key, q.offset, q.byte_size)?;
    Ok(pb::SystemSharedMemoryRegisterResponse {})
}

/// An empty name unregisters every region (as Triton does).
pub fn grpc_unregister(
    regions: &ShmRegions,
    q: &pb::SystemSharedMemoryUnregisterRequest,
) -> pb::SystemSharedMemoryUnregisterResponse {
    regions.unregister((!q.name.is_empty()).then_some(q.name.as_str()));
    pb::SystemSharedMemoryUnregisterResponse {}
}

/// One region (by name) or all (empty name), as the status list says.
pub fn grpc_status(
    regions: &ShmRegions,
    q: &pb::SystemSharedMemoryStatusRequest,
) -> Result<pb::SystemSharedMemoryStatusResponse, String> {
    use pb::system_shared_memory_status_response::RegionStatus;
    let list = regions.status((!q.name.is_empty()).then_some(q.name.as_str()))?;
    let regions = status_entries(&list)
        .map(|e| {
            let status = RegionStatus {
                name: e.str("name"),
                key: e.str("key"),
                offset: e.u64("offset"),
                byte_size: e.u64("byte_size"),
            };
            (status.name.clone(), status)
        })
        .collect();
    Ok(pb::SystemSharedMemoryStatusResponse { regions })
}

pub mod cuda;
mod grpc_tensors;
mod table;
pub use grpc_tensors::{stage_grpc_inputs, write_grpc_outputs};
pub use table::{http_route, ShmRef};

#[cfg(test)]
#[path = "shm_tests.rs"]
mod tests;
