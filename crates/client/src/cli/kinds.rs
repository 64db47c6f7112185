//! What the `tfserving`, `torchserve` and `dynamic_grpc` service kinds require of the other
//! flags. Every error is a usage error naming the flag.

use super::args::RunArgs;
use crate::config::{Config, InputData, LoadMode, Protocol, ServiceKind};
use crate::error::{Error, Result};
use crate::service::dynamic_grpc::method_path;

/// TF Serving's gRPC port, perf_analyzer's default `-u` for `--service-kind tfserving`.
const DEFAULT_TFSERVING_URL: &str = "localhost:8500";

/// Before the transport flags: dynamic_grpc speaks gRPC unless `-i` says otherwise (which
/// [`apply`] then refuses), so the gRPC defaults (`-u`, TLS flags) apply.
pub fn apply_protocol_default(args: &RunArgs, config: &mut Config) {
    if config.service_kind == ServiceKind::DynamicGrpc && args.protocol.is_none() {
        config.protocol = Protocol::Grpc;
    }
}

/// After every other flag: the kind-specific flags, defaults and checks.
pub fn apply(args: &RunArgs, config: &mut Config) -> Result<()> {
    let kind = config.service_kind;
    if let Some(method) = &args.grpc_method {
        if kind != ServiceKind::DynamicGrpc {
            return Err(Error::usage(
                "--grpc-method is only supported with --service-kind dynamic_grpc.",
            ));
        }
        method_path(method)?;
        config.grpc_method = method.trim().trim_start_matches('/').to_string();
    }
    if let Some(signature) = &args.model_signature_name {
        if kind != ServiceKind::TfServing {
            return Err(Error::usage(
                "--model-signature-name is only supported with --service-kind tfserving.",
            ));
        }
        config.model_signature_name = signature.clone();
    }
    match kind {
        ServiceKind::TfServing => check_tfserving(args, config),
        ServiceKind::TorchServe => check_torchserve(config),
        ServiceKind::DynamicGrpc => check_dynamic_grpc(config),
        _ => Ok(()),
    }
}

fn check_tfserving(args: &RunArgs, config: &mut Config) -> Result<()> {
    if config.protocol != Protocol::Grpc {
        return Err(Error::usage(
            "-i http: --service-kind tfserving speaks gRPC only (-i grpc).",
        ));
    }
    if args.url.is_none() {
        config.url = DEFAULT_TFSERVING_URL.into();
    }
    sync_only(config, "tfserving")
}

fn check_torchserve(config: &Config) -> Result<()> {
    if config.protocol != Protocol::Http {
        return Err(Error::usage(
            "-i grpc: --service-kind torchserve speaks HTTP only (-i http).",
        ));
    }
    json_input_data(config, "torchserve", "TORCHSERVE_INPUT")
}

fn check_dynamic_grpc(config: &Config) -> Result<()> {
    if config.protocol != Protocol::Grpc {
        return Err(Error::usage(
            "-i http: --service-kind dynamic_grpc speaks gRPC only (-i grpc).",
        ));
    }
    if config.grpc_method.is_empty() {
        return Err(Error::usage(
            "Must supply --grpc-method (package.Service/Method) for dynamic_grpc service kind.",
        ));
    }
    sync_only(config, "dynamic_grpc")?;
    json_input_data(config, "dynamic_grpc", "message_generator")
}

/// No `--async` or `--streaming` (the calls are made one at a time per slot).
fn sync_only(config: &Config, kind: &str) -> Result<()> {
    if config.streaming {
        return Err(Error::usage(format!(
            "--streaming is not supported with --service-kind {kind}."
        )));
    }
    if config.async_mode {
        return Err(Error::usage(format!(
            "--async is not supported with --service-kind {kind} (sync only)."
        )));
    }
    Ok(())
}

/// `--input-data` must be JSON file(s) whose steps hold the kind's pseudo-input.
fn json_input_data(config: &Config, kind: &str, field: &str) -> Result<()> {
    let InputData::Files(paths) = &config.input_data else {
        return Err(Error::usage(format!(
            "Must supply --input-data <file.json> for {kind} service kind (each entry holds \
             \"{field}\")."
        )));
    };
    if let Some(dir) = paths.iter().find(|p| p.is_dir()) {
        return Err(Error::usage(format!(
            "--input-data {}: {kind} needs a JSON file (each entry holds \"{field}\"), not a \
             directory.",
            dir.display()
        )));
    }
    if config.load_mode == LoadMode::Periodic {
        return Err(Error::usage(format!(
            "--periodic-concurrency-range is not supported with --service-kind {kind}."
        )));
    }
    Ok(())
}
