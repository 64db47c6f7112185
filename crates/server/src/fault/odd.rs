//! Replies that are almost right: a large request refused before it is read
//! (`payload-too-large`), a number no datatype holds (`huge-number`) and a valid body in
//! one-byte chunks (`tiny-chunks`). The HTTP/1.1 parts live here; the gRPC front answers
//! its modes itself.

use std::net::TcpStream;

use super::model::{ELEMENTS, MODEL, VERSION};
use super::{io, Shared};

/// INPUT0's element count in `payload-too-large`: 16 MiB of FP32.
pub const LARGE_ELEMENTS: i64 = 4 << 20;
/// Largest request (body, or gRPC message) `payload-too-large` reads (bytes).
pub const REQUEST_LIMIT: usize = 1 << 20;
/// Digits of the first OUTPUT0 value in `huge-number`.
const HUGE_DIGITS: usize = 5000;
/// Whitespace added to the reply's JSON in `tiny-chunks` (bytes).
const PADDING: usize = 400_000;

/// The text of the refusal, HTTP and gRPC alike.
pub fn too_large_text() -> String {
    format!("request exceeds the fault server's limit of {REQUEST_LIMIT} bytes")
}

/// `payload-too-large` over HTTP: the 413 goes out as soon as the head is read, then the
/// socket closes with the body unread, which the kernel turns into a reset.
pub(super) fn refuse_large(mut s: TcpStream, sh: &Shared) {
    sh.next_infer();
    let body = serde_json::json!({ "error": too_large_text() }).to_string();
    let reply = format!(
        "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if io::write_all(&mut s, reply.as_bytes(), sh) {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
}

/// `huge-number`: a JSON reply (whatever output format was asked for) whose OUTPUT0 starts
/// with a 5000-digit value: (head, body).
pub(super) fn huge_number_reply() -> (String, Vec<u8>) {
    let mut values = vec!["0".to_string(); ELEMENTS];
    values[0] = format!("1{}", "0".repeat(HUGE_DIGITS - 1));
    let body = format!(
        "{{\"model_name\":\"{MODEL}\",\"model_version\":\"{VERSION}\",\"outputs\":[{{\"name\":\
         \"OUTPUT0\",\"datatype\":\"FP32\",\"shape\":[{ELEMENTS}],\"data\":[{}]}}]}}",
        values.join(",")
    );
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    (head, body.into_bytes())
}

/// `tiny-chunks`: the healthy reply (`head` with Content-Length, `body`) with
/// [`PADDING`] bytes of whitespace after the JSON's opening brace, sent chunked, one byte
/// per chunk.
pub(super) fn tiny_chunks(head: &str, body: &[u8]) -> Vec<u8> {
    let mut padded = Vec::with_capacity(body.len() + PADDING);
    padded.push(b'{');
    padded.resize(1 + PADDING, b' ');
    padded.extend_from_slice(body.strip_prefix(b"{").unwrap_or(body));
    let mut out = Vec::with_capacity(head.len() + padded.len() * 6 + 5);
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("content-length:") {
            continue;
        }
        if let Some(n) = lower.strip_prefix("inference-header-content-length:") {
            let json_len: usize = n.trim().parse().unwrap_or(0) + PADDING;
            out.extend_from_slice(
                format!("Inference-Header-Content-Length: {json_len}\r\n").as_bytes(),
            );
            continue;
        }
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
    for &b in &padded {
        out.extend_from_slice(b"1\r\n");
        out.push(b);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}
