//! Scripted-server tests of flow control in both directions.

use super::fuzz::Owned;
use super::tests::{frame, settings, status_200, Harness, Out, REQ};
use super::*;
use crate::protocol::grpc::frame::{FrameType, END_STREAM, PADDED, SETTINGS_INITIAL_WINDOW_SIZE};

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(FrameType::WindowUpdate, 0, stream, &increment.to_be_bytes())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// DATA payload bytes per stream in `frames`, and whether the last DATA of each ended it.
fn data_of(frames: &[Out], stream: u32) -> (Vec<u8>, bool) {
    let mut bytes = Vec::new();
    let mut ended = false;
    for f in frames
        .iter()
        .filter(|f| f.kind == FrameType::Data && f.stream == stream)
    {
        assert!(!ended, "DATA after END_STREAM");
        assert!(f.payload.len() <= 16_384, "DATA over the peer's frame size");
        bytes.extend_from_slice(&f.payload);
        ended = f.flags & END_STREAM != 0;
    }
    (bytes, ended)
}

#[test]
fn send_stalls_on_both_windows_and_resumes_on_window_update() {
    let mut h = Harness::new();
    let body = pattern(100_000);
    let id = h.s.open(REQ, &body, true).unwrap();
    let (mut sent, ended) = data_of(&h.out(), id);
    assert_eq!((sent.len(), ended), (65_535, false));
    // The stream window alone is not enough: the connection window is spent too.
    h.feed(&window_update(id, 50_000)).unwrap();
    assert!(data_of(&h.out(), id).0.is_empty());
    h.feed(&window_update(0, 20_000)).unwrap();
    let (more, ended) = data_of(&h.out(), id);
    assert_eq!((more.len(), ended), (20_000, false));
    sent.extend(more);
    h.feed(&window_update(0, 50_000)).unwrap();
    let (rest, ended) = data_of(&h.out(), id);
    assert_eq!((rest.len(), ended), (14_465, true));
    sent.extend(rest);
    assert_eq!(sent, body);
    h.feed(&window_update(0, 1000)).unwrap();
    assert!(h.out().is_empty(), "nothing left to send");
}

#[test]
fn initial_window_setting_changes_open_streams_windows() {
    let mut h = Harness::new();
    let body = pattern(100_000);
    let id = h.s.open(REQ, &body, true).unwrap();
    let mut sent = data_of(&h.out(), id).0;
    h.feed(&window_update(0, 1_000_000)).unwrap();
    assert!(h.out().is_empty(), "stream window is spent");
    // Growing the initial window by 4465 bytes lets exactly that much more go.
    h.feed(&settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 70_000)]))
        .unwrap();
    let frames = h.out();
    assert_eq!(frames[0].kind, FrameType::Settings, "ACK first");
    let more = data_of(&frames, id).0;
    assert_eq!(more.len(), 4_465);
    sent.extend(more);
    // Shrinking makes the window negative: an update that only brings it to 0 sends nothing.
    h.feed(&settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]))
        .unwrap();
    h.feed(&window_update(id, 70_000)).unwrap();
    assert!(data_of(&h.out(), id).0.is_empty());
    h.feed(&settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 100_000)]))
        .unwrap();
    let (rest, ended) = data_of(&h.out(), id);
    assert!(ended);
    sent.extend(rest);
    assert_eq!(sent, body);
    // A new stream starts with the new initial window.
    let next = h.s.open(REQ, &pattern(120_000), true).unwrap();
    assert_eq!(data_of(&h.out(), next).0.len(), 100_000);
}

#[test]
fn window_overflows_are_flow_control_errors() {
    // Through SETTINGS: a connection error.
    let mut h = Harness::new();
    let id = h.s.open(REQ, &[], false).unwrap();
    h.feed(&window_update(id, 10)).unwrap();
    let err = h
        .feed(&settings(&[(
            SETTINGS_INITIAL_WINDOW_SIZE,
            MAX_WINDOW_SIZE,
        )]))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::FlowControlError);
    // Through a stream's WINDOW_UPDATE: that stream is reset, the connection lives on.
    let mut h = Harness::new();
    let id = h.s.open(REQ, &[], false).unwrap();
    h.out();
    h.feed(&window_update(id, MAX_WINDOW_SIZE)).unwrap();
    let events = h.take();
    assert!(matches!(
        &events[..],
        [Owned::Closed(1, StreamEnd::Protocol(_))]
    ));
    let frames = h.out();
    assert_eq!(frames[0].kind, FrameType::RstStream);
    assert_eq!(
        frames[0].payload,
        ErrorCode::FlowControlError.to_u32().to_be_bytes()
    );
    assert!(h.s.can_open());
}

#[test]
fn blocked_streams_share_the_connection_window_in_order() {
    let mut h = Harness::new();
    let bodies = [pattern(40_000), pattern(40_000), pattern(40_000)];
    let ids: Vec<u32> = bodies
        .iter()
        .map(|b| h.s.open(REQ, b, true).unwrap())
        .collect();
    let frames = h.out();
    assert_eq!(data_of(&frames, ids[0]), (bodies[0].clone(), true));
    assert_eq!(data_of(&frames, ids[1]).0.len(), 25_535);
    assert!(data_of(&frames, ids[2]).0.is_empty());
    h.feed(&window_update(0, 100_000)).unwrap();
    let frames = h.out();
    assert_eq!(data_of(&frames, ids[1]).0, bodies[1][25_535..]);
    assert_eq!(data_of(&frames, ids[2]), (bodies[2].clone(), true));
    let first_of = |id| frames.iter().position(|f| f.stream == id);
    assert!(
        first_of(ids[1]) < first_of(ids[2]),
        "oldest blocked stream first"
    );
}

#[test]
fn finish_and_send_queue_behind_pending_bytes() {
    let mut h = Harness::new();
    let first = pattern(70_000);
    let id = h.s.open(REQ, &first, false).unwrap();
    h.s.send(id, b"tail", false).unwrap();
    h.s.finish(id).unwrap();
    let mut sent = data_of(&h.out(), id).0;
    h.feed(&[window_update(0, 10_000), window_update(id, 10_000)].concat())
        .unwrap();
    let frames = h.out();
    let (rest, ended) = data_of(&frames, id);
    assert!(ended, "END_STREAM rides on the last pending byte");
    let data_frames = frames.iter().filter(|f| f.kind == FrameType::Data).count();
    assert_eq!(data_frames, 1, "no separate empty END_STREAM frame");
    sent.extend(rest);
    assert_eq!(sent, [&first[..], b"tail"].concat());
}

#[test]
fn cancelled_blocked_stream_sends_nothing_more() {
    let mut h = Harness::new();
    let id = h.s.open(REQ, &pattern(100_000), true).unwrap();
    h.out();
    h.s.cancel(id);
    h.feed(&[window_update(0, 50_000), window_update(id, 50_000)].concat())
        .unwrap();
    let frames = h.out();
    assert!(
        frames.iter().all(|f| f.kind != FrameType::Data),
        "{frames:?}"
    );
}

#[test]
fn receive_windows_are_replenished_at_half_counting_padding() {
    let mut h = Harness::with(
        SessionConfig {
            recv_window: 65_535,
            max_message: 1 << 20,
        },
        &[],
    );
    let id = h.s.open(REQ, &[], true).unwrap();
    h.feed(&status_200(id)).unwrap();
    assert_eq!(h.take(), [Owned::Headers(id)]);
    h.out();
    // A 200,000-byte message keeps the stream in its body; each frame has 16,384 bytes of
    // flow-controlled payload, padding included.
    let mut prefix = vec![0u8];
    prefix.extend_from_slice(&200_000u32.to_be_bytes());
    let plain = [&prefix[..], &[1; 16_379]].concat();
    let padded = [&[200u8][..], &[2; 16_183], &[0; 200]].concat();
    assert_eq!((plain.len(), padded.len()), (16_384, 16_384));
    h.feed(&frame(FrameType::Data, 0, id, &plain)).unwrap();
    h.feed(&frame(FrameType::Data, PADDED, id, &padded))
        .unwrap();
    assert!(h.out().is_empty(), "half the window is not used yet");
    h.feed(&frame(FrameType::Data, 0, id, &[3; 16_384]))
        .unwrap();
    let updates: Vec<(u32, Vec<u8>)> = h
        .out()
        .into_iter()
        .filter(|f| f.kind == FrameType::WindowUpdate)
        .map(|f| (f.stream, f.payload))
        .collect();
    let raise = 49_152u32.to_be_bytes().to_vec();
    assert_eq!(updates, [(0, raise.clone()), (id, raise)]);
    assert!(h.take().is_empty(), "message not complete yet");
}
