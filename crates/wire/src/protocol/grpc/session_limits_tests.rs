//! Limits on what a server controls over HTTP/2: PING and SETTINGS floods, empty-frame
//! floods, header blocks (size, CONTINUATION count, HPACK size updates) and gRPC message
//! lengths. Each ends with a limit error naming it, a GOAWAY ENHANCE_YOUR_CALM where the
//! connection fails, and output and buffers that stayed bounded.

use super::fuzz::Owned;
use super::tests::{data, frame, msg, ok_response, settings, status_200, Harness, REQ};
// `data` builds DATA frames with a payload; empty ones are built with `frame`.
use super::*;
use crate::protocol::grpc::frame::{write_ping, FrameType, END_HEADERS};

fn ping(n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    write_ping(&mut out, n.to_be_bytes());
    out
}

/// Asserts the connection failed over a limit: the error, the open stream's end and the
/// queued GOAWAY ENHANCE_YOUR_CALM.
fn assert_limit_failure(h: &mut Harness, got: Result<(), ConnError>, needle: &str) {
    let err = got.expect_err("a limit error");
    assert_eq!(err.code, ErrorCode::EnhanceYourCalm);
    assert_eq!(err.kind(), FailKind::Limit);
    assert!(err.to_string().contains(needle), "{err}");
    assert!(
        err.to_string().contains("GOAWAY ENHANCE_YOUR_CALM"),
        "{err}"
    );
    let events = h.take();
    let Some(Owned::Closed(1, end)) = events.last() else {
        panic!("stream 1 not closed: {events:?}")
    };
    assert_eq!(end.kind(), FailKind::Limit, "{end}");
    let frames = h.out();
    let last = frames.last().expect("a GOAWAY");
    assert_eq!(last.kind, FrameType::GoAway);
    assert_eq!(
        &last.payload[4..8],
        &11u32.to_be_bytes(),
        "ENHANCE_YOUR_CALM"
    );
    assert_eq!(h.s.received(0, &mut |_| {}), Err(err));
}

#[test]
fn a_ping_flood_fails_the_connection() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let flood: Vec<u8> = (0..5000).flat_map(ping).collect();
    let got = h.feed(&flood);
    // The acknowledgements queued stay within the bound (17 bytes each).
    assert!(h.s.output().len() < (MAX_CONTROL_IN_ROW + 10) * 17 + 200);
    assert_limit_failure(&mut h, got, "server sent more than 1000 PING frames");
}

#[test]
fn pings_between_responses_are_no_flood() {
    let mut h = Harness::new();
    for round in 0..10 {
        let id = h.s.open(REQ, &[], true).unwrap();
        let pings: Vec<u8> = (0..900).flat_map(|i| ping(round * 900 + i)).collect();
        h.feed(&[pings, ok_response(id, b"r")].concat()).unwrap();
        assert_eq!(h.take().last(), Some(&Owned::Closed(id, StreamEnd::Ok)));
        let acks = h.out().iter().filter(|f| f.kind == FrameType::Ping).count();
        assert_eq!(acks, 900);
    }
}

#[test]
fn acknowledgements_never_written_are_bounded() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    h.feed(&status_200(1)).unwrap();
    // 900 pings, then a response message, over and over; the output is never written.
    let round: Vec<u8> = [
        (0..900).flat_map(ping).collect(),
        data(1, &msg(b"m"), false),
    ]
    .concat();
    let got = h.feed(&round.repeat(20));
    assert!(h.s.output().len() < (MAX_PENDING_ACKS + 10) * 17 + 1000);
    assert_limit_failure(
        &mut h,
        got,
        "faster than their acknowledgements could be sent",
    );
}

#[test]
fn a_settings_flood_fails_the_connection() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let flood = settings(&[]).repeat(MAX_CONTROL_IN_ROW + 1);
    let got = h.feed(&flood);
    assert_limit_failure(&mut h, got, "server sent more than 1000 SETTINGS frames");
}

#[test]
fn an_oversized_header_block_fails_the_connection() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let piece = vec![0u8; 16 * 1024];
    let mut bytes = frame(FrameType::Headers, 0, 1, &piece);
    for _ in 0..20 {
        bytes.extend(frame(FrameType::Continuation, 0, 1, &piece));
    }
    let got = h.feed(&bytes);
    assert!(h.s.conn.block.capacity() <= 2 * MAX_HEADER_BLOCK);
    assert_limit_failure(
        &mut h,
        got,
        "header block (HEADERS and CONTINUATION frames) larger",
    );
}

#[test]
fn endless_empty_continuations_fail_the_connection() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let mut bytes = frame(FrameType::Headers, 0, 1, b"\x88");
    for _ in 0..10_000 {
        bytes.extend(frame(FrameType::Continuation, 0, 1, &[]));
    }
    let got = h.feed(&bytes);
    assert_limit_failure(&mut h, got, "more than 64 CONTINUATION frames");
}

#[test]
fn an_empty_data_flood_fails_the_connection() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let mut bytes = status_200(1);
    for _ in 0..5000 {
        bytes.extend(frame(FrameType::Data, 0, 1, &[]));
    }
    let got = h.feed(&bytes);
    assert_limit_failure(
        &mut h,
        got,
        "more than 1000 empty DATA or CONTINUATION frames",
    );
}

#[test]
fn many_table_size_updates_fail_the_connection() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    // Three size updates to 0, then `:status: 200` (static index 8).
    let block = b"\x20\x20\x20\x88";
    let got = h.feed(&frame(FrameType::Headers, END_HEADERS, 1, block));
    assert_limit_failure(&mut h, got, "more than 2 dynamic table size updates");
    // Two are allowed (then `content-type`, static name 31, literal value).
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let block = b"\x20\x20\x88\x0f\x10\x10application/grpc";
    h.feed(&frame(FrameType::Headers, END_HEADERS, 1, block))
        .unwrap();
    assert_eq!(h.take(), [Owned::Headers(1)]);
}

#[test]
fn a_message_longer_than_the_limit_fails_its_stream_at_once() {
    let cfg = SessionConfig {
        max_message: 1000,
        ..SessionConfig::default()
    };
    let mut h = Harness::with(cfg, &[]);
    h.s.open(REQ, &[], true).unwrap();
    h.s.open(REQ, &[], true).unwrap();
    // Only the prefix has arrived: 10^9 bytes announced.
    let prefix = [0u8, 0x3b, 0x9a, 0xca, 0x00];
    h.feed(&[status_200(1), data(1, &prefix, false)].concat())
        .unwrap();
    let events = h.take();
    let Some(Owned::Closed(1, end)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(end.kind(), FailKind::Limit);
    assert_eq!(
        end.to_string(),
        "gRPC message length 1000000000 exceeds the response size limit (1000 bytes; raise it \
         with --max-response-bytes)"
    );
    let frames = h.out();
    assert_eq!(frames.last().map(|f| f.kind), Some(FrameType::RstStream));
    // The connection goes on: stream 3 is still open.
    assert_eq!(h.s.open_streams(), 1);
    assert!(h.s.failure().is_none());
}
