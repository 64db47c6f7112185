//! `--endpoint-type kserve`: Triton's LLM backends (TensorRT-LLM, vLLM) over gRPC
//! `ModelStreamInfer`, with the tensors GenAI-Perf's converters send for `--backend`:
//! `text_input` (BYTES), `exclude_input_in_output` and `stream` (BOOL), then for
//! tensorrtllm `max_tokens` (INT32, the requested output length) and `min_length` (INT32,
//! `--output-tokens-mean-deterministic`), for vllm `sampling_parameters` (BYTES, a JSON
//! string with `max_tokens` and `min_tokens`). Every `--extra-inputs` entry is one more
//! input tensor of one element. Each response carries the next piece of text in
//! `text_output`.

use prost::Message;

use serde_json::Value;

use super::cli::ProfileConfig;
use super::cli_compat::Backend;
use super::events::Parsed;
use super::payload::Entry;
use super::reply_error::{ReplyError, ReplyErrorKind as K};
use crate::config::Compression;
use crate::engine::wire::{GrpcWire, Wire};
use crate::error::Result;
use crate::protocol::grpc::pb::inference as pb;
use crate::protocol::grpc::request::call_headers;
use crate::service::triton_grpc::encode_infer_request;
use crate::tensor::{DataType, InputTensor};

/// The output tensor holding generated text.
pub const TEXT_OUTPUT: &str = "text_output";

/// The length-prefixed `ModelInferRequest` for one prompt.
pub fn encode(cfg: &ProfileConfig, model: &str, entry: &Entry) -> Result<Vec<u8>> {
    let inputs = request_tensors(cfg, entry);
    encode_infer_request(
        model,
        "",
        &inputs,
        &[TEXT_OUTPUT.to_string()],
        &[],
        Compression::None,
    )
}

/// The request's input tensors, in the order GenAI-Perf's converters add them.
pub fn request_tensors(cfg: &ProfileConfig, entry: &Entry) -> Vec<InputTensor> {
    let deterministic = cfg.args.output_tokens_mean_deterministic;
    let mut inputs = vec![bytes_tensor("text_input", entry.text.as_bytes())];
    let int = |name: &str, n: u64| {
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        tensor(name, DataType::I32, n.to_le_bytes().to_vec())
    };
    if let (Backend::Tensorrtllm, Some(n)) = (cfg.backend, entry.osl) {
        inputs.push(int("max_tokens", n));
    }
    inputs.push(tensor("exclude_input_in_output", DataType::Bool, vec![1]));
    inputs.push(tensor(
        "stream",
        DataType::Bool,
        vec![u8::from(cfg.args.streaming)],
    ));
    match (cfg.backend, entry.osl) {
        (Backend::Tensorrtllm, Some(n)) if deterministic => inputs.push(int("min_length", n)),
        (Backend::Vllm, Some(n)) => {
            // vLLM's backend reads its sampling parameters from one JSON string, numbers
            // written as strings (as GenAI-Perf writes them).
            let mut params = serde_json::Map::new();
            params.insert("max_tokens".into(), Value::String(n.to_string()));
            if deterministic {
                params.insert("min_tokens".into(), Value::String(n.to_string()));
            }
            let json = Value::Object(params).to_string();
            inputs.push(bytes_tensor("sampling_parameters", json.as_bytes()));
        }
        _ => {}
    }
    for (name, value) in &cfg.extra {
        inputs.retain(|t| &t.name != name);
        inputs.push(extra_tensor(name, value));
    }
    inputs
}

/// The request's tensors as GenAI-Perf writes a Triton request in `inputs.json`: each
/// input's name with a one-element list of its value.
pub fn inputs_json(cfg: &ProfileConfig, entry: &Entry) -> Value {
    let mut out = serde_json::Map::new();
    for t in request_tensors(cfg, entry) {
        let d = &t.data;
        let value = match t.datatype {
            DataType::Bool => Value::Bool(d.first().is_some_and(|b| *b != 0)),
            DataType::I32 if d.len() == 4 => i32::from_le_bytes([d[0], d[1], d[2], d[3]]).into(),
            DataType::I64 | DataType::U64 if d.len() == 8 => {
                let b: [u8; 8] = d[..8].try_into().unwrap_or_default();
                match t.datatype {
                    DataType::I64 => i64::from_le_bytes(b).into(),
                    _ => u64::from_le_bytes(b).into(),
                }
            }
            DataType::F32 if d.len() == 4 => {
                let f = f32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                serde_json::Number::from_f64(f64::from(f)).map_or(Value::Null, Value::Number)
            }
            _ => Value::String(String::from_utf8_lossy(d.get(4..).unwrap_or_default()).into()),
        };
        out.insert(t.name, Value::Array(vec![value]));
    }
    Value::Object(out)
}

/// One `--extra-inputs` value as a one-element tensor: BOOL for true/false, INT32 for an
/// integer that fits (else INT64, or UINT64 above that), FP32 for other numbers, BYTES for
/// a string (its text) and for anything else (its JSON text).
fn extra_tensor(name: &str, value: &Value) -> InputTensor {
    match value {
        Value::Bool(b) => tensor(name, DataType::Bool, vec![u8::from(*b)]),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                match i32::try_from(i) {
                    Ok(small) => tensor(name, DataType::I32, small.to_le_bytes().to_vec()),
                    Err(_) => tensor(name, DataType::I64, i.to_le_bytes().to_vec()),
                }
            } else if let Some(u) = n.as_u64() {
                tensor(name, DataType::U64, u.to_le_bytes().to_vec())
            } else {
                let f = n.as_f64().unwrap_or(0.0) as f32;
                tensor(name, DataType::F32, f.to_le_bytes().to_vec())
            }
        }
        Value::String(text) => bytes_tensor(name, text.as_bytes()),
        other => bytes_tensor(name, other.to_string().as_bytes()),
    }
}

/// A one-element BYTES tensor (length-prefixed).
fn bytes_tensor(name: &str, data: &[u8]) -> InputTensor {
    let mut framed = (data.len() as u32).to_le_bytes().to_vec();
    framed.extend_from_slice(data);
    tensor(name, DataType::Bytes, framed)
}

fn tensor(name: &str, datatype: DataType, data: Vec<u8>) -> InputTensor {
    InputTensor {
        name: name.into(),
        datatype,
        shape: vec![1, 1],
        data,
    }
}

/// Long-lived `ModelStreamInfer` streams; a request ends at its `triton_final_response`.
pub fn wire(authority: &str, headers: &[(String, String)]) -> Wire {
    Wire::Grpc(GrpcWire {
        headers: call_headers(authority, "ModelStreamInfer", headers, false, None),
        streaming: true,
        decoupled: true,
    })
}

/// The text of every stored `ModelStreamInferResponse`, with its read time.
pub fn parse_responses<'a>(responses: impl Iterator<Item = (u64, &'a [u8])>) -> Parsed {
    let mut out = Parsed::default();
    for (at, data) in responses {
        let Ok(msg) = pb::ModelStreamInferResponse::decode(data) else {
            out.error
                .get_or_insert_with(|| ReplyError::message(K::NotProtobuf, "undecodable"));
            continue;
        };
        if !msg.error_message.is_empty() {
            out.error
                .get_or_insert_with(|| ReplyError::message(K::ErrorObject, &msg.error_message));
            continue;
        }
        let Some(resp) = msg.infer_response else {
            continue;
        };
        let text = text_of(&resp);
        if !text.is_empty() {
            out.chunks.push((at, text));
        }
        let last = resp
            .parameters
            .get("triton_final_response")
            .is_some_and(|p| {
                p.parameter_choice == Some(pb::infer_parameter::ParameterChoice::BoolParam(true))
            });
        out.finished |= last;
    }
    out
}

/// `text_output`'s BYTES elements, joined.
fn text_of(resp: &pb::ModelInferResponse) -> String {
    let Some(i) = resp.outputs.iter().position(|o| o.name == TEXT_OUTPUT) else {
        return String::new();
    };
    let Some(mut raw) = resp.raw_output_contents.get(i).map(Vec::as_slice) else {
        return String::new();
    };
    let mut text = String::new();
    while raw.len() >= 4 {
        let len = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
        let Some(element) = raw.get(4..4 + len) else {
            break;
        };
        text.push_str(&String::from_utf8_lossy(element));
        raw = &raw[4 + len..];
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(text: Option<&str>, last: bool) -> Vec<u8> {
        let mut resp = pb::ModelInferResponse::default();
        if let Some(t) = text {
            resp.outputs
                .push(pb::model_infer_response::InferOutputTensor {
                    name: TEXT_OUTPUT.into(),
                    datatype: "BYTES".into(),
                    shape: vec![1],
                    ..Default::default()
                });
            let mut raw = (t.len() as u32).to_le_bytes().to_vec();
            raw.extend_from_slice(t.as_bytes());
            resp.raw_output_contents.push(raw);
        }
        let flag = pb::InferParameter {
            parameter_choice: Some(pb::infer_parameter::ParameterChoice::BoolParam(last)),
        };
        resp.parameters.insert("triton_final_response".into(), flag);
        pb::ModelStreamInferResponse {
            error_message: String::new(),
            infer_response: Some(resp),
        }
        .encode_to_vec()
    }

    #[test]
    fn responses_to_text_chunks() {
        let (a, b, end) = (
            response(Some(" the"), false),
            response(Some(" of"), false),
            response(None, true),
        );
        let p = parse_responses([(1, &a[..]), (2, &b[..]), (3, &end[..])].into_iter());
        assert_eq!(p.chunks, vec![(1, " the".into()), (2, " of".into())]);
        assert!(p.finished && p.error.is_none());
        let err = pb::ModelStreamInferResponse {
            error_message: "bad input".into(),
            infer_response: None,
        }
        .encode_to_vec();
        let p = parse_responses([(1, &err[..]), (2, &[0xff_u8, 0xff][..])].into_iter());
        assert_eq!(p.error.unwrap().detail, "bad input");
        let p = parse_responses([(1, &[0xff_u8, 0xff][..])].into_iter());
        assert_eq!(p.error.unwrap().kind, K::NotProtobuf);
    }

    fn cfg(args: &[&str]) -> ProfileConfig {
        let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "llm".into()];
        v.extend(["--endpoint-type".into(), "kserve".into()]);
        v.extend(args.iter().map(Into::into));
        super::super::cli::parse(v).unwrap().unwrap()
    }

    fn request(args: &[&str], osl: Option<u64>) -> pb::ModelInferRequest {
        let e = Entry {
            text: "hi there".into(),
            isl: 2,
            osl,
            payload: None,
        };
        let bytes = encode(&cfg(args), "llm", &e).unwrap();
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
}
