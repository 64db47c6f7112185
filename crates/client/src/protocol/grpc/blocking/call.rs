//! The response side of one unary call, collected from session events, and its outcome.

use crate::protocol::grpc::frame::ErrorCode;
use crate::protocol::grpc::session::{Event, StreamEnd};

/// What one unary call on `stream` received so far.
pub(super) struct Call {
    stream: u32,
    message: Option<Vec<u8>>,
    /// The first thing wrong with the response messages, reported once the stream ends.
    problem: Option<&'static str>,
    end: Option<StreamEnd>,
}

/// Why a call failed: `Connection` failures poison the connection, `Call` failures do not.
pub(super) enum Failure {
    Connection(String),
    Call(String),
}

impl Call {
    pub(super) fn new(stream: u32) -> Self {
        Call {
            stream,
            message: None,
            problem: None,
            end: None,
        }
    }

    /// Takes the events of this call's stream; others (none expected) are ignored.
    pub(super) fn on_event(&mut self, event: Event<'_>) {
        match event {
            Event::Message {
                stream,
                compressed,
                data,
            } if stream == self.stream => {
                if self.problem.is_some() {
                    return;
                }
                if compressed {
                    self.problem = Some("compressed response message although none was requested");
                } else if self.message.is_some() {
                    self.problem = Some("more than one response message");
                } else {
                    self.message = Some(data.to_vec());
                }
            }
            Event::Closed { stream, end } if stream == self.stream => self.end = Some(end),
            _ => {}
        }
    }

    /// Whether the stream has ended.
    pub(super) fn done(&self) -> bool {
        self.end.is_some()
    }

    /// The call's result once the stream has ended; `goaway` is the server's last GOAWAY.
    pub(super) fn outcome(
        self,
        goaway: Option<(ErrorCode, &str)>,
    ) -> std::result::Result<Vec<u8>, Failure> {
        let Some(end) = self.end else {
            return Err(Failure::Connection("stream did not end".to_string()));
        };
        match end {
            StreamEnd::Refused => {
                let mut why = String::from("server closed the connection");
                if let Some((code, debug)) = goaway {
                    why.push_str(&format!(" (GOAWAY {}", code.name()));
                    if !debug.is_empty() {
                        why.push_str(": ");
                        why.push_str(debug);
                    }
                    why.push(')');
                }
                Err(Failure::Connection(why))
            }
            StreamEnd::Disconnected => Err(Failure::Connection(end.to_string())),
            _ if self.problem.is_some() => {
                Err(Failure::Call(self.problem.unwrap_or_default().to_string()))
            }
            StreamEnd::Ok => self
                .message
                .ok_or_else(|| Failure::Call("response carries no message".to_string())),
            other => Err(Failure::Call(other.to_string())),
        }
    }
}

/// Undoes the percent-encoding gRPC applies to `grpc-message`; malformed escapes stay as is.
#[cfg(test)]
pub(super) fn percent_decode(text: &str) -> String {
    crate::protocol::grpc::session::percent_decode(text.as_bytes())
}
