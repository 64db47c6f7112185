//! The non-inference RPCs: health, server and model metadata, model config, statistics.

use std::collections::HashMap;

use crate::models::{find_model, ModelDef, TensorSpec, MODELS, MODEL_VERSION, PLATFORM};
use crate::routes::EXTENSIONS;
use crate::stats::{StatDuration, Stats};
use crate::trace::{Trace, TraceSettings};
use inferperf_wire::protocol::grpc::pb::inference as pb;
use inferperf_wire::protocol::grpc::pb::inference::model_config::SchedulingChoice;
use inferperf_wire::tensor::DataType;

use super::wire::{code, Status};
use crate::repository::{self, LoadParams, RepoError, Repository};
use crate::settings::{InstanceGroup, ModelSettings};

/// The model a request names (index into `MODELS`); an empty version means the latest.
/// Messages match the HTTP side's 404 texts.
pub fn lookup(name: &str, version: &str) -> Result<usize, Status> {
    let index = find_model(name)
        .filter(|_| !name.is_empty())
        .ok_or_else(|| {
            Status::not_found(format!("Request for unknown model: '{name}' is not found"))
        })?;
    if !version.is_empty() && version != MODEL_VERSION {
        return Err(Status::not_found(format!(
            "Request for unknown model: '{name}' version {version} is not found"
        )));
    }
    Ok(index)
}

/// Like [`lookup`], and the model must be loaded: one that is not has "no available versions"
/// (NOT_FOUND), as in Triton.
pub fn lookup_loaded(repo: &Repository, name: &str, version: &str) -> Result<usize, Status> {
    let index = lookup(name, version)?;
    if !repo.is_ready(index) {
        return Err(Status::not_found(repository::no_versions(name)));
    }
    Ok(index)
}

pub fn server_metadata() -> pb::ServerMetadataResponse {
    pb::ServerMetadataResponse {
        name: "inferperf".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        extensions: EXTENSIONS.iter().map(|e| e.to_string()).collect(),
    }
}

/// A model the name does not match is not ready (no error, like a health probe expects).
pub fn model_ready(repo: &Repository, req: &pb::ModelReadyRequest) -> pb::ModelReadyResponse {
    pb::ModelReadyResponse {
        ready: lookup_loaded(repo, &req.name, &req.version).is_ok(),
    }
}

pub fn model_metadata(
    repo: &Repository,
    req: &pb::ModelMetadataRequest,
) -> Result<pb::ModelMetadataResponse, Status> {
    Ok(metadata_of(&repo.model(lookup_loaded(
        repo,
        &req.name,
        &req.version,
    )?)))
}

/// The metadata of a model definition, the same facts as the HTTP metadata JSON.
pub fn metadata_of(model: &ModelDef) -> pb::ModelMetadataResponse {
    let tensors = |specs: &[TensorSpec]| {
        specs
            .iter()
            .map(|s| pb::model_metadata_response::TensorMetadata {
                name: s.name.into(),
                datatype: s.datatype.name().into(),
                shape: model.wire_dims(s),
            })
            .collect()
    };
    pb::ModelMetadataResponse {
        name: model.name.into(),
        versions: vec![MODEL_VERSION.into()],
        platform: model.platform().into(),
        inputs: tensors(model.inputs),
        outputs: tensors(model.outputs),
    }
}

/// `TYPE_*` of a datatype (BYTES is `TYPE_STRING` in model configs).
fn config_type(datatype: DataType) -> i32 {
    let name = match datatype {
        DataType::Bytes => "TYPE_STRING".to_string(),
        other => format!("TYPE_{}", other.name()),
    };
    pb::DataType::from_str_name(&name).unwrap_or(pb::DataType::TypeInvalid) as i32
}

/// The repository configuration of a model, the same facts as the HTTP config JSON.
pub fn config_of(model: &ModelDef) -> pb::ModelConfig {
    config_with(model, &model.settings())
}

/// The configuration with loaded `settings`, the same facts as the HTTP config JSON.
pub fn config_with(model: &ModelDef, settings: &ModelSettings) -> pb::ModelConfig {
    pb::ModelConfig {
        name: model.name.into(),
        platform: model.platform().into(),
        backend: if model.steps.is_empty() { PLATFORM } else { "" }.into(),
        max_batch_size: settings.max_batch_size as i32,
        input: model
            .inputs
            .iter()
            .map(|s| pb::ModelInput {
                name: s.name.into(),
                data_type: config_type(s.datatype),
                dims: s.dims.to_vec(),
                ..Default::default()
            })
            .collect(),
        output: model
            .outputs
            .iter()
            .map(|s| pb::ModelOutput {
                name: s.name.into(),
                data_type: config_type(s.datatype),
                dims: s.dims.to_vec(),
                ..Default::default()
            })
            .collect(),
        scheduling_choice: scheduling(model, settings),
        instance_group: instance_groups(model, settings),
        model_transaction_policy: Some(pb::ModelTransactionPolicy {
            decoupled: model.decoupled,
        }),
        response_cache: Some(pb::ModelResponseCache { enable: false }),
    }
}

/// The instance groups (none for an ensemble, as in Triton's config).
fn instance_groups(model: &ModelDef, settings: &ModelSettings) -> Vec<pb::ModelInstanceGroup> {
    if !model.steps.is_empty() {
        return Vec::new();
    }
    let group = |g: InstanceGroup| pb::ModelInstanceGroup {
        name: g.name,
        kind: g.kind.proto(),
        count: g.count as i32,
        gpus: g.gpus,
        ..Default::default()
    };
    settings.groups(model.name).into_iter().map(group).collect()
}

/// `sequence_batching` for sequence models, `ensemble_scheduling` (the steps) for ensembles,
/// `dynamic_batching` when it is loaded.
fn scheduling(model: &ModelDef, settings: &ModelSettings) -> Option<SchedulingChoice> {
    if let Some(b) = &settings.dynamic_batching {
        return Some(SchedulingChoice::DynamicBatching(
            pb::ModelDynamicBatching {
                preferred_batch_size: b.preferred_batch_size.iter().map(|&n| n as i32).collect(),
                max_queue_delay_microseconds: b.max_queue_delay.as_micros() as u64,
                preserve_ordering: b.preserve_ordering,
            },
        ));
    }
    if model.sequence {
        return Some(SchedulingChoice::SequenceBatching(
            pb::ModelSequenceBatching {},
        ));
    }
    if model.steps.is_empty() {
        return None;
    }
    let map = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let step = model
        .steps
        .iter()
        .map(|s| pb::model_ensembling::Step {
            model_name: s.model.into(),
            model_version: -1,
            input_map: map(s.input_map),
            output_map: map(s.output_map),
        })
        .collect();
    Some(SchedulingChoice::EnsembleScheduling(pb::ModelEnsembling {
        step,
    }))
}

/// TraceSetting: applies the request's settings (global when `model_name` is empty) and
/// answers the effective ones. Invalid settings are INVALID_ARGUMENT.
pub fn trace_setting(
    trace: &Trace,
    req: pb::TraceSettingRequest,
) -> Result<pb::TraceSettingResponse, Status> {
    let model = if req.model_name.is_empty() {
        None
    } else {
        lookup(&req.model_name, "")?;
        Some(req.model_name.as_str())
    };
    let settings: TraceSettings = req
        .settings
        .into_iter()
        .map(|(k, v)| (k, v.value))
        .collect();
    let now = trace.update(model, settings).map_err(Status::invalid)?;
    Ok(pb::TraceSettingResponse {
        settings: now
            .into_iter()
            .map(|(k, value)| (k, pb::trace_setting_response::SettingValue { value }))
            .collect(),
    })
}

pub fn model_config(
    repo: &Repository,
    req: &pb::ModelConfigRequest,
) -> Result<pb::ModelConfigResponse, Status> {
    let index = lookup_loaded(repo, &req.name, &req.version)?;
    Ok(pb::ModelConfigResponse {
        config: Some(config_with(&repo.model(index), &repo.settings(index))),
    })
}

/// The model of a statistics request: unknown or unloaded models and other versions are
/// INVALID_ARGUMENT with Triton's texts.
fn stats_model(repo: &Repository, name: &str, version: &str) -> Result<usize, Status> {
    let index = find_model(name)
        .filter(|&i| !name.is_empty() && repo.is_ready(i))
        .ok_or_else(|| Status::invalid(repository::not_available(name)))?;
    if !version.is_empty() && version != MODEL_VERSION {
        return Err(Status::invalid(format!(
            "requested model version is not available for model '{name}'"
        )));
    }
    Ok(index)
}

/// RepositoryIndex: Triton's index (name, and version/state/reason once loaded).
pub fn repository_index(
    repo: &Repository,
    req: &pb::RepositoryIndexRequest,
) -> pb::RepositoryIndexResponse {
    let models = repo
        .index(req.ready)
        .into_iter()
        .map(|e| pb::repository_index_response::ModelIndex {
            name: e.name.into(),
            version: e.version.unwrap_or_default().into(),
            state: e.state.unwrap_or_default().into(),
            reason: e.reason.unwrap_or_default(),
        })
        .collect();
    pb::RepositoryIndexResponse { models }
}

fn repo_status(e: RepoError) -> Status {
    match e {
        RepoError::Unavailable(m) => Status::new(code::UNAVAILABLE, m),
        RepoError::Internal(m) => Status::new(code::INTERNAL, m),
        RepoError::InvalidArg(m) => Status::invalid(m),
    }
}

/// RepositoryModelLoad; its parameters may be `config` (string_param: a JSON config
/// override) and `file:PATH` (bytes_param), with Triton's refusals of anything else.
pub fn repository_load(
    repo: &Repository,
    req: &pb::RepositoryModelLoadRequest,
) -> Result<pb::RepositoryModelLoadResponse, Status> {
    use pb::model_repository_parameter::ParameterChoice;
    let mut params = LoadParams::default();
    for (name, param) in &req.parameters {
        let wrong = |want: &str| {
            Status::invalid(format!(
                "invalid value type for load parameter '{name}', expected {want}."
            ))
        };
        match (name.as_str(), &param.parameter_choice) {
            ("config", Some(ParameterChoice::StringParam(text))) => {
                params.config = Some(text.clone())
            }
            ("config", _) => return Err(wrong("string_param")),
            (file, Some(ParameterChoice::BytesParam(_))) if file.starts_with("file:") => {
                params.files.push(name.clone())
            }
            (file, _) if file.starts_with("file:") => return Err(wrong("bytes_param")),
            _ => {
                return Err(Status::invalid(format!(
                    "unrecognized load parameter '{name}'."
                )))
            }
        }
    }
    repo.load(&req.model_name, &params).map_err(repo_status)?;
    Ok(pb::RepositoryModelLoadResponse {})
}

/// RepositoryModelUnload; the bool parameter `unload_dependents` unloads an ensemble's
/// composing models too.
pub fn repository_unload(
    repo: &Repository,
    req: &pb::RepositoryModelUnloadRequest,
) -> Result<pb::RepositoryModelUnloadResponse, Status> {
    use pb::model_repository_parameter::ParameterChoice;
    let dependents = matches!(
        req.parameters
            .get("unload_dependents")
            .and_then(|p| p.parameter_choice.as_ref()),
        Some(ParameterChoice::BoolParam(true))
    );
    repo.unload(&req.model_name, dependents)
        .map_err(repo_status)?;
    Ok(pb::RepositoryModelUnloadResponse {})
}

fn duration(d: StatDuration) -> Option<pb::StatisticDuration> {
    Some(pb::StatisticDuration {
        count: d.count,
        ns: d.ns,
    })
}

/// The numbers of the HTTP statistics JSON, as the gRPC message. An empty name means every
/// model.
pub fn model_statistics(
    stats: &Stats,
    repo: &Repository,
    req: &pb::ModelStatisticsRequest,
) -> Result<pb::ModelStatisticsResponse, Status> {
    let indices: Vec<usize> = if req.name.is_empty() {
        (0..MODELS.len()).filter(|&i| repo.is_ready(i)).collect()
    } else {
        vec![stats_model(repo, &req.name, &req.version)?]
    };
    let model_stats = indices
        .into_iter()
        .map(|i| {
            let s = stats.snapshot(i);
            let batch_stats = s
                .batch
                .iter()
                .map(|(&size, b)| pb::InferBatchStatistics {
                    batch_size: size as u64,
                    compute_input: duration(b.compute_input),
                    compute_infer: duration(b.compute_infer),
                    compute_output: duration(b.compute_output),
                })
                .collect();
            pb::ModelStatistics {
                name: MODELS[i].name.into(),
                version: MODEL_VERSION.into(),
                last_inference: s.last_inference_ms,
                inference_count: s.inference_count,
                execution_count: s.execution_count,
                inference_stats: Some(pb::InferStatistics {
                    success: duration(s.success),
                    fail: duration(s.fail),
                    queue: duration(s.queue),
                    compute_input: duration(s.compute_input),
                    compute_infer: duration(s.compute_infer),
                    compute_output: duration(s.compute_output),
                    cache_hit: duration(StatDuration::default()),
                    cache_miss: duration(StatDuration::default()),
                }),
                batch_stats,
            }
        })
        .collect();
    Ok(pb::ModelStatisticsResponse { model_stats })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::InferTiming;

    #[test]
    fn lookups() {
        assert_eq!(lookup("simple", ""), Ok(0));
        assert_eq!(lookup("simple", "1"), Ok(0));
        let cases = [
            ("nope", "", "'nope' is not found"),
            ("", "", "'' is not found"),
            ("simple", "2", "'simple' version 2 is not found"),
        ];
        for (name, version, want) in cases {
            let err = lookup(name, version).unwrap_err();
            assert_eq!(err.code, super::super::wire::code::NOT_FOUND);
            assert!(err.message.contains(want), "{}", err.message);
        }
    }

    #[test]
    fn config_matches_the_definitions() {
        let repeat = config_of(&MODELS[find_model("repeat_int32").unwrap()]);
        assert_eq!(repeat.max_batch_size, 0);
        assert!(repeat.model_transaction_policy.unwrap().decoupled);
        assert_eq!(repeat.input[0].data_type, pb::DataType::TypeInt32 as i32);
        assert_eq!(repeat.output[1].data_type, pb::DataType::TypeUint32 as i32);
        assert_eq!(repeat.input[0].dims, vec![-1]);
        let bytes = config_of(&MODELS[find_model("identity_bytes").unwrap()]);
        assert_eq!(bytes.output[0].data_type, pb::DataType::TypeString as i32);
        assert_eq!(bytes.max_batch_size, 8);
        assert!(!bytes.model_transaction_policy.unwrap().decoupled);
    }

    #[test]
    fn statistics_mirror_the_json() {
        let stats = Stats::new();
        let t = InferTiming {
            batch_size: 2,
            input_bytes: 8,
            queue_ns: 3,
            input_ns: 5,
            infer_ns: 7,
            output_ns: 11,
            success_ns: 26,
            batched: false,
        };
        stats.record_success(1, &t);
        stats.record_failure(1, 4);
        let req = pb::ModelStatisticsRequest {
            name: "identity_fp32".into(),
            version: String::new(),
        };
        let proto = model_statistics(&stats, &Repository::default(), &req).unwrap();
        let json = stats.to_json(Some(1));
        let (p, j) = (&proto.model_stats[0], &json["model_stats"][0]);
        assert_eq!(p.inference_count, j["inference_count"].as_u64().unwrap());
        assert_eq!(p.last_inference, j["last_inference"].as_u64().unwrap());
        let inf = p.inference_stats.as_ref().unwrap();
        assert_eq!(inf.success.unwrap().ns, 26);
        assert_eq!(inf.fail.unwrap().count, 1);
        assert_eq!(p.batch_stats.len(), 1);
        assert_eq!(p.batch_stats[0].batch_size, 2);
        let all = pb::ModelStatisticsRequest::default();
        assert_eq!(
            model_statistics(&stats, &Repository::default(), &all)
                .unwrap()
                .model_stats
                .len(),
            MODELS.len()
        );
    }
}
