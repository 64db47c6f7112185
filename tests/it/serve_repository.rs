//! The reference server as Triton 2.51 answers (checked side by side on a real tritonserver):
//! the model repository extension in both model control modes, over HTTP and gRPC, and what
//! a model that is not loaded answers on readiness, metadata, config, statistics and infer.

use std::time::Duration;

use inferperf::protocol::grpc::blocking::GrpcClient;
use inferperf::protocol::grpc::pb::inference as pb;
use inferperf::protocol::http1::blocking::BlockingClient;
use inferperf::server::{self, ControlMode, ServeConfig, ServerHandle};
use prost::Message;
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(10);

fn start(mode: ControlMode, load: &[&str]) -> ServerHandle {
    server::start(ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        grpc_addr: Some("127.0.0.1:0".parse().unwrap()),
        control_mode: mode,
        load_models: load.iter().map(|s| s.to_string()).collect(),
        ..ServeConfig::default()
    })
    .expect("reference server starts")
}

fn http(server: &ServerHandle) -> BlockingClient {
    BlockingClient::connect(&server.addr.to_string(), TIMEOUT).unwrap()
}

fn grpc(server: &ServerHandle) -> GrpcClient {
    GrpcClient::connect(&server.grpc_addr.unwrap().to_string(), TIMEOUT).unwrap()
}

fn post(c: &mut BlockingClient, path: &str, body: &str) -> (u16, String) {
    let (status, body) = c.post(path, &[], body.as_bytes()).unwrap();
    (status, String::from_utf8(body).unwrap())
}

fn get(c: &mut BlockingClient, path: &str) -> (u16, String) {
    let (status, body) = c.get(path).unwrap();
    (status, String::from_utf8(body).unwrap())
}

fn error(text: &str) -> String {
    json!({ "error": text }).to_string()
}

/// The gRPC call's decoded response, or its error text.
fn call<Resp: Message + Default>(
    c: &mut GrpcClient,
    method: &str,
    req: &impl Message,
) -> Result<Resp, String> {
    c.unary(method, &req.encode_to_vec())
        .map(|bytes| Resp::decode(bytes.as_slice()).unwrap())
        .map_err(|e| e.to_string())
}

fn simple_infer_body() -> String {
    simple_batch_body(1)
}

fn simple_batch_body(batch: usize) -> String {
    let zeros = vec![0; 16 * batch];
    json!({"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [batch, 16], "data": zeros},
        {"name": "INPUT1", "datatype": "INT32", "shape": [batch, 16], "data": zeros}]})
    .to_string()
}

#[test]
fn explicit_mode_over_http() {
    let server = start(ControlMode::Explicit, &["identity_fp32"]);
    let mut c = http(&server);
    index_lists_the_repository(&mut c);
    unloaded_model_answers_not_found(&mut c);
    load_and_unload(&mut c, &server);
    repository_errors(&mut c);
}

/// The index lists every model of the repository; `ready` keeps the loaded one only.
fn index_lists_the_repository(c: &mut BlockingClient) {
    let (status, index) = post(c, "/v2/repository/index", "");
    assert_eq!(status, 200);
    let index: Value = serde_json::from_str(&index).unwrap();
    let rows = index.as_array().unwrap();
    assert_eq!(rows.len(), 7, "{index}");
    assert_eq!(rows[0], json!({"name": "accumulate_int32"}));
    let fp32 = rows.iter().find(|r| r["name"] == "identity_fp32").unwrap();
    assert_eq!(
        fp32,
        &json!({"name": "identity_fp32", "version": "1", "state": "READY"})
    );
    let (_, ready_only) = post(c, "/v2/repository/index", r#"{"ready":true}"#);
    assert_eq!(
        serde_json::from_str::<Value>(&ready_only).unwrap(),
        json!([{"name": "identity_fp32", "version": "1", "state": "READY"}])
    );
}

/// A model in the repository but not loaded: Triton's answers on every endpoint.
fn unloaded_model_answers_not_found(c: &mut BlockingClient) {
    let no_versions = error("Request for unknown model: 'simple' has no available versions");
    assert_eq!(
        get(c, "/v2/models/simple/ready"),
        (400, error("Model version not ready"))
    );
    assert_eq!(get(c, "/v2/models/simple"), (404, no_versions.clone()));
    assert_eq!(
        get(c, "/v2/models/simple/config"),
        (404, no_versions.clone())
    );
    let infer = simple_infer_body();
    assert_eq!(
        post(c, "/v2/models/simple/infer", &infer),
        (404, no_versions)
    );
    assert_eq!(
        get(c, "/v2/models/simple/stats"),
        (400, error("requested model 'simple' is not available"))
    );
    let (_, all) = get(c, "/v2/models/stats");
    let all: Value = serde_json::from_str(&all).unwrap();
    assert_eq!(all["model_stats"].as_array().unwrap().len(), 1, "{all}");
}

/// Loading makes the model serve; unloading marks it UNAVAILABLE and it stops serving.
fn load_and_unload(c: &mut BlockingClient, server: &ServerHandle) {
    let infer = simple_infer_body();
    assert_eq!(
        post(c, "/v2/repository/models/simple/load", ""),
        (200, String::new())
    );
    assert_eq!(get(c, "/v2/models/simple/ready").0, 200);
    let (status, body) = post(c, "/v2/models/simple/infer", &infer);
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.counters().model("simple").unwrap().inferences, 1);

    assert_eq!(
        post(c, "/v2/repository/models/simple/unload", "{}"),
        (200, String::new())
    );
    let (_, index) = post(c, "/v2/repository/index", "{}");
    let index: Value = serde_json::from_str(&index).unwrap();
    let simple = index
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "simple");
    assert_eq!(
        simple,
        Some(
            &json!({"name": "simple", "version": "1", "state": "UNAVAILABLE",
            "reason": "unloaded"})
        )
    );
    assert_eq!(post(c, "/v2/models/simple/infer", &infer).0, 404);
    assert_eq!(server.counters().model("simple").unwrap().infer_requests, 1);
}

/// Errors: an unknown model, bad JSON, the wrong method.
fn repository_errors(c: &mut BlockingClient) {
    assert_eq!(
        post(c, "/v2/repository/models/nosuch/load", ""),
        (
            500,
            error("failed to load 'nosuch', failed to poll from model repository")
        )
    );
    assert_eq!(
        post(c, "/v2/repository/models/nosuch/unload", ""),
        (200, String::new())
    );
    let (status, text) = post(c, "/v2/repository/index", "xx");
    assert_eq!(status, 500);
    assert!(
        text.contains("failed to parse the request JSON buffer"),
        "{text}"
    );
    assert_eq!(get(c, "/v2/repository/index").0, 405);
}

#[test]
fn ensembles_bring_and_take_their_composing_models() {
    let server = start(ControlMode::Explicit, &[]);
    let mut c = http(&server);
    let (_, ready) = post(&mut c, "/v2/repository/index", r#"{"ready":true}"#);
    assert_eq!(ready, "[]");
    post(&mut c, "/v2/repository/models/ensemble_simple/load", "");
    let ready_names = |c: &mut BlockingClient| {
        let (_, text) = post(c, "/v2/repository/index", r#"{"ready":true}"#);
        let v: Value = serde_json::from_str(&text).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ready_names(&mut c),
        ["ensemble_simple", "identity_int32", "simple"]
    );
    let (status, body) = post(
        &mut c,
        "/v2/models/ensemble_simple/infer",
        &simple_infer_body(),
    );
    assert_eq!(status, 200, "{body}");
    let dependents = r#"{"parameters":{"unload_dependents":true}}"#;
    post(
        &mut c,
        "/v2/repository/models/ensemble_simple/unload",
        dependents,
    );
    assert_eq!(ready_names(&mut c), Vec::<String>::new());
}

#[test]
fn none_mode_refuses_load_and_unload() {
    let server = start(ControlMode::None, &[]);
    let mut c = http(&server);
    let refusal = error("explicit model load / unload is not allowed if polling is enabled");
    for path in [
        "/v2/repository/models/simple/load",
        "/v2/repository/models/simple/unload",
        "/v2/repository/models/nosuch/load",
    ] {
        assert_eq!(post(&mut c, path, ""), (503, refusal.clone()), "{path}");
    }
    let (_, index) = post(&mut c, "/v2/repository/index", "");
    let index: Value = serde_json::from_str(&index).unwrap();
    assert!(index
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["state"] == "READY" && r["version"] == "1"));
    // Unknown models: readiness and statistics are 400 as in Triton.
    assert_eq!(
        get(&mut c, "/v2/models/nosuch/ready"),
        (400, error("Model version not ready"))
    );
    assert_eq!(
        get(&mut c, "/v2/models/nosuch/stats"),
        (400, error("requested model 'nosuch' is not available"))
    );
    assert_eq!(
        get(&mut c, "/v2/models/nosuch"),
        (
            404,
            error("Request for unknown model: 'nosuch' is not found")
        )
    );
    let (_, meta) = get(&mut c, "/v2");
    let meta: Value = serde_json::from_str(&meta).unwrap();
    let extensions = meta["extensions"].as_array().unwrap();
    for wanted in [
        "model_repository",
        "model_repository(unload_dependents)",
        "statistics",
        "cuda_shared_memory",
    ] {
        assert!(extensions.contains(&json!(wanted)), "{meta}");
    }
    let mut g = grpc(&server);
    let err = call::<pb::RepositoryModelLoadResponse>(
        &mut g,
        "RepositoryModelLoad",
        &pb::RepositoryModelLoadRequest {
            model_name: "simple".into(),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(err.contains("not allowed if polling is enabled"), "{err}");
    let meta: pb::ServerMetadataResponse =
        call(&mut g, "ServerMetadata", &pb::ServerMetadataRequest {}).unwrap();
    assert!(meta.extensions.iter().any(|e| e == "model_repository"));
}

#[test]
fn explicit_mode_over_grpc() {
    let server = start(ControlMode::Explicit, &["identity_fp32"]);
    let mut g = grpc(&server);
    let index = |g: &mut GrpcClient, ready: bool| -> Vec<(String, String, String, String)> {
        let req = pb::RepositoryIndexRequest {
            ready,
            ..Default::default()
        };
        let resp: pb::RepositoryIndexResponse = call(g, "RepositoryIndex", &req).unwrap();
        resp.models
            .into_iter()
            .map(|m| (m.name, m.version, m.state, m.reason))
            .collect()
    };
    let s = |t: &str| t.to_string();
    assert_eq!(
        index(&mut g, true),
        [(s("identity_fp32"), s("1"), s("READY"), s(""))]
    );
    assert_eq!(index(&mut g, false).len(), 7);
    let ready = |g: &mut GrpcClient| {
        let req = pb::ModelReadyRequest {
            name: "simple".into(),
            version: String::new(),
        };
        call::<pb::ModelReadyResponse>(g, "ModelReady", &req)
            .unwrap()
            .ready
    };
    assert!(!ready(&mut g));
    let meta = pb::ModelMetadataRequest {
        name: "simple".into(),
        version: String::new(),
    };
    let err = call::<pb::ModelMetadataResponse>(&mut g, "ModelMetadata", &meta).unwrap_err();
    assert!(err.contains("'simple' has no available versions"), "{err}");
    let stats = pb::ModelStatisticsRequest {
        name: "simple".into(),
        version: String::new(),
    };
    let err = call::<pb::ModelStatisticsResponse>(&mut g, "ModelStatistics", &stats).unwrap_err();
    assert!(
        err.contains("requested model 'simple' is not available"),
        "{err}"
    );

    let load = pb::RepositoryModelLoadRequest {
        model_name: "simple".into(),
        ..Default::default()
    };
    call::<pb::RepositoryModelLoadResponse>(&mut g, "RepositoryModelLoad", &load).unwrap();
    assert!(ready(&mut g));
    let all = pb::ModelStatisticsRequest::default();
    let listed: pb::ModelStatisticsResponse = call(&mut g, "ModelStatistics", &all).unwrap();
    let mut names: Vec<String> = listed.model_stats.into_iter().map(|m| m.name).collect();
    names.sort();
    assert_eq!(names, ["identity_fp32", "simple"]);

    let unload = pb::RepositoryModelUnloadRequest {
        model_name: "simple".into(),
        ..Default::default()
    };
    call::<pb::RepositoryModelUnloadResponse>(&mut g, "RepositoryModelUnload", &unload).unwrap();
    assert!(!ready(&mut g));
    let row = index(&mut g, false).into_iter().find(|r| r.0 == "simple");
    assert_eq!(
        row,
        Some((s("simple"), s("1"), s("UNAVAILABLE"), s("unloaded")))
    );
    let bad = pb::RepositoryModelLoadRequest {
        model_name: "nosuch".into(),
        ..Default::default()
    };
    let err =
        call::<pb::RepositoryModelLoadResponse>(&mut g, "RepositoryModelLoad", &bad).unwrap_err();
    assert!(err.contains("failed to load 'nosuch'"), "{err}");
}

fn load_body(config: &Value) -> String {
    json!({"parameters": {"config": config.to_string()}}).to_string()
}

/// A load's `config` becomes the model's config and limits its requests; over gRPC too, where
/// ModelConfig also carries the instance groups.
#[test]
fn a_load_config_override_applies_over_http_and_grpc() {
    let server = start(ControlMode::Explicit, &["simple"]);
    let mut c = http(&server);
    let config = json!({"max_batch_size": 2, "instance_group": [{"count": 3, "kind": "KIND_CPU"}]});
    assert_eq!(
        post(
            &mut c,
            "/v2/repository/models/simple/load",
            &load_body(&config)
        ),
        (200, String::new())
    );
    let (_, shown) = get(&mut c, "/v2/models/simple/config");
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["max_batch_size"], 2);
    assert_eq!(shown["instance_group"][0]["count"], 3);
    assert_eq!(
        post(&mut c, "/v2/models/simple/infer", &simple_batch_body(2)).0,
        200
    );
    assert_eq!(
        post(&mut c, "/v2/models/simple/infer", &simple_batch_body(3)),
        (
            400,
            error("inference request batch-size must be <= 2 for 'simple'")
        )
    );

    let mut g = grpc(&server);
    let grpc_load = |g: &mut GrpcClient, model: &str, config: &str| {
        let param = pb::ModelRepositoryParameter {
            parameter_choice: Some(
                pb::model_repository_parameter::ParameterChoice::StringParam(config.into()),
            ),
        };
        let req = pb::RepositoryModelLoadRequest {
            model_name: model.into(),
            parameters: [("config".to_string(), param)].into(),
            ..Default::default()
        };
        call::<pb::RepositoryModelLoadResponse>(g, "RepositoryModelLoad", &req)
    };
    let batching = json!({"dynamic_batching": {"max_queue_delay_microseconds": 500}});
    grpc_load(&mut g, "identity_fp32", &batching.to_string()).unwrap();
    let req = pb::ModelConfigRequest {
        name: "identity_fp32".into(),
        version: String::new(),
    };
    let cfg = call::<pb::ModelConfigResponse>(&mut g, "ModelConfig", &req)
        .unwrap()
        .config
        .unwrap();
    use pb::model_config::SchedulingChoice;
    assert!(matches!(
        cfg.scheduling_choice,
        Some(SchedulingChoice::DynamicBatching(
            pb::ModelDynamicBatching {
                max_queue_delay_microseconds: 500,
                ..
            }
        ))
    ));
    assert_eq!(cfg.instance_group.len(), 1, "as the HTTP config: {cfg:?}");
    assert_eq!(cfg.instance_group[0].name, "identity_fp32_0");
    let err = grpc_load(&mut g, "identity_fp32", "{").unwrap_err();
    assert!(
        err.ends_with(
            "gRPC status 13: failed to load 'identity_fp32', failed to poll from model repository"
        ),
        "{err}"
    );
}
