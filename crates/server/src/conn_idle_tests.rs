//! Connections that send nothing, stop half-way or trickle are closed after `--read-timeout`,
//! `--idle-timeout` and `--request-read-timeout` (HTTP, HTTPS, gRPC over TLS), and at
//! `--max-connections` idle connections make way for clients that send requests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::grpc::test_client::{block_on, connect};
use crate::limits::Limits;
use crate::test_client::*;
use crate::{start, Delay, ServeConfig, ServerHandle};
use inferperf_wire::protocol::grpc::pb::inference as pb;

/// A short limit for the timeouts under test; the checks allow far more.
const SHORT: Duration = Duration::from_millis(300);
/// How long a connection may take to be closed after its limit, on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(5);

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const EMPTY_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

fn limited(limits: Limits, delays: Vec<(String, Delay)>) -> ServerHandle {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    start(ServeConfig {
        addr: local,
        grpc_addr: Some(local),
        delays,
        limits,
        ..ServeConfig::default()
    })
    .expect("server starts")
}

/// Connects and sends `first` (maybe nothing).
fn open(addr: SocketAddr, first: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(GENEROUS * 2)).unwrap();
    s.write_all(first).unwrap();
    s
}

/// Reads until the server closes `s`; how long that took from `since`, or None if it kept
/// the connection open for [`GENEROUS`] twice over. What the server sent is returned too.
fn closed_after(s: &mut TcpStream, since: Instant) -> (Option<Duration>, Vec<u8>) {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return (Some(since.elapsed()), got),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (Some(since.elapsed()), got)
            }
            Err(_) => return (None, got),
        }
    }
}

/// Asserts that `s` is closed after `limit` (not at once) and well within [`GENEROUS`].
fn assert_closed_after(what: &str, s: &mut TcpStream, since: Instant, limit: Duration) {
    let (after, _) = closed_after(s, since);
    let after = after.unwrap_or_else(|| panic!("{what}: still open"));
    assert!(
        after >= limit * 2 / 3 && after < limit + GENEROUS,
        "{what}: closed after {after:?}"
    );
}

#[test]
fn connections_that_never_bring_a_request_are_closed_after_the_read_timeout() {
    let server = limited(
        Limits {
            read_timeout: SHORT,
            ..Limits::default()
        },
        Vec::new(),
    );
    let (http, grpc) = (server.addr, server.grpc_addr.unwrap());
    let start = Instant::now();
    let half = &PREFACE[..10];
    let mut preface_only = PREFACE.to_vec();
    preface_only.extend_from_slice(EMPTY_SETTINGS);
    let cases: [(&str, SocketAddr, &[u8]); 4] = [
        ("HTTP, nothing sent", http, b""),
        ("gRPC, nothing sent", grpc, b""),
        ("gRPC, half a preface", grpc, half),
        ("gRPC, a preface and SETTINGS", grpc, &preface_only),
    ];
    let mut conns: Vec<_> = cases
        .iter()
        .map(|(what, addr, first)| (*what, open(*addr, first)))
        .collect();
    for (what, s) in &mut conns {
        assert_closed_after(what, s, start, SHORT);
    }
    eventually(|| server.open_connections() == 0);
    // A connection that brings its request in time is served.
    let mut c = Client::connect(http);
    check_simple_binary(&c.request(&simple_binary(1)), 1);
}

#[test]
fn tls_connections_that_never_bring_a_request_are_closed_after_the_read_timeout() {
    use crate::test_certs::{TestPki, Trust};
    use crate::tls::{ALPN_H2, ALPN_HTTP1};
    use tokio::io::AsyncReadExt;
    let pki = TestPki::new("idle");
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    let server = start(ServeConfig {
        addr: local,
        grpc_addr: Some(local),
        tls: Some(pki.server_files(None)),
        limits: Limits {
            read_timeout: SHORT,
            ..Limits::default()
        },
        ..ServeConfig::default()
    })
    .expect("TLS server starts");
    let (https, grpc) = (server.addr, server.grpc_addr.unwrap());
    let cases = [
        ("HTTPS, nothing sent", https, None),
        ("HTTPS, a handshake and nothing", https, Some(ALPN_HTTP1)),
        ("gRPC over TLS, nothing sent", grpc, None),
        (
            "gRPC over TLS, a handshake and nothing",
            grpc,
            Some(ALPN_H2),
        ),
    ];
    for (what, addr, handshake) in cases {
        let config = handshake.map(|alpn| pki.client_config(Trust::ServerCa, alpn, false));
        let after = block_on(async move {
            let start = Instant::now();
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut rest = Vec::new();
            match config {
                None => {
                    let mut tcp = tcp;
                    let _ = tcp.read_to_end(&mut rest).await;
                }
                Some(config) => {
                    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
                    let connector = tokio_rustls::TlsConnector::from(config);
                    let mut tls = connector.connect(name, tcp).await.expect("handshake");
                    let _ = tls.read_to_end(&mut rest).await;
                }
            }
            start.elapsed()
        });
        assert!(
            after >= SHORT * 2 / 3 && after < SHORT + GENEROUS,
            "{what}: closed after {after:?}"
        );
    }
}

#[test]
fn connections_idle_between_requests_are_closed_after_the_idle_timeout() {
    let server = limited(
        Limits {
            idle_timeout: SHORT,
            ..Limits::default()
        },
        Vec::new(),
    );
    let mut c = Client::connect(server.addr);
    check_simple_binary(&c.request(&simple_binary(1)), 1);
    let served = Instant::now();
    assert_closed_after("HTTP after a request", &mut c.stream, served, SHORT);
    // A connection that keeps sending requests stays open for many idle timeouts.
    let idle_timeout = Duration::from_secs(1);
    let server = limited(
        Limits {
            idle_timeout,
            ..Limits::default()
        },
        Vec::new(),
    );
    let mut busy = Client::connect(server.addr);
    let until = Instant::now() + idle_timeout * 3;
    while Instant::now() < until {
        check_simple_binary(&busy.request(&simple_binary(2)), 2);
        std::thread::sleep(idle_timeout / 10);
    }
    check_simple_binary(&busy.request(&simple_binary(3)), 3);
}

#[test]
fn a_trickled_body_is_cut_off_with_408() {
    let server = limited(
        Limits {
            request_read_timeout: SHORT * 3,
            ..Limits::default()
        },
        Vec::new(),
    );
    let mut c = Client::connect(server.addr);
    c.send(b"POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{");
    // A byte every 50 ms never pauses for the 30 s read timeout; 1,000 would take 50 s.
    let start = Instant::now();
    let mut sent = 1;
    while sent < 1000 && start.elapsed() < GENEROUS * 2 {
        if c.stream.write_all(b" ").is_err() || spoke(&c.stream) {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let resp = c.recv();
    assert_eq!(resp.status, 408, "{}", resp.error());
    assert!(
        resp.error().contains("--request-read-timeout"),
        "{}",
        resp.error()
    );
    assert!(
        start.elapsed() < SHORT * 3 + GENEROUS,
        "{:?}",
        start.elapsed()
    );
    assert!(sent < 1000 && c.closed());
}

#[test]
fn at_max_connections_idle_connections_make_way_for_requests() {
    // One busy connection (a request held by a 1.5 s delay), and a flood of connections that
    // send nothing or half a head over HTTP, nothing or a preface over gRPC.
    let max = 8;
    let server = limited(
        Limits {
            max_connections: max,
            ..Limits::default()
        },
        vec![("simple".into(), Delay::Fixed(Duration::from_millis(1500)))],
    );
    let (http, grpc) = (server.addr, server.grpc_addr.unwrap());
    let mut busy = Client::connect(http);
    busy.send(&simple_binary(3));
    eventually(|| server.counters().http_requests == 1);
    let firsts: [(SocketAddr, &[u8]); 4] = [
        (http, b""),
        (http, b"GET /v2 HT"),
        (grpc, b""),
        (grpc, PREFACE),
    ];
    let flood: Vec<TcpStream> = (0..4 * max)
        .map(|i| open(firsts[i % 4].0, firsts[i % 4].1))
        .collect();
    eventually(|| server.connection_totals().0 as usize == 1 + flood.len());
    // The connections whose places were taken close.
    eventually(|| server.open_connections() <= max);
    // Real clients are served, on both ports, while the flood holds its connections.
    let mut c = Client::connect(http);
    assert_eq!(c.request(&get("/v2/health/ready")).status, 200);
    check_simple_binary(&c.request(&simple_binary(1)), 1);
    block_on(async move {
        let mut g = connect(grpc).await;
        let live = g
            .unary::<_, pb::ServerLiveResponse>("ServerLive", &pb::ServerLiveRequest {})
            .await;
        assert!(live.unwrap().live);
    });
    // The busy connection was never taken: its delayed answer arrives.
    check_simple_binary(&busy.recv(), 3);
    let (accepted, refused) = server.connection_totals();
    assert_eq!(refused, 0, "every new connection found an idle place");
    assert!(
        server.connections_evicted() >= accepted - max as u64,
        "{accepted} accepted"
    );
    eventually(|| server.open_connections() <= max);
}

/// True once the server has written something (or closed), without blocking.
fn spoke(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let spoke = match stream.peek(&mut [0u8; 1]) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    spoke
}

/// Waits (at most 10 s) until `done` holds.
fn eventually(mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < give_up, "gave up waiting");
        std::thread::sleep(Duration::from_millis(5));
    }
}
