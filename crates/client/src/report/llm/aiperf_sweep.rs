//! AIPerf 0.13's summaries of a single-trial sweep, as `aiperf profile --concurrency 1,2`
//! writes them (crates/client/src/report/llm/testdata/aiperf/sweep holds a trimmed sample):
//!
//! - `aggregate/<field>_<value>/profile_export_aiperf_aggregate.{json,csv}`: each level's
//!   confidence summary over its one trial: every statistic of every metric as
//!   `<tag>_<stat>` (`request_latency_p99`) with `mean`, a zero spread (`std`, `cv`, `se`),
//!   `min` = `max` = `ci_low` = `ci_high` = the value, `t_critical` null, and the unit;
//! - `sweep_aggregate/profile_export_aiperf_sweep.{json,csv}`: one entry per level that
//!   succeeded, each metric under its plain tag with `mean`/`avg`, a zero spread, the
//!   metric's own `min`/`max`, and for per-request metrics the percentiles, `count` and `sum`;
//!   the levels that failed as `failed_runs`. AIPerf 0.13 looks its best configurations and
//!   Pareto front up under flattened keys (`request_throughput_avg`) that these single-trial
//!   entries lack, so both come out empty, here as there.
//!
//! CSV rows end in CRLF (Python's csv module); numbers have two decimals, `cv` four.

use serde_json::Value;

use super::aiperf::{spread_stats, summary_metrics, SummaryMetric, AIPERF_VERSION};
use super::csv_field;
use super::json_text::{num, Node};
use crate::measure::llm::stats::PERCENTILES;
use crate::measure::llm::LlmMetrics;

/// The schema version of AIPerf 0.13's `profile_export_aiperf_aggregate.json`.
pub const AGGREGATE_SCHEMA_VERSION: &str = "1.0";
/// AIPerf's confidence level for its aggregates.
const CONFIDENCE_LEVEL: f64 = 0.95;
/// AIPerf's label of a cell's one trial.
const RUN_LABEL: &str = "run_0001";

/// One level of the sweep as the summaries see it.
pub struct SweepLevel<'a> {
    /// The swept field of AIPerf's profiling phase (`concurrency`, `rate`).
    pub name: &'static str,
    /// Its value as JSON (`4`, `2.5`) and as Python prints it (`4`, `2.5`, `5.0`).
    pub value: Value,
    pub text: String,
    /// The level's metrics, or why it failed.
    pub result: std::result::Result<&'a LlmMetrics, String>,
}

/// The dotted path of AIPerf's swept field: `phases.profiling.concurrency`.
pub fn variation_path(field: &str) -> String {
    format!("phases.profiling.{field}")
}

impl SweepLevel<'_> {
    /// AIPerf's `variation_label` of the level: `phases.profiling.concurrency=4`.
    pub fn variation_label(&self) -> String {
        format!("{}={}", variation_path(self.name), self.text)
    }

    /// `{name: value}`.
    fn parameters(&self) -> Node {
        let mut o = Node::obj();
        o.put(self.name, self.value.clone());
        o
    }
}

/// `(key, value, unit)` of every statistic of every metric: `<tag>_<stat>` with the stats
/// in AIPerf's order (avg, min, max, sum, p1..p99, std).
fn flat_stats(metrics: &[SummaryMetric]) -> Vec<(String, f64, &'static str)> {
    let mut out = Vec::new();
    for m in metrics {
        let mut stat = |name: &str, v: f64| out.push((format!("{}_{name}", m.tag), v, m.unit));
        stat("avg", m.avg);
        if let Some(s) = &m.dist {
            spread_stats(s, stat);
        }
    }
    out
}

/// `profile_export_aiperf_aggregate.json` of a level that succeeded.
pub fn aggregate_json(level: &SweepLevel, metrics: &LlmMetrics, model: &str) -> String {
    let mut meta = Node::obj();
    meta.put("aggregation_type", "confidence");
    meta.put("num_profile_runs", 1u64);
    meta.put("num_successful_runs", 1u64);
    meta.push("failed_runs", Node::List(Vec::new()));
    meta.put("confidence_level", CONFIDENCE_LEVEL);
    meta.put("run_labels", serde_json::json!([RUN_LABEL]));
    meta.put("single_run", true);
    meta.put("cooldown_seconds", 0.0);
    meta.put("variation_label", level.variation_label());
    let mut values = Node::obj();
    values.put(&variation_path(level.name), level.value.clone());
    meta.push("variation_values", values);
    meta.put("sweep_mode", "repeated");
    meta.put("model", model);
    let mut stats = Node::obj();
    for (key, v, unit) in flat_stats(&summary_metrics(metrics)) {
        let mut o = Node::obj();
        o.put("mean", num(v));
        o.put("std", 0.0);
        o.put("min", num(v));
        o.put("max", num(v));
        o.put("cv", 0.0);
        o.put("se", 0.0);
        o.put("ci_low", num(v));
        o.put("ci_high", num(v));
        o.put("t_critical", Value::Null);
        o.put("unit", unit);
        stats.push(&key, o);
    }
    let mut root = Node::obj();
    root.put("schema_version", AGGREGATE_SCHEMA_VERSION);
    root.put("aiperf_version", AIPERF_VERSION);
    root.push("metadata", meta);
    root.push("metrics", stats);
    root.pretty()
}

/// `profile_export_aiperf_aggregate.csv` of a level that succeeded.
pub fn aggregate_csv(level: &SweepLevel, metrics: &LlmMetrics, model: &str) -> String {
    let mut rows: Vec<Vec<String>> = vec![
        "metric,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,unit"
            .split(',')
            .map(String::from)
            .collect(),
    ];
    for (key, v, unit) in flat_stats(&summary_metrics(metrics)) {
        let v = format!("{v:.2}");
        let zero = "0.00".to_string();
        let zero4 = "0.0000".to_string();
        rows.push(vec![
            key,
            v.clone(),
            zero,
            v.clone(),
            v.clone(),
            zero4.clone(),
            zero4,
            v.clone(),
            v,
            String::new(),
            unit.to_string(),
        ]);
    }
    rows.push(Vec::new());
    let label = level.variation_label();
    for (field, value) in [
        ("Aggregation Type", "confidence".to_string()),
        ("Total Runs", "1".into()),
        ("Successful Runs", "1".into()),
        ("Confidence Level", CONFIDENCE_LEVEL.to_string()),
        ("Run Labels", format!("['{RUN_LABEL}']")),
        ("Single Run", "True".into()),
        ("Cooldown Seconds", "0.0".into()),
        ("Variation Label", label),
        (
            "Variation Values",
            format!("{{'{}': {}}}", variation_path(level.name), level.text),
        ),
        ("Sweep Mode", "repeated".into()),
        ("Model", model.to_string()),
    ] {
        rows.push(vec![field.into(), value]);
    }
    csv_text(rows)
}

/// A metric of a sweep cell under its plain tag: the value with no spread, the metric's own
/// range, and for per-request metrics the percentiles, count and sum.
fn cell_metric(m: &SummaryMetric) -> Node {
    let mut o = Node::obj();
    o.put("mean", num(m.avg));
    o.put("avg", num(m.avg));
    o.put("std", 0.0);
    let (min, max) = m.dist.as_ref().map_or((m.avg, m.avg), |s| (s.min, s.max));
    o.put("min", num(min));
    o.put("max", num(max));
    o.put("cv", 0.0);
    o.put("ci_low", num(m.avg));
    o.put("ci_high", num(m.avg));
    o.put("unit", m.unit);
    if let Some(s) = &m.dist {
        for (p, v) in PERCENTILES.iter().zip(s.percentiles) {
            o.put(&format!("p{p}"), num(v));
        }
        o.put("count", s.count);
        o.put("sum", num(s.avg * s.count as f64));
    }
    o
}

/// The swept fields with their values in first-seen order (failed levels included).
fn parameters<'a>(levels: &'a [SweepLevel<'a>]) -> Vec<(&'static str, Vec<&'a SweepLevel<'a>>)> {
    let mut out: Vec<(&'static str, Vec<&SweepLevel>)> = Vec::new();
    for l in levels {
        match out.iter_mut().find(|(n, _)| *n == l.name) {
            Some((_, values)) if values.iter().any(|v| v.text == l.text) => {}
            Some((_, values)) => values.push(l),
            None => out.push((l.name, vec![l])),
        }
    }
    out
}

/// The levels that succeeded, with their metrics.
fn cells<'a>(levels: &'a [SweepLevel<'a>]) -> Vec<(&'a SweepLevel<'a>, Vec<SummaryMetric>)> {
    levels
        .iter()
        .filter_map(|l| Some((l, summary_metrics(l.result.as_ref().ok()?))))
        .collect()
}

/// `profile_export_aiperf_sweep.json`.
pub fn sweep_json(levels: &[SweepLevel]) -> String {
    let cells = cells(levels);
    let params = parameters(levels);
    let mut root = Node::obj();
    root.put("aggregation_type", "sweep");
    root.put("num_profile_runs", levels.len() as u64);
    root.put("num_successful_runs", cells.len() as u64);
    let failed = levels
        .iter()
        .filter_map(|l| {
            let error = l.result.as_ref().err()?;
            let mut o = Node::obj();
            o.put("label", RUN_LABEL);
            o.put("error", error.as_str());
            Some(o)
        })
        .collect();
    root.push("failed_runs", Node::List(failed));
    let swept: Vec<(&str, Vec<Value>)> = params
        .iter()
        .map(|(name, values)| (*name, values.iter().map(|l| l.value.clone()).collect()))
        .collect();
    root.push(
        "metadata",
        sweep_metadata(&swept, "repeated", CONFIDENCE_LEVEL, 1),
    );
    let per = cells
        .iter()
        .map(|(level, metrics)| {
            let mut m = Node::obj();
            for metric in metrics {
                m.push(metric.tag, cell_metric(metric));
            }
            let mut o = Node::obj();
            o.push("parameters", level.parameters());
            o.push("metrics", m);
            o
        })
        .collect();
    root.push("per_combination_metrics", Node::List(per));
    root.push("best_configurations", Node::obj());
    root.push("pareto_optimal", Node::List(Vec::new()));
    root.pretty()
}

/// `profile_export_aiperf_sweep.csv`.
pub fn sweep_csv(levels: &[SweepLevel]) -> String {
    let cells = cells(levels);
    let params = parameters(levels);
    let names: Vec<&str> = params.iter().map(|(n, _)| *n).collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    if let Some((_, first)) = cells.first() {
        let mut tags: Vec<&str> = first.iter().map(|m| m.tag).collect();
        tags.sort_unstable();
        let mut header: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        for t in &tags {
            for stat in ["mean", "std", "min", "max", "cv"] {
                header.push(format!("{t}_{stat}"));
            }
        }
        rows.push(header);
        for (level, metrics) in &cells {
            let mut row: Vec<String> = names
                .iter()
                .map(|n| {
                    if *n == level.name {
                        level.text.clone()
                    } else {
                        String::new()
                    }
                })
                .collect();
            for t in &tags {
                match metrics.iter().find(|m| m.tag == *t) {
                    Some(m) => {
                        let (min, max) = m.dist.as_ref().map_or((m.avg, m.avg), |s| (s.min, s.max));
                        row.extend([
                            format!("{:.2}", m.avg),
                            "0.00".into(),
                            format!("{min:.2}"),
                            format!("{max:.2}"),
                            "0.0000".into(),
                        ]);
                    }
                    None => row.extend(std::iter::repeat(String::new()).take(5)),
                }
            }
            rows.push(row);
        }
    }
    rows.push(Vec::new());
    rows.push(vec!["Best Configurations".into()]);
    rows.push(Vec::new());
    rows.push(vec!["Pareto Optimal Points".into()]);
    rows.push(vec!["None".into()]);
    rows.push(Vec::new());
    rows.push(vec!["Metadata".into()]);
    rows.push(vec!["Field".into(), "Value".into()]);
    let combinations: usize = params.iter().map(|(_, v)| v.len()).product();
    for (field, value) in [
        ("Aggregation Type", "sweep".to_string()),
        ("Sweep Parameters", names.join(", ")),
        ("Number of Combinations", combinations.to_string()),
        ("Number of Profile Runs", levels.len().to_string()),
        ("Number of Successful Runs", cells.len().to_string()),
    ] {
        rows.push(vec![field.into(), value]);
    }
    csv_text(rows)
}

/// Rows as Python's csv module writes them: minimal quoting, CRLF endings.
/// AIPerf's sweep `metadata`: each swept parameter with its values, the number of
/// combinations they make, and how the sweep ran.
pub(super) fn sweep_metadata(
    swept: &[(&str, Vec<Value>)],
    mode: &str,
    confidence_level: f64,
    trials_per_value: usize,
) -> Node {
    let mut metadata = Node::obj();
    let defs = swept
        .iter()
        .map(|(name, values)| {
            let mut o = Node::obj();
            o.put("name", *name);
            o.put("values", Value::Array(values.clone()));
            o
        })
        .collect();
    metadata.push("sweep_parameters", Node::List(defs));
    let combinations: usize = swept.iter().map(|(_, v)| v.len()).product();
    metadata.put("num_combinations", combinations as u64);
    metadata.put("sweep_mode", mode);
    metadata.put("confidence_level", confidence_level);
    metadata.put("num_trials_per_value", trials_per_value as u64);
    metadata.put("aggregation_type", "sweep");
    metadata
}

pub(super) fn csv_text(rows: Vec<Vec<String>>) -> String {
    let mut out = String::new();
    for row in rows {
        let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::llm::Stats;

    fn metrics(throughput: f64, ttft_p99_ms: f64) -> LlmMetrics {
        let mut m = crate::measure::llm::compute(&[], &Default::default());
        m.streaming = true;
        m.request_throughput = throughput;
        m.ttft = Some(Stats {
            count: 10,
            avg: ttft_p99_ms * 0.5e6,
            min: 1e6,
            max: ttft_p99_ms * 1e6,
            std: 0.0,
            percentiles: [ttft_p99_ms * 1e6; 9],
        });
        m
    }

    fn level<'a>(c: u64, r: std::result::Result<&'a LlmMetrics, String>) -> SweepLevel<'a> {
        SweepLevel {
            name: "concurrency",
            value: c.into(),
            text: c.to_string(),
            result: r,
        }
    }

    #[test]
    fn the_sweep_summary_holds_successes_and_names_failures() {
        let (a, b) = (metrics(10.0, 50.0), metrics(20.0, 80.0));
        let levels = [
            level(1, Ok(&a)),
            level(2, Ok(&b)),
            level(8, Err("server gone".into())),
        ];
        let v: Value = serde_json::from_str(&sweep_json(&levels)).unwrap();
        assert_eq!(v["aggregation_type"], "sweep");
        assert_eq!(v["num_profile_runs"], 3);
        assert_eq!(v["num_successful_runs"], 2);
        assert_eq!(v["failed_runs"][0]["error"], "server gone");
        let params = &v["metadata"]["sweep_parameters"][0];
        assert_eq!(params["values"], serde_json::json!([1, 2, 8]));
        assert_eq!(v["metadata"]["num_combinations"], 3);
        let per = v["per_combination_metrics"].as_array().unwrap();
        assert_eq!(per.len(), 2);
        assert_eq!(per[1]["parameters"]["concurrency"], 2);
        assert_eq!(per[1]["metrics"]["request_throughput"]["mean"], 20.0);
        let ttft = &per[1]["metrics"]["time_to_first_token"];
        assert_eq!(
            (ttft["p99"].as_f64(), ttft["max"].as_f64()),
            (Some(80.0), Some(80.0))
        );
        assert_eq!(
            (ttft["count"].as_u64(), ttft["unit"].as_str()),
            (Some(10), Some("ms"))
        );
        assert_eq!(v["best_configurations"], serde_json::json!({}));
        let text = sweep_csv(&levels);
        let lines: Vec<&str> = text.split("\r\n").collect();
        let header: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(header[0], "concurrency");
        let col = header
            .iter()
            .position(|h| *h == "request_throughput_mean")
            .unwrap();
        assert_eq!(header[col + 4], "request_throughput_cv");
        let row: Vec<&str> = lines[2].split(',').collect();
        assert_eq!((row[0], row[col], row[col + 4]), ("2", "20.00", "0.0000"));
        assert!(
            text.contains("\r\n\r\nBest Configurations\r\n\r\nPareto Optimal Points\r\nNone\r\n")
        );
        assert!(text.ends_with("Number of Profile Runs,3\r\nNumber of Successful Runs,2\r\n"));
    }

    #[test]
    fn a_level_aggregate_flattens_every_statistic() {
        let m = metrics(10.0, 50.0);
        let l = level(4, Ok(&m));
        let v: Value = serde_json::from_str(&aggregate_json(&l, &m, "llm")).unwrap();
        assert_eq!(
            v["metadata"]["variation_label"],
            "phases.profiling.concurrency=4"
        );
        assert_eq!(
            v["metadata"]["variation_values"]["phases.profiling.concurrency"],
            4
        );
        let p99 = &v["metrics"]["time_to_first_token_p99"];
        assert_eq!(
            (p99["mean"].as_f64(), p99["ci_high"].as_f64()),
            (Some(50.0), Some(50.0))
        );
        assert_eq!(v["metrics"]["time_to_first_token_sum"]["mean"], 250.0);
        assert!(p99["t_critical"].is_null());
        let text = aggregate_csv(&l, &m, "llm");
        assert!(
            text.starts_with("metric,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,unit\r\n")
        );
        assert!(text.contains("\r\ntime_to_first_token_p99,50.00,0.00,50.00,50.00,0.0000,0.0000,50.00,50.00,,ms\r\n"), "{text}");
        assert!(text.ends_with("Variation Values,{'phases.profiling.concurrency': 4}\r\nSweep Mode,repeated\r\nModel,llm\r\n"));
    }
}
