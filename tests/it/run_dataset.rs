//! `inferperf profile` over dataset files against the in-process reference server: a trace
//! replayed with `--fixed-schedule` must reach the server on its timestamps (the server's
//! own log of when it answered each request), the schedule lag must be reported, and the
//! same trace must also run as a closed loop.

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm};

use serde_json::Value;

/// Trace times (ms): irregular gaps, none under 40 ms (20 ms at the 2x speed-up).
const STAMPS_MS: [u64; 8] = [1_000, 1_040, 1_100, 1_160, 1_240, 1_280, 1_360, 1_420];

fn write_trace(dir: &std::path::Path) -> std::path::PathBuf {
    let mut text = String::new();
    for (i, t) in STAMPS_MS.iter().enumerate() {
        let line = if i % 2 == 0 {
            format!("{{\"timestamp\": {t}, \"input_length\": 40, \"output_length\": 2, \"hash_ids\": [7]}}\n")
        } else {
            format!("{{\"timestamp\": {t}, \"text_input\": \"entry {i}\", \"output_length\": 2}}\n")
        };
        text.push_str(&line);
    }
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("trace.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

/// One replay of the trace at 2x; returns each arrival's error (us) and, for a failure
/// message, the client's send lags.
fn replay_once(attempt: usize) -> (Vec<u64>, String) {
    let server = start_llm(0, 0, 1);
    let dir = temp_dir(&format!("dataset-replay-{attempt}"));
    let trace = write_trace(&dir);
    let args = [
        "--input-file",
        trace.to_str().unwrap(),
        "--custom-dataset-type",
        "mooncake_trace",
        "--fixed-schedule-auto-offset",
        "--fixed-schedule-speedup",
        "2",
    ];
    let (outcomes, stdout) = profile(&server, &dir.join("out"), &args).unwrap();
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), STAMPS_MS.len());
    assert!(reqs.iter().all(|r| r.ok()), "{:?}", reqs[0].error);
    // Named as GenAI-Perf and AIPerf name a replay's folder.
    assert!(
        outcomes[0]
            .dir
            .to_string_lossy()
            .ends_with("-fixed_schedule"),
        "{}",
        outcomes[0].dir.display()
    );
    let aiperf: Value = serde_json::from_str(
        &std::fs::read_to_string(outcomes[0].aiperf_dir.join("profile_export_aiperf.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        aiperf["input_config"]["phases"][0]["type"],
        "fixed_schedule"
    );
    // The synthetic hash-id prompts have their exact input_length.
    assert_eq!(reqs.iter().filter(|r| r.isl == 40).count(), 4);
    // When the server answered each request (no TTFT: as soon as it was read), in time
    // order; the trace's gaps (>= 20 ms here) are far wider than any error, so the k-th
    // answer is the k-th entry's.
    let mut answered: Vec<u64> = server.token_times().iter().map(|t| t[0]).collect();
    answered.sort_unstable();
    assert_eq!(answered.len(), STAMPS_MS.len(), "one request per entry");
    let want_ns = |k: usize| (STAMPS_MS[k] - STAMPS_MS[0]) * 1_000_000 / 2;
    // Each arrival's distance from its place in the schedule, anchored at the least-late
    // request (what the network and the server's parse add to every request cancels).
    let late: Vec<i64> = (0..answered.len())
        .map(|k| answered[k] as i64 - want_ns(k) as i64)
        .collect();
    let anchor = *late.iter().min().unwrap();
    let errors_us: Vec<u64> = late.iter().map(|l| (l - anchor) as u64 / 1_000).collect();
    // The client's own send lag of the k-th scheduled request: on a loaded machine a send
    // can be late, but then the report must say so.
    let mut by_intent: Vec<_> = reqs.iter().collect();
    by_intent.sort_by_key(|r| r.intended_ns);
    let lag_us: Vec<u64> = by_intent
        .iter()
        .map(|r| (r.start_ns - r.intended_ns) / 1_000)
        .collect();
    let detail = format!("arrival errors {errors_us:?} us, client send lags {lag_us:?} us");
    assert!(stdout.contains("replay_sched_lag_p50"), "{stdout}");
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(outcomes[0].dir.join("profile_export_genai_perf.json")).unwrap(),
    )
    .unwrap();
    let p99_ms = summary["replay_sched_lag_p99"]["avg"].as_f64().unwrap();
    let max_lag_ms = *lag_us.iter().max().unwrap() as f64 / 1e3;
    assert!(
        (p99_ms - max_lag_ms).abs() < 0.01,
        "p99 of 8 is the largest lag: {p99_ms} vs {max_lag_ms}"
    );
    assert_eq!(summary["replay_sched_lag_p50"]["unit"], "ms");
    assert_eq!(summary["request_count"]["avg"], 8.0);
    let input = &summary["input_config"]["dataset"];
    assert_eq!(input["custom_dataset_type"], "mooncake_trace");
    assert_eq!(
        (
            input["fixed_schedule"].clone(),
            input["fixed_schedule_speedup"].clone()
        ),
        (Value::Bool(true), 2.0.into())
    );
    (errors_us, detail)
}

#[test]
fn a_trace_reaches_the_server_on_its_timestamps() {
    // The machine is shared: a run in which the scheduler delayed the client or the server
    // is tried again; one of three must keep every arrival within 1 ms.
    let mut seen = Vec::new();
    for attempt in 0..3 {
        let (errors_us, detail) = replay_once(attempt);
        // Eight requests: the p99 is the largest error.
        if errors_us.iter().all(|&e| e <= 1_000) {
            return;
        }
        seen.push(detail);
    }
    panic!("no replay kept every arrival within 1 ms of its timestamp: {seen:#?}");
}

#[test]
fn the_same_trace_runs_as_a_closed_loop() {
    let server = start_llm(0, 0, 1);
    let dir = temp_dir("dataset-closed");
    let trace = write_trace(&dir);
    let args = [
        "--input-file",
        trace.to_str().unwrap(),
        "--custom-dataset-type",
        "mooncake_trace",
        "--concurrency",
        "2",
        "--request-count",
        "12",
        "--dataset-sampling-strategy",
        "round_robin",
    ];
    let (outcomes, stdout) = profile(&server, &dir.join("out"), &args).unwrap();
    assert_eq!(outcomes[0].requests.len(), 12);
    assert_eq!(server.token_times().len(), 12);
    assert!(!stdout.contains("replay_sched_lag"), "no schedule, no lag");
    assert!(outcomes[0]
        .dir
        .ends_with("inferperf-llm-openai-chat-concurrency2"));
}

#[test]
fn a_bad_dataset_line_is_a_usage_error_naming_file_line_and_field() {
    let server = start_llm(0, 0, 1);
    let dir = temp_dir("dataset-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"text\": \"ok\"}\n{\"text\": \"x\", \"output_length\": \"ten\"}\n",
    )
    .unwrap();
    let args = [
        "--input-file",
        path.to_str().unwrap(),
        "--custom-dataset-type",
        "single_turn",
    ];
    let err = profile(&server, &dir.join("out"), &args).unwrap_err();
    assert_eq!(err.exit_code(), 99);
    assert!(
        err.msg.contains("bad.jsonl line 2: field 'output_length'"),
        "{}",
        err.msg
    );
    assert!(server.token_times().is_empty(), "nothing was sent");
}

/// Two conversations of three turns; every word is one cl100k token and one server word.
fn write_conversations(dir: &std::path::Path) -> std::path::PathBuf {
    let text = concat!(
        "{\"session_id\": \"a\", \"turns\": [",
        "{\"text\": \"one two three\", \"output_length\": 4},",
        "{\"text\": \"four five six\", \"output_length\": 4, \"delay\": 30},",
        "{\"text\": \"seven eight nine\", \"output_length\": 4, \"delay\": 30}]}\n",
        "{\"session_id\": \"b\", \"turns\": [",
        "{\"text\": \"red green blue\", \"output_length\": 4},",
        "{\"text\": \"cat dog cow\", \"output_length\": 4},",
        "{\"text\": \"sun moon star\", \"output_length\": 4}]}\n",
    );
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("conversations.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn later_turns_carry_the_history_and_wait_their_delay() {
    let server = start_llm(0, 0, 1);
    let dir = temp_dir("dataset-multi-turn");
    let file = write_conversations(&dir);
    let base = [
        "--input-file",
        file.to_str().unwrap(),
        "--custom-dataset-type",
        "multi_turn",
        "--concurrency",
        "1",
    ];
    // The server's usage counts every message it received: the history's words too.
    let args = [&base[..], &["--use-server-token-count"]].concat();
    let (outcomes, _) = profile(&server, &dir.join("server-counts"), &args).unwrap();
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), 6);
    assert!(reqs.iter().all(|r| r.ok()), "{:?}", reqs[0].error);
    let isl: Vec<u64> = reqs.iter().map(|r| r.isl).collect();
    assert_eq!(
        isl,
        vec![3, 10, 17, 3, 10, 17],
        "turn k carries turns 1..k-1 and replies"
    );
    assert!(reqs.iter().all(|r| r.osl == 4));
    // One slot: the server saw conversation a's turns first; turns 2 and 3 came at least
    // their 30 ms delay after the previous answer.
    let answered: Vec<u64> = server.token_times().iter().map(|t| t[0]).collect();
    assert_eq!(answered.len(), 6);
    assert!(answered[1] - answered[0] >= 30_000_000, "{answered:?}");
    assert!(answered[2] - answered[1] >= 30_000_000, "{answered:?}");
    // The client's own counts add the history the same way.
    let (outcomes, _) = profile(&server, &dir.join("client-counts"), &base).unwrap();
    let isl: Vec<u64> = outcomes[0].requests.iter().map(|r| r.isl).collect();
    assert_eq!(isl, vec![3, 10, 17, 3, 10, 17]);
    // Streamed answers: the reply carried into the history is the streamed text.
    let args = [&base[..], &["--streaming", "--use-server-token-count"]].concat();
    let (outcomes, _) = profile(&server, &dir.join("streamed"), &args).unwrap();
    let isl: Vec<u64> = outcomes[0].requests.iter().map(|r| r.isl).collect();
    assert_eq!(isl, vec![3, 10, 17, 3, 10, 17]);
}
