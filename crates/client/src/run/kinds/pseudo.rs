//! What the `tfserving`, `torchserve` and `dynamic_grpc` service kinds share.
//! None of them has Triton's readiness, config or statistics calls: the server
//! only has to accept a connection within `--ready-timeout`. Their input data is read against
//! TF Serving's signature, or (torchserve, dynamic_grpc, whose servers describe no model)
//! against one string field named for the kind, and they report client statistics only.

use crate::config::{Config, LoadMode};
use crate::engine::wire::{GrpcWire, Wire};
use crate::error::{Error, Result};
use crate::inputs::{load_inputs_with, InputOptions, InputSet};
use crate::protocol::grpc::compress::encoding_name;
use crate::protocol::grpc::request::call_headers;
use crate::run::plan::LoadPlan;
use crate::run::setup::Target;
use crate::service::triton_http::{ModelConfig, ModelMetadata, TensorMeta};
use crate::tensor::{split_bytes_elements, DataType};

/// The data stream these kinds read (they have no sequence models).
pub(super) const STREAM: usize = 0;

/// The layout the input data of a kind without a model description is read against: one
/// string `field` per step (BYTES `[1]`, no batching), so the loader checks it in every step.
pub(super) fn field_layout(cfg: &Config, field: &str) -> ModelMetadata {
    ModelMetadata {
        name: cfg.model_name.clone(),
        inputs: vec![TensorMeta {
            name: field.into(),
            datatype: DataType::Bytes,
            shape: vec![1],
        }],
        ..ModelMetadata::default()
    }
}

/// The run's input data, read against `layout`; at least one step.
pub(super) fn load_steps(
    cfg: &Config,
    layout: &ModelMetadata,
    config: &ModelConfig,
) -> Result<InputSet> {
    let opts = InputOptions {
        fixed_schedule: cfg.load_mode == LoadMode::FixedSchedule,
    };
    let set = load_inputs_with(layout, config, cfg, opts)?;
    if set.streams.get(STREAM).map_or(0, Vec::len) == 0 {
        return Err(Error::usage("--input-data: the data has no steps to send"));
    }
    Ok(set)
}

pub(super) fn empty_plan(wire: Wire, capacity: usize) -> LoadPlan {
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
pub(super) fn grpc_wire(cfg: &Config, target: &Target, path: &str) -> Wire {
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

/// The single string element of a step's pseudo-input `field`.
pub(super) fn step_string(set: &InputSet, step: usize, field: &str) -> Result<String> {
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
}
