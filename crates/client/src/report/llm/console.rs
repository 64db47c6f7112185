//! The console report: GenAI-Perf's table (box-drawn, columns Statistic / avg / min / max /
//! p99 / p90 / p75, numbers as `1,234.56`), then inferperf's extra lines: errors by kind, goodput
//! fraction, per-chunk and per-token gaps, GuideLLM's TPOT, the client's receive delay (with a
//! warning when it is large), open-loop latencies from the intended send time, same-read
//! events, and which of inferperf's rows other tools' names mean.
//! A run with failed requests adds AIPerf's error-adjusted latencies as the table's last rows.
//! Streamed LLM runs then get AIPerf's two tables of time-weighted metrics, "Effective" and "Active"
//! (columns Metric / avg / min / max / p99 / p90 / p50 / std, AIPerf's rows and order).

use super::{extra_rows, fmt_num, genai_perf_rows, system_rows, ReportKind, ReportOptions};
use crate::measure::llm::definitions;
use crate::measure::llm::stats::PERCENTILES;
use crate::measure::llm::sweeps::{Group, Sweeps};
use crate::measure::llm::{LlmMetrics, Stats};
use crate::measure::stats::RX_DELAY_WARN_NS;

/// Whose table it is; GenAI-Perf prints "NVIDIA GenAI-Perf | " here.
const TITLE_PREFIX: &str = "inferperf | ";
/// Column headers after "Statistic", and the percentiles they show.
const STAT_COLUMNS: [&str; 6] = ["avg", "min", "max", "p99", "p90", "p75"];
/// The columns of AIPerf's time-weighted tables.
const SWEEP_COLUMNS: [&str; 8] = ["Metric", "avg", "min", "max", "p99", "p90", "p50", "std"];
/// Labels of the time-weighted tables longer than this break before their unit.
const SWEEP_LABEL_WRAP: usize = 45;
/// Labels longer than this break before their unit, as GenAI-Perf's per-user row does.
const LABEL_WRAP: usize = 36;

/// The whole console report, ending with a newline.
pub fn render(m: &LlmMetrics, opts: &ReportOptions) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in genai_perf_rows(m, opts) {
        let mut cells = vec![wrap_label(&r.label)];
        match &r.stats {
            Some(s) => cells.extend(table_stats(s)),
            None => cells.extend(STAT_COLUMNS.iter().map(|_| "N/A".to_string())),
        }
        rows.push(cells);
    }
    for r in system_rows(m, opts) {
        let mut cells = vec![wrap_label(&r.label), fmt_num(r.value)];
        cells.extend(STAT_COLUMNS[1..].iter().map(|_| "N/A".to_string()));
        rows.push(cells);
    }
    // AIPerf's error-adjusted rows close its table; what is +inf (avg, max, a percentile that
    // lands on a failure) shows as N/A, as AIPerf shows it.
    for (header, a) in super::aiperf::adjusted_metrics(m) {
        let cell = |v: f64| {
            if v.is_finite() {
                fmt_num(v)
            } else {
                "N/A".to_string()
            }
        };
        let p = |q: u32| {
            PERCENTILES
                .iter()
                .position(|&x| x == q)
                .map_or(f64::INFINITY, |i| a.percentiles[i])
        };
        let mut cells = vec![wrap_label(&format!("{header} (ms)"))];
        cells.extend([f64::INFINITY, a.min, f64::INFINITY, p(99), p(90), p(75)].map(cell));
        rows.push(cells);
    }
    let mut out = draw_table(&title(opts.kind), &rows);
    out.push_str(&extra_lines(m, opts));
    // Without streaming there is no first token, so only the concurrency would have values.
    if let (ReportKind::Llm, true, Some(s)) = (opts.kind, opts.streaming, &m.sweeps) {
        out.push_str(&sweep_tables(s));
    }
    out
}

/// AIPerf's "Effective" and "Active" tables of time-weighted metrics.
fn sweep_tables(s: &Sweeps) -> String {
    let mut out = String::new();
    for (group, name) in [(Group::Effective, "Effective"), (Group::Active, "Active")] {
        let rows: Vec<Vec<String>> = s
            .rows()
            .filter(|(d, _)| d.group == group)
            .map(|(d, st)| {
                let label = format!("{} ({})", d.header, d.unit);
                // AIPerf breaks only the per-user labels before their unit.
                let mut cells = vec![if label.len() > SWEEP_LABEL_WRAP {
                    wrap_label(&label)
                } else {
                    label
                }];
                cells.extend([st.avg, st.min, st.max, st.p99, st.p90, st.p50, st.std].map(fmt_num));
                cells
            })
            .collect();
        let title = format!("{TITLE_PREFIX}LLM Metrics: {name}");
        out.push_str(&draw_table_with(&title, &SWEEP_COLUMNS, &rows));
    }
    out
}

/// `--show-trace-timing`: AIPerf's HTTP trace timing table (the `http_req_*` metrics in
/// their display units), or a line saying the run has none (gRPC).
pub fn http_trace_table(m: &LlmMetrics) -> String {
    if m.http.is_empty() {
        return "HTTP trace timing: none (no request completed over HTTP/1.1)\n".to_string();
    }
    let rows: Vec<Vec<String>> = m
        .http
        .iter()
        .map(|h| {
            let label = match h.metric.unit {
                "count" => h.metric.header.to_string(),
                unit => format!("{} ({unit})", h.metric.header),
            };
            let mut cells = vec![wrap_label(&label)];
            cells.extend(table_stats(&h.stats.scaled(h.metric.factor)));
            cells
        })
        .collect();
    draw_table(&format!("{TITLE_PREFIX}HTTP Trace Timing"), &rows)
}

fn title(kind: ReportKind) -> String {
    let what = match kind {
        ReportKind::Llm => "LLM Metrics",
        ReportKind::Embeddings => "Embeddings Metrics",
        ReportKind::Rankings => "Rankings Metrics",
    };
    format!("{TITLE_PREFIX}{what}")
}

/// avg, min, max, p99, p90, p75 of `s`.
fn table_stats(s: &Stats) -> Vec<String> {
    let p = |q| s.p(q).unwrap_or(f64::NAN);
    [s.avg, s.min, s.max, p(99), p(90), p(75)]
        .into_iter()
        .map(fmt_num)
        .collect()
}

/// "Output Token Throughput Per User (tokens/sec/user)" → name and unit on two lines.
fn wrap_label(label: &str) -> String {
    match label.rfind(" (") {
        Some(at) if label.len() > LABEL_WRAP => format!("{}\n{}", &label[..at], &label[at + 1..]),
        _ => label.to_string(),
    }
}

/// The main table: "Statistic" and [`STAT_COLUMNS`].
fn draw_table(title: &str, rows: &[Vec<String>]) -> String {
    let headers: Vec<&str> = std::iter::once("Statistic").chain(STAT_COLUMNS).collect();
    draw_table_with(title, &headers, rows)
}

/// Draws a table in rich's heavy-head box style, every column right-aligned; a cell may
/// hold several lines. The title is centred over the table.
fn draw_table_with(title: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let headers: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            let longest = cell.lines().map(|l| l.chars().count()).max().unwrap_or(0);
            *w = (*w).max(longest);
        }
    }
    let rule = |left: &str, fill: &str, mid: &str, right: &str| {
        let parts: Vec<String> = widths.iter().map(|w| fill.repeat(w + 2)).collect();
        format!("{left}{}{right}\n", parts.join(mid))
    };
    let total: usize = widths.iter().map(|w| w + 3).sum::<usize>() + 1;
    let title_len = title.chars().count();
    let mut out = format!(
        "{}{title}\n",
        " ".repeat(total.saturating_sub(title_len) / 2)
    );
    out.push_str(&rule("┏", "━", "┳", "┓"));
    out.push_str(&text_row("┃", &headers, &widths));
    out.push_str(&rule("┡", "━", "╇", "┩"));
    for row in rows {
        out.push_str(&text_row("│", row, &widths));
    }
    out.push_str(&rule("└", "─", "┴", "┘"));
    out
}

/// One table row; multi-line cells make it several text lines.
fn text_row(bar: &str, cells: &[String], widths: &[usize]) -> String {
    let height = cells
        .iter()
        .map(|c| c.lines().count())
        .max()
        .unwrap_or(1)
        .max(1);
    let mut out = String::new();
    for line in 0..height {
        out.push_str(bar);
        for (cell, w) in cells.iter().zip(widths) {
            let text = cell.lines().nth(line).unwrap_or("");
            out.push_str(&format!(" {text:>w$} {bar}"));
        }
        out.push('\n');
    }
    out
}

/// "Label: avg 1.00  min 0.50  max 2.00  p50 1.00  p90 1.90  p99 2.00".
fn stats_line(label: &str, s: &Option<Stats>) -> String {
    let Some(s) = s else {
        return format!("{label}: N/A\n");
    };
    let p = |q| fmt_num(s.p(q).unwrap_or(f64::NAN));
    format!(
        "{label}: avg {}  min {}  max {}  p50 {}  p90 {}  p99 {}\n",
        fmt_num(s.avg),
        fmt_num(s.min),
        fmt_num(s.max),
        p(50),
        p(90),
        p(99)
    )
}

/// Under the client receive delay's line: how many responses the clock timed for want of a
/// kernel stamp, and a warning when the delay's p99 is over `RX_DELAY_WARN_NS` (perf_analyzer
/// mode's threshold).
fn rx_lines(m: &LlmMetrics) -> String {
    let mut out = String::new();
    let kernel = m.client_rx_delay.as_ref().map_or(0, |s| s.count);
    if m.rx_clock > 0 {
        out.push_str(&format!(
            "Responses timed by the clock (no kernel receive stamp): {} of {} ({:.2}%)\n",
            m.rx_clock,
            kernel + m.rx_clock,
            m.rx_clock as f64 * 100.0 / (kernel + m.rx_clock) as f64
        ));
    }
    let p99 = m.client_rx_delay.as_ref().and_then(|s| s.p(99));
    if let Some(p99) = p99.filter(|&v| v > RX_DELAY_WARN_NS as f64) {
        out.push_str(&format!(
            "[WARNING] The client was slow to read responses: client receive delay p99 {} ms \
             is over {} ms. Latency, TTFT and ITL run to the kernel's receive stamps and leave \
             this delay out, but a client this busy may also send late.\n",
            fmt_num(p99 / 1e6),
            fmt_num(RX_DELAY_WARN_NS as f64 / 1e6)
        ));
    }
    out
}

/// inferperf's lines under the table.
fn extra_lines(m: &LlmMetrics, opts: &ReportOptions) -> String {
    let mut out = String::new();
    if m.errors_by_kind.is_empty() {
        out.push_str(&format!("Errors: {}\n", m.error_count));
    } else {
        let kinds: Vec<String> = m
            .errors_by_kind
            .iter()
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect();
        out.push_str(&format!(
            "Errors: {} ({})\n",
            m.error_count,
            kinds.join(", ")
        ));
    }
    if let Some(g) = &m.goodput {
        out.push_str(&format!(
            "Good Request Fraction: {} ({} of {} requests met every --goodput limit)\n",
            fmt_num(g.fraction),
            g.good_requests,
            m.request_count + m.error_count
        ));
    }
    for r in extra_rows(m, opts) {
        out.push_str(&stats_line(&r.label, &r.stats));
    }
    out.push_str(&rx_lines(m));
    let llm = opts.kind == ReportKind::Llm;
    if llm {
        out.push_str(&format!(
            "Total Token Throughput (tokens/sec): {}\n",
            fmt_num(m.total_token_throughput)
        ));
    }
    out.push_str(&format!(
        "Benchmark Duration (sec): {}\n",
        fmt_num(m.duration_ns as f64 / 1e9)
    ));
    if llm && opts.streaming {
        out.push_str(&format!(
            "Same-Read Events (count): {} (content chunks delivered by the same read as the \
             previous one)\n",
            m.same_read_events
        ));
        out.push_str(&definitions::tool_name_mapping());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_labels_wrap_before_the_unit() {
        assert_eq!(
            wrap_label("Output Token Throughput Per User (tokens/sec/user)"),
            "Output Token Throughput Per User\n(tokens/sec/user)"
        );
        assert_eq!(
            wrap_label("Output Token Throughput (tokens/sec)"),
            "Output Token Throughput (tokens/sec)"
        );
    }

    #[test]
    fn table_matches_rich_heavy_head_layout() {
        let rows = vec![
            vec![
                "A (ms)".to_string(),
                "1.00".into(),
                "2.00".into(),
                "3.00".into(),
                "4.00".into(),
                "5.00".into(),
                "6.00".into(),
            ],
            vec![
                "Two\n(lines)".to_string(),
                "1,000.00".into(),
                "N/A".into(),
                "N/A".into(),
                "N/A".into(),
                "N/A".into(),
                "N/A".into(),
            ],
        ];
        let got = draw_table("T", &rows);
        let want = concat!(
            "                             T\n",
            "┏━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━┳━━━━━━┳━━━━━━┳━━━━━━┳━━━━━━┓\n",
            "┃ Statistic ┃      avg ┃  min ┃  max ┃  p99 ┃  p90 ┃  p75 ┃\n",
            "┡━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━╇━━━━━━╇━━━━━━╇━━━━━━┩\n",
            "│    A (ms) │     1.00 │ 2.00 │ 3.00 │ 4.00 │ 5.00 │ 6.00 │\n",
            "│       Two │ 1,000.00 │  N/A │  N/A │  N/A │  N/A │  N/A │\n",
            "│   (lines) │          │      │      │      │      │      │\n",
            "└───────────┴──────────┴──────┴──────┴──────┴──────┴──────┘\n",
        );
        assert_eq!(got, want);
    }
}
