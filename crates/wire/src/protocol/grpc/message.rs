//! gRPC length-prefixed messages (the gRPC-over-HTTP/2 "Length-Prefixed-Message"): a 1-byte
//! compressed flag, a 4-byte big-endian length, then the message bytes, carried in DATA
//! frames that may split a message anywhere.

use std::fmt;

/// Bytes in front of every message: flag (1) + big-endian length (4).
pub const MESSAGE_PREFIX_LEN: usize = 5;
/// Default cap on one received message (64 MiB); a longer prefix is rejected at once.
pub const DEFAULT_MAX_MESSAGE_LEN: usize = 64 << 20;

/// A length-prefixed message stream that breaks the framing rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcFramingError {
    /// The compressed-flag byte was neither 0 nor 1.
    BadFlag(u8),
    /// The announced length (bytes) exceeds the reader's limit (bytes).
    TooLong { len: u32, limit: usize },
    /// A message to send is longer than the 4-byte length field can say (bytes).
    Unencodable { len: usize },
    /// The stream ended in the middle of a message; `buffered` bytes were left over.
    Truncated { buffered: usize },
    /// A message flagged compressed in a response that names no `grpc-encoding`.
    CompressedWithoutEncoding,
}

impl fmt::Display for GrpcFramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GrpcFramingError::BadFlag(flag) => {
                write!(f, "gRPC message compressed flag is {flag}, expected 0 or 1")
            }
            GrpcFramingError::TooLong { len, limit } => {
                write!(
                    f,
                    "gRPC message length {len} bytes exceeds the limit of {limit} bytes"
                )
            }
            GrpcFramingError::Unencodable { len } => {
                write!(
                    f,
                    "gRPC message of {len} bytes does not fit the 4-byte length prefix"
                )
            }
            GrpcFramingError::Truncated { buffered } => write!(
                f,
                "gRPC stream ended inside a message ({buffered} bytes left over)"
            ),
            GrpcFramingError::CompressedWithoutEncoding => f.write_str(
                "gRPC message flagged compressed, but the response names no grpc-encoding",
            ),
        }
    }
}

impl std::error::Error for GrpcFramingError {}

impl From<GrpcFramingError> for crate::error::Error {
    fn from(e: GrpcFramingError) -> Self {
        crate::error::Error::generic(e.to_string())
    }
}

/// Appends the 5-byte prefix for a message of `len` bytes; the caller appends the bytes.
/// Lets pre-encoded request bodies be written without an intermediate copy.
pub fn write_message_prefix(
    out: &mut Vec<u8>,
    len: usize,
    compressed: bool,
) -> Result<(), GrpcFramingError> {
    let len32 = u32::try_from(len).map_err(|_| GrpcFramingError::Unencodable { len })?;
    out.push(u8::from(compressed));
    out.extend_from_slice(&len32.to_be_bytes());
    Ok(())
}

/// Appends `msg` with its prefix. `compressed` says the bytes are already compressed with the
/// call's grpc-encoding; this function does not compress.
pub fn write_message(
    out: &mut Vec<u8>,
    msg: &[u8],
    compressed: bool,
) -> Result<(), GrpcFramingError> {
    out.reserve(MESSAGE_PREFIX_LEN + msg.len());
    write_message_prefix(out, msg.len(), compressed)?;
    out.extend_from_slice(msg);
    Ok(())
}

/// One decoded message; `data` borrows the reader's buffer until the next `push`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub compressed: bool,
    pub data: &'a [u8],
}

/// Reassembles messages from DATA payloads of any split. One reader per stream (or reuse it
/// across calls with `reset`); its buffer keeps its capacity, so a warmed-up reader does not
/// allocate for messages no larger than those it has seen.
///
/// Use: `push` each DATA payload, then call `next_message` until it returns `Ok(None)`; at
/// END_STREAM call `finish` to catch a truncated message.
#[derive(Debug)]
pub struct MessageReader {
    buf: Vec<u8>,
    /// Offset of the first byte not yet returned as part of a message.
    start: usize,
    /// Largest accepted message, bytes.
    max_len: usize,
}

impl Default for MessageReader {
    fn default() -> Self {
        Self::new()
    }
}

impl MessageReader {
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_MESSAGE_LEN)
    }

    /// A reader that rejects messages longer than `max_len` bytes.
    pub fn with_limit(max_len: usize) -> Self {
        MessageReader {
            buf: Vec::new(),
            start: 0,
            max_len,
        }
    }

    /// Appends one DATA payload. Drops bytes of messages already returned first, so returned
    /// slices are invalid after this call. Fails early if the next message's prefix is bad,
    /// so a peer cannot make the reader buffer past the limit.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), GrpcFramingError> {
        if self.start == self.buf.len() {
            self.buf.clear();
        } else if self.start > 0 {
            self.buf.drain(..self.start);
        }
        self.start = 0;
        self.buf.extend_from_slice(chunk);
        self.pending_len().map(|_| ())
    }

    /// The next complete message, `Ok(None)` if more bytes are needed. An error repeats on
    /// every later call: the stream cannot be resynchronised.
    pub fn next_message(&mut self) -> Result<Option<Message<'_>>, GrpcFramingError> {
        let Some(len) = self.pending_len()? else {
            return Ok(None);
        };
        let body_start = self.start + MESSAGE_PREFIX_LEN;
        let Some(data) = self.buf.get(body_start..body_start + len) else {
            return Ok(None);
        };
        let compressed = self.buf[self.start] == 1;
        self.start = body_start + len;
        Ok(Some(Message { compressed, data }))
    }

    /// Checks that the stream ended between messages (call at END_STREAM, after draining
    /// `next_message`).
    pub fn finish(&self) -> Result<(), GrpcFramingError> {
        match self.buffered() {
            0 => Ok(()),
            buffered => Err(GrpcFramingError::Truncated { buffered }),
        }
    }

    /// Bytes received but not yet returned as a message.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Forgets all buffered bytes and keeps the buffer's capacity for the next stream.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.start = 0;
    }

    /// Validates the prefix at `start`; the message length once the whole prefix is buffered.
    fn pending_len(&self) -> Result<Option<usize>, GrpcFramingError> {
        let rest = &self.buf[self.start..];
        let Some(&flag) = rest.first() else {
            return Ok(None);
        };
        if flag > 1 {
            return Err(GrpcFramingError::BadFlag(flag));
        }
        let Some(len_bytes) = rest.get(1..MESSAGE_PREFIX_LEN) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        match usize::try_from(len) {
            Ok(n) if n <= self.max_len => Ok(Some(n)),
            _ => Err(GrpcFramingError::TooLong {
                len,
                limit: self.max_len,
            }),
        }
    }
}

/// What one stream's bytes turned into: messages in order, then an error or the end.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Message { compressed: bool, data: Vec<u8> },
    Error(GrpcFramingError),
}

/// Feeds `data` in chunks of `steps[i]` bytes (cycled; 0 counts as 1) and drains messages
/// after each chunk, ending with `finish`.
fn decode_stream(data: &[u8], steps: &[usize], max_len: usize) -> Vec<Outcome> {
    let mut reader = MessageReader::with_limit(max_len);
    let mut outcomes = Vec::new();
    let mut fed = 0;
    let mut pushes = 0;
    while fed < data.len() {
        let step = steps.get(pushes % steps.len().max(1)).copied().unwrap_or(1);
        let end = (fed + step.max(1)).min(data.len());
        pushes += 1;
        let pushed = reader.push(&data[fed..end]);
        fed = end;
        if let Err(e) = pushed.and_then(|()| drain(&mut reader, &mut outcomes)) {
            outcomes.push(Outcome::Error(e));
            return outcomes;
        }
    }
    if let Err(e) = reader.finish() {
        outcomes.push(Outcome::Error(e));
    }
    outcomes
}

/// Moves every complete message out of `reader`, checking each re-encodes to the same bytes.
fn drain(reader: &mut MessageReader, outcomes: &mut Vec<Outcome>) -> Result<(), GrpcFramingError> {
    while let Some(msg) = reader.next_message()? {
        let mut again = MessageReader::with_limit(msg.data.len());
        let mut encoded = Vec::new();
        write_message(&mut encoded, msg.data, msg.compressed)?;
        again.push(&encoded)?;
        assert_eq!(
            again.next_message(),
            Ok(Some(msg)),
            "round trip changed a message"
        );
        outcomes.push(Outcome::Message {
            compressed: msg.compressed,
            data: msg.data.to_vec(),
        });
    }
    Ok(())
}

/// Decodes `data` as the DATA bytes of one gRPC response stream, fed whole, byte by byte and
/// in chunks whose sizes come from the data itself, with the default and a 16-byte limit.
/// Panics only if the ways of feeding disagree or an invariant breaks (a bug to report).
pub fn fuzz_grpc_messages(data: &[u8]) {
    let split_steps: Vec<usize> = data
        .iter()
        .take(32)
        .map(|&b| usize::from(b % 13) + 1)
        .collect();
    for max_len in [DEFAULT_MAX_MESSAGE_LEN, 16] {
        let whole = decode_stream(data, &[data.len()], max_len);
        let split = decode_stream(data, &split_steps, max_len);
        assert_eq!(whole, split, "split feeding differs from whole feeding");
        if data.len() <= 8192 {
            let bytewise = decode_stream(data, &[1], max_len);
            assert_eq!(whole, bytewise, "byte-by-byte feeding differs");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(messages: &[(&[u8], bool)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(msg, compressed) in messages {
            write_message(&mut out, msg, compressed).unwrap();
        }
        out
    }

    #[test]
    fn writer_layout() {
        let cases: &[(&[u8], bool, &[u8])] = &[
            (b"", false, &[0, 0, 0, 0, 0]),
            (b"hi", false, &[0, 0, 0, 0, 2, b'h', b'i']),
            (b"z", true, &[1, 0, 0, 0, 1, b'z']),
        ];
        for &(msg, compressed, want) in cases {
            assert_eq!(encoded(&[(msg, compressed)]), want, "{msg:?}");
        }
        let mut out = Vec::new();
        write_message_prefix(&mut out, 0x0102_0304, false).unwrap();
        assert_eq!(out, [0, 1, 2, 3, 4]);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(
            write_message_prefix(&mut out, 1 << 32, false),
            Err(GrpcFramingError::Unencodable { len: 1 << 32 })
        );
    }

    #[test]
    fn messages_reassemble_from_any_split() {
        let big = vec![0xab; 70_000];
        let stream = encoded(&[(b"first", false), (b"", false), (&big, true), (b"x", false)]);
        for step in [1, 2, 4, 5, 6, 7, 1000, stream.len()] {
            let mut reader = MessageReader::new();
            let mut got: Vec<(bool, Vec<u8>)> = Vec::new();
            for chunk in stream.chunks(step) {
                reader.push(chunk).unwrap();
                while let Some(msg) = reader.next_message().unwrap() {
                    got.push((msg.compressed, msg.data.to_vec()));
                }
            }
            reader.finish().unwrap();
            let want = vec![
                (false, b"first".to_vec()),
                (false, Vec::new()),
                (true, big.clone()),
                (false, b"x".to_vec()),
            ];
            assert_eq!(got, want, "step {step}");
        }
    }

    #[test]
    fn framing_errors() {
        let big_prefix = [0, 0, 0, 0, 17];
        // (name, bytes, limit, error from push, else from next_message, else from finish)
        let cases: &[(&str, &[u8], usize, GrpcFramingError)] = &[
            (
                "flag 2",
                &[2, 0, 0, 0, 0],
                100,
                GrpcFramingError::BadFlag(2),
            ),
            (
                "flag 0xff alone",
                &[0xff],
                100,
                GrpcFramingError::BadFlag(0xff),
            ),
            (
                "over limit",
                &big_prefix,
                16,
                GrpcFramingError::TooLong { len: 17, limit: 16 },
            ),
            (
                "over default limit",
                &[0, 4, 0, 0, 1],
                DEFAULT_MAX_MESSAGE_LEN,
                GrpcFramingError::TooLong {
                    len: (64 << 20) + 1,
                    limit: 64 << 20,
                },
            ),
            (
                "truncated prefix",
                &[0, 0, 0],
                100,
                GrpcFramingError::Truncated { buffered: 3 },
            ),
            (
                "truncated body",
                &[1, 0, 0, 0, 3, 9],
                100,
                GrpcFramingError::Truncated { buffered: 6 },
            ),
        ];
        for &(name, bytes, limit, want) in cases {
            let mut reader = MessageReader::with_limit(limit);
            let got = reader
                .push(bytes)
                .and_then(|()| reader.next_message().map(|_| ()))
                .and_then(|()| reader.finish());
            assert_eq!(got, Err(want), "{name}");
            assert!(!want.to_string().is_empty());
        }
    }

    #[test]
    fn error_after_good_message_is_sticky() {
        let mut stream = encoded(&[(b"ok", false)]);
        stream.extend_from_slice(&[7, 0, 0, 0, 0]);
        let mut reader = MessageReader::new();
        reader.push(&stream).unwrap();
        assert_eq!(
            reader.next_message(),
            Ok(Some(Message {
                compressed: false,
                data: b"ok"
            }))
        );
        assert_eq!(reader.next_message(), Err(GrpcFramingError::BadFlag(7)));
        assert_eq!(reader.next_message(), Err(GrpcFramingError::BadFlag(7)));
        assert_eq!(reader.push(b""), Err(GrpcFramingError::BadFlag(7)));
    }

    #[test]
    fn buffer_is_reused_across_messages_and_reset() {
        let mut reader = MessageReader::new();
        let one = encoded(&[(&[5; 1000], false)]);
        reader.push(&one).unwrap();
        assert!(reader.next_message().unwrap().is_some());
        let capacity = reader.buf.capacity();
        for _ in 0..10 {
            reader.push(&one).unwrap();
            assert!(reader.next_message().unwrap().is_some());
            assert_eq!(reader.buffered(), 0);
        }
        reader.push(&one[..10]).unwrap();
        assert_eq!(reader.buffered(), 10);
        reader.reset();
        assert_eq!(reader.buffered(), 0);
        reader.finish().unwrap();
        assert_eq!(reader.buf.capacity(), capacity, "buffer was reallocated");
    }

    #[test]
    fn fuzz_entry_survives_samples() {
        let mut good = encoded(&[(b"abc", false), (&[1; 40], true)]);
        let samples: Vec<Vec<u8>> = vec![
            Vec::new(),
            vec![0; 5],
            vec![2; 9],
            vec![0, 0xff, 0xff, 0xff, 0xff],
            good.clone(),
            {
                good.push(1);
                good
            },
        ];
        for sample in &samples {
            fuzz_grpc_messages(sample);
        }
    }
}
