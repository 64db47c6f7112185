//! Reading override JSON as protobuf's JSON mapping does: field names in snake_case or
//! lowerCamelCase, 64-bit integers as numbers or strings, enum names in any case, `null` for
//! an unset field.

use serde_json::{Map, Value};

use super::Refusal;

/// A field name as the config JSON spells it (`maxBatchSize` → `max_batch_size`); names
/// that are not lowerCamelCase (map keys such as tensor names) stay as they are.
pub fn field_name(key: &str) -> String {
    let camel = key.starts_with(|c: char| c.is_ascii_lowercase())
        && !key.contains('_')
        && key.contains(|c: char| c.is_ascii_uppercase());
    if !camel {
        return key.to_string();
    }
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A type error: Triton's JSON parser refuses the config.
pub fn wrong_type(path: &str, want: &str, got: &Value) -> Refusal {
    Refusal::Poll(format!("'{path}': expected {want}, got {got}"))
}

pub fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, Refusal> {
    v.as_object()
        .ok_or_else(|| wrong_type(path, "an object", v))
}

pub fn array<'a>(v: &'a Value, path: &str) -> Result<&'a [Value], Refusal> {
    match v {
        Value::Null => Ok(&[]),
        Value::Array(items) => Ok(items),
        _ => Err(wrong_type(path, "an array", v)),
    }
}

pub fn string<'a>(v: &'a Value, path: &str) -> Result<&'a str, Refusal> {
    match v {
        Value::Null => Ok(""),
        Value::String(s) => Ok(s),
        _ => Err(wrong_type(path, "a string", v)),
    }
}

pub fn boolean(v: &Value, path: &str) -> Result<bool, Refusal> {
    match v {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(*b),
        _ => Err(wrong_type(path, "true or false", v)),
    }
}

/// An integer in `min..=max`: a JSON number with no fraction, or a string holding one.
pub fn integer(v: &Value, path: &str, min: i64, max: i64) -> Result<i64, Refusal> {
    let number = match v {
        Value::Null => Some(0.0),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match number {
        Some(n) if n.fract() == 0.0 && n >= min as f64 && n <= max as f64 => Ok(n as i64),
        _ => Err(wrong_type(
            path,
            &format!("an integer from {min} to {max}"),
            v,
        )),
    }
}

/// Whether `v` is a field's default (unset, false, 0, "", empty, or an object of defaults).
pub fn is_default(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.values().all(is_default),
    }
}

/// Whether a given (possibly partial) value says the same as the model's own: absent or
/// unset fields agree, numbers may be strings, enum names may differ in case.
pub fn same(given: &Value, ours: &Value) -> bool {
    match (given, ours) {
        (Value::Null, _) => true,
        (Value::Object(g), Value::Object(o)) => {
            g.iter().all(|(k, v)| match o.get(&field_name(k)) {
                Some(ov) => same(v, ov),
                None => is_default(v),
            })
        }
        (Value::Array(g), Value::Array(o)) => {
            g.len() == o.len() && g.iter().zip(o).all(|(a, b)| same(a, b))
        }
        (Value::String(s), Value::Number(n)) | (Value::Number(n), Value::String(s)) => {
            s.trim().parse::<f64>().ok() == n.as_f64()
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::String(b)) => a == b || is_enum(b) && a.eq_ignore_ascii_case(b),
        (a, b) => a == b,
    }
}

/// Enum names in config JSON: upper case with an underscore (`TYPE_INT32`, `KIND_CPU`).
fn is_enum(s: &str) -> bool {
    s.contains('_') && !s.contains(|c: char| c.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_numbers_and_enums_read_as_protobuf_does() {
        assert_eq!(field_name("maxBatchSize"), "max_batch_size");
        assert_eq!(field_name("max_batch_size"), "max_batch_size");
        assert_eq!(field_name("INPUT0"), "INPUT0");
        assert_eq!(integer(&json!("12"), "x", 0, 20).ok(), Some(12));
        assert_eq!(integer(&json!(3.0), "x", 0, 20).ok(), Some(3));
        assert!(integer(&json!(2.5), "x", 0, 20).is_err());
        assert!(integer(&json!(-1), "x", 0, 20).is_err());
        assert!(integer(&json!(true), "x", 0, 20).is_err());
        assert!(same(
            &json!({"dims": ["16"], "data_type": "type_int32"}),
            &json!({"dims": [16], "data_type": "TYPE_INT32", "format": "FORMAT_NONE"})
        ));
        assert!(!same(&json!({"dims": [8]}), &json!({"dims": [16]})));
        assert!(!same(&json!({"extra": 1}), &json!({})));
        assert!(same(&json!({"extra": false}), &json!({})));
        assert!(
            !same(&json!("simple"), &json!("SIMPLE")),
            "only enums ignore case"
        );
        assert!(is_default(&json!({"enable": false, "list": []})));
    }
}
