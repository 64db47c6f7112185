//! Triton's side of the fake LLM: the HTTP generate extension
//! (`POST /v2/models/<m>[/versions/1]/generate` and `.../generate_stream`) and the model's
//! metadata and configuration, which the gRPC decoupled model (`grpc::llm`) shares.
//!
//! Same model, pacing and token log as the OpenAI endpoints (`openai`): the served model name
//! is the OpenAI one, a request's prompt tokens are the whitespace words of `text_input`, and
//! it gets exactly `max_tokens` output tokens. Errors are Triton's `{"error": ".."}` bodies.

use serde_json::{json, Map, Value};

use super::openai::{start_generation, OaiReply};
use super::request::{
    faults, object, output_tokens, words, ApiError, Endpoint, GenRequest, DEFAULT_MAX_TOKENS,
};
use super::state::{OpenAiState, DEFAULT_OPENAI_MODEL};
use crate::http::{write_error_json, Method};
use crate::models::{find_model, Compute, ModelDef, TensorSpec, MODEL_VERSION};
use crate::reply::Request;
use inferperf_wire::tensor::DataType;

/// Input carrying the prompt: BYTES, one element.
pub const TEXT_INPUT: &str = "text_input";
/// Input carrying the exact output length: INT32, one element (optional).
pub const MAX_TOKENS: &str = "max_tokens";
/// Input choosing one response per chunk (true) or one whole response: BOOL (optional).
pub const STREAM: &str = "stream";
/// Output carrying a chunk's text: BYTES, one element.
pub const TEXT_OUTPUT: &str = "text_output";

/// The LLM's signature as Triton would describe it (vLLM-backend style). It is never run
/// through `ModelDef::run` and is not in `MODELS` (statistics list only those); its name
/// is replaced by the configured model name wherever it is reported.
pub static LLM_MODEL: ModelDef = ModelDef {
    name: DEFAULT_OPENAI_MODEL,
    max_batch_size: 0,
    inputs: &[
        TensorSpec {
            name: TEXT_INPUT,
            datatype: DataType::Bytes,
            dims: &[1],
        },
        TensorSpec {
            name: MAX_TOKENS,
            datatype: DataType::I32,
            dims: &[1],
        },
        TensorSpec {
            name: STREAM,
            datatype: DataType::Bool,
            dims: &[1],
        },
    ],
    outputs: &[TensorSpec {
        name: TEXT_OUTPUT,
        datatype: DataType::Bytes,
        dims: &[1],
    }],
    compute: Compute::Repeat,
    decoupled: true,
    sequence: false,
    steps: &[],
};

/// Whether input `name` of the LLM may be left out.
pub fn optional_input(name: &str) -> bool {
    name != TEXT_INPUT
}

/// `GET /v2/models/<llm>`: metadata under the served name `served`.
pub fn metadata_json(served: &str) -> Value {
    let mut metadata = LLM_MODEL.metadata_json();
    metadata["name"] = json!(served);
    metadata
}

/// `GET /v2/models/<llm>/config`: the configuration (decoupled) under the served name.
pub fn config_json(served: &str) -> Value {
    let mut config = LLM_MODEL.config_json();
    config["name"] = json!(served);
    config["instance_group"][0]["name"] = json!(format!("{served}_0"));
    if let Some(inputs) = config["input"].as_array_mut() {
        for input in inputs {
            let optional = input["name"].as_str().is_some_and(optional_input);
            input["optional"] = json!(optional);
        }
    }
    config
}

/// The message every interface gives for a model name that is neither the LLM nor hosted.
pub fn unknown_model(name: &str) -> String {
    format!("Request for unknown model: '{name}' is not found")
}

fn triton_error(out: &mut Vec<u8>, status: u16, msg: &str) -> OaiReply {
    out.clear();
    write_error_json(out, msg);
    OaiReply::Whole {
        status,
        ready_at: None,
        log_id: None,
    }
}

/// Answers a generate-extension request, writing any whole body into `out` (empty on entry);
/// None when the path is not one.
pub fn route(
    req: &Request,
    state: &OpenAiState,
    rng: &mut u64,
    out: &mut Vec<u8>,
) -> Option<OaiReply> {
    let rest = req.path.strip_prefix("/v2/models/")?;
    let (target, streamed) = match rest.strip_suffix("/generate_stream") {
        Some(target) => (target, true),
        None => (rest.strip_suffix("/generate")?, false),
    };
    let segments: Vec<&str> = target.split('/').collect();
    let (name, version) = match segments.as_slice() {
        [name] => (*name, None),
        [name, "versions", version] => (*name, Some(*version)),
        _ => return Some(triton_error(out, 404, "Not Found")),
    };
    if name != &*state.model {
        return Some(match find_model(name).filter(|_| !name.is_empty()) {
            Some(_) => {
                let msg = format!(
                    "model '{name}' does not support the generate extension (the LLM is '{}')",
                    state.model
                );
                triton_error(out, 400, &msg)
            }
            None => triton_error(out, 404, &unknown_model(name)),
        });
    }
    if let Some(v) = version.filter(|v| *v != MODEL_VERSION) {
        let msg = format!("Request for unknown model: '{name}' version {v} is not found");
        return Some(triton_error(out, 404, &msg));
    }
    if req.method != Method::Post {
        let msg = format!("method not allowed for '{}'", req.path);
        return Some(triton_error(out, 405, &msg));
    }
    Some(match parse_body(req.body) {
        Ok(mut gen) => {
            gen.stream = streamed;
            start_generation(&gen, state, rng, out)
        }
        Err(e) => triton_error(out, e.status, &e.message),
    })
}

/// A field set at the top level (preferred) or inside `parameters`; null counts as unset.
fn field<'a>(
    req: &'a Map<String, Value>,
    params: &'a Map<String, Value>,
    name: &str,
) -> Option<&'a Value> {
    let set = |v: &&Value| !v.is_null();
    req.get(name)
        .filter(set)
        .or_else(|| params.get(name).filter(set))
}

/// Reads a generate request body: `text_input` (required string), `max_tokens` (top level or
/// in `parameters`), the test faults `inferperf_fault` / `stall_ms` (likewise); everything
/// else (`stream` included: the path decides) is ignored, as Triton passes it on.
pub fn parse_body(body: &[u8]) -> Result<GenRequest, ApiError> {
    let req = object(body)?;
    let invalid = |name: &'static str, msg: &str| Err(ApiError::invalid(Some(name), msg));
    let prompt_tokens = match req.get(TEXT_INPUT) {
        Some(Value::String(text)) => words(text),
        Some(_) => return invalid(TEXT_INPUT, "'text_input' must be a string"),
        None => return invalid(TEXT_INPUT, "'text_input' is required"),
    };
    let empty = Map::new();
    let params = match req.get("parameters") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(params)) => params,
        Some(_) => return invalid("parameters", "'parameters' must be an object"),
    };
    let max_tokens = match field(&req, params, MAX_TOKENS) {
        Some(v) => output_tokens(MAX_TOKENS, v)?,
        None => DEFAULT_MAX_TOKENS,
    };
    let fault_fields: Map<String, Value> = ["inferperf_fault", "stall_ms"]
        .into_iter()
        .filter_map(|name| Some((name.to_string(), field(&req, params, name)?.clone())))
        .collect();
    let (error_event, stall) = faults(&fault_fields)?;
    Ok(GenRequest {
        endpoint: Endpoint::Generate,
        prompt_tokens,
        max_tokens,
        stream: false,
        include_usage: false,
        error_event,
        stall,
        reasoning_tokens: 0,
        media: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn call(method: Method, path: &str, body: &str, state: &OpenAiState) -> (OaiReply, Value) {
        let req = Request {
            method,
            path,
            inference_header_len: None,
            body: body.as_bytes(),
        };
        let mut out = Vec::new();
        let reply = route(&req, state, &mut 7, &mut out).expect("a generate path");
        (reply, serde_json::from_slice(&out).unwrap_or(Value::Null))
    }

    fn status(reply: &OaiReply) -> u16 {
        match reply {
            OaiReply::Whole { status, .. } => *status,
            OaiReply::Stream { .. } => 200,
        }
    }

    #[test]
    fn body_fields() {
        let cases: [(&str, u64, u32, bool, u64); 5] = [
            (
                r#"{"text_input":"a b  c"}"#,
                3,
                DEFAULT_MAX_TOKENS,
                false,
                0,
            ),
            (
                r#"{"text_input":"","max_tokens":4,"stream":true,"x":[1]}"#,
                0,
                4,
                false,
                0,
            ),
            (
                r#"{"text_input":"a","parameters":{"max_tokens":9,"stall_ms":5}}"#,
                1,
                9,
                false,
                5,
            ),
            (
                r#"{"text_input":"a","max_tokens":2,"parameters":{"max_tokens":9}}"#,
                1,
                2,
                false,
                0,
            ),
            (
                r#"{"text_input":"a","max_tokens":null,"inferperf_fault":"error_event"}"#,
                1,
                DEFAULT_MAX_TOKENS,
                true,
                0,
            ),
        ];
        for (body, prompt, max, error_event, stall_ms) in cases {
            let got = parse_body(body.as_bytes()).unwrap();
            let want = GenRequest {
                endpoint: Endpoint::Generate,
                prompt_tokens: prompt,
                max_tokens: max,
                stream: false,
                include_usage: false,
                error_event,
                stall: Duration::from_millis(stall_ms),
                reasoning_tokens: 0,
                media: Vec::new(),
            };
            assert_eq!(got, want, "{body}");
        }
    }

    #[test]
    fn body_errors_name_the_field() {
        let cases = [
            ("{", "not valid JSON"),
            ("[]", "JSON object"),
            (r#"{"max_tokens":3}"#, "'text_input' is required"),
            (r#"{"text_input":["a"]}"#, "'text_input' must be a string"),
            (r#"{"text_input":"a","max_tokens":0}"#, "'max_tokens'"),
            (
                r#"{"text_input":"a","parameters":{"max_tokens":"9"}}"#,
                "'max_tokens'",
            ),
            (r#"{"text_input":"a","parameters":3}"#, "'parameters'"),
            (r#"{"text_input":"a","stall_ms":-2}"#, "'stall_ms'"),
        ];
        for (body, needle) in cases {
            let err = parse_body(body.as_bytes()).unwrap_err();
            assert_eq!(err.status, 400, "{body}");
            assert!(err.message.contains(needle), "{body}: {}", err.message);
        }
    }

    #[test]
    fn routing_table() {
        use Method::{Get, Post};
        let state = OpenAiState::default();
        let ok = r#"{"text_input":"hi","max_tokens":3}"#;
        // Paths after `/v2/models/`.
        let cases: [(Method, &str, &str, u16, &str); 9] = [
            (Post, "inferperf-llm/generate", ok, 200, " and"),
            (Post, "inferperf-llm/versions/1/generate", ok, 200, " the"),
            (Post, "inferperf-llm/generate_stream", ok, 200, ""),
            (Post, "nope/generate", ok, 404, "'nope' is not found"),
            (Post, "simple/generate", ok, 400, "generate extension"),
            (
                Post,
                "inferperf-llm/versions/2/generate",
                ok,
                404,
                "version 2",
            ),
            (Get, "inferperf-llm/generate", "", 405, "not allowed"),
            (
                Post,
                "inferperf-llm/generate_stream",
                "{}",
                400,
                "text_input",
            ),
            (Post, "a/b/generate", ok, 404, "Not Found"),
        ];
        for (method, rest, body, want, needle) in cases {
            let path = &format!("/v2/models/{rest}");
            let (reply, value) = call(method, path, body, &state);
            assert_eq!(status(&reply), want, "{path}: {value}");
            let text = value["text_output"].as_str().or(value["error"].as_str());
            assert!(text.unwrap_or("").contains(needle), "{path}: {value}");
            let streamed = matches!(reply, OaiReply::Stream { .. });
            assert_eq!(streamed, want == 200 && path.ends_with("_stream"), "{path}");
        }
        let (_, whole) = call(
            Method::Post,
            "/v2/models/inferperf-llm/generate",
            ok,
            &state,
        );
        assert_eq!(
            whole,
            json!({"model_name": "inferperf-llm", "model_version": "1",
                "text_output": " the of and"})
        );
        assert_eq!(
            state.log.snapshot().len(),
            4,
            "only the accepted generations"
        );
        let other = Request {
            method: Method::Post,
            path: "/v2/models/inferperf-llm/infer",
            inference_header_len: None,
            body: b"{}",
        };
        assert!(route(&other, &state, &mut 1, &mut Vec::new()).is_none());
    }

    #[test]
    fn metadata_and_config_use_the_served_name() {
        let metadata = metadata_json("tiny");
        assert_eq!(metadata["name"], "tiny");
        assert_eq!(metadata["inputs"][0]["datatype"], "BYTES");
        assert_eq!(metadata["inputs"][1]["shape"], json!([1]));
        assert_eq!(metadata["outputs"][0]["name"], TEXT_OUTPUT);
        let config = config_json("tiny");
        assert_eq!(config["model_transaction_policy"]["decoupled"], true);
        assert_eq!(config["instance_group"][0]["name"], "tiny_0");
        let optional: Vec<bool> = config["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["optional"].as_bool().unwrap())
            .collect();
        assert_eq!(optional, vec![false, true, true]);
        assert_eq!(config["input"][0]["data_type"], "TYPE_STRING");
    }
}

#[cfg(test)]
#[path = "generate_http_tests.rs"]
mod http_tests;
