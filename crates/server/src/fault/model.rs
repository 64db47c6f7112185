//! What the fault server says about its one model, `identity`, as KServe v2 JSON (HTTP) and
//! as Triton's protobuf messages (gRPC). The dims and names modes change these answers; every
//! other mode answers them correctly.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::FaultMode;
use inferperf_wire::protocol::grpc::pb::inference as pb;

/// The model every fault server serves.
pub const MODEL: &str = "identity";
/// Its only version.
pub const VERSION: &str = "1";
/// Elements of INPUT0 and OUTPUT0 in the healthy model.
pub const ELEMENTS: usize = 16;
/// Bytes of one FP32 tensor of the healthy model.
pub const TENSOR_BYTES: usize = ELEMENTS * 4;

/// INPUT0's dims in `mode`.
pub fn input_dims(mode: FaultMode) -> Vec<i64> {
    match mode {
        FaultMode::DimsHuge => vec![1 << 32; 3],
        FaultMode::DimsBig => vec![65_536, 65_536],
        FaultMode::PayloadTooLarge => vec![super::odd::LARGE_ELEMENTS],
        _ => vec![ELEMENTS as i64],
    }
}

/// The composing model's name in the names modes (`identity` is then an ensemble).
pub fn composing(mode: FaultMode) -> Option<&'static str> {
    match mode {
        FaultMode::NameDotdot => Some("../../x"),
        FaultMode::NameAbs => Some("/abs/x"),
        _ => None,
    }
}

/// The model a metadata, config or statistics request names, resolved: `identity`, or the
/// composing model for any other name in the names modes; None = unknown.
pub fn resolve(mode: FaultMode, name: &str) -> Option<&'static str> {
    if name == MODEL {
        return Some(MODEL);
    }
    composing(mode)
}

fn platform(mode: FaultMode, model: &str) -> &'static str {
    if model == MODEL && composing(mode).is_some() {
        "ensemble"
    } else {
        "onnxruntime_onnx"
    }
}

fn dims_of(mode: FaultMode, model: &str) -> Vec<i64> {
    if model == MODEL {
        input_dims(mode)
    } else {
        vec![ELEMENTS as i64]
    }
}

/// `GET /v2`.
pub fn server_json() -> Value {
    json!({"name": "inferperf-fault", "version": "2.50.0",
        "extensions": ["model_configuration", "binary_tensor_data", "statistics"]})
}

/// `GET /v2/models/{model}`.
pub fn metadata_json(mode: FaultMode, model: &str) -> Value {
    json!({
        "name": model,
        "versions": [VERSION],
        "platform": platform(mode, model),
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": dims_of(mode, model)}],
        "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [ELEMENTS]}],
    })
}

/// `GET /v2/models/{model}/config`.
pub fn config_json(mode: FaultMode, model: &str) -> Value {
    let ensemble = platform(mode, model) == "ensemble";
    let mut config = json!({
        "name": model,
        "platform": platform(mode, model),
        "backend": if ensemble { "" } else { "onnxruntime" },
        "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": dims_of(mode, model),
            "is_shape_tensor": false, "optional": false}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [ELEMENTS],
            "is_shape_tensor": false}],
        "model_transaction_policy": {"decoupled": false},
    });
    if let (true, Some(step)) = (ensemble, composing(mode)) {
        config["ensemble_scheduling"] = json!({"step": [{"model_name": step, "model_version": -1,
            "input_map": {"INPUT0": "INPUT0"}, "output_map": {"OUTPUT0": "OUTPUT0"}}]});
    }
    config
}

/// The models a statistics request for `name` covers (empty name: all).
fn stats_models(mode: FaultMode, name: &str) -> Vec<&'static str> {
    if name.is_empty() {
        std::iter::once(MODEL).chain(composing(mode)).collect()
    } else {
        resolve(mode, name).into_iter().collect()
    }
}

/// `GET /v2/models[/{name}]/stats` after `n` infer requests: each request counted as one
/// execution of 10 µs of compute (and one of the composing model).
pub fn stats_json(mode: FaultMode, name: &str, n: u64) -> Value {
    let d = |ns: u64| json!({"count": n, "ns": n * ns});
    let zero = json!({"count": 0, "ns": 0});
    let entries: Vec<Value> = stats_models(mode, name)
        .into_iter()
        .map(|model| {
            json!({"name": model, "version": VERSION, "last_inference": 0,
                "inference_count": n, "execution_count": n,
                "inference_stats": {"success": d(20_000), "fail": zero, "queue": d(1_000),
                    "compute_input": d(1_000), "compute_infer": d(10_000),
                    "compute_output": d(1_000), "cache_hit": zero, "cache_miss": zero},
                "batch_stats": []})
        })
        .collect();
    json!({ "model_stats": entries })
}

/// gRPC ServerMetadata.
pub fn server_pb() -> pb::ServerMetadataResponse {
    pb::ServerMetadataResponse {
        name: "inferperf-fault".into(),
        version: "2.50.0".into(),
        extensions: ["model_configuration", "binary_tensor_data", "statistics"]
            .map(String::from)
            .to_vec(),
    }
}

/// gRPC ModelMetadata of `model`.
pub fn metadata_pb(mode: FaultMode, model: &str) -> pb::ModelMetadataResponse {
    let tensor = |name: &str, shape: Vec<i64>| pb::model_metadata_response::TensorMetadata {
        name: name.into(),
        datatype: "FP32".into(),
        shape,
    };
    pb::ModelMetadataResponse {
        name: model.into(),
        versions: vec![VERSION.into()],
        platform: platform(mode, model).into(),
        inputs: vec![tensor("INPUT0", dims_of(mode, model))],
        outputs: vec![tensor("OUTPUT0", vec![ELEMENTS as i64])],
    }
}

/// gRPC ModelConfig of `model`.
pub fn config_pb(mode: FaultMode, model: &str) -> pb::ModelConfigResponse {
    let fp32 = pb::DataType::TypeFp32 as i32;
    let ensemble = platform(mode, model) == "ensemble";
    let scheduling = composing(mode).filter(|_| ensemble).map(|step| {
        let map = |name: &str| HashMap::from([(name.to_string(), name.to_string())]);
        pb::model_config::SchedulingChoice::EnsembleScheduling(pb::ModelEnsembling {
            step: vec![pb::model_ensembling::Step {
                model_name: step.into(),
                model_version: -1,
                input_map: map("INPUT0"),
                output_map: map("OUTPUT0"),
            }],
        })
    });
    let config = pb::ModelConfig {
        name: model.into(),
        platform: platform(mode, model).into(),
        backend: if ensemble { "" } else { "onnxruntime" }.into(),
        max_batch_size: 0,
        input: vec![pb::ModelInput {
            name: "INPUT0".into(),
            data_type: fp32,
            dims: dims_of(mode, model),
            ..Default::default()
        }],
        output: vec![pb::ModelOutput {
            name: "OUTPUT0".into(),
            data_type: fp32,
            dims: vec![ELEMENTS as i64],
            ..Default::default()
        }],
        model_transaction_policy: Some(pb::ModelTransactionPolicy { decoupled: false }),
        response_cache: None,
        scheduling_choice: scheduling,
        instance_group: Vec::new(),
    };
    pb::ModelConfigResponse {
        config: Some(config),
    }
}

/// gRPC ModelStatistics for `name` (empty: all) after `n` infer requests.
pub fn stats_pb(mode: FaultMode, name: &str, n: u64) -> pb::ModelStatisticsResponse {
    let d = |ns: u64| {
        Some(pb::StatisticDuration {
            count: n,
            ns: n * ns,
        })
    };
    let zero = Some(pb::StatisticDuration::default());
    let model_stats = stats_models(mode, name)
        .into_iter()
        .map(|model| pb::ModelStatistics {
            name: model.into(),
            version: VERSION.into(),
            last_inference: 0,
            inference_count: n,
            execution_count: n,
            inference_stats: Some(pb::InferStatistics {
                success: d(20_000),
                fail: zero,
                queue: d(1_000),
                compute_input: d(1_000),
                compute_infer: d(10_000),
                compute_output: d(1_000),
                cache_hit: zero,
                cache_miss: zero,
            }),
            batch_stats: Vec::new(),
        })
        .collect();
    pb::ModelStatisticsResponse { model_stats }
}

/// The infer reply's JSON header (binary output of `TENSOR_BYTES` bytes follows it), or the
/// whole reply with the output as a JSON array when `binary` is false.
pub fn infer_json(binary: bool, data: &[u8]) -> String {
    let head = format!(
        "{{\"model_name\":\"{MODEL}\",\"model_version\":\"{VERSION}\",\"outputs\":[{{\"name\":\
         \"OUTPUT0\",\"datatype\":\"FP32\",\"shape\":[{ELEMENTS}],"
    );
    if binary {
        return format!("{head}\"parameters\":{{\"binary_data_size\":{TENSOR_BYTES}}}}}]}}");
    }
    let values: Vec<String> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string())
        .collect();
    format!("{head}\"data\":[{}]}}]}}", values.join(","))
}

/// The gRPC infer reply echoing `data` (`TENSOR_BYTES` bytes) for request `id`.
pub fn infer_pb(id: &str, data: Vec<u8>) -> pb::ModelInferResponse {
    pb::ModelInferResponse {
        model_name: MODEL.into(),
        model_version: VERSION.into(),
        id: id.into(),
        parameters: HashMap::new(),
        outputs: vec![pb::model_infer_response::InferOutputTensor {
            name: "OUTPUT0".into(),
            datatype: "FP32".into(),
            shape: vec![ELEMENTS as i64],
            parameters: HashMap::new(),
            contents: None,
        }],
        raw_output_contents: vec![data],
    }
}

/// The error text of a failed infer request (ESC sequences, BEL and CR in `escape-text`).
pub fn error_text(mode: FaultMode, n: u64) -> String {
    match mode {
        FaultMode::EscapeText => {
            "\u{1b}[31mfault server: red alert\u{1b}[0m\u{7} bell\r overwritten \u{1b}]0;title\u{7}"
                .to_string()
        }
        FaultMode::EveryNthFails => {
            format!("fault server: infer request {n} failed (every-nth-fails)")
        }
        _ => "fault server: internal error (status-500 mode)".to_string(),
    }
}
