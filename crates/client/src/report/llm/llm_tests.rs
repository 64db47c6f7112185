//! Golden tests of the LLM reports on one small fixed run.

use super::*;
use crate::measure::llm::goodput::{Goodput, SloMetric};
use crate::measure::llm::{compute, Chunk, LlmRequest, MetricOptions, RequestError, Usage};

const BASE: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

fn req(start_ms: u64, chunks: &[(u64, u64)], isl: u64) -> LlmRequest {
    let chunks: Vec<Chunk> = chunks
        .iter()
        .map(|&(at, tokens)| Chunk {
            arrival_ns: BASE + at * MS,
            tokens,
        })
        .collect();
    LlmRequest {
        start_ns: BASE + start_ms * MS,
        end_ns: chunks.last().map_or(0, |c| c.arrival_ns + MS),
        isl,
        osl: chunks.iter().map(|c| c.tokens).sum(),
        chunks,
        ..LlmRequest::default()
    }
}

/// Two good streams (one with a two-token chunk and a same-read pair) and one HTTP 500.
pub(super) fn fixture() -> Vec<LlmRequest> {
    let mut a = req(0, &[(100, 1), (110, 1), (120, 1), (130, 1)], 10);
    a.requested_osl = Some(4);
    a.usage = Some(Usage {
        prompt_tokens: 10,
        completion_tokens: 4,
        total_tokens: Some(14),
        ..Usage::default()
    });
    let b = req(50, &[(150, 2), (250, 2), (250, 1)], 2000);
    let c = LlmRequest {
        start_ns: BASE + 60 * MS,
        end_ns: BASE + 300 * MS,
        isl: 7,
        error: Some(RequestError {
            kind: "http_error".into(),
            message: "Internal Server Error".into(),
            code: Some(500),
        }),
        ..LlmRequest::default()
    };
    vec![a, b, c]
}

fn metrics() -> crate::measure::llm::LlmMetrics {
    let opts = MetricOptions {
        goodput: vec![Goodput {
            metric: SloMetric::TimeToFirstToken,
            value: 100.0,
        }],
        slice_ns: None,
        streaming: true,
        ..MetricOptions::default()
    };
    compute(&fixture(), &opts)
}

const STREAMING: ReportOptions = ReportOptions {
    kind: ReportKind::Llm,
    streaming: true,
};

#[test]
fn fmt_num_matches_python_grouping() {
    let cases = [
        (0.0, "0.00"),
        (1.005, "1.00"),
        (999.999, "1,000.00"),
        (1234567.891, "1,234,567.89"),
        (-1234.5, "-1,234.50"),
        (-0.001, "0.00"),
        (f64::INFINITY, "inf"),
    ];
    for (v, want) in cases {
        assert_eq!(fmt_num(v), want, "{v}");
    }
}

fn input_config() -> serde_json::Value {
    serde_json::json!({"model": ["m"], "concurrency": 2})
}

/// Compares with a file under testdata/, printing the whole actual text on a mismatch.
fn golden(name: &str, want: &str, got: &str) {
    assert!(want == got, "{name} differs; actual output:\n{got}");
}

#[test]
fn console_golden() {
    golden(
        "console_llm.txt",
        include_str!("testdata/console_llm.txt"),
        &console::render(&metrics(), &STREAMING),
    );
}

#[test]
fn csv_golden() {
    golden(
        "genai_perf.csv",
        include_str!("testdata/genai_perf.csv"),
        &genai_perf::csv(&metrics(), &STREAMING),
    );
}

#[test]
fn json_golden() {
    golden(
        "genai_perf.json",
        include_str!("testdata/genai_perf.json"),
        &genai_perf::json(&metrics(), &input_config()),
    );
}

#[test]
fn jsonl_golden() {
    golden(
        "profile_export.jsonl",
        include_str!("testdata/profile_export.jsonl"),
        &jsonl::records(&fixture()),
    );
}

/// GenAI-Perf's keys, with its stat names, read back through serde_json.
#[test]
fn json_parses_back_with_genai_perf_keys() {
    let text = genai_perf::json(&metrics(), &input_config());
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let stats = [
        "avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std",
    ];
    for key in [
        "request_latency",
        "time_to_first_token",
        "time_to_second_token",
        "inter_token_latency",
        "output_token_throughput_per_user",
        "output_sequence_length",
        "input_sequence_length",
    ] {
        let obj = &v[key];
        assert!(obj["unit"].is_string(), "{key}");
        for s in stats {
            assert!(obj[s].is_number(), "{key}.{s}");
        }
    }
    for key in [
        "request_throughput",
        "output_token_throughput",
        "request_goodput",
        "request_count",
    ] {
        assert!(
            v[key]["unit"].is_string() && v[key]["avg"].is_number(),
            "{key}"
        );
    }
    assert_eq!(v["time_to_first_token"]["unit"], "ms");
    assert_eq!(v["request_throughput"]["unit"], "requests/sec");
    assert_eq!(
        v["output_token_throughput_per_user"]["unit"],
        "tokens/sec/user"
    );
    assert_eq!(v["input_config"], input_config());
    assert_eq!(v["errors_by_kind"]["http_error"], 1);
    let summary = &v["error_summary"][0];
    assert_eq!(summary["count"], 1);
    assert_eq!(summary["error_details"]["code"], 500);
    assert_eq!(summary["error_details"]["message"], "Internal Server Error");
    assert_eq!(v["request_count"]["avg"], 2.0);
}

#[test]
fn jsonl_has_one_parsable_line_per_request() {
    let text = jsonl::records(&fixture());
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["metrics"]["time_to_first_token"]["value"], 100.0);
    assert_eq!(
        lines[1]["metadata"]["chunk_arrival_offsets_ns"][2],
        200 * MS
    );
    assert_eq!(lines[1]["metrics"]["same_read_event_count"]["value"], 1);
    assert_eq!(lines[2]["error"]["code"], 500);
    assert_eq!(lines[2]["error"]["type"], "http_error");
    assert!(lines[2]["metrics"].get("request_latency").is_none());
}

#[test]
fn open_loop_adds_latency_from_intended_send() {
    let mut reqs = fixture();
    reqs[0].intended_ns = BASE; // sent on time
    reqs[1].intended_ns = BASE + 40 * MS; // sent 10 ms late
    let m = compute(&reqs, &MetricOptions::default());
    let text = console::render(&m, &STREAMING);
    assert!(
        text.contains("TTFT From Intended Send (ms): avg 105.00  min 100.00  max 110.00"),
        "{text}"
    );
    assert!(
        text.contains("Request Latency From Intended Send (ms): avg 170.00"),
        "{text}"
    );
    assert!(!text.contains("Goodput"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&genai_perf::json(&m, &serde_json::Value::Null)).unwrap();
    assert_eq!(json["time_to_first_token_from_intended"]["max"], 110.0);
    assert!(json.get("request_goodput").is_none());
}

#[test]
fn closed_loop_has_no_intended_lines() {
    let text = console::render(&metrics(), &STREAMING);
    assert!(!text.contains("Intended"), "{text}");
}

fn embeddings() -> Vec<LlmRequest> {
    (0..4)
        .map(|i| LlmRequest {
            start_ns: BASE + i * 10 * MS,
            end_ns: BASE + i * 10 * MS + (5 + i) * MS,
            isl: 100 + i,
            ..LlmRequest::default()
        })
        .collect()
}

#[test]
fn embeddings_show_latency_isl_and_throughput_only() {
    let m = compute(&embeddings(), &MetricOptions::default());
    let opts = ReportOptions {
        kind: ReportKind::Embeddings,
        streaming: false,
    };
    let text = console::render(&m, &opts);
    assert!(text.contains("inferperf | Embeddings Metrics"), "{text}");
    let table_rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with('│'))
        .map(|l| l.split('│').nth(1).unwrap().trim())
        .collect();
    assert_eq!(
        table_rows,
        [
            "Request Latency (ms)",
            "Input Sequence Length (tokens)",
            "Request Throughput (per sec)",
            "Request Count (count)"
        ]
    );
    assert!(
        text.contains("│           Request Latency (ms) │   6.50 │   5.00 │   8.00 │"),
        "{text}"
    );
    for absent in ["Chunk", "Tool names", "Token Throughput", "Same-Read"] {
        assert!(!text.contains(absent), "{absent}: {text}");
    }
    let csv = genai_perf::csv(&m, &opts);
    assert!(
        csv.starts_with(
            "Metric,avg,min,max,p99,p95,p90,p75,p50,p25\nRequest Latency (ms),6.50,5.00,8.00,"
        ),
        "{csv}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&genai_perf::json(&m, &serde_json::Value::Null)).unwrap();
    assert!(json.get("time_to_first_token").is_none());
    assert!(json.get("output_token_throughput").is_none());
    assert_eq!(json["request_latency"]["avg"], 6.5);
}

#[test]
fn non_streaming_llm_drops_streaming_rows() {
    let reqs: Vec<LlmRequest> = (0..3)
        .map(|i| req(i * 10, &[(i * 10 + 50, 8)], 20))
        .collect();
    let m = compute(&reqs, &MetricOptions::default());
    let opts = ReportOptions {
        kind: ReportKind::Llm,
        streaming: false,
    };
    let text = console::render(&m, &opts);
    for absent in [
        "Time To First Token",
        "Inter Token Latency",
        "Per User",
        "Chunk",
        "Tool names",
    ] {
        assert!(!text.contains(absent), "{absent}: {text}");
    }
    assert!(text.contains("Request Latency (ms) │  50.00 │"), "{text}");
    assert!(text.contains("GuideLLM TPOT (ms): avg 6.25"), "{text}");
    assert!(text.contains("Errors: 0\n"), "{text}");
}

#[test]
fn missing_stats_print_as_na() {
    // One single-chunk stream: no TTST, ITL or per-user throughput.
    let m = compute(&[req(0, &[(30, 1)], 3)], &MetricOptions::default());
    let text = console::render(&m, &STREAMING);
    let ttst = text
        .lines()
        .find(|l| l.contains("Time To Second Token"))
        .unwrap();
    assert_eq!(ttst.matches("N/A").count(), 6, "{ttst}");
    assert!(text.contains("Per-Chunk Gap (ms): N/A"), "{text}");
    let csv = genai_perf::csv(&m, &STREAMING);
    assert!(!csv.contains("Time To Second Token"), "{csv}");
}

#[test]
fn aiperf_summaries_count_errors_and_goodput_under_aiperfs_labels() {
    let m = metrics();
    let csv = aiperf::csv(&m);
    let rows: Vec<&str> = csv.split("\r\n").collect();
    assert!(rows.contains(&"Request Count,2.00"), "{csv}");
    assert!(rows.contains(&"Error Request Count,1.00"), "{csv}");
    assert!(
        rows.contains(&"Completed Requests (Success + Error),3.00"),
        "{csv}"
    );
    assert!(rows.contains(&"Request Error Rate (%),33.33"), "{csv}");
    assert!(
        rows.iter()
            .any(|r| r.starts_with("Goodput (requests/sec),")),
        "{csv}"
    );
    assert!(csv.ends_with("std\r\n") && !csv.replace("\r\n", "").contains('\n'));
    // The one request with usage (10 prompt, 4 completion, 14 total tokens, as counted).
    assert!(
        rows.contains(&"Total Usage Total Tokens (tokens),14.00"),
        "{csv}"
    );
    assert!(rows.contains(&"Usage Discrepancy Count,0.00"), "{csv}");
    // The failure says nothing of the context length.
    assert!(rows.contains(&"Context Overflow Count,0.00"), "{csv}");
    // Both successful requests have a TTFT of 100 ms, within the 100 ms goodput limit; the
    // failed one counts against the fraction.
    assert!(rows.contains(&"Good Request Count,2.00"), "{csv}");
    assert!(rows.contains(&"GoodRequestFraction (ratio),0.67"), "{csv}");
    // Each block in AIPerf's order, by tag: credit_to_start_latency before decode_duration.
    let at = |prefix: &str| rows.iter().position(|r| r.starts_with(prefix)).unwrap();
    assert!(at("Credit-to-Start Latency (ms),") < at("Decode Duration (ms),"));
    assert!(at("Usage Completion Tokens (tokens),") < at("Usage Completion Diff % (%),"));
    let info = aiperf::RunInfo {
        benchmark_id: "0123456789ab".into(),
        cli_command: "inferperf profile -m m".into(),
        start_ns: 1_700_000_000_000_000_000,
        end_ns: 1_700_000_000_250_000_000,
        was_cancelled: false,
        input_config: serde_json::json!({"phases": []}),
    };
    let json: serde_json::Value = serde_json::from_str(&aiperf::json(&m, &info)).unwrap();
    assert_eq!(json["schema_version"], "1.4");
    assert_eq!(
        json["error_request_count"],
        serde_json::json!({"unit": "requests", "avg": 1.0})
    );
    assert_eq!(json["request_latency"]["count"], 2);
    assert_eq!(json["usage_prompt_tokens"]["count"], 1);
    assert_eq!(json["usage_prompt_tokens"]["avg"], 10.0);
    assert_eq!(
        json["total_usage_completion_tokens"],
        serde_json::json!({"unit": "tokens", "avg": 4.0})
    );
    assert_eq!(json["osl_mismatch_diff_pct"]["avg"], 0.0);
    // Failed requests count in the latencies from the credit.
    assert_eq!(json["credit_to_start_latency"]["count"], 3);
    assert_eq!(json["effective_latency"]["count"], 3);
    assert_eq!(json["decode_duration"]["count"], 2);
    let details = &json["error_summary"][0]["error_details"];
    assert_eq!(json["error_summary"][0]["count"], 1);
    assert_eq!(
        (&details["code"], &details["type"], &details["message"]),
        (
            &serde_json::json!(500),
            &serde_json::json!("http_error"),
            &serde_json::json!("Internal Server Error")
        )
    );
    assert_eq!(json["start_time"], "2023-11-14T22:13:20.000000");
    assert_eq!(json["end_time"], "2023-11-14T22:13:20.250000");
    assert_eq!(
        aiperf::iso_time(951_782_400_000_000_000),
        "2000-02-29T00:00:00.000000"
    );
}
