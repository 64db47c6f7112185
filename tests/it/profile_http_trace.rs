//! `profile`'s HTTP phase timings (AIPerf's `http_req_*` metrics) against the reference
//! server, through a relay that counts every byte each way and every connection: the bytes
//! the requests say they sent and received are the bytes that crossed, a reused connection
//! has no connect time and a new one does, the phases add up, the server's TTFT and ITL show
//! in the waiting and receiving phases, TLS shows its handshake, and a gRPC run has none.

use crate::common::pki::Pki;
use crate::common::temp_dir;
use crate::run_profile::{start_llm, MODEL};

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inferperf::llm::{self, PointOutcome};
use inferperf::measure::http_trace::HttpPhases;
use inferperf::server::{self, OpenAiConfig, ServeConfig, TlsFiles};
use serde_json::Value;

const MS: u64 = 1_000_000;

/// A TCP relay in front of the server counting bytes each way and connections.
struct CountingRelay {
    addr: SocketAddr,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
    accepted: Arc<AtomicU64>,
    /// Relayed directions still open (two per connection).
    open: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl CountingRelay {
    fn start(upstream: SocketAddr) -> CountingRelay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let relay = CountingRelay {
            addr: listener.local_addr().unwrap(),
            up: Arc::default(),
            down: Arc::default(),
            accepted: Arc::default(),
            open: Arc::default(),
            stop: Arc::default(),
        };
        let (up, down, accepted, open, stop) = (
            relay.up.clone(),
            relay.down.clone(),
            relay.accepted.clone(),
            relay.open.clone(),
            relay.stop.clone(),
        );
        std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let server = TcpStream::connect(upstream).unwrap();
                        let _ = (client.set_nodelay(true), server.set_nodelay(true));
                        accepted.fetch_add(1, Ordering::SeqCst);
                        open.fetch_add(2, Ordering::SeqCst);
                        let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                        pipe(client, server, up.clone(), open.clone());
                        pipe(s2, c2, down.clone(), open.clone());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        relay
    }

    /// Waits until every relayed connection has closed both ways (the run's connections are
    /// closed when it ends).
    fn settle(&self) {
        let end = Instant::now() + Duration::from_secs(10);
        while self.open.load(Ordering::SeqCst) > 0 {
            assert!(Instant::now() < end, "the relayed connections stay open");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for CountingRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` on a thread, counting the bytes into `count`.
fn pipe(mut from: TcpStream, mut to: TcpStream, count: Arc<AtomicU64>, open: Arc<AtomicU64>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
            count.fetch_add(n as u64, Ordering::SeqCst);
        }
        let _ = to.shutdown(Shutdown::Write);
        let _ = from.shutdown(Shutdown::Read);
        open.fetch_sub(1, Ordering::SeqCst);
    });
}

fn profile(url: &str, dir: &Path, args: &[&str]) -> (Vec<PointOutcome>, String) {
    let mut argv: Vec<OsString> = vec!["profile".into(), "-m".into(), MODEL.into()];
    argv.extend(["-u".into(), url.into()]);
    argv.extend(["--artifact-dir".into(), dir.as_os_str().to_owned()]);
    argv.extend(["--tokenizer".into(), "cl100k_base".into()]);
    argv.extend(args.iter().map(OsString::from));
    let cfg = llm::cli::parse(argv).unwrap().expect("a run, not help");
    let mut out = Vec::new();
    let outcomes = llm::run(&cfg, &mut out).unwrap();
    (outcomes, String::from_utf8(out).unwrap())
}

fn phases(outcome: &PointOutcome) -> Vec<HttpPhases> {
    outcome
        .requests
        .iter()
        .map(|r| {
            assert!(r.ok(), "{r:?}");
            r.http
                .expect("every HTTP request is traced")
                .phases()
                .unwrap()
        })
        .collect()
}

fn jsonl(dir: &Path) -> Vec<Value> {
    let path = dir.join("profile_export.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn summary(dir: &Path) -> Value {
    let path = dir.join("profile_export_aiperf.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Checks what every traced run shares: the phases add up, the bytes match the relay's,
/// the JSONL and the summary carry every metric in AIPerf's units.
fn check_common(p: &[HttpPhases], relay: &CountingRelay, dir: &Path) {
    for x in p {
        assert_eq!(x.duration_ns, x.sending_ns + x.waiting_ns + x.receiving_ns);
        assert_eq!(x.total_ns, x.connection_overhead_ns + x.duration_ns);
        assert_eq!(x.dns_lookup_ns, 0, "an IP address needs no lookup");
        assert!(x.chunks_sent >= 1 && x.chunks_received >= 1, "{x:?}");
    }
    relay.settle();
    let sent: u64 = p.iter().map(|x| x.bytes_sent).sum();
    let received: u64 = p.iter().map(|x| x.bytes_received).sum();
    assert_eq!(
        sent,
        relay.up.load(Ordering::SeqCst),
        "bytes the server got"
    );
    assert_eq!(received, relay.down.load(Ordering::SeqCst), "bytes it sent");
    let lines = jsonl(dir);
    assert_eq!(lines.len(), p.len());
    for (line, x) in lines.iter().zip(p) {
        let m = &line["metrics"];
        let v = |tag: &str| {
            m[tag]["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("{tag}: {m}"))
        };
        let sum = v("http_req_sending") + v("http_req_waiting") + v("http_req_receiving");
        assert!((v("http_req_duration") - sum).abs() < 1e-6, "{m}");
        assert_eq!(v("http_req_data_sent"), x.bytes_sent as f64 / 1024.0);
        assert_eq!(m["http_req_data_sent"]["unit"], "KB");
        assert_eq!(m["http_req_connection_reused"]["unit"], "ratio");
        assert_eq!(m["http_req_chunks_received"]["unit"], "count");
        assert_eq!(m["http_req_waiting"]["unit"], "ms");
        assert!(
            line.get("trace_data").is_none(),
            "only with --export-http-trace"
        );
    }
    let s = summary(dir);
    for tag in [
        "http_req_blocked",
        "http_req_dns_lookup",
        "http_req_connecting",
        "http_req_sending",
        "http_req_waiting",
        "http_req_receiving",
        "http_req_duration",
        "http_req_total",
        "http_req_connection_reused",
        "http_req_connection_overhead",
        "http_req_data_sent",
        "http_req_data_received",
        "http_req_chunks_sent",
        "http_req_chunks_received",
    ] {
        assert_eq!(s[tag]["count"], p.len(), "{tag}: {}", s[tag]);
    }
    let total_kb = s["http_req_data_sent"]["sum"].as_f64().unwrap();
    assert!((total_kb * 1024.0 - sent as f64).abs() < 1e-3 * sent as f64);
}

#[test]
fn pooled_connections_connect_once_and_streams_show_ttft_and_itl() {
    let (ttft, itl) = (40, 6);
    let server = start_llm(ttft, itl, 1);
    let relay = CountingRelay::start(server.addr);
    let dir = temp_dir("profile-http-trace-pooled");
    let args = [
        "--streaming",
        "--concurrency",
        "2",
        "--request-count",
        "8",
        "--synthetic-input-tokens-mean",
        "32",
        "--output-tokens-mean",
        "6",
        "--output-tokens-mean-deterministic",
        "--show-trace-timing",
    ];
    let (outcomes, stdout) = profile(&relay.addr.to_string(), &dir, &args);
    let p = phases(&outcomes[0]);
    assert_eq!(p.len(), 8);
    check_common(&p, &relay, &outcomes[0].aiperf_dir);
    assert_eq!(relay.accepted.load(Ordering::SeqCst), 2, "one per slot");
    let fresh: Vec<_> = p.iter().filter(|x| !x.reused).collect();
    assert_eq!(fresh.len(), 2, "the first request of each connection");
    assert!(fresh.iter().all(|x| x.connecting_ns > 0), "{fresh:?}");
    assert!(p
        .iter()
        .filter(|x| x.reused)
        .all(|x| x.connecting_ns == 0 && x.blocked_ns == 0 && x.connection_overhead_ns == 0));
    // The head and the role chunk come at once; the first content chunk after TTFT, the
    // others an ITL apart, so the first byte comes before TTFT and the last after
    // TTFT + ITL x (chunks - 1).
    for (x, r) in p.iter().zip(&outcomes[0].requests) {
        let chunks = r.chunks.len() as u64;
        assert_eq!(chunks, 6, "{r:?}");
        assert!(x.waiting_ns < ttft * MS, "{x:?}");
        let stream = x.waiting_ns + x.receiving_ns;
        let expect = (ttft + itl * (chunks - 1)) * MS;
        assert!(stream >= expect, "{stream} < {expect}: {x:?}");
        assert!(stream < expect + 30 * MS, "{stream} vs {expect}: {x:?}");
        assert!(x.receiving_ns >= itl * (chunks - 1) * MS, "{x:?}");
        assert!(x.chunks_received >= 2, "a stream arrives in several reads");
    }
    assert!(stdout.contains("HTTP Trace Timing"), "{stdout}");
    assert!(stdout.contains("HTTP Waiting (TTFB) (ms)"), "{stdout}");
    server.stop();
}

#[test]
fn never_reusing_connections_connects_for_every_request() {
    let (ttft, itl) = (30, 2);
    let server = start_llm(ttft, itl, 1);
    let relay = CountingRelay::start(server.addr);
    let dir = temp_dir("profile-http-trace-never");
    let args = [
        "--concurrency",
        "2",
        "--request-count",
        "6",
        "--synthetic-input-tokens-mean",
        "16",
        "--output-tokens-mean",
        "4",
        "--output-tokens-mean-deterministic",
        "--connection-reuse-strategy",
        "never",
    ];
    let (outcomes, _) = profile(&relay.addr.to_string(), &dir, &args);
    let p = phases(&outcomes[0]);
    assert_eq!(p.len(), 6);
    check_common(&p, &relay, &outcomes[0].aiperf_dir);
    assert!(p.iter().all(|x| !x.reused && x.connecting_ns > 0), "{p:?}");
    // One connection per request (and the slots' replacements opened after the last).
    let accepted = relay.accepted.load(Ordering::SeqCst);
    assert!((6..=8).contains(&accepted), "{accepted} connections");
    // Not streamed: the whole answer comes TTFT + ITL x (tokens - 1) after the server read
    // the request, which it may do before the client's clock read that ends sending.
    for x in &p {
        assert!(
            x.sending_ns + x.waiting_ns >= (ttft + 3 * itl) * MS,
            "{x:?}"
        );
    }
    let s = summary(&outcomes[0].aiperf_dir);
    assert_eq!(s["http_req_connection_reused"]["avg"], 0.0);
    server.stop();
}

#[test]
fn tls_shows_its_handshake_and_the_trace_is_exported() {
    let pki = Pki::new("profile-http-trace-tls");
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        openai: OpenAiConfig::paced(Duration::from_millis(5), Duration::from_millis(1)),
        tls: Some(TlsFiles {
            cert_chain: pki.server_cert.clone(),
            key: pki.server_key.clone(),
            client_ca: None,
        }),
        ..ServeConfig::default()
    };
    let server = server::start(cfg).expect("reference server starts");
    let dir = temp_dir("profile-http-trace-tls");
    let url = format!("https://{}", server.addr);
    let ca = pki.ca.display().to_string();
    let args = [
        "--ssl-https-ca-certificates-file",
        &ca,
        "--streaming",
        "--request-count",
        "4",
        "--output-tokens-mean",
        "3",
        "--export-http-trace",
    ];
    let (outcomes, _) = profile(&url, &dir, &args);
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), 4);
    let traces: Vec<_> = reqs.iter().map(|r| r.http.unwrap()).collect();
    let fresh = &traces[0];
    assert!(!fresh.reused);
    assert!(fresh.connect_start_ns > 0 && fresh.connect_end_ns >= fresh.connect_start_ns);
    assert_eq!(
        fresh.tls_start_ns, fresh.connect_end_ns,
        "TLS follows the TCP connect"
    );
    assert!(fresh.tls_end_ns > fresh.tls_start_ns, "{fresh:?}");
    let p = fresh.phases().unwrap();
    assert_eq!(p.connecting_ns, fresh.tls_end_ns - fresh.connect_start_ns);
    assert!(traces[1..].iter().all(|t| t.reused && t.tls_start_ns == 0));
    let lines = jsonl(&outcomes[0].aiperf_dir);
    let t = &lines[0]["trace_data"];
    assert_eq!(t["trace_type"], "aiohttp");
    assert_eq!(t["tls_handshake_start_ns"], fresh.tls_start_ns);
    assert_eq!(t["tls_handshake_end_ns"], fresh.tls_end_ns);
    assert_eq!(
        t["tcp_connect_end_ns"], fresh.tls_end_ns,
        "aiohttp's includes TLS"
    );
    assert_eq!(t["connecting_ns"], p.connecting_ns);
    assert_eq!(t["request_bytes_total"], fresh.bytes_sent);
    assert_eq!(t["response_chunks_count"], fresh.reads);
    let later = &lines[1]["trace_data"];
    assert!(later["tcp_connect_start_ns"].is_null() && later["tls_handshake_start_ns"].is_null());
    assert_eq!(later["connection_reused_ns"], traces[1].send_start_ns);
    server.stop();
}

#[test]
fn grpc_runs_have_no_http_metrics() {
    let server = start_llm(1, 1, 1);
    let dir = temp_dir("profile-http-trace-grpc");
    let url = server.grpc_addr.unwrap().to_string();
    let args = [
        "--endpoint-type",
        "kserve",
        "--streaming",
        "--request-count",
        "3",
        "--output-tokens-mean",
        "3",
        "--show-trace-timing",
    ];
    let (outcomes, stdout) = profile(&url, &dir, &args);
    assert!(outcomes[0]
        .requests
        .iter()
        .all(|r| r.ok() && r.http.is_none()));
    let s = summary(&outcomes[0].aiperf_dir);
    let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
    assert!(keys.iter().all(|k| !k.starts_with("http_req_")), "{keys:?}");
    for line in jsonl(&outcomes[0].aiperf_dir) {
        let m = line["metrics"].as_object().unwrap();
        assert!(m.keys().all(|k| !k.starts_with("http_req_")), "{m:?}");
    }
    assert!(stdout.contains("HTTP trace timing: none"), "{stdout}");
    server.stop();
}
