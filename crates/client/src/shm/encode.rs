//! Infer requests whose tensors live in registered regions: every input and output carries
//! `shared_memory_region` and `shared_memory_byte_size` (offset 0 is the default and is not
//! sent) instead of data, as the KServe v2 shared-memory extension defines.

use std::collections::HashMap;

use crate::config::{Compression, Config, ParamValue, TensorFormat};
use crate::error::{Error, Result};
use crate::protocol::grpc::compress::compress;
use crate::protocol::grpc::message::write_message;
use crate::protocol::grpc::pb::inference as pb;
use crate::service::triton_grpc::EMPTY_FINAL_RESPONSE;
use crate::service::triton_http::{assemble_infer_request, infer_path};
use crate::tensor::InputTensor;

/// A tensor's place in shared memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRef {
    pub tensor: String,
    pub region: String,
    /// Bytes of the region the tensor may use.
    pub byte_size: usize,
}

impl TensorRef {
    pub fn new(tensor: &str, region: String, byte_size: usize) -> TensorRef {
        TensorRef {
            tensor: tensor.to_string(),
            region,
            byte_size,
        }
    }
}

/// The `parameters` object of a tensor in shared memory.
fn json_params(r: &TensorRef) -> serde_json::Value {
    serde_json::json!({
        "shared_memory_region": r.region,
        "shared_memory_byte_size": r.byte_size,
    })
}

/// The HTTP/1.1 infer request: a JSON body only, no binary section.
pub fn encode_http(
    cfg: &Config,
    host: &str,
    inputs: &[InputTensor],
    in_refs: &[TensorRef],
    out_refs: &[TensorRef],
) -> Result<Vec<u8>> {
    let inputs_json: Vec<serde_json::Value> = inputs
        .iter()
        .zip(in_refs)
        .map(|(t, r)| {
            serde_json::json!({
                "name": t.name,
                "datatype": t.datatype.name(),
                "shape": t.shape,
                "parameters": json_params(r),
            })
        })
        .collect();
    let outputs_json: Vec<serde_json::Value> = out_refs
        .iter()
        .map(|r| serde_json::json!({"name": r.tensor, "parameters": json_params(r)}))
        .collect();
    let json = serde_json::json!({"inputs": inputs_json, "outputs": outputs_json}).to_string();
    let path = infer_path(&cfg.model_name, &cfg.model_version);
    assemble_infer_request(host, &path, json, &[], TensorFormat::Json, &cfg.headers)
}

fn string_param(s: &str) -> pb::InferParameter {
    pb::InferParameter {
        parameter_choice: Some(pb::infer_parameter::ParameterChoice::StringParam(s.into())),
    }
}

fn int_param(v: i64) -> pb::InferParameter {
    pb::InferParameter {
        parameter_choice: Some(pb::infer_parameter::ParameterChoice::Int64Param(v)),
    }
}

fn grpc_params(r: &TensorRef) -> Result<HashMap<String, pb::InferParameter>> {
    let size = i64::try_from(r.byte_size)
        .map_err(|_| Error::usage(format!("region '{}' is too large", r.region)))?;
    Ok([
        ("shared_memory_region".to_string(), string_param(&r.region)),
        ("shared_memory_byte_size".to_string(), int_param(size)),
    ]
    .into_iter()
    .collect())
}

/// The request parameters perf_analyzer sets on every gRPC call plus `--request-parameter`.
fn request_params(params: &[(String, ParamValue)]) -> HashMap<String, pb::InferParameter> {
    use pb::infer_parameter::ParameterChoice as P;
    let mut out: HashMap<String, pb::InferParameter> = HashMap::new();
    out.insert(
        EMPTY_FINAL_RESPONSE.to_string(),
        pb::InferParameter {
            parameter_choice: Some(P::BoolParam(true)),
        },
    );
    for (name, value) in params {
        let choice = match value {
            ParamValue::Bool(b) => P::BoolParam(*b),
            ParamValue::Int(i) => P::Int64Param(*i),
            ParamValue::Str(s) => P::StringParam(s.clone()),
        };
        out.insert(
            name.clone(),
            pb::InferParameter {
                parameter_choice: Some(choice),
            },
        );
    }
    out
}

/// The length-prefixed `ModelInferRequest`, without `raw_input_contents`.
pub fn encode_grpc(
    cfg: &Config,
    inputs: &[InputTensor],
    in_refs: &[TensorRef],
    out_refs: &[TensorRef],
) -> Result<Vec<u8>> {
    use pb::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
    let mut req = pb::ModelInferRequest {
        model_name: cfg.model_name.clone(),
        model_version: cfg.model_version.clone(),
        parameters: request_params(&cfg.request_parameters),
        ..Default::default()
    };
    for (t, r) in inputs.iter().zip(in_refs) {
        req.inputs.push(InferInputTensor {
            name: t.name.clone(),
            datatype: t.datatype.name().into(),
            shape: t.shape.clone(),
            parameters: grpc_params(r)?,
            ..Default::default()
        });
    }
    for r in out_refs {
        req.outputs.push(InferRequestedOutputTensor {
            name: r.tensor.clone(),
            parameters: grpc_params(r)?,
        });
    }
    let payload = prost::Message::encode_to_vec(&req);
    let (payload, compressed) = match cfg.compression {
        Compression::None => (payload, false),
        c => (compress(c, &payload)?, true),
    };
    let mut out = Vec::with_capacity(payload.len() + 5);
    write_message(&mut out, &payload, compressed)
        .map_err(|e| Error::generic(format!("ModelInfer request: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DataType;
    use prost::Message;

    fn input() -> InputTensor {
        InputTensor {
            name: "IN0".into(),
            datatype: DataType::I32,
            shape: vec![1, 4],
            data: vec![7; 16],
        }
    }

    fn refs() -> (Vec<TensorRef>, Vec<TensorRef>) {
        (
            vec![TensorRef::new("IN0", "r_in".into(), 16)],
            vec![TensorRef::new("OUT0", "r_out".into(), 64)],
        )
    }

    #[test]
    fn http_request_references_regions_and_carries_no_data() {
        let cfg = Config {
            model_name: "simple".into(),
            ..Config::default()
        };
        let (i, o) = refs();
        let req = encode_http(&cfg, "h:1", &[input()], &i, &o).unwrap();
        let text = String::from_utf8(req).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("POST /v2/models/simple/infer HTTP/1.1"),
            "{head}"
        );
        assert!(!head.contains("Inference-Header-Content-Length"), "{head}");
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        let p = &json["inputs"][0]["parameters"];
        assert_eq!(p["shared_memory_region"], "r_in");
        assert_eq!(p["shared_memory_byte_size"], 16);
        assert!(json["inputs"][0].get("data").is_none());
        assert_eq!(json["inputs"][0]["shape"], serde_json::json!([1, 4]));
        let q = &json["outputs"][0]["parameters"];
        assert_eq!(q["shared_memory_region"], "r_out");
        assert_eq!(q["shared_memory_byte_size"], 64);
    }

    #[test]
    fn grpc_request_references_regions_and_carries_no_data() {
        let cfg = Config {
            model_name: "simple".into(),
            request_parameters: vec![("k".into(), ParamValue::Int(3))],
            ..Config::default()
        };
        let (i, o) = refs();
        let bytes = encode_grpc(&cfg, &[input()], &i, &o).unwrap();
        assert_eq!(bytes[0], 0, "not compressed");
        let req = pb::ModelInferRequest::decode(&bytes[5..]).unwrap();
        assert!(req.raw_input_contents.is_empty());
        assert_eq!(
            req.inputs[0].parameters["shared_memory_region"],
            string_param("r_in")
        );
        assert_eq!(
            req.inputs[0].parameters["shared_memory_byte_size"],
            int_param(16)
        );
        assert_eq!(
            req.outputs[0].parameters["shared_memory_byte_size"],
            int_param(64)
        );
        assert_eq!(req.parameters["k"], int_param(3));
        assert!(req.parameters.contains_key(EMPTY_FINAL_RESPONSE));
    }
}
