//! End-to-end `inferperf profile` against the in-process reference server's fake LLM: what
//! the report says must agree with what the server sent (token counts, chunk counts, its own
//! send times), and the artifacts must be complete and free of secrets.

use crate::common;

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use common::temp_dir;
use inferperf::llm::{self, PointOutcome};
use inferperf::server::{self, OpenAiConfig, ServeConfig, ServerHandle};
use serde_json::Value;

pub(crate) const MODEL: &str = "inferperf-llm";

pub(crate) fn start_llm(ttft_ms: u64, itl_ms: u64, per_chunk: u32) -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        grpc_addr: Some("127.0.0.1:0".parse().unwrap()),
        openai: OpenAiConfig {
            ttft: server::Delay::Fixed(Duration::from_millis(ttft_ms)),
            itl: server::Delay::Fixed(Duration::from_millis(itl_ms)),
            tokens_per_chunk: per_chunk,
            ..OpenAiConfig::default()
        },
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

/// Runs `profile` with `args` (plus -u and --artifact-dir); returns the outcomes and stdout.
pub(crate) fn profile(
    server: &ServerHandle,
    dir: &Path,
    args: &[&str],
) -> inferperf::error::Result<(Vec<PointOutcome>, String)> {
    let mut argv: Vec<OsString> = vec!["profile".into(), "-m".into(), MODEL.into()];
    argv.extend(["-u".into(), server.addr.to_string().into()]);
    argv.extend(["--artifact-dir".into(), dir.as_os_str().to_owned()]);
    argv.extend(["--quiet".into(), "--tokenizer".into(), "cl100k_base".into()]);
    argv.extend(args.iter().map(OsString::from));
    let cfg = llm::cli::parse(argv)?.expect("a run, not help");
    let mut out = Vec::new();
    let outcomes = llm::run(&cfg, &mut out)?;
    Ok((outcomes, String::from_utf8(out).unwrap()))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn streamed_chat_counts_match_the_server() {
    let server = start_llm(20, 2, 1);
    let dir = temp_dir("profile-chat");
    let args = [
        "--streaming",
        "--concurrency",
        "4",
        "--request-count",
        "24",
        "--synthetic-input-tokens-mean",
        "64",
        "--output-tokens-mean",
        "8",
        "--generate-plots",
        "-H",
        "Authorization: Bearer SECRET-KEY-123",
        "--goodput",
        "time_to_first_token:10000",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    assert_eq!(outcomes.len(), 1);
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), 24);
    for r in reqs {
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.isl, 64, "synthetic prompts have the exact length");
        assert_eq!(r.osl, 8, "every fake-vocabulary word is one cl100k token");
        assert_eq!(r.chunks.len(), 8);
        assert_eq!(r.requested_osl, Some(8));
        // The server cannot answer before its TTFT.
        assert!(r.chunks[0].arrival_ns - r.start_ns >= 20_000_000);
    }
    let sent: Vec<Vec<u64>> = server.token_times();
    assert_eq!(sent.len(), 24, "the server saw every request once");
    assert!(sent.iter().all(|t| t.len() == 8));
    for needle in [
        "Time To First Token (ms)",
        "Request Count (count)",
        "24.00",
        "Request Goodput",
    ] {
        assert!(stdout.contains(needle), "{needle}:\n{stdout}");
    }
    let run_dir = &outcomes[0].dir;
    assert!(run_dir.ends_with("inferperf-llm-openai-chat-concurrency4"));
    let summary = read_json(&run_dir.join("profile_export_genai_perf.json"));
    assert_eq!(summary["output_sequence_length"]["avg"], 8.0);
    assert_eq!(
        summary["request_goodput"]["avg"],
        summary["request_throughput"]["avg"]
    );
    check_sse_export(run_dir);
    check_artifacts(run_dir);
    // `--artifact-dir` typed: AIPerf's files straight in it, GenAI-Perf's in the level's folder.
    assert_eq!(outcomes[0].aiperf_dir, dir);
    no_secret_in(&dir);
    let lines = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 24);
    assert!(!run_dir.join("profile_export.jsonl").exists());
    assert!(!run_dir.join("profile_export_aiperf.json").exists());
    server.stop();
}

/// The profile export of the streamed chat run: 24 requests, the first one's SSE events
/// each with its own read time and as the server sent it.
fn check_sse_export(run_dir: &Path) {
    let export = read_json(&run_dir.join("profile_export.json"));
    let requests = export["experiments"][0]["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 24);
    // Role chunk + 8 content chunks + [DONE], each with its own read time.
    assert_eq!(
        requests[0]["response_timestamps"].as_array().unwrap().len(),
        10
    );
    // Each event as the server sent it (perf_analyzer's bytes, which GenAI-Perf's parser
    // needs): `data: <chunk>` and its blank line; the last is `data: [DONE]`.
    let outs = requests[0]["response_outputs"].as_array().unwrap();
    assert_eq!(outs.len(), 10);
    assert_eq!(outs[9]["response"], "data: [DONE]\n\n");
    for o in &outs[..9] {
        let event = o["response"].as_str().unwrap();
        let data = event
            .strip_prefix("data: ")
            .and_then(|e| e.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("not an SSE event: {event:?}"));
        let chunk: Value = serde_json::from_str(data).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk");
    }
}

/// No artifact holds the API key, and the plots are all there.
fn check_artifacts(run_dir: &Path) {
    no_secret_in(run_dir);
    let plots: Vec<_> = std::fs::read_dir(run_dir.join("plots")).unwrap().collect();
    assert_eq!(plots.len(), 10, "five plots, PNG and SVG each");
}

/// No file directly in `dir` holds the API key.
fn no_secret_in(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let text = std::fs::read(&path).unwrap();
            let hit = text.windows(10).any(|w| w == b"SECRET-KEY");
            assert!(!hit, "{} leaks the API key", path.display());
        }
    }
}

#[test]
fn server_token_counts_and_multi_token_chunks() {
    let server = start_llm(5, 1, 3);
    let dir = temp_dir("profile-usage");
    let args = [
        "--streaming",
        "--endpoint-type",
        "completions",
        "--use-server-token-count",
        "--request-count",
        "6",
        "--output-tokens-mean",
        "10",
        "--synthetic-input-tokens-mean",
        "16",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    for r in &outcomes[0].requests {
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.osl, 10, "usage.completion_tokens");
        let per_chunk: Vec<u64> = r.chunks.iter().map(|c| c.tokens).collect();
        assert_eq!(per_chunk, vec![3, 3, 3, 1]);
        assert!(r.usage.is_some());
    }
    server.stop();
}

#[test]
fn whole_answers_embeddings_and_triton_generate() {
    let server = start_llm(2, 1, 1);
    let dir = temp_dir("profile-kinds");
    let whole = ["--request-count", "5", "--output-tokens-mean", "4"];
    let (o, stdout) = profile(&server, &dir, &whole).unwrap();
    assert!(o[0]
        .requests
        .iter()
        .all(|r| r.ok() && r.osl == 4 && r.chunks.len() == 1));
    assert!(
        !stdout.contains("Time To First Token"),
        "no TTFT without streaming"
    );
    let emb = ["--endpoint-type", "embeddings", "--request-count", "5"];
    let (o, stdout) = profile(&server, &dir, &emb).unwrap();
    assert!(o[0].requests.iter().all(|r| r.ok() && r.chunks.is_empty()));
    assert!(stdout.contains("Request Latency"));
    let generate = [
        "--endpoint-type",
        "generate",
        "--streaming",
        "--request-count",
        "5",
        "--output-tokens-mean",
        "6",
    ];
    let (o, _) = profile(&server, &dir, &generate).unwrap();
    for r in &o[0].requests {
        assert!(
            r.ok(),
            "a generate stream ends without [DONE]: {:?}",
            r.error
        );
        assert_eq!((r.osl, r.chunks.len()), (6, 6));
    }
    server.stop();
}

#[test]
fn errors_are_counted_and_a_run_of_only_errors_fails() {
    let server = start_llm(1, 1, 1);
    let dir = temp_dir("profile-errors");
    let file = dir.join("prompts.jsonl");
    let lines = [
        r#"{"text_input": "fine prompt", "output_length": 3}"#,
        r#"{"payload": {"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}}"#,
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let file_arg = file.to_str().unwrap();
    let args = [
        "--input-file",
        file_arg,
        "--request-count",
        "10",
        "--streaming",
    ];
    let (o, stdout) = profile(&server, &dir, &args).unwrap();
    let failed: Vec<_> = o[0].requests.iter().filter(|r| !r.ok()).collect();
    assert_eq!((o[0].requests.len(), failed.len()), (10, 5));
    assert!(failed
        .iter()
        .all(|r| r.error.as_ref().unwrap().kind == "http_error"));
    assert!(stdout.contains("http_error"), "{stdout}");
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, lines[1]).unwrap();
    let args = [
        "--input-file",
        bad.to_str().unwrap(),
        "--request-count",
        "3",
    ];
    let e = profile(&server, &dir, &args).unwrap_err();
    assert!(
        e.msg.starts_with("all 3 requests failed: HTTP 404") && e.msg.contains("no-such-model"),
        "{}",
        e.msg
    );
    server.stop();
}

#[test]
fn open_loop_reports_latency_from_the_intended_send_time() {
    let server = start_llm(2, 1, 1);
    let dir = temp_dir("profile-rate");
    let args = [
        "--streaming",
        "--request-rate",
        "200",
        "--request-count",
        "20",
        "--output-tokens-mean",
        "3",
    ];
    let (o, stdout) = profile(&server, &dir, &args).unwrap();
    assert!(o[0]
        .requests
        .iter()
        .all(|r| r.intended_ns > 0 && r.start_ns >= r.intended_ns));
    assert!(o[0]
        .dir
        .ends_with("inferperf-llm-openai-chat-request_rate200.0"));
    assert!(stdout.to_lowercase().contains("intended"), "{stdout}");
    server.stop();
}

#[test]
fn summary_files_are_named_after_the_profile_export_file() {
    let server = start_llm(0, 0, 1);
    let dir = temp_dir("profile-names");
    let args = [
        "--streaming",
        "--request-count",
        "3",
        "--output-tokens-mean",
        "2",
        "--profile-export-file",
        "my.json",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    let run_dir = &outcomes[0].dir;
    let names = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // GenAI-Perf's rule: `<stem>_genai_perf.json` and `.csv` beside the raw export.
    assert_eq!(
        names(run_dir),
        [
            "inputs.json",
            "my.json",
            "my_genai_perf.csv",
            "my_genai_perf.json",
            "report.html",
        ]
    );
    // AIPerf's, straight in the typed `--artifact-dir`, the records renamed after the export.
    let level = run_dir.file_name().unwrap().to_string_lossy().into_owned();
    let mut want = vec![
        ".aiperf_results_ready.json",
        "inputs.json",
        level.as_str(),
        "logs",
        "my.jsonl",
        "profile_export_aiperf.csv",
        "profile_export_aiperf.json",
        "profile_export_console.txt",
    ];
    want.sort_unstable();
    assert_eq!(names(&dir), want);
    let summary = read_json(&run_dir.join("my_genai_perf.json"));
    assert_eq!(summary["request_count"]["avg"], 3.0);
    let raw = read_json(&run_dir.join("my.json"));
    assert_eq!(
        raw["experiments"][0]["requests"].as_array().unwrap().len(),
        3
    );
    // A path is refused, as GenAI-Perf refuses it: the directory is --artifact-dir's.
    let err = profile(&server, &dir, &["--profile-export-file", "sub/my.json"]).unwrap_err();
    assert!(err.to_string().contains("--profile-export-file"), "{err}");
    server.stop();
}

#[test]
fn binary_profile_and_compare() {
    let server = start_llm(1, 1, 1);
    let dir = temp_dir("profile-bin");
    let bin = env!("CARGO_BIN_EXE_inferperf");
    let addr = server.addr.to_string();
    let art = dir.to_str().unwrap();
    let out = std::process::Command::new(bin)
        .args([
            "profile",
            "-m",
            MODEL,
            "-u",
            &addr,
            "--streaming",
            "--quiet",
        ])
        .args([
            "--concurrency",
            "1,2",
            "--request-count",
            "4",
            "--artifact-dir",
            art,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<String> = ["concurrency1", "concurrency2"]
        .iter()
        .map(|c| format!("{art}/inferperf-llm-openai-chat-{c}"))
        .collect();
    let cmp = dir.join("cmp");
    let out = std::process::Command::new(bin)
        .arg("compare")
        .args(&runs)
        .args(["--output-dir", cmp.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("concurrency1") && stdout.contains("concurrency2"),
        "{stdout}"
    );
    assert!(cmp.join("time_to_first_token.png").exists());
    let help = std::process::Command::new(bin)
        .args(["profile", "--help-metrics"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success() && text.contains("time_to_first_token"),
        "{text}"
    );
    let bad = std::process::Command::new(bin)
        .args(["profile", "-m", MODEL, "--concurrency", "0"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(99));
    server.stop();
}

#[test]
fn warmup_is_not_measured_and_duration_bounds_the_run() {
    let server = start_llm(1, 1, 1);
    let dir = temp_dir("profile-duration");
    let args = [
        "--streaming",
        "--warmup-request-count",
        "7",
        "--benchmark-duration",
        "0.5",
        "--concurrency",
        "2",
        "--output-tokens-mean",
        "4",
    ];
    let (o, _) = profile(&server, &dir, &args).unwrap();
    let measured = o[0].requests.len();
    let served = server.token_times().len();
    assert!(measured > 0);
    assert_eq!(
        served,
        measured + 7,
        "warm-up requests reach the server, not the report"
    );
    assert!(
        o[0].requests.iter().all(|r| r.ok()),
        "in-flight requests finish after the stop"
    );
    server.stop();
}

#[test]
fn ctrl_c_still_writes_what_was_measured() {
    let server = start_llm(5, 5, 1);
    let dir = temp_dir("profile-sigint");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args([
            "profile",
            "-m",
            MODEL,
            "-u",
            &server.addr.to_string(),
            "--streaming",
        ])
        .args([
            "--concurrency",
            "2",
            "--benchmark-duration",
            "60",
            "--output-tokens-mean",
            "4",
        ])
        .args([
            "--quiet",
            "--tokenizer",
            "cl100k_base",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once the server has seen 16 requests (start-up time varies with load), so that
    // more than 10 are answered and measured besides the 2 the signal finds in flight.
    let waited = std::time::Instant::now();
    while server.counters().http_requests < 16 && waited.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending a signal to a child process this test spawned.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("inferperf-llm-openai-chat-concurrency2").is_dir());
    let lines = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    assert!(lines.lines().count() > 10, "{lines}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Request Count"));
    server.stop();
}
