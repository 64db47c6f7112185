//! Scripted-server tests of how streams and the connection end badly: resets, GOAWAY, EOF,
//! stream-level and connection-level protocol errors.

use super::fuzz::Owned;
use super::tests::{
    block, data, frame, headers, msg, ok_response, settings, status_200, trailers, Harness, REQ,
};
use super::*;
use crate::protocol::grpc::frame::{
    write_goaway, write_rst_stream, FrameType, END_HEADERS, END_STREAM,
};

fn rst(stream: u32, code: ErrorCode) -> Vec<u8> {
    let mut out = Vec::new();
    write_rst_stream(&mut out, stream, code);
    out
}

fn goaway(last: u32, code: ErrorCode) -> Vec<u8> {
    let mut out = Vec::new();
    write_goaway(&mut out, last, code, b"bye");
    out
}

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(FrameType::WindowUpdate, 0, stream, &increment.to_be_bytes())
}

/// Whether `end` is a `Protocol` end whose text contains `needle`.
fn protocol_mentions(end: &Owned, needle: &str) -> bool {
    matches!(end, Owned::Closed(_, StreamEnd::Protocol(why)) if why.contains(needle))
}

#[test]
fn rst_stream_ends_the_stream_with_its_code() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    h.out();
    h.feed(&[status_200(1), rst(1, ErrorCode::RefusedStream)].concat())
        .unwrap();
    assert_eq!(
        h.take(),
        [
            Owned::Headers(1),
            Owned::Closed(1, StreamEnd::Reset(ErrorCode::RefusedStream))
        ]
    );
    assert!(h.out().is_empty(), "no answer to RST_STREAM");
}

#[test]
fn goaway_refuses_streams_above_last_and_lets_the_rest_finish() {
    let mut h = Harness::new();
    for _ in 0..3 {
        h.s.open(REQ, &[], true).unwrap();
    }
    h.feed(&goaway(3, ErrorCode::NoError)).unwrap();
    assert_eq!(h.take(), [Owned::Closed(5, StreamEnd::Refused)]);
    assert!(h.s.going_away());
    assert!(!h.s.can_open());
    assert_eq!(h.s.open(REQ, &[], true), Err(SendError::CannotOpen));
    // A later GOAWAY cannot raise last-stream-id again; a lower one refuses more.
    h.feed(&goaway(9, ErrorCode::NoError)).unwrap();
    assert!(h.take().is_empty());
    h.feed(&[ok_response(1, b"a"), goaway(1, ErrorCode::InternalError)].concat())
        .unwrap();
    let events = h.take();
    assert_eq!(events[2], Owned::Closed(1, StreamEnd::Ok));
    assert_eq!(events[3], Owned::Closed(3, StreamEnd::Refused));
    assert!(h.s.is_done());
}

#[test]
fn bad_response_heads_end_the_stream() {
    /// Response fields, END_STREAM, how the stream ends, and the RST_STREAM code the session sends.
    type Case<'a> = (&'a [(&'a str, &'a str)], bool, StreamEnd, Option<ErrorCode>);
    let cases: &[Case] = &[
        (
            &[(":status", "503")],
            false,
            StreamEnd::Http(503),
            Some(ErrorCode::Cancel),
        ),
        (&[(":status", "404")], true, StreamEnd::Http(404), None),
        (
            &[("grpc-status", "0")],
            true,
            StreamEnd::Protocol(
                "stream 1: response headers without :status (PROTOCOL_ERROR)".into(),
            ),
            Some(ErrorCode::ProtocolError),
        ),
        (
            &[(":status", "2000")],
            false,
            StreamEnd::Protocol(
                "stream 1: :status is not a 3-digit number (PROTOCOL_ERROR)".into(),
            ),
            Some(ErrorCode::ProtocolError),
        ),
        (
            &[(":status", "200")],
            true,
            StreamEnd::Protocol("response trailers without grpc-status".into()),
            None,
        ),
        (
            &[(":status", "200")],
            false,
            StreamEnd::Protocol(
                "stream 1: response has no content-type (gRPC needs application/grpc) (CANCEL)"
                    .into(),
            ),
            Some(ErrorCode::Cancel),
        ),
        (
            &[(":status", "200"), ("content-type", "text/html")],
            false,
            StreamEnd::Protocol(
                "stream 1: response content-type is 'text/html', not application/grpc (CANCEL)"
                    .into(),
            ),
            Some(ErrorCode::Cancel),
        ),
        (
            &[
                (":status", "200"),
                ("content-type", "application/grpcx"),
                ("grpc-status", "0"),
            ],
            true,
            StreamEnd::Protocol(
                "response content-type is 'application/grpcx', not application/grpc".into(),
            ),
            None,
        ),
        (
            &[(":status", "103")],
            true,
            StreamEnd::Protocol(
                "stream 1: informational response with END_STREAM (PROTOCOL_ERROR)".into(),
            ),
            Some(ErrorCode::ProtocolError),
        ),
    ];
    for (fields, end_stream, end, reset) in cases {
        let mut h = Harness::new();
        h.s.open(REQ, &[], true).unwrap();
        h.out();
        h.feed(&headers(1, fields, *end_stream)).unwrap();
        let events = h.take();
        assert_eq!(
            events.last(),
            Some(&Owned::Closed(1, end.clone())),
            "{fields:?}"
        );
        let resets: Vec<Vec<u8>> = h
            .out()
            .into_iter()
            .filter(|f| f.kind == FrameType::RstStream)
            .map(|f| f.payload)
            .collect();
        let want: Vec<Vec<u8>> = reset
            .iter()
            .map(|code| code.to_u32().to_be_bytes().to_vec())
            .collect();
        assert_eq!(resets, want, "{fields:?}");
        // The connection survives a stream's failure.
        h.s.open(REQ, &[], true).unwrap();
        h.feed(&ok_response(3, b"")).unwrap();
        assert_eq!(h.take().last(), Some(&Owned::Closed(3, StreamEnd::Ok)));
    }
}

#[test]
fn bad_bodies_and_trailers_end_the_stream() {
    let cases: &[(&str, Vec<u8>, &str)] = &[
        (
            "data first",
            data(1, &msg(b"x"), false),
            "DATA before headers",
        ),
        (
            "no trailers",
            [status_200(1), data(1, &msg(b"x"), true)].concat(),
            "without trailers",
        ),
        (
            "truncated message",
            [
                status_200(1),
                data(1, &msg(b"xyz")[..6], false),
                trailers(1, "0"),
            ]
            .concat(),
            "ended inside a message",
        ),
        (
            "trailers open",
            [status_200(1), headers(1, &[("grpc-status", "0")], false)].concat(),
            "trailers without END_STREAM",
        ),
        (
            "bad flag",
            [status_200(1), data(1, &[9, 0, 0, 0, 0], false)].concat(),
            "compressed flag is 9",
        ),
        (
            "compressed without grpc-encoding",
            [status_200(1), data(1, &[1, 0, 0, 0, 0], false)].concat(),
            "flagged compressed, but the response names no grpc-encoding",
        ),
        (
            "zero window increment",
            [status_200(1), window_update(1, 0)].concat(),
            "WINDOW_UPDATE increment is 0",
        ),
    ];
    let cfg = SessionConfig {
        recv_window: 65_535,
        max_message: 64,
    };
    for (name, bytes, needle) in cases {
        let mut h = Harness::with(cfg, &[]);
        h.s.open(REQ, &[], true).unwrap();
        h.feed(bytes).unwrap();
        let events = h.take();
        let last = events.last().unwrap();
        assert!(protocol_mentions(last, needle), "{name}: {events:?}");
        assert_eq!(h.s.open_streams(), 0, "{name}");
        h.feed(&data(1, b"late bytes", true)).unwrap();
        assert!(
            h.take().is_empty(),
            "{name}: frames after the end are ignored"
        );
    }
}

/// Feeds `bytes` to a session with two open streams and checks the connection error: it
/// carries `code`, fails both streams, queues a GOAWAY, repeats on later input and leaves
/// the session closed.
fn check_connection_error(name: &str, bytes: &[u8], code: ErrorCode) {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    h.s.open(REQ, &[], true).unwrap();
    h.out();
    let err = h.feed(bytes).expect_err(name);
    assert_eq!(err.code, code, "{name}: {err}");
    let events = h.take();
    assert_eq!(events.len(), 2, "{name}: {events:?}");
    assert!(events
        .iter()
        .all(|e| protocol_mentions(e, "connection error")));
    let frames = h.out();
    assert_eq!(
        frames.last().map(|f| f.kind),
        Some(FrameType::GoAway),
        "{name}"
    );
    assert_eq!(
        h.feed(&settings(&[])),
        Err(err.clone()),
        "{name}: error repeats"
    );
    assert_eq!(h.s.failure(), Some(&err));
    assert!(!h.s.can_open());
    assert_eq!(h.s.send(1, b"", true), Err(SendError::NotOpen(1)));
    assert!(h.s.is_done());
}

#[test]
fn header_block_errors_close_everything_and_queue_goaway() {
    // A header block over its size limit is a limit, not a protocol error: see limits_tests.
    let cases: Vec<(&str, Vec<u8>, ErrorCode)> = vec![
        (
            "frame inside a header block",
            [frame(FrameType::Headers, 0, 1, b""), data(1, b"x", false)].concat(),
            ErrorCode::ProtocolError,
        ),
        (
            "continuation on another stream",
            [
                frame(FrameType::Headers, 0, 1, b""),
                frame(FrameType::Continuation, END_HEADERS, 3, b""),
            ]
            .concat(),
            ErrorCode::ProtocolError,
        ),
        (
            "lone continuation",
            frame(FrameType::Continuation, END_HEADERS, 1, b""),
            ErrorCode::ProtocolError,
        ),
        (
            "hpack garbage",
            frame(
                FrameType::Headers,
                END_HEADERS,
                1,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
            ),
            ErrorCode::CompressionError,
        ),
    ];
    for (name, bytes, code) in cases {
        check_connection_error(name, &bytes, code);
    }
}

#[test]
fn stream_state_errors_close_everything_and_queue_goaway() {
    let cases: Vec<(&str, Vec<u8>, ErrorCode)> = vec![
        (
            "data on an idle stream",
            data(7, b"x", false),
            ErrorCode::ProtocolError,
        ),
        (
            "headers on an even stream",
            status_200(2),
            ErrorCode::ProtocolError,
        ),
        (
            "reset of an idle stream",
            rst(9, ErrorCode::Cancel),
            ErrorCode::ProtocolError,
        ),
        (
            "window of an idle stream",
            window_update(11, 5),
            ErrorCode::ProtocolError,
        ),
        (
            "push promise",
            frame(FrameType::PushPromise, END_HEADERS, 1, &[0, 0, 0, 2]),
            ErrorCode::ProtocolError,
        ),
    ];
    for (name, bytes, code) in cases {
        check_connection_error(name, &bytes, code);
    }
}

#[test]
fn connection_frame_errors_close_everything_and_queue_goaway() {
    let big = vec![0u8; 16_385];
    let cases: Vec<(&str, Vec<u8>, ErrorCode)> = vec![
        (
            "frame over 16 KiB",
            frame(FrameType::Data, 0, 1, &big[..16_385]),
            ErrorCode::FrameSizeError,
        ),
        (
            "zero connection window increment",
            window_update(0, 0),
            ErrorCode::ProtocolError,
        ),
        (
            "connection window overflow",
            window_update(0, MAX_WINDOW_SIZE),
            ErrorCode::FlowControlError,
        ),
    ];
    for (name, bytes, code) in cases {
        check_connection_error(name, &bytes, code);
    }
}

#[test]
fn server_preface_must_be_settings() {
    let mut s = Session::new(SessionConfig::default());
    let space = s.input_space();
    let ping = frame(FrameType::Ping, 0, 0, b"12345678");
    space[..ping.len()].copy_from_slice(&ping);
    let err = s.received(ping.len(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code, ErrorCode::ProtocolError);
    // A GOAWAY may come first: it explains a refusal better than a preface error would.
    let mut h = Harness {
        s: Session::new(SessionConfig::default()),
        events: Vec::new(),
    };
    h.s.open(REQ, &[], true).unwrap();
    h.feed(&goaway(0, ErrorCode::EnhanceYourCalm)).unwrap();
    assert_eq!(h.take(), [Owned::Closed(1, StreamEnd::Refused)]);
    assert_eq!(
        h.s.goaway_reason(),
        Some((ErrorCode::EnhanceYourCalm, "bye"))
    );
    assert!(!h.s.peer_settings_received());
}

#[test]
fn eof_closes_open_streams_as_disconnected() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    h.s.open(REQ, &[], true).unwrap();
    h.feed(&[status_200(1), data(1, &msg(b"abc")[..4], false)].concat())
        .unwrap();
    h.take();
    let mut events = Vec::new();
    h.s.eof(&mut |e| events.push(Owned::from_event(e)));
    assert_eq!(
        events,
        [
            Owned::Closed(1, StreamEnd::Disconnected),
            Owned::Closed(3, StreamEnd::Disconnected)
        ]
    );
    assert!(!h.s.can_open());
    assert!(h.feed(&settings(&[])).is_err());
}

#[test]
fn table_driven_trailer_statuses() {
    let cases: &[(&str, StreamEnd)] = &[
        ("0", StreamEnd::Ok),
        (
            "14",
            StreamEnd::Grpc {
                code: 14,
                message: String::new(),
            },
        ),
        (
            "abc",
            StreamEnd::Protocol("grpc-status is not a decimal number".into()),
        ),
    ];
    for (status, end) in cases {
        let mut h = Harness::new();
        h.s.open(REQ, &[], true).unwrap();
        h.feed(&[status_200(1), trailers(1, status)].concat())
            .unwrap();
        assert_eq!(h.take().last(), Some(&Owned::Closed(1, end.clone())));
    }
    // Trailers may carry a message with an empty body before them.
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let head = block(&[("grpc-status", "3"), ("grpc-message", "bad%20input")]);
    let bytes = [
        status_200(1),
        frame(FrameType::Headers, END_HEADERS | END_STREAM, 1, &head),
    ];
    h.feed(&bytes.concat()).unwrap();
    let end = StreamEnd::Grpc {
        code: 3,
        message: "bad input".into(),
    };
    assert_eq!(h.take().last(), Some(&Owned::Closed(1, end)));
}

#[test]
fn stream_ends_and_connection_errors_have_failure_kinds() {
    assert_eq!(StreamEnd::Ok.kind(), FailKind::None);
    let grpc = StreamEnd::Grpc {
        code: 13,
        message: "boom".into(),
    };
    assert_eq!(grpc.kind(), FailKind::Status);
    assert_eq!(StreamEnd::Http(503).kind(), FailKind::Status);
    assert_eq!(StreamEnd::Reset(ErrorCode::Cancel).kind(), FailKind::Reset);
    assert_eq!(StreamEnd::Protocol("x".into()).kind(), FailKind::Framing);
    assert_eq!(StreamEnd::Disconnected.kind(), FailKind::Closed);
    let conn = |code| ConnError {
        code,
        msg: String::new(),
    };
    assert_eq!(conn(ErrorCode::ProtocolError).kind(), FailKind::Framing);
    assert_eq!(conn(ErrorCode::EnhanceYourCalm).kind(), FailKind::Limit);
    assert_eq!(conn(ErrorCode::NoError).kind(), FailKind::Closed);
}
