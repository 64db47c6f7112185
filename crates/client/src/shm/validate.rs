//! Validation data with `--shared-memory system`: the response names the outputs (name,
//! datatype, shape) but their bytes are in the request slot's output regions, which the
//! worker copied at completion (`engine::slots::OutputSlots::capture`). The kept body is
//! framed as `measure::record::framed_responses`: the response first, then one frame per
//! model output, in model output order. Runs off the hot path, on kept bodies.

use prost::Message;
use serde_json::Value;

use super::ShmApi;
use crate::engine::window::OutputCheck;
use crate::inputs::{ResponseFormat, TensorValue};
use crate::measure::record::framed_responses;
use crate::measure::RequestRecord;
use crate::protocol::grpc::pb::inference as pb;
use crate::service::triton_http::TensorMeta;
use crate::tensor::{element_count, DataType, InputTensor};

/// An output as the response describes it.
#[derive(Debug, Clone, PartialEq)]
struct OutputMeta {
    name: String,
    datatype: DataType,
    shape: Vec<i64>,
}

/// The validation-data check of a shared memory run (`None` without validation data).
/// `outputs`: the model's outputs, the order of the captured regions.
pub fn output_check(
    api: ShmApi,
    outputs: &[TensorMeta],
    expected: Vec<Option<Vec<TensorValue>>>,
) -> Option<Box<OutputCheck<'static>>> {
    if expected.iter().all(Option::is_none) {
        return None;
    }
    let outputs: Vec<String> = outputs.iter().map(|o| o.name.clone()).collect();
    let format = match api {
        ShmApi::Http => ResponseFormat::Http,
        ShmApi::Grpc => ResponseFormat::Grpc,
    };
    Some(Box::new(
        move |rec: &RequestRecord, body: &[u8]| match expected.get(rec.step as usize) {
            Some(Some(exp)) => check_captured(exp, &outputs, body, format),
            _ => Ok(()),
        },
    ))
}

/// Compares every expected output with the bytes captured from its region; the error names
/// the output, in the words of `inputs::check_outputs`.
pub fn check_captured(
    expected: &[TensorValue],
    region_names: &[String],
    body: &[u8],
    format: ResponseFormat,
) -> Result<(), String> {
    let mut frames = framed_responses(body).map(|(_, payload)| payload);
    let response = frames
        .next()
        .ok_or("the kept body holds no response (shared memory capture)")?;
    let regions: Vec<&[u8]> = frames.collect();
    let listed = response_outputs(response, format)?;
    for want in expected {
        let name = &want.name;
        let Some(meta) = listed.iter().find(|o| &o.name == name) else {
            return Err(format!("Output '{name}' is missing from the response"));
        };
        let region = region_names
            .iter()
            .position(|n| n == name)
            .and_then(|i| regions.get(i))
            .ok_or_else(|| format!("output '{name}' has no shared memory region"))?;
        let got = output_bytes(meta, region)?;
        if got.len() != want.data.len() {
            return Err(format!(
                "Output size doesn't match expected size (output '{name}': expected {} bytes, \
                 got {} bytes)",
                want.data.len(),
                got.len()
            ));
        }
        if got != want.data {
            return Err(format!(
                "Output doesn't match expected output (output '{name}')"
            ));
        }
    }
    Ok(())
}

/// A captured body as the profile export's `response_outputs` object: each output the
/// response lists, with the bytes of its region (`{}` when the capture cannot be read).
pub fn captured_outputs_json(
    region_names: &[String],
    body: &[u8],
    format: ResponseFormat,
) -> String {
    let mut frames = framed_responses(body).map(|(_, payload)| payload);
    let Some(response) = frames.next() else {
        return "{}".into();
    };
    let regions: Vec<&[u8]> = frames.collect();
    let Ok(listed) = response_outputs(response, format) else {
        return "{}".into();
    };
    let tensors: Vec<InputTensor> = listed
        .into_iter()
        .filter_map(|meta| {
            let i = region_names.iter().position(|n| *n == meta.name)?;
            let data = output_bytes(&meta, regions.get(i)?).ok()?.to_vec();
            Some(InputTensor {
                name: meta.name,
                datatype: meta.datatype,
                shape: meta.shape,
                data,
            })
        })
        .collect();
    crate::service::triton_http::inputs_json(&tensors)
}

/// The output's bytes at the start of its region: shape x element size, or for BYTES the
/// length-prefixed elements the shape counts.
fn output_bytes<'a>(meta: &OutputMeta, region: &'a [u8]) -> Result<&'a [u8], String> {
    let name = &meta.name;
    if meta.shape.iter().any(|&d| d < 0) {
        return Err(format!(
            "output '{name}': negative dimension in the response"
        ));
    }
    let len = match element_count(&meta.shape) {
        Some(count) if meta.datatype == DataType::Bytes => bytes_extent(region, count),
        Some(count) => count.checked_mul(meta.datatype.size()),
        None => None,
    };
    len.and_then(|n| region.get(..n)).ok_or_else(|| {
        format!(
            "output '{name}': the response's shape {:?} exceeds its {}-byte shared memory \
             region",
            meta.shape,
            region.len()
        )
    })
}

/// Bytes taken by `count` BYTES elements (4-byte LE length, then the bytes) at the start of
/// `buf`; `None` when they run past its end.
fn bytes_extent(buf: &[u8], count: usize) -> Option<usize> {
    let mut at = 0usize;
    for _ in 0..count {
        let head = buf.get(at..at.checked_add(4)?)?;
        let len = u32::from_le_bytes(head.try_into().ok()?) as usize;
        at = at.checked_add(4)?.checked_add(len)?;
        if at > buf.len() {
            return None;
        }
    }
    Some(at)
}

/// The outputs the response lists; a response that reports an error fails with it.
fn response_outputs(response: &[u8], format: ResponseFormat) -> Result<Vec<OutputMeta>, String> {
    match format {
        ResponseFormat::Http => http_outputs(response),
        ResponseFormat::Grpc | ResponseFormat::GrpcStream => {
            let resp = pb::ModelInferResponse::decode(response)
                .map_err(|e| format!("cannot decode the ModelInferResponse: {e}"))?;
            resp.outputs
                .into_iter()
                .map(|o| {
                    let datatype = DataType::parse(&o.datatype)
                        .map_err(|_| format!("output '{}' has no known datatype", o.name))?;
                    Ok(OutputMeta {
                        name: o.name,
                        datatype,
                        shape: o.shape,
                    })
                })
                .collect()
        }
    }
}

fn http_outputs(response: &[u8]) -> Result<Vec<OutputMeta>, String> {
    let (header, _) = crate::inputs::validation::http_response_header(response)?;
    let mut out = Vec::new();
    for (name, o) in crate::inputs::validation::listed_outputs(&header)? {
        let datatype = o
            .get("datatype")
            .and_then(Value::as_str)
            .and_then(|d| DataType::parse(d).ok())
            .ok_or_else(|| format!("output '{name}' has no known datatype"))?;
        let shape = o
            .get("shape")
            .and_then(Value::as_array)
            .map(|dims| dims.iter().map(Value::as_i64).collect::<Option<Vec<i64>>>())
            .and_then(|s| s)
            .ok_or_else(|| format!("output '{name}' has no integer shape"))?;
        out.push(OutputMeta {
            name: name.to_string(),
            datatype,
            shape,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::push_framed_response;

    fn expected(name: &str, datatype: DataType, data: &[u8]) -> TensorValue {
        TensorValue {
            name: name.into(),
            datatype,
            shape: vec![],
            data: data.to_vec(),
        }
    }

    fn captured(response: &[u8], regions: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        push_framed_response(&mut body, 0, response);
        for r in regions {
            push_framed_response(&mut body, 0, r);
        }
        body
    }

    fn names() -> Vec<String> {
        vec!["OUT0".into(), "OUT1".into()]
    }

    const HTTP: &[u8] = br#"{"model_name":"m","outputs":[{"name":"OUT1","datatype":"INT32","shape":[1,2]},{"name":"OUT0","datatype":"BYTES","shape":[2]}]}"#;

    /// Two BYTES elements "ab" and "c", then slack the region has beyond them.
    const OUT0_REGION: &[u8] = b"\x02\0\0\0ab\x01\0\0\0c\xff\xff";
    const OUT1_REGION: &[u8] = b"\x01\0\0\0\x02\0\0\0\x09\x09";

    #[test]
    fn http_capture_is_checked_per_output() {
        let body = captured(HTTP, &[OUT0_REGION, OUT1_REGION]);
        let out0 = expected("OUT0", DataType::Bytes, &OUT0_REGION[..11]);
        let out1 = expected("OUT1", DataType::I32, &OUT1_REGION[..8]);
        let f = ResponseFormat::Http;
        // (expected outputs, error the check gives or None)
        let wrong = expected("OUT1", DataType::I32, b"\x01\0\0\0\x03\0\0\0");
        let short = expected("OUT0", DataType::Bytes, b"\x02\0\0\0ab");
        let absent = expected("OUT9", DataType::I32, b"");
        let rows: Vec<(Vec<TensorValue>, Option<&str>)> = vec![
            (vec![out0.clone(), out1.clone()], None),
            (vec![out1.clone()], None),
            (
                vec![wrong],
                Some("Output doesn't match expected output (output 'OUT1')"),
            ),
            (vec![short], Some("expected 6 bytes, got 11 bytes")),
            (vec![absent], Some("Output 'OUT9' is missing")),
        ];
        for (exp, want) in rows {
            let got = check_captured(&exp, &names(), &body, f).err();
            match (want, got) {
                (None, None) => {}
                (Some(w), Some(g)) => assert!(g.contains(w), "{g}"),
                (w, g) => panic!("want {w:?}, got {g:?}"),
            }
        }
    }

    #[test]
    fn grpc_capture_is_checked() {
        let resp = pb::ModelInferResponse {
            outputs: vec![pb::model_infer_response::InferOutputTensor {
                name: "OUT1".into(),
                datatype: "INT32".into(),
                shape: vec![2],
                ..Default::default()
            }],
            raw_output_contents: vec![Vec::new()],
            ..Default::default()
        };
        let body = captured(&resp.encode_to_vec(), &[b"", OUT1_REGION]);
        let good = expected("OUT1", DataType::I32, &OUT1_REGION[..8]);
        assert_eq!(
            check_captured(&[good], &names(), &body, ResponseFormat::Grpc),
            Ok(())
        );
        let bad = expected("OUT1", DataType::I32, &[0; 8]);
        let err = check_captured(&[bad], &names(), &body, ResponseFormat::Grpc).unwrap_err();
        assert!(err.contains("output 'OUT1'"), "{err}");
    }

    #[test]
    fn broken_captures_are_errors_not_panics() {
        let out1 = expected("OUT1", DataType::I32, &OUT1_REGION[..8]);
        let f = ResponseFormat::Http;
        let big = br#"{"outputs":[{"name":"OUT1","datatype":"INT32","shape":[1,9]}]}"#;
        let neg = br#"{"outputs":[{"name":"OUT1","datatype":"INT32","shape":[-1]}]}"#;
        let bytes = br#"{"outputs":[{"name":"OUT0","datatype":"BYTES","shape":[3]}]}"#;
        let error = br#"{"error":"boom"}"#;
        let rows: Vec<(Vec<u8>, TensorValue, &str)> = vec![
            (Vec::new(), out1.clone(), "holds no response"),
            (
                captured(HTTP, &[OUT0_REGION]),
                out1.clone(),
                "no shared memory region",
            ),
            (captured(big, &[b"", OUT1_REGION]), out1.clone(), "exceeds"),
            (captured(neg, &[b"", OUT1_REGION]), out1.clone(), "negative"),
            (
                captured(bytes, &[OUT0_REGION]),
                expected("OUT0", DataType::Bytes, b""),
                "exceeds",
            ),
            (captured(error, &[]), out1.clone(), "boom"),
            (captured(b"not json", &[]), out1, "cannot parse"),
        ];
        for (body, exp, want) in rows {
            let err = check_captured(&[exp], &names(), &body, f).unwrap_err();
            assert!(err.contains(want), "{want}: {err}");
        }
    }

    #[test]
    fn bytes_extent_walks_length_prefixes() {
        assert_eq!(bytes_extent(OUT0_REGION, 0), Some(0));
        assert_eq!(bytes_extent(OUT0_REGION, 2), Some(11));
        assert_eq!(bytes_extent(OUT0_REGION, 3), None);
        assert_eq!(bytes_extent(b"\xff\xff\xff\xff", 1), None);
    }
}
