//! Setup and request plans of the `tfserving`, `torchserve` and `dynamic_grpc` service kinds
//! (spec §7.2, §7.3, §7.5). None of them has Triton's readiness, config or statistics calls:
//! the server only has to accept a connection within `--ready-timeout`; TF Serving is then
//! asked for its signature. Client statistics only.

use super::plan::{request_starts, LoadPlan};
use super::setup::{SetupClient, Target};
use crate::config::{Config, LoadMode, ServiceKind};
use crate::engine::wire::{GrpcWire, Wire};
use crate::error::{Error, Result};
use crate::inputs::{batch, load_inputs_with, InputOptions, InputSet};
use crate::protocol::grpc::compress::encoding_name;
use crate::service::dynamic_grpc::{self, MESSAGE_GENERATOR};
use crate::service::tfserving::{self, SERVICE_PATH};
use crate::service::torchserve::{self, TORCHSERVE_INPUT};
use crate::service::triton_grpc::call_headers;
use crate::service::triton_http::{self, ModelConfig, ModelMetadata, TensorMeta};
use crate::tensor::{split_bytes_elements, DataType};

/// The data stream these kinds read (they have no sequence models).
const STREAM: usize = 0;

/// True for the service kinds this module runs.
pub fn handles(cfg: &Config) -> bool {
    matches!(
        cfg.service_kind,
        ServiceKind::TfServing | ServiceKind::TorchServe | ServiceKind::DynamicGrpc
    )
}

/// Connects (retrying within `--ready-timeout`); for TF Serving also reads the signature.
pub fn prepare(cfg: &Config) -> Result<Target> {
    let mut target = super::openai::prepare(cfg)?;
    match cfg.service_kind {
        ServiceKind::TfServing => {
            let (meta, config) = tfserving_model(cfg, &mut target.client)?;
            target.meta = meta;
            target.config = config;
        }
        ServiceKind::TorchServe => target.meta = pseudo_model(cfg, TORCHSERVE_INPUT),
        _ => target.meta = pseudo_model(cfg, MESSAGE_GENERATOR),
    }
    Ok(target)
}

/// `GetModelMetadata` with the `signature_def` field, mapped to inputs (see
/// [`tfserving::model_from_metadata`]).
fn tfserving_model(cfg: &Config, client: &mut SetupClient) -> Result<(ModelMetadata, ModelConfig)> {
    let SetupClient::Grpc(grpc) = client else {
        return Err(Error::usage(
            "-i http: --service-kind tfserving speaks gRPC only (-i grpc).",
        ));
    };
    let request = tfserving::metadata_request(
        &cfg.model_name,
        &cfg.model_version,
        &cfg.model_signature_name,
    );
    let method = format!("{SERVICE_PATH}GetModelMetadata");
    let bytes = grpc.unary(&method, &request)?;
    let batch = cfg.batch_size_given.then_some(cfg.batch_size);
    tfserving::model_from_metadata(&bytes, &cfg.model_name, &cfg.model_signature_name, batch)
}

/// A model with one BYTES pseudo-input (`[1]`, no batching), so the input-data loader reads
/// and checks the kind's field in every step.
fn pseudo_model(cfg: &Config, input: &str) -> ModelMetadata {
    ModelMetadata {
        name: cfg.model_name.clone(),
        inputs: vec![TensorMeta {
            name: input.into(),
            datatype: DataType::Bytes,
            shape: vec![1],
        }],
        ..ModelMetadata::default()
    }
}

/// The pre-encoded requests of a run, one per input step (TF Serving: one per batch).
pub fn build_plan(cfg: &Config, target: &Target) -> Result<LoadPlan> {
    let opts = InputOptions {
        fixed_schedule: cfg.load_mode == LoadMode::FixedSchedule,
    };
    let set = load_inputs_with(&target.meta, &target.config, cfg, opts)?;
    let steps = set.streams.get(STREAM).map_or(0, Vec::len);
    if steps == 0 {
        return Err(Error::usage("--input-data: the data has no steps to send"));
    }
    match cfg.service_kind {
        ServiceKind::TfServing => tfserving_plan(cfg, target, &set),
        ServiceKind::TorchServe => torchserve_plan(cfg, target, &set),
        _ => dynamic_grpc_plan(cfg, target, &set),
    }
}

fn empty_plan(wire: Wire, capacity: usize) -> LoadPlan {
    LoadPlan {
        requests: Vec::with_capacity(capacity),
        wire,
        step_inputs: Vec::with_capacity(capacity),
        expected: Vec::with_capacity(capacity),
        timestamps_ms: Vec::with_capacity(capacity),
        sequences: None,
    }
}

/// A unary gRPC wire calling `path`.
fn grpc_wire(cfg: &Config, target: &Target, path: &str) -> Wire {
    Wire::Grpc(GrpcWire {
        headers: call_headers(
            &target.host,
            path,
            &cfg.headers,
            cfg.tls.is_some(),
            encoding_name(cfg.compression),
        ),
        streaming: false,
        decoupled: false,
    })
}

fn tfserving_plan(cfg: &Config, target: &Target, set: &InputSet) -> Result<LoadPlan> {
    let batched = target.config.max_batch_size > 0;
    let b = if batched {
        usize::try_from(cfg.batch_size)
            .map_err(|_| Error::usage(format!("-b {}: too large", cfg.batch_size)))?
    } else {
        1
    };
    let starts = request_starts(set.steps(STREAM), b);
    let wire = grpc_wire(cfg, target, &format!("{SERVICE_PATH}Predict"));
    let mut plan = empty_plan(wire, starts.len());
    let spec = tfserving::model_spec(
        &cfg.model_name,
        &cfg.model_version,
        &cfg.model_signature_name,
    );
    for first in starts {
        let inputs = batch(set, STREAM, first, b, batched)?;
        plan.requests
            .push(tfserving::encode_predict(&spec, &inputs, cfg.compression)?);
        plan.step_inputs.push(triton_http::inputs_json(&inputs));
        plan.expected.push(None);
        plan.timestamps_ms
            .push(set.streams[STREAM][first].timestamp_ms);
    }
    Ok(plan)
}

/// The single string element of a step's pseudo-input `field`.
fn step_string(set: &InputSet, step: usize, field: &str) -> Result<String> {
    let value = set.streams[STREAM][step]
        .inputs
        .iter()
        .find(|t| t.name == field)
        .ok_or_else(|| {
            Error::usage(format!(
                "--input-data: missing tensor {field} (Location stream id: {STREAM}, step id: \
                 {step})"
            ))
        })?;
    match split_bytes_elements(&value.data).as_deref() {
        Some([one]) => Ok(String::from_utf8_lossy(one).into_owned()),
        _ => Err(Error::usage(format!(
            "--input-data: {field} of step {step} must hold exactly one string"
        ))),
    }
}

fn torchserve_plan(cfg: &Config, target: &Target, set: &InputSet) -> Result<LoadPlan> {
    let steps = set.steps(STREAM);
    let mut plan = empty_plan(Wire::Http1, steps);
    for step in 0..steps {
        let path = std::path::PathBuf::from(step_string(set, step, TORCHSERVE_INPUT)?);
        plan.requests.push(torchserve::encode_request(
            &target.host,
            &cfg.model_name,
            &cfg.model_version,
            &cfg.headers,
            &path,
        )?);
        plan.step_inputs
            .push(torchserve::request_inputs_json(&path));
        plan.expected.push(None);
        plan.timestamps_ms
            .push(set.streams[STREAM][step].timestamp_ms);
    }
    Ok(plan)
}

fn dynamic_grpc_plan(cfg: &Config, target: &Target, set: &InputSet) -> Result<LoadPlan> {
    let path = dynamic_grpc::method_path(&cfg.grpc_method)?;
    let steps = set.steps(STREAM);
    let mut plan = empty_plan(grpc_wire(cfg, target, &path), steps);
    for step in 0..steps {
        let command = step_string(set, step, MESSAGE_GENERATOR)?;
        let stdout = dynamic_grpc::run_generator(&command)?;
        let messages = dynamic_grpc::split_messages(&stdout);
        if messages.is_empty() {
            return Err(Error::usage(format!(
                "{MESSAGE_GENERATOR} '{command}' printed no length-prefixed message (step {step})"
            )));
        }
        plan.requests
            .push(dynamic_grpc::encode_messages(&messages, cfg.compression)?);
        plan.step_inputs
            .push(dynamic_grpc::request_inputs_json(&command));
        plan.expected.push(None);
        plan.timestamps_ms
            .push(set.streams[STREAM][step].timestamp_ms);
    }
    Ok(plan)
}

/// One response as the export's `response_outputs` object, per kind.
pub fn export_outputs(cfg: &Config, body: &[u8]) -> String {
    match cfg.service_kind {
        ServiceKind::TfServing => tfserving::response_outputs_json(body),
        ServiceKind::TorchServe => torchserve::response_outputs_json(body),
        _ => dynamic_grpc::response_outputs_json(body),
    }
}

/// The banner's and the export's names of a kind this module runs.
pub fn names(kind: ServiceKind) -> Option<(&'static str, &'static str)> {
    match kind {
        ServiceKind::TfServing => Some(("TENSORFLOW_SERVING", "tfserving")),
        ServiceKind::TorchServe => Some(("TORCHSERVE", "torchserve")),
        ServiceKind::DynamicGrpc => Some(("DYNAMIC_GRPC", "dynamic_grpc")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::{Step, TensorValue};

    fn set_of(field: &str, values: &[&[&str]]) -> InputSet {
        let steps = values
            .iter()
            .map(|elems| {
                let mut data = Vec::new();
                for e in *elems {
                    crate::tensor::push_bytes_element(&mut data, e.as_bytes());
                }
                Step {
                    inputs: vec![TensorValue {
                        name: field.into(),
                        datatype: DataType::Bytes,
                        shape: vec![elems.len() as i64],
                        data,
                    }],
                    ..Step::default()
                }
            })
            .collect();
        InputSet {
            streams: vec![steps],
            ..InputSet::default()
        }
    }

    #[test]
    fn step_strings_need_exactly_one_element() {
        let set = set_of("f", &[&["a b"], &[], &["x", "y"]]);
        assert_eq!(step_string(&set, 0, "f").unwrap(), "a b");
        for step in [1, 2] {
            let err = step_string(&set, step, "f").unwrap_err();
            assert!(err.msg.contains("exactly one"), "{}", err.msg);
        }
        let err = step_string(&set, 0, "g").unwrap_err();
        assert!(err.msg.contains("missing tensor g"), "{}", err.msg);
    }

    #[test]
    fn kind_names() {
        let rows = [
            (
                ServiceKind::TfServing,
                Some(("TENSORFLOW_SERVING", "tfserving")),
            ),
            (ServiceKind::TorchServe, Some(("TORCHSERVE", "torchserve"))),
            (
                ServiceKind::DynamicGrpc,
                Some(("DYNAMIC_GRPC", "dynamic_grpc")),
            ),
            (ServiceKind::Triton, None),
        ];
        for (kind, want) in rows {
            assert_eq!(names(kind), want, "{kind:?}");
        }
    }
}
