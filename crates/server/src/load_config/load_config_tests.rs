//! A load's config override read into model settings: the modelled fields, a full config's
//! round trip, configs that fail the poll, what the model cannot be, and the version policy.

use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::models::{find_model, MODELS};
use crate::settings::InstanceKind;

fn model(name: &str) -> &'static ModelDef {
    &MODELS[find_model(name).unwrap()]
}

fn load(name: &str, config: Value) -> Result<ModelSettings, Refusal> {
    parse(model(name), &config.to_string())
}

fn is_poll(r: Result<ModelSettings, Refusal>, want: &str) -> bool {
    matches!(&r, Err(Refusal::Poll(why)) if why.contains(want))
}

fn is_refused(r: Result<ModelSettings, Refusal>, want: &str) -> bool {
    matches!(&r, Err(Refusal::Load { message, state_reason: Some(_) })
        if message.starts_with("version 1 is at UNAVAILABLE state: Invalid argument: ")
            && message.contains(want))
}

#[test]
fn the_modelled_fields_are_applied() {
    let s = load(
        "simple",
        json!({"max_batch_size": 2, "instance_group": [{"count": 3, "kind": "KIND_CPU"}],
            "dynamic_batching": {"max_queue_delay_microseconds": "100"}}),
    )
    .unwrap();
    assert_eq!(s.max_batch_size, 2);
    assert_eq!(s.instances(), Some(3));
    let groups = s.instance_group.as_ref().unwrap();
    assert_eq!(
        (groups[0].name.as_str(), groups[0].kind),
        ("simple_0", InstanceKind::Cpu)
    );
    let batching = s.dynamic_batching.unwrap();
    assert_eq!(
        batching.preferred_batch_size,
        [2],
        "Triton prefers the largest batch"
    );
    assert_eq!(batching.max_queue_delay, Duration::from_micros(100));
    // Left out: the repository's own.
    let s = load("simple", json!({})).unwrap();
    assert_eq!(s, model("simple").settings());
}

/// What Model Analyzer sends: the config the server gave, with its search's fields changed.
#[test]
fn a_full_config_round_trips_with_camel_case_and_gpus() {
    let mut config = model("simple").config_json();
    config["max_batch_size"] = json!(4);
    config["instance_group"] = json!([{"count": 2, "kind": "KIND_GPU"}]);
    config["dynamic_batching"] = json!({"preferred_batch_size": [2, 4]});
    let s = load("simple", config).unwrap();
    assert_eq!(s.instances(), Some(4), "two instances on each of two GPUs");
    assert_eq!(s.instance_group.unwrap()[0].gpus, [0, 1]);
    let s = load(
        "identity_fp32",
        json!({"maxBatchSize": 4, "instanceGroup": [{"count": 0, "gpus": [1]}]}),
    )
    .unwrap();
    let group = &s.instance_group.unwrap()[0];
    assert_eq!(
        (group.kind, group.count, s.max_batch_size),
        (InstanceKind::Gpu, 1, 4)
    );
    let inputs_reordered = json!({"input": [
        {"name": "INPUT1", "data_type": "TYPE_INT32", "dims": ["16"]},
        {"name": "INPUT0", "data_type": "type_int32", "dims": [16]}]});
    assert!(load("simple", inputs_reordered).is_ok());
}

#[test]
fn unreadable_configs_fail_the_poll() {
    let simple = model("simple");
    assert!(matches!(
        parse(simple, "{max_batch_size"),
        Err(Refusal::Poll(_))
    ));
    let cases = [
        (json!([1]), "expected an object"),
        (json!({"max_batch": 2}), "no field 'max_batch'"),
        (
            json!({"name": "other"}),
            "unexpected directory name 'simple' for model 'other'",
        ),
        (
            json!({"max_batch_size": -1}),
            "'max_batch_size' must be non-negative value for simple",
        ),
        (
            json!({"max_batch_size": "two"}),
            "'max_batch_size': expected an integer",
        ),
        (json!({"instance_group": {"count": 2}}), "expected an array"),
        (
            json!({"instance_group": [{"count": 1, "cpus": 2}]}),
            "no such field",
        ),
        (
            json!({"instance_group": [{"kind": "KIND_TPU"}]}),
            "instance group kind",
        ),
        (
            json!({"instance_group": [{"kind": "KIND_GPU", "gpus": [5]}]}),
            "gpu id 5",
        ),
        (
            json!({"instance_group": [{"kind": "KIND_CPU", "gpus": [0]}]}),
            "has kind KIND_CPU",
        ),
        (
            json!({"dynamic_batching": {"preferred_batch_size": [16]}}),
            "must be <= max batch size",
        ),
        (
            json!({"dynamic_batching": {"preferred_batch_size": [0]}}),
            "must be positive",
        ),
        (
            json!({"dynamic_batching": {}, "sequence_batching": {}}),
            "one choice",
        ),
        (
            json!({"ensemble_scheduling": {}}),
            "whose platform is not ensemble",
        ),
    ];
    for (config, want) in cases {
        assert!(
            is_poll(load("simple", config.clone()), want),
            "{config}: {want}"
        );
    }
    let ensemble_groups = load("ensemble_simple", json!({"instance_group": [{"count": 2}]}));
    assert!(is_poll(
        ensemble_groups,
        "instance group should not be specified for ensemble"
    ));
}

#[test]
fn what_the_model_is_not_is_refused() {
    let cases = [
        (
            "simple",
            json!({"input": [{"name": "INPUT0", "dims": [8]}]}),
            "'input'",
        ),
        ("simple", json!({"backend": "onnxruntime"}), "'backend'"),
        (
            "simple",
            json!({"model_warmup": [{"name": "w"}]}),
            "'model_warmup'",
        ),
        (
            "simple",
            json!({"response_cache": {"enable": true}}),
            "'response_cache'",
        ),
        (
            "simple",
            json!({"sequence_batching": {}}),
            "is not stateful",
        ),
        (
            "simple",
            json!({"instance_group": [{"passive": true}]}),
            "passive",
        ),
        (
            "simple",
            json!({"dynamic_batching": {"priority_levels": 2}}),
            "priority_levels",
        ),
        (
            "simple",
            json!({"dynamic_batching": {"max_queue_delay_microseconds": 4e9}}),
            "one hour",
        ),
        (
            "repeat_int32",
            json!({"max_batch_size": 4}),
            "does not support batching",
        ),
        (
            "accumulate_int32",
            json!({"dynamic_batching": {}}),
            "sequence_batching",
        ),
    ];
    for (name, config, want) in cases {
        assert!(
            is_refused(load(name, config.clone()), want),
            "{name} {config}: {want}"
        );
    }
    // Defaults of fields the model's config leaves out are fine.
    assert!(load(
        "simple",
        json!({"response_cache": {"enable": false}, "model_warmup": []})
    )
    .is_ok());
}

#[test]
fn the_version_policy_must_select_version_one() {
    let s = load(
        "simple",
        json!({"version_policy": {"specific": {"versions": ["1", 2]}}}),
    );
    assert_eq!(
        s.unwrap().version_policy,
        json!({"specific": {"versions": [1, 2]}})
    );
    let none = load(
        "simple",
        json!({"version_policy": {"latest": {"num_versions": 0}}}),
    );
    assert!(
        matches!(none, Err(Refusal::Load { state_reason: None, ref message })
        if message.contains("at least one version must be available"))
    );
    let bad = json!({"version_policy": {"latest": {}, "all": {}}});
    assert!(is_poll(load("simple", bad), "more than one"));
}
