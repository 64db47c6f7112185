//! HTTP/1.1 for the server side: request heads (httparse), bodies (Content-Length and chunked,
//! possibly split across reads), limits, and response writing.
//!
//! Nothing here panics on peer bytes: every malformed input becomes an [`HttpError`] that the
//! connection answers (400, 413, 415, 431) before closing.

use std::io::Write;

mod chunked;
mod error;

use chunked::ChunkedDecoder;
pub use error::{HttpError, MAX_BODY_BYTES, MAX_HEAD_BYTES};

/// Largest header count per request.
const MAX_HEADERS: usize = 48;

/// The interim answer to `Expect: 100-continue`.
pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    NoBody,
    Length(usize),
    Chunked,
}

/// What the server needs from a request head; ranges are relative to the request's first byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: Method,
    /// Byte range of the path, without any query string.
    pub path: (usize, usize),
    pub keep_alive: bool,
    pub expect_continue: bool,
    /// `Inference-Header-Content-Length`: bytes of JSON before the binary tensor data.
    pub inference_header_len: Option<usize>,
    /// Bytes of the head, including the blank line.
    pub head_len: usize,
    pub framing: Framing,
}

fn header_usize(name: &str, value: &[u8]) -> Result<usize, HttpError> {
    std::str::from_utf8(value)
        .ok()
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| HttpError::bad(format!("invalid {name} header")))
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Fills the header-derived fields of `head` (framing, keep-alive, expect, tensor header).
fn apply_headers(
    head: &mut Head,
    headers: &[httparse::Header],
    max_body: usize,
) -> Result<(), HttpError> {
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let n = header_usize("Content-Length", h.value)?;
            if content_length.is_some_and(|c| c != n) {
                return Err(HttpError::bad("conflicting Content-Length headers"));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if !h.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return Err(HttpError::bad(
                    "unsupported Transfer-Encoding (only chunked)",
                ));
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                head.keep_alive = false;
            } else if has_token(h.value, "keep-alive") {
                head.keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("content-encoding")
            && !h.value.trim_ascii().eq_ignore_ascii_case(b"identity")
        {
            // Bodies are never inflated here, so no compressed body can expand past the limit.
            return Err(HttpError {
                status: 415,
                msg: format!(
                    "Content-Encoding '{}' is not supported (identity only)",
                    String::from_utf8_lossy(h.value).trim()
                ),
            });
        } else if name.eq_ignore_ascii_case("expect") {
            head.expect_continue = h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        } else if name.eq_ignore_ascii_case("inference-header-content-length") {
            head.inference_header_len =
                Some(header_usize("Inference-Header-Content-Length", h.value)?);
        }
    }
    head.framing = match (chunked, content_length) {
        (true, Some(_)) => {
            return Err(HttpError::bad(
                "both Content-Length and Transfer-Encoding given",
            ))
        }
        (true, None) => Framing::Chunked,
        (false, Some(n)) if n > max_body => {
            return Err(HttpError::too_large("request body", max_body))
        }
        (false, Some(0)) | (false, None) => Framing::NoBody,
        (false, Some(n)) => Framing::Length(n),
    };
    Ok(())
}

/// Parses a request head at the start of `buf`; `Ok(None)` when it is not complete yet. A
/// Content-Length over `max_body` is refused (413) before any of the body is read.
pub fn parse_head(buf: &[u8], max_body: usize) -> Result<Option<Head>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let too_long =
        || HttpError::head_too_large(format!("request header exceeds {MAX_HEAD_BYTES} bytes"));
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => return Err(too_long()),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::head_too_large(format!(
                "request has more than {MAX_HEADERS} header lines"
            )))
        }
        Err(e) => return Err(HttpError::bad(format!("malformed HTTP request: {e}"))),
    };
    if head_len > MAX_HEAD_BYTES {
        return Err(too_long());
    }
    let method = match req.method {
        Some("GET") => Method::Get,
        Some("POST") => Method::Post,
        _ => Method::Other,
    };
    let full_path = req.path.unwrap_or("/");
    let path_start = full_path.as_ptr() as usize - buf.as_ptr() as usize;
    let path_len = full_path.find('?').unwrap_or(full_path.len());
    let version = req.version.unwrap_or(1);
    let mut head = Head {
        method,
        path: (path_start, path_start + path_len),
        keep_alive: version >= 1,
        expect_continue: false,
        inference_header_len: None,
        head_len,
        framing: Framing::NoBody,
    };
    apply_headers(&mut head, req.headers, max_body)?;
    Ok(Some(head))
}

/// Where a complete request's body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyAt {
    /// A range of the request's bytes (relative to its first byte).
    Buffer(usize, usize),
    /// The decoded-body vector passed to [`RequestReader::advance`].
    Decoded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Not complete; `send_continue` asks for a `100 Continue` interim response now.
    NeedMore { send_continue: bool },
    /// Complete: the head, the bytes it used from the buffer, and where its body is.
    Done {
        head: Head,
        consumed: usize,
        body: BodyAt,
    },
}

#[derive(Debug, Clone)]
enum ReadState {
    Head,
    Body(Head),
    /// Head, decoder, and the offset of the next undecoded byte.
    Chunked(Head, ChunkedDecoder, usize),
}

/// Assembles one request at a time from a connection's buffered bytes.
#[derive(Debug, Clone)]
pub struct RequestReader {
    state: ReadState,
    continue_sent: bool,
    /// Largest request body, bytes (`--max-request-bytes`).
    max_body: usize,
}

impl Default for RequestReader {
    fn default() -> Self {
        RequestReader::new(MAX_BODY_BYTES)
    }
}

impl RequestReader {
    /// A reader refusing (413) bodies over `max_body` bytes.
    pub fn new(max_body: usize) -> Self {
        RequestReader {
            state: ReadState::Head,
            continue_sent: false,
            max_body,
        }
    }

    /// True while the current request's head is not complete (between requests too).
    pub fn in_head(&self) -> bool {
        matches!(self.state, ReadState::Head)
    }

    /// Bytes of the current request from its first byte (head and Content-Length body), once
    /// its head has announced them; None while the head is incomplete or the body is chunked.
    pub fn request_len(&self) -> Option<usize> {
        match &self.state {
            ReadState::Body(head) => match head.framing {
                Framing::Length(n) => Some(head.head_len + n),
                _ => Some(head.head_len),
            },
            _ => None,
        }
    }

    /// Advances over `buf`, the buffered bytes starting at the current request's first byte.
    /// A chunked body is decoded into `decoded` (cleared when a new request starts).
    pub fn advance(&mut self, buf: &[u8], decoded: &mut Vec<u8>) -> Result<Progress, HttpError> {
        if let ReadState::Head = self.state {
            let Some(head) = parse_head(buf, self.max_body)? else {
                return Ok(Progress::NeedMore {
                    send_continue: false,
                });
            };
            self.state = match head.framing {
                Framing::Chunked => {
                    decoded.clear();
                    let at = head.head_len;
                    ReadState::Chunked(head, ChunkedDecoder::new(self.max_body), at)
                }
                _ => ReadState::Body(head),
            };
        }
        let (head, done, consumed, body) = match &mut self.state {
            ReadState::Head => {
                return Ok(Progress::NeedMore {
                    send_continue: false,
                })
            }
            ReadState::Body(head) => {
                let len = match head.framing {
                    Framing::Length(n) => n,
                    _ => 0,
                };
                let start = head.head_len;
                let end = start + len;
                (head, buf.len() >= end, end, BodyAt::Buffer(start, end))
            }
            ReadState::Chunked(head, decoder, at) => {
                let (used, done) = decoder.decode(&buf[*at..], decoded)?;
                *at += used;
                (head, done, *at, BodyAt::Decoded)
            }
        };
        if !done {
            let send_continue = head.expect_continue && !self.continue_sent;
            self.continue_sent |= send_continue;
            return Ok(Progress::NeedMore { send_continue });
        }
        let head = head.clone();
        self.state = ReadState::Head;
        self.continue_sent = false;
        Ok(Progress::Done {
            head,
            consumed,
            body,
        })
    }
}

/// The reason phrase for the statuses this server sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Writes a response head. `inference_header_len` adds `Inference-Header-Content-Length`.
pub fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    content_length: usize,
    inference_header_len: Option<usize>,
    close: bool,
) {
    // Writing into a Vec cannot fail.
    let _ = write!(out, "HTTP/1.1 {status} {}\r\n", reason(status));
    if content_length > 0 {
        let _ = write!(out, "Content-Type: {content_type}\r\n");
    }
    if let Some(n) = inference_header_len {
        let _ = write!(out, "Inference-Header-Content-Length: {n}\r\n");
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    let _ = write!(out, "Content-Length: {content_length}\r\n\r\n");
}

/// Writes `{"error":"<msg>"}` (JSON-escaped).
pub fn write_error_json(out: &mut Vec<u8>, msg: &str) {
    out.extend_from_slice(b"{\"error\":");
    // Serialising a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, msg);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(req: &str) -> Result<Option<Head>, HttpError> {
        parse_head(req.as_bytes(), MAX_BODY_BYTES)
    }

    #[test]
    fn head_fields() {
        let h = head(
            "POST /v2/models/simple/infer?x=1 HTTP/1.1\r\nContent-Length: 5\r\n\
                      Inference-Header-Content-Length: 3\r\nExpect: 100-continue\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.method, Method::Post);
        assert_eq!(h.framing, Framing::Length(5));
        assert_eq!(h.inference_header_len, Some(3));
        assert!(h.expect_continue && h.keep_alive);
        let req = "POST /v2/models/simple/infer?x=1";
        assert_eq!(&req[h.path.0..h.path.1], "/v2/models/simple/infer");
        let h10 = head("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h10.keep_alive);
        let close = head("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!close.keep_alive);
        assert_eq!(head("GET / HTTP/1.1\r\nHost: x\r\n").unwrap(), None);
    }

    #[test]
    fn head_errors() {
        let cases: [(&str, u16); 7] = [
            ("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
            (
                "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                400,
            ),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
            (
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                400,
            ),
            (
                "POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
                413,
            ),
            ("BAD\0 / HTTP/1.1\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nContent-Encoding: gzip\r\n\r\n", 415),
        ];
        for (req, status) in cases {
            assert_eq!(head(req).unwrap_err().status, status, "{req:?}");
        }
        let huge = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD_BYTES));
        assert_eq!(head(&huge).unwrap_err().status, 431);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: 1\r\n")).collect();
        let err = head(&format!("GET / HTTP/1.1\r\n{many}\r\n")).unwrap_err();
        assert_eq!(err.status, 431, "{}", err.msg);
        assert!(err.msg.contains("more than 48 header lines"), "{}", err.msg);
        let gzip = head("POST / HTTP/1.1\r\nContent-Encoding: gzip\r\n\r\n").unwrap_err();
        assert_eq!(
            gzip.msg,
            "Content-Encoding 'gzip' is not supported (identity only)"
        );
        let plain = head("POST / HTTP/1.1\r\nContent-Encoding: identity\r\n\r\n");
        assert!(plain.unwrap().is_some());
        let small = parse_head(b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 10);
        assert_eq!(
            small.unwrap_err().msg,
            "request body exceeds the limit of 10 bytes"
        );
    }

    #[test]
    fn reader_handles_split_and_continue() {
        let req = b"POST /a HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\nabcd";
        let mut r = RequestReader::default();
        let mut dec = Vec::new();
        let head_end = req.len() - 4;
        assert_eq!(
            r.advance(&req[..10], &mut dec).unwrap(),
            Progress::NeedMore {
                send_continue: false
            }
        );
        assert_eq!(r.request_len(), None, "head not complete");
        assert_eq!(
            r.advance(&req[..head_end], &mut dec).unwrap(),
            Progress::NeedMore {
                send_continue: true
            }
        );
        assert_eq!(r.request_len(), Some(req.len()), "head and announced body");
        assert_eq!(
            r.advance(&req[..head_end + 2], &mut dec).unwrap(),
            Progress::NeedMore {
                send_continue: false
            }
        );
        let Progress::Done { consumed, body, .. } = r.advance(req, &mut dec).unwrap() else {
            panic!("not done")
        };
        assert_eq!(
            (consumed, body),
            (req.len(), BodyAt::Buffer(head_end, req.len()))
        );
        let chunked =
            b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n";
        let Progress::Done { consumed, body, .. } = r.advance(chunked, &mut dec).unwrap() else {
            panic!("not done")
        };
        assert_eq!(
            (consumed, body, dec.as_slice()),
            (chunked.len(), BodyAt::Decoded, &b"xyz"[..])
        );
    }

    #[test]
    fn writes_response_and_error() {
        let mut out = Vec::new();
        write_head(&mut out, 404, "application/json", 2, Some(1), true);
        assert_eq!(
            out,
            b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
              Inference-Header-Content-Length: 1\r\nConnection: close\r\nContent-Length: 2\r\n\r\n"
        );
        out.clear();
        write_error_json(&mut out, "bad \"x\"");
        assert_eq!(out, br#"{"error":"bad \"x\""}"#);
    }
}

#[cfg(test)]
mod hostile_tests;
