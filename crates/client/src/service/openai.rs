//! The `openai` service kind: each input-data entry's `payload` JSON is POSTed
//! verbatim to `/<endpoint>`; the answer is one JSON body, or a `text/event-stream` whose
//! `data:` events are the responses (the engine decodes them, see `engine/conn/sse.rs`).
//!
//! There is no model metadata: the model "has" one JSON input, `payload`, and one JSON
//! output, `response`, which is how the profile export names them.

use crate::protocol::http1::write_request;

/// The pseudo-input holding a request's whole body.
pub const PAYLOAD_INPUT: &str = "payload";
/// The pseudo-output holding one response (an event's data, or a whole body).
pub const RESPONSE_OUTPUT: &str = "response";

/// The complete bytes of one request: `POST /<endpoint> HTTP/1.1` with `Host`,
/// `Content-Type: application/json` (unless `headers` sets one), the user's `-H` headers and
/// `Content-Length`, then `payload` as the body, unchanged.
pub fn encode_request(
    host: &str,
    endpoint: &str,
    headers: &[(String, String)],
    payload: &[u8],
) -> Vec<u8> {
    let path = format!("/{}", endpoint.trim_start_matches('/'));
    let mut fields = Vec::with_capacity(headers.len() + 1);
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
    {
        fields.push(("Content-Type".to_string(), "application/json".to_string()));
    }
    fields.extend(headers.iter().cloned());
    let mut out = Vec::with_capacity(payload.len() + 256);
    write_request(&mut out, "POST", host, &path, &fields, payload);
    out
}

/// The export's `request_inputs` object of a request: `{"payload":"<the body as a string>"}`.
pub fn request_inputs_json(payload: &[u8]) -> String {
    format!(
        "{{\"{PAYLOAD_INPUT}\":{}}}",
        json_string(&String::from_utf8_lossy(payload))
    )
}

/// The export's `response_outputs` object of one response: `{"response":"<text>"}`; the null
/// final response (`[DONE]`, an empty payload) gives `{"response":""}`, as perf_analyzer
/// writes an empty output buffer.
pub fn response_outputs_json(response: &[u8]) -> String {
    format!(
        "{{\"{RESPONSE_OUTPUT}\":{}}}",
        json_string(&String::from_utf8_lossy(response))
    )
}

/// The message of a non-2xx answer: OpenAI's `{"error":{"message":..}}`, a top-level
/// `message` or `detail` string (vLLM, FastAPI), each with the status; else as
/// [`super::triton_http::error_message`] (Triton's `{"error":".."}`, or a body excerpt).
pub fn error_message(status: u16, body: &[u8]) -> String {
    use serde_json::Value;
    if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) {
        let nested = fields
            .get("error")
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str);
        let top = ["message", "detail"]
            .iter()
            .find_map(|k| fields.get(*k).and_then(Value::as_str));
        if let Some(message) = nested.or(top) {
            return format!("HTTP {status}: {message}");
        }
    }
    // Triton's form and plain bodies read as they always have (the HTTP pool serves both).
    super::triton_http::error_message(status, body)
}

/// The message of an `event: error` in a response stream; `data` is the event's data
/// (usually `{"error":{"message":..}}`).
pub fn stream_error_message(data: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(data).ok();
    let message = parsed.as_ref().and_then(|v| {
        let e = v.get("error").unwrap_or(v);
        e.get("message")
            .and_then(serde_json::Value::as_str)
            .or_else(|| e.as_str())
    });
    format!(
        "error event in the response stream: {}",
        message.unwrap_or(data)
    )
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bytes_are_exact() {
        let headers = vec![("Authorization".to_string(), "Bearer k".to_string())];
        let got = encode_request("h:1", "v1/chat/completions", &headers, b"{\"a\":1}");
        let want = "POST /v1/chat/completions HTTP/1.1\r\nHost: h:1\r\n\
                    Content-Type: application/json\r\nAuthorization: Bearer k\r\n\
                    Content-Length: 7\r\n\r\n{\"a\":1}";
        assert_eq!(String::from_utf8(got).unwrap(), want);
        let own_type = vec![("content-type".to_string(), "text/x".to_string())];
        let got = String::from_utf8(encode_request("h", "/v1/x", &own_type, b"")).unwrap();
        assert!(got.starts_with("POST /v1/x HTTP/1.1\r\nHost: h\r\ncontent-type: text/x\r\n"));
        assert!(!got.contains("application/json"));
        assert!(got.ends_with("Content-Length: 0\r\n\r\n"));
    }

    #[test]
    fn export_objects() {
        assert_eq!(
            request_inputs_json(br#"{"m":"x\n"}"#),
            r#"{"payload":"{\"m\":\"x\\n\"}"}"#
        );
        assert_eq!(
            response_outputs_json(br#"{"c":1}"#),
            r#"{"response":"{\"c\":1}"}"#
        );
        assert_eq!(response_outputs_json(b""), r#"{"response":""}"#);
        assert_eq!(
            response_outputs_json(b"\xff"),
            "{\"response\":\"\u{fffd}\"}"
        );
    }

    #[test]
    fn error_messages() {
        let cases: &[(u16, &[u8], &str)] = &[
            (
                404,
                br#"{"error":{"message":"model 'x' not found","type":"not_found_error"}}"#,
                "HTTP 404: model 'x' not found",
            ),
            (
                400,
                br#"{"object":"error","message":"bad"}"#,
                "HTTP 400: bad",
            ),
            (
                422,
                br#"{"detail":"field required"}"#,
                "HTTP 422: field required",
            ),
            (400, br#"{"error":"triton says no"}"#, "triton says no"),
            (500, b"oops", "HTTP 500: oops"),
            (503, b"", "HTTP 503"),
        ];
        for &(status, body, want) in cases {
            assert_eq!(error_message(status, body), want);
        }
        assert_eq!(
            stream_error_message(r#"{"error":{"message":"overloaded"}}"#),
            "error event in the response stream: overloaded"
        );
        assert_eq!(
            stream_error_message("plain text"),
            "error event in the response stream: plain text"
        );
    }
}
