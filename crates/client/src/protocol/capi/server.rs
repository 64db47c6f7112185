//! The in-process Triton server: created from `--triton-server-directory` and
//! `--model-repository` with perf_analyzer's options, queried for metadata, config and
//! statistics as JSON (the same documents the HTTP endpoints return), and shut down on drop.

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::ffi::{Api, TsAllocator, TsMessage, TsServer};
use super::outputs::{host_alloc, host_release};
use crate::error::{Error, Result};

/// perf_analyzer's CUDA memory pool for GPU 0: 1 GiB.
const CUDA_POOL_BYTES: u64 = 1 << 30;
/// Readiness polls after `ServerNew`, and the pause between them.
const READY_POLLS: u32 = 10;
const READY_PAUSE: Duration = Duration::from_millis(500);
/// The model-config format `ServerModelConfig` is asked for (the only one Triton has).
const CONFIG_VERSION: u32 = 1;

/// Where the server comes from and what it loads.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// `--triton-server-directory`: holds `lib/libtritonserver.so`, `backends/`, `repoagents/`.
    pub server_dir: PathBuf,
    /// `--model-repository`.
    pub model_repository: PathBuf,
    /// Server log verbosity (`-v -v` turns it on).
    pub log_verbose: i32,
    pub log_info: bool,
    /// Model unloaded when the server is dropped (perf_analyzer unloads what it profiled).
    pub unload_model: Option<String>,
}

impl ServerOptions {
    /// `<server_dir>/lib/libtritonserver.so`.
    pub fn library_path(&self) -> PathBuf {
        self.server_dir.join("lib").join("libtritonserver.so")
    }
}

/// A running in-process server. It is shared by every worker (`Arc`): the C API is
/// thread-safe, and every request goes through it.
pub struct Server {
    pub(super) api: Arc<Api>,
    pub(super) raw: *mut TsServer,
    /// One response allocator for every request: host memory from `malloc`.
    pub(super) allocator: *mut TsAllocator,
    unload_model: Option<CString>,
}

// SAFETY: Triton's server, allocator and API table may be used from any thread at once
// (tritonserver.h: "the server object is thread-safe"); the raw pointers are owned here and
// freed only in `Drop`, after every user has gone.
unsafe impl Send for Server {}
unsafe impl Sync for Server {}

impl Server {
    /// Loads the library, creates the server with perf_analyzer's options and waits until it
    /// is live and ready (up to 10 × 500 ms).
    pub fn start(opts: &ServerOptions) -> Result<Arc<Server>> {
        let lib = opts.library_path();
        let api = Arc::new(Api::load(&path_text(&lib, "--triton-server-directory")?)?);
        let raw = create(&api, opts)?;
        let mut server = Server {
            api: api.clone(),
            raw,
            allocator: std::ptr::null_mut(),
            unload_model: None,
        };
        let mut allocator = std::ptr::null_mut();
        // SAFETY: the callbacks match the allocator signatures and never unwind.
        let err =
            unsafe { (api.response_allocator_new)(&mut allocator, host_alloc, host_release, None) };
        api.check(err)
            .map_err(|e| Error::generic(format!("TRITONSERVER_ResponseAllocatorNew: {e}")))?;
        server.allocator = allocator;
        server.wait_ready()?;
        server.unload_model = match &opts.unload_model {
            Some(m) => Some(c_string(m, "-m")?),
            None => None,
        };
        Ok(Arc::new(server))
    }

    /// Polls liveness and readiness: perf_analyzer's 10 tries, 500 ms apart.
    fn wait_ready(&self) -> Result<()> {
        let mut last = String::new();
        for attempt in 0..READY_POLLS {
            if attempt > 0 {
                std::thread::sleep(READY_PAUSE);
            }
            let (mut live, mut ready) = (false, false);
            // SAFETY: `raw` is a live server; the out-pointers are valid for writes.
            let err = unsafe { (self.api.server_is_live)(self.raw, &mut live) };
            if let Err(e) = self.api.check(err) {
                last = format!("TRITONSERVER_ServerIsLive: {e}");
                continue;
            }
            // SAFETY: as above.
            let err = unsafe { (self.api.server_is_ready)(self.raw, &mut ready) };
            if let Err(e) = self.api.check(err) {
                last = format!("TRITONSERVER_ServerIsReady: {e}");
                continue;
            }
            if live && ready {
                return Ok(());
            }
            last = format!("live {live}, ready {ready}");
        }
        Err(Error::generic(format!(
            "the in-process Triton server did not become ready ({last})"
        )))
    }

    /// `TRITONSERVER_ServerMetadata` as JSON.
    pub fn metadata_json(&self) -> Result<String> {
        let mut msg = std::ptr::null_mut();
        // SAFETY: `raw` is live; `msg` receives a message the caller owns.
        let err = unsafe { (self.api.server_metadata)(self.raw, &mut msg) };
        self.message("TRITONSERVER_ServerMetadata", err, msg)
    }

    /// `TRITONSERVER_ServerModelMetadata` as JSON (`version` "" = the server's choice).
    pub fn model_metadata_json(&self, model: &str, version: &str) -> Result<String> {
        let (name, v) = (c_string(model, "-m")?, version_number(version)?);
        let mut msg = std::ptr::null_mut();
        // SAFETY: `raw` is live; `name` outlives the call; `msg` receives a message the caller
        // owns.
        let err = unsafe { (self.api.server_model_metadata)(self.raw, name.as_ptr(), v, &mut msg) };
        self.message(&format!("model '{model}' metadata"), err, msg)
    }

    /// `TRITONSERVER_ServerModelConfig` as JSON.
    pub fn model_config_json(&self, model: &str, version: &str) -> Result<String> {
        let (name, v) = (c_string(model, "-m")?, version_number(version)?);
        let mut msg = std::ptr::null_mut();
        // SAFETY: as in `model_metadata_json`.
        let err = unsafe {
            (self.api.server_model_config)(self.raw, name.as_ptr(), v, CONFIG_VERSION, &mut msg)
        };
        self.message(&format!("model '{model}' config"), err, msg)
    }

    /// `TRITONSERVER_ServerModelStatistics` as JSON; an empty `model` asks for every model.
    pub fn model_statistics_json(&self, model: &str, version: &str) -> Result<String> {
        let (name, v) = (c_string(model, "-m")?, version_number(version)?);
        let mut msg = std::ptr::null_mut();
        // SAFETY: as in `model_metadata_json`.
        let err =
            unsafe { (self.api.server_model_statistics)(self.raw, name.as_ptr(), v, &mut msg) };
        self.message("server statistics", err, msg)
    }

    /// Serialises and deletes a returned message.
    fn message(&self, what: &str, err: super::ffi::ErrPtr, msg: *mut TsMessage) -> Result<String> {
        self.api
            .check(err)
            .map_err(|e| Error::generic(format!("{what}: {e}")))?;
        if msg.is_null() {
            return Err(Error::generic(format!(
                "{what}: the server returned no message"
            )));
        }
        let (mut base, mut len): (*const c_char, usize) = (std::ptr::null(), 0);
        // SAFETY: `msg` is a live message owned here; `base[..len]` stays valid until it is
        // deleted, and is copied before that.
        let text = unsafe {
            let err = (self.api.message_serialize_to_json)(msg, &mut base, &mut len);
            let text = self.api.check(err).map(|()| {
                if base.is_null() {
                    String::new()
                } else {
                    let bytes = std::slice::from_raw_parts(base.cast::<u8>(), len);
                    String::from_utf8_lossy(bytes).into_owned()
                }
            });
            let _ = self.api.check((self.api.message_delete)(msg));
            text
        };
        text.map_err(|e| {
            Error::generic(format!("{what}: TRITONSERVER_MessageSerializeToJson: {e}"))
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let api = &self.api;
        // SAFETY: every request has been released (the pools wait for that before they drop
        // their `Arc<Server>`), so nothing uses the allocator or the server any more.
        unsafe {
            if let Some(model) = &self.unload_model {
                let _ = api.check((api.server_unload_model)(self.raw, model.as_ptr()));
            }
            if !self.allocator.is_null() {
                let _ = api.check((api.response_allocator_delete)(self.allocator));
            }
            let _ = api.check((api.server_delete)(self.raw));
        }
    }
}

/// Options → `TRITONSERVER_ServerNew`, as perf_analyzer sets them.
fn create(api: &Api, opts: &ServerOptions) -> Result<*mut TsServer> {
    let flag = "--triton-server-directory";
    let repo = c_string(
        &path_text(&opts.model_repository, "--model-repository")?,
        "--model-repository",
    )?;
    let backends = c_string(&path_text(&opts.server_dir.join("backends"), flag)?, flag)?;
    let agents = c_string(&path_text(&opts.server_dir.join("repoagents"), flag)?, flag)?;
    let fail = |call: &str, e: String| Error::generic(format!("TRITONSERVER_{call}: {e}"));
    let mut options = std::ptr::null_mut();
    // SAFETY: `options` receives an object owned here and deleted below.
    api.check(unsafe { (api.options_new)(&mut options) })
        .map_err(|e| fail("ServerOptionsNew", e))?;
    // SAFETY: `options` is live until deleted at the end; the strings outlive every call.
    let set = unsafe {
        [
            (
                "SetModelRepositoryPath",
                (api.options_set_model_repository_path)(options, repo.as_ptr()),
            ),
            (
                "SetCudaMemoryPoolByteSize",
                (api.options_set_cuda_memory_pool_byte_size)(options, 0, CUDA_POOL_BYTES),
            ),
            (
                "SetLogVerbose",
                (api.options_set_log_verbose)(options, opts.log_verbose),
            ),
            (
                "SetLogInfo",
                (api.options_set_log_info)(options, opts.log_info),
            ),
            (
                "SetBackendDirectory",
                (api.options_set_backend_directory)(options, backends.as_ptr()),
            ),
            (
                "SetRepoAgentDirectory",
                (api.options_set_repo_agent_directory)(options, agents.as_ptr()),
            ),
            (
                "SetStrictModelConfig",
                (api.options_set_strict_model_config)(options, true),
            ),
            (
                "SetMinSupportedComputeCapability",
                (api.options_set_min_supported_compute_capability)(options, 0.0),
            ),
        ]
    };
    let mut first_error = None;
    for (call, err) in set {
        if let Err(e) = api.check(err) {
            first_error.get_or_insert_with(|| fail(&format!("ServerOptions{call}"), e));
        }
    }
    let mut server = std::ptr::null_mut();
    if first_error.is_none() {
        // SAFETY: `options` is complete; `server` receives a server owned here.
        if let Err(e) = api.check(unsafe { (api.server_new)(&mut server, options) }) {
            first_error = Some(fail("ServerNew", e));
        }
    }
    // SAFETY: the options are no longer needed once the server exists (or failed).
    let _ = api.check(unsafe { (api.options_delete)(options) });
    match first_error {
        Some(e) => Err(e),
        None if server.is_null() => Err(fail("ServerNew", "no server returned".into())),
        None => Ok(server),
    }
}

/// A model version for the C API: "" is -1 (the server picks), else a number.
pub fn version_number(version: &str) -> Result<i64> {
    if version.is_empty() {
        return Ok(-1);
    }
    version.parse::<i64>().map_err(|_| {
        Error::usage(format!(
            "-x {version}: the C API needs a numeric model version"
        ))
    })
}

fn c_string(s: &str, flag: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::usage(format!("{flag} {s:?}: contains a NUL byte")))
}

fn path_text(path: &Path, flag: &str) -> Result<String> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::usage(format!("{flag} {}: not a UTF-8 path", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_paths() {
        assert_eq!(version_number("").unwrap(), -1);
        assert_eq!(version_number("3").unwrap(), 3);
        assert!(version_number("latest").is_err());
        let opts = ServerOptions {
            server_dir: "/opt/tritonserver".into(),
            model_repository: "/models".into(),
            log_verbose: 0,
            log_info: false,
            unload_model: None,
        };
        assert_eq!(
            opts.library_path(),
            PathBuf::from("/opt/tritonserver/lib/libtritonserver.so")
        );
        assert!(c_string("a\0b", "-m").is_err());
    }
}
