//! The gRPC load engine against servers that misbehave: garbage bytes, reset streams, a close
//! in the middle of a response, a plain HTTP/1 server. Each must end as a counted, reported
//! error within seconds: never a panic, never a hang.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use inferperf::engine::Engine;
use inferperf::measure::WindowRecords;
use inferperf::protocol::grpc::frame::{
    write_data, write_headers, write_rst_stream, ErrorCode, DEFAULT_MAX_FRAME_SIZE,
};

use crate::common::scripted::{
    await_request, engine_spec, grpc_request, grpc_wire, response_headers, scripted_server,
    send_settings,
};

/// Runs up to 5 requests at concurrency 2 against `addr`; returns the first worker error
/// and the records, failing the test if the engine does not finish within 10 s.
fn run_engine(addr: SocketAddr) -> (String, WindowRecords) {
    let spec = engine_spec(addr, grpc_wire(addr), grpc_request());
    let mut engine = Engine::start(&spec, 2, Some(5)).expect("engine starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(engine.all_finished() && engine.first_error().is_some()) {
        assert!(
            Instant::now() < deadline,
            "the engine hung: finished {} error {:?} completed {}",
            engine.all_finished(),
            engine.first_error(),
            engine.completed()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut window = WindowRecords::default();
    engine.collect(u64::MAX, &mut window).unwrap();
    let (_, msg) = engine.first_error().unwrap();
    engine.stop(Duration::from_millis(100));
    (msg, window)
}

#[test]
fn garbage_is_a_connection_error() {
    let (addr, join) = scripted_server(|s| {
        send_settings(s);
        await_request(s);
        let _ = s.write_all(b"\x00\x00\x04\x99garbage that is not HTTP/2 at all");
        std::thread::sleep(Duration::from_millis(300));
    });
    let (msg, window) = run_engine(addr);
    assert!(
        msg.contains("HTTP/2") || msg.contains("gRPC connection"),
        "{msg}"
    );
    assert!(window.records.iter().all(|r| !r.ok));
    join.join().unwrap();
}

#[test]
fn reset_streams_are_counted_errors() {
    let (addr, join) = scripted_server(|s| {
        send_settings(s);
        await_request(s);
        let mut out = Vec::new();
        write_rst_stream(&mut out, 1, ErrorCode::InternalError);
        let _ = s.write_all(&out);
        std::thread::sleep(Duration::from_millis(300));
    });
    let (msg, window) = run_engine(addr);
    assert!(msg.contains("reset the stream"), "{msg}");
    assert!(!window.records.is_empty(), "the failed request is recorded");
    assert!(window.records.iter().all(|r| !r.ok));
    join.join().unwrap();
}

#[test]
fn close_mid_response_is_a_counted_error() {
    let (addr, join) = scripted_server(|s| {
        send_settings(s);
        await_request(s);
        let mut out = Vec::new();
        write_headers(
            &mut out,
            1,
            &response_headers(),
            false,
            DEFAULT_MAX_FRAME_SIZE,
        );
        // A message announced as 100 bytes, of which 3 arrive before the close.
        write_data(
            &mut out,
            1,
            &[0, 0, 0, 0, 100, 1, 2, 3],
            false,
            DEFAULT_MAX_FRAME_SIZE,
        );
        let _ = s.write_all(&out);
    });
    let (msg, window) = run_engine(addr);
    assert!(msg.contains("closed"), "{msg}");
    assert!(!window.records.is_empty());
    assert!(window.records.iter().all(|r| !r.ok));
    join.join().unwrap();
}

#[test]
fn a_plain_http1_server_is_not_taken_for_grpc() {
    let (addr, join) = scripted_server(|s| {
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    let (msg, window) = run_engine(addr);
    assert!(msg.contains("gRPC connection"), "{msg}");
    assert!(window.records.iter().all(|r| !r.ok));
    join.join().unwrap();
}
