//! The fault server's HTTP/1.1 front: keep-alive requests, read one at a time; health,
//! metadata, config and statistics answered from [`super::model`]; infer requests get the
//! mode's fault.

use std::net::TcpStream;

use super::model::{self, MODEL, TENSOR_BYTES};
use super::{io, FaultMode, Shared};

/// Longest request head read (bytes); a longer one closes the connection.
const MAX_HEAD: usize = 64 * 1024;
/// Longest request body read (bytes); a longer one gets 413 and a close.
const MAX_BODY: usize = 16 << 20;
/// Bytes of the huge header in `huge-headers`.
const HUGE_HEADER: usize = 2 << 20;
/// Bytes of the body sent in `huge-content-length` before the stall.
const HUGE_BODY_SENT: usize = 64 * 1024;

/// One request as read.
struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

/// Serves one connection until the peer closes it, a fault ends it, or the server stops.
pub(super) fn serve_conn(mut s: TcpStream, sh: &Shared) {
    io::prepare(&s);
    if sh.mode == FaultMode::StallForever {
        io::hold_silent(&s, sh);
        return;
    }
    let mut buf = Vec::with_capacity(8 * 1024);
    loop {
        let req = match read_request(&mut s, &mut buf, sh) {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(413) if sh.mode == FaultMode::PayloadTooLarge => {
                return super::odd::refuse_large(s, sh)
            }
            Err(status) => {
                let _ = respond(
                    &mut s,
                    status,
                    "application/json",
                    b"{\"error\":\"bad request\"}",
                    sh,
                );
                io::close_clean(s, sh);
                return;
            }
        };
        let keep = if req.method == "POST" && req.path.ends_with("/infer") {
            infer(&mut s, &req, sh)
        } else if super::openai::serves(sh.mode, &req.method, &req.path) {
            written(super::openai::answer(&mut s, &req.path, &req.body, sh))
        } else {
            metadata(&mut s, &req, sh)
        };
        match keep {
            Keep::Yes => {}
            Keep::Close => return io::close_clean(s, sh),
            Keep::Reset => return io::close_reset(s),
            Keep::Gone => return,
        }
    }
}

/// What to do with the connection after an answer.
enum Keep {
    Yes,
    /// Clean close (FIN).
    Close,
    /// TCP reset.
    Reset,
    /// Already dealt with (held until the peer left, or the peer is gone).
    Gone,
}

/// Reads one request; `Ok(None)` at a close (or a stop), `Err(status)` for a request this
/// server will not read.
fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>, sh: &Shared) -> Result<Option<Request>, u16> {
    let head_len = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(431);
        }
        if io::read_more(s, buf, MAX_HEAD, sh).is_none() {
            return Ok(None);
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    if !matches!(
        parsed.parse(&buf[..head_len]),
        Ok(httparse::Status::Complete(_))
    ) {
        return Err(400);
    }
    let length = parsed
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| {
            std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
        });
    let max_body = if sh.mode == FaultMode::PayloadTooLarge {
        super::odd::REQUEST_LIMIT
    } else {
        MAX_BODY
    };
    let length = match length {
        None => 0,
        Some(Some(n)) if n <= max_body => n,
        Some(Some(_)) => return Err(413),
        Some(None) => return Err(400),
    };
    let method = parsed.method.unwrap_or("").to_string();
    let path = parsed.path.unwrap_or("").to_string();
    while buf.len() < head_len + length {
        if io::read_more(s, buf, head_len + length - buf.len(), sh).is_none() {
            return Ok(None);
        }
    }
    let body = buf[head_len..head_len + length].to_vec();
    buf.drain(..head_len + length);
    Ok(Some(Request { method, path, body }))
}

/// Writes a complete response with Content-Length.
fn respond(s: &mut TcpStream, status: u16, content_type: &str, body: &[u8], sh: &Shared) -> bool {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        reason(status),
        body.len()
    );
    io::write_all(s, head.as_bytes(), sh) && io::write_all(s, body, sh)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    }
}

fn respond_json(s: &mut TcpStream, status: u16, value: &serde_json::Value, sh: &Shared) -> Keep {
    let body = value.to_string();
    if respond(s, status, "application/json", body.as_bytes(), sh) {
        Keep::Yes
    } else {
        Keep::Gone
    }
}

/// The model a `/v2/models/{name}[/versions/v][/suffix]` path names (a path an HTTP client
/// normalised `..` out of names no model: the names modes take it as the composing model).
fn model_in(path: &str) -> &str {
    let rest = path.strip_prefix("/v2/models/").unwrap_or("");
    rest.split('/').next().unwrap_or("")
}

/// Health, server metadata, model metadata, config and statistics.
fn metadata(s: &mut TcpStream, req: &Request, sh: &Shared) -> Keep {
    let mode = sh.mode;
    let path = req.path.split('?').next().unwrap_or("");
    if req.method != "GET" {
        return respond_json(s, 404, &serde_json::json!({"error": "Not Found"}), sh);
    }
    if matches!(path, "/v2/health/live" | "/v2/health/ready") {
        return if respond(s, 200, "text/plain", b"", sh) {
            Keep::Yes
        } else {
            Keep::Gone
        };
    }
    if path == "/v2" || path == "/v2/" {
        return respond_json(s, 200, &model::server_json(), sh);
    }
    if path == "/v2/models/stats" {
        return respond_json(s, 200, &model::stats_json(mode, "", sh.infers()), sh);
    }
    let name = model_in(path);
    let Some(model) = model::resolve(mode, name).or_else(|| model::composing(mode)) else {
        let msg = format!("Request for unknown model: '{name}' is not found");
        return respond_json(s, 404, &serde_json::json!({ "error": msg }), sh);
    };
    let value = if path.ends_with("/stats") {
        model::stats_json(mode, model, sh.infers())
    } else if path.ends_with("/config") {
        model::config_json(mode, model)
    } else if path.ends_with("/ready") {
        return if respond(s, 200, "text/plain", b"", sh) {
            Keep::Yes
        } else {
            Keep::Gone
        };
    } else {
        model::metadata_json(mode, model)
    };
    respond_json(s, 200, &value, sh)
}

/// The output bytes of an echo: the request's last `TENSOR_BYTES` bytes (its binary input),
/// or zeros when the request carried its input as JSON.
fn echo_data(req: &Request) -> Vec<u8> {
    let binary =
        req.body.len() >= TENSOR_BYTES && req.body.starts_with(b"{") && !req.body.ends_with(b"}");
    if binary {
        req.body[req.body.len() - TENSOR_BYTES..].to_vec()
    } else {
        vec![0; TENSOR_BYTES]
    }
}

/// A healthy infer reply: (head, body).
fn infer_reply(req: &Request, content_length: Option<usize>) -> (String, Vec<u8>) {
    let data = echo_data(req);
    let binary = !contains(&req.body, b"\"binary_data\":false");
    let json = model::infer_json(binary, &data);
    let mut body = json.clone().into_bytes();
    let mut extra = String::new();
    if binary {
        body.extend_from_slice(&data);
        extra = format!("Inference-Header-Content-Length: {}\r\n", json.len());
    }
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n{extra}Content-Length: {}\r\n\r\n",
        content_length.unwrap_or(body.len())
    );
    (head, body)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// An infer request: the mode's fault, or a healthy reply.
fn infer(s: &mut TcpStream, req: &Request, sh: &Shared) -> Keep {
    let n = sh.next_infer();
    if !names_model(&req.path) {
        let msg = format!(
            "Request for unknown model: '{}' is not found",
            model_in(&req.path)
        );
        return respond_json(s, 404, &serde_json::json!({ "error": msg }), sh);
    }
    if sh.fails(n) {
        let err = serde_json::json!({ "error": model::error_text(sh.mode, n) });
        return respond_json(s, 500, &err, sh);
    }
    let (head, body) = infer_reply(req, None);
    if sh.resets(n) {
        return half_body(s, &head, &body, sh);
    }
    fault_reply(s, req, &head, &body, sh)
}

/// Whether an infer path names the one model this server serves.
fn names_model(path: &str) -> bool {
    path.strip_prefix("/v2/models/")
        .map(|r| r.split('/').next())
        == Some(Some(MODEL))
}

/// Answers an infer request for the served model the way the mode says, given the healthy
/// reply's `head` and `body`.
fn fault_reply(s: &mut TcpStream, req: &Request, head: &str, body: &[u8], sh: &Shared) -> Keep {
    match sh.mode {
        FaultMode::Refuse => {
            sh.refused.store(true, std::sync::atomic::Ordering::Relaxed);
            Keep::Close
        }
        FaultMode::CloseMidBody | FaultMode::StallBody => half_body(s, head, body, sh),
        FaultMode::StallHead => {
            io::hold(s, sh);
            Keep::Gone
        }
        FaultMode::WrongContentLength => {
            let (head, body) = infer_reply(req, Some(body.len() - 8));
            whole(s, &head, &body, sh)
        }
        FaultMode::Garbage => garbage(s, sh),
        FaultMode::NotJson | FaultMode::NotProtobuf => {
            let body = b"<html><body>this is not JSON</body></html>";
            written(respond(s, 200, "application/json", body, sh))
        }
        FaultMode::InterimFlood => {
            io::flood(s, b"HTTP/1.1 100 Continue\r\n\r\n", sh);
            Keep::Gone
        }
        FaultMode::ChunkExtensionFlood => chunk_flood(s, sh),
        FaultMode::EndlessHeader => endless_header(s, sh),
        FaultMode::HugeContentLength => huge_content_length(s, sh),
        FaultMode::HugeHeaders => huge_headers(s, head, body, sh),
        FaultMode::Drip => written(io::drip(s, head.as_bytes(), sh) && io::drip(s, body, sh)),
        FaultMode::HugeNumber => {
            let (head, body) = super::odd::huge_number_reply();
            whole(s, &head, &body, sh)
        }
        FaultMode::TinyChunks => {
            written(io::write_all(s, &super::odd::tiny_chunks(head, body), sh))
        }
        _ => whole(s, head, body, sh),
    }
}

/// Writes the head and the whole body.
fn whole(s: &mut TcpStream, head: &str, body: &[u8], sh: &Shared) -> Keep {
    written(io::write_all(s, head.as_bytes(), sh) && io::write_all(s, body, sh))
}

/// Writes the head and half the body, then resets (`reset`), closes (`close-mid-body`) or
/// stalls (`stall-body`).
fn half_body(s: &mut TcpStream, head: &str, body: &[u8], sh: &Shared) -> Keep {
    let half = &body[..body.len() / 2];
    if !(io::write_all(s, head.as_bytes(), sh) && io::write_all(s, half, sh)) {
        return Keep::Gone;
    }
    match sh.mode {
        FaultMode::Reset | FaultMode::EveryNthResets => Keep::Reset,
        FaultMode::CloseMidBody => Keep::Close,
        _ => {
            io::hold(s, sh);
            Keep::Gone
        }
    }
}

/// Writes bytes that are not an HTTP response, then closes.
fn garbage(s: &mut TcpStream, sh: &Shared) -> Keep {
    let garbage = b"\x00\xff\xfe GARBAGE: this is not an HTTP response \x80\x81\x82\r\n\r\n";
    if io::write_all(s, garbage, sh) {
        Keep::Close
    } else {
        Keep::Gone
    }
}

/// Writes a status line, then header lines until the peer goes away or the server stops.
fn endless_header(s: &mut TcpStream, sh: &Shared) -> Keep {
    if io::write_all(s, b"HTTP/1.1 200 OK\r\n", sh) {
        io::flood(
            s,
            b"X-Fault-Endless: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
            sh,
        );
    }
    Keep::Gone
}

/// Announces a body of a petabyte, sends the first [`HUGE_BODY_SENT`] bytes of it, then stalls.
fn huge_content_length(s: &mut TcpStream, sh: &Shared) -> Keep {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                Content-Length: 1000000000000000\r\n\r\n";
    if io::write_all(s, head.as_bytes(), sh) && io::write_all(s, &[b' '; HUGE_BODY_SENT], sh) {
        io::hold(s, sh);
    }
    Keep::Gone
}

/// The healthy reply with a [`HUGE_HEADER`]-byte header line first in its head.
fn huge_headers(s: &mut TcpStream, head: &str, body: &[u8], sh: &Shared) -> Keep {
    let mut big = b"HTTP/1.1 200 OK\r\nX-Fault-Huge: ".to_vec();
    big.resize(big.len() + HUGE_HEADER, b'a');
    big.extend_from_slice(b"\r\n");
    let rest = head.strip_prefix("HTTP/1.1 200 OK\r\n").unwrap_or(head);
    written(
        io::write_all(s, &big, sh)
            && io::write_all(s, rest.as_bytes(), sh)
            && io::write_all(s, body, sh),
    )
}

fn written(ok: bool) -> Keep {
    if ok {
        Keep::Yes
    } else {
        Keep::Gone
    }
}

/// A chunked reply of one-byte chunks, each line carrying 1 KiB of extensions, until the peer
/// goes away or the server stops.
fn chunk_flood(s: &mut TcpStream, sh: &Shared) -> Keep {
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if !io::write_all(s, head.as_bytes(), sh) {
        return Keep::Gone;
    }
    let mut unit = b"1".to_vec();
    while unit.len() < 1024 {
        unit.extend_from_slice(b";fault=extension");
    }
    unit.extend_from_slice(b"\r\n \r\n");
    io::flood(s, &unit, sh);
    Keep::Gone
}
