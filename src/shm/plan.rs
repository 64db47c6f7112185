//! `--shared-memory system`: the load plan whose requests reference pre-staged regions
//! instead of carrying tensor bytes (spec §6.1).
//!
//! Inputs: one region per (input, stream, step), holding the batch that starts at that step.
//! Outputs: one region per output per pre-encoded request (not one shared region as
//! perf_analyzer has), so responses to different data steps never overwrite each other.
//! Requests of the same entry in flight at once still share their output regions: the
//! engine sends a fixed byte string per entry, whichever slot sends it.

use crate::config::{Config, Protocol};
use crate::error::{Error, Result};
use crate::inputs::{batch, batch_expected, InputSet};
use crate::run::plan::{request_starts, wire, LoadPlan};
use crate::run::setup::{SetupClient, Target};
use crate::service::triton_http::{self, TensorMeta};
use crate::tensor::DataType;

use super::client::ShmSession;
use super::encode::{encode_grpc, encode_http, TensorRef};
use super::system::region_name;

/// The stream non-sequence models read (as `run::plan`).
const STREAM: usize = 0;

/// Builds the plan and the session holding its registered regions; the session must live
/// until the load has stopped (dropping it unregisters and unlinks the regions).
pub fn build(cfg: &Config, target: &Target, set: &InputSet) -> Result<(LoadPlan, ShmSession)> {
    if target.config.sequence_batching {
        return Err(Error::usage(
            "--shared-memory system is not supported yet for sequence models (inferperf)",
        ));
    }
    let batched = target.config.max_batch_size > 0;
    let b = usize::try_from(cfg.batch_size)
        .map_err(|_| Error::usage(format!("-b {}: too large", cfg.batch_size)))?;
    let steps = set.streams.get(STREAM).map_or(&[][..], Vec::as_slice);
    let starts = request_starts(steps.len(), b);
    if starts.is_empty() {
        return Err(Error::usage("--input-data: the data has no steps to send"));
    }
    let control = SetupClient::connect(&target.host, cfg, target.tls.as_ref())?;
    let mut session = ShmSession::for_run(control, cfg)?;
    let output_sizes: Vec<usize> = target
        .meta
        .outputs
        .iter()
        .map(|o| output_region_size(o, batched, b, cfg.output_shm_size))
        .collect::<Result<_>>()?;
    let mut plan = LoadPlan {
        requests: Vec::with_capacity(starts.len()),
        wire: wire(cfg, target),
        step_inputs: Vec::with_capacity(starts.len()),
        expected: Vec::with_capacity(starts.len()),
        timestamps_ms: Vec::with_capacity(starts.len()),
        sequences: None,
    };
    for (entry, first) in starts.into_iter().enumerate() {
        let inputs = batch(set, STREAM, first, b, batched)?;
        if batch_expected(set, STREAM, first, b, batched)?.is_some() {
            return Err(Error::usage(
                "--shared-memory system: validation data cannot be checked, the outputs stay \
                 in shared memory; remove the validation data",
            ));
        }
        let mut in_refs = Vec::with_capacity(inputs.len());
        for t in &inputs {
            let name = region_name(&format!("{}_{STREAM}_{first}", t.name));
            let region = session.add(&name, Some(&t.data), t.data.len())?;
            in_refs.push(TensorRef::new(&t.name, region, t.data.len()));
        }
        let mut out_refs = Vec::with_capacity(output_sizes.len());
        for (o, &size) in target.meta.outputs.iter().zip(&output_sizes) {
            let name = region_name(&format!("{}_{entry}", o.name));
            let region = session.add(&name, None, size)?;
            out_refs.push(TensorRef::new(&o.name, region, size));
        }
        let request = match cfg.protocol {
            Protocol::Http => encode_http(cfg, &target.host, &inputs, &in_refs, &out_refs)?,
            Protocol::Grpc => encode_grpc(cfg, &inputs, &in_refs, &out_refs)?,
        };
        plan.requests.push(request);
        plan.step_inputs.push(triton_http::inputs_json(&inputs));
        plan.expected.push(None);
        plan.timestamps_ms.push(steps[first].timestamp_ms);
    }
    Ok((plan, session))
}

/// Bytes of an output's region: the batch-1 size times the batch, or
/// `--output-shared-memory-size` times the batch when the size is not known (a dynamic
/// dimension or BYTES).
pub fn output_region_size(
    output: &TensorMeta,
    batched: bool,
    batch: usize,
    unknown_size: u64,
) -> Result<usize> {
    let dims = if batched && !output.shape.is_empty() {
        &output.shape[1..]
    } else {
        &output.shape[..]
    };
    let too_big = || {
        Error::usage(format!(
            "output '{}': shared memory region size overflows",
            output.name
        ))
    };
    let per_item = if output.datatype == DataType::Bytes || dims.iter().any(|&d| d < 0) {
        usize::try_from(unknown_size).map_err(|_| too_big())?
    } else {
        dims.iter()
            .try_fold(output.datatype.size(), |acc, &d| {
                acc.checked_mul(usize::try_from(d).ok()?)
            })
            .ok_or_else(too_big)?
    };
    per_item.checked_mul(batch.max(1)).ok_or_else(too_big)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(datatype: DataType, shape: &[i64]) -> TensorMeta {
        TensorMeta {
            name: "OUT".into(),
            datatype,
            shape: shape.to_vec(),
        }
    }

    #[test]
    fn output_region_sizes() {
        // (datatype, shape, batched, batch, expected bytes)
        let rows: &[(DataType, &[i64], bool, usize, usize)] = &[
            (DataType::F32, &[-1, 16], true, 1, 64),
            (DataType::F32, &[-1, 16], true, 4, 256),
            (DataType::I32, &[16], false, 1, 64),
            (DataType::I64, &[], false, 1, 8),
            (DataType::F32, &[-1, -1], true, 2, 2000),
            (DataType::Bytes, &[-1, 1], true, 3, 3000),
            (DataType::I32, &[-1], false, 1, 1000),
        ];
        for &(dt, shape, batched, b, want) in rows {
            let got = output_region_size(&meta(dt, shape), batched, b, 1000).unwrap();
            assert_eq!(got, want, "{dt:?} {shape:?} batched {batched} b {b}");
        }
        let huge = meta(DataType::F64, &[i64::MAX, i64::MAX]);
        assert!(output_region_size(&huge, false, 1, 1000).is_err());
    }
}
