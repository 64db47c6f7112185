//! One error type for the whole tool; each kind maps to perf_analyzer's exit code.

use std::fmt;

/// What went wrong, in the terms of perf_analyzer's exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad flags or input files (exit 99, like perf_analyzer's GENERIC_ERROR for CLI errors).
    Usage,
    /// The very first sweep point never stabilised (exit 2).
    Stability,
    /// "No valid requests recorded within time interval" (exit 3, OPTION_ERROR).
    NoValidRequests,
    /// Anything else: server down, protocol errors, I/O (exit 99).
    Generic,
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub msg: String,
}

impl Error {
    pub fn usage(msg: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Usage,
            msg: msg.into(),
        }
    }
    pub fn generic(msg: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Generic,
            msg: msg.into(),
        }
    }
    pub fn stability(msg: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Stability,
            msg: msg.into(),
        }
    }
    /// `what` (a subcommand or flag) in a build without the Cargo feature it needs.
    pub fn without_feature(what: &str, feature: &str) -> Self {
        Error::usage(format!(
            "inferperf was built without the `{feature}` feature; `{what}` needs it"
        ))
    }
    pub fn no_valid_requests() -> Self {
        Error {
            kind: ErrorKind::NoValidRequests,
            msg:
                "No valid requests recorded within time interval. Please use a larger time window."
                    .into(),
        }
    }
    /// The process exit code perf_analyzer uses for this kind of failure.
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::Usage | ErrorKind::Generic => 99,
            ErrorKind::Stability => 2,
            ErrorKind::NoValidRequests => 3,
        }
    }
}

/// The message as printed: control characters a server may have put into it (an escape
/// sequence in an error reply) are escaped; `msg` keeps the text as received.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::text::escape_control(&self.msg))
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::generic(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn display_escapes_a_servers_control_characters() {
        let e = Error::generic("server said: \x1b[31mboom\x1b[0m\x07\r\nnext line");
        assert_eq!(
            e.to_string(),
            "server said: \\x1b[31mboom\\x1b[0m\\x07\\x0d\nnext line"
        );
        assert_eq!(e.exit_code(), 99);
    }
}
