//! End-to-end `--session-concurrency`: multi-turn conversations against the in-process
//! reference server, whose chat endpoint counts the words of every message as prompt tokens,
//! so the server's own `usage.prompt_tokens` shows the history each turn carried.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use inferperf::config::{Config, InputData, ServiceKind};
use inferperf::server::{self, OpenAiConfig, ServeConfig, ServerHandle};
use serde_json::{json, Value};

const MODEL: &str = "inferperf-llm";
/// Tokens (= whitespace words) of every reply.
const REPLY_TOKENS: u64 = 4;

fn start_llm(ttft_ms: u64) -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        openai: OpenAiConfig {
            ttft: server::Delay::Fixed(Duration::from_millis(ttft_ms)),
            ..OpenAiConfig::default()
        },
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

/// The user message of session `s`, turn `t`: `t + 2` words, the first naming the session.
fn user_words(s: usize, t: usize) -> String {
    let mut words = vec![format!("s{s}")];
    words.extend((0..=t).map(|k| format!("w{k}")));
    words.join(" ")
}

/// One data entry; `delay` is left out when `None`.
fn entry(s: usize, t: usize, stream: bool, delay: Option<u64>) -> Value {
    let mut payload = json!({"model": MODEL, "max_tokens": REPLY_TOKENS,
        "messages": [{"role": "user", "content": user_words(s, t)}]});
    if stream {
        payload["stream"] = json!(true);
        payload["stream_options"] = json!({"include_usage": true});
    }
    let mut e = json!({"payload": [payload], "session_id": format!("sess-{s}")});
    if let Some(ms) = delay {
        e["delay"] = json!([ms]);
    }
    e
}

/// A session run over `entries` with `n` sessions at a time.
fn session_config(server: &ServerHandle, dir: &Path, entries: &[Value], n: u64) -> Config {
    let data = dir.join("sessions.json");
    std::fs::write(&data, json!({ "data": entries }).to_string()).unwrap();
    let mut cfg = quick_config(server, MODEL, 1);
    cfg.service_kind = ServiceKind::OpenAi;
    cfg.endpoint = "v1/chat/completions".into();
    cfg.async_mode = true;
    cfg.input_data = InputData::Files(vec![data]);
    cfg.session_concurrency = n;
    cfg.profile_export_file = Some(dir.join("export.json"));
    cfg
}

fn run_with(cfg: &Config, stop: Arc<AtomicBool>) -> (inferperf::run::RunResult, String) {
    let mut out = Vec::new();
    let res = inferperf::run::run(cfg, &mut out, stop).expect("run returns");
    (res, String::from_utf8(out).unwrap())
}

fn run_sessions(cfg: &Config) -> (inferperf::run::RunResult, String) {
    run_with(cfg, Arc::new(AtomicBool::new(false)))
}

fn export(cfg: &Config) -> Value {
    let path = cfg.profile_export_file.as_ref().unwrap();
    serde_json::from_slice(&std::fs::read(path).unwrap()).expect("export is JSON")
}

/// The messages a request sent.
fn sent_messages(request: &Value) -> Vec<Value> {
    let body: Value =
        serde_json::from_str(request["request_inputs"]["payload"].as_str().unwrap()).unwrap();
    body["messages"].as_array().unwrap().clone()
}

/// Each exported response's JSON: the export keeps an event's SSE bytes (`data: {...}` and
/// its blank line), as perf_analyzer does; `[DONE]` and anything else that is not JSON are
/// `Null`.
fn outputs(request: &Value) -> Vec<Value> {
    request["response_outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let raw = o["response"].as_str().unwrap();
            let json = raw.trim().strip_prefix("data:").unwrap_or(raw).trim();
            serde_json::from_str(json).unwrap_or(Value::Null)
        })
        .collect()
}

/// The server's `usage.prompt_tokens` for a request (from whichever response carries it).
fn prompt_tokens(request: &Value) -> u64 {
    outputs(request)
        .iter()
        .find_map(|o| o["usage"]["prompt_tokens"].as_u64())
        .expect("a response with usage")
}

/// Requests by (session, turn), read from what each one sent.
fn by_turn(doc: &Value) -> Vec<((usize, usize), Value)> {
    let mut out: Vec<((usize, usize), Value)> = doc["experiments"][0]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let messages = sent_messages(r);
            let first = messages[0]["content"].as_str().unwrap();
            let s: usize = first.split(' ').next().unwrap()[1..].parse().unwrap();
            ((s, messages.len() / 2), r.clone())
        })
        .collect();
    out.sort_by_key(|(k, _)| *k);
    out
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

fn check_history(doc: &Value, sessions: usize, turns: usize) {
    let all = by_turn(doc);
    assert_eq!(all.len(), sessions * turns);
    for ((s, t), request) in &all {
        let messages = sent_messages(request);
        assert_eq!(messages.len(), 2 * t + 1, "session {s} turn {t}");
        let mut want_prompt = 0;
        for (k, m) in messages.iter().enumerate() {
            let content = m["content"].as_str().unwrap();
            if k % 2 == 0 {
                assert_eq!(m["role"], "user");
                assert_eq!(content, user_words(*s, k / 2));
            } else {
                assert_eq!(m["role"], "assistant");
                assert_eq!(words(content), REPLY_TOKENS, "the whole reply: {content:?}");
            }
            want_prompt += words(content);
        }
        assert_eq!(prompt_tokens(request), want_prompt, "session {s} turn {t}");
    }
    // The history makes every turn's prompt longer than the one before.
    for pair in all.windows(2) {
        let ((s0, _), a) = &pair[0];
        let ((s1, _), b) = &pair[1];
        if s0 == s1 {
            assert!(prompt_tokens(b) > prompt_tokens(a) + REPLY_TOKENS);
        }
    }
}

fn check_export_shape(doc: &Value) {
    assert_eq!(doc["service_kind"], "openai");
    assert_eq!(doc["endpoint"], "v1/chat/completions");
    let exps = doc["experiments"].as_array().unwrap();
    assert_eq!(exps.len(), 1);
    assert_eq!(
        exps[0]["experiment"],
        json!({"mode": "request_rate", "value": 0.0})
    );
    assert_eq!(
        exps[0]["window_boundaries"],
        json!([0u64, 18446744073709551615u64])
    );
    assert!(doc.get("seed").is_none());
}

#[test]
fn whole_answers_carry_the_history_and_the_prompt_grows() {
    let server = start_llm(0);
    let dir = temp_dir("sessions-whole");
    let entries: Vec<Value> = (0..3)
        .flat_map(|t| (0..3).map(move |s| entry(s, t, false, None)))
        .collect();
    let cfg = session_config(&server, &dir, &entries, 2);
    let (res, text) = run_sessions(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(res.points.is_empty());
    assert_eq!(
        text,
        "Session concurrency 2: 3 of 3 sessions completed, 9 of 9 turns sent, 0 errors\n"
    );
    let doc = export(&cfg);
    check_export_shape(&doc);
    check_history(&doc, 3, 3);
    for (_, r) in by_turn(&doc) {
        let stamps = r["response_timestamps"].as_array().unwrap();
        assert_eq!(stamps.len(), 1, "one whole answer");
        assert!(stamps[0].as_u64().unwrap() >= r["timestamp"].as_u64().unwrap());
    }
}

#[test]
fn streamed_replies_are_joined_from_their_deltas() {
    let server = start_llm(2);
    let dir = temp_dir("sessions-stream");
    let entries: Vec<Value> = (0..2)
        .flat_map(|s| (0..3).map(move |t| entry(s, t, true, Some(1))))
        .collect();
    let cfg = session_config(&server, &dir, &entries, 2);
    let (res, _) = run_sessions(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let doc = export(&cfg);
    check_export_shape(&doc);
    check_history(&doc, 2, 3);
    for (_, r) in by_turn(&doc) {
        let stamps: Vec<u64> = r["response_timestamps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap())
            .collect();
        // One response per event: the role chunk, the content chunks, the usage chunk and
        // the null [DONE].
        assert_eq!(stamps.len() as u64, REPLY_TOKENS + 3, "{r}");
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]));
        let first_token = stamps[1];
        assert!(
            first_token >= r["timestamp"].as_u64().unwrap() + 2_000_000,
            "ttft"
        );
        let last = r["response_outputs"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        // The [DONE] event's bytes, as perf_analyzer exports them.
        assert_eq!(last, json!({"response": "data: [DONE]\n\n"}));
    }
}

#[test]
fn turn_delays_are_waited_before_the_next_turn() {
    let server = start_llm(0);
    let dir = temp_dir("sessions-delay");
    let entries = vec![
        entry(0, 0, false, Some(150)),
        entry(1, 0, false, Some(60)),
        entry(0, 1, false, Some(80)),
        entry(1, 1, false, None),
        entry(0, 2, false, None),
    ];
    let cfg = session_config(&server, &dir, &entries, 2);
    let (res, _) = run_sessions(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let all = by_turn(&export(&cfg));
    let delays = [[150u64, 80], [60, 0]];
    for pair in all.windows(2) {
        let ((s0, t0), a) = &pair[0];
        let ((s1, t1), b) = &pair[1];
        if s0 != s1 {
            continue;
        }
        assert_eq!(t0 + 1, *t1);
        let answered = a["response_timestamps"][0].as_u64().unwrap();
        let next_sent = b["timestamp"].as_u64().unwrap();
        let want_ms = delays[*s0][*t0];
        assert!(
            next_sent >= answered + want_ms * 1_000_000,
            "session {s0} turn {t1} went {} ms after the answer, before {want_ms} ms",
            (next_sent.saturating_sub(answered)) / 1_000_000
        );
    }
}

#[test]
fn data_errors_are_usage_errors_before_any_request() {
    let server = start_llm(0);
    let dir = temp_dir("sessions-errors");
    let two = vec![entry(0, 0, false, None), entry(1, 0, false, None)];
    let mut no_id = entry(0, 0, false, None);
    no_id.as_object_mut().unwrap().remove("session_id");
    let mut bad_delay = entry(0, 0, false, None);
    bad_delay["delay"] = json!(["soon"]);
    let cases: Vec<(Vec<Value>, u64, &str)> = vec![
        (
            two,
            3,
            "--session-concurrency 3: the input data has only 2 unique session(s)",
        ),
        (vec![no_id], 1, "missing tensor session_id"),
        (
            vec![bad_delay],
            1,
            "tensor delay must hold one non-negative integer",
        ),
    ];
    for (entries, n, want) in cases {
        let cfg = session_config(&server, &dir, &entries, n);
        let mut out = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let err = match inferperf::run::run(&cfg, &mut out, stop) {
            Err(e) => e,
            Ok(_) => panic!("{want}: the run went ahead"),
        };
        assert_eq!(err.exit_code(), 99, "{err}");
        assert!(err.msg.contains(want), "{} lacks {want}", err.msg);
        assert!(!cfg.profile_export_file.as_ref().unwrap().exists());
    }
}

#[test]
fn a_server_that_dies_fails_the_turn_and_the_export_is_still_written() {
    let server = start_llm(0);
    let dir = temp_dir("sessions-dies");
    let entries = vec![
        entry(0, 0, false, Some(400)),
        entry(0, 1, false, None),
        entry(0, 2, false, None),
    ];
    let cfg = session_config(&server, &dir, &entries, 1);
    // Stops the server once it has answered the first turn, during the 400 ms pause.
    let killer = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.token_times().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        server.stop();
    });
    let (res, text) = run_sessions(&cfg);
    killer.join().unwrap();
    let err = res.error.expect("the failed turn is the run's error");
    assert_eq!(err.exit_code(), 99);
    assert!(
        err.msg.starts_with("1 of 2 turns failed; the first: "),
        "{}",
        err.msg
    );
    assert!(
        text.contains("0 of 1 sessions completed, 2 of 3 turns sent, 1 errors"),
        "{text}"
    );
    let doc = export(&cfg);
    assert_eq!(by_turn(&doc).len(), 1, "the answered turn is exported");
}

#[test]
fn a_stop_request_ends_the_run_early_with_an_export() {
    let server = start_llm(0);
    let dir = temp_dir("sessions-stop");
    let entries: Vec<Value> = (0..3)
        .flat_map(|s| (0..2).map(move |t| entry(s, t, false, Some(5_000))))
        .collect();
    let cfg = session_config(&server, &dir, &entries, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        flag.store(true, Ordering::SeqCst);
    });
    let started = Instant::now();
    let (res, text) = run_with(&cfg, stop);
    stopper.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the 5 s delay was cut short"
    );
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(
        text.contains("(interrupted; 2 sessions not started)"),
        "{text}"
    );
    assert_eq!(by_turn(&export(&cfg)).len(), 1);
}
