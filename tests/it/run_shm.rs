//! `--shared-memory system` end to end against the reference server: the server reads the
//! inputs the client staged and writes the outputs into its regions, over HTTP and gRPC; each
//! request in flight has its own output regions, so validation data is checked; the
//! client's regions are unregistered and gone from /dev/shm after success, after a server error,
//! and after Ctrl-C (once, and twice) of the binary.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{model_counters, quick_config, start_grpc_server, temp_dir};
use inferperf::config::{Config, InputData, LoadMode, Protocol, RateRange, SharedMemory};
use inferperf::server::ServerHandle;
use serde_json::{json, Value};

/// The in-process runs share this process's region prefix: one at a time, so one run's
/// live regions are not taken for another's leftovers.
static IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes of one `simple` request's inputs (two INT32[16], batch 1); its outputs are as big.
const SIMPLE_BYTES: u64 = 2 * 16 * 4;

/// The client's regions (of process `pid`) still in /dev/shm.
fn leftovers(pid: u32) -> Vec<String> {
    let prefix = format!("inferperf_{pid}_");
    std::fs::read_dir("/dev/shm")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn shm_config(server: &ServerHandle, model: &str, protocol: Protocol) -> Config {
    let mut cfg = quick_config(server, model, 40);
    cfg.shared_memory = SharedMemory::System;
    cfg.protocol = protocol;
    if protocol == Protocol::Grpc {
        cfg.url = server.grpc_addr.expect("gRPC endpoint").to_string();
    }
    cfg.concurrency.start = 2;
    cfg.concurrency.end = 2;
    cfg
}

fn run_succeeds_with(protocol: Protocol) {
    let _serial = one_at_a_time();
    let server = start_grpc_server(Vec::new());
    let cfg = shm_config(&server, "simple", protocol);
    let mut out = Vec::new();
    let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false)))
        .expect("run succeeds");
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(!res.points.is_empty());
    let served = model_counters(&server, "simple");
    assert!(served.inferences >= 40, "{served:?}");
    assert_eq!(served.failures, 0);
    let (registered, read, written) = server.shm_traffic();
    // Every request's inputs came out of the client's regions and its outputs went into them.
    assert_eq!(read, served.inferences * SIMPLE_BYTES, "{protocol:?}");
    assert_eq!(written, served.inferences * SIMPLE_BYTES, "{protocol:?}");
    assert_eq!(served.input_bytes, read);
    assert_eq!(registered, 0, "our regions were unregistered");
    assert_eq!(leftovers(std::process::id()), Vec::<String>::new());
}

#[test]
fn http_run_goes_through_shared_memory() {
    run_succeeds_with(Protocol::Http);
}

#[test]
fn grpc_run_goes_through_shared_memory() {
    run_succeeds_with(Protocol::Grpc);
}

#[test]
fn server_error_still_cleans_up() {
    // identity_bytes has BYTES outputs: a 1-byte region per output cannot hold them, so the
    // server fails every request.
    let _serial = one_at_a_time();
    let server = start_grpc_server(Vec::new());
    for protocol in [Protocol::Http, Protocol::Grpc] {
        let mut cfg = shm_config(&server, "identity_bytes", protocol);
        cfg.output_shm_size = 1;
        cfg.shapes = vec![("INPUT0".into(), vec![2])];
        let mut out = Vec::new();
        let failed = match inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false))) {
            Ok(res) => res.error,
            Err(e) => Some(e),
        };
        let err = failed.expect("the run reports the server's error");
        assert!(err.msg.contains("should be at least"), "{err}");
        assert!(model_counters(&server, "identity_bytes").failures > 0);
        assert_eq!(
            server.shm_traffic().0,
            0,
            "{protocol:?}: regions unregistered"
        );
        assert_eq!(leftovers(std::process::id()), Vec::<String>::new());
    }
}

/// `simple` input data with validation data: three steps whose sums and differences
/// differ, so a response read from another request's region would not match. `wrong`:
/// the second step expects a wrong OUTPUT1.
fn validation_file(tag: &str, wrong: bool) -> std::path::PathBuf {
    let steps = [(5, 2), (1, 1), (9, -4)];
    let data: Vec<Value> = steps
        .iter()
        .map(|&(a, b)| json!({"INPUT0": vec![a; 16], "INPUT1": vec![b; 16]}))
        .collect();
    let validation: Vec<Value> = steps
        .iter()
        .enumerate()
        .map(|(i, &(a, b))| {
            let diff = if wrong && i == 1 { a - b + 1 } else { a - b };
            json!({"OUTPUT0": vec![a + b; 16], "OUTPUT1": vec![diff; 16]})
        })
        .collect();
    let path = temp_dir(tag).join("data.json");
    let doc = json!({"data": data, "validation_data": validation});
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

/// The run's outcome: Ok, or the error it ended with.
fn outcome(cfg: &Config) -> Result<(), String> {
    let mut out = Vec::new();
    match inferperf::run::run(cfg, &mut out, Arc::new(AtomicBool::new(false))) {
        Ok(res) => res.error.map_or(Ok(()), |e| Err(e.msg)),
        Err(e) => Err(e.msg),
    }
}

/// Distinct regions the server wrote `output` into.
fn output_regions(server: &ServerHandle, output: &str) -> usize {
    let tag = format!("_{output}_s");
    let names = server.shm_output_regions();
    names.iter().filter(|n| n.contains(&tag)).count()
}

/// Every exported response carries the outputs read from its slot's regions: OUTPUT0 is the
/// sum and OUTPUT1 the difference of that request's inputs.
fn check_export_outputs(path: &std::path::Path) {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let requests = doc["experiments"][0]["requests"].as_array().unwrap();
    assert!(!requests.is_empty());
    for r in requests {
        let input = |n: &str| r["request_inputs"][n][0].as_i64().unwrap();
        let (a, b) = (input("INPUT0"), input("INPUT1"));
        let out = &r["response_outputs"][0];
        assert_eq!(out["OUTPUT0"], json!(vec![a + b; 16]), "{r}");
        assert_eq!(out["OUTPUT1"], json!(vec![a - b; 16]), "{r}");
    }
}

fn slots_validate_outputs(protocol: Protocol) {
    let _serial = one_at_a_time();
    let server = start_grpc_server(Vec::new());
    let tag = format!("shm-slots-{protocol:?}");
    let mut cfg = shm_config(&server, "simple", protocol);
    cfg.concurrency.start = 4;
    cfg.concurrency.end = 4;
    cfg.input_data = InputData::Files(vec![validation_file(&tag, false)]);
    let export = temp_dir(&format!("{tag}-export")).join("export.json");
    cfg.profile_export_file = Some(export.clone());
    assert_eq!(outcome(&cfg), Ok(()), "{protocol:?}: matching data passes");
    check_export_outputs(&export);
    cfg.profile_export_file = None;
    // One region per output per request in flight, not one per input step (3 here).
    assert_eq!(output_regions(&server, "OUTPUT0"), 4, "{protocol:?}");
    assert_eq!(output_regions(&server, "OUTPUT1"), 4, "{protocol:?}");
    cfg.input_data = InputData::Files(vec![validation_file(&tag, true)]);
    let err = outcome(&cfg).expect_err("a wrong expectation fails the run");
    assert!(
        err.contains("Output doesn't match expected output (output 'OUTPUT1')"),
        "{protocol:?}: {err}"
    );
    assert_eq!(
        server.shm_traffic().0,
        0,
        "{protocol:?}: regions unregistered"
    );
    assert_eq!(leftovers(std::process::id()), Vec::<String>::new());
}

#[test]
fn http_slots_validate_outputs() {
    slots_validate_outputs(Protocol::Http);
}

#[test]
fn grpc_slots_validate_outputs() {
    slots_validate_outputs(Protocol::Grpc);
}

#[test]
fn rate_mode_needs_max_inflight_and_validates_within_it() {
    let _serial = one_at_a_time();
    let server = start_grpc_server(Vec::new());
    let mut cfg = shm_config(&server, "simple", Protocol::Http);
    cfg.load_mode = LoadMode::RequestRate;
    cfg.request_rate = RateRange {
        start: 400.0,
        end: 400.0,
        step: 1.0,
    };
    cfg.async_mode = true;
    cfg.input_data = InputData::Files(vec![validation_file("shm-slots-rate", false)]);
    let err = outcome(&cfg).expect_err("no --max-inflight");
    assert!(err.contains("needs --max-inflight"), "{err}");
    assert_eq!(server.shm_traffic().0, 0, "nothing registered");
    cfg.max_inflight = Some(3);
    assert_eq!(outcome(&cfg), Ok(()));
    let used = output_regions(&server, "OUTPUT0");
    assert!((1..=3).contains(&used), "{used} regions for 3 slots");
    assert_eq!(server.shm_traffic().0, 0, "regions unregistered");
    assert_eq!(leftovers(std::process::id()), Vec::<String>::new());
}

fn wait_bounded(child: &mut Child, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The binary under load, interrupted `presses` times; returns its exit code.
fn interrupted_binary(presses: u32) -> (Option<i32>, Vec<String>) {
    let (mut server, addr) = common::spawn_serve();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["-m", "simple", "-u", &addr, "-p", "60000", "--no-pin"])
        .args(["--shared-memory", "system", "--concurrency-range", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the regions exist (the run is set up and measuring).
    let start = Instant::now();
    while leftovers(pid).is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!leftovers(pid).is_empty(), "the run created no regions");
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..presses {
        // SAFETY: sending a signal to a child process this test spawned.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(100));
    }
    let code = wait_bounded(&mut child, Duration::from_secs(30));
    let _ = server.kill();
    let _ = server.wait();
    (code, leftovers(pid))
}

#[test]
fn ctrl_c_removes_our_regions() {
    let (code, left) = interrupted_binary(1);
    assert_eq!(code, Some(0));
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn second_ctrl_c_removes_our_regions_too() {
    let (code, left) = interrupted_binary(2);
    assert!(matches!(code, Some(0 | 130)), "{code:?}");
    assert_eq!(left, Vec::<String>::new());
}
