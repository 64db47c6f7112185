//! `profile_export_genai_perf.json` and `.csv` in GenAI-Perf's layout, so scripts and
//! dashboards written for GenAI-Perf read inferperf's. GenAI-Perf's keys and rows keep their names
//! and order; inferperf's extra metrics follow under their own keys and rows.
//!
//! JSON: one object per metric, `{"unit": .., "avg": .., "min": .., "max": .., "p1": ..,
//! .., "p99": .., "std": ..}` (run-level values carry only `unit` and `avg`, as in
//! GenAI-Perf), times in ms, then `input_config` as the caller gives it.
//! CSV: a `Metric,avg,min,max,p99,p95,p90,p75,p50,p25` block, a blank line, then a
//! `Metric,Value` block; numbers formatted `1,234.56` and quoted when they hold a comma.

use serde_json::Value;

use super::json_text::{num, Node};
use super::{extra_rows, fmt_num, genai_perf_rows, label, system_rows, ReportOptions, StatRow};
use crate::measure::llm::definitions;
use crate::measure::llm::stats::PERCENTILES;
use crate::measure::llm::{LlmMetrics, Stats};

/// The unit GenAI-Perf writes for `tag`.
fn unit(tag: &str) -> &'static str {
    definitions::find(tag).map_or("", |d| d.unit)
}

fn stats_node(tag: &str, s: &Stats) -> Node {
    let mut o = Node::obj();
    o.put("unit", unit(tag));
    put_stats(&mut o, s);
    o
}

/// `avg`, `min`, `max`, the percentiles and `std` of `s`, in GenAI-Perf's order.
pub(super) fn put_stats(o: &mut Node, s: &Stats) {
    o.put("avg", num(s.avg));
    o.put("min", num(s.min));
    o.put("max", num(s.max));
    for (p, v) in PERCENTILES.iter().zip(s.percentiles) {
        o.put(&format!("p{p}"), num(v));
    }
    o.put("std", num(s.std));
}

fn value_node(tag: &str, v: f64) -> Node {
    let mut o = Node::obj();
    o.put("unit", unit(tag));
    o.put("avg", num(v));
    o
}

fn push_rows(root: &mut Node, rows: &[StatRow]) {
    for r in rows {
        if let Some(s) = &r.stats {
            root.push(r.tag, stats_node(r.tag, s));
        }
    }
}

/// The JSON export. Metrics no request produced (e.g. TTFT for embeddings) are left out,
/// as GenAI-Perf does; streaming-only metrics are written whenever they exist.
pub fn json(m: &LlmMetrics, input_config: &Value) -> String {
    const MS: f64 = 1e-6;
    let mut root = Node::obj();
    let stat = |root: &mut Node, tag: &str, s: &Option<Stats>, factor: f64| {
        if let Some(s) = s {
            root.push(tag, stats_node(tag, &s.scaled(factor)));
        }
    };
    root.push(
        "request_throughput",
        value_node("request_throughput", m.request_throughput),
    );
    stat(&mut root, "request_latency", &m.request_latency, MS);
    stat(&mut root, "time_to_first_token", &m.ttft, MS);
    stat(&mut root, "time_to_second_token", &m.ttst, MS);
    stat(&mut root, "inter_token_latency", &m.itl, MS);
    if m.total_osl > 0 {
        root.push(
            "output_token_throughput",
            value_node("output_token_throughput", m.output_token_throughput),
        );
    }
    stat(
        &mut root,
        "output_token_throughput_per_user",
        &m.tps_per_user,
        1.0,
    );
    stat(&mut root, "output_sequence_length", &m.osl, 1.0);
    stat(&mut root, "input_sequence_length", &m.isl, 1.0);
    if let Some(g) = &m.goodput {
        root.push("request_goodput", value_node("request_goodput", g.per_sec));
    }
    root.push(
        "request_count",
        value_node("request_count", m.request_count as f64),
    );
    push_extras(&mut root, m);
    root.put("input_config", input_config.clone());
    let mut text = root.pretty();
    text.push('\n');
    text
}

/// inferperf's keys after GenAI-Perf's.
fn push_extras(root: &mut Node, m: &LlmMetrics) {
    let all = ReportOptions {
        streaming: true,
        ..ReportOptions::default()
    };
    let mut extras = extra_rows(m, &all);
    // extra_rows lists the open-loop rows only when open loop; that is what this table needs.
    extras.retain(|r| r.stats.is_some());
    push_rows(root, &extras);
    for (tag, v) in [
        ("total_token_throughput", m.total_token_throughput),
        ("input_token_throughput", m.input_token_throughput),
        ("benchmark_duration", m.duration_ns as f64 / 1e9),
        ("error_request_count", m.error_count as f64),
        ("same_read_event_count", m.same_read_events as f64),
    ] {
        root.push(tag, value_node(tag, v));
    }
    if let Some(g) = &m.goodput {
        root.push(
            "good_request_fraction",
            value_node("good_request_fraction", g.fraction),
        );
        root.push(
            "good_request_count",
            value_node("request_count", g.good_requests as f64),
        );
    }
    let mut kinds = Node::obj();
    for (kind, n) in &m.errors_by_kind {
        kinds.put(kind, *n);
    }
    root.push("errors_by_kind", kinds);
    root.push("error_summary", super::error_summary(m));
    if m.reasoning_tokens.is_some() {
        let total = m.total_reasoning_tokens as f64;
        root.push(
            "total_reasoning_tokens",
            value_node("reasoning_token_count", total),
        );
    }
    push_checks(root, m);
}

/// The token-count checks (AIPerf's tags) and the warnings they gave.
fn push_checks(root: &mut Node, m: &LlmMetrics) {
    let c = &m.checks;
    let diff = |d: &crate::measure::llm::checks::DiffPct| {
        let mut o = Node::obj();
        o.put("unit", "%");
        o.put("avg", num(d.avg));
        o.put("max", num(d.max));
        o
    };
    let mut o = Node::obj();
    o.put("usage_compared_count", c.usage_compared);
    o.put("usage_discrepancy_count", c.usage_discrepancies);
    o.push("usage_prompt_tokens_diff_pct", diff(&c.prompt_diff_pct));
    o.push(
        "usage_completion_tokens_diff_pct",
        diff(&c.completion_diff_pct),
    );
    o.put("osl_compared_count", c.osl_compared);
    o.put("osl_mismatch_count", c.osl_mismatches);
    o.push("osl_mismatch_diff_pct", diff(&c.osl_diff_pct));
    o.put("requested_osl_avg", num(c.osl_asked_avg));
    o.put("received_osl_avg", num(c.osl_got_avg));
    root.push("token_checks", o);
    root.put("warnings", c.warnings());
}

/// Columns of the CSV's first block, after "Metric".
const CSV_STATS: [&str; 9] = [
    "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25",
];

/// A CSV field, quoted when it holds a comma, quote or line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv_stat_row(label: &str, s: &Stats) -> String {
    let mut cells = vec![field(label)];
    for col in CSV_STATS {
        let v = match col {
            "avg" => s.avg,
            "min" => s.min,
            "max" => s.max,
            p => s.p(p[1..].parse().unwrap_or(0)).unwrap_or(f64::NAN),
        };
        cells.push(field(&fmt_num(v)));
    }
    cells.join(",") + "\n"
}

/// The CSV export (`opts` decides which rows, as for the console).
pub fn csv(m: &LlmMetrics, opts: &ReportOptions) -> String {
    let mut out = String::from("Metric,");
    out.push_str(&CSV_STATS.join(","));
    out.push('\n');
    for r in genai_perf_rows(m, opts).iter().chain(&extra_rows(m, opts)) {
        if let Some(s) = &r.stats {
            out.push_str(&csv_stat_row(&r.label, s));
        }
    }
    out.push_str("\nMetric,Value\n");
    let mut values: Vec<(String, f64)> = system_rows(m, opts)
        .into_iter()
        .map(|r| (r.label, r.value))
        .collect();
    if opts.kind == super::ReportKind::Llm {
        values.push((label("total_token_throughput"), m.total_token_throughput));
    }
    values.push((label("benchmark_duration"), m.duration_ns as f64 / 1e9));
    values.push((label("error_request_count"), m.error_count as f64));
    for (kind, n) in &m.errors_by_kind {
        values.push((format!("Error Count {kind} (count)"), *n as f64));
    }
    if let Some(g) = &m.goodput {
        values.push((label("good_request_fraction"), g.fraction));
    }
    for (name, v) in values {
        // GenAI-Perf writes this block without thousands separators.
        out.push_str(&format!("{},{:.2}\n", field(&name), v));
    }
    out
}
