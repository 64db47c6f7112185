//! The limits the server puts on a request and the refusal it answers when one is broken.

/// Largest request head (request line + headers) the server buffers, in bytes.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Largest request body the server accepts by default, in bytes (after chunked decoding);
/// `--max-request-bytes` sets it.
pub const MAX_BODY_BYTES: usize = crate::limits::DEFAULT_MAX_REQUEST_BYTES;

/// A request the server refuses: the status to answer with and why. The connection closes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub status: u16,
    pub msg: String,
}

impl HttpError {
    pub(super) fn bad(msg: impl Into<String>) -> Self {
        HttpError {
            status: 400,
            msg: msg.into(),
        }
    }
    /// 431: the head is longer than [`MAX_HEAD_BYTES`] or has too many header lines.
    pub(super) fn head_too_large(msg: impl Into<String>) -> Self {
        HttpError {
            status: 431,
            msg: msg.into(),
        }
    }
    pub(super) fn too_large(what: &str, limit: usize) -> Self {
        HttpError {
            status: 413,
            msg: format!("{what} exceeds the limit of {limit} bytes"),
        }
    }
}
