//! `write_run_plots` end to end: files on disk, PNG headers, SVG content, skipped charts.

use std::path::{Path, PathBuf};

use super::{write_run_plots, write_run_plots_named, PLOT_SIZE};
use crate::measure::llm::record::{Chunk, LlmRequest, RequestError};

/// Small pictures: plotters and the PNG encoder are slow in debug builds.
const TEST_SIZE: (u32, u32) = (400, 240);

const ALL_STEMS: [&str; 5] = [
    "time_to_first_token",
    "request_latency",
    "ttft_vs_input_sequence_length",
    "token_to_token_latency_vs_output_position",
    "input_vs_output_sequence_length",
];

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("inferperf-plot-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A streamed request: TTFT 20 + i ms, then `osl` tokens in chunks of 2 every 5 ms.
fn streamed(i: u64, model: u32) -> LlmRequest {
    let start_ns = 1_000_000_000 + i * 50_000_000;
    let osl = 4 + i % 6 * 2;
    let chunks: Vec<Chunk> = (0..osl / 2)
        .map(|k| Chunk {
            arrival_ns: start_ns + (20 + i + 5 * k) * 1_000_000,
            tokens: 2,
        })
        .collect();
    LlmRequest {
        start_ns,
        end_ns: chunks.last().map_or(start_ns, |c| c.arrival_ns) + 1_000_000,
        isl: 100 + 7 * i,
        osl,
        chunks,
        model,
        ..LlmRequest::default()
    }
}

fn failed(mut r: LlmRequest) -> LlmRequest {
    r.error = Some(RequestError {
        kind: "http_500".into(),
        message: "boom".into(),
        code: None,
    });
    r
}

/// Width and height from the IHDR chunk after checking the PNG signature.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).expect("read png");
    assert!(bytes.len() > 24, "{} too short", path.display());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

fn file_names(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect()
}

fn expected_names(stems: &[&str]) -> Vec<String> {
    stems
        .iter()
        .flat_map(|s| [format!("{s}.svg"), format!("{s}.png")])
        .collect()
}

#[test]
fn a_streamed_run_writes_every_chart_in_both_formats() {
    let dir = TempDir::new("full");
    let mut reqs: Vec<LlmRequest> = (0..24).map(|i| streamed(i, (i % 2) as u32)).collect();
    reqs.push(failed(streamed(99, 0)));
    let names = ["llama-small".to_string()];
    let written = write_run_plots_named(&reqs, &names, &dir.0, TEST_SIZE).expect("plots");
    assert_eq!(file_names(&written), expected_names(&ALL_STEMS));
    for path in &written {
        assert!(path.starts_with(&dir.0));
        if path.extension().is_some_and(|e| e == "png") {
            assert_eq!(png_size(path), TEST_SIZE, "{}", path.display());
        }
    }
    let svg = |stem: &str| std::fs::read_to_string(dir.0.join(format!("{stem}.svg"))).expect("svg");
    let checks: [(&str, &[&str]); 5] = [
        (
            "time_to_first_token",
            &[
                "Time to first token (ms)",
                "llama-small (n=12)",
                "model 1 (n=12)",
            ],
        ),
        ("request_latency", &["Request latency (ms)"]),
        (
            "ttft_vs_input_sequence_length",
            &["Input sequence length (tokens)", "Time to first token (ms)"],
        ),
        (
            "token_to_token_latency_vs_output_position",
            &["Output token position", "Token-to-token latency (ms)"],
        ),
        (
            "input_vs_output_sequence_length",
            &[
                "Input sequence length (tokens)",
                "Output sequence length (tokens)",
            ],
        ),
    ];
    for (stem, labels) in checks {
        let text = svg(stem);
        assert!(
            text.contains("<svg") && text.trim_end().ends_with("</svg>"),
            "{stem}"
        );
        assert!(
            text.contains("width=\"400\"") && text.contains("height=\"240\""),
            "{stem}"
        );
        for label in labels {
            assert!(text.contains(label), "{stem}: no {label:?}");
        }
    }
    // The failed request's model-0 sample (n would be 13) is left out.
    assert!(!svg("time_to_first_token").contains("n=13"));
}

#[test]
fn embeddings_get_only_the_latency_chart_at_the_default_size() {
    let dir = TempDir::new("embed");
    let reqs: Vec<LlmRequest> = (0..5)
        .map(|i| LlmRequest {
            start_ns: i * 1_000_000,
            end_ns: i * 1_000_000 + 3_000_000,
            isl: 16,
            ..LlmRequest::default()
        })
        .collect();
    let written = write_run_plots(&reqs, &dir.0).expect("plots");
    assert_eq!(file_names(&written), expected_names(&["request_latency"]));
    assert_eq!(png_size(&written[1]), PLOT_SIZE);
    let svg = std::fs::read_to_string(&written[0]).expect("svg");
    assert!(svg.contains("Request latency (ms)") && svg.contains("model 0 (n=5)"));
}

#[test]
fn no_successful_request_means_no_files() {
    let dir = TempDir::new("none");
    let reqs = [failed(streamed(1, 0)), failed(streamed(2, 0))];
    for input in [&reqs[..], &[]] {
        let written = write_run_plots_named(input, &[], &dir.0, TEST_SIZE).expect("plots");
        assert!(written.is_empty());
    }
    assert_eq!(std::fs::read_dir(&dir.0).expect("list").count(), 0);
}

#[test]
fn a_missing_directory_is_an_error_naming_the_file() {
    let dir = TempDir::new("missing");
    let target = dir.0.join("not-there");
    let err =
        write_run_plots_named(&[streamed(0, 0)], &[], &target, TEST_SIZE).expect_err("must fail");
    assert!(
        err.msg.contains("not-there/time_to_first_token.svg"),
        "{}",
        err.msg
    );
}

/// Every `<text>` content of `svg`.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = t.split_once('>')?.1;
            Some(body.split("</text>").next()?.trim().to_string())
        })
        .collect()
}

/// The numbers among a chart's texts (tick labels).
fn numbers(svg: &str) -> Vec<f64> {
    svg_texts(svg)
        .iter()
        .filter_map(|t| t.parse::<f64>().ok())
        .collect()
}

fn chart_svg(reqs: &[LlmRequest], stem: &str) -> String {
    let plots = super::run_plot_svgs(reqs, &["m".into()], TEST_SIZE).expect("charts");
    plots
        .into_iter()
        .find(|p| p.stem == stem)
        .unwrap_or_else(|| panic!("{stem} drawn"))
        .svg
}

/// A box chart's value axis spans the data with a margin, not 0 to the top: TTFTs of 20
/// to 31 ms get ticks between about 18 and 33.
#[test]
fn box_charts_scale_to_the_data() {
    let reqs: Vec<LlmRequest> = (0..12).map(|i| streamed(i, 0)).collect();
    let ticks = numbers(&chart_svg(&reqs, "time_to_first_token"));
    assert!(ticks.len() >= 3, "{ticks:?}");
    let (lo, hi) = ticks
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &t| (a.min(t), b.max(t)));
    assert!(lo >= 18.0 && hi <= 33.0, "{ticks:?}");
    assert_eq!(super::draw::data_axis(20.0, 31.0), 18.9..32.1);
    assert_eq!(super::draw::data_axis(20.0, 20.0), 19.0..21.0);
    assert_eq!(super::draw::data_axis(0.1, 10.0).start, 0.0);
}

/// One ISL and one OSL value: one cell, each axis one tick labelled with that value.
#[test]
fn a_single_value_heat_map_is_one_labelled_cell() {
    let reqs: Vec<LlmRequest> = (0..5)
        .map(|i| LlmRequest {
            isl: 100,
            osl: 8,
            ..streamed(i, 0)
        })
        .collect();
    let texts = svg_texts(&chart_svg(&reqs, "input_vs_output_sequence_length"));
    let ticks: Vec<&String> = texts.iter().filter(|t| t.parse::<f64>().is_ok()).collect();
    // The axes' labels, and the cell's count (5).
    let mut sorted: Vec<&str> = ticks.iter().map(|t| t.as_str()).collect();
    sorted.sort_unstable();
    assert_eq!(sorted, vec!["100", "5", "8"], "{texts:?}");
    // Wide bins are labelled with their range.
    let axis = super::draw::Bins {
        lo: 100,
        width: 5,
        bins: 3,
    };
    assert_eq!(axis.label(107.5), "105-109");
}
