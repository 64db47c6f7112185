//! AIPerf 0.13's cross-level summary of a sweep run several times (`--concurrency 1,2
//! --num-profile-runs 3`): `profile_export_aiperf_sweep.{json,csv}` with one entry per level
//! that had a successful run, each statistic of each metric (`request_latency_p99`) as its
//! confidence aggregate over the level's runs (`mean`, `std`, `min`, `max`, `cv`, `ci_low`,
//! `ci_high`, `unit`), the best configurations (highest `request_throughput_avg` mean, lowest
//! `time_to_first_token_p99` mean, else `request_latency_p99`) and the Pareto front of those
//! two (throughput up, latency down), as AIPerf's `SweepAnalyzer` computes them.

use serde_json::Value;

use super::aiperf_confidence::{ConfidenceAggregate, FailedRun};
use super::aiperf_sweep::{csv_text, sweep_metadata};
use super::json_text::{num, Node};

/// One level of the sweep: its swept field and value, and its runs' aggregate.
pub struct TrialLevel<'a> {
    /// The swept field of AIPerf's profiling phase (`concurrency`, `rate`).
    pub name: &'static str,
    /// Its value as JSON and as Python prints it.
    pub value: Value,
    pub text: String,
    /// The runs of the level: how many, and their aggregate (None: none succeeded).
    pub runs: usize,
    pub failed: Vec<FailedRun>,
    pub aggregate: Option<&'a ConfidenceAggregate>,
}

/// The sweep's iteration order (AIPerf's `--parameter-sweep-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepMode {
    Repeated,
    Independent,
}

impl SweepMode {
    pub fn name(self) -> &'static str {
        match self {
            SweepMode::Repeated => "repeated",
            SweepMode::Independent => "independent",
        }
    }
}

/// The throughput key of the best configurations and the Pareto front.
const THROUGHPUT: &str = "request_throughput_avg";
/// The latency keys, the first every level has wins.
const LATENCIES: [&str; 2] = ["time_to_first_token_p99", "request_latency_p99"];

/// The levels with an aggregate.
fn cells<'a>(levels: &'a [TrialLevel<'a>]) -> Vec<(&'a TrialLevel<'a>, &'a ConfidenceAggregate)> {
    levels
        .iter()
        .filter_map(|l| Some((l, l.aggregate?)))
        .collect()
}

fn mean_of(a: &ConfidenceAggregate, key: &str) -> Option<f64> {
    a.metrics.iter().find(|m| m.key == key).map(|m| m.mean)
}

fn unit_of(a: &ConfidenceAggregate, key: &str) -> &'static str {
    a.metrics
        .iter()
        .find(|m| m.key == key)
        .map_or("", |m| m.unit)
}

/// The latency key every cell has, if any.
fn latency_key(cells: &[(&TrialLevel, &ConfidenceAggregate)]) -> Option<&'static str> {
    LATENCIES
        .into_iter()
        .find(|k| cells.iter().all(|(_, a)| mean_of(a, k).is_some()))
}

/// `best_throughput` and `best_latency_p99`: (name, level, value, unit).
pub fn best<'a>(
    levels: &'a [TrialLevel<'a>],
) -> Vec<(&'static str, &'a TrialLevel<'a>, f64, &'static str)> {
    let cells = cells(levels);
    let mut out = Vec::new();
    if !cells.is_empty() && cells.iter().all(|(_, a)| mean_of(a, THROUGHPUT).is_some()) {
        // Python's max keeps the first of equal values.
        let mut top: Option<(&TrialLevel, &ConfidenceAggregate, f64)> = None;
        for (l, a) in &cells {
            let v = mean_of(a, THROUGHPUT).unwrap_or(f64::NAN);
            if top.map_or(true, |(_, _, t)| v > t) {
                top = Some((l, a, v));
            }
        }
        if let Some((l, a, v)) = top {
            out.push(("best_throughput", l, v, unit_of(a, THROUGHPUT)));
        }
    }
    if let Some(key) = latency_key(&cells) {
        let mut low: Option<(&TrialLevel, &ConfidenceAggregate, f64)> = None;
        for (l, a) in &cells {
            let v = mean_of(a, key).unwrap_or(f64::NAN);
            if low.map_or(true, |(_, _, t)| v < t) {
                low = Some((l, a, v));
            }
        }
        if let Some((l, a, v)) = low {
            out.push(("best_latency_p99", l, v, unit_of(a, key)));
        }
    }
    out
}

/// The levels no other level beats on both throughput (up) and latency (down), in value
/// order.
pub fn pareto<'a>(levels: &'a [TrialLevel<'a>]) -> Vec<&'a TrialLevel<'a>> {
    let cells = cells(levels);
    let Some(lat) = latency_key(&cells) else {
        return Vec::new();
    };
    if !cells.iter().all(|(_, a)| mean_of(a, THROUGHPUT).is_some()) {
        return Vec::new();
    }
    let point = |a: &ConfidenceAggregate| {
        (
            mean_of(a, THROUGHPUT).unwrap_or(f64::NAN),
            mean_of(a, lat).unwrap_or(f64::NAN),
        )
    };
    let dominates =
        |(ta, la): (f64, f64), (tb, lb): (f64, f64)| ta >= tb && la <= lb && (ta > tb || la < lb);
    let mut front: Vec<&TrialLevel> = cells
        .iter()
        .filter(|(l, a)| {
            !cells
                .iter()
                .any(|(o, b)| !std::ptr::eq(*o, *l) && dominates(point(b), point(a)))
        })
        .map(|(l, _)| *l)
        .collect();
    front.sort_by(|a, b| {
        let x = a.value.as_f64().unwrap_or(f64::NAN);
        let y = b.value.as_f64().unwrap_or(f64::NAN);
        x.total_cmp(&y)
    });
    front
}

fn params(level: &TrialLevel) -> Node {
    let mut o = Node::obj();
    o.put(level.name, level.value.clone());
    o
}

/// The swept fields with their values in first-seen order.
fn parameters<'a>(levels: &'a [TrialLevel<'a>]) -> Vec<(&'static str, Vec<&'a TrialLevel<'a>>)> {
    let mut out: Vec<(&'static str, Vec<&TrialLevel>)> = Vec::new();
    for l in levels {
        match out.iter_mut().find(|(n, _)| *n == l.name) {
            Some((_, values)) if values.iter().any(|v| v.text == l.text) => {}
            Some((_, values)) => values.push(l),
            None => out.push((l.name, vec![l])),
        }
    }
    out
}

/// `profile_export_aiperf_sweep.json`.
pub fn sweep_json(levels: &[TrialLevel], mode: SweepMode, confidence_level: f64) -> String {
    let cells = cells(levels);
    let params_list = parameters(levels);
    let runs: usize = levels.iter().map(|l| l.runs).sum();
    let failed: usize = levels.iter().map(|l| l.failed.len()).sum();
    let mut root = Node::obj();
    root.put("aggregation_type", "sweep");
    root.put("num_profile_runs", runs as u64);
    root.put("num_successful_runs", (runs - failed) as u64);
    let failed_runs = levels
        .iter()
        .flat_map(|l| &l.failed)
        .map(|f| {
            let mut o = Node::obj();
            o.put("label", f.label.as_str());
            o.put("error", f.error.as_str());
            o
        })
        .collect();
    root.push("failed_runs", Node::List(failed_runs));
    let swept: Vec<(&str, Vec<Value>)> = params_list
        .iter()
        .map(|(name, values)| (*name, values.iter().map(|l| l.value.clone()).collect()))
        .collect();
    let per_value = levels.iter().map(|l| l.runs).max().unwrap_or(0);
    root.push(
        "metadata",
        sweep_metadata(&swept, mode.name(), confidence_level, per_value),
    );
    let per = cells
        .iter()
        .map(|(level, agg)| {
            let mut m = Node::obj();
            for s in &agg.metrics {
                let mut o = Node::obj();
                o.put("mean", num(s.mean));
                o.put("std", num(s.std));
                o.put("min", num(s.min));
                o.put("max", num(s.max));
                o.put("cv", num(s.cv));
                o.put("ci_low", num(s.ci_low));
                o.put("ci_high", num(s.ci_high));
                o.put("unit", s.unit);
                m.push(&s.key, o);
            }
            let mut o = Node::obj();
            o.push("parameters", params(level));
            o.push("metrics", m);
            o
        })
        .collect();
    root.push("per_combination_metrics", Node::List(per));
    let mut best_node = Node::obj();
    for (name, level, value, unit) in best(levels) {
        let mut o = Node::obj();
        o.push("parameters", params(level));
        o.put("metric", num(value));
        o.put("unit", unit);
        best_node.push(name, o);
    }
    root.push("best_configurations", best_node);
    root.push(
        "pareto_optimal",
        Node::List(pareto(levels).into_iter().map(params).collect()),
    );
    root.pretty()
}

/// `profile_export_aiperf_sweep.csv`: the per-level statistics, the best configurations, the
/// Pareto front and the metadata, as AIPerf's sweep CSV exporter lays them out.
pub fn sweep_csv(levels: &[TrialLevel]) -> String {
    let f = |v: f64, d: usize| {
        if v.is_finite() {
            format!("{v:.d$}")
        } else {
            String::new()
        }
    };
    let cells = cells(levels);
    let params_list = parameters(levels);
    let names: Vec<&str> = params_list.iter().map(|(n, _)| *n).collect();
    let cell_of = |level: &TrialLevel, n: &str| {
        if level.name == n {
            level.text.clone()
        } else {
            String::new()
        }
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    if !cells.is_empty() {
        let mut keys: Vec<&str> = cells
            .iter()
            .flat_map(|(_, a)| a.metrics.iter().map(|m| m.key.as_str()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let mut header: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        for k in &keys {
            for stat in ["mean", "std", "min", "max", "cv"] {
                header.push(format!("{k}_{stat}"));
            }
        }
        rows.push(header);
        for (level, agg) in &cells {
            let mut row: Vec<String> = names.iter().map(|n| cell_of(level, n)).collect();
            for k in &keys {
                match agg.metrics.iter().find(|m| m.key == *k) {
                    Some(m) => row.extend([
                        f(m.mean, 2),
                        f(m.std, 2),
                        f(m.min, 2),
                        f(m.max, 2),
                        f(m.cv, 4),
                    ]),
                    None => row.extend(std::iter::repeat(String::new()).take(5)),
                }
            }
            rows.push(row);
        }
    }
    rows.push(Vec::new());
    rows.push(vec!["Best Configurations".into()]);
    let best = best(levels);
    if !best.is_empty() {
        let mut header = vec!["Configuration".to_string()];
        header.extend(names.iter().map(|n| n.to_string()));
        header.extend(["Metric".to_string(), "Unit".to_string()]);
        rows.push(header);
        for (name, level, value, unit) in best {
            let title = name
                .split('_')
                .map(|w| {
                    let mut c = w.chars();
                    c.next()
                        .map(|h| h.to_uppercase().chain(c).collect::<String>())
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join(" ");
            let mut row = vec![title];
            row.extend(names.iter().map(|n| cell_of(level, n)));
            row.extend([f(value, 2), unit.to_string()]);
            rows.push(row);
        }
    }
    rows.push(Vec::new());
    rows.push(vec!["Pareto Optimal Points".into()]);
    let front = pareto(levels);
    if front.is_empty() {
        rows.push(vec!["None".into()]);
    } else {
        rows.push(names.iter().map(|n| n.to_string()).collect());
        for level in front {
            rows.push(names.iter().map(|n| cell_of(level, n)).collect());
        }
    }
    rows.push(Vec::new());
    rows.push(vec!["Metadata".into()]);
    rows.push(vec!["Field".into(), "Value".into()]);
    let runs: usize = levels.iter().map(|l| l.runs).sum();
    let failed: usize = levels.iter().map(|l| l.failed.len()).sum();
    let combinations: usize = params_list.iter().map(|(_, v)| v.len()).product();
    for (field, value) in [
        ("Aggregation Type", "sweep".to_string()),
        ("Sweep Parameters", names.join(", ")),
        ("Number of Combinations", combinations.to_string()),
        ("Number of Profile Runs", runs.to_string()),
        ("Number of Successful Runs", (runs - failed).to_string()),
    ] {
        rows.push(vec![field.into(), value]);
    }
    csv_text(rows)
}

#[cfg(test)]
#[path = "aiperf_sweep_trials_tests.rs"]
mod tests;
