//! AIPerf 0.13's confidence aggregate over repeated runs of one configuration
//! (`--num-profile-runs N`): for every statistic of every metric of the runs'
//! `profile_export_aiperf.json` (`request_latency_p99`, ...), the mean over the successful
//! runs, the sample standard deviation (n - 1), min, max, the coefficient of variation
//! (std / mean), the standard error (std / sqrt n) and the confidence interval
//! mean ± t × se with Student's t quantile for n - 1 degrees of freedom.
//!
//! Written as `aggregate/profile_export_aiperf_aggregate.{json,csv}` with AIPerf's keys, and
//! printed as a table of the main metrics.

use std::fmt::Write as _;

use serde_json::Value;

use super::aiperf::{spread_stats, summary_metrics, AIPERF_VERSION};
use super::aiperf_sweep::AGGREGATE_SCHEMA_VERSION;
use super::json_text::{num, Node};
use crate::measure::llm::LlmMetrics;

/// One statistic of one metric over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfidenceMetric {
    /// `<tag>_<stat>`: `time_to_first_token_p99`.
    pub key: String,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub cv: f64,
    pub se: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// `None` with one successful run (no interval: AIPerf writes null).
    pub t_critical: Option<f64>,
    pub unit: &'static str,
}

/// A run that failed: its label (`run_0002`) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedRun {
    pub label: String,
    pub error: String,
}

/// The aggregate of the runs of one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfidenceAggregate {
    pub num_runs: usize,
    /// The labels of the runs that succeeded, in order.
    pub run_labels: Vec<String>,
    pub failed_runs: Vec<FailedRun>,
    pub confidence_level: f64,
    pub cooldown_seconds: f64,
    pub metrics: Vec<ConfidenceMetric>,
    /// The level of a sweep these runs measured (None: not a sweep).
    pub variation: Option<Variation>,
}

/// The sweep level of a per-level aggregate, as AIPerf stamps it into the metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Variation {
    /// The dotted path of the swept field (`phases.profiling.concurrency`).
    pub path: String,
    /// Its value as JSON and as Python prints it.
    pub value: Value,
    pub text: String,
    /// `repeated` or `independent`.
    pub sweep_mode: &'static str,
    pub model: String,
}

impl Variation {
    fn label(&self) -> String {
        format!("{}={}", self.path, self.text)
    }
}

/// AIPerf's label of run `i` (0-based): `run_0001`.
pub fn run_label(i: usize) -> String {
    format!("run_{:04}", i + 1)
}

/// `(key, value, unit)` of every statistic of every metric of one run, in AIPerf's order.
fn flat(m: &LlmMetrics) -> Vec<(String, f64, &'static str)> {
    let mut out = Vec::new();
    for s in summary_metrics(m) {
        let mut stat = |name: &str, v: f64| out.push((format!("{}_{name}", s.tag), v, s.unit));
        stat("avg", s.avg);
        if let Some(d) = &s.dist {
            spread_stats(d, stat);
        }
    }
    // The time-weighted metrics: the statistics their summary entry has.
    for (def, t) in m.sweeps.iter().flat_map(|s| s.rows()) {
        let stats = [
            ("avg", t.avg),
            ("min", t.min),
            ("max", t.max),
            ("p50", t.p50),
            ("p90", t.p90),
            ("p95", t.p95),
            ("p99", t.p99),
            ("std", t.std),
        ];
        for (name, v) in stats {
            out.push((format!("{}_{name}", def.tag), v, def.unit));
        }
    }
    out
}

/// P(|T| < t) for Student's t with `df` (>= 1) degrees of freedom, by the closed form for
/// whole degrees of freedom (a finite series in cos θ, θ = atan(t / sqrt df)).
fn t_two_sided(t: f64, df: u32) -> f64 {
    let theta = (t / f64::from(df).sqrt()).atan();
    let (s, c) = theta.sin_cos();
    let c2 = c * c;
    if df % 2 == 1 {
        // (2/π)(θ + sin θ (cos θ + 2/3 cos³θ + ... up to cos^(df-2) θ)).
        let mut sum = 0.0;
        let mut term = c;
        let mut k = 1;
        while k + 2 <= df {
            sum += term;
            term *= c2 * f64::from(k + 1) / f64::from(k + 2);
            k += 2;
        }
        2.0 / std::f64::consts::PI * (theta + s * sum)
    } else {
        // sin θ (1 + 1/2 cos²θ + (1·3)/(2·4) cos⁴θ + ... up to cos^(df-2) θ).
        let mut sum = 0.0;
        let mut term = 1.0;
        let mut k = 0;
        while k + 2 <= df {
            sum += term;
            term *= c2 * f64::from(k + 1) / f64::from(k + 2);
            k += 2;
        }
        s * sum
    }
}

/// Student's t quantile of a two-sided interval: the `t` with P(|T| < t) = `level`
/// (scipy's `t.ppf(1 - (1 - level) / 2, df)`), for 0 < level < 1 and df >= 1.
pub fn t_critical(level: f64, df: u32) -> f64 {
    let df = df.max(1);
    let mut hi = 1.0;
    while t_two_sided(hi, df) < level && hi < 1e300 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_two_sided(mid, df) < level {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The statistics of one key over its values (at least one).
fn stats_of(key: String, values: &[f64], unit: &'static str, level: f64) -> ConfidenceMetric {
    let n = values.len();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = values.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return ConfidenceMetric {
            key,
            mean,
            std: 0.0,
            min,
            max,
            cv: 0.0,
            se: 0.0,
            ci_low: mean,
            ci_high: mean,
            t_critical: None,
            unit,
        };
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let std = var.sqrt();
    let cv = if mean != 0.0 {
        std / mean
    } else {
        f64::INFINITY
    };
    let se = std / (n as f64).sqrt();
    let t = t_critical(level, (n - 1) as u32);
    ConfidenceMetric {
        key,
        mean,
        std,
        min,
        max,
        cv,
        se,
        ci_low: mean - t * se,
        ci_high: mean + t * se,
        t_critical: Some(t),
        unit,
    }
}

/// The aggregate of `runs` (each run's metrics, or why it failed), labelled `run_0001`...
/// `None` when no run succeeded.
pub fn aggregate(
    runs: &[std::result::Result<&LlmMetrics, String>],
    confidence_level: f64,
    cooldown_seconds: f64,
) -> Option<ConfidenceAggregate> {
    let mut run_labels = Vec::new();
    let mut failed_runs = Vec::new();
    let mut flats = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        match r {
            Ok(m) => {
                run_labels.push(run_label(i));
                flats.push(flat(m));
            }
            Err(e) => failed_runs.push(FailedRun {
                label: run_label(i),
                error: e.clone(),
            }),
        }
    }
    if flats.is_empty() {
        return None;
    }
    // Every key any run has, in first-seen order; each over the runs with a finite value.
    let mut keys: Vec<(String, &'static str)> = Vec::new();
    for f in &flats {
        for (k, _, unit) in f {
            if !keys.iter().any(|(have, _)| have == k) {
                keys.push((k.clone(), unit));
            }
        }
    }
    let metrics = keys
        .into_iter()
        .filter_map(|(key, unit)| {
            let values: Vec<f64> = flats
                .iter()
                .filter_map(|f| f.iter().find(|(k, _, _)| *k == key).map(|e| e.1))
                .filter(|v| v.is_finite())
                .collect();
            (!values.is_empty()).then(|| stats_of(key, &values, unit, confidence_level))
        })
        .collect();
    Some(ConfidenceAggregate {
        num_runs: runs.len(),
        run_labels,
        failed_runs,
        confidence_level,
        cooldown_seconds,
        metrics,
        variation: None,
    })
}

impl ConfidenceAggregate {
    fn single_run(&self) -> bool {
        self.run_labels.len() == 1
    }

    /// `profile_export_aiperf_aggregate.json`.
    pub fn json(&self) -> String {
        let mut meta = Node::obj();
        meta.put("aggregation_type", "confidence");
        meta.put("num_profile_runs", self.num_runs as u64);
        meta.put("num_successful_runs", self.run_labels.len() as u64);
        let failed = self
            .failed_runs
            .iter()
            .map(|f| {
                let mut o = Node::obj();
                o.put("label", f.label.as_str());
                o.put("error", f.error.as_str());
                o
            })
            .collect();
        meta.push("failed_runs", Node::List(failed));
        meta.put("confidence_level", self.confidence_level);
        meta.put("run_labels", serde_json::json!(self.run_labels));
        if self.single_run() {
            meta.put("single_run", true);
        }
        meta.put("cooldown_seconds", num(self.cooldown_seconds));
        if let Some(v) = &self.variation {
            meta.put("variation_label", v.label());
            let mut values = Node::obj();
            values.put(&v.path, v.value.clone());
            meta.push("variation_values", values);
            meta.put("sweep_mode", v.sweep_mode);
            meta.put("model", v.model.as_str());
        }
        let mut stats = Node::obj();
        for m in &self.metrics {
            let mut o = Node::obj();
            o.put("mean", num(m.mean));
            o.put("std", num(m.std));
            o.put("min", num(m.min));
            o.put("max", num(m.max));
            o.put("cv", num(m.cv));
            o.put("se", num(m.se));
            o.put("ci_low", num(m.ci_low));
            o.put("ci_high", num(m.ci_high));
            o.put("t_critical", m.t_critical.map_or(Value::Null, num));
            o.put("unit", m.unit);
            stats.push(&m.key, o);
        }
        let mut root = Node::obj();
        root.put("schema_version", AGGREGATE_SCHEMA_VERSION);
        root.put("aiperf_version", AIPERF_VERSION);
        root.push("metadata", meta);
        root.push("metrics", stats);
        root.pretty()
    }

    /// `profile_export_aiperf_aggregate.csv`: the statistics (two decimals; cv, se and
    /// t_critical four), a blank row, then the metadata; CRLF rows as Python's csv writes.
    pub fn csv(&self) -> String {
        let f = |v: f64, d: usize| {
            if v.is_finite() {
                format!("{v:.d$}")
            } else {
                String::new()
            }
        };
        let mut rows: Vec<Vec<String>> = vec![
            "metric,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,unit"
                .split(',')
                .map(String::from)
                .collect(),
        ];
        for m in &self.metrics {
            rows.push(vec![
                m.key.clone(),
                f(m.mean, 2),
                f(m.std, 2),
                f(m.min, 2),
                f(m.max, 2),
                f(m.cv, 4),
                f(m.se, 4),
                f(m.ci_low, 2),
                f(m.ci_high, 2),
                m.t_critical.map_or_else(String::new, |t| f(t, 4)),
                m.unit.to_string(),
            ]);
        }
        rows.push(Vec::new());
        let labels: Vec<String> = self.run_labels.iter().map(|l| format!("'{l}'")).collect();
        let mut meta = vec![
            ("Aggregation Type", "confidence".to_string()),
            ("Total Runs", self.num_runs.to_string()),
            ("Successful Runs", self.run_labels.len().to_string()),
            ("Confidence Level", self.confidence_level.to_string()),
            ("Run Labels", format!("[{}]", labels.join(", "))),
        ];
        if self.single_run() {
            meta.push(("Single Run", "True".into()));
        }
        meta.push((
            "Cooldown Seconds",
            crate::report::fmt::python_float(self.cooldown_seconds),
        ));
        if let Some(v) = &self.variation {
            meta.push(("Variation Label", v.label()));
            meta.push(("Variation Values", format!("{{'{}': {}}}", v.path, v.text)));
            meta.push(("Sweep Mode", v.sweep_mode.to_string()));
            meta.push(("Model", v.model.clone()));
        }
        for (field, value) in meta {
            rows.push(vec![field.into(), value]);
        }
        super::aiperf_sweep::csv_text(rows)
    }

    /// The main metrics as AIPerf's summary picks them (request throughput, TTFT, ITL,
    /// request latency; each by its first statistic present of avg, p99, max, p50).
    fn key_metrics(&self) -> Vec<(&ConfidenceMetric, String)> {
        let mut out = Vec::new();
        for (tag, name) in [
            ("request_throughput", "Request Throughput"),
            ("output_token_throughput", "Output Token Throughput"),
            ("time_to_first_token", "Time To First Token"),
            ("inter_token_latency", "Inter Token Latency"),
            ("request_latency", "Request Latency"),
        ] {
            for (stat, label) in [
                ("avg", "Avg"),
                ("p99", "P99"),
                ("max", "Max"),
                ("p50", "P50"),
            ] {
                let key = format!("{tag}_{stat}");
                if let Some(m) = self.metrics.iter().find(|m| m.key == key) {
                    out.push((m, format!("{name} ({label})")));
                    break;
                }
            }
        }
        out
    }

    /// The console table: runs, the confidence level, and mean, std, CV and the interval
    /// of the main metrics; the failed runs under it.
    pub fn table(&self) -> String {
        let pct = self.confidence_level * 100.0;
        let mut out = format!(
            "Aggregate over {} runs ({} successful), {pct:.0}% confidence intervals\n",
            self.num_runs,
            self.run_labels.len()
        );
        let header = [
            "Metric".to_string(),
            "Unit".into(),
            "Mean".into(),
            "Std".into(),
            "Min".into(),
            "Max".into(),
            "CV %".into(),
            "CI low".into(),
            "CI high".into(),
        ];
        let f = |v: f64| {
            if v.is_finite() {
                format!("{v:.2}")
            } else {
                "n/a".into()
            }
        };
        let mut cells = vec![header.to_vec()];
        for (m, name) in self.key_metrics() {
            cells.push(vec![
                name,
                m.unit.to_string(),
                f(m.mean),
                f(m.std),
                f(m.min),
                f(m.max),
                f(m.cv * 100.0),
                f(m.ci_low),
                f(m.ci_high),
            ]);
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|i| cells.iter().map(|r| r[i].len()).max().unwrap_or(0))
            .collect();
        for row in &cells {
            let parts: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i < 2 {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(out, "{}", parts.join("  ").trim_end());
        }
        if self.single_run() {
            out.push_str("One successful run: no spread and no confidence interval\n");
        }
        for r in &self.failed_runs {
            let why = crate::text::escape_control(&r.error);
            let _ = writeln!(out, "{} failed: {why}", r.label);
        }
        out
    }
}

#[cfg(test)]
#[path = "aiperf_confidence_tests.rs"]
mod tests;
