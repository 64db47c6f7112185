//! Output validation: the outputs of a response compared byte for byte
//! with the `validation_data` of the steps the request was built from. Meant to run off the
//! hot path, on response bodies the engine kept.

use prost::Message;
use serde_json::Value;

use super::value::serialize_array;
use super::TensorValue;
use crate::protocol::grpc::pb::inference as pb;
use crate::tensor::DataType;

/// How a response body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFormat {
    /// An HTTP infer response body: the JSON header, then binary outputs in order.
    Http,
    /// A gRPC `ModelInferResponse` message (without the 5-byte gRPC prefix).
    Grpc,
    /// A gRPC `ModelStreamInferResponse` message (without the 5-byte gRPC prefix).
    GrpcStream,
}

/// Checks every expected output against the response; the error names the output.
pub fn check_outputs(
    expected: &[TensorValue],
    body: &[u8],
    format: ResponseFormat,
) -> Result<(), String> {
    let outputs = match format {
        ResponseFormat::Http => http_outputs(body)?,
        ResponseFormat::Grpc => {
            let resp = pb::ModelInferResponse::decode(body)
                .map_err(|e| format!("cannot decode the ModelInferResponse: {e}"))?;
            grpc_outputs(resp)?
        }
        ResponseFormat::GrpcStream => {
            let resp = pb::ModelStreamInferResponse::decode(body)
                .map_err(|e| format!("cannot decode the ModelStreamInferResponse: {e}"))?;
            if !resp.error_message.is_empty() {
                return Err(resp.error_message);
            }
            let inner = resp
                .infer_response
                .ok_or("the stream response carries no infer_response")?;
            grpc_outputs(inner)?
        }
    };
    for want in expected {
        let name = &want.name;
        let Some((_, got)) = outputs.iter().find(|(n, _)| n == name) else {
            return Err(format!("Output '{name}' is missing from the response"));
        };
        if got.len() != want.data.len() {
            return Err(format!(
                "Output size doesn't match expected size (output '{name}': expected {} bytes, \
                 got {} bytes)",
                want.data.len(),
                got.len()
            ));
        }
        if *got != want.data {
            return Err(format!(
                "Output doesn't match expected output (output '{name}')"
            ));
        }
    }
    Ok(())
}

/// An HTTP response body's JSON header and where its binary part starts; a header that
/// reports an error fails with it.
pub(crate) fn http_response_header(body: &[u8]) -> Result<(Value, usize), String> {
    let mut values = serde_json::Deserializer::from_slice(body).into_iter::<Value>();
    let header = match values.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(format!("cannot parse the response JSON: {e}")),
        None => return Err("empty response body".into()),
    };
    if let Some(error) = header.get("error") {
        return Err(error
            .as_str()
            .map_or_else(|| error.to_string(), str::to_owned));
    }
    Ok((header, values.byte_offset()))
}

/// The header's `outputs` entries, each with its name.
pub(crate) fn listed_outputs(header: &Value) -> Result<Vec<(&str, &Value)>, String> {
    let listed = header.get("outputs").and_then(Value::as_array);
    listed
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let name = o.get("name").and_then(Value::as_str);
            name.map(|n| (n, o))
                .ok_or_else(|| format!("outputs[{i}] has no name"))
        })
        .collect()
}

/// (name, wire bytes) of each output of an HTTP response body.
fn http_outputs(body: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let (header, binary_at) = http_response_header(body)?;
    let mut binary = &body[binary_at..];
    let mut out = Vec::new();
    for (name, output) in listed_outputs(&header)? {
        let binary_size = output
            .get("parameters")
            .and_then(|p| p.get("binary_data_size"));
        let data = match binary_size {
            Some(size) => {
                let size = size.as_u64().and_then(|s| usize::try_from(s).ok());
                let Some(size) = size.filter(|&s| s <= binary.len()) else {
                    return Err(format!(
                        "output '{name}': binary_data_size exceeds the bytes received"
                    ));
                };
                let (data, rest) = binary.split_at(size);
                binary = rest;
                data.to_vec()
            }
            None => {
                let datatype = output
                    .get("datatype")
                    .and_then(Value::as_str)
                    .and_then(|d| DataType::parse(d).ok())
                    .ok_or_else(|| format!("output '{name}' has no known datatype"))?;
                let items = output.get("data").and_then(Value::as_array);
                serialize_array(items.map(Vec::as_slice).unwrap_or_default(), datatype, name)?
            }
        };
        out.push((name.to_string(), data));
    }
    Ok(out)
}

/// (name, raw bytes) of each output of a `ModelInferResponse`.
fn grpc_outputs(resp: pb::ModelInferResponse) -> Result<Vec<(String, Vec<u8>)>, String> {
    if resp.raw_output_contents.len() < resp.outputs.len() {
        return Err(format!(
            "the response lists {} outputs but carries {} raw_output_contents",
            resp.outputs.len(),
            resp.raw_output_contents.len()
        ));
    }
    Ok(resp
        .outputs
        .into_iter()
        .zip(resp.raw_output_contents)
        .map(|(o, data)| (o.name, data))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(name: &str, datatype: DataType, data: &[u8]) -> TensorValue {
        TensorValue {
            name: name.into(),
            datatype,
            shape: vec![data.len() as i64],
            data: data.to_vec(),
        }
    }

    fn http_binary(outputs: &[(&str, &[u8])]) -> Vec<u8> {
        let listed: Vec<String> = outputs
            .iter()
            .map(|(n, d)| {
                format!(
                    "{{\"name\":\"{n}\",\"datatype\":\"UINT8\",\"shape\":[{}],\
                     \"parameters\":{{\"binary_data_size\":{}}}}}",
                    d.len(),
                    d.len()
                )
            })
            .collect();
        let mut body = format!(
            "{{\"model_name\":\"m\",\"outputs\":[{}]}}",
            listed.join(",")
        )
        .into_bytes();
        outputs.iter().for_each(|(_, d)| body.extend_from_slice(d));
        body
    }

    #[test]
    fn http_binary_outputs() {
        let body = http_binary(&[("A", &[1, 2]), ("B", &[3])]);
        let ok = [
            expected("B", DataType::U8, &[3]),
            expected("A", DataType::U8, &[1, 2]),
        ];
        assert_eq!(check_outputs(&ok, &body, ResponseFormat::Http), Ok(()));
        let rows: &[(TensorValue, &str)] = &[
            (expected("A", DataType::U8, &[1, 9]), "Output doesn't match expected output (output 'A')"),
            (expected("A", DataType::U8, &[1]), "Output size doesn't match expected size (output 'A': expected 1 bytes, got 2 bytes)"),
            (expected("C", DataType::U8, &[1]), "Output 'C' is missing"),
        ];
        for (want, needle) in rows {
            let err =
                check_outputs(std::slice::from_ref(want), &body, ResponseFormat::Http).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn http_json_outputs_and_errors() {
        let body = br#"{"outputs":[{"name":"F","datatype":"FP32","shape":[2],"data":[1.5,-2]},
            {"name":"S","datatype":"BYTES","shape":[1],"data":["hi"]}]}"#;
        let f = [1.5f32.to_le_bytes(), (-2f32).to_le_bytes()].concat();
        let want = [
            expected("F", DataType::F32, &f),
            expected("S", DataType::Bytes, &[2, 0, 0, 0, b'h', b'i']),
        ];
        assert_eq!(check_outputs(&want, body, ResponseFormat::Http), Ok(()));
        let err = check_outputs(&want, br#"{"error":"boom"}"#, ResponseFormat::Http);
        assert_eq!(err, Err("boom".to_string()));
        for bad in [
            &b""[..],
            b"{",
            b"[1]x",
            br#"{"outputs":[{"name":"A","parameters":{"binary_data_size":9}}]}"#,
        ] {
            assert!(check_outputs(&want, bad, ResponseFormat::Http).is_err());
        }
    }

    #[test]
    fn grpc_outputs_unary_and_stream() {
        let resp = pb::ModelInferResponse {
            outputs: vec![pb::model_infer_response::InferOutputTensor {
                name: "A".into(),
                datatype: "UINT8".into(),
                shape: vec![2],
                ..Default::default()
            }],
            raw_output_contents: vec![vec![4, 5]],
            ..Default::default()
        };
        let unary = resp.encode_to_vec();
        let good = [expected("A", DataType::U8, &[4, 5])];
        let bad = [expected("A", DataType::U8, &[4, 6])];
        assert_eq!(check_outputs(&good, &unary, ResponseFormat::Grpc), Ok(()));
        assert!(check_outputs(&bad, &unary, ResponseFormat::Grpc)
            .unwrap_err()
            .contains("Output doesn't match expected output"));
        let stream = pb::ModelStreamInferResponse {
            error_message: String::new(),
            infer_response: Some(resp),
        }
        .encode_to_vec();
        assert_eq!(
            check_outputs(&good, &stream, ResponseFormat::GrpcStream),
            Ok(())
        );
        let failed = pb::ModelStreamInferResponse {
            error_message: "nope".into(),
            infer_response: None,
        }
        .encode_to_vec();
        assert_eq!(
            check_outputs(&good, &failed, ResponseFormat::GrpcStream),
            Err("nope".into())
        );
        assert!(check_outputs(&good, &[0xff, 0xff], ResponseFormat::Grpc).is_err());
    }
}
