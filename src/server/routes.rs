//! URL routing and the non-infer endpoints (health, server/model metadata, config, stats).

use serde_json::{json, Value};

use super::http::{write_error_json, Method};
use super::infer::{infer, InferDone};
use super::models::{find_model, MODELS, MODEL_VERSION};
use super::stats::Stats;

pub const JSON: &str = "application/json";
pub const BINARY: &str = "application/octet-stream";
/// Protocol extensions the server metadata lists (HTTP `GET /v2` and gRPC ServerMetadata).
pub const EXTENSIONS: [&str; 3] = ["binary_tensor_data", "statistics", "model_configuration"];

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
    fn plain(status: u16) -> Reply {
        Reply {
            status,
            content_type: JSON,
            inference_header_len: None,
            outcome: Outcome::Plain,
        }
    }
}

fn json_reply(out: &mut Vec<u8>, value: &Value) -> Reply {
    // Serialising a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
    Reply::plain(200)
}

fn error_reply(out: &mut Vec<u8>, status: u16, msg: &str) -> Reply {
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

/// Answers one request, writing the response body into `out` (which must be empty).
pub fn route(req: &Request, stats: &Stats, out: &mut Vec<u8>) -> Reply {
    let path = req.path;
    let model_path = path
        .strip_prefix("/v2/models/")
        .filter(|rest| *rest != "stats");
    if let Some(rest) = model_path {
        return model_route(req, rest, stats, out);
    }
    if req.method != Method::Get {
        return error_reply(out, 405, &format!("method not allowed for '{path}'"));
    }
    match path {
        "/v2/health/live" | "/v2/health/ready" => Reply::plain(200),
        "/v2" | "/v2/" => json_reply(
            out,
            &json!({"name": "inferperf", "version": env!("CARGO_PKG_VERSION"),
                "extensions": EXTENSIONS}),
        ),
        "/v2/models/stats" => json_reply(out, &stats.to_json(None)),
        _ => error_reply(out, 404, "Not Found"),
    }
}

enum Action {
    Metadata,
    Ready,
    Config,
    Stats,
    Infer,
}

/// `rest` is the path after `/v2/models/`: `m[/versions/v][/action]`.
fn model_route(req: &Request, rest: &str, stats: &Stats, out: &mut Vec<u8>) -> Reply {
    let segments: Vec<&str> = rest.split('/').collect();
    let (name, version, action) = match segments.as_slice() {
        [m] => (*m, None, ""),
        [m, a] => (*m, None, *a),
        [m, "versions", v] => (*m, Some(*v), ""),
        [m, "versions", v, a] => (*m, Some(*v), *a),
        _ => return error_reply(out, 404, "Not Found"),
    };
    let action = match action {
        "" => Action::Metadata,
        "ready" => Action::Ready,
        "config" => Action::Config,
        "stats" => Action::Stats,
        "infer" => Action::Infer,
        _ => return error_reply(out, 404, "Not Found"),
    };
    let Some(index) = find_model(name).filter(|_| !name.is_empty()) else {
        return error_reply(
            out,
            404,
            &format!("Request for unknown model: '{name}' is not found"),
        );
    };
    if let Some(v) = version.filter(|v| *v != MODEL_VERSION) {
        let msg = format!("Request for unknown model: '{name}' version {v} is not found");
        return error_reply(out, 404, &msg);
    }
    let wanted = if matches!(action, Action::Infer) {
        Method::Post
    } else {
        Method::Get
    };
    if req.method != wanted {
        return error_reply(out, 405, &format!("method not allowed for '{}'", req.path));
    }
    let model = &MODELS[index];
    match action {
        Action::Metadata => json_reply(out, &model.metadata_json()),
        Action::Ready => Reply::plain(200),
        Action::Config => json_reply(out, &model.config_json()),
        Action::Stats => json_reply(out, &stats.to_json(Some(index))),
        Action::Infer => match infer(model, req.body, req.inference_header_len, out) {
            Ok(done) => Reply {
                status: 200,
                content_type: if done.header_len.is_some() {
                    BINARY
                } else {
                    JSON
                },
                inference_header_len: done.header_len,
                outcome: Outcome::Inferred { model: index, done },
            },
            Err(msg) => {
                let mut reply = error_reply(out, 400, &msg);
                reply.outcome = Outcome::InferFailed { model: index };
                reply
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, stats: &Stats) -> (Reply, String) {
        let mut out = Vec::new();
        let req = Request {
            method: Method::Get,
            path,
            inference_header_len: None,
            body: &[],
        };
        let reply = route(&req, stats, &mut out);
        (reply, String::from_utf8(out).unwrap())
    }

    #[test]
    fn routes_table() {
        let stats = Stats::new();
        let cases: [(&str, u16, &str); 14] = [
            ("/v2/health/live", 200, ""),
            ("/v2/health/ready", 200, ""),
            ("/v2", 200, "\"statistics\""),
            ("/v2/models/simple", 200, "\"inputs\""),
            ("/v2/models/simple/versions/1", 200, "\"versions\":[\"1\"]"),
            ("/v2/models/simple/ready", 200, ""),
            (
                "/v2/models/identity_bytes/versions/1/config",
                200,
                "TYPE_STRING",
            ),
            ("/v2/models/stats", 200, "identity_fp32"),
            ("/v2/models/simple/stats", 200, "\"model_stats\""),
            (
                "/v2/models/nope",
                404,
                "Request for unknown model: 'nope' is not found",
            ),
            (
                "/v2/models/simple/versions/2/stats",
                404,
                "'simple' version 2 is not found",
            ),
            ("/v2/models/simple/bogus", 404, "Not Found"),
            ("/v3", 404, "Not Found"),
            ("/v2/models/simple/infer", 405, "method not allowed"),
        ];
        for (path, status, needle) in cases {
            let (reply, body) = get(path, &stats);
            assert_eq!(reply.status, status, "{path}");
            assert!(body.contains(needle), "{path}: {body}");
            assert_eq!(reply.outcome, Outcome::Plain, "{path}");
        }
    }

    #[test]
    fn infer_outcomes() {
        let stats = Stats::new();
        let mut out = Vec::new();
        let body =
            br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[2.5]}]}"#;
        let path = "/v2/models/identity_fp32/versions/1/infer";
        let req = Request {
            method: Method::Post,
            path,
            inference_header_len: None,
            body,
        };
        let reply = route(&req, &stats, &mut out);
        assert_eq!((reply.status, reply.content_type), (200, JSON));
        assert!(matches!(reply.outcome, Outcome::Inferred { model: 1, .. }));
        assert!(String::from_utf8_lossy(&out).contains("\"data\":[2.5]"));
        out.clear();
        let req = Request { body: b"[", ..req };
        let reply = route(&req, &stats, &mut out);
        assert_eq!(
            (reply.status, reply.outcome),
            (400, Outcome::InferFailed { model: 1 })
        );
        assert!(out.starts_with(b"{\"error\":\"failed to parse"));
        out.clear();
        let req = Request {
            path: "/v2/models/repeat_int32/infer",
            body: br#"{"inputs":[{"name":"IN","datatype":"INT32","shape":[1],"data":[1]}]}"#,
            ..req
        };
        let reply = route(&req, &stats, &mut out);
        assert_eq!(
            (reply.status, reply.outcome),
            (400, Outcome::InferFailed { model: 3 })
        );
        assert!(String::from_utf8_lossy(&out).contains("'repeat_int32' is decoupled"));
    }
}
