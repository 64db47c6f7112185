//! The non-blocking HTTP/2 client session that carries the measured gRPC load: sans-IO, so
//! the engine's worker keeps the socket (and TLS) and this type only turns received bytes
//! into events and requests into bytes to write.
//!
//! One `Session` per connection, many streams in flight on it. Requests arrive pre-encoded
//! (HPACK block and length-prefixed body, built once per worker) and are copied into the
//! output buffer; what the flow-control windows do not admit yet is copied into the stream's
//! reused pending buffer. Stream slots, their message readers and all buffers keep their
//! capacity, so a warmed-up session does not allocate per call (error paths aside).
//!
//! Use: write `output()` to the socket and report `written(n)`; read into `input_space()`
//! and report `received(n, on_event)`; on EOF call `eof(on_event)`. Events borrow the
//! session, so the callback records them and the caller opens new streams afterwards.

use crate::fail::FailKind;
use std::collections::VecDeque;
use std::fmt;

use super::frame::{
    parse_frame, write_goaway, write_preface, write_settings, write_window_update, ErrorCode,
    FrameHeader, DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER_LEN, MAX_WINDOW_SIZE, SETTINGS_ENABLE_PUSH,
    SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_HEADER_LIST_SIZE,
};
use super::hpack::{Decoder, DEFAULT_MAX_HEADER_LIST_SIZE};

mod fuzz;
mod headers;
mod recv;
mod send;
mod streams;

pub use fuzz::fuzz_session;
pub use headers::percent_decode;
use streams::StreamTable;

/// Flow-control window every HTTP/2 connection and stream starts with (bytes, RFC 9113 §6.9.2).
const INITIAL_WINDOW: u32 = 65_535;
/// Size of the input buffer (bytes): several whole frames, since the session advertises the default
/// 16 KiB SETTINGS_MAX_FRAME_SIZE. It never grows.
const INPUT_BUFFER: usize = 64 * 1024;
/// Highest client stream id (odd, 31 bits); past it the connection cannot open streams.
const MAX_STREAM_ID: u32 = (1 << 31) - 1;
/// Cap on one received header block, HEADERS plus CONTINUATIONs (bytes): bounds memory
/// against a peer that sends CONTINUATION frames forever.
const MAX_HEADER_BLOCK: usize = 4 * DEFAULT_MAX_HEADER_LIST_SIZE;
/// Most PING (and, separately, SETTINGS) frames in a row with no response frame (HEADERS,
/// DATA with bytes) between them; past it the connection fails as a flood with GOAWAY
/// ENHANCE_YOUR_CALM. A healthy server sends a handful per connection. The count does not
/// depend on how the bytes were split across reads.
pub const MAX_CONTROL_IN_ROW: usize = 1000;
/// Most PING (and, separately, SETTINGS) acknowledgements queued while earlier output is
/// still unwritten: bounds the output of a peer that never reads its acknowledgements
/// (more than one 64 KiB read can carry).
pub const MAX_PENDING_ACKS: usize = 10_000;
/// Most frames in a row that carry nothing (empty DATA without END_STREAM, empty
/// CONTINUATION without END_HEADERS) before the connection fails as a flood.
pub const MAX_EMPTY_FRAMES: usize = 1000;
/// Most CONTINUATION frames in one header block.
pub const MAX_CONTINUATIONS: usize = 64;
/// Output bytes already written after which `written` compacts the buffer (bytes).
const COMPACT_OUTPUT_AT: usize = 64 * 1024;

/// What a connection advertises and accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// Window advertised per stream and for the connection (bytes), clamped to
    /// 65535..=2^31-1; e.g. 16 MiB so responses rarely wait for a WINDOW_UPDATE.
    pub recv_window: u32,
    /// Largest response message accepted (bytes); a longer one fails its stream.
    pub max_message: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            recv_window: 16 << 20,
            max_message: super::message::DEFAULT_MAX_MESSAGE_LEN,
        }
    }
}

/// Something the server's bytes did to one stream, reported by `received` and `eof`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// Response HEADERS with `:status` 200 arrived on `stream` (the engine stamps "receive
    /// start"). Also sent just before `Closed` for a trailers-only response.
    Headers { stream: u32 },
    /// One whole gRPC message of `stream`, prefix removed; `compressed` is the flag byte.
    Message {
        stream: u32,
        compressed: bool,
        data: &'a [u8],
    },
    /// The stream is over; nothing more is reported for it and its slot is free again.
    Closed { stream: u32, end: StreamEnd },
}

/// How a stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// Trailers (or trailers-only) with `grpc-status: 0`.
    Ok,
    /// A non-zero `grpc-status`, with the percent-decoded `grpc-message` ("" if absent).
    Grpc { code: u32, message: String },
    /// The server reset the stream (RST_STREAM) with this code.
    Reset(ErrorCode),
    /// Refused by GOAWAY: the id is above the server's last-stream-id, so the server did not
    /// process it and it may be retried on another connection.
    Refused,
    /// The response `:status` was not 200 (gRPC treats it as a transport error).
    Http(u16),
    /// The server broke HTTP/2 or gRPC rules on this stream (the session resets it), or the
    /// connection failed with a protocol error.
    Protocol(String),
    /// The server closed the connection before the stream ended.
    Disconnected,
    /// The server exceeded a limit: a message above the size limit on this stream, or a
    /// flood or oversized header block that failed the connection.
    Limit(String),
}

impl StreamEnd {
    /// True for a call that succeeded (`grpc-status: 0`).
    pub fn is_ok(&self) -> bool {
        matches!(self, StreamEnd::Ok)
    }

    /// The failure kind a request that ended this way is counted under.
    pub fn kind(&self) -> FailKind {
        match self {
            StreamEnd::Ok => FailKind::None,
            StreamEnd::Grpc { .. } | StreamEnd::Http(_) => FailKind::Status,
            StreamEnd::Reset(_) | StreamEnd::Refused => FailKind::Reset,
            StreamEnd::Protocol(_) => FailKind::Framing,
            StreamEnd::Disconnected => FailKind::Closed,
            StreamEnd::Limit(_) => FailKind::Limit,
        }
    }
}

impl fmt::Display for StreamEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamEnd::Ok => f.write_str("OK"),
            StreamEnd::Grpc { code, message } if message.is_empty() => {
                write!(f, "gRPC status {code}")
            }
            StreamEnd::Grpc { code, message } => write!(f, "gRPC status {code}: {message}"),
            StreamEnd::Reset(code) => write!(f, "server reset the stream ({})", code.name()),
            StreamEnd::Refused => f.write_str("stream refused by the server's GOAWAY"),
            StreamEnd::Http(status) => write!(f, "HTTP status {status}"),
            StreamEnd::Protocol(why) | StreamEnd::Limit(why) => f.write_str(why),
            StreamEnd::Disconnected => f.write_str("server closed the connection"),
        }
    }
}

/// The server broke HTTP/2 at connection level. A GOAWAY with `code` is queued, every open
/// stream was closed with `StreamEnd::Protocol`, and the session accepts nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnError {
    pub code: ErrorCode,
    pub msg: String,
}

impl fmt::Display for ConnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.code == ErrorCode::EnhanceYourCalm {
            return write!(
                f,
                "{} (connection closed with GOAWAY ENHANCE_YOUR_CALM)",
                self.msg
            );
        }
        write!(
            f,
            "HTTP/2 connection error {}: {}",
            self.code.name(),
            self.msg
        )
    }
}

impl ConnError {
    /// The peer exceeded a limit: the connection ends with GOAWAY ENHANCE_YOUR_CALM.
    pub(crate) fn limit(msg: String) -> ConnError {
        ConnError {
            code: ErrorCode::EnhanceYourCalm,
            msg,
        }
    }

    /// The failure kind of the requests this error ended: [`FailKind::Limit`] for the
    /// limits (ENHANCE_YOUR_CALM), [`FailKind::Framing`] for broken HTTP/2.
    pub fn kind(&self) -> FailKind {
        match self.code {
            ErrorCode::EnhanceYourCalm => FailKind::Limit,
            ErrorCode::NoError => FailKind::Closed,
            _ => FailKind::Framing,
        }
    }
}

impl std::error::Error for ConnError {}

impl From<ConnError> for crate::error::Error {
    fn from(e: ConnError) -> Self {
        crate::error::Error::generic(e.to_string())
    }
}

/// Why `open`, `send` or `finish` did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// No stream may be opened now (see `can_open`).
    CannotOpen,
    /// The stream is not open for sending: never opened, ended, cancelled, or the client's side is
    /// already finished.
    NotOpen(u32),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::CannotOpen => f.write_str(
                "HTTP/2 connection cannot open a stream (limit reached, GOAWAY or failed)",
            ),
            SendError::NotOpen(id) => write!(f, "HTTP/2 stream {id} is not open for sending"),
        }
    }
}

impl std::error::Error for SendError {}

impl From<SendError> for crate::error::Error {
    fn from(e: SendError) -> Self {
        crate::error::Error::generic(e.to_string())
    }
}

/// One HTTP/2 client connection's protocol state (see the module doc).
pub struct Session {
    /// Received bytes: `input[in_start..in_end]` are not yet parsed as whole frames.
    input: Box<[u8]>,
    in_start: usize,
    in_end: usize,
    /// Bytes of the server's stream parsed as whole frames so far: the stream offset of
    /// `input[in_start]`.
    parsed: u64,
    conn: Conn,
}

/// Everything but the input buffer, so frames borrowed from the input can drive it.
struct Conn {
    cfg: SessionConfig,
    /// Bytes to write; `out[out_start..]` is still unwritten.
    out: Vec<u8>,
    out_start: usize,
    hpack: Decoder,
    streams: StreamTable,
    /// Ids of streams whose pending body waits for a send window, oldest first.
    blocked: VecDeque<u32>,
    /// Id the next `open` uses (odd, increasing).
    next_stream: u32,
    /// Whether the server's first frame (its SETTINGS) has arrived.
    peer_settings_seen: bool,
    /// The server's SETTINGS_MAX_FRAME_SIZE (bytes): the longest frame the client may send.
    peer_max_frame: u32,
    /// The server's SETTINGS_INITIAL_WINDOW_SIZE (bytes): each new stream's send window.
    peer_initial_window: i64,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says otherwise).
    peer_max_streams: u32,
    /// Set when the server lowers SETTINGS_HEADER_TABLE_SIZE below the 4096-byte default:
    /// the next header block starts with a size update to 0 (the encoder never indexes anyway).
    table_update_due: bool,
    /// Whether that size update was already sent (later changes need none).
    table_update_sent: bool,
    /// Bytes the client may still send on the connection (negative after a SETTINGS shrink).
    send_window: i64,
    /// Bytes the server may still send on the connection before the client's next WINDOW_UPDATE.
    recv_remaining: i64,
    /// A header block whose CONTINUATIONs are still arriving (`block_stream` != 0).
    block: Vec<u8>,
    block_stream: u32,
    block_end_stream: bool,
    /// Reused buffer for the raw `grpc-message` of the header block being decoded.
    grpc_message: Vec<u8>,
    /// Reused buffer for a request header block that needs a prefix.
    header_scratch: Vec<u8>,
    /// Last-stream-id of the latest GOAWAY received.
    goaway_last: Option<u32>,
    /// Error code and debug text (lossy UTF-8) of the latest GOAWAY received.
    goaway_reason: Option<(ErrorCode, String)>,
    /// The connection error that ended the session, repeated to later calls.
    failed: Option<ConnError>,
    /// PING and SETTINGS acknowledgements queued since the output was last fully written.
    pending_ping_acks: usize,
    pending_settings_acks: usize,
    /// PING and SETTINGS frames since the last response frame.
    pings_in_row: usize,
    settings_in_row: usize,
    /// Frames in a row that carried nothing (see [`MAX_EMPTY_FRAMES`]).
    empty_frames: usize,
    /// CONTINUATION frames of the header block being received.
    continuations: usize,
}

impl Session {
    /// A session whose output starts with the preface, the client's SETTINGS (push off, its stream
    /// window) and a WINDOW_UPDATE raising the connection window to `cfg.recv_window`.
    pub fn new(cfg: SessionConfig) -> Session {
        let cfg = SessionConfig {
            recv_window: cfg.recv_window.clamp(INITIAL_WINDOW, MAX_WINDOW_SIZE),
            ..cfg
        };
        let mut out = Vec::with_capacity(INPUT_BUFFER);
        write_preface(&mut out);
        let settings = [
            (SETTINGS_ENABLE_PUSH, 0),
            (SETTINGS_INITIAL_WINDOW_SIZE, cfg.recv_window),
            (
                SETTINGS_MAX_HEADER_LIST_SIZE,
                DEFAULT_MAX_HEADER_LIST_SIZE as u32,
            ),
        ];
        write_settings(&mut out, &settings);
        let raise = cfg.recv_window - INITIAL_WINDOW;
        if raise > 0 {
            write_window_update(&mut out, 0, raise);
        }
        let conn = Conn {
            cfg,
            out,
            out_start: 0,
            hpack: Decoder::new(),
            streams: StreamTable::new(cfg.max_message),
            blocked: VecDeque::new(),
            next_stream: 1,
            peer_settings_seen: false,
            peer_max_frame: DEFAULT_MAX_FRAME_SIZE,
            peer_initial_window: i64::from(INITIAL_WINDOW),
            peer_max_streams: u32::MAX,
            table_update_due: false,
            table_update_sent: false,
            send_window: i64::from(INITIAL_WINDOW),
            recv_remaining: i64::from(cfg.recv_window),
            block: Vec::new(),
            block_stream: 0,
            block_end_stream: false,
            grpc_message: Vec::new(),
            header_scratch: Vec::new(),
            goaway_last: None,
            goaway_reason: None,
            failed: None,
            pending_ping_acks: 0,
            pending_settings_acks: 0,
            pings_in_row: 0,
            settings_in_row: 0,
            empty_frames: 0,
            continuations: 0,
        };
        Session {
            input: vec![0; INPUT_BUFFER].into_boxed_slice(),
            in_start: 0,
            in_end: 0,
            parsed: 0,
            conn,
        }
    }

    /// Bytes waiting to be written to the socket; write some, then call `written(n)`.
    pub fn output(&self) -> &[u8] {
        &self.conn.out[self.conn.out_start..]
    }

    /// `n` bytes of `output()` reached the socket.
    pub fn written(&mut self, n: usize) {
        let conn = &mut self.conn;
        conn.out_start = (conn.out_start + n).min(conn.out.len());
        if conn.out_start == conn.out.len() {
            conn.out.clear();
            conn.out_start = 0;
            conn.pending_ping_acks = 0;
            conn.pending_settings_acks = 0;
        } else if conn.out_start >= COMPACT_OUTPUT_AT {
            conn.out.drain(..conn.out_start);
            conn.out_start = 0;
        }
    }

    /// Free space to read socket bytes into (at least 16 KiB); then call `received(n, ..)`.
    pub fn input_space(&mut self) -> &mut [u8] {
        if self.in_start > 0 {
            self.input.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        }
        &mut self.input[self.in_end..]
    }

    /// Handles `n` bytes just read into `input_space()`: every whole frame is processed and
    /// its events reported to `on`. A connection error closes every stream (reported), queues
    /// a GOAWAY and is returned again by later calls.
    pub fn received(&mut self, n: usize, on: &mut dyn FnMut(Event<'_>)) -> Result<(), ConnError> {
        self.received_at(n, &mut |ev, _| on(ev))
    }

    /// [`Session::received`], with each event's place in the server's byte stream: the
    /// offset just past the frame that raised it, counted from the first byte the server
    /// sent (so the event's last byte is at the offset minus one). A reader that knows when
    /// each stretch of the stream arrived times every event by its own frame.
    pub fn received_at(
        &mut self,
        n: usize,
        on: &mut dyn FnMut(Event<'_>, u64),
    ) -> Result<(), ConnError> {
        if let Some(failed) = &self.conn.failed {
            return Err(failed.clone());
        }
        self.in_end = (self.in_end + n).min(self.input.len());
        loop {
            let pending = &self.input[self.in_start..self.in_end];
            let parsed = self.parsed;
            let step = match parse_frame(pending, DEFAULT_MAX_FRAME_SIZE) {
                Ok(Some((frame, used))) => {
                    let flow_len = used - FRAME_HEADER_LEN;
                    let end = parsed + used as u64;
                    self.conn
                        .on_frame(frame, flow_len, &mut |ev| on(ev, end))
                        .map(|()| used)
                }
                Ok(None) => return Ok(()),
                Err(e) if e.stream != 0 => {
                    // The parser only reports stream errors once the whole frame is buffered.
                    let len = FrameHeader::parse(pending).map_or(0, |h| h.len as usize);
                    let used = FRAME_HEADER_LEN + len;
                    let end = parsed + used as u64;
                    self.conn
                        .on_stream_error(e.stream, e.code, e.msg, &mut |ev| on(ev, end));
                    Ok(used)
                }
                Err(e) => Err(ConnError {
                    code: e.code,
                    msg: e.msg.to_string(),
                }),
            };
            match step {
                Ok(used) => {
                    self.in_start += used;
                    self.parsed += used as u64;
                }
                Err(e) => return Err(self.conn.fail(e, &mut |ev| on(ev, parsed))),
            }
        }
    }

    /// The server closed the socket: every open stream ends with `Closed(Disconnected)`.
    pub fn eof(&mut self, on: &mut dyn FnMut(Event<'_>)) {
        self.conn.close_all(&StreamEnd::Disconnected, on);
        self.conn.blocked.clear();
        if self.conn.failed.is_none() {
            self.conn.failed = Some(ConnError {
                code: ErrorCode::NoError,
                msg: "server closed the connection".to_string(),
            });
        }
    }

    /// A new stream may be opened now: below the server's MAX_CONCURRENT_STREAMS, no GOAWAY
    /// received, stream ids left, connection not failed.
    pub fn can_open(&self) -> bool {
        let conn = &self.conn;
        conn.failed.is_none()
            && conn.goaway_last.is_none()
            && conn.next_stream <= MAX_STREAM_ID
            && conn.streams.len() < conn.peer_max_streams as usize
    }

    /// Opens a stream: HEADERS (+CONTINUATION beyond the server's max frame size), then
    /// `body` (length-prefixed messages) as DATA within the flow-control windows; the rest
    /// waits in the stream's buffer until WINDOW_UPDATE. `end_stream` false keeps the client's side
    /// open for more `send`s (bidirectional streaming). Returns the stream id.
    pub fn open(
        &mut self,
        headers: &[u8],
        body: &[u8],
        end_stream: bool,
    ) -> Result<u32, SendError> {
        if !self.can_open() {
            return Err(SendError::CannotOpen);
        }
        Ok(self.conn.open(headers, body, end_stream))
    }

    /// More request data on an open stream (the next message of a streaming call).
    pub fn send(&mut self, stream: u32, body: &[u8], end_stream: bool) -> Result<(), SendError> {
        self.conn.send(stream, body, end_stream)
    }

    /// Ends the client's side of `stream` (END_STREAM after any pending data).
    pub fn finish(&mut self, stream: u32) -> Result<(), SendError> {
        self.conn.send(stream, &[], true)
    }

    /// Abandons `stream` with RST_STREAM(CANCEL); no event follows for it and frames still
    /// arriving for it are ignored. Unknown or ended streams are ignored.
    pub fn cancel(&mut self, stream: u32) {
        self.conn.cancel(stream);
    }

    /// Streams opened and not yet closed.
    pub fn open_streams(&self) -> usize {
        self.conn.streams.len()
    }

    /// A GOAWAY arrived: no new streams; streams above its last-stream-id were refused.
    pub fn going_away(&self) -> bool {
        self.conn.goaway_last.is_some()
    }

    /// Whether the server's SETTINGS (its half of the preface) arrived; until then its
    /// MAX_CONCURRENT_STREAMS is unknown, so a careful caller opens one stream at most.
    pub fn peer_settings_received(&self) -> bool {
        self.conn.peer_settings_seen
    }

    /// The error code and debug text of the latest GOAWAY received, if any.
    pub fn goaway_reason(&self) -> Option<(ErrorCode, &str)> {
        let (code, debug) = self.conn.goaway_reason.as_ref()?;
        Some((*code, debug.as_str()))
    }

    /// The connection error (or EOF) that ended this session, if any.
    pub fn failure(&self) -> Option<&ConnError> {
        self.conn.failed.as_ref()
    }

    /// True once the session is finished: failed, or going away with no stream left.
    pub fn is_done(&self) -> bool {
        self.conn.failed.is_some() || (self.going_away() && self.conn.streams.len() == 0)
    }
}

impl Conn {
    /// Records a connection error: every open stream ends, a GOAWAY is queued.
    fn fail(&mut self, e: ConnError, on: &mut dyn FnMut(Event<'_>)) -> ConnError {
        let end = match e.kind() {
            FailKind::Limit => StreamEnd::Limit(e.to_string()),
            _ => StreamEnd::Protocol(e.to_string()),
        };
        self.close_all(&end, on);
        self.blocked.clear();
        write_goaway(&mut self.out, 0, e.code, e.msg.as_bytes());
        self.failed = Some(e.clone());
        e
    }

    /// Ends every open stream with `end`, in id order.
    fn close_all(&mut self, end: &StreamEnd, on: &mut dyn FnMut(Event<'_>)) {
        while let Some(id) = self.streams.first_id() {
            self.release(id);
            on(Event::Closed {
                stream: id,
                end: end.clone(),
            });
        }
    }
}

#[cfg(test)]
#[path = "session_errors_tests.rs"]
mod errors_tests;
#[cfg(test)]
#[path = "session_flow_tests.rs"]
mod flow_tests;
#[cfg(test)]
#[path = "session_limits_tests.rs"]
mod limits_tests;
#[cfg(test)]
#[path = "session_server_tests.rs"]
mod server_tests;
#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
