//! `--service-kind dynamic_grpc`: any unary gRPC method (`--grpc-method`), its
//! messages printed by each step's `message_generator` command.

use super::registry::{BeforeRun, Caps, Kind};
use super::pseudo::{field_layout, empty_plan, grpc_wire, load_steps, step_string, STREAM};
use super::{ExportDecoder, Labels, Planned, Service};
use crate::config::{Config, Protocol};
use crate::engine::slots::OutputSlots;
use crate::error::{Error, Result};
use crate::inputs::InputSet;
use crate::report::console::ClientLibrary;
use crate::run::plan::LoadPlan;
use crate::run::setup::{reach, Target};
use crate::service::triton_http::ModelConfig;
use crate::service::dynamic_grpc::{self, MESSAGE_GENERATOR};

pub struct DynamicGrpc;

/// `--service-kind dynamic_grpc` in the registry.
pub const KIND: Kind = Kind {
    name: "dynamic_grpc",
    service_kind: Some(("dynamic_grpc", None)),
    endpoint_type: None,
    caps: Caps {
        grpc: true,
        streaming: false,
        shared_memory: None,
        before_run: BeforeRun::Connect,
    },
    service: &DynamicGrpc,
    endpoint: None,
};

impl Service for DynamicGrpc {
    fn labels(&self) -> Labels {
        Labels {
            banner: "DYNAMIC_GRPC",
            export: "dynamic_grpc",
            library: ClientLibrary::Grpc,
            always_shows_batch: false,
            framed_streams: false,
        }
    }

    fn prepare(&self, cfg: &Config) -> Result<Target> {
        reach(cfg, Protocol::Grpc)
    }

    fn plan(&self, cfg: &Config, target: &Target) -> Result<Planned> {
        let layout = field_layout(cfg, MESSAGE_GENERATOR);
        let set = load_steps(cfg, &layout, &ModelConfig::default())?;
        Ok(dynamic_grpc_plan(cfg, target, &set)?.into())
    }

    fn export_decoder(
        &self,
        _cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        Box::new(dynamic_grpc::response_outputs_json)
    }
}

fn dynamic_grpc_plan(cfg: &Config, target: &Target, set: &InputSet) -> Result<LoadPlan> {
    let path = dynamic_grpc::method_path(&cfg.grpc_method)?;
    let steps = set.steps(STREAM);
    let mut plan = empty_plan(grpc_wire(cfg, target, &path), steps);
    for step in 0..steps {
        let command = step_string(set, step, MESSAGE_GENERATOR)?;
        let stdout = dynamic_grpc::run_generator(&command)?;
        let messages = dynamic_grpc::split_messages(&stdout);
        if messages.is_empty() {
            return Err(Error::usage(format!(
                "{MESSAGE_GENERATOR} '{command}' printed no length-prefixed message (step {step})"
            )));
        }
        plan.requests
            .push(dynamic_grpc::encode_messages(&messages, cfg.compression)?);
        plan.step_inputs
            .push(dynamic_grpc::request_inputs_json(&command));
        plan.expected.push(None);
        plan.timestamps_ms
            .push(set.streams[STREAM][step].timestamp_ms);
    }
    Ok(plan)
}
