//! Triton / KServe v2 over HTTP/1.1: URL paths, infer request bytes (built
//! once per input step, no request id, so they never change), output decoding for the
//! profile export, error bodies, and the setup responses (metadata, config).

use crate::config::TensorFormat;
use crate::error::Result;
use crate::protocol::http1::{check_header, write_request};
use crate::tensor::InputTensor;

use super::triton_http_values::{check_input, push_json_string, push_request_data};

pub use super::triton_http_setup::{
    parse_model_config, parse_model_metadata, parse_server_metadata, ConfigTensor, EnsembleStep,
    ModelConfig, ModelMetadata, ServerMetadata, TensorMeta,
};
pub use super::triton_http_values::{decode_outputs_json, export_inputs_json, inputs_json};

/// `GET` → server metadata (name, version, extensions).
pub const SERVER_METADATA_PATH: &str = "/v2";
pub const SERVER_READY_PATH: &str = "/v2/health/ready";
pub const SERVER_LIVE_PATH: &str = "/v2/health/live";
/// `GET` → statistics of every model (used for ensembles).
pub const ALL_MODEL_STATS_PATH: &str = "/v2/models/stats";

/// `/v2/models/{model}[/versions/{version}]`; also the model metadata path. Characters that
/// are not URL-safe are percent-encoded.
pub fn model_path(model: &str, version: &str) -> String {
    let mut path = String::from("/v2/models/");
    push_escaped(&mut path, model);
    if !version.is_empty() {
        path.push_str("/versions/");
        push_escaped(&mut path, version);
    }
    path
}

pub fn metadata_path(model: &str, version: &str) -> String {
    model_path(model, version)
}

pub fn infer_path(model: &str, version: &str) -> String {
    model_path(model, version) + "/infer"
}

pub fn config_path(model: &str, version: &str) -> String {
    model_path(model, version) + "/config"
}

pub fn stats_path(model: &str, version: &str) -> String {
    model_path(model, version) + "/stats"
}

pub fn ready_path(model: &str, version: &str) -> String {
    model_path(model, version) + "/ready"
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn push_escaped(out: &mut String, segment: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
}

/// The complete HTTP/1.1 request bytes of one inference.
///
/// `outputs`: every model output, requested as `{"binary_data":true|false}` per
/// `output_format`; when empty, binary output is asked for with the request parameter
/// `binary_data_output`. User headers come after inferperf's, and one with the same name as one of
/// inferperf's (`Content-Type`, `Host`) replaces it.
pub fn encode_infer_request(
    host: &str,
    path: &str,
    inputs: &[InputTensor],
    outputs: &[String],
    input_format: TensorFormat,
    output_format: TensorFormat,
    extra_headers: &[(String, String)],
) -> Result<Vec<u8>> {
    let json = infer_request_json(inputs, outputs, input_format, output_format, "")?;
    assemble_infer_request(host, path, json, inputs, input_format, extra_headers)
}

/// The HTTP/1.1 request around an infer request's JSON part (from `infer_request_json`):
/// inferperf's headers, then the user's, then the JSON and, in binary format, the input data.
pub fn assemble_infer_request(
    host: &str,
    path: &str,
    json: String,
    inputs: &[InputTensor],
    input_format: TensorFormat,
    extra_headers: &[(String, String)],
) -> Result<Vec<u8>> {
    for (name, value) in extra_headers {
        check_header(name, value)?;
    }
    let mut headers: Vec<(String, String)> = Vec::with_capacity(2 + extra_headers.len());
    let mut body = json.into_bytes();
    match input_format {
        TensorFormat::Binary => {
            headers.push((
                "Inference-Header-Content-Length".into(),
                body.len().to_string(),
            ));
            headers.push(("Content-Type".into(), "application/octet-stream".into()));
            let data_len: usize = inputs.iter().map(|i| i.data.len()).sum();
            body.reserve(data_len);
            inputs.iter().for_each(|i| body.extend_from_slice(&i.data));
        }
        TensorFormat::Json => headers.push(("Content-Type".into(), "application/json".into())),
    }
    headers.retain(|(ours, _)| {
        !extra_headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(ours))
    });
    headers.extend_from_slice(extra_headers);
    let mut request = Vec::with_capacity(body.len() + 256);
    write_request(&mut request, "POST", host, path, &headers, &body);
    Ok(request)
}

/// The JSON part of an infer request, without an `id`. `request_params`: JSON
/// object members (`"name":value,...`) that open the request's `parameters` (sequence
/// fields); empty for none.
pub fn infer_request_json(
    inputs: &[InputTensor],
    outputs: &[String],
    input_format: TensorFormat,
    output_format: TensorFormat,
    request_params: &str,
) -> Result<String> {
    let mut json = String::with_capacity(128 + 64 * (inputs.len() + outputs.len()));
    json.push('{');
    let binary_output = outputs.is_empty() && output_format == TensorFormat::Binary;
    if binary_output || !request_params.is_empty() {
        json.push_str("\"parameters\":{");
        json.push_str(request_params);
        if binary_output {
            if !request_params.is_empty() {
                json.push(',');
            }
            json.push_str("\"binary_data_output\":true");
        }
        json.push_str("},");
    }
    json.push_str("\"inputs\":[");
    for (i, input) in inputs.iter().enumerate() {
        check_input(input)?;
        if i > 0 {
            json.push(',');
        }
        json.push_str("{\"name\":");
        push_json_string(&mut json, &input.name);
        json.push_str(",\"datatype\":\"");
        json.push_str(input.datatype.name());
        json.push_str("\",\"shape\":");
        push_shape(&mut json, &input.shape);
        match input_format {
            TensorFormat::Binary => {
                json.push_str(",\"parameters\":{\"binary_data_size\":");
                json.push_str(&input.data.len().to_string());
                json.push_str("}}");
            }
            TensorFormat::Json => {
                json.push_str(",\"data\":");
                push_request_data(&mut json, input)?;
                json.push('}');
            }
        }
    }
    json.push(']');
    if !outputs.is_empty() {
        push_outputs(&mut json, outputs, output_format);
    }
    json.push('}');
    Ok(json)
}

fn push_outputs(json: &mut String, outputs: &[String], output_format: TensorFormat) {
    let parameters = match output_format {
        TensorFormat::Binary => ",\"parameters\":{\"binary_data\":true}}",
        TensorFormat::Json => ",\"parameters\":{\"binary_data\":false}}",
    };
    json.push_str(",\"outputs\":[");
    for (i, output) in outputs.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str("{\"name\":");
        push_json_string(json, output);
        json.push_str(parameters);
    }
    json.push(']');
}

fn push_shape(out: &mut String, shape: &[i64]) {
    out.push('[');
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&d.to_string());
    }
    out.push(']');
}

/// The message of an error response: the `"error"` string of `{"error":"..."}`, else
/// `HTTP <status>: <start of the body>` (just `HTTP <status>` for an empty body).
pub fn error_message(status: u16, body: &[u8]) -> String {
    /// Characters of a non-JSON body quoted in the message.
    const EXCERPT_CHARS: usize = 200;
    if let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice(body) {
        if let Some(serde_json::Value::String(message)) = fields.get("error") {
            return message.clone();
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return format!("HTTP {status}");
    }
    let mut excerpt: String = text.chars().take(EXCERPT_CHARS).collect();
    if excerpt.len() < text.len() {
        excerpt.push_str("...");
    }
    format!("HTTP {status}: {excerpt}")
}

#[cfg(test)]
#[path = "triton_http_tests.rs"]
mod tests;
