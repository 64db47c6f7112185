//! Why a request failed, and the tally of failures a run reports.
//!
//! Every failed request carries one [`FailKind`]; workers count failures by kind and keep the
//! first message of each kind as its example. The final error line names the dominant kind
//! with its example: "all 10 requests failed: response body shorter than Content-Length
//! (server closed after 12 of 64 bytes)"; with several kinds it counts each by its
//! [`FailKind::name`]: "12 of 60 requests failed (connect_failed: 4, reset: 4,
//! closed_early: 4); connect_failed: ...".

use std::fmt::Write as _;

/// The cause of a failed request. `#[repr(u8)]`: it rides in the client's request record
/// without growing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum FailKind {
    /// Not a failure (a successful record).
    #[default]
    None = 0,
    /// The connection could not be opened (refused, unreachable, TLS handshake failed).
    Connect,
    /// The server reset the connection or the stream (RST, RST_STREAM, GOAWAY with an error).
    Reset,
    /// The server closed the connection before the response was complete.
    Closed,
    /// No answer within the request timeout or the connection's idle limit.
    Timeout,
    /// A non-success HTTP status or grpc-status.
    Status,
    /// Bytes that are not valid HTTP/1.1, HTTP/2, gRPC or SSE framing.
    Framing,
    /// A body whose length contradicts its framing or its declared sizes.
    Length,
    /// A gRPC reply that does not decode as the RPC's protobuf message.
    NotProtobuf,
    /// An HTTP reply that does not parse as the service's JSON (or binary) format.
    NotJson,
    /// An SSE stream that carried an error event.
    SseError,
    /// A well-formed reply that contradicts the request: wrong model name, missing output,
    /// a shape that disagrees with its bytes.
    Invalid,
    /// The peer exceeded a limit: header size or count, body size, interim responses, chunk
    /// framing, HTTP/2 SETTINGS/PING floods, header block size.
    Limit,
    /// Cancelled on purpose by the client (`profile --request-cancellation-rate`): not a
    /// server failure, reported apart.
    Cancelled,
    /// Anything else (local I/O errors, C API errors).
    Other,
}

/// Number of kinds, [`FailKind::None`] included (array sizes).
pub const KINDS: usize = FailKind::Other as usize + 1;

impl FailKind {
    /// Every failure kind, in declaration order ([`FailKind::None`] excluded).
    pub const ALL: [FailKind; KINDS - 1] = [
        FailKind::Connect,
        FailKind::Reset,
        FailKind::Closed,
        FailKind::Timeout,
        FailKind::Status,
        FailKind::Framing,
        FailKind::Length,
        FailKind::NotProtobuf,
        FailKind::NotJson,
        FailKind::SseError,
        FailKind::Invalid,
        FailKind::Limit,
        FailKind::Cancelled,
        FailKind::Other,
    ];

    /// The kind whose `as u8` is `v` (a record decoded from another rank); an unknown value
    /// is [`FailKind::Other`].
    pub fn from_u8(v: u8) -> FailKind {
        match v {
            0 => FailKind::None,
            v => FailKind::ALL
                .get(usize::from(v) - 1)
                .copied()
                .unwrap_or(FailKind::Other),
        }
    }

    /// The kind's one name, the same everywhere it is shown: the stderr summary, the
    /// console's `Errors:` line, `errors_by_kind` and `error_summary` in the JSON exports, and
    /// the `type` of each failed request in `profile_export.jsonl`.
    pub fn name(self) -> &'static str {
        match self {
            FailKind::None => "ok",
            FailKind::Connect => "connect_failed",
            FailKind::Reset => "reset",
            FailKind::Closed => "closed_early",
            FailKind::Timeout => "timeout",
            FailKind::Status => "http_error",
            FailKind::Framing => "bad_framing",
            FailKind::Length => "wrong_length",
            FailKind::NotProtobuf => "not_protobuf",
            FailKind::NotJson => "not_json",
            FailKind::SseError => "sse_error_event",
            FailKind::Invalid => "invalid_reply",
            FailKind::Limit => "over_limit",
            FailKind::Cancelled => "cancelled",
            FailKind::Other => "other",
        }
    }

    /// The kind named `name` ([`FailKind::name`]); an unknown name is [`FailKind::Other`].
    pub fn from_name(name: &str) -> FailKind {
        FailKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == name)
            .unwrap_or(FailKind::Other)
    }

    /// A message's kind, for code paths that only have text (I/O errors from the transport).
    pub fn of_io(e: &std::io::Error) -> FailKind {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::ConnectionRefused | K::AddrNotAvailable | K::HostUnreachable => FailKind::Connect,
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => FailKind::Reset,
            K::UnexpectedEof => FailKind::Closed,
            K::TimedOut | K::WouldBlock => FailKind::Timeout,
            _ => FailKind::Other,
        }
    }
}

/// Longest example message kept per kind (bytes); longer ones are cut at a char boundary.
const MAX_EXAMPLE: usize = 512;

/// Failures counted by kind, with the first message of each kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailTally {
    counts: [u64; KINDS],
    examples: [Option<String>; KINDS],
}

impl FailTally {
    /// Counts one failure; the message is built only for the first failure of its kind.
    pub fn add(&mut self, kind: FailKind, msg: impl FnOnce() -> String) {
        let k = kind as usize;
        self.counts[k] += 1;
        if self.examples[k].is_none() {
            let mut m = msg();
            if m.len() > MAX_EXAMPLE {
                let mut end = MAX_EXAMPLE;
                while !m.is_char_boundary(end) {
                    end -= 1;
                }
                m.truncate(end);
            }
            self.examples[k] = Some(m);
        }
    }

    /// Adds another tally (another worker's).
    pub fn merge(&mut self, other: &FailTally) {
        for k in 0..KINDS {
            self.counts[k] += other.counts[k];
            if self.examples[k].is_none() {
                self.examples[k] = other.examples[k].clone();
            }
        }
    }

    /// The same tally without the failures of `kind`.
    pub fn without(&self, kind: FailKind) -> FailTally {
        let mut t = self.clone();
        t.counts[kind as usize] = 0;
        t.examples[kind as usize] = None;
        t
    }

    pub fn count(&self, kind: FailKind) -> u64 {
        self.counts[kind as usize]
    }

    /// Failed requests of every kind.
    pub fn total(&self) -> u64 {
        self.counts[1..].iter().sum()
    }

    pub fn example(&self, kind: FailKind) -> Option<&str> {
        self.examples[kind as usize].as_deref()
    }

    /// The kind with the most failures (the earlier kind on a tie), if any failed.
    pub fn dominant(&self) -> Option<FailKind> {
        FailKind::ALL
            .iter()
            .copied()
            .filter(|k| self.count(*k) > 0)
            .max_by(|a, b| self.count(*a).cmp(&self.count(*b)).then(b.cmp(a)))
    }

    /// One line for the end of a run: `None` when nothing failed.
    ///
    /// - every request failed, one kind: "all 10 requests failed: <example>"
    /// - nothing completed (the connections failed): "no request completed: <example>"
    /// - some failed, or several kinds: "3 of 120 requests failed (reset: 1, timeout: 2);
    ///   timeout: <example>"
    ///
    /// `completed` counts every finished request, failed ones included.
    pub fn summary(&self, completed: u64) -> Option<String> {
        let total = self.total();
        let dominant = self.dominant()?;
        let example = self.example(dominant).unwrap_or("no message");
        let kinds: Vec<FailKind> = FailKind::ALL
            .iter()
            .copied()
            .filter(|k| self.count(*k) > 0)
            .collect();
        let mut line = String::new();
        if completed == 0 {
            // Only connections failed: no request was sent, or none got as far as a record.
            let _ = write!(line, "no request completed");
        } else if total >= completed {
            let _ = write!(line, "all {total} requests failed");
        } else {
            let _ = write!(line, "{total} of {completed} requests failed");
        }
        if kinds.len() == 1 {
            let _ = write!(line, ": {example}");
            return Some(line);
        }
        let parts: Vec<String> = kinds
            .iter()
            .map(|k| format!("{}: {}", k.name(), self.count(*k)))
            .collect();
        let _ = write!(
            line,
            " ({}); {}: {example}",
            parts.join(", "),
            dominant.name()
        );
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_kind_names_its_example() {
        let mut t = FailTally::default();
        for i in 0..10 {
            t.add(FailKind::Closed, || format!("closed after {i} bytes"));
        }
        assert_eq!(t.total(), 10);
        assert_eq!(
            t.summary(10).as_deref(),
            Some("all 10 requests failed: closed after 0 bytes")
        );
    }

    #[test]
    fn several_kinds_are_counted_and_the_dominant_one_is_named() {
        let mut t = FailTally::default();
        t.add(FailKind::Reset, || "reset by peer".into());
        let mut other = FailTally::default();
        other.add(FailKind::Timeout, || "timed out after 2 s".into());
        other.add(FailKind::Timeout, || unreachable!("second example built"));
        t.merge(&other);
        assert_eq!(t.dominant(), Some(FailKind::Timeout));
        assert_eq!(
            t.summary(120).as_deref(),
            Some("3 of 120 requests failed (reset: 1, timeout: 2); timeout: timed out after 2 s")
        );
        assert_eq!(FailTally::default().summary(5), None);
        let mut refused = FailTally::default();
        refused.add(FailKind::Connect, || "connect failed: refused".into());
        assert_eq!(
            refused.summary(0).as_deref(),
            Some("no request completed: connect failed: refused")
        );
    }

    #[test]
    fn a_tie_names_the_earlier_kind_and_long_examples_are_cut() {
        let mut t = FailTally::default();
        t.add(FailKind::Status, || "é".repeat(400));
        t.add(FailKind::Reset, || "r".into());
        assert_eq!(t.dominant(), Some(FailKind::Reset));
        assert!(t.example(FailKind::Status).unwrap().len() <= MAX_EXAMPLE);
    }

    #[test]
    fn io_errors_map_to_kinds() {
        let e = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(FailKind::of_io(&e), FailKind::Connect);
        let e = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(FailKind::of_io(&e), FailKind::Reset);
    }

    #[test]
    fn kinds_round_trip_through_u8() {
        for k in FailKind::ALL.iter().copied().chain([FailKind::None]) {
            assert_eq!(FailKind::from_u8(k as u8), k);
        }
        for k in FailKind::ALL {
            assert_eq!(FailKind::from_name(k.name()), k);
        }
        assert_eq!(FailKind::from_name("no such kind"), FailKind::Other);
        assert_eq!(FailKind::from_u8(200), FailKind::Other);
    }
}
