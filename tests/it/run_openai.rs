//! End-to-end `--service-kind openai`: the library drives the in-process reference server's
//! OpenAI endpoints, and the profile export must agree with what the server logged.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use inferperf::config::{ConcurrencyRange, Config, InputData, ServiceKind};
use inferperf::server::{self, OpenAiConfig, ServeConfig, ServerHandle};
use serde_json::Value;

const MODEL: &str = "inferperf-llm";

fn start_llm(ttft_ms: u64, itl_ms: u64) -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        openai: OpenAiConfig::paced(
            Duration::from_millis(ttft_ms),
            Duration::from_millis(itl_ms),
        ),
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

/// An openai run of `count` requests at `concurrency` over the payloads in `payloads`.
fn openai_config(
    server: &ServerHandle,
    dir: &Path,
    endpoint: &str,
    payloads: &[Value],
    count: u64,
    concurrency: u64,
) -> Config {
    let data = dir.join("payloads.json");
    let entries: Vec<Value> = payloads
        .iter()
        .map(|p| serde_json::json!({ "payload": [p] }))
        .collect();
    std::fs::write(&data, serde_json::json!({ "data": entries }).to_string()).unwrap();
    let mut cfg = quick_config(server, MODEL, count);
    cfg.service_kind = ServiceKind::OpenAi;
    cfg.endpoint = endpoint.into();
    cfg.async_mode = true;
    cfg.input_data = InputData::Files(vec![data]);
    cfg.request_count = count;
    cfg.concurrency = ConcurrencyRange {
        start: concurrency,
        end: concurrency,
        step: 1,
    };
    cfg.profile_export_file = Some(dir.join("export.json"));
    cfg
}

fn run_result(cfg: &Config) -> (inferperf::run::RunResult, String) {
    let mut out = Vec::new();
    let res =
        inferperf::run::run(cfg, &mut out, Arc::new(AtomicBool::new(false))).expect("run returns");
    (res, String::from_utf8(out).unwrap())
}

fn export(path: &PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).expect("export is JSON")
}

fn requests(doc: &Value) -> Vec<Value> {
    doc["experiments"][0]["requests"]
        .as_array()
        .unwrap()
        .clone()
}

fn responses(request: &Value) -> Vec<String> {
    request["response_outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["response"].as_str().unwrap().to_string())
        .collect()
}

/// The payload of one exported SSE event, which must be `data: <payload>` and the blank line
/// that ends it.
fn sse_data(event: &str) -> &str {
    event
        .strip_prefix("data: ")
        .and_then(|e| e.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("not one SSE data event: {event:?}"))
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

#[test]
fn streamed_chat_has_one_response_per_event_and_the_null_final() {
    let server = start_llm(3, 2);
    let dir = temp_dir("openai-chat");
    let payload = serde_json::json!({"model": MODEL, "stream": true, "max_tokens": 5,
        "messages": [{"role": "user", "content": "hello there"}]});
    let cfg = openai_config(
        &server,
        &dir,
        "v1/chat/completions",
        std::slice::from_ref(&payload),
        6,
        1,
    );
    let (res, text) = run_result(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 6);
    assert!(text.contains("  Service Kind: OPENAI\n"), "{text}");
    assert!(!text.contains("Batch size"), "{text}");
    assert!(text.contains("    Avg HTTP time: "), "{text}");
    assert!(!text.contains("Server:"), "{text}");

    let doc = export(cfg.profile_export_file.as_ref().unwrap());
    assert_eq!(doc["service_kind"], "openai");
    assert_eq!(doc["endpoint"], "v1/chat/completions");
    let reqs = requests(&doc);
    let logged = server.token_times();
    assert_eq!(reqs.len(), 6);
    assert_eq!(logged.len(), 6, "the server saw exactly the requests sent");
    for (r, sent) in reqs.iter().zip(&logged) {
        let inputs = r["request_inputs"]["payload"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(inputs).unwrap(), payload);
        let stamps = u64s(&r["response_timestamps"]);
        let outs = responses(r);
        // Role chunk, one chunk per token, then [DONE] as the null final response.
        assert_eq!(stamps.len(), 1 + sent.len() + 1, "{outs:?}");
        assert_eq!(outs.len(), stamps.len());
        // perf_analyzer keeps each event's bytes as the server sent them, and GenAI-Perf's
        // parser needs the `data: ` prefix: so does inferperf's export, `[DONE]` included.
        assert_eq!(outs.last().unwrap(), "data: [DONE]\n\n");
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]));
        assert!(stamps[0] >= r["timestamp"].as_u64().unwrap());
        // Each content event arrives after the server wrote it (1 ms of clock slack).
        for (got, wrote) in stamps[1..].iter().zip(sent) {
            assert!(
                got + 1_000_000 >= *wrote,
                "event at {got}, written at {wrote}"
            );
        }
        for chunk in &outs[..outs.len() - 1] {
            let v: Value = serde_json::from_str(sse_data(chunk)).expect("one JSON chunk each");
            assert_eq!(v["object"], "chat.completion.chunk");
        }
    }
}

#[test]
fn streamed_completions_nonstreamed_chat_and_embeddings() {
    let server = start_llm(0, 0);
    let dir = temp_dir("openai-kinds");
    let cases = [
        (
            "v1/completions",
            serde_json::json!({"model": MODEL, "prompt": "a b c", "max_tokens": 3,
                "stream": true}),
            5,
            "text_completion",
        ),
        (
            "v1/chat/completions",
            serde_json::json!({"model": MODEL, "max_tokens": 4,
                "messages": [{"role": "user", "content": "hi"}]}),
            1,
            "chat.completion",
        ),
        (
            "v1/embeddings",
            serde_json::json!({"model": MODEL, "input": ["one two", "three"]}),
            1,
            "list",
        ),
    ];
    for (endpoint, payload, per_request, object) in cases {
        let cfg = openai_config(&server, &dir, endpoint, &[payload], 4, 2);
        let (res, _) = run_result(&cfg);
        assert!(res.error.is_none(), "{endpoint}: {:?}", res.error);
        let doc = export(cfg.profile_export_file.as_ref().unwrap());
        let reqs = requests(&doc);
        assert_eq!(reqs.len(), 4, "{endpoint}");
        for r in &reqs {
            let outs = responses(r);
            // Streamed: 3 token chunks + [DONE] (+ nothing else: no usage asked).
            let want = if per_request == 5 { 4 } else { 1 };
            assert_eq!(outs.len(), want, "{endpoint}: {outs:?}");
            assert_eq!(u64s(&r["response_timestamps"]).len(), want);
            // Streamed events keep their SSE framing; whole bodies are written as they came.
            let first = if per_request == 5 {
                assert_eq!(outs.last().unwrap(), "data: [DONE]\n\n", "{endpoint}");
                sse_data(&outs[0])
            } else {
                assert!(outs[0].starts_with('{'), "{endpoint}: {outs:?}");
                &outs[0]
            };
            let first: Value = serde_json::from_str(first).unwrap();
            assert_eq!(first["object"], object, "{endpoint}");
        }
    }
}

#[test]
fn unknown_model_is_a_clear_error_with_exit_code_99() {
    let server = start_llm(0, 0);
    let dir = temp_dir("openai-404");
    let payload = serde_json::json!({"model": "nope", "prompt": "x", "max_tokens": 1});
    let cfg = openai_config(&server, &dir, "v1/completions", &[payload], 4, 1);
    let (res, _) = run_result(&cfg);
    let err = res.error.expect("the run reports the failure");
    assert_eq!(err.exit_code(), 99);
    assert!(
        err.msg
            .contains("HTTP 404: The model 'nope' does not exist"),
        "{}",
        err.msg
    );
}

#[test]
fn error_event_mid_stream_fails_the_request() {
    let server = start_llm(0, 1);
    let dir = temp_dir("openai-error-event");
    let payload = serde_json::json!({"model": MODEL, "stream": true, "max_tokens": 4,
        "messages": [{"role": "user", "content": "hi"}], "inferperf_fault": "error_event"});
    let cfg = openai_config(&server, &dir, "v1/chat/completions", &[payload], 4, 1);
    let (res, _) = run_result(&cfg);
    let err = res.error.expect("the error event fails the run");
    assert_eq!(err.exit_code(), 99);
    assert!(
        err.msg.contains("error event in the response stream"),
        "{}",
        err.msg
    );
}
