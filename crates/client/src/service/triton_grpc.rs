//! KServe v2 over gRPC, the message side: request bytes built once per input step, responses
//! turned into the same plain structs the HTTP path produces (metadata, config, statistics,
//! export values). The HTTP/2 session that carries them is separate.

use prost::Message;

use super::triton_http::{ConfigTensor, EnsembleStep, ModelConfig, ModelMetadata, TensorMeta};
use crate::config::{Compression, ParamValue};
use crate::error::{Error, Result};
use crate::measure::{ModelStats, StatDuration};
use crate::protocol::grpc::compress::compress;
use crate::protocol::grpc::message::write_message;
use crate::protocol::grpc::pb::inference as pb;
use crate::tensor::{DataType, InputTensor};

/// The request parameter perf_analyzer always sets, so that decoupled models end every
/// request with an empty response flagged `triton_final_response`.
pub const EMPTY_FINAL_RESPONSE: &str = "triton_enable_empty_final_response";

fn bool_param(v: bool) -> pb::InferParameter {
    pb::InferParameter {
        parameter_choice: Some(pb::infer_parameter::ParameterChoice::BoolParam(v)),
    }
}

/// A `--request-parameter` value as the protobuf parameter.
fn param(v: &ParamValue) -> pb::InferParameter {
    use pb::infer_parameter::ParameterChoice as P;
    let choice = match v {
        ParamValue::Bool(b) => P::BoolParam(*b),
        ParamValue::Int(i) => P::Int64Param(*i),
        ParamValue::Str(s) => P::StringParam(s.clone()),
    };
    pb::InferParameter {
        parameter_choice: Some(choice),
    }
}

/// The length-prefixed `ModelInferRequest` of one input step: inputs as
/// `raw_input_contents` (in input order), every output requested, no request id (the bytes
/// stay the same for every request of the step), perf_analyzer's
/// `triton_enable_empty_final_response` plus the `--request-parameter` values, compressed
/// when `compression` says so.
pub fn encode_infer_request(
    model: &str,
    version: &str,
    inputs: &[InputTensor],
    outputs: &[String],
    params: &[(String, ParamValue)],
    compression: Compression,
) -> Result<Vec<u8>> {
    let mut parameters: std::collections::HashMap<String, pb::InferParameter> =
        [(EMPTY_FINAL_RESPONSE.to_string(), bool_param(true))]
            .into_iter()
            .collect();
    for (name, value) in params {
        parameters.insert(name.clone(), param(value));
    }
    let req = pb::ModelInferRequest {
        model_name: model.into(),
        model_version: version.into(),
        parameters,
        inputs: inputs
            .iter()
            .map(|t| pb::model_infer_request::InferInputTensor {
                name: t.name.clone(),
                datatype: t.datatype.name().into(),
                shape: t.shape.clone(),
                ..Default::default()
            })
            .collect(),
        outputs: outputs
            .iter()
            .map(|o| pb::model_infer_request::InferRequestedOutputTensor {
                name: o.clone(),
                ..Default::default()
            })
            .collect(),
        raw_input_contents: inputs.iter().map(|t| t.data.clone()).collect(),
        ..Default::default()
    };
    let payload = req.encode_to_vec();
    let (payload, compressed) = match compression {
        Compression::None => (payload, false),
        c => (compress(c, &payload)?, true),
    };
    let mut out = Vec::with_capacity(payload.len() + 5);
    write_message(&mut out, &payload, compressed)
        .map_err(|e| Error::generic(format!("ModelInfer request: {e}")))?;
    Ok(out)
}

/// Outputs of a `ModelInferResponse` as the profile export writes them (same value rules as
/// the HTTP path: scalar for one element, BYTES as one string).
pub fn outputs_json(resp: &pb::ModelInferResponse) -> String {
    let tensors: Vec<InputTensor> = resp
        .outputs
        .iter()
        .zip(&resp.raw_output_contents)
        .filter_map(|(o, data)| {
            let datatype = DataType::parse(&o.datatype).ok()?;
            Some(InputTensor {
                name: o.name.clone(),
                datatype,
                shape: o.shape.clone(),
                data: data.clone(),
            })
        })
        .collect();
    super::triton_http::inputs_json(&tensors)
}

fn datatype(name: &str, what: &str) -> Result<DataType> {
    DataType::parse(name).map_err(|_| Error::generic(format!("{what}: unknown datatype '{name}'")))
}

/// `ModelMetadataResponse` → the struct the HTTP path produces.
pub fn to_model_metadata(m: pb::ModelMetadataResponse) -> Result<ModelMetadata> {
    let tensors = |list: Vec<pb::model_metadata_response::TensorMetadata>, what: &str| {
        list.into_iter()
            .map(|t| {
                let dt = datatype(&t.datatype, &format!("model metadata {what} '{}'", t.name))?;
                Ok(TensorMeta {
                    name: t.name,
                    datatype: dt,
                    shape: t.shape,
                })
            })
            .collect::<Result<Vec<_>>>()
    };
    Ok(ModelMetadata {
        inputs: tensors(m.inputs, "input")?,
        outputs: tensors(m.outputs, "output")?,
        name: m.name,
        versions: m.versions,
        platform: m.platform,
    })
}

fn config_dt(v: i32) -> Option<DataType> {
    pb::DataType::try_from(v)
        .ok()
        .and_then(|d| DataType::parse(d.as_str_name()).ok())
}

/// `ModelConfig` (protobuf) → the struct the HTTP path produces.
pub fn to_model_config(c: pb::ModelConfig) -> ModelConfig {
    use pb::model_config::SchedulingChoice as S;
    let steps = match &c.scheduling_choice {
        Some(S::EnsembleScheduling(e)) => e
            .step
            .iter()
            .map(|s| EnsembleStep {
                model_name: s.model_name.clone(),
                model_version: s.model_version,
            })
            .collect(),
        _ => Vec::new(),
    };
    ModelConfig {
        max_batch_size: c.max_batch_size.max(0) as u64,
        decoupled: c.model_transaction_policy.is_some_and(|p| p.decoupled),
        sequence_batching: matches!(c.scheduling_choice, Some(S::SequenceBatching(_))),
        dynamic_batching: matches!(c.scheduling_choice, Some(S::DynamicBatching(_))),
        is_ensemble: matches!(c.scheduling_choice, Some(S::EnsembleScheduling(_))),
        response_cache: c.response_cache.is_some_and(|r| r.enable),
        ensemble_steps: steps,
        inputs: c
            .input
            .into_iter()
            .map(|i| ConfigTensor {
                data_type: config_dt(i.data_type),
                name: i.name,
                optional: i.optional,
                is_shape_tensor: i.is_shape_tensor,
                dims: i.dims,
            })
            .collect(),
        outputs: c
            .output
            .into_iter()
            .map(|o| ConfigTensor {
                data_type: config_dt(o.data_type),
                name: o.name,
                optional: false,
                is_shape_tensor: o.is_shape_tensor,
                dims: o.dims,
            })
            .collect(),
        name: c.name,
        platform: c.platform,
        backend: c.backend,
    }
}

/// `ModelStatisticsResponse` → the statistics the measurement subtracts window by window.
pub fn to_model_stats(r: pb::ModelStatisticsResponse) -> Vec<ModelStats> {
    let d = |s: Option<pb::StatisticDuration>| {
        s.map_or(StatDuration::default(), |s| StatDuration {
            count: s.count,
            ns: s.ns,
        })
    };
    r.model_stats
        .into_iter()
        .map(|m| {
            let i = m.inference_stats.unwrap_or_default();
            ModelStats {
                name: m.name,
                version: m.version,
                inference_count: m.inference_count,
                execution_count: m.execution_count,
                success: d(i.success),
                fail: d(i.fail),
                queue: d(i.queue),
                compute_input: d(i.compute_input),
                compute_infer: d(i.compute_infer),
                compute_output: d(i.compute_output),
                cache_hit: d(i.cache_hit),
                cache_miss: d(i.cache_miss),
            }
        })
        .collect()
}

/// Decodes a protobuf message, naming the RPC in the error.
pub fn decode<M: Message + Default>(bytes: &[u8], rpc: &str) -> Result<M> {
    M::decode(bytes).map_err(|e| Error::generic(format!("{rpc}: malformed response: {e}")))
}

#[cfg(test)]
#[path = "triton_grpc_tests.rs"]
mod tests;
