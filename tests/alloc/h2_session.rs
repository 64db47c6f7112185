//! Proves the HTTP/2 session's per-call path does not allocate: after a warm-up, 10,000 calls
//! (four in flight at a time) against scripted server bytes cost zero allocations on the
//! calling thread. The binary's counting allocator counts per thread.

use crate::counting;
use inferperf::protocol::grpc::frame::{
    write_data, write_headers, write_settings, write_window_update, FRAME_HEADER_LEN,
};
use inferperf::protocol::grpc::hpack::Encoder;
use inferperf::protocol::grpc::message::write_message;
use inferperf::protocol::grpc::session::{Event, Session, SessionConfig};

/// Calls answered per round.
const IN_FLIGHT: usize = 4;

/// One server response (headers, one message, trailers, and a connection WINDOW_UPDATE
/// returning the request's bytes) for stream 1, and the offsets of its frame headers so the
/// stream id can be patched in place.
fn response_template(request_len: u32) -> (Vec<u8>, Vec<usize>) {
    let enc = Encoder::new();
    let mut head = Vec::new();
    enc.encode_literal_without_indexing(&mut head, b":status", b"200");
    enc.encode_literal_without_indexing(&mut head, b"content-type", b"application/grpc");
    let mut trailers = Vec::new();
    enc.encode_literal_without_indexing(&mut trailers, b"grpc-status", b"0");
    let mut message = Vec::new();
    write_message(&mut message, &[7; 300], false).unwrap();
    let mut out = Vec::new();
    let mut stream_frames = Vec::new();
    stream_frames.push(out.len());
    write_headers(&mut out, 1, &head, false, 16_384);
    stream_frames.push(out.len());
    write_data(&mut out, 1, &message, false, 16_384);
    stream_frames.push(out.len());
    write_headers(&mut out, 1, &trailers, true, 16_384);
    write_window_update(&mut out, 0, request_len);
    (out, stream_frames)
}

/// Opens `IN_FLIGHT` calls, answers them all, and returns how many ended OK.
fn round(
    session: &mut Session,
    request: &[u8],
    template: &(Vec<u8>, Vec<usize>),
    replies: &mut Vec<u8>,
) -> usize {
    replies.clear();
    for _ in 0..IN_FLIGHT {
        let id = session.open(b"\x83\x86", request, true).unwrap();
        let start = replies.len();
        replies.extend_from_slice(&template.0);
        for &offset in &template.1 {
            let at = start + offset + 5;
            replies[at..at + 4].copy_from_slice(&id.to_be_bytes());
        }
    }
    let written = session.output().len();
    session.written(written);
    let mut ok = 0;
    let mut rest = &replies[..];
    while !rest.is_empty() {
        let space = session.input_space();
        let n = space.len().min(rest.len());
        space[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        let mut on = |e: Event<'_>| {
            if let Event::Closed { end, .. } = e {
                ok += usize::from(end.is_ok());
            }
        };
        session.received(n, &mut on).unwrap();
    }
    ok
}

#[test]
fn ten_thousand_calls_allocate_nothing_after_warm_up() {
    let _serial = counting::serial();
    let mut request = Vec::new();
    write_message(&mut request, &[1; 200], false).unwrap();
    let template = response_template(u32::try_from(request.len()).unwrap());
    assert_eq!(template.1.len() * FRAME_HEADER_LEN, 27);
    let mut replies = Vec::with_capacity(IN_FLIGHT * template.0.len());
    let mut session = Session::new(SessionConfig {
        recv_window: 1 << 20,
        max_message: 1 << 20,
    });
    let mut preface = Vec::new();
    write_settings(&mut preface, &[]);
    let space = session.input_space();
    space[..preface.len()].copy_from_slice(&preface);
    session.received(preface.len(), &mut |_| {}).unwrap();
    for _ in 0..100 {
        assert_eq!(
            round(&mut session, &request, &template, &mut replies),
            IN_FLIGHT
        );
    }
    let before = counting::thread_allocs();
    let mut ok = 0;
    for _ in 0..10_000 / IN_FLIGHT {
        ok += round(&mut session, &request, &template, &mut replies);
    }
    let used = counting::thread_allocs() - before;
    assert_eq!(ok, 10_000);
    assert_eq!(used, 0, "allocations in steady state");
    assert_eq!(session.open_streams(), 0);
}
