//! End-to-end `--service-kind triton_c_api` against the stand-in library
//! `tests/capi_stub/tritonserver_stub.c`, built with gcc per test (skipped without gcc): the
//! command line is parsed as perf_analyzer's, the run loads the stub in process, and the
//! report must agree with the stub's own request counter.

use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use inferperf::cli::{parse_run_args, Parsed};
use inferperf::config::Config;
use inferperf::run::RunResult;

/// Builds the stub (with `defines`) as `<dir>/lib/libtritonserver.so`; `None` without gcc.
/// Each test gets its own copy, so the stub's counters are its own.
fn build_stub(tag: &str, defines: &[&str]) -> Option<crate::common::Scratch> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/capi_stub/tritonserver_stub.c");
    let dir = crate::common::Scratch::new(&format!("inferperf-capi-{tag}"));
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::create_dir_all(dir.join("models")).unwrap();
    let status = std::process::Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(dir.join("lib/libtritonserver.so"))
        .args(defines)
        .arg(&src)
        .arg("-lpthread")
        .status();
    match status {
        Ok(s) if s.success() => Some(dir),
        Ok(s) => panic!("gcc failed to build the C API stub: {s}"),
        Err(e) => {
            eprintln!("skipped: gcc is not available ({e})");
            None
        }
    }
}

/// The stub's counter of accepted `ServerInferAsync` calls, read through its own export.
/// Opened before the run: holding the library keeps the run's copy (and its counters) loaded
/// after the run's server is gone.
struct StubCounter(libloading::Library);

impl StubCounter {
    fn open(dir: &Path) -> StubCounter {
        // SAFETY: the stub has no initialisers.
        StubCounter(
            unsafe { libloading::Library::new(dir.join("lib/libtritonserver.so")) }.unwrap(),
        )
    }

    fn infer_count(&self) -> u64 {
        self.get(b"stub_infer_count")
    }

    /// Responses with outputs the stub delivered.
    fn response_count(&self) -> u64 {
        self.get(b"stub_response_count")
    }

    /// The most requests the stub held at once (accepted, final callback not yet made).
    fn max_in_flight(&self) -> u64 {
        self.get(b"stub_max_inflight")
    }

    fn get(&self, name: &[u8]) -> u64 {
        // SAFETY: the stub's counters are `uint64_t (void)`.
        unsafe {
            let count: libloading::Symbol<unsafe extern "C" fn() -> u64> =
                self.0.get(name).unwrap();
            count()
        }
    }
}

fn config(dir: &Path, extra: &[&str]) -> Config {
    let mut args: Vec<OsString> = ["inferperf", "--service-kind", "triton_c_api"]
        .iter()
        .map(OsString::from)
        .collect();
    args.push("--triton-server-directory".into());
    args.push(dir.as_os_str().into());
    args.push("--model-repository".into());
    args.push(dir.join("models").into_os_string());
    args.extend(extra.iter().map(OsString::from));
    match parse_run_args(args) {
        Ok(Parsed::Run(cfg)) => {
            let mut cfg = *cfg;
            cfg.pin_threads = false;
            cfg
        }
        other => panic!("not a run: {other:?}"),
    }
}

fn run(cfg: &Config) -> inferperf::error::Result<(RunResult, String)> {
    let mut out = Vec::new();
    let res = inferperf::run::run(cfg, &mut out, Arc::new(AtomicBool::new(false)))?;
    Ok((res, String::from_utf8(out).unwrap()))
}

#[test]
fn request_count_matches_the_stub_counter() {
    let Some(dir) = build_stub("count", &[]) else {
        return;
    };
    let n = 400;
    let count = n.to_string();
    let args = [
        "-m",
        "identity_fp32",
        "--concurrency-range",
        "2",
        "--request-count",
        &count,
    ];
    let cfg = config(&dir, &args);
    let counter = StubCounter::open(&dir);
    let started = Instant::now();
    let (res, text) = run(&cfg).expect("run succeeds");
    let wall = started.elapsed();
    assert!(res.error.is_none(), "{:?}", res.error);
    let p = &res.points[0];
    assert_eq!(p.client.request_count, n);
    assert_eq!(
        counter.infer_count(),
        n,
        "the stub saw exactly the requests reported"
    );
    assert!(text.contains("Service Kind: TRITON_C_API"), "{text}");
    // Never more than -c. The stand-in serves each request in microseconds on one thread,
    // so in a short run two may never overlap; the time-window test below checks a whole
    // window keeps exactly -c in flight.
    let most = counter.max_in_flight();
    assert!((1..=2).contains(&most), "{most} requests in flight at -c 2");
    // perf_analyzer prints no client-library line for the C API, only its indent.
    assert!(!text.contains("Avg HTTP time"), "{text}");
    assert!(text.contains(" usec\n    \n  Server: \n"), "{text}");
    assert!(
        text.contains(&format!("    Request count: {n}\n")),
        "{text}"
    );
    let server = p
        .server
        .as_ref()
        .expect("server section from the C API statistics");
    assert_eq!(server.model.success.count, n);
    // Worker CPU: overhead % of (duration × workers); concurrency 2 runs min(2, cores) workers.
    let workers = inferperf::engine::available_cores().len().clamp(1, 2) as f64;
    let cpu_ns = p.client.overhead_pct / 100.0 * p.client.duration_ns as f64 * workers;
    let cpu_us = cpu_ns / 1e3 / n as f64;
    eprintln!("C API path vs stub: {cpu_us:.1} us client CPU per request ({wall:?} wall)");
}

#[test]
fn export_and_validation_see_the_outputs() {
    let Some(dir) = build_stub("export", &[]) else {
        return;
    };
    let export = dir.join("export.json");
    let args = [
        "-m",
        "identity_fp32",
        "--request-count",
        "5",
        "--input-data",
        "zero",
    ];
    let mut cfg = config(&dir, &args);
    cfg.profile_export_file = Some(export.clone());
    let (res, _) = run(&cfg).expect("run succeeds");
    assert!(res.error.is_none(), "{:?}", res.error);
    let json = std::fs::read_to_string(&export).unwrap();
    assert!(json.contains("\"service_kind\":\"triton_c_api\""), "{json}");
    let zeros = format!("\"OUTPUT0\":[{}]", vec!["0.0"; 16].join(","));
    assert_eq!(json.matches(&zeros).count(), 5, "{json}");
}

#[test]
fn decoupled_model_streams_its_responses() {
    let Some(dir) = build_stub("repeat", &[]) else {
        return;
    };
    let data = dir.join("data.json");
    std::fs::write(&data, r#"{"data":[{"IN":[3]}]}"#).unwrap();
    let data = data.to_str().unwrap();
    let plain = config(
        &dir,
        &[
            "-m",
            "repeat_int32",
            "--request-count",
            "4",
            "--input-data",
            data,
        ],
    );
    let e = run(&plain).err().expect("decoupled needs --streaming");
    assert!(e.msg.contains("--streaming"), "{}", e.msg);
    let args = [
        "-m",
        "repeat_int32",
        "--streaming",
        "--request-count",
        "4",
        "--input-data",
        data,
    ];
    let counter = StubCounter::open(&dir);
    let (res, _) = run(&config(&dir, &args)).expect("run succeeds");
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 4);
    assert_eq!(counter.infer_count(), 4);
    let r = res.points[0]
        .client
        .responses
        .as_ref()
        .expect("response stats of a decoupled model");
    assert_eq!(r.count, 12, "three responses per request");
}

#[test]
fn infer_async_failure_is_a_counted_error() {
    let Some(dir) = build_stub("fail", &["-DSTUB_FAIL_INFER_AFTER=3"]) else {
        return;
    };
    let cfg = config(&dir, &["-m", "identity_fp32", "--request-count", "10"]);
    let counter = StubCounter::open(&dir);
    let outcome = run(&cfg);
    let msg = match &outcome {
        Ok((res, _)) => res.error.as_ref().map(|e| e.msg.clone()),
        Err(e) => Some(e.msg.clone()),
    };
    let msg = msg.expect("the injected failure ends the run with an error");
    assert!(msg.contains("injected InferAsync failure"), "{msg}");
    assert_eq!(
        counter.infer_count(),
        3,
        "only the accepted requests reached the stub"
    );
}

#[test]
fn missing_library_and_flags_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("inferperf-capi-{}-none", std::process::id()));
    let cfg = config(&dir, &["-m", "identity_fp32"]);
    let e = run(&cfg).err().expect("no library");
    let lib = dir.join("lib/libtritonserver.so");
    assert!(e.msg.contains(lib.to_str().unwrap()), "{}", e.msg);
    assert_eq!(e.exit_code(), 99);
    let args = [
        "inferperf",
        "--service-kind",
        "triton_c_api",
        "-m",
        "identity_fp32",
    ];
    let e = parse_run_args(args.iter().map(OsString::from).collect()).unwrap_err();
    assert!(
        e.msg.contains("--model-repository is required"),
        "{}",
        e.msg
    );
    let args = ["inferperf", "-m", "x", "--model-repository", "/m"];
    let e = parse_run_args(args.iter().map(OsString::from).collect()).unwrap_err();
    assert!(
        e.msg
            .contains("only supported with --service-kind triton_c_api"),
        "{}",
        e.msg
    );
}

/// The export's requests: (timestamp, response timestamps, response outputs).
fn export_requests(path: &Path) -> Vec<(u64, Vec<u64>, Vec<serde_json::Value>)> {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for exp in json["experiments"].as_array().unwrap() {
        for r in exp["requests"].as_array().unwrap() {
            let stamps = r["response_timestamps"].as_array().unwrap();
            out.push((
                r["timestamp"].as_u64().unwrap(),
                stamps.iter().map(|t| t.as_u64().unwrap()).collect(),
                r["response_outputs"].as_array().unwrap().clone(),
            ));
        }
    }
    out
}

#[test]
fn decoupled_export_keeps_every_response_of_every_request() {
    let Some(dir) = build_stub("repeat-export", &[]) else {
        return;
    };
    let data = dir.join("data.json");
    std::fs::write(&data, r#"{"data":[{"IN":[3]}]}"#).unwrap();
    let export = dir.join("export.json");
    let args = [
        "-m",
        "repeat_int32",
        "--async",
        "--streaming",
        "--concurrency-range",
        "2",
        "--request-count",
        "40",
        "--input-data",
        data.to_str().unwrap(),
    ];
    let mut cfg = config(&dir, &args);
    cfg.profile_export_file = Some(export.clone());
    let counter = StubCounter::open(&dir);
    let (res, _) = run(&cfg).expect("run succeeds");
    assert!(res.error.is_none(), "{:?}", res.error);
    let requests = export_requests(&export);
    assert_eq!(requests.len(), 40);
    assert_eq!(
        counter.infer_count(),
        40,
        "the stub saw every exported request"
    );
    let responses: usize = requests.iter().map(|r| r.1.len()).sum();
    assert_eq!(
        responses as u64,
        counter.response_count(),
        "every response exported"
    );
    for (sent, stamps, outputs) in &requests {
        assert_eq!(stamps.len(), 3, "three responses per request");
        assert_eq!(outputs.len(), 3);
        assert!(stamps[0] >= *sent && stamps.windows(2).all(|w| w[0] <= w[1]));
        for (k, o) in outputs.iter().enumerate() {
            assert_eq!(o["OUT"], serde_json::json!(k), "response {k}: {o}");
        }
    }
    let r = res.points[0].client.responses.as_ref().unwrap();
    assert_eq!(r.count, 120);
    let most = counter.max_in_flight();
    assert!((1..=2).contains(&most), "{most} requests in flight at -c 2");
}

#[test]
fn time_windows_keep_the_concurrency_and_every_record_reaches_its_window() {
    // 300 us a request: a few thousand records, each window still ends with 3 in flight.
    let Some(dir) = build_stub("windows", &["-DSTUB_SERVE_DELAY_US=300"]) else {
        return;
    };
    let export = dir.join("export.json");
    // A threshold no machine load can miss: the third window is stable, so the point is
    // made of every measured window.
    let args = [
        "-m",
        "identity_fp32",
        "--concurrency-range",
        "3",
        "-p",
        "150",
        "-s",
        "10000",
        "--max-trials",
        "3",
    ];
    let mut cfg = config(&dir, &args);
    cfg.profile_export_file = Some(export.clone());
    let counter = StubCounter::open(&dir);
    let (res, _) = run(&cfg).expect("run succeeds");
    assert!(res.error.is_none(), "{:?}", res.error);
    let requests = export_requests(&export);
    assert!(requests.len() >= 100, "{} records", requests.len());
    let p = &res.points[0];
    assert_eq!(
        p.client.request_count,
        requests.len() as u64,
        "the point counts exactly the exported records"
    );
    assert!(requests.len() as u64 <= counter.infer_count());
    assert!(requests.iter().all(|r| r.1.len() == 1 && r.1[0] >= r.0));
    assert_eq!(counter.max_in_flight(), 3, "exactly -c requests in flight");
}
