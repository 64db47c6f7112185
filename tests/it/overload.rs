//! Open loop past what the server serves: requests in flight stay bounded per connection
//! and in all, connections the server resets are counted and reopened, and the run ends
//! with a report.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::common;

use common::*;
use inferperf::config::Protocol;
use inferperf::server;
use inferperf::server::fault::{FaultConfig, FaultMode};

/// A request-rate config for one worker (`grpc` picks the protocol).
fn rate_config(
    server: &server::ServerHandle,
    grpc: bool,
    rate: f64,
    count: u64,
) -> inferperf::config::Config {
    let mut cfg = crate::run_rate::rate_config(server, rate, count);
    if grpc {
        cfg.url = server.grpc_addr.unwrap().to_string();
        cfg.protocol = Protocol::Grpc;
    }
    cfg.max_threads = Some(1);
    cfg
}

/// Runs `cfg` while a thread watches the server's open connections; returns the report and
/// the most connections seen open at once.
fn run_watching(
    server: &server::ServerHandle,
    cfg: &inferperf::config::Config,
) -> (inferperf::run::RunResult, String, usize) {
    let (done, most) = (AtomicBool::new(false), AtomicUsize::new(0));
    let (res, text) = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(server.open_connections(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let out = run(cfg);
        done.store(true, Ordering::Relaxed);
        out
    });
    (res, text, most.load(Ordering::Relaxed))
}

/// 300 requests that each take 200 ms, offered at 3,000/s with `--max-inflight 300`: about
/// 300 are in flight at once, more than one HTTP/2 connection may carry (100 streams each),
/// so the client opens more connections instead of piling every stream onto one.
#[test]
fn grpc_open_loop_spreads_streams_over_connections() {
    let delay = server::Delay::Fixed(Duration::from_millis(200));
    let server = start_grpc_server(vec![("simple".into(), delay)]);
    let mut cfg = rate_config(&server, true, 3000.0, 300);
    cfg.max_inflight = Some(300);
    let (res, text, most) = run_watching(&server, &cfg);
    assert!(res.error.is_none(), "{:?}\n{text}", res.error);
    assert_eq!(res.points[0].client.request_count, 300, "{text}");
    assert_eq!(model_counters(&server, "simple").infer_requests, 300);
    // At least three gRPC connections were needed (over 200 in flight, 100 per connection).
    assert!(most >= 3, "most connections open at once: {most}\n{text}");
}

/// `--max-inflight` caps the requests in flight: the sends past it wait (late), and the
/// server never holds more than the cap at once.
#[test]
fn open_loop_in_flight_stays_under_the_cap() {
    let delay = server::Delay::Fixed(Duration::from_millis(100));
    let server = start_server_with(vec![("simple".into(), delay)]);
    let mut cfg = rate_config(&server, false, 2000.0, 200);
    cfg.max_inflight = Some(20);
    let (res, text, most) = run_watching(&server, &cfg);
    assert!(res.error.is_none(), "{:?}\n{text}", res.error);
    assert_eq!(res.points[0].client.request_count, 200, "{text}");
    // HTTP/1.1: one connection per request in flight (plus none for discovery by then).
    assert!(most <= 21, "most connections open at once: {most}");
    assert!(text.contains("did not keep the schedule"), "{text}");
}

/// Runs the binary at 300 requests/s against a fault server in `mode`; (exit code, output).
fn against_fault(mode: FaultMode, grpc: bool, extra: &[&str]) -> (Option<i32>, String) {
    let local = "127.0.0.1:0".parse().unwrap();
    let cfg = FaultConfig {
        mode,
        http: local,
        grpc: Some(local),
        ttl: Duration::from_secs(60),
    };
    let srv = server::fault::start(&cfg).expect("fault server starts");
    let url = if grpc {
        srv.grpc_addr.unwrap()
    } else {
        srv.addr
    }
    .to_string();
    let proto = if grpc { "grpc" } else { "http" };
    let o = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args([
            "-m",
            "identity",
            "-u",
            &url,
            "-i",
            proto,
            "--request-rate-range",
            "300",
        ])
        .args(extra)
        .output()
        .unwrap();
    srv.stop();
    let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&o.stderr));
    (o.status.code(), text)
}

/// A server that resets every third request's connection: each reset is a counted failure
/// and a new connection, the run ends with its report (exit 0) and says how many failed.
/// Over HTTP/1.1 a connection carries one request at a time, so exactly a third fail. Over
/// gRPC the requests sent behind the reset one on the same HTTP/2 connection (when the
/// server was slow to read them) fail with it.
#[test]
fn open_loop_counts_resets_and_goes_on() {
    let number_after = |text: &str, prefix: &str| -> u64 {
        let at = text.find(prefix).map(|i| i + prefix.len());
        let digits = at.map(|i| &text[i..]).unwrap_or("");
        let digits: String = digits.chars().take_while(char::is_ascii_digit).collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("{prefix:?} in {text}"))
    };
    const FAILED: &str = " requests failed in the measured windows";
    for grpc in [false, true] {
        let (code, text) =
            against_fault(FaultMode::EveryNthResets, grpc, &["--request-count", "90"]);
        assert_eq!(code, Some(0), "grpc={grpc}\n{text}");
        let line = text
            .lines()
            .find(|l| l.contains(FAILED))
            .unwrap_or_else(|| panic!("grpc={grpc}: no failures line\n{text}"));
        let failed = number_after(line, "[WARNING] ");
        let counted = number_after(&text, "    Request count: ");
        assert_eq!(failed + counted, 90, "grpc={grpc}\n{text}");
        if grpc {
            assert!((30..=45).contains(&failed), "{failed} failed\n{text}");
        } else {
            assert_eq!(failed, 30, "{text}");
        }
    }
}

/// A server that resets every connection is not busy but broken: after the ride-out limit
/// the run fails naming the reset, as perf_analyzer fails at a failed request.
#[test]
fn open_loop_fails_when_every_request_is_reset() {
    let (code, text) = against_fault(FaultMode::Reset, false, &["-p", "500"]);
    assert_eq!(code, Some(99), "{text}");
    assert!(text.contains("reset"), "{text}");
    assert!(text.contains("requests failed"), "{text}");
}

/// Without `--max-inflight` a perf_analyzer-mode open loop keeps at most 64 requests in
/// flight per worker: against a server that takes 100 ms per request at 2,000/s offered
/// (200 would be in flight) the server never holds more than 64 connections, the sends wait
/// and the report says so and names the flag.
#[test]
fn open_loop_default_cap_holds_past_capacity() {
    let delay = server::Delay::Fixed(Duration::from_millis(100));
    let server = start_server_with(vec![("simple".into(), delay)]);
    let cfg = rate_config(&server, false, 2000.0, 300);
    let (res, text, most) = run_watching(&server, &cfg);
    assert!(res.error.is_none(), "{:?}\n{text}", res.error);
    assert_eq!(res.points[0].client.request_count, 300, "{text}");
    assert!(
        (33..=65).contains(&most),
        "most connections open at once: {most}"
    );
    assert!(
        text.contains("raise it if the server can take more"),
        "{text}"
    );
}
