//! A point's telemetry summary and its three forms: the console table (GenAI-Perf's box
//! style), the `telemetry` section of the summary JSON, and an HTML table for the report.

use serde_json::{json, Map, Value};

use super::catalog::{Kind, METRICS};
use super::series::{GaugeStats, SeriesSummary, Store};
use super::Endpoint;
use crate::report::llm::fmt_num;
use crate::text::escape_control;

/// One endpoint's summary.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointReport {
    pub url: String,
    /// Scrapes that answered and that failed (before, during and after the point).
    pub scrapes: u64,
    pub failed: u64,
    pub series: Vec<SeriesSummary>,
}

/// The telemetry of one load point.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub endpoints: Vec<EndpointReport>,
    /// The measured span (ns) the gauges are summarised over.
    pub span_ns: (u64, u64),
}

/// Gauge columns, then the counter columns.
const HEADERS: [&str; 8] = [
    "Metric", "Series", "avg", "min", "max", "p99", "delta", "rate/s",
];

impl Report {
    pub fn new(endpoints: &[Endpoint], stores: &[Store], span: (u64, u64)) -> Report {
        Report {
            endpoints: endpoints
                .iter()
                .zip(stores)
                .map(|(e, s)| EndpointReport {
                    url: e.url.clone(),
                    scrapes: s.scrapes,
                    failed: s.failed,
                    series: s.summarize(span),
                })
                .collect(),
            span_ns: span,
        }
    }

    /// The summary of `metric` (a [`METRICS`] id) for `series` at endpoint `endpoint`.
    pub fn find(&self, endpoint: usize, metric: &str, series: &str) -> Option<&SeriesSummary> {
        self.endpoints
            .get(endpoint)?
            .series
            .iter()
            .find(|s| METRICS[s.metric].id == metric && s.series == series)
    }

    /// One table per endpoint, each ending with a newline; a line for an endpoint that never
    /// answered.
    pub fn console(&self) -> String {
        let mut out = String::new();
        for e in &self.endpoints {
            let url = escape_control(&e.url);
            if e.series.is_empty() {
                out.push_str(&format!(
                    "Server telemetry {url}: no recognised metrics ({} scrapes, {} failed)\n",
                    e.scrapes, e.failed
                ));
                continue;
            }
            let title = format!(
                "inferperf | Server Telemetry {url} ({} scrapes, {} failed)",
                e.scrapes, e.failed
            );
            let rows: Vec<Vec<String>> = e.series.iter().map(console_row).collect();
            out.push_str(&draw(&title, &rows));
        }
        out
    }

    /// The summary JSON's `telemetry` section.
    pub fn json(&self) -> Value {
        let endpoints: Vec<Value> = self
            .endpoints
            .iter()
            .map(|e| {
                let mut metrics = Map::new();
                for s in &e.series {
                    let m = &METRICS[s.metric];
                    let entry = metrics.entry(m.id).or_insert_with(
                        || json!({"unit": m.unit, "kind": kind_name(m.kind), "series": {}}),
                    );
                    entry["series"][s.series.as_str()] = series_json(s);
                }
                json!({
                    "url": e.url,
                    "scrapes": e.scrapes,
                    "failed_scrapes": e.failed,
                    "metrics": metrics,
                })
            })
            .collect();
        json!({
            "span_ns": [self.span_ns.0, self.span_ns.1],
            "endpoints": endpoints,
        })
    }

    /// An HTML fragment for a page section (which gives the heading): one
    /// `<table class="telemetry">` per endpoint with a caption, text escaped; nothing
    /// fetched, no script.
    pub fn html(&self) -> String {
        let mut out = String::new();
        for e in &self.endpoints {
            out.push_str(&format!(
                "<table class=\"telemetry\">\n<caption>{} ({} scrapes, {} failed)</caption>\n<thead><tr>",
                crate::report::html::escape(&e.url),
                e.scrapes,
                e.failed
            ));
            for h in HEADERS {
                out.push_str(&format!("<th>{}</th>", crate::report::html::escape(h)));
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for s in &e.series {
                out.push_str("<tr>");
                for (i, cell) in console_row(s).iter().enumerate() {
                    let tag = if i == 0 { "th" } else { "td" };
                    out.push_str(&format!(
                        "<{tag}>{}</{tag}>",
                        crate::report::html::escape(cell)
                    ));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody>\n</table>\n");
        }
        out
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
    }
}

fn series_json(s: &SeriesSummary) -> Value {
    let mut v = json!({
        "samples": s.samples,
        "before": finite(s.before),
        "after": finite(s.after),
    });
    if let Some(g) = &s.gauge {
        for (k, x) in gauge_fields(g) {
            v[k] = finite(x);
        }
    }
    if let Some(d) = s.delta {
        v["delta"] = finite(d);
        v["rate_per_s"] = s.rate_per_s.map_or(Value::Null, finite);
    }
    v
}

fn gauge_fields(g: &GaugeStats) -> [(&'static str, f64); 6] {
    [
        ("avg", g.avg),
        ("min", g.min),
        ("max", g.max),
        ("p50", g.p50),
        ("p90", g.p90),
        ("p99", g.p99),
    ]
}

/// JSON has no NaN or infinity: those are `null`.
fn finite(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// Metric (unit), series, then avg / min / max / p99 for a gauge or delta / rate for a
/// counter ("" in the other columns). The series is the peer's label value, made safe.
fn console_row(s: &SeriesSummary) -> Vec<String> {
    let m = &METRICS[s.metric];
    let mut row = vec![
        format!("{} ({})", m.title, m.unit),
        if s.series.is_empty() {
            "-".to_string()
        } else {
            escape_control(&s.series).into_owned()
        },
    ];
    let blank = || String::new();
    match (&s.gauge, s.delta) {
        (Some(g), _) => {
            row.extend([g.avg, g.min, g.max, g.p99].map(fmt_num));
            row.extend([blank(), blank()]);
        }
        (None, Some(d)) => {
            row.extend([blank(), blank(), blank(), blank()]);
            row.push(fmt_num(d));
            row.push(s.rate_per_s.map_or_else(|| "N/A".to_string(), fmt_num));
        }
        (None, None) => row.extend((0..6).map(|_| blank())),
    }
    row
}

/// A box-drawn table under a centred title.
fn draw(title: &str, rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let rule = |left: &str, fill: &str, mid: &str, right: &str| {
        let parts: Vec<String> = widths.iter().map(|w| fill.repeat(w + 2)).collect();
        format!("{left}{}{right}\n", parts.join(mid))
    };
    let line = |bar: &str, cells: &[String]| {
        let mut out = String::from(bar);
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i < 2 {
                out.push_str(&format!(" {cell:<w$} {bar}"));
            } else {
                out.push_str(&format!(" {cell:>w$} {bar}"));
            }
        }
        out.push('\n');
        out
    };
    let total: usize = widths.iter().map(|w| w + 3).sum::<usize>() + 1;
    let pad = total.saturating_sub(title.chars().count()) / 2;
    let mut out = format!("{}{title}\n", " ".repeat(pad));
    out.push_str(&rule("┏", "━", "┳", "┓"));
    let headers: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    out.push_str(&line("┃", &headers));
    out.push_str(&rule("┡", "━", "╇", "┩"));
    for row in rows {
        out.push_str(&line("│", row));
    }
    out.push_str(&rule("└", "─", "┴", "┘"));
    out
}
