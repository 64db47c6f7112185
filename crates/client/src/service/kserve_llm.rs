//! Triton's LLM backends (TensorRT-LLM, vLLM) over gRPC `ModelStreamInfer`: the request
//! tensors GenAI-Perf's converters send for each backend and the text of each streamed
//! response. A request carries `text_input` (BYTES), `exclude_input_in_output` and `stream`
//! (BOOL), then for tensorrtllm `max_tokens` (INT32, the requested output length) and
//! `min_length` (INT32, for deterministic lengths), for vllm `sampling_parameters` (BYTES, a
//! JSON string with `max_tokens` and `min_tokens`). Every extra input is one more input
//! tensor of one element. Each response carries the next piece of text in `text_output`.

use prost::Message;
use serde_json::Value;

use crate::config::Compression;
use crate::error::Result;
use crate::protocol::grpc::pb::inference as pb;
use crate::service::triton_grpc::encode_infer_request;
use crate::tensor::{DataType, InputTensor};

/// The output tensor holding generated text.
pub const TEXT_OUTPUT: &str = "text_output";

/// The Triton backend serving the model: which tensors a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmBackend {
    TensorrtLlm,
    Vllm,
}

/// What one request asks of the model.
pub struct LlmRequest<'a> {
    pub text: &'a str,
    /// Output tokens to ask for (`None`: the server decides).
    pub osl: Option<u64>,
    /// Ask for exactly `osl` tokens.
    pub deterministic: bool,
    pub streaming: bool,
    /// Extra inputs, each one tensor of one element; one named like a generated tensor
    /// replaces it.
    pub extra: &'a [(String, Value)],
}

/// The length-prefixed `ModelInferRequest` for one prompt to `model`.
pub fn encode(model: &str, inputs: &[InputTensor]) -> Result<Vec<u8>> {
    encode_infer_request(
        model,
        "",
        inputs,
        &[TEXT_OUTPUT.to_string()],
        &[],
        Compression::None,
    )
}

/// The request's input tensors, in the order GenAI-Perf's converters add them.
pub fn request_tensors(backend: LlmBackend, req: &LlmRequest<'_>) -> Vec<InputTensor> {
    let mut inputs = vec![bytes_tensor("text_input", req.text.as_bytes())];
    let int = |name: &str, n: u64| {
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        tensor(name, DataType::I32, n.to_le_bytes().to_vec())
    };
    if let (LlmBackend::TensorrtLlm, Some(n)) = (backend, req.osl) {
        inputs.push(int("max_tokens", n));
    }
    inputs.push(tensor("exclude_input_in_output", DataType::Bool, vec![1]));
    inputs.push(tensor(
        "stream",
        DataType::Bool,
        vec![u8::from(req.streaming)],
    ));
    match (backend, req.osl) {
        (LlmBackend::TensorrtLlm, Some(n)) if req.deterministic => {
            inputs.push(int("min_length", n))
        }
        (LlmBackend::Vllm, Some(n)) => {
            // vLLM's backend reads its sampling parameters from one JSON string, numbers
            // written as strings (as GenAI-Perf writes them).
            let mut params = serde_json::Map::new();
            params.insert("max_tokens".into(), Value::String(n.to_string()));
            if req.deterministic {
                params.insert("min_tokens".into(), Value::String(n.to_string()));
            }
            let json = Value::Object(params).to_string();
            inputs.push(bytes_tensor("sampling_parameters", json.as_bytes()));
        }
        _ => {}
    }
    for (name, value) in req.extra {
        inputs.retain(|t| &t.name != name);
        inputs.push(extra_tensor(name, value));
    }
    inputs
}

/// One extra input value as a one-element tensor: BOOL for true/false, INT32 for an integer
/// that fits (else INT64, or UINT64 above that), FP32 for other numbers, BYTES for a string
/// (its text) and for anything else (its JSON text).
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

/// One `ModelStreamInferResponse` read.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamReply {
    /// The bytes are not a `ModelStreamInferResponse`.
    Undecodable,
    /// The server's `error_message`.
    Error(String),
    /// The response's text (empty when it has none) and whether it is the request's last
    /// (`triton_final_response`).
    Text { text: String, last: bool },
    /// A message without a response.
    Empty,
}

/// Reads one stored `ModelStreamInferResponse`.
pub fn read_reply(data: &[u8]) -> StreamReply {
    let Ok(msg) = pb::ModelStreamInferResponse::decode(data) else {
        return StreamReply::Undecodable;
    };
    if !msg.error_message.is_empty() {
        return StreamReply::Error(msg.error_message);
    }
    let Some(resp) = msg.infer_response else {
        return StreamReply::Empty;
    };
    let last = resp
        .parameters
        .get("triton_final_response")
        .is_some_and(|p| {
            p.parameter_choice == Some(pb::infer_parameter::ParameterChoice::BoolParam(true))
        });
    StreamReply::Text {
        text: text_of(&resp),
        last,
    }
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
