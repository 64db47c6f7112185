//! Connection-level tests: pipelining, split and chunked bodies, 100-continue, limits,
//! delays that do not block the loop, and shutdown.

use std::net::SocketAddr;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::http::MAX_HEAD_BYTES;
use crate::test_client::*;
use crate::{start, Delay, ServeConfig};

#[test]
fn pipelined_requests_answered_in_order() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let mut burst = Vec::new();
    for batch in [1, 2, 3] {
        burst.extend_from_slice(&simple_binary(batch));
        burst.extend_from_slice(&get("/v2/models/simple/ready"));
    }
    burst.extend_from_slice(&get("/v2/models/nope"));
    c.send(&burst);
    for batch in [1, 2, 3] {
        check_simple_binary(&c.recv(), batch);
        assert_eq!(c.recv().status, 200);
    }
    assert_eq!(c.recv().status, 404);
    assert_eq!(server.counters().http_requests, 7);
}

#[test]
fn body_split_across_writes() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let req = simple_binary(4);
    // Split inside the head, inside the JSON header and inside the binary data.
    for piece in [&req[..20], &req[20..150], &req[150..400], &req[400..]] {
        c.send(piece);
        sleep(Duration::from_millis(15));
    }
    check_simple_binary(&c.recv(), 4);
}

#[test]
fn chunked_request_body() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let full = simple_binary(2);
    let split = full.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8(full[..split].to_vec()).unwrap();
    let content_length = head
        .lines()
        .find(|l| l.starts_with("Content-Length"))
        .unwrap();
    let head = head.replace(
        &format!("{content_length}\r\n"),
        "Transfer-Encoding: chunked\r\n",
    );
    let mut req = head.into_bytes();
    for chunk in full[split..].chunks(100) {
        req.extend_from_slice(format!("{:x};x=y\r\n", chunk.len()).as_bytes());
        req.extend_from_slice(chunk);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\nTrailer: 1\r\n\r\n");
    let (first, second) = req.split_at(req.len() / 2);
    c.send(first);
    sleep(Duration::from_millis(10));
    c.send(second);
    check_simple_binary(&c.recv(), 2);
    // Keep-alive still works after a chunked request.
    assert_eq!(c.request(&get("/v2/health/live")).status, 200);
}

#[test]
fn expect_100_continue_is_answered() {
    let server = server();
    let mut c = Client::connect(server.addr);
    let req = simple_binary(1);
    let split = req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 2;
    let mut head = req[..split].to_vec();
    head.extend_from_slice(b"Expect: 100-continue\r\n\r\n");
    c.send(&head);
    assert_eq!(c.recv().status, 100);
    c.send(&req[split + 2..]);
    check_simple_binary(&c.recv(), 1);
}

#[test]
fn connection_close_and_http10_are_honoured() {
    let server = server();
    for req in [
        &b"GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n"[..],
        b"GET /v2/health/live HTTP/1.0\r\n\r\n",
    ] {
        let mut c = Client::connect(server.addr);
        // A request pipelined after the close must not be answered.
        let mut both = req.to_vec();
        both.extend_from_slice(&get("/v2"));
        let resp = c.request(&both);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("Connection"), Some("close"));
        assert!(c.closed());
    }
}

#[test]
fn malformed_and_oversized_requests() {
    let server = server();
    let huge_head = format!(
        "GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(MAX_HEAD_BYTES)
    );
    let cases: [(Vec<u8>, u16, &str); 4] = [
        (b"GARBAGE\0\r\n\r\n".to_vec(), 400, "malformed HTTP request"),
        (huge_head.into_bytes(), 431, "request header exceeds"),
        (
            b"POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n"
                .to_vec(),
            413,
            "request body exceeds",
        ),
        (
            b"POST /v2/models/simple/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
                .to_vec(),
            400,
            "invalid chunk size",
        ),
    ];
    for (req, status, msg) in cases {
        let mut c = Client::connect(server.addr);
        let resp = c.request(&req);
        assert_eq!(resp.status, status, "{msg}");
        assert!(resp.error().contains(msg), "{}", resp.error());
        assert_eq!(resp.header("Connection"), Some("close"));
        assert!(c.closed(), "{msg}: connection left open");
    }
    // The server is still fine afterwards.
    let mut c = Client::connect(server.addr);
    check_simple_binary(&c.request(&simple_binary(1)), 1);
}

#[test]
fn delays_hold_responses_without_blocking_other_connections() {
    let delay = Duration::from_millis(300);
    let server = server_with(vec![("identity_fp32".into(), Delay::Fixed(delay))]);
    let header = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"parameters":{"binary_data_size":4}}]}"#;
    let delayed_req = post_binary(
        "/v2/models/identity_fp32/infer",
        header,
        &1.0f32.to_le_bytes(),
    );
    let mut slow = Client::connect(server.addr);
    let sent = Instant::now();
    // A delayed request, then a fast one pipelined behind it on the same connection.
    let mut both = delayed_req.clone();
    both.extend_from_slice(&get("/v2/health/ready"));
    slow.send(&both);
    sleep(Duration::from_millis(20));
    // Meanwhile another connection to an undelayed model is served at once, many times.
    let mut fast = Client::connect(server.addr);
    for _ in 0..20 {
        check_simple_binary(&fast.request(&simple_binary(1)), 1);
    }
    let counters = server.counters();
    assert_eq!(counters.model("simple").unwrap().inferences, 20);
    // The delayed inference is not counted before its deadline.
    assert_eq!(counters.model("identity_fp32").unwrap().inferences, 0);
    let first = slow.recv();
    let waited = sent.elapsed();
    assert_eq!(first.status, 200);
    assert!(first.json()["outputs"][0]["data"] == serde_json::json!([1.0]));
    assert_eq!(
        slow.recv().status,
        200,
        "in-order response after the delayed one"
    );
    assert!(waited >= delay, "answered after {waited:?}");
    assert!(waited < delay * 5, "answered after {waited:?}");
    let stats = slow.request(&get("/v2/models/identity_fp32/stats")).json();
    let infer_ns = stats["model_stats"][0]["inference_stats"]["compute_infer"]["ns"]
        .as_u64()
        .unwrap();
    assert!(
        infer_ns >= delay.as_nanos() as u64,
        "compute_infer {infer_ns} ns excludes the delay"
    );
}

#[test]
fn uniform_delays_complete_in_order() {
    let lo = Duration::from_millis(1);
    let server = server_with(vec![(
        "simple".into(),
        Delay::Uniform(lo, Duration::from_millis(30)),
    )]);
    let mut c = Client::connect(server.addr);
    let mut burst = Vec::new();
    for batch in 1..=8 {
        burst.extend_from_slice(&simple_binary(batch));
    }
    let sent = Instant::now();
    c.send(&burst);
    for batch in 1..=8 {
        check_simple_binary(&c.recv(), batch);
    }
    assert!(sent.elapsed() >= lo);
    assert_eq!(server.counters().model("simple").unwrap().inferences, 36);
}

#[test]
fn several_threads_and_stop_joins_promptly() {
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let server = start(ServeConfig {
        addr,
        threads: 3,
        ..ServeConfig::default()
    })
    .unwrap();
    let mut clients: Vec<Client> = (0..6).map(|_| Client::connect(server.addr)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        check_simple_binary(&c.request(&simple_binary(i % 8 + 1)), i % 8 + 1);
    }
    assert_eq!(server.counters().model("simple").unwrap().infer_requests, 6);
    // An idle open connection must not keep the server from stopping.
    let started = Instant::now();
    server.stop();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "stop took {:?}",
        started.elapsed()
    );
    assert!(clients[0].closed());
}

#[test]
fn stop_with_pending_delay_is_prompt() {
    let server = server_with(vec![(
        "simple".into(),
        Delay::Fixed(Duration::from_secs(30)),
    )]);
    let mut c = Client::connect(server.addr);
    c.send(&simple_binary(1));
    sleep(Duration::from_millis(20));
    let started = Instant::now();
    drop(server);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[test]
fn refused_upload_still_gets_its_answer() {
    let server = server();
    let mut c = Client::connect(server.addr);
    c.send(b"POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n");
    // Keep uploading, as a client that does not look for an early answer would; the server
    // must drain this instead of resetting the connection (which could destroy the 413).
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..8 {
        c.send(&chunk);
    }
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let resp = c.recv();
    assert_eq!(resp.status, 413);
    assert!(c.closed());
}
