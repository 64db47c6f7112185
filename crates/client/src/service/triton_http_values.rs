//! Tensor values as JSON text: the typed `"data"` arrays of JSON-format requests, and the
//! `request_inputs` / `response_outputs` objects of the profile export.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::tensor::{element_count, split_bytes_elements, DataType, InputTensor};

/// Appends `v` as the reference exports print floats: the shortest digits that round-trip,
/// plain notation for 1e-4 <= |v| < 1e16 (integral values keep a `.0`), otherwise exponent
/// notation with a sign and at least two exponent digits (`1.5e+31`, `-8.4e-06`).
/// Non-finite values, which JSON cannot carry, become `null`.
pub(crate) fn push_f64(out: &mut String, v: f64) {
    if !v.is_finite() {
        out.push_str("null");
        return;
    }
    // `{:e}` gives the shortest round-trip digits, e.g. "-8.415989213972352e-6", "0e0".
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..16).contains(&exp) {
        out.push_str(mantissa);
        out.push_str(if exp < 0 { "e-" } else { "e+" });
        let magnitude = exp.unsigned_abs();
        if magnitude < 10 {
            out.push('0');
        }
        out.push_str(&magnitude.to_string());
        return;
    }
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    out.push_str(sign);
    // Digits before the decimal point; <= 0 means the value is below 1.
    let point = exp + 1;
    if point <= 0 {
        out.push_str("0.");
        push_zeros(out, point.unsigned_abs() as usize);
        out.push_str(&digits);
    } else if point as usize >= digits.len() {
        out.push_str(&digits);
        push_zeros(out, point as usize - digits.len());
        out.push_str(".0");
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
}

fn push_zeros(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push('0');
    }
}

/// Appends a JSON string literal.
pub(crate) fn push_json_string(out: &mut String, s: &str) {
    // Serialising a &str cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\"")));
}

/// Appends element `i` of a fixed-size numeric tensor (`raw` holds at least `i + 1` elements).
fn push_element(out: &mut String, datatype: DataType, raw: &[u8], i: usize) {
    fn bytes<const N: usize>(raw: &[u8], i: usize) -> [u8; N] {
        let mut b = [0u8; N];
        b.copy_from_slice(&raw[i * N..(i + 1) * N]);
        b
    }
    match datatype {
        DataType::Bool => out.push_str(if raw[i] != 0 { "true" } else { "false" }),
        DataType::U8 => out.push_str(&raw[i].to_string()),
        DataType::I8 => out.push_str(&(raw[i] as i8).to_string()),
        DataType::U16 => out.push_str(&u16::from_le_bytes(bytes(raw, i)).to_string()),
        DataType::I16 => out.push_str(&i16::from_le_bytes(bytes(raw, i)).to_string()),
        DataType::U32 => out.push_str(&u32::from_le_bytes(bytes(raw, i)).to_string()),
        DataType::I32 => out.push_str(&i32::from_le_bytes(bytes(raw, i)).to_string()),
        DataType::U64 => out.push_str(&u64::from_le_bytes(bytes(raw, i)).to_string()),
        DataType::I64 => out.push_str(&i64::from_le_bytes(bytes(raw, i)).to_string()),
        DataType::F32 => push_f64(out, f64::from(f32::from_le_bytes(bytes(raw, i)))),
        DataType::F64 => push_f64(out, f64::from_le_bytes(bytes(raw, i))),
        // Callers handle these before asking for elements.
        DataType::F16 | DataType::Bf16 | DataType::Bytes => out.push_str("null"),
    }
}

/// Appends one tensor's value for the profile export: BYTES as one string made of the raw
/// bytes after the first 4-byte length prefix only [perf_analyzer quirk, kept for
/// compatibility]; numbers as a scalar when there is one element, else a flat array;
/// FP16/BF16 (unsupported) and empty buffers as `""`.
pub(crate) fn push_export_value(out: &mut String, datatype: DataType, raw: &[u8]) {
    if datatype == DataType::Bytes {
        let text = String::from_utf8_lossy(&raw[raw.len().min(4)..]);
        push_json_string(out, &text);
        return;
    }
    let count = match datatype.size() {
        0 => 0,
        size => raw.len() / size,
    };
    if count == 0 || matches!(datatype, DataType::F16 | DataType::Bf16) {
        out.push_str("\"\"");
    } else if count == 1 {
        push_element(out, datatype, raw, 0);
    } else {
        out.push('[');
        for i in 0..count {
            if i > 0 {
                out.push(',');
            }
            push_element(out, datatype, raw, i);
        }
        out.push(']');
    }
}

/// The export's `request_inputs` object: `{"INPUT0":[...],...}` with the rules of
/// [`push_export_value`].
pub fn inputs_json(inputs: &[InputTensor]) -> String {
    let mut out = String::from("{");
    for (i, input) in inputs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(&mut out, &input.name);
        out.push(':');
        push_export_value(&mut out, input.datatype, &input.data);
    }
    out.push('}');
    out
}

/// [`inputs_json`] for a run that writes a profile export, its only reader; an empty string
/// otherwise (a 16 MiB FP32 tensor is about 70 MB of JSON text, built before the load starts
/// and kept for the whole run).
pub fn export_inputs_json(export: bool, inputs: &[InputTensor]) -> String {
    if export {
        inputs_json(inputs)
    } else {
        String::new()
    }
}

/// Checks that an input's data matches its shape and datatype; returns the element count.
pub(crate) fn check_input(input: &InputTensor) -> Result<usize> {
    let name = &input.name;
    if input.shape.iter().any(|&d| d < 0) {
        return Err(Error::usage(format!(
            "input '{name}' has an undefined dimension in shape {:?}: give it with --shape",
            input.shape
        )));
    }
    let datatype = input.datatype.name();
    let Some(count) = element_count(&input.shape) else {
        return Err(Error::usage(format!(
            "input '{name}' ({datatype}, shape {:?}) has more elements than this machine can \
             address",
            input.shape
        )));
    };
    if input.datatype == DataType::Bytes {
        let elements = split_bytes_elements(&input.data).map(|e| e.len());
        if elements != Some(count) {
            return Err(Error::usage(format!(
                "input '{name}' ({datatype}, shape {:?}) needs {count} length-prefixed elements",
                input.shape
            )));
        }
    } else if Some(input.data.len()) != count.checked_mul(input.datatype.size()) {
        return Err(Error::usage(format!(
            "input '{name}' ({datatype}, shape {:?}) needs {} bytes of data, got {}",
            input.shape,
            u128::from(count as u64) * input.datatype.size() as u128,
            input.data.len()
        )));
    }
    Ok(count)
}

/// Appends the JSON-format `"data"` array of a checked input.
pub(crate) fn push_request_data(out: &mut String, input: &InputTensor) -> Result<()> {
    let name = &input.name;
    let unsupported = |why: &str| {
        Error::usage(format!(
            "input '{name}' {why}, which the JSON tensor format cannot carry; \
             use --input-tensor-format binary"
        ))
    };
    out.push('[');
    match input.datatype {
        DataType::F16 | DataType::Bf16 => {
            return Err(unsupported(&format!(
                "has datatype {}",
                input.datatype.name()
            )));
        }
        DataType::Bytes => {
            let elements = split_bytes_elements(&input.data).unwrap_or_default();
            for (i, element) in elements.into_iter().enumerate() {
                let text = std::str::from_utf8(element)
                    .map_err(|_| unsupported(&format!("element {i} is not UTF-8 text")))?;
                if i > 0 {
                    out.push(',');
                }
                push_json_string(out, text);
            }
        }
        datatype => {
            for i in 0..input.data.len() / datatype.size().max(1) {
                if i > 0 {
                    out.push(',');
                }
                let start = out.len();
                push_element(out, datatype, &input.data, i);
                if &out[start..] == "null" {
                    return Err(unsupported(&format!("element {i} is NaN or infinite")));
                }
            }
        }
    }
    out.push(']');
    Ok(())
}

/// The export's object for one response: `{"OUTPUT0":...}` with the rules of
/// [`push_export_value`]. `inference_header_len` is the response's
/// `Inference-Header-Content-Length`; without it the JSON header ends where its value ends.
pub fn decode_outputs_json(body: &[u8], inference_header_len: Option<usize>) -> Result<String> {
    let bad = |why: String| Error::generic(format!("inference response: {why}"));
    let (header, mut binary) = match inference_header_len {
        Some(n) => match (body.get(..n), body.get(n..)) {
            (Some(h), Some(b)) => (
                serde_json::from_slice::<Value>(h).map_err(|e| bad(e.to_string()))?,
                b,
            ),
            _ => {
                return Err(bad(format!(
                    "Inference-Header-Content-Length {n} exceeds the body length {}",
                    body.len()
                )))
            }
        },
        None => {
            let mut values = serde_json::Deserializer::from_slice(body).into_iter::<Value>();
            let value = values.next().ok_or_else(|| bad("empty body".into()))?;
            let value = value.map_err(|e| bad(e.to_string()))?;
            (value, &body[values.byte_offset()..])
        }
    };
    let mut out = String::from("{");
    let outputs = header
        .get("outputs")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, output) in outputs.iter().enumerate() {
        let field = |key: &str| {
            output
                .get(key)
                .ok_or_else(|| bad(format!("missing field 'outputs[{i}].{key}'")))
        };
        let name = field("name")?
            .as_str()
            .ok_or_else(|| bad(format!("'outputs[{i}].name' is not a string")))?;
        let datatype_name = field("datatype")?.as_str().unwrap_or_default();
        let datatype = DataType::parse(datatype_name)
            .map_err(|e| bad(format!("output '{name}': {}", e.msg)))?;
        if i > 0 {
            out.push(',');
        }
        push_json_string(&mut out, name);
        out.push(':');
        let binary_size = output
            .get("parameters")
            .and_then(|p| p.get("binary_data_size"));
        if let Some(size) = binary_size {
            let size = size.as_u64().and_then(|s| usize::try_from(s).ok());
            let Some(size) = size.filter(|&s| s <= binary.len()) else {
                return Err(bad(format!(
                    "output '{name}': binary_data_size exceeds the bytes received"
                )));
            };
            push_export_value(&mut out, datatype, &binary[..size]);
            binary = &binary[size..];
        } else {
            let mut flat = Vec::new();
            flatten(output.get("data").unwrap_or(&Value::Null), &mut flat);
            push_json_data(&mut out, datatype, &flat);
        }
    }
    out.push('}');
    Ok(out)
}

fn flatten<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| flatten(v, out)),
        Value::Null => {}
        other => out.push(other),
    }
}

/// An output that came as a JSON `"data"` array: same rules as binary outputs. BYTES strings
/// are framed as the client library would store them, then given the first-prefix quirk.
fn push_json_data(out: &mut String, datatype: DataType, values: &[&Value]) {
    if datatype == DataType::Bytes {
        let mut framed = Vec::new();
        for value in values {
            let text = value
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| value.to_string());
            crate::tensor::push_bytes_element(&mut framed, text.as_bytes());
        }
        push_export_value(out, datatype, &framed);
        return;
    }
    if values.is_empty() || matches!(datatype, DataType::F16 | DataType::Bf16) {
        out.push_str("\"\"");
        return;
    }
    // FP32 values go through f32 first, as the client library stores them.
    let push_one = |out: &mut String, value: &Value| match (datatype, value.as_f64()) {
        (DataType::F32, Some(v)) => push_f64(out, f64::from(v as f32)),
        (DataType::F64, Some(v)) => push_f64(out, v),
        _ => out.push_str(&value.to_string()),
    };
    if let [single] = values {
        push_one(out, single);
        return;
    }
    out.push('[');
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_one(out, value);
    }
    out.push(']');
}

#[cfg(test)]
#[path = "triton_http_values_tests.rs"]
mod tests;
