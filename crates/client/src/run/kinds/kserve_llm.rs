//! `profile --endpoint-type kserve`: Triton gRPC `ModelStreamInfer` with `text_input` /
//! `max_tokens` / `stream` tensors (TensorRT-LLM and vLLM backends), its streamed replies
//! read into text chunks.

use serde_json::Value;

use super::codec::{Post, Prompt};
use super::Service;
use super::registry::{BeforeRun, Caps, Endpoint, Kind};
use super::reply::{Parsed, Reply};
use super::reply_error::{ReplyError, ReplyErrorKind as K};
use crate::engine::wire::{GrpcWire, Wire};
use crate::error::Result;
use crate::measure::record::framed_responses;
use crate::protocol::grpc::request::call_headers;
use crate::service::kserve_llm::{self, LlmRequest, StreamReply};
use crate::tensor::{DataType, InputTensor};

/// `--endpoint-type kserve` in the registry.
pub const KIND: Kind = Kind {
    name: "kserve_llm",
    service_kind: None,
    endpoint_type: Some("kserve"),
    caps: Caps {
        grpc: true,
        streaming: true,
        shared_memory: None,
        before_run: BeforeRun::Nothing,
    },
    service: &LlmTensors,
    endpoint: Some(Endpoint {
        about: "Triton gRPC `ModelStreamInfer` with `text_input` / `max_tokens` / `stream` tensors (TensorRT-LLM and vLLM backends).",
        path: "",
        stream_path: None,
        generates: true,
        family: "triton",
        default_url: "localhost:8001",
    }),
};

/// Triton LLM input tensors over gRPC `ModelStreamInfer`, the tensors GenAI-Perf's
/// converters send for `--backend` (no JSON body: [`Service::body`] is the
/// `inputs.json` view of the tensors).
pub struct LlmTensors;

impl Service for LlmTensors {
    /// The request's tensors as GenAI-Perf writes a Triton request in `inputs.json`: each
    /// input's name with a one-element list of its value.
    fn body(&self, p: &Prompt<'_>) -> Value {
        let mut out = serde_json::Map::new();
        for t in request_tensors(p) {
            let d = &t.data;
            let value = match t.datatype {
                DataType::Bool => Value::Bool(d.first().is_some_and(|b| *b != 0)),
                DataType::I32 if d.len() == 4 => {
                    i32::from_le_bytes([d[0], d[1], d[2], d[3]]).into()
                }
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

    /// The length-prefixed `ModelInferRequest` for one prompt (the JSON payload is not sent).
    fn encode(&self, p: &Prompt<'_>, _payload: &[u8], _post: &Post<'_>) -> Result<Vec<u8>> {
        kserve_llm::encode(p.model, &request_tensors(p))
    }

    /// Long-lived `ModelStreamInfer` streams; a request ends at its `triton_final_response`.
    fn wire(&self, authority: &str, headers: &[(String, String)]) -> Wire {
        Wire::Grpc(GrpcWire {
            headers: call_headers(authority, "ModelStreamInfer", headers, false, None),
            streaming: true,
            decoupled: true,
        })
    }

    /// Every stored `ModelStreamInferResponse`, whatever the record's status.
    fn decode(&self, reply: &Reply<'_>) -> Parsed {
        parse_responses(framed_responses(reply.body))
    }

    /// A stream ends at its `triton_final_response`, with no `[DONE]`.
    fn needs_done(&self) -> bool {
        false
    }

    fn takes_backend(&self) -> bool {
        true
    }

    fn sends_json(&self) -> bool {
        false
    }
}

/// The text of every stored `ModelStreamInferResponse`, with its read time.
fn parse_responses<'a>(responses: impl Iterator<Item = (u64, &'a [u8])>) -> Parsed {
    let mut out = Parsed {
        streamed: true,
        ..Parsed::default()
    };
    for (at, data) in responses {
        match kserve_llm::read_reply(data) {
            StreamReply::Undecodable => {
                out.error
                    .get_or_insert_with(|| ReplyError::message(K::NotProtobuf, "undecodable"));
            }
            StreamReply::Error(message) => {
                out.error
                    .get_or_insert_with(|| ReplyError::message(K::ErrorObject, &message));
            }
            StreamReply::Empty => {}
            StreamReply::Text { text, last } => {
                if !text.is_empty() {
                    out.chunks.push((at, text));
                }
                out.finished |= last;
            }
        }
    }
    out
}

/// The request's input tensors for `--backend`.
fn request_tensors(p: &Prompt<'_>) -> Vec<InputTensor> {
    let request = LlmRequest {
        text: p.text,
        osl: p.osl,
        deterministic: p.deterministic,
        streaming: p.streaming,
        extra: p.extra,
    };
    kserve_llm::request_tensors(p.backend, &request)
}

#[cfg(test)]
#[path = "kserve_llm_tests.rs"]
mod tests;
