//! The bytes a run sends: the input data cut into batches, each pre-encoded once by the
//! run's service kind. The engine cycles through `LoadPlan::requests` (worker i starts at entry i
//! and takes the next entry for each request it sends).
//!
//! Order: request k is the batch that starts at step `(k * b) % steps`, so
//! cycling through the list visits the steps as perf_analyzer's `data_step_id * batch_size`
//! does. The list stops where that pattern repeats (`steps / gcd(steps, b)` entries).
//! Non-sequence models read stream 0 only, as perf_analyzer does; further streams of
//! multi-stream data are for sequence models.

use std::sync::Arc;

use crate::config::Config;
use crate::engine::seq_feed::SeqPlan;
use crate::engine::sequence::{SeqConfig, UNBOUNDED_ID_RANGE};
use crate::engine::slots::OutputSlots;
use crate::engine::wire::Wire;
use crate::error::{Error, Result};
use crate::inputs::{batch, batch_expected, request_starts, InputSet, TensorValue};
use crate::service::seq_patch::SeqTemplate;
use crate::service::triton_http;
use crate::shm::client::ShmSession;
use crate::shm::plan::ShmTarget;
use crate::shm::ShmApi;
use crate::tensor::InputTensor;

use super::setup::Target;

/// The data stream non-sequence models read.
const NON_SEQUENCE_STREAM: usize = 0;

/// Pre-encoded requests and, per request, what the reports and validation need.
pub struct LoadPlan {
    pub requests: Vec<Vec<u8>>,
    pub wire: Wire,
    /// The export's `request_inputs` object of each request (indexed like `requests`); the
    /// tensor kinds leave them empty when the run writes no export.
    pub step_inputs: Vec<String>,
    /// Validation data of each request's batch (`None`: nothing to check).
    pub expected: Vec<Option<Vec<TensorValue>>>,
    /// `--fixed-schedule` send time of each request (its first step's `timestamp`), in ms.
    pub timestamps_ms: Vec<Option<u64>>,
    /// Sequence models: a request template per stream and step (then `step_inputs` is
    /// indexed by the flat (stream, step) position).
    pub sequences: Option<Arc<SeqPlan>>,
}

/// The plan of a `--shared-memory` run, whose requests reference regions registered with
/// the server: with it the session holding them and the engine's output slots.
pub fn build_shm(
    cfg: &Config,
    target: &Target,
    set: &InputSet,
    wire: Wire,
    api: ShmApi,
) -> Result<(LoadPlan, ShmSession, Arc<OutputSlots>)> {
    let model = target.model()?;
    let shm_target = ShmTarget {
        host: &target.host,
        tls: target.tls.as_ref(),
        meta: &model.meta,
        config: &model.config,
        api,
    };
    let shm = crate::shm::plan::build(cfg, &shm_target, set)?;
    let plan = LoadPlan {
        requests: shm.requests,
        wire,
        step_inputs: shm.step_inputs,
        expected: shm.expected,
        timestamps_ms: shm.timestamps_ms,
        sequences: None,
    };
    Ok((plan, shm.session, shm.slots))
}

/// The Triton requests of a run, encoded by `enc`.
pub(crate) fn build(
    cfg: &Config,
    target: &Target,
    set: &InputSet,
    enc: &dyn Encoder,
) -> Result<LoadPlan> {
    let model = target.model()?;
    if model.config.sequence_batching {
        return build_sequences(cfg, target, set, enc);
    }
    let outputs: Vec<String> = model.meta.outputs.iter().map(|o| o.name.clone()).collect();
    let batched = model.config.max_batch_size > 0;
    let b = usize::try_from(cfg.batch_size)
        .map_err(|_| Error::usage(format!("-b {}: too large", cfg.batch_size)))?;
    let steps = &set
        .streams
        .get(NON_SEQUENCE_STREAM)
        .map_or(&[][..], Vec::as_slice);
    let starts = request_starts(steps.len(), b);
    if starts.is_empty() {
        return Err(Error::usage("--input-data: the data has no steps to send"));
    }
    let mut plan = LoadPlan {
        requests: Vec::with_capacity(starts.len()),
        wire: enc.wire(cfg, target),
        step_inputs: Vec::with_capacity(starts.len()),
        expected: Vec::with_capacity(starts.len()),
        timestamps_ms: Vec::with_capacity(starts.len()),
        sequences: None,
    };
    for first in starts {
        let inputs = batch(set, NON_SEQUENCE_STREAM, first, b, batched)?;
        plan.requests
            .push(enc.encode(cfg, target, &inputs, &outputs)?);
        plan.step_inputs.push(triton_http::export_inputs_json(
            cfg.profile_export_file.is_some(),
            &inputs,
        ));
        let expected = batch_expected(set, NON_SEQUENCE_STREAM, first, b, batched)?;
        plan.expected.push(expected);
        plan.timestamps_ms.push(steps[first].timestamp_ms);
    }
    Ok(plan)
}

/// Sequence models (batch 1): one template per stream and step, the step's own bytes as the
/// plain request list, and the sequence settings.
fn build_sequences(
    cfg: &Config,
    target: &Target,
    set: &InputSet,
    enc: &dyn Encoder,
) -> Result<LoadPlan> {
    let model = target.model()?;
    let outputs: Vec<String> = model.meta.outputs.iter().map(|o| o.name.clone()).collect();
    let batched = model.config.max_batch_size > 0;
    let mut plan = LoadPlan {
        requests: Vec::new(),
        wire: enc.wire(cfg, target),
        step_inputs: Vec::new(),
        expected: Vec::new(),
        timestamps_ms: Vec::new(),
        sequences: None,
    };
    let mut templates = Vec::with_capacity(set.streams.len());
    let mut flat_steps = Vec::with_capacity(set.streams.len());
    for (s, steps) in set.streams.iter().enumerate() {
        let (mut ts, mut flat) = (Vec::new(), Vec::new());
        for (k, step) in steps.iter().enumerate() {
            let inputs = batch(set, s, k, 1, batched)?;
            ts.push(enc.template(cfg, target, &inputs, &outputs)?);
            flat.push(plan.requests.len() as u32);
            plan.requests
                .push(enc.encode(cfg, target, &inputs, &outputs)?);
            plan.step_inputs.push(triton_http::export_inputs_json(
                cfg.profile_export_file.is_some(),
                &inputs,
            ));
            plan.expected.push(batch_expected(set, s, k, 1, batched)?);
            plan.timestamps_ms.push(step.timestamp_ms);
        }
        templates.push(ts);
        flat_steps.push(flat);
    }
    if plan.requests.is_empty() {
        return Err(Error::usage("--input-data: the data has no steps to send"));
    }
    plan.sequences = Some(seq_plan(cfg, set, templates, flat_steps));
    Ok(plan)
}

/// The sequence plan of a run: the per-stream request templates and export steps, with the
/// `--sequence-*` settings.
pub(crate) fn seq_plan(
    cfg: &Config,
    set: &InputSet,
    templates: Vec<Vec<SeqTemplate>>,
    flat_steps: Vec<Vec<u32>>,
) -> Arc<SeqPlan> {
    let q = &cfg.sequences;
    Arc::new(SeqPlan {
        templates,
        flat_steps,
        cfg: SeqConfig {
            id_start: q.id_start,
            id_range: q.id_range.unwrap_or(UNBOUNDED_ID_RANGE),
            length: q.length,
            length_given: q.length_given,
            variation_pct: q.variation_pct,
            seed: cfg.seed,
        },
        stream_steps: set.stream_steps(),
        open_loop_slots: q.num_sequences as usize,
    })
}

/// How one protocol encodes Triton inference requests (the Triton HTTP and gRPC kinds).
pub(crate) trait Encoder {
    /// One request's bytes.
    fn encode(
        &self,
        cfg: &Config,
        target: &Target,
        inputs: &[InputTensor],
        outputs: &[String],
    ) -> Result<Vec<u8>>;

    /// A sequence request template, patched per request by the engine's sequence feed.
    fn template(
        &self,
        cfg: &Config,
        target: &Target,
        inputs: &[InputTensor],
        outputs: &[String],
    ) -> Result<SeqTemplate>;

    /// How the load connections carry the requests.
    fn wire(&self, cfg: &Config, target: &Target) -> Wire;
}
