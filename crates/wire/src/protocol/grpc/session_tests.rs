//! Scripted-server tests of the session: server frames built with the frame writers and the
//! HPACK encoder, fed as bytes; the session's output parsed back into frames. This file holds the
//! harness and the normal call flows; `errors_tests` and `flow_tests` hold the rest.

use super::fuzz::Owned;
use super::*;
use crate::protocol::grpc::frame::{
    write_data, write_frame_header, write_headers, write_ping, write_settings, FrameType,
    SettingsIter, ACK, END_HEADERS, END_STREAM, PADDED, PREFACE, SETTINGS_HEADER_TABLE_SIZE,
    SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_MAX_FRAME_SIZE,
};
use crate::protocol::grpc::hpack::Encoder;
use crate::protocol::grpc::message::write_message;

/// A request HEADERS block; its content does not matter to the session.
pub(super) const REQ: &[u8] = b"\x83\x86\x84";

/// One frame of the session's output, copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Out {
    pub(super) kind: FrameType,
    pub(super) flags: u8,
    pub(super) stream: u32,
    pub(super) payload: Vec<u8>,
}

/// A session plus the events it reported.
pub(super) struct Harness {
    pub(super) s: Session,
    pub(super) events: Vec<Owned>,
}

impl Harness {
    /// A session that has received the server's (empty) SETTINGS, its own output drained.
    pub(super) fn new() -> Harness {
        Harness::with(SessionConfig::default(), &[])
    }

    /// A session with `cfg` that has received SETTINGS with `params`, output drained.
    pub(super) fn with(cfg: SessionConfig, params: &[(u16, u32)]) -> Harness {
        let mut h = Harness {
            s: Session::new(cfg),
            events: Vec::new(),
        };
        let start = h.s.output().to_vec();
        assert!(start.starts_with(PREFACE));
        h.s.written(PREFACE.len());
        h.out();
        h.feed(&settings(params)).unwrap();
        assert!(h.s.peer_settings_received());
        h.out();
        h
    }

    /// Feeds server bytes in reads as large as the input space allows.
    pub(super) fn feed(&mut self, mut bytes: &[u8]) -> Result<(), ConnError> {
        let events = &mut self.events;
        loop {
            let space = self.s.input_space();
            let n = space.len().min(bytes.len());
            space[..n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            self.s
                .received(n, &mut |e| events.push(Owned::from_event(e)))?;
            if bytes.is_empty() {
                return Ok(());
            }
        }
    }

    /// Feeds server bytes one at a time.
    pub(super) fn feed_bytewise(&mut self, bytes: &[u8]) -> Result<(), ConnError> {
        for byte in bytes {
            self.feed(std::slice::from_ref(byte))?;
        }
        Ok(())
    }

    /// The events so far, cleared.
    pub(super) fn take(&mut self) -> Vec<Owned> {
        std::mem::take(&mut self.events)
    }

    /// The session's output so far as frames, marked written.
    pub(super) fn out(&mut self) -> Vec<Out> {
        let bytes = self.s.output().to_vec();
        self.s.written(bytes.len());
        let mut frames = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let header = FrameHeader::parse(rest).expect("whole frame header");
            let end = FRAME_HEADER_LEN + header.len as usize;
            frames.push(Out {
                kind: header.kind,
                flags: header.flags,
                stream: header.stream_id,
                payload: rest[FRAME_HEADER_LEN..end].to_vec(),
            });
            rest = &rest[end..];
        }
        frames
    }
}

pub(super) fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    write_settings(&mut out, params);
    out
}

pub(super) fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        Encoder::new().encode_literal_without_indexing(&mut out, name.as_bytes(), value.as_bytes());
    }
    out
}

pub(super) fn headers(stream: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
    let mut out = Vec::new();
    write_headers(&mut out, stream, &block(fields), end_stream, 16_384);
    out
}

pub(super) fn status_200(stream: u32) -> Vec<u8> {
    headers(
        stream,
        &[(":status", "200"), ("content-type", "application/grpc")],
        false,
    )
}

pub(super) fn trailers(stream: u32, status: &str) -> Vec<u8> {
    headers(stream, &[("grpc-status", status)], true)
}

pub(super) fn data(stream: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    let mut out = Vec::new();
    write_data(&mut out, stream, payload, end_stream, 16_384);
    out
}

/// A gRPC message: 5-byte prefix and `payload`.
pub(super) fn msg(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_message(&mut out, payload, false).unwrap();
    out
}

/// A whole successful unary response carrying `payload`.
pub(super) fn ok_response(stream: u32, payload: &[u8]) -> Vec<u8> {
    [
        status_200(stream),
        data(stream, &msg(payload), false),
        trailers(stream, "0"),
    ]
    .concat()
}

pub(super) fn frame(kind: FrameType, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame_header(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

fn message(stream: u32, payload: &[u8]) -> Owned {
    Owned::Message(stream, false, payload.to_vec())
}

#[test]
fn new_session_writes_preface_settings_and_window_update() {
    let mut s = Session::new(SessionConfig {
        recv_window: 1 << 20,
        max_message: 1024,
    });
    assert!(!s.peer_settings_received());
    let bytes = s.output().to_vec();
    assert!(bytes.starts_with(PREFACE));
    s.written(PREFACE.len());
    let mut h = Harness {
        s,
        events: Vec::new(),
    };
    let frames = h.out();
    assert_eq!(frames.len(), 2);
    assert_eq!((frames[0].kind, frames[0].flags), (FrameType::Settings, 0));
    let params: Vec<(u16, u32)> = SettingsIter::new(&frames[0].payload).collect();
    assert!(params.contains(&(SETTINGS_ENABLE_PUSH, 0)));
    assert!(params.contains(&(SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)));
    assert_eq!(frames[1].kind, FrameType::WindowUpdate);
    assert_eq!(frames[1].stream, 0);
    assert_eq!(frames[1].payload, ((1u32 << 20) - 65_535).to_be_bytes());
    assert!(h.s.output().is_empty());
}

#[test]
fn settings_are_acked_and_pings_answered() {
    let mut h = Harness::new();
    let mut ping = Vec::new();
    write_ping(&mut ping, *b"12345678");
    h.feed(&[settings(&[]), ping, frame(FrameType::Settings, ACK, 0, &[])].concat())
        .unwrap();
    let frames = h.out();
    assert_eq!(frames.len(), 2);
    assert_eq!(
        (frames[0].kind, frames[0].flags),
        (FrameType::Settings, ACK)
    );
    assert_eq!((frames[1].kind, frames[1].flags), (FrameType::Ping, ACK));
    assert_eq!(frames[1].payload, b"12345678");
    assert!(h.take().is_empty());
}

#[test]
fn unary_call_writes_headers_and_body_and_reports_the_response() {
    let mut h = Harness::new();
    let body = msg(b"request");
    let id = h.s.open(REQ, &body, true).unwrap();
    assert_eq!(id, 1);
    assert_eq!(h.s.open_streams(), 1);
    let frames = h.out();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].kind, FrameType::Headers);
    assert_eq!((frames[0].flags, frames[0].stream), (END_HEADERS, 1));
    assert_eq!(frames[0].payload, REQ);
    assert_eq!(frames[1].kind, FrameType::Data);
    assert_eq!(
        (frames[1].flags, frames[1].payload.clone()),
        (END_STREAM, body)
    );
    h.feed(&ok_response(1, b"reply")).unwrap();
    assert_eq!(
        h.take(),
        [
            Owned::Headers(1),
            message(1, b"reply"),
            Owned::Closed(1, StreamEnd::Ok)
        ]
    );
    assert_eq!(h.s.open_streams(), 0);
    // Nothing to answer: both sides ended cleanly.
    assert!(h.out().is_empty());
}

#[test]
fn empty_body_with_end_stream_puts_end_stream_on_headers() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let frames = h.out();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].flags, END_HEADERS | END_STREAM);
}

#[test]
fn stream_ids_are_odd_and_increasing() {
    let mut h = Harness::new();
    let ids: Vec<u32> = (0..4).map(|_| h.s.open(REQ, &[], true).unwrap()).collect();
    assert_eq!(ids, [1, 3, 5, 7]);
}

#[test]
fn message_split_byte_by_byte_and_over_frames() {
    let payload: Vec<u8> = (0..40u8).collect();
    let framed = msg(&payload);
    let mut bytes = status_200(1);
    for piece in framed.chunks(3) {
        bytes.extend(data(1, piece, false));
    }
    bytes.extend(trailers(1, "0"));
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    h.feed_bytewise(&bytes).unwrap();
    assert_eq!(
        h.take(),
        [
            Owned::Headers(1),
            message(1, &payload),
            Owned::Closed(1, StreamEnd::Ok)
        ]
    );
}

#[test]
fn several_messages_in_one_data_frame_and_one_across_two() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let stream: Vec<u8> = [msg(b"a"), msg(b""), msg(b"ccc"), msg(b"dddd")].concat();
    let (first, second) = stream.split_at(stream.len() - 3);
    let bytes = [
        status_200(1),
        data(1, first, false),
        data(1, second, false),
        trailers(1, "0"),
    ]
    .concat();
    h.feed(&bytes).unwrap();
    assert_eq!(
        h.take(),
        [
            Owned::Headers(1),
            message(1, b"a"),
            message(1, b""),
            message(1, b"ccc"),
            message(1, b"dddd"),
            Owned::Closed(1, StreamEnd::Ok)
        ]
    );
}

#[test]
fn compressed_flag_is_reported() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let mut body = Vec::new();
    write_message(&mut body, b"zz", true).unwrap();
    let head = [
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-encoding", "gzip"),
    ];
    let bytes = [
        headers(1, &head, false),
        data(1, &body, false),
        trailers(1, "0"),
    ];
    h.feed(&bytes.concat()).unwrap();
    assert_eq!(h.take()[1], Owned::Message(1, true, b"zz".to_vec()));
}

#[test]
fn padded_headers_and_data() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let head = block(&[(":status", "200"), ("content-type", "application/grpc")]);
    let padded_head = [&[4u8][..], &head, &[0; 4]].concat();
    let framed = msg(b"xy");
    let padded_data = [&[10u8][..], &framed, &[0; 10]].concat();
    let bytes = [
        frame(FrameType::Headers, END_HEADERS | PADDED, 1, &padded_head),
        frame(FrameType::Data, PADDED, 1, &padded_data),
        trailers(1, "0"),
    ]
    .concat();
    h.feed(&bytes).unwrap();
    assert_eq!(
        h.take(),
        [
            Owned::Headers(1),
            message(1, b"xy"),
            Owned::Closed(1, StreamEnd::Ok)
        ]
    );
}

#[test]
fn interleaved_streams_keep_their_own_messages() {
    let mut h = Harness::new();
    for _ in 0..3 {
        h.s.open(REQ, &[], true).unwrap();
    }
    let (m1, m3, m5) = (msg(b"one"), msg(b"three"), msg(b"five"));
    let bytes = [
        status_200(3),
        status_200(1),
        data(3, &m3[..4], false),
        status_200(5),
        data(1, &m1[..2], false),
        data(5, &m5, false),
        data(3, &m3[4..], false),
        trailers(5, "0"),
        data(1, &m1[2..], false),
        trailers(3, "0"),
        trailers(1, "0"),
    ]
    .concat();
    h.feed(&bytes).unwrap();
    assert_eq!(
        h.take(),
        [
            Owned::Headers(3),
            Owned::Headers(1),
            Owned::Headers(5),
            message(5, b"five"),
            message(3, b"three"),
            Owned::Closed(5, StreamEnd::Ok),
            message(1, b"one"),
            Owned::Closed(3, StreamEnd::Ok),
            Owned::Closed(1, StreamEnd::Ok),
        ]
    );
}

#[test]
fn trailers_only_error_reports_headers_then_the_decoded_status() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let fields = [
        (":status", "200"),
        ("grpc-status", "5"),
        ("grpc-message", "unknown model: 'm' (100%25 sure)"),
    ];
    h.feed(&headers(1, &fields, true)).unwrap();
    let end = StreamEnd::Grpc {
        code: 5,
        message: "unknown model: 'm' (100% sure)".into(),
    };
    assert_eq!(h.take(), [Owned::Headers(1), Owned::Closed(1, end)]);
}

#[test]
fn headers_split_into_continuations_are_reassembled() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let head = block(&[
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("x-long", &"v".repeat(300)),
    ]);
    let (a, rest) = head.split_at(100);
    let (b, c) = rest.split_at(100);
    let bytes = [
        frame(FrameType::Headers, 0, 1, a),
        frame(FrameType::Continuation, 0, 1, b),
        frame(FrameType::Continuation, END_HEADERS, 1, c),
        trailers(1, "0"),
    ]
    .concat();
    h.feed_bytewise(&bytes).unwrap();
    assert_eq!(
        h.take(),
        [Owned::Headers(1), Owned::Closed(1, StreamEnd::Ok)]
    );
}

#[test]
fn informational_headers_are_skipped() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    h.feed(
        &[
            headers(1, &[(":status", "100")], false),
            ok_response(1, b"k"),
        ]
        .concat(),
    )
    .unwrap();
    assert_eq!(h.take().len(), 3);
}

#[test]
fn bidirectional_stream_sends_and_receives_several_messages() {
    let mut h = Harness::new();
    let id = h.s.open(REQ, &msg(b"m1"), false).unwrap();
    h.s.send(id, &msg(b"m2"), false).unwrap();
    h.s.finish(id).unwrap();
    assert_eq!(
        h.s.send(id, &msg(b"m3"), false),
        Err(SendError::NotOpen(id))
    );
    assert_eq!(h.s.finish(id), Err(SendError::NotOpen(id)));
    let frames = h.out();
    let kinds: Vec<(FrameType, u8, usize)> = frames
        .iter()
        .map(|f| (f.kind, f.flags, f.payload.len()))
        .collect();
    assert_eq!(
        kinds,
        [
            (FrameType::Headers, END_HEADERS, REQ.len()),
            (FrameType::Data, 0, 7),
            (FrameType::Data, 0, 7),
            (FrameType::Data, END_STREAM, 0),
        ]
    );
    let bytes = [
        status_200(1),
        data(1, &msg(b"r1"), false),
        data(1, &msg(b"r2"), false),
        trailers(1, "0"),
    ]
    .concat();
    h.feed(&bytes).unwrap();
    assert_eq!(h.take().len(), 4);
}

#[test]
fn server_ending_a_stream_we_still_send_on_resets_our_side() {
    let mut h = Harness::new();
    let id = h.s.open(REQ, &msg(b"m1"), false).unwrap();
    h.out();
    h.feed(&headers(
        id,
        &[(":status", "200"), ("grpc-status", "0")],
        true,
    ))
    .unwrap();
    let frames = h.out();
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].kind, frames[0].stream),
        (FrameType::RstStream, id)
    );
    assert_eq!(frames[0].payload, ErrorCode::Cancel.to_u32().to_be_bytes());
    assert_eq!(h.s.send(id, b"x", true), Err(SendError::NotOpen(id)));
}

#[test]
fn cancel_resets_and_later_frames_are_ignored() {
    let mut h = Harness::new();
    let id = h.s.open(REQ, &[], true).unwrap();
    h.out();
    h.s.cancel(id);
    h.s.cancel(id);
    let frames = h.out();
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].kind, frames[0].stream),
        (FrameType::RstStream, id)
    );
    assert_eq!(h.s.open_streams(), 0);
    h.feed(&ok_response(id, b"late")).unwrap();
    assert!(h.take().is_empty());
}

#[test]
fn headers_of_closed_streams_still_update_the_hpack_table() {
    let mut h = Harness::new();
    let first = h.s.open(REQ, &[], true).unwrap();
    let second = h.s.open(REQ, &[], true).unwrap();
    h.s.cancel(first);
    // Literal with incremental indexing, new name: x-tag: abc goes into the dynamic table.
    let indexed = [&[0x40, 5][..], b"x-tag", &[3], b"abc"].concat();
    let closed_block = [block(&[(":status", "200")]), indexed].concat();
    // Index 62 is that entry; a decoder out of step would fail on it.
    let grpc = block(&[(":status", "200"), ("content-type", "application/grpc")]);
    let open_block = [grpc, vec![0x80 | 62]].concat();
    let bytes = [
        frame(FrameType::Headers, END_HEADERS, first, &closed_block),
        frame(FrameType::Headers, END_HEADERS, second, &open_block),
        trailers(second, "0"),
    ]
    .concat();
    h.feed(&bytes).unwrap();
    assert_eq!(
        h.take(),
        [Owned::Headers(second), Owned::Closed(second, StreamEnd::Ok)]
    );
}

#[test]
fn unknown_frames_and_priority_are_ignored() {
    let mut h = Harness::new();
    h.s.open(REQ, &[], true).unwrap();
    let bytes = [
        frame(FrameType::Unknown(0xfa), 0xff, 1, b"whatever"),
        frame(FrameType::Unknown(0x20), 0, 0, b""),
        frame(FrameType::Priority, 0, 1, &[0, 0, 0, 0, 16]),
        ok_response(1, b"ok"),
    ]
    .concat();
    h.feed(&bytes).unwrap();
    assert_eq!(h.take().len(), 3);
}

#[test]
fn max_concurrent_streams_limits_can_open() {
    let mut h = Harness::with(
        SessionConfig::default(),
        &[(SETTINGS_MAX_CONCURRENT_STREAMS, 2)],
    );
    assert!(h.s.can_open());
    h.s.open(REQ, &[], true).unwrap();
    h.s.open(REQ, &[], true).unwrap();
    assert!(!h.s.can_open());
    assert_eq!(h.s.open(REQ, &[], true), Err(SendError::CannotOpen));
    h.feed(&ok_response(1, b"")).unwrap();
    assert!(h.s.can_open());
    assert_eq!(h.s.open(REQ, &[], true), Ok(5));
}

#[test]
fn long_request_headers_use_continuation_at_the_peer_frame_size() {
    let mut h = Harness::with(
        SessionConfig::default(),
        &[(SETTINGS_MAX_FRAME_SIZE, 20_000)],
    );
    let long = vec![b'h'; 45_000];
    h.s.open(&long, &[], true).unwrap();
    let sizes: Vec<(FrameType, u8, usize)> = h
        .out()
        .iter()
        .map(|f| (f.kind, f.flags, f.payload.len()))
        .collect();
    assert_eq!(
        sizes,
        [
            (FrameType::Headers, END_STREAM, 20_000),
            (FrameType::Continuation, 0, 20_000),
            (FrameType::Continuation, END_HEADERS, 5_000),
        ]
    );
}

#[test]
fn smaller_peer_header_table_prefixes_one_size_update() {
    let mut h = Harness::with(SessionConfig::default(), &[(SETTINGS_HEADER_TABLE_SIZE, 0)]);
    h.s.open(REQ, &[], true).unwrap();
    h.s.open(REQ, &[], true).unwrap();
    let frames = h.out();
    assert_eq!(frames[0].payload, [&[0x20][..], REQ].concat());
    assert_eq!(frames[1].payload, REQ);
}

#[test]
fn received_at_gives_each_event_the_stream_offset_past_its_frame() {
    let mut h = Harness::new();
    let a = h.s.open(REQ, &[], true).unwrap();
    let b = h.s.open(REQ, &[], true).unwrap();
    // Two responses, their frames interleaved, read in three uneven reads.
    let frames = [
        status_200(a),
        status_200(b),
        data(b, &msg(b"bb"), false),
        data(a, &msg(b"a"), false),
        trailers(a, "0"),
        trailers(b, "0"),
    ];
    let base = settings(&[]).len() as u64;
    let mut want = Vec::new();
    let mut end = base;
    for f in &frames {
        end += f.len() as u64;
        want.push(end);
    }
    let bytes = frames.concat();
    let mut got: Vec<(Owned, u64)> = Vec::new();
    for part in [&bytes[..7], &bytes[7..40], &bytes[40..]] {
        let space = h.s.input_space();
        space[..part.len()].copy_from_slice(part);
        h.s.received_at(part.len(), &mut |e, at| {
            got.push((Owned::from_event(e), at))
        })
        .unwrap();
    }
    let at = |pick: &dyn Fn(&Owned) -> bool| -> Vec<u64> {
        got.iter()
            .filter(|(e, _)| pick(e))
            .map(|&(_, at)| at)
            .collect()
    };
    assert_eq!(at(&|e| *e == message(b, b"bb")), vec![want[2]]);
    assert_eq!(at(&|e| *e == message(a, b"a")), vec![want[3]]);
    // Every event lies at one of the frame ends, and they come in stream order.
    assert!(got.iter().all(|(_, at)| want.contains(at)), "{got:?}");
    assert!(got.windows(2).all(|w| w[0].1 <= w[1].1), "{got:?}");
    assert_eq!(got.last().unwrap().1, *want.last().unwrap(), "{got:?}");
}
