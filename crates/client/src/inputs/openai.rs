//! Input data of the `openai` service kind: JSON files whose steps carry
//! the `payload` pseudo-input, of type JSON: "exactly one JSON object, which is serialised".
//!
//! ```json
//! {"data": [{"payload": [{"model": "m", "messages": [...], "stream": true}]}, ...]}
//! ```
//!
//! The object is sent as the request body. It is serialised compactly in the file's own key
//! order (as perf_analyzer's rapidjson writer does), by copying its text from the file with
//! the blanks between tokens removed; `serde_json`'s maps would sort the keys.
//! `--fixed-schedule` adds the `timestamp` pseudo-input (ms); session mode adds `session_id`
//! and `delay` (ms).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::model::TIMESTAMP_INPUT;
use crate::error::{Error, Result};
use crate::service::openai::PAYLOAD_INPUT;

pub mod sessions;

/// The session-mode pseudo-inputs (`--session-concurrency`).
pub const SESSION_ID_INPUT: &str = "session_id";
pub const DELAY_INPUT: &str = "delay";

/// One request of the data: its body and the pseudo-inputs the mode reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PayloadEntry {
    /// The request body: the `payload` object, compact, keys in file order.
    pub payload: Vec<u8>,
    /// `--fixed-schedule`: when to send, ms since the start.
    pub timestamp_ms: Option<u64>,
    /// Session mode: the conversation this turn belongs to.
    pub session_id: Option<String>,
    /// Session mode: pause before the next turn (ms).
    pub delay_ms: Option<u64>,
}

/// Which pseudo-inputs the run mode adds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PayloadOptions {
    pub fixed_schedule: bool,
    pub sessions: bool,
}

/// Reads every `--input-data` file in order; their entries add up.
pub fn load_payloads(paths: &[PathBuf], opts: PayloadOptions) -> Result<Vec<PayloadEntry>> {
    let mut out = Vec::new();
    for path in paths {
        out.extend(read_payload_file(path, opts)?);
    }
    if out.is_empty() {
        return Err(Error::usage("--input-data: no data was read"));
    }
    Ok(out)
}

fn read_payload_file(path: &Path, opts: PayloadOptions) -> Result<Vec<PayloadEntry>> {
    let file = path.display().to_string();
    if path.is_dir() {
        return Err(Error::usage(format!(
            "--input-data {file}: the openai service kind needs a JSON file with \"payload\" \
             entries, not a directory"
        )));
    }
    let bytes = super::file::read_json(path, super::json::SYNTAX)
        .map_err(|e| Error::usage(format!("--input-data {file}: {e}")))?;
    parse_payloads(&bytes, &file, opts)
}

/// Parses one data file's bytes (`file` names it in errors).
pub fn parse_payloads(bytes: &[u8], file: &str, opts: PayloadOptions) -> Result<Vec<PayloadEntry>> {
    let whole = |msg: &str| Error::usage(format!("--input-data {file}: {msg}"));
    let doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| whole(&format!("{}: {e}", super::json::SYNTAX)))?;
    let Some(top) = doc.as_object() else {
        return Err(whole(
            "the top level must be an object with a \"data\" field",
        ));
    };
    if top.contains_key("validation_data") {
        return Err(whole(
            "\"validation_data\" is not supported with the openai service kind",
        ));
    }
    let Some(data) = top.get("data") else {
        return Err(whole("The json file doesn't contain data field"));
    };
    let Some(entries) = data.as_array() else {
        return Err(whole("the \"data\" field must be an array"));
    };
    if entries.is_empty() {
        return Err(whole("the \"data\" field is empty"));
    }
    if entries.iter().any(Value::is_array) {
        return Err(whole(
            "the openai service kind takes one flat list of steps in \"data\", not streams",
        ));
    }
    // The payloads' text in the file, to keep their key order (`None`: not found, e.g. an
    // escaped key; the parsed value is serialised instead).
    let spans = payload_spans(bytes);
    entries
        .iter()
        .enumerate()
        .map(|(step, entry)| {
            let raw = spans.as_ref().and_then(|s| s.get(step).copied().flatten());
            read_entry(entry, raw.map(|(a, b)| &bytes[a..b]), opts)
                .map_err(|msg| whole(&format!("{msg} (Location stream id: 0, step id: {step})")))
        })
        .collect()
}

/// One step: its `payload` object and the mode's pseudo-inputs.
fn read_entry(
    entry: &Value,
    raw_payload: Option<&[u8]>,
    opts: PayloadOptions,
) -> std::result::Result<PayloadEntry, String> {
    let Some(fields) = entry.as_object() else {
        return Err("a step must be an object with a \"payload\" field".into());
    };
    let known = |key: &str| {
        key == PAYLOAD_INPUT
            || key == "model"
            || (opts.fixed_schedule && key == TIMESTAMP_INPUT)
            || (opts.sessions && (key == SESSION_ID_INPUT || key == DELAY_INPUT))
    };
    if let Some(key) = fields.keys().find(|k| !known(k)) {
        return Err(format!(
            "The input or output '{key}' is not found in the model configuration"
        ));
    }
    let value = fields
        .get(PAYLOAD_INPUT)
        .ok_or_else(|| format!("missing tensor {PAYLOAD_INPUT}"))?;
    let object = match value {
        Value::Object(_) => value,
        Value::Array(items) if items.len() == 1 && items[0].is_object() => &items[0],
        _ => {
            return Err(format!(
                "tensor {PAYLOAD_INPUT} must be exactly one JSON object (or an array holding one)"
            ))
        }
    };
    let payload = match raw_payload {
        Some(raw) => compact(raw),
        None => serde_json::to_vec(object).map_err(|e| e.to_string())?,
    };
    let timestamp_ms = scalar_u64(fields, TIMESTAMP_INPUT, opts.fixed_schedule)?;
    let session_id = if opts.sessions {
        Some(session_id(fields)?)
    } else {
        None
    };
    // The last turn of a session may leave its delay out.
    let delay_ms = scalar_u64(fields, DELAY_INPUT, false)?;
    Ok(PayloadEntry {
        payload,
        timestamp_ms,
        session_id,
        delay_ms,
    })
}

/// A one-element value (`5` or `[5]`) that must be a non-negative integer.
fn one_element(value: &Value) -> Option<&Value> {
    match value {
        Value::Array(items) if items.len() == 1 => items.first(),
        Value::Array(_) => None,
        other => Some(other),
    }
}

fn scalar_u64(
    fields: &Map<String, Value>,
    name: &str,
    required: bool,
) -> std::result::Result<Option<u64>, String> {
    match fields.get(name) {
        None if required => Err(format!("missing tensor {name}")),
        None => Ok(None),
        Some(v) => one_element(v)
            .and_then(Value::as_u64)
            .map(Some)
            .ok_or_else(|| format!("tensor {name} must hold one non-negative integer (ms)")),
    }
}

fn session_id(fields: &Map<String, Value>) -> std::result::Result<String, String> {
    let value = fields
        .get(SESSION_ID_INPUT)
        .ok_or_else(|| format!("missing tensor {SESSION_ID_INPUT}"))?;
    match one_element(value) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        _ => Err(format!(
            "tensor {SESSION_ID_INPUT} must hold one string (or number)"
        )),
    }
}

/// `raw` (valid JSON text) without the blanks between tokens; strings are copied as they are.
pub fn compact(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    for &b in raw {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

/// For each entry of the top-level `data` array: the byte span of its payload object (the
/// object itself, or the one element of its array). `None` when the layout is not the
/// expected one; the text must already be known to be valid JSON.
fn payload_spans(text: &[u8]) -> Option<Vec<Option<(usize, usize)>>> {
    let top = skip_ws(text, 0);
    let (_, data) = members(text, top)?
        .into_iter()
        .rev()
        .find(|(key, _)| *key == b"data")?;
    let mut out = Vec::new();
    for (start, _) in elements(text, data.0)? {
        let span = members(text, start).and_then(|m| {
            let (_, (vs, ve)) = m
                .into_iter()
                .rev()
                .find(|(k, _)| *k == PAYLOAD_INPUT.as_bytes())?;
            match text.get(vs)? {
                b'{' => Some((vs, ve)),
                b'[' => elements(text, vs)?.first().copied(),
                _ => None,
            }
        });
        out.push(span);
    }
    Some(out)
}

fn skip_ws(text: &[u8], mut i: usize) -> usize {
    while text
        .get(i)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

/// End (exclusive) of the value starting at `i`.
fn value_end(text: &[u8], i: usize) -> Option<usize> {
    match text.get(i)? {
        b'"' => string_end(text, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match text.get(j)? {
                    b'"' => {
                        j = string_end(text, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let len = text[i..]
                .iter()
                .position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(text.len() - i);
            Some(i + len)
        }
    }
}

/// End (exclusive) of the string whose opening quote is at `i`.
fn string_end(text: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        match text.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// Members of the object at `i`: raw key bytes (between the quotes) and value span.
type Member<'a> = (&'a [u8], (usize, usize));

fn members(text: &[u8], i: usize) -> Option<Vec<Member<'_>>> {
    if text.get(i)? != &b'{' {
        return None;
    }
    let mut out = Vec::new();
    let mut j = skip_ws(text, i + 1);
    if text.get(j)? == &b'}' {
        return Some(out);
    }
    loop {
        let key_end = string_end(text, j)?;
        let key = text.get(j + 1..key_end - 1)?;
        j = skip_ws(text, key_end);
        if text.get(j)? != &b':' {
            return None;
        }
        let vs = skip_ws(text, j + 1);
        let ve = value_end(text, vs)?;
        out.push((key, (vs, ve)));
        j = skip_ws(text, ve);
        match text.get(j)? {
            b',' => j = skip_ws(text, j + 1),
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

/// Element spans of the array at `i`.
fn elements(text: &[u8], i: usize) -> Option<Vec<(usize, usize)>> {
    if text.get(i)? != &b'[' {
        return None;
    }
    let mut out = Vec::new();
    let mut j = skip_ws(text, i + 1);
    if text.get(j)? == &b']' {
        return Some(out);
    }
    loop {
        let end = value_end(text, j)?;
        out.push((j, end));
        j = skip_ws(text, end);
        match text.get(j)? {
            b',' => j = skip_ws(text, j + 1),
            b']' => return Some(out),
            _ => return None,
        }
    }
}

/// Fuzz entry: any file content gives entries or an error, never a panic.
pub fn fuzz_payloads(data: &[u8]) {
    for (fixed_schedule, sessions) in [(false, false), (true, true)] {
        let opts = PayloadOptions {
            fixed_schedule,
            sessions,
        };
        let _ = parse_payloads(data, "fuzz.json", opts);
    }
    let _ = payload_spans(data);
    let _ = compact(data);
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
