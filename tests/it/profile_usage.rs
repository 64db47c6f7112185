//! AIPerf's per-request usage and latency metrics of a `profile` run against the reference
//! server: the `usage_*` statistics and `total_usage_*` sums recomputed from the `usage`
//! objects the server sent (in the whole replies GenAI-Perf's export keeps), and each record
//! of `profile_export.jsonl` checked against its own definition.

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm};

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// The `usage` object among a request's streamed events, by the request's start (ns).
fn usage_sent(export: &Value) -> BTreeMap<u64, Value> {
    let mut out = BTreeMap::new();
    for r in export["experiments"][0]["requests"].as_array().unwrap() {
        // The last event that carried usage.
        let usage = r["response_outputs"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find_map(|o| {
                let text = o["response"].as_str()?;
                let data = text.strip_prefix("data: ").unwrap_or(text).trim_end();
                let v: Value = serde_json::from_str(data).ok()?;
                v.get("usage").filter(|u| u.is_object()).cloned()
            })
            .expect("the server sent usage");
        out.insert(r["timestamp"].as_u64().unwrap(), usage);
    }
    out
}

#[test]
fn usage_metrics_are_the_servers_and_records_follow_their_definitions() {
    let server = start_llm(3, 1, 2);
    let dir = temp_dir("profile-usage");
    let args = [
        "--endpoint-type",
        "chat",
        "--concurrency",
        "2",
        "--request-count",
        "6",
        "--synthetic-input-tokens-mean",
        "20",
        "--output-tokens-mean",
        "8",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    server.stop();
    let (aiperf_dir, genai_dir) = (&outcomes[0].aiperf_dir, &outcomes[0].dir);
    let sent = usage_sent(&read_json(&genai_dir.join("profile_export.json")));
    assert_eq!(sent.len(), 6);
    let field = |k: &str| -> Vec<f64> {
        sent.values()
            .map(|u| u[k].as_u64().unwrap() as f64)
            .collect()
    };

    // The summary: each usage field's statistics over what the server sent, and its sum.
    let s = read_json(&aiperf_dir.join("profile_export_aiperf.json"));
    for (tag, key) in [
        ("usage_prompt_tokens", "prompt_tokens"),
        ("usage_completion_tokens", "completion_tokens"),
        ("usage_total_tokens", "total_tokens"),
    ] {
        let v = field(key);
        let sum: f64 = v.iter().sum();
        let m = &s[tag];
        assert_eq!(m["unit"], "tokens", "{tag}");
        assert_eq!(m["count"], 6, "{tag}");
        assert!(close(m["sum"].as_f64().unwrap(), sum), "{tag}: {m}");
        assert!(close(m["avg"].as_f64().unwrap(), sum / 6.0), "{tag}: {m}");
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        assert_eq!(m["min"].as_f64(), Some(min), "{tag}");
        assert_eq!(m["max"].as_f64(), Some(max), "{tag}");
        let total = &s[format!("total_{tag}")];
        assert_eq!(total["unit"], "tokens");
        assert_eq!(total["avg"].as_f64(), Some(sum), "total_{tag}");
    }
    // The server answers every request with the 8 tokens asked.
    assert_eq!(s["usage_completion_tokens"]["avg"], 8.0);
    // Without --streaming AIPerf 0.13 writes none of its STREAMING_ONLY metrics; the
    // per-request records below keep them.
    for tag in ["prefill_throughput_per_user", "decode_duration"] {
        assert!(s.get(tag).is_none(), "{tag}: {}", s[tag]);
    }
    for tag in [
        "e2e_output_token_throughput",
        "credit_to_start_latency",
        "effective_latency",
        "usage_prompt_tokens_diff_pct",
        "usage_completion_tokens_diff_pct",
        "osl_mismatch_diff_pct",
    ] {
        assert_eq!(s[tag]["count"], 6, "{tag}: {}", s[tag]);
    }
    // Closed loop: the credit is the request's start, so the effective latency is the
    // request latency.
    assert_eq!(s["credit_to_start_latency"]["max"], 0.0);
    assert!(close(
        s["effective_latency"]["avg"].as_f64().unwrap(),
        s["request_latency"]["avg"].as_f64().unwrap()
    ));
    assert!(s["osl_mismatch_count"]["avg"].is_number());
    assert!(s["usage_discrepancy_count"]["avg"].is_number());

    // The per-request records: the usage the server sent for that request, and the derived
    // metrics from the record's own values.
    let records = std::fs::read_to_string(aiperf_dir.join("profile_export.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 6);
    for line in records.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let md = &r["metadata"];
        let m = &r["metrics"];
        let value = |k: &str| {
            m[k]["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("{k} in {m}"))
        };
        let usage = &sent[&md["request_start_ns"].as_u64().unwrap()];
        for (tag, key) in [
            ("usage_prompt_tokens", "prompt_tokens"),
            ("usage_completion_tokens", "completion_tokens"),
            ("usage_total_tokens", "total_tokens"),
        ] {
            assert_eq!(m[tag]["value"], usage[key], "{tag}");
            assert_eq!(m[tag]["unit"], "tokens");
        }
        let (isl, osl) = (
            value("input_sequence_length"),
            value("output_sequence_length"),
        );
        let (latency, ttft) = (value("request_latency"), value("time_to_first_token"));
        assert!(close(
            value("e2e_output_token_throughput"),
            osl / (latency / 1e3)
        ));
        assert!(close(
            value("prefill_throughput_per_user"),
            isl / (ttft / 1e3)
        ));
        assert!(close(value("decode_duration"), latency - ttft));
        let prompt = usage["prompt_tokens"].as_f64().unwrap();
        assert!(close(
            value("usage_prompt_tokens_diff_pct"),
            (prompt - isl).abs() / isl * 100.0
        ));
        let asked = md["requested_output_tokens"].as_f64().unwrap();
        assert!(close(
            value("osl_mismatch_diff_pct"),
            (osl - asked) / asked * 100.0
        ));
        assert_eq!(m["e2e_output_token_throughput"]["unit"], "tokens/sec/user");
        assert_eq!(m["decode_duration"]["unit"], "ms");
        assert_eq!(m["osl_mismatch_diff_pct"]["unit"], "%");
        // The record's end is its last response: the request latency's end.
        let span =
            md["request_end_ns"].as_u64().unwrap() - md["request_start_ns"].as_u64().unwrap();
        assert!(close(span as f64 / 1e6, latency));
    }

    // The CSV: the per-request rows and the sums, under AIPerf's labels.
    let csv = std::fs::read_to_string(aiperf_dir.join("profile_export_aiperf.csv")).unwrap();
    let total_prompt: f64 = field("prompt_tokens").iter().sum();
    assert!(csv.contains("\r\nUsage Prompt Tokens (tokens),"), "{csv}");
    assert!(csv.contains("\r\nCredit-to-Start Latency (ms),"), "{csv}");
    assert!(
        csv.contains("\r\nEffective Latency (CO-aware) (ms),"),
        "{csv}"
    );
    assert!(
        csv.contains(&format!(
            "\r\nTotal Usage Prompt Tokens (tokens),{total_prompt:.2}\r\n"
        )),
        "{csv}"
    );
}

/// Without `usage` from the server (a streaming run that turns the request for it off) no
/// usage metric is written, and the latency-derived ones still are.
#[test]
fn no_usage_no_usage_metrics() {
    let server = start_llm(2, 1, 2);
    let dir = temp_dir("profile-no-usage");
    let args = [
        "--endpoint-type",
        "chat",
        "--streaming",
        "--request-count",
        "3",
        "--synthetic-input-tokens-mean",
        "10",
        "--output-tokens-mean",
        "4",
        "--extra-inputs",
        r#"{"stream_options":{"include_usage":false}}"#,
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    server.stop();
    let s = read_json(&outcomes[0].aiperf_dir.join("profile_export_aiperf.json"));
    let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
    assert!(
        !keys.iter().any(|k| k.contains("usage_")),
        "usage keys without usage: {keys:?}"
    );
    assert_eq!(s["decode_duration"]["count"], 3);
    assert_eq!(s["effective_latency"]["count"], 3);
}
