//! End-to-end gRPC tests of a load's config override: RepositoryModelLoad applies it,
//! ModelConfig shows it (instance groups as the HTTP config has them), executions follow it,
//! and refusals carry Triton's codes and texts.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};

use super::test_client::*;
use super::wire::code;
use crate::test_client as http;
use crate::{start, ControlMode, Delay, ServeConfig, ServerHandle};
use inferperf_wire::protocol::grpc::pb::inference as pb;
use pb::model_config::SchedulingChoice;
use pb::model_repository_parameter::ParameterChoice;

const DELAY: Duration = Duration::from_millis(300);

/// HTTP and gRPC, explicit model control, `simple` loaded and delayed by [`DELAY`].
fn server() -> ServerHandle {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    start(ServeConfig {
        addr: local,
        grpc_addr: Some(local),
        delays: vec![("simple".into(), Delay::Fixed(DELAY))],
        control_mode: ControlMode::Explicit,
        load_models: vec!["simple".into()],
        ..ServeConfig::default()
    })
    .expect("server starts")
}

fn load_request(model: &str, params: &[(&str, ParameterChoice)]) -> pb::RepositoryModelLoadRequest {
    pb::RepositoryModelLoadRequest {
        model_name: model.into(),
        parameters: params
            .iter()
            .map(|(k, v)| {
                let p = pb::ModelRepositoryParameter {
                    parameter_choice: Some(v.clone()),
                };
                (k.to_string(), p)
            })
            .collect(),
        ..Default::default()
    }
}

async fn load(c: &mut Client, model: &str, config: &Value) -> Result<(), (u32, String)> {
    let req = load_request(
        model,
        &[("config", ParameterChoice::StringParam(config.to_string()))],
    );
    c.unary::<_, pb::RepositoryModelLoadResponse>("RepositoryModelLoad", &req)
        .await
        .map(|_| ())
}

async fn model_config(c: &mut Client, model: &str) -> pb::ModelConfig {
    let req = pb::ModelConfigRequest {
        name: model.into(),
        version: String::new(),
    };
    let resp: pb::ModelConfigResponse = c.unary("ModelConfig", &req).await.unwrap();
    resp.config.unwrap()
}

fn simple_request(batch: i64) -> pb::ModelInferRequest {
    let bytes = vec![0u8; batch as usize * 64];
    let shape = [batch, 16];
    infer_request(
        "simple",
        "",
        &[
            ("INPUT0", "INT32", &shape, bytes.clone()),
            ("INPUT1", "INT32", &shape, bytes),
        ],
    )
}

/// Three ModelInfer calls at once, on three connections; returns the growth of `simple`'s
/// queue time (ns).
fn three_at_once(server: &ServerHandle) -> u64 {
    let queue = || {
        let mut h = http::Client::connect(server.addr);
        let stats = h.request(&http::get("/v2/models/simple/stats")).json();
        stats["model_stats"][0]["inference_stats"]["queue"]["ns"]
            .as_u64()
            .unwrap()
    };
    let before = queue();
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let (mut a, mut b, mut c) = (
            connect(addr).await,
            connect(addr).await,
            connect(addr).await,
        );
        let req = simple_request(1);
        let (ra, rb, rc) = tokio::join!(
            a.unary::<_, pb::ModelInferResponse>("ModelInfer", &req),
            b.unary::<_, pb::ModelInferResponse>("ModelInfer", &req),
            c.unary::<_, pb::ModelInferResponse>("ModelInfer", &req),
        );
        for r in [ra, rb, rc] {
            r.unwrap();
        }
    });
    queue() - before
}

#[test]
fn the_override_applies_over_grpc() {
    let server = server();
    let addr = server.grpc_addr.unwrap();
    let config = json!({"max_batch_size": 2, "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
        "dynamic_batching": {"preferred_batch_size": [2], "max_queue_delay_microseconds": 100}});
    block_on(async move {
        let mut c = connect(addr).await;
        load(&mut c, "simple", &config).await.unwrap();
        let cfg = model_config(&mut c, "simple").await;
        assert_eq!(cfg.max_batch_size, 2);
        let group = &cfg.instance_group[0];
        assert_eq!(
            (group.name.as_str(), group.kind, group.count),
            ("simple_0", 2, 1)
        );
        let Some(SchedulingChoice::DynamicBatching(b)) = cfg.scheduling_choice else {
            panic!("dynamic batching is on: {:?}", cfg.scheduling_choice);
        };
        assert_eq!(
            (b.preferred_batch_size, b.max_queue_delay_microseconds),
            (vec![2], 100)
        );
        let err = c
            .unary::<_, pb::ModelInferResponse>("ModelInfer", &simple_request(3))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            (
                code::INVALID_ARGUMENT,
                "inference request batch-size must be <= 2 for 'simple'".into()
            )
        );
    });
}

#[test]
fn instance_count_bounds_concurrent_grpc_executions() {
    let server = server();
    let addr = server.grpc_addr.unwrap();
    let set_count = |count: u32| {
        block_on(async move {
            let mut c = connect(addr).await;
            let config = json!({"instance_group": [{"count": count, "kind": "KIND_CPU"}]});
            load(&mut c, "simple", &config).await.unwrap();
        })
    };
    set_count(1);
    let one = three_at_once(&server);
    assert!(one >= DELAY.as_nanos() as u64, "one instance queues: {one}");
    set_count(3);
    let three = three_at_once(&server);
    assert!(three < one / 2, "{three} vs {one}");
}

/// The repository config's instance group over gRPC is the HTTP config's.
#[test]
fn grpc_config_has_the_instance_group_of_the_http_config() {
    let server = server();
    let mut h = http::Client::connect(server.addr);
    let json_groups =
        h.request(&http::get("/v2/models/simple/config")).json()["instance_group"].clone();
    let addr = server.grpc_addr.unwrap();
    let groups = block_on(async move {
        model_config(&mut connect(addr).await, "simple")
            .await
            .instance_group
    });
    assert_eq!(groups.len(), 1);
    let g = &groups[0];
    let kind = pb::model_instance_group::Kind::try_from(g.kind)
        .unwrap()
        .as_str_name();
    assert_eq!(
        json!([{"name": g.name, "kind": kind, "count": g.count, "gpus": g.gpus,
            "secondary_devices": [], "profile": g.profile, "passive": g.passive,
            "host_policy": g.host_policy}]),
        json_groups
    );
}

#[test]
fn refused_loads_carry_tritons_codes() {
    let server = server();
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let poll = "failed to load 'simple', failed to poll from model repository";
        let err = load(&mut c, "simple", &json!({"max_batch_size": -1}))
            .await
            .unwrap_err();
        assert_eq!(err, (code::INTERNAL, poll.into()));
        let err = load(&mut c, "simple", &json!({"platform": "onnxruntime_onnx"}))
            .await
            .unwrap_err();
        assert_eq!(err.0, code::INVALID_ARGUMENT);
        assert!(
            err.1
                .starts_with("load failed for model 'simple': version 1 is at UNAVAILABLE"),
            "{}",
            err.1
        );
        let params = [
            (
                "config",
                ParameterChoice::Int64Param(2),
                "invalid value type for load parameter 'config', expected string_param.",
            ),
            (
                "file:1/model.onnx",
                ParameterChoice::StringParam("x".into()),
                "invalid value type for load parameter 'file:1/model.onnx', expected bytes_param.",
            ),
            (
                "other",
                ParameterChoice::BoolParam(true),
                "unrecognized load parameter 'other'.",
            ),
        ];
        for (name, value, want) in params {
            let req = load_request("simple", &[(name, value)]);
            let err = c
                .unary::<_, pb::RepositoryModelLoadResponse>("RepositoryModelLoad", &req)
                .await
                .unwrap_err();
            assert_eq!(err, (code::INVALID_ARGUMENT, want.into()));
        }
        assert_eq!(
            model_config(&mut c, "simple").await.max_batch_size,
            8,
            "nothing changed"
        );
    });
}
