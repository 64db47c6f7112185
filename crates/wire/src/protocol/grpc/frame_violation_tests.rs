//! Frames that break RFC 9113's rules: each is a connection or stream error with the
//! right code.

use super::*;

/// Parses each `(name, bytes, code, stream)` case and checks it fails with `code` on
/// `stream` (0: a connection error) and a message.
fn check_errors(cases: Vec<(&str, Vec<u8>, ErrorCode, u32)>) {
    for (name, bytes, code, stream) in &cases {
        let err = parse_frame(bytes, DEFAULT_MAX_FRAME_SIZE).expect_err(name);
        assert_eq!((err.code, err.stream), (*code, *stream), "{name}: {err}");
        assert!(!err.msg.is_empty(), "{name}");
    }
}

#[test]
fn data_frame_violations_are_errors() {
    use ErrorCode::{FrameSizeError as Size, ProtocolError as Proto};
    let big = vec![0u8; DEFAULT_MAX_FRAME_SIZE as usize + 1];
    check_errors(vec![
        ("oversized data", raw(0x0, 0, 1, &big), Size, 0),
        ("oversized unknown type", raw(0xee, 0, 1, &big), Size, 0),
        ("data on stream 0", raw(0x0, 0, 0, b"x"), Proto, 0),
        ("data padded, empty", raw(0x0, PADDED, 1, b""), Size, 0),
        (
            "data pad == payload len",
            raw(0x0, PADDED, 1, b"\x03ab"),
            Proto,
            0,
        ),
        (
            "data pad > payload len",
            raw(0x0, PADDED, 1, b"\xff"),
            Proto,
            0,
        ),
    ]);
}

#[test]
fn header_and_priority_violations_are_errors() {
    use ErrorCode::{FrameSizeError as Size, ProtocolError as Proto};
    check_errors(vec![
        (
            "headers on stream 0",
            raw(0x1, END_HEADERS, 0, b"\x82"),
            Proto,
            0,
        ),
        (
            "headers priority too short",
            raw(0x1, PRIORITY, 1, b"\0\0\0"),
            Size,
            0,
        ),
        (
            "headers padded priority short",
            raw(0x1, PADDED | PRIORITY, 1, b"\0\0\0\0\0"),
            Size,
            0,
        ),
        (
            "headers pad too long",
            raw(0x1, PADDED, 1, b"\x02\x82"),
            Proto,
            0,
        ),
        (
            "headers self dependency",
            raw(0x1, PRIORITY, 3, b"\0\0\0\x03\x10\x82"),
            Proto,
            0,
        ),
        (
            "priority on stream 0",
            raw(0x2, 0, 0, &[0, 0, 0, 1, 1]),
            Proto,
            0,
        ),
        ("priority length 4", raw(0x2, 0, 3, &[0, 0, 0, 1]), Size, 3),
        (
            "priority self dependency",
            raw(0x2, 0, 3, &[0x80, 0, 0, 3, 1]),
            Proto,
            3,
        ),
        (
            "rst_stream on stream 0",
            raw(0x3, 0, 0, &[0, 0, 0, 8]),
            Proto,
            0,
        ),
        (
            "rst_stream length 5",
            raw(0x3, 0, 1, &[0, 0, 0, 0, 8]),
            Size,
            0,
        ),
        (
            "continuation on stream 0",
            raw(0x9, END_HEADERS, 0, b"\x82"),
            Proto,
            0,
        ),
    ]);
}

#[test]
fn settings_violations_are_errors() {
    use ErrorCode::{FlowControlError as Flow, FrameSizeError as Size, ProtocolError as Proto};
    check_errors(vec![
        ("settings on a stream", raw(0x4, 0, 1, b""), Proto, 0),
        (
            "settings ack with payload",
            raw(0x4, ACK, 0, &[0, 3, 0, 0, 0, 1]),
            Size,
            0,
        ),
        (
            "settings length 5",
            raw(0x4, 0, 0, &[0, 3, 0, 0, 0]),
            Size,
            0,
        ),
        (
            "settings enable_push 2",
            raw(0x4, 0, 0, &[0, 2, 0, 0, 0, 2]),
            Proto,
            0,
        ),
        (
            "settings window 2^31",
            raw(0x4, 0, 0, &[0, 4, 0x80, 0, 0, 0]),
            Flow,
            0,
        ),
        (
            "settings max frame small",
            raw(0x4, 0, 0, &[0, 5, 0, 0, 0x3f, 0xff]),
            Proto,
            0,
        ),
        (
            "settings max frame 2^24",
            raw(0x4, 0, 0, &[0, 5, 1, 0, 0, 0]),
            Proto,
            0,
        ),
    ]);
}

#[test]
fn control_frame_violations_are_errors() {
    use ErrorCode::{FrameSizeError as Size, ProtocolError as Proto};
    check_errors(vec![
        (
            "push_promise on stream 0",
            raw(0x5, 0, 0, &[0, 0, 0, 2]),
            Proto,
            0,
        ),
        ("push_promise short", raw(0x5, 0, 1, &[0, 0, 2]), Size, 0),
        (
            "push_promise promises 0",
            raw(0x5, 0, 1, &[0, 0, 0, 0]),
            Proto,
            0,
        ),
        (
            "push_promise pad too long",
            raw(0x5, PADDED, 1, &[1, 0, 0, 0, 2]),
            Proto,
            0,
        ),
        ("ping on a stream", raw(0x6, 0, 1, b"12345678"), Proto, 0),
        ("ping length 7", raw(0x6, 0, 0, b"1234567"), Size, 0),
        ("ping length 9", raw(0x6, ACK, 0, b"123456789"), Size, 0),
        ("goaway on a stream", raw(0x7, 0, 1, &[0; 8]), Proto, 0),
        ("goaway length 7", raw(0x7, 0, 0, &[0; 7]), Size, 0),
        (
            "window_update length 3",
            raw(0x8, 0, 1, &[0, 0, 1]),
            Size,
            0,
        ),
        (
            "window_update length 5",
            raw(0x8, 0, 0, &[0, 0, 0, 0, 1]),
            Size,
            0,
        ),
        (
            "window_update 0 on connection",
            raw(0x8, 0, 0, &[0, 0, 0, 0]),
            Proto,
            0,
        ),
        (
            "window_update 0 on stream",
            raw(0x8, 0, 5, &[0x80, 0, 0, 0]),
            Proto,
            5,
        ),
    ]);
}
