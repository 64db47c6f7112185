//! `--shared-memory system|cuda`: the load plan whose requests reference pre-staged regions
//! instead of carrying tensor bytes.
//!
//! Inputs: one region per (input, stream, step), holding the batch that starts at that step.
//! Outputs: one region per output per in-flight request slot (not one region shared by every
//! request as perf_analyzer has). The slot count K is the most requests the load
//! may have in flight (the concurrency range's end, the periodic range's end, or
//! `--max-inflight` in rate modes), and each input entry is pre-encoded K times, variant `k`
//! naming slot `k`'s output regions; the engine sends the variant of the slot a request goes
//! on (`engine::slots`). No two requests in flight share an output region, so with validation
//! data (system regions) the worker copies the slot's regions at completion and the outputs
//! are checked (`shm::validate`).

use std::sync::Arc;

use super::ShmApi;
use crate::config::{Config, LoadMode, SharedMemory};
use crate::engine::slots::{OutputSlots, OutputView};
use crate::error::{Error, Result};
use crate::inputs::{batch, batch_expected, request_starts, InputSet, TensorValue};
use crate::service::triton_http::{self, ModelConfig, ModelMetadata, TensorMeta};
use crate::tensor::{DataType, InputTensor};
use crate::transport::TlsClient;

use super::client::{Control, SessionRegion, ShmSession};
use super::encode::{encode_grpc, encode_http, TensorRef};
use super::system::region_name;

/// The stream non-sequence models read (as in a plan without shared memory).
const STREAM: usize = 0;

/// Most in-flight slots a run may have: each costs one registered region per output.
pub const MAX_SLOTS: usize = 16_384;

/// The server and model the regions are set up for.
pub struct ShmTarget<'a> {
    /// `host:port` of the server.
    pub host: &'a str,
    pub tls: Option<&'a TlsClient>,
    pub meta: &'a ModelMetadata,
    pub config: &'a ModelConfig,
    /// The kind's shared memory API.
    pub api: ShmApi,
}

/// What `build` hands the run: the requests and, per input entry, what the reports and
/// validation need (as a load plan has them), the session holding the registered regions
/// (it must live until the load has stopped: dropping it unregisters and unlinks them),
/// and the slots the engine picks request variants by.
pub struct ShmPlan {
    /// K variants per input entry: variant k of entry e at `e * K + k`.
    pub requests: Vec<Vec<u8>>,
    /// The export's `request_inputs` object of each entry.
    pub step_inputs: Vec<String>,
    /// Validation data of each entry's batch.
    pub expected: Vec<Option<Vec<TensorValue>>>,
    /// `--fixed-schedule` send time of each entry, in ms.
    pub timestamps_ms: Vec<Option<u64>>,
    pub session: ShmSession,
    pub slots: Arc<OutputSlots>,
}

/// The most requests the load may have in flight at once, which is the number of output
/// slots; a usage error when the flags leave it unbounded.
pub fn slot_count(cfg: &Config) -> Result<usize> {
    let most = match cfg.load_mode {
        LoadMode::Concurrency if cfg.concurrency.end == 0 => {
            return Err(Error::usage(
                "--shared-memory needs a concurrency range with an end (each request in \
                 flight gets its own output regions)",
            ))
        }
        LoadMode::Concurrency => cfg.concurrency.end.max(cfg.concurrency.start),
        LoadMode::Periodic => cfg.periodic.end.max(cfg.periodic.start),
        LoadMode::RequestRate | LoadMode::Intervals | LoadMode::FixedSchedule => {
            cfg.max_inflight.ok_or_else(|| {
                Error::usage(
                    "--shared-memory in a request-rate, request-intervals or \
                     fixed-schedule run needs --max-inflight N (each request in flight gets \
                     its own output regions)",
                )
            })?
        }
    };
    match usize::try_from(most) {
        Ok(k @ 1..=MAX_SLOTS) => Ok(k),
        _ => Err(Error::usage(format!(
            "--shared-memory: {most} requests in flight need as many output regions \
             per output; between 1 and {MAX_SLOTS} are supported"
        ))),
    }
}

/// Builds the requests, registers their regions and sets up the slots.
pub fn build(cfg: &Config, target: &ShmTarget<'_>, set: &InputSet) -> Result<ShmPlan> {
    if target.config.sequence_batching {
        return Err(Error::usage(
            "--shared-memory system is not supported yet for sequence models (inferperf)",
        ));
    }
    let k = slot_count(cfg)?;
    let batched = target.config.max_batch_size > 0;
    let b = usize::try_from(cfg.batch_size)
        .map_err(|_| Error::usage(format!("-b {}: too large", cfg.batch_size)))?;
    let steps = set.streams.get(STREAM).map_or(&[][..], Vec::as_slice);
    let starts = request_starts(steps.len(), b);
    if starts.is_empty() {
        return Err(Error::usage("--input-data: the data has no steps to send"));
    }
    let mut entries = Vec::with_capacity(starts.len());
    for &first in &starts {
        let inputs = batch(set, STREAM, first, b, batched)?;
        let expected = batch_expected(set, STREAM, first, b, batched)?;
        entries.push((first, inputs, expected));
    }
    let validate = entries.iter().any(|(_, _, e)| e.is_some());
    if validate && cfg.streaming {
        return Err(Error::usage(
            "--shared-memory: validation data with --streaming is not supported yet \
             (inferperf); remove the validation data or --streaming",
        ));
    }
    if validate && cfg.shared_memory == SharedMemory::Cuda {
        return Err(Error::usage(
            "--shared-memory cuda: validation data cannot be checked yet, the outputs stay in \
             device memory (inferperf); remove the validation data or use --shared-memory system",
        ));
    }
    let control = Control::connect(target.host, target.api, target.tls)?;
    let mut session = ShmSession::for_run(control, cfg)?;
    let SlotRegions {
        refs: slot_refs,
        views,
    } = output_slots(cfg, target, &mut session, k, validate)?;
    let mut requests = Vec::with_capacity(entries.len() * k);
    let mut step_inputs = Vec::with_capacity(entries.len());
    let mut expected_outputs = Vec::with_capacity(entries.len());
    let mut timestamps_ms = Vec::with_capacity(entries.len());
    for (first, inputs, expected) in entries {
        let in_refs = stage_inputs(&mut session, first, &inputs)?;
        // Variant k of this entry at index entry * K + k (`OutputSlots::request_index`).
        for out_refs in &slot_refs {
            requests.push(encode(cfg, target, &inputs, &in_refs, out_refs)?);
        }
        step_inputs.push(triton_http::export_inputs_json(
            cfg.profile_export_file.is_some(),
            &inputs,
        ));
        expected_outputs.push(expected);
        timestamps_ms.push(steps[first].timestamp_ms);
    }
    let slots = Arc::new(OutputSlots::new(k, views)?);
    Ok(ShmPlan {
        requests,
        step_inputs,
        expected: expected_outputs,
        timestamps_ms,
        session,
        slots,
    })
}

fn encode(
    cfg: &Config,
    target: &ShmTarget<'_>,
    inputs: &[InputTensor],
    in_refs: &[TensorRef],
    out_refs: &[TensorRef],
) -> Result<Vec<u8>> {
    match target.api {
        ShmApi::Http => encode_http(cfg, target.host, inputs, in_refs, out_refs),
        ShmApi::Grpc => encode_grpc(cfg, inputs, in_refs, out_refs),
    }
}

/// One region per input of the entry that starts at step `first`, holding its batch.
fn stage_inputs(
    session: &mut ShmSession,
    first: usize,
    inputs: &[InputTensor],
) -> Result<Vec<TensorRef>> {
    let mut refs = Vec::with_capacity(inputs.len());
    for t in inputs {
        let name = region_name(&format!("{}_{STREAM}_{first}", t.name));
        let region = session.add(&name, Some(&t.data), t.data.len())?;
        refs.push(TensorRef::new(&t.name, region, t.data.len()));
    }
    Ok(refs)
}

/// Per slot (outer index), its output regions in the model's output order.
struct SlotRegions {
    refs: Vec<Vec<TensorRef>>,
    /// Empty when the outputs are not captured.
    views: Vec<Vec<OutputView>>,
}

/// Per slot, the references to its output regions (in the model's output order) and, when
/// `capture`, read-only views of them for the workers.
fn output_slots(
    cfg: &Config,
    target: &ShmTarget<'_>,
    session: &mut ShmSession,
    k: usize,
    capture: bool,
) -> Result<SlotRegions> {
    let batched = target.config.max_batch_size > 0;
    let b = usize::try_from(cfg.batch_size).unwrap_or(usize::MAX);
    let sizes: Vec<usize> = target
        .meta
        .outputs
        .iter()
        .map(|o| output_region_size(o, batched, b, cfg.output_shm_size))
        .collect::<Result<_>>()?;
    let mut refs = Vec::with_capacity(k);
    let mut views = Vec::with_capacity(if capture { k } else { 0 });
    for slot in 0..k {
        let mut slot_refs = Vec::with_capacity(sizes.len());
        let mut slot_views: Vec<OutputView> = Vec::new();
        for (o, &size) in target.meta.outputs.iter().zip(&sizes) {
            let name = region_name(&format!("{}_s{slot}", o.name));
            let region = session.add(&name, None, size)?;
            if capture {
                let Some(SessionRegion::System(region)) = session.regions().last() else {
                    return Err(Error::generic(
                        "shared memory: outputs can be read back from system regions only",
                    ));
                };
                slot_views.push(Box::new(region.view()?));
            }
            slot_refs.push(TensorRef::new(&o.name, region, size));
        }
        refs.push(slot_refs);
        if capture {
            views.push(slot_views);
        }
    }
    Ok(SlotRegions { refs, views })
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
    use crate::config::ConcurrencyRange;

    fn meta(datatype: DataType, shape: &[i64]) -> TensorMeta {
        TensorMeta {
            name: "OUT".into(),
            datatype,
            shape: shape.to_vec(),
        }
    }

    #[test]
    fn slot_count_is_the_most_requests_in_flight() {
        let range = |start, end| ConcurrencyRange {
            start,
            end,
            step: 1,
        };
        let rate = |max_inflight| Config {
            load_mode: LoadMode::RequestRate,
            max_inflight,
            ..Config::default()
        };
        // (config, slots or the error's words)
        let rows: Vec<(Config, std::result::Result<usize, &str>)> = vec![
            (
                Config {
                    concurrency: range(1, 8),
                    ..Config::default()
                },
                Ok(8),
            ),
            (
                Config {
                    concurrency: range(4, 0),
                    ..Config::default()
                },
                Err("with an end"),
            ),
            (
                Config {
                    load_mode: LoadMode::Periodic,
                    periodic: range(2, 10),
                    ..Config::default()
                },
                Ok(10),
            ),
            (rate(Some(3)), Ok(3)),
            (rate(None), Err("needs --max-inflight")),
            (rate(Some(MAX_SLOTS as u64 + 1)), Err("between 1 and")),
            (
                Config {
                    load_mode: LoadMode::FixedSchedule,
                    ..Config::default()
                },
                Err("needs --max-inflight"),
            ),
        ];
        for (cfg, want) in rows {
            let got = slot_count(&cfg);
            match (want, got) {
                (Ok(w), Ok(g)) => assert_eq!(g, w),
                (Err(w), Err(e)) => {
                    assert!(e.msg.contains(w), "{e}");
                    assert_eq!(e.kind, crate::error::ErrorKind::Usage);
                }
                (w, g) => panic!("{:?}: want {w:?}, got {g:?}", cfg.load_mode),
            }
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
