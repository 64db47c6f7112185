//! End-to-end `--service-kind torchserve`, `tfserving` and `dynamic_grpc` against the
//! in-process reference server, which answers with what it received (the profile export
//! carries those answers), plus the kinds' usage errors (exit 99 naming the flag or field).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use common::*;
use inferperf::config::{Config, InputData, Protocol, ServiceKind};
use serde_json::Value;

fn export(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).expect("export is JSON")
}

/// `response_outputs` of every exported request, in order.
fn exported_responses(doc: &Value) -> Vec<Value> {
    doc["experiments"][0]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["response_outputs"].as_array().unwrap().clone())
        .collect()
}

fn write_data(dir: &Path, steps: &[Value]) -> PathBuf {
    let path = dir.join("data.json");
    std::fs::write(&path, serde_json::json!({ "data": steps }).to_string()).unwrap();
    path
}

fn run_err(cfg: &Config) -> inferperf::error::Error {
    let mut out = Vec::new();
    match inferperf::run::run(cfg, &mut out, Arc::new(AtomicBool::new(false))) {
        Ok(_) => panic!("the run should fail"),
        Err(e) => e,
    }
}

#[test]
fn torchserve_uploads_each_steps_file_as_the_data_part() {
    let server = start_server();
    let dir = temp_dir("kinds-torchserve");
    let (small, big) = (dir.join("small.bin"), dir.join("big.jpg"));
    std::fs::write(&small, vec![7u8; 10]).unwrap();
    std::fs::write(&big, vec![1u8; 3000]).unwrap();
    let data = write_data(
        &dir,
        &[
            serde_json::json!({ "TORCHSERVE_INPUT": [small.display().to_string()] }),
            serde_json::json!({ "TORCHSERVE_INPUT": [big.display().to_string()] }),
        ],
    );
    let mut cfg = quick_config(&server, "simple", 6);
    cfg.service_kind = ServiceKind::TorchServe;
    cfg.input_data = InputData::Files(vec![data]);
    cfg.request_count = 6;
    cfg.profile_export_file = Some(dir.join("export.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 6);
    assert!(text.contains("  Service Kind: TORCHSERVE\n"), "{text}");
    assert!(!text.contains("Server:"), "{text}");

    let doc = export(cfg.profile_export_file.as_ref().unwrap());
    assert_eq!(doc["service_kind"], "torchserve");
    let answers: Vec<Value> = exported_responses(&doc)
        .iter()
        .map(|o| serde_json::from_str(o["response"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(answers.len(), 6);
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a["part"], "data");
        assert_eq!(a["model"], "simple");
        let (bytes, name) = if i % 2 == 0 {
            (10, "small.bin")
        } else {
            (3000, "big.jpg")
        };
        assert_eq!(a["bytes"], bytes, "{a}");
        assert_eq!(a["filename"], name, "{a}");
    }
    server.stop();
}

fn tfserving_config(server: &inferperf::server::ServerHandle, model: &str) -> Config {
    let mut cfg = quick_config(server, model, 4);
    cfg.service_kind = ServiceKind::TfServing;
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.expect("gRPC port").to_string();
    cfg.request_count = 4;
    cfg
}

#[test]
fn tfserving_sends_the_signature_inputs_with_and_without_b() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("kinds-tfserving");
    // -b 2 on a batching model: the signature's -1 first dim becomes the batch dim.
    let mut cfg = tfserving_config(&server, "simple");
    cfg.batch_size = 2;
    cfg.batch_size_given = true;
    cfg.profile_export_file = Some(dir.join("batched.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 4);
    assert!(
        text.contains("  Service Kind: TENSORFLOW_SERVING\n"),
        "{text}"
    );
    let doc = export(cfg.profile_export_file.as_ref().unwrap());
    assert_eq!(doc["service_kind"], "tfserving");
    for out in exported_responses(&doc) {
        for name in ["INPUT0", "INPUT1"] {
            assert_eq!(out[name]["dtype"], "DT_INT32", "{out}");
            assert_eq!(out[name]["shape"], serde_json::json!([2, 16]), "{out}");
            assert_eq!(out[name]["bytes"], 2 * 16 * 4, "{out}");
        }
    }

    // No -b on a model without batching: tensors go with the signature's shape.
    let mut cfg = tfserving_config(&server, "accumulate_int32");
    cfg.profile_export_file = Some(dir.join("plain.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(!text.contains("Batch size"), "{text}");
    let doc = export(cfg.profile_export_file.as_ref().unwrap());
    for out in exported_responses(&doc) {
        assert_eq!(out["INPUT"]["shape"], serde_json::json!([1]), "{out}");
    }

    // -b on a signature whose first dim is fixed is a usage error naming -b.
    let mut cfg = tfserving_config(&server, "accumulate_int32");
    cfg.batch_size_given = true;
    let err = run_err(&cfg);
    assert_eq!(err.exit_code(), 99, "{}", err.msg);
    assert!(err.msg.starts_with("-b:"), "{}", err.msg);
    // An unknown signature names --model-signature-name.
    let mut cfg = tfserving_config(&server, "simple");
    cfg.model_signature_name = "nope".into();
    let err = run_err(&cfg);
    assert!(
        err.msg.contains("--model-signature-name nope"),
        "{}",
        err.msg
    );
    server.stop();
}

#[test]
fn dynamic_grpc_sends_every_generated_message_and_counts_the_answer() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("kinds-dynamic");
    // Two messages of 3 and 5 bytes, each after a 4-byte length in host byte order.
    let mut framed = Vec::new();
    for msg in [&b"abc"[..], b"defgh"] {
        framed.extend_from_slice(&(msg.len() as u32).to_ne_bytes());
        framed.extend_from_slice(msg);
    }
    let messages = dir.join("messages.bin");
    std::fs::write(&messages, &framed).unwrap();
    let command = format!("cat '{}'", messages.display());
    let data = write_data(
        &dir,
        &[serde_json::json!({ "message_generator": [command] })],
    );
    let mut cfg = quick_config(&server, "", 5);
    cfg.service_kind = ServiceKind::DynamicGrpc;
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.unwrap().to_string();
    cfg.grpc_method = "inferperf.test.Echo/Echo".into();
    cfg.input_data = InputData::Files(vec![data.clone()]);
    cfg.request_count = 5;
    cfg.profile_export_file = Some(dir.join("export.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 5);
    assert!(text.contains("  Service Kind: DYNAMIC_GRPC\n"), "{text}");
    let doc = export(cfg.profile_export_file.as_ref().unwrap());
    assert_eq!(doc["service_kind"], "dynamic_grpc");
    let outs = exported_responses(&doc);
    assert_eq!(outs.len(), 5);
    for out in outs {
        // The echo answers with the concatenation of the messages it received.
        assert_eq!(out["response_bytes"], 8, "{out}");
    }

    // An unknown method fails the requests with the server's status.
    cfg.grpc_method = "inferperf.test.Echo/Nope".into();
    cfg.profile_export_file = None;
    let mut out = Vec::new();
    let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false)));
    let failed = match res {
        Err(e) => Some(e),
        Ok(r) => r.error,
    };
    assert!(failed.is_some(), "an UNIMPLEMENTED method must not pass");
    server.stop();
}

#[test]
fn missing_pseudo_inputs_are_usage_errors_naming_the_field() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("kinds-missing");
    let data = write_data(&dir, &[serde_json::json!({})]);
    let mut cfg = quick_config(&server, "simple", 2);
    cfg.service_kind = ServiceKind::TorchServe;
    cfg.input_data = InputData::Files(vec![data.clone()]);
    let err = run_err(&cfg);
    assert_eq!(err.exit_code(), 99, "{}", err.msg);
    assert!(err.msg.contains("TORCHSERVE_INPUT"), "{}", err.msg);

    let mut cfg = quick_config(&server, "", 2);
    cfg.service_kind = ServiceKind::DynamicGrpc;
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.unwrap().to_string();
    cfg.grpc_method = "inferperf.test.Echo/Echo".into();
    cfg.input_data = InputData::Files(vec![data]);
    let err = run_err(&cfg);
    assert_eq!(err.exit_code(), 99, "{}", err.msg);
    assert!(err.msg.contains("message_generator"), "{}", err.msg);
    server.stop();
}

#[test]
fn command_line_usage_errors_exit_99_naming_the_flag() {
    let dir = temp_dir("kinds-cli");
    let data = write_data(&dir, &[serde_json::json!({ "TORCHSERVE_INPUT": ["f"] })]);
    let data = data.display().to_string();
    let rows: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["-m", "m", "--service-kind", "torchserve", "-i", "grpc"],
            "-i grpc",
        ),
        (
            vec!["-m", "m", "--service-kind", "torchserve"],
            "--input-data",
        ),
        (vec!["-m", "m", "--service-kind", "tfserving"], "-i http"),
        (
            vec![
                "-m",
                "m",
                "--service-kind",
                "tfserving",
                "-i",
                "grpc",
                "--async",
            ],
            "--async",
        ),
        (
            vec!["--service-kind", "dynamic_grpc", "--input-data", &data],
            "--grpc-method",
        ),
        (
            vec![
                "--service-kind",
                "dynamic_grpc",
                "--grpc-method",
                "NoSlash",
                "--input-data",
                &data,
            ],
            "--grpc-method",
        ),
        (
            vec!["-m", "m", "--grpc-method", "a.B/C"],
            "--grpc-method is only supported",
        ),
        (
            vec!["-m", "m", "--model-signature-name", "s"],
            "--model-signature-name is only supported",
        ),
        (
            vec![
                "--service-kind",
                "dynamic_grpc",
                "-i",
                "http",
                "--grpc-method",
                "a.B/C",
            ],
            "-i http",
        ),
    ];
    for (args, want) in rows {
        let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(99), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
