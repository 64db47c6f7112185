use super::*;
use crate::measure::llm::record::{Chunk, RequestError};
use crate::measure::FailKind;

/// A clock far from 0, as the real one is (ns since the epoch).
const T0: u64 = 1_796_531_423_000_000_000;
const MS: u64 = 1_000_000;

/// A successful streamed request: times in ms after `T0`, one chunk per arrival.
fn req(start: u64, arrivals: &[u64], end: u64, isl: u64, osl: u64) -> LlmRequest {
    LlmRequest {
        start_ns: T0 + start * MS,
        end_ns: T0 + end * MS,
        isl,
        osl,
        chunks: arrivals
            .iter()
            .map(|&a| Chunk {
                arrival_ns: T0 + a * MS,
                tokens: 1,
            })
            .collect(),
        ..LlmRequest::default()
    }
}

fn failed(start: u64, end: u64) -> LlmRequest {
    LlmRequest {
        start_ns: T0 + start * MS,
        end_ns: T0 + end * MS,
        error: Some(RequestError::new(FailKind::Reset, "reset")),
        ..LlmRequest::default()
    }
}

fn close(got: f64, want: f64, what: &str) {
    let tol = 1e-9 * want.abs().max(1.0);
    assert!((got - want).abs() <= tol, "{what}: got {got}, want {want}");
}

fn stat(s: &Sweeps, tag: &str) -> TimeStats {
    *s.get(tag).unwrap_or_else(|| panic!("no {tag}"))
}

/// A: start 0, chunks at 10, 12, 30, end 30, ISL 100, OSL 5.
/// B: start 5, chunks at 15, 35, end 35, ISL 50, OSL 3.
fn pair() -> Vec<LlmRequest> {
    vec![
        req(0, &[10, 12, 30], 30, 100, 5),
        req(5, &[15, 35], 35, 50, 3),
    ]
}

#[test]
fn two_overlapping_requests_worked_by_hand() {
    let s = compute(&pair(), None, true).unwrap();
    assert_eq!(s.window_ns, (T0, T0 + 35 * MS));
    // In flight: [0,5) 1, [5,30) 2, [30,35) 1 over a 35 ms window.
    let c = stat(&s, "effective_concurrency");
    close(c.avg, 60.0 / 35.0, "concurrency avg");
    assert_eq!((c.min, c.max, c.p50, c.p99), (1.0, 2.0, 2.0, 2.0));
    let var =
        (10.0 * (1.0 - 60.0 / 35.0f64).powi(2) + 25.0 * (2.0 - 60.0 / 35.0f64).powi(2)) / 35.0;
    close(c.std, var.sqrt(), "concurrency std");
    // Prefill: A [0,10), B [5,15); decode: A [10,30), B [15,35).
    close(
        stat(&s, "effective_prefill_concurrency").avg,
        20.0 / 35.0,
        "prefill conc",
    );
    close(
        stat(&s, "effective_decode_concurrency").avg,
        40.0 / 35.0,
        "decode conc",
    );
    // Prefill rates 10 and 5 tokens/ms: [0,5) 10, [5,10) 15, [10,15) 5; 150 tokens.
    close(
        stat(&s, "effective_prefill_throughput").avg,
        150.0 / 35.0 * 1e3,
        "prefill",
    );
    let ap = stat(&s, "active_prefill_throughput");
    close(ap.avg, 10_000.0, "active prefill avg");
    close(ap.min, 5_000.0, "active prefill min");
    close(ap.max, 15_000.0, "active prefill max");
    close(ap.p50, 10_000.0, "active prefill p50");
    close(ap.p90, 15_000.0, "active prefill p90");
    // Per user: [0,5) 10/1, [5,10) 15/2, [10,15) 5/1 = 112.5 tokens·user⁻¹ over 15 ms.
    close(
        stat(&s, "active_prefill_throughput_per_user").avg,
        7_500.0,
        "prefill/user",
    );
    close(
        stat(&s, "effective_prefill_throughput_per_user").avg,
        112.5 / 35.0 * 1e3,
        "effective prefill/user",
    );
    // Decode, gap by gap: A 2 tokens over [10,12) and 2 over [12,30); B 2 over [15,35).
    let d = stat(&s, "effective_decode_throughput");
    close(d.avg, 6.0 / 35.0 * 1e3, "decode avg");
    close(d.max, 1_000.0, "decode max (A's 2 ms gap)");
    close(d.min, 0.0, "decode min (prefill only)");
    close(
        stat(&s, "active_decode_throughput").avg,
        6.0 / 25.0 * 1e3,
        "active decode",
    );
    // Per user: [10,12) 1, [12,15) 1/9, [15,30) (1/9 + 0.1)/2, [30,35) 0.1.
    let per_user = 2.0 + 3.0 / 9.0 + 15.0 * (1.0 / 9.0 + 0.1) / 2.0 + 0.5;
    close(
        stat(&s, "active_decode_throughput_per_user").avg,
        per_user / 25.0 * 1e3,
        "active decode/user",
    );
    // Total: prefill plus each decode's even rate (A 4/20, B 2/20): 150 + 6 tokens, and
    // some request is always in flight, so active equals effective.
    let t = stat(&s, "effective_total_throughput");
    close(t.avg, 156.0 / 35.0 * 1e3, "total");
    close(
        stat(&s, "active_total_throughput").avg,
        t.avg,
        "active total",
    );
    close(t.min, 100.0, "total min: B's decode alone");
    // Tokens: A 100 at 0, +1 at 10, +2 at 12, +2 just before 30, all 105 freed at 30;
    // B 50 at 5, +1 at 15, +2 just before 35, freed at 35.
    let k = stat(&s, "tokens_in_flight");
    let area = 100.0 * 5.0 + 150.0 * 5.0 + 151.0 * 2.0 + 153.0 * 3.0 + 154.0 * 15.0 + 51.0 * 5.0;
    assert!((k.avg - area / 35.0).abs() < 1e-6, "tokens avg {}", k.avg);
    assert_eq!((k.min, k.max, k.p50, k.p90), (51.0, 156.0, 153.0, 154.0));
}

#[test]
fn a_longer_window_dilutes_effective_but_not_active() {
    let window = Some((T0, T0 + 70 * MS));
    let s = compute(&pair(), window, true).unwrap();
    assert_eq!(s.window_ns, (T0, T0 + 70 * MS));
    let c = stat(&s, "effective_concurrency");
    close(c.avg, 60.0 / 70.0, "concurrency avg");
    // Idle half the window: 0 is held exactly 50 % of the time, so it is the median.
    assert_eq!((c.min, c.p50, c.p90), (0.0, 0.0, 2.0));
    close(
        stat(&s, "effective_total_throughput").avg,
        156.0 / 70.0 * 1e3,
        "total",
    );
    let at = stat(&s, "active_total_throughput");
    close(at.avg, 156.0 / 35.0 * 1e3, "active total");
    close(at.min, 100.0, "active total min");
    close(
        stat(&s, "active_prefill_throughput").avg,
        10_000.0,
        "active prefill",
    );
    // A window that opens before the first request counts the idle time before it too.
    let early = compute(&pair(), Some((T0 - 35 * MS, T0 + 35 * MS)), true).unwrap();
    close(
        stat(&early, "effective_concurrency").avg,
        60.0 / 70.0,
        "early window",
    );
    close(
        stat(&early, "active_decode_throughput").avg,
        240.0,
        "early active decode",
    );
}

#[test]
fn no_requests_no_metrics() {
    assert_eq!(compute(&[], None, true), None);
    assert_eq!(compute(&[], Some((T0, T0 + MS)), true), None);
}

#[test]
fn failed_requests_count_in_concurrency_only() {
    let s = compute(&[failed(0, 10), failed(5, 20)], None, true).unwrap();
    // [0,5) 1, [5,10) 2, [10,20) 1 over 20 ms.
    close(
        stat(&s, "effective_concurrency").avg,
        25.0 / 20.0,
        "concurrency",
    );
    for (d, st) in s.rows().skip(1) {
        assert_eq!(*st, TimeStats::default(), "{}", d.tag);
    }
    // A failure beside a success adds to the concurrency, not to the throughput.
    let mut reqs = vec![req(0, &[10, 20], 20, 10, 3)];
    let alone = compute(&reqs, None, true).unwrap();
    reqs.push(failed(0, 20));
    let both = compute(&reqs, None, true).unwrap();
    close(
        stat(&both, "effective_concurrency").avg,
        2.0,
        "with failure",
    );
    close(stat(&alone, "effective_concurrency").avg, 1.0, "alone");
    for tag in [
        "effective_decode_throughput",
        "tokens_in_flight",
        "active_decode_throughput_per_user",
    ] {
        assert_eq!(stat(&both, tag), stat(&alone, tag), "{tag}");
    }
}

#[test]
fn zero_length_window_gives_zeros() {
    let s = compute(&pair(), Some((T0 + 10 * MS, T0 + 10 * MS)), true).unwrap();
    for (d, st) in s.rows() {
        assert_eq!(*st, TimeStats::default(), "{}", d.tag);
    }
    // A request that starts and ends at once has no duration to weigh either.
    let s = compute(&[failed(3, 3)], None, true).unwrap();
    assert_eq!(stat(&s, "effective_concurrency"), TimeStats::default());
}

#[test]
fn one_request_with_one_chunk_decodes_evenly_to_its_end() {
    // Start 0, the only chunk at 10, stream closed at 30: ISL 20 over 10 ms, then OSL-1 = 10
    // tokens over the 20 ms to the end (no request has a chunk gap to use).
    let s = compute(&[req(0, &[10], 30, 20, 11)], None, true).unwrap();
    close(
        stat(&s, "active_prefill_throughput").avg,
        2_000.0,
        "prefill",
    );
    close(stat(&s, "active_decode_throughput").avg, 500.0, "decode");
    close(
        stat(&s, "effective_decode_throughput").avg,
        10.0 / 30.0 * 1e3,
        "decode eff",
    );
    close(
        stat(&s, "active_total_throughput").avg,
        30.0 / 30.0 * 1e3,
        "total",
    );
    // ISL from 0, all 11 output tokens at the first chunk, 31 released at 30.
    let k = stat(&s, "tokens_in_flight");
    close(k.avg, (20.0 * 10.0 + 31.0 * 20.0) / 30.0, "tokens");
    assert_eq!((k.min, k.max), (20.0, 31.0));
}

#[test]
fn without_streaming_only_concurrency_has_values() {
    let s = compute(&[req(0, &[30], 30, 20, 11)], None, false).unwrap();
    close(stat(&s, "effective_concurrency").avg, 1.0, "concurrency");
    for (d, st) in s.rows().skip(1) {
        assert_eq!(*st, TimeStats::default(), "{}", d.tag);
    }
}

#[test]
fn chunks_in_the_same_read_share_the_tokens_of_the_other_gaps() {
    // Chunks at 10, 10, 20: one non-zero gap carries all OSL-1 = 4 tokens (0.4 tokens/ms);
    // tokens in flight still step by 4/2 at each later chunk.
    let s = compute(&[req(0, &[10, 10, 20], 20, 10, 5)], None, true).unwrap();
    let d = stat(&s, "active_decode_throughput");
    close(d.avg, 400.0, "decode");
    close(d.min, 400.0, "decode min");
    let k = stat(&s, "tokens_in_flight");
    // [0,10) 10, [10,20) 10 + 1 + 2, then + 2 for the chunk at 20, moved just before the end.
    assert!((k.avg - (100.0 + 130.0) / 20.0).abs() < 1e-6, "{}", k.avg);
    assert_eq!(k.max, 15.0);
}

/// Integrals that hold for any set of requests: time-weighted concurrency × window = Σ
/// durations; prefill throughput × window = Σ ISL; decode × window = Σ (OSL − 1).
#[test]
fn integrals_match_sums_on_many_requests() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let mut reqs = Vec::new();
    for _ in 0..20_000 {
        let start = next(60_000_000);
        let mut t = start + 1 + next(50_000);
        let mut arrivals = vec![t];
        for _ in 0..(1 + next(30)) {
            t += next(20_000);
            arrivals.push(t);
        }
        let end = t + next(3);
        let chunks = arrivals
            .iter()
            .map(|&a| Chunk {
                arrival_ns: T0 + a * 1_000,
                tokens: 1,
            })
            .collect();
        reqs.push(LlmRequest {
            start_ns: T0 + start * 1_000,
            end_ns: T0 + end * 1_000,
            isl: 1 + next(1000),
            osl: arrivals.len() as u64 + next(5),
            chunks,
            ..LlmRequest::default()
        });
    }
    let at = std::time::Instant::now();
    let s = compute(&reqs, None, true).unwrap();
    let took = at.elapsed();
    let window_s = (s.window_ns.1 - s.window_ns.0) as f64 / 1e9;
    let busy_s: f64 = reqs
        .iter()
        .map(|r| (r.end_ns - r.start_ns) as f64 / 1e9)
        .sum();
    let rel = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() <= 1e-6 * want, "{what}: {got} vs {want}");
    };
    rel(
        stat(&s, "effective_concurrency").avg * window_s,
        busy_s,
        "concurrency",
    );
    let isl: u64 = reqs.iter().map(|r| r.isl).sum();
    rel(
        stat(&s, "effective_prefill_throughput").avg * window_s,
        isl as f64,
        "ISL",
    );
    // Requests whose chunks all came in one read have no gap to spread tokens over.
    let osl: u64 = reqs
        .iter()
        .filter(|r| {
            r.chunks
                .windows(2)
                .any(|w| w[1].arrival_ns > w[0].arrival_ns)
        })
        .map(|r| r.osl - 1)
        .sum();
    rel(
        stat(&s, "effective_decode_throughput").avg * window_s,
        osl as f64,
        "OSL",
    );
    // O(n log n): 20k requests and ~330k chunks take well under the limit even unoptimised.
    assert!(took.as_secs() < 20, "took {took:?}");
}

/// Requests as AIPerf's per-request records give them: start, end, TTFT and the chunk gaps
/// (ms), ISL and OSL.
fn from_aiperf_jsonl(text: &str) -> Vec<LlmRequest> {
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let m = &v["metrics"];
            let ns = |x: &serde_json::Value| (x.as_f64().unwrap() * 1e6).round() as u64;
            let start = v["metadata"]["request_start_ns"].as_u64().unwrap();
            let mut t = start + ns(&m["time_to_first_token"]["value"]);
            let mut chunks = vec![Chunk {
                arrival_ns: t,
                tokens: 1,
            }];
            for gap in m["inter_chunk_latency"]["value"].as_array().unwrap() {
                t += ns(gap);
                chunks.push(Chunk {
                    arrival_ns: t,
                    tokens: 1,
                });
            }
            LlmRequest {
                start_ns: start,
                end_ns: v["metadata"]["request_end_ns"].as_u64().unwrap(),
                isl: m["input_sequence_length"]["value"].as_u64().unwrap(),
                osl: m["output_sequence_length"]["value"].as_u64().unwrap(),
                chunks,
                ..LlmRequest::default()
            }
        })
        .collect()
}

/// Fixtures with the values AIPerf 0.13's own sweep functions (`aiperf.analysis.sweepline`,
/// `sweepline_kv_cache`, `sweepline_stats`: the per-chunk variants, `compute_metrics`) give
/// for the same requests and window.
fn aiperf_fixture() -> serde_json::Value {
    serde_json::from_str(include_str!("testdata/sweeps_aiperf.json")).unwrap()
}

fn assert_matches_aiperf(s: &Sweeps, want: &serde_json::Value) {
    for (d, st) in s.rows() {
        let w = &want[d.tag];
        for (name, got) in st.named() {
            let exp = w[name]
                .as_f64()
                .unwrap_or_else(|| panic!("{} {name}", d.tag));
            let tol = 1e-9 * exp.abs().max(1.0);
            assert!(
                (got - exp).abs() <= tol,
                "{} {name}: inferperf {got}, AIPerf {exp}",
                d.tag
            );
        }
    }
}

#[test]
fn real_aiperf_sample_records_give_aiperfs_values() {
    let jsonl = include_str!("../../report/llm/testdata/aiperf/single/profile_export.jsonl");
    let reqs = from_aiperf_jsonl(jsonl);
    assert_eq!(reqs.len(), 3);
    let s = compute(&reqs, None, true).unwrap();
    assert_matches_aiperf(&s, &aiperf_fixture()["sample"]["aiperf"]);
    // The sample's own summary (all 20 requests) peaks while these first three are in
    // flight, so its tokens-in-flight max is theirs.
    let summary: serde_json::Value = serde_json::from_str(include_str!(
        "../../report/llm/testdata/aiperf/single/profile_export_aiperf.json"
    ))
    .unwrap();
    let max = summary["tokens_in_flight"]["max"].as_f64().unwrap();
    close(
        stat(&s, "tokens_in_flight").max,
        max,
        "sample tokens_in_flight max",
    );
}

/// 40 random requests: failures, single chunks, chunks in one read, chunks at the end, and
/// a window wider than the requests on both sides.
#[test]
fn random_requests_give_aiperfs_values() {
    let fx = aiperf_fixture();
    let d = &fx["random"];
    let reqs: Vec<LlmRequest> = d["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let u = |k: &str| r[k].as_u64().unwrap();
            LlmRequest {
                start_ns: u("start"),
                end_ns: u("end"),
                isl: u("isl"),
                osl: u("osl"),
                error: (!r["ok"].as_bool().unwrap())
                    .then(|| RequestError::new(FailKind::Reset, "reset")),
                chunks: r["chunks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| Chunk {
                        arrival_ns: a.as_u64().unwrap(),
                        tokens: 1,
                    })
                    .collect(),
                ..LlmRequest::default()
            }
        })
        .collect();
    let w = &d["window"];
    let window = (w[0].as_u64().unwrap(), w[1].as_u64().unwrap());
    let s = compute(&reqs, Some(window), true).unwrap();
    assert_matches_aiperf(&s, &d["aiperf"]);
}

#[test]
fn windows_of_one_run_add_up_to_the_whole() {
    let c = SweepCurves::new(&pair(), true).unwrap();
    assert_eq!(c.run_window(), (T0, T0 + 35 * MS));
    let a = c.over((T0, T0 + 20 * MS));
    let b = c.over((T0 + 20 * MS, T0 + 35 * MS));
    let whole = c.over(c.run_window());
    for tag in [
        "effective_concurrency",
        "effective_decode_throughput",
        "effective_total_throughput",
        "tokens_in_flight",
    ] {
        let parts = stat(&a, tag).avg * 20.0 + stat(&b, tag).avg * 15.0;
        close(parts, stat(&whole, tag).avg * 35.0, tag);
    }
    // [0,5) 1 request, [5,20) 2.
    close(
        stat(&a, "effective_concurrency").avg,
        35.0 / 20.0,
        "first window",
    );
}

#[test]
fn run_metrics_carry_the_run_window_and_each_slices() {
    use crate::measure::llm::{compute as run_metrics, MetricOptions};
    let opts = MetricOptions {
        slice_ns: Some(20 * MS),
        window_ns: Some((T0, T0 + 40 * MS)),
        streaming: true,
        ..MetricOptions::default()
    };
    let m = run_metrics(&pair(), &opts);
    let s = m.sweeps.as_ref().unwrap();
    assert_eq!(s.window_ns, (T0, T0 + 40 * MS));
    close(stat(s, "effective_concurrency").avg, 60.0 / 40.0, "run");
    // Both requests start in the first slice; the last slice ends at the last response (35).
    let windows: Vec<(u64, u64)> = m
        .slices
        .iter()
        .map(|sl| sl.sweeps.as_ref().unwrap().window_ns)
        .collect();
    assert_eq!(windows, [(T0, T0 + 20 * MS)]);
    close(
        stat(
            m.slices[0].sweeps.as_ref().unwrap(),
            "effective_concurrency",
        )
        .avg,
        35.0 / 20.0,
        "slice",
    );
    // Without streaming the prefill and decode phases are unknown.
    let flat = run_metrics(&pair(), &MetricOptions::default());
    let f = flat.sweeps.unwrap();
    assert_eq!(f.window_ns, (T0, T0 + 35 * MS));
    assert_eq!(
        stat(&f, "effective_decode_concurrency"),
        TimeStats::default()
    );
}

#[test]
fn just_before_is_the_next_float_down() {
    assert_eq!(just_before(1.0), 1.0 - f64::EPSILON / 2.0);
    let t = just_before(30e6);
    assert!(t < 30e6 && t > 30e6 - 1e-8, "{t}");
    assert!(just_before(0.0) < 0.0 && just_before(0.0) > -1e-300);
    assert!(just_before(-1.0) < -1.0);
}
