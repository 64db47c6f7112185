//! `--service-kind torchserve`: each step's file uploaded as a multipart
//! `data` part to TorchServe's `/predictions/<model>` over HTTP.

use super::registry::{BeforeRun, Caps, Kind};
use super::pseudo::{field_layout, empty_plan, load_steps, step_string, STREAM};
use super::{ExportDecoder, Labels, Planned, Service};
use crate::config::{Config, Protocol};
use crate::engine::slots::OutputSlots;
use crate::engine::wire::Wire;
use crate::error::Result;
use crate::inputs::InputSet;
use crate::report::console::ClientLibrary;
use crate::run::plan::LoadPlan;
use crate::run::setup::{reach, Target};
use crate::service::triton_http::ModelConfig;
use crate::service::torchserve::{self, TORCHSERVE_INPUT};

pub struct TorchServe;

/// `--service-kind torchserve` in the registry.
pub const KIND: Kind = Kind {
    name: "torchserve",
    service_kind: Some(("torchserve", None)),
    endpoint_type: None,
    caps: Caps {
        grpc: false,
        streaming: false,
        shared_memory: None,
        before_run: BeforeRun::Connect,
    },
    service: &TorchServe,
    endpoint: None,
};

impl Service for TorchServe {
    fn labels(&self) -> Labels {
        Labels {
            banner: "TORCHSERVE",
            export: "torchserve",
            library: ClientLibrary::Http,
            always_shows_batch: false,
            framed_streams: false,
        }
    }

    fn prepare(&self, cfg: &Config) -> Result<Target> {
        reach(cfg, Protocol::Http)
    }

    fn plan(&self, cfg: &Config, target: &Target) -> Result<Planned> {
        let layout = field_layout(cfg, TORCHSERVE_INPUT);
        let set = load_steps(cfg, &layout, &ModelConfig::default())?;
        Ok(torchserve_plan(cfg, target, &set)?.into())
    }

    fn export_decoder(
        &self,
        _cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        Box::new(torchserve::response_outputs_json)
    }
}

fn torchserve_plan(cfg: &Config, target: &Target, set: &InputSet) -> Result<LoadPlan> {
    let steps = set.steps(STREAM);
    let mut plan = empty_plan(Wire::Http1, steps);
    for step in 0..steps {
        let path = std::path::PathBuf::from(step_string(set, step, TORCHSERVE_INPUT)?);
        plan.requests.push(torchserve::encode_request(
            &target.host,
            &cfg.model_name,
            &cfg.model_version,
            &cfg.headers,
            &path,
        )?);
        plan.step_inputs
            .push(torchserve::request_inputs_json(&path));
        plan.expected.push(None);
        plan.timestamps_ms
            .push(set.streams[STREAM][step].timestamp_ms);
    }
    Ok(plan)
}
