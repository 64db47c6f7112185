//! The HTTP front against a hostile client (raw `std::net` bytes): oversized heads and bodies,
//! a slow-loris head, a stalled body, a connection flood, and a pipeline that never reads.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::limits::Limits;
use crate::test_client::*;
use crate::{start, Delay, ServeConfig, ServerHandle};

fn limited(limits: Limits, delays: Vec<(String, Delay)>) -> ServerHandle {
    start(ServeConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        delays,
        limits,
        ..ServeConfig::default()
    })
    .expect("server starts")
}

/// Waits (at most 10 s) until `done` holds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < give_up, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn oversized_heads_are_431_and_bodies_413_before_they_are_read() {
    let server = limited(
        Limits {
            max_request_bytes: 1000,
            ..Limits::default()
        },
        Vec::new(),
    );
    let many: String = (0..100).map(|i| format!("X-H{i}: v\r\n")).collect();
    // Six chunks of 200 bytes: the sixth takes the body past 1000.
    let mut six_chunks =
        b"POST /v2/models/simple/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..6 {
        six_chunks.extend_from_slice(format!("c8\r\n{}\r\n", "x".repeat(200)).as_bytes());
    }
    let cases: Vec<(Vec<u8>, u16, &str)> =
        vec![
        (
            format!("GET /v2 HTTP/1.1\r\n{many}\r\n").into_bytes(),
            431,
            "request has more than 48 header lines",
        ),
        (
            format!("GET /v2 HTTP/1.1\r\nX: {}", "a".repeat(40_000)).into_bytes(),
            431,
            "request header exceeds 16384 bytes",
        ),
        // The head alone: the answer comes without a byte of the announced body.
        (
            b"POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 1000000000000000\r\n\r\n"
                .to_vec(),
            413,
            "request body exceeds the limit of 1000 bytes",
        ),
        (
            b"POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 1001\r\n\r\n".to_vec(),
            413,
            "request body exceeds the limit of 1000 bytes",
        ),
        (six_chunks, 413, "request body exceeds the limit of 1000 bytes"),
        // 10 MiB of zeros as 10 KiB of gzip: refused by its head, never inflated.
        (gzip_bomb(), 415, "Content-Encoding 'gzip' is not supported (identity only)"),
    ];
    for (req, status, msg) in cases {
        let mut c = Client::connect(server.addr);
        let resp = c.request(&req);
        assert_eq!((resp.status, resp.error().as_str()), (status, msg));
        assert_eq!(resp.header("Connection"), Some("close"));
        assert!(c.closed());
    }
    // A body at the limit is fine, and the server is still there.
    let mut c = Client::connect(server.addr);
    let body = format!("{{\"pad\":\"{}\"}}", "p".repeat(990));
    let resp = c.request(&post_json("/v2/models/simple/infer", &body));
    assert_eq!(
        resp.status,
        400,
        "a JSON error, not a size one: {}",
        resp.error()
    );
    check_simple_binary(&c.request(&simple_binary(1)), 1);
}

/// A JSON infer request whose gzip body inflates to 10 MiB of zeros.
fn gzip_bomb() -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; 10 << 20]).unwrap();
    let body = e.finish().unwrap();
    let mut req = format!(
        "POST /v2/models/simple/infer HTTP/1.1\r\nContent-Encoding: gzip\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    req
}

#[test]
fn slow_loris_head_and_stalled_body_get_408() {
    let timeout = Duration::from_millis(300);
    let server = limited(
        Limits {
            read_timeout: timeout,
            ..Limits::default()
        },
        Vec::new(),
    );
    // A head one byte every 20 ms: 2,000 bytes would take 40 s; the server ends it first.
    let head = format!("GET /v2 HTTP/1.1\r\nX-Slow: {}\r\n\r\n", "s".repeat(2000));
    let mut c = Client::connect(server.addr);
    let mut sent = 0;
    for byte in head.as_bytes() {
        if c.stream.write_all(&[*byte]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(20));
        if sent % 16 == 0 && peer_spoke(&c.stream) {
            break;
        }
    }
    assert!(sent < head.len(), "the slow head was read to its end");
    let resp = c.recv();
    assert_eq!(resp.status, 408);
    assert!(
        resp.error().contains("request head not complete"),
        "{}",
        resp.error()
    );
    // A body that pauses for longer than the timeout.
    let mut c = Client::connect(server.addr);
    c.send(b"POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 10\r\n\r\n{\"a\"");
    let resp = c.recv();
    assert_eq!(resp.status, 408);
    assert!(
        resp.error().contains("request body paused"),
        "{}",
        resp.error()
    );
    assert!(c.closed());
    // An idle keep-alive connection (no partial request) is not timed out.
    let mut idle = Client::connect(server.addr);
    check_simple_binary(&idle.request(&simple_binary(1)), 1);
    std::thread::sleep(timeout * 3);
    check_simple_binary(&idle.request(&simple_binary(2)), 2);
    assert_eq!(server.counters().http_requests, 4);
}

/// True once the server has written something (or closed), without blocking.
fn peer_spoke(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let spoke = match stream.peek(&mut byte) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    spoke
}

#[test]
fn connections_over_the_limit_get_503_while_every_connection_is_busy() {
    // Each held connection waits 3 s for a delayed answer, so none is idle to make way.
    let server = limited(
        Limits {
            max_connections: 3,
            ..Limits::default()
        },
        vec![("simple".into(), Delay::Fixed(Duration::from_secs(3)))],
    );
    let mut held: Vec<Client> = (0..3).map(|_| Client::connect(server.addr)).collect();
    for c in &mut held {
        c.send(&simple_binary(1));
    }
    eventually("the held requests are read", || {
        server.counters().http_requests == 3
    });
    for _ in 0..5 {
        let mut extra = Client::connect(server.addr);
        let mut answer = Vec::new();
        let _ = extra.stream.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 503 Service Unavailable"),
            "{text}"
        );
        assert!(
            text.is_empty() || text.contains("--max-connections"),
            "{text}"
        );
    }
    assert_eq!(server.open_connections(), 3);
    drop(held.pop());
    eventually("a place frees up", || server.open_connections() == 2);
    let mut c = Client::connect(server.addr);
    assert_eq!(c.request(&get("/v2/health/live")).status, 200);
    assert_eq!(server.connections_evicted(), 0);
}

#[test]
fn a_pipeline_that_never_reads_stops_being_read() {
    // Answers wait 60 s, so every pipelined request is held; the server stops reading after
    // its cap of held answers instead of holding the 1,000 sent.
    let server = limited(
        Limits::default(),
        vec![("simple".into(), Delay::Fixed(Duration::from_secs(60)))],
    );
    let addr = server.addr;
    let writer = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let one = simple_binary(1);
        let mut sent = 0;
        for _ in 0..1000 {
            if stream.write_all(&one).is_err() {
                break;
            }
            sent += 1;
        }
        (stream, sent)
    });
    eventually("the held cap is reached", || {
        server.counters().http_requests >= 256
    });
    std::thread::sleep(Duration::from_millis(200));
    let answered = server.counters().http_requests;
    assert_eq!(answered, 256, "requests read while none was answered");
    let (stream, sent) = writer.join().unwrap();
    assert!(sent > 256, "the client got {sent} requests into the socket");
    drop(stream);
}

#[test]
fn absurd_shapes_are_400() {
    let server = limited(Limits::default(), Vec::new());
    let mut c = Client::connect(server.addr);
    for shape in [
        "[4294967296,4294967296,4294967296]",
        "[65536,65536]",
        "[1,4611686018427387904]",
        "[1,-1]",
    ] {
        let body = format!(
            r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":{shape},"data":[1,2]}}]}}"#
        );
        let resp = c.request(&post_json("/v2/models/identity_fp32/infer", &body));
        assert_eq!(resp.status, 400, "{shape}: {}", resp.error());
        let error = resp.error();
        assert!(
            error.contains("INPUT0") || error.contains("batch-size"),
            "{error}"
        );
    }
    check_simple_binary(&c.request(&simple_binary(1)), 1);
}
