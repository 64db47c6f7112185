//! Shared helpers for the integration tests: an in-process reference server and configs.
#![allow(dead_code)]

pub mod mpi;
pub mod pki;
pub mod scripted;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use inferperf::config::{ConcurrencyRange, Config, MeasurementMode};
use inferperf::server::{self, ServeConfig, ServerHandle};

pub fn start_server() -> ServerHandle {
    start_server_with(Vec::new())
}

pub fn start_server_with(delays: Vec<(String, server::Delay)>) -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        pin_cores: Vec::new(),
        delays,
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

/// A reference server with its gRPC endpoint on an ephemeral port; `tls` turns TLS on for
/// both ports.
pub fn start_grpc_server_with(
    delays: Vec<(String, server::Delay)>,
    tls: Option<server::TlsFiles>,
) -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        grpc_addr: Some("127.0.0.1:0".parse().unwrap()),
        delays,
        tls,
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

pub fn start_grpc_server(delays: Vec<(String, server::Delay)>) -> ServerHandle {
    start_grpc_server_with(delays, None)
}

/// A config for `model` against `server` that measures quickly: count windows of `n`
/// requests checked every 5 ms, loose stability, no pinning (tests share the machine).
pub fn quick_config(server: &ServerHandle, model: &str, n: u64) -> Config {
    Config {
        model_name: model.into(),
        url: server.addr.to_string(),
        measurement_mode: MeasurementMode::CountWindows,
        measurement_request_count: n,
        // Look at the count every 5 ms instead of every second, so tests stay fast.
        count_check_ms: 5,
        stability_threshold: 10.0,
        max_trials: 10,
        pin_threads: false,
        ready_timeout_s: 2,
        concurrency: ConcurrencyRange {
            start: 1,
            end: 1,
            step: 1,
        },
        ..Config::default()
    }
}

pub fn run(cfg: &Config) -> (inferperf::run::RunResult, String) {
    let mut out = Vec::new();
    let res =
        inferperf::run::run(cfg, &mut out, Arc::new(AtomicBool::new(false))).expect("run succeeds");
    (res, String::from_utf8(out).unwrap())
}

/// A fresh, empty temporary directory for report files (kept after the test; use [`Scratch`]
/// where a run writes large exports).
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("inferperf-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A temporary directory named `<prefix>-<pid>`, emptied on creation and removed with
/// everything in it on drop (exports of fast runs reach hundreds of MB). Keep the value bound
/// for as long as the files are used.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(prefix: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn model_counters(server: &ServerHandle, model: &str) -> server::ModelCounters {
    server
        .counters()
        .per_model
        .into_iter()
        .find(|m| m.name == model)
        .expect("model has counters")
}

/// `inferperf serve --port 0` as a child process (stops by itself after 120 s); returns it and
/// the `host:port` it printed.
pub fn spawn_serve() -> (Child, String) {
    let (child, http, _) = spawn_serve_grpc();
    (child, http)
}

/// The gRPC address on `inferperf serve`'s startup line (`... and gRPC host:port ...`).
pub fn grpc_address_of(line: &str) -> Option<String> {
    line.split(" and gRPC ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .map(str::to_string)
}

/// `inferperf serve --port 0` as a child process (stops by itself after 120 s); returns it,
/// its HTTP `host:port` and its gRPC `host:port`.
pub fn spawn_serve_grpc() -> (Child, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["serve", "--port", "0", "--duration", "120"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let http = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("serve prints its address")
        .to_string();
    let grpc = grpc_address_of(&line).expect("serve prints its gRPC address");
    (child, http, grpc)
}

/// Every request's latency (ns) in a profile export, sorted: from its send to its last
/// response, over every experiment.
pub fn export_latencies(path: &std::path::Path) -> Vec<u64> {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut lat: Vec<u64> = doc["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["requests"].as_array().unwrap().iter())
        .map(|r| {
            let sent = r["timestamp"].as_u64().unwrap();
            let last = r["response_timestamps"].as_array().unwrap().last().unwrap();
            last.as_u64().unwrap() - sent
        })
        .collect();
    lat.sort_unstable();
    lat
}

/// Waits for `child` to exit while stopping it (SIGSTOP) for `stop` after every `run` it
/// gets (SIGCONT): a client whose responses arrive while it cannot read them. The stops begin
/// once `begun` says so (the child's start-up runs at full speed).
pub fn wait_stopping(
    child: &mut Child,
    run: std::time::Duration,
    stop: std::time::Duration,
    begun: impl Fn() -> bool,
) -> std::process::ExitStatus {
    let pid = child.id() as libc::pid_t;
    while !begun() {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(run);
        // SAFETY: `pid` is our child, not yet reaped (try_wait above saw it running), so the
        // id cannot have been reused.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(stop);
        // SAFETY: as above; the child is stopped, so it has not exited since.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
}
