//! AIPerf's run summaries, so AIPerf's own tools (`aiperf plot`, `aiperf analyze`) and
//! scripts written for AIPerf read inferperf's run folders: `profile_export_aiperf.json`
//! (schema 1.4 of AIPerf 0.13: one object per metric under AIPerf's tag, with `unit`, `avg`,
//! and for per-request metrics `min`, `max`, the percentiles, `std`, `count` and `sum`; then
//! `input_config`, `run_info`, the run's state and times) and `profile_export_aiperf.csv`
//! (a per-request block sorted by metric tag, a blank line, a `Metric,Value` block).
//!
//! The metrics inferperf measures carry AIPerf's names and units: times in ms, throughputs per
//! second, HTTP data in KB. The time-weighted metrics (`effective_*`, `active_*`,
//! `tokens_in_flight`) carry AIPerf's `unit`, `avg`, `p50`, `p90`, `p95`, `p99`, `min`, `max`
//! and `std` only, and leave the other CSV columns empty, as AIPerf does.

use serde_json::Value;

use super::csv_field;
use super::json_text::{num, Node};
use crate::measure::llm::slices::Slice;
use crate::measure::llm::stats::{Adjusted, PERCENTILES};
use crate::measure::llm::sweeps::TimeStats;
use crate::measure::llm::{LlmMetrics, Stats};

/// The schema version of AIPerf 0.13's `profile_export_aiperf.json`.
pub const SCHEMA_VERSION: &str = "1.4";
/// The AIPerf release whose file layout these files follow.
pub const AIPERF_VERSION: &str = "0.13.0";

/// ns → ms.
const MS: f64 = 1e-6;

/// What the summary says about the run besides its metrics.
pub struct RunInfo {
    /// A 12-hex-digit id shared by the JSON's `benchmark_id` and `run_info`.
    pub benchmark_id: String,
    /// The command line as typed, shell-quoted.
    pub cli_command: String,
    /// First send and last reply, ns since the Unix epoch.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Stopped by Ctrl-C before its end.
    pub was_cancelled: bool,
    /// AIPerf's `input_config` block, as the caller builds it from the run's settings.
    pub input_config: Value,
}

/// One metric as AIPerf exports it.
enum Figure {
    /// Per-request distribution, already in the display unit.
    Dist(Stats),
    /// One run-level value.
    Value(f64),
    /// A time-weighted metric (no count, sum or low percentiles).
    Sweep(TimeStats),
    /// An error-adjusted latency (`adj_<tag>`), already in the display unit.
    Adjusted(Adjusted),
}

struct Row {
    tag: &'static str,
    /// AIPerf's CSV label without the unit.
    header: &'static str,
    unit: &'static str,
    figure: Figure,
}

impl Row {
    /// A run-level value.
    fn value(tag: &'static str, header: &'static str, unit: &'static str, v: f64) -> Row {
        Row {
            tag,
            header,
            unit,
            figure: Figure::Value(v),
        }
    }
}

/// Every metric inferperf measures, under AIPerf's tag, label and unit, in AIPerf's JSON order.
/// The metrics AIPerf 0.13 flags `MetricFlags.STREAMING_ONLY` (`STREAMING_TOKENS_ONLY` in
/// aiperf/metrics/types): its metrics processor disallows the flag without `--streaming`, so a
/// non-streaming run's export has none of them.
pub const STREAMING_ONLY_TAGS: [&str; 8] = [
    "time_to_first_token",
    "time_to_second_token",
    "inter_token_latency",
    "inter_chunk_latency",
    "output_token_throughput_per_user",
    "time_to_first_output_token",
    "prefill_throughput_per_user",
    "decode_duration",
];

/// What AIPerf 0.13 leaves out for an endpoint that produces no tokens (embeddings, rankings:
/// `produces_tokens: false` in aiperf/plugin/plugins.yaml): the metrics flagged
/// `MetricFlags.PRODUCES_TOKENS_ONLY` in aiperf/metrics/types, and every `usage_*` metric,
/// since its embeddings and rankings response parsers read no `usage`. AIPerf still writes
/// `output_sequence_length` (all zeros) for such a run, so it is not in the list.
pub const TOKEN_OUTPUT_TAGS: [&str; 24] = [
    "output_token_count",
    "total_output_tokens",
    "total_osl",
    "output_token_throughput",
    "total_token_throughput",
    "e2e_output_token_throughput",
    "osl_mismatch_diff_pct",
    "osl_mismatch_count",
    "reasoning_token_count",
    "total_reasoning_tokens",
    "usage_prompt_tokens",
    "usage_completion_tokens",
    "usage_total_tokens",
    "usage_reasoning_tokens",
    "usage_prompt_cache_read_tokens",
    "total_usage_prompt_tokens",
    "total_usage_completion_tokens",
    "total_usage_total_tokens",
    "total_usage_reasoning_tokens",
    "total_usage_prompt_cache_read_tokens",
    "usage_prompt_tokens_diff_pct",
    "usage_completion_tokens_diff_pct",
    "usage_reasoning_tokens_diff_pct",
    "usage_discrepancy_count",
];

/// The metrics AIPerf writes for this run: [`all_rows`] less the ones its metric flags rule
/// out for the mode (streaming or not, tokens out or not). An `adj_<tag>` metric follows its
/// base metric's rules.
fn rows(m: &LlmMetrics) -> Vec<Row> {
    let mut out = all_rows(m);
    out.retain(|r| kept(m, r.tag));
    out
}

/// AIPerf's metric flags allow `tag` for the mode of `m` (streaming or not, tokens out or
/// not); the same rules hold for the summary and for each time slice.
fn kept(m: &LlmMetrics, tag: &str) -> bool {
    let base = tag.strip_prefix("adj_").unwrap_or(tag);
    (m.streaming || !STREAMING_ONLY_TAGS.contains(&base))
        && !(m.no_output_tokens && TOKEN_OUTPUT_TAGS.contains(&base))
}

/// Every metric `m` has a value for, streaming-only ones included.
fn all_rows(m: &LlmMetrics) -> Vec<Row> {
    let mut out = Vec::new();
    let mut dist = |tag, header, unit, s: Option<&Stats>, factor: f64| {
        if let Some(s) = s {
            out.push(Row {
                tag,
                header,
                unit,
                figure: Figure::Dist(s.scaled(factor)),
            });
        }
    };
    dist(
        "request_latency",
        "Request Latency",
        "ms",
        m.request_latency.as_ref(),
        MS,
    );
    dist(
        "time_to_first_token",
        "Time to First Token",
        "ms",
        m.ttft.as_ref(),
        MS,
    );
    dist(
        "time_to_second_token",
        "Time to Second Token",
        "ms",
        m.ttst.as_ref(),
        MS,
    );
    dist(
        "inter_token_latency",
        "Inter Token Latency",
        "ms",
        m.itl.as_ref(),
        MS,
    );
    dist(
        "output_token_throughput_per_user",
        "Output Token Throughput Per User",
        "tokens/sec/user",
        m.tps_per_user.as_ref(),
        1.0,
    );
    dist(
        "output_sequence_length",
        "Output Sequence Length",
        "tokens",
        m.osl.as_ref(),
        1.0,
    );
    dist(
        "input_sequence_length",
        "Input Sequence Length",
        "tokens",
        m.isl.as_ref(),
        1.0,
    );
    if m.reasoning_tokens.is_none() {
        // Without reasoning every output token is a visible one.
        dist(
            "output_token_count",
            "Output Token Count",
            "tokens",
            m.osl.as_ref(),
            1.0,
        );
    }
    dist(
        "reasoning_token_count",
        "Reasoning Token Count",
        "tokens",
        m.reasoning_tokens.as_ref(),
        1.0,
    );
    dist(
        "inter_chunk_latency",
        "Inter Chunk Latency",
        "ms",
        m.chunk_gap.as_ref(),
        MS,
    );
    dist(
        "time_to_first_output_token",
        "Time to First Output Token",
        "ms",
        m.ttfo.as_ref().or(m.ttft.as_ref()),
        MS,
    );
    let a = &m.aiperf;
    for (tag, header, field) in [
        (
            "usage_prompt_tokens",
            "Usage Prompt Tokens",
            &a.usage_prompt_tokens,
        ),
        (
            "usage_completion_tokens",
            "Usage Completion Tokens",
            &a.usage_completion_tokens,
        ),
        (
            "usage_total_tokens",
            "Usage Total Tokens",
            &a.usage_total_tokens,
        ),
        (
            "usage_reasoning_tokens",
            "Usage Reasoning Tokens",
            &a.usage_reasoning_tokens,
        ),
        (
            "usage_prompt_cache_read_tokens",
            "Usage Prompt Cache Read Tokens",
            &a.usage_prompt_cache_read_tokens,
        ),
    ] {
        dist(tag, header, "tokens", field.as_ref().map(|f| &f.stats), 1.0);
    }
    dist(
        "usage_prompt_tokens_diff_pct",
        "Usage Prompt Diff %",
        "%",
        a.usage_prompt_diff_pct.as_ref(),
        1.0,
    );
    dist(
        "usage_completion_tokens_diff_pct",
        "Usage Completion Diff %",
        "%",
        a.usage_completion_diff_pct.as_ref(),
        1.0,
    );
    dist(
        "usage_reasoning_tokens_diff_pct",
        "Usage Reasoning Diff %",
        "%",
        a.usage_reasoning_diff_pct.as_ref(),
        1.0,
    );
    dist(
        "e2e_output_token_throughput",
        "E2E Output Token Throughput",
        "tokens/sec/user",
        a.e2e_output_tps.as_ref(),
        1.0,
    );
    dist(
        "prefill_throughput_per_user",
        "Prefill Throughput Per User",
        "tokens/sec/user",
        a.prefill_tps_per_user.as_ref(),
        1.0,
    );
    dist(
        "decode_duration",
        "Decode Duration",
        "ms",
        a.decode_duration.as_ref(),
        MS,
    );
    dist(
        "osl_mismatch_diff_pct",
        "OSL Mismatch Diff %",
        "%",
        a.osl_mismatch_diff_pct.as_ref(),
        1.0,
    );
    dist(
        "credit_to_start_latency",
        "Credit-to-Start Latency",
        "ms",
        a.credit_to_start.as_ref(),
        MS,
    );
    dist(
        "effective_latency",
        "Effective Latency (CO-aware)",
        "ms",
        a.effective_latency.as_ref(),
        MS,
    );
    let media = &m.media;
    dist(
        "num_images",
        "Number of Images",
        "images",
        media.num_images.as_ref(),
        1.0,
    );
    dist(
        "image_throughput",
        "Image Throughput",
        "images/sec",
        media.image_throughput.as_ref(),
        1.0,
    );
    dist(
        "image_latency",
        "Image Latency",
        "ms/image",
        media.image_latency.as_ref(),
        MS,
    );
    dist(
        "audio_duration",
        "Audio Duration",
        "sec",
        media.audio_duration.as_ref(),
        1.0,
    );
    dist(
        "rtfx",
        "Inverse Real-Time Factor (RTFx)",
        "ratio",
        media.rtfx.as_ref(),
        1.0,
    );
    let mut value = |tag, header, unit, v: f64| out.push(Row::value(tag, header, unit, v));
    value(
        "request_throughput",
        "Request Throughput",
        "requests/sec",
        m.request_throughput,
    );
    value(
        "request_count",
        "Request Count",
        "requests",
        m.request_count as f64,
    );
    if m.error_count > 0 {
        value(
            "error_request_count",
            "Error Request Count",
            "requests",
            m.error_count as f64,
        );
        // AIPerf counts it over its error records, so only a run with errors has it.
        value(
            "context_overflow_count",
            "Context Overflow Count",
            "requests",
            m.aiperf.context_overflow_count as f64,
        );
    }
    let completed = m.request_count + m.error_count;
    value(
        "completed_request_count",
        "Completed Requests (Success + Error)",
        "requests",
        completed as f64,
    );
    value(
        "request_error_rate",
        "Request Error Rate",
        "%",
        if completed == 0 {
            0.0
        } else {
            m.error_count as f64 * 100.0 / completed as f64
        },
    );
    if m.total_osl > 0 {
        value(
            "output_token_throughput",
            "Output Token Throughput",
            "tokens/sec",
            m.output_token_throughput,
        );
        value(
            "total_output_tokens",
            "Total Output Tokens",
            "tokens",
            m.total_osl.saturating_sub(m.total_reasoning_tokens) as f64,
        );
    }
    if m.total_reasoning_tokens > 0 {
        value(
            "total_reasoning_tokens",
            "Total Reasoning Tokens",
            "tokens",
            m.total_reasoning_tokens as f64,
        );
    }
    value(
        "benchmark_duration",
        "Benchmark Duration",
        "sec",
        m.duration_ns as f64 / 1e9,
    );
    value(
        "total_isl",
        "Total Input Sequence Length",
        "tokens",
        m.total_isl as f64,
    );
    value(
        "total_osl",
        "Total Output Sequence Length",
        "tokens",
        m.total_osl as f64,
    );
    value(
        "input_token_throughput",
        "Input Token Throughput",
        "tokens/sec",
        m.input_token_throughput,
    );
    value(
        "total_token_throughput",
        "Total Token Throughput",
        "tokens/sec",
        m.total_token_throughput,
    );
    if let Some(g) = &m.goodput {
        value("goodput", "Goodput", "requests/sec", g.per_sec);
        value(
            "good_request_count",
            "Good Request Count",
            "requests",
            g.good_requests as f64,
        );
        value(
            "good_request_fraction",
            "GoodRequestFraction",
            "ratio",
            g.fraction,
        );
    }
    let checks = &m.checks;
    if checks.osl_compared > 0 {
        value(
            "osl_mismatch_count",
            "OSL Mismatch Count",
            "requests",
            checks.osl_mismatches as f64,
        );
    }
    if checks.usage_compared > 0 {
        value(
            "usage_discrepancy_count",
            "Usage Discrepancy Count",
            "requests",
            checks.usage_discrepancies as f64,
        );
    }
    for (tag, header, field) in [
        (
            "total_usage_prompt_tokens",
            "Total Usage Prompt Tokens",
            &a.usage_prompt_tokens,
        ),
        (
            "total_usage_completion_tokens",
            "Total Usage Completion Tokens",
            &a.usage_completion_tokens,
        ),
        (
            "total_usage_total_tokens",
            "Total Usage Total Tokens",
            &a.usage_total_tokens,
        ),
        (
            "total_usage_reasoning_tokens",
            "Total Usage Reasoning Tokens",
            &a.usage_reasoning_tokens,
        ),
        (
            "total_usage_prompt_cache_read_tokens",
            "Total Usage Prompt Cache Read Tokens",
            &a.usage_prompt_cache_read_tokens,
        ),
    ] {
        if let Some(f) = field {
            value(tag, header, "tokens", f.total as f64);
        }
    }
    for h in &m.http {
        out.push(Row {
            tag: h.metric.tag,
            header: h.metric.header,
            unit: h.metric.unit,
            figure: Figure::Dist(h.stats.scaled(h.metric.factor)),
        });
    }
    // AIPerf 0.13 adds these after the run-level values, in this order, only when a request
    // failed (aiperf/metrics/derived_latency.py).
    let adj = &m.adjusted;
    for (tag, header, v) in [
        (
            "adj_time_to_first_token",
            "Time to First Token (error-adjusted)",
            &adj.ttft,
        ),
        (
            "adj_request_latency",
            "Request Latency (error-adjusted)",
            &adj.request_latency,
        ),
        (
            "adj_decode_duration",
            "Decode Duration (error-adjusted)",
            &adj.decode_duration,
        ),
        (
            "adj_inter_token_latency",
            "Inter Token Latency (error-adjusted)",
            &adj.itl,
        ),
    ] {
        if let Some(v) = v {
            out.push(Row {
                tag,
                header,
                unit: "ms",
                figure: Figure::Adjusted(v.scaled(MS)),
            });
        }
    }
    for (d, st) in m.sweeps.iter().flat_map(|s| s.rows()) {
        out.push(Row {
            tag: d.tag,
            header: d.header,
            unit: d.unit,
            figure: Figure::Sweep(*st),
        });
    }
    out
}

/// A distribution's statistics after its average, in AIPerf's CSV order: min, max, sum,
/// p1..p99, std.
pub(super) fn spread_stats(st: &Stats, mut stat: impl FnMut(&str, f64)) {
    stat("min", st.min);
    stat("max", st.max);
    stat("sum", st.avg * st.count as f64);
    for (p, v) in PERCENTILES.iter().zip(st.percentiles) {
        stat(&format!("p{p}"), v);
    }
    stat("std", st.std);
}

fn metric_node(r: &Row) -> Node {
    let mut o = Node::obj();
    o.put("unit", r.unit);
    match &r.figure {
        Figure::Value(v) => o.put("avg", num(*v)),
        Figure::Dist(s) => {
            o.put("avg", num(s.avg));
            for (p, v) in PERCENTILES.iter().zip(s.percentiles) {
                o.put(&format!("p{p}"), num(v));
            }
            o.put("min", num(s.min));
            o.put("max", num(s.max));
            o.put("std", num(s.std));
            o.put("count", s.count);
            o.put("sum", num(s.avg * s.count as f64));
        }
        Figure::Sweep(s) => {
            for (name, v) in s.named() {
                o.put(name, num(v));
            }
        }
        // AIPerf drops every non-finite value from its JSON (avg, max and sum are +inf, std
        // is undefined), so only the finite percentiles, the minimum and the count remain.
        Figure::Adjusted(a) => {
            for (p, v) in PERCENTILES.iter().zip(a.percentiles) {
                if v.is_finite() {
                    o.put(&format!("p{p}"), num(v));
                }
            }
            if a.min.is_finite() {
                o.put("min", num(a.min));
            }
            o.put("count", a.count);
        }
    }
    o
}

/// One metric of the summary, in its display unit: the value, or the distribution's
/// statistics (per-request metrics).
pub struct SummaryMetric {
    /// AIPerf's tag (`time_to_first_token`).
    pub tag: &'static str,
    pub unit: &'static str,
    pub avg: f64,
    pub dist: Option<Stats>,
}

/// Every metric of `profile_export_aiperf.json`, in its order, but the time-weighted ones.
pub fn summary_metrics(m: &LlmMetrics) -> Vec<SummaryMetric> {
    rows(m)
        .into_iter()
        .filter_map(|r| match r.figure {
            Figure::Value(v) => Some(SummaryMetric {
                tag: r.tag,
                unit: r.unit,
                avg: v,
                dist: None,
            }),
            Figure::Dist(s) => Some(SummaryMetric {
                tag: r.tag,
                unit: r.unit,
                avg: s.avg,
                dist: Some(s),
            }),
            Figure::Sweep(_) | Figure::Adjusted(_) => None,
        })
        .collect()
}

/// The error-adjusted latencies of the summary (`adj_*`, in its order): AIPerf's label and
/// the view in ms. Empty for a run without failures.
pub fn adjusted_metrics(m: &LlmMetrics) -> Vec<(&'static str, Adjusted)> {
    rows(m)
        .into_iter()
        .filter_map(|r| match r.figure {
            Figure::Adjusted(a) => Some((r.header, a)),
            _ => None,
        })
        .collect()
}

/// `2026-12-06T04:30:23.815132`: a Unix time in ns as AIPerf writes its times (UTC, µs).
pub fn iso_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let micros = (ns % 1_000_000_000) / 1_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (proleptic Gregorian), after Howard Hinnant's public algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// One line of AIPerf's `logs/aiperf.log`: `<date> <time to the ms> - <source> - INFO -
/// <message>`, with its newline.
pub fn log_line(ns: u64, message: &str) -> String {
    let t = iso_time(ns).replacen('T', " ", 1);
    format!(
        "{} - inferperf.profile - INFO - {message}\n",
        &t[..t.len() - 3]
    )
}

/// One level of a sweep, as `run_config.json` names it.
pub struct Variation<'a> {
    /// The level's place in the sweep, from 0.
    pub index: usize,
    /// The swept field of AIPerf's profiling phase (`concurrency`, `rate`) and its value.
    pub field: &'a str,
    pub value: Value,
    /// The value as Python prints it (`4`, `2.5`).
    pub text: &'a str,
}

/// What a sweep level's `run_config.json` holds besides the summary's [`RunInfo`].
pub struct RunConfig<'a> {
    /// Shared by every level of the sweep (a UUID's text).
    pub sweep_id: &'a str,
    pub variation: Variation<'a>,
    /// The level's folder.
    pub artifact_dir: &'a str,
    pub random_seed: u64,
    /// The run's length in seconds when it was set by a duration alone (AIPerf's
    /// `total_expected_duration`: left out when a phase has no duration).
    pub expected_duration_s: Option<f64>,
}

/// A sweep level's `run_config.json` (AIPerf 0.13 writes one per run of a multi-run
/// benchmark): the ids, the settings as `cfg` (the summary's `input_config`), the level as
/// `variation`, the trial, the folder, the command line and the seed.
pub fn run_config_json(info: &RunInfo, rc: &RunConfig) -> String {
    let v = &rc.variation;
    let path = super::aiperf_sweep::variation_path(v.field);
    let mut values = Node::obj();
    values.put(&path, v.value.clone());
    let mut variation = Node::obj();
    variation.put("index", v.index as u64);
    variation.put("label", format!("{path}={}", v.text));
    variation.push("values", values);
    let mut root = Node::obj();
    root.put("benchmark_id", info.benchmark_id.as_str());
    root.put("sweep_id", rc.sweep_id);
    root.push("cfg", Node::Leaf(info.input_config.clone()));
    root.push("variation", variation);
    root.put("trial", 0u64);
    root.put("artifact_dir", rc.artifact_dir);
    root.put("label", "run_0001");
    root.put("cli_command", info.cli_command.as_str());
    root.put("random_seed", rc.random_seed);
    root.push("variables", Node::obj());
    // What AIPerf settles at start-up: the telemetry view (inferperf prints the summary
    // table), that the level's folder exists (it is written into it), and the expected
    // length of a duration run.
    let mut resolved = Node::obj();
    resolved.put("gpu_telemetry_mode", "summary");
    resolved.put("artifact_dir_created", true);
    if let Some(s) = rc.expected_duration_s {
        resolved.put("total_expected_duration", s);
    }
    root.push("resolved", resolved);
    let mut text = root.pretty();
    text.push('\n');
    text
}

/// `profile_export_aiperf.json`.
pub fn json(m: &LlmMetrics, info: &RunInfo) -> String {
    let mut root = Node::obj();
    root.put("schema_version", SCHEMA_VERSION);
    root.put("aiperf_version", AIPERF_VERSION);
    root.put("benchmark_id", info.benchmark_id.as_str());
    for r in rows(m) {
        root.push(r.tag, metric_node(&r));
    }
    let mut telemetry = Node::obj();
    let mut summary = Node::obj();
    summary.push("endpoints_configured", Node::List(Vec::new()));
    summary.push("endpoints_successful", Node::List(Vec::new()));
    summary.put("start_time", iso_time(info.start_ns));
    summary.put("end_time", iso_time(info.end_ns));
    telemetry.push("summary", summary);
    telemetry.push("endpoints", Node::obj());
    telemetry.push("error_summary", Node::List(Vec::new()));
    root.push("telemetry_data", telemetry);
    root.push("input_config", Node::Leaf(info.input_config.clone()));
    let mut run = Node::obj();
    run.put("benchmark_id", info.benchmark_id.as_str());
    run.put("trial", 0u64);
    run.put("cli_command", info.cli_command.as_str());
    root.push("run_info", run);
    root.put("was_cancelled", info.was_cancelled);
    root.put("is_complete", !info.was_cancelled);
    root.push("error_summary", super::error_summary(m));
    root.put("start_time", iso_time(info.start_ns));
    root.put("end_time", iso_time(info.end_ns));
    let mut text = root.pretty();
    text.push('\n');
    text
}

/// `profile_export_aiperf.csv`: per-request and time-weighted metrics
/// (`Metric,avg,min,max,sum,p1,..,p99,std`; the time-weighted ones fill avg, min, max, p50,
/// p90, p95, p99 and std only), a blank line, run-level values
/// (`Metric,Value`), two blank lines, the (empty) GPU telemetry block; each block sorted by
/// tag, numbers with two decimals, rows ending in CRLF.
pub fn csv(m: &LlmMetrics) -> String {
    // AIPerf labels its request counts and chunk counts without a unit.
    let label = |r: &Row| match r.unit {
        "requests" | "count" => r.header.to_string(),
        unit => format!("{} ({unit})", r.header),
    };
    let mut rows = rows(m);
    // AIPerf orders each block by metric tag.
    rows.sort_by(|a, b| a.tag.cmp(b.tag));
    let mut dists: Vec<(String, String)> = Vec::new();
    let mut values: Vec<(String, f64)> = Vec::new();
    for r in &rows {
        match &r.figure {
            Figure::Dist(s) => dists.push((label(r), dist_cells(s))),
            Figure::Sweep(s) => dists.push((label(r), sweep_cells(s))),
            Figure::Adjusted(a) => dists.push((label(r), adjusted_cells(a))),
            Figure::Value(v) => values.push((label(r), *v)),
        }
    }
    let mut out = String::from("Metric,avg,min,max,sum");
    for p in PERCENTILES {
        out.push_str(&format!(",p{p}"));
    }
    out.push_str(",std\n");
    for (name, cells) in dists {
        out.push_str(&format!("{}{cells}\n", csv_field(&name)));
    }
    out.push_str("\nMetric,Value\n");
    for (name, v) in values {
        out.push_str(&format!("{},{v:.2}\n", csv_field(&name)));
    }
    // AIPerf's GPU telemetry block; inferperf reads no DCGM endpoint, so it has no rows.
    out.push_str("\n\n");
    out.push_str(GPU_TELEMETRY_HEADER);
    out.push('\n');
    // Python's csv module ends its rows with CRLF.
    out.replace('\n', "\r\n")
}

/// `,avg,min,max,sum,p1,..,p99,std` of a per-request metric.
fn dist_cells(s: &Stats) -> String {
    let mut out = format!(
        ",{:.2},{:.2},{:.2},{:.2}",
        s.avg,
        s.min,
        s.max,
        s.avg * s.count as f64
    );
    for v in s.percentiles {
        out.push_str(&format!(",{v:.2}"));
    }
    out.push_str(&format!(",{:.2}", s.std));
    out
}

/// The same columns for an error-adjusted latency: avg, max, sum and std, and any +inf
/// percentile, stay empty (AIPerf leaves out what is not finite).
fn adjusted_cells(a: &Adjusted) -> String {
    let cell = |v: f64| {
        if v.is_finite() {
            format!("{v:.2}")
        } else {
            String::new()
        }
    };
    let mut out = format!(",,{},,", cell(a.min));
    for v in a.percentiles {
        out.push(',');
        out.push_str(&cell(v));
    }
    out.push(',');
    out
}

/// The same columns for a time-weighted metric: sum, p1, p5, p10, p25 and p75 stay empty.
fn sweep_cells(s: &TimeStats) -> String {
    let mut out = format!(",{:.2},{:.2},{:.2},", s.avg, s.min, s.max);
    for p in PERCENTILES {
        out.push(',');
        let v = match p {
            50 => s.p50,
            90 => s.p90,
            95 => s.p95,
            99 => s.p99,
            _ => continue,
        };
        out.push_str(&format!("{v:.2}"));
    }
    out.push_str(&format!(",{:.2}", s.std));
    out
}

/// The header of the GPU telemetry block of AIPerf's CSV.
const GPU_TELEMETRY_HEADER: &str =
    "Endpoint,GPU_Index,GPU_Name,GPU_UUID,Platform,Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std";

/// `.aiperf_results_ready.json`, the marker AIPerf leaves once its files are complete.
pub fn ready_marker(was_cancelled: bool) -> String {
    format!("{{\"ready\":true,\"was_cancelled\":{was_cancelled},\"partial\":{was_cancelled}}}")
}

/// The metrics of one time slice of the run `m`, under AIPerf's tags (request_count counts the
/// slice's successful requests, as AIPerf's does), less the ones the run's mode rules out
/// ([`kept`]: no `time_to_first_token` or `inter_token_latency` without streaming).
fn slice_rows(m: &LlmMetrics, s: &Slice) -> Vec<Row> {
    let mut out = all_slice_rows(s);
    out.retain(|r| kept(m, r.tag));
    out
}

/// Every metric of one time slice that has a value.
fn all_slice_rows(s: &Slice) -> Vec<Row> {
    let mut out = Vec::new();
    for (tag, header, st) in [
        ("request_latency", "Request Latency", &s.request_latency),
        ("time_to_first_token", "Time to First Token", &s.ttft),
        ("inter_token_latency", "Inter Token Latency", &s.itl),
    ] {
        if let Some(st) = st {
            out.push(Row {
                tag,
                header,
                unit: "ms",
                figure: Figure::Dist(st.scaled(MS)),
            });
        }
    }
    let ok = s.request_count.saturating_sub(s.error_count);
    let secs = s.end_ns.saturating_sub(s.start_ns) as f64 / 1e9;
    let mut value = |tag, header, unit, v: f64| out.push(Row::value(tag, header, unit, v));
    value("request_count", "Request Count", "requests", ok as f64);
    value(
        "total_osl",
        "Total Output Sequence Length",
        "tokens",
        s.total_osl as f64,
    );
    if secs > 0.0 {
        value(
            "request_throughput",
            "Request Throughput",
            "requests/sec",
            ok as f64 / secs,
        );
    }
    for (d, st) in s.sweeps.iter().flat_map(|s| s.rows()) {
        out.push(Row {
            tag: d.tag,
            header: d.header,
            unit: d.unit,
            figure: Figure::Sweep(*st),
        });
    }
    out
}

/// `profile_export_aiperf_timeslices.json`: `{"timeslices": [{start_ns, end_ns, <metric>:
/// {unit, avg, ..}}, ..], "input_config": ..}` over the slices of `m`, slice bounds in ns
/// since the Unix epoch (`origin_ns` is the first request's start).
pub fn timeslices_json(m: &LlmMetrics, origin_ns: u64, input_config: &Value) -> String {
    let list = m
        .slices
        .iter()
        .map(|s| {
            let mut o = Node::obj();
            o.put("start_ns", origin_ns + s.start_ns);
            o.put("end_ns", origin_ns + s.end_ns);
            for r in slice_rows(m, s) {
                o.push(r.tag, metric_node(&r));
            }
            o
        })
        .collect();
    let mut root = Node::obj();
    root.push("timeslices", Node::List(list));
    root.push("input_config", Node::Leaf(input_config.clone()));
    let mut text = root.pretty();
    text.push('\n');
    text
}

/// `profile_export_aiperf_timeslices.csv`: one row per slice, metric and statistic
/// (`Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value`), metrics sorted by label, CRLF rows.
pub fn timeslices_csv(m: &LlmMetrics, origin_ns: u64) -> String {
    let mut out = String::from("Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value\r\n");
    for s in &m.slices {
        let mut rows = slice_rows(m, s);
        rows.sort_by(|a, b| a.header.cmp(b.header));
        let lead = format!(
            "{},{},{}",
            s.index,
            origin_ns + s.start_ns,
            origin_ns + s.end_ns
        );
        for r in rows {
            let mut stat = |name: &str, v: f64| {
                out.push_str(&format!(
                    "{lead},{},{},{name},{v:.2}\r\n",
                    csv_field(r.header),
                    r.unit
                ));
            };
            match &r.figure {
                Figure::Value(v) => stat("avg", *v),
                Figure::Dist(st) => {
                    stat("avg", st.avg);
                    spread_stats(st, stat);
                }
                Figure::Sweep(st) => {
                    // AIPerf's CSV order: avg, min, max, the percentiles, std.
                    for (name, v) in [
                        ("avg", st.avg),
                        ("min", st.min),
                        ("max", st.max),
                        ("p50", st.p50),
                        ("p90", st.p90),
                        ("p95", st.p95),
                        ("p99", st.p99),
                        ("std", st.std),
                    ] {
                        stat(name, v);
                    }
                }
                Figure::Adjusted(a) => {
                    stat("min", a.min);
                    for (p, v) in PERCENTILES.iter().zip(a.percentiles) {
                        if v.is_finite() {
                            stat(&format!("p{p}"), v);
                        }
                    }
                }
            }
        }
    }
    out
}
