//! The reference models: their tensor signatures, metadata/config JSON and compute.
//!
//! Every model has one version, "1". Shapes in the signatures leave out the batch dimension;
//! when `max_batch_size > 0` the wire shape puts the batch size first. Stateful and ensemble
//! models run through `execute` (they need the server's sequence table and statistics).

use std::borrow::Cow;

use serde_json::{json, Value};

use super::settings::ModelSettings;
use inferperf_wire::tensor::DataType;

/// The only version every reference model has.
pub const MODEL_VERSION: &str = "1";

/// Backend/platform name reported in metadata and config.
pub const PLATFORM: &str = "inferperf";

/// One input or output of a model; `dims` exclude the batch dimension, -1 means any length.
#[derive(Debug)]
pub struct TensorSpec {
    pub name: &'static str,
    pub datatype: DataType,
    pub dims: &'static [i64],
}

/// What a model computes from its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compute {
    /// OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (INT32, wrapping).
    SumDiff,
    /// OUTPUT0 = INPUT0, same shape and bytes.
    Identity,
    /// Decoupled: one response per element i of IN, carrying OUT = [IN[i]] and IDX = [i]
    /// (see [`ModelDef::repeat_response`]); only the gRPC stream serves it.
    Repeat,
    /// Sequence model: OUTPUT = running INT32 sum of INPUT over the sequence so far.
    Accumulate,
    /// Ensemble: runs [`ModelDef::steps`] in order, passing tensors by name.
    Ensemble,
}

/// One step of an ensemble: a composing model and how its tensors map to the ensemble's.
#[derive(Debug)]
pub struct EnsembleStep {
    pub model: &'static str,
    /// (composing model input, ensemble tensor it reads).
    pub input_map: &'static [(&'static str, &'static str)],
    /// (composing model output, ensemble tensor it writes).
    pub output_map: &'static [(&'static str, &'static str)],
}

/// A model as defined; the server serves a copy with the loaded `max_batch_size`.
#[derive(Debug, Clone, Copy)]
pub struct ModelDef {
    pub name: &'static str,
    /// 0 = the model does not batch (no batch dimension on the wire).
    pub max_batch_size: usize,
    pub inputs: &'static [TensorSpec],
    pub outputs: &'static [TensorSpec],
    pub compute: Compute,
    /// Sends any number of responses per request (`model_transaction_policy.decoupled`), so
    /// only a streaming RPC can serve it.
    pub decoupled: bool,
    /// Stateful: requests carry sequence ids (config `sequence_batching`).
    pub sequence: bool,
    /// Ensemble steps (config `ensemble_scheduling`); empty for other models.
    pub steps: &'static [EnsembleStep],
}

const fn spec(name: &'static str, datatype: DataType, dims: &'static [i64]) -> TensorSpec {
    TensorSpec {
        name,
        datatype,
        dims,
    }
}

/// All models the server hosts, in the order `/v2/models/stats` lists them.
pub static MODELS: [ModelDef; 7] = [
    ModelDef {
        name: "simple",
        max_batch_size: 8,
        inputs: &[
            spec("INPUT0", DataType::I32, &[16]),
            spec("INPUT1", DataType::I32, &[16]),
        ],
        outputs: &[
            spec("OUTPUT0", DataType::I32, &[16]),
            spec("OUTPUT1", DataType::I32, &[16]),
        ],
        compute: Compute::SumDiff,
        decoupled: false,
        sequence: false,
        steps: &[],
    },
    ModelDef {
        name: "identity_fp32",
        max_batch_size: 8,
        inputs: &[spec("INPUT0", DataType::F32, &[-1])],
        outputs: &[spec("OUTPUT0", DataType::F32, &[-1])],
        compute: Compute::Identity,
        decoupled: false,
        sequence: false,
        steps: &[],
    },
    ModelDef {
        name: "identity_bytes",
        max_batch_size: 8,
        inputs: &[spec("INPUT0", DataType::Bytes, &[-1])],
        outputs: &[spec("OUTPUT0", DataType::Bytes, &[-1])],
        compute: Compute::Identity,
        decoupled: false,
        sequence: false,
        steps: &[],
    },
    ModelDef {
        name: "repeat_int32",
        max_batch_size: 0,
        inputs: &[spec("IN", DataType::I32, &[-1])],
        outputs: &[
            spec("OUT", DataType::I32, &[1]),
            spec("IDX", DataType::U32, &[1]),
        ],
        compute: Compute::Repeat,
        decoupled: true,
        sequence: false,
        steps: &[],
    },
    ModelDef {
        name: "identity_int32",
        max_batch_size: 8,
        inputs: &[spec("INPUT0", DataType::I32, &[-1])],
        outputs: &[spec("OUTPUT0", DataType::I32, &[-1])],
        compute: Compute::Identity,
        decoupled: false,
        sequence: false,
        steps: &[],
    },
    ModelDef {
        name: "accumulate_int32",
        max_batch_size: 0,
        inputs: &[spec("INPUT", DataType::I32, &[1])],
        outputs: &[spec("OUTPUT", DataType::I32, &[1])],
        compute: Compute::Accumulate,
        decoupled: false,
        sequence: true,
        steps: &[],
    },
    // `simple`'s signature; OUTPUT0 (the sum) goes through `identity_int32`, so one request
    // runs both composing models once.
    ModelDef {
        name: "ensemble_simple",
        max_batch_size: 8,
        inputs: &[
            spec("INPUT0", DataType::I32, &[16]),
            spec("INPUT1", DataType::I32, &[16]),
        ],
        outputs: &[
            spec("OUTPUT0", DataType::I32, &[16]),
            spec("OUTPUT1", DataType::I32, &[16]),
        ],
        compute: Compute::Ensemble,
        decoupled: false,
        sequence: false,
        steps: &[
            EnsembleStep {
                model: "simple",
                input_map: &[("INPUT0", "INPUT0"), ("INPUT1", "INPUT1")],
                output_map: &[("OUTPUT0", "sum"), ("OUTPUT1", "OUTPUT1")],
            },
            EnsembleStep {
                model: "identity_int32",
                input_map: &[("INPUT0", "sum")],
                output_map: &[("OUTPUT0", "OUTPUT0")],
            },
        ],
    },
];

/// Platform of ensembles in metadata and config (Triton's name).
pub const ENSEMBLE_PLATFORM: &str = "ensemble";

/// Index of a model in [`MODELS`].
pub fn find_model(name: &str) -> Option<usize> {
    MODELS.iter().position(|m| m.name == name)
}

/// Comma-separated model names, for the startup line.
pub fn model_names() -> String {
    MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
}

/// A decoded input tensor: full wire shape and raw little-endian bytes (BYTES length-framed).
#[derive(Debug)]
pub struct TensorData<'a> {
    pub shape: Vec<i64>,
    pub data: Cow<'a, [u8]>,
}

impl ModelDef {
    /// The wire shape of a tensor: batch dimension (-1) first when the model batches.
    pub fn wire_dims(&self, spec: &TensorSpec) -> Vec<i64> {
        let mut dims = Vec::with_capacity(spec.dims.len() + 1);
        if self.max_batch_size > 0 {
            dims.push(-1);
        }
        dims.extend_from_slice(spec.dims);
        dims
    }

    /// Runs the model. `inputs` are in the order of `self.inputs` and already validated
    /// (shapes, sizes, framing); outputs come back in the order of `self.outputs`.
    /// A decoupled model has no single answer: this returns its inputs unchanged, and its
    /// responses come from [`ModelDef::repeat_response`].
    /// Stateful and ensemble models also return their inputs: `execute` runs those.
    pub fn run<'a>(&self, inputs: Vec<TensorData<'a>>) -> Vec<TensorData<'a>> {
        match self.compute {
            Compute::Identity | Compute::Repeat | Compute::Accumulate | Compute::Ensemble => inputs,
            Compute::SumDiff => {
                let (a, b) = (&inputs[0].data, &inputs[1].data);
                let mut sum = Vec::with_capacity(a.len());
                let mut diff = Vec::with_capacity(a.len());
                for (x, y) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
                    let x = i32::from_le_bytes([x[0], x[1], x[2], x[3]]);
                    let y = i32::from_le_bytes([y[0], y[1], y[2], y[3]]);
                    sum.extend_from_slice(&x.wrapping_add(y).to_le_bytes());
                    diff.extend_from_slice(&x.wrapping_sub(y).to_le_bytes());
                }
                let shape = inputs[0].shape.clone();
                vec![
                    TensorData {
                        shape: shape.clone(),
                        data: Cow::Owned(sum),
                    },
                    TensorData {
                        shape,
                        data: Cow::Owned(diff),
                    },
                ]
            }
        }
    }

    /// Response `index` of the decoupled repeat model for the element `value`:
    /// OUT = [value] (INT32), IDX = [index] (UINT32), in the order of `self.outputs`.
    pub fn repeat_response(&self, index: u32, value: i32) -> Vec<TensorData<'static>> {
        vec![
            TensorData {
                shape: vec![1],
                data: Cow::Owned(value.to_le_bytes().to_vec()),
            },
            TensorData {
                shape: vec![1],
                data: Cow::Owned(index.to_le_bytes().to_vec()),
            },
        ]
    }

    /// `platform` in metadata and config: "ensemble" for ensembles.
    pub fn platform(&self) -> &'static str {
        if self.steps.is_empty() {
            PLATFORM
        } else {
            ENSEMBLE_PLATFORM
        }
    }

    /// `GET /v2/models/{m}`: KServe v2 model metadata.
    pub fn metadata_json(&self) -> Value {
        let tensors = |specs: &[TensorSpec]| -> Vec<Value> {
            specs
                .iter()
                .map(|s| {
                    json!({"name": s.name, "datatype": s.datatype.name(), "shape": self.wire_dims(s)})
                })
                .collect()
        };
        json!({
            "name": self.name,
            "versions": [MODEL_VERSION],
            "platform": self.platform(),
            "inputs": tensors(self.inputs),
            "outputs": tensors(self.outputs),
        })
    }

    /// The repository config's settings (what a load without a config override gives).
    pub fn settings(&self) -> ModelSettings {
        ModelSettings::new(self.max_batch_size)
    }

    /// `GET /v2/models/{m}/config` of the repository config: Triton's config as JSON.
    pub fn config_json(&self) -> Value {
        self.config_json_with(&self.settings())
    }

    /// The config JSON with loaded `settings`.
    pub fn config_json_with(&self, settings: &ModelSettings) -> Value {
        let config_type = |d: DataType| {
            if d == DataType::Bytes {
                "TYPE_STRING".to_string()
            } else {
                format!("TYPE_{}", d.name())
            }
        };
        let inputs: Vec<Value> = self
            .inputs
            .iter()
            .map(|s| {
                json!({"name": s.name, "data_type": config_type(s.datatype), "format": "FORMAT_NONE",
                    "dims": s.dims, "is_shape_tensor": false, "allow_ragged_batch": false,
                    "optional": false, "is_non_linear_format_io": false})
            })
            .collect();
        let outputs: Vec<Value> = self
            .outputs
            .iter()
            .map(|s| {
                json!({"name": s.name, "data_type": config_type(s.datatype), "dims": s.dims,
                    "label_filename": "", "is_shape_tensor": false,
                    "is_non_linear_format_io": false})
            })
            .collect();
        let backend = if self.steps.is_empty() { PLATFORM } else { "" };
        // The fields (and their order) of Triton 2.51's config JSON.
        let mut config = json!({
            "name": self.name,
            "platform": self.platform(),
            "backend": backend,
            "runtime": "",
            "version_policy": settings.version_policy,
            "max_batch_size": settings.max_batch_size,
            "input": inputs,
            "output": outputs,
            "batch_input": [],
            "batch_output": [],
            "default_model_filename": "",
            "cc_model_filenames": {},
            "metric_tags": {},
            "parameters": {},
            "model_warmup": [],
            "model_transaction_policy": {"decoupled": self.decoupled},
        });
        if self.steps.is_empty() {
            config["optimization"] = json!({"priority": "PRIORITY_DEFAULT",
                "input_pinned_memory": {"enable": true}, "output_pinned_memory": {"enable": true},
                "gather_kernel_buffer_threshold": 0, "eager_batching": false});
            config["instance_group"] = settings.instance_group_json(self.name);
        }
        if let Some(batching) = settings.dynamic_batching_json() {
            config["dynamic_batching"] = batching;
        }
        if self.sequence {
            config["sequence_batching"] = json!({});
        }
        if !self.steps.is_empty() {
            config["ensemble_scheduling"] = json!({"step": self.steps.iter().map(|s| {
                let map = |pairs: &[(&str, &str)]| -> serde_json::Map<String, Value> {
                    pairs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect()
                };
                json!({"model_name": s.model, "model_version": -1,
                    "input_map": map(s.input_map), "output_map": map(s.output_map),
                    "model_namespace": ""})
            }).collect::<Vec<_>>()});
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn sum_diff_wraps() {
        let m = &MODELS[find_model("simple").unwrap()];
        let a = TensorData {
            shape: vec![1, 2],
            data: Cow::Owned(i32s(&[i32::MAX, 5])),
        };
        let b = TensorData {
            shape: vec![1, 2],
            data: Cow::Owned(i32s(&[1, 7])),
        };
        let out = m.run(vec![a, b]);
        assert_eq!(out[0].data.as_ref(), i32s(&[i32::MIN, 12]).as_slice());
        assert_eq!(out[1].data.as_ref(), i32s(&[i32::MAX - 1, -2]).as_slice());
        assert_eq!(out[1].shape, vec![1, 2]);
    }

    #[test]
    fn identity_borrows() {
        let m = &MODELS[find_model("identity_fp32").unwrap()];
        let bytes = [0u8, 0, 128, 63];
        let out = m.run(vec![TensorData {
            shape: vec![1, 1],
            data: Cow::Borrowed(&bytes),
        }]);
        assert!(matches!(out[0].data, Cow::Borrowed(_)));
    }

    #[test]
    fn metadata_and_config_shapes() {
        let m = &MODELS[0];
        let meta = m.metadata_json();
        assert_eq!(meta["inputs"][0]["shape"], json!([-1, 16]));
        assert_eq!(meta["versions"], json!(["1"]));
        let cfg = m.config_json();
        assert_eq!(cfg["input"][1]["data_type"], "TYPE_INT32");
        assert_eq!(cfg["input"][1]["dims"], json!([16]));
        assert_eq!(cfg["max_batch_size"], 8);
        let bytes_cfg = MODELS[2].config_json();
        assert_eq!(bytes_cfg["output"][0]["data_type"], "TYPE_STRING");
        assert_eq!(find_model("nope"), None);
        let repeat = &MODELS[find_model("repeat_int32").unwrap()];
        let cfg = repeat.config_json();
        assert_eq!(cfg["model_transaction_policy"]["decoupled"], true);
        assert_eq!(cfg["max_batch_size"], 0);
        assert_eq!(repeat.metadata_json()["inputs"][0]["shape"], json!([-1]));
        assert_eq!(
            m.config_json()["model_transaction_policy"]["decoupled"],
            false
        );
    }

    #[test]
    fn repeat_response_carries_value_and_index() {
        let m = &MODELS[find_model("repeat_int32").unwrap()];
        let out = m.repeat_response(2, -7);
        assert_eq!(out[0].data.as_ref(), (-7i32).to_le_bytes().as_slice());
        assert_eq!(out[1].data.as_ref(), 2u32.to_le_bytes().as_slice());
        assert_eq!(
            (out[0].shape.clone(), out[1].shape.clone()),
            (vec![1], vec![1])
        );
    }
}

#[cfg(test)]
#[path = "models_http_tests.rs"]
mod http_tests;
