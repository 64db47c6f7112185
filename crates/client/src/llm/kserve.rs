//! `--endpoint-type kserve`: Triton's LLM backends (TensorRT-LLM, vLLM) over gRPC
//! `ModelStreamInfer`. A request is the `text_input` BYTES tensor with `max_tokens` (INT32)
//! and `stream` (BOOL); each response carries the next piece of text in `text_output`.

use prost::Message;

use super::events::Parsed;
use super::payload::Entry;
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
pub fn encode(model: &str, entry: &Entry, streaming: bool) -> Result<Vec<u8>> {
    let mut text = (entry.text.len() as u32).to_le_bytes().to_vec();
    text.extend_from_slice(entry.text.as_bytes());
    let mut inputs = vec![tensor("text_input", DataType::Bytes, text)];
    if let Some(n) = entry.osl {
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        inputs.push(tensor(
            "max_tokens",
            DataType::I32,
            n.to_le_bytes().to_vec(),
        ));
    }
    inputs.push(tensor("stream", DataType::Bool, vec![u8::from(streaming)]));
    encode_infer_request(
        model,
        "",
        &inputs,
        &[TEXT_OUTPUT.to_string()],
        &[],
        Compression::None,
    )
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
                .get_or_insert_with(|| "undecodable ModelStreamInferResponse".into());
            continue;
        };
        if !msg.error_message.is_empty() {
            out.error.get_or_insert(msg.error_message);
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
        assert_eq!(p.error.as_deref(), Some("bad input"));
    }

    #[test]
    fn request_carries_the_llm_tensors() {
        let e = Entry {
            text: "hi there".into(),
            isl: 2,
            osl: Some(5),
            payload: None,
        };
        let bytes = encode("llm", &e, true).unwrap();
        let req = pb::ModelInferRequest::decode(&bytes[5..]).unwrap();
        let names: Vec<&str> = req.inputs.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["text_input", "max_tokens", "stream"]);
        assert_eq!(req.raw_input_contents[0], b"\x08\0\0\0hi there");
        assert_eq!(req.raw_input_contents[1], 5i32.to_le_bytes());
        assert_eq!(req.raw_input_contents[2], [1]);
        assert_eq!(req.outputs[0].name, TEXT_OUTPUT);
    }
}
