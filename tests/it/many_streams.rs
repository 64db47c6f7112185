//! Thousands of concurrent streams: every connection opens before the clock starts (paced,
//! so the server's listen queue never overflows), the connects are reported apart, and the
//! server accepts exactly one connection per stream.

use crate::common;
use crate::run_profile::{profile, start_llm};

use common::*;
use inferperf::config::ConcurrencyRange;

/// Streams in the big test: within the descriptors of one process holding both ends.
const STREAMS: usize = 2048;

#[test]
fn profile_opens_every_stream_before_the_first_request() {
    // 50 ms to the first token: every stream is open at once while the server waits.
    let server = start_llm(50, 1, 1);
    let dir = temp_dir("many-streams");
    let n = STREAMS.to_string();
    let args = [
        "--streaming",
        "--concurrency",
        &n,
        "--request-count",
        &n,
        "--synthetic-input-tokens-mean",
        "16",
        "--output-tokens-mean",
        "4",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), STREAMS);
    let failed: Vec<_> = reqs.iter().filter(|r| !r.ok()).map(|r| &r.error).collect();
    assert!(
        failed.is_empty(),
        "{} failed, first {:?}",
        failed.len(),
        failed[0]
    );
    assert!(
        reqs.iter().all(|r| r.chunks.len() >= 2),
        "every stream streamed"
    );
    // One connection per stream, none refused, none opened again after a reset.
    assert_eq!(server.connection_totals(), (STREAMS as u64, 0));
    let line = format!("Connections: {STREAMS} opened in ");
    assert!(stdout.contains(&line), "{stdout}");
    server.stop();
}

#[test]
fn an_unreachable_server_is_named_with_how_many_connections_opened() {
    // A port nothing listens on: bound, then closed.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = temp_dir("many-streams-refused");
    let argv: Vec<std::ffi::OsString> = [
        "profile",
        "-m",
        crate::run_profile::MODEL,
        "-u",
        &addr.to_string(),
        "--artifact-dir",
        dir.to_str().unwrap(),
        "--quiet",
        "--tokenizer",
        "cl100k_base",
        "--concurrency",
        "8",
        "--request-count",
        "8",
    ]
    .iter()
    .map(Into::into)
    .collect();
    let cfg = inferperf::llm::cli::parse(argv).unwrap().expect("a run");
    let err = inferperf::llm::run(&cfg, &mut Vec::new()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("cannot connect to {addr} (")),
        "{msg}"
    );
    assert!(msg.contains(" of 8 connections open): "), "{msg}");
    assert!(msg.to_lowercase().contains("refused"), "{msg}");
    assert_eq!(err.exit_code(), 99);
}

#[test]
fn perf_analyzer_mode_reports_connects_only_when_verbose() {
    let server = start_server();
    let mut cfg = quick_config(&server, "simple", 50);
    cfg.concurrency = ConcurrencyRange {
        start: 64,
        end: 64,
        step: 1,
    };
    cfg.request_count = 256;
    let before = server.connection_totals();
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(!text.contains("Connections:"), "{text}");
    let after = server.connection_totals();
    assert!(after.0 - before.0 >= 64, "{before:?} -> {after:?}");
    assert_eq!(after.1, 0, "none refused");
    cfg.verbose = 1;
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(text.contains("  Connections: 64 opened in "), "{text}");
    server.stop();
}
