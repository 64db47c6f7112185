//! AIPerf's time-weighted metrics in a `profile` run against the reference server with a
//! fixed TTFT and inter-token gap: closed-loop concurrency 4 keeps about 4 requests in flight,
//! the phases add up to it, the decode rate per user is the server's token rate, and the
//! integrals over the window give back the run's token counts (window taken from the
//! per-request records' in-flight time and the effective concurrency).

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm};

use serde_json::Value;

const TTFT_MS: u64 = 20;
const ITL_MS: u64 = 5;
const OSL: u64 = 10;
const ISL: u64 = 32;

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn avg(s: &Value, tag: &str) -> f64 {
    s[tag]["avg"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {tag}.avg in {s}"))
}

#[test]
fn closed_loop_concurrency_four_time_weighted() {
    let server = start_llm(TTFT_MS, ITL_MS, 1);
    let dir = temp_dir("profile-time-weighted");
    let args = [
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        "4",
        "--request-count",
        "32",
        "--synthetic-input-tokens-mean",
        "32",
        "--output-tokens-mean",
        "10",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    server.stop();
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), 32);
    for r in reqs {
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!((r.isl, r.osl, r.chunks.len() as u64), (ISL, OSL, OSL));
    }
    let path = outcomes[0].aiperf_dir.join("profile_export_aiperf.json");
    let s = read_json(&path);
    let text = std::fs::read_to_string(&path).unwrap();

    // AIPerf's statistics, and only those, in its order, for every time-weighted metric.
    let stats = [
        "unit", "avg", "p50", "p90", "p95", "p99", "min", "max", "std",
    ];
    for tag in [
        "effective_concurrency",
        "effective_prefill_concurrency",
        "effective_decode_concurrency",
        "effective_prefill_throughput",
        "effective_decode_throughput",
        "effective_total_throughput",
        "effective_prefill_throughput_per_user",
        "effective_decode_throughput_per_user",
        "tokens_in_flight",
        "active_prefill_throughput",
        "active_decode_throughput",
        "active_total_throughput",
        "active_prefill_throughput_per_user",
        "active_decode_throughput_per_user",
    ] {
        let mut keys: Vec<&str> = s[tag]
            .as_object()
            .unwrap_or_else(|| panic!("no {tag}"))
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        let mut want = stats.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want, "{tag}");
        let at = text.find(&format!("\"{tag}\"")).unwrap();
        let object = &text[at..at + text[at..].find('}').unwrap()];
        let places: Vec<usize> = stats
            .iter()
            .map(|k| object.find(&format!("\"{k}\"")).unwrap())
            .collect();
        assert!(places.windows(2).all(|w| w[0] < w[1]), "{object}");
    }

    // Closed loop: at most 4 in flight, 4 from the first sends on. How long the client took
    // between a reply and the next send depends on the machine's load, so the records, not
    // the clock, say how often 4 were in flight.
    let conc = avg(&s, "effective_concurrency");
    assert!((1.0..=4.0 + 1e-9).contains(&conc), "concurrency {conc}");
    assert_eq!(s["effective_concurrency"]["max"], 4.0);
    let spans: Vec<(u64, u64)> = reqs.iter().map(|r| (r.start_ns, r.end_ns)).collect();
    let at_four = share_at_level(&spans, 4);
    let p50 = s["effective_concurrency"]["p50"].as_f64().unwrap();
    if at_four > 0.55 {
        assert_eq!(p50, 4.0, "4 in flight {:.0} % of the time", at_four * 100.0);
    } else if at_four < 0.45 {
        assert!(
            p50 < 4.0,
            "4 in flight {:.0} % of the time",
            at_four * 100.0
        );
    }
    // Every request in flight is either in prefill or in decode.
    let phases = avg(&s, "effective_prefill_concurrency") + avg(&s, "effective_decode_concurrency");
    assert!((phases - conc).abs() < 1e-9 * conc, "{phases} vs {conc}");

    // The window from the records: Σ in-flight time / effective concurrency.
    let busy_s: f64 = reqs
        .iter()
        .map(|r| (r.end_ns - r.start_ns) as f64 / 1e9)
        .sum();
    let window_s = busy_s / conc;
    let run_s = (reqs.iter().map(|r| r.end_ns).max().unwrap()
        - reqs.iter().map(|r| r.start_ns).min().unwrap()) as f64
        / 1e9;
    assert!(
        window_s >= run_s - 1e-6 && window_s < run_s + 0.5,
        "window {window_s} s, requests span {run_s} s"
    );
    // Prefill concurrency: Σ (first chunk - start) over the window; the server's TTFT is
    // 20 ms of a ~65 ms request, so about 4 × 20/65 on an idle machine.
    let prefill = avg(&s, "effective_prefill_concurrency");
    let prefill_s: f64 = reqs
        .iter()
        .map(|r| (r.chunks[0].arrival_ns - r.start_ns) as f64 / 1e9)
        .sum();
    assert!(
        (prefill - prefill_s / window_s).abs() < 0.01 * prefill,
        "prefill concurrency {prefill}, records {}",
        prefill_s / window_s
    );
    assert!(
        prefill > 0.0 && prefill < conc,
        "prefill concurrency {prefill}"
    );

    // Decode rate per user: the records' decode tokens over their decode time; the server
    // sends one token every ITL (200 tokens/s per user) when its thread is not held up.
    let per_user = avg(&s, "active_decode_throughput_per_user");
    let decode_s: f64 = reqs
        .iter()
        .map(|r| (r.end_ns - r.chunks[0].arrival_ns) as f64 / 1e9)
        .sum();
    let want = reqs.len() as f64 * (OSL - 1) as f64 / decode_s;
    assert!(
        (per_user - want).abs() < 0.25 * want,
        "decode per user {per_user}, records give {want}/s (server sends {}/s)",
        1e3 / ITL_MS as f64
    );

    // Integrals over the window: every input token in prefill, every output token but the
    // first in decode, both in the total.
    let n = reqs.len() as f64;
    let close = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() < 1e-6 * want, "{what}: {got} vs {want}");
    };
    close(
        avg(&s, "effective_prefill_throughput") * window_s,
        n * ISL as f64,
        "prefill tokens",
    );
    close(
        avg(&s, "effective_decode_throughput") * window_s,
        n * (OSL - 1) as f64,
        "decode tokens",
    );
    close(
        avg(&s, "effective_total_throughput") * window_s,
        n * (ISL + OSL - 1) as f64,
        "total tokens",
    );
    // Active figures weigh busy time only, so they are at least the effective ones.
    for (active, effective) in [
        ("active_decode_throughput", "effective_decode_throughput"),
        ("active_prefill_throughput", "effective_prefill_throughput"),
        ("active_total_throughput", "effective_total_throughput"),
    ] {
        assert!(avg(&s, active) >= avg(&s, effective), "{active}");
    }
    // At most 4 requests hold their ISL and OSL tokens.
    let tif = &s["tokens_in_flight"];
    let max = tif["max"].as_f64().unwrap();
    assert!(max <= 4.0 * (ISL + OSL) as f64 + 1e-9, "{tif}");
    assert!(
        avg(&s, "tokens_in_flight") > conc * ISL as f64 * 0.9,
        "{tif}"
    );

    // The CSV and the console carry them under AIPerf's labels.
    let csv =
        std::fs::read_to_string(outcomes[0].aiperf_dir.join("profile_export_aiperf.csv")).unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with("Effective Concurrency,"))
        .unwrap_or_else(|| panic!("{csv}"));
    assert_eq!(row.split(',').count(), 15, "{row}");
    assert!(csv.contains("\r\nTokens In Flight (tokens),"), "{csv}");
    for title in ["LLM Metrics: Effective", "LLM Metrics: Active"] {
        assert!(stdout.contains(title), "{title}:\n{stdout}");
    }
    assert!(
        stdout.contains("Effective Concurrency (requests)"),
        "{stdout}"
    );
}

/// Share of the spans' union (first start to last end) with exactly `level` requests in
/// flight.
fn share_at_level(spans: &[(u64, u64)], level: i64) -> f64 {
    let mut edges: Vec<(u64, i64)> = spans
        .iter()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    edges.sort_unstable();
    let (first, last) = (edges[0].0, edges[edges.len() - 1].0);
    let (mut at, mut in_flight, mut held) = (first, 0i64, 0u64);
    for (t, step) in edges {
        if in_flight == level {
            held += t - at;
        }
        at = t;
        in_flight += step;
    }
    held as f64 / (last - first).max(1) as f64
}
