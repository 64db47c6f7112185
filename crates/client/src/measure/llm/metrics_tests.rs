use super::*;
use crate::measure::llm::goodput::{Goodput, SloMetric};
use crate::measure::llm::record::{Chunk, RequestError};

/// A fixed epoch offset so no test relies on times starting at 0 (ns).
const BASE: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

/// A successful request starting `start_ms` after BASE with chunks at (ms after BASE, tokens).
fn req(start_ms: u64, chunks: &[(u64, u64)], isl: u64) -> LlmRequest {
    let chunks: Vec<Chunk> = chunks
        .iter()
        .map(|&(at, tokens)| Chunk {
            arrival_ns: BASE + at * MS,
            tokens,
        })
        .collect();
    let end_ns = chunks
        .last()
        .map_or(BASE + start_ms * MS, |c| c.arrival_ns + MS);
    LlmRequest {
        start_ns: BASE + start_ms * MS,
        end_ns,
        isl,
        osl: chunks.iter().map(|c| c.tokens).sum(),
        chunks,
        ..LlmRequest::default()
    }
}

fn failed(start_ms: u64, end_ms: u64, kind: &str) -> LlmRequest {
    LlmRequest {
        start_ns: BASE + start_ms * MS,
        end_ns: BASE + end_ms * MS,
        error: Some(RequestError {
            kind: kind.into(),
            message: "boom".into(),
            code: None,
        }),
        ..LlmRequest::default()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// Expected per-request values in ms / tokens/s (None = not defined).
struct Want {
    ttft: Option<f64>,
    ttst: Option<f64>,
    e2e: f64,
    itl: Option<f64>,
    tps: Option<f64>,
    tpot_guidellm: Option<f64>,
    chunks: u64,
    same_read: u64,
}

fn check_opt(name: &str, case: &str, got: Option<f64>, want: Option<f64>) {
    match (got, want) {
        (None, None) => {}
        (Some(g), Some(w)) => assert!(close(g, w), "{case}: {name} got {g} want {w}"),
        _ => panic!("{case}: {name} got {got:?} want {want:?}"),
    }
}

/// Checks each `(case, request, want)`: the request's metrics are `want`, its token counts
/// are the request's and, closed loop, there is no TTFT from the intended start.
fn check_request_metrics(cases: Vec<(&str, LlmRequest, Want)>) {
    for (case, r, want) in cases {
        let m = request_metrics(&r).unwrap_or_else(|| panic!("{case}: no metrics"));
        let ms = |v: Option<u64>| v.map(|ns| ns as f64 / 1e6);
        check_opt("ttft", case, ms(m.ttft_ns), want.ttft);
        check_opt("ttst", case, ms(m.ttst_ns), want.ttst);
        assert!(
            close(m.e2e_ns as f64 / 1e6, want.e2e),
            "{case}: e2e {}",
            m.e2e_ns
        );
        check_opt("itl", case, m.itl_ns.map(|v| v / 1e6), want.itl);
        check_opt("tps", case, m.tps_per_user, want.tps);
        check_opt(
            "tpot",
            case,
            m.guidellm_tpot_ns.map(|v| v / 1e6),
            want.tpot_guidellm,
        );
        assert_eq!(m.chunks, want.chunks, "{case}");
        assert_eq!(m.same_read_events, want.same_read, "{case}");
        assert_eq!((m.isl, m.osl), (r.isl, r.osl), "{case}");
        assert_eq!(m.ttft_from_intended_ns, None, "{case}: closed loop");
    }
}

#[test]
fn per_request_metrics_of_streams() {
    check_request_metrics(vec![
        (
            "one chunk",
            req(0, &[(50, 10)], 5),
            Want {
                ttft: Some(50.0),
                ttst: None,
                e2e: 50.0,
                itl: None,
                tps: None,
                tpot_guidellm: Some(5.0),
                chunks: 1,
                same_read: 0,
            },
        ),
        (
            "many single-token chunks",
            req(0, &[(100, 1), (110, 1), (120, 1), (130, 1)], 5),
            Want {
                ttft: Some(100.0),
                ttst: Some(10.0),
                e2e: 130.0,
                itl: Some(10.0),
                tps: Some(100.0),
                tpot_guidellm: Some(32.5),
                chunks: 4,
                same_read: 0,
            },
        ),
        (
            "multi-token chunks",
            req(0, &[(100, 3), (130, 3), (160, 2)], 5),
            Want {
                ttft: Some(100.0),
                ttst: Some(30.0),
                e2e: 160.0,
                itl: Some(60.0 / 7.0),
                tps: Some(7.0 / 0.060),
                tpot_guidellm: Some(20.0),
                chunks: 3,
                same_read: 0,
            },
        ),
    ]);
}

#[test]
fn per_request_metrics_of_edge_cases() {
    let mut osl_one = req(0, &[(100, 1), (105, 0)], 5);
    osl_one.osl = 1;
    let mut no_chunks = req(0, &[], 7);
    no_chunks.end_ns = BASE + 40 * MS;
    check_request_metrics(vec![
        (
            "osl 1",
            osl_one,
            Want {
                ttft: Some(100.0),
                ttst: Some(5.0),
                e2e: 105.0,
                itl: None,
                tps: None,
                tpot_guidellm: Some(105.0),
                chunks: 2,
                same_read: 0,
            },
        ),
        (
            "no chunks",
            no_chunks,
            Want {
                ttft: None,
                ttst: None,
                e2e: 40.0,
                itl: None,
                tps: None,
                tpot_guidellm: None,
                chunks: 0,
                same_read: 0,
            },
        ),
        (
            "same read",
            req(10, &[(100, 1), (100, 1), (120, 1)], 5),
            Want {
                ttft: Some(90.0),
                ttst: Some(0.0),
                e2e: 110.0,
                itl: Some(10.0),
                tps: Some(100.0),
                tpot_guidellm: Some(110.0 / 3.0),
                chunks: 3,
                same_read: 1,
            },
        ),
    ]);
}

/// Kinds are listed in the failure kinds' order (the stderr summary's), each with its count
/// and its first message.
#[test]
fn errors_by_kind_follow_the_kind_order() {
    let mut reqs = vec![
        failed(0, 1, "closed_early"),
        failed(0, 1, "reset"),
        failed(0, 1, "connect_failed"),
        failed(0, 1, "reset"),
    ];
    reqs[1].error.as_mut().unwrap().message = "first reset".into();
    let m = compute(&reqs, &MetricOptions::default());
    let want = [("connect_failed", 1), ("reset", 2), ("closed_early", 1)];
    let want: Vec<(String, u64)> = want.iter().map(|(k, n)| (k.to_string(), *n)).collect();
    assert_eq!(m.errors_by_kind, want);
    let groups: Vec<(&str, &str, u64)> = m
        .error_groups
        .iter()
        .map(|g| (g.error.kind.as_str(), g.error.message.as_str(), g.count))
        .collect();
    let want = [
        ("connect_failed", "boom", 1),
        ("reset", "boom", 1),
        ("reset", "first reset", 1),
        ("closed_early", "boom", 1),
    ];
    assert_eq!(groups, want);
}

/// AIPerf groups failures by (code, type, message): HTTP failures of one kind and one
/// message but different statuses are counted apart.
#[test]
fn http_failures_are_grouped_by_status() {
    let reqs = [500, 429, 500, 500].map(|code| {
        let mut r = failed(0, 1, "http_error");
        r.error.as_mut().unwrap().code = Some(code);
        r
    });
    let m = compute(&reqs, &MetricOptions::default());
    assert_eq!(m.errors_by_kind, vec![("http_error".to_string(), 4)]);
    let groups: Vec<(Option<u16>, u64)> = m
        .error_groups
        .iter()
        .map(|g| (g.error.code, g.count))
        .collect();
    assert_eq!(groups, [(Some(429), 1), (Some(500), 3)]);
}

#[test]
fn failed_requests_have_no_metrics() {
    assert_eq!(request_metrics(&failed(0, 10, "reset")), None);
    let mut partial = req(0, &[(10, 1), (20, 1)], 1);
    partial.error = Some(RequestError {
        kind: "closed_early".into(),
        message: String::new(),
        code: None,
    });
    assert_eq!(request_metrics(&partial), None);
}

#[test]
fn intended_send_time_moves_ttft_and_e2e() {
    let mut r = req(10, &[(100, 1), (120, 1)], 1);
    r.intended_ns = BASE + 4 * MS;
    let m = request_metrics(&r).unwrap();
    assert_eq!(m.ttft_ns, Some(90 * MS));
    assert_eq!(m.ttft_from_intended_ns, Some(96 * MS));
    assert_eq!(m.e2e_from_intended_ns, Some(116 * MS));
    let mut embed = req(10, &[], 1);
    embed.end_ns = BASE + 30 * MS;
    embed.intended_ns = BASE + 5 * MS;
    let m = request_metrics(&embed).unwrap();
    assert_eq!(
        (m.ttft_from_intended_ns, m.e2e_from_intended_ns),
        (None, Some(25 * MS))
    );
}

#[test]
fn chunk_and_token_gaps() {
    let r = req(0, &[(100, 3), (130, 3), (160, 2)], 1);
    assert_eq!(chunk_gaps(&r).collect::<Vec<_>>(), vec![30 * MS, 30 * MS]);
    let mut gaps = vec![];
    token_gaps(&r, |g, n| gaps.push((g, n)));
    assert_eq!(gaps, vec![(10.0 * MS as f64, 3), (15.0 * MS as f64, 2)]);
    // A chunk without tokens hands its gap to the next chunk.
    let r = req(0, &[(100, 1), (110, 0), (130, 2)], 1);
    let mut gaps = vec![];
    token_gaps(&r, |g, n| gaps.push((g, n)));
    assert_eq!(gaps, vec![(15.0 * MS as f64, 2)]);
    // One chunk: no gaps at all.
    let r = req(0, &[(100, 5)], 1);
    assert_eq!(chunk_gaps(&r).count(), 0);
    token_gaps(&r, |_, _| panic!("no gap expected"));
}

fn run_fixture() -> Vec<LlmRequest> {
    vec![
        req(0, &[(100, 1), (110, 1), (120, 1), (130, 1)], 10),
        req(50, &[(150, 2), (250, 2)], 20),
        failed(60, 300, "http_500"),
    ]
}

#[test]
fn run_level_math() {
    let opts = MetricOptions {
        goodput: vec![
            Goodput {
                metric: SloMetric::TimeToFirstToken,
                value: 100.0,
            },
            Goodput {
                metric: SloMetric::InterTokenLatency,
                value: 20.0,
            },
        ],
        slice_ns: None,
        ..MetricOptions::default()
    };
    let m = compute(&run_fixture(), &opts);
    assert_eq!((m.request_count, m.error_count), (2, 1));
    assert_eq!(m.errors_by_kind, vec![("http_500".to_string(), 1)]);
    // max(130, 250, 300 [failed end]) - min(start 0) = 300 ms.
    assert_eq!(m.duration_ns, 300 * MS);
    assert!(close(m.request_throughput, 2.0 / 0.3));
    assert!(close(m.output_token_throughput, 8.0 / 0.3));
    assert!(close(m.input_token_throughput, 30.0 / 0.3));
    assert!(close(m.total_token_throughput, 38.0 / 0.3));
    assert_eq!((m.total_isl, m.total_osl), (30, 8));
    // Request 1 meets both limits; request 2's ITL is 100/3 ms > 20 ms.
    let g = m.goodput.clone().unwrap();
    assert_eq!(g.good_requests, 1);
    assert!(close(g.per_sec, 1.0 / 0.3));
    assert!(close(g.fraction, 1.0 / 3.0));
    let ttft = m.ttft.clone().unwrap();
    assert_eq!(ttft.count, 2);
    assert!(close(ttft.avg, 100.0 * MS as f64));
    let itl = m.itl.clone().unwrap();
    assert!(close(itl.avg, (10.0 + 100.0 / 3.0) / 2.0 * MS as f64));
    let gap = m.chunk_gap.clone().unwrap();
    assert_eq!(gap.count, 4);
    assert!(close(gap.avg, 32.5 * MS as f64));
    let tok = m.token_gap.clone().unwrap();
    assert_eq!(tok.count, 5);
    assert!(close(tok.avg, 26.0 * MS as f64));
    assert_eq!(m.osl.clone().unwrap().max, 4.0);
    assert_eq!(m.chunks_per_request.clone().unwrap().min, 2.0);
    assert!(!m.open_loop);
    assert_eq!(m.ttft_from_intended, None);
}

#[test]
fn no_goodput_no_requests_no_division_by_zero() {
    let m = compute(&run_fixture(), &MetricOptions::default());
    assert_eq!(m.goodput, None);
    let empty = compute(&[], &MetricOptions::default());
    assert_eq!(empty.request_count, 0);
    assert_eq!(empty.duration_ns, 0);
    assert_eq!(empty.request_throughput, 0.0);
    assert_eq!(empty.ttft, None);
    let only_failed = compute(&[failed(0, 5, "reset")], &MetricOptions::default());
    assert_eq!((only_failed.request_count, only_failed.error_count), (0, 1));
    assert_eq!(only_failed.request_latency, None);
}

/// AIPerf's per-request metrics of hand-built requests, each worked out from its definition.
#[test]
fn aiperf_request_metrics_from_their_definitions() {
    use crate::measure::llm::request::{credit_to_start_ns, effective_latency_ns};
    use crate::measure::llm::Usage;
    // Start at 0, chunks at 20, 30, 40 ms with 1 + 2 + 1 tokens; ISL 100, asked 5 tokens.
    let mut r = req(0, &[(20, 1), (30, 2), (40, 1)], 100);
    r.requested_osl = Some(5);
    r.usage = Some(Usage {
        prompt_tokens: 110,
        completion_tokens: 3,
        total_tokens: Some(113),
        reasoning_tokens: None,
        cached_tokens: Some(64),
    });
    let m = request_metrics(&r).unwrap();
    // OSL 4 over the 40 ms request latency.
    assert!(close(m.e2e_output_tps.unwrap(), 4.0 / 0.040));
    // ISL 100 over the 20 ms TTFT.
    assert!(close(m.prefill_tps_per_user.unwrap(), 100.0 / 0.020));
    assert_eq!(m.decode_ns, Some(20 * MS));
    assert!(close(m.usage_prompt_diff_pct.unwrap(), 10.0));
    assert!(close(m.usage_completion_diff_pct.unwrap(), 25.0));
    assert_eq!(m.usage_reasoning_diff_pct, None);
    // 4 tokens for 5 asked: 20 % short, signed.
    assert!(close(m.osl_mismatch_diff_pct.unwrap(), -20.0));
    // Closed loop: the credit is the start, so the effective latency is the request latency.
    assert_eq!(credit_to_start_ns(&r), 0);
    assert_eq!(effective_latency_ns(&r), 40 * MS);

    // Open loop, sent 3 ms after its intended time.
    let mut late = r.clone();
    late.intended_ns = r.start_ns - 3 * MS;
    assert_eq!(credit_to_start_ns(&late), 3 * MS);
    assert_eq!(effective_latency_ns(&late), 43 * MS);

    // Under --use-server-token-count the comparisons use the client's own counts.
    let mut server = r.clone();
    server.client_counts = Some((100, 4));
    server.isl = 110;
    server.osl = 3;
    let s = request_metrics(&server).unwrap();
    assert!(close(s.usage_prompt_diff_pct.unwrap(), 10.0));
    assert!(close(s.usage_completion_diff_pct.unwrap(), 25.0));

    // No chunks (embeddings): no TTFT, so no prefill throughput nor decode duration; no
    // usage and nothing asked: none of the comparisons.
    let bare = LlmRequest {
        start_ns: BASE,
        end_ns: BASE + 8 * MS,
        isl: 5,
        ..LlmRequest::default()
    };
    let b = request_metrics(&bare).unwrap();
    assert_eq!((b.prefill_tps_per_user, b.decode_ns), (None, None));
    assert_eq!(b.e2e_output_tps, Some(0.0));
    assert_eq!(b.usage_prompt_diff_pct, None);
    assert_eq!(b.osl_mismatch_diff_pct, None);
    // A zero request latency gives no E2E throughput rather than a division by zero.
    let instant = LlmRequest {
        start_ns: BASE,
        end_ns: BASE,
        ..LlmRequest::default()
    };
    assert_eq!(request_metrics(&instant).unwrap().e2e_output_tps, None);
}

/// Run-level usage statistics and totals, and the latencies from the credit over every
/// request (failed ones included), recomputed here from the requests.
#[test]
fn aiperf_usage_totals_and_credit_latencies_over_a_run() {
    use crate::measure::llm::Usage;
    let usage = |p: u64, c: u64, total: Option<u64>, reasoning: Option<u64>| {
        Some(Usage {
            prompt_tokens: p,
            completion_tokens: c,
            total_tokens: total,
            reasoning_tokens: reasoning,
            cached_tokens: None,
        })
    };
    let mut a = req(0, &[(10, 2), (20, 2)], 50);
    a.usage = usage(50, 4, Some(54), None);
    a.requested_osl = Some(4);
    let mut b = req(5, &[(25, 3), (45, 3)], 40);
    b.usage = usage(44, 6, Some(50), Some(2));
    b.reasoning_tokens = 1;
    b.requested_osl = Some(8);
    b.intended_ns = BASE + 2 * MS;
    // No usage at all: counts nowhere in the usage metrics.
    let c = req(10, &[(30, 1), (40, 1)], 30);
    // Failed after 7 ms, scheduled 1 ms before it went, with a context-overflow message.
    let mut f = failed(12, 19, "http_error");
    f.error.as_mut().unwrap().message = "This model's Maximum Context length is 4096 tokens".into();
    f.intended_ns = BASE + 11 * MS;
    f.usage = usage(999, 999, Some(1998), None);
    let m = compute(&[a, b, c, f], &MetricOptions::default());
    let x = &m.aiperf;

    let p = x.usage_prompt_tokens.as_ref().unwrap();
    assert_eq!((p.stats.count, p.total), (2, 94));
    assert!(close(p.stats.avg, 47.0));
    assert_eq!((p.stats.min, p.stats.max), (44.0, 50.0));
    let c = x.usage_completion_tokens.as_ref().unwrap();
    assert_eq!((c.stats.count, c.total), (2, 10));
    let t = x.usage_total_tokens.as_ref().unwrap();
    assert_eq!((t.stats.count, t.total), (2, 104));
    let r = x.usage_reasoning_tokens.as_ref().unwrap();
    assert_eq!((r.stats.count, r.total), (1, 2));
    assert_eq!(x.usage_prompt_cache_read_tokens, None);

    // Diffs: a 0 % and 0 %; b |44-40|/40 = 10 %, |6-6|/6 = 0 %, reasoning |2-1|/1 = 100 %.
    let pd = x.usage_prompt_diff_pct.as_ref().unwrap();
    assert!(close(pd.avg, 5.0) && close(pd.max, 10.0), "{pd:?}");
    assert!(close(
        x.usage_completion_diff_pct.as_ref().unwrap().max,
        0.0
    ));
    assert!(close(
        x.usage_reasoning_diff_pct.as_ref().unwrap().avg,
        100.0
    ));
    // OSL mismatch: a got the 4 it asked (0 %), b 6 of 8 (-25 %).
    let od = x.osl_mismatch_diff_pct.as_ref().unwrap();
    assert_eq!(od.count, 2);
    assert!(close(od.min, -25.0) && close(od.max, 0.0) && close(od.avg, -12.5));

    // E2E output throughput: a 4 / 20 ms, b 6 / 40 ms, c 2 / 30 ms.
    let e2e = x.e2e_output_tps.as_ref().unwrap();
    assert!(
        close(e2e.avg, (200.0 + 150.0 + 2.0 / 0.030) / 3.0),
        "{e2e:?}"
    );
    // Prefill: a 50 / 10 ms, b 40 / 20 ms, c 30 / 20 ms.
    let pre = x.prefill_tps_per_user.as_ref().unwrap();
    assert!(close(pre.avg, (5000.0 + 2000.0 + 1500.0) / 3.0), "{pre:?}");
    // Decode: a 10 ms, b 20 ms, c 10 ms.
    let dec = x.decode_duration.as_ref().unwrap();
    assert!(close(dec.avg, 40.0 * MS as f64 / 3.0));

    // Credit-to-start over all four: a 0, b 3 ms, c 0, f 1 ms.
    let cts = x.credit_to_start.as_ref().unwrap();
    assert_eq!(cts.count, 4);
    assert!(close(cts.avg, MS as f64));
    assert_eq!(cts.max, 3.0 * MS as f64);
    // Effective latency: a 20, b 43, c 30, f 8 ms.
    let eff = x.effective_latency.as_ref().unwrap();
    assert_eq!(eff.count, 4);
    assert!(close(eff.avg, (20.0 + 43.0 + 30.0 + 8.0) * MS as f64 / 4.0));
    assert_eq!((eff.min, eff.max), (8.0 * MS as f64, 43.0 * MS as f64));
    assert_eq!(x.context_overflow_count, 1);
    // Another failure does not count.
    let other = compute(&[failed(0, 1, "reset")], &MetricOptions::default());
    assert_eq!(other.aiperf.context_overflow_count, 0);
}
