//! gRPC tensors in shared memory: `shared_memory_*` entries of a tensor's `parameters` map.

use std::collections::HashMap;

use inferperf_wire::protocol::grpc::pb::inference as pb;
use pb::infer_parameter::ParameterChoice as P;

use super::{ShmRef, ShmRegions};

/// The tensor's region reference, if its parameters name one.
fn shm_ref(
    tensor: &str,
    params: &HashMap<String, pb::InferParameter>,
) -> Result<Option<ShmRef>, String> {
    let Some(region) = params.get("shared_memory_region") else {
        return Ok(None);
    };
    let Some(P::StringParam(region)) = &region.parameter_choice else {
        return Err(format!(
            "tensor '{tensor}': shared_memory_region must be a string parameter"
        ));
    };
    let number = |key: &str| -> Result<Option<u64>, String> {
        match params.get(key).and_then(|p| p.parameter_choice.as_ref()) {
            None => Ok(None),
            Some(P::Int64Param(v)) => u64::try_from(*v)
                .map(Some)
                .map_err(|_| format!("tensor '{tensor}': {key} must not be negative")),
            Some(P::Uint64Param(v)) => Ok(Some(*v)),
            Some(_) => Err(format!("tensor '{tensor}': {key} must be an integer")),
        }
    };
    let region = serde_json::Value::String(region.clone());
    ShmRef::parse(
        tensor,
        Some(&region),
        number("shared_memory_byte_size")?,
        number("shared_memory_offset")?,
    )
}

/// A copy of `req` whose shared memory inputs are read into `raw_input_contents`; `None`
/// when no input is in shared memory. Mixing with typed `contents` is refused.
pub fn stage_grpc_inputs(
    regions: &ShmRegions,
    req: &pb::ModelInferRequest,
) -> Result<Option<pb::ModelInferRequest>, String> {
    let refs: Vec<Option<ShmRef>> = req
        .inputs
        .iter()
        .map(|i| shm_ref(&i.name, &i.parameters))
        .collect::<Result<_, _>>()?;
    if refs.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut raw = Vec::with_capacity(req.inputs.len());
    for (i, (input, r)) in req.inputs.iter().zip(&refs).enumerate() {
        match (r, req.raw_input_contents.get(i)) {
            (Some(r), _) => raw.push(regions.read(r)?),
            (None, Some(bytes)) => raw.push(bytes.clone()),
            (None, None) => {
                return Err(format!(
                    "input '{}': with inputs in shared memory, the others must be sent as \
                     raw_input_contents",
                    input.name
                ))
            }
        }
    }
    let mut staged = req.clone();
    staged.raw_input_contents = raw;
    Ok(Some(staged))
}

/// Moves the outputs the request put in shared memory from `response` into their regions,
/// leaving an empty `raw_output_contents` entry in their place (so positions still match).
pub fn write_grpc_outputs(
    regions: &ShmRegions,
    req: &pb::ModelInferRequest,
    response: &mut pb::ModelInferResponse,
) -> Result<(), String> {
    for o in &req.outputs {
        let Some(r) = shm_ref(&o.name, &o.parameters)? else {
            continue;
        };
        let Some(at) = response.outputs.iter().position(|t| t.name == o.name) else {
            continue;
        };
        let Some(data) = response.raw_output_contents.get_mut(at) else {
            continue;
        };
        regions.write(&o.name, &r, data)?;
        data.clear();
    }
    Ok(())
}
