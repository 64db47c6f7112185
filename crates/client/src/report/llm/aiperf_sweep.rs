//! AIPerf 0.13's cross-level summary of a single-trial sweep,
//! `sweep_aggregate/profile_export_aiperf_sweep.{json,csv}` (AIPerf 0.13 docs, "Sweep
//! Aggregate API Reference"):
//!
//! - JSON: `aggregation_type` (`sweep`), `num_profile_runs`, `num_successful_runs`,
//!   `failed_runs` (`{label, error}`), `metadata` (`sweep_parameters`: `{name, values}`;
//!   `num_combinations`), `per_combination_metrics` (`{parameters, metrics}`, one per level
//!   that succeeded; each metric `<tag>_<stat>` as `{mean, unit}`, one trial having no spread),
//!   `best_configurations` (`best_throughput`: the highest `request_throughput_avg`;
//!   `best_latency_p99`: the lowest `time_to_first_token_p99`, else `request_latency_p99`),
//!   `pareto_optimal` (the levels no other beats on both);
//! - CSV (CRLF rows, blank-line separated): the per-level table (`<metric>_mean`, `_std`,
//!   `_min`, `_max`, `_cv` per metric, sorted by name; a single trial fills `_mean` only),
//!   `Best Configurations`, `Pareto Optimal Points`, `Metadata`.

use serde_json::Value;

use super::csv_field;
use super::json_text::{num, Node};
use crate::measure::llm::LlmMetrics;

/// One level of the sweep as the aggregate sees it.
pub struct SweepLevel<'a> {
    /// The swept parameter (`concurrency`, `request_rate`).
    pub name: &'static str,
    /// Its value as JSON (`4`, `2.5`) and as Python prints it (`4`, `2.5`, `5.0`).
    pub value: Value,
    pub text: String,
    /// The level's folder name (`concurrency_4`), AIPerf's run label.
    pub label: String,
    /// The level's metrics, or why it failed.
    pub result: std::result::Result<&'a LlmMetrics, String>,
}

/// A level that succeeded: its parameters and flattened statistics (`(key, mean, unit)`).
struct Cell<'a> {
    level: &'a SweepLevel<'a>,
    stats: Vec<(String, f64, &'static str)>,
}

impl Cell<'_> {
    fn get(&self, key: &str) -> Option<(f64, &'static str)> {
        self.stats
            .iter()
            .find(|s| s.0 == key)
            .map(|(_, v, unit)| (*v, *unit))
    }

    fn parameters(&self) -> Node {
        let mut o = Node::obj();
        o.put(self.level.name, self.level.value.clone());
        o
    }
}

const THROUGHPUT: &str = "request_throughput_avg";
/// The latency the best configuration and the Pareto front use, in order of preference.
const LATENCIES: [&str; 2] = ["time_to_first_token_p99", "request_latency_p99"];

/// The swept parameters with their values in first-seen order (failed levels included).
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

fn cells<'a>(levels: &'a [SweepLevel<'a>]) -> Vec<Cell<'a>> {
    levels
        .iter()
        .filter_map(|level| {
            let m = level.result.as_ref().ok()?;
            Some(Cell {
                level,
                stats: super::aiperf::flat_stats(m),
            })
        })
        .collect()
}

/// The latency key every cell has, as AIPerf picks it.
fn latency_key(cells: &[Cell]) -> Option<&'static str> {
    LATENCIES
        .into_iter()
        .find(|k| cells.iter().all(|c| c.get(k).is_some()))
}

/// `(name, cell, value, unit)` of each best configuration AIPerf names.
fn best<'a, 'b>(cells: &'b [Cell<'a>]) -> Vec<(&'static str, &'b Cell<'a>, f64, &'static str)> {
    let mut out = Vec::new();
    let pick = |key: &str, higher: bool| {
        let mut best: Option<(&Cell, f64, &'static str)> = None;
        for c in cells {
            let (v, unit) = c.get(key)?;
            // The first of equal values wins, as Python's max and min keep it.
            if best.is_none_or(|(_, b, _)| if higher { v > b } else { v < b }) {
                best = Some((c, v, unit));
            }
        }
        best
    };
    if let Some((c, v, unit)) = pick(THROUGHPUT, true) {
        out.push(("best_throughput", c, v, unit));
    }
    if let Some((c, v, unit)) = latency_key(cells).and_then(|k| pick(k, false)) {
        out.push(("best_latency_p99", c, v, unit));
    }
    out
}

/// The cells no other cell beats on throughput (higher) and latency (lower) at once, sorted
/// by parameter name and value.
fn pareto<'a, 'b>(cells: &'b [Cell<'a>]) -> Vec<&'b Cell<'a>> {
    let Some(lat) = latency_key(cells) else {
        return Vec::new();
    };
    let point = |c: &Cell| -> Option<(f64, f64)> { Some((c.get(THROUGHPUT)?.0, c.get(lat)?.0)) };
    if cells.iter().any(|c| point(c).is_none()) {
        return Vec::new();
    }
    let dominates =
        |a: (f64, f64), b: (f64, f64)| a.0 >= b.0 && a.1 <= b.1 && (a.0 > b.0 || a.1 < b.1);
    let mut front: Vec<&Cell> = cells
        .iter()
        .filter(|c| {
            let me = point(c).unwrap_or_default();
            !cells
                .iter()
                .any(|o| !std::ptr::eq(*c, o) && dominates(point(o).unwrap_or_default(), me))
        })
        .collect();
    let order = |c: &Cell| c.level.value.as_f64().unwrap_or(0.0);
    front.sort_by(|a, b| {
        (a.level.name, order(a))
            .partial_cmp(&(b.level.name, order(b)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    front
}

/// `profile_export_aiperf_sweep.json`.
pub fn json(levels: &[SweepLevel]) -> String {
    let cells = cells(levels);
    let mut root = Node::obj();
    root.put("aggregation_type", "sweep");
    root.put("num_profile_runs", levels.len() as u64);
    root.put("num_successful_runs", cells.len() as u64);
    let failed = levels
        .iter()
        .filter_map(|l| {
            let error = l.result.as_ref().err()?;
            let mut o = Node::obj();
            o.put("label", l.label.as_str());
            o.put("error", error.as_str());
            Some(o)
        })
        .collect();
    root.push("failed_runs", Node::List(failed));
    let params = parameters(levels);
    let mut metadata = Node::obj();
    let defs = params
        .iter()
        .map(|(name, values)| {
            let mut o = Node::obj();
            o.put("name", *name);
            o.put(
                "values",
                Value::Array(values.iter().map(|l| l.value.clone()).collect()),
            );
            o
        })
        .collect();
    metadata.push("sweep_parameters", Node::List(defs));
    let combinations: usize = params.iter().map(|(_, v)| v.len()).product();
    metadata.put("num_combinations", combinations as u64);
    root.push("metadata", metadata);
    let per = cells
        .iter()
        .map(|c| {
            let mut metrics = Node::obj();
            for (key, v, unit) in &c.stats {
                let mut m = Node::obj();
                m.put("mean", num(*v));
                m.put("unit", *unit);
                metrics.push(key, m);
            }
            let mut o = Node::obj();
            o.push("parameters", c.parameters());
            o.push("metrics", metrics);
            o
        })
        .collect();
    root.push("per_combination_metrics", Node::List(per));
    let mut best_node = Node::obj();
    for (name, c, v, unit) in best(&cells) {
        let mut o = Node::obj();
        o.push("parameters", c.parameters());
        o.put("metric", num(v));
        o.put("unit", unit);
        best_node.push(name, o);
    }
    root.push("best_configurations", best_node);
    let front = pareto(&cells).iter().map(|c| c.parameters()).collect();
    root.push("pareto_optimal", Node::List(front));
    root.pretty()
}

/// `profile_export_aiperf_sweep.csv`.
pub fn csv(levels: &[SweepLevel]) -> String {
    let cells = cells(levels);
    let names: Vec<&str> = parameters(levels).iter().map(|(n, _)| *n).collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    // A cell's value of each swept parameter (empty for the others).
    let param_cells = |c: &Cell| -> Vec<String> {
        names
            .iter()
            .map(|n| {
                if *n == c.level.name {
                    c.level.text.clone()
                } else {
                    String::new()
                }
            })
            .collect()
    };
    if let Some(first) = cells.first() {
        let mut metrics: Vec<&str> = first.stats.iter().map(|s| s.0.as_str()).collect();
        metrics.sort_unstable();
        let mut header: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        for m in &metrics {
            for stat in ["mean", "std", "min", "max", "cv"] {
                header.push(format!("{m}_{stat}"));
            }
        }
        rows.push(header);
        for c in &cells {
            let mut row = param_cells(c);
            for m in &metrics {
                row.push(
                    c.get(m)
                        .map_or_else(String::new, |(v, _)| format!("{v:.2}")),
                );
                // One trial: no spread, no range (AIPerf leaves them empty).
                row.extend(std::iter::repeat_n(String::new(), 4));
            }
            rows.push(row);
        }
    }
    rows.push(Vec::new());
    rows.push(vec!["Best Configurations".into()]);
    let best = best(&cells);
    if !best.is_empty() {
        let mut header = vec!["Configuration".to_string()];
        header.extend(names.iter().map(|n| n.to_string()));
        header.extend(["Metric".into(), "Unit".into()]);
        rows.push(header);
        for (name, c, v, unit) in best {
            let mut row = vec![title_case(name)];
            row.extend(param_cells(c));
            row.extend([format!("{v:.2}"), unit.to_string()]);
            rows.push(row);
        }
    }
    rows.push(Vec::new());
    rows.push(vec!["Pareto Optimal Points".into()]);
    let front = pareto(&cells);
    if front.is_empty() {
        rows.push(vec!["None".into()]);
    } else {
        rows.push(names.iter().map(|n| n.to_string()).collect());
        rows.extend(front.iter().map(|c| param_cells(c)));
    }
    rows.push(Vec::new());
    rows.push(vec!["Metadata".into()]);
    rows.push(vec!["Field".into(), "Value".into()]);
    let combinations: usize = parameters(levels).iter().map(|(_, v)| v.len()).product();
    for (field, value) in [
        ("Aggregation Type", "sweep".to_string()),
        ("Sweep Parameters", names.join(", ")),
        ("Number of Combinations", combinations.to_string()),
        ("Number of Profile Runs", levels.len().to_string()),
        ("Number of Successful Runs", cells.len().to_string()),
    ] {
        rows.push(vec![field.into(), value]);
    }
    let mut out = String::new();
    for row in rows {
        let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        out.push_str(&fields.join(","));
        // Python's csv module ends its rows with CRLF.
        out.push_str("\r\n");
    }
    out
}

/// `best_latency_p99` → `Best Latency P99`, as AIPerf titles its configurations.
fn title_case(name: &str) -> String {
    name.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or_else(String::new, |f| {
                f.to_uppercase().collect::<String>() + c.as_str()
            })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::llm::Stats;

    fn metrics(throughput: f64, ttft_p99_ms: f64) -> LlmMetrics {
        let mut m = crate::measure::llm::compute(&[], &Default::default());
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
            label: format!("concurrency_{c}"),
            result: r,
        }
    }

    #[test]
    fn best_pareto_and_failures_follow_aiperf() {
        let (a, b, c) = (
            metrics(10.0, 50.0),
            metrics(20.0, 80.0),
            metrics(15.0, 90.0),
        );
        let levels = [
            level(1, Ok(&a)),
            level(2, Ok(&b)),
            level(4, Ok(&c)),
            level(8, Err("server gone".into())),
        ];
        let v: Value = serde_json::from_str(&json(&levels)).unwrap();
        assert_eq!(v["aggregation_type"], "sweep");
        assert_eq!(
            (
                v["num_profile_runs"].as_u64(),
                v["num_successful_runs"].as_u64()
            ),
            (Some(4), Some(3))
        );
        assert_eq!(v["failed_runs"][0]["label"], "concurrency_8");
        assert_eq!(v["failed_runs"][0]["error"], "server gone");
        assert_eq!(
            v["metadata"]["sweep_parameters"][0]["values"],
            serde_json::json!([1, 2, 4, 8])
        );
        assert_eq!(v["metadata"]["num_combinations"], 4);
        let per = v["per_combination_metrics"].as_array().unwrap();
        assert_eq!(per.len(), 3);
        assert_eq!(per[1]["parameters"]["concurrency"], 2);
        assert_eq!(per[1]["metrics"]["request_throughput_avg"]["mean"], 20.0);
        assert_eq!(per[1]["metrics"]["time_to_first_token_p99"]["mean"], 80.0);
        assert_eq!(per[1]["metrics"]["time_to_first_token_p99"]["unit"], "ms");
        let best = &v["best_configurations"];
        assert_eq!(best["best_throughput"]["parameters"]["concurrency"], 2);
        assert_eq!(best["best_latency_p99"]["parameters"]["concurrency"], 1);
        assert_eq!(best["best_latency_p99"]["metric"], 50.0);
        // Concurrency 4 is beaten by 2 on both throughput and latency.
        assert_eq!(
            v["pareto_optimal"],
            serde_json::json!([{"concurrency": 1}, {"concurrency": 2}])
        );
        let text = csv(&levels);
        assert!(text.lines().all(|l| !l.contains('\n')) && text.ends_with("\r\n"));
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert!(lines[0].starts_with("concurrency,"), "{}", lines[0]);
        assert!(lines[0].contains(",request_throughput_avg_mean,request_throughput_avg_std,"));
        let col = lines[0]
            .split(',')
            .position(|h| h == "request_throughput_avg_mean")
            .unwrap();
        assert_eq!(lines[2].split(',').nth(col), Some("20.00"));
        assert!(text.contains("\r\nBest Configurations\r\nConfiguration,concurrency,Metric,Unit\r\nBest Throughput,2,20.00,requests/sec\r\nBest Latency P99,1,50.00,ms\r\n"), "{text}");
        assert!(
            text.contains("\r\nPareto Optimal Points\r\nconcurrency\r\n1\r\n2\r\n"),
            "{text}"
        );
        assert!(
            text.ends_with("Number of Profile Runs,4\r\nNumber of Successful Runs,3\r\n"),
            "{text}"
        );
    }

    #[test]
    fn without_a_success_the_sections_are_empty() {
        let levels = [level(1, Err("no request completed".into()))];
        let v: Value = serde_json::from_str(&json(&levels)).unwrap();
        assert_eq!(v["per_combination_metrics"], serde_json::json!([]));
        assert_eq!(v["best_configurations"], serde_json::json!({}));
        let text = csv(&levels);
        assert!(
            text.starts_with("\r\nBest Configurations\r\n\r\nPareto Optimal Points\r\nNone\r\n"),
            "{text}"
        );
    }
}
