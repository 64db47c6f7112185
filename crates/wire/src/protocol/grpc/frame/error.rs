//! RFC 9113 §7 error codes and the parser's error type.

use std::fmt;

/// Error codes of RFC 9113 §7, as carried by RST_STREAM and GOAWAY and by `H2Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    NoError,
    ProtocolError,
    InternalError,
    FlowControlError,
    SettingsTimeout,
    StreamClosed,
    FrameSizeError,
    RefusedStream,
    Cancel,
    CompressionError,
    ConnectError,
    EnhanceYourCalm,
    InadequateSecurity,
    Http11Required,
    /// A code this version does not know; RFC 9113 says to treat it like INTERNAL_ERROR.
    Unknown(u32),
}

impl ErrorCode {
    const KNOWN: [ErrorCode; 14] = [
        ErrorCode::NoError,
        ErrorCode::ProtocolError,
        ErrorCode::InternalError,
        ErrorCode::FlowControlError,
        ErrorCode::SettingsTimeout,
        ErrorCode::StreamClosed,
        ErrorCode::FrameSizeError,
        ErrorCode::RefusedStream,
        ErrorCode::Cancel,
        ErrorCode::CompressionError,
        ErrorCode::ConnectError,
        ErrorCode::EnhanceYourCalm,
        ErrorCode::InadequateSecurity,
        ErrorCode::Http11Required,
    ];

    pub fn from_u32(code: u32) -> Self {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::KNOWN.get(i).copied())
            .unwrap_or(ErrorCode::Unknown(code))
    }

    pub fn to_u32(self) -> u32 {
        match self {
            ErrorCode::Unknown(code) => code,
            known => Self::KNOWN
                .iter()
                .position(|&k| k == known)
                .and_then(|i| u32::try_from(i).ok())
                .unwrap_or(0x2),
        }
    }

    /// The RFC's name for the code, as used in log and error messages.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NoError => "NO_ERROR",
            ErrorCode::ProtocolError => "PROTOCOL_ERROR",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::FlowControlError => "FLOW_CONTROL_ERROR",
            ErrorCode::SettingsTimeout => "SETTINGS_TIMEOUT",
            ErrorCode::StreamClosed => "STREAM_CLOSED",
            ErrorCode::FrameSizeError => "FRAME_SIZE_ERROR",
            ErrorCode::RefusedStream => "REFUSED_STREAM",
            ErrorCode::Cancel => "CANCEL",
            ErrorCode::CompressionError => "COMPRESSION_ERROR",
            ErrorCode::ConnectError => "CONNECT_ERROR",
            ErrorCode::EnhanceYourCalm => "ENHANCE_YOUR_CALM",
            ErrorCode::InadequateSecurity => "INADEQUATE_SECURITY",
            ErrorCode::Http11Required => "HTTP_1_1_REQUIRED",
            ErrorCode::Unknown(_) => "UNKNOWN_ERROR",
        }
    }
}

/// A frame the peer sent that breaks RFC 9113.
///
/// `stream == 0` is a connection error (answer with GOAWAY and close). `stream != 0` is a
/// stream error: the whole frame was buffered, so the session may answer with RST_STREAM and
/// skip `FRAME_HEADER_LEN + header.len` bytes, or escalate to a connection error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Error {
    pub code: ErrorCode,
    pub stream: u32,
    pub msg: &'static str,
}

impl H2Error {
    pub(super) fn connection(code: ErrorCode, msg: &'static str) -> Self {
        H2Error {
            code,
            stream: 0,
            msg,
        }
    }

    pub(super) fn stream(code: ErrorCode, stream: u32, msg: &'static str) -> Self {
        H2Error { code, stream, msg }
    }
}

impl fmt::Display for H2Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.stream == 0 {
            write!(
                f,
                "HTTP/2 connection error {}: {}",
                self.code.name(),
                self.msg
            )
        } else {
            write!(
                f,
                "HTTP/2 stream {} error {}: {}",
                self.stream,
                self.code.name(),
                self.msg
            )
        }
    }
}

impl std::error::Error for H2Error {}

impl From<H2Error> for crate::error::Error {
    fn from(e: H2Error) -> Self {
        crate::error::Error::generic(e.to_string())
    }
}
