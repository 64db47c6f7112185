//! End-to-end tests (HTTP, 127.0.0.1) of a load's config override: the config endpoint shows
//! it, executions follow it, and what cannot be loaded is refused with Triton's answers.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};

use crate::test_client::*;
use crate::{start, ControlMode, Delay, ServeConfig, ServerHandle};

/// Each `simple` execution takes this long, so overlapping requests show in queue times.
const DELAY: Duration = Duration::from_millis(300);

/// Explicit model control with `simple` loaded and delayed by [`DELAY`].
fn server() -> ServerHandle {
    start(ServeConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        delays: vec![("simple".into(), Delay::Fixed(DELAY))],
        control_mode: ControlMode::Explicit,
        load_models: vec!["simple".into()],
        ..ServeConfig::default()
    })
    .expect("server starts")
}

/// A load request whose `config` parameter is `config` (a JSON value sent as a string).
fn load_with(model: &str, config: &Value) -> Vec<u8> {
    let body = json!({"parameters": {"config": config.to_string()}});
    post_json(
        &format!("/v2/repository/models/{model}/load"),
        &body.to_string(),
    )
}

fn config(c: &mut Client, model: &str) -> Value {
    c.request(&get(&format!("/v2/models/{model}/config")))
        .json()
}

/// `simple`'s statistics: (inference count, execution count, queue ns).
fn simple_stats(c: &mut Client) -> (u64, u64, u64) {
    let stats = c.request(&get("/v2/models/simple/stats")).json();
    let m = &stats["model_stats"][0];
    let n = |v: &Value| v.as_u64().unwrap();
    (
        n(&m["inference_count"]),
        n(&m["execution_count"]),
        n(&m["inference_stats"]["queue"]["ns"]),
    )
}

/// Sends `n` batch-1 `simple` requests in one write (so they are ready together) and reads
/// the answers; returns the statistics' growth.
fn pipelined(server: &ServerHandle, n: usize) -> (u64, u64, u64) {
    let mut stats = Client::connect(server.addr);
    let before = simple_stats(&mut stats);
    let mut c = Client::connect(server.addr);
    c.send(&simple_binary(1).repeat(n));
    for _ in 0..n {
        check_simple_binary(&c.recv(), 1);
    }
    let after = simple_stats(&mut stats);
    (after.0 - before.0, after.1 - before.1, after.2 - before.2)
}

fn cpu_instances(count: u32) -> Value {
    json!({"instance_group": [{"kind": "KIND_CPU", "count": count}]})
}

#[test]
fn instance_count_is_how_many_executions_run_at_once() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let resp = c.request(&load_with("simple", &cpu_instances(1)));
    assert_eq!(resp.status, 200, "{}", resp.error());
    let group = &config(&mut c, "simple")["instance_group"][0];
    assert_eq!(
        (group["kind"].clone(), group["count"].clone()),
        (json!("KIND_CPU"), json!(1))
    );
    let (inferences, executions, one_queue) = pipelined(&server, 3);
    assert_eq!((inferences, executions), (3, 3));
    // One instance: the second request waits one delay, the third two.
    assert!(one_queue >= DELAY.as_nanos() as u64, "{one_queue}");

    let resp = c.request(&load_with("simple", &cpu_instances(3)));
    assert_eq!(resp.status, 200, "{}", resp.error());
    assert_eq!(config(&mut c, "simple")["instance_group"][0]["count"], 3);
    let (_, _, three_queue) = pipelined(&server, 3);
    assert!(three_queue < one_queue / 2, "{three_queue} vs {one_queue}");
}

#[test]
fn dynamic_batching_runs_queued_requests_as_one_execution() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let mut override_ = cpu_instances(1);
    override_["dynamic_batching"] = json!({"preserve_ordering": true});
    assert_eq!(c.request(&load_with("simple", &override_)).status, 200);
    let batching = &config(&mut c, "simple")["dynamic_batching"];
    assert_eq!(batching["preferred_batch_size"], json!([8]));
    assert_eq!(batching["preserve_ordering"], true);
    let (inferences, executions, _) = pipelined(&server, 4);
    // The first runs at once; the three that queue behind it run together.
    assert_eq!(inferences, 4);
    assert!(executions < 4, "{executions} executions");
}

#[test]
fn max_batch_size_is_the_largest_batch_accepted() {
    let server = server();
    let mut c = Client::connect(server.addr);
    assert_eq!(
        c.request(&load_with("simple", &json!({"max_batch_size": 2})))
            .status,
        200
    );
    assert_eq!(config(&mut c, "simple")["max_batch_size"], 2);
    check_simple_binary(&c.request(&simple_binary(2)), 2);
    let refused = c.request(&simple_binary(3));
    assert_eq!(
        (refused.status, refused.error()),
        (
            400,
            "inference request batch-size must be <= 2 for 'simple'".into()
        )
    );
    // Without batching, tensors have no batch dimension.
    assert_eq!(
        c.request(&load_with("simple", &json!({"max_batch_size": 0})))
            .status,
        200
    );
    let meta = c.request(&get("/v2/models/simple")).json();
    assert_eq!(meta["inputs"][0]["shape"], json!([16]));
    let zeros = vec![0; 16];
    let body = json!({"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [16], "data": zeros},
        {"name": "INPUT1", "datatype": "INT32", "shape": [16], "data": zeros}]});
    let resp = c.request(&post_json("/v2/models/simple/infer", &body.to_string()));
    assert_eq!(resp.status, 200, "{}", resp.error());
}

#[test]
fn the_override_stays_until_an_unload() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let repository = config(&mut c, "simple");
    let override_ = json!({"max_batch_size": 4, "dynamic_batching": {}});
    assert_eq!(c.request(&load_with("simple", &override_)).status, 200);
    let loaded = config(&mut c, "simple");
    assert_eq!(loaded["max_batch_size"], 4);
    // A load without a config reloads nothing that changed: the override stays.
    let plain = c.request(&post_json("/v2/repository/models/simple/load", ""));
    assert_eq!(plain.status, 200);
    assert_eq!(config(&mut c, "simple"), loaded);
    let unload = c.request(&post_json("/v2/repository/models/simple/unload", ""));
    assert_eq!(unload.status, 200);
    assert_eq!(
        c.request(&post_json("/v2/repository/models/simple/load", ""))
            .status,
        200
    );
    assert_eq!(config(&mut c, "simple"), repository);
    assert!(repository.get("dynamic_batching").is_none());
}

#[test]
fn overrides_that_cannot_load_are_refused_as_triton_does() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let before = config(&mut c, "simple");
    let poll = "failed to load 'simple', failed to poll from model repository";
    let unreadable = [
        json!({"max_batch_size": -1}),
        json!({"name": "other"}),
        json!({"max_batch_size": "two"}),
        json!({"no_such_field": 1}),
    ];
    for bad in unreadable {
        let resp = c.request(&load_with("simple", &bad));
        assert_eq!((resp.status, resp.error()), (500, poll.into()), "{bad}");
    }
    let not_json = r#"{"parameters":{"config":"{max_batch_size"}}"#;
    let resp = c.request(&post_json("/v2/repository/models/simple/load", not_json));
    assert_eq!((resp.status, resp.error()), (500, poll.into()));
    let resp = c.request(&load_with(
        "simple",
        &json!({"input": [{"name": "INPUT0", "dims": [4]}]}),
    ));
    assert_eq!(resp.status, 400);
    let error = resp.error();
    assert!(
        error.starts_with(
            "load failed for model 'simple': version 1 is at UNAVAILABLE state: Invalid \
             argument: 'input'"
        ) && error.ends_with(";\n"),
        "{error}"
    );
    assert_eq!(
        config(&mut c, "simple"),
        before,
        "a refused load changes nothing"
    );
    // Triton's refusals of load parameters it does not know.
    let params = [
        (
            r#"{"parameters":{"config":{"max_batch_size":2}}}"#,
            "attempt to access JSON non-string as string",
        ),
        (
            r#"{"parameters":{"other":"x"}}"#,
            "unexpected error on creating Triton parameter",
        ),
        (
            r#"{"parameters":[1]}"#,
            "attempt to get members for non-object",
        ),
    ];
    for (body, want) in params {
        let resp = c.request(&post_json("/v2/repository/models/simple/load", body));
        assert_eq!((resp.status, resp.error()), (500, want.into()), "{body}");
    }
}

#[test]
fn a_model_that_fails_to_load_shows_why_in_the_index() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let resp = c.request(&load_with("repeat_int32", &json!({"max_batch_size": 4})));
    assert_eq!(resp.status, 400, "{}", resp.error());
    let index = c.request(&post_json("/v2/repository/index", "")).json();
    let row = index
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "repeat_int32")
        .unwrap()
        .clone();
    assert_eq!(
        (row["state"].clone(), row["version"].clone()),
        (json!("UNAVAILABLE"), json!("1"))
    );
    let reason = row["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("Invalid argument: model 'repeat_int32' does not support batching"),
        "{reason}"
    );
    assert_eq!(
        c.request(&post_json("/v2/repository/models/repeat_int32/load", ""))
            .status,
        200
    );
    assert_eq!(config(&mut c, "repeat_int32")["max_batch_size"], 0);
}
