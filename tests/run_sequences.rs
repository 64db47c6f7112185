//! Sequence models end to end: the reference server's `accumulate_int32` refuses any
//! protocol violation (no START, id reuse, unknown id), so a run without failures means the
//! ids and flags were right; live sequences are closed when a level ends.

mod common;

use common::*;
use inferperf::config::{ConcurrencyRange, LoadMode, Protocol, RateRange};

fn seq_config(server: &inferperf::server::ServerHandle, grpc: bool) -> inferperf::config::Config {
    let mut cfg = quick_config(server, "accumulate_int32", 50);
    if grpc {
        cfg.protocol = Protocol::Grpc;
        cfg.url = server.grpc_addr.unwrap().to_string();
    }
    cfg.sequences.length = 7;
    cfg.sequences.length_given = true;
    cfg.sequences.variation_pct = 0.0;
    cfg.seed = 11;
    cfg
}

#[test]
fn concurrency_mode_sequences_over_http_and_grpc() {
    for grpc in [false, true] {
        let server = start_grpc_server(Vec::new());
        let mut cfg = seq_config(&server, grpc);
        cfg.concurrency = ConcurrencyRange {
            start: 3,
            end: 3,
            step: 1,
        };
        cfg.request_count = 210;
        let (res, text) = run(&cfg);
        assert!(res.error.is_none(), "grpc={grpc}: {:?}", res.error);
        let c = server.counters();
        let m = model_counters(&server, "accumulate_int32");
        assert_eq!(m.failures, 0, "grpc={grpc}: the server refused a request");
        // 210 requests in sequences of 7 on 3 slots (split over the workers, so a slot may
        // stop mid-sequence): at least 30 sequences, every one closed by an END.
        assert!(
            (30..=33).contains(&c.sequences_started),
            "grpc={grpc}: {c:?}"
        );
        assert_eq!(c.sequences_ended, c.sequences_started, "grpc={grpc}");
        assert_eq!(c.sequences_live, 0, "grpc={grpc}");
        let p = &res.points[0];
        let counted = p.client.sequences.map_or(0, |s| s.0);
        assert!((27..=30).contains(&counted), "grpc={grpc}: {counted}");
        assert!(
            text.contains(&format!("    Sequence count: {counted} (")),
            "{text}"
        );
        assert!(
            text.contains("Using asynchronous calls"),
            "sequence models default to async"
        );
    }
}

#[test]
fn live_sequences_are_closed_when_a_level_ends() {
    let server = start_grpc_server(Vec::new());
    let mut cfg = seq_config(&server, false);
    cfg.sequences.length = 1000;
    cfg.concurrency = ConcurrencyRange {
        start: 2,
        end: 2,
        step: 1,
    };
    cfg.request_count = 40;
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let c = server.counters();
    assert_eq!(c.sequences_started, 2);
    assert_eq!(
        c.sequences_live, 0,
        "an END request closed each live sequence"
    );
    assert_eq!(c.sequences_ended, 2);
    assert_eq!(model_counters(&server, "accumulate_int32").failures, 0);
}

#[test]
fn rate_mode_serial_sequences() {
    let server = start_grpc_server(Vec::new());
    let mut cfg = seq_config(&server, true);
    cfg.load_mode = LoadMode::RequestRate;
    cfg.request_rate = RateRange {
        start: 500.0,
        end: 500.0,
        step: 1.0,
    };
    cfg.sequences.num_sequences = 4;
    cfg.sequences.serial = true;
    cfg.request_count = 140;
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let c = server.counters();
    assert_eq!(model_counters(&server, "accumulate_int32").failures, 0);
    assert_eq!(c.sequences_live, 0);
    assert!(c.sequences_started >= 20, "{}", c.sequences_started);
}

#[test]
fn id_range_too_small_is_a_usage_error() {
    let server = start_server();
    let mut cfg = seq_config(&server, false);
    cfg.concurrency = ConcurrencyRange {
        start: 4,
        end: 4,
        step: 1,
    };
    cfg.sequences.id_range = Some(2);
    let mut out = Vec::new();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let err = inferperf::run::run(&cfg, &mut out, stop)
        .err()
        .expect("refused");
    assert!(err.msg.contains("--sequence-id-range"), "{}", err.msg);
    assert_eq!(err.exit_code(), 99);
}
