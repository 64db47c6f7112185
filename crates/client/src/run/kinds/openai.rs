//! `--service-kind openai`: no model metadata, config, readiness or statistics
//! calls (an OpenAI-compatible server may have none of Triton's API); the requests are the
//! input data's payloads, POSTed to `--endpoint`.

use super::registry::{BeforeRun, Caps, Kind};
use super::{ExportDecoder, Labels, Planned, Service};
use crate::config::{Config, InputData, LoadMode, Protocol};
use crate::engine::slots::OutputSlots;
use crate::engine::wire::Wire;
use crate::error::{Error, Result};
use crate::inputs::openai::{load_payloads, PayloadOptions};
use crate::report::console::ClientLibrary;
use crate::run::plan::LoadPlan;
use crate::run::setup::{reach, Target};
use crate::service::openai::{encode_request, request_inputs_json, response_outputs_json};
use crate::service::reply_check::ReplyCheck;

pub struct OpenAi;

/// `--service-kind openai` in the registry.
pub const KIND: Kind = Kind {
    name: "openai",
    service_kind: Some(("openai", None)),
    endpoint_type: None,
    caps: Caps {
        grpc: false,
        streaming: true,
        shared_memory: None,
        before_run: BeforeRun::Connect,
    },
    service: &OpenAi,
    endpoint: None,
};

impl Service for OpenAi {
    fn labels(&self) -> Labels {
        Labels {
            banner: "OPENAI",
            export: "openai",
            library: ClientLibrary::Http,
            always_shows_batch: false,
            framed_streams: false,
        }
    }

    fn prepare(&self, cfg: &Config) -> Result<Target> {
        reach(cfg, Protocol::Http)
    }

    fn plan(&self, cfg: &Config, target: &Target) -> Result<Planned> {
        Ok(build_plan(cfg, target)?.into())
    }

    /// A reply that is not an event stream is one JSON value.
    fn reply_check(&self, _cfg: &Config, _target: &Target) -> ReplyCheck {
        ReplyCheck::Json
    }

    fn export_decoder(
        &self,
        _cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        Box::new(response_outputs_json)
    }
}

/// One pre-encoded request per payload, in data order.
fn build_plan(cfg: &Config, target: &Target) -> Result<LoadPlan> {
    let InputData::Files(paths) = &cfg.input_data else {
        return Err(Error::usage(
            "Must supply --input-data for OpenAI service kind.",
        ));
    };
    let opts = PayloadOptions {
        fixed_schedule: cfg.load_mode == LoadMode::FixedSchedule,
        sessions: false,
    };
    let entries = load_payloads(paths, opts)?;
    let mut plan = LoadPlan {
        requests: Vec::with_capacity(entries.len()),
        wire: Wire::Http1,
        step_inputs: Vec::with_capacity(entries.len()),
        expected: vec![None; entries.len()],
        timestamps_ms: Vec::with_capacity(entries.len()),
        sequences: None,
    };
    for e in &entries {
        let request = encode_request(&target.host, &cfg.endpoint, &cfg.headers, &e.payload);
        plan.requests.push(request);
        plan.step_inputs.push(request_inputs_json(&e.payload));
        plan.timestamps_ms.push(e.timestamp_ms);
    }
    Ok(plan)
}
