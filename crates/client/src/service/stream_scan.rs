//! What the load engine needs from one `ModelStreamInferResponse`, read straight from the
//! protobuf bytes without decoding (no allocation per response): the error message, whether
//! the response is flagged `triton_final_response`, and whether it carries outputs.
//!
//! Field numbers (grpc_service.proto): ModelStreamInferResponse{error_message=1,
//! infer_response=2}; ModelInferResponse{parameters=4 (map entries {key=1, value=2}),
//! outputs=5, raw_output_contents=6}; InferParameter{bool_param=1}.

use std::fmt;

use super::pb_wire::{Fields as Walker, Val};

/// The parameter Triton sets on the last response of a request.
const FINAL_RESPONSE: &[u8] = b"triton_final_response";

/// One stream response as the engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamResponse<'a> {
    /// Non-empty `error_message`: the request failed.
    pub error: Option<&'a [u8]>,
    /// `triton_final_response` when present.
    pub final_flag: Option<bool>,
    /// The response has output tensors (a "null" response has none).
    pub has_outputs: bool,
}

/// The bytes are not a well-formed protobuf message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanError {
    field: u64,
    what: &'static str,
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed ModelStreamInferResponse: field {} {}",
            self.field, self.what
        )
    }
}

/// The fields of one message as (number, value), through the shared wire walker; a group
/// (wire type 3) is refused, as before any field of it is read.
struct Fields<'a>(Walker<'a>);

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Fields(Walker::new(buf, 0))
    }

    /// The next (field number, value), or `None` at the end.
    fn next_field(&mut self) -> Result<Option<(u64, Val<'a>)>, ScanError> {
        match self.0.next() {
            Ok(Some((field, Val::Group, _))) => Err(ScanError {
                field,
                what: "is a group (unsupported wire type)",
            }),
            Ok(Some((number, value, _))) => Ok(Some((number, value))),
            Ok(None) => Ok(None),
            Err(e) => Err(ScanError {
                field: e.field,
                what: e.what,
            }),
        }
    }
}

/// Reads one `ModelStreamInferResponse`.
pub fn scan_stream_response(msg: &[u8]) -> Result<StreamResponse<'_>, ScanError> {
    let mut out = StreamResponse::default();
    let mut fields = Fields::new(msg);
    while let Some((number, value)) = fields.next_field()? {
        match (number, value) {
            // A repeated field: the last one wins, as in any protobuf decoder.
            (1, Val::Bytes(text)) => out.error = (!text.is_empty()).then_some(text),
            (2, Val::Bytes(inner)) => scan_infer_response(inner, &mut out)?,
            _ => {}
        }
    }
    Ok(out)
}

fn scan_infer_response<'a>(msg: &'a [u8], out: &mut StreamResponse<'a>) -> Result<(), ScanError> {
    let mut fields = Fields::new(msg);
    while let Some((number, value)) = fields.next_field()? {
        match (number, value) {
            (4, Val::Bytes(entry)) => {
                if let Some(flag) = final_flag_of(entry)? {
                    out.final_flag = Some(flag);
                }
            }
            (5, Val::Bytes(_)) => out.has_outputs = true,
            _ => {}
        }
    }
    Ok(())
}

/// A `parameters` map entry: `Some(bool)` when it is `triton_final_response`.
fn final_flag_of(entry: &[u8]) -> Result<Option<bool>, ScanError> {
    let (mut key, mut flag) = (None, None);
    let mut fields = Fields::new(entry);
    while let Some((number, value)) = fields.next_field()? {
        match (number, value) {
            (1, Val::Bytes(k)) => key = Some(k),
            (2, Val::Bytes(param)) => {
                let mut inner = Fields::new(param);
                while let Some((n, v)) = inner.next_field()? {
                    if let (1, Val::Varint(b)) = (n, v) {
                        flag = Some(b != 0);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(if key == Some(FINAL_RESPONSE) {
        Some(flag.unwrap_or(false))
    } else {
        None
    })
}

/// Fuzz entry point: never panics; agrees with prost where prost accepts the bytes.
pub fn fuzz_stream_scan(data: &[u8]) {
    use crate::protocol::grpc::pb::inference as pb;
    use prost::Message;
    let scanned = scan_stream_response(data);
    if let Ok(full) = pb::ModelStreamInferResponse::decode(data) {
        let Ok(s) = scanned else {
            // prost skips groups (wire types 3/4) that the scanner refuses; nothing to compare
            // then.
            return;
        };
        let resp = full.infer_response.unwrap_or_default();
        assert_eq!(s.has_outputs, !resp.outputs.is_empty());
        assert_eq!(s.error.is_some(), !full.error_message.is_empty());
        if let Some(p) = resp.parameters.get("triton_final_response") {
            use pb::infer_parameter::ParameterChoice as P;
            if let Some(P::BoolParam(b)) = p.parameter_choice {
                assert_eq!(s.final_flag, Some(b));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::grpc::pb::inference as pb;
    use prost::Message;

    fn response(final_flag: Option<bool>, outputs: usize, error: &str) -> Vec<u8> {
        let mut parameters = std::collections::HashMap::new();
        parameters.insert(
            "other".to_string(),
            pb::InferParameter {
                parameter_choice: Some(pb::infer_parameter::ParameterChoice::BoolParam(true)),
            },
        );
        if let Some(f) = final_flag {
            parameters.insert(
                "triton_final_response".to_string(),
                pb::InferParameter {
                    parameter_choice: Some(pb::infer_parameter::ParameterChoice::BoolParam(f)),
                },
            );
        }
        pb::ModelStreamInferResponse {
            error_message: error.into(),
            infer_response: Some(pb::ModelInferResponse {
                model_name: "m".into(),
                id: "7".into(),
                parameters,
                outputs: (0..outputs)
                    .map(|i| pb::model_infer_response::InferOutputTensor {
                        name: format!("OUT{i}"),
                        datatype: "INT32".into(),
                        shape: vec![1],
                        ..Default::default()
                    })
                    .collect(),
                raw_output_contents: vec![vec![1, 0, 0, 0]; outputs],
                ..Default::default()
            }),
        }
        .encode_to_vec()
    }

    #[test]
    fn reads_flag_outputs_and_error() {
        let cases = [
            (Some(true), 0, "", Some(true), false, None),
            (Some(false), 2, "", Some(false), true, None),
            (None, 1, "", None, true, None),
            (None, 0, "boom", None, false, Some(&b"boom"[..])),
        ];
        for (flag, outputs, error, want_flag, want_outputs, want_error) in cases {
            let bytes = response(flag, outputs, error);
            let s = scan_stream_response(&bytes).unwrap();
            assert_eq!(s.final_flag, want_flag, "{flag:?} {outputs}");
            assert_eq!(s.has_outputs, want_outputs, "{flag:?} {outputs}");
            assert_eq!(s.error, want_error, "{flag:?} {outputs}");
            fuzz_stream_scan(&bytes);
        }
        assert_eq!(
            scan_stream_response(&[]).unwrap(),
            StreamResponse::default()
        );
    }

    #[test]
    fn malformed_bytes_are_errors_not_panics() {
        let good = response(Some(true), 1, "");
        for cut in 1..good.len() {
            let _ = scan_stream_response(&good[..cut]);
            fuzz_stream_scan(&good[..cut]);
        }
        for bad in [
            &[0x12, 0x05, 0x01][..],
            &[0x0b],
            &[0xff; 11],
            &[0x12, 0xff, 0xff, 0xff, 0xff, 0x7f],
        ] {
            assert!(scan_stream_response(bad).is_err(), "{bad:?}");
            fuzz_stream_scan(bad);
        }
    }
}
