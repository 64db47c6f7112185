//! Optional tier: the `inferperf` binary against a real Triton (tritonserver 2.51, CPU, python
//! backend), over HTTP, gRPC and the C API, on every model of the repository that
//! `benches/peers/triton.sh setup` writes.
//!
//! It runs when `INFERPERF_TRITON_DIR` names that script's folder (TRITON, the one holding
//! `env.sh`), e.g. `INFERPERF_TRITON_DIR=DIR cargo test --release --test real_triton`;
//! otherwise it prints one line saying it skipped. With `INFERPERF_PERF_ANALYZER` naming the
//! real perf_analyzer binary it also compares CSV headers with it, flag set by flag set.
//!
//! One test starts one tritonserver (bounded by `timeout`) and runs every case against it in
//! turn, so the server is started once and always stopped.

use crate::triton;

use serde_json::Value;
use triton::{csv_header, export, ours, Triton, TritonEnv};

#[test]
fn real_triton_tier() {
    let Some(env) = TritonEnv::from_env() else {
        println!("real_triton: skipped (INFERPERF_TRITON_DIR unset; see benches/peers/triton.sh)");
        return;
    };
    let triton = Triton::start(&env);
    for protocol in ["http", "grpc"] {
        identity_counts_match_the_server(&triton, protocol);
        simple_outputs_are_the_sums(&triton, protocol);
        bytes_round_trip(&triton, protocol);
        accumulate_sums_every_sequence_in_order(&triton, protocol, &[]);
        accumulate_sums_every_sequence_in_order(
            &triton,
            protocol,
            &["--request-rate-range", "300", "--num-of-sequences", "4"],
        );
        ensemble_reports_its_composing_models(&triton, protocol);
    }
    decoupled_keeps_every_response(&triton, &["-i", "grpc", "--streaming"]);
    unknown_model_is_exit_99(&triton);
    capi_cases(&triton);
    if let Some(pa) = std::env::var_os("INFERPERF_PERF_ANALYZER") {
        csv_headers_equal_perf_analyzers(&triton, std::path::Path::new(&pa));
    } else {
        println!("real_triton: CSV comparison skipped (set INFERPERF_PERF_ANALYZER)");
    }
}

fn capi_cases(triton: &Triton) {
    let capi = triton.capi_args();
    let capi: Vec<&str> = capi.iter().map(String::as_str).collect();
    let (doc, _) = export(triton, "identity", &capi, &["--request-count", "100"]);
    assert_eq!(requests(&doc).len(), 100, "C API identity");
    for r in requests(&doc) {
        assert_eq!(
            r["response_outputs"][0]["OUTPUT0"],
            r["request_inputs"]["INPUT0"]
        );
    }
    let (doc, _) = export(triton, "simple", &capi, &["--request-count", "50"]);
    check_sums(&doc);
    let mut args = capi.clone();
    args.extend(["--async", "--streaming"]);
    decoupled_keeps_every_response(triton, &args);
    accumulate_with(triton, &capi);
}

fn requests(doc: &Value) -> &Vec<Value> {
    doc["experiments"][0]["requests"]
        .as_array()
        .expect("requests")
}

fn identity_counts_match_the_server(triton: &Triton, protocol: &str) {
    let before = triton.success_count("identity");
    let (doc, out) = export(
        triton,
        "identity",
        &["-i", protocol],
        &["--request-count", "200", "--concurrency-range", "4"],
    );
    let after = triton.success_count("identity");
    assert_eq!(requests(&doc).len(), 200, "{protocol}: {out}");
    assert_eq!(
        after - before,
        200,
        "{protocol}: the server counted every request"
    );
    for r in requests(&doc) {
        assert_eq!(
            r["response_outputs"][0]["OUTPUT0"], r["request_inputs"]["INPUT0"],
            "{protocol}: identity echoes"
        );
    }
    // The console's request count is the server's.
    assert!(out.contains("Request count: 200"), "{protocol}: {out}");
}

fn check_sums(doc: &Value) {
    let ints = |v: &Value| -> Vec<i32> {
        v.as_array()
            .expect("array")
            .iter()
            .map(|x| x.as_i64().unwrap() as i32)
            .collect()
    };
    for r in requests(doc) {
        let a = ints(&r["request_inputs"]["INPUT0"]);
        let b = ints(&r["request_inputs"]["INPUT1"]);
        let sum = ints(&r["response_outputs"][0]["OUTPUT0"]);
        let diff = ints(&r["response_outputs"][0]["OUTPUT1"]);
        for i in 0..a.len() {
            assert_eq!(sum[i], a[i].wrapping_add(b[i]), "OUTPUT0 = INPUT0 + INPUT1");
            assert_eq!(
                diff[i],
                a[i].wrapping_sub(b[i]),
                "OUTPUT1 = INPUT0 - INPUT1"
            );
        }
    }
}

fn simple_outputs_are_the_sums(triton: &Triton, protocol: &str) {
    let (doc, _) = export(
        triton,
        "simple",
        &["-i", protocol],
        &["--request-count", "100", "-b", "4"],
    );
    assert_eq!(requests(&doc).len(), 100);
    check_sums(&doc);
}

fn bytes_round_trip(triton: &Triton, protocol: &str) {
    let (doc, _) = export(
        triton,
        "identity_bytes",
        &["-i", protocol],
        &["--request-count", "50", "--string-data", "hello triton"],
    );
    for r in requests(&doc) {
        assert_eq!(r["request_inputs"]["INPUT0"], "hello triton");
        assert_eq!(r["response_outputs"][0]["OUTPUT0"], "hello triton");
    }
}

fn accumulate_sums_every_sequence_in_order(triton: &Triton, protocol: &str, load: &[&str]) {
    let mut args = vec!["-i", protocol];
    args.extend_from_slice(load);
    accumulate_with(triton, &args);
}

/// Every request of the sequence model carries its `sequence_id`, and the model's running
/// sum equals the sum of that sequence's inputs sent so far: a step that reached the server
/// out of order, or without its START, would break the sum or fail the run.
fn accumulate_with(triton: &Triton, args: &[&str]) {
    let (doc, out) = export(
        triton,
        "accumulate",
        args,
        &["--request-count", "240", "--sequence-length", "6"],
    );
    assert_eq!(requests(&doc).len(), 240, "{args:?}: {out}");
    let mut sums = std::collections::HashMap::<u64, i64>::new();
    let mut sorted: Vec<&Value> = requests(&doc).iter().collect();
    sorted.sort_by_key(|r| r["timestamp"].as_u64());
    for r in sorted {
        let id = r["sequence_id"].as_u64();
        let id = id.unwrap_or_else(|| panic!("{args:?}: a request without sequence_id: {r}"));
        let input = r["request_inputs"]["INPUT"].as_i64().expect("INPUT");
        let output = r["response_outputs"][0]["OUTPUT"].as_i64().expect("OUTPUT");
        let sum = sums.entry(id).or_default();
        *sum = (*sum + input) as i32 as i64;
        assert_eq!(*sum, output, "{args:?}: running sum of sequence {id}");
    }
    assert!(sums.len() > 1, "{args:?}: several sequences");
}

fn decoupled_keeps_every_response(triton: &Triton, args: &[&str]) {
    let (doc, out) = export(
        triton,
        "repeat_int32",
        args,
        &["--request-count", "30", "--shape", "IN:5"],
    );
    assert_eq!(requests(&doc).len(), 30, "{args:?}: {out}");
    for r in requests(&doc) {
        let outputs = r["response_outputs"].as_array().expect("outputs");
        let with_data = outputs.iter().filter(|o| o.get("OUT").is_some()).count();
        assert_eq!(with_data, 5, "{args:?}: five responses with outputs: {r}");
        let stamps = r["response_timestamps"].as_array().expect("stamps");
        assert_eq!(stamps.len(), outputs.len(), "{args:?}: a time per response");
        let input = r["request_inputs"]["IN"].as_array().expect("IN");
        for (o, x) in outputs.iter().filter_map(|o| o.get("OUT")).zip(input) {
            assert_eq!(o, x, "{args:?}: OUT repeats IN in order");
        }
    }
    assert!(out.contains("Response Throughput"), "{args:?}: {out}");
}

fn ensemble_reports_its_composing_models(triton: &Triton, protocol: &str) {
    let dir = triton::temp_dir(&format!("ensemble-{protocol}"));
    let csv = dir.join("e.csv");
    let out = ours(
        triton,
        &[
            "-m",
            "ensemble_identity",
            "-i",
            protocol,
            "--request-count",
            "100",
            "-f",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", triton::text(&out));
    let text = triton::text(&out);
    assert!(text.contains("Composing models:"), "{text}");
    assert!(text.contains("identity, version: 1"), "{text}");
    assert!(dir.join("identity_v1.e.csv").exists(), "composing CSV");
    assert!(dir.join("identity_b_v1.e.csv").exists(), "composing CSV");
}

fn unknown_model_is_exit_99(triton: &Triton) {
    for protocol in ["http", "grpc"] {
        let out = ours(triton, &["-m", "no_such_model", "-i", protocol]);
        assert_eq!(out.status.code(), Some(99), "{}", triton::text(&out));
        assert!(triton::text(&out).contains("no_such_model"));
    }
}

/// The same flags give perf_analyzer's CSV header, column for column.
fn csv_headers_equal_perf_analyzers(triton: &Triton, pa: &std::path::Path) {
    let rate = ["--request-rate-range", "200"];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("identity", vec![]),
        ("identity", vec!["--verbose-csv"]),
        ("identity", vec!["--percentile", "95", "--verbose-csv"]),
        ("identity", vec!["-i", "grpc"]),
        ("identity", [&rate[..], &["--verbose-csv"]].concat()),
        ("simple", vec!["-i", "grpc", "--async", "--verbose-csv"]),
        (
            "repeat_int32",
            vec!["-i", "grpc", "--streaming", "--shape", "IN:3"],
        ),
        ("accumulate", vec!["--verbose-csv"]),
        ("ensemble_identity", vec![]),
    ];
    for (model, flags) in cases {
        let theirs = csv_header(triton, Some(pa), model, &flags);
        let mine = csv_header(triton, None, model, &flags);
        assert_eq!(mine, theirs, "CSV header for -m {model} {flags:?}");
    }
}
