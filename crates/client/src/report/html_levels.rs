//! The comparison page of a multi-level run: one row per level (throughput, TTFT, ITL,
//! latency, errors, goodput) linking to the level's own page, and a chart of TTFT and ITL
//! medians against output token throughput drawn as inline SVG.

use std::fmt::Write as _;

use super::{assemble, config_section, definitions_section, escape, Level, LevelsPage, Section};
use crate::measure::llm::Stats;
use crate::report::llm::fmt_num;

/// The comparison page.
pub fn levels_page(p: &LevelsPage<'_>) -> String {
    let mut sections = vec![comparison_section(p.levels)];
    if let Some(chart) = chart_section(p.levels) {
        sections.push(chart);
    }
    sections.extend(p.sections.iter().cloned());
    sections.push(config_section(p.config));
    sections.push(definitions_section());
    assemble(p.title, &sections)
}

fn ms(s: &Option<Stats>, p: u32) -> String {
    s.as_ref()
        .and_then(|s| s.p(p))
        .map_or_else(|| "N/A".into(), |v| fmt_num(v * 1e-6))
}

const HEADER: [&str; 12] = [
    "Level",
    "Requests",
    "Errors",
    "Request throughput (per sec)",
    "Output token throughput (tokens/sec)",
    "TTFT p50 (ms)",
    "TTFT p99 (ms)",
    "ITL p50 (ms)",
    "ITL p99 (ms)",
    "Request latency p50 (ms)",
    "Request latency p99 (ms)",
    "Goodput (per sec)",
];

/// The per-level table; each level's name links to its page.
fn comparison_section(levels: &[Level<'_>]) -> Section {
    let mut html = String::from("<table>\n<thead><tr>");
    for h in HEADER {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for l in levels {
        let m = l.metrics;
        let cells = [
            m.request_count.to_string(),
            m.error_count.to_string(),
            fmt_num(m.request_throughput),
            fmt_num(m.output_token_throughput),
            ms(&m.ttft, 50),
            ms(&m.ttft, 99),
            ms(&m.itl, 50),
            ms(&m.itl, 99),
            ms(&m.request_latency, 50),
            ms(&m.request_latency, 99),
            m.goodput
                .as_ref()
                .map_or_else(|| "-".into(), |g| fmt_num(g.per_sec)),
        ];
        let _ = write!(
            html,
            "<tr><td><a href=\"{}\">{}</a></td>",
            escape(&l.href),
            escape(&l.label)
        );
        for c in cells {
            let _ = write!(html, "<td>{}</td>", escape(&c));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
    Section {
        id: "levels".into(),
        title: "Per-level comparison".into(),
        html,
    }
}

const W: f64 = 800.0;
const H: f64 = 400.0;
const PAD: f64 = 60.0;

/// Median TTFT and ITL (ms) against output token throughput, one point per level; `None`
/// when fewer than one level has both.
fn chart_section(levels: &[Level<'_>]) -> Option<Section> {
    let ttft: Vec<_> = levels
        .iter()
        .filter_map(|l| point(l, &l.metrics.ttft))
        .collect();
    let itl: Vec<_> = levels
        .iter()
        .filter_map(|l| point(l, &l.metrics.itl))
        .collect();
    if ttft.is_empty() {
        return None;
    }
    let mut html = String::new();
    html.push_str(&chart("Median TTFT (ms)", &ttft, "#1f77b4"));
    if !itl.is_empty() {
        html.push_str(&chart("Median ITL (ms)", &itl, "#d62728"));
    }
    Some(Section {
        id: "level-charts".into(),
        title: "Latency against throughput".into(),
        html,
    })
}

/// (output token throughput, median of `s` in ms, level label).
fn point<'a>(l: &'a Level<'_>, s: &Option<Stats>) -> Option<(f64, f64, &'a str)> {
    s.as_ref().and_then(|s| s.p(50)).map(|v| {
        (
            l.metrics.output_token_throughput,
            v * 1e-6,
            l.label.as_str(),
        )
    })
}

/// One line chart: `y_label` against output token throughput, points labelled by level.
fn chart(y_label: &str, points: &[(f64, f64, &str)], color: &str) -> String {
    let max_x = points.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-9) * 1.1;
    let max_y = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.1;
    let x = |v: f64| PAD + v / max_x * (W - 2.0 * PAD);
    let y = |v: f64| H - PAD - v / max_y * (H - 2.0 * PAD);
    let mut svg = format!(
        "<figure><svg width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\">\n"
    );
    let _ = writeln!(
        svg,
        "<line x1=\"{PAD}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#444\"/>\
         <line x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{b}\" stroke=\"#444\"/>",
        b = H - PAD,
        r = W - PAD
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-family=\"sans-serif\" \
         font-size=\"14\">Output token throughput (tokens/sec), 0 to {}</text>",
        W / 2.0,
        H - 15.0,
        escape(&fmt_num(max_x))
    );
    let _ = writeln!(
        svg,
        "<text x=\"15\" y=\"{}\" font-family=\"sans-serif\" font-size=\"14\" \
         transform=\"rotate(-90 15 {})\" text-anchor=\"middle\">{}, 0 to {}</text>",
        H / 2.0,
        H / 2.0,
        escape(y_label),
        escape(&fmt_num(max_y))
    );
    let mut sorted: Vec<&(f64, f64, &str)> = points.iter().collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let line: Vec<String> = sorted
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1)))
        .collect();
    let _ = writeln!(
        svg,
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
        line.join(" ")
    );
    for p in sorted {
        // Labels in the right half end at their point, so they stay inside the chart.
        let (anchor, dx) = if x(p.0) > W / 2.0 {
            ("end", -6.0)
        } else {
            ("start", 6.0)
        };
        let _ = writeln!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{color}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" font-family=\"sans-serif\" \
             font-size=\"12\">{} ({})</text>",
            x(p.0),
            y(p.1),
            x(p.0) + dx,
            y(p.1) - 6.0,
            escape(p.2),
            escape(&fmt_num(p.1))
        );
    }
    let _ = writeln!(
        svg,
        "</svg>\n<figcaption>{} against output token throughput</figcaption></figure>",
        escape(y_label)
    );
    svg
}
