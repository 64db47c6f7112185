//! End-to-end: the library drives the in-process reference server over HTTP, and the report
//! must agree with what the server counted.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use inferperf::config::{ConcurrencyRange, TensorFormat};
use inferperf::report::LoadValue;

#[test]
fn request_count_is_exact_and_matches_the_server() {
    let server = start_server();
    let mut cfg = quick_config(&server, "simple", 50);
    cfg.request_count = 600;
    cfg.batch_size = 4;
    cfg.concurrency = ConcurrencyRange {
        start: 3,
        end: 3,
        step: 1,
    };
    let wall = std::time::Instant::now();
    let (res, text) = run(&cfg);
    let wall_ns = wall.elapsed().as_nanos() as f64;
    assert!(res.error.is_none());
    assert_eq!(res.points.len(), 1);
    let p = &res.points[0];
    assert_eq!(p.client.request_count, 600);
    let m = model_counters(&server, "simple");
    assert_eq!(
        m.infer_requests, 600,
        "server saw exactly the requests sent"
    );
    assert_eq!(m.inferences, 600 * 4, "batch size 4 reached the server");
    // Two INT32[4,16] inputs per request.
    assert_eq!(m.input_bytes, 600 * 2 * 4 * 16 * 4);
    let s = p.server.as_ref().expect("server section");
    assert_eq!(s.model.inference_count, 2400);
    assert_eq!(s.model.success.count, 600);
    assert!(text.contains("Sending 600 benchmark requests"), "{text}");
    assert!(text.contains("    Request count: 600\n"), "{text}");
    assert!(
        text.contains("  Server: \n    Inference count: 2400\n"),
        "{text}"
    );
    // Throughput is over the clamped window (first send to last response), which lies inside
    // the run: never below 2400 inferences over the whole run's wall time.
    let tput = p.client.throughput;
    assert!(tput >= 2400.0 * 1e9 / wall_ns, "throughput {tput}");
    let expected = 2400.0 * 1e9 / p.client.duration_ns as f64;
    assert!(
        (tput - expected).abs() < 1e-6 * expected,
        "{tput} vs {expected}"
    );
}

#[test]
fn sweep_reports_each_level_and_writes_csv_and_export() {
    let server = start_server();
    let dir = temp_dir("sweep");
    let mut cfg = quick_config(&server, "simple", 100);
    cfg.concurrency = ConcurrencyRange {
        start: 1,
        end: 3,
        step: 1,
    };
    cfg.csv_file = Some(dir.join("out.csv"));
    cfg.profile_export_file = Some(dir.join("out.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none());
    let loads: Vec<_> = res.points.iter().map(|p| p.load).collect();
    assert_eq!(
        loads,
        vec![
            LoadValue::Concurrency(1),
            LoadValue::Concurrency(2),
            LoadValue::Concurrency(3)
        ]
    );
    for p in &res.points {
        assert!(
            p.client.request_count >= 300,
            "3 windows of >= 100 requests"
        );
    }
    assert!(text.contains("Request concurrency: 2\n"));
    assert!(text.contains("Inferences/Second vs. Client Average Batch Latency\n"));

    let csv = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
         Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,\
         p50 latency,p90 latency,p95 latency,p99 latency"
    );
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse::<f64>().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 3);
    assert!(
        rows.windows(2).all(|w| w[0][1] <= w[1][1]),
        "rows sorted by throughput"
    );

    let export: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("out.json")).unwrap()).unwrap();
    let exps = export["experiments"].as_array().unwrap();
    assert_eq!(exps.len(), 3);
    assert_eq!(export["service_kind"], "triton");
    assert_eq!(exps[1]["experiment"]["mode"], "concurrency");
    assert_eq!(exps[1]["experiment"]["value"], 2);
    check_simple_outputs(&exps[0]["requests"][0]);
    let exported: usize = exps
        .iter()
        .map(|e| e["requests"].as_array().unwrap().len())
        .sum();
    let served = model_counters(&server, "simple").infer_requests as usize;
    assert!(
        exported <= served && exported >= 900,
        "exported {exported}, served {served}"
    );
}

/// `simple` returns the sum and the difference of its inputs: check them in the export.
fn check_simple_outputs(req: &serde_json::Value) {
    let a = req["request_inputs"]["INPUT0"].as_array().unwrap();
    let b = req["request_inputs"]["INPUT1"].as_array().unwrap();
    let out = &req["response_outputs"][0];
    let sum = out["OUTPUT0"].as_array().unwrap();
    let diff = out["OUTPUT1"].as_array().unwrap();
    assert_eq!(a.len(), 16);
    for i in 0..16 {
        let (x, y) = (a[i].as_i64().unwrap() as i32, b[i].as_i64().unwrap() as i32);
        assert_eq!(sum[i].as_i64().unwrap() as i32, x.wrapping_add(y));
        assert_eq!(diff[i].as_i64().unwrap() as i32, x.wrapping_sub(y));
    }
    let t = req["timestamp"].as_u64().unwrap();
    assert!(req["response_timestamps"][0].as_u64().unwrap() > t);
}

#[test]
fn json_tensors_and_dynamic_shapes_reach_the_server() {
    let server = start_server();
    let mut cfg = quick_config(&server, "identity_fp32", 50);
    cfg.request_count = 100;
    cfg.shapes = vec![("INPUT0".into(), vec![10])];
    cfg.input_tensor_format = TensorFormat::Json;
    cfg.output_tensor_format = TensorFormat::Json;
    let (res, _) = run(&cfg);
    assert!(res.error.is_none());
    let m = model_counters(&server, "identity_fp32");
    assert_eq!(m.infer_requests, 100);
    assert_eq!(m.input_bytes, 100 * 10 * 4);
}

#[test]
fn bytes_model_with_string_data() {
    let server = start_server();
    let mut cfg = quick_config(&server, "identity_bytes", 50);
    cfg.request_count = 50;
    cfg.shapes = vec![("INPUT0".into(), vec![3])];
    cfg.string_data = Some("hello".into());
    let (res, _) = run(&cfg);
    assert!(res.error.is_none());
    let m = model_counters(&server, "identity_bytes");
    assert_eq!(m.infer_requests, 50);
    assert_eq!(m.input_bytes, 50 * 3 * (4 + 5));
}

#[test]
fn ctrl_c_still_reports_what_was_measured() {
    let server = start_server();
    let dir = temp_dir("interrupt");
    let mut cfg = quick_config(&server, "simple", 1_000_000_000);
    cfg.csv_file = Some(dir.join("out.csv"));
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        flag.store(true, Ordering::SeqCst);
    });
    let mut out = Vec::new();
    let res = inferperf::run::run(&cfg, &mut out, stop).unwrap();
    t.join().unwrap();
    assert_eq!(res.points.len(), 1, "the interrupted level is reported");
    let n = res.points[0].client.request_count;
    assert!(n > 0);
    let csv = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2);
    assert!(model_counters(&server, "simple").infer_requests >= n);
}

#[test]
fn server_dying_mid_run_reports_measured_windows_and_errors() {
    let server = start_server();
    let dir = temp_dir("dies");
    let mut cfg = quick_config(&server, "simple", 1_000_000_000);
    cfg.csv_file = Some(dir.join("out.csv"));
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        server.stop();
    });
    let mut out = Vec::new();
    let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false))).unwrap();
    t.join().unwrap();
    let err = res.error.expect("the run ends with an error");
    assert_eq!(err.exit_code(), 99);
    assert!(err.msg.contains("Thread [0] had error"), "{}", err.msg);
    assert_eq!(res.points.len(), 1);
    assert!(res.points[0].client.request_count > 0);
    assert!(dir.join("out.csv").exists());
}

#[test]
fn setup_errors_name_the_cause() {
    let server = start_server();
    let mut cfg = quick_config(&server, "no_such_model", 10);
    let err = inferperf::run::run(&cfg, &mut Vec::new(), Arc::new(AtomicBool::new(false)))
        .err()
        .unwrap();
    assert_eq!(err.exit_code(), 99);
    assert!(err.msg.contains("no_such_model"), "{}", err.msg);

    cfg.model_name = "simple".into();
    cfg.batch_size = 9;
    let err = inferperf::run::run(&cfg, &mut Vec::new(), Arc::new(AtomicBool::new(false)))
        .err()
        .unwrap();
    assert!(err.msg.contains("-b 9"), "{}", err.msg);

    cfg.batch_size = 1;
    cfg.model_name = "identity_fp32".into();
    let err = inferperf::run::run(&cfg, &mut Vec::new(), Arc::new(AtomicBool::new(false)))
        .err()
        .unwrap();
    assert!(err.msg.contains("dynamic shape"), "{}", err.msg);
}
