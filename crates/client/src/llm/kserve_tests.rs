//! `--endpoint-type kserve` from `profile`'s flags: the registry's `kserve_llm` kind turns a
//! prompt into the `ModelInferRequest` tensors each `--backend` takes.

use crate::llm::cli::ProfileConfig;
use crate::llm::payload::Entry;
use crate::protocol::grpc::pb::inference as pb;
use crate::run::kinds::codec::Post;
use crate::service::kserve_llm::TEXT_OUTPUT;
use prost::Message;
use serde_json::Value;

fn cfg(args: &[&str]) -> ProfileConfig {
    let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "llm".into()];
    v.extend(["--endpoint-type".into(), "kserve".into()]);
    v.extend(args.iter().map(Into::into));
    super::cli::parse(v).unwrap().unwrap()
}

fn request(args: &[&str], osl: Option<u64>) -> pb::ModelInferRequest {
    let e = Entry {
        text: "hi there".into(),
        isl: 2,
        osl,
        payload: None,
    };
    let cfg = cfg(args);
    let prompt = crate::llm::payload::prompt(&cfg, "llm", &e);
    let post = Post {
        address: "",
        path: "",
        headers: &[],
    };
    let bytes = cfg
        .endpoint_type
        .service()
        .encode(&prompt, b"", &post)
        .unwrap();
    pb::ModelInferRequest::decode(&bytes[5..]).unwrap()
}

/// (name, datatype, raw contents) of every input.
fn inputs(req: &pb::ModelInferRequest) -> Vec<(String, String, Vec<u8>)> {
    req.inputs
        .iter()
        .zip(&req.raw_input_contents)
        .map(|(i, raw)| (i.name.clone(), i.datatype.clone(), raw.clone()))
        .collect()
}

fn names(req: &pb::ModelInferRequest) -> Vec<String> {
    req.inputs.iter().map(|i| i.name.clone()).collect()
}

#[test]
fn request_carries_the_llm_tensors() {
    let req = request(&["--streaming"], Some(5));
    assert_eq!(
        names(&req),
        [
            "text_input",
            "max_tokens",
            "exclude_input_in_output",
            "stream"
        ]
    );
    assert_eq!(req.raw_input_contents[0], b"\x08\0\0\0hi there");
    assert_eq!(req.raw_input_contents[1], 5i32.to_le_bytes());
    assert_eq!(req.raw_input_contents[2], [1]);
    assert_eq!(req.raw_input_contents[3], [1]);
    assert_eq!(req.outputs[0].name, TEXT_OUTPUT);
    // No output length asked: the server decides.
    let req = request(&[], None);
    assert_eq!(
        names(&req),
        ["text_input", "exclude_input_in_output", "stream"]
    );
    assert_eq!(req.raw_input_contents[2], [0]);
}

#[test]
fn deterministic_lengths_per_backend() {
    let det = [
        "--output-tokens-mean",
        "7",
        "--output-tokens-mean-deterministic",
    ];
    let req = request(&det, Some(7));
    let all = inputs(&req);
    assert_eq!(
        all[4],
        (
            "min_length".into(),
            "INT32".into(),
            7i32.to_le_bytes().to_vec()
        )
    );
    let vllm: Vec<&str> = det.iter().copied().chain(["--backend", "vllm"]).collect();
    let req = request(&vllm, Some(7));
    assert_eq!(
        names(&req),
        [
            "text_input",
            "exclude_input_in_output",
            "stream",
            "sampling_parameters"
        ]
    );
    let raw = &req.raw_input_contents[3];
    let params: Value = serde_json::from_slice(&raw[4..]).unwrap();
    assert_eq!(
        params,
        serde_json::json!({"max_tokens": "7", "min_tokens": "7"})
    );
    let req = request(&["--backend", "vllm", "--output-tokens-mean", "7"], Some(7));
    let params: Value = serde_json::from_slice(&req.raw_input_contents[3][4..]).unwrap();
    assert_eq!(params, serde_json::json!({"max_tokens": "7"}));
}

#[test]
fn extra_inputs_become_tensors() {
    let req = request(
        &[
            "--extra-inputs",
            r#"{"temperature":0.5,"top_k":40,"seed":9000000000,"stop":"END"}"#,
            "--extra-inputs",
            "ignore_eos:true",
            "--extra-inputs",
            "bad_words:[\"x\"]",
            "--extra-inputs",
            "max_tokens:3",
        ],
        Some(5),
    );
    let all = inputs(&req);
    let find = |n: &str| all.iter().find(|t| t.0 == n).cloned().unwrap();
    assert_eq!(find("temperature").1, "FP32");
    assert_eq!(find("temperature").2, 0.5f32.to_le_bytes());
    assert_eq!(find("top_k").2, 40i32.to_le_bytes());
    assert_eq!(find("seed").1, "INT64");
    assert_eq!(find("stop").2, b"\x03\0\0\0END");
    assert_eq!(
        (find("ignore_eos").1, find("ignore_eos").2),
        ("BOOL".into(), vec![1])
    );
    assert_eq!(find("bad_words").2, b"\x05\0\0\0[\"x\"]");
    // An extra input replaces a generated tensor of the same name.
    assert_eq!(all.iter().filter(|t| t.0 == "max_tokens").count(), 1);
    assert_eq!(find("max_tokens").2, 3i32.to_le_bytes());
}
