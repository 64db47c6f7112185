//! What an endpoint hands back to the connection layer: the routed request's parts, the reply
//! (status, framing, outcome) whose body the endpoint wrote into the caller's buffer, and what
//! a successful inference tells the statistics.

use std::time::Duration;

use serde_json::Value;

use super::http::{write_error_json, Method};

pub const JSON: &str = "application/json";
pub const BINARY: &str = "application/octet-stream";

/// A successful inference: what the statistics need, and how the response was framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InferDone {
    pub batch_size: usize,
    /// Tensor data bytes of all inputs.
    pub input_bytes: u64,
    /// Parsing and validating the request, ns.
    pub input_ns: u64,
    /// The model's compute (without any configured delay), ns.
    pub infer_ns: u64,
    /// Encoding the response, ns.
    pub output_ns: u64,
    /// JSON bytes before the binary output data, when any output is binary.
    pub header_len: Option<usize>,
    /// Configured delays of the composing models an ensemble ran: the response waits for
    /// them on top of the model's own delay.
    pub composing_delay: Duration,
}

/// What the connection layer needs to know about an answered request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not an inference (metadata, health, stats, or an error before a model was found).
    Plain,
    /// A successful inference on model `model` (index into `MODELS`).
    Inferred { model: usize, done: InferDone },
    /// A failed inference on a known model.
    InferFailed { model: usize },
}

/// A response: status, framing and outcome; its body was written into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub inference_header_len: Option<usize>,
    pub outcome: Outcome,
}

impl Reply {
    pub fn plain(status: u16) -> Reply {
        Reply {
            status,
            content_type: JSON,
            inference_header_len: None,
            outcome: Outcome::Plain,
        }
    }
}

pub fn json_reply(out: &mut Vec<u8>, value: &Value) -> Reply {
    // Serialising a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
    Reply::plain(200)
}

pub fn error_reply(out: &mut Vec<u8>, status: u16, msg: &str) -> Reply {
    out.clear();
    write_error_json(out, msg);
    Reply::plain(status)
}

/// The request parts routing needs.
pub struct Request<'a> {
    pub method: Method,
    pub path: &'a str,
    pub inference_header_len: Option<usize>,
    pub body: &'a [u8],
}
