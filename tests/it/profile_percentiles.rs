//! The statistics of `profile_export_aiperf.json` are AIPerf 0.13's: avg, min, max, sum,
//! population std and numpy-linear p1..p99 over the exact per-request values (every chunk gap
//! of every request for `inter_chunk_latency`). Checked two ways: an `inferperf profile` run
//! against the reference server, recomputed here from its own `profile_export.jsonl`; and a
//! real AIPerf 0.13 run (testdata/aiperf_percentiles), whose JSONL run through inferperf's
//! statistics must give AIPerf's JSON.
//!
//! Also the key set per mode: streaming, non-streaming and embeddings runs write exactly the
//! metrics AIPerf 0.13's metric flags allow for that mode.

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use inferperf::measure::llm::stats::{StatAcc, PERCENTILES};
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every per-request value of every metric in a `profile_export.jsonl`, list metrics
/// flattened, in record order.
fn jsonl_values(path: &Path) -> BTreeMap<String, Vec<f64>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for line in text.lines() {
        let rec: Value = serde_json::from_str(line).unwrap();
        let Some(metrics) = rec["metrics"].as_object() else {
            continue;
        };
        for (tag, m) in metrics {
            let slot = out.entry(tag.clone()).or_default();
            match &m["value"] {
                Value::Array(list) => slot.extend(list.iter().map(|v| v.as_f64().unwrap())),
                v => slot.push(v.as_f64().unwrap()),
            }
        }
    }
    out
}

/// numpy's default (linear) percentile of sorted values, written out independently of the
/// crate: rank q/100 · (n − 1), interpolated between its two neighbours.
fn numpy_linear(sorted: &[f64], q: f64) -> f64 {
    let rank = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (rank - lo as f64) * (sorted[hi] - sorted[lo])
}

/// (stat name, value) of `values` the way AIPerf's `metric_result_from_array` computes them.
fn numpy_summary(values: &[f64]) -> Vec<(String, f64)> {
    let n = values.len() as f64;
    let sum: f64 = values.iter().sum();
    let avg = sum / n;
    let var = values.iter().map(|v| (v - avg) * (v - avg)).sum::<f64>() / n;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut out = vec![
        ("count".to_string(), n),
        ("sum".to_string(), sum),
        ("avg".to_string(), avg),
        ("min".to_string(), sorted[0]),
        ("max".to_string(), sorted[sorted.len() - 1]),
        ("std".to_string(), var.sqrt()),
    ];
    for p in PERCENTILES {
        out.push((format!("p{p}"), numpy_linear(&sorted, p as f64)));
    }
    out
}

/// The same statistics from inferperf's own accumulator.
fn crate_summary(values: &[f64]) -> Vec<(String, f64)> {
    let mut acc = StatAcc::signed();
    for &v in values {
        acc.record(v);
    }
    let s = acc.stats().unwrap();
    let mut out = vec![
        ("count".to_string(), s.count as f64),
        ("sum".to_string(), s.avg * s.count as f64),
        ("avg".to_string(), s.avg),
        ("min".to_string(), s.min),
        ("max".to_string(), s.max),
        ("std".to_string(), s.std),
    ];
    for p in PERCENTILES {
        out.push((format!("p{p}"), s.p(p).unwrap()));
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + 1e-9
}

/// Compares every distribution metric of `export` (an object with `p50` and `count`) that
/// the records also hold; returns the tags compared.
fn compare(
    export: &Value,
    records: &BTreeMap<String, Vec<f64>>,
    summary: fn(&[f64]) -> Vec<(String, f64)>,
    who: &str,
) -> BTreeSet<String> {
    let mut compared = BTreeSet::new();
    let mut bad = Vec::new();
    for (tag, m) in export.as_object().unwrap() {
        if m.get("p50").is_none() || m.get("count").is_none() {
            continue;
        }
        let Some(values) = records.get(tag) else {
            continue;
        };
        for (stat, want) in summary(values) {
            let Some(got) = m[stat.as_str()].as_f64() else {
                bad.push(format!("{tag}.{stat} missing"));
                continue;
            };
            if !close(got, want) {
                bad.push(format!("{tag}.{stat}: export {got}, recomputed {want}"));
            }
        }
        compared.insert(tag.clone());
    }
    assert!(bad.is_empty(), "{who}:\n{}", bad.join("\n"));
    compared
}

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/client/src/measure/llm/testdata/aiperf_percentiles")
}

/// AIPerf 0.13's own numbers: its per-request records through inferperf's statistics give
/// its JSON, every stat of every per-request metric (inter_chunk_latency pooled over chunks).
#[test]
fn aiperfs_json_is_recomputed_from_its_own_records() {
    let dir = sample_dir();
    let export = read_json(&dir.join("profile_export_aiperf.json"));
    let records = jsonl_values(&dir.join("profile_export.jsonl"));
    let compared = compare(&export, &records, crate_summary, "AIPerf 0.13 sample");
    for tag in [
        "request_latency",
        "time_to_first_token",
        "time_to_second_token",
        "inter_token_latency",
        "inter_chunk_latency",
        "output_token_throughput_per_user",
        "e2e_output_token_throughput",
        "http_req_duration",
    ] {
        assert!(compared.contains(tag), "{tag} not compared: {compared:?}");
    }
    // The sample's gaps are real interpolations, not ranks read off the list.
    let icl = &export["inter_chunk_latency"];
    let mut gaps = records["inter_chunk_latency"].clone();
    gaps.sort_by(f64::total_cmp);
    assert_eq!(icl["count"].as_f64(), Some(gaps.len() as f64));
    assert!(!gaps.contains(&icl["p90"].as_f64().unwrap()));
}

/// The recomputation above, with numpy's formula written out in this test, on an inferperf
/// streaming run against the reference server.
#[test]
fn inferperfs_json_is_recomputed_from_its_own_records() {
    let server = start_llm(3, 1, 1);
    let dir = temp_dir("profile-percentiles");
    let args = [
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        "3",
        "--request-count",
        "23",
        "--synthetic-input-tokens-mean",
        "24",
        "--synthetic-input-tokens-stddev",
        "6",
        "--output-tokens-mean",
        "9",
        "--output-tokens-stddev",
        "3",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    server.stop();
    let aiperf = &outcomes[0].aiperf_dir;
    let export = read_json(&aiperf.join("profile_export_aiperf.json"));
    let records = jsonl_values(&aiperf.join("profile_export.jsonl"));
    let compared = compare(&export, &records, numpy_summary, "inferperf run");
    for tag in [
        "request_latency",
        "time_to_first_token",
        "inter_token_latency",
        "inter_chunk_latency",
        "output_sequence_length",
        "input_sequence_length",
        "output_token_throughput_per_user",
    ] {
        assert!(compared.contains(tag), "{tag} not compared: {compared:?}");
    }
    // 23 requests of several chunks each: every gap of every request is a value.
    let gaps = export["inter_chunk_latency"]["count"].as_f64().unwrap();
    assert_eq!(gaps, records["inter_chunk_latency"].len() as f64);
    assert!(gaps > 23.0, "{gaps}");
}

/// The metric keys (objects with a `unit`) of a `profile_export_aiperf.json`.
fn metric_keys(export: &Value) -> BTreeSet<String> {
    export
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.get("unit").is_some())
        .map(|(k, _)| k.clone())
        .collect()
}

/// The keys AIPerf 0.13 writes for a non-streaming chat run against this server (usage
/// counts returned, HTTP/1.1 trace timings, no goodput, no errors): aiperf/metrics/types
/// less the metrics flagged `STREAMING_ONLY` (post_processors/base_metrics_processor.py
/// disallows the flag without `--streaming`), `EXPERIMENTAL`, `GOODPUT`, `ERROR_ONLY`,
/// `SUPPORTS_*_ONLY` (text only), `FIXED_SCHEDULE_ONLY` and `INTERNAL`.
const NON_STREAMING_KEYS: &[&str] = &[
    "active_decode_throughput",
    "active_decode_throughput_per_user",
    "active_prefill_throughput",
    "active_prefill_throughput_per_user",
    "active_total_throughput",
    "benchmark_duration",
    "completed_request_count",
    "credit_to_start_latency",
    "e2e_output_token_throughput",
    "effective_concurrency",
    "effective_decode_concurrency",
    "effective_decode_throughput",
    "effective_decode_throughput_per_user",
    "effective_latency",
    "effective_prefill_concurrency",
    "effective_prefill_throughput",
    "effective_prefill_throughput_per_user",
    "effective_total_throughput",
    "http_req_blocked",
    "http_req_chunks_received",
    "http_req_chunks_sent",
    "http_req_connecting",
    "http_req_connection_overhead",
    "http_req_connection_reused",
    "http_req_data_received",
    "http_req_data_sent",
    "http_req_dns_lookup",
    "http_req_duration",
    "http_req_receiving",
    "http_req_sending",
    "http_req_total",
    "http_req_waiting",
    "input_sequence_length",
    "input_token_throughput",
    "osl_mismatch_count",
    "osl_mismatch_diff_pct",
    "output_sequence_length",
    "output_token_count",
    "output_token_throughput",
    "request_count",
    "request_error_rate",
    "request_latency",
    "request_throughput",
    "tokens_in_flight",
    "total_isl",
    "total_osl",
    "total_output_tokens",
    "total_token_throughput",
    "total_usage_completion_tokens",
    "total_usage_prompt_tokens",
    "total_usage_total_tokens",
    "usage_completion_tokens",
    "usage_completion_tokens_diff_pct",
    "usage_discrepancy_count",
    "usage_prompt_tokens",
    "usage_prompt_tokens_diff_pct",
    "usage_total_tokens",
];

/// What `--streaming` adds: the metrics aiperf/metrics/types flags `STREAMING_TOKENS_ONLY`
/// (ttft_metric.py, ttst_metric.py, inter_token_latency_metric.py,
/// inter_chunk_latency_metric.py, output_token_throughput_metrics.py,
/// time_to_first_output_token_metric.py, prefill_throughput_per_user.py,
/// decode_duration_metric.py).
const STREAMING_ONLY_KEYS: &[&str] = &[
    "decode_duration",
    "inter_chunk_latency",
    "inter_token_latency",
    "output_token_throughput_per_user",
    "prefill_throughput_per_user",
    "time_to_first_output_token",
    "time_to_first_token",
    "time_to_second_token",
];

/// What an embeddings run lacks beside the streaming-only metrics: the endpoint has
/// `produces_tokens: false` (aiperf/plugin/plugins.yaml), which disallows the
/// `PRODUCES_TOKENS_ONLY` metrics, and AIPerf's embeddings parser reads no `usage`
/// (aiperf/endpoints/openai_embeddings.py). `output_sequence_length` stays: AIPerf 0.13 writes
/// it, all zeros, for embeddings.
const TOKEN_OUTPUT_KEYS: &[&str] = &[
    "e2e_output_token_throughput",
    "osl_mismatch_count",
    "osl_mismatch_diff_pct",
    "output_token_count",
    "output_token_throughput",
    "total_osl",
    "total_output_tokens",
    "total_token_throughput",
    "total_usage_completion_tokens",
    "total_usage_prompt_tokens",
    "total_usage_total_tokens",
    "usage_completion_tokens",
    "usage_completion_tokens_diff_pct",
    "usage_discrepancy_count",
    "usage_prompt_tokens",
    "usage_prompt_tokens_diff_pct",
    "usage_total_tokens",
];

fn keys_of_run(tag: &str, args: &[&str]) -> BTreeSet<String> {
    let server = start_llm(2, 1, 1);
    let dir = temp_dir(tag);
    let mut all = vec![
        "--concurrency",
        "2",
        "--request-count",
        "6",
        "--synthetic-input-tokens-mean",
        "20",
        "--output-tokens-mean",
        "6",
    ];
    all.extend(args);
    let (outcomes, _) = profile(&server, &dir, &all).unwrap();
    server.stop();
    metric_keys(&read_json(
        &outcomes[0].aiperf_dir.join("profile_export_aiperf.json"),
    ))
}

fn set(groups: &[&[&str]], less: &[&str]) -> BTreeSet<String> {
    groups
        .iter()
        .flat_map(|g| g.iter())
        .filter(|k| !less.contains(k))
        .map(|k| k.to_string())
        .collect()
}

#[test]
fn non_streaming_chat_writes_aiperfs_non_streaming_keys() {
    let got = keys_of_run("profile-keys-chat", &["--endpoint-type", "chat"]);
    assert_eq!(got, set(&[NON_STREAMING_KEYS], &[]));
}

#[test]
fn streaming_chat_adds_aiperfs_streaming_only_keys() {
    let got = keys_of_run(
        "profile-keys-chat-stream",
        &["--endpoint-type", "chat", "--streaming"],
    );
    assert_eq!(got, set(&[NON_STREAMING_KEYS, STREAMING_ONLY_KEYS], &[]));
}

#[test]
fn embeddings_write_aiperfs_embeddings_keys() {
    let got = keys_of_run(
        "profile-keys-embeddings",
        &["--endpoint-type", "embeddings"],
    );
    assert_eq!(got, set(&[NON_STREAMING_KEYS], TOKEN_OUTPUT_KEYS));
}

/// The lists above agree with the real AIPerf 0.13 runs kept in testdata.
#[test]
fn key_lists_match_real_aiperf_runs() {
    let dir = sample_dir();
    let keys = |name: &str| metric_keys(&read_json(&dir.join(name)));
    assert_eq!(
        keys("profile_export_aiperf.json"),
        set(&[NON_STREAMING_KEYS, STREAMING_ONLY_KEYS], &[])
    );
    assert_eq!(
        keys("profile_export_aiperf_non_streaming.json"),
        set(&[NON_STREAMING_KEYS], &[])
    );
    assert_eq!(
        keys("profile_export_aiperf_embeddings.json"),
        set(&[NON_STREAMING_KEYS], TOKEN_OUTPUT_KEYS)
    );
}
