//! Tests of `infer`: request decoding, execution and response encoding.
use super::*;
use crate::models::{find_model, MODELS};
use crate::state::Shared;

fn model(name: &str) -> &'static ModelDef {
    &MODELS[find_model(name).unwrap()]
}

fn run(name: &str, body: &[u8], header_len: Option<usize>) -> Result<(InferDone, Vec<u8>), String> {
    let mut out = Vec::new();
    let shared = Shared::new(vec![None; MODELS.len()], vec![false; MODELS.len()]);
    let mut rng = 1u64;
    let mut env = Env {
        shared: &shared,
        rng: &mut rng,
    };
    infer(&mut env, model(name), body, header_len, &mut out).map(|d| (d, out))
}

fn json_of(out: &[u8], done: &InferDone) -> Value {
    serde_json::from_slice(&out[..done.header_len.unwrap_or(out.len())]).unwrap()
}

#[test]
fn simple_json_in_json_out() {
    let a: Vec<i32> = (0..16).collect();
    let b: Vec<i32> = vec![1; 16];
    let body = serde_json::json!({"id": "r\"1", "inputs": [
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": b},
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": [a]}]});
    let (done, out) = run("simple", body.to_string().as_bytes(), None).unwrap();
    let j = json_of(&out, &done);
    assert_eq!(
        (done.batch_size, done.input_bytes, done.header_len),
        (1, 128, None)
    );
    assert_eq!(j["id"], "r\"1");
    assert_eq!(j["model_name"], "simple");
    let sum: Vec<i32> = (1..17).collect();
    let diff: Vec<i32> = (-1..15).collect();
    assert_eq!(j["outputs"][0]["data"], serde_json::json!(sum));
    assert_eq!(j["outputs"][1]["data"], serde_json::json!(diff));
    assert_eq!(j["outputs"][1]["shape"], serde_json::json!([1, 16]));
}

#[test]
fn fp32_binary_in_binary_out() {
    let data: Vec<u8> = [1.5f32, -2.0, 3.25]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let header = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,3],
        "parameters":{"binary_data_size":12}}],"parameters":{"binary_data_output":true}}"#;
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(&data);
    let (done, out) = run("identity_fp32", &body, Some(header.len())).unwrap();
    let j = json_of(&out, &done);
    assert_eq!(j["outputs"][0]["parameters"]["binary_data_size"], 12);
    assert_eq!(&out[done.header_len.unwrap()..], data.as_slice());
    assert!(j.get("id").is_none());
}

#[test]
fn bytes_mixed_output_choice() {
    let header = r#"{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[2,1],
        "data":["ab","\u00e9"]}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":false}}]}"#;
    let (done, out) = run("identity_bytes", header.as_bytes(), None).unwrap();
    let j = json_of(&out, &done);
    assert_eq!(j["outputs"][0]["data"], serde_json::json!(["ab", "é"]));
    assert_eq!((done.batch_size, done.input_bytes), (2, 4 + 2 + 4 + 2));
}

#[test]
fn validation_errors() {
    let i32x16 = r#""datatype":"INT32","shape":[1,16],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"#;
    let two = |a: &str, b: &str| {
        format!(r#"{{"inputs":[{{"name":"INPUT0",{a}}},{{"name":"INPUT1",{b}}}]}}"#)
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("simple", "{nope".into(), "failed to parse the request JSON buffer"),
        ("simple", format!(r#"{{"inputs":[{{"name":"INPUT0",{i32x16}}}]}}"#), "expected 2 inputs but got 1"),
        ("simple", format!(r#"{{"inputs":[{{"name":"X",{i32x16}}}]}}"#), "unexpected inference input 'X'"),
        ("simple", two(&i32x16.replace("INT32", "FP32"), i32x16), "data-type is 'FP32', but model 'simple' expects 'INT32'"),
        ("simple", two(&i32x16.replace("[1,16]", "[1,8]"), i32x16), "Expected [-1,16], got [1,8]"),
        ("simple", two(&i32x16.replace("[1,16]", "[9,16]"), i32x16), "batch-size must be <= 8 for 'simple'"),
        ("simple", two(&i32x16.replace("[1,16]", "[2,16]"), i32x16), "byte size mismatch for input 'INPUT0' for model 'simple'. Expected 128, got 64"),
        ("simple", two(i32x16, i32x16).replace("]}", r#"],"outputs":[{"name":"OUT9"}]}"#), "unexpected inference output 'OUT9'"),
        ("simple", two(i32x16, &i32x16.replace("0]", "\"x\"]")), "is not a valid INT32"),
        ("identity_fp32", r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}}]}"#.into(), "needs 8 bytes, 0 remain"),
        ("identity_fp32", r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2]}]}"#.into(), "neither data nor binary_data_size"),
        ("repeat_int32", r#"{"inputs":[{"name":"IN","datatype":"INT32","shape":[1],"data":[5]}]}"#.into(), "model 'repeat_int32' is decoupled"),
    ];
    for (m, body, want) in cases {
        let err = run(m, body.as_bytes(), None).unwrap_err();
        assert!(err.contains(want), "{body}: got {err:?}, want {want:?}");
    }
    let header = r#"{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":5}}]}"#;
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(&[1, 0, 0, 0, b'a']);
    let err = run("identity_bytes", &body, Some(header.len())).unwrap_err();
    assert!(err.contains("expected 2 string elements"), "{err}");
    let header = header.replace(":5}", ":7}");
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(&[1, 0, 0, 0, b'a', b'z', b'z']);
    let err = run("identity_bytes", &body, Some(header.len())).unwrap_err();
    assert!(err.contains("invalid BYTES framing"), "{err}");
    for shape in ["[8,9223372036854775807]", "[1,4611686018427387904]"] {
        let body = format!(
            r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":{shape},"data":[]}}]}}"#
        );
        let err = run("identity_fp32", body.as_bytes(), None).unwrap_err();
        assert!(err.contains("is too large"), "{err}");
    }
    assert!(run("simple", b"{}", Some(10))
        .unwrap_err()
        .contains("exceeds the request body"));
}
