//! Fuzz entry point for the frame parser, shared by `fuzz/` and `tests/it/fuzz_corpus.rs`.

use super::{
    parse_frame, write_data, write_goaway, write_headers, write_ping, write_ping_ack,
    write_rst_stream, write_settings, write_settings_ack, write_window_update, Frame, FrameHeader,
    H2Error, DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER_LEN, MAX_FRAME_SIZE_LIMIT,
};

/// What one connection's bytes turned into, in order.
#[derive(Debug, PartialEq, Eq)]
enum Outcome<'a> {
    Frame(Frame<'a>),
    /// A stream error; the frame was skipped and parsing went on.
    StreamError(H2Error),
    /// A connection error; parsing stopped.
    ConnectionError(H2Error),
}

/// Parses `data` as successive reads of `steps[i]` bytes (cycled; 0 counts as 1), skipping
/// frames that raise stream errors, until a connection error or the end of `data`.
fn parse_stream<'a>(data: &'a [u8], steps: &[usize], max_frame_size: u32) -> Vec<Outcome<'a>> {
    let mut outcomes = Vec::new();
    let mut start = 0; // first unconsumed byte
    let mut received = 0; // bytes read from the "socket" so far
    let mut reads = 0;
    loop {
        let pending = &data[start..received];
        match parse_frame(pending, max_frame_size) {
            Ok(Some((frame, used))) => {
                let header = FrameHeader::parse(pending).expect("a frame has a header");
                assert_eq!(used, FRAME_HEADER_LEN + header.len as usize, "bad consumed");
                assert!(header.len <= max_frame_size, "oversized frame accepted");
                check_round_trip(&frame);
                outcomes.push(Outcome::Frame(frame));
                start += used;
            }
            Ok(None) if received == data.len() => break,
            Ok(None) => {
                let step = steps.get(reads % steps.len().max(1)).copied().unwrap_or(1);
                received = (received + step.max(1)).min(data.len());
                reads += 1;
            }
            Err(e) if e.stream != 0 => {
                let header = FrameHeader::parse(pending).expect("a stream error has a header");
                let skip = FRAME_HEADER_LEN + header.len as usize;
                assert!(
                    skip <= pending.len(),
                    "stream error before the frame was whole"
                );
                assert_eq!(
                    e.stream, header.stream_id,
                    "stream error names another stream"
                );
                outcomes.push(Outcome::StreamError(e));
                start += skip;
            }
            Err(e) => {
                outcomes.push(Outcome::ConnectionError(e));
                break;
            }
        }
    }
    outcomes
}

/// Re-encodes frames that the writers in `frame::write` can produce and checks they parse back
/// unchanged.
fn check_round_trip(frame: &Frame<'_>) {
    let max = MAX_FRAME_SIZE_LIMIT;
    let mut out = Vec::new();
    match *frame {
        Frame::Data {
            stream,
            end_stream,
            data,
        } if end_stream || !data.is_empty() => write_data(&mut out, stream, data, end_stream, max),
        Frame::Headers {
            stream,
            end_stream,
            end_headers: true,
            block,
        } => write_headers(&mut out, stream, block, end_stream, max),
        Frame::Settings { ack: true, .. } => write_settings_ack(&mut out),
        Frame::Settings {
            ack: false,
            ref params,
        } => write_settings(&mut out, &params.clone().collect::<Vec<_>>()),
        Frame::Ping { ack: true, data } => write_ping_ack(&mut out, data),
        Frame::Ping { ack: false, data } => write_ping(&mut out, data),
        Frame::GoAway {
            last_stream,
            error_code,
            debug,
        } if debug.len() <= DEFAULT_MAX_FRAME_SIZE as usize - 8 => {
            write_goaway(&mut out, last_stream, error_code, debug)
        }
        Frame::WindowUpdate { stream, increment } => {
            write_window_update(&mut out, stream, increment)
        }
        Frame::RstStream { stream, error_code } => write_rst_stream(&mut out, stream, error_code),
        _ => return,
    }
    match parse_frame(&out, max) {
        Ok(Some((again, used))) => {
            assert_eq!(&again, frame, "frame changed in a write/parse round trip");
            assert_eq!(used, out.len(), "writer produced more than one frame");
        }
        other => panic!("written frame does not parse back: {other:?}"),
    }
}

/// Parses `data` as the bytes a server sent on one HTTP/2 connection (after the preface), fed
/// whole, byte by byte and in reads whose sizes come from the data itself, with the default
/// and the largest max frame size. Panics only if the ways of feeding disagree or an internal
/// invariant breaks (a bug to report).
pub fn fuzz_frames(data: &[u8]) {
    let split_steps: Vec<usize> = data
        .iter()
        .take(32)
        .map(|&b| usize::from(b % 29) + 1)
        .collect();
    for max_frame_size in [DEFAULT_MAX_FRAME_SIZE, MAX_FRAME_SIZE_LIMIT] {
        let whole = parse_stream(data, &[data.len()], max_frame_size);
        let split = parse_stream(data, &split_steps, max_frame_size);
        assert_eq!(whole, split, "split feeding differs from whole feeding");
        if data.len() <= 8192 {
            let bytewise = parse_stream(data, &[1], max_frame_size);
            assert_eq!(whole, bytewise, "byte-by-byte feeding differs");
        }
    }
}
