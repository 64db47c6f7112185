use super::*;
use serde_json::json;

fn stats(name: &str, version: &str, queue: u64) -> ModelStats {
    ModelStats {
        name: name.into(),
        version: version.into(),
        inference_count: queue,
        queue: StatDuration {
            count: queue,
            ns: queue * 100,
        },
        ..ModelStats::default()
    }
}

fn composing(name: &str, version: &str, inner: Vec<ComposingModel>) -> ComposingModel {
    ComposingModel {
        name: name.into(),
        version: version.into(),
        composing: inner,
    }
}

#[test]
fn deltas_pick_versions_sort_and_nest() {
    let start = vec![
        stats("tok", "1", 10),
        stats("net", "1", 5),
        stats("net", "2", 5),
        stats("inner", "1", 0),
    ];
    let end = vec![
        stats("tok", "1", 30),
        stats("net", "1", 9),
        stats("net", "2", 8),
        stats("inner", "1", 4),
        stats("other", "1", 100),
    ];
    let tree = vec![
        composing("tok", "", vec![]),
        composing("net", "", vec![composing("inner", "1", vec![])]),
    ];
    let (got, warnings) = composing_deltas(&start, &end, &tree).unwrap();
    // Sorted by name: net before tok.
    let names: Vec<(&str, &str, u64)> = got
        .iter()
        .map(|c| {
            (
                c.model.name.as_str(),
                c.model.version.as_str(),
                c.model.queue.count,
            )
        })
        .collect();
    assert_eq!(names, [("net", "2", 3), ("tok", "1", 20)]);
    assert_eq!(got[0].composing[0].model.queue.count, 4);
    assert!(got[1].composing.is_empty());
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("'net'") && warnings[0].contains("version 2"),
        "{}",
        warnings[0]
    );
    // An explicit version is used as given; a missing model is an error naming it.
    let (pinned, warnings) =
        composing_deltas(&start, &end, &[composing("net", "1", vec![])]).unwrap();
    assert_eq!((pinned[0].model.queue.count, warnings.len()), (4, 0));
    let err = composing_deltas(&start, &end, &[composing("gone", "", vec![])]).unwrap_err();
    assert!(
        err.msg.contains("composing model 'gone' version any"),
        "{}",
        err.msg
    );
}

#[test]
fn merging_windows_adds_by_name() {
    let one = |q: u64| ComposingStats {
        model: stats("a", "1", q),
        composing: vec![ComposingStats {
            model: stats("b", "1", q * 2),
            composing: vec![],
        }],
    };
    let mut sum = Vec::new();
    merge_composing(&mut sum, &[one(1)]);
    merge_composing(&mut sum, &[one(3)]);
    assert_eq!(sum.len(), 1);
    assert_eq!(sum[0].model.queue.count, 4);
    assert_eq!(sum[0].composing[0].model.queue.count, 8);
}

#[test]
fn ensemble_steps_from_config() {
    let config = json!({"ensemble_scheduling": {"step": [
        {"model_name": "pre", "model_version": -1},
        {"model_name": "net", "model_version": "3"},
        {"model_name": "pre", "model_version": -1},
        {"model_name": "post"}
    ]}});
    assert_eq!(
        ensemble_steps(&config).unwrap(),
        [
            composing("pre", "", vec![]),
            composing("net", "3", vec![]),
            composing("post", "", vec![])
        ]
    );
    assert!(ensemble_steps(&json!({"name": "plain"}))
        .unwrap()
        .is_empty());
    for (bad, want) in [
        (json!({"ensemble_scheduling": {"step": {}}}), "not an array"),
        (
            json!({"ensemble_scheduling": {"step": [{}]}}),
            "step[0].model_name is missing",
        ),
        (
            json!({"ensemble_scheduling": {"step": [{"model_name": "x", "model_version": -5}]}}),
            "step[0].model_version must be -1",
        ),
    ] {
        let err = ensemble_steps(&bad).unwrap_err();
        assert!(err.msg.contains(want), "{}", err.msg);
    }
}

#[test]
fn composing_tree_expands_nested_ensembles() {
    let mut asked = Vec::new();
    let mut fetch = |name: &str, version: &str| -> crate::error::Result<serde_json::Value> {
        asked.push(format!("{name}:{version}"));
        Ok(match name {
            "top" => json!({"ensemble_scheduling": {"step": [
                {"model_name": "mid", "model_version": -1}, {"model_name": "leaf", "model_version": 2}]}}),
            "mid" => {
                json!({"ensemble_scheduling": {"step": [{"model_name": "leaf", "model_version": -1}]}})
            }
            _ => json!({"name": name}),
        })
    };
    let tree = composing_tree("top", &mut fetch).unwrap();
    assert_eq!(
        tree,
        [
            composing("mid", "", vec![composing("leaf", "", vec![])]),
            composing("leaf", "2", vec![])
        ]
    );
    assert_eq!(asked, ["top:", "mid:", "leaf:", "leaf:2"]);
    let mut looping = |_: &str, _: &str| -> crate::error::Result<serde_json::Value> {
        Ok(json!({"ensemble_scheduling": {"step": [{"model_name": "self"}]}}))
    };
    let err = composing_tree("self", &mut looping).unwrap_err();
    assert!(err.msg.contains("nest deeper"), "{}", err.msg);
}

#[test]
fn bls_flag_values() {
    assert_eq!(
        bls_composing_models(" a:3, b ").unwrap(),
        [composing("a", "3", vec![]), composing("b", "", vec![])]
    );
    for bad in ["", ",", "a:x", ":1", "a:"] {
        let err = bls_composing_models(bad).unwrap_err();
        assert!(
            err.msg.starts_with("--bls-composing-models"),
            "{bad}: {}",
            err.msg
        );
        assert_eq!(err.exit_code(), 99);
    }
}
