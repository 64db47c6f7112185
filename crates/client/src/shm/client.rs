//! The client's regions for one run: created, filled, registered with the server, and on
//! drop (every exit path of the run) unregistered by name and freed (POSIX regions
//! unlinked, CUDA regions' device memory freed). Regions this run did not register are
//! never unregistered, unlike perf_analyzer's "unregister all" at start-up.

use std::time::Duration;

use base64::Engine as _;

use super::ShmApi;
use crate::config::{Config, SharedMemory};
use crate::error::{Error, Result};
use crate::protocol::grpc::blocking::GrpcClient;
use crate::protocol::grpc::pb::inference as pb;
use crate::protocol::http1::blocking::BlockingClient;
use crate::service::triton_grpc::decode;
use crate::service::triton_http::error_message;
use crate::transport::TlsClient;
use prost::Message;

use super::cuda::CudaRegion;
use super::system::Region;

/// Where a session's regions live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionKind {
    /// POSIX shared memory on the server's host (`--shared-memory system`).
    System,
    /// Device memory on this CUDA device, shared by IPC handle (`--shared-memory cuda`).
    Cuda { device: i32 },
}

impl RegionKind {
    /// The kind `--shared-memory` asks for; `None` for `none`.
    pub fn of(cfg: &Config) -> Option<RegionKind> {
        match cfg.shared_memory {
            SharedMemory::None => None,
            SharedMemory::System => Some(RegionKind::System),
            SharedMemory::Cuda => Some(RegionKind::Cuda {
                device: cfg.cuda_device,
            }),
        }
    }

    /// The `--shared-memory` value, for messages.
    pub fn flag_value(self) -> &'static str {
        match self {
            RegionKind::System => "system",
            RegionKind::Cuda { .. } => "cuda",
        }
    }
}

/// Connect and per-call timeout of the registration connection (as the setup connection's).
const CONTROL_TIMEOUT: Duration = Duration::from_secs(2);

/// The connection regions are registered and unregistered on: Triton's shared memory
/// extension over HTTP or gRPC, on a connection of its own (not the setup one).
pub enum Control {
    Http(Box<BlockingClient>),
    Grpc(GrpcClient),
}

impl Control {
    /// Connects to `host` over the kind's shared memory API.
    pub fn connect(host: &str, api: ShmApi, tls: Option<&TlsClient>) -> Result<Control> {
        Ok(match api {
            ShmApi::Http => Control::Http(Box::new(BlockingClient::connect_tls(
                host,
                CONTROL_TIMEOUT,
                tls,
            )?)),
            ShmApi::Grpc => Control::Grpc(GrpcClient::connect_tls(host, CONTROL_TIMEOUT, tls)?),
        })
    }
}

/// One region of a session.
pub enum SessionRegion {
    System(Region),
    Cuda(CudaRegion),
}

impl SessionRegion {
    pub fn name(&self) -> &str {
        match self {
            SessionRegion::System(r) => r.name(),
            SessionRegion::Cuda(r) => r.name(),
        }
    }

    /// Size in bytes (as registered).
    pub fn len(&self) -> usize {
        match self {
            SessionRegion::System(r) => r.len(),
            SessionRegion::Cuda(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of `len` bytes at `offset`.
    pub fn read(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        match self {
            SessionRegion::System(r) => r.read(offset, len).map(<[u8]>::to_vec),
            SessionRegion::Cuda(r) => r.read(offset, len),
        }
    }
}

/// The regions of a run and the connection that registered them.
pub struct ShmSession {
    control: Control,
    kind: RegionKind,
    regions: Vec<SessionRegion>,
    /// Names registered with the server (a prefix of `regions`' names, in order).
    registered: Vec<String>,
}

impl ShmSession {
    /// A system shared memory session registering through `control`.
    pub fn new(control: Control) -> ShmSession {
        ShmSession::with_kind(control, RegionKind::System)
    }

    /// A session of regions of `kind`.
    pub fn with_kind(control: Control, kind: RegionKind) -> ShmSession {
        ShmSession {
            control,
            kind,
            regions: Vec::new(),
            registered: Vec::new(),
        }
    }

    /// The session `cfg.shared_memory` asks for. For CUDA this loads the runtime and checks
    /// `--cuda-device` first, so a missing library or device fails before any region.
    pub fn for_run(control: Control, cfg: &Config) -> Result<ShmSession> {
        let kind = RegionKind::of(cfg)
            .ok_or_else(|| Error::usage("--shared-memory none: no shared memory session"))?;
        if let RegionKind::Cuda { device } = kind {
            super::cuda_ffi::runtime()?.use_device(device, super::cuda::DEVICE_FLAG)?;
        }
        Ok(ShmSession::with_kind(control, kind))
    }

    pub fn kind(&self) -> RegionKind {
        self.kind
    }

    /// Creates a region holding `data` (or `len` zero bytes when `data` is `None`),
    /// registers it, and returns its name.
    pub fn add(&mut self, name: &str, data: Option<&[u8]>, len: usize) -> Result<String> {
        let region = match (self.kind, data) {
            (RegionKind::System, Some(bytes)) => {
                SessionRegion::System(Region::with_data(name, bytes)?)
            }
            (RegionKind::System, None) => SessionRegion::System(Region::create(name, len)?),
            (RegionKind::Cuda { device }, Some(bytes)) => {
                SessionRegion::Cuda(CudaRegion::with_data(name, device, bytes)?)
            }
            (RegionKind::Cuda { device }, None) => {
                SessionRegion::Cuda(CudaRegion::create(name, device, len)?)
            }
        };
        // Kept before registering, so a failed registration still frees it.
        self.regions.push(region);
        let region = &self.regions[self.regions.len() - 1];
        match region {
            SessionRegion::System(r) => register(&mut self.control, r.name(), r.key(), r.len())?,
            SessionRegion::Cuda(r) => register_cuda(&mut self.control, r)?,
        }
        self.registered.push(region.name().to_string());
        Ok(region.name().to_string())
    }

    /// The regions created so far.
    pub fn regions(&self) -> &[SessionRegion] {
        &self.regions
    }

    /// Unregisters this run's regions. Stops at the first failure: a server that is gone or
    /// hung would otherwise cost a timeout per region.
    pub fn unregister_all(&mut self) -> Result<()> {
        for name in std::mem::take(&mut self.registered) {
            unregister(&mut self.control, &name, self.kind)?;
        }
        Ok(())
    }
}

impl Drop for ShmSession {
    /// Best effort: the server may be gone; the regions are freed either way (after
    /// unregistering, so the server never holds a handle to freed client memory).
    fn drop(&mut self) {
        if let Err(e) = self.unregister_all() {
            eprintln!("warning: unregistering shared memory: {e}");
        }
    }
}

/// `POST /v2/systemsharedmemory/region/<name>/register` or gRPC SystemSharedMemoryRegister.
pub fn register(control: &mut Control, name: &str, key: &str, len: usize) -> Result<()> {
    let fail = |why: String| {
        Error::generic(format!(
            "registering system shared memory region '{name}': {why}"
        ))
    };
    match control {
        Control::Http(c) => {
            let body = serde_json::json!({"key": key, "offset": 0, "byte_size": len}).to_string();
            let path = format!("/v2/systemsharedmemory/region/{name}/register");
            let headers = [("Content-Type".to_string(), "application/json".to_string())];
            match c.post(&path, &headers, body.as_bytes()) {
                Ok((200, _)) => Ok(()),
                Ok((s, b)) => Err(fail(error_message(s, &b))),
                Err(e) => Err(fail(e.msg)),
            }
        }
        Control::Grpc(c) => {
            let req = pb::SystemSharedMemoryRegisterRequest {
                name: name.into(),
                key: key.into(),
                offset: 0,
                byte_size: len as u64,
            };
            grpc(c, "SystemSharedMemoryRegister", &req)
                .and_then(|b| decode::<pb::SystemSharedMemoryRegisterResponse>(&b, "register"))
                .map(|_| ())
                .map_err(|e| fail(e.msg))
        }
    }
}

/// `POST /v2/{system|cuda}sharedmemory/region/<name>/unregister`, or gRPC
/// SystemSharedMemoryUnregister / CudaSharedMemoryUnregister.
pub fn unregister(control: &mut Control, name: &str, kind: RegionKind) -> Result<()> {
    let (what, extension) = match kind {
        RegionKind::System => ("region", "systemsharedmemory"),
        RegionKind::Cuda { .. } => ("CUDA region", "cudasharedmemory"),
    };
    let fail = |why: String| Error::generic(format!("{what} '{name}': {why}"));
    match control {
        Control::Http(c) => {
            let path = format!("/v2/{extension}/region/{name}/unregister");
            match c.post(&path, &[], b"") {
                Ok((200, _)) => Ok(()),
                Ok((s, b)) => Err(fail(error_message(s, &b))),
                Err(e) => Err(fail(e.msg)),
            }
        }
        Control::Grpc(c) => {
            let sent = match kind {
                RegionKind::System => {
                    let req = pb::SystemSharedMemoryUnregisterRequest { name: name.into() };
                    grpc(c, "SystemSharedMemoryUnregister", &req)
                }
                RegionKind::Cuda { .. } => {
                    let req = pb::CudaSharedMemoryUnregisterRequest { name: name.into() };
                    grpc(c, "CudaSharedMemoryUnregister", &req)
                }
            };
            sent.map(|_| ()).map_err(|e| fail(e.msg))
        }
    }
}

/// `POST /v2/cudasharedmemory/region/<name>/register` with the base64 IPC handle, or gRPC
/// CudaSharedMemoryRegister with the raw 64 bytes.
pub fn register_cuda(control: &mut Control, region: &CudaRegion) -> Result<()> {
    let name = region.name();
    let fail = |why: String| {
        Error::generic(format!(
            "registering CUDA shared memory region '{name}': {why}"
        ))
    };
    match control {
        Control::Http(c) => {
            let b64 = base64::engine::general_purpose::STANDARD.encode(region.raw_handle());
            let body = serde_json::json!({
                "raw_handle": {"b64": b64},
                "device_id": region.device(),
                "byte_size": region.len(),
            })
            .to_string();
            let path = format!("/v2/cudasharedmemory/region/{name}/register");
            let headers = [("Content-Type".to_string(), "application/json".to_string())];
            match c.post(&path, &headers, body.as_bytes()) {
                Ok((200, _)) => Ok(()),
                Ok((s, b)) => Err(fail(error_message(s, &b))),
                Err(e) => Err(fail(e.msg)),
            }
        }
        Control::Grpc(c) => {
            let req = pb::CudaSharedMemoryRegisterRequest {
                name: name.into(),
                raw_handle: region.raw_handle().to_vec(),
                device_id: i64::from(region.device()),
                byte_size: region.len() as u64,
            };
            grpc(c, "CudaSharedMemoryRegister", &req)
                .and_then(|b| decode::<pb::CudaSharedMemoryRegisterResponse>(&b, "register"))
                .map(|_| ())
                .map_err(|e| fail(e.msg))
        }
    }
}

fn grpc<Q: Message>(c: &mut GrpcClient, method: &str, req: &Q) -> Result<Vec<u8>> {
    c.unary(method, &req.encode_to_vec())
}
