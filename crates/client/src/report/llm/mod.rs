//! LLM reports: the console table (GenAI-Perf's layout plus inferperf's extra lines), GenAI-Perf's
//! `profile_export_genai_perf.{json,csv}`, AIPerf's `profile_export_aiperf.{json,csv}` and
//! time slices, and the per-request `profile_export.jsonl` in AIPerf's record shape. Plain
//! data in, text out.

pub mod aiperf;
pub mod aiperf_confidence;
pub mod aiperf_sweep;
pub mod aiperf_sweep_trials;
pub mod console;
pub mod genai_perf;
mod json_text;
pub mod jsonl;
pub mod timeslices;

use crate::measure::llm::definitions;
use crate::measure::llm::{LlmMetrics, RequestError, Stats};
use json_text::Node;

/// What kind of endpoint was measured: decides the title and which rows make sense.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportKind {
    /// Text generation (chat, completions, Triton generate / KServe).
    #[default]
    Llm,
    Embeddings,
    Rankings,
}

/// How the tables are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportOptions {
    pub kind: ReportKind,
    /// Responses were streamed. Without streaming every request has one response, so TTFT,
    /// TTST, ITL and per-user throughput say nothing and their rows are left out (as
    /// GenAI-Perf does).
    pub streaming: bool,
}

/// A CSV field as Python's csv module writes it: quoted when it holds a comma, a quote or a
/// line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// ns → ms.
const NS_TO_MS: f64 = 1e-6;

/// One per-request metric as the tables show it: GenAI-Perf tag, label and display stats.
pub(crate) struct StatRow {
    pub tag: &'static str,
    /// "Time To First Token (ms)".
    pub label: String,
    /// In the display unit (ms for times); `None` when no request produced the value.
    pub stats: Option<Stats>,
}

/// AIPerf's `ErrorDetails` of a failed request: `{"code", "type", "message"}`, the code
/// being the HTTP status of an `http_error` (else null) and the type the failure's kind.
pub(crate) fn error_details(e: &RequestError) -> Node {
    let mut o = Node::obj();
    o.put("code", e.code);
    o.put("type", e.kind.as_str());
    o.put("message", e.message.as_str());
    o
}

/// AIPerf's `error_summary`: `[{"error_details": {..}, "count"}]`, one entry per (code,
/// type, message) that failed, as AIPerf groups them.
pub(crate) fn error_summary(m: &LlmMetrics) -> Node {
    let list = m.error_groups.iter().map(|g| {
        let mut entry = Node::obj();
        entry.push("error_details", error_details(&g.error));
        entry.put("count", g.count);
        entry
    });
    Node::List(list.collect())
}

pub(crate) fn label(tag: &str) -> String {
    match definitions::find(tag) {
        Some(d) => format!("{} ({})", d.name, d.unit),
        None => tag.to_string(),
    }
}

fn row(tag: &'static str, stats: &Option<Stats>, factor: f64) -> StatRow {
    StatRow {
        tag,
        label: label(tag),
        stats: stats.as_ref().map(|s| s.scaled(factor)),
    }
}

/// GenAI-Perf's per-request rows, in its order, for this kind of run.
pub(crate) fn genai_perf_rows(m: &LlmMetrics, opts: &ReportOptions) -> Vec<StatRow> {
    if opts.kind != ReportKind::Llm {
        return vec![
            row("request_latency", &m.request_latency, NS_TO_MS),
            row("input_sequence_length", &m.isl, 1.0),
        ];
    }
    let mut rows = Vec::new();
    if opts.streaming {
        rows.push(row("time_to_first_token", &m.ttft, NS_TO_MS));
        rows.push(row("time_to_second_token", &m.ttst, NS_TO_MS));
    }
    rows.push(row("request_latency", &m.request_latency, NS_TO_MS));
    if opts.streaming {
        rows.push(row("inter_token_latency", &m.itl, NS_TO_MS));
        rows.push(row(
            "output_token_throughput_per_user",
            &m.tps_per_user,
            1.0,
        ));
    }
    rows.push(row("output_sequence_length", &m.osl, 1.0));
    rows.push(row("input_sequence_length", &m.isl, 1.0));
    rows
}

/// inferperf's per-request distributions beyond GenAI-Perf's, for this kind of run.
pub(crate) fn extra_rows(m: &LlmMetrics, opts: &ReportOptions) -> Vec<StatRow> {
    let llm = opts.kind == ReportKind::Llm;
    let streamed = llm && opts.streaming;
    let mut rows = Vec::new();
    if streamed {
        rows.push(row("inter_chunk_latency", &m.chunk_gap, NS_TO_MS));
        rows.push(row("inter_token_gap", &m.token_gap, NS_TO_MS));
    }
    if llm {
        rows.push(row(
            "time_per_output_token_guidellm",
            &m.guidellm_tpot,
            NS_TO_MS,
        ));
    }
    if streamed {
        rows.push(row("chunks_per_request", &m.chunks_per_request, 1.0));
    }
    if m.client_rx_delay.is_some() {
        rows.push(row("client_receive_delay", &m.client_rx_delay, NS_TO_MS));
    }
    if llm && m.reasoning_tokens.is_some() {
        if streamed {
            rows.push(row("time_to_first_output_token", &m.ttfo, NS_TO_MS));
        }
        rows.push(row("reasoning_token_count", &m.reasoning_tokens, 1.0));
    }
    let media = &m.media;
    for (tag, stats, factor) in [
        ("image_throughput", &media.image_throughput, 1.0),
        ("image_latency", &media.image_latency, NS_TO_MS),
        ("rtfx", &media.rtfx, 1.0),
    ] {
        if stats.is_some() {
            rows.push(row(tag, stats, factor));
        }
    }
    if m.open_loop {
        if streamed {
            rows.push(row(
                "time_to_first_token_from_intended",
                &m.ttft_from_intended,
                NS_TO_MS,
            ));
        }
        rows.push(row(
            "request_latency_from_intended",
            &m.request_latency_from_intended,
            NS_TO_MS,
        ));
    }
    rows
}

/// One run-level value.
pub(crate) struct ValueRow {
    /// GenAI-Perf's console/CSV label ("Request Throughput (per sec)").
    pub label: String,
    pub value: f64,
}

/// GenAI-Perf's run-level rows in its order; goodput only when constraints were given.
pub(crate) fn system_rows(m: &LlmMetrics, opts: &ReportOptions) -> Vec<ValueRow> {
    let mut rows = Vec::new();
    if opts.kind == ReportKind::Llm {
        rows.push(ValueRow {
            label: label("output_token_throughput"),
            value: m.output_token_throughput,
        });
    }
    rows.push(ValueRow {
        label: "Request Throughput (per sec)".into(),
        value: m.request_throughput,
    });
    if let Some(g) = &m.goodput {
        rows.push(ValueRow {
            label: "Request Goodput (per sec)".into(),
            value: g.per_sec,
        });
    }
    rows.push(ValueRow {
        label: label("request_count"),
        value: m.request_count as f64,
    });
    rows
}

/// Python's `f"{v:,.2f}"`: two decimals and a comma every three integer digits.
pub(crate) fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "nan"
        } else if v > 0.0 {
            "inf"
        } else {
            "-inf"
        }
        .into();
    }
    let text = format!("{:.2}", v.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, "00"));
    let mut grouped = String::with_capacity(int.len() + int.len() / 3);
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let sign = if v < 0.0 && text != "0.00" { "-" } else { "" };
    format!("{sign}{grouped}.{frac}")
}

#[cfg(test)]
#[path = "llm_tests.rs"]
mod tests;
