//! The `tfserving` service kind: TensorFlow Serving's `PredictionService` over
//! gRPC. The signature read with `GetModelMetadata` becomes the model's inputs; each input
//! step becomes one `PredictRequest`, encoded once.
//!
//! Batching rule: with `-b`, every input's first dim must be -1 (it is the batch dim);
//! without `-b` the batch size is 0 and tensors are sent with the signature's own shape.

use std::collections::HashMap;

use prost::Message;

use super::triton_http::{ModelConfig, ModelMetadata, TensorMeta};
use crate::config::Compression;
use crate::error::{Error, Result};
use crate::protocol::grpc::compress::compress;
use crate::protocol::grpc::message::write_message;
use crate::tensor::{split_bytes_elements, DataType, InputTensor};

pub use inferperf_wire::tfserving::{
    from_tf, model_spec, pb, to_tf, SERVICE_PATH, SIGNATURE_DEF, SIGNATURE_DEF_MAP_URL,
};

/// The encoded `GetModelMetadataRequest` asking for the signature map.
pub fn metadata_request(model: &str, version: &str, signature: &str) -> Vec<u8> {
    pb::GetModelMetadataRequest {
        model_spec: Some(model_spec(model, version, signature)),
        metadata_field: vec![SIGNATURE_DEF.into()],
    }
    .encode_to_vec()
}

/// Dims of a signature tensor (`unknown_rank` cannot be sent).
fn dims_of(name: &str, info: &pb::TensorInfo) -> Result<Vec<i64>> {
    let shape = info.tensor_shape.clone().unwrap_or_default();
    if shape.unknown_rank {
        return Err(Error::generic(format!(
            "TF Serving signature input '{name}' has an unknown rank; inferperf needs its dims"
        )));
    }
    Ok(shape.dim.iter().map(|d| d.size).collect())
}

/// The signature's tensors in name order (protobuf maps carry no order).
fn tensors(
    map: &HashMap<String, pb::TensorInfo>,
    batch_given: bool,
    inputs: bool,
) -> Result<Vec<TensorMeta>> {
    let mut names: Vec<&String> = map.keys().collect();
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let info = &map[name];
        let datatype = from_tf(info.dtype).ok_or_else(|| {
            Error::generic(format!(
                "TF Serving signature tensor '{name}' has unsupported dtype {}",
                info.dtype
            ))
        })?;
        let shape = dims_of(name, info)?;
        // Like Triton's metadata, a batching model's shapes keep the batch dim (-1) first.
        if batch_given && inputs && shape.first() != Some(&-1) {
            return Err(Error::usage(format!(
                "-b: TF Serving input '{name}' has no variable first dim (shape {shape:?}), so \
                 it cannot be batched; leave out -b"
            )));
        }
        out.push(TensorMeta {
            name: name.clone(),
            datatype,
            shape,
        });
    }
    Ok(out)
}

/// The model as the input loaders see it, from an encoded `GetModelMetadataResponse`:
/// signature `signature`'s inputs and outputs; `max_batch_size` is `-b` when given, else 0.
pub fn model_from_metadata(
    bytes: &[u8],
    model: &str,
    signature: &str,
    batch: Option<u64>,
) -> Result<(ModelMetadata, ModelConfig)> {
    let resp = pb::GetModelMetadataResponse::decode(bytes).map_err(|e| {
        Error::generic(format!("GetModelMetadata: cannot decode the response: {e}"))
    })?;
    let any = resp.metadata.get(SIGNATURE_DEF).ok_or_else(|| {
        Error::generic(format!(
            "GetModelMetadata of '{model}': no '{SIGNATURE_DEF}' in the answer"
        ))
    })?;
    let map = pb::SignatureDefMap::decode(any.value.as_slice()).map_err(|e| {
        Error::generic(format!(
            "GetModelMetadata: cannot decode the signature map: {e}"
        ))
    })?;
    let sig = map.signature_def.get(signature).ok_or_else(|| {
        Error::usage(format!(
            "--model-signature-name {signature}: model '{model}' has no such signature"
        ))
    })?;
    let meta = ModelMetadata {
        name: model.into(),
        inputs: tensors(&sig.inputs, batch.is_some(), true)?,
        outputs: tensors(&sig.outputs, batch.is_some(), false)?,
        ..ModelMetadata::default()
    };
    let config = ModelConfig {
        name: model.into(),
        max_batch_size: batch.unwrap_or(0),
        ..ModelConfig::default()
    };
    Ok((meta, config))
}

/// One tensor as a `TensorProto`: raw little-endian `tensor_content`, or for strings one
/// `string_val` per element.
pub fn tensor_proto(t: &InputTensor) -> Result<pb::TensorProto> {
    let shape = pb::TensorShapeProto {
        dim: t
            .shape
            .iter()
            .map(|&size| pb::tensor_shape_proto::Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    };
    let mut proto = pb::TensorProto {
        dtype: to_tf(t.datatype) as i32,
        tensor_shape: Some(shape),
        ..Default::default()
    };
    if t.datatype == DataType::Bytes {
        let elems = split_bytes_elements(&t.data).ok_or_else(|| {
            Error::usage(format!("input '{}': broken BYTES element framing", t.name))
        })?;
        proto.string_val = elems.into_iter().map(<[u8]>::to_vec).collect();
    } else {
        proto.tensor_content = t.data.clone();
    }
    Ok(proto)
}

/// The length-prefixed `PredictRequest` of one step (compressed when asked).
pub fn encode_predict(
    spec: &pb::ModelSpec,
    inputs: &[InputTensor],
    compression: Compression,
) -> Result<Vec<u8>> {
    let mut map = HashMap::with_capacity(inputs.len());
    for t in inputs {
        map.insert(t.name.clone(), tensor_proto(t)?);
    }
    let payload = pb::PredictRequest {
        model_spec: Some(spec.clone()),
        inputs: map,
        output_filter: Vec::new(),
    }
    .encode_to_vec();
    let (payload, compressed) = match compression {
        Compression::None => (payload, false),
        c => (compress(c, &payload)?, true),
    };
    let mut out = Vec::with_capacity(payload.len() + 5);
    write_message(&mut out, &payload, compressed)
        .map_err(|e| Error::generic(format!("Predict request: {e}")))?;
    Ok(out)
}

/// The export's `response_outputs` of a `PredictResponse`: per output (name order) its
/// dtype, shape and data size in bytes; `{}` if the body is not one.
pub fn response_outputs_json(body: &[u8]) -> String {
    let Ok(resp) = pb::PredictResponse::decode(body) else {
        return "{}".into();
    };
    let mut names: Vec<&String> = resp.outputs.keys().collect();
    names.sort();
    let fields: Vec<String> = names
        .into_iter()
        .map(|name| {
            let t = &resp.outputs[name];
            let dims: Vec<i64> = t
                .tensor_shape
                .as_ref()
                .map_or_else(Vec::new, |s| s.dim.iter().map(|d| d.size).collect());
            let bytes = t.tensor_content.len() + t.string_val.iter().map(Vec::len).sum::<usize>();
            let dtype = pb::DataType::try_from(t.dtype).map_or("DT_INVALID", |d| d.as_str_name());
            format!(
                "{}:{{\"dtype\":\"{dtype}\",\"shape\":{dims:?},\"bytes\":{bytes}}}",
                serde_json::Value::String(name.clone())
            )
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(dtype: pb::DataType, dims: &[i64]) -> pb::TensorInfo {
        pb::TensorInfo {
            name: String::new(),
            dtype: dtype as i32,
            tensor_shape: Some(pb::TensorShapeProto {
                dim: dims
                    .iter()
                    .map(|&size| pb::tensor_shape_proto::Dim {
                        size,
                        name: String::new(),
                    })
                    .collect(),
                unknown_rank: false,
            }),
        }
    }

    fn metadata(inputs: &[(&str, pb::TensorInfo)]) -> Vec<u8> {
        let sig = pb::SignatureDef {
            inputs: inputs
                .iter()
                .map(|(n, i)| (n.to_string(), i.clone()))
                .collect(),
            ..Default::default()
        };
        let map = pb::SignatureDefMap {
            signature_def: [("serving_default".to_string(), sig)].into_iter().collect(),
        };
        pb::GetModelMetadataResponse {
            model_spec: None,
            metadata: [(
                SIGNATURE_DEF.to_string(),
                pb::Any {
                    type_url: SIGNATURE_DEF_MAP_URL.into(),
                    value: map.encode_to_vec(),
                },
            )]
            .into_iter()
            .collect(),
        }
        .encode_to_vec()
    }

    #[test]
    fn dtypes_round_trip() {
        use DataType::*;
        for dt in [
            Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, Bf16, Bytes,
        ] {
            assert_eq!(from_tf(to_tf(dt) as i32), Some(dt), "{dt:?}");
        }
        assert_eq!(from_tf(pb::DataType::DtComplex64 as i32), None);
        assert_eq!(from_tf(999), None);
    }

    #[test]
    fn batch_rule_strips_the_first_dim_only_with_b() {
        let bytes = metadata(&[
            ("b", info(pb::DataType::DtString, &[-1])),
            ("a", info(pb::DataType::DtFloat, &[-1, 4])),
        ]);
        let (meta, config) = model_from_metadata(&bytes, "m", "serving_default", None).unwrap();
        assert_eq!(config.max_batch_size, 0);
        assert_eq!(meta.inputs[0].name, "a", "name order");
        assert_eq!(meta.inputs[0].shape, vec![-1, 4]);
        assert_eq!(meta.inputs[1].datatype, DataType::Bytes);
        let (meta, config) = model_from_metadata(&bytes, "m", "serving_default", Some(4)).unwrap();
        assert_eq!(config.max_batch_size, 4);
        assert_eq!(meta.inputs[0].shape, vec![-1, 4]);
        assert_eq!(meta.inputs[1].shape, vec![-1]);
    }

    #[test]
    fn metadata_errors_name_the_flag_or_tensor() {
        let fixed = metadata(&[("x", info(pb::DataType::DtInt32, &[2, 3]))]);
        let err = model_from_metadata(&fixed, "m", "serving_default", Some(2)).unwrap_err();
        assert!(err.msg.starts_with("-b:"), "{}", err.msg);
        let err = model_from_metadata(&fixed, "m", "other", None).unwrap_err();
        assert!(
            err.msg.contains("--model-signature-name other"),
            "{}",
            err.msg
        );
        let odd = metadata(&[("x", info(pb::DataType::DtComplex64, &[1]))]);
        let err = model_from_metadata(&odd, "m", "serving_default", None).unwrap_err();
        assert!(err.msg.contains("'x'"), "{}", err.msg);
        assert!(model_from_metadata(b"\xff\xff", "m", "s", None).is_err());
    }

    #[test]
    fn predict_request_carries_spec_and_tensors() {
        let mut strings = Vec::new();
        crate::tensor::push_bytes_element(&mut strings, b"hi");
        let inputs = [
            InputTensor {
                name: "a".into(),
                datatype: DataType::I32,
                shape: vec![2, 1],
                data: vec![1, 0, 0, 0, 2, 0, 0, 0],
            },
            InputTensor {
                name: "s".into(),
                datatype: DataType::Bytes,
                shape: vec![1],
                data: strings,
            },
        ];
        let spec = model_spec("m", "7", "sig");
        let framed = encode_predict(&spec, &inputs, Compression::None).unwrap();
        assert_eq!(framed[0], 0);
        let req = pb::PredictRequest::decode(&framed[5..]).unwrap();
        assert_eq!(req.model_spec, Some(spec));
        let a = &req.inputs["a"];
        assert_eq!(a.dtype, pb::DataType::DtInt32 as i32);
        assert_eq!(a.tensor_content.len(), 8);
        assert_eq!(a.tensor_shape.as_ref().unwrap().dim.len(), 2);
        assert_eq!(req.inputs["s"].string_val, vec![b"hi".to_vec()]);
    }

    #[test]
    fn export_summarises_outputs() {
        let resp = pb::PredictResponse {
            model_spec: None,
            outputs: [(
                "y".to_string(),
                pb::TensorProto {
                    dtype: pb::DataType::DtFloat as i32,
                    tensor_content: vec![0; 8],
                    ..Default::default()
                },
            )]
            .into_iter()
            .collect(),
        };
        let json = response_outputs_json(&resp.encode_to_vec());
        assert_eq!(json, r#"{"y":{"dtype":"DT_FLOAT","shape":[],"bytes":8}}"#);
        assert_eq!(response_outputs_json(b"\xff"), "{}");
    }
}
