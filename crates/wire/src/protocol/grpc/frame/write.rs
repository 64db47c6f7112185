//! Frame writers: each appends whole frames to the connection's write buffer. Arguments come
//! from the client's own session (not from the peer), so out-of-range values are caller bugs: they
//! are caught by debug assertions and clamped or masked in release builds rather than panicking.

use super::{
    ErrorCode, FrameType, ACK, DEFAULT_MAX_FRAME_SIZE, END_HEADERS, END_STREAM, FRAME_HEADER_LEN,
    MAX_FRAME_SIZE_LIMIT, MAX_WINDOW_SIZE, PREFACE, STREAM_ID_MASK,
};

/// Appends the 9-byte header of a frame with a `len`-byte payload (`len` < 2^24).
pub fn write_frame_header(out: &mut Vec<u8>, len: usize, kind: FrameType, flags: u8, stream: u32) {
    debug_assert!(
        len <= MAX_FRAME_SIZE_LIMIT as usize,
        "frame payload too long"
    );
    debug_assert!(stream <= STREAM_ID_MASK, "stream id uses the reserved bit");
    let len = len.min(MAX_FRAME_SIZE_LIMIT as usize) as u32;
    out.reserve(FRAME_HEADER_LEN + len as usize);
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind.to_u8());
    out.push(flags);
    out.extend_from_slice(&(stream & STREAM_ID_MASK).to_be_bytes());
}

/// Appends the client connection preface; a SETTINGS frame must follow it.
pub fn write_preface(out: &mut Vec<u8>) {
    out.extend_from_slice(PREFACE);
}

/// Appends one SETTINGS frame carrying `params` as `(identifier, value)` pairs.
pub fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    write_frame_header(out, params.len() * 6, FrameType::Settings, 0, 0);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends an empty SETTINGS frame with ACK, owed for every SETTINGS the peer sends.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_frame_header(out, 0, FrameType::Settings, ACK, 0);
}

/// Appends a PING carrying 8 opaque bytes that the peer echoes back.
pub fn write_ping(out: &mut Vec<u8>, data: [u8; 8]) {
    write_frame_header(out, 8, FrameType::Ping, 0, 0);
    out.extend_from_slice(&data);
}

/// Appends the PING ACK owed for a peer's PING, echoing its `data`.
pub fn write_ping_ack(out: &mut Vec<u8>, data: [u8; 8]) {
    write_frame_header(out, 8, FrameType::Ping, ACK, 0);
    out.extend_from_slice(&data);
}

/// Appends a WINDOW_UPDATE adding `increment` bytes (1..=2^31-1) to the window of `stream`
/// (0 = the connection window).
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    debug_assert!(
        (1..=MAX_WINDOW_SIZE).contains(&increment),
        "WINDOW_UPDATE increment out of range"
    );
    write_frame_header(out, 4, FrameType::WindowUpdate, 0, stream);
    out.extend_from_slice(&(increment & MAX_WINDOW_SIZE).to_be_bytes());
}

/// Appends a HEADERS frame carrying the HPACK `block`, followed by CONTINUATION frames when
/// the block is longer than `max_frame` (the peer's SETTINGS_MAX_FRAME_SIZE, bytes). END_STREAM
/// goes on the HEADERS frame, END_HEADERS on the last frame.
pub fn write_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: u32,
) {
    let max = legal_frame_size(max_frame);
    let mut chunks = block.chunks(max).peekable();
    let first = chunks.next().unwrap_or_default();
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if chunks.peek().is_none() {
        flags |= END_HEADERS;
    }
    write_frame_header(out, first.len(), FrameType::Headers, flags, stream);
    out.extend_from_slice(first);
    while let Some(chunk) = chunks.next() {
        let flags = if chunks.peek().is_none() {
            END_HEADERS
        } else {
            0
        };
        write_frame_header(out, chunk.len(), FrameType::Continuation, flags, stream);
        out.extend_from_slice(chunk);
    }
}

/// Appends `payload` as DATA frames of at most `max_frame` bytes (the peer's
/// SETTINGS_MAX_FRAME_SIZE), END_STREAM on the last. An empty payload writes one empty frame
/// if `end_stream`, else nothing. Flow-control windows are the session's concern.
pub fn write_data(
    out: &mut Vec<u8>,
    stream: u32,
    payload: &[u8],
    end_stream: bool,
    max_frame: u32,
) {
    if payload.is_empty() {
        if end_stream {
            write_frame_header(out, 0, FrameType::Data, END_STREAM, stream);
        }
        return;
    }
    let mut chunks = payload.chunks(legal_frame_size(max_frame)).peekable();
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let flags = if last && end_stream { END_STREAM } else { 0 };
        write_frame_header(out, chunk.len(), FrameType::Data, flags, stream);
        out.extend_from_slice(chunk);
    }
}

/// Appends an RST_STREAM closing `stream` with `code`.
pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    write_frame_header(out, 4, FrameType::RstStream, 0, stream);
    out.extend_from_slice(&code.to_u32().to_be_bytes());
}

/// Appends a GOAWAY naming the highest peer-initiated stream processed (`last_stream`), the
/// reason and optional opaque debug bytes. The payload must fit the peer's max frame size
/// (16 KiB minimum), so debug data beyond that, less the 8 fixed bytes, is cut off.
pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode, debug: &[u8]) {
    let debug = &debug[..debug.len().min(DEFAULT_MAX_FRAME_SIZE as usize - 8)];
    write_frame_header(out, 8 + debug.len(), FrameType::GoAway, 0, 0);
    out.extend_from_slice(&(last_stream & STREAM_ID_MASK).to_be_bytes());
    out.extend_from_slice(&code.to_u32().to_be_bytes());
    out.extend_from_slice(debug);
}

/// `max_frame` clamped to the legal SETTINGS_MAX_FRAME_SIZE range, in bytes.
fn legal_frame_size(max_frame: u32) -> usize {
    debug_assert!(
        (DEFAULT_MAX_FRAME_SIZE..=MAX_FRAME_SIZE_LIMIT).contains(&max_frame),
        "max frame size outside 16384..=16777215"
    );
    max_frame.clamp(DEFAULT_MAX_FRAME_SIZE, MAX_FRAME_SIZE_LIMIT) as usize
}
