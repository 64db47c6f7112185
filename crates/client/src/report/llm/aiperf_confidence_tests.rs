//! Tests of the confidence aggregate: Student's t quantiles, the statistics and the files.

use super::*;
use crate::measure::llm::Stats;

#[test]
fn t_quantiles_match_the_tables() {
    // Two-sided quantiles (scipy's t.ppf(1 - alpha / 2, df)).
    for (level, df, want) in [
        (0.95, 1, 12.706205),
        (0.95, 2, 4.302653),
        (0.95, 3, 3.182446),
        (0.95, 4, 2.776445),
        (0.95, 9, 2.262157),
        (0.90, 2, 2.919986),
        (0.99, 2, 9.924843),
        (0.99, 9, 3.249836),
        (0.50, 5, 0.726687),
    ] {
        let t = t_critical(level, df);
        assert!(
            (t - want).abs() < 1e-5,
            "level {level} df {df}: {t} != {want}"
        );
    }
}

fn metrics(throughput: f64, ttft_ms: f64) -> LlmMetrics {
    let mut m = crate::measure::llm::compute(&[], &Default::default());
    m.streaming = true;
    m.request_throughput = throughput;
    m.ttft = Some(Stats {
        count: 4,
        avg: ttft_ms * 1e6,
        min: ttft_ms * 1e6,
        max: ttft_ms * 1e6,
        std: 0.0,
        percentiles: [ttft_ms * 1e6; 9],
    });
    m
}

#[test]
fn three_runs_give_mean_spread_and_interval() {
    let (a, b, c) = (metrics(10.0, 1.0), metrics(12.0, 2.0), metrics(14.0, 3.0));
    let agg = aggregate(&[Ok(&a), Ok(&b), Ok(&c)], 0.95, 0.5).unwrap();
    let m = agg
        .metrics
        .iter()
        .find(|m| m.key == "request_throughput_avg")
        .unwrap();
    let se = 2.0 / 3f64.sqrt();
    assert_eq!((m.mean, m.std, m.min, m.max), (12.0, 2.0, 10.0, 14.0));
    assert!((m.cv - 2.0 / 12.0).abs() < 1e-12 && (m.se - se).abs() < 1e-12);
    assert!((m.ci_high - (12.0 + 4.302653 * se)).abs() < 1e-4, "{m:?}");
    assert_eq!(m.unit, "requests/sec");
    let v: Value = serde_json::from_str(&agg.json()).unwrap();
    assert_eq!(v["metadata"]["num_profile_runs"], 3);
    assert_eq!(
        v["metadata"]["run_labels"],
        serde_json::json!(["run_0001", "run_0002", "run_0003"])
    );
    assert!(v["metadata"].get("single_run").is_none());
    assert_eq!(v["metadata"]["cooldown_seconds"], 0.5);
    let p99 = &v["metrics"]["time_to_first_token_p99"];
    assert_eq!(
        (p99["mean"].as_f64(), p99["unit"].as_str()),
        (Some(2.0), Some("ms"))
    );
    let csv = agg.csv();
    assert!(csv.starts_with("metric,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,unit\r\n"));
    assert!(
        csv.contains("\r\nrequest_throughput_avg,12.00,2.00,10.00,14.00,0.1667,1.1547,"),
        "{csv}"
    );
    assert!(csv.contains(",4.3027,requests/sec\r\n"), "{csv}");
    assert!(csv.ends_with(
        "Run Labels,\"['run_0001', 'run_0002', 'run_0003']\"\r\nCooldown Seconds,0.5\r\n"
    ));
    let t = agg.table();
    assert!(t.starts_with("Aggregate over 3 runs (3 successful), 95% confidence intervals\n"));
    assert!(
        t.lines()
            .any(|l| l.starts_with("Request Throughput (Avg)") && l.contains("12.00")),
        "{t}"
    );
}

#[test]
fn failed_runs_are_named_and_one_success_has_no_interval() {
    let a = metrics(10.0, 1.0);
    let agg = aggregate(&[Err("server gone".into()), Ok(&a)], 0.9, 0.0).unwrap();
    assert_eq!(agg.run_labels, ["run_0002"]);
    let v: Value = serde_json::from_str(&agg.json()).unwrap();
    assert_eq!(v["metadata"]["failed_runs"][0]["label"], "run_0001");
    assert_eq!(v["metadata"]["single_run"], true);
    assert!(v["metrics"]["request_throughput_avg"]["t_critical"].is_null());
    assert!(agg.table().ends_with("run_0001 failed: server gone\n"));
    assert!(aggregate(&[Err("x".into())], 0.95, 0.0).is_none());
}
