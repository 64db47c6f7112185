//! The load engine against servers that push past the client's limits: an interim (1xx)
//! flood, a chunk-extension flood, an endless header, a Content-Length of 10^15 (HTTP/1.1);
//! a PING flood, a SETTINGS flood and an oversized HEADERS+CONTINUATION block (gRPC). Each
//! run ends with an error that names the limit, instead of hanging or growing without bound.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use inferperf::engine::wire::Wire;
use inferperf::engine::Engine;
use inferperf::protocol::grpc::frame::{write_frame_header, write_ping, write_settings, FrameType};

use crate::common::scripted::{
    await_request, engine_spec, grpc_request, grpc_wire, scripted_server, send_settings,
};

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
    let spec = engine_spec(addr, wire, request);
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
    let msg = run_engine(addr, grpc_wire(addr), grpc_request());
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
