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
                    ..Usage::default()
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
    // Level 0's TTFTs are 20, 21, 22 and 23 ms (20 ms + index): p50 interpolates to 21.5.
    assert!(table.contains("<td>21.50</td>"), "{table}");
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

/// Every `<text class="{class}" ...>` of `svg`: (x, y, text-anchor, text).
fn svg_texts(svg: &str, class: &str) -> Vec<(f64, f64, String, String)> {
    let attr = |tag: &str, name: &str| {
        let at = tag
            .find(&format!(" {name}=\""))
            .map(|i| i + name.len() + 3)?;
        Some(tag[at..at + tag[at..].find('"')?].to_string())
    };
    svg.split("<text ")
        .skip(1)
        .filter(|t| t.starts_with(&format!("class=\"{class}")))
        .map(|t| {
            let (tag, rest) = t.split_once('>').unwrap();
            let text = rest.split("</text>").next().unwrap().to_string();
            let num = |n: &str| attr(tag, n).unwrap().parse::<f64>().unwrap();
            let anchor = attr(tag, "text-anchor").unwrap_or_else(|| "start".into());
            (num("x"), num("y"), anchor, text)
        })
        .collect()
}

/// The levels' charts have tick labels on both axes, and the point labels of levels that
/// crowd together never overlap (those that do not fit are left out).
#[test]
fn level_charts_have_ticks_and_labels_apart() {
    let all = requests(32);
    let base = metrics(&all[..4]);
    // Eight levels a hair apart in throughput, the same latency: every label would land
    // on the others.
    let per: Vec<LlmMetrics> = (0..8)
        .map(|i| {
            let mut m = base.clone();
            m.output_token_throughput = 1000.0 + f64::from(i);
            m
        })
        .collect();
    let levels: Vec<Level<'_>> = per
        .iter()
        .enumerate()
        .map(|(i, m)| Level {
            label: format!("concurrency{}", i + 1),
            href: format!("c{i}/report.html"),
            metrics: m,
        })
        .collect();
    let page = levels_page(&LevelsPage {
        title: "levels",
        levels: &levels,
        opts: &STREAMING,
        config: &json!({}),
        sections: &[],
    });
    let charts: Vec<&str> = page.split("<svg").skip(1).collect();
    assert_eq!(charts.len(), 2);
    for svg in charts {
        for axis in ["x-tick", "y-tick"] {
            let ticks = svg_texts(svg, &format!("tick {axis}"));
            assert!(ticks.len() >= 3, "{axis}: {ticks:?}");
            let values: Vec<f64> = ticks
                .iter()
                .map(|t| t.3.replace(',', "").parse().unwrap())
                .collect();
            assert_eq!(values[0], 0.0);
            assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
        }
        // The x axis reaches past the largest throughput.
        let top: f64 = svg_texts(svg, "tick x-tick")
            .last()
            .unwrap()
            .3
            .replace(',', "")
            .parse()
            .unwrap();
        assert!(top >= 1007.0, "{top}");
        let labels = svg_texts(svg, "point-label");
        assert!(!labels.is_empty() && labels.len() < 8, "{labels:?}");
        let boxes: Vec<_> = labels
            .iter()
            .map(|(x, y, a, t)| levels::label_box(*x, *y, a, t))
            .collect();
        for (i, a) in boxes.iter().enumerate() {
            assert!(a.0 >= 0.0 && a.2 <= 800.0, "{a:?}");
            for b in &boxes[i + 1..] {
                let apart =
                    a.2 + 4.0 <= b.0 || b.2 + 4.0 <= a.0 || a.3 + 4.0 <= b.1 || b.3 + 4.0 <= a.1;
                assert!(apart, "{a:?} and {b:?} overlap");
            }
        }
    }
    // Apart, two levels both get their label.
    let mut far = per[7].clone();
    far.output_token_throughput = 4000.0;
    let spread = [
        Level {
            label: "concurrency1".into(),
            href: "c1/report.html".into(),
            metrics: &per[0],
        },
        Level {
            label: "concurrency8".into(),
            href: "c8/report.html".into(),
            metrics: &far,
        },
    ];
    let page = levels_page(&LevelsPage {
        title: "levels",
        levels: &spread,
        opts: &STREAMING,
        config: &json!({}),
        sections: &[],
    });
    let svg = page.split("<svg").nth(1).unwrap();
    assert_eq!(svg_texts(svg, "point-label").len(), 2);
}

#[test]
fn nice_ticks_are_round_and_cover_the_maximum() {
    assert_eq!(levels::nice_ticks(7.3), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
    assert_eq!(
        levels::nice_ticks(0.0),
        vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
    );
    let t = levels::nice_ticks(1057.0);
    assert_eq!(t, vec![0.0, 500.0, 1000.0, 1500.0]);
    assert!(*t.last().unwrap() >= 1057.0 && t.len() <= 7);
}

/// A long configuration value wraps inside a fixed-layout table instead of pushing the
/// values off the page; a check that compared nothing says so, with no percentage.
#[test]
fn config_values_wrap_and_empty_checks_say_nothing_was_compared() {
    let mut reqs = requests(3);
    for r in &mut reqs {
        r.usage = None;
        r.requested_osl = None;
    }
    let m = metrics(&reqs);
    let long = "x".repeat(3000);
    let config = json!({"dataset": {"path": long}, "model": ["llm"]});
    let page = run_page(&RunPage {
        title: "c1",
        metrics: &m,
        opts: &STREAMING,
        config: &config,
        plots: &[],
        sections: &[],
    });
    let conf = &page[page.find("id=\"configuration\"").unwrap()..];
    assert!(
        conf.contains("<table class=\"config\">"),
        "{}",
        &conf[..200]
    );
    let style = &page[page.find("<style>").unwrap()..page.find("</style>").unwrap()];
    assert!(
        style.contains("table.config{table-layout:fixed;width:100%}"),
        "{style}"
    );
    assert!(style.contains("overflow-wrap:anywhere"), "{style}");
    let checks = &page[page.find("id=\"token-checks\"").unwrap()..];
    let checks = &checks[..checks.find("</table>").unwrap()];
    assert!(
        checks.contains("nothing compared: no response carried usage"),
        "{checks}"
    );
    assert!(checks.contains("nothing compared: no request asked for max_tokens"));
    assert!(!checks.contains('%'), "{checks}");
}

/// `chromium` on PATH, if any (the optional browser tier).
fn chromium() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join("chromium"))
        .find(|p| p.is_file())
}

/// Optional tier, where `chromium` is installed: a real page at 1400 px wide takes a
/// screenshot (a PNG is written), and, measured in the browser, every run-configuration
/// value cell ends inside the window and holds visible text (a long JSON value wraps
/// instead of pushing the values off-screen).
#[test]
fn in_a_browser_the_config_values_are_on_screen() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no chromium on PATH");
        return;
    };
    let reqs = requests(10);
    let m = metrics(&reqs);
    let long: String = (0..60).map(|i| format!("\"field_{i}\":null,")).collect();
    let config = json!({"dataset": {"raw": long}, "model": ["llm"], "streaming": true});
    let page = run_page(&RunPage {
        title: "c1",
        metrics: &m,
        opts: &STREAMING,
        config: &config,
        plots: &[],
        sections: &[],
    });
    let dir = std::env::temp_dir().join(format!("inferperf-html-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("report.html");
    std::fs::write(&file, &page).unwrap();
    let run = |args: &[String]| {
        std::process::Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .arg("--window-size=1400,1000")
            .args(args)
            .output()
            .expect("chromium runs")
    };
    let url = format!("file://{}", file.display());
    let png = dir.join("shot.png");
    run(&[format!("--screenshot={}", png.display()), url.clone()]);
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000);
    // The same page with a measuring script (the report itself has none).
    let probe = "<script>const w=window.innerWidth;const bad=[...document.querySelectorAll(\
        'table.config td:last-child')].filter(c=>{const r=c.getBoundingClientRect();\
        return r.right>w||r.width<100||c.textContent.trim()===''}).length;\
        document.body.setAttribute('data-probe','cells='+document.querySelectorAll(\
        'table.config td:last-child').length+' bad='+bad);</script></body>";
    std::fs::write(&file, page.replace("</body>", probe)).unwrap();
    let dom = String::from_utf8_lossy(&run(&["--dump-dom".into(), url]).stdout).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        dom.contains("data-probe=\"cells=3 bad=0\""),
        "{}",
        &dom[..dom.len().min(300)]
    );
}
