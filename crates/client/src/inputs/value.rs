//! One tensor value of an input-data file: a flat array, `{"b64": ...}` or
//! `{"content": ..., "shape": [...]}`, turned into its batch-1 shape and wire bytes.
//! Errors are plain messages; the caller adds the file, stream and step.

use base64::Engine;
use serde_json::{Map, Value};

use super::model::{checked_element_count, shape_fits, shape_text, TensorSpec};
use crate::tensor::{push_bytes_element, split_bytes_elements, DataType};

/// Reads one tensor value for `spec`. `need_shape`: the shape must end up fully defined
/// (inputs); expected outputs may keep a variable dim, and then only their bytes are
/// compared.
pub fn parse_tensor(
    value: &Value,
    spec: &TensorSpec,
    need_shape: bool,
) -> Result<(Vec<i64>, Vec<u8>), String> {
    let name = &spec.name;
    let (given_shape, data) = match value {
        Value::Array(items) => (None, serialize_array(items, spec.datatype, name)?),
        Value::Object(fields) => {
            let shape = fields
                .get("shape")
                .map(|s| parse_shape(s, name))
                .transpose()?;
            (shape, object_content(fields, spec)?)
        }
        _ => {
            return Err(format!(
                "the value of tensor {name} must be an array or an object \
                 ({{\"b64\": ...}} or {{\"content\": ..., \"shape\": [...]}})"
            ))
        }
    };
    let shape = match given_shape {
        Some(shape) => {
            if !shape_fits(&shape, &spec.dims) {
                return Err(format!(
                    "The supplied shape of {} for input \"{name}\" is incompatible with the \
                     model's input shape of {}",
                    shape_text(&shape),
                    shape_text(&spec.dims)
                ));
            }
            shape
        }
        None => match &spec.default_shape {
            Some(shape) => shape.clone(),
            None if need_shape => {
                return Err(format!(
                    "The variable-sized tensor \"{name}\" with model shape {} needs to have its \
                     shape fully defined. See the --shape option (or give \"shape\" in the data \
                     file).",
                    shape_text(&spec.dims)
                ))
            }
            None => spec.dims.clone(),
        },
    };
    // A variable dim can only be left in expected outputs; their bytes are compared as-is.
    if shape.iter().all(|&d| d >= 0) {
        check_size(name, spec.datatype, &shape, &data)?;
    }
    Ok((shape, data))
}

/// The data of an object value: `{"b64": ...}` itself, or its `content` (array or b64).
fn object_content(fields: &Map<String, Value>, spec: &TensorSpec) -> Result<Vec<u8>, String> {
    let name = &spec.name;
    if let Some(b64) = fields.get("b64") {
        return decode_b64(b64, name);
    }
    match fields.get("content") {
        None => Err(format!("missing content field for tensor {name}")),
        Some(Value::Array(items)) => serialize_array(items, spec.datatype, name),
        Some(Value::Object(inner)) if inner.contains_key("b64") => decode_b64(&inner["b64"], name),
        Some(_) => Err(format!(
            "The tensor values are not supported. Expected an array or b64 string for tensor \
             {name}"
        )),
    }
}

fn decode_b64(value: &Value, name: &str) -> Result<Vec<u8>, String> {
    let Value::String(text) = value else {
        return Err(format!(
            "the value of b64 field should be of type string (tensor {name})"
        ));
    };
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|e| format!("the b64 data of tensor {name} is not valid base64: {e}"))
}

/// A `"shape"` array: integers >= 0 (the batch dim excluded).
fn parse_shape(value: &Value, name: &str) -> Result<Vec<i64>, String> {
    let bad = || format!("the shape of tensor {name} must be an array of integers >= 0");
    let Value::Array(dims) = value else {
        return Err(bad());
    };
    dims.iter()
        .map(|d| d.as_i64().filter(|&d| d >= 0).ok_or_else(bad))
        .collect()
}

/// Checks that `data` holds exactly the elements `shape` calls for.
pub fn check_size(
    name: &str,
    datatype: DataType,
    shape: &[i64],
    data: &[u8],
) -> Result<(), String> {
    let Some(count) = checked_element_count(shape) else {
        return Err(format!(
            "the shape {} of tensor {name} is not fully defined or too large",
            shape_text(shape)
        ));
    };
    if datatype == DataType::Bytes {
        let Some(elements) = split_bytes_elements(data) else {
            return Err(format!(
                "the BYTES data of {name} is not a sequence of 4-byte little-endian \
                 length-prefixed elements"
            ));
        };
        if elements.len() != count {
            return Err(format!(
                "mismatch in the data provided for {name}. Expected: {count} elements, Got: {} \
                 elements",
                elements.len()
            ));
        }
        return Ok(());
    }
    let expected = count.checked_mul(datatype.size());
    if expected != Some(data.len()) {
        let expected = expected.map_or_else(|| "too many".to_string(), |n| n.to_string());
        return Err(format!(
            "mismatch in the data provided for {name}. Expected: {expected} bytes, Got: {} bytes",
            data.len()
        ));
    }
    Ok(())
}

/// Serialises a JSON array (nested arrays are read row-major) as wire bytes of `datatype`.
pub fn serialize_array(items: &[Value], datatype: DataType, name: &str) -> Result<Vec<u8>, String> {
    if matches!(datatype, DataType::F16 | DataType::Bf16) {
        return Err(format!(
            "tensor {name} has datatype {}: give its data as {{\"b64\": ...}} (explicit arrays \
             are not supported for half-precision types)",
            datatype.name()
        ));
    }
    let mut flat = Vec::with_capacity(items.len());
    flatten(items, &mut flat);
    let mut out = Vec::with_capacity(flat.len() * datatype.size().max(8));
    for (i, value) in flat.iter().enumerate() {
        push_element(&mut out, datatype, value).map_err(|what| {
            format!("element {i} of tensor {name} ({}): {what}", datatype.name())
        })?;
    }
    Ok(out)
}

fn flatten<'a>(items: &'a [Value], out: &mut Vec<&'a Value>) {
    for item in items {
        match item {
            Value::Array(inner) => flatten(inner, out),
            other => out.push(other),
        }
    }
}

/// Appends one JSON element in the wire form of `datatype`.
fn push_element(out: &mut Vec<u8>, datatype: DataType, value: &Value) -> Result<(), String> {
    fn int<T: TryFrom<i64> + TryFrom<u64>>(value: &Value) -> Result<T, String> {
        let parsed = match (value.as_i64(), value.as_u64()) {
            (Some(v), _) => T::try_from(v).ok(),
            (None, Some(v)) => T::try_from(v).ok(),
            _ => None,
        };
        parsed.ok_or_else(|| format!("{value} is not an integer in range"))
    }
    let float = |value: &Value| {
        value
            .as_f64()
            .ok_or_else(|| format!("{value} is not a number"))
    };
    match datatype {
        DataType::Bool => match value {
            Value::Bool(b) => out.push(u8::from(*b)),
            other => return Err(format!("{other} is not true or false")),
        },
        DataType::U8 => out.push(int::<u8>(value)?),
        DataType::I8 => out.extend_from_slice(&int::<i8>(value)?.to_le_bytes()),
        DataType::U16 => out.extend_from_slice(&int::<u16>(value)?.to_le_bytes()),
        DataType::I16 => out.extend_from_slice(&int::<i16>(value)?.to_le_bytes()),
        DataType::U32 => out.extend_from_slice(&int::<u32>(value)?.to_le_bytes()),
        DataType::I32 => out.extend_from_slice(&int::<i32>(value)?.to_le_bytes()),
        DataType::U64 => out.extend_from_slice(&int::<u64>(value)?.to_le_bytes()),
        DataType::I64 => out.extend_from_slice(&int::<i64>(value)?.to_le_bytes()),
        DataType::F32 => out.extend_from_slice(&(float(value)? as f32).to_le_bytes()),
        DataType::F64 => out.extend_from_slice(&float(value)?.to_le_bytes()),
        DataType::Bytes => match value {
            Value::String(s) => push_bytes_element(out, s.as_bytes()),
            other => return Err(format!("{other} is not a string")),
        },
        DataType::F16 | DataType::Bf16 => return Err("half precision needs b64".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(datatype: DataType, dims: &[i64]) -> TensorSpec {
        TensorSpec {
            name: "X".into(),
            datatype,
            dims: dims.to_vec(),
            default_shape: dims.iter().all(|&d| d >= 0).then(|| dims.to_vec()),
            optional: false,
            shape_tensor: false,
        }
    }

    #[test]
    fn typed_arrays_per_datatype() {
        let rows: &[(DataType, Value, Vec<u8>)] = &[
            (DataType::Bool, json!([true, false]), vec![1, 0]),
            (DataType::U8, json!([255, 0]), vec![255, 0]),
            (DataType::I8, json!([-1, 2]), vec![255, 2]),
            (DataType::I16, json!([-2, 1]), vec![0xfe, 0xff, 1, 0]),
            (DataType::U16, json!([1, 2]), vec![1, 0, 2, 0]),
            (DataType::I32, json!([[1], [-1]]), {
                let mut v = 1i32.to_le_bytes().to_vec();
                v.extend_from_slice(&(-1i32).to_le_bytes());
                v
            }),
            (
                DataType::U32,
                json!([7, 8]),
                [7u32.to_le_bytes(), 8u32.to_le_bytes()].concat(),
            ),
            (
                DataType::U64,
                json!([u64::MAX, 0]),
                [u64::MAX.to_le_bytes(), [0; 8]].concat(),
            ),
            (
                DataType::I64,
                json!([i64::MIN, 3]),
                [i64::MIN.to_le_bytes(), 3i64.to_le_bytes()].concat(),
            ),
            (
                DataType::F32,
                json!([1.5, 2]),
                [1.5f32.to_le_bytes(), 2f32.to_le_bytes()].concat(),
            ),
            (
                DataType::F64,
                json!([0.25, -1]),
                [0.25f64.to_le_bytes(), (-1f64).to_le_bytes()].concat(),
            ),
            (
                DataType::Bytes,
                json!(["ab", ""]),
                vec![2, 0, 0, 0, b'a', b'b', 0, 0, 0, 0],
            ),
        ];
        for (datatype, value, bytes) in rows {
            let (shape, data) = parse_tensor(value, &spec(*datatype, &[2]), true)
                .unwrap_or_else(|e| panic!("{datatype:?}: {e}"));
            assert_eq!(shape, vec![2]);
            assert_eq!(&data, bytes, "{datatype:?}");
        }
    }

    #[test]
    fn bad_elements_name_index_and_type() {
        let rows: &[(DataType, Value, &str)] = &[
            (
                DataType::U8,
                json!([1, 256]),
                "element 1 of tensor X (UINT8)",
            ),
            (
                DataType::I32,
                json!([1.5, 2]),
                "element 0 of tensor X (INT32)",
            ),
            (DataType::Bool, json!([1, 0]), "is not true or false"),
            (DataType::Bytes, json!([1, "a"]), "is not a string"),
            (DataType::F32, json!(["1", 2]), "is not a number"),
            (DataType::F16, json!([1, 2]), "b64"),
            (DataType::Bf16, json!([1, 2]), "BF16"),
        ];
        for (datatype, value, needle) in rows {
            let err = parse_tensor(value, &spec(*datatype, &[2]), true).unwrap_err();
            assert!(err.contains(needle), "{datatype:?}: {err}");
        }
    }

    #[test]
    fn b64_and_content_forms() {
        let s = spec(DataType::F16, &[-1]);
        let value = json!({"content": {"b64": "AAA8AA=="}, "shape": [2]});
        assert_eq!(
            parse_tensor(&value, &s, true).unwrap(),
            (vec![2], vec![0, 0, 0x3c, 0])
        );
        let value = json!({"b64": "AAA8AA==", "shape": [2]});
        assert_eq!(parse_tensor(&value, &s, true).unwrap().0, vec![2]);
        let value = json!({"content": [1, 2, 3], "shape": [3]});
        let (shape, data) = parse_tensor(&value, &spec(DataType::U8, &[-1]), true).unwrap();
        assert_eq!((shape, data), (vec![3], vec![1, 2, 3]));
        // BYTES b64 must already carry the length prefixes.
        let value = json!({"b64": "AQAAAHo="});
        let (_, data) = parse_tensor(&value, &spec(DataType::Bytes, &[1]), true).unwrap();
        assert_eq!(data, vec![1, 0, 0, 0, b'z']);
        let err =
            parse_tensor(&json!({"b64": "eg=="}), &spec(DataType::Bytes, &[1]), true).unwrap_err();
        assert!(err.contains("length-prefixed"), "{err}");
    }

    #[test]
    fn shape_and_size_errors() {
        let rows: &[(Value, &[i64], &str)] = &[
            (json!([1, 2, 3]), &[4], "mismatch in the data provided for X. Expected: 16 bytes, Got: 12 bytes"),
            (json!([1]), &[-1], "The variable-sized tensor \"X\" with model shape [-1]"),
            (json!({"content": [1, 2], "shape": [3]}), &[2], "The supplied shape of [3] for input \"X\" is incompatible with the model's input shape of [2]"),
            (json!({"content": [1, 2], "shape": [-1]}), &[-1], "shape of tensor X must be an array of integers >= 0"),
            (json!({"content": [1, 2], "shape": "2"}), &[-1], "shape of tensor X"),
            (json!({"shape": [2]}), &[2], "missing content field for tensor X"),
            (json!({"content": 5}), &[2], "Expected an array or b64 string for tensor X"),
            (json!({"b64": 5}), &[2], "b64 field should be of type string"),
            (json!({"b64": "!!"}), &[2], "not valid base64"),
            (json!(7), &[2], "must be an array or an object"),
            (json!({"content": [1], "shape": [4_611_686_018_427_387_904_i64, 4]}), &[-1, 4], "too large"),
        ];
        for (value, dims, needle) in rows {
            let err = parse_tensor(value, &spec(DataType::I32, dims), true).unwrap_err();
            assert!(err.contains(needle), "{value}: {err}");
        }
        let err = parse_tensor(&json!(["a"]), &spec(DataType::Bytes, &[2]), true).unwrap_err();
        assert!(
            err.contains("Expected: 2 elements, Got: 1 elements"),
            "{err}"
        );
    }

    #[test]
    fn outputs_may_keep_variable_dims() {
        let (shape, data) =
            parse_tensor(&json!([1, 2]), &spec(DataType::U8, &[-1]), false).unwrap();
        assert_eq!((shape, data), (vec![-1], vec![1, 2]));
    }
}
