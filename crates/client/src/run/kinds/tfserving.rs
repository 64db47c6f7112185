//! `--service-kind tfserving`: TensorFlow Serving's `PredictionService` over
//! gRPC. Setup asks `GetModelMetadata` for the signature; each request is a `Predict` of one
//! batch.

use super::registry::{BeforeRun, Caps, Kind};
use super::pseudo::{empty_plan, grpc_wire, load_steps, STREAM};
use super::{ExportDecoder, Labels, Planned, Service};
use crate::config::{Config, Protocol};
use crate::engine::slots::OutputSlots;
use crate::error::{Error, Result};
use crate::inputs::request_starts;
use crate::inputs::{batch, InputSet};
use crate::report::console::ClientLibrary;
use crate::run::plan::LoadPlan;
use crate::run::setup::{reach, Model, SetupClient, Target};
use crate::service::reply_check::ReplyCheck;
use crate::service::tfserving::{self, SERVICE_PATH};
use crate::service::triton_http::{self, ModelConfig, ModelMetadata};

pub struct TfServing;

/// `--service-kind tfserving` in the registry.
pub const KIND: Kind = Kind {
    name: "tfserving",
    service_kind: Some(("tfserving", None)),
    endpoint_type: None,
    caps: Caps {
        grpc: true,
        streaming: false,
        shared_memory: None,
        before_run: BeforeRun::Signature,
    },
    service: &TfServing,
    endpoint: None,
};

impl Service for TfServing {
    fn labels(&self) -> Labels {
        Labels {
            banner: "TENSORFLOW_SERVING",
            export: "tfserving",
            library: ClientLibrary::Grpc,
            always_shows_batch: false,
            framed_streams: false,
        }
    }

    fn prepare(&self, cfg: &Config) -> Result<Target> {
        let mut target = reach(cfg, Protocol::Grpc)?;
        let (meta, config) = tfserving_model(cfg, &mut target.client)?;
        target.model = Some(Model {
            meta,
            config,
            stats_available: false,
            composing: Vec::new(),
        });
        Ok(target)
    }

    fn plan(&self, cfg: &Config, target: &Target) -> Result<Planned> {
        let model = target.model()?;
        let set = load_steps(cfg, &model.meta, &model.config)?;
        Ok(tfserving_plan(cfg, target, &set)?.into())
    }

    /// A reply is a well-formed protobuf message (its content is not checked).
    fn reply_check(&self, _cfg: &Config, _target: &Target) -> ReplyCheck {
        ReplyCheck::Protobuf("PredictResponse")
    }

    fn export_decoder(
        &self,
        _cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        Box::new(tfserving::response_outputs_json)
    }
}

/// `GetModelMetadata` with the `signature_def` field, mapped to inputs (see
/// [`tfserving::model_from_metadata`]).
fn tfserving_model(cfg: &Config, client: &mut SetupClient) -> Result<(ModelMetadata, ModelConfig)> {
    let SetupClient::Grpc(grpc) = client else {
        return Err(Error::generic(
            "--service-kind tfserving: the setup connection is not gRPC",
        ));
    };
    let request = tfserving::metadata_request(
        &cfg.model_name,
        &cfg.model_version,
        &cfg.model_signature_name,
    );
    let method = format!("{SERVICE_PATH}GetModelMetadata");
    let bytes = grpc.unary(&method, &request)?;
    let batch = cfg.batch_size_given.then_some(cfg.batch_size);
    tfserving::model_from_metadata(&bytes, &cfg.model_name, &cfg.model_signature_name, batch)
}

fn tfserving_plan(cfg: &Config, target: &Target, set: &InputSet) -> Result<LoadPlan> {
    let batched = target.model()?.config.max_batch_size > 0;
    let b = if batched {
        usize::try_from(cfg.batch_size)
            .map_err(|_| Error::usage(format!("-b {}: too large", cfg.batch_size)))?
    } else {
        1
    };
    let starts = request_starts(set.steps(STREAM), b);
    let wire = grpc_wire(cfg, target, &format!("{SERVICE_PATH}Predict"));
    let mut plan = empty_plan(wire, starts.len());
    let spec = tfserving::model_spec(
        &cfg.model_name,
        &cfg.model_version,
        &cfg.model_signature_name,
    );
    for first in starts {
        let inputs = batch(set, STREAM, first, b, batched)?;
        plan.requests
            .push(tfserving::encode_predict(&spec, &inputs, cfg.compression)?);
        plan.step_inputs.push(triton_http::export_inputs_json(cfg.profile_export_file.is_some(), &inputs));
        plan.expected.push(None);
        plan.timestamps_ms
            .push(set.streams[STREAM][first].timestamp_ms);
    }
    Ok(plan)
}
