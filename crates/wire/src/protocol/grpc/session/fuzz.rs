//! Fuzz entry point for the session, shared by `fuzz/` and `tests/it/fuzz_corpus.rs`: server
//! bytes in, checked events and output out.

use super::{ConnError, Event, Session, SessionConfig, StreamEnd};
use crate::protocol::grpc::frame::{parse_frame, MAX_FRAME_SIZE_LIMIT, PREFACE};

/// An event with its data copied out of the session, for comparing runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Owned {
    Headers(u32),
    Message(u32, bool, Vec<u8>),
    Closed(u32, StreamEnd),
    /// `received` failed with this connection error.
    Failed(ConnError),
}

impl Owned {
    pub(super) fn from_event(event: Event<'_>) -> Owned {
        match event {
            Event::Headers { stream } => Owned::Headers(stream),
            Event::Message {
                stream,
                compressed,
                data,
            } => Owned::Message(stream, compressed, data.to_vec()),
            Event::Closed { stream, end } => Owned::Closed(stream, end),
        }
    }
}

/// Request HEADERS block used by the fuzz runs (any bytes do: the server side is scripted).
const FUZZ_HEADERS: &[u8] = b"\x83\x86";
/// Largest response message the fuzzed session accepts (bytes): small, to reach the limit.
const FUZZ_MAX_MESSAGE: usize = 4096;

/// Feeds `data` to a fresh session as server bytes, in reads of `steps[i]` bytes (cycled;
/// 0 counts as 1), then EOF. Three streams are open: a unary call, a call whose 100 KB body
/// waits for window updates, and a bidirectional stream. Returns every event in order.
fn run(data: &[u8], steps: &[usize]) -> Vec<Owned> {
    let mut session = Session::new(SessionConfig {
        recv_window: 65_535,
        max_message: FUZZ_MAX_MESSAGE,
    });
    let big_body = vec![0u8; 100_000];
    let opened = [
        session.open(FUZZ_HEADERS, b"\0\0\0\0\x01x", true),
        session.open(FUZZ_HEADERS, &big_body, true),
        session.open(FUZZ_HEADERS, b"\0\0\0\0\0", false),
    ]
    .map(|id| id.expect("a fresh session opens streams"));
    let start = session.output();
    check_output(
        start
            .strip_prefix(PREFACE)
            .expect("output starts with the preface"),
    );
    session.written(start.len());
    let mut events = Vec::new();
    let mut fed = 0;
    for read in 0.. {
        if fed == data.len() || session.failure().is_some() {
            break;
        }
        let step = steps.get(read % steps.len().max(1)).copied().unwrap_or(1);
        let space = session.input_space();
        let n = step.max(1).min(space.len()).min(data.len() - fed);
        space[..n].copy_from_slice(&data[fed..fed + n]);
        fed += n;
        if let Err(e) = session.received(n, &mut |ev| events.push(Owned::from_event(ev))) {
            events.push(Owned::Failed(e));
        }
        let out = session.output();
        check_output(out);
        session.written(out.len());
    }
    session.eof(&mut |ev| events.push(Owned::from_event(ev)));
    assert_eq!(session.open_streams(), 0, "streams left open after EOF");
    assert!(!session.can_open(), "a closed session may not open streams");
    check_stream_lives(&events, &opened);
    events
}

/// The session's output must be whole, valid frames.
fn check_output(out: &[u8]) {
    let mut rest = out;
    while !rest.is_empty() {
        match parse_frame(rest, MAX_FRAME_SIZE_LIMIT) {
            Ok(Some((_, used))) => rest = &rest[used..],
            other => panic!("session wrote a bad frame: {other:?}"),
        }
    }
}

/// Each opened stream is closed exactly once; nothing is reported for it after that, and a
/// message never comes before its headers.
fn check_stream_lives(events: &[Owned], opened: &[u32]) {
    for &id in opened {
        let mut headers = false;
        let mut closed = false;
        for event in events {
            let (stream, is_message) = match event {
                Owned::Headers(s) => (*s, false),
                Owned::Message(s, _, _) => (*s, true),
                Owned::Closed(s, _) => (*s, false),
                Owned::Failed(_) => continue,
            };
            if stream != id {
                continue;
            }
            assert!(!closed, "event for stream {id} after it closed");
            match event {
                Owned::Headers(_) => {
                    assert!(!headers, "two response heads on stream {id}");
                    headers = true;
                }
                Owned::Closed(..) => closed = true,
                _ => assert!(!is_message || headers, "message before headers on {id}"),
            }
        }
        assert!(closed, "stream {id} never closed");
    }
    for event in events {
        if let Owned::Headers(s) | Owned::Message(s, _, _) | Owned::Closed(s, _) = event {
            assert!(opened.contains(s), "event for a stream never opened: {s}");
        }
    }
}

/// Feeds `data` as the server's bytes on one connection, whole, in reads whose sizes come
/// from the data and (when short) byte by byte; every way must give the same events, and
/// the invariants of `run` must hold. Panics only on a session bug.
pub fn fuzz_session(data: &[u8]) {
    let split_steps: Vec<usize> = data
        .iter()
        .take(32)
        .map(|&b| usize::from(b % 37) + 1)
        .collect();
    let whole = run(data, &[usize::MAX]);
    let split = run(data, &split_steps);
    assert_eq!(whole, split, "split feeding differs from whole feeding");
    if data.len() <= 4096 {
        let bytewise = run(data, &[1]);
        assert_eq!(whole, bytewise, "byte-by-byte feeding differs");
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ok_response, settings};
    use super::*;
    use crate::protocol::grpc::frame::{write_goaway, ErrorCode};

    #[test]
    fn runs_report_real_events_and_agree_across_splits() {
        let mut goaway = Vec::new();
        write_goaway(&mut goaway, 1, ErrorCode::NoError, b"");
        let bytes = [settings(&[]), ok_response(1, b"hi"), goaway].concat();
        let events = run(&bytes, &[usize::MAX]);
        assert_eq!(
            events,
            [
                Owned::Headers(1),
                Owned::Message(1, false, b"hi".to_vec()),
                Owned::Closed(1, StreamEnd::Ok),
                Owned::Closed(5, StreamEnd::Refused),
                Owned::Closed(3, StreamEnd::Refused),
            ]
        );
        assert_eq!(run(&bytes, &[1]), events);
        assert_eq!(run(&bytes, &[3, 50, 7]), events);
        fuzz_session(&bytes);
    }
}
