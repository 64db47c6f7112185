//! End-to-end tests (HTTP, 127.0.0.1) of the sequence model, the ensemble, the request log and
//! the trace-settings endpoint.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::delay::Delay;
use crate::test_client::*;

fn accumulate(c: &mut Client, value: i32, params: Value) -> Response {
    let body = json!({"parameters": params,
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1], "data": [value]}]});
    c.request(&post_json(
        "/v2/models/accumulate_int32/infer",
        &body.to_string(),
    ))
}

fn seq(id: u64, start: bool, end: bool) -> Value {
    json!({"sequence_id": id, "sequence_start": start, "sequence_end": end})
}

#[test]
fn accumulate_sums_each_sequence() {
    let server = server();
    let mut c = Client::connect(server.addr);
    // Two interleaved sequences: 1+2+3 and 10+20.
    let steps = [
        (1, 1, seq(5, true, false), 1),
        (6, 10, seq(6, true, false), 10),
        (5, 2, seq(5, false, false), 3),
        (6, 20, seq(6, false, true), 30),
        (5, 3, seq(5, false, true), 6),
    ];
    for (id, value, params, want) in steps {
        let resp = accumulate(&mut c, value, params);
        assert_eq!(resp.status, 200, "seq {id}: {}", resp.error());
        let out = &resp.json()["outputs"][0];
        assert_eq!(
            (out["name"].clone(), out["data"].clone()),
            (json!("OUTPUT"), json!([want]))
        );
    }
    let counters = server.counters();
    assert_eq!(
        (
            counters.sequences_started,
            counters.sequences_ended,
            counters.sequences_live
        ),
        (2, 2, 0)
    );
    assert_eq!(counters.model("accumulate_int32").unwrap().inferences, 5);
}

#[test]
fn accumulate_refuses_protocol_violations() {
    let server = server();
    let mut c = Client::connect(server.addr);
    assert_eq!(accumulate(&mut c, 1, seq(9, true, false)).status, 200);
    let cases = [
        (
            json!({}),
            "must specify a non-zero or non-empty correlation ID",
        ),
        (seq(0, true, true), "non-zero or non-empty correlation ID"),
        (
            seq(4, false, false),
            "inference request for sequence 4 to model 'accumulate_int32' must specify the \
             START flag on the first request of the sequence",
        ),
        (
            json!({"sequence_id": 9, "sequence_end": "yes"}),
            "'sequence_end' must be a bool",
        ),
    ];
    for (params, want) in cases {
        let resp = accumulate(&mut c, 1, params.clone());
        assert_eq!(resp.status, 400, "{params}");
        assert!(resp.error().contains(want), "{params}: {}", resp.error());
    }
    assert_eq!(accumulate(&mut c, 1, seq(9, false, true)).status, 200);
    let after_end = accumulate(&mut c, 1, seq(9, false, false));
    assert_eq!(after_end.status, 400);
    assert!(
        after_end.error().contains("must specify the START flag"),
        "{}",
        after_end.error()
    );
    // START on a live id restarts it (Triton ends the old sequence early).
    assert_eq!(accumulate(&mut c, 5, seq(9, true, false)).status, 200);
    let restarted = accumulate(&mut c, 2, seq(9, true, true));
    assert_eq!(restarted.status, 200);
    assert_eq!(restarted.json()["outputs"][0]["data"], json!([2]));
    assert_eq!(server.sequences_restarted(), 1);
    let counters = server.counters();
    assert_eq!(
        (counters.sequences_started, counters.sequences_ended),
        (3, 2)
    );
    let acc = counters.model("accumulate_int32").unwrap();
    assert_eq!((acc.infer_requests, acc.failures), (9, 5));
}

#[test]
fn model_configs_show_sequence_and_ensemble() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let acc = c.request(&get("/v2/models/accumulate_int32/config")).json();
    assert_eq!(acc["sequence_batching"], json!({}));
    assert_eq!(acc["max_batch_size"], 0);
    assert!(acc.get("ensemble_scheduling").is_none());
    let ens = c.request(&get("/v2/models/ensemble_simple/config")).json();
    assert_eq!(ens["platform"], "ensemble");
    let steps = ens["ensemble_scheduling"]["step"].as_array().unwrap();
    let names: Vec<&str> = steps
        .iter()
        .map(|s| s["model_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["simple", "identity_int32"]);
    assert_eq!(steps[0]["model_version"], -1);
    assert_eq!(steps[1]["input_map"], json!({"INPUT0": "sum"}));
    let meta = c.request(&get("/v2/models/ensemble_simple")).json();
    assert_eq!(meta["platform"], "ensemble");
    assert!(c
        .request(&get("/v2/models/simple/config"))
        .json()
        .get("sequence_batching")
        .is_none());
}

/// One `ensemble_simple` request of batch 2 (INPUT0 = 0.., INPUT1 = 100..).
fn ensemble_request() -> Vec<u8> {
    let request = simple_binary(2);
    let old = b"POST /v2/models/simple/infer";
    assert!(request.starts_with(old));
    let mut out = b"POST /v2/models/ensemble_simple/infer".to_vec();
    out.extend_from_slice(&request[old.len()..]);
    out
}

#[test]
fn ensemble_runs_composing_models_and_records_each() {
    let delays = vec![
        ("simple".to_string(), Delay::Fixed(Duration::from_millis(3))),
        (
            "identity_int32".to_string(),
            Delay::Fixed(Duration::from_millis(2)),
        ),
    ];
    let server = server_with(delays);
    let mut c = Client::connect(server.addr);
    for _ in 0..3 {
        let sent = Instant::now();
        let resp = c.request(&ensemble_request());
        assert!(
            sent.elapsed() >= Duration::from_millis(5),
            "composing delays"
        );
        check_simple_binary(&resp, 2);
        assert_eq!(resp.json()["model_name"], "ensemble_simple");
    }
    let stats = c.request(&get("/v2/models/stats")).json();
    let by_name = |name: &str| -> Value {
        stats["model_stats"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .cloned()
            .unwrap()
    };
    for name in ["ensemble_simple", "simple", "identity_int32"] {
        let m = by_name(name);
        assert_eq!(
            (m["inference_count"].clone(), m["execution_count"].clone()),
            (json!(6), json!(3)),
            "{name}"
        );
        assert_eq!(m["inference_stats"]["queue"]["count"], 3, "{name}");
        assert_eq!(m["inference_stats"]["compute_infer"]["count"], 3, "{name}");
    }
    // Composing compute includes each model's configured delay; the ensemble took both.
    let infer_ns = |name: &str| {
        by_name(name)["inference_stats"]["compute_infer"]["ns"]
            .as_u64()
            .unwrap()
    };
    assert!(infer_ns("simple") >= 3 * 3_000_000);
    assert!(infer_ns("identity_int32") >= 3 * 2_000_000);
    let success_ns = by_name("ensemble_simple")["inference_stats"]["success"]["ns"]
        .as_u64()
        .unwrap();
    assert!(success_ns >= 3 * 5_000_000, "{success_ns}");
    // Only the ensemble's requests arrived from outside.
    assert_eq!(server.arrivals("ensemble_simple").len(), 3);
    assert!(server.arrivals("simple").is_empty());
}

#[test]
fn arrival_log_records_each_request_in_order() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let before = inferperf_wire::clock::Clock::new().now_ns();
    for _ in 0..4 {
        check_simple_binary(&c.request(&simple_binary(1)), 1);
        std::thread::sleep(Duration::from_millis(2));
    }
    // A refused request still arrived.
    let bad = c.request(&post_json("/v2/models/simple/infer", "{"));
    assert_eq!(bad.status, 400);
    let times = server.arrivals("simple");
    assert_eq!(times.len(), 5);
    assert!(
        times.windows(2).all(|w| w[1] >= w[0] + 2_000_000),
        "{times:?}"
    );
    // Same wall-clock scale as the client's clock (separate bases, so allow 1 s of skew).
    assert!(times[0] + 1_000_000_000 > before && times[0] < before + 1_000_000_000);
    assert!(server.arrivals("identity_fp32").is_empty());
    assert!(server.arrivals("nope").is_empty());
}

#[test]
fn trace_settings_over_http() {
    let server = server();
    let mut c = Client::connect(server.addr);
    assert!(server.last_trace_update().is_none());
    let body = r#"{"trace_level":["TIMESTAMPS"],"trace_rate":"100","trace_count":"-1","log_frequency":"0"}"#;
    let resp = c.request(&post_json("/v2/trace/setting", body));
    assert_eq!(resp.status, 200, "{}", resp.error());
    assert_eq!(resp.json()["trace_rate"], "100");
    let resp = c.request(&post_json(
        "/v2/models/simple/trace/setting",
        r#"{"log_frequency":5}"#,
    ));
    assert_eq!(resp.json()["log_frequency"], "5");
    assert_eq!(resp.json()["trace_level"], json!(["TIMESTAMPS"]));
    let bad = c.request(&post_json(
        "/v2/trace/setting",
        r#"{"trace_level":["ALL"]}"#,
    ));
    assert_eq!(bad.status, 400);
    let updates = server.trace_updates();
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0].model, None);
    assert_eq!(updates[0].settings["trace_level"], vec!["TIMESTAMPS"]);
    assert_eq!(updates[0].settings["trace_count"], vec!["-1"]);
    let last = server.last_trace_update().unwrap();
    assert_eq!(last.model.as_deref(), Some("simple"));
    assert_eq!(
        server.trace_settings(Some("simple"))["log_frequency"],
        vec!["5"]
    );
    assert_eq!(server.trace_settings(None)["log_frequency"], vec!["0"]);
}
