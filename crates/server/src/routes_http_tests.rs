//! End-to-end tests of every endpoint over real sockets on 127.0.0.1.

use serde_json::{json, Value};

use crate::test_client::*;

#[test]
fn every_metadata_endpoint() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let cases: [(&str, u16, Option<&str>); 12] = [
        ("/v2/health/live", 200, None),
        ("/v2/health/ready", 200, None),
        ("/v2", 200, Some("/extensions/1")),
        ("/v2/models/simple", 200, Some("/inputs/0/shape")),
        ("/v2/models/simple/versions/1", 200, Some("/outputs/1/name")),
        ("/v2/models/simple/ready", 200, None),
        ("/v2/models/identity_fp32/versions/1/ready", 200, None),
        (
            "/v2/models/identity_bytes/config",
            200,
            Some("/input/0/data_type"),
        ),
        (
            "/v2/models/simple/versions/1/config",
            200,
            Some("/max_batch_size"),
        ),
        ("/v2/models/stats", 200, Some("/model_stats/2/name")),
        (
            "/v2/models/simple/stats",
            200,
            Some("/model_stats/0/inference_stats/success"),
        ),
        (
            "/v2/models/simple/versions/1/stats",
            200,
            Some("/model_stats/0/version"),
        ),
    ];
    for (path, status, pointer) in cases {
        let resp = c.request(&get(path));
        assert_eq!(resp.status, status, "{path}");
        match pointer {
            None => assert!(resp.body.is_empty(), "{path}"),
            Some(p) => assert!(resp.json().pointer(p).is_some(), "{path}: {p}"),
        }
    }
    let meta = c.request(&get("/v2")).json();
    assert_eq!(meta["name"], "inferperf");
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        meta["extensions"],
        json!([
            "sequence",
            "model_repository",
            "model_repository(unload_dependents)",
            "model_configuration",
            "system_shared_memory",
            "cuda_shared_memory",
            "binary_tensor_data",
            "parameters",
            "statistics",
            "trace"
        ])
    );
    let simple = c.request(&get("/v2/models/simple")).json();
    assert_eq!(
        simple["inputs"][1],
        json!({"name": "INPUT1", "datatype": "INT32", "shape": [-1, 16]})
    );
    let cfg = c.request(&get("/v2/models/identity_fp32/config")).json();
    assert_eq!(cfg["input"][0]["dims"], json!([-1]));
    assert_eq!(cfg["input"][0]["optional"], false);
    assert_eq!(cfg["output"][0]["data_type"], "TYPE_FP32");
    assert_eq!(server.counters().http_requests, 15);
}

#[test]
fn unknown_things_are_404() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let cases = [
        (
            get("/v2/models/nope"),
            404,
            "Request for unknown model: 'nope' is not found",
        ),
        (
            get("/v2/models/nope/config"),
            404,
            "Request for unknown model: 'nope' is not found",
        ),
        (
            post_json("/v2/models/nope/infer", "{}"),
            404,
            "Request for unknown model: 'nope' is not found",
        ),
        (
            get("/v2/models/simple/versions/3"),
            404,
            "Request for unknown model: 'simple' version 3 is not found",
        ),
        (get("/v2/nothing"), 404, "Not Found"),
        (
            get("/v2/models/simple/infer"),
            405,
            "method not allowed for '/v2/models/simple/infer'",
        ),
    ];
    for (req, status, msg) in cases {
        let resp = c.request(&req);
        assert_eq!((resp.status, resp.error()), (status, msg.to_string()));
        assert_eq!(resp.header("Content-Type"), Some("application/json"));
    }
    assert_eq!(server.counters().infer_requests, 0);
}

#[test]
fn simple_binary_and_json() {
    let server = server();
    let mut c = Client::connect(server.addr);
    for batch in [1, 3, 8] {
        let resp = c.request(&simple_binary(batch));
        assert_eq!(
            resp.header("Content-Type"),
            Some("application/octet-stream")
        );
        check_simple_binary(&resp, batch);
    }
    let a: Vec<i32> = (0..32).map(|i| i * 3).collect();
    let b: Vec<i32> = (0..32).map(|i| 1000 - i).collect();
    let body = json!({"id": "j1", "inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [2, 16], "data": a},
        {"name": "INPUT1", "datatype": "INT32", "shape": [2, 16], "data": b}],
        "outputs": [{"name": "OUTPUT1"}, {"name": "OUTPUT0", "parameters": {"binary_data": false}}]});
    let resp = c.request(&post_json(
        "/v2/models/simple/versions/1/infer",
        &body.to_string(),
    ));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("Inference-Header-Content-Length"), None);
    let j = resp.json();
    assert_eq!(
        (
            j["model_name"].clone(),
            j["model_version"].clone(),
            j["id"].clone()
        ),
        (json!("simple"), json!("1"), json!("j1"))
    );
    let diff: Vec<i32> = (0..32).map(|i| i * 3 - (1000 - i)).collect();
    let sum: Vec<i32> = (0..32).map(|i| i * 3 + 1000 - i).collect();
    assert_eq!(j["outputs"][0]["name"], "OUTPUT1");
    assert_eq!(j["outputs"][0]["data"], json!(diff));
    assert_eq!(j["outputs"][1]["data"], json!(sum));
    assert_eq!(j["outputs"][1]["shape"], json!([2, 16]));
}

#[test]
fn identity_models_binary_and_json() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let floats = [0.5f32, -1.25, 3.0e10, 7.0];
    let data: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
    let header = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2,2],"parameters":{"binary_data_size":16}}],"parameters":{"binary_data_output":true}}"#;
    let resp = c.request(&post_binary(
        "/v2/models/identity_fp32/infer",
        header,
        &data,
    ));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.binary(), data.as_slice());
    assert_eq!(resp.json()["outputs"][0]["shape"], json!([2, 2]));
    let body = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": floats}]});
    let resp = c.request(&post_json(
        "/v2/models/identity_fp32/infer",
        &body.to_string(),
    ));
    // Compared as f32: the server prints each f32 in its shortest form (3e10, not 30000001024).
    let echoed: Vec<f32> = resp.json()["outputs"][0]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(echoed, floats);

    let mut framed = Vec::new();
    for s in ["hello", "", "wörld"] {
        inferperf_wire::tensor::push_bytes_element(&mut framed, s.as_bytes());
    }
    let header = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"BYTES","shape":[1,3],"parameters":{{"binary_data_size":{}}}}}],"outputs":[{{"name":"OUTPUT0","parameters":{{"binary_data":true}}}}]}}"#,
        framed.len()
    );
    let resp = c.request(&post_binary(
        "/v2/models/identity_bytes/infer",
        &header,
        &framed,
    ));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.binary(), framed.as_slice());
    let body = json!({"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [3, 1], "data": ["a", "bc", "d"]}]});
    let resp = c.request(&post_json(
        "/v2/models/identity_bytes/infer",
        &body.to_string(),
    ));
    assert_eq!(resp.json()["outputs"][0]["data"], json!(["a", "bc", "d"]));
    assert_eq!(resp.json()["outputs"][0]["shape"], json!([3, 1]));
}

#[test]
fn bad_infer_requests_are_400_with_triton_messages() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let path = "/v2/models/simple/infer";
    let zeros = vec![0; 16];
    let input = |name: &str, shape: Value, data: &Vec<i32>| json!({"name": name, "datatype": "INT32", "shape": shape, "data": data});
    let wrong_shape = json!({"inputs": [input("INPUT0", json!([1, 15]), &zeros), input("INPUT1", json!([1, 16]), &zeros)]});
    let missing = json!({"inputs": [input("INPUT0", json!([1, 16]), &zeros)]});
    let cases = [
        ("{\"inputs\": [", "failed to parse the request JSON buffer"),
        (
            &wrong_shape.to_string()[..],
            "unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,15]",
        ),
        (
            &missing.to_string()[..],
            "expected 2 inputs but got 1 inputs for model 'simple'",
        ),
    ];
    for (body, msg) in cases {
        let resp = c.request(&post_json(path, body));
        assert_eq!(resp.status, 400, "{body}");
        assert!(resp.error().starts_with(msg), "{body}: {}", resp.error());
    }
    // A short binary section is caught before any compute.
    let header = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}"#;
    let resp = c.request(&post_binary(
        "/v2/models/identity_fp32/infer",
        header,
        &[0; 8],
    ));
    assert_eq!(resp.status, 400);
    assert!(
        resp.error().contains("needs 16 bytes, 8 remain"),
        "{}",
        resp.error()
    );
    // The connection stays usable after an application-level error.
    check_simple_binary(&c.request(&simple_binary(1)), 1);
    let counters = server.counters();
    let simple = counters.model("simple").unwrap();
    assert_eq!(
        (simple.infer_requests, simple.failures, simple.inferences),
        (4, 3, 1)
    );
    assert_eq!(counters.model("identity_fp32").unwrap().failures, 1);
    assert_eq!(counters.infer_requests, 5);
}

#[test]
fn statistics_match_what_was_sent() {
    let server = server();
    let mut c = Client::connect(server.addr);
    for batch in [1, 2, 2, 8] {
        check_simple_binary(&c.request(&simple_binary(batch)), batch);
    }
    let bad = c.request(&post_json("/v2/models/simple/infer", "[]"));
    assert_eq!(bad.status, 400);
    let stats = c.request(&get("/v2/models/simple/stats")).json();
    let m = &stats["model_stats"][0];
    assert_eq!(m["name"], "simple");
    assert_eq!(m["version"], "1");
    assert_eq!(m["inference_count"], 13);
    assert_eq!(m["execution_count"], 4);
    let s = &m["inference_stats"];
    for bucket in [
        "success",
        "queue",
        "compute_input",
        "compute_infer",
        "compute_output",
    ] {
        assert_eq!(s[bucket]["count"], 4, "{bucket}");
    }
    assert!(s["success"]["ns"].as_u64().unwrap() > 0);
    assert!(s["compute_infer"]["ns"].as_u64().unwrap() > 0);
    assert_eq!(s["fail"]["count"], 1);
    assert_eq!(s["cache_hit"], json!({"count": 0, "ns": 0}));
    let success_ns = s["success"]["ns"].as_u64().unwrap();
    let parts: u64 = ["queue", "compute_input", "compute_infer", "compute_output"]
        .iter()
        .map(|b| s[*b]["ns"].as_u64().unwrap())
        .sum();
    assert!(parts <= success_ns, "parts {parts} > success {success_ns}");
    let batches: Vec<(u64, u64)> = m["batch_stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["batch_size"].as_u64().unwrap(),
                b["compute_infer"]["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(batches, vec![(1, 1), (2, 2), (8, 1)]);
    assert!(m["last_inference"].as_u64().unwrap() > 1_600_000_000_000);
    let all = c.request(&get("/v2/models/stats")).json();
    assert_eq!(all["model_stats"][1]["inference_count"], 0);
    let counters = server.counters();
    let simple = counters.model("simple").unwrap();
    assert_eq!(
        (simple.infer_requests, simple.inferences, simple.failures),
        (5, 13, 1)
    );
    assert_eq!(simple.input_bytes, 13 * 16 * 4 * 2);
    assert_eq!(counters.http_requests, 7);
}
