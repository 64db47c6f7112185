//! The built `inferperf profile` against the fault server's OpenAI modes (`inferperf serve
//! --fault sse-*`, in-process on an ephemeral port): a 200 that carries an error (an
//! `event: error` packet, an OpenAI or vLLM error object, an event that is not JSON), streamed
//! or not, is a failed request of a named kind with the server's message; the text chunks
//! sent before the error count nowhere; a run where every request failed so exits 99; an
//! HTTP 500 carries its status to the exports' error `code`; a server gone mid-run cuts the
//! run short (exit 99) with every failure counted once.

use std::collections::BTreeMap;
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
    /// AIPerf's `profile_export_aiperf.json`.
    aiperf: Value,
    records: Vec<Value>,
}

/// The one point directory (GenAI-Perf's) under `dir`; AIPerf's files are in `dir` itself
/// (`--artifact-dir` typed), with its `logs/` folder.
fn point_dir(dir: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.ends_with("logs"))
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
        aiperf: serde_json::from_str(
            &std::fs::read_to_string(dir.join("profile_export_aiperf.json")).unwrap(),
        )
        .unwrap(),
        records: std::fs::read_to_string(dir.join("profile_export.jsonl"))
            .unwrap()
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

/// The number after `prefix` in `text` (up to the next space or parenthesis).
fn number_after(text: &str, prefix: &str) -> u64 {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix:?} in {text}"))
        + prefix.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a number after {prefix:?} in {text}"))
}

/// The `kind: count` pairs, in order, in the parentheses right after `prefix` and its number
/// (empty when no list follows): `Errors: 12 (connect_failed: 4, reset: 8)`.
fn kind_list(text: &str, prefix: &str) -> Vec<(String, u64)> {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix:?} in {text}"))
        + prefix.len();
    let rest = text[at..].trim_start_matches(|c: char| c.is_ascii_digit());
    let Some(list) = rest.strip_prefix(" (").and_then(|r| r.split(')').next()) else {
        return Vec::new();
    };
    list.split(", ")
        .map(|pair| {
            let (kind, n) = pair
                .split_once(": ")
                .unwrap_or_else(|| panic!("kind: count in {list:?}"));
            (kind.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// Every third request answered HTTP 500: the failure's status is AIPerf's error `code` in
/// both JSON summaries' `error_summary` (one entry: 500, `http_error`, the server's message)
/// and on the failed request's record; the answered requests count as measured.
#[test]
fn an_http_500_carries_its_status_to_the_error_code() {
    let run = profile(FaultMode::EveryNthFails, &[]);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    let failed = COUNT / 3;
    assert_eq!(run.summary["errors_by_kind"]["http_error"], failed);
    assert_eq!(run.summary["request_count"]["avg"], (COUNT - failed) as f64);
    for s in [&run.summary, &run.aiperf] {
        let summary = s["error_summary"].as_array().expect("error_summary");
        assert_eq!(summary.len(), 1, "{s}");
        assert_eq!(summary[0]["count"], failed, "{s}");
        let d = &summary[0]["error_details"];
        assert_eq!(d["code"], 500, "{s}");
        assert_eq!(d["type"], "http_error", "{s}");
        assert_eq!(d["message"], MESSAGE, "{s}");
    }
    let errors: Vec<&Value> = run
        .records
        .iter()
        .map(|r| &r["error"])
        .filter(|e| !e.is_null())
        .collect();
    assert_eq!(errors.len() as u64, failed);
    for e in errors {
        assert_eq!(
            (&e["code"], &e["type"]),
            (&Value::from(500), &Value::from("http_error"))
        );
    }
}

/// A server that goes away in the middle of a duration run: the run stops, exits 99 saying
/// it was cut short (as perf_analyzer mode does when the server dies), writes what was
/// measured, and counts every failed request once, under the same kind names with the same
/// counts in the console, the JSON summary, AIPerf's `error_summary`, the per-request export
/// and the line on stderr (requests whose connection could not be reopened included).
#[test]
fn a_server_gone_mid_run_is_an_error_with_every_failure_counted_once() {
    let server = crate::run_profile::start_llm(2, 2, 1);
    let dir = crate::common::temp_dir("profile-server-gone");
    let child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", crate::run_profile::MODEL])
        .args(["-u", &server.addr.to_string(), "--streaming"])
        .args(["--concurrency", "4", "--benchmark-duration", "60"])
        .args(["--output-tokens-mean", "8", "--tokenizer", "cl100k_base"])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Some requests are answered, then the server stops: open connections are dropped and
    // new ones refused.
    let waited = std::time::Instant::now();
    while server.counters().http_requests < 40 {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "no request came"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server.stop();
    let out = crate::nothing_lost::wait_bounded(child, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("error: concurrency4: the run was cut short after ")
            && stderr.contains("of the 60 s asked (--benchmark-duration)")
            && stderr.contains("the server stopped accepting connections"),
        "{stderr}"
    );
    // Console, stderr, summary and per-request export agree.
    let console = number_after(&stdout, "Errors: ");
    // The failures' warning line (another may report token-count differences).
    let failures_line = stderr
        .lines()
        .find(|l| l.starts_with("Warning: concurrency4: ") && l.contains("requests failed"))
        .unwrap_or_else(|| panic!("no failures line: {stderr}"));
    let failed = number_after(failures_line, "Warning: concurrency4: ");
    let total = number_after(failures_line, &format!("concurrency4: {failed} of "));
    assert!(console > 0, "{stdout}");
    assert_eq!(console, failed, "{stdout}\n{stderr}");
    // The kinds by the same names with the same counts: the console's list, the stderr
    // line's list in the same order (one kind: the line names none), the JSON summary,
    // AIPerf's error_summary and the per-request export.
    let listed = kind_list(&stdout, "Errors: ");
    let by_stderr = kind_list(
        failures_line,
        &format!("{failed} of {total} requests failed"),
    );
    if listed.len() > 1 {
        assert_eq!(by_stderr, listed, "{stdout}\n{stderr}");
    } else {
        assert!(by_stderr.is_empty(), "{stderr}");
    }
    let by_console: BTreeMap<String, u64> = listed.into_iter().collect();
    assert!(by_console.contains_key("connect_failed"), "{stdout}");
    assert_eq!(by_console.values().sum::<u64>(), console, "{stdout}");
    // The example after the kind's name does not repeat it.
    assert!(
        !stderr.contains("connect_failed: connect failed"),
        "{stderr}"
    );
    let point = point_dir(&dir);
    let read = |name: &str| std::fs::read_to_string(point.join(name)).unwrap();
    let summary: Value = serde_json::from_str(&read("profile_export_genai_perf.json")).unwrap();
    assert_eq!(
        summary["error_request_count"]["avg"], console as f64,
        "{summary}"
    );
    let ok = summary["request_count"]["avg"].as_f64().unwrap() as u64;
    assert!(ok > 0, "{summary}");
    assert_eq!(ok + console, total, "{summary}\n{stderr}");
    let by_summary: BTreeMap<String, u64> = summary["errors_by_kind"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(by_summary, by_console, "{summary}");
    // AIPerf's files are in the artifact folder itself.
    let read_top = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let aiperf: Value = serde_json::from_str(&read_top("profile_export_aiperf.json")).unwrap();
    // AIPerf's entries are per (code, type, message): summed by type.
    let mut by_aiperf: BTreeMap<String, u64> = BTreeMap::new();
    for e in aiperf["error_summary"].as_array().unwrap() {
        let kind = e["error_details"]["type"].as_str().unwrap().to_string();
        *by_aiperf.entry(kind).or_default() += e["count"].as_u64().unwrap();
    }
    assert_eq!(by_aiperf, by_console, "{aiperf}");
    let records: Vec<Value> = read_top("profile_export.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len() as u64, total);
    let mut by_record: BTreeMap<String, u64> = BTreeMap::new();
    for r in records.iter().filter(|r| !r["error"].is_null()) {
        *by_record
            .entry(r["error"]["type"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(by_record, by_console);
    assert!(point.join("report.html").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Over gRPC (`--endpoint-type kserve`), every third call ends with grpc-status 13: the
/// status is the error `code` in AIPerf's `error_summary` and on the failed records.
#[test]
fn a_failed_grpc_call_carries_its_grpc_status_to_the_error_code() {
    let server = start(&FaultConfig {
        mode: FaultMode::EveryNthFails,
        http: "127.0.0.1:0".parse().unwrap(),
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        ttl: Duration::from_secs(120),
    })
    .expect("fault server starts");
    let dir = temp_dir("profile-fault-grpc-status");
    let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", "identity", "--endpoint-type", "kserve"])
        .args(["-u", &server.grpc_addr.unwrap().to_string()])
        .args(["--concurrency", "1", "--request-count", "6"])
        .args(["--tokenizer", "cl100k_base", "--quiet"])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    server.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let aiperf: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("profile_export_aiperf.json"))
            .unwrap_or_else(|e| panic!("{e}: {stderr}")),
    )
    .unwrap();
    // The fault server answers each stream by a status alone: every third with 13, the
    // others with 12 (UNIMPLEMENTED).
    let summary = aiperf["error_summary"].as_array().expect("error_summary");
    let mut codes: Vec<(Value, Value, Value)> = summary
        .iter()
        .map(|e| {
            let d = &e["error_details"];
            (d["code"].clone(), d["type"].clone(), e["count"].clone())
        })
        .collect();
    codes.sort_by_key(|c| c.0.as_u64());
    let status = Value::from("http_error");
    assert_eq!(
        codes,
        [
            (12.into(), status.clone(), 4.into()),
            (13.into(), status, 2.into())
        ],
        "{aiperf}"
    );
    let records = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    let mut per_record: Vec<u64> = records
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["error"]["code"]
                .as_u64()
                .unwrap()
        })
        .collect();
    per_record.sort_unstable();
    assert_eq!(per_record, [12, 12, 12, 12, 13, 13], "{stderr}");
}
