//! The built `inferperf profile` against the fault server's OpenAI modes (`inferperf serve
//! --fault sse-*`, in-process on an ephemeral port): a 200 that carries an error (an
//! `event: error` packet, an OpenAI or vLLM error object, an event that is not JSON), streamed
//! or not, is a failed request of a named kind with the server's message; the text chunks
//! sent before the error count nowhere; a run where every request failed so exits 99.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use inferperf::server::fault::openai::MESSAGE;
use inferperf::server::fault::{start, FaultConfig, FaultHandle, FaultMode};
use serde_json::Value;

use crate::common::temp_dir;

/// Requests per run.
const COUNT: u64 = 4;

fn fault_server(mode: FaultMode) -> FaultHandle {
    start(&FaultConfig {
        mode,
        http: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        ttl: Duration::from_secs(120),
    })
    .expect("fault server starts")
}

/// What one run left: its exit code, stderr, and the artifacts of its one point.
struct Run {
    code: Option<i32>,
    stderr: String,
    summary: Value,
    records: Vec<Value>,
}

/// The one point directory under `dir`.
fn point_dir(dir: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// `inferperf profile` against a fresh fault server in `mode`, `COUNT` requests on two
/// streams, with `extra` flags.
fn profile(mode: FaultMode, extra: &[&str]) -> Run {
    let server = fault_server(mode);
    let dir = temp_dir(&format!("profile-fault-{}-{}", mode.name(), extra.join("")));
    let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", "m", "-u", &server.addr.to_string()])
        .args(["--concurrency", "2", "--request-count", &COUNT.to_string()])
        .args(["--output-tokens-mean", "8", "--tokenizer", "cl100k_base"])
        .args(["--quiet", "--artifact-dir", dir.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(server.infers(), COUNT, "{}", mode.name());
    server.stop();
    let point = point_dir(&dir);
    let read = |name: &str| std::fs::read_to_string(point.join(name)).unwrap();
    let run = Run {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        summary: serde_json::from_str(&read("profile_export_genai_perf.json")).unwrap(),
        records: read("profile_export.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    run
}

/// Every request failed as `kind` with `detail` in its message, no output token counted
/// anywhere, the summary and stderr say so, exit 99.
fn assert_failed(run: &Run, kind: &str, detail: &str) {
    let stderr = &run.stderr;
    assert_eq!(run.code, Some(99), "{stderr}");
    let line = format!("error: all {COUNT} requests failed: ");
    assert!(
        stderr.contains(&line) && stderr.contains(detail),
        "{stderr}"
    );
    let s = &run.summary;
    assert_eq!(s["error_request_count"]["avg"], COUNT as f64, "{s}");
    assert_eq!(s["errors_by_kind"][kind], COUNT, "{s}");
    assert_eq!(s["request_count"]["avg"], 0.0, "{s}");
    assert!(s.get("output_sequence_length").is_none(), "{s}");
    let summary = s["error_summary"].as_array().expect("error_summary");
    assert_eq!(summary.len(), 1, "{s}");
    assert_eq!(summary[0]["count"], COUNT);
    assert_eq!(summary[0]["error_details"]["type"], kind);
    let message = summary[0]["error_details"]["message"].as_str().unwrap();
    assert!(message.contains(detail), "{message}");
    assert_eq!(run.records.len(), COUNT as usize);
    for r in &run.records {
        assert_eq!(r["error"]["type"], kind, "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(detail), "{message}");
        assert_eq!(r["metadata"]["chunk_tokens"], Value::Array(vec![]), "{r}");
        assert!(r["metrics"].get("output_sequence_length").is_none(), "{r}");
    }
}

#[test]
fn the_healthy_control_counts_every_token() {
    for extra in [&["--streaming"][..], &[]] {
        let run = profile(FaultMode::None, extra);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert_eq!(run.summary["error_request_count"]["avg"], 0.0);
        assert_eq!(run.summary["output_sequence_length"]["avg"], 4.0);
    }
}

#[test]
fn an_error_event_fails_the_stream() {
    let run = profile(FaultMode::SseErrorEvent, &["--streaming"]);
    assert_failed(&run, "sse_error_event", MESSAGE);
    assert!(run.stderr.contains("error event in the response stream"));
}

#[test]
fn an_openai_error_object_fails_the_stream_and_the_reply() {
    let run = profile(FaultMode::SseOpenaiError, &["--streaming"]);
    assert_failed(&run, "sse_error_event", MESSAGE);
    assert!(run
        .stderr
        .contains("type: server_error, code: engine_failed"));
    for mode in [FaultMode::SseOpenaiError, FaultMode::SseErrorEvent] {
        let run = profile(mode, &[]);
        assert_failed(&run, "invalid_reply", MESSAGE);
    }
}

#[test]
fn a_vllm_error_object_fails_the_stream_and_the_reply() {
    let run = profile(FaultMode::SseVllmError, &["--streaming"]);
    assert_failed(&run, "sse_error_event", MESSAGE);
    assert!(run.stderr.contains("type: InternalServerError, code: 500"));
    let run = profile(FaultMode::SseVllmError, &["--endpoint-type", "completions"]);
    assert_failed(&run, "invalid_reply", MESSAGE);
}

#[test]
fn an_event_that_is_not_json_fails_the_stream_and_the_reply() {
    let streamed = ["--streaming", "--endpoint-type", "completions"];
    let run = profile(FaultMode::SseNotJson, &streamed);
    assert_failed(&run, "not_json", "{not json");
    let run = profile(FaultMode::SseNotJson, &[]);
    assert_failed(&run, "not_json", "{not json");
}
