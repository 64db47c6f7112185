//! The reference server's CUDA shared memory extension (HTTP `/v2/cudasharedmemory/...`,
//! gRPC `CudaSharedMemoryRegister/Unregister`): a client's IPC handle is opened through
//! libcudart on register (the loader of `inferperf_wire::cuda_ffi`, so tests can point it at
//! the stand-in); infer requests then copy inputs out of and outputs into the device memory
//! with cudaMemcpy. The memory stays the client's: unregister only closes the server's mapping.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use inferperf_wire::cuda_ffi::{runtime, CudaRuntime, IPC_HANDLE_BYTES};
use inferperf_wire::protocol::grpc::pb::inference as pb;

use super::table::{remove_named, status_entries, status_of, RegionTable, ShmRef};

/// One registered region: the client's allocation opened in this process.
struct Opened {
    device_id: i64,
    byte_size: usize,
    /// Address of the opened handle (never dereferenced here; only passed to cudaMemcpy).
    device_ptr: usize,
    cuda: &'static CudaRuntime,
}

impl Drop for Opened {
    fn drop(&mut self) {
        if let Err(e) = self.cuda.close_ipc_handle(self.device_ptr) {
            eprintln!("warning: closing a CUDA IPC handle: {e}");
        }
    }
}

/// The registered CUDA regions of one server.
#[derive(Default)]
pub struct CudaRegions {
    regions: Mutex<HashMap<String, Arc<Opened>>>,
    /// Input bytes copied out of regions since start.
    bytes_read: AtomicU64,
    /// Output bytes copied into regions since start.
    bytes_written: AtomicU64,
}

impl CudaRegions {
    /// Opens `raw_handle` on `device_id` and registers it as `name` (an existing name is an
    /// error, as in Triton).
    pub fn register(
        &self,
        name: &str,
        raw_handle: &[u8],
        device_id: i64,
        byte_size: u64,
    ) -> Result<(), String> {
        let fail =
            |why: String| format!("failed to register CUDA shared memory region '{name}': {why}");
        let handle: &[u8; IPC_HANDLE_BYTES] = raw_handle.try_into().map_err(|_| {
            fail(format!(
                "raw_handle must be {IPC_HANDLE_BYTES} bytes, got {}",
                raw_handle.len()
            ))
        })?;
        let byte_size = usize::try_from(byte_size).map_err(|_| fail("size too large".into()))?;
        let device = i32::try_from(device_id)
            .map_err(|_| fail(format!("device_id {device_id} out of range")))?;
        let cuda = runtime().map_err(|e| {
            fail(format!(
                "the server cannot load the CUDA runtime: {}",
                e.msg
            ))
        })?;
        let mut regions = self.lock();
        if regions.contains_key(name) {
            return Err(fail("a region of that name is already registered".into()));
        }
        cuda.use_device(device, "device_id")
            .map_err(|e| fail(e.msg))?;
        let device_ptr = cuda.open_ipc_handle(handle).map_err(|e| fail(e.msg))?;
        let opened = Opened {
            device_id,
            byte_size,
            device_ptr,
            cuda,
        };
        regions.insert(name.to_string(), Arc::new(opened));
        Ok(())
    }

    /// Unregisters `name` (unknown names are fine, as in Triton), or every region.
    pub fn unregister(&self, name: Option<&str>) {
        remove_named(&mut self.lock(), name);
    }

    /// The status list: `[{"name","device_id","byte_size"}]`, all or one region.
    pub fn status(&self, name: Option<&str>) -> Result<Value, String> {
        let entry = |n: &str, o: &Arc<Opened>| json!({"name": n, "device_id": o.device_id, "byte_size": o.byte_size});
        status_of(&self.lock(), name, "CUDA", entry)
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

    /// The tensor's bytes when `r` names a CUDA region; `None` when it does not (then it
    /// is a system region or unknown).
    pub fn read(&self, r: &ShmRef) -> Option<Result<Vec<u8>, String>> {
        let opened = self.find(r)?;
        Some(opened.and_then(|o| {
            let bytes = o
                .cuda
                .copy_from_device(o.device_ptr + r.offset, r.byte_size)
                .map_err(|e| format!("CUDA shared memory region '{}': {}", r.region, e.msg))?;
            self.bytes_read
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            Ok(bytes)
        }))
    }

    /// Writes an output when `r` names a CUDA region (the caller has checked `data` fits
    /// `r.byte_size`); `None` when it does not.
    pub fn write(&self, r: &ShmRef, data: &[u8]) -> Option<Result<(), String>> {
        let opened = self.find(r)?;
        Some(opened.and_then(|o| {
            o.cuda
                .copy_to_device(o.device_ptr + r.offset, data)
                .map_err(|e| format!("CUDA shared memory region '{}': {}", r.region, e.msg))?;
            self.bytes_written
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            Ok(())
        }))
    }

    /// The region of `r` if registered, checked to hold `r`'s whole byte range.
    fn find(&self, r: &ShmRef) -> Option<Result<Arc<Opened>, String>> {
        let opened = self.lock().get(&r.region).cloned()?;
        let fits = r
            .offset
            .checked_add(r.byte_size)
            .is_some_and(|end| end <= opened.byte_size);
        Some(if fits {
            Ok(opened)
        } else {
            Err(format!(
                "{} bytes at offset {} exceed CUDA shared memory region '{}' ({} bytes)",
                r.byte_size, r.offset, r.region, opened.byte_size
            ))
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Opened>>> {
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for CudaRegions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaRegions")
            .field("registered", &self.registered())
            .finish_non_exhaustive()
    }
}

/// Decodes base64 the way Triton's HTTP endpoint does (libb64): every character outside the
/// alphabet (line breaks, spaces, `=` padding, anything else) is skipped, and bits of an
/// incomplete last group are dropped. Clients such as perf_analyzer break the encoded handle
/// into 72-character lines; a handle of the wrong length is refused by the caller.
fn decode_b64_lenient(text: &str) -> Vec<u8> {
    let sextet = |c: u8| -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some(u32::from(c - b'A')),
            b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for value in text.bytes().filter_map(sextet) {
        acc = (acc << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Register body: `{"raw_handle":{"b64":"..."},"device_id":N,"byte_size":S}`.
fn register_json(regions: &CudaRegions, name: &str, body: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("failed to parse the register request: {e}"))?;
    let b64 = v["raw_handle"]["b64"]
        .as_str()
        .ok_or("register request: 'raw_handle' must be {\"b64\": <string>}")?;
    let handle = decode_b64_lenient(b64);
    let device_id = match &v["device_id"] {
        Value::Null => 0,
        d => d
            .as_i64()
            .ok_or("register request: 'device_id' must be an integer")?,
    };
    let size = v["byte_size"]
        .as_u64()
        .ok_or("register request: 'byte_size' must be an unsigned int")?;
    regions.register(name, &handle, device_id, size)
}

impl RegionTable for CudaRegions {
    const EXTENSION: &'static str = "cudasharedmemory";
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
    regions: &CudaRegions,
    q: &pb::CudaSharedMemoryRegisterRequest,
) -> Result<pb::CudaSharedMemoryRegisterResponse, String> {
    regions.register(&q.name, &q.raw_handle, q.device_id, q.byte_size)?;
    Ok(pb::CudaSharedMemoryRegisterResponse {})
}

/// An empty name unregisters every region (as Triton does).
pub fn grpc_unregister(
    regions: &CudaRegions,
    q: &pb::CudaSharedMemoryUnregisterRequest,
) -> pb::CudaSharedMemoryUnregisterResponse {
    regions.unregister((!q.name.is_empty()).then_some(q.name.as_str()));
    pb::CudaSharedMemoryUnregisterResponse {}
}

/// One region (by name) or all (empty name), as the status list says.
pub fn grpc_status(
    regions: &CudaRegions,
    q: &pb::CudaSharedMemoryStatusRequest,
) -> Result<pb::CudaSharedMemoryStatusResponse, String> {
    use pb::cuda_shared_memory_status_response::RegionStatus;
    let list = regions.status((!q.name.is_empty()).then_some(q.name.as_str()))?;
    let regions = status_entries(&list)
        .map(|e| {
            let status = RegionStatus {
                name: e.str("name"),
                device_id: e.u64("device_id"),
                byte_size: e.u64("byte_size"),
            };
            (status.name.clone(), status)
        })
        .collect();
    Ok(pb::CudaSharedMemoryStatusResponse { regions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::http_route;
    use base64::Engine as _;
    use inferperf_client::shm::cuda::{test_runtime, CudaRegion};

    fn shm_ref(region: &str, offset: usize, byte_size: usize) -> ShmRef {
        ShmRef {
            region: region.into(),
            offset,
            byte_size,
        }
    }

    #[test]
    fn lenient_base64_skips_what_libb64_skips() {
        let bytes: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        let plain = base64::engine::general_purpose::STANDARD.encode(&bytes);
        assert_eq!(plain.len(), 88);
        assert_eq!(decode_b64_lenient(&plain), bytes);
        // perf_analyzer's encoder: a line break after every 72 characters.
        let broken = format!("{}\n{}\n", &plain[..72], &plain[72..]);
        assert_eq!(decode_b64_lenient(&broken), bytes);
        let spaced: String = plain.chars().flat_map(|c| [c, ' ', '\r']).collect();
        assert_eq!(decode_b64_lenient(&spaced), bytes);
        assert_eq!(decode_b64_lenient(plain.trim_end_matches('=')), bytes);
        assert_eq!(decode_b64_lenient("TWFu"), b"Man");
        assert_eq!(decode_b64_lenient("TWE="), b"Ma");
        assert_eq!(decode_b64_lenient("TQ"), b"M");
        assert_eq!(decode_b64_lenient("T"), b"");
        assert_eq!(decode_b64_lenient("!!\u{e9}"), b"");
    }

    #[test]
    fn line_broken_handle_registers() {
        if test_runtime().is_none() {
            return;
        }
        let client = CudaRegion::with_data("srv_lines", 0, b"abcd").unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(client.raw_handle());
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(72)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let body = json!({"raw_handle": {"b64": lines.join("\n") + "\n"}, "byte_size": 4});
        let regions = CudaRegions::default();
        let body = body.to_string().into_bytes();
        assert_eq!(
            http_route(&regions, true, "/region/lines/register", &body),
            Ok(None)
        );
        assert_eq!(regions.registered(), 1);
    }

    fn register_body(region: &CudaRegion, device: i64) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(region.raw_handle());
        json!({"raw_handle": {"b64": b64}, "device_id": device, "byte_size": region.len()})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn http_register_read_write_status_unregister() {
        if test_runtime().is_none() {
            return;
        }
        let client = CudaRegion::with_data("srv_in", 0, b"0123456789").unwrap();
        let regions = CudaRegions::default();
        let path = "/region/in/register";
        assert_eq!(
            http_route(&regions, true, path, &register_body(&client, 0)),
            Ok(None)
        );
        let again = http_route(&regions, true, path, &register_body(&client, 0));
        assert!(again.unwrap_err().1.contains("already registered"));
        assert_eq!(
            regions.read(&shm_ref("in", 2, 4)).unwrap().unwrap(),
            b"2345"
        );
        regions.write(&shm_ref("in", 8, 2), b"xy").unwrap().unwrap();
        assert_eq!(client.read(6, 4).unwrap(), b"67xy");
        assert_eq!(regions.traffic(), (4, 2));
        // Out of range, or not a CUDA region at all.
        assert!(regions.read(&shm_ref("in", 8, 3)).unwrap().is_err());
        assert!(regions.read(&shm_ref("system_one", 0, 1)).is_none());
        let status = http_route(&regions, false, "/status", b"")
            .unwrap()
            .unwrap();
        assert_eq!(
            status,
            json!([{"name": "in", "device_id": 0, "byte_size": 10}])
        );
        let grpc = grpc_status(&regions, &pb::CudaSharedMemoryStatusRequest::default()).unwrap();
        assert_eq!(
            (grpc.regions["in"].device_id, grpc.regions["in"].byte_size),
            (0, 10)
        );
        assert_eq!(
            http_route(&regions, true, "/region/in/unregister", b""),
            Ok(None)
        );
        assert_eq!(regions.registered(), 0);
        let gone = http_route(&regions, false, "/region/in/status", b"");
        assert_eq!(gone.unwrap_err().0, 400);
    }

    #[test]
    fn bad_register_requests_are_refused() {
        if test_runtime().is_none() {
            return;
        }
        let client = CudaRegion::create("srv_bad", 0, 4).unwrap();
        let regions = CudaRegions::default();
        let good = register_body(&client, 0);
        let rows: &[(&[u8], &str)] = &[
            (b"{", "failed to parse"),
            (
                br#"{"raw_handle":"x","byte_size":4}"#,
                "'raw_handle' must be",
            ),
            (
                br#"{"raw_handle":{"b64":"!!"},"byte_size":4}"#,
                "must be 64 bytes",
            ),
            (
                br#"{"raw_handle":{"b64":"AAAA"},"byte_size":4}"#,
                "must be 64 bytes",
            ),
            (
                &register_body(&client, 3),
                "device_id 3: no such CUDA device",
            ),
        ];
        for (body, want) in rows {
            let err = http_route(&regions, true, "/region/r/register", body).unwrap_err();
            assert_eq!(err.0, 400);
            assert!(err.1.contains(want), "{want}: {}", err.1);
        }
        // A handle of nothing (all zero bytes) is refused by cudaIpcOpenMemHandle.
        let zero = pb::CudaSharedMemoryRegisterRequest {
            name: "z".into(),
            raw_handle: vec![0; IPC_HANDLE_BYTES],
            device_id: 0,
            byte_size: 4,
        };
        let err = grpc_register(&regions, &zero).unwrap_err();
        assert!(err.contains("cudaIpcOpenMemHandle failed"), "{err}");
        assert_eq!(regions.registered(), 0);
        assert_eq!(
            http_route(&regions, true, "/region/r/register", &good),
            Ok(None)
        );
        assert_eq!(
            http_route(&regions, false, "/unregister", b"")
                .unwrap_err()
                .0,
            405
        );
        assert_eq!(http_route(&regions, true, "/nope", b"").unwrap_err().0, 404);
        grpc_unregister(
            &regions,
            &pb::CudaSharedMemoryUnregisterRequest {
                name: String::new(),
            },
        );
        assert_eq!(regions.registered(), 0);
    }
}
