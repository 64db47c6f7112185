use serde_json::json;

use super::*;
use crate::measure::llm::{compute, Chunk, LlmRequest, MetricOptions, Usage};
use crate::report::html_check::scan;
use crate::report::plot::{run_plot_svgs, PLOT_SIZE};

const MS: u64 = 1_000_000;

/// Streamed requests one per 100 ms: TTFT 20 ms + i, then 8 chunks 2 ms apart; the first
/// three chunks are reasoning.
fn requests(n: u64) -> Vec<LlmRequest> {
    (0..n)
        .map(|i| {
            let start = 1_000 * MS + i * 100 * MS;
            let first = start + (20 + i) * MS;
            let chunks: Vec<Chunk> = (0..8)
                .map(|k| Chunk {
                    arrival_ns: first + k * 2 * MS,
                    tokens: 1,
                })
                .collect();
            LlmRequest {
                start_ns: start,
                end_ns: first + 15 * MS,
                isl: 32 + i,
                osl: 8,
                requested_osl: Some(10),
                first_output_ns: Some(first + 6 * MS),
                reasoning_tokens: 3,
                usage: Some(Usage {
                    prompt_tokens: 32 + i,
                    completion_tokens: 8,
                }),
                chunks,
                ..LlmRequest::default()
            }
        })
        .collect()
}

fn metrics(reqs: &[LlmRequest]) -> LlmMetrics {
    let opts = MetricOptions {
        slice_ns: Some(300 * MS),
        ..MetricOptions::default()
    };
    compute(reqs, &opts)
}

const STREAMING: ReportOptions = ReportOptions {
    kind: crate::report::llm::ReportKind::Llm,
    streaming: true,
};

#[test]
fn run_page_holds_every_table_chart_and_definition() {
    let reqs = requests(10);
    let m = metrics(&reqs);
    let plots = run_plot_svgs(&reqs, &["llm".into()], PLOT_SIZE).unwrap();
    assert_eq!(plots.len(), 5, "every chart of the run");
    let extra = Section::table(
        "telemetry",
        "GPU telemetry",
        &["GPU", "Utilisation (%)"],
        &[vec!["0".into(), "87.5".into()]],
    );
    let config = json!({"model": ["llm"], "url": "https://example.invalid:8000/<x>",
        "streaming": true, "goodput": null});
    let page = run_page(&RunPage {
        title: "concurrency4",
        metrics: &m,
        opts: &STREAMING,
        config: &config,
        plots: &plots,
        sections: std::slice::from_ref(&extra),
    });
    let o = scan(&page).unwrap();
    for id in [
        "request-metrics",
        "run-metrics",
        "token-checks",
        "time-slices",
        "plots",
        "telemetry",
        "configuration",
        "definitions",
    ] {
        assert!(o.ids.iter().any(|i| i == id), "section {id} missing");
    }
    assert_eq!(o.count("table"), 7, "six built-in tables and the added one");
    assert_eq!(o.count("svg"), 5);
    assert_eq!(o.count("figure"), 5);
    assert_eq!(o.count("script"), 0);
    assert!(
        o.external_references().is_empty(),
        "{:?}",
        o.external_references()
    );
    // Only in-page links.
    assert!(
        o.references.iter().all(|r| r.starts_with('#')),
        "{:?}",
        o.references
    );
    for d in METRICS {
        assert!(o.text.contains(d.tag), "definition of {} missing", d.tag);
    }
    for label in [
        "Time To First Token (ms)",
        "Time To First Output Token (ms)",
        "Reasoning Token Count (tokens)",
        "Inter Token Latency (ms)",
        "Request Throughput (per sec)",
        "Total Reasoning Tokens (tokens)",
    ] {
        assert!(o.text.contains(label), "{label} missing");
    }
    // 10 requests 100 ms apart in 300 ms slices: four slices.
    let slices = &page[page.find("id=\"time-slices\"").unwrap()..];
    let slices = &slices[..slices.find("</table>").unwrap()];
    assert_eq!(slices.matches("<tr>").count(), 1 + 4);
    // Every request got 8 of the 10 tokens it asked for: the warning is on the page.
    assert!(o
        .text
        .contains("10 of 10 requests got another output length"));
    // Configuration values are text, escaped.
    assert!(page.contains("https://example.invalid:8000/&lt;x&gt;"));
    assert!(o.text.contains("87.5"));
}

#[test]
fn levels_page_compares_and_links_the_levels() {
    let all = requests(12);
    let per: Vec<LlmMetrics> = all.chunks(4).map(metrics).collect();
    let levels: Vec<Level<'_>> = per
        .iter()
        .enumerate()
        .map(|(i, m)| Level {
            label: format!("concurrency{}", 1 << i),
            href: format!("llm-openai-chat-concurrency{}/report.html", 1 << i),
            metrics: m,
        })
        .collect();
    let page = levels_page(&LevelsPage {
        title: "levels",
        levels: &levels,
        opts: &STREAMING,
        config: &json!({"model": ["llm"]}),
        sections: &[],
    });
    let o = scan(&page).unwrap();
    assert!(o.external_references().is_empty());
    let table = &page[page.find("id=\"levels\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr>").count(), 1 + 3);
    for l in &levels {
        assert!(o.references.contains(&l.href), "{} not linked", l.label);
    }
    assert_eq!(o.count("svg"), 2, "TTFT and ITL charts");
    assert!(o.ids.iter().any(|i| i == "definitions"));
    // Level 0 has TTFT p50 21 or 22 ms (20 ms + index).
    assert!(table.contains("<td>22.00</td>") || table.contains("<td>21.00</td>"));
}

#[test]
fn the_checker_finds_what_a_page_must_not_have() {
    for bad in [
        "<p>unclosed",
        "<div><p></div></p>",
        "<p class=x>unquoted</p>",
        "<p",
        "<style>body{}",
    ] {
        assert!(scan(bad).is_err(), "{bad}");
    }
    let page = "<!DOCTYPE html><html><head><style>@import \"https://a/x.css\";\
        body{background:url('http://b/y.png')}</style></head><body>\
        <img src=\"//c/z.png\"/><a href=\"#top\">t</a><a href=\"r/report.html\">r</a>\
        <svg><image xlink:href=\"data:image/png;base64,AA\"/></svg>\
        <p style=\"background: url(file:///etc/x)\">x</p><script src=\"https://d/s.js\"></script>\
        </body></html>";
    let o = scan(page).unwrap();
    let mut found = o.external_references();
    found.sort_unstable();
    let mut want = vec![
        "https://a/x.css",
        "http://b/y.png",
        "//c/z.png",
        "data:image/png;base64,AA",
        "file:///etc/x",
        "https://d/s.js",
    ];
    want.sort_unstable();
    assert_eq!(found, want);
    assert!(o.references.iter().any(|r| r == "r/report.html"));
    assert_eq!(o.count("script"), 1);
    assert_eq!(o.count("img"), 1);
}

#[test]
fn escape_covers_markup_characters() {
    assert_eq!(
        escape("<a href=\"x\">&'"),
        "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
    );
}
