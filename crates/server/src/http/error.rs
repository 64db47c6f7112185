//! The limits the server puts on a request and the refusal it answers when one is broken.

/// Largest request head (request line + headers) the server buffers, in bytes.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Largest request body the server accepts, in bytes (after chunked decoding).
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

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
    pub(super) fn too_large(what: &str, limit: usize) -> Self {
        HttpError {
            status: 413,
            msg: format!("{what} exceeds the limit of {limit} bytes"),
        }
    }
}
