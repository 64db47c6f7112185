use super::*;
use crate::report::llm::aiperf_confidence::ConfidenceMetric;

fn metric(key: &str, mean: f64, unit: &'static str) -> ConfidenceMetric {
    ConfidenceMetric {
        key: key.into(),
        mean,
        std: 1.0,
        min: mean - 1.0,
        max: mean + 1.0,
        cv: 1.0 / mean,
        se: 0.5,
        ci_low: mean - 2.0,
        ci_high: mean + 2.0,
        t_critical: Some(4.3),
        unit,
    }
}

fn agg(throughput: f64, ttft_p99: f64) -> ConfidenceAggregate {
    ConfidenceAggregate {
        num_runs: 2,
        run_labels: vec!["run_0001".into(), "run_0002".into()],
        failed_runs: Vec::new(),
        confidence_level: 0.95,
        cooldown_seconds: 0.0,
        metrics: vec![
            metric("request_throughput_avg", throughput, "requests/sec"),
            metric("time_to_first_token_p99", ttft_p99, "ms"),
        ],
        variation: None,
    }
}

fn level(c: u64, a: Option<&ConfidenceAggregate>) -> TrialLevel<'_> {
    TrialLevel {
        name: "concurrency",
        value: c.into(),
        text: c.to_string(),
        runs: 2,
        failed: Vec::new(),
        aggregate: a,
    }
}

#[test]
fn best_configurations_and_the_pareto_front_follow_the_means() {
    // c1: slow but quick; c2: faster and slower; c4: dominated by c2.
    let (a, b, c) = (agg(10.0, 5.0), agg(20.0, 8.0), agg(15.0, 9.0));
    let levels = [level(1, Some(&a)), level(2, Some(&b)), level(4, Some(&c))];
    let best = best(&levels);
    assert_eq!(best.len(), 2);
    assert_eq!(
        (best[0].0, best[0].1.text.as_str(), best[0].2),
        ("best_throughput", "2", 20.0)
    );
    assert_eq!(
        (best[1].0, best[1].1.text.as_str(), best[1].2),
        ("best_latency_p99", "1", 5.0)
    );
    assert_eq!(best[1].3, "ms");
    let front: Vec<&str> = pareto(&levels).iter().map(|l| l.text.as_str()).collect();
    assert_eq!(front, ["1", "2"]);
    let json: Value =
        serde_json::from_str(&sweep_json(&levels, SweepMode::Repeated, 0.95)).unwrap();
    assert_eq!(json["num_profile_runs"], 6);
    assert_eq!(json["metadata"]["num_trials_per_value"], 2);
    assert_eq!(json["metadata"]["sweep_mode"], "repeated");
    assert_eq!(
        json["best_configurations"]["best_throughput"]["parameters"]["concurrency"],
        2
    );
    assert_eq!(
        json["pareto_optimal"],
        serde_json::json!([{"concurrency": 1}, {"concurrency": 2}])
    );
    let cell = &json["per_combination_metrics"][2]["metrics"]["request_throughput_avg"];
    assert_eq!(
        (cell["mean"].as_f64(), cell["ci_high"].as_f64()),
        (Some(15.0), Some(17.0))
    );
    let csv = sweep_csv(&levels);
    assert!(
        csv.starts_with("concurrency,request_throughput_avg_mean,"),
        "{csv}"
    );
    assert!(
        csv.contains("\r\nBest Throughput,2,20.00,requests/sec\r\n"),
        "{csv}"
    );
    assert!(
        csv.contains("Pareto Optimal Points\r\nconcurrency\r\n1\r\n2\r\n"),
        "{csv}"
    );
    assert!(
        csv.ends_with("Number of Profile Runs,6\r\nNumber of Successful Runs,6\r\n"),
        "{csv}"
    );
}

#[test]
fn a_level_without_a_successful_run_is_left_out_of_the_cells() {
    let a = agg(10.0, 5.0);
    let mut failed = level(2, None);
    failed.failed = vec![
        FailedRun {
            label: "run_0001".into(),
            error: "boom".into(),
        },
        FailedRun {
            label: "run_0002".into(),
            error: "boom".into(),
        },
    ];
    let levels = [level(1, Some(&a)), failed];
    let json: Value =
        serde_json::from_str(&sweep_json(&levels, SweepMode::Independent, 0.9)).unwrap();
    assert_eq!(json["num_successful_runs"], 2);
    assert_eq!(json["failed_runs"].as_array().unwrap().len(), 2);
    assert_eq!(json["per_combination_metrics"].as_array().unwrap().len(), 1);
    assert_eq!(
        json["metadata"]["sweep_parameters"][0]["values"],
        serde_json::json!([1, 2])
    );
    assert_eq!(
        json["pareto_optimal"],
        serde_json::json!([{"concurrency": 1}])
    );
}
