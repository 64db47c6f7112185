//! The response side of one unary call: headers, messages, trailers, and the outcome.

use crate::protocol::grpc::frame::ErrorCode;
use crate::protocol::grpc::message::{GrpcFramingError, MessageReader};

/// Where the response of the current call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    AwaitHeaders,
    Body,
    Done,
}

/// The state of one unary call on stream `stream`.
pub(super) struct Call {
    pub(super) stream: u32,
    /// The length-prefixed request message; `sent` bytes of it are written.
    pub(super) body: Vec<u8>,
    pub(super) sent: usize,
    /// Bytes we may still send on this stream.
    pub(super) send_window: i64,
    /// Bytes the server may still send on this stream before our next WINDOW_UPDATE.
    pub(super) recv_remaining: i64,
    pub(super) phase: Phase,
    reader: MessageReader,
    message: Option<Vec<u8>>,
    grpc_status: Option<String>,
    grpc_message: String,
    pub(super) reset: Option<ErrorCode>,
}

/// Why a call failed: `Connection` failures poison the connection, `Call` failures do not.
pub(super) enum Failure {
    Connection(String),
    Call(String),
}

impl Call {
    /// A call on `stream` that sends the length-prefixed `body`; windows in bytes.
    pub(super) fn new(stream: u32, body: Vec<u8>, send_window: i64, recv_window: u32) -> Self {
        Call {
            stream,
            body,
            sent: 0,
            send_window,
            recv_remaining: i64::from(recv_window),
            phase: Phase::AwaitHeaders,
            reader: MessageReader::new(),
            message: None,
            grpc_status: None,
            grpc_message: String::new(),
            reset: None,
        }
    }

    /// Response headers (first block) or trailers (second block, must end the stream).
    pub(super) fn on_headers(
        &mut self,
        fields: &[(Vec<u8>, Vec<u8>)],
        end_stream: bool,
    ) -> std::result::Result<(), Failure> {
        let field = |name: &[u8]| {
            fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        };
        if self.phase == Phase::AwaitHeaders {
            match field(b":status") {
                Some(status) if status == "200" => {}
                Some(status) => return Err(Failure::Call(format!("HTTP status {status}"))),
                None => {
                    return Err(Failure::Connection(
                        "response headers without :status".to_string(),
                    ))
                }
            }
            self.phase = Phase::Body;
            if !end_stream {
                return Ok(());
            }
        } else if !end_stream {
            return Err(Failure::Connection(
                "trailers without END_STREAM".to_string(),
            ));
        }
        // Trailers, or a trailers-only response.
        self.grpc_status = field(b"grpc-status");
        self.grpc_message = percent_decode(&field(b"grpc-message").unwrap_or_default());
        self.end_of_body()
    }

    pub(super) fn take_messages(&mut self, data: &[u8]) -> std::result::Result<(), Failure> {
        let framing = |e: GrpcFramingError| Failure::Call(e.to_string());
        self.reader.push(data).map_err(framing)?;
        while let Some(msg) = self.reader.next_message().map_err(framing)? {
            if msg.compressed {
                return Err(Failure::Call(
                    "compressed response message although none was requested".to_string(),
                ));
            }
            if self.message.is_some() {
                return Err(Failure::Call("more than one response message".to_string()));
            }
            self.message = Some(msg.data.to_vec());
        }
        Ok(())
    }

    pub(super) fn end_of_body(&mut self) -> std::result::Result<(), Failure> {
        self.phase = Phase::Done;
        self.reader
            .finish()
            .map_err(|e| Failure::Call(e.to_string()))
    }

    /// The call's result once the stream has ended.
    pub(super) fn outcome(&mut self) -> std::result::Result<Vec<u8>, Failure> {
        if let Some(code) = self.reset {
            return Err(Failure::Call(format!(
                "server reset the stream ({})",
                code.name()
            )));
        }
        match self.grpc_status.as_deref() {
            None => Err(Failure::Call(
                "response ended without grpc-status".to_string(),
            )),
            Some("0") => self
                .message
                .take()
                .ok_or_else(|| Failure::Call("response carries no message".to_string())),
            Some(status) => {
                let mut why = format!("gRPC status {status}");
                if !self.grpc_message.is_empty() {
                    why.push_str(": ");
                    why.push_str(&self.grpc_message);
                }
                Err(Failure::Call(why))
            }
        }
    }
}

/// Undoes the percent-encoding gRPC applies to `grpc-message`; malformed escapes stay as is.
pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = match bytes.get(i + 1..i + 3) {
            Some(&[hi, lo]) => hex_value(hi).zip(hex_value(lo)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|v| u8::try_from(v).ok())
}
