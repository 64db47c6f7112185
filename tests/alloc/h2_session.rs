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

/// nginx's gRPC response head as captured from its ModelInfer answers: `:status` indexed, then
/// `server`, `date` and `content-type` as Huffman literals with incremental indexing (each
/// response inserts three dynamic table entries) and `content-length` without indexing.
const NGINX_HEAD: &str = "887684aa6355e76197df3dbf4a09c5349fba82009c500fdc65db8d014c5a37ff\
                          5f8b1d75d0620d263d4c4d6564008a21ea496a4ad416a9933f82081a";

/// A response head that leaves the dynamic table alone: plain literals without indexing.
fn plain_head() -> Vec<u8> {
    let enc = Encoder::new();
    let mut head = Vec::new();
    enc.encode_literal_without_indexing(&mut head, b":status", b"200");
    enc.encode_literal_without_indexing(&mut head, b"content-type", b"application/grpc");
    head
}

/// One server response (`head`, one message, trailers, and a connection WINDOW_UPDATE
/// returning the request's bytes) for stream 1, and the offsets of its frame headers so the
/// stream id can be patched in place.
fn response_template(request_len: u32, head: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let enc = Encoder::new();
    let mut trailers = Vec::new();
    enc.encode_literal_without_indexing(&mut trailers, b"grpc-status", b"0");
    let mut message = Vec::new();
    write_message(&mut message, &[7; 300], false).unwrap();
    let mut out = Vec::new();
    let mut stream_frames = Vec::new();
    stream_frames.push(out.len());
    write_headers(&mut out, 1, head, false, 16_384);
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
    ten_thousand_calls(&plain_head());
}

/// The same with nginx's head: the HPACK decoder's table evicts as many entries as each
/// response inserts, and the inserts reuse the evicted entries' buffers.
#[test]
fn ten_thousand_calls_with_table_inserts_allocate_nothing_after_warm_up() {
    let head: Vec<u8> = (0..NGINX_HEAD.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&NGINX_HEAD[i..i + 2], 16).unwrap())
        .collect();
    ten_thousand_calls(&head);
}

/// Runs 10,000 calls after a warm-up, each answered with `head`, and asserts that they all end
/// OK without allocating.
fn ten_thousand_calls(head: &[u8]) {
    let _serial = counting::serial();
    let mut request = Vec::new();
    write_message(&mut request, &[1; 200], false).unwrap();
    let template = response_template(u32::try_from(request.len()).unwrap(), head);
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
