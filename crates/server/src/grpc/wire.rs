//! gRPC over HTTP/2 for the server side: status codes, request-message compression, reading
//! length-prefixed messages from a request body, and the response head, messages and trailers.

use std::io::Read;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Response};
use prost::Message;

use inferperf_wire::protocol::grpc::message::{
    write_message_prefix, GrpcFramingError, MessageReader, MESSAGE_PREFIX_LEN,
};
use inferperf_wire::protocol::grpc::pb::inference as pb;

/// The gRPC status codes the server answers with.
pub mod code {
    pub const OK: u32 = 0;
    pub const INVALID_ARGUMENT: u32 = 3;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const NOT_FOUND: u32 = 5;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const INTERNAL: u32 = 13;
    pub const UNAVAILABLE: u32 = 14;
}

/// The default largest request message, compressed or not (bytes; `--max-request-bytes`); the
/// limit also caps decompression so a small compressed message cannot expand without bound.
#[cfg(test)]
pub const MAX_MESSAGE: usize = crate::limits::DEFAULT_MAX_REQUEST_BYTES;

/// A failed call: gRPC status code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: u32,
    pub message: String,
}

impl Status {
    pub fn new(code: u32, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Status {
        Status::new(code::INVALID_ARGUMENT, message)
    }

    pub fn not_found(message: impl Into<String>) -> Status {
        Status::new(code::NOT_FOUND, message)
    }

    /// DEADLINE_EXCEEDED: a request that has not arrived `limit` after it started.
    pub fn late(limit: Duration) -> Status {
        Status::new(
            code::DEADLINE_EXCEEDED,
            format!("request not complete {limit:?} after it started (--request-read-timeout)"),
        )
    }

    /// RESOURCE_EXHAUSTED: a request message (or all of a call's) over `limit` bytes.
    pub fn too_large(what: &str, limit: usize) -> Status {
        Status::new(
            code::RESOURCE_EXHAUSTED,
            format!("{what} exceeds the limit of {limit} bytes (--max-request-bytes)"),
        )
    }
}

/// A framing error of a call's request messages: one announced over the limit is
/// RESOURCE_EXHAUSTED (as gRPC answers it), anything else INTERNAL.
pub fn framing_status(e: GrpcFramingError) -> Status {
    match e {
        GrpcFramingError::TooLong { len, limit } => {
            Status::too_large(&format!("request message of {len} bytes"), limit)
        }
        other => Status::new(code::INTERNAL, other.to_string()),
    }
}

/// The `grpc-encoding` of a call's request messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
    /// gRPC's "deflate" is the zlib format (RFC 1950).
    Deflate,
}

impl Encoding {
    /// Reads `grpc-encoding`; an encoding the server cannot decode is UNIMPLEMENTED (gRPC's rule).
    pub fn from_headers(headers: &HeaderMap) -> Result<Encoding, Status> {
        let Some(value) = headers.get("grpc-encoding") else {
            return Ok(Encoding::Identity);
        };
        match value.to_str().unwrap_or("").trim() {
            "identity" => Ok(Encoding::Identity),
            "gzip" => Ok(Encoding::Gzip),
            "deflate" => Ok(Encoding::Deflate),
            other => Err(Status::new(
                code::UNIMPLEMENTED,
                format!("grpc-encoding '{other}' is not supported (identity, gzip, deflate)"),
            )),
        }
    }

    /// The message bytes after undoing the compression (when the message's flag says so); at
    /// most `max` bytes are inflated, more is RESOURCE_EXHAUSTED.
    pub fn decode(self, compressed: bool, data: &[u8], max: usize) -> Result<Vec<u8>, Status> {
        if !compressed {
            if data.len() > max {
                return Err(Status::too_large("request message", max));
            }
            return Ok(data.to_vec());
        }
        let mut out = Vec::new();
        let limit = max as u64 + 1;
        let read = match self {
            Encoding::Identity => {
                return Err(Status::new(
                    code::INTERNAL,
                    "message has the compressed flag set but the call has no grpc-encoding",
                ))
            }
            Encoding::Gzip => flate2::read::GzDecoder::new(data)
                .take(limit)
                .read_to_end(&mut out),
            Encoding::Deflate => flate2::read::ZlibDecoder::new(data)
                .take(limit)
                .read_to_end(&mut out),
        };
        match read {
            Err(e) => Err(Status::new(
                code::INTERNAL,
                format!("cannot decompress the {self:?} request message: {e}"),
            )),
            Ok(n) if n > max => Err(Status::too_large(
                &format!("the {self:?} request message inflated"),
                max,
            )),
            Ok(_) => Ok(out),
        }
    }
}

/// Reads a call's request messages from its HTTP/2 body, each within a time limit: a unary
/// call's whole request from its start, or (see [`MessageSource::per_message`]) each message
/// of a stream from its first byte.
pub struct MessageSource {
    body: RecvStream,
    reader: MessageReader,
    encoding: Encoding,
    /// Largest message, bytes, before and after decompression.
    max: usize,
    /// How long a request may take to arrive (`--request-read-timeout`).
    limit: Duration,
    /// When the request being read must be complete; None between a stream's messages.
    due: Option<Instant>,
    /// Each message has its own limit, and none runs between messages (streams).
    per_message: bool,
}

/// What the next read brought.
pub enum Next<T> {
    Message(T),
    /// A message arrived but could not be decompressed or decoded; the stream goes on.
    Bad(Status),
    /// The client closed its side between messages.
    End,
}

impl MessageSource {
    /// Reads messages of at most `max` bytes (compressed, and again inflated), all of which
    /// must arrive within `limit` from now.
    pub fn new(body: RecvStream, encoding: Encoding, max: usize, limit: Duration) -> MessageSource {
        MessageSource {
            body,
            reader: MessageReader::with_limit(max),
            encoding,
            max,
            limit,
            due: Some(Instant::now() + limit),
            per_message: false,
        }
    }

    /// Times each message from its first byte instead, with no limit between messages.
    pub fn per_message(mut self) -> MessageSource {
        self.per_message = true;
        self.due = None;
        self
    }

    /// The next DATA payload; `Err` when the request's time is up.
    async fn data(&mut self) -> Result<Option<Result<Bytes, h2::Error>>, Status> {
        if self.per_message && self.due.is_none() && self.reader.buffered() > 0 {
            self.due = Some(Instant::now() + self.limit);
        }
        let Some(due) = self.due else {
            let data = self.body.data().await;
            self.due = Some(Instant::now() + self.limit);
            return Ok(data);
        };
        tokio::time::timeout_at(due.into(), self.body.data())
            .await
            .map_err(|_| Status::late(self.limit))
    }

    /// The next message decoded as `T`. `Err` means the stream itself is broken (framing, a
    /// reset): no further message can be read.
    pub async fn next<T: Message + Default>(&mut self) -> Result<Next<T>, Status> {
        loop {
            let framing = framing_status;
            if let Some(msg) = self.reader.next_message().map_err(framing)? {
                let parse = |bytes: &[u8]| {
                    T::decode(bytes).map_err(|e| {
                        Status::invalid(format!("cannot decode the request message: {e}"))
                    })
                };
                // An uncompressed message decodes straight from the reader's buffer.
                let decoded = if msg.compressed {
                    self.encoding
                        .decode(true, msg.data, self.max)
                        .and_then(|bytes| parse(&bytes))
                } else {
                    parse(msg.data)
                };
                if self.per_message {
                    self.due = None;
                }
                return Ok(match decoded {
                    Ok(m) => Next::Message(m),
                    Err(status) => Next::Bad(status),
                });
            }
            match self.data().await? {
                Some(Ok(chunk)) => {
                    // Give the window back at once: messages are bounded by `max`.
                    let _ = self.body.flow_control().release_capacity(chunk.len());
                    self.reader.push(&chunk).map_err(framing)?;
                }
                Some(Err(e)) => {
                    return Err(Status::new(code::INTERNAL, format!("request stream: {e}")))
                }
                None => {
                    self.reader.finish().map_err(framing)?;
                    return Ok(Next::End);
                }
            }
        }
    }

    /// Exactly one request message, as a unary call carries.
    pub async fn single<T: Message + Default>(&mut self) -> Result<T, Status> {
        let first = match self.next::<T>().await? {
            Next::Message(m) => m,
            Next::Bad(status) => return Err(status),
            Next::End => return Err(Status::invalid("the call carried no request message")),
        };
        match self.next::<T>().await? {
            Next::End => Ok(first),
            _ => Err(Status::invalid(
                "a unary call carried more than one request message",
            )),
        }
    }
}

/// Percent-encodes a `grpc-message` value: bytes outside printable ASCII, and `%`.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Starts the response: `:status 200`, `content-type: application/grpc`.
pub fn start_response(respond: &mut SendResponse<Bytes>) -> Option<SendStream<Bytes>> {
    let head = Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .header("grpc-accept-encoding", "identity,deflate,gzip")
        .body(())
        .ok()?;
    respond.send_response(head, false).ok()
}

/// Frames one response message (uncompressed) and queues it (h2 buffers what the peer's
/// window does not take yet).
pub fn send_message(send: &mut SendStream<Bytes>, msg: &impl Message) -> Result<(), h2::Error> {
    let len = msg.encoded_len();
    let mut framed = Vec::with_capacity(MESSAGE_PREFIX_LEN + len);
    // A message over 4 GiB cannot be framed (outputs mirror inputs of at most 64 MiB, so this
    // does not happen); reset the stream rather than send a broken one.
    if write_message_prefix(&mut framed, len, false).is_err() {
        send.send_reset(h2::Reason::INTERNAL_ERROR);
        return Err(h2::Reason::INTERNAL_ERROR.into());
    }
    // Encoded in place after the prefix: one buffer, one copy of the tensor bytes.
    if msg.encode(&mut framed).is_err() {
        send.send_reset(h2::Reason::INTERNAL_ERROR);
        return Err(h2::Reason::INTERNAL_ERROR.into());
    }
    send.send_data(Bytes::from(framed), false)
}

/// Waits until the stream's queued response bytes are under h2's send buffer limit (and the
/// peer's window takes more), so a client that sends requests but never reads the answers
/// stalls its own stream instead of growing the server's memory. False when the stream is
/// gone.
pub async fn drained(send: &mut SendStream<Bytes>) -> bool {
    loop {
        send.reserve_capacity(1);
        if send.capacity() > 0 {
            return true;
        }
        match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(Ok(_)) => {}
            _ => return false,
        }
    }
}

/// Ends the call with its status in the trailers.
pub fn send_status(send: &mut SendStream<Bytes>, status: &Status) {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from(status.code));
    if !status.message.is_empty() {
        if let Ok(value) = HeaderValue::from_str(&percent_encode(&status.message)) {
            trailers.insert("grpc-message", value);
        }
    }
    let _ = send.send_trailers(trailers);
}

/// Answers a unary call: the message and OK, or no message and the error status.
pub fn answer_unary(respond: &mut SendResponse<Bytes>, result: Result<impl Message, Status>) {
    let Some(mut send) = start_response(respond) else {
        return;
    };
    match result {
        Ok(msg) => {
            if send_message(&mut send, &msg).is_ok() {
                send_status(&mut send, &Status::new(code::OK, ""));
            }
        }
        Err(status) => send_status(&mut send, &status),
    }
}

/// Sends a response or an error on the stream.
pub fn send_stream_response(
    send: &mut SendStream<Bytes>,
    result: Result<pb::ModelInferResponse, String>,
) -> Result<(), h2::Error> {
    let msg = match result {
        Ok(response) => pb::ModelStreamInferResponse {
            error_message: String::new(),
            infer_response: Some(response),
        },
        Err(error_message) => pb::ModelStreamInferResponse {
            error_message,
            infer_response: None,
        },
    };
    send_message(send, &msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn percent_encoding() {
        let cases = [
            ("plain text", "plain text"),
            ("50% off", "50%25 off"),
            ("é\n", "%C3%A9%0A"),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(percent_encode(text), want, "{text:?}");
        }
    }

    #[test]
    fn encodings_from_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(Encoding::from_headers(&headers), Ok(Encoding::Identity));
        for (value, want) in [
            ("gzip", Ok(Encoding::Gzip)),
            ("deflate", Ok(Encoding::Deflate)),
            ("identity", Ok(Encoding::Identity)),
        ] {
            headers.insert("grpc-encoding", HeaderValue::from_static(value));
            assert_eq!(Encoding::from_headers(&headers), want);
        }
        headers.insert("grpc-encoding", HeaderValue::from_static("snappy"));
        let err = Encoding::from_headers(&headers).unwrap_err();
        assert_eq!(err.code, code::UNIMPLEMENTED);
        assert!(err.message.contains("'snappy'"), "{}", err.message);
    }

    #[test]
    fn decompression() {
        let text = b"hello hello hello hello".to_vec();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        zl.write_all(&text).unwrap();
        let zl = zl.finish().unwrap();
        assert_eq!(Encoding::Gzip.decode(true, &gz, MAX_MESSAGE).unwrap(), text);
        assert_eq!(
            Encoding::Deflate.decode(true, &zl, MAX_MESSAGE).unwrap(),
            text
        );
        assert_eq!(
            Encoding::Gzip.decode(false, &text, MAX_MESSAGE).unwrap(),
            text
        );
        assert_eq!(
            Encoding::Identity
                .decode(true, &text, MAX_MESSAGE)
                .unwrap_err()
                .code,
            code::INTERNAL
        );
        assert_eq!(
            Encoding::Gzip
                .decode(true, b"not gzip", MAX_MESSAGE)
                .unwrap_err()
                .code,
            code::INTERNAL
        );
        // gzip bytes declared as deflate do not decode either.
        assert!(Encoding::Deflate.decode(true, &gz, MAX_MESSAGE).is_err());
        // Inflating stops one byte past the limit: RESOURCE_EXHAUSTED, not the whole text.
        let err = Encoding::Gzip
            .decode(true, &gz, text.len() - 1)
            .unwrap_err();
        assert_eq!(err.code, code::RESOURCE_EXHAUSTED, "{}", err.message);
        assert!(
            err.message
                .contains("Gzip request message inflated exceeds the limit of 22 bytes"),
            "{}",
            err.message
        );
    }
}
