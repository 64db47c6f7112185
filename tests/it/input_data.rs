//! `--input-data` end to end against the in-process reference server: JSON files and a data
//! directory over HTTP and gRPC. The profile export's `request_inputs` shows which steps went
//! out in which order; output validation runs on real responses of the server.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use inferperf::config::{Config, InputData, Protocol, TensorFormat};
use inferperf::inputs::{batch, batch_expected, check_outputs, load_inputs, ResponseFormat};
use inferperf::protocol::http1::{Progress, ResponseReader};
use inferperf::service::{triton_grpc, triton_http};
use serde_json::{json, Value};

/// A step of the `simple` model: INPUT0 all `a`, INPUT1 all `b`.
fn simple_step(a: i32, b: i32) -> Value {
    json!({"INPUT0": vec![a; 16], "INPUT1": vec![b; 16]})
}

fn write_json(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

/// Runs `cfg` with a profile export and returns the export's requests in send order.
fn exported_requests(mut cfg: Config, dir: &Path) -> Vec<Value> {
    let export = dir.join("export.json");
    let _ = std::fs::remove_file(&export);
    cfg.profile_export_file = Some(export.clone());
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    doc["experiments"][0]["requests"]
        .as_array()
        .expect("requests in the export")
        .clone()
}

fn first_input0(requests: &[Value]) -> Vec<i64> {
    requests
        .iter()
        .map(|r| {
            let v = &r["request_inputs"]["INPUT0"];
            v.as_array()
                .map_or_else(|| v.as_i64(), |a| a[0].as_i64())
                .unwrap()
        })
        .collect()
}

#[test]
fn json_steps_go_out_in_order_over_http() {
    let server = start_server();
    let dir = temp_dir("input-json-http");
    let doc = json!({"data": [simple_step(1, 10), simple_step(2, 20), simple_step(3, 30)]});
    let mut cfg = quick_config(&server, "simple", 6);
    cfg.input_data = InputData::Files(vec![write_json(&dir, "data.json", &doc)]);
    cfg.request_count = 6;
    let requests = exported_requests(cfg, &dir);
    assert_eq!(first_input0(&requests), vec![1, 2, 3, 1, 2, 3]);
    let r = &requests[1];
    assert_eq!(r["request_inputs"]["INPUT1"], json!(vec![20; 16]));
    // The server computed OUTPUT0 = INPUT0 + INPUT1 from the values the client sent.
    assert_eq!(r["response_outputs"][0]["OUTPUT0"], json!(vec![22; 16]));
    assert_eq!(model_counters(&server, "simple").infer_requests, 6);
}

#[test]
fn batches_of_two_over_grpc_wrap_around_the_steps() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("input-json-grpc");
    let doc = json!({"data": [simple_step(1, 0), simple_step(2, 0), simple_step(3, 0)]});
    let mut cfg = quick_config(&server, "simple", 3);
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.expect("gRPC endpoint").to_string();
    cfg.input_data = InputData::Files(vec![write_json(&dir, "data.json", &doc)]);
    cfg.batch_size = 2;
    cfg.request_count = 3;
    let requests = exported_requests(cfg, &dir);
    // Request k starts at step (k * 2) % 3: steps [0,1], [2,0], [1,2].
    let pairs: Vec<(i64, i64)> = requests
        .iter()
        .map(|r| {
            let v = r["request_inputs"]["INPUT0"].as_array().unwrap();
            assert_eq!(v.len(), 32, "two steps of 16 values");
            (v[0].as_i64().unwrap(), v[16].as_i64().unwrap())
        })
        .collect();
    assert_eq!(pairs, vec![(1, 2), (3, 1), (2, 3)]);
    assert_eq!(model_counters(&server, "simple").inferences, 6);
}

#[test]
fn bytes_and_shapes_from_json_over_http_json_tensors() {
    let server = start_server();
    let dir = temp_dir("input-json-bytes");
    let doc = json!({"data": [
        {"INPUT0": {"content": ["hello"], "shape": [1]}},
        {"INPUT0": {"content": ["bye"], "shape": [1]}}
    ]});
    let mut cfg = quick_config(&server, "identity_bytes", 4);
    cfg.input_data = InputData::Files(vec![write_json(&dir, "text.json", &doc)]);
    cfg.input_tensor_format = TensorFormat::Json;
    cfg.request_count = 4;
    let requests = exported_requests(cfg, &dir);
    let sent: Vec<&str> = requests
        .iter()
        .map(|r| r["request_inputs"]["INPUT0"].as_str().unwrap())
        .collect();
    assert_eq!(sent, vec!["hello", "bye", "hello", "bye"]);
    assert_eq!(requests[1]["response_outputs"][0]["OUTPUT0"], json!("bye"));
}

#[test]
fn data_directory_over_http() {
    let server = start_server();
    let dir = temp_dir("input-dir");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let values: Vec<u8> = [0.5f32, 1.5, 2.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(data.join("INPUT0"), &values).unwrap();
    std::fs::write(data.join("OUTPUT0"), &values).unwrap();
    let mut cfg = quick_config(&server, "identity_fp32", 2);
    cfg.input_data = InputData::Files(vec![data]);
    cfg.shapes = vec![("INPUT0".into(), vec![3])];
    cfg.request_count = 2;
    let requests = exported_requests(cfg, &dir);
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["request_inputs"]["INPUT0"],
        json!([0.5, 1.5, 2.5])
    );
}

#[test]
fn bad_data_file_fails_the_run_with_its_location() {
    let server = start_server();
    let dir = temp_dir("input-json-bad");
    let doc = json!({"data": [simple_step(1, 1), {"INPUT0": vec![1; 16]}]});
    let path = write_json(&dir, "bad.json", &doc);
    let mut cfg = quick_config(&server, "simple", 2);
    cfg.input_data = InputData::Files(vec![path.clone()]);
    let mut out = Vec::new();
    let stop = Arc::new(AtomicBool::new(false));
    let err = inferperf::run::run(&cfg, &mut out, stop)
        .err()
        .expect("the run fails");
    assert_eq!(err.exit_code(), 99);
    let want = format!(
        "--input-data {}: missing tensor INPUT1 (Location stream id: 0, step id: 1)",
        path.display()
    );
    assert_eq!(err.msg, want);
    assert_eq!(model_counters(&server, "simple").infer_requests, 0);
}

/// Validation data of a file, checked against the server's real responses (HTTP binary and
/// JSON outputs, gRPC), and a wrong expectation caught.
#[test]
fn validation_data_checks_real_responses() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("input-validation");
    let doc = json!({
        "data": [simple_step(5, 2), simple_step(1, 1)],
        "validation_data": [{"OUTPUT0": vec![7; 16], "OUTPUT1": vec![3; 16]},
                            {"OUTPUT0": vec![2; 16], "OUTPUT1": vec![0; 16]}]
    });
    let mut cfg = quick_config(&server, "simple", 1);
    cfg.input_data = InputData::Files(vec![write_json(&dir, "v.json", &doc)]);
    let target = inferperf::run::prepare(&cfg).unwrap();
    let model = target.model().unwrap();
    let set = load_inputs(&model.meta, &model.config, &cfg).unwrap();
    assert!(set.has_validation());
    let outputs = vec!["OUTPUT0".to_string(), "OUTPUT1".to_string()];
    let mut http = TcpStream::connect(server.addr).unwrap();
    http.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let grpc_addr = server.grpc_addr.unwrap().to_string();
    let mut grpc = inferperf::protocol::grpc::blocking::GrpcClient::connect(
        &grpc_addr,
        Duration::from_secs(5),
    )
    .unwrap();
    for first in 0..2 {
        let inputs = batch(&set, 0, first, 1, true).unwrap();
        let expected = batch_expected(&set, 0, first, 1, true).unwrap().unwrap();
        for format in [TensorFormat::Binary, TensorFormat::Json] {
            let path = triton_http::infer_path("simple", "");
            let request = triton_http::encode_infer_request(
                "h",
                &path,
                &inputs,
                &outputs,
                format,
                format,
                &[],
            )
            .unwrap();
            let (status, response) = exchange(&mut http, &request);
            assert_eq!(status, 200);
            assert_eq!(
                check_outputs(&expected, &response, ResponseFormat::Http),
                Ok(())
            );
        }
        let framed = triton_grpc::encode_infer_request(
            "simple",
            "",
            &inputs,
            &outputs,
            &[],
            inferperf::config::Compression::None,
        )
        .unwrap();
        // Drop the 5-byte gRPC message prefix: the blocking client adds its own.
        let response = grpc.unary("ModelInfer", &framed[5..]).unwrap();
        assert_eq!(
            check_outputs(&expected, &response, ResponseFormat::Grpc),
            Ok(())
        );
        // Step 0's expectations do not hold for step 1's response.
        if first == 1 {
            let step0 = batch_expected(&set, 0, 0, 1, true).unwrap().unwrap();
            let err = check_outputs(&step0, &response, ResponseFormat::Grpc).unwrap_err();
            assert!(
                err.contains("Output doesn't match expected output"),
                "{err}"
            );
            assert!(err.contains("OUTPUT0"), "{err}");
        }
    }
}

/// Sends one complete HTTP/1.1 request on `stream`; returns (status, body).
fn exchange(stream: &mut TcpStream, request: &[u8]) -> (u16, Vec<u8>) {
    stream.write_all(request).unwrap();
    let mut reader = ResponseReader::new();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Progress::Done(head) = reader.advance(&buf).unwrap() {
            return (head.status, reader.body(&buf).to_vec());
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "server closed before the response ended");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// During a run, every response is checked against the validation data: right data passes
/// over HTTP, gRPC and gRPC streaming; a wrong expectation ends the run with the mismatch.
#[test]
fn runs_check_responses_against_validation_data() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("run-validation");
    let good = json!({
        "data": [simple_step(5, 2), simple_step(1, 1)],
        "validation_data": [{"OUTPUT0": vec![7; 16], "OUTPUT1": vec![3; 16]},
                            {"OUTPUT0": vec![2; 16], "OUTPUT1": vec![0; 16]}]
    });
    let bad = json!({
        "data": [simple_step(5, 2)],
        "validation_data": [{"OUTPUT0": vec![8; 16], "OUTPUT1": vec![3; 16]}]
    });
    for (protocol, streaming) in [
        (Protocol::Http, false),
        (Protocol::Grpc, false),
        (Protocol::Grpc, true),
    ] {
        let mut cfg = quick_config(&server, "simple", 20);
        if protocol == Protocol::Grpc {
            cfg.protocol = Protocol::Grpc;
            cfg.url = server.grpc_addr.unwrap().to_string();
            cfg.streaming = streaming;
            cfg.async_mode = streaming;
        }
        cfg.request_count = 40;
        cfg.input_data = InputData::Files(vec![write_json(&dir, "good.json", &good)]);
        let (res, _) = run(&cfg);
        assert!(
            res.error.is_none(),
            "{protocol:?}/{streaming}: {:?}",
            res.error
        );
        cfg.input_data = InputData::Files(vec![write_json(&dir, "bad.json", &bad)]);
        let (res, _) = run(&cfg);
        let err = res.error.expect("the mismatch ends the run");
        assert!(
            err.msg.contains("Output doesn't match expected output"),
            "{}",
            err.msg
        );
        assert!(err.msg.contains("OUTPUT0"), "{}", err.msg);
    }
}

/// Input files are read with bounds: a line over its bound, a value over its bound or a
/// broken JSON file ends the run with exit 99 and a short error naming the file, the line
/// and the bound, quoting at most a short excerpt.
#[test]
fn hostile_input_files_fail_with_a_short_error_naming_file_line_and_bound() {
    let server = start_server();
    let addr = server.addr.to_string();
    let dir = temp_dir("input-hostile");
    let long_intervals = dir.join("long.txt");
    let mut bytes = b"100\n".to_vec();
    bytes.extend(vec![0u8; 1 << 20]);
    std::fs::write(&long_intervals, bytes).unwrap();
    let huge_interval = dir.join("huge.txt");
    std::fs::write(&huge_interval, "100\n\n18446744073709551615\n").unwrap();
    let broken = dir.join("broken.json");
    let mut bytes = br#"{"data": ["#.to_vec();
    bytes.extend(format!("{},", simple_step(1, 2)).repeat(10_000).bytes());
    bytes.extend(vec![b'x'; 1 << 20]);
    std::fs::write(&broken, bytes).unwrap();
    let long_prompt = dir.join("long.jsonl");
    let line = format!("{{\"text\": \"{}\"}}\n", "a".repeat(16 << 20));
    std::fs::write(&long_prompt, format!("{{\"text\": \"a\"}}\n{line}")).unwrap();
    let pa = |flag: &str, p: &Path| {
        let args = ["-m", "simple", "-u", &addr, "--ready-timeout", "2", flag];
        let mut args: Vec<String> = args.map(String::from).to_vec();
        args.push(p.to_str().unwrap().into());
        args
    };
    let cases: [(Vec<String>, String); 4] = [
        (
            pa("--request-intervals", &long_intervals),
            format!(
                "{} line 2: the line is longer than 4 KiB (the bound on one line).",
                long_intervals.display()
            ),
        ),
        (
            pa("--request-intervals", &huge_interval),
            format!(
                "{} line 3: '18446744073709551615' is above 3600000000 microseconds (an hour).",
                huge_interval.display()
            ),
        ),
        (
            pa("--input-data", &broken),
            format!(
                "--input-data {}: failed to parse the specified json file for reading provided \
                 data: expected value at line 1 column ",
                broken.display()
            ),
        ),
        (
            ["profile", "-m", "m", "-u", &addr, "--input-file"]
                .map(String::from)
                .into_iter()
                .chain([long_prompt.to_str().unwrap().to_string()])
                .collect(),
            format!(
                "--input-file {} line 2: the line is longer than 16 MiB (the bound on one line)",
                long_prompt.display()
            ),
        ),
    ];
    for (args, needle) in cases {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_inferperf"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(99), "{args:?}: {stderr}");
        assert!(stderr.contains(&needle), "{args:?}: {stderr}");
        assert!(stderr.len() < 1024, "{args:?}: {} bytes", stderr.len());
    }
    assert_eq!(model_counters(&server, "simple").infer_requests, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
