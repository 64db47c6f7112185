//! Input-data JSON files: flat or multi-stream `data`, aligned `validation_data`,
//! and the `--fixed-schedule` `timestamp` pseudo-input. Several files add up: multi-stream
//! files append streams, flat files append steps to stream 0; the two forms cannot mix.

use std::path::Path;

use serde_json::{Map, Value};

use super::model::{ModelSpec, TensorSpec, TIMESTAMP_INPUT};
use super::value::parse_tensor;
use super::{Step, TensorValue};
use crate::error::{Error, Result};

/// Streams read so far, over all data sources of a run.
#[derive(Debug, Default)]
pub struct Collected {
    pub streams: Vec<Vec<Step>>,
    /// Form of the first source: `Some(true)` multi-stream, `Some(false)` flat.
    multi_stream: Option<bool>,
}

impl Collected {
    /// Records the form of a new source; every source must use the first one's form.
    fn set_form(&mut self, source: &str, multi: bool) -> Result<()> {
        if self.multi_stream.is_some_and(|first| first != multi) {
            return Err(Error::usage(format!(
                "--input-data {source}: Inconsistency in input-data provided. Can not have a \
                 combination of objects and arrays inside of the Data array (an earlier data \
                 source used the other form)"
            )));
        }
        self.multi_stream = Some(multi);
        Ok(())
    }

    /// Appends flat steps to stream 0 (created on first use).
    pub fn push_flat(&mut self, source: &str, steps: Vec<Step>) -> Result<()> {
        self.set_form(source, false)?;
        if self.streams.is_empty() {
            self.streams.push(Vec::new());
        }
        self.streams[0].extend(steps);
        Ok(())
    }
}

/// Where a step came from, for error messages.
#[derive(Clone, Copy)]
struct Location<'a> {
    file: &'a str,
    stream: usize,
    step: usize,
}

impl Location<'_> {
    fn error(&self, msg: impl std::fmt::Display) -> Error {
        Error::usage(format!(
            "--input-data {}: {msg} (Location stream id: {}, step id: {})",
            self.file, self.stream, self.step
        ))
    }
}

/// What a data file that is not JSON is (perf_analyzer's words).
pub(super) const SYNTAX: &str = "failed to parse the specified json file for reading provided data";

/// Reads one JSON data file into `acc` (at most [`super::file::MAX_FILE_BYTES`]).
pub fn read_json_file(path: &Path, model: &ModelSpec, acc: &mut Collected) -> Result<()> {
    let file = path.display().to_string();
    let bytes = super::file::read_json(path, SYNTAX)
        .map_err(|e| Error::usage(format!("--input-data {file}: {e}")))?;
    parse_json(&bytes, &file, model, acc)
}

/// Parses the bytes of one JSON data file named `file` into `acc`.
pub fn parse_json(bytes: &[u8], file: &str, model: &ModelSpec, acc: &mut Collected) -> Result<()> {
    let whole = |msg: &str| Error::usage(format!("--input-data {file}: {msg}"));
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| whole(&format!("{SYNTAX}: {e}")))?;
    let Value::Object(top) = doc else {
        return Err(whole(
            "the top level must be an object with a \"data\" field",
        ));
    };
    let Some(data) = top.get("data") else {
        return Err(whole("The json file doesn't contain data field"));
    };
    let Value::Array(entries) = data else {
        return Err(whole("the \"data\" field must be an array"));
    };
    if entries.is_empty() {
        return Err(whole("the \"data\" field is empty"));
    }
    let multi = entries[0].is_array();
    if entries.iter().any(|e| e.is_array() != multi) {
        return Err(whole(
            "Inconsistency in input-data provided. Can not have a combination of objects and \
             arrays inside of the Data array",
        ));
    }
    if multi && model.fixed_schedule {
        return Err(whole(
            "--fixed-schedule needs one flat list of steps in \"data\", not streams",
        ));
    }
    let misaligned =
        || whole("The 'validation_data' field doesn't align with 'data' field in the json file");
    let validation = match top.get("validation_data") {
        None => None,
        Some(Value::Array(v)) if v.len() == entries.len() => Some(v),
        Some(_) => return Err(misaligned()),
    };
    if !multi {
        let loc = |step| Location {
            file,
            stream: 0,
            step,
        };
        let steps = read_steps(entries, validation.map(Vec::as_slice), model, &loc)?;
        return acc.push_flat(file, steps);
    }
    acc.set_form(file, true)?;
    for (i, stream) in entries.iter().enumerate() {
        let steps = stream.as_array().map(Vec::as_slice).unwrap_or_default();
        if steps.is_empty() {
            return Err(whole(&format!("stream {i} of \"data\" has no steps")));
        }
        let expected = match validation.map(|v| &v[i]) {
            None => None,
            Some(Value::Array(e)) if e.len() == steps.len() => Some(e.as_slice()),
            Some(_) => return Err(misaligned()),
        };
        let loc = |step| Location {
            file,
            stream: i,
            step,
        };
        acc.streams.push(read_steps(steps, expected, model, &loc)?);
    }
    Ok(())
}

fn read_steps<'a>(
    steps: &[Value],
    expected: Option<&[Value]>,
    model: &ModelSpec,
    loc: &dyn Fn(usize) -> Location<'a>,
) -> Result<Vec<Step>> {
    steps
        .iter()
        .enumerate()
        .map(|(k, step)| read_step(step, expected.map(|e| &e[k]), model, loc(k)))
        .collect()
}

/// One step: every non-optional input, the timestamp in fixed-schedule mode, and the
/// expected outputs when validation data is given.
fn read_step(
    step: &Value,
    expected: Option<&Value>,
    model: &ModelSpec,
    loc: Location<'_>,
) -> Result<Step> {
    let Value::Object(fields) = step else {
        return Err(loc.error("a step must be an object mapping input names to values"));
    };
    let known = |key: &str| {
        key == "model"
            || (model.fixed_schedule && key == TIMESTAMP_INPUT)
            || model.inputs.iter().any(|t| t.name == key)
    };
    check_keys(fields, &known, loc)?;
    let timestamp_ms = if model.fixed_schedule {
        let spec = ModelSpec::timestamp_spec();
        let tensor = read_tensor(fields, &spec, true, loc)?
            .ok_or_else(|| loc.error(format_args!("missing tensor {TIMESTAMP_INPUT}")))?;
        // The size check above guarantees one UINT64 element.
        let ms: [u8; 8] = tensor
            .data
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                loc.error(format_args!(
                    "tensor {TIMESTAMP_INPUT} must hold one UINT64"
                ))
            })?;
        Some(u64::from_le_bytes(ms))
    } else {
        None
    };
    let mut inputs = Vec::with_capacity(model.inputs.len());
    for spec in &model.inputs {
        match read_tensor(fields, spec, true, loc)? {
            Some(tensor) => inputs.push(tensor),
            None if spec.optional => {}
            None => return Err(loc.error(format_args!("missing tensor {}", spec.name))),
        }
    }
    let expected = expected
        .map(|value| read_expected(value, model, loc))
        .transpose()?;
    Ok(Step {
        inputs,
        expected,
        timestamp_ms,
    })
}

/// The outputs of one `validation_data` step (outputs left out are not checked).
fn read_expected(value: &Value, model: &ModelSpec, loc: Location<'_>) -> Result<Vec<TensorValue>> {
    let Value::Object(fields) = value else {
        return Err(loc.error("a validation_data step must be an object mapping output names"));
    };
    let known = |key: &str| key == "model" || model.outputs.iter().any(|t| t.name == key);
    check_keys(fields, &known, loc)?;
    let mut out = Vec::new();
    for spec in &model.outputs {
        if let Some(tensor) = read_tensor(fields, spec, false, loc)? {
            out.push(tensor);
        }
    }
    Ok(out)
}

fn check_keys(
    fields: &Map<String, Value>,
    known: &dyn Fn(&str) -> bool,
    loc: Location<'_>,
) -> Result<()> {
    match fields.keys().find(|k| !known(k)) {
        Some(key) => Err(loc.error(format_args!(
            "The input or output '{key}' is not found in the model configuration"
        ))),
        None => Ok(()),
    }
}

fn read_tensor(
    fields: &Map<String, Value>,
    spec: &TensorSpec,
    need_shape: bool,
    loc: Location<'_>,
) -> Result<Option<TensorValue>> {
    let Some(value) = fields.get(&spec.name) else {
        return Ok(None);
    };
    let (shape, data) = parse_tensor(value, spec, need_shape).map_err(|e| loc.error(e))?;
    Ok(Some(TensorValue {
        name: spec.name.clone(),
        datatype: spec.datatype,
        shape,
        data,
    }))
}

/// The model the fuzz target reads files against: one input per value form (variable dims,
/// BYTES, half precision, BOOL, a shape tensor) and one output.
pub fn fuzz_model(fixed_schedule: bool) -> ModelSpec {
    use crate::tensor::DataType;
    let tensor = |name: &str, datatype, dims: &[i64], optional, shape_tensor| TensorSpec {
        name: name.into(),
        datatype,
        dims: dims.to_vec(),
        default_shape: dims.iter().all(|&d| d >= 0).then(|| dims.to_vec()),
        optional,
        shape_tensor,
    };
    ModelSpec {
        inputs: vec![
            tensor("INT", DataType::I32, &[-1], false, false),
            tensor("FLOAT", DataType::F32, &[2], true, false),
            tensor("TEXT", DataType::Bytes, &[-1], true, false),
            tensor("HALF", DataType::F16, &[1], true, false),
            tensor("FLAG", DataType::Bool, &[1], true, false),
            tensor("SHAPE", DataType::I64, &[1], true, true),
        ],
        outputs: vec![tensor("OUT", DataType::U8, &[-1], true, false)],
        batched: true,
        fixed_schedule,
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
