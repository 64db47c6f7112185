//! The load engine against servers that push past the client's limits: an interim (1xx)
//! flood, a chunk-extension flood, an endless header, a Content-Length of 10^15 (HTTP/1.1);
//! a PING flood, a SETTINGS flood and an oversized HEADERS+CONTINUATION block (gRPC). Each
//! run ends with an error that names the limit, instead of hanging or growing without bound.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use inferperf::clock::Clock;
use inferperf::engine::wire::{GrpcWire, Wire};
use inferperf::engine::{Engine, EngineSpec};
use inferperf::protocol::grpc::frame::{write_frame_header, write_ping, write_settings, FrameType};
use inferperf::protocol::grpc::request::call_headers;
use inferperf::protocol::http1::DEFAULT_MAX_RESPONSE_BYTES;

/// Accepts one connection and runs `script` on it.
fn scripted_server(script: fn(&mut TcpStream)) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let join = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
            script(&mut s);
        }
    });
    (addr, join)
}

/// Reads until `needle` has arrived (or the client is gone).
fn read_until(s: &mut TcpStream, needle: &[u8]) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(needle.len()).any(|w| w == needle) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// Writes `piece` up to `times` times, stopping once the client has gone.
fn flood(s: &mut TcpStream, piece: &[u8], times: usize) {
    for _ in 0..times {
        if s.write_all(piece).is_err() {
            return;
        }
    }
}

/// Runs one request against `addr` and returns the engine's first error; fails the test if
/// the run does not end within 20 s.
fn run_engine(addr: SocketAddr, wire: Wire, request: Vec<u8>) -> String {
    let spec = EngineSpec {
        addr,
        requests: Arc::new(vec![request]),
        keep_bodies: false,
        keep_going: false,
        pin: false,
        max_workers: 1,
        clock: Clock::new(),
        tls: None,
        wire,
        sequences: None,
        slots: None,
        read_batch: None,
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        request_timeout: None,
        reply_check: Default::default(),
    };
    let engine = Engine::start(&spec, 1, Some(1)).expect("engine starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(engine.all_finished() && engine.first_error().is_some()) {
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (_, msg) = engine.first_error().unwrap();
    engine.stop(Duration::from_millis(100));
    msg
}

fn run_http(script: fn(&mut TcpStream)) -> String {
    let (addr, join) = scripted_server(script);
    let request = b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    let msg = run_engine(addr, Wire::Http1, request.to_vec());
    join.join().unwrap();
    msg
}

fn run_grpc(script: fn(&mut TcpStream)) -> String {
    let (addr, join) = scripted_server(script);
    let wire = GrpcWire {
        headers: call_headers(&addr.to_string(), "ModelInfer", &[], false, None),
        streaming: false,
        decoupled: false,
    };
    let msg = run_engine(addr, Wire::Grpc(wire), vec![0, 0, 0, 0, 2, 0x0a, 0x00]);
    join.join().unwrap();
    msg
}

#[test]
fn an_interim_response_flood_ends_the_run() {
    let msg = run_http(|s| {
        read_until(s, b"\r\n\r\n");
        flood(s, b"HTTP/1.1 100 Continue\r\n\r\n", 100_000);
    });
    assert!(
        msg.contains("more than 16 interim (1xx) responses"),
        "{msg}"
    );
}

#[test]
fn a_chunk_extension_flood_ends_the_run() {
    let msg = run_http(|s| {
        read_until(s, b"\r\n\r\n");
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        let chunk = format!("1;{}\r\nx\r\n", "e".repeat(4000));
        flood(s, chunk.as_bytes(), 10_000);
    });
    assert!(msg.contains("chunked body framing"), "{msg}");
}

#[test]
fn an_endless_header_ends_the_run() {
    let msg = run_http(|s| {
        read_until(s, b"\r\n\r\n");
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nX-Endless: ");
        flood(s, &[b'a'; 4096], 10_000);
    });
    assert!(msg.contains("HTTP response head"), "{msg}");
    assert!(msg.contains("size limit"), "{msg}");
}

#[test]
fn a_huge_content_length_fails_at_the_head() {
    let msg = run_http(|s| {
        read_until(s, b"\r\n\r\n");
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\n");
        // No body byte follows: the error must come from the head alone. Wait for the
        // client to give up on the connection.
        let mut buf = [0u8; 64];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    });
    assert!(
        msg.contains(
            "Content-Length 1000000000000000 exceeds the response size limit (67108864 bytes; \
             raise it with --max-response-bytes)"
        ),
        "{msg}"
    );
}

/// Reads until the client's first request HEADERS (frame type 1) has arrived.
fn await_request(s: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let mut pos = 24; // the client preface
        while seen.len() >= pos + 9 {
            if seen[pos + 3] == 1 {
                return;
            }
            pos += 9
                + (usize::from(seen[pos]) << 16 | usize::from(seen[pos + 1]) << 8)
                + usize::from(seen[pos + 2]);
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

fn send_settings(s: &mut TcpStream) {
    let mut out = Vec::new();
    write_settings(&mut out, &[]);
    let _ = s.write_all(&out);
}

#[test]
fn a_ping_flood_ends_the_run() {
    let msg = run_grpc(|s| {
        send_settings(s);
        let mut batch = Vec::new();
        for i in 0..1000u64 {
            write_ping(&mut batch, i.to_be_bytes());
        }
        // Never reads the client's acknowledgements.
        flood(s, &batch, 5_000);
    });
    assert!(msg.contains("more than 1000 PING frames"), "{msg}");
    assert!(msg.contains("ENHANCE_YOUR_CALM"), "{msg}");
}

#[test]
fn a_settings_flood_ends_the_run() {
    let msg = run_grpc(|s| {
        send_settings(s);
        let mut batch = Vec::new();
        for _ in 0..1000 {
            write_settings(&mut batch, &[]);
        }
        flood(s, &batch, 10_000);
    });
    assert!(msg.contains("more than 1000 SETTINGS frames"), "{msg}");
}

#[test]
fn an_oversized_header_block_ends_the_run() {
    let msg = run_grpc(|s| {
        send_settings(s);
        await_request(s);
        let piece = vec![0u8; 16_000];
        let mut out = Vec::new();
        write_frame_header(&mut out, piece.len(), FrameType::Headers, 0, 1);
        out.extend_from_slice(&piece);
        for _ in 0..100 {
            write_frame_header(&mut out, piece.len(), FrameType::Continuation, 0, 1);
            out.extend_from_slice(&piece);
        }
        let _ = s.write_all(&out);
        let mut buf = [0u8; 4096];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    });
    assert!(
        msg.contains("header block (HEADERS and CONTINUATION frames)"),
        "{msg}"
    );
}
