//! Why an HTTP/1.1 response could not be parsed.

use std::fmt;

use crate::measure::FailKind;

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
    BodyTooLarge,
    /// The peer closed the connection before sending any byte of a response.
    ClosedBeforeResponse,
    /// The peer closed the connection in the middle of a response.
    Truncated,
}

impl ParseError {
    /// The failure kind a request that met this error counts as.
    pub fn kind(&self) -> FailKind {
        match self {
            ParseError::Head(_)
            | ParseError::SwitchingProtocols
            | ParseError::BadChunkSize
            | ParseError::BadChunkEnd
            | ParseError::BadTrailer => FailKind::Framing,
            ParseError::BadContentLength
            | ParseError::BadInferenceHeaderLength
            | ParseError::ChunkSizeOverflow => FailKind::Length,
            ParseError::HeadTooLarge
            | ParseError::ChunkLineTooLong
            | ParseError::TrailersTooLarge
            | ParseError::BodyTooLarge => FailKind::Limit,
            ParseError::ClosedBeforeResponse | ParseError::Truncated => FailKind::Closed,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            ParseError::Head(e) => return write!(f, "malformed HTTP response head: {e}"),
            ParseError::HeadTooLarge => "HTTP response head exceeds the size limit",
            ParseError::SwitchingProtocols => "unexpected HTTP 101 Switching Protocols",
            ParseError::BadContentLength => "invalid or conflicting Content-Length header",
            ParseError::BadInferenceHeaderLength => {
                "invalid Inference-Header-Content-Length header"
            }
            ParseError::BadChunkSize => "invalid chunk size line in chunked body",
            ParseError::ChunkSizeOverflow => "chunk size does not fit in 64 bits",
            ParseError::ChunkLineTooLong => "chunk size line exceeds the size limit",
            ParseError::BadChunkEnd => "chunk data not followed by CRLF",
            ParseError::BadTrailer => "malformed trailer field in chunked body",
            ParseError::TrailersTooLarge => "chunked body trailers exceed the size limit",
            ParseError::BodyTooLarge => "HTTP response body exceeds the size limit",
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
