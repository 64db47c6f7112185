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
