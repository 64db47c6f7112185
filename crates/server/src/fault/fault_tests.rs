//! The fault server's HTTP/1.1 front, from a raw socket: what each mode sends.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{start, FaultConfig, FaultHandle, FaultMode};

pub(super) fn server(mode: FaultMode, ttl: Duration) -> FaultHandle {
    let local = "127.0.0.1:0".parse().unwrap();
    start(&FaultConfig {
        mode,
        http: local,
        grpc: Some(local),
        ttl,
    })
    .unwrap()
}

/// How a raw exchange ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum End {
    /// The server closed (FIN).
    Eof,
    /// The server reset the connection.
    Reset,
    /// Nothing arrived for the idle time.
    Idle,
    /// `max` bytes arrived (a flood).
    Max,
}

/// Sends `request` and reads until the server closes, resets, goes quiet for `idle`, or has
/// sent `max` bytes.
pub(super) fn exchange(
    addr: SocketAddr,
    request: &[u8],
    max: usize,
    idle: Duration,
) -> (Vec<u8>, End) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(idle)).unwrap();
    s.write_all(request).unwrap();
    read_until(&mut s, max)
}

/// Sends `request` and reads one whole reply: the head, then the body its Content-Length
/// announces (every reply the fault server sends outside its faults has one). Unlike
/// [`exchange`] it does not wait for the connection to go quiet; it panics after 5 s without
/// a whole reply.
pub(super) fn whole_reply(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let length = head
                .split("\r\ncontent-length: ")
                .nth(1)
                .and_then(|rest| rest.split("\r\n").next())
                .and_then(|n| n.trim().parse::<usize>().ok());
            if let Some(length) = length {
                if got.len() >= end + 4 + length {
                    got.truncate(end + 4 + length);
                    return got;
                }
            }
        }
        match s.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) => panic!(
                "no whole reply within 5 s ({e}): {}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
}

pub(super) fn read_until(s: &mut TcpStream, max: usize) -> (Vec<u8>, End) {
    let mut got = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if got.len() >= max {
            return (got, End::Max);
        }
        match s.read(&mut chunk) {
            Ok(0) => return (got, End::Eof),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (got, End::Idle)
            }
            Err(_) => return (got, End::Reset),
        }
    }
}

pub(super) fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
}

/// A KServe v2 binary infer request for `identity` whose input is the bytes 0..64.
pub(super) fn infer_request() -> Vec<u8> {
    let json = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[16],"parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}"#;
    let data: Vec<u8> = (0..64).collect();
    let mut req = format!(
        "POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: {}\r\nContent-Length: {}\r\n\r\n{json}",
        json.len(),
        json.len() + data.len()
    )
    .into_bytes();
    req.extend_from_slice(&data);
    req
}

pub(super) const QUICK: Duration = Duration::from_millis(300);
pub(super) const TTL: Duration = Duration::from_secs(20);

pub(super) fn head_and_body(reply: &[u8]) -> (String, &[u8]) {
    let end = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    (
        String::from_utf8_lossy(&reply[..end]).into_owned(),
        &reply[end + 4..],
    )
}

/// The infer reply of a fresh server in `mode`, read by [`whole_reply`].
fn whole_infer_reply(mode: FaultMode) -> Vec<u8> {
    let srv = server(mode, TTL);
    whole_reply(srv.addr, &infer_request())
}

/// The infer reply of a fresh server in `mode`, read as `exchange` reads it.
fn infer_reply(mode: FaultMode) -> (Vec<u8>, End) {
    let srv = server(mode, TTL);
    exchange(srv.addr, &infer_request(), 1 << 20, QUICK)
}

/// The Content-Length a response head announces.
fn content_length(head: &str) -> usize {
    head.split("\r\nContent-Length: ")
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

pub(super) fn json_of(reply: &[u8]) -> Value {
    serde_json::from_slice(head_and_body(reply).1).unwrap()
}

#[test]
fn healthy_server_answers_metadata_and_echoes_infers() {
    let srv = server(FaultMode::None, TTL);
    let reply = whole_reply(srv.addr, &get("/v2/health/ready"));
    assert!(reply.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let server = json_of(&whole_reply(srv.addr, &get("/v2")));
    assert!(
        server["extensions"].to_string().contains("statistics"),
        "{server}"
    );
    let meta = json_of(&whole_reply(srv.addr, &get("/v2/models/identity")));
    assert_eq!(meta["inputs"][0]["shape"], serde_json::json!([16]));
    let config = json_of(&whole_reply(srv.addr, &get("/v2/models/identity/config")));
    assert_eq!(
        (
            config["max_batch_size"].as_i64(),
            config.get("ensemble_scheduling")
        ),
        (Some(0), None)
    );
    let reply = whole_reply(srv.addr, &get("/v2/models/nope"));
    assert!(reply.starts_with(b"HTTP/1.1 404"));
    // Two infers on one keep-alive connection, each echoing the input bytes.
    let mut twice = infer_request();
    twice.extend_from_slice(&infer_request());
    let (reply, end) = exchange(srv.addr, &twice, 1 << 20, QUICK);
    assert_eq!(end, End::Idle);
    let (head, body) = head_and_body(&reply);
    assert!(head.contains("Inference-Header-Content-Length: "), "{head}");
    let data: Vec<u8> = (0..64).collect();
    let first = body.windows(64).position(|w| w == data.as_slice()).unwrap();
    assert!(body[first + 64..].starts_with(b"HTTP/1.1 200 OK\r\n"));
    let stats = json_of(&whole_reply(srv.addr, &get("/v2/models/identity/stats")));
    assert_eq!(stats["model_stats"][0]["inference_count"], 2);
    assert_eq!(srv.infers(), 2);
}

#[test]
fn failing_modes_answer_errors() {
    let reply = whole_infer_reply(FaultMode::Status500);
    assert!(reply.starts_with(b"HTTP/1.1 500 "));
    assert!(json_of(&reply)["error"]
        .as_str()
        .unwrap()
        .contains("internal error"));

    let srv = server(FaultMode::EveryNthFails, TTL);
    let statuses: Vec<bool> = (0..6)
        .map(|_| whole_reply(srv.addr, &infer_request()).starts_with(b"HTTP/1.1 200"))
        .collect();
    assert_eq!(statuses, [true, true, false, true, true, false]);

    let text = json_of(&whole_infer_reply(FaultMode::EscapeText))["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.contains('\u{1b}') && text.contains('\u{7}') && text.contains('\r'),
        "{text:?}"
    );

    let reply = whole_infer_reply(FaultMode::NotJson);
    assert!(reply.starts_with(b"HTTP/1.1 200"));
    assert!(serde_json::from_slice::<Value>(head_and_body(&reply).1).is_err());
}

#[test]
fn cut_replies_end_as_the_mode_says() {
    let (reply, end) = infer_reply(FaultMode::Reset);
    assert_eq!(end, End::Reset);
    assert!(reply.starts_with(b"HTTP/1.1 200 OK"));

    let (reply, end) = infer_reply(FaultMode::CloseMidBody);
    assert_eq!(end, End::Eof);
    let (head, body) = head_and_body(&reply);
    let length = content_length(&head);
    assert!(body.len() < length, "{} of {length}", body.len());

    let (reply, end) = infer_reply(FaultMode::WrongContentLength);
    assert_eq!(end, End::Idle);
    let (head, body) = head_and_body(&reply);
    let length = content_length(&head);
    assert_eq!(body.len(), length + 8);

    let (reply, _) = infer_reply(FaultMode::Garbage);
    assert!(!reply.starts_with(b"HTTP/"));

    let (reply, end) = infer_reply(FaultMode::HugeContentLength);
    assert_eq!(end, End::Idle);
    assert!(head_and_body(&reply)
        .0
        .contains("Content-Length: 1000000000000000"));

    let srv = server(FaultMode::HugeHeaders, TTL);
    let (reply, _) = exchange(srv.addr, &infer_request(), 4 << 20, QUICK);
    let (head, body) = head_and_body(&reply);
    assert!(head.len() > 2 << 20, "{}", head.len());
    assert!(body.ends_with(&(0..64).collect::<Vec<u8>>()));
}

#[test]
fn stalls_send_nothing_until_the_server_stops() {
    for mode in [
        FaultMode::StallHead,
        FaultMode::StallBody,
        FaultMode::StallForever,
    ] {
        let srv = server(mode, TTL);
        let request = if mode == FaultMode::StallForever {
            get("/v2/health/ready")
        } else {
            infer_request()
        };
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.set_read_timeout(Some(QUICK)).unwrap();
        s.write_all(&request).unwrap();
        let (got, end) = read_until(&mut s, 1 << 20);
        assert_eq!(end, End::Idle, "{mode:?}");
        assert_eq!(got.is_empty(), mode != FaultMode::StallBody, "{mode:?}");
        // Stopping the server ends the stall: the connection closes within a few ticks.
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let stopped = Instant::now();
        srv.stop();
        let (_, end) = read_until(&mut s, 1 << 20);
        assert_ne!(end, End::Idle, "{mode:?}");
        assert!(stopped.elapsed() < Duration::from_secs(2));
    }
}

#[test]
fn drip_sends_the_healthy_reply_a_byte_at_a_time() {
    let healthy = whole_infer_reply(FaultMode::None);
    let srv = server(FaultMode::Drip, TTL);
    // Health is answered at once: only infer replies drip.
    let reply = whole_reply(srv.addr, &get("/v2/health/ready"));
    assert!(reply.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    s.write_all(&infer_request()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while got.len() < 10 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    // Ten bytes come with nine waits between them, and they are the healthy reply's.
    assert!(
        started.elapsed() >= super::DRIP_EVERY * 9,
        "{:?}",
        started.elapsed()
    );
    assert!(
        healthy.starts_with(&got),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    // Stopping the server ends the drip.
    let stopped = Instant::now();
    srv.stop();
    let (rest, end) = read_until(&mut s, 1 << 20);
    assert_ne!(end, End::Idle);
    assert!(rest.len() < healthy.len() - got.len(), "the reply went on");
    assert!(stopped.elapsed() < Duration::from_secs(2));
}

#[test]
fn the_lifetime_ends_stalls_and_closes_the_ports() {
    let srv = server(FaultMode::StallForever, Duration::from_millis(400));
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&get("/v2")).unwrap();
    let (got, end) = read_until(&mut s, 1 << 20);
    assert!(got.is_empty() && end != End::Idle, "{end:?}");
    assert!(srv.expired());
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        TcpStream::connect(srv.addr).is_err(),
        "the port still accepts"
    );
}

#[test]
fn refuse_closes_the_ports_after_the_first_infer() {
    let srv = server(FaultMode::Refuse, TTL);
    let reply = whole_reply(srv.addr, &get("/v2/models/identity"));
    assert!(reply.starts_with(b"HTTP/1.1 200"));
    let (reply, end) = exchange(srv.addr, &infer_request(), 1 << 20, QUICK);
    assert_eq!((reply.len(), end), (0, End::Eof));
    std::thread::sleep(Duration::from_millis(200));
    assert!(TcpStream::connect(srv.addr).is_err());
    assert!(TcpStream::connect(srv.grpc_addr.unwrap()).is_err());
}

#[test]
fn floods_do_not_end() {
    let lines =
        |reply: &[u8], unit: &[u8]| reply.windows(unit.len()).filter(|w| *w == unit).count();
    let srv = server(FaultMode::InterimFlood, TTL);
    let (reply, end) = exchange(srv.addr, &infer_request(), 4 << 20, QUICK);
    assert_eq!(end, End::Max);
    assert!(lines(&reply, b"HTTP/1.1 100 Continue\r\n\r\n") > 100_000);

    let srv = server(FaultMode::ChunkExtensionFlood, TTL);
    let (reply, end) = exchange(srv.addr, &infer_request(), 4 << 20, QUICK);
    assert_eq!(end, End::Max);
    let (head, body) = head_and_body(&reply);
    assert!(head.contains("Transfer-Encoding: chunked"));
    assert!(body.starts_with(b"1;fault=extension;") && lines(body, b"\r\n \r\n") > 1000);

    let srv = server(FaultMode::EndlessHeader, TTL);
    let (reply, end) = exchange(srv.addr, &infer_request(), 4 << 20, QUICK);
    assert_eq!(end, End::Max);
    assert!(!reply.windows(4).any(|w| w == b"\r\n\r\n"));
}

#[test]
fn metadata_modes_change_the_model() {
    let shape_of = |mode: FaultMode| {
        let srv = server(mode, TTL);
        let meta = json_of(&whole_reply(srv.addr, &get("/v2/models/identity")));
        let config = json_of(&whole_reply(srv.addr, &get("/v2/models/identity/config")));
        assert_eq!(meta["inputs"][0]["shape"], config["input"][0]["dims"]);
        meta["inputs"][0]["shape"].to_string()
    };
    assert_eq!(
        shape_of(FaultMode::DimsHuge),
        "[4294967296,4294967296,4294967296]"
    );
    assert_eq!(shape_of(FaultMode::DimsBig), "[65536,65536]");
    for (mode, name) in [
        (FaultMode::NameDotdot, "../../x"),
        (FaultMode::NameAbs, "/abs/x"),
    ] {
        let srv = server(mode, TTL);
        let config = json_of(&whole_reply(srv.addr, &get("/v2/models/identity/config")));
        assert_eq!(config["platform"], "ensemble");
        assert_eq!(config["ensemble_scheduling"]["step"][0]["model_name"], name);
        // However a client spells the composing model's path, it gets its config.
        for path in [format!("/v2/models/{name}/config"), "/x/config".to_string()] {
            let composing = json_of(&whole_reply(srv.addr, &get(&path)));
            assert_eq!(composing["name"], name, "{path}");
        }
        let stats = json_of(&whole_reply(srv.addr, &get("/v2/models/stats")));
        assert_eq!(stats["model_stats"][1]["name"], name);
    }
}

#[test]
fn modes_have_kebab_names_and_say_where_they_apply() {
    let names: Vec<String> = FaultMode::all().iter().map(|m| m.name()).collect();
    for want in [
        "status-500",
        "close-mid-body",
        "every-nth-fails",
        "name-dotdot",
        "dims-huge",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert!(FaultMode::all().len() >= 25);
    assert!(
        !FaultMode::SettingsFlood.applies_to_http() && FaultMode::SettingsFlood.applies_to_grpc()
    );
    assert!(
        FaultMode::InterimFlood.applies_to_http() && !FaultMode::InterimFlood.applies_to_grpc()
    );
}
