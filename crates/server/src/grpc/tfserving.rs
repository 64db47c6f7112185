//! Two non-Triton services on the reference server's gRPC port, for the `tfserving` and
//! `dynamic_grpc` service kinds and their tests:
//!
//! - `tensorflow.serving.PredictionService`: every reference model is also a TF model with
//!   one signature, `serving_default`, whose inputs are the model's inputs (first dim -1 when
//!   the model batches). `Predict` checks the inputs against it and answers with the inputs
//!   as outputs, so a client sees what the server received.
//! - `/inferperf.test.Echo/Echo`: takes any number of opaque request messages and answers
//!   with one message, their concatenation (so its length proves every message arrived).

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::HeaderMap;
use prost::Message;

use super::wire::{
    answer_unary, code, framing_status, send_status, start_response, Encoding, Status,
};
use crate::models::{find_model, ModelDef, MODELS, MODEL_VERSION};
use inferperf_wire::protocol::grpc::message::{write_message, MessageReader};
use inferperf_wire::tensor::{element_count, DataType};
use inferperf_wire::tfserving::{
    model_spec, pb, to_tf, SERVICE_PATH, SIGNATURE_DEF, SIGNATURE_DEF_MAP_URL,
};

/// The echo method's call path.
pub const ECHO_PATH: &str = "/inferperf.test.Echo/Echo";
/// The one signature every model has.
const SIGNATURE: &str = "serving_default";

/// Request messages one call may carry here, where they are all kept until the call ends.
const MAX_MESSAGES: usize = 4096;

/// True for the call paths this module serves.
pub fn owns(path: &str) -> bool {
    path.starts_with(SERVICE_PATH) || path == ECHO_PATH
}

/// Answers one call on a path [`owns`] accepts.
pub async fn handle(
    path: &str,
    headers: &HeaderMap,
    body: RecvStream,
    mut respond: SendResponse<Bytes>,
    max: usize,
    limit: Duration,
) {
    // The whole request within `--request-read-timeout` from the call's start.
    let messages = tokio::time::timeout(limit, read_messages(headers, body, max))
        .await
        .unwrap_or_else(|_| Err(Status::late(limit)));
    if path == ECHO_PATH {
        return echo(messages, &mut respond);
    }
    let method = path.strip_prefix(SERVICE_PATH).unwrap_or("");
    let r = &mut respond;
    match method {
        "GetModelMetadata" => {
            let result = messages.and_then(|m| single(&m)).and_then(|q| metadata(&q));
            answer_unary(r, result)
        }
        "Predict" => {
            let result = messages.and_then(|m| single(&m)).and_then(|q| predict(&q));
            answer_unary(r, result)
        }
        _ => answer_unary(
            r,
            Err::<pb::PredictResponse, _>(Status::new(
                code::UNIMPLEMENTED,
                format!("unknown gRPC method '{path}'"),
            )),
        ),
    }
}

/// Every request message of the call, decompressed per the call's `grpc-encoding`: at most
/// [`MAX_MESSAGES`] of them, of at most `max` bytes together (RESOURCE_EXHAUSTED otherwise).
async fn read_messages(
    headers: &HeaderMap,
    mut body: RecvStream,
    max: usize,
) -> Result<Vec<Vec<u8>>, Status> {
    let encoding = Encoding::from_headers(headers)?;
    let mut reader = MessageReader::with_limit(max);
    let framing = framing_status;
    let mut out = Vec::new();
    let mut total = 0usize;
    loop {
        while let Some(msg) = reader.next_message().map_err(framing)? {
            if out.len() == MAX_MESSAGES {
                return Err(Status::new(
                    code::RESOURCE_EXHAUSTED,
                    format!("the call carried more than {MAX_MESSAGES} request messages"),
                ));
            }
            let left = max - total;
            // Inflating past what is left of the call's budget is refused like a long message.
            let bytes = encoding
                .decode(msg.compressed, msg.data, left)
                .map_err(|e| match e.code {
                    code::RESOURCE_EXHAUSTED => {
                        Status::too_large("the sum of the call's request messages", max)
                    }
                    _ => e,
                })?;
            total += bytes.len();
            out.push(bytes);
        }
        match body.data().await {
            Some(Ok(chunk)) => {
                let _ = body.flow_control().release_capacity(chunk.len());
                reader.push(&chunk).map_err(framing)?;
            }
            Some(Err(e)) => return Err(Status::new(code::INTERNAL, format!("request: {e}"))),
            None => {
                reader.finish().map_err(framing)?;
                return Ok(out);
            }
        }
    }
}

/// Exactly one message, decoded as `T`.
fn single<T: Message + Default>(messages: &[Vec<u8>]) -> Result<T, Status> {
    match messages {
        [one] => T::decode(one.as_slice())
            .map_err(|e| Status::invalid(format!("cannot decode the request message: {e}"))),
        _ => Err(Status::invalid(format!(
            "a unary call carried {} request messages",
            messages.len()
        ))),
    }
}

fn echo(messages: Result<Vec<Vec<u8>>, Status>, respond: &mut SendResponse<Bytes>) {
    let Some(mut send) = start_response(respond) else {
        return;
    };
    let joined = match messages {
        Ok(m) => m.concat(),
        Err(status) => return send_status(&mut send, &status),
    };
    let mut framed = Vec::with_capacity(joined.len() + 5);
    if write_message(&mut framed, &joined, false).is_err() {
        return send_status(&mut send, &Status::invalid("echo message too large"));
    }
    if send.send_data(Bytes::from(framed), false).is_ok() {
        send_status(&mut send, &Status::new(code::OK, ""));
    }
}

/// The model a spec names (any known model; version empty or the reference version). The
/// signature is checked for `Predict` only: metadata lists every signature, as TF Serving's.
fn lookup(
    spec: Option<&pb::ModelSpec>,
    check_signature: bool,
) -> Result<&'static ModelDef, Status> {
    let spec = spec.ok_or_else(|| Status::invalid("missing model_spec"))?;
    let model = find_model(&spec.name)
        .map(|i| &MODELS[i])
        .ok_or_else(|| Status::not_found(format!("Servable not found: '{}'", spec.name)))?;
    if let Some(pb::model_spec::VersionChoice::VersionLabel(v)) = &spec.version_choice {
        if v != MODEL_VERSION {
            return Err(Status::not_found(format!(
                "no version '{v}' of '{}'",
                spec.name
            )));
        }
    }
    if check_signature && !spec.signature_name.is_empty() && spec.signature_name != SIGNATURE {
        return Err(Status::invalid(format!(
            "Serving signature key \"{}\" not found.",
            spec.signature_name
        )));
    }
    Ok(model)
}

fn signature_of(model: &ModelDef) -> pb::SignatureDef {
    let tensors = |specs: &[crate::models::TensorSpec]| -> HashMap<_, _> {
        specs
            .iter()
            .map(|s| {
                let dims = model.wire_dims(s);
                let info = pb::TensorInfo {
                    name: format!("{}:0", s.name),
                    dtype: to_tf(s.datatype) as i32,
                    tensor_shape: Some(shape_of(&dims)),
                };
                (s.name.to_string(), info)
            })
            .collect()
    };
    pb::SignatureDef {
        inputs: tensors(model.inputs),
        outputs: tensors(model.outputs),
        method_name: "tensorflow/serving/predict".into(),
    }
}

fn shape_of(dims: &[i64]) -> pb::TensorShapeProto {
    pb::TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| pb::tensor_shape_proto::Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    }
}

fn metadata(req: &pb::GetModelMetadataRequest) -> Result<pb::GetModelMetadataResponse, Status> {
    let model = lookup(req.model_spec.as_ref(), false)?;
    if req.metadata_field.iter().any(|f| f != SIGNATURE_DEF) {
        return Err(Status::invalid(
            "only the 'signature_def' metadata field is served",
        ));
    }
    let map = pb::SignatureDefMap {
        signature_def: [(SIGNATURE.to_string(), signature_of(model))]
            .into_iter()
            .collect(),
    };
    let any = pb::Any {
        type_url: SIGNATURE_DEF_MAP_URL.into(),
        value: map.encode_to_vec(),
    };
    Ok(pb::GetModelMetadataResponse {
        model_spec: Some(model_spec(model.name, MODEL_VERSION, SIGNATURE)),
        metadata: [(SIGNATURE_DEF.to_string(), any)].into_iter().collect(),
    })
}

/// Checks every signature input is present, typed and sized right; echoes them as outputs.
fn predict(req: &pb::PredictRequest) -> Result<pb::PredictResponse, Status> {
    let model = lookup(req.model_spec.as_ref(), true)?;
    for spec in model.inputs {
        let t = req
            .inputs
            .get(spec.name)
            .ok_or_else(|| Status::invalid(format!("missing input '{}'", spec.name)))?;
        check_tensor(model, spec, t)?;
    }
    if let Some(extra) = req
        .inputs
        .keys()
        .find(|k| !model.inputs.iter().any(|s| s.name == k.as_str()))
    {
        return Err(Status::invalid(format!("unknown input '{extra}'")));
    }
    Ok(pb::PredictResponse {
        model_spec: Some(model_spec(model.name, MODEL_VERSION, SIGNATURE)),
        outputs: req.inputs.clone(),
    })
}

fn check_tensor(
    model: &ModelDef,
    spec: &crate::models::TensorSpec,
    t: &pb::TensorProto,
) -> Result<(), Status> {
    let name = spec.name;
    if t.dtype != to_tf(spec.datatype) as i32 {
        return Err(Status::invalid(format!(
            "input '{name}': wrong dtype {}",
            t.dtype
        )));
    }
    let dims: Vec<i64> = t
        .tensor_shape
        .as_ref()
        .map_or_else(Vec::new, |s| s.dim.iter().map(|d| d.size).collect());
    let want = model.wire_dims(spec);
    let fits = dims.len() == want.len()
        && dims
            .iter()
            .zip(&want)
            .all(|(&d, &w)| d >= 0 && (w == -1 || d == w));
    if !fits {
        return Err(Status::invalid(format!(
            "input '{name}': shape {dims:?} does not match the signature {want:?}"
        )));
    }
    let elements = element_count(&dims);
    let got = if spec.datatype == DataType::Bytes {
        t.string_val.len()
    } else {
        t.tensor_content.len() / spec.datatype.size().max(1)
    };
    let exact = spec.datatype == DataType::Bytes
        || t.tensor_content.len() % spec.datatype.size().max(1) == 0;
    if Some(got) != elements || !exact {
        return Err(Status::invalid(format!(
            "input '{name}': {got} elements for shape {dims:?}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(model: &str, inputs: Vec<(&str, pb::TensorProto)>) -> pb::PredictRequest {
        pb::PredictRequest {
            model_spec: Some(model_spec(model, "", "")),
            inputs: inputs
                .into_iter()
                .map(|(n, t)| (n.to_string(), t))
                .collect(),
            output_filter: Vec::new(),
        }
    }

    fn int32(dims: &[i64], elements: usize) -> pb::TensorProto {
        pb::TensorProto {
            dtype: pb::DataType::DtInt32 as i32,
            tensor_shape: Some(shape_of(dims)),
            tensor_content: vec![0; elements * 4],
            ..Default::default()
        }
    }

    #[test]
    fn metadata_lists_the_signature_with_a_batch_dim() {
        let req = pb::GetModelMetadataRequest {
            model_spec: Some(model_spec("simple", "", "")),
            metadata_field: vec![SIGNATURE_DEF.into()],
        };
        let resp = metadata(&req).unwrap();
        let any = &resp.metadata[SIGNATURE_DEF];
        let map = pb::SignatureDefMap::decode(any.value.as_slice()).unwrap();
        let input = &map.signature_def[SIGNATURE].inputs["INPUT0"];
        let dims: Vec<i64> = input
            .tensor_shape
            .as_ref()
            .unwrap()
            .dim
            .iter()
            .map(|d| d.size)
            .collect();
        assert_eq!(dims, vec![-1, 16]);
        let bad = pb::GetModelMetadataRequest {
            model_spec: Some(model_spec("nope", "", "")),
            metadata_field: vec![],
        };
        assert_eq!(metadata(&bad).unwrap_err().code, code::NOT_FOUND);
    }

    #[test]
    fn predict_checks_inputs() {
        let ok = request(
            "simple",
            vec![
                ("INPUT0", int32(&[2, 16], 32)),
                ("INPUT1", int32(&[2, 16], 32)),
            ],
        );
        let resp = predict(&ok).unwrap();
        assert_eq!(resp.outputs.len(), 2);
        let rows: Vec<(pb::PredictRequest, &str)> = vec![
            (
                request("simple", vec![("INPUT0", int32(&[2, 16], 32))]),
                "missing input 'INPUT1'",
            ),
            (
                request(
                    "simple",
                    vec![
                        ("INPUT0", int32(&[16], 16)),
                        ("INPUT1", int32(&[1, 16], 16)),
                    ],
                ),
                "does not match",
            ),
            (
                request(
                    "simple",
                    vec![
                        ("INPUT0", int32(&[1, 16], 15)),
                        ("INPUT1", int32(&[1, 16], 16)),
                    ],
                ),
                "15 elements",
            ),
            (
                request(
                    "simple",
                    vec![
                        ("INPUT0", int32(&[1, 16], 16)),
                        ("INPUT1", int32(&[1, 16], 16)),
                        ("X", int32(&[1], 1)),
                    ],
                ),
                "unknown input 'X'",
            ),
        ];
        for (req, want) in rows {
            let err = predict(&req).unwrap_err();
            assert!(err.message.contains(want), "{} vs {want}", err.message);
        }
        let mut wrong_sig = ok.clone();
        wrong_sig.model_spec = Some(model_spec("simple", "", "other"));
        assert!(predict(&wrong_sig)
            .unwrap_err()
            .message
            .contains("\"other\""));
    }

    #[test]
    fn single_needs_one_message() {
        assert!(single::<pb::PredictRequest>(&[]).is_err());
        assert!(single::<pb::PredictRequest>(&[vec![], vec![]]).is_err());
        assert!(single::<pb::PredictRequest>(&[vec![]]).is_ok());
    }
}
