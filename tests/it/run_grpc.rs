//! End-to-end over gRPC: the library drives the in-process reference server's gRPC endpoint
//! (unary and streaming, decoupled included), and the report must agree with what the
//! server counted.

use crate::common;

use common::*;
use inferperf::config::{Compression, ConcurrencyRange, ParamValue, Protocol};

fn grpc_config(
    server: &inferperf::server::ServerHandle,
    model: &str,
    n: u64,
) -> inferperf::config::Config {
    let mut cfg = quick_config(server, model, n);
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.expect("gRPC endpoint").to_string();
    cfg
}

fn concurrency(c: u64) -> ConcurrencyRange {
    ConcurrencyRange {
        start: c,
        end: c,
        step: 1,
    }
}

#[test]
fn unary_request_count_matches_the_server() {
    let server = start_grpc_server(Vec::new());
    let mut cfg = grpc_config(&server, "simple", 50);
    cfg.request_count = 400;
    cfg.batch_size = 2;
    cfg.concurrency = concurrency(4);
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let p = &res.points[0];
    assert_eq!(p.client.request_count, 400);
    let m = model_counters(&server, "simple");
    assert_eq!(
        m.infer_requests, 400,
        "server saw exactly the requests sent"
    );
    assert_eq!(m.inferences, 800, "batch size 2 reached the server");
    let s = p
        .server
        .as_ref()
        .expect("server section over gRPC statistics");
    assert_eq!(s.model.success.count, 400);
    assert!(text.contains("    Request count: 400\n"), "{text}");
    assert!(text.contains("    Avg gRPC time: "), "{text}");
    assert!(text.contains("(un)marshal request/response"), "{text}");
    assert!(!text.contains("Response Throughput"), "{text}");
}

#[test]
fn sweep_over_grpc_writes_csv_and_export_with_outputs() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("grpc-sweep");
    let mut cfg = grpc_config(&server, "simple", 60);
    cfg.concurrency = ConcurrencyRange {
        start: 1,
        end: 2,
        step: 1,
    };
    cfg.async_mode = true;
    cfg.csv_file = Some(dir.join("out.csv"));
    cfg.profile_export_file = Some(dir.join("out.json"));
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points.len(), 2);
    let csv = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert!(
        csv.starts_with("Concurrency,Inferences/Second,Client Send,"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 3, "{csv}");
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out.json")).unwrap()).unwrap();
    let req = &export["experiments"][0]["requests"][0];
    let inputs = &req["request_inputs"];
    let outputs = &req["response_outputs"][0];
    // simple: OUTPUT0 = INPUT0 + INPUT1, element by element.
    let value = |name: &str, i: usize| inputs[name][i].as_i64().unwrap() as i32;
    let sum: Vec<i64> = (0..16)
        .map(|i| i64::from(value("INPUT0", i).wrapping_add(value("INPUT1", i))))
        .collect();
    let got: Vec<i64> = (0..16)
        .map(|i| outputs["OUTPUT0"][i].as_i64().unwrap())
        .collect();
    // INT32 addition wraps, on the server as here.
    assert_eq!(got, sum);
    assert_eq!(req["response_timestamps"].as_array().unwrap().len(), 1);
}

#[test]
fn streaming_non_decoupled_model_completes_each_request() {
    let server = start_grpc_server(Vec::new());
    let mut cfg = grpc_config(&server, "simple", 50);
    cfg.streaming = true;
    cfg.async_mode = true;
    cfg.request_count = 300;
    cfg.concurrency = concurrency(3);
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 300);
    assert_eq!(model_counters(&server, "simple").infer_requests, 300);
}

#[test]
fn decoupled_model_counts_every_response() {
    let delay = inferperf::server::parse_delay("repeat_int32=1ms").unwrap();
    let server = start_grpc_server(vec![delay]);
    let dir = temp_dir("grpc-decoupled");
    let mut cfg = grpc_config(&server, "repeat_int32", 20);
    cfg.streaming = true;
    cfg.async_mode = true;
    cfg.shapes = vec![("IN".into(), vec![4])];
    cfg.request_count = 40;
    cfg.concurrency = concurrency(2);
    cfg.csv_file = Some(dir.join("d.csv"));
    cfg.profile_export_file = Some(dir.join("d.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let c = &res.points[0].client;
    assert_eq!(c.request_count, 40);
    let r = c.responses.as_ref().expect("response statistics");
    assert_eq!(r.count, 160, "four responses with outputs per request");
    // Four responses 1 ms apart (the first after 1 ms): at least 4 ms per request, and the
    // first response at least 1 ms after the start.
    assert!(c.min_latency_ns >= 4_000_000, "{}", c.min_latency_ns);
    assert!(r.avg_first_response_ns >= 1_000_000);
    assert!(r.avg_response_gap_ns >= 1_000_000);
    assert!((r.throughput / c.throughput - 4.0).abs() < 1e-9);
    assert!(
        text.contains("Detected decoupled model, using the last response"),
        "{text}"
    );
    assert!(text.contains("    Response Throughput: "), "{text}");
    assert!(!text.contains("Avg gRPC time"), "{text}");
    let csv = std::fs::read_to_string(dir.join("d.csv")).unwrap();
    assert!(
        csv.starts_with("Concurrency,Inferences/Second,Response Throughput,"),
        "{csv}"
    );
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("d.json")).unwrap()).unwrap();
    let req = &export["experiments"][0]["requests"][0];
    // Four data responses plus the empty final one, each with its timestamp.
    assert_eq!(req["response_timestamps"].as_array().unwrap().len(), 5);
    let outs = req["response_outputs"].as_array().unwrap();
    assert_eq!(outs.len(), 5);
    assert_eq!(outs[4], serde_json::json!({}));
    let input: Vec<i64> = (0..4)
        .map(|i| req["request_inputs"]["IN"][i].as_i64().unwrap())
        .collect();
    for (i, out) in outs[..4].iter().enumerate() {
        assert_eq!(out["IDX"].as_u64(), Some(i as u64), "{out}");
        assert_eq!(out["OUT"].as_i64(), Some(input[i]), "{out}");
    }
}

#[test]
fn decoupled_model_needs_streaming() {
    let server = start_grpc_server(Vec::new());
    let cfg = grpc_config(&server, "repeat_int32", 20);
    let mut out = Vec::new();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let err = inferperf::run::run(&cfg, &mut out, stop)
        .err()
        .expect("refused");
    assert!(err.msg.contains("decoupled"), "{}", err.msg);
    assert!(err.msg.contains("--streaming"), "{}", err.msg);
    assert_eq!(err.exit_code(), 99);
}

#[test]
fn compression_and_request_parameters_reach_the_server() {
    let server = start_grpc_server(Vec::new());
    for compression in [Compression::Gzip, Compression::Deflate] {
        let mut cfg = grpc_config(&server, "simple", 30);
        cfg.compression = compression;
        cfg.request_parameters = vec![("priority_hint".into(), ParamValue::Int(3))];
        cfg.request_count = 50;
        let (res, _) = run(&cfg);
        assert!(res.error.is_none(), "{compression:?}: {:?}", res.error);
        assert_eq!(res.points[0].client.request_count, 50);
    }
    assert_eq!(model_counters(&server, "simple").infer_requests, 100);
}

#[test]
fn grpc_errors_name_the_model() {
    let server = start_grpc_server(Vec::new());
    let cfg = grpc_config(&server, "no_such_model", 20);
    let mut out = Vec::new();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let err = inferperf::run::run(&cfg, &mut out, stop)
        .err()
        .expect("refused");
    assert!(err.msg.contains("no_such_model"), "{}", err.msg);
}

#[test]
fn periodic_concurrency_ramps_on_the_request_period() {
    let delay = inferperf::server::parse_delay("repeat_int32=1ms").unwrap();
    let server = start_grpc_server(vec![delay]);
    let dir = temp_dir("periodic");
    let mut cfg = grpc_config(&server, "repeat_int32", 20);
    cfg.streaming = true;
    cfg.async_mode = true;
    cfg.shapes = vec![("IN".into(), vec![12])];
    cfg.load_mode = inferperf::config::LoadMode::Periodic;
    cfg.periodic = ConcurrencyRange {
        start: 1,
        end: 3,
        step: 1,
    };
    cfg.request_period = 4;
    cfg.profile_export_file = Some(dir.join("p.json"));
    cfg.csv_file = Some(dir.join("p.csv"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(res.points.is_empty(), "no console statistics: {text}");
    assert!(!dir.join("p.csv").exists(), "no CSV in periodic mode");
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("p.json")).unwrap()).unwrap();
    let exp = &export["experiments"][0];
    assert_eq!(
        exp["experiment"],
        serde_json::json!({"mode": "concurrency", "value": 1})
    );
    assert_eq!(
        exp["window_boundaries"],
        serde_json::json!([0u64, u64::MAX])
    );
    let reqs = exp["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 3);
    // Each request: 12 responses with outputs and the empty final one.
    for r in reqs {
        assert_eq!(r["response_timestamps"].as_array().unwrap().len(), 13);
    }
    // Request k+1 starts only after request k had its 4th response.
    for pair in reqs.windows(2) {
        let fourth = pair[0]["response_timestamps"][3].as_u64().unwrap();
        assert!(pair[1]["timestamp"].as_u64().unwrap() >= fourth);
    }
    assert_eq!(model_counters(&server, "repeat_int32").infer_requests, 3);
}

#[test]
fn periodic_request_with_too_few_responses_is_an_error() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("periodic-short");
    let mut cfg = grpc_config(&server, "repeat_int32", 20);
    cfg.streaming = true;
    cfg.async_mode = true;
    cfg.shapes = vec![("IN".into(), vec![2])];
    cfg.load_mode = inferperf::config::LoadMode::Periodic;
    cfg.periodic = ConcurrencyRange {
        start: 1,
        end: 2,
        step: 1,
    };
    cfg.request_period = 4;
    cfg.profile_export_file = Some(dir.join("p.json"));
    let (res, _) = run(&cfg);
    let err = res.error.expect("fails");
    assert!(
        err.msg.contains("fewer than --request-period 4"),
        "{}",
        err.msg
    );
}
