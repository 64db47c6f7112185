//! HTTP/2 frame codec (RFC 9113 §4 and §6) for the gRPC client: a zero-copy parser that
//! borrows payloads from the connection's read buffer and writers that append to a write
//! buffer. No sockets and no HPACK here: header blocks pass through as opaque bytes.
//!
//! Errors carry the RFC error code and whether they are connection or stream errors, so the
//! session can answer with GOAWAY or RST_STREAM.

mod error;
mod fuzz;
mod write;
pub use error::{ErrorCode, H2Error};
pub use fuzz::fuzz_frames;
pub use write::{
    write_data, write_frame_header, write_goaway, write_headers, write_ping, write_ping_ack,
    write_preface, write_rst_stream, write_settings, write_settings_ack, write_window_update,
};

/// The client connection preface (RFC 9113 §3.4), sent before the first SETTINGS frame.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Bytes in a frame header: 24-bit length, type, flags, 31-bit stream id.
pub const FRAME_HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE before any SETTINGS arrive, and its lowest legal value (bytes).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// Highest legal SETTINGS_MAX_FRAME_SIZE (2^24 - 1 bytes).
pub const MAX_FRAME_SIZE_LIMIT: u32 = (1 << 24) - 1;
/// Largest flow-control window and WINDOW_UPDATE increment (2^31 - 1 bytes).
pub const MAX_WINDOW_SIZE: u32 = (1 << 31) - 1;
/// Stream ids are 31 bits; the top bit is reserved and ignored on receipt.
const STREAM_ID_MASK: u32 = (1 << 31) - 1;

/// Flag bit on DATA and HEADERS: the sender's last frame on this stream.
pub const END_STREAM: u8 = 0x1;
/// Flag bit on SETTINGS and PING: this frame acknowledges the peer's.
pub const ACK: u8 = 0x1;
/// Flag bit on HEADERS, PUSH_PROMISE and CONTINUATION: the field block is complete.
pub const END_HEADERS: u8 = 0x4;
/// Flag bit on DATA, HEADERS and PUSH_PROMISE: a pad-length byte leads the payload.
pub const PADDED: u8 = 0x8;
/// Flag bit on HEADERS: a 5-byte priority block follows the pad length.
pub const PRIORITY: u8 = 0x20;

/// SETTINGS parameter identifiers (RFC 9113 §6.5.2).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Frame types of RFC 9113 §6; anything else is `Unknown` and must be ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    Data,
    Headers,
    Priority,
    RstStream,
    Settings,
    PushPromise,
    Ping,
    GoAway,
    WindowUpdate,
    Continuation,
    Unknown(u8),
}

impl FrameType {
    pub fn from_u8(byte: u8) -> Self {
        match byte {
            0x0 => FrameType::Data,
            0x1 => FrameType::Headers,
            0x2 => FrameType::Priority,
            0x3 => FrameType::RstStream,
            0x4 => FrameType::Settings,
            0x5 => FrameType::PushPromise,
            0x6 => FrameType::Ping,
            0x7 => FrameType::GoAway,
            0x8 => FrameType::WindowUpdate,
            0x9 => FrameType::Continuation,
            other => FrameType::Unknown(other),
        }
    }

    pub fn to_u8(self) -> u8 {
        match self {
            FrameType::Data => 0x0,
            FrameType::Headers => 0x1,
            FrameType::Priority => 0x2,
            FrameType::RstStream => 0x3,
            FrameType::Settings => 0x4,
            FrameType::PushPromise => 0x5,
            FrameType::Ping => 0x6,
            FrameType::GoAway => 0x7,
            FrameType::WindowUpdate => 0x8,
            FrameType::Continuation => 0x9,
            FrameType::Unknown(other) => other,
        }
    }
}

/// The fixed 9-byte header in front of every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length in bytes (24 bits on the wire).
    pub len: u32,
    pub kind: FrameType,
    pub flags: u8,
    /// Stream id with the reserved bit cleared.
    pub stream_id: u32,
}

impl FrameHeader {
    /// Reads a header from the first 9 bytes of `buf`; None if fewer are buffered.
    pub fn parse(buf: &[u8]) -> Option<FrameHeader> {
        let head: &[u8; FRAME_HEADER_LEN] = buf.get(..FRAME_HEADER_LEN)?.try_into().ok()?;
        Some(FrameHeader {
            len: u32::from_be_bytes([0, head[0], head[1], head[2]]),
            kind: FrameType::from_u8(head[3]),
            flags: head[4],
            stream_id: be_u32(&head[5..9]) & STREAM_ID_MASK,
        })
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// The parameters of a SETTINGS frame as `(identifier, value)` pairs, in wire order, unknown
/// identifiers included (the session ignores them). Values were range-checked by the parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsIter<'a> {
    rest: &'a [u8],
}

impl<'a> SettingsIter<'a> {
    /// Iterates over a payload whose length is a multiple of 6 (a trailing partial entry is
    /// ignored).
    pub fn new(payload: &'a [u8]) -> Self {
        SettingsIter { rest: payload }
    }
}

impl Iterator for SettingsIter<'_> {
    type Item = (u16, u32);

    fn next(&mut self) -> Option<(u16, u32)> {
        let entry = self.rest.get(..6)?;
        self.rest = &self.rest[6..];
        Some((
            u16::from_be_bytes([entry[0], entry[1]]),
            be_u32(&entry[2..6]),
        ))
    }
}

/// One decoded frame; slices borrow the buffer given to `parse_frame`, padding removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream: u32,
        end_stream: bool,
        data: &'a [u8],
    },
    /// HEADERS; any priority block (deprecated by RFC 9113) is validated and dropped.
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        block: &'a [u8],
    },
    Priority {
        stream: u32,
    },
    RstStream {
        stream: u32,
        error_code: ErrorCode,
    },
    Settings {
        ack: bool,
        params: SettingsIter<'a>,
    },
    PushPromise {
        stream: u32,
        end_headers: bool,
        promised_stream: u32,
        block: &'a [u8],
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        error_code: ErrorCode,
        debug: &'a [u8],
    },
    WindowUpdate {
        /// 0 for the connection window.
        stream: u32,
        /// Bytes added to the window, 1..=2^31-1.
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    /// A frame type this codec does not know; RFC 9113 §4.1 says to ignore it.
    Unknown {
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &'a [u8],
    },
}

/// Decodes the frame at the start of `buf`.
///
/// Returns `Ok(None)` while the frame is incomplete, else the frame and the bytes it used
/// (`FRAME_HEADER_LEN + len`). `max_frame_size` is the SETTINGS_MAX_FRAME_SIZE this endpoint
/// advertised (bytes); a longer frame is a FRAME_SIZE_ERROR as soon as its header arrives.
/// Every other check runs once the whole frame is buffered.
pub fn parse_frame(buf: &[u8], max_frame_size: u32) -> Result<Option<(Frame<'_>, usize)>, H2Error> {
    let Some(header) = FrameHeader::parse(buf) else {
        return Ok(None);
    };
    if header.len > max_frame_size {
        return Err(H2Error::connection(
            ErrorCode::FrameSizeError,
            "frame longer than SETTINGS_MAX_FRAME_SIZE",
        ));
    }
    // len < 2^24, so this cannot overflow.
    let total = FRAME_HEADER_LEN + header.len as usize;
    let Some(payload) = buf.get(FRAME_HEADER_LEN..total) else {
        return Ok(None);
    };
    let frame = decode_payload(&header, payload)?;
    Ok(Some((frame, total)))
}

/// Applies the per-type rules of RFC 9113 §6 to a complete payload.
fn decode_payload<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<Frame<'a>, H2Error> {
    let stream = h.stream_id;
    match h.kind {
        FrameType::Data => {
            require_stream(h, "DATA on stream 0")?;
            let data = strip_padding(h, payload, 0)?;
            Ok(Frame::Data {
                stream,
                end_stream: h.has(END_STREAM),
                data,
            })
        }
        FrameType::Headers => decode_headers(h, payload),
        FrameType::Priority => {
            require_stream(h, "PRIORITY on stream 0")?;
            if payload.len() != 5 {
                let msg = "PRIORITY payload is not 5 bytes";
                return Err(H2Error::stream(ErrorCode::FrameSizeError, stream, msg));
            }
            check_dependency(stream, payload)?;
            Ok(Frame::Priority { stream })
        }
        FrameType::RstStream => {
            require_stream(h, "RST_STREAM on stream 0")?;
            let code = exact_len::<4>(payload, "RST_STREAM payload is not 4 bytes")?;
            Ok(Frame::RstStream {
                stream,
                error_code: ErrorCode::from_u32(u32::from_be_bytes(code)),
            })
        }
        FrameType::Settings => decode_settings(h, payload),
        FrameType::PushPromise => decode_push_promise(h, payload),
        FrameType::Ping => {
            forbid_stream(h, "PING on a stream")?;
            let data = exact_len::<8>(payload, "PING payload is not 8 bytes")?;
            Ok(Frame::Ping {
                ack: h.has(ACK),
                data,
            })
        }
        FrameType::GoAway => decode_goaway(h, payload),
        FrameType::WindowUpdate => decode_window_update(h, payload),
        FrameType::Continuation => {
            require_stream(h, "CONTINUATION on stream 0")?;
            Ok(Frame::Continuation {
                stream,
                end_headers: h.has(END_HEADERS),
                block: payload,
            })
        }
        FrameType::Unknown(kind) => Ok(Frame::Unknown {
            kind,
            flags: h.flags,
            stream,
            payload,
        }),
    }
}

fn decode_headers<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<Frame<'a>, H2Error> {
    require_stream(h, "HEADERS on stream 0")?;
    let priority_len = if h.has(PRIORITY) { 5 } else { 0 };
    let fields = strip_padding(h, payload, priority_len)?;
    if h.has(PRIORITY) {
        let pad_len_bytes = usize::from(h.has(PADDED));
        // Escalated to a connection error: skipping this frame would leave the HPACK decoder
        // without its field block and out of step with the peer's encoder.
        check_dependency(h.stream_id, &payload[pad_len_bytes..pad_len_bytes + 5])
            .map_err(|e| H2Error { stream: 0, ..e })?;
    }
    Ok(Frame::Headers {
        stream: h.stream_id,
        end_stream: h.has(END_STREAM),
        end_headers: h.has(END_HEADERS),
        block: &fields[priority_len..],
    })
}

fn decode_push_promise<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<Frame<'a>, H2Error> {
    require_stream(h, "PUSH_PROMISE on stream 0")?;
    let fields = strip_padding(h, payload, 4)?;
    let promised_stream = be_u32(&fields[..4]) & STREAM_ID_MASK;
    if promised_stream == 0 {
        return Err(H2Error::connection(
            ErrorCode::ProtocolError,
            "PUSH_PROMISE promises stream 0",
        ));
    }
    Ok(Frame::PushPromise {
        stream: h.stream_id,
        end_headers: h.has(END_HEADERS),
        promised_stream,
        block: &fields[4..],
    })
}

fn decode_settings<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<Frame<'a>, H2Error> {
    forbid_stream(h, "SETTINGS on a stream")?;
    let ack = h.has(ACK);
    if ack && !payload.is_empty() {
        return Err(H2Error::connection(
            ErrorCode::FrameSizeError,
            "SETTINGS ACK with a payload",
        ));
    }
    if payload.len() % 6 != 0 {
        return Err(H2Error::connection(
            ErrorCode::FrameSizeError,
            "SETTINGS payload is not a multiple of 6 bytes",
        ));
    }
    for (id, value) in SettingsIter::new(payload) {
        check_setting(id, value)?;
    }
    Ok(Frame::Settings {
        ack,
        params: SettingsIter::new(payload),
    })
}

/// Range rules of RFC 9113 §6.5.2; unknown identifiers pass.
fn check_setting(id: u16, value: u32) -> Result<(), H2Error> {
    let bad = |code, msg| Err(H2Error::connection(code, msg));
    match id {
        SETTINGS_ENABLE_PUSH if value > 1 => bad(
            ErrorCode::ProtocolError,
            "SETTINGS_ENABLE_PUSH is not 0 or 1",
        ),
        SETTINGS_INITIAL_WINDOW_SIZE if value > MAX_WINDOW_SIZE => bad(
            ErrorCode::FlowControlError,
            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
        ),
        SETTINGS_MAX_FRAME_SIZE
            if !(DEFAULT_MAX_FRAME_SIZE..=MAX_FRAME_SIZE_LIMIT).contains(&value) =>
        {
            bad(
                ErrorCode::ProtocolError,
                "SETTINGS_MAX_FRAME_SIZE outside 16384..=16777215",
            )
        }
        _ => Ok(()),
    }
}

fn decode_goaway<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<Frame<'a>, H2Error> {
    forbid_stream(h, "GOAWAY on a stream")?;
    if payload.len() < 8 {
        return Err(H2Error::connection(
            ErrorCode::FrameSizeError,
            "GOAWAY payload shorter than 8 bytes",
        ));
    }
    Ok(Frame::GoAway {
        last_stream: be_u32(&payload[..4]) & STREAM_ID_MASK,
        error_code: ErrorCode::from_u32(be_u32(&payload[4..8])),
        debug: &payload[8..],
    })
}

fn decode_window_update<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<Frame<'a>, H2Error> {
    let raw = exact_len::<4>(payload, "WINDOW_UPDATE payload is not 4 bytes")?;
    let increment = u32::from_be_bytes(raw) & STREAM_ID_MASK;
    if increment == 0 {
        let msg = "WINDOW_UPDATE increment is 0";
        return Err(H2Error::stream(ErrorCode::ProtocolError, h.stream_id, msg));
    }
    Ok(Frame::WindowUpdate {
        stream: h.stream_id,
        increment,
    })
}

/// Removes the pad-length byte and trailing padding when PADDED is set. `fixed` is the number
/// of bytes the type requires after the pad length (5 for HEADERS with PRIORITY, 4 for
/// PUSH_PROMISE); the result starts with those bytes and is at least `fixed` long.
fn strip_padding<'a>(
    h: &FrameHeader,
    payload: &'a [u8],
    fixed: usize,
) -> Result<&'a [u8], H2Error> {
    let (pad, body) = if h.has(PADDED) {
        match payload.split_first() {
            Some((&pad, body)) => (usize::from(pad), body),
            None => {
                return Err(H2Error::connection(
                    ErrorCode::FrameSizeError,
                    "PADDED frame without a pad length",
                ))
            }
        }
    } else {
        (0, payload)
    };
    if body.len() < fixed {
        return Err(H2Error::connection(
            ErrorCode::FrameSizeError,
            "payload too short for the frame's fixed fields",
        ));
    }
    if pad > body.len() - fixed {
        return Err(H2Error::connection(
            ErrorCode::ProtocolError,
            "padding longer than the frame payload",
        ));
    }
    Ok(&body[..body.len() - pad])
}

/// A stream may not depend on itself (RFC 9113 §5.3.1); `spec` is the 5-byte priority block.
fn check_dependency(stream: u32, spec: &[u8]) -> Result<(), H2Error> {
    if be_u32(&spec[..4]) & STREAM_ID_MASK == stream {
        let msg = "stream depends on itself";
        return Err(H2Error::stream(ErrorCode::ProtocolError, stream, msg));
    }
    Ok(())
}

fn require_stream(h: &FrameHeader, msg: &'static str) -> Result<(), H2Error> {
    if h.stream_id == 0 {
        return Err(H2Error::connection(ErrorCode::ProtocolError, msg));
    }
    Ok(())
}

fn forbid_stream(h: &FrameHeader, msg: &'static str) -> Result<(), H2Error> {
    if h.stream_id != 0 {
        return Err(H2Error::connection(ErrorCode::ProtocolError, msg));
    }
    Ok(())
}

fn exact_len<const N: usize>(payload: &[u8], msg: &'static str) -> Result<[u8; N], H2Error> {
    payload
        .try_into()
        .map_err(|_| H2Error::connection(ErrorCode::FrameSizeError, msg))
}

/// Big-endian u32 from the first 4 bytes; callers pass slices of at least 4 bytes.
fn be_u32(bytes: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[..4]);
    u32::from_be_bytes(word)
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
