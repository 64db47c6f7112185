//! URL routing and the non-infer endpoints (health, server/model metadata, config, stats,
//! trace settings).

use serde_json::json;

use super::execute::Env;
use super::http::Method;
use super::infer::infer;
use super::llm::generate;
use super::models::{find_model, MODELS, MODEL_VERSION};
use super::reply::{error_reply, json_reply, Outcome, Reply, Request, BINARY, JSON};
use super::repository;
use super::trace::{settings_from_json, settings_to_json};

/// Protocol extensions the server metadata lists (HTTP `GET /v2` and gRPC ServerMetadata):
/// those of Triton's list that this server implements, in Triton's order (the same in every
/// model control mode).
pub const EXTENSIONS: [&str; 10] = [
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "model_configuration",
    "system_shared_memory",
    "cuda_shared_memory",
    "binary_tensor_data",
    "parameters",
    "statistics",
    "trace",
];

/// Answers one request, writing the response body into `out` (which must be empty).
pub fn route(req: &Request, env: &mut Env, out: &mut Vec<u8>) -> Reply {
    let path = req.path;
    let model_path = path
        .strip_prefix("/v2/models/")
        .filter(|rest| *rest != "stats");
    if let Some(rest) = model_path {
        return model_route(req, rest, env, out);
    }
    if let Some(rest) = path.strip_prefix("/predictions/") {
        return super::torchserve::route(req, rest, out);
    }
    if path == "/v2/trace/setting" {
        return trace_setting(req, None, env, out);
    }
    if let Some(rest) = path.strip_prefix("/v2/systemsharedmemory") {
        let is_post = req.method == Method::Post;
        return match super::shm::http_route(&env.shared.shm, is_post, rest, req.body) {
            Ok(Some(value)) => json_reply(out, &value),
            Ok(None) => Reply::plain(200),
            Err((status, msg)) => error_reply(out, status, &msg),
        };
    }
    if let Some(rest) = path.strip_prefix("/v2/cudasharedmemory") {
        let is_post = req.method == Method::Post;
        return match super::shm::http_route(&env.shared.shm.cuda, is_post, rest, req.body) {
            Ok(Some(value)) => json_reply(out, &value),
            Ok(None) => Reply::plain(200),
            Err((status, msg)) => error_reply(out, status, &msg),
        };
    }
    if let Some(rest) = path.strip_prefix("/v2/repository/") {
        return repository_route(req, rest, env, out);
    }
    let stats = &env.shared.stats;
    if req.method != Method::Get {
        return error_reply(out, 405, &format!("method not allowed for '{path}'"));
    }
    if let Some(style) = super::metrics::style_of_path(path, env.shared.metrics_style) {
        let llm = env.shared.openai.load.snapshot();
        return super::metrics::reply(style, &stats.counters(), llm, out);
    }
    match path {
        "/v2/health/live" | "/v2/health/ready" => Reply::plain(200),
        "/v2" | "/v2/" => json_reply(
            out,
            &json!({"name": "inferperf", "version": env!("CARGO_PKG_VERSION"),
                "extensions": EXTENSIONS}),
        ),
        "/v2/models/stats" => {
            let repo = &env.shared.repo;
            let loaded = (0..MODELS.len()).filter(|&i| repo.is_ready(i));
            json_reply(out, &stats.to_json_of(loaded))
        }
        _ => error_reply(out, 404, "Not Found"),
    }
}

/// The model repository extension: `POST index`, `POST models/{m}/load|unload`.
fn repository_route(req: &Request, rest: &str, env: &mut Env, out: &mut Vec<u8>) -> Reply {
    let repo = &env.shared.repo;
    let action = match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["index"] => None,
        ["models", m, a @ ("load" | "unload")] => Some((*m, *a)),
        _ => return error_reply(out, 404, "Not Found"),
    };
    if req.method != Method::Post {
        return error_reply(out, 405, "Method Not Allowed");
    }
    let result = match action {
        None => {
            return match repository::index_request(req.body) {
                Ok(ready) => json_reply(out, &repo.index_json(ready)),
                Err(msg) => error_reply(out, 500, &msg),
            }
        }
        Some((model, "load")) => repository::load_request(req.body)
            .map_err(|msg| (500, msg))
            .and_then(|params| {
                repo.load(model, &params)
                    .map_err(|e| (e.http_status(), e.into()))
            }),
        Some((model, _)) => repository::unload_request(req.body)
            .map_err(|msg| (500, msg))
            .and_then(|deps| {
                repo.unload(model, deps)
                    .map_err(|e| (e.http_status(), e.into()))
            }),
    };
    match result {
        Ok(()) => Reply::plain(200),
        Err((status, msg)) => error_reply(out, status, &msg),
    }
}

/// `GET` (read) or `POST` (update) the global or a model's trace settings.
fn trace_setting(req: &Request, model: Option<&str>, env: &mut Env, out: &mut Vec<u8>) -> Reply {
    let trace = &env.shared.trace;
    let result = match req.method {
        Method::Get => Ok(trace.current(model)),
        Method::Post => settings_from_json(req.body).and_then(|s| trace.update(model, s)),
        _ => {
            return error_reply(out, 405, &format!("method not allowed for '{}'", req.path));
        }
    };
    match result {
        Ok(settings) => json_reply(out, &settings_to_json(&settings)),
        Err(msg) => error_reply(out, 400, &msg),
    }
}

enum Action {
    Metadata,
    Ready,
    Config,
    Stats,
    Infer,
    Trace,
}

/// `rest` is the path after `/v2/models/`: `m[/versions/v][/action]` or `m/trace/setting`.
fn model_route(req: &Request, rest: &str, env: &mut Env, out: &mut Vec<u8>) -> Reply {
    let segments: Vec<&str> = rest.split('/').collect();
    let (name, version, action) = match segments.as_slice() {
        [m, "trace", "setting"] => (*m, None, "trace"),
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
        "trace" if segments.len() == 3 => Action::Trace,
        _ => return error_reply(out, 404, "Not Found"),
    };
    if name == &*env.shared.openai.model {
        return llm_route(req, name, version, action, env, out);
    }
    if let Err((status, msg)) = check_model(name, version, &action, env) {
        return error_reply(out, status, &msg);
    }
    let Some(index) = find_model(name) else {
        return error_reply(out, 404, "Not Found");
    };
    let wanted = if matches!(action, Action::Infer) {
        Method::Post
    } else {
        Method::Get
    };
    if req.method != wanted && !matches!(action, Action::Trace) {
        return error_reply(out, 405, &format!("method not allowed for '{}'", req.path));
    }
    let shared = env.shared;
    let model = &shared.repo.model(index);
    let stats = &shared.stats;
    match action {
        Action::Metadata => json_reply(out, &model.metadata_json()),
        Action::Ready => Reply::plain(200),
        Action::Config => json_reply(out, &model.config_json_with(&shared.repo.settings(index))),
        Action::Stats => json_reply(out, &stats.to_json(Some(index))),
        Action::Trace => trace_setting(req, Some(name), env, out),
        Action::Infer => match infer(env, model, req.body, req.inference_header_len, out) {
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

/// Triton's answers for a model that is unknown, of another version, or not loaded: readiness
/// is 400 "not ready", statistics 400 "not available", everything else 404.
fn check_model(
    name: &str,
    version: Option<&str>,
    action: &Action,
    env: &Env,
) -> Result<(), (u16, String)> {
    let index = find_model(name).filter(|_| !name.is_empty());
    let other_version = version.filter(|v| *v != MODEL_VERSION);
    let loaded = index.is_some_and(|i| env.shared.repo.is_ready(i));
    match action {
        Action::Ready if !loaded || other_version.is_some() => {
            Err((400, repository::NOT_READY.to_string()))
        }
        Action::Stats if !loaded => Err((400, repository::not_available(name))),
        Action::Stats if other_version.is_some() => Err((
            400,
            format!("requested model version is not available for model '{name}'"),
        )),
        _ if index.is_none() => Err((
            404,
            format!("Request for unknown model: '{name}' is not found"),
        )),
        _ if other_version.is_some() => {
            let v = other_version.unwrap_or_default();
            let msg = format!("Request for unknown model: '{name}' version {v} is not found");
            Err((404, msg))
        }
        Action::Trace => Ok(()),
        _ if !loaded => Err((404, repository::no_versions(name))),
        _ => Ok(()),
    }
}

/// The fake LLM's model endpoints: metadata, readiness and config (it is decoupled and keeps
/// no statistics; it generates through the generate extension or the gRPC stream).
fn llm_route(
    req: &Request,
    name: &str,
    version: Option<&str>,
    action: Action,
    env: &mut Env,
    out: &mut Vec<u8>,
) -> Reply {
    if let Some(v) = version.filter(|v| *v != MODEL_VERSION) {
        let msg = format!("Request for unknown model: '{name}' version {v} is not found");
        return error_reply(out, 404, &msg);
    }
    let wanted = match action {
        Action::Infer => Method::Post,
        Action::Trace => req.method,
        _ => Method::Get,
    };
    if req.method != wanted {
        return error_reply(out, 405, &format!("method not allowed for '{}'", req.path));
    }
    match action {
        Action::Metadata => json_reply(out, &generate::metadata_json(name)),
        Action::Ready => Reply::plain(200),
        Action::Config => json_reply(out, &generate::config_json(name)),
        Action::Trace => trace_setting(req, Some(name), env, out),
        Action::Stats => {
            let msg = format!("model '{name}' keeps no statistics (the LLM is served apart)");
            error_reply(out, 400, &msg)
        }
        Action::Infer => {
            let msg = format!(
                "model '{name}' is decoupled (it sends any number of responses per request): \
                 use /v2/models/{name}/generate[_stream] or the gRPC ModelStreamInfer stream"
            );
            error_reply(out, 400, &msg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Shared;
    use serde_json::Value;

    fn shared() -> Shared {
        Shared::new(vec![None; MODELS.len()], vec![false; MODELS.len()])
    }

    fn call(shared: &Shared, req: &Request, out: &mut Vec<u8>) -> Reply {
        let mut rng = 1u64;
        let mut env = Env {
            shared,
            rng: &mut rng,
        };
        route(req, &mut env, out)
    }

    fn send(method: Method, path: &str, body: &[u8], shared: &Shared) -> (Reply, String) {
        let mut out = Vec::new();
        let req = Request {
            method,
            path,
            inference_header_len: None,
            body,
        };
        let reply = call(shared, &req, &mut out);
        (reply, String::from_utf8(out).unwrap())
    }

    fn get(path: &str, shared: &Shared) -> (Reply, String) {
        send(Method::Get, path, &[], shared)
    }

    #[test]
    fn routes_table() {
        let stats = shared();
        let cases: [(&str, u16, &str); 17] = [
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
                400,
                "requested model version is not available for model 'simple'",
            ),
            ("/v2/models/simple/bogus", 404, "Not Found"),
            ("/v3", 404, "Not Found"),
            ("/v2/models/simple/infer", 405, "method not allowed"),
            ("/v2/trace/setting", 200, "\"trace_rate\":\"1000\""),
            (
                "/v2/models/simple/trace/setting",
                200,
                "\"trace_level\":[\"OFF\"]",
            ),
            ("/v2/models/nope/trace/setting", 404, "'nope' is not found"),
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
        let stats = shared();
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
        let reply = call(&stats, &req, &mut out);
        assert_eq!((reply.status, reply.content_type), (200, JSON));
        assert!(matches!(reply.outcome, Outcome::Inferred { model: 1, .. }));
        assert!(String::from_utf8_lossy(&out).contains("\"data\":[2.5]"));
        out.clear();
        let req = Request { body: b"[", ..req };
        let reply = call(&stats, &req, &mut out);
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
        let reply = call(&stats, &req, &mut out);
        assert_eq!(
            (reply.status, reply.outcome),
            (400, Outcome::InferFailed { model: 3 })
        );
        assert!(String::from_utf8_lossy(&out).contains("'repeat_int32' is decoupled"));
    }

    #[test]
    fn trace_settings_update_and_read() {
        let shared = shared();
        let body = br#"{"trace_level":["TIMESTAMPS"],"trace_rate":"7"}"#;
        let (reply, text) = send(Method::Post, "/v2/trace/setting", body, &shared);
        assert_eq!(reply.status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (v["trace_level"].clone(), v["trace_rate"].clone()),
            (json!(["TIMESTAMPS"]), json!("7"))
        );
        let path = "/v2/models/simple/trace/setting";
        let (reply, text) = send(Method::Post, path, br#"{"trace_count":3}"#, &shared);
        assert_eq!(reply.status, 200, "{text}");
        assert!(
            text.contains("\"trace_count\":\"3\"") && text.contains("\"trace_rate\":\"7\""),
            "{text}"
        );
        let (reply, text) = send(Method::Post, path, br#"{"trace_count":-5}"#, &shared);
        assert_eq!(reply.status, 400);
        assert!(
            text.contains("'trace_count' must be an integer >= -1"),
            "{text}"
        );
        let (reply, _) = send(Method::Other, "/v2/trace/setting", b"{}", &shared);
        assert_eq!(reply.status, 405);
        let updates = shared.trace.updates();
        assert_eq!(updates.len(), 2);
        assert_eq!(updates[1].model.as_deref(), Some("simple"));
        assert_eq!(updates[1].settings["trace_count"], vec!["3"]);
    }
}

#[cfg(test)]
#[path = "routes_http_tests.rs"]
mod http_tests;
