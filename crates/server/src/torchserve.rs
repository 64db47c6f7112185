//! TorchServe's inference endpoint on the reference server's HTTP port, for the `torchserve`
//! service kind: `POST /predictions/<model>[/<version>]` with a `multipart/form-data` body.
//! The answer reports what arrived, `{"model":..,"part":"data","filename":..,"bytes":N}`, so
//! a test can check the upload without a real model.

use serde_json::json;

use super::http::{write_error_json, Method};
use super::models::{find_model, MODEL_VERSION};
use super::reply::{Outcome, Reply, Request, JSON};

/// The form parts TorchServe takes the input from.
const INPUT_PARTS: [&str; 2] = ["data", "body"];

/// One part of a multipart body: its form name, file name and content.
#[derive(Debug, PartialEq, Eq)]
pub struct Part<'a> {
    pub name: String,
    pub filename: Option<String>,
    pub content: &'a [u8],
}

fn reply(out: &mut Vec<u8>, status: u16, value: Option<serde_json::Value>, err: &str) -> Reply {
    out.clear();
    match value {
        Some(v) => {
            let _ = serde_json::to_writer(&mut *out, &v);
        }
        None => write_error_json(out, err),
    }
    Reply {
        status,
        content_type: JSON,
        inference_header_len: None,
        outcome: Outcome::Plain,
    }
}

/// Answers `/predictions/<rest>`.
pub fn route(req: &Request, rest: &str, out: &mut Vec<u8>) -> Reply {
    if req.method != Method::Post {
        return reply(out, 405, None, "method not allowed for /predictions");
    }
    let (model, version) = rest.split_once('/').unwrap_or((rest, ""));
    if find_model(model).is_none() || !(version.is_empty() || version == MODEL_VERSION) {
        return reply(out, 404, None, &format!("Model not found: {rest}"));
    }
    let parts = match parse_multipart(req.body) {
        Ok(p) => p,
        Err(e) => return reply(out, 400, None, &e),
    };
    let Some(input) = parts
        .iter()
        .find(|p| INPUT_PARTS.contains(&p.name.as_str()))
    else {
        return reply(out, 400, None, "no 'data' part in the form");
    };
    let answer = json!({
        "model": model,
        "part": input.name,
        "filename": input.filename,
        "bytes": input.content.len(),
    });
    reply(out, 200, Some(answer), "")
}

/// Splits a `multipart/form-data` body. The boundary is read from the body's first line
/// (`--<boundary>`), so the request's Content-Type is not needed.
pub fn parse_multipart(body: &[u8]) -> Result<Vec<Part<'_>>, String> {
    let first_end = find(body, b"\r\n").ok_or("multipart body has no boundary line")?;
    let delimiter = &body[..first_end];
    if delimiter.len() < 3 || !delimiter.starts_with(b"--") {
        return Err("multipart body does not start with a --boundary line".into());
    }
    let mut next_delim = b"\r\n".to_vec();
    next_delim.extend_from_slice(delimiter);
    let mut parts = Vec::new();
    let mut rest = &body[first_end + 2..];
    loop {
        let head_end = find(rest, b"\r\n\r\n").ok_or("multipart part without a blank line")?;
        let head = String::from_utf8_lossy(&rest[..head_end]).into_owned();
        let after_head = &rest[head_end + 4..];
        let end =
            find(after_head, &next_delim).ok_or("multipart part without a closing boundary")?;
        let (name, filename) = disposition(&head).ok_or("part without Content-Disposition name")?;
        parts.push(Part {
            name,
            filename,
            content: &after_head[..end],
        });
        let tail = &after_head[end + next_delim.len()..];
        if tail.starts_with(b"--") {
            return Ok(parts);
        }
        rest = tail
            .strip_prefix(b"\r\n")
            .ok_or("multipart boundary not followed by a line break")?;
    }
}

/// `name` and `filename` of a part's `Content-Disposition: form-data` header.
fn disposition(head: &str) -> Option<(String, Option<String>)> {
    let line = head.lines().find(|l| {
        l.split(':')
            .next()
            .is_some_and(|n| n.trim().eq_ignore_ascii_case("content-disposition"))
    })?;
    let mut name = None;
    let mut filename = None;
    for param in line.split(';').skip(1) {
        let Some((key, value)) = param.trim().split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_string();
        match key.trim() {
            "name" => name = Some(value),
            "filename" => filename = Some(value),
            _ => {}
        }
    }
    Some((name?, filename))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use inferperf_client::service::torchserve::multipart_body;

    #[test]
    fn parses_what_the_client_sends() {
        let body = multipart_body("x.bin", b"a\r\nb--c").unwrap();
        let parts = parse_multipart(&body).unwrap();
        assert_eq!(
            parts,
            vec![Part {
                name: "data".into(),
                filename: Some("x.bin".into()),
                content: b"a\r\nb--c",
            }]
        );
    }

    #[test]
    fn two_parts_and_broken_bodies() {
        let body = b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--B\r\n\
content-disposition: form-data; name=\"data\"\r\n\r\n22\r\n--B--\r\n";
        let parts = parse_multipart(body).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[1].name.as_str(), parts[1].content),
            ("data", &b"22"[..])
        );
        let broken: [&[u8]; 5] = [
            b"",
            b"nope\r\n",
            b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n1",
            b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1",
            b"--B\r\nX: y\r\n\r\n1\r\n--B--",
        ];
        for b in broken {
            assert!(
                parse_multipart(b).is_err(),
                "{:?}",
                String::from_utf8_lossy(b)
            );
        }
    }

    #[test]
    fn route_answers_with_what_arrived() {
        let body = multipart_body("in.jpg", b"12345").unwrap();
        let rows: [(Method, &str, &[u8], u16, &str); 5] = [
            (Method::Post, "simple", &body, 200, "\"bytes\":5"),
            (
                Method::Post,
                "simple/1",
                &body,
                200,
                "\"filename\":\"in.jpg\"",
            ),
            (Method::Post, "simple/2", &body, 404, "not found"),
            (Method::Post, "nope", &body, 404, "not found"),
            (Method::Get, "simple", b"", 405, "not allowed"),
        ];
        for (method, rest, body, status, want) in rows {
            let req = Request {
                method,
                path: "/predictions/x",
                inference_header_len: None,
                body,
            };
            let mut out = Vec::new();
            let r = route(&req, rest, &mut out);
            let text = String::from_utf8_lossy(&out);
            assert_eq!(r.status, status, "{rest}: {text}");
            assert!(text.contains(want), "{rest}: {text}");
        }
    }
}
