//! The comparison page of a multi-level run: one row per level (throughput, TTFT, ITL,
//! latency, errors, goodput) linking to the level's own page, and a chart of TTFT and ITL
//! medians against output token throughput drawn as inline SVG.

use std::fmt::Write as _;

use super::{assemble, config_section, definitions_section, escape, Level, LevelsPage, Section};
use crate::measure::llm::Stats;
use crate::report::fmt::fmt_g;
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

/// Up to about five round steps (1, 2 or 5 times a power of ten) from 0 covering `max`:
/// the axis ends at the last one.
pub(super) fn nice_ticks(max: f64) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&st| st >= raw)
        .unwrap_or(10.0 * power);
    let n = (max / step).ceil() as usize;
    (0..=n.max(1)).map(|i| i as f64 * step).collect()
}

/// Font size of the point labels (px) and the width of one character at that size, an
/// upper estimate for sans-serif digits and letters, used to keep labels apart.
const LABEL_PX: f64 = 12.0;
pub(super) const LABEL_CHAR_W: f64 = 7.2;

/// The box a label takes: (left, top, right, bottom) for text at (x, y) (its baseline)
/// anchored `start` or `end`.
pub(super) fn label_box(x: f64, y: f64, anchor: &str, text: &str) -> (f64, f64, f64, f64) {
    let w = text.chars().count() as f64 * LABEL_CHAR_W;
    let (l, r) = if anchor == "end" {
        (x - w, x)
    } else {
        (x, x + w)
    };
    (l, y - LABEL_PX, r, y + 3.0)
}

/// Least room kept between two labels, and between a label and a point (px).
const LABEL_GAP: f64 = 4.0;

fn overlaps(a: (f64, f64, f64, f64), b: (f64, f64, f64, f64)) -> bool {
    a.0 < b.2 + LABEL_GAP && b.0 < a.2 + LABEL_GAP && a.1 < b.3 + LABEL_GAP && b.1 < a.3 + LABEL_GAP
}

/// One line chart: `y_label` against output token throughput, both axes from 0 with round
/// tick labels, points labelled by level where a label fits without covering another one
/// (a level left unlabelled is still in the table above).
fn chart(y_label: &str, points: &[(f64, f64, &str)], color: &str) -> String {
    let xt = nice_ticks(points.iter().map(|p| p.0).fold(0.0, f64::max) * 1.05);
    let yt = nice_ticks(points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1);
    let (max_x, max_y) = (xt[xt.len() - 1], yt[yt.len() - 1]);
    let x = |v: f64| PAD + v / max_x * (W - 2.0 * PAD);
    let y = |v: f64| H - PAD - v / max_y * (H - 2.0 * PAD);
    let mut svg = format!(
        "<figure><svg width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" \
         font-family=\"sans-serif\">\n"
    );
    for &t in &xt {
        let _ = writeln!(
            svg,
            "<line x1=\"{px:.1}\" y1=\"{PAD}\" x2=\"{px:.1}\" y2=\"{b}\" stroke=\"#e4e4e4\"/>\
             <text class=\"tick x-tick\" x=\"{px:.1}\" y=\"{ty}\" text-anchor=\"middle\" \
             font-size=\"11\">{}</text>",
            escape(&fmt_g(t)),
            px = x(t),
            b = H - PAD,
            ty = H - PAD + 16.0,
        );
    }
    for &t in &yt {
        let _ = writeln!(
            svg,
            "<line x1=\"{PAD}\" y1=\"{py:.1}\" x2=\"{r}\" y2=\"{py:.1}\" stroke=\"#e4e4e4\"/>\
             <text class=\"tick y-tick\" x=\"{tx}\" y=\"{ty:.1}\" text-anchor=\"end\" \
             font-size=\"11\">{}</text>",
            escape(&fmt_g(t)),
            py = y(t),
            r = W - PAD,
            tx = PAD - 5.0,
            ty = y(t) + 4.0,
        );
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{PAD}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#444\"/>\
         <line x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{b}\" stroke=\"#444\"/>",
        b = H - PAD,
        r = W - PAD
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"14\">Output token \
         throughput (tokens/sec)</text>",
        W / 2.0,
        H - 15.0,
    );
    let _ = writeln!(
        svg,
        "<text x=\"15\" y=\"{}\" font-size=\"14\" transform=\"rotate(-90 15 {})\" \
         text-anchor=\"middle\">{}</text>",
        H / 2.0,
        H / 2.0,
        escape(y_label),
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
    for p in &sorted {
        let _ = writeln!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{color}\"/>",
            x(p.0),
            y(p.1)
        );
    }
    // A label covers neither another label nor a point's mark.
    let marks: Vec<(f64, f64, f64, f64)> = sorted
        .iter()
        .map(|p| (x(p.0) - 4.0, y(p.1) - 4.0, x(p.0) + 4.0, y(p.1) + 4.0))
        .collect();
    let touches = |a: (f64, f64, f64, f64), b: (f64, f64, f64, f64)| {
        a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
    };
    let mut placed: Vec<(f64, f64, f64, f64)> = Vec::new();
    for p in &sorted {
        let text = format!("{} ({})", p.2, fmt_num(p.1));
        let (px, py) = (x(p.0), y(p.1));
        // Above or below the point, to its right or left: the first that fits the chart
        // and covers no label placed before.
        let spot = [
            (6.0, -8.0, "start"),
            (-6.0, -8.0, "end"),
            (6.0, 18.0, "start"),
            (-6.0, 18.0, "end"),
        ]
        .into_iter()
        .map(|(dx, dy, anchor)| (px + dx, py + dy, anchor))
        .find(|&(tx, ty, anchor)| {
            let b = label_box(tx, ty, anchor, &text);
            b.0 >= 0.0
                && b.2 <= W
                && b.1 >= 0.0
                && b.3 <= H - PAD
                && !placed.iter().any(|&o| overlaps(o, b))
                && !marks.iter().any(|&m| touches(m, b))
        });
        if let Some((tx, ty, anchor)) = spot {
            placed.push(label_box(tx, ty, anchor, &text));
            let _ = writeln!(
                svg,
                "<text class=\"point-label\" x=\"{tx:.1}\" y=\"{ty:.1}\" \
                 text-anchor=\"{anchor}\" font-size=\"{LABEL_PX}\">{}</text>",
                escape(&text)
            );
        }
    }
    let _ = writeln!(
        svg,
        "</svg>\n<figcaption>{} against output token throughput</figcaption></figure>",
        escape(y_label)
    );
    svg
}
