//! What Triton over HTTP and over gRPC share: the setup calls (readiness, trace settings,
//! extensions, metadata, config, composing models), the plan (plain or shared memory), the
//! validation of responses and the server statistics. The two kinds differ in the protocol
//! they pass in and in their encoders ([`super::triton_http`], [`super::triton_grpc`]).

use super::registry::Kind;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Expected, Planned};
use crate::config::{Config, LoadMode, Protocol, SharedMemory};
use crate::engine::slots::OutputSlots;
use crate::engine::window::OutputCheck;
use crate::error::{Error, Result};
use crate::inputs::{check_outputs, load_inputs_with, InputOptions, InputSet, ResponseFormat};
use crate::measure::record::framed_responses;
use crate::measure::server_stats::{bls_composing_models, composing_tree, ComposingModel};
use crate::measure::RequestRecord;
use crate::run::plan::{self, Encoder};
use crate::run::setup::{host_of, resolve, tls_client, Model, SetupClient, Target};
use crate::service::reply_check::Expect;
use crate::service::stream_scan::scan_stream_response;
use crate::service::triton_http::ModelConfig;
use crate::transport::TlsClient;

/// Connects over `protocol`, waits until the server is ready, and reads what the run needs
/// from it. `streams_decoupled`: the run can receive a decoupled model's responses.
pub(super) fn prepare(cfg: &Config, protocol: Protocol, streams_decoupled: bool) -> Result<Target> {
    let host = host_of(&cfg.url).to_string();
    let addr = resolve(&host)?;
    let tls = tls_client(cfg, &host, protocol)?;
    let mut client = wait_ready(&host, cfg, protocol, tls.as_ref())?;
    if !cfg.trace_settings.is_empty() {
        client.trace_setting(&cfg.trace_settings)?;
    }
    let stats_available = client
        .server_extensions()
        .is_ok_and(|ext| ext.iter().any(|e| e == "statistics"));
    let meta = client.model_metadata(cfg)?;
    let config = client.model_config(cfg)?;
    check_supported(cfg, &config, streams_decoupled)?;
    let composing = composing_models(cfg, &config, &mut client)?;
    Ok(Target {
        addr,
        host,
        model: Some(Model {
            meta,
            config,
            stats_available,
            composing,
        }),
        client,
        tls,
    })
}

/// The composing models the Server section reports: an ensemble's steps (recursively), or
/// the `--bls-composing-models` list.
fn composing_models(
    cfg: &Config,
    config: &ModelConfig,
    client: &mut SetupClient,
) -> Result<Vec<ComposingModel>> {
    if let Some(spec) = &cfg.bls_composing_models {
        return bls_composing_models(spec);
    }
    if !config.is_ensemble {
        return Ok(Vec::new());
    }
    composing_tree(&cfg.model_name, &mut |name, version| {
        client.model_config_json(name, version)
    })
}

fn check_supported(cfg: &Config, config: &ModelConfig, streams_decoupled: bool) -> Result<()> {
    if config.decoupled && !streams_decoupled {
        return Err(Error::usage(format!(
            "model '{}' is decoupled: it must be run with -i grpc --async --streaming",
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

/// Polls the server's readiness until it says ready or `--ready-timeout` passes (one try
/// when 0).
fn wait_ready(
    host: &str,
    cfg: &Config,
    protocol: Protocol,
    tls: Option<&TlsClient>,
) -> Result<SetupClient> {
    let timeout_s = cfg.ready_timeout_s;
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        let last = match SetupClient::connect(host, protocol, tls) {
            Ok(mut c) => match c.ready() {
                Ok(()) => return Ok(c),
                Err(e) => e.msg,
            },
            Err(e) => e.msg,
        };
        if crate::signal::interrupted() {
            return Err(Error::generic(format!(
                "interrupted while waiting for the server: {last}"
            )));
        }
        if Instant::now() >= deadline {
            let waited = if timeout_s > 0 {
                format!(" (waited {timeout_s} s)")
            } else {
                String::new()
            };
            return Err(Error::generic(format!("{last}{waited}")));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The run's input data, read against the model's inputs.
pub(super) fn load_inputs(cfg: &Config, target: &Target) -> Result<InputSet> {
    let opts = InputOptions {
        fixed_schedule: cfg.load_mode == LoadMode::FixedSchedule,
    };
    let model = target.model()?;
    load_inputs_with(&model.meta, &model.config, cfg, opts)
}

/// The requests in `encoder`'s protocol; with `--shared-memory` they reference regions
/// registered through `kind`'s shared memory API.
pub(super) fn plan(
    cfg: &Config,
    target: &Target,
    encoder: &dyn Encoder,
    kind: &Kind,
) -> Result<Planned> {
    let inputs = load_inputs(cfg, target)?;
    if let (SharedMemory::System | SharedMemory::Cuda, Some(api)) =
        (cfg.shared_memory, kind.caps.shared_memory)
    {
        let wire = encoder.wire(cfg, target);
        let (plan, session, slots) = plan::build_shm(cfg, target, &inputs, wire, api)?;
        return Ok(Planned {
            plan,
            shm: Some(session),
            slots: Some(slots),
        });
    }
    Ok(plan::build(cfg, target, &inputs, encoder)?.into())
}

/// The validation-data check; with shared memory output slots it reads the outputs from
/// the regions.
pub(super) fn output_check(
    target: &Target,
    slots: Option<&OutputSlots>,
    expected: Expected,
    responses: Responses,
    kind: &Kind,
) -> Option<Box<OutputCheck<'static>>> {
    match (slots, kind.caps.shared_memory) {
        (Some(s), Some(api)) if s.captures() => {
            let outputs = target
                .model
                .as_ref()
                .map_or(&[][..], |m| &m.meta.outputs[..]);
            crate::shm::validate::output_check(api, outputs, expected)
        }
        _ => response_check(expected, responses),
    }
}

/// The shape of a kind's kept response bodies.
#[derive(Clone, Copy)]
pub(super) struct Responses {
    pub format: ResponseFormat,
    /// The body holds every response of the request, framed.
    pub framed: bool,
    /// Every frame carries outputs (otherwise a decoupled model's empty final response is
    /// recognised and skipped).
    pub frames_have_outputs: bool,
}

/// The validation-data check of a run's responses (`None` without validation data).
pub(super) fn response_check(
    expected: Expected,
    responses: Responses,
) -> Option<Box<OutputCheck<'static>>> {
    if expected.iter().all(Option::is_none) {
        return None;
    }
    let Responses {
        format,
        framed,
        frames_have_outputs,
    } = responses;
    Some(Box::new(move |rec: &RequestRecord, body: &[u8]| {
        let Some(Some(exp)) = expected.get(rec.step as usize) else {
            return Ok(());
        };
        if framed {
            // Every response with outputs is checked against the request's expected data.
            for (_, payload) in framed_responses(body) {
                // The empty final response of a decoupled model has no outputs to check.
                let has_outputs = frames_have_outputs
                    || scan_stream_response(payload).map_or(true, |r| r.has_outputs);
                if has_outputs {
                    check_outputs(exp, payload, format)?;
                }
            }
            return Ok(());
        }
        check_outputs(exp, body, format)
    }))
}

/// What a Triton reply must carry: the model's name and every output the requests name
/// (all of the model's outputs).
pub(super) fn expect(cfg: &Config, target: &Target) -> Arc<Expect> {
    Arc::new(Expect {
        model: cfg.model_name.clone(),
        outputs: output_names(target),
        shm_outputs: cfg.shared_memory != SharedMemory::None,
    })
}

/// The names of the model's outputs when shared memory slots captured them into the kept
/// bodies (the export then reads the outputs from those frames).
pub(super) fn captured_outputs(
    target: &Target,
    slots: Option<&OutputSlots>,
) -> Option<Vec<String>> {
    slots.filter(|s| s.captures()).map(|_| output_names(target))
}

/// The names of the model's outputs, in the model's order.
fn output_names(target: &Target) -> Vec<String> {
    let outputs = target
        .model
        .as_ref()
        .map_or(&[][..], |m| &m.meta.outputs[..]);
    outputs.iter().map(|o| o.name.clone()).collect()
}
