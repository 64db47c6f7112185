//! `--shared-memory cuda` end to end, without a GPU: `tests/cuda_stub/cudart_stub.c` is
//! built with gcc (tests skip without it) and both the client and the reference server load
//! it through `INFERPERF_CUDART_LIB`. The stub's "device memory" is a POSIX object per
//! allocation, so the server really opens the client's IPC handles and copies through them.
//!
//! Checked: the server read every staged input and wrote every output through the regions
//! (HTTP and gRPC, in process and from the binary), the client's regions are unregistered and freed
//! at the end and after Ctrl-C (no live stub allocation, nothing left in /dev/shm), and the
//! errors for a missing device, a missing library and a server without CUDA.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{model_counters, quick_config, start_grpc_server};
use inferperf::config::{Config, Protocol, SharedMemory};
use inferperf::server::ServerHandle;

/// Bytes of one `simple` request's inputs (two INT32[16], batch 1); its outputs are as big.
const SIMPLE_BYTES: u64 = 2 * 16 * 4;

/// The in-process runs share one stub instance (its allocation counter): one at a time.
static IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The stub, built once per test process and named in `INFERPERF_CUDART_LIB` (so this
/// process, and children spawned after, load it); `None` without gcc.
fn stub() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cuda_stub/cudart_stub.c");
            let dir = common::temp_dir("cudastub");
            let lib = dir.join("libcudart.so");
            let status = Command::new("gcc")
                .args(["-shared", "-fPIC", "-O2", "-o"])
                .arg(&lib)
                .arg(&src)
                .args(["-lpthread", "-lrt"])
                .status();
            match status {
                Ok(s) if s.success() => {
                    std::env::set_var("INFERPERF_CUDART_LIB", &lib);
                    Some(lib)
                }
                Ok(s) => panic!("gcc failed to build the CUDA stub: {s}"),
                Err(e) => {
                    eprintln!("skipped: gcc is not available ({e})");
                    None
                }
            }
        })
        .as_deref()
}

/// Allocations of the stub in this process not freed yet.
fn live_allocations(lib: &Path) -> i32 {
    // SAFETY: the stub is already loaded by the run (same path, same instance); its counter
    // function takes nothing and returns an int.
    unsafe {
        let lib = libloading::Library::new(lib).unwrap();
        let count: libloading::Symbol<unsafe extern "C" fn() -> i32> =
            lib.get(b"inferperf_cudastub_live_allocations\0").unwrap();
        count()
    }
}

/// The stub's objects of process `pid` still in /dev/shm.
fn leftovers(pid: u32) -> Vec<String> {
    let prefix = format!("ipcudastub_{pid}_");
    std::fs::read_dir("/dev/shm")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn cuda_config(server: &ServerHandle, protocol: Protocol) -> Config {
    let mut cfg = quick_config(server, "simple", 40);
    cfg.shared_memory = SharedMemory::Cuda;
    cfg.protocol = protocol;
    if protocol == Protocol::Grpc {
        cfg.url = server.grpc_addr.expect("gRPC endpoint").to_string();
    }
    cfg.concurrency.start = 2;
    cfg.concurrency.end = 2;
    cfg
}

fn run_succeeds_with(protocol: Protocol) {
    let Some(lib) = stub() else { return };
    let _serial = one_at_a_time();
    let server = start_grpc_server(Vec::new());
    let cfg = cuda_config(&server, protocol);
    let mut out = Vec::new();
    let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false)))
        .expect("run succeeds");
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(!res.points.is_empty());
    let served = model_counters(&server, "simple");
    assert!(served.inferences >= 40, "{served:?}");
    assert_eq!(served.failures, 0);
    let (registered, read, written) = server.cuda_shm_traffic();
    // Every request's inputs came out of the client's device regions and its outputs went into
    // them.
    assert_eq!(read, served.inferences * SIMPLE_BYTES, "{protocol:?}");
    assert_eq!(written, served.inferences * SIMPLE_BYTES, "{protocol:?}");
    assert_eq!(served.input_bytes, read);
    assert_eq!(server.shm_traffic(), (0, 0, 0), "no system region involved");
    assert_eq!(registered, 0, "our regions were unregistered");
    assert_eq!(live_allocations(lib), 0, "every cudaMalloc was freed");
    assert_eq!(leftovers(std::process::id()), Vec::<String>::new());
}

#[test]
fn http_run_goes_through_cuda_shared_memory() {
    run_succeeds_with(Protocol::Http);
}

#[test]
fn grpc_run_goes_through_cuda_shared_memory() {
    run_succeeds_with(Protocol::Grpc);
}

/// The binary against `url` with `--shared-memory cuda` and `extra` flags; `lib` is its
/// `INFERPERF_CUDART_LIB`. Returns its pid too.
fn binary(url: &str, extra: &[&str], lib: &str) -> (u32, Output) {
    let child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args([
            "-m",
            "simple",
            "-u",
            url,
            "--no-pin",
            "--shared-memory",
            "cuda",
        ])
        .args(["--measurement-mode", "count_windows"])
        .args(["--measurement-request-count", "30", "-s", "1000"])
        .args(extra)
        .env("INFERPERF_CUDART_LIB", lib)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let pid = child.id();
    (pid, child.wait_with_output().expect("the binary ends"))
}

#[test]
fn the_binary_shares_device_memory_with_another_process() {
    let Some(lib) = stub() else { return };
    let _serial = one_at_a_time();
    let server = start_grpc_server(Vec::new());
    let url = server.addr.to_string();
    let (pid, out) = binary(&url, &["--cuda-device", "0"], lib.to_str().unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let served = model_counters(&server, "simple");
    let (registered, read, written) = server.cuda_shm_traffic();
    assert!(served.inferences >= 30, "{served:?}");
    assert_eq!(read, served.inferences * SIMPLE_BYTES);
    assert_eq!(written, served.inferences * SIMPLE_BYTES);
    assert_eq!(registered, 0);
    // The child's objects are named with its pid: none may survive it.
    assert_eq!(leftovers(pid), Vec::<String>::new());
}

#[test]
fn a_device_that_does_not_exist_is_a_clear_error() {
    let Some(lib) = stub() else { return };
    let server = start_grpc_server(Vec::new());
    let url = server.addr.to_string();
    let (_, out) = binary(&url, &["--cuda-device", "3"], lib.to_str().unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("--cuda-device 3: no such CUDA device (1 device(s)"),
        "{stderr}"
    );
    assert_eq!(model_counters(&server, "simple").inferences, 0);
    assert_eq!(server.cuda_shm_traffic().0, 0);
}

#[test]
fn a_missing_library_is_named_in_the_error() {
    let server = start_grpc_server(Vec::new());
    let missing = "/nonexistent/inferperf/libcudart.so";
    let (_, out) = binary(&server.addr.to_string(), &[], missing);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("--shared-memory cuda needs CUDA: none of"),
        "{stderr}"
    );
    assert!(stderr.contains(missing), "{stderr}");
    assert_eq!(model_counters(&server, "simple").inferences, 0);
}

#[test]
fn a_server_without_cuda_refuses_the_registration() {
    let Some(lib) = stub() else { return };
    // `inferperf serve` as a child whose CUDA runtime cannot be loaded.
    let mut serve = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["serve", "--port", "0", "--duration", "60"])
        .env(
            "INFERPERF_CUDART_LIB",
            "/nonexistent/inferperf/libcudart.so",
        )
        .stdout(Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(serve.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("serve prints its address")
        .to_string();
    let (pid, out) = binary(&url, &[], lib.to_str().unwrap());
    let _ = serve.kill();
    let _ = serve.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("registering CUDA shared memory region"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the server cannot load the CUDA runtime"),
        "{stderr}"
    );
    // The region whose registration failed was freed all the same.
    assert_eq!(leftovers(pid), Vec::<String>::new());
}

#[test]
fn ctrl_c_frees_and_unregisters_our_regions() {
    let Some(lib) = stub() else { return };
    let server = start_grpc_server(Vec::new());
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["-m", "simple", "-u", &server.addr.to_string(), "--no-pin"])
        .args(["--shared-memory", "cuda", "-p", "60000"])
        .env("INFERPERF_CUDART_LIB", lib)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let limit = Instant::now() + Duration::from_secs(10);
    while server.cuda_shm_traffic().1 == 0 && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!leftovers(pid).is_empty(), "the run allocated no regions");
    assert!(
        server.cuda_shm_traffic().0 > 0,
        "the run registered no regions"
    );
    // SAFETY: sending a signal to a child process this test spawned.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let limit = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status.code();
        }
        if Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
    assert_eq!(server.cuda_shm_traffic().0, 0, "regions unregistered");
    assert_eq!(leftovers(pid), Vec::<String>::new());
}

/// One HTTP/1.1 request on a fresh connection: (status, body).
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

#[test]
fn a_handle_broken_into_lines_registers_over_http() {
    use base64::Engine as _;
    let Some(_) = stub() else { return };
    let _one = one_at_a_time();
    let server = start_grpc_server(Vec::new());
    let addr = server.addr.to_string();
    let region = inferperf::shm::cuda::CudaRegion::with_data("lines", 0, b"0123456789").unwrap();
    // perf_analyzer's base64 encoder ends a line after every 72 characters.
    let b64 = base64::engine::general_purpose::STANDARD.encode(region.raw_handle());
    let lines: Vec<String> = b64
        .as_bytes()
        .chunks(72)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    assert!(lines.len() > 1);
    let body = serde_json::json!({"raw_handle": {"b64": lines.join("\n") + "\n"},
        "device_id": 0, "byte_size": 10});
    let path = "/v2/cudasharedmemory/region/lines/register";
    assert_eq!(
        http(&addr, "POST", path, &body.to_string()),
        (200, String::new())
    );
    let (status, text) = http(&addr, "GET", "/v2/cudasharedmemory/region/lines/status", "");
    assert_eq!(status, 200, "{text}");
    let listed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(listed[0]["name"], "lines");
    assert_eq!(listed[0]["byte_size"], 10);
    let unregister = "/v2/cudasharedmemory/region/lines/unregister";
    assert_eq!(http(&addr, "POST", unregister, "").0, 200);
}
