use super::*;

/// Builds one frame on the wire: 9-byte header then `payload`.
fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let len = u32::try_from(payload.len()).unwrap();
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn parse_one(bytes: &[u8]) -> Frame<'_> {
    let (frame, used) = parse_frame(bytes, DEFAULT_MAX_FRAME_SIZE)
        .expect("valid frame")
        .expect("complete frame");
    assert_eq!(used, bytes.len());
    frame
}

/// Parses each `(name, bytes, want)` case and checks it decodes to `want`.
fn check_decodes(cases: Vec<(&str, Vec<u8>, Frame<'static>)>) {
    for (name, bytes, want) in &cases {
        assert_eq!(&parse_one(bytes), want, "{name}");
    }
}

#[test]
fn valid_data_frames_decode() {
    // DATA: padding is stripped and the reserved stream bit ignored.
    check_decodes(vec![
        (
            "data end_stream",
            raw(0x0, END_STREAM, 1, b"abc"),
            Frame::Data {
                stream: 1,
                end_stream: true,
                data: b"abc",
            },
        ),
        (
            "data padded",
            raw(0x0, PADDED, 3, b"\x02abcPP"),
            Frame::Data {
                stream: 3,
                end_stream: false,
                data: b"abc",
            },
        ),
        (
            "data padded, padding fills all",
            raw(0x0, PADDED, 3, b"\x03PPP"),
            Frame::Data {
                stream: 3,
                end_stream: false,
                data: b"",
            },
        ),
        (
            "data reserved bit ignored",
            raw(0x0, 0, 0x8000_0005, b"x"),
            Frame::Data {
                stream: 5,
                end_stream: false,
                data: b"x",
            },
        ),
    ]);
}

#[test]
fn valid_header_block_frames_decode() {
    // HEADERS, PUSH_PROMISE and CONTINUATION: the block without padding or priority.
    check_decodes(vec![
        (
            "headers plain",
            raw(0x1, END_HEADERS, 1, b"\x82\x86"),
            Frame::Headers {
                stream: 1,
                end_stream: false,
                end_headers: true,
                block: b"\x82\x86",
            },
        ),
        (
            "headers padded + priority",
            raw(
                0x1,
                PADDED | PRIORITY | END_STREAM,
                5,
                b"\x01\x00\x00\x00\x03\x10\x82Z",
            ),
            Frame::Headers {
                stream: 5,
                end_stream: true,
                end_headers: false,
                block: b"\x82",
            },
        ),
        (
            "push_promise padded",
            raw(0x5, PADDED | END_HEADERS, 1, b"\x01\x00\x00\x00\x02\x82P"),
            Frame::PushPromise {
                stream: 1,
                end_headers: true,
                promised_stream: 2,
                block: b"\x82",
            },
        ),
        (
            "continuation",
            raw(0x9, END_HEADERS, 1, b"\x84"),
            Frame::Continuation {
                stream: 1,
                end_headers: true,
                block: b"\x84",
            },
        ),
    ]);
}

#[test]
fn valid_stream_control_frames_decode() {
    // PRIORITY, RST_STREAM and WINDOW_UPDATE.
    check_decodes(vec![
        (
            "priority",
            raw(0x2, 0, 3, &[0, 0, 0, 1, 16]),
            Frame::Priority { stream: 3 },
        ),
        (
            "rst_stream cancel",
            raw(0x3, 0, 7, &[0, 0, 0, 8]),
            Frame::RstStream {
                stream: 7,
                error_code: ErrorCode::Cancel,
            },
        ),
        (
            "rst_stream unknown code",
            raw(0x3, 0, 7, &[0, 0, 1, 0]),
            Frame::RstStream {
                stream: 7,
                error_code: ErrorCode::Unknown(256),
            },
        ),
        (
            "window_update connection",
            raw(0x8, 0, 0, &[0x80, 0, 0x10, 0]),
            Frame::WindowUpdate {
                stream: 0,
                increment: 4096,
            },
        ),
        (
            "window_update stream max",
            raw(0x8, 0, 9, &[0x7f, 0xff, 0xff, 0xff]),
            Frame::WindowUpdate {
                stream: 9,
                increment: MAX_WINDOW_SIZE,
            },
        ),
    ]);
}

#[test]
fn valid_connection_frames_decode() {
    // SETTINGS ack, PING, GOAWAY, and frames of an unknown type (kept, not an error).
    check_decodes(vec![
        (
            "settings ack",
            raw(0x4, ACK, 0, b""),
            Frame::Settings {
                ack: true,
                params: SettingsIter::new(b""),
            },
        ),
        (
            "ping ack",
            raw(0x6, ACK, 0, b"12345678"),
            Frame::Ping {
                ack: true,
                data: *b"12345678",
            },
        ),
        (
            "goaway with debug",
            raw(0x7, 0, 0, b"\x00\x00\x00\x05\x00\x00\x00\x0bslow down"),
            Frame::GoAway {
                last_stream: 5,
                error_code: ErrorCode::EnhanceYourCalm,
                debug: b"slow down",
            },
        ),
        (
            "unknown type ignored",
            raw(0xfa, 0x3, 0, b"??"),
            Frame::Unknown {
                kind: 0xfa,
                flags: 0x3,
                stream: 0,
                payload: b"??",
            },
        ),
    ]);
}

#[test]
fn settings_parameters_decode_in_order() {
    let settings_payload = [0, 3, 0, 0, 0, 100, 0, 4, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 7];
    let bytes = raw(0x4, 0, 0, &settings_payload);
    let Frame::Settings { ack: false, params } = parse_one(&bytes) else {
        panic!("settings frame expected");
    };
    let params: Vec<(u16, u32)> = params.collect();
    assert_eq!(params, [(3, 100), (4, 65_535), (0, 7)]);
}

#[test]
fn oversized_frame_fails_on_header_alone() {
    let header = [0x00, 0x40, 0x01, 0x0, 0x0, 0, 0, 0, 1]; // 16385-byte DATA
    let err = parse_frame(&header, DEFAULT_MAX_FRAME_SIZE).unwrap_err();
    assert_eq!(err.code, ErrorCode::FrameSizeError);
    // The same frame fits a larger advertised limit and then just waits for its payload.
    assert_eq!(parse_frame(&header, 1 << 20), Ok(None));
}

#[test]
fn incomplete_frames_need_more_bytes() {
    let bytes = raw(0x6, 0, 0, b"12345678");
    for cut in 0..bytes.len() {
        assert_eq!(
            parse_frame(&bytes[..cut], DEFAULT_MAX_FRAME_SIZE),
            Ok(None),
            "cut {cut}"
        );
    }
    // Bytes after the frame are left for the next call.
    let mut two = bytes.clone();
    two.extend_from_slice(&raw(0x4, ACK, 0, b""));
    let (_, used) = parse_frame(&two, DEFAULT_MAX_FRAME_SIZE).unwrap().unwrap();
    assert_eq!(used, bytes.len());
    let (second, _) = parse_frame(&two[used..], DEFAULT_MAX_FRAME_SIZE)
        .unwrap()
        .unwrap();
    assert!(matches!(second, Frame::Settings { ack: true, .. }));
}

#[test]
fn fixed_size_writers_match_the_rfc_layout() {
    let mut out = Vec::new();
    write_preface(&mut out);
    assert_eq!(out, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    type WriterCase = (&'static str, fn(&mut Vec<u8>), Vec<u8>);
    let cases: Vec<WriterCase> = vec![
        (
            "settings",
            |o| write_settings(o, &[(4, 1 << 20), (2, 0)]),
            raw(0x4, 0, 0, &[0, 4, 0, 0x10, 0, 0, 0, 2, 0, 0, 0, 0]),
        ),
        ("settings ack", write_settings_ack, raw(0x4, ACK, 0, b"")),
        (
            "ping",
            |o| write_ping(o, *b"abcdefgh"),
            raw(0x6, 0, 0, b"abcdefgh"),
        ),
        (
            "ping ack",
            |o| write_ping_ack(o, *b"abcdefgh"),
            raw(0x6, ACK, 0, b"abcdefgh"),
        ),
        (
            "window update",
            |o| write_window_update(o, 3, 65_535),
            raw(0x8, 0, 3, &[0, 0, 0xff, 0xff]),
        ),
        (
            "rst_stream",
            |o| write_rst_stream(o, 3, ErrorCode::Cancel),
            raw(0x3, 0, 3, &[0, 0, 0, 8]),
        ),
        (
            "goaway",
            |o| write_goaway(o, 7, ErrorCode::NoError, b"bye"),
            raw(0x7, 0, 0, b"\0\0\0\x07\0\0\0\0bye"),
        ),
        (
            "data empty end",
            |o| write_data(o, 1, b"", true, DEFAULT_MAX_FRAME_SIZE),
            raw(0x0, END_STREAM, 1, b""),
        ),
        (
            "data empty open",
            |o| write_data(o, 1, b"", false, DEFAULT_MAX_FRAME_SIZE),
            Vec::new(),
        ),
        (
            "headers small",
            |o| write_headers(o, 1, b"\x82", true, DEFAULT_MAX_FRAME_SIZE),
            raw(0x1, END_STREAM | END_HEADERS, 1, b"\x82"),
        ),
    ];
    for (name, write, want) in cases {
        let mut out = Vec::new();
        write(&mut out);
        assert_eq!(out, want, "{name}");
    }
}

/// Parses every frame in `bytes`, which must be a whole number of valid frames.
fn parse_all(mut bytes: &[u8], max: u32) -> Vec<Frame<'_>> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let (frame, used) = parse_frame(bytes, max).unwrap().expect("whole frame");
        frames.push(frame);
        bytes = &bytes[used..];
    }
    frames
}

#[test]
fn data_splits_at_max_frame_size() {
    let max = DEFAULT_MAX_FRAME_SIZE;
    let payload: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
    // (payload length, end_stream, expected frame lengths)
    let cases: &[(usize, bool, &[usize])] = &[
        (1, false, &[1]),
        (16_384, true, &[16_384]),
        (16_385, true, &[16_384, 1]),
        (40_000, false, &[16_384, 16_384, 7_232]),
    ];
    for &(len, end_stream, want) in cases {
        let mut out = Vec::new();
        write_data(&mut out, 5, &payload[..len], end_stream, max);
        let frames = parse_all(&out, max);
        let mut joined = Vec::new();
        for (i, frame) in frames.iter().enumerate() {
            let Frame::Data {
                stream: 5,
                end_stream: end,
                data,
            } = frame
            else {
                panic!("len {len}: not DATA on stream 5: {frame:?}");
            };
            assert_eq!(data.len(), want[i], "len {len} frame {i}");
            assert_eq!(
                *end,
                end_stream && i + 1 == frames.len(),
                "len {len} frame {i}"
            );
            joined.extend_from_slice(data);
        }
        assert_eq!(frames.len(), want.len(), "len {len}");
        assert_eq!(joined, &payload[..len], "len {len}");
    }
}

#[test]
fn headers_split_into_continuations() {
    let max = DEFAULT_MAX_FRAME_SIZE;
    let block: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    let mut out = Vec::new();
    write_headers(&mut out, 3, &block, true, max);
    let frames = parse_all(&out, max);
    assert_eq!(frames.len(), 3);
    assert!(matches!(
        frames[0],
        Frame::Headers { stream: 3, end_stream: true, end_headers: false, block } if block.len() == 16_384
    ));
    assert!(matches!(
        frames[1],
        Frame::Continuation { stream: 3, end_headers: false, block } if block.len() == 16_384
    ));
    assert!(matches!(
        frames[2],
        Frame::Continuation { stream: 3, end_headers: true, block } if block.len() == 7_232
    ));
    let joined: Vec<u8> = frames
        .iter()
        .flat_map(|f| match f {
            Frame::Headers { block, .. } | Frame::Continuation { block, .. } => block.to_vec(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(joined, block);
}

#[test]
fn codes_and_types_round_trip() {
    for byte in 0..=255u8 {
        assert_eq!(FrameType::from_u8(byte).to_u8(), byte);
    }
    assert_eq!(FrameType::from_u8(0x9), FrameType::Continuation);
    assert_eq!(FrameType::from_u8(0xa), FrameType::Unknown(0xa));
    for code in (0..20u32).chain([0xdead_beef, u32::MAX]) {
        assert_eq!(ErrorCode::from_u32(code).to_u32(), code);
    }
    assert_eq!(ErrorCode::from_u32(0xd), ErrorCode::Http11Required);
    assert_eq!(ErrorCode::from_u32(0xe), ErrorCode::Unknown(0xe));
    assert_eq!(ErrorCode::FrameSizeError.name(), "FRAME_SIZE_ERROR");
}

#[test]
fn error_display_names_code_and_stream() {
    let conn = parse_frame(&raw(0x6, 0, 0, b"1"), DEFAULT_MAX_FRAME_SIZE).unwrap_err();
    assert_eq!(
        conn.to_string(),
        "HTTP/2 connection error FRAME_SIZE_ERROR: PING payload is not 8 bytes"
    );
    let stream = parse_frame(&raw(0x8, 0, 5, &[0; 4]), DEFAULT_MAX_FRAME_SIZE).unwrap_err();
    assert_eq!(
        stream.to_string(),
        "HTTP/2 stream 5 error PROTOCOL_ERROR: WINDOW_UPDATE increment is 0"
    );
    let err: crate::error::Error = stream.into();
    assert_eq!(err.exit_code(), 99);
}

#[test]
fn fuzz_entry_survives_samples() {
    let mut conversation = Vec::new();
    write_settings(&mut conversation, &[(3, 100)]);
    write_settings_ack(&mut conversation);
    write_headers(
        &mut conversation,
        1,
        &[0x88; 20_000],
        false,
        DEFAULT_MAX_FRAME_SIZE,
    );
    write_data(
        &mut conversation,
        1,
        &[7; 20_000],
        false,
        DEFAULT_MAX_FRAME_SIZE,
    );
    conversation.extend(raw(0x2, 0, 1, &[0, 0, 0, 1])); // stream error, then skipped
    write_window_update(&mut conversation, 0, 1);
    write_goaway(&mut conversation, 1, ErrorCode::NoError, b"done");
    conversation.extend(raw(0x6, 0, 1, b"12345678")); // connection error ends it
    let samples: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![0; 8],
        vec![0xff; 64],
        PREFACE.to_vec(),
        conversation,
    ];
    for sample in &samples {
        fuzz_frames(sample);
    }
}

#[path = "frame_violation_tests.rs"]
mod violations;
