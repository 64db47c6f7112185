//! The fault server's OpenAI endpoints, `POST /v1/chat/completions` and `/v1/completions`
//! (any model name), for `inferperf profile`: answered healthy in `none`, and in the `sse-*`
//! modes with a 200 that carries an error. Streamed (`"stream": true`), a faulty answer sends
//! [`GOOD_CHUNKS`] chunks of text, then the mode's error event, then `data: [DONE]`, as vLLM
//! does when its engine fails mid-stream; not streamed, the body is the mode's error alone.
//! `status-500` and `every-nth-fails` answer the requests they fail with an HTTP 500 whose
//! body is an OpenAI error object. Other modes leave these paths unanswered (404).

use std::net::TcpStream;

use serde_json::{json, Value};

use super::{io, FaultMode, Shared};

/// The message of every error these modes send.
pub const MESSAGE: &str = "fault: the engine failed after 2 tokens";
/// Text chunks a faulty stream sends before its error; each is one token, ` ok`.
pub const GOOD_CHUNKS: usize = 2;
/// Text chunks of a healthy answer (streamed: one event each; whole: one text).
pub const HEALTHY_CHUNKS: usize = 4;

/// Whether `mode` answers the OpenAI endpoints.
pub(super) fn serves(mode: FaultMode, method: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or("");
    let endpoint = matches!(path, "/v1/chat/completions" | "/v1/completions");
    let mode_serves = matches!(
        mode,
        FaultMode::None | FaultMode::Status500 | FaultMode::EveryNthFails
    ) || mode.applies_to_openai();
    method == "POST" && endpoint && mode_serves
}

/// Answers one request to `path` with `body`; false when the peer is gone.
pub(super) fn answer(s: &mut TcpStream, path: &str, body: &[u8], sh: &Shared) -> bool {
    if sh.fails(sh.next_infer()) {
        let body = openai_error();
        let head = format!(
            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        return io::write_all(s, head.as_bytes(), sh) && io::write_all(s, body.as_bytes(), sh);
    }
    let chat = path.starts_with("/v1/chat/");
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if request.get("stream") == Some(&Value::Bool(true)) {
        stream(s, chat, sh)
    } else {
        whole(s, chat, sh)
    }
}

/// The OpenAI error object these modes send.
fn openai_error() -> String {
    format!(
        r#"{{"error":{{"message":"{MESSAGE}","type":"server_error","param":null,"code":"engine_failed"}}}}"#
    )
}

/// vLLM's top-level error object, its members in vLLM's order.
fn vllm_error() -> String {
    format!(
        r#"{{"object":"error","message":"{MESSAGE}","type":"InternalServerError","param":null,"code":500}}"#
    )
}

/// The event a faulty stream sends in place of its next chunk (with its blank line).
fn fault_event(mode: FaultMode) -> Option<String> {
    match mode {
        FaultMode::SseErrorEvent => Some(format!("event: error\ndata: {}\n\n", openai_error())),
        FaultMode::SseOpenaiError => Some(format!("data: {}\n\n", openai_error())),
        FaultMode::SseVllmError => Some(format!("data: {}\n\n", vllm_error())),
        FaultMode::SseNotJson => Some("data: {not json\n\n".to_string()),
        _ => None,
    }
}

/// The body of a faulty answer that is not streamed (`sse-error-event` has no event to send
/// without a stream: it sends the OpenAI error object, as `sse-openai-error`).
fn fault_body(mode: FaultMode) -> Option<String> {
    match mode {
        FaultMode::SseErrorEvent | FaultMode::SseOpenaiError => Some(openai_error()),
        FaultMode::SseVllmError => Some(vllm_error()),
        FaultMode::SseNotJson => Some("{not json".to_string()),
        _ => None,
    }
}

/// One streamed chunk carrying `text`; the last one of a healthy stream has a finish reason.
fn chunk(chat: bool, text: &str, last: bool) -> String {
    let finish = if last { json!("stop") } else { Value::Null };
    let choice = if chat {
        json!({"index": 0, "delta": {"content": text}, "finish_reason": finish})
    } else {
        json!({"index": 0, "text": text, "finish_reason": finish})
    };
    let object = if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    json!({"id": "fault-1", "object": object, "model": "fault", "choices": [choice]}).to_string()
}

/// A streamed answer: chunked `text/event-stream`, one HTTP chunk per event.
fn stream(s: &mut TcpStream, chat: bool, sh: &Shared) -> bool {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                Transfer-Encoding: chunked\r\n\r\n";
    let fault = fault_event(sh.mode);
    let good = if fault.is_some() {
        GOOD_CHUNKS
    } else {
        HEALTHY_CHUNKS
    };
    let mut events: Vec<String> = (0..good)
        .map(|i| {
            format!(
                "data: {}\n\n",
                chunk(chat, " ok", fault.is_none() && i + 1 == good)
            )
        })
        .collect();
    events.extend(fault);
    events.push("data: [DONE]\n\n".to_string());
    let mut out = head.as_bytes().to_vec();
    for e in &events {
        out.extend_from_slice(format!("{:x}\r\n{e}\r\n", e.len()).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    io::write_all(s, &out, sh)
}

/// A whole JSON answer: the mode's error, or the healthy reply.
fn whole(s: &mut TcpStream, chat: bool, sh: &Shared) -> bool {
    let body = fault_body(sh.mode).unwrap_or_else(|| {
        let text = " ok".repeat(HEALTHY_CHUNKS);
        let choice = if chat {
            json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"})
        } else {
            json!({"index": 0, "text": text, "finish_reason": "stop"})
        };
        let object = if chat {
            "chat.completion"
        } else {
            "text_completion"
        };
        json!({"id": "fault-1", "object": object, "model": "fault", "choices": [choice]})
            .to_string()
    });
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    io::write_all(s, head.as_bytes(), sh) && io::write_all(s, body.as_bytes(), sh)
}
