//! The client's regions for one run: created, filled, registered with the server, and on
//! drop (every exit path of the run) unregistered by name and unlinked. We never unregister
//! regions we did not register, unlike perf_analyzer's "unregister all" (spec §6.1 quirk).

use crate::error::{Error, Result};
use crate::protocol::grpc::pb::inference as pb;
use crate::run::setup::SetupClient;
use crate::service::triton_grpc::decode;
use crate::service::triton_http::error_message;
use prost::Message;

use super::system::Region;

/// The regions of a run and the connection that registered them.
pub struct ShmSession {
    control: SetupClient,
    regions: Vec<Region>,
    /// Names registered with the server (a prefix of `regions`' names, in order).
    registered: Vec<String>,
}

impl ShmSession {
    /// A session registering through `control` (its own connection, not the setup one).
    pub fn new(control: SetupClient) -> ShmSession {
        ShmSession {
            control,
            regions: Vec::new(),
            registered: Vec::new(),
        }
    }

    /// Creates a region holding `data` (or `len` zero bytes when `data` is `None`),
    /// registers it, and returns its name.
    pub fn add(&mut self, name: &str, data: Option<&[u8]>, len: usize) -> Result<String> {
        let region = match data {
            Some(bytes) => Region::with_data(name, bytes)?,
            None => Region::create(name, len)?,
        };
        // Kept before registering, so a failed registration still unlinks it.
        self.regions.push(region);
        let region = &self.regions[self.regions.len() - 1];
        register(&mut self.control, region.name(), region.key(), region.len())?;
        self.registered.push(region.name().to_string());
        Ok(region.name().to_string())
    }

    /// The regions created so far.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// Unregisters our regions. Stops at the first failure: a server that is gone or
    /// hung would otherwise cost a timeout per region.
    pub fn unregister_all(&mut self) -> Result<()> {
        for name in std::mem::take(&mut self.registered) {
            unregister(&mut self.control, &name)?;
        }
        Ok(())
    }
}

impl Drop for ShmSession {
    /// Best effort: the server may be gone; the regions are unlinked either way.
    fn drop(&mut self) {
        if let Err(e) = self.unregister_all() {
            eprintln!("warning: unregistering shared memory: {e}");
        }
    }
}

/// `POST /v2/systemsharedmemory/region/<name>/register` or gRPC SystemSharedMemoryRegister.
pub fn register(control: &mut SetupClient, name: &str, key: &str, len: usize) -> Result<()> {
    let fail = |why: String| {
        Error::generic(format!(
            "registering system shared memory region '{name}': {why}"
        ))
    };
    match control {
        SetupClient::Http(c) => {
            let body = serde_json::json!({"key": key, "offset": 0, "byte_size": len}).to_string();
            let path = format!("/v2/systemsharedmemory/region/{name}/register");
            let headers = [("Content-Type".to_string(), "application/json".to_string())];
            match c.post(&path, &headers, body.as_bytes()) {
                Ok((200, _)) => Ok(()),
                Ok((s, b)) => Err(fail(error_message(s, &b))),
                Err(e) => Err(fail(e.msg)),
            }
        }
        SetupClient::Grpc(c) => {
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
        SetupClient::Capi(_) => Err(fail("not supported with the C API".into())),
    }
}

/// `POST /v2/systemsharedmemory/region/<name>/unregister` or SystemSharedMemoryUnregister.
pub fn unregister(control: &mut SetupClient, name: &str) -> Result<()> {
    let fail = |why: String| Error::generic(format!("region '{name}': {why}"));
    match control {
        SetupClient::Http(c) => {
            let path = format!("/v2/systemsharedmemory/region/{name}/unregister");
            match c.post(&path, &[], b"") {
                Ok((200, _)) => Ok(()),
                Ok((s, b)) => Err(fail(error_message(s, &b))),
                Err(e) => Err(fail(e.msg)),
            }
        }
        SetupClient::Grpc(c) => {
            let req = pb::SystemSharedMemoryUnregisterRequest { name: name.into() };
            grpc(c, "SystemSharedMemoryUnregister", &req)
                .map(|_| ())
                .map_err(|e| fail(e.msg))
        }
        SetupClient::Capi(_) => Ok(()),
    }
}

fn grpc<Q: Message>(
    c: &mut crate::protocol::grpc::blocking::GrpcClient,
    method: &str,
    req: &Q,
) -> Result<Vec<u8>> {
    c.unary(method, &req.encode_to_vec())
}
