//! A 2xx reply that carries an error instead of output: an OpenAI error object
//! (`{"error": {"message", "type", "code"}}`), vLLM's (`{"object": "error", "message", ..}`),
//! an `event: error` packet, or an event or body that is not JSON. Such a request failed, of
//! a named kind, with the server's message; its output counts nowhere.

use serde_json::Value;

use crate::measure::llm::RequestError;
use crate::measure::FailKind;

/// Characters of a server's message kept (longer ones are cut and end in `...`).
pub const EXCERPT_CHARS: usize = 200;

/// What the reply carried in place of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyErrorKind {
    /// An error object (OpenAI's or vLLM's), or a Triton stream response's error message.
    ErrorObject,
    /// An event's data or a whole body that does not parse as JSON.
    NotJson,
    /// A Triton stream response that is not a `ModelStreamInferResponse`.
    NotProtobuf,
}

/// The first error a reply carried: its kind and the server's words, escaped and cut to
/// [`EXCERPT_CHARS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyError {
    pub kind: ReplyErrorKind,
    pub detail: String,
}

impl ReplyError {
    /// The error `v` is, if it is one: an `error` member that is not `null`, or
    /// `"object": "error"`.
    pub fn of_message(v: &Value) -> Option<ReplyError> {
        let details = match v.get("error") {
            Some(Value::Null) | None
                if v.get("object").and_then(Value::as_str) == Some("error") =>
            {
                v
            }
            Some(Value::Null) | None => return None,
            Some(e) => e,
        };
        Some(ReplyError {
            kind: ReplyErrorKind::ErrorObject,
            detail: describe(details),
        })
    }

    /// Bytes that should have been JSON: an excerpt of them.
    pub fn not_json(data: &[u8]) -> ReplyError {
        ReplyError {
            kind: ReplyErrorKind::NotJson,
            detail: excerpt(&String::from_utf8_lossy(data)),
        }
    }

    /// A message the server sent as plain text (Triton's `error_message`).
    pub fn message(kind: ReplyErrorKind, text: &str) -> ReplyError {
        ReplyError {
            kind,
            detail: excerpt(text),
        }
    }

    /// The request's failure: `streamed` for an event stream, `error_event` when the
    /// engine saw an `event: error` packet (whose data this error may be).
    pub fn request_error(&self, streamed: bool, error_event: bool) -> RequestError {
        use ReplyErrorKind as K;
        let (kind, what) = match (self.kind, streamed) {
            _ if error_event => (FailKind::SseError, "error event in the response stream"),
            (K::ErrorObject, true) => (FailKind::SseError, "error in the response stream"),
            (K::ErrorObject, false) => (FailKind::Invalid, "error in the reply"),
            (K::NotJson, true) => (
                FailKind::NotJson,
                "an event of the response stream is not JSON",
            ),
            (K::NotJson, false) => (FailKind::NotJson, "the reply is not JSON"),
            (K::NotProtobuf, _) => (
                FailKind::NotProtobuf,
                "a stream response is not a ModelStreamInferResponse",
            ),
        };
        RequestError::new(kind, format!("{what}: {}", self.detail))
    }
}

/// An error object's message, with its `type` and `code` when it has them:
/// `overloaded (type: server_error, code: 503)`.
fn describe(e: &Value) -> String {
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| e.as_str());
    let Some(message) = message else {
        return excerpt(&e.to_string());
    };
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    let extras: Vec<String> = ["type", "code"]
        .iter()
        .filter_map(|k| {
            let v = e.get(*k).filter(|v| !v.is_null())?;
            Some(format!("{k}: {}", excerpt(&text(v))))
        })
        .collect();
    let mut out = excerpt(message);
    if !extras.is_empty() {
        out.push_str(&format!(" ({})", extras.join(", ")));
    }
    out
}

/// `s` on one line, safe for a terminal: control characters (line ends included) written as
/// `\xNN`, cut to at most [`EXCERPT_CHARS`] characters so written, then `...` when cut.
pub fn excerpt(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(EXCERPT_CHARS + 8));
    let mut written = 0;
    for c in s.chars() {
        let escaped = c.is_control();
        let width = if escaped { 4 } else { 1 };
        if written + width > EXCERPT_CHARS {
            out.push_str("...");
            break;
        }
        written += width;
        if escaped {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(json: &str) -> Option<String> {
        let v: Value = serde_json::from_str(json).unwrap();
        ReplyError::of_message(&v).map(|e| e.detail)
    }

    #[test]
    fn error_objects_give_their_message_type_and_code() {
        let cases = [
            (
                r#"{"error":{"message":"overloaded","type":"server_error","code":"busy"}}"#,
                Some("overloaded (type: server_error, code: busy)"),
            ),
            (
                r#"{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}"#,
                Some("bad (type: BadRequestError, code: 400)"),
            ),
            (r#"{"error":{"message":"m","code":null}}"#, Some("m")),
            (r#"{"error":"plain"}"#, Some("plain")),
            (r#"{"error":{"code":7}}"#, Some(r#"{"code":7}"#)),
            (r#"{"error":null,"choices":[]}"#, None),
            (r#"{"object":"chat.completion.chunk"}"#, None),
            (r#"{"object":"error"}"#, Some(r#"{"object":"error"}"#)),
            ("[1]", None),
        ];
        for (json, want) in cases {
            assert_eq!(detail(json).as_deref(), want, "{json}");
        }
    }

    #[test]
    fn excerpts_are_one_escaped_short_line() {
        assert_eq!(
            excerpt("a\x1b[31mb\r\nc\u{7}"),
            "a\\x1b[31mb\\x0d\\x0ac\\x07"
        );
        let long = "é".repeat(EXCERPT_CHARS + 5);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), EXCERPT_CHARS + 3);
        assert!(cut.ends_with("é..."));
        assert_eq!(excerpt(&"x".repeat(EXCERPT_CHARS)).len(), EXCERPT_CHARS);
        let bells = excerpt(&"\u{7}".repeat(EXCERPT_CHARS));
        assert_eq!(bells.len(), EXCERPT_CHARS + 3, "{bells}");
        let e = ReplyError::not_json(b"{not json\xff");
        assert_eq!(e.detail, "{not json\u{fffd}");
    }

    #[test]
    fn kinds_and_wording() {
        let object = ReplyError::message(ReplyErrorKind::ErrorObject, "boom");
        let not_json = ReplyError::not_json(b"{x");
        let cases = [
            (
                &object,
                true,
                false,
                "sse_error_event",
                "error in the response stream: boom",
            ),
            (
                &object,
                false,
                false,
                "invalid_reply",
                "error in the reply: boom",
            ),
            (
                &object,
                true,
                true,
                "sse_error_event",
                "error event in the response stream: boom",
            ),
            (
                &not_json,
                true,
                false,
                "not_json",
                "an event of the response stream is not JSON: {x",
            ),
            (
                &not_json,
                false,
                false,
                "not_json",
                "the reply is not JSON: {x",
            ),
        ];
        for (e, streamed, event, kind, message) in cases {
            let got = e.request_error(streamed, event);
            assert_eq!((got.kind.as_str(), got.message.as_str()), (kind, message));
        }
    }
}
