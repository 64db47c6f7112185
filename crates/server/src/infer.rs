//! `POST .../infer`: parse and validate a KServe v2 request (JSON header plus optional binary
//! tensor data), run the model, and encode the response, with Triton-like error messages.

use std::borrow::Cow;
use std::io::Write;
use std::time::Instant;

use serde::Deserialize;
use serde_json::Value;

use super::execute::{execute, Env};
use super::json_data::{json_to_bytes, write_json_data};
use super::models::{ModelDef, TensorData, TensorSpec, MODEL_VERSION};
use super::reply::InferDone;
use super::sequence::SeqControl;
use super::shm::{ShmRef, ShmRegions};
use inferperf_wire::tensor::{split_bytes_elements, DataType};

#[derive(Deserialize)]
struct RequestJson<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    /// `binary_data_output`, the sequence controls, and anything else (ignored).
    #[serde(default)]
    parameters: Option<serde_json::Map<String, Value>>,
    #[serde(borrow)]
    inputs: Vec<InputJson<'a>>,
    #[serde(borrow, default)]
    outputs: Option<Vec<OutputJson<'a>>>,
}

#[derive(Deserialize)]
struct InputJson<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    datatype: Cow<'a, str>,
    shape: Vec<i64>,
    #[serde(default)]
    parameters: Option<TensorParams>,
    #[serde(default)]
    data: Option<Value>,
}

#[derive(Deserialize)]
struct OutputJson<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    parameters: Option<TensorParams>,
}

#[derive(Deserialize, Default)]
struct TensorParams {
    #[serde(default)]
    binary_data_size: Option<usize>,
    #[serde(default)]
    binary_data: Option<bool>,
    #[serde(default)]
    shared_memory_region: Option<Value>,
    #[serde(default)]
    shared_memory_byte_size: Option<u64>,
    #[serde(default)]
    shared_memory_offset: Option<u64>,
}

impl TensorParams {
    fn shm(&self, tensor: &str) -> Result<Option<ShmRef>, String> {
        let (region, size) = (
            self.shared_memory_region.as_ref(),
            self.shared_memory_byte_size,
        );
        ShmRef::parse(tensor, region, size, self.shared_memory_offset)
    }
}

fn elapsed_ns(since: Instant) -> u64 {
    since.elapsed().as_nanos() as u64
}

/// Runs one infer request against `model`, writing the response body into `out`.
/// `Err` carries the message for a 400 `{"error":...}`.
pub fn infer(
    env: &mut Env,
    model: &ModelDef,
    body: &[u8],
    header_len: Option<usize>,
    out: &mut Vec<u8>,
) -> Result<InferDone, String> {
    let start = Instant::now();
    if model.decoupled {
        return Err(decoupled_refusal(model));
    }
    let (json, binary) = match header_len {
        Some(n) if n > body.len() => {
            return Err(format!(
                "Inference-Header-Content-Length {n} exceeds the request body size {}",
                body.len()
            ))
        }
        Some(n) => body.split_at(n),
        None => (body, &[][..]),
    };
    let mut req: RequestJson = serde_json::from_slice(json)
        .map_err(|e| format!("failed to parse the request JSON buffer: {e}"))?;
    let staged;
    let binary = match stage_shm_inputs(&env.shared.shm, &mut req.inputs, binary)? {
        Some(bytes) => {
            staged = bytes;
            &staged[..]
        }
        None => binary,
    };
    let (inputs, batch_size) = decode_inputs(model, &req.inputs, binary)?;
    let chosen = choose_outputs(model, &req)?;
    let shm_out = shm_outputs(&req, chosen.len())?;
    let seq = if model.sequence {
        SeqControl::from_json(req.parameters.as_ref())?
    } else {
        SeqControl::default()
    };
    let input_bytes = inputs.iter().map(|t| t.data.len() as u64).sum();
    let computed = Instant::now();
    let input_ns = (computed - start).as_nanos() as u64;
    let ran = execute(env, model, inputs, batch_size, &seq)?;
    let outputs = ran.outputs;
    let encoding = Instant::now();
    let infer_ns = (encoding - computed).as_nanos() as u64;
    for (&(i, _), r) in chosen.iter().zip(&shm_out) {
        if let Some(r) = r {
            env.shared
                .shm
                .write(model.outputs[i].name, r, &outputs[i].data)?;
        }
    }
    let id = req.id.as_deref();
    let header_len = encode_response(model, id, &chosen, &shm_out, &outputs, out);
    Ok(InferDone {
        batch_size,
        input_bytes,
        input_ns,
        infer_ns,
        output_ns: elapsed_ns(encoding),
        header_len,
        composing_delay: ran.composing_delay,
    })
}

/// Inputs in shared memory become binary inputs: their bytes, read from the regions, are
/// spliced into a copy of the binary section at their place in input order. `None` when no
/// input is in shared memory.
fn stage_shm_inputs(
    regions: &ShmRegions,
    inputs: &mut [InputJson],
    binary: &[u8],
) -> Result<Option<Vec<u8>>, String> {
    let in_shm =
        |i: &InputJson| (i.parameters.as_ref()).is_some_and(|p| p.shared_memory_region.is_some());
    if !inputs.iter().any(in_shm) {
        return Ok(None);
    }
    let (mut staged, mut offset) = (Vec::new(), 0usize);
    for input in inputs.iter_mut() {
        let Some(p) = input.parameters.as_mut() else {
            continue;
        };
        if let Some(r) = p.shm(&input.name)? {
            let bytes = regions.read(&r)?;
            (p.binary_data_size, p.shared_memory_region) = (Some(bytes.len()), None);
            staged.extend_from_slice(&bytes);
        } else if let Some(size) = p.binary_data_size {
            let chunk = (offset.checked_add(size))
                .and_then(|end| binary.get(offset..end))
                .ok_or_else(|| {
                    format!("unexpected end of binary data for input '{}'", input.name)
                })?;
            staged.extend_from_slice(chunk);
            offset += size;
        }
    }
    Ok(Some(staged))
}

/// The region of each chosen output (in `choose_outputs` order) the request put in shared
/// memory; all `None` when the request lists no outputs.
fn shm_outputs(req: &RequestJson, chosen: usize) -> Result<Vec<Option<ShmRef>>, String> {
    match req.outputs.as_deref() {
        Some(list) if !list.is_empty() => list
            .iter()
            .map(|o| o.parameters.as_ref().map_or(Ok(None), |p| p.shm(&o.name)))
            .collect(),
        _ => Ok(vec![None; chosen]),
    }
}

/// Why a one-response endpoint (HTTP infer, gRPC ModelInfer) refuses a decoupled model.
pub fn decoupled_refusal(model: &ModelDef) -> String {
    format!(
        "model '{}' is decoupled (it sends any number of responses per request): \
         use the gRPC ModelStreamInfer stream",
        model.name
    )
}

pub fn shape_text(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// The header of one request input, whichever protocol carried it (HTTP JSON or gRPC).
pub trait WireInput {
    fn name(&self) -> &str;
    /// The v2 datatype name as the request wrote it, e.g. `FP32`.
    fn datatype(&self) -> &str;
    fn shape(&self) -> &[i64];
}

impl WireInput for InputJson<'_> {
    fn name(&self) -> &str {
        &self.name
    }
    fn datatype(&self) -> &str {
        &self.datatype
    }
    fn shape(&self) -> &[i64] {
        &self.shape
    }
}

/// Decodes the request's inputs into model input order; returns them and the batch size.
fn decode_inputs<'a>(
    model: &ModelDef,
    inputs: &[InputJson<'a>],
    binary: &'a [u8],
) -> Result<(Vec<TensorData<'a>>, usize), String> {
    let mut offset = 0usize;
    let decoded = decode_with(model, inputs, |_, spec, input| {
        input_data(spec, input, binary, &mut offset)
    })?;
    if offset != binary.len() {
        let extra = binary.len() - offset;
        return Err(format!(
            "unexpected additional input data for model '{}': {extra} bytes",
            model.name
        ));
    }
    Ok(decoded)
}

/// Validates a request's inputs against `model` (names, count, duplicates, datatypes, shapes,
/// batch size, byte sizes) and puts them into model input order; returns them and the batch
/// size. `data(i, spec, input)` supplies the bytes of request input `i`, in request order.
pub fn decode_with<'a, T: WireInput>(
    model: &ModelDef,
    inputs: &[T],
    mut data: impl FnMut(usize, &TensorSpec, &T) -> Result<Cow<'a, [u8]>, String>,
) -> Result<(Vec<TensorData<'a>>, usize), String> {
    let m = model.name;
    for input in inputs {
        if !model.inputs.iter().any(|s| s.name == input.name()) {
            return Err(format!(
                "unexpected inference input '{}' for model '{m}'",
                input.name()
            ));
        }
    }
    if inputs.len() != model.inputs.len() {
        let (want, got) = (model.inputs.len(), inputs.len());
        return Err(format!(
            "expected {want} inputs but got {got} inputs for model '{m}'"
        ));
    }
    let mut slots: Vec<Option<TensorData<'a>>> = model.inputs.iter().map(|_| None).collect();
    let mut batch: Option<usize> = None;
    for (i, input) in inputs.iter().enumerate() {
        let Some(slot) = model.inputs.iter().position(|s| s.name == input.name()) else {
            continue;
        };
        if slots[slot].is_some() {
            return Err(format!(
                "input '{}' appears more than once in the request",
                input.name()
            ));
        }
        let spec = &model.inputs[slot];
        let input_batch = check_signature(model, spec, input)?;
        if batch.is_some_and(|b| b != input_batch) {
            return Err(format!(
                "input '{}' batch size does not match other inputs for '{m}'",
                input.name()
            ));
        }
        batch = Some(input_batch);
        let bytes = data(i, spec, input)?;
        check_size(model, spec, input.shape(), &bytes)?;
        slots[slot] = Some(TensorData {
            shape: input.shape().to_vec(),
            data: bytes,
        });
    }
    let tensors = slots.into_iter().flatten().collect();
    Ok((tensors, batch.unwrap_or(1)))
}

/// Checks datatype, shape and batch size; returns the batch size (1 if the model does not batch).
fn check_signature(
    model: &ModelDef,
    spec: &TensorSpec,
    input: &impl WireInput,
) -> Result<usize, String> {
    let (m, name) = (model.name, input.name());
    let shape = input.shape();
    let datatype = DataType::parse(input.datatype())
        .map_err(|_| format!("invalid datatype '{}' for input '{name}'", input.datatype()))?;
    if datatype != spec.datatype {
        return Err(format!(
            "inference input '{name}' data-type is '{}', but model '{m}' expects '{}'",
            datatype.name(),
            spec.datatype.name()
        ));
    }
    let want = model.wire_dims(spec);
    let fits = shape.len() == want.len()
        && shape
            .iter()
            .zip(&want)
            .all(|(&got, &w)| got >= 0 && (w == -1 || got == w));
    if !fits {
        return Err(format!(
            "unexpected shape for input '{name}' for model '{m}'. Expected {}, got {}",
            shape_text(&want),
            shape_text(shape)
        ));
    }
    if model.max_batch_size == 0 {
        return Ok(1);
    }
    let batch = shape[0] as usize;
    if batch > model.max_batch_size {
        return Err(format!(
            "inference request batch-size must be <= {} for '{m}'",
            model.max_batch_size
        ));
    }
    if batch == 0 {
        return Err(format!(
            "inference request batch-size must be between 1 and {} for '{m}', got 0",
            model.max_batch_size
        ));
    }
    Ok(batch)
}

/// Takes an input's bytes from the binary section or converts its JSON `data`.
fn input_data<'a>(
    spec: &TensorSpec,
    input: &InputJson,
    binary: &'a [u8],
    offset: &mut usize,
) -> Result<Cow<'a, [u8]>, String> {
    let name = &input.name;
    let params = input.parameters.as_ref();
    if params.is_some_and(|p| p.shared_memory_region.is_some()) {
        return Err(format!(
            "input '{name}': shared memory is not supported by inferperf serve"
        ));
    }
    match (params.and_then(|p| p.binary_data_size), &input.data) {
        (Some(_), Some(_)) => Err(format!("input '{name}' has both binary_data_size and data")),
        (Some(size), None) => {
            let left = binary.len() - *offset;
            if size > left {
                return Err(format!(
                    "unexpected end of binary data for input '{name}': needs {size} bytes, \
                     {left} remain"
                ));
            }
            let data = &binary[*offset..*offset + size];
            *offset += size;
            Ok(Cow::Borrowed(data))
        }
        (None, Some(data)) => json_to_bytes(spec.datatype, data, name).map(Cow::Owned),
        (None, None) => Err(format!(
            "input '{name}' has neither data nor binary_data_size"
        )),
    }
}

/// Checks the byte size (fixed-size types) or the element framing (BYTES) against the shape.
fn check_size(
    model: &ModelDef,
    spec: &TensorSpec,
    shape: &[i64],
    data: &[u8],
) -> Result<(), String> {
    let (m, name) = (model.name, spec.name);
    // Shapes come from the peer: a product that overflows is an error, not a panic.
    let too_big = || format!("shape of input '{name}' for model '{m}' is too large");
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
        .ok_or_else(too_big)?;
    if spec.datatype == DataType::Bytes {
        let elements = split_bytes_elements(data)
            .ok_or_else(|| format!("invalid BYTES framing in input '{name}' for model '{m}'"))?;
        if elements.len() != count {
            return Err(format!(
                "expected {count} string elements for inference input '{name}' for model '{m}', \
                 got {}",
                elements.len()
            ));
        }
        return Ok(());
    }
    let expected = count
        .checked_mul(spec.datatype.size())
        .ok_or_else(too_big)?;
    if data.len() != expected {
        return Err(format!(
            "input byte size mismatch for input '{name}' for model '{m}'. Expected {expected}, \
             got {}",
            data.len()
        ));
    }
    Ok(())
}

/// Which outputs the response carries, as (index into the model's outputs, binary?), in the
/// order the request lists them (all outputs when it lists none).
fn choose_outputs(model: &ModelDef, req: &RequestJson) -> Result<Vec<(usize, bool)>, String> {
    let default_binary = req
        .parameters
        .as_ref()
        .and_then(|p| p.get("binary_data_output"))
        .is_some_and(|v| v.as_bool() == Some(true));
    let list = match req.outputs.as_deref() {
        None | Some([]) => {
            return Ok((0..model.outputs.len())
                .map(|i| (i, default_binary))
                .collect())
        }
        Some(list) => list,
    };
    let mut chosen = Vec::with_capacity(list.len());
    for o in list {
        let Some(i) = model.outputs.iter().position(|s| s.name == o.name) else {
            return Err(format!(
                "unexpected inference output '{}' for model '{}'",
                o.name, model.name
            ));
        };
        let params = o.parameters.as_ref();
        // An output in shared memory has no data in the response at all.
        let in_shm = params.is_some_and(|p| p.shared_memory_region.is_some());
        let binary = params.and_then(|p| p.binary_data).unwrap_or(default_binary);
        chosen.push((i, binary && !in_shm));
    }
    Ok(chosen)
}

/// Writes the response JSON (and binary data); returns the JSON length if any output is binary.
fn encode_response(
    model: &ModelDef,
    id: Option<&str>,
    chosen: &[(usize, bool)],
    shm_out: &[Option<ShmRef>],
    outputs: &[TensorData],
    out: &mut Vec<u8>,
) -> Option<usize> {
    out.extend_from_slice(b"{\"model_name\":\"");
    out.extend_from_slice(model.name.as_bytes());
    out.extend_from_slice(b"\",\"model_version\":\"");
    out.extend_from_slice(MODEL_VERSION.as_bytes());
    out.push(b'"');
    if let Some(id) = id {
        out.extend_from_slice(b",\"id\":");
        let _ = serde_json::to_writer(&mut *out, id);
    }
    out.extend_from_slice(b",\"outputs\":[");
    for (n, &(i, binary)) in chosen.iter().enumerate() {
        let spec = &model.outputs[i];
        let tensor = &outputs[i];
        if n > 0 {
            out.push(b',');
        }
        let _ = write!(
            out,
            "{{\"name\":\"{}\",\"datatype\":\"{}\",\"shape\":{}",
            spec.name,
            spec.datatype.name(),
            shape_text(&tensor.shape)
        );
        if shm_out.get(n).is_some_and(Option::is_some) {
            out.push(b'}');
        } else if binary {
            let _ = write!(
                out,
                ",\"parameters\":{{\"binary_data_size\":{}}}}}",
                tensor.data.len()
            );
        } else {
            out.extend_from_slice(b",\"data\":");
            write_json_data(out, spec.datatype, &tensor.data);
            out.push(b'}');
        }
    }
    out.extend_from_slice(b"]}");
    if !chosen.iter().any(|&(_, binary)| binary) {
        return None;
    }
    let json_len = out.len();
    for &(i, _) in chosen.iter().filter(|(_, binary)| *binary) {
        out.extend_from_slice(&outputs[i].data);
    }
    Some(json_len)
}

#[cfg(test)]
#[path = "infer_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "infer_robust_tests.rs"]
mod robust_tests;
