//! The fault server's OpenAI endpoints, from a raw socket: what `none` and each `sse-*` mode
//! answer, streamed and not.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use super::openai::{GOOD_CHUNKS, HEALTHY_CHUNKS, MESSAGE};
use super::tests::server;
use super::FaultMode;

const TTL: Duration = Duration::from_secs(20);

/// POSTs `body` to `path` and reads the response up to its end (Content-Length or the last
/// chunk); returns the head and the body (still chunk-framed when chunked).
fn post(addr: SocketAddr, path: &str, body: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map(|n| n.parse::<usize>().unwrap());
            let complete = match length {
                Some(n) => rest.len() >= n,
                None => rest.ends_with("0\r\n\r\n"),
            };
            if complete {
                return (head.to_string(), rest.to_string());
            }
        }
        let n = s.read(&mut buf).expect("the answer completes");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
}

/// The `data:` values and `event:` names of a chunked event stream, in order.
fn events(chunked: &str) -> Vec<String> {
    chunked
        .lines()
        .filter(|l| l.starts_with("data: ") || l.starts_with("event: "))
        .map(str::to_string)
        .collect()
}

fn chat(stream: bool) -> String {
    format!(r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"stream":{stream}}}"#)
}

#[test]
fn none_answers_openai_healthy() {
    let srv = server(FaultMode::None, TTL);
    let (head, body) = post(srv.addr, "/v1/chat/completions", &chat(true));
    assert!(head.contains("text/event-stream"), "{head}");
    let ev = events(&body);
    assert_eq!(ev.len(), HEALTHY_CHUNKS + 1, "{ev:?}");
    assert_eq!(ev.last().unwrap(), "data: [DONE]");
    let last: Value = serde_json::from_str(&ev[HEALTHY_CHUNKS - 1][6..]).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    let (_, body) = post(srv.addr, "/v1/completions", r#"{"prompt":"x"}"#);
    let whole: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(whole["choices"][0]["text"], " ok ok ok ok");
    assert_eq!(srv.infers(), 2);
}

#[test]
fn sse_modes_send_two_chunks_then_their_error() {
    let cases = [
        (FaultMode::SseErrorEvent, "event: error"),
        (FaultMode::SseOpenaiError, "data: {\"error\":"),
        (FaultMode::SseVllmError, "data: {\"object\":\"error\""),
        (FaultMode::SseNotJson, "data: {not json"),
    ];
    for (mode, fault) in cases {
        assert!(mode.applies_to_openai() && !mode.applies_to_http() && !mode.applies_to_grpc());
        let srv = server(mode, TTL);
        for path in ["/v1/chat/completions", "/v1/completions"] {
            let (head, body) = post(srv.addr, path, &chat(true));
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            let ev = events(&body);
            let name = mode.name();
            assert!(ev[GOOD_CHUNKS].starts_with(fault), "{name} {path}: {ev:?}");
            assert!(ev[..GOOD_CHUNKS].iter().all(|e| e.contains("\" ok\"")));
            assert_eq!(ev.last().unwrap(), "data: [DONE]", "{name}");
            if mode != FaultMode::SseNotJson {
                assert!(body.contains(MESSAGE), "{name}: {body}");
            }
            let (head, body) = post(srv.addr, path, &chat(false));
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            match serde_json::from_str::<Value>(&body) {
                Ok(v) => {
                    let m = v.pointer("/error/message").or_else(|| v.get("message"));
                    assert_eq!(m, Some(&Value::from(MESSAGE)), "{name}: {body}");
                }
                Err(_) => assert_eq!(body, "{not json"),
            }
        }
    }
}

/// Every third request to an OpenAI path is a 500 carrying an OpenAI error object.
#[test]
fn every_nth_fails_answers_openai_paths_with_500() {
    let srv = server(FaultMode::EveryNthFails, TTL);
    let heads: Vec<String> = (0..6)
        .map(|_| post(srv.addr, "/v1/chat/completions", &chat(false)).0)
        .collect();
    let failed: Vec<bool> = heads
        .iter()
        .map(|h| h.starts_with("HTTP/1.1 500 "))
        .collect();
    assert_eq!(
        failed,
        [false, false, true, false, false, true],
        "{heads:?}"
    );
    let (head, body) = post(srv.addr, "/v1/completions", &chat(false));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let srv = server(FaultMode::Status500, TTL);
    let (head, body500) = post(srv.addr, "/v1/completions", &chat(true));
    assert!(head.starts_with("HTTP/1.1 500"), "{head}");
    let v: Value = serde_json::from_str(&body500).unwrap();
    assert_eq!(v["error"]["message"], MESSAGE, "{body}");
}

#[test]
fn kserve_modes_leave_openai_paths_unanswered() {
    let srv = server(FaultMode::NotJson, TTL);
    let (head, _) = post(srv.addr, "/v1/chat/completions", &chat(true));
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
}
