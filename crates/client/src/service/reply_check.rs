//! Checks that a successful reply (HTTP 2xx, grpc-status 0) is what the service kind
//! answers: KServe v2 JSON (with its binary tail) over HTTP, a `ModelInferResponse` over
//! gRPC, JSON for OpenAI, a protobuf message for TF Serving. The expectation is built once
//! when the run is planned ([`ReplyCheck`]); the checks read the reply in place (no
//! serde_json, no prost) and allocate only to word a failure.
//!
//! A reply that fails gives its [`FailKind`] and a message naming the field:
//! `NotJson` / `NotProtobuf` for bytes that do not parse, `Invalid` for a well-formed reply
//! that contradicts the request (wrong model name, missing output, a shape that disagrees
//! with its bytes), `Length` for binary data whose total disagrees with the declared sizes.

use std::fmt;
use std::sync::Arc;

use crate::measure::fail::FailKind;

pub use super::reply_grpc::{check_infer_response, check_protobuf, check_stream_response};
pub use super::reply_http::check_kserve_http;

/// Why a reply is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bad {
    pub kind: FailKind,
    pub msg: String,
}

impl Bad {
    pub fn new(kind: FailKind, msg: impl Into<String>) -> Bad {
        Bad {
            kind,
            msg: msg.into(),
        }
    }

    pub(crate) fn not_json(why: String) -> Bad {
        Bad::new(FailKind::NotJson, format!("reply is not JSON ({why})"))
    }

    pub(crate) fn invalid(msg: String) -> Bad {
        Bad::new(FailKind::Invalid, msg)
    }
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

/// What a Triton reply must carry: the model's name and the outputs the request asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    /// The requested model; a reply's non-empty `model_name` must equal it.
    pub model: String,
    /// Outputs every reply must carry (the first 64 are checked).
    pub outputs: Vec<String>,
    /// Outputs may go to shared memory regions: an output without data in the reply is
    /// accepted, and its size is not checked.
    pub shm_outputs: bool,
}

/// The check a run applies to each successful reply, built once at plan time.
#[derive(Clone, Debug, Default)]
pub enum ReplyCheck {
    /// Nothing is checked.
    #[default]
    None,
    /// The body is one JSON value (SSE streams are checked by their own decoder).
    Json,
    /// KServe v2 over HTTP: JSON header, then binary outputs.
    KserveHttp(Arc<Expect>),
    /// KServe v2 over gRPC: `ModelInferResponse` (unary) or `ModelStreamInferResponse`.
    KserveGrpc(Arc<Expect>),
    /// A gRPC reply that must be a well-formed protobuf message of this name.
    Protobuf(&'static str),
    /// A service kind's own check, applied to every reply (HTTP body, unary gRPC message
    /// and stream message alike).
    Kind(Arc<dyn CheckReply>),
}

/// A service kind's check of one successful reply, for kinds whose replies none of the
/// built-in checks reads.
pub trait CheckReply: fmt::Debug + Send + Sync {
    fn check(&self, reply: &[u8]) -> Result<(), Bad>;
}

impl ReplyCheck {
    pub fn is_none(&self) -> bool {
        matches!(self, ReplyCheck::None)
    }

    /// An HTTP reply body; `header_len` is its `Inference-Header-Content-Length`.
    pub fn http(&self, body: &[u8], header_len: Option<usize>) -> Result<(), Bad> {
        match self {
            ReplyCheck::Json => check_json(body),
            ReplyCheck::KserveHttp(exp) => check_kserve_http(exp, body, header_len),
            ReplyCheck::Kind(check) => check.check(body),
            _ => Ok(()),
        }
    }

    /// One gRPC reply message of a unary call.
    pub fn grpc(&self, msg: &[u8]) -> Result<(), Bad> {
        match self {
            ReplyCheck::KserveGrpc(exp) => check_infer_response(exp, msg),
            ReplyCheck::Protobuf(name) => check_protobuf(name, msg),
            ReplyCheck::Kind(check) => check.check(msg),
            _ => Ok(()),
        }
    }

    /// One `ModelStreamInferResponse` of a stream.
    pub fn grpc_stream(&self, msg: &[u8]) -> Result<(), Bad> {
        match self {
            ReplyCheck::KserveGrpc(exp) => check_stream_response(exp, msg),
            ReplyCheck::Protobuf(name) => check_protobuf(name, msg),
            ReplyCheck::Kind(check) => check.check(msg),
            _ => Ok(()),
        }
    }
}

/// The last reply a connection (or stream slot) saw pass its check. A benchmark's replies
/// are mostly the same bytes again, and a reply identical to one that passed passes too
/// (the check depends only on the bytes and the run's expectation), so it costs one compare
/// instead of a walk through the JSON or protobuf.
#[derive(Clone, Debug, Default)]
pub struct LastGood {
    body: Vec<u8>,
    header_len: Option<usize>,
    valid: bool,
}

/// Longest reply kept for the compare (bytes); a longer one is checked every time.
const MAX_KEPT: usize = 16 * 1024;

impl LastGood {
    /// Applies `check` to `reply` unless it equals the last reply that passed.
    #[inline]
    pub fn verify(
        &mut self,
        reply: &[u8],
        header_len: Option<usize>,
        check: impl FnOnce(&[u8], Option<usize>) -> Result<(), Bad>,
    ) -> Result<(), Bad> {
        if self.valid && self.header_len == header_len && self.body == reply {
            return Ok(());
        }
        check(reply, header_len)?;
        if reply.len() <= MAX_KEPT {
            // Grows to the reply's size once; later replies reuse the capacity.
            self.body.clear();
            self.body.extend_from_slice(reply);
            self.header_len = header_len;
            self.valid = true;
        }
        Ok(())
    }
}

/// The body is exactly one JSON value (whitespace around it allowed).
pub fn check_json(body: &[u8]) -> Result<(), Bad> {
    let mut j = super::reply_json::Json::new(body);
    j.value()?;
    j.end()
}

/// Bytes per element of a KServe datatype: `Some(Some(n))`, `Some(None)` for BYTES
/// (length-prefixed elements), `None` for a name that is not a datatype.
pub(crate) fn element_size(datatype: &[u8]) -> Option<Option<u64>> {
    Some(Some(match datatype {
        b"BOOL" | b"INT8" | b"UINT8" => 1,
        b"INT16" | b"UINT16" | b"FP16" | b"BF16" => 2,
        b"INT32" | b"UINT32" | b"FP32" => 4,
        b"INT64" | b"UINT64" | b"FP64" => 8,
        b"BYTES" => return Some(None),
        _ => return None,
    }))
}

/// Elements in a BYTES tensor's data (4-byte little-endian length, then the bytes, per
/// element); `None` when the lengths do not tile the data exactly.
pub(crate) fn bytes_elements(mut data: &[u8]) -> Option<u64> {
    let mut n = 0u64;
    while !data.is_empty() {
        let len = u32::from_le_bytes(data.get(..4)?.try_into().ok()?) as usize;
        data = data.get(4..)?.get(len..)?;
        n += 1;
    }
    Some(n)
}

/// Longest piece of server text quoted in a message (characters).
const QUOTE_CHARS: usize = 64;

/// Server text for a message: control characters escaped, cut at [`QUOTE_CHARS`].
pub(crate) fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(QUOTE_CHARS + 3));
    for (i, c) in text.chars().enumerate() {
        if i == QUOTE_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The outputs of [`Expect`] seen in a reply, as a bit per expected output.
#[derive(Default)]
pub(crate) struct Seen(u64);

impl Seen {
    /// Marks the expected output named `is(name)` (the first 64 outputs are tracked).
    pub(crate) fn mark(&mut self, exp: &Expect, is: impl Fn(&str) -> bool) {
        if let Some(i) = exp.outputs.iter().take(64).position(|o| is(o)) {
            self.0 |= 1 << i;
        }
    }

    /// The first expected output not seen.
    pub(crate) fn missing<'e>(&self, exp: &'e Expect) -> Option<&'e str> {
        let mut outputs = exp.outputs.iter().take(64).enumerate();
        outputs
            .find(|(i, _)| self.0 & (1 << i) == 0)
            .map(|(_, o)| o.as_str())
    }
}

/// An output's element count and data checked against its datatype: `Ok(())` or the
/// message. `elements`: the shape's product (`None` when it overflows); `data_bytes`: the
/// binary bytes the reply gives for it; `bytes_data`: those bytes (BYTES datatype only,
/// when at hand).
pub(crate) struct SizeCheck<'a> {
    pub name: &'a str,
    pub datatype: &'a [u8],
    /// The shape as text for a message, made only on failure.
    pub shape: &'a dyn Fn() -> String,
    pub elements: Option<u64>,
}

impl SizeCheck<'_> {
    fn elements(&self) -> Result<u64, Bad> {
        self.elements.ok_or_else(|| {
            Bad::invalid(format!(
                "output {} has shape {} whose element count overflows",
                shown(self.name),
                (self.shape)()
            ))
        })
    }

    fn datatype_size(&self) -> Result<Option<u64>, Bad> {
        element_size(self.datatype).ok_or_else(|| {
            Bad::invalid(format!(
                "output {} has unknown datatype \"{}\"",
                shown(self.name),
                shown(&String::from_utf8_lossy(self.datatype))
            ))
        })
    }

    /// `len` bytes of binary data (`data`: those bytes, when at hand, for BYTES).
    pub(crate) fn binary(&self, len: u64, data: Option<&[u8]>) -> Result<(), Bad> {
        let elements = self.elements()?;
        match self.datatype_size()? {
            Some(size) => {
                let want = elements.checked_mul(size);
                if want == Some(len) {
                    return Ok(());
                }
                let want = want.map_or_else(|| "too many".into(), |w| w.to_string());
                Err(Bad::invalid(format!(
                    "output {} has shape {} ({want} bytes as {}) but {len} bytes of data",
                    shown(self.name),
                    (self.shape)(),
                    String::from_utf8_lossy(self.datatype)
                )))
            }
            None => match data.map(bytes_elements) {
                None => Ok(()),
                Some(Some(n)) if n == elements => Ok(()),
                Some(n) => Err(Bad::invalid(format!(
                    "output {} has shape {} ({elements} elements) but its BYTES data {}",
                    shown(self.name),
                    (self.shape)(),
                    n.map_or_else(
                        || "is not a sequence of length-prefixed elements".into(),
                        |n| format!("holds {n} elements")
                    )
                ))),
            },
        }
    }

    /// `count` elements of JSON `data`.
    pub(crate) fn json(&self, count: u64) -> Result<(), Bad> {
        let elements = self.elements()?;
        self.datatype_size()?;
        if count == elements {
            return Ok(());
        }
        Err(Bad::invalid(format!(
            "output {} has shape {} ({elements} elements) but {count} elements of data",
            shown(self.name),
            (self.shape)()
        )))
    }
}

/// The product of dims, checked: `Err(())` for a negative dim, `Ok(None)` on overflow.
pub(crate) fn product(dims: impl Iterator<Item = i64>) -> Result<Option<u64>, ()> {
    let mut n = Some(1u64);
    for d in dims {
        let d = u64::try_from(d).map_err(|_| ())?;
        n = n.and_then(|n| n.checked_mul(d));
    }
    Ok(n)
}

/// Fuzz entry point for the KServe HTTP check: never panics, on any bytes, with and
/// without a header length taken from the first byte.
pub fn fuzz_kserve_http(data: &[u8]) {
    let exp = Expect {
        model: "simple".into(),
        outputs: vec!["OUTPUT0".into(), "OUTPUT1".into()],
        shm_outputs: false,
    };
    let _ = check_kserve_http(&exp, data, None);
    let _ = check_json(data);
    if let Some((&n, rest)) = data.split_first() {
        let _ = check_kserve_http(&exp, rest, Some(usize::from(n)));
    }
}

/// Fuzz entry point for the gRPC checks: never panics, on any bytes.
pub fn fuzz_kserve_grpc(data: &[u8]) {
    for shm_outputs in [false, true] {
        let exp = Expect {
            model: "simple".into(),
            outputs: vec!["OUTPUT0".into()],
            shm_outputs,
        };
        let _ = check_infer_response(&exp, data);
        let _ = check_stream_response(&exp, data);
    }
    let _ = check_protobuf("PredictResponse", data);
}

#[cfg(test)]
#[path = "reply_check_tests.rs"]
mod tests;
