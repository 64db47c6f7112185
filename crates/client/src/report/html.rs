//! `report.html`: one self-contained page per `profile` run (metric tables, the charts inline
//! as SVG, the warnings, per-time-slice figures, the run configuration and the metric
//! definitions), and one page comparing the load levels of a multi-level run.
//!
//! Nothing on a page is fetched when it opens: styles are inline, there is no script, the
//! charts are inline SVG drawn with generic font names, and the only links are relative
//! ones from the comparison page to each level's page. Other parts of a run add their own
//! sections as [`Section`]s (already-rendered HTML, or a plain-text table through
//! [`Section::table`]).

use std::fmt::Write as _;

use serde_json::Value;

use crate::measure::llm::definitions::{METRICS, STATISTICS_NOTE};
use crate::measure::llm::slices::Slice;
use crate::measure::llm::{LlmMetrics, Stats};
use crate::report::llm::{extra_rows, fmt_num, genai_perf_rows, label, system_rows, ReportOptions};
use crate::report::plot::SvgPlot;

/// A section of a page: an anchor id, a heading, and its body as HTML. The body is put in
/// as given; build it with [`Section::table`] or [`escape`] text that is not markup.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Section {
    pub id: String,
    pub title: String,
    pub html: String,
}

impl Section {
    /// A section holding one table of plain-text cells (escaped here).
    pub fn table(id: &str, title: &str, header: &[&str], rows: &[Vec<String>]) -> Section {
        Section {
            id: id.to_string(),
            title: title.to_string(),
            html: table(header, rows),
        }
    }
}

/// What one run's page shows.
pub struct RunPage<'a> {
    /// The page heading (the load level, e.g. `concurrency4`).
    pub title: &'a str,
    pub metrics: &'a LlmMetrics,
    pub opts: &'a ReportOptions,
    /// The run configuration (the summary JSON's `input_config`).
    pub config: &'a Value,
    pub plots: &'a [SvgPlot],
    /// Further sections (sweep summary, server telemetry, ...), after the built-in ones.
    pub sections: &'a [Section],
}

/// One level of a multi-level run, for the comparison page.
pub struct Level<'a> {
    /// `concurrency4`, `request_rate2.5`.
    pub label: String,
    /// The level's own page, relative to the comparison page (`<dir>/report.html`).
    pub href: String,
    pub metrics: &'a LlmMetrics,
}

/// What the comparison page of a multi-level run shows.
pub struct LevelsPage<'a> {
    pub title: &'a str,
    pub levels: &'a [Level<'a>],
    pub opts: &'a ReportOptions,
    pub config: &'a Value,
    pub sections: &'a [Section],
}

/// `&`, `<`, `>`, `"` and `'` as character references, and control characters other than
/// newline and tab (which a server's text may hold) as U+FFFD: safe inside elements and
/// attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A table of plain-text cells.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table>\n<thead><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222;max-width:1100px}\
table{border-collapse:collapse;margin:0.5em 0 1.5em}\
th,td{border:1px solid #bbb;padding:0.25em 0.6em;text-align:right}\
th:first-child,td:first-child{text-align:left}\
thead th{background:#eee}\
figure{margin:1em 0}\
figure svg{max-width:100%;height:auto;border:1px solid #ddd}\
.warning{background:#fff3cd;border:1px solid #e0c36c;padding:0.5em 1em}\
nav a{margin-right:1em}\
table.config{table-layout:fixed;width:100%}\
table.config th:first-child,table.config td:first-child{width:16em}\
table.config th{text-align:left}\
table.config td{text-align:left;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word}";

/// The page around `body`, with a table of contents of `sections` (id, title).
fn page(title: &str, toc: &[(String, String)], body: &str) -> String {
    let mut out = String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n");
    out.push_str("<meta charset=\"utf-8\"/>\n");
    let _ = writeln!(out, "<title>{}</title>", escape(title));
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>");
    let _ = writeln!(out, "<h1>{}</h1>", escape(title));
    out.push_str("<nav>");
    for (id, t) in toc {
        let _ = write!(out, "<a href=\"#{}\">{}</a>", escape(id), escape(t));
    }
    out.push_str("</nav>\n");
    out.push_str(body);
    out.push_str("</body>\n</html>\n");
    out
}

fn section_html(s: &Section) -> String {
    format!(
        "<section id=\"{}\">\n<h2>{}</h2>\n{}</section>\n",
        escape(&s.id),
        escape(&s.title),
        s.html
    )
}

/// Columns of the per-request statistics tables.
const STAT_COLUMNS: [&str; 10] = [
    "Metric", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25",
];

fn stat_cells(label: &str, s: &Stats) -> Vec<String> {
    let mut cells = vec![
        label.to_string(),
        fmt_num(s.avg),
        fmt_num(s.min),
        fmt_num(s.max),
    ];
    for p in [99, 95, 90, 75, 50, 25] {
        cells.push(s.p(p).map_or_else(|| "N/A".into(), fmt_num));
    }
    cells
}

/// The per-request and run-level metric tables of one run.
fn metric_sections(m: &LlmMetrics, opts: &ReportOptions) -> Vec<Section> {
    let rows: Vec<Vec<String>> = genai_perf_rows(m, opts)
        .iter()
        .chain(&extra_rows(m, opts))
        .filter_map(|r| r.stats.as_ref().map(|s| stat_cells(&r.label, s)))
        .collect();
    let mut values: Vec<Vec<String>> = system_rows(m, opts)
        .into_iter()
        .map(|r| vec![r.label, fmt_num(r.value)])
        .collect();
    let mut value = |name: String, v: f64| values.push(vec![name, fmt_num(v)]);
    value(label("total_token_throughput"), m.total_token_throughput);
    value(label("input_token_throughput"), m.input_token_throughput);
    value(label("benchmark_duration"), m.duration_ns as f64 / 1e9);
    value(label("error_request_count"), m.error_count as f64);
    for (kind, n) in &m.errors_by_kind {
        value(format!("Error Count {kind} (count)"), *n as f64);
    }
    if let Some(g) = &m.goodput {
        value(label("good_request_fraction"), g.fraction);
    }
    if m.reasoning_tokens.is_some() {
        value(
            "Total Reasoning Tokens (tokens)".into(),
            m.total_reasoning_tokens as f64,
        );
    }
    vec![
        Section::table(
            "request-metrics",
            "Per-request metrics",
            &STAT_COLUMNS,
            &rows,
        ),
        Section::table("run-metrics", "Run metrics", &["Metric", "Value"], &values),
    ]
}

/// The token-count checks, with the warnings they gave on top.
fn checks_section(m: &LlmMetrics) -> Section {
    let c = &m.checks;
    let mut html = String::new();
    for w in c.warnings() {
        let _ = writeln!(html, "<p class=\"warning\">Warning: {}</p>", escape(&w));
    }
    let pct =
        |d: &crate::measure::llm::checks::DiffPct| format!("{:.1}% avg, {:.1}% max", d.avg, d.max);
    // Nothing compared: no percentage (a 0.0 % would read as a perfect match).
    let usage = if c.usage_compared == 0 {
        "nothing compared: no response carried usage".to_string()
    } else {
        format!(
            "prompt {}; completion {}",
            pct(&c.prompt_diff_pct),
            pct(&c.completion_diff_pct)
        )
    };
    let osl = if c.osl_compared == 0 {
        "nothing compared: no request asked for max_tokens".to_string()
    } else {
        format!(
            "{} (asked {:.1}, received {:.1} on average)",
            pct(&c.osl_diff_pct),
            c.osl_asked_avg,
            c.osl_got_avg
        )
    };
    let rows = vec![
        vec![
            "Server usage vs client tokenizer".to_string(),
            c.usage_compared.to_string(),
            c.usage_discrepancies.to_string(),
            usage,
        ],
        vec![
            "Asked (max_tokens) vs received output length".to_string(),
            c.osl_compared.to_string(),
            c.osl_mismatches.to_string(),
            osl,
        ],
    ];
    html.push_str(&table(
        &[
            "Check",
            "Requests compared",
            "Beyond tolerance",
            "Difference",
        ],
        &rows,
    ));
    Section {
        id: "token-checks".into(),
        title: "Token count checks".into(),
        html,
    }
}

/// Per-time-slice TTFT, ITL and latency (ms).
fn slices_section(slices: &[Slice]) -> Section {
    let ms = |s: &Option<Stats>, f: fn(&Stats) -> Option<f64>| {
        s.as_ref()
            .and_then(f)
            .map_or_else(|| "N/A".into(), |v| fmt_num(v * 1e-6))
    };
    let rows: Vec<Vec<String>> = slices
        .iter()
        .map(|s| {
            vec![
                s.index.to_string(),
                format!("{:.3}", s.start_ns as f64 / 1e9),
                format!("{:.3}", s.end_ns as f64 / 1e9),
                s.request_count.to_string(),
                s.error_count.to_string(),
                ms(&s.ttft, |s| Some(s.avg)),
                ms(&s.ttft, |s| s.p(50)),
                ms(&s.ttft, |s| s.p(99)),
                ms(&s.itl, |s| Some(s.avg)),
                ms(&s.itl, |s| s.p(50)),
                ms(&s.itl, |s| s.p(99)),
                ms(&s.request_latency, |s| s.p(50)),
            ]
        })
        .collect();
    let header = [
        "Slice",
        "Start (s)",
        "End (s)",
        "Requests",
        "Errors",
        "TTFT avg (ms)",
        "TTFT p50 (ms)",
        "TTFT p99 (ms)",
        "ITL avg (ms)",
        "ITL p50 (ms)",
        "ITL p99 (ms)",
        "Latency p50 (ms)",
    ];
    Section::table("time-slices", "Per time slice", &header, &rows)
}

fn plots_section(plots: &[SvgPlot]) -> Section {
    let mut html = String::new();
    for p in plots {
        let _ = write!(
            html,
            "<figure id=\"plot-{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
            escape(p.stem),
            inline_svg(&p.svg),
            escape(&p.title)
        );
    }
    Section {
        id: "plots".into(),
        title: "Charts".into(),
        html,
    }
}

/// The SVG element of a chart document (any XML declaration before it dropped).
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |at| &svg[at..]).trim_end()
}

/// The run configuration: one row per setting, values as JSON text (strings bare).
fn config_section(config: &Value) -> Section {
    let rows: Vec<Vec<String>> = match config {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Null => "-".into(),
                    v => v.to_string(),
                };
                vec![k.clone(), text]
            })
            .collect(),
        v => vec![vec!["config".into(), v.to_string()]],
    };
    // A fixed layout that wraps long values (a dataset's JSON) keeps every value on screen.
    let html =
        table(&["Setting", "Value"], &rows).replacen("<table>", "<table class=\"config\">", 1);
    Section {
        id: "configuration".into(),
        title: "Run configuration".into(),
        html,
    }
}

/// Every metric's definition (the `--help-metrics` dictionary).
fn definitions_section() -> Section {
    let rows: Vec<Vec<String>> = METRICS
        .iter()
        .map(|d| {
            vec![
                d.tag.to_string(),
                d.name.to_string(),
                d.unit.to_string(),
                d.direction.label().to_string(),
                d.definition.to_string(),
                format!(
                    "vLLM: {}; GenAI-Perf: {}; AIPerf: {}; GuideLLM: {}",
                    d.vllm, d.genai_perf, d.aiperf, d.guidellm
                ),
            ]
        })
        .collect();
    let mut html = table(
        &["Tag", "Name", "Unit", "Better", "Definition", "Other tools"],
        &rows,
    );
    let _ = writeln!(html, "<p>Statistics: {}</p>", escape(STATISTICS_NOTE));
    Section {
        id: "definitions".into(),
        title: "Metric definitions".into(),
        html,
    }
}

/// Assembles sections into a page with a table of contents.
fn assemble(title: &str, sections: &[Section]) -> String {
    let toc: Vec<(String, String)> = sections
        .iter()
        .map(|s| (s.id.clone(), s.title.clone()))
        .collect();
    let body: String = sections.iter().map(section_html).collect();
    page(title, &toc, &body)
}

/// One run's page.
pub fn run_page(p: &RunPage<'_>) -> String {
    let mut sections = metric_sections(p.metrics, p.opts);
    sections.push(checks_section(p.metrics));
    if !p.metrics.slices.is_empty() {
        sections.push(slices_section(&p.metrics.slices));
    }
    if !p.plots.is_empty() {
        sections.push(plots_section(p.plots));
    }
    sections.extend(p.sections.iter().cloned());
    sections.push(config_section(p.config));
    sections.push(definitions_section());
    assemble(p.title, &sections)
}

mod levels;
pub use levels::levels_page;

#[cfg(test)]
#[path = "html_tests.rs"]
mod tests;
