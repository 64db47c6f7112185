//! Incremental HTTP/1.1 response parser for the client side.
//!
//! The caller owns the connection's read buffer and calls [`ResponseReader::advance`] with all
//! unconsumed bytes after every read. The reader remembers what it already parsed (the head,
//! the chunk decoder's position), so a large body arriving over many reads costs one pass over
//! its bytes. No allocation happens in steady state: headers are parsed into a stack array and
//! chunked bodies are decoded into one `Vec` that keeps its capacity across responses.

use super::chunked::ChunkedDecoder;
use super::error::ParseError;

/// Most header fields accepted in one response head (the `httparse` array lives on the stack).
pub const MAX_HEADERS: usize = 64;
/// Default cap on one response body (bytes): 64 MiB; `--max-response-bytes` raises it.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 << 20;
/// Default cap on interim (1xx) responses before a final one.
pub const DEFAULT_MAX_INTERIM: usize = 16;

/// Size limits, all in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// One response head (status line, fields, blank line); also the whole trailer section,
    /// the interim (1xx) responses before a final one together, and how far a chunked body's
    /// framing (size lines, extensions, CRLFs) may exceed its data.
    pub max_head_bytes: usize,
    /// A decoded body.
    pub max_body_bytes: usize,
    /// Interim (1xx) responses before a final one (count).
    pub max_interim: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 64 * 1024,
            max_body_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_interim: DEFAULT_MAX_INTERIM,
        }
    }
}

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// No body: 204, 304.
    #[default]
    Empty,
    /// `Content-Length: n`.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body runs until the server closes the connection.
    UntilClose,
}

/// The parts of a finished response the engine needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResponseHead {
    pub status: u16,
    /// HTTP/1.x minor version of the response (0 or 1).
    pub minor_version: u8,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
    /// Bytes of the caller's buffer this response used, interim 1xx responses included.
    pub consumed: usize,
    /// `Inference-Header-Content-Length`: bytes of JSON at the start of the body.
    pub inference_header_len: Option<usize>,
    pub framing: Framing,
    /// Length of the decoded body (bytes).
    pub body_len: usize,
    /// `Content-Type: text/event-stream` (any case, parameters allowed): the body is a
    /// Server-Sent Events stream.
    pub event_stream: bool,
}

/// Result of feeding bytes to the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    NeedMore,
    Done(ResponseHead),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Head,
    Body,
    Done,
}

/// Parses one response at a time from a connection's buffer; reusable via [`reset`].
///
/// [`reset`]: ResponseReader::reset
#[derive(Debug, Clone)]
pub struct ResponseReader {
    limits: Limits,
    stage: Stage,
    /// Start of the head being parsed (after any interim 1xx responses).
    head_start: usize,
    /// Where the search for the head's blank line resumes.
    head_scan: usize,
    /// Start of the body in the caller's buffer.
    body_start: usize,
    head: ResponseHead,
    /// Interim (1xx) responses skipped before the final head, and their bytes.
    interim: usize,
    interim_bytes: usize,
    chunked: ChunkedDecoder,
    /// Decoded chunked body; keeps its capacity across responses.
    chunked_body: Vec<u8>,
}

impl Default for ResponseReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseReader {
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Self {
        ResponseReader {
            limits,
            stage: Stage::Head,
            head_start: 0,
            head_scan: 0,
            body_start: 0,
            head: ResponseHead::default(),
            interim: 0,
            interim_bytes: 0,
            chunked: ChunkedDecoder::new(),
            chunked_body: Vec::new(),
        }
    }

    /// Ready for the next response; keeps allocations.
    pub fn reset(&mut self) {
        self.stage = Stage::Head;
        self.head_start = 0;
        self.head_scan = 0;
        self.body_start = 0;
        self.head = ResponseHead::default();
        self.interim = 0;
        self.interim_bytes = 0;
        self.chunked.reset();
        self.chunked_body.clear();
    }

    /// The limits this reader enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Forgets the bytes of interim (1xx) responses already skipped while the final head is
    /// still to come, so the caller can drop them from the front of its buffer and keep it
    /// small: returns how many bytes to drop (0 when there are none). Later offsets, and the
    /// final head's `consumed`, count from the new start.
    pub fn discard_interim(&mut self) -> usize {
        if self.stage != Stage::Head {
            return 0;
        }
        let n = self.head_start;
        self.head_start = 0;
        self.head_scan -= n.min(self.head_scan);
        n
    }

    /// true once the final (non-1xx) head has been parsed.
    pub fn head_parsed(&self) -> bool {
        self.stage != Stage::Head
    }

    /// Total bytes of the buffer the current response will use, when known (Content-Length),
    /// so the caller can size its buffer once.
    pub fn bytes_needed_hint(&self) -> Option<usize> {
        match (self.stage, self.head.framing) {
            (Stage::Body, Framing::Length(n)) => Some(self.body_start + n),
            _ => None,
        }
    }

    /// `buf`: all unconsumed bytes received so far on the connection, starting at the first
    /// byte of this response. After `Done`, call [`body`](Self::body) then [`reset`](Self::reset)
    /// and drop `consumed` bytes from the buffer.
    pub fn advance(&mut self, buf: &[u8]) -> Result<Progress, ParseError> {
        if self.stage == Stage::Head && !self.parse_head(buf)? {
            return Ok(Progress::NeedMore);
        }
        if self.stage == Stage::Body {
            self.advance_body(buf)?;
        }
        Ok(match self.stage {
            Stage::Done => Progress::Done(self.head),
            _ => Progress::NeedMore,
        })
    }

    /// The peer closed the connection; `buf` holds every byte received. Completes a
    /// close-delimited body; anything else unfinished is an error.
    pub fn on_eof(&mut self, buf: &[u8]) -> Result<Progress, ParseError> {
        if let Progress::Done(head) = self.advance(buf)? {
            return Ok(Progress::Done(head));
        }
        match (self.stage, self.head.framing) {
            (Stage::Body, Framing::UntilClose) => {
                self.finish(buf.len(), buf.len() - self.body_start);
                Ok(Progress::Done(self.head))
            }
            (Stage::Head, _) if buf.is_empty() => Err(ParseError::ClosedBeforeResponse),
            _ => Err(ParseError::Truncated),
        }
    }

    /// Status of the response being read; 0 until its (final) head is parsed.
    pub fn status(&self) -> u16 {
        if self.stage == Stage::Head {
            0
        } else {
            self.head.status
        }
    }

    /// true once the head of a `text/event-stream` response has been parsed.
    pub fn is_event_stream(&self) -> bool {
        self.stage != Stage::Head && self.head.event_stream
    }

    /// The decoded body received so far (complete once `Done`), so a caller can hand new
    /// body bytes on as they arrive: for chunked framing the decoded prefix, otherwise the
    /// bytes after the head (at most the `Content-Length`). Empty before the head is parsed.
    /// `buf` must be the buffer given to the last `advance`/`on_eof`.
    pub fn body_so_far<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        if self.stage == Stage::Head {
            return &[];
        }
        let from = self.body_start.min(buf.len());
        match self.head.framing {
            Framing::Chunked => &self.chunked_body,
            Framing::Empty => &[],
            Framing::Length(n) => &buf[from..buf.len().min(self.body_start.saturating_add(n))],
            Framing::UntilClose => &buf[from..],
        }
    }

    /// The decoded body of the last `Done` response (empty before that). `buf` must be the
    /// buffer given to the call that returned `Done`.
    pub fn body<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        if self.stage != Stage::Done {
            return &[];
        }
        match self.head.framing {
            Framing::Chunked => &self.chunked_body,
            Framing::Empty => &[],
            Framing::Length(_) | Framing::UntilClose => buf
                .get(self.body_start..self.body_start + self.head.body_len)
                .unwrap_or(&[]),
        }
    }

    fn finish(&mut self, consumed: usize, body_len: usize) {
        self.head.consumed = consumed;
        self.head.body_len = body_len;
        self.stage = Stage::Done;
    }

    /// Parses heads until the final one is complete; skips interim 1xx responses.
    /// Returns false if more bytes are needed.
    fn parse_head(&mut self, buf: &[u8]) -> Result<bool, ParseError> {
        loop {
            let from = self.head_scan.max(self.head_start);
            let Some((lf, end)) = find_blank_line(buf, from) else {
                if buf.len().saturating_sub(self.head_start) > self.limits.max_head_bytes {
                    return Err(ParseError::HeadTooLarge);
                }
                self.head_scan = buf.len().saturating_sub(2).max(self.head_start);
                return Ok(false);
            };
            if end - self.head_start > self.limits.max_head_bytes {
                return Err(ParseError::HeadTooLarge);
            }
            let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut fields);
            let head_len = match response.parse(&buf[self.head_start..end]) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) => {
                    // A blank line before the status line (allowed and skipped): look further.
                    self.head_scan = lf + 1;
                    continue;
                }
                Err(e) => return Err(ParseError::Head(e)),
            };
            let status = response.code.unwrap_or(0);
            if status == 101 {
                return Err(ParseError::SwitchingProtocols);
            }
            if (100..200).contains(&status) {
                self.interim += 1;
                self.interim_bytes += head_len;
                if self.interim > self.limits.max_interim {
                    let limit = self.limits.max_interim;
                    return Err(ParseError::TooManyInterim { limit });
                }
                if self.interim_bytes > self.limits.max_head_bytes {
                    let limit = self.limits.max_head_bytes;
                    return Err(ParseError::InterimTooLarge { limit });
                }
                self.head_start += head_len;
                self.head_scan = self.head_start;
                continue;
            }
            let minor = response.version.unwrap_or(1);
            let fields = HeadFields::read(response.headers)?;
            self.body_start = self.head_start + head_len;
            self.head = fields.into_head(status, minor, self.limits)?;
            self.stage = Stage::Body;
            return Ok(true);
        }
    }

    fn advance_body(&mut self, buf: &[u8]) -> Result<(), ParseError> {
        let received = buf.len().saturating_sub(self.body_start);
        match self.head.framing {
            Framing::Empty => self.finish(self.body_start, 0),
            Framing::Length(n) => {
                if received >= n {
                    self.finish(self.body_start + n, n);
                }
            }
            Framing::UntilClose => {
                if received > self.limits.max_body_bytes {
                    let limit = self.limits.max_body_bytes;
                    return Err(ParseError::BodyTooLarge { limit });
                }
            }
            Framing::Chunked => {
                let raw = &buf[self.body_start.min(buf.len())..];
                let done = self
                    .chunked
                    .advance(raw, &mut self.chunked_body, self.limits)?;
                if let Some(used) = done {
                    self.finish(self.body_start + used, self.chunked_body.len());
                }
            }
        }
        Ok(())
    }
}

/// Finds the first blank line at or after `from`: an LF followed by LF or CRLF.
/// Returns (index of the first LF, index just past the blank line).
fn find_blank_line(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while let Some(offset) = buf.get(i..)?.iter().position(|&b| b == b'\n') {
        let lf = i + offset;
        match (buf.get(lf + 1), buf.get(lf + 2)) {
            (Some(b'\n'), _) => return Some((lf, lf + 2)),
            (Some(b'\r'), Some(b'\n')) => return Some((lf, lf + 3)),
            _ => i = lf + 1,
        }
    }
    None
}

/// What the header fields say about framing and the connection.
#[derive(Default)]
struct HeadFields {
    content_length: Option<usize>,
    transfer_encoding: bool,
    chunked_last: bool,
    connection_close: bool,
    connection_keep_alive: bool,
    inference_header_len: Option<usize>,
    event_stream: bool,
}

impl HeadFields {
    fn read(fields: &[httparse::Header<'_>]) -> Result<HeadFields, ParseError> {
        let mut out = HeadFields::default();
        for field in fields {
            let name = field.name;
            if name.eq_ignore_ascii_case("content-length") {
                for item in field.value.split(|&b| b == b',') {
                    let n = parse_decimal(item).ok_or(ParseError::BadContentLength)?;
                    if out.content_length.is_some_and(|old| old != n) {
                        return Err(ParseError::BadContentLength);
                    }
                    out.content_length = Some(n);
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                out.transfer_encoding = true;
                let last = field.value.split(|&b| b == b',').next_back().unwrap_or(&[]);
                out.chunked_last = trim(last).eq_ignore_ascii_case(b"chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                for token in field.value.split(|&b| b == b',').map(trim) {
                    out.connection_close |= token.eq_ignore_ascii_case(b"close");
                    out.connection_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case("inference-header-content-length") {
                let n = parse_decimal(field.value).ok_or(ParseError::BadInferenceHeaderLength)?;
                out.inference_header_len = Some(n);
            } else if name.eq_ignore_ascii_case("content-type") {
                out.event_stream = is_event_stream_type(field.value);
            }
        }
        Ok(out)
    }

    /// Applies RFC 9112 §6.3 (message body length) and §9.3 (persistence).
    fn into_head(self, status: u16, minor: u8, limits: Limits) -> Result<ResponseHead, ParseError> {
        let mut keep_alive = if minor >= 1 {
            !self.connection_close
        } else {
            self.connection_keep_alive && !self.connection_close
        };
        let framing = if status == 204 || status == 304 {
            Framing::Empty
        } else if self.transfer_encoding {
            // Both headers at once hints at response splitting: use Transfer-Encoding as the
            // RFC says, but do not trust the connection afterwards.
            if self.content_length.is_some() {
                keep_alive = false;
            }
            if self.chunked_last {
                Framing::Chunked
            } else {
                Framing::UntilClose
            }
        } else if let Some(n) = self.content_length {
            if n > limits.max_body_bytes {
                let limit = limits.max_body_bytes;
                return Err(ParseError::ContentLengthTooLarge { len: n, limit });
            }
            Framing::Length(n)
        } else {
            Framing::UntilClose
        };
        if framing == Framing::UntilClose {
            keep_alive = false;
        }
        Ok(ResponseHead {
            status,
            minor_version: minor,
            keep_alive,
            consumed: 0,
            inference_header_len: self.inference_header_len,
            framing,
            body_len: 0,
            event_stream: self.event_stream,
        })
    }
}

/// A `Content-Type` value whose media type (before any `;` parameters) is
/// `text/event-stream`, compared without regard to case or surrounding blanks.
fn is_event_stream_type(value: &[u8]) -> bool {
    let media_type = value.split(|&b| b == b';').next().unwrap_or(&[]);
    trim(media_type).eq_ignore_ascii_case(b"text/event-stream")
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// A non-empty run of ASCII digits (blanks around it allowed) that fits in usize.
fn parse_decimal(s: &[u8]) -> Option<usize> {
    let s = trim(s);
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0usize, |acc, &d| {
        acc.checked_mul(10)?.checked_add(usize::from(d - b'0'))
    })
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod limits_tests;
#[cfg(test)]
#[path = "response_tests.rs"]
mod tests;
