//! Why an HTTP/1.1 response could not be parsed.

use std::fmt;

use crate::fail::FailKind;

/// Why a response could not be parsed. Every variant is final for the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// The status line or a header field is malformed (or there are too many fields).
    Head(httparse::Error),
    HeadTooLarge,
    /// 101: the client never asks for an upgrade.
    SwitchingProtocols,
    BadContentLength,
    BadInferenceHeaderLength,
    BadChunkSize,
    ChunkSizeOverflow,
    ChunkLineTooLong,
    BadChunkEnd,
    BadTrailer,
    TrailersTooLarge,
    /// The chunk-size lines, extensions and CRLFs of a chunked body exceed 5 bytes per data
    /// byte (what one-byte chunks need) by more than `limit` bytes.
    ChunkFramingTooLarge {
        limit: usize,
    },
    /// A decoded body longer than the response size limit (bytes).
    BodyTooLarge {
        limit: usize,
    },
    /// A `Content-Length` above the response size limit, refused before any body byte is read.
    ContentLengthTooLarge {
        len: usize,
        limit: usize,
    },
    /// More interim (1xx) responses before the final one than `limit`.
    TooManyInterim {
        limit: usize,
    },
    /// The interim (1xx) responses before the final one exceed `limit` bytes in total.
    InterimTooLarge {
        limit: usize,
    },
    /// The peer closed the connection before sending any byte of a response.
    ClosedBeforeResponse,
    /// The peer closed the connection in the middle of a response.
    Truncated,
}

/// How to raise the response size limit, named in the messages of the errors it causes.
const RAISE: &str = "raise it with --max-response-bytes";

impl ParseError {
    /// The failure kind a request that met this error is counted under.
    pub fn kind(&self) -> FailKind {
        match self {
            ParseError::Head(httparse::Error::TooManyHeaders)
            | ParseError::HeadTooLarge
            | ParseError::ChunkLineTooLong
            | ParseError::TrailersTooLarge
            | ParseError::ChunkFramingTooLarge { .. }
            | ParseError::BodyTooLarge { .. }
            | ParseError::ContentLengthTooLarge { .. }
            | ParseError::TooManyInterim { .. }
            | ParseError::InterimTooLarge { .. } => FailKind::Limit,
            ParseError::BadContentLength | ParseError::BadInferenceHeaderLength => FailKind::Length,
            ParseError::ClosedBeforeResponse | ParseError::Truncated => FailKind::Closed,
            ParseError::Head(_)
            | ParseError::SwitchingProtocols
            | ParseError::BadChunkSize
            | ParseError::ChunkSizeOverflow
            | ParseError::BadChunkEnd
            | ParseError::BadTrailer => FailKind::Framing,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match *self {
            ParseError::Head(httparse::Error::TooManyHeaders) => {
                return write!(
                    f,
                    "HTTP response head has more than {} header fields",
                    super::MAX_HEADERS
                )
            }
            ParseError::Head(e) => return write!(f, "malformed HTTP response head: {e}"),
            ParseError::ChunkFramingTooLarge { limit } => {
                return write!(
                    f,
                    "chunked body framing (chunk-size lines, extensions, CRLFs) exceeds {} \
                     bytes per data byte by more than {limit} bytes",
                    super::chunked::FRAMING_PER_BYTE
                )
            }
            ParseError::BodyTooLarge { limit } => {
                return write!(
                    f,
                    "HTTP response body exceeds the response size limit ({limit} bytes; {RAISE})"
                )
            }
            ParseError::ContentLengthTooLarge { len, limit } => {
                return write!(
                    f,
                    "Content-Length {len} exceeds the response size limit ({limit} bytes; {RAISE})"
                )
            }
            ParseError::TooManyInterim { limit } => {
                return write!(
                    f,
                    "server sent more than {limit} interim (1xx) responses before the final one"
                )
            }
            ParseError::InterimTooLarge { limit } => {
                return write!(
                    f,
                    "interim (1xx) responses exceed {limit} bytes before the final response"
                )
            }
            ParseError::HeadTooLarge => {
                "HTTP response head (status line and header fields) exceeds the size limit"
            }
            ParseError::SwitchingProtocols => "unexpected HTTP 101 Switching Protocols",
            ParseError::BadContentLength => "invalid or conflicting Content-Length header",
            ParseError::BadInferenceHeaderLength => {
                "invalid Inference-Header-Content-Length header"
            }
            ParseError::BadChunkSize => "invalid chunk size line in chunked body",
            ParseError::ChunkSizeOverflow => "chunk size does not fit in 64 bits",
            ParseError::ChunkLineTooLong => {
                "chunk-size line (with its extensions) exceeds the size limit"
            }
            ParseError::BadChunkEnd => "chunk data not followed by CRLF",
            ParseError::BadTrailer => "malformed trailer field in chunked body",
            ParseError::TrailersTooLarge => "chunked body trailers exceed the size limit",
            ParseError::ClosedBeforeResponse => "connection closed by server before a response",
            ParseError::Truncated => "connection closed by server in the middle of a response",
        };
        f.write_str(text)
    }
}

impl std::error::Error for ParseError {}

impl From<ParseError> for crate::error::Error {
    fn from(e: ParseError) -> Self {
        crate::error::Error::generic(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_have_kinds() {
        assert_eq!(ParseError::BadChunkSize.kind(), FailKind::Framing);
        assert_eq!(ParseError::BadContentLength.kind(), FailKind::Length);
        assert_eq!(ParseError::HeadTooLarge.kind(), FailKind::Limit);
        assert_eq!(ParseError::Truncated.kind(), FailKind::Closed);
        let head = ParseError::Head(httparse::Error::Status);
        assert_eq!(head.kind(), FailKind::Framing);
    }
}
