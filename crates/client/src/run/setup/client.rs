//! The blocking client of the setup calls (readiness, server and model metadata, model config,
//! statistics), over the protocol the run's service kind speaks. Never used for the measured
//! load.

use std::time::Duration;

use crate::config::{Config, Protocol};
use crate::error::{Error, Result};
use crate::measure::server_stats::parse_stats;
use crate::measure::ModelStats;
use crate::protocol::grpc::blocking::GrpcClient;
use crate::protocol::grpc::pb::inference as pb;
use crate::protocol::http1::blocking::BlockingClient;
use crate::service::triton_grpc::{decode, to_model_config, to_model_metadata, to_model_stats};
use crate::service::triton_http::{
    config_path, error_message, metadata_path, parse_model_config, parse_model_metadata,
    parse_server_metadata, stats_path, ModelConfig, ModelMetadata, ALL_MODEL_STATS_PATH,
    SERVER_METADATA_PATH, SERVER_READY_PATH,
};
use crate::transport::TlsClient;
use prost::Message;

/// Connect and per-call timeout of the setup connection.
const SETUP_TIMEOUT: Duration = Duration::from_secs(2);

/// gRPC status code UNIMPLEMENTED, as it appears in the client's error text.
const UNIMPLEMENTED: &str = "gRPC status 12";

pub enum SetupClient {
    Http(Box<BlockingClient>),
    Grpc(GrpcClient),
    /// `--service-kind triton_c_api`: the in-process server answers.
    Capi(crate::run::kinds::CapiSetup),
}

impl SetupClient {
    /// A setup connection to `host` over `protocol`.
    pub fn connect(host: &str, protocol: Protocol, tls: Option<&TlsClient>) -> Result<SetupClient> {
        Ok(match protocol {
            Protocol::Http => SetupClient::Http(Box::new(BlockingClient::connect_tls(
                host,
                SETUP_TIMEOUT,
                tls,
            )?)),
            Protocol::Grpc => SetupClient::Grpc(GrpcClient::connect_tls(host, SETUP_TIMEOUT, tls)?),
        })
    }

    /// Ok when the server says it is ready. A server without a readiness endpoint (HTTP 404,
    /// gRPC UNIMPLEMENTED) counts as ready.
    pub fn ready(&mut self) -> Result<()> {
        match self {
            SetupClient::Http(c) => {
                let host = c.address().to_string();
                match c.get(SERVER_READY_PATH) {
                    Ok((200 | 404, _)) => Ok(()),
                    Ok((s, b)) => Err(Error::generic(format!(
                        "server at {host} is not ready: {}",
                        error_message(s, &b)
                    ))),
                    Err(e) => Err(Error::generic(format!("server at {host}: {e}"))),
                }
            }
            SetupClient::Grpc(c) => {
                let host = c.address().to_string();
                match grpc_call::<_, pb::ServerReadyResponse>(
                    c,
                    "ServerReady",
                    &pb::ServerReadyRequest {},
                ) {
                    Ok(r) if r.ready => Ok(()),
                    Ok(_) => Err(Error::generic(format!("server at {host} is not ready"))),
                    Err(e) if e.msg.contains(UNIMPLEMENTED) => Ok(()),
                    Err(e) => Err(Error::generic(format!("server at {host}: {e}"))),
                }
            }
            // Server::start waited for liveness and readiness.
            SetupClient::Capi(_) => Ok(()),
        }
    }

    /// The server's extensions (`statistics` turns on the report's Server section).
    pub fn server_extensions(&mut self) -> Result<Vec<String>> {
        match self {
            SetupClient::Http(c) => match c.get(SERVER_METADATA_PATH)? {
                (200, body) => Ok(parse_server_metadata(&body)?.extensions),
                (s, b) => Err(Error::generic(error_message(s, &b))),
            },
            SetupClient::Grpc(c) => {
                let r: pb::ServerMetadataResponse =
                    grpc_call(c, "ServerMetadata", &pb::ServerMetadataRequest {})?;
                Ok(r.extensions)
            }
            SetupClient::Capi(c) => c.server_extensions(),
        }
    }

    pub fn model_metadata(&mut self, cfg: &Config) -> Result<ModelMetadata> {
        let (name, version) = (&cfg.model_name, &cfg.model_version);
        match self {
            SetupClient::Http(c) => {
                let path = metadata_path(name, version);
                parse_model_metadata(&http_get(c, &path, name)?)
            }
            SetupClient::Grpc(c) => {
                let req = pb::ModelMetadataRequest {
                    name: name.clone(),
                    version: version.clone(),
                };
                let r = grpc_call(c, "ModelMetadata", &req)
                    .map_err(|e| Error::generic(format!("model '{name}': {e}")))?;
                to_model_metadata(r)
            }
            SetupClient::Capi(c) => c.model_metadata(cfg),
        }
    }

    pub fn model_config(&mut self, cfg: &Config) -> Result<ModelConfig> {
        let (name, version) = (&cfg.model_name, &cfg.model_version);
        match self {
            SetupClient::Http(c) => {
                let path = config_path(name, version);
                parse_model_config(&http_get(c, &path, name)?)
            }
            SetupClient::Grpc(c) => {
                let req = pb::ModelConfigRequest {
                    name: name.clone(),
                    version: version.clone(),
                };
                let r: pb::ModelConfigResponse = grpc_call(c, "ModelConfig", &req)
                    .map_err(|e| Error::generic(format!("model '{name}': {e}")))?;
                let config = r.config.ok_or_else(|| {
                    Error::generic(format!(
                        "model '{name}': ModelConfig response has no config"
                    ))
                })?;
                Ok(to_model_config(config))
            }
            SetupClient::Capi(c) => c.model_config(cfg),
        }
    }

    /// Cumulative statistics of the model's versions (every version when none is given).
    pub fn model_stats(&mut self, cfg: &Config) -> Result<Vec<ModelStats>> {
        let (name, version) = (&cfg.model_name, &cfg.model_version);
        match self {
            SetupClient::Http(c) => {
                let path = stats_path(name, version);
                match c.get(&path)? {
                    (200, body) => parse_stats(&body),
                    (s, b) => Err(Error::generic(format!(
                        "server statistics: {} (GET {path})",
                        error_message(s, &b)
                    ))),
                }
            }
            SetupClient::Grpc(c) => {
                let req = pb::ModelStatisticsRequest {
                    name: name.clone(),
                    version: version.clone(),
                };
                let r = grpc_call(c, "ModelStatistics", &req)
                    .map_err(|e| Error::generic(format!("server statistics: {e}")))?;
                Ok(to_model_stats(r))
            }
            SetupClient::Capi(c) => c.model_stats(cfg),
        }
    }
}

impl SetupClient {
    /// Every model's statistics (for ensembles and BLS composing models).
    pub fn all_model_stats(&mut self) -> Result<Vec<ModelStats>> {
        match self {
            SetupClient::Http(c) => match c.get(ALL_MODEL_STATS_PATH)? {
                (200, body) => parse_stats(&body),
                (s, b) => Err(Error::generic(format!(
                    "server statistics: {} (GET {ALL_MODEL_STATS_PATH})",
                    error_message(s, &b)
                ))),
            },
            SetupClient::Grpc(c) => {
                let req = pb::ModelStatisticsRequest::default();
                let r = grpc_call(c, "ModelStatistics", &req)
                    .map_err(|e| Error::generic(format!("server statistics: {e}")))?;
                Ok(to_model_stats(r))
            }
            SetupClient::Capi(c) => c.all_model_stats(),
        }
    }

    /// A model's config as JSON (over gRPC: the fields the composing-model search reads).
    pub fn model_config_json(&mut self, name: &str, version: &str) -> Result<serde_json::Value> {
        match self {
            SetupClient::Http(c) => {
                let body = http_get(c, &config_path(name, version), name)?;
                serde_json::from_slice(&body)
                    .map_err(|e| Error::generic(format!("model '{name}': config is not JSON: {e}")))
            }
            SetupClient::Grpc(c) => {
                let req = pb::ModelConfigRequest {
                    name: name.into(),
                    version: version.into(),
                };
                let r: pb::ModelConfigResponse = grpc_call(c, "ModelConfig", &req)
                    .map_err(|e| Error::generic(format!("model '{name}': {e}")))?;
                Ok(config_steps_json(r.config.unwrap_or_default()))
            }
            SetupClient::Capi(c) => c.model_config_json(name, version),
        }
    }

    /// Sends the `--trace-*` settings as one global update (only the keys given).
    pub fn trace_setting(&mut self, settings: &[(String, String)]) -> Result<()> {
        let fail = |why: String| Error::generic(format!("trace settings: {why}"));
        match self {
            SetupClient::Http(c) => {
                let mut body = serde_json::Map::new();
                for (key, value) in settings {
                    // Triton's HTTP API takes the level as a list, the rest as strings.
                    let v = if key == "trace_level" {
                        serde_json::json!([value])
                    } else {
                        serde_json::json!(value)
                    };
                    body.insert(key.clone(), v);
                }
                let body = serde_json::Value::Object(body).to_string();
                let headers = [("Content-Type".to_string(), "application/json".to_string())];
                match c.post("/v2/trace/setting", &headers, body.as_bytes())? {
                    (200, _) => Ok(()),
                    (s, b) => Err(fail(error_message(s, &b))),
                }
            }
            SetupClient::Grpc(c) => {
                let req = pb::TraceSettingRequest {
                    settings: settings
                        .iter()
                        .map(|(k, v)| {
                            let value = vec![v.clone()];
                            (k.clone(), pb::trace_setting_request::SettingValue { value })
                        })
                        .collect(),
                    model_name: String::new(),
                };
                grpc_call::<_, pb::TraceSettingResponse>(c, "TraceSetting", &req)
                    .map(|_| ())
                    .map_err(|e| fail(e.msg))
            }
            SetupClient::Capi(_) => Err(fail("not supported with the C API".into())),
        }
    }
}

/// The parts of a protobuf model config the composing-model search reads, as JSON.
fn config_steps_json(c: pb::ModelConfig) -> serde_json::Value {
    use pb::model_config::SchedulingChoice as S;
    let steps: Vec<serde_json::Value> = match c.scheduling_choice {
        Some(S::EnsembleScheduling(e)) => e
            .step
            .iter()
            .map(|s| serde_json::json!({"model_name": s.model_name, "model_version": s.model_version}))
            .collect(),
        _ => Vec::new(),
    };
    let mut v = serde_json::json!({"name": c.name, "platform": c.platform});
    if !steps.is_empty() {
        v["ensemble_scheduling"] = serde_json::json!({ "step": steps });
    }
    v
}

/// GET `path`; a non-200 answer becomes an error naming the model and the path.
fn http_get(c: &mut BlockingClient, path: &str, model: &str) -> Result<Vec<u8>> {
    match c.get(path)? {
        (200, body) => Ok(body),
        (status, body) => Err(Error::generic(format!(
            "model '{model}': {} (GET {path})",
            error_message(status, &body)
        ))),
    }
}

fn grpc_call<Q: Message, R: Message + Default>(
    c: &mut GrpcClient,
    method: &str,
    request: &Q,
) -> Result<R> {
    let bytes = c.unary(method, &request.encode_to_vec())?;
    decode(&bytes, method)
}
