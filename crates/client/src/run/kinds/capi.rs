//! `--service-kind triton_c_api`: the run's setup through an in-process Triton server instead
//! of HTTP/gRPC. The server is started from `--triton-server-directory` with
//! `--model-repository`; metadata, config and statistics are the same JSON documents the HTTP
//! endpoints return, so the HTTP parsers read them. The load goes through
//! [`crate::engine::capi_pool`].

use super::registry::{BeforeRun, Caps, Kind};
use std::ffi::CString;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use super::triton::{self, Responses};
use super::{Expected, ExportDecoder, Labels, Planned, Service};
use crate::config::{Config, TensorFormat};
use crate::engine::capi_pool::CapiWire;
use crate::engine::seq_feed::SeqPlan;
use crate::engine::slots::OutputSlots;
use crate::engine::window::OutputCheck;
use crate::engine::wire::Wire;
use crate::error::{Error, Result};
use crate::inputs::request_starts;
use crate::inputs::{batch, batch_expected, InputSet, ResponseFormat};
use crate::measure::server_stats::{bls_composing_models, composing_tree, parse_stats};
use crate::measure::ModelStats;
use crate::protocol::capi::server::version_number;
use crate::protocol::capi::{prepare_step, ModelTarget, Server, ServerOptions};
use crate::report::console::ClientLibrary;
use crate::run::coordinator::StatsSnapshot;
use crate::run::plan::{seq_plan, LoadPlan};
use crate::run::setup::{fetch_stats, Model, SetupClient, Target};
use crate::service::seq_patch::{self, SeqTemplate};
use crate::service::triton_http::{
    self, parse_model_config, parse_model_metadata, parse_server_metadata, ModelConfig,
    ModelMetadata,
};
use crate::tensor::InputTensor;

pub struct Capi;

/// `--service-kind triton_c_api` in the registry.
pub const KIND: Kind = Kind {
    name: "triton_c_api",
    service_kind: Some(("triton_c_api", None)),
    endpoint_type: None,
    caps: Caps {
        grpc: false,
        streaming: true,
        shared_memory: None,
        before_run: BeforeRun::InProcess,
    },
    service: &Capi,
    endpoint: None,
};

impl Service for Capi {
    fn labels(&self) -> Labels {
        Labels {
            banner: "TRITON_C_API",
            export: "triton_c_api",
            library: ClientLibrary::InProcess,
            always_shows_batch: true,
            framed_streams: true,
        }
    }

    fn prepare(&self, cfg: &Config) -> Result<Target> {
        prepare(cfg)
    }

    fn plan(&self, cfg: &Config, target: &Target) -> Result<Planned> {
        let inputs = triton::load_inputs(cfg, target)?;
        Ok(build_plan(cfg, target, &inputs)?.into())
    }

    fn output_check(
        &self,
        cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
        expected: Expected,
    ) -> Option<Box<OutputCheck<'static>>> {
        // Bodies are HTTP-style; with --streaming each response is framed, and the frames
        // hold only responses with outputs.
        let responses = Responses {
            format: ResponseFormat::Http,
            framed: cfg.streaming,
            frames_have_outputs: true,
        };
        triton::response_check(expected, responses)
    }

    fn export_decoder(
        &self,
        _cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        Box::new(|body| {
            triton_http::decode_outputs_json(body, None).unwrap_or_else(|_| "{}".into())
        })
    }

    fn server_stats(&self, cfg: &Config, target: &mut Target) -> Result<Option<StatsSnapshot>> {
        fetch_stats(target, cfg)
    }
}

/// The setup calls of a C API run, answered by the in-process server.
pub struct CapiSetup {
    pub server: Arc<Server>,
}

impl CapiSetup {
    pub fn server_extensions(&self) -> Result<Vec<String>> {
        Ok(parse_server_metadata(self.server.metadata_json()?.as_bytes())?.extensions)
    }

    pub fn model_metadata(&self, cfg: &Config) -> Result<ModelMetadata> {
        let json = self
            .server
            .model_metadata_json(&cfg.model_name, &cfg.model_version)?;
        parse_model_metadata(json.as_bytes())
    }

    pub fn model_config(&self, cfg: &Config) -> Result<ModelConfig> {
        let json = self
            .server
            .model_config_json(&cfg.model_name, &cfg.model_version)?;
        parse_model_config(json.as_bytes())
    }

    pub fn model_config_json(&self, name: &str, version: &str) -> Result<serde_json::Value> {
        let json = self.server.model_config_json(name, version)?;
        serde_json::from_str(&json)
            .map_err(|e| Error::generic(format!("model '{name}': config is not JSON: {e}")))
    }

    pub fn model_stats(&self, cfg: &Config) -> Result<Vec<ModelStats>> {
        let json = self
            .server
            .model_statistics_json(&cfg.model_name, &cfg.model_version)?;
        parse_stats(json.as_bytes())
    }

    pub fn all_model_stats(&self) -> Result<Vec<ModelStats>> {
        parse_stats(self.server.model_statistics_json("", "")?.as_bytes())
    }
}

/// Starts the in-process server and reads what the run needs from it.
fn prepare(cfg: &Config) -> Result<Target> {
    let repository = cfg.model_repository.clone().ok_or_else(|| {
        Error::usage("--model-repository is required with --service-kind triton_c_api.")
    })?;
    if !cfg.trace_settings.is_empty() {
        return Err(Error::usage(
            "--trace-level, --trace-rate, --trace-count and --log-frequency are not supported \
             with --service-kind triton_c_api (inferperf).",
        ));
    }
    let opts = ServerOptions {
        server_dir: cfg.triton_server_directory.clone(),
        model_repository: repository,
        log_verbose: i32::from(cfg.verbose >= 2),
        log_info: cfg.verbose >= 1,
        unload_model: Some(cfg.model_name.clone()),
    };
    let setup = CapiSetup {
        server: Server::start(&opts)?,
    };
    let stats_available = setup
        .server_extensions()
        .is_ok_and(|ext| ext.iter().any(|e| e == "statistics"));
    let meta = setup.model_metadata(cfg)?;
    let config = setup.model_config(cfg)?;
    check_supported(cfg, &config)?;
    let composing = if let Some(spec) = &cfg.bls_composing_models {
        bls_composing_models(spec)?
    } else if config.is_ensemble {
        composing_tree(&cfg.model_name, &mut |name, version| {
            setup.model_config_json(name, version)
        })?
    } else {
        Vec::new()
    };
    Ok(Target {
        addr: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        host: String::new(),
        model: Some(Model {
            meta,
            config,
            stats_available,
            composing,
        }),
        client: SetupClient::Capi(setup),
        tls: None,
    })
}

fn check_supported(cfg: &Config, config: &ModelConfig) -> Result<()> {
    if config.decoupled && !cfg.streaming {
        return Err(Error::usage(format!(
            "model '{}' is decoupled: with the C API it must be run with --async --streaming",
            cfg.model_name
        )));
    }
    if config.sequence_batching && cfg.batch_size > 1 {
        return Err(Error::usage(format!(
            "-b {}: model '{}' is a sequence model, which takes batch size 1 only",
            cfg.batch_size, cfg.model_name
        )));
    }
    Ok(())
}

/// The input steps as C API requests; `requests` hold each step's inputs as JSON (what `-v -v`
/// prints), the engine sends the prepared steps of the wire.
fn build_plan(cfg: &Config, target: &Target, set: &InputSet) -> Result<LoadPlan> {
    let SetupClient::Capi(setup) = &target.client else {
        return Err(Error::generic("the C API plan needs the in-process server"));
    };
    let mut plan = LoadPlan {
        requests: Vec::new(),
        wire: Wire::Http1,
        step_inputs: Vec::new(),
        expected: Vec::new(),
        timestamps_ms: Vec::new(),
        sequences: None,
    };
    let config = &target.model()?.config;
    let batched = config.max_batch_size > 0;
    let mut steps = Vec::new();
    let mut add = |plan: &mut LoadPlan, inputs: &[InputTensor], expected, ts| -> Result<()> {
        steps.push(prepare_step(inputs).map_err(Error::usage)?);
        let json = triton_http::inputs_json(inputs);
        plan.requests.push(json.clone().into_bytes());
        plan.step_inputs.push(json);
        plan.expected.push(expected);
        plan.timestamps_ms.push(ts);
        Ok(())
    };
    if config.sequence_batching {
        plan.sequences = Some(sequence_plan(cfg, target, set, &mut plan, &mut add)?);
    } else {
        let b = usize::try_from(cfg.batch_size)
            .map_err(|_| Error::usage(format!("-b {}: too large", cfg.batch_size)))?;
        let stream = set.streams.first().map_or(&[][..], Vec::as_slice);
        for first in request_starts(stream.len(), b) {
            let inputs = batch(set, 0, first, b, batched)?;
            let expected = batch_expected(set, 0, first, b, batched)?;
            add(&mut plan, &inputs, expected, stream[first].timestamp_ms)?;
        }
    }
    if plan.requests.is_empty() {
        return Err(Error::usage("--input-data: the data has no steps to send"));
    }
    plan.wire = Wire::Capi(CapiWire {
        server: setup.server.clone(),
        model: Arc::new(model_target(cfg, target)?),
        steps: Arc::new(steps),
        decoupled: target.decoupled(),
        framed: cfg.streaming,
    });
    Ok(plan)
}

/// What each step adds to the plan: its inputs, validation data and timestamp.
type AddStep<'a> = dyn FnMut(
        &mut LoadPlan,
        &[InputTensor],
        Option<Vec<crate::inputs::TensorValue>>,
        Option<u64>,
    ) -> Result<()>
    + 'a;

/// Sequence models (batch 1): every stream's steps, and the sequence settings. The engine's
/// sequence feed patches byte templates; the C API sends the id and flags as request fields
/// instead, so the templates (HTTP ones) only carry the feed along.
fn sequence_plan(
    cfg: &Config,
    target: &Target,
    set: &InputSet,
    plan: &mut LoadPlan,
    add: &mut AddStep<'_>,
) -> Result<Arc<SeqPlan>> {
    let batched = target.model()?.config.max_batch_size > 0;
    let (mut templates, mut flat_steps) = (Vec::new(), Vec::new());
    for (s, steps) in set.streams.iter().enumerate() {
        let (mut ts, mut flat) = (Vec::<SeqTemplate>::new(), Vec::new());
        for (k, step) in steps.iter().enumerate() {
            let inputs = batch(set, s, k, 1, batched)?;
            let (f, headers) = (TensorFormat::Binary, &[][..]);
            ts.push(seq_patch::http_template(
                "capi",
                "/",
                &[],
                &[],
                f,
                f,
                headers,
            )?);
            flat.push(plan.requests.len() as u32);
            add(
                plan,
                &inputs,
                batch_expected(set, s, k, 1, batched)?,
                step.timestamp_ms,
            )?;
        }
        templates.push(ts);
        flat_steps.push(flat);
    }
    Ok(seq_plan(cfg, set, templates, flat_steps))
}

/// The model, its version and every output it lists (perf_analyzer asks for all of them).
fn model_target(cfg: &Config, target: &Target) -> Result<ModelTarget> {
    let c = |s: &str, what: &str| {
        CString::new(s).map_err(|_| Error::usage(format!("{what} {s:?}: contains a NUL byte")))
    };
    Ok(ModelTarget {
        name: c(&cfg.model_name, "-m")?,
        version: version_number(&cfg.model_version)?,
        outputs: target
            .model()?
            .meta
            .outputs
            .iter()
            .map(|o| c(&o.name, "model output"))
            .collect::<Result<_>>()?,
    })
}
