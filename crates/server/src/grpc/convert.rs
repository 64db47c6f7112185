//! ModelInferRequest in, ModelInferResponse out: input tensors from `raw_input_contents` or
//! typed `contents` (validated by the HTTP side's rules), requested outputs, parameters.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::infer::{decode_with, WireInput};
use crate::models::{ModelDef, TensorData, TensorSpec, MODEL_VERSION};
use crate::sequence::{SeqControl, SeqId};
use inferperf_wire::protocol::grpc::pb::inference::infer_parameter::ParameterChoice;
use inferperf_wire::protocol::grpc::pb::inference::model_infer_request::InferInputTensor;
use inferperf_wire::protocol::grpc::pb::inference::model_infer_response::InferOutputTensor;
use inferperf_wire::protocol::grpc::pb::inference::{
    InferParameter, InferTensorContents, ModelInferRequest, ModelInferResponse,
};
use inferperf_wire::tensor::{push_bytes_element, DataType};

/// Request parameter asking a decoupled model for a separate, empty final response.
pub const EMPTY_FINAL: &str = "triton_enable_empty_final_response";
/// Response parameter marking the last response of a request on a stream.
pub const FINAL_RESPONSE: &str = "triton_final_response";

impl WireInput for InferInputTensor {
    fn name(&self) -> &str {
        &self.name
    }
    fn datatype(&self) -> &str {
        &self.datatype
    }
    fn shape(&self) -> &[i64] {
        &self.shape
    }
}

/// A bool request parameter; `Err` when it is present with another type.
pub fn bool_param(params: &HashMap<String, InferParameter>, key: &str) -> Result<bool, String> {
    match params.get(key).and_then(|p| p.parameter_choice.as_ref()) {
        None => Ok(false),
        Some(ParameterChoice::BoolParam(b)) => Ok(*b),
        Some(_) => Err(format!("request parameter '{key}' must be a bool")),
    }
}

/// The sequence controls of a request: `sequence_id` (int64, uint64 or string),
/// `sequence_start` and `sequence_end` (bool).
pub fn seq_control(params: &HashMap<String, InferParameter>) -> Result<SeqControl, String> {
    let choice = |key: &str| params.get(key).and_then(|p| p.parameter_choice.as_ref());
    let id = match choice("sequence_id") {
        None => None,
        Some(ParameterChoice::Int64Param(v)) => match u64::try_from(*v) {
            Ok(v) => SeqId::Number(v).non_zero(),
            Err(_) => {
                return Err(format!(
                    "request parameter 'sequence_id' must not be negative, got {v}"
                ))
            }
        },
        Some(ParameterChoice::Uint64Param(v)) => SeqId::Number(*v).non_zero(),
        Some(ParameterChoice::StringParam(s)) => SeqId::Text(s.clone()).non_zero(),
        Some(_) => {
            return Err("request parameter 'sequence_id' must be an int64, uint64 or string".into())
        }
    };
    Ok(SeqControl {
        id,
        start: bool_param(params, "sequence_start")?,
        end: bool_param(params, "sequence_end")?,
    })
}

/// Validates the request's inputs against `model`; returns them in model order and the batch
/// size. Data comes from `raw_input_contents` (one entry per input, in request order) or, when
/// that is empty, from each input's typed `contents`.
pub fn decode_inputs<'a>(
    model: &ModelDef,
    req: &'a ModelInferRequest,
) -> Result<(Vec<TensorData<'a>>, usize), String> {
    let raw = &req.raw_input_contents;
    if !raw.is_empty() && raw.len() != req.inputs.len() {
        return Err(format!(
            "expected {} raw_input_contents entries (one per input) for model '{}', got {}",
            req.inputs.len(),
            model.name,
            raw.len()
        ));
    }
    decode_with(model, &req.inputs, |i, spec, input| {
        match (raw.get(i), &input.contents) {
            (Some(_), Some(_)) => Err(format!(
                "input '{}' has both raw_input_contents and contents",
                input.name
            )),
            (Some(bytes), None) => Ok(Cow::Borrowed(bytes.as_slice())),
            (None, Some(contents)) => typed_bytes(spec, contents).map(Cow::Owned),
            (None, None) => Err(format!(
                "input '{}' has neither raw_input_contents nor contents",
                input.name
            )),
        }
    })
}

/// Packs `values` as little-endian bytes; `put` returns false for a value the type cannot hold.
fn pack<S: Copy + std::fmt::Display>(
    values: &[S],
    spec: &TensorSpec,
    mut put: impl FnMut(S, &mut Vec<u8>) -> bool,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(values.len() * spec.datatype.size());
    for &v in values {
        if !put(v, &mut out) {
            return Err(format!(
                "value {v} in contents of input '{}' does not fit {}",
                spec.name,
                spec.datatype.name()
            ));
        }
    }
    Ok(out)
}

/// Converts typed `contents` into the raw wire layout of the input's datatype.
fn typed_bytes(spec: &TensorSpec, c: &InferTensorContents) -> Result<Vec<u8>, String> {
    fn fits<T, S>(v: S, out: &mut Vec<u8>, le: impl Fn(T) -> Vec<u8>) -> bool
    where
        T: TryFrom<S>,
    {
        T::try_from(v)
            .map(|x| out.extend_from_slice(&le(x)))
            .is_ok()
    }
    match spec.datatype {
        DataType::Bool => pack(&c.bool_contents, spec, |v, o| {
            o.push(u8::from(v));
            true
        }),
        DataType::I8 => pack(&c.int_contents, spec, |v, o| {
            fits(v, o, |x: i8| x.to_le_bytes().to_vec())
        }),
        DataType::I16 => pack(&c.int_contents, spec, |v, o| {
            fits(v, o, |x: i16| x.to_le_bytes().to_vec())
        }),
        DataType::I32 => pack(&c.int_contents, spec, |v, o| {
            fits(v, o, |x: i32| x.to_le_bytes().to_vec())
        }),
        DataType::I64 => pack(&c.int64_contents, spec, |v, o| {
            fits(v, o, |x: i64| x.to_le_bytes().to_vec())
        }),
        DataType::U8 => pack(&c.uint_contents, spec, |v, o| {
            fits(v, o, |x: u8| x.to_le_bytes().to_vec())
        }),
        DataType::U16 => pack(&c.uint_contents, spec, |v, o| {
            fits(v, o, |x: u16| x.to_le_bytes().to_vec())
        }),
        DataType::U32 => pack(&c.uint_contents, spec, |v, o| {
            fits(v, o, |x: u32| x.to_le_bytes().to_vec())
        }),
        DataType::U64 => pack(&c.uint64_contents, spec, |v, o| {
            fits(v, o, |x: u64| x.to_le_bytes().to_vec())
        }),
        DataType::F32 => pack(&c.fp32_contents, spec, |v, o| {
            o.extend_from_slice(&v.to_le_bytes());
            true
        }),
        DataType::F64 => pack(&c.fp64_contents, spec, |v, o| {
            o.extend_from_slice(&v.to_le_bytes());
            true
        }),
        DataType::Bytes => {
            let mut out = Vec::new();
            for element in &c.bytes_contents {
                push_bytes_element(&mut out, element);
            }
            Ok(out)
        }
        DataType::F16 | DataType::Bf16 => Err(format!(
            "input '{}': typed contents cannot carry {}; send raw_input_contents",
            spec.name,
            spec.datatype.name()
        )),
    }
}

/// Indices into `model.outputs` the response carries: the requested ones in request order, or
/// all of them when the request lists none.
pub fn choose_outputs(model: &ModelDef, req: &ModelInferRequest) -> Result<Vec<usize>, String> {
    if req.outputs.is_empty() {
        return Ok((0..model.outputs.len()).collect());
    }
    req.outputs
        .iter()
        .map(|o| {
            model
                .outputs
                .iter()
                .position(|s| s.name == o.name)
                .ok_or_else(|| {
                    format!(
                        "unexpected inference output '{}' for model '{}'",
                        o.name, model.name
                    )
                })
        })
        .collect()
}

/// A response carrying the chosen outputs as raw bytes; `final_flag` adds
/// `triton_final_response` (stream responses only).
pub fn build_response(
    model: &ModelDef,
    id: &str,
    chosen: &[usize],
    outputs: &[TensorData],
    final_flag: Option<bool>,
) -> ModelInferResponse {
    let mut response = ModelInferResponse {
        model_name: model.name.to_string(),
        model_version: MODEL_VERSION.to_string(),
        id: id.to_string(),
        ..Default::default()
    };
    for &i in chosen {
        let (spec, tensor) = (&model.outputs[i], &outputs[i]);
        response.outputs.push(InferOutputTensor {
            name: spec.name.to_string(),
            datatype: spec.datatype.name().to_string(),
            shape: tensor.shape.clone(),
            ..Default::default()
        });
        response.raw_output_contents.push(tensor.data.to_vec());
    }
    if let Some(flag) = final_flag {
        response.parameters.insert(
            FINAL_RESPONSE.to_string(),
            InferParameter {
                parameter_choice: Some(ParameterChoice::BoolParam(flag)),
            },
        );
    }
    response
}

/// The elements of the repeat model's validated `IN` tensor (INT32, little-endian).
pub fn int32_values(data: &[u8]) -> Vec<i32> {
    data.chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::{find_model, MODELS};
    use inferperf_wire::protocol::grpc::pb::inference::model_infer_request::InferRequestedOutputTensor;

    fn model(name: &str) -> &'static ModelDef {
        &MODELS[find_model(name).unwrap()]
    }

    fn input(name: &str, datatype: &str, shape: &[i64]) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape: shape.to_vec(),
            ..Default::default()
        }
    }

    fn i32_bytes(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn raw_and_typed_inputs() {
        let raw = ModelInferRequest {
            inputs: vec![input("INPUT0", "FP32", &[2, 1])],
            raw_input_contents: vec![[1.5f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect()],
            ..Default::default()
        };
        let (tensors, batch) = decode_inputs(model("identity_fp32"), &raw).unwrap();
        assert_eq!((batch, tensors[0].data.len()), (2, 8));
        let mut typed_in = input("INPUT0", "BYTES", &[1, 2]);
        typed_in.contents = Some(InferTensorContents {
            bytes_contents: vec![b"ab".to_vec(), b"".to_vec()],
            ..Default::default()
        });
        let typed = ModelInferRequest {
            inputs: vec![typed_in],
            ..Default::default()
        };
        let (tensors, _) = decode_inputs(model("identity_bytes"), &typed).unwrap();
        assert_eq!(
            tensors[0].data.as_ref(),
            &[2, 0, 0, 0, b'a', b'b', 0, 0, 0, 0]
        );
    }

    #[test]
    fn input_errors() {
        let mut both = input("IN", "INT32", &[1]);
        both.contents = Some(InferTensorContents::default());
        let mut too_big = input("IN", "INT32", &[1]);
        too_big.contents = Some(InferTensorContents {
            int_contents: vec![1],
            ..Default::default()
        });
        let cases: Vec<(&str, ModelInferRequest, &str)> = vec![
            (
                "repeat_int32",
                ModelInferRequest {
                    inputs: vec![both],
                    raw_input_contents: vec![i32_bytes(&[1])],
                    ..Default::default()
                },
                "both raw_input_contents and contents",
            ),
            (
                "repeat_int32",
                ModelInferRequest {
                    inputs: vec![input("IN", "INT32", &[1])],
                    ..Default::default()
                },
                "neither raw_input_contents nor contents",
            ),
            (
                "simple",
                ModelInferRequest {
                    inputs: vec![
                        input("INPUT0", "INT32", &[1, 16]),
                        input("INPUT1", "INT32", &[1, 16]),
                    ],
                    raw_input_contents: vec![i32_bytes(&[0; 16])],
                    ..Default::default()
                },
                "expected 2 raw_input_contents entries",
            ),
            (
                "repeat_int32",
                ModelInferRequest {
                    inputs: vec![input("IN", "INT32", &[2])],
                    raw_input_contents: vec![i32_bytes(&[1])],
                    ..Default::default()
                },
                "byte size mismatch for input 'IN'",
            ),
            (
                "repeat_int32",
                ModelInferRequest {
                    inputs: vec![input("IN", "FP32", &[1])],
                    raw_input_contents: vec![i32_bytes(&[1])],
                    ..Default::default()
                },
                "data-type is 'FP32'",
            ),
            (
                "repeat_int32",
                ModelInferRequest {
                    inputs: vec![too_big.clone(), too_big],
                    ..Default::default()
                },
                "expected 1 inputs but got 2",
            ),
        ];
        for (m, req, want) in cases {
            let err = decode_inputs(model(m), &req).unwrap_err();
            assert!(err.contains(want), "got {err:?}, want {want:?}");
        }
    }

    #[test]
    fn typed_contents_ranges() {
        let spec = |datatype| TensorSpec {
            name: "X",
            datatype,
            dims: &[-1],
        };
        let ints = InferTensorContents {
            int_contents: vec![-1, 127],
            uint_contents: vec![255, 256],
            bool_contents: vec![true, false],
            fp64_contents: vec![0.5],
            ..Default::default()
        };
        assert_eq!(
            typed_bytes(&spec(DataType::I8), &ints).unwrap(),
            [0xff, 127]
        );
        assert_eq!(
            typed_bytes(&spec(DataType::I16), &ints).unwrap(),
            [0xff, 0xff, 127, 0]
        );
        assert_eq!(typed_bytes(&spec(DataType::Bool), &ints).unwrap(), [1, 0]);
        assert_eq!(
            typed_bytes(&spec(DataType::F64), &ints).unwrap(),
            0.5f64.to_le_bytes()
        );
        let err = typed_bytes(&spec(DataType::U8), &ints).unwrap_err();
        assert!(err.contains("value 256") && err.contains("UINT8"), "{err}");
        let err = typed_bytes(&spec(DataType::F16), &ints).unwrap_err();
        assert!(err.contains("FP16"), "{err}");
    }

    #[test]
    fn outputs_and_response() {
        let m = model("simple");
        let mut req = ModelInferRequest::default();
        assert_eq!(choose_outputs(m, &req).unwrap(), vec![0, 1]);
        req.outputs = vec![InferRequestedOutputTensor {
            name: "OUTPUT1".into(),
            ..Default::default()
        }];
        assert_eq!(choose_outputs(m, &req).unwrap(), vec![1]);
        req.outputs[0].name = "NOPE".into();
        assert!(choose_outputs(m, &req).unwrap_err().contains("'NOPE'"));
        let outputs = model("repeat_int32").repeat_response(4, 9);
        let r = build_response(model("repeat_int32"), "id7", &[1, 0], &outputs, Some(true));
        assert_eq!(r.id, "id7");
        assert_eq!(r.outputs[0].name, "IDX");
        assert_eq!(r.outputs[0].datatype, "UINT32");
        assert_eq!(r.raw_output_contents[0], 4u32.to_le_bytes());
        assert_eq!(r.raw_output_contents[1], 9i32.to_le_bytes());
        assert_eq!(bool_param(&r.parameters, FINAL_RESPONSE), Ok(true));
        assert_eq!(bool_param(&r.parameters, "other"), Ok(false));
        let mut params = HashMap::new();
        params.insert(
            EMPTY_FINAL.to_string(),
            InferParameter {
                parameter_choice: Some(ParameterChoice::Int64Param(1)),
            },
        );
        assert!(bool_param(&params, EMPTY_FINAL).is_err());
        assert_eq!(int32_values(&i32_bytes(&[3, -4])), vec![3, -4]);
    }
}
