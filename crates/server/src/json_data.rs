//! Tensor data as JSON `data` arrays: decoding request inputs and encoding response outputs.

use std::io::Write;

use serde_json::Value;

use inferperf_wire::tensor::{push_bytes_element, split_bytes_elements, DataType};

fn flatten<'v>(value: &'v Value, out: &mut Vec<&'v Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| flatten(v, out)),
        other => out.push(other),
    }
}

/// Converts a (possibly nested) JSON `data` array into wire bytes.
pub fn json_to_bytes(datatype: DataType, data: &Value, name: &str) -> Result<Vec<u8>, String> {
    let mut values = Vec::new();
    flatten(data, &mut values);
    let bad = |v: &Value| {
        format!(
            "unable to parse 'data' of input '{name}': {v} is not a valid {}",
            datatype.name()
        )
    };
    let mut out = Vec::with_capacity(values.len() * datatype.size().max(4));
    for v in values {
        match datatype {
            DataType::I32 => {
                let x = v
                    .as_i64()
                    .and_then(|x| i32::try_from(x).ok())
                    .ok_or_else(|| bad(v))?;
                out.extend_from_slice(&x.to_le_bytes());
            }
            DataType::F32 => {
                let x = v.as_f64().ok_or_else(|| bad(v))? as f32;
                out.extend_from_slice(&x.to_le_bytes());
            }
            DataType::Bytes => {
                let s = v.as_str().ok_or_else(|| bad(v))?;
                push_bytes_element(&mut out, s.as_bytes());
            }
            other => {
                return Err(format!(
                    "JSON data of type {} is not supported",
                    other.name()
                ))
            }
        }
    }
    Ok(out)
}

/// Writes a tensor's elements as a JSON array.
pub fn write_json_data(out: &mut Vec<u8>, datatype: DataType, data: &[u8]) {
    out.push(b'[');
    let mut first = true;
    let mut sep = |out: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
    };
    match datatype {
        DataType::Bytes => {
            for elem in split_bytes_elements(data).unwrap_or_default() {
                sep(out);
                let _ = serde_json::to_writer(&mut *out, &String::from_utf8_lossy(elem));
            }
        }
        DataType::F32 => {
            for c in data.chunks_exact(4) {
                sep(out);
                let _ =
                    serde_json::to_writer(&mut *out, &f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            }
        }
        _ => {
            for c in data.chunks_exact(4) {
                sep(out);
                let _ = write!(out, "{}", i32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            }
        }
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_each_type() {
        let cases = [
            (
                DataType::I32,
                json!([[1, -2], [2147483647, 0]]),
                "[1,-2,2147483647,0]",
            ),
            (DataType::F32, json!([0.5, -3]), "[0.5,-3.0]"),
            (DataType::Bytes, json!(["a\"b", ""]), r#"["a\"b",""]"#),
        ];
        for (datatype, data, text) in cases {
            let bytes = json_to_bytes(datatype, &data, "IN").unwrap();
            let mut out = Vec::new();
            write_json_data(&mut out, datatype, &bytes);
            assert_eq!(String::from_utf8(out).unwrap(), text);
        }
    }

    #[test]
    fn rejects_values_of_the_wrong_type() {
        let cases = [
            (DataType::I32, json!([2147483648i64])),
            (DataType::I32, json!([1.5])),
            (DataType::F32, json!(["x"])),
            (DataType::Bytes, json!([1])),
            (DataType::U8, json!([1])),
        ];
        for (datatype, data) in cases {
            assert!(json_to_bytes(datatype, &data, "IN").is_err(), "{data}");
        }
    }
}
