//! AIPerf's load flags of `inferperf profile` against the in-process reference server (or a
//! stand-in rankings server): the arrival pattern (and its gamma shape), GenAI-Perf's
//! rankings folder, the failed-request threshold, the grace period after a duration, the
//! request-rate series and the prefill cap. Each test checks what the
//! server received (counts, the spread of the gaps between arrivals) and what the summary
//! says; spreads are compared as coefficients of variation, never as wall-clock limits.

use crate::common;
use crate::run_profile::{profile, start_llm};

use std::path::Path;
use std::process::Command;

use common::temp_dir;
use serde_json::Value;

fn summary(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("profile_export_genai_perf.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The coefficient of variation of the gaps between the times the server answered each
/// request (its first token: no delay, so the arrival).
fn arrival_cv(server: &inferperf::server::ServerHandle) -> (usize, f64) {
    let mut first: Vec<u64> = server.token_times().iter().map(|t| t[0]).collect();
    first.sort_unstable();
    let gaps: Vec<f64> = first.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (first.len(), var.sqrt() / mean)
}

#[test]
fn arrival_patterns_space_the_requests_the_server_receives() {
    // 300 requests at 150/s: constant gaps (spread near 0), Poisson (near 1), gamma of
    // shape 0.25 (vLLM's burstiness; near 2). The shared machine can stall the client or
    // the server's one thread and bunch arrivals: a run that misses is tried again, up to
    // three times.
    let mut misses = Vec::new();
    for attempt in 0..3 {
        match arrival_spreads(attempt) {
            Ok(()) => return,
            Err(why) => misses.push(why),
        }
    }
    panic!("arrival spreads missed in three runs: {misses:#?}");
}

/// One run of each arrival pattern; `Err` names the spread that missed.
fn arrival_spreads(attempt: usize) -> Result<(), String> {
    let mut cvs = Vec::new();
    for (tag, extra) in [
        ("constant", &[][..]),
        ("poisson", &["--arrival-pattern", "poisson"][..]),
        (
            "gamma",
            &["--request-rate-mode", "gamma", "--vllm-burstiness", "0.25"][..],
        ),
    ] {
        let server = start_llm(0, 0, 1);
        let dir = temp_dir(&format!("profile-arrival-{tag}-{attempt}"));
        let mut args = vec![
            "--request-rate",
            "150",
            "--request-count",
            "300",
            "--osl",
            "1",
        ];
        args.extend_from_slice(extra);
        args.extend(["--random-seed", "5"]);
        let (outcomes, _) = profile(&server, &dir, &args).unwrap();
        let (n, cv) = arrival_cv(&server);
        assert_eq!(n, 300, "{tag}: the server saw every request");
        assert_eq!(outcomes[0].requests.len(), 300);
        let config = &summary(&outcomes[0].dir)["input_config"];
        assert_eq!(config["arrival_pattern"], tag, "{config}");
        cvs.push((tag, cv, config["arrival_smoothness"].clone()));
        server.stop();
    }
    eprintln!("arrival spreads: {cvs:?}");
    let [(_, constant, _), (_, poisson, _), (_, gamma, shape)] = &cvs[..] else {
        unreachable!()
    };
    assert_eq!(*shape, 0.25);
    if *constant >= 0.4 {
        return Err(format!("constant arrivals: cv {constant}"));
    }
    if !(0.7..1.35).contains(poisson) {
        return Err(format!("poisson arrivals: cv {poisson}"));
    }
    if *gamma <= 1.5 {
        return Err(format!(
            "gamma 0.25 arrivals: cv {gamma} (poisson {poisson})"
        ));
    }
    Ok(())
}

/// Runs the built binary's `profile` with `args`; returns (exit code, stderr).
fn run_binary(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .arg("profile")
        .args(["-m", "m", "-u", "127.0.0.1:9", "--quiet"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_load_flag_values_are_one_line_usage_errors() {
    let dir = temp_dir("profile-load-flags-bad");
    let series = dir.join("series.json");
    std::fs::write(&series, r#"[{"time_s": 0, "qps": 1}]"#).unwrap();
    let series = series.to_str().unwrap();
    for (args, flag) in [
        (
            &["--request-rate", "5", "--arrival-pattern", "bursty"][..],
            "--arrival-pattern",
        ),
        (
            &["--request-rate", "5", "--arrival-smoothness", "0"][..],
            "--arrival-smoothness",
        ),
        (
            &["--request-rate", "5", "--vllm-burstiness", "-1"][..],
            "--arrival-smoothness",
        ),
        (
            &["--concurrency", "2", "--arrival-pattern", "poisson"][..],
            "--arrival-pattern",
        ),
        (
            &[
                "--request-rate",
                "5",
                "--request-distribution",
                "constant",
                "--arrival-pattern",
                "poisson",
            ][..],
            "--arrival-pattern",
        ),
        (
            &[
                "--benchmark-duration",
                "1",
                "--benchmark-grace-period",
                "-2",
            ][..],
            "--benchmark-grace-period",
        ),
        (
            &["--benchmark-grace-period", "2"][..],
            "--benchmark-grace-period",
        ),
        (
            &["--failed-request-threshold", "2"][..],
            "--failed-request-threshold",
        ),
        (
            &["--streaming", "--prefill-concurrency", "0"][..],
            "--prefill-concurrency",
        ),
        (
            &["--streaming", "--prefill-concurrency", "1.5"][..],
            "--prefill-concurrency",
        ),
        // The first token is seen only in a stream.
        (
            &["--concurrency", "4", "--prefill-concurrency", "2"][..],
            "--prefill-concurrency",
        ),
        // More than a point of the sweep holds in flight.
        (
            &[
                "--streaming",
                "--concurrency",
                "4,1",
                "--prefill-concurrency",
                "2",
            ][..],
            "--prefill-concurrency 2 cannot be greater than --concurrency 1",
        ),
        (
            &[
                "--streaming",
                "--request-rate",
                "5",
                "--max-inflight",
                "1",
                "--prefill-concurrency",
                "2",
            ][..],
            "--prefill-concurrency 2 cannot be greater than --max-inflight 1",
        ),
        (
            &[
                "--streaming",
                "--endpoint-type",
                "kserve",
                "--prefill-concurrency",
                "1",
            ][..],
            "--prefill-concurrency",
        ),
        (
            &[
                "--endpoint-type",
                "embeddings",
                "--prefill-concurrency",
                "1",
            ][..],
            "--prefill-concurrency",
        ),
        (
            &["--request-rate-series", series][..],
            "--request-rate-series",
        ),
        (
            &["--request-rate-series", "/nonexistent/s.json"][..],
            "--request-rate-series",
        ),
    ] {
        let (code, stderr) = run_binary(args);
        assert_eq!(code, 99, "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: profile: ") && stderr.contains(flag),
            "{args:?}: {stderr}"
        );
    }
}

/// A stand-in rankings server on a loopback port: answers every POST with a ranking (or,
/// with `fail_every` n > 0, every n-th with a 500) and keeps the bodies it received.
pub(crate) struct Ranker {
    pub(crate) addr: std::net::SocketAddr,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl Ranker {
    pub(crate) fn start(fail_every: usize) -> Ranker {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    let mut reader = BufReader::new(stream);
                    loop {
                        let mut len = 0usize;
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        loop {
                            let mut h = String::new();
                            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            if h == "\r\n" {
                                break;
                            }
                            let lower = h.to_ascii_lowercase();
                            if let Some(v) = lower.strip_prefix("content-length:") {
                                len = v.trim().parse().unwrap();
                            }
                        }
                        let mut body = vec![0; len];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        let n = {
                            let mut b = kept.lock().unwrap();
                            b.push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                            b.len()
                        };
                        let (status, reply) = if fail_every > 0 && n % fail_every == 0 {
                            ("500 Internal Server Error", r#"{"error":"boom"}"#)
                        } else {
                            ("200 OK", r#"{"rankings":[{"index":0,"logit":0.5}]}"#)
                        };
                        let head = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                             Content-Length: {}\r\n\r\n",
                            reply.len()
                        );
                        if writer
                            .write_all(format!("{head}{reply}").as_bytes())
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        Ranker { addr, bodies }
    }

    pub(crate) fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

/// `profile -m MODEL -u ADDR --artifact-dir DIR --quiet ARGS` through the library.
fn profile_at(
    addr: std::net::SocketAddr,
    dir: &Path,
    args: &[&str],
) -> inferperf::error::Result<Vec<inferperf::llm::PointOutcome>> {
    let mut argv: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "ranker".into()];
    argv.extend(["-u".into(), addr.to_string().into()]);
    argv.extend(["--artifact-dir".into(), dir.as_os_str().to_owned()]);
    argv.extend(["--quiet".into(), "--tokenizer".into(), "cl100k_base".into()]);
    argv.extend(args.iter().map(std::ffi::OsString::from));
    let cfg = inferperf::llm::cli::parse(argv)?.expect("a run, not help");
    inferperf::llm::run(&cfg, &mut Vec::new())
}

/// GenAI-Perf's rankings folder: three queries, two passages (the shorter file sets the
/// count).
fn rankings_folder(tag: &str) -> std::path::PathBuf {
    let dir = temp_dir(tag).join("rankings");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("queries.jsonl"),
        "{\"text\": \"What is a GPU?\"}\n{\"text\": \"Why batch?\"}\n\n{\"text\": \"unused\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("passages.jsonl"),
        "{\"text\": \"A GPU runs many threads.\"}\n{\"text_input\": \"Batching fills it.\"}\n",
    )
    .unwrap();
    dir
}

/// `--endpoint-type rankings --input-file FOLDER` followed by `rest`.
fn rankings_args<'a>(folder: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--endpoint-type", "rankings", "--input-file", folder];
    args.extend_from_slice(rest);
    args
}

#[test]
fn a_rankings_folder_sends_genai_perfs_rankings_bodies() {
    let server = Ranker::start(0);
    let folder = rankings_folder("profile-rankings-folder");
    let out = temp_dir("profile-rankings-out");
    let input = folder.to_str().unwrap();
    let base = rankings_args(input, &["--request-count", "4"]);
    let outcomes = profile_at(server.addr, &out, &base).unwrap();
    assert_eq!(outcomes[0].requests.len(), 4);
    assert!(outcomes[0].requests.iter().all(|r| r.ok()));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 4);
    let first = serde_json::json!({
        "model": "ranker",
        "query": {"text": "What is a GPU?"},
        "passages": [{"text": "A GPU runs many threads."}],
    });
    let second = serde_json::json!({
        "model": "ranker",
        "query": {"text": "Why batch?"},
        "passages": [{"text": "Batching fills it."}],
    });
    assert_eq!(bodies, [first.clone(), second.clone(), first, second]);
    // Hugging Face TEI bodies, extra inputs added, two passages per request.
    let tei = [
        "--extra-inputs",
        "rankings:tei",
        "--extra-inputs",
        "truncate:true",
        "-b",
        "2",
    ];
    let args: Vec<&str> = base.iter().chain(tei.iter()).copied().collect();
    profile_at(server.addr, &out, &args).unwrap();
    let bodies = server.bodies();
    assert_eq!(
        bodies[4],
        serde_json::json!({
            "query": "What is a GPU?",
            "texts": ["A GPU runs many threads.", "Batching fills it."],
            "truncate": true,
        })
    );
    // A folder for another endpoint type, or without its files, is a usage error.
    let err = profile_at(server.addr, &out, &["--input-file", input]).unwrap_err();
    assert_eq!(err.exit_code(), 99);
    assert!(err.msg.contains("--endpoint-type rankings"), "{}", err.msg);
    std::fs::remove_file(folder.join("passages.jsonl")).unwrap();
    let err = profile_at(server.addr, &out, &base).unwrap_err();
    assert_eq!(err.exit_code(), 99);
    assert!(err.msg.contains("passages.jsonl"), "{}", err.msg);
}

#[test]
fn the_failed_request_threshold_stops_a_failing_run() {
    // Every second request fails. At 50/s, 100 requests take 2 s; the threshold is checked
    // from the 10th finished request on, so the run stops long before the end.
    let folder = rankings_folder("profile-threshold-folder");
    let input = folder.to_str().unwrap();
    let base = rankings_args(input, &["--request-rate", "50", "--request-count", "100"]);
    let server = Ranker::start(2);
    let out = temp_dir("profile-threshold-out");
    let mut args = base.to_vec();
    args.extend(["--failed-request-threshold", "0.2"]);
    let err = profile_at(server.addr, &out, &args).unwrap_err();
    assert_eq!(err.exit_code(), 99);
    assert!(
        err.msg.contains("--failed-request-threshold 0.2 exceeded"),
        "{}",
        err.msg
    );
    let received = server.bodies().len();
    assert!(
        (10..50).contains(&received),
        "the server got {received} of 100"
    );
    // What was measured is written, with the threshold in its settings.
    let level = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir() && e.file_name() != "logs");
    let summary = summary(&level.expect("the level's directory").path());
    assert_eq!(summary["input_config"]["failed_request_threshold"], 0.2);
    let counted = summary["request_count"]["avg"].as_f64().unwrap()
        + summary["error_request_count"]["avg"].as_f64().unwrap();
    assert!(summary["error_request_count"]["avg"].as_f64().unwrap() >= 3.0);
    assert!(
        counted >= 10.0 && counted <= received as f64,
        "{counted} of {received}"
    );
    // Under a looser threshold the same run goes to the end.
    let server = Ranker::start(2);
    let mut args = base.to_vec();
    args.extend(["--failed-request-threshold", "0.6"]);
    let outcomes = profile_at(server.addr, &temp_dir("profile-threshold-loose"), &args).unwrap();
    assert_eq!(server.bodies().len(), 100);
    assert_eq!(outcomes[0].requests.len(), 100);
}

#[test]
fn the_grace_period_decides_whether_requests_in_flight_at_the_end_count() {
    // Each answer takes 300 ms; 4 in flight at a time for 1 s, so 4 are in flight when the
    // duration ends. Grace 0 leaves them out; the default (30 s) waits for them.
    let mut seen = Vec::new();
    for grace in [Some("0"), None] {
        let server = start_llm(300, 0, 1);
        let dir = temp_dir("profile-grace");
        let mut args = vec![
            "--concurrency",
            "4",
            "--benchmark-duration",
            "1",
            "--osl",
            "1",
        ];
        if let Some(g) = grace {
            args.extend(["--benchmark-grace-period", g]);
        }
        let (outcomes, _) = profile(&server, &dir, &args).unwrap();
        let received = server.token_times().len();
        let recorded = outcomes[0].requests.len();
        assert!(outcomes[0].requests.iter().all(|r| r.ok()));
        let config = &summary(&outcomes[0].dir)["input_config"];
        assert_eq!(
            config["benchmark_grace_period"],
            grace.map_or(30.0, |_| 0.0)
        );
        seen.push((received, recorded));
        server.stop();
    }
    let [(got0, kept0), (got30, kept30)] = seen[..] else {
        unreachable!()
    };
    assert_eq!(
        got0 - kept0,
        4,
        "grace 0: the 4 in flight are left out ({seen:?})"
    );
    assert_eq!(
        got30, kept30,
        "default grace: every request counts ({seen:?})"
    );
}

#[test]
fn a_request_rate_series_ramps_the_rate_the_server_sees() {
    // 20/s rising to 100/s over 2 s: 40 sends in the first second, 80 in the second.
    let server = start_llm(0, 0, 1);
    let dir = temp_dir("profile-rate-series");
    let series = dir.join("series.json");
    std::fs::write(
        &series,
        r#"{"points": [{"time_s": 0, "qps": 20}, {"time_s": 2, "qps": 100}]}"#,
    )
    .unwrap();
    let args = [
        "--request-rate-series",
        series.to_str().unwrap(),
        "--request-count",
        "120",
        "--osl",
        "1",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    let mut arrivals: Vec<u64> = server.token_times().iter().map(|t| t[0]).collect();
    arrivals.sort_unstable();
    assert_eq!(arrivals.len(), 120);
    assert_eq!(outcomes[0].requests.len(), 120);
    let start = outcomes[0]
        .requests
        .iter()
        .map(|r| r.start_ns)
        .min()
        .unwrap();
    // The schedule's clock starts one gap (about 48 ms) before the first send.
    let first_second = arrivals
        .iter()
        .filter(|&&t| t < start + 950_000_000)
        .count();
    let rest = arrivals.len() - first_second;
    let ratio = rest as f64 / first_second as f64;
    assert!((1.6..2.5).contains(&ratio), "{first_second} then {rest}");
    assert!(outcomes[0]
        .dir
        .ends_with("inferperf-llm-openai-chat-request_rate20.0"));
    let config = &summary(&outcomes[0].dir)["input_config"];
    assert_eq!(config["request_rate_series"][1]["qps"], 100.0, "{config}");
    server.stop();
}

/// The most requests the server had at once in their prefill (from when it read each to
/// when it sent its first content chunk) and in flight (to its last chunk). Intervals are
/// half-open: a request read at the very moment another's chunk went out does not overlap
/// it.
fn peaks(server: &inferperf::server::ServerHandle) -> (usize, usize, usize) {
    let starts = server.generation_starts();
    let tokens = server.token_times();
    assert_eq!(starts.len(), tokens.len());
    let peak = |end: fn(&Vec<u64>) -> u64| {
        let mut edges: Vec<(u64, i32)> = Vec::new();
        for (start, times) in starts.iter().zip(&tokens) {
            edges.push((*start, 1));
            edges.push((end(times), -1));
        }
        // Ends before starts at the same instant.
        edges.sort_unstable();
        let (mut now, mut peak) = (0i32, 0i32);
        for (_, d) in edges {
            now += d;
            peak = peak.max(now);
        }
        peak as usize
    };
    assert!(
        tokens.iter().all(|t| !t.is_empty()),
        "every request got a token"
    );
    let prefill = peak(|t| t[0]);
    let flight = peak(|t| t[t.len() - 1]);
    (starts.len(), prefill, flight)
}

#[test]
fn prefill_concurrency_caps_the_requests_waiting_for_their_first_token() {
    // 100 ms to the first token, then 8 tokens 10 ms apart: with 8 requests in flight, each
    // spends most of its life in prefill. Four workers share the cap.
    let mut seen_peaks = Vec::new();
    for prefill in [Some("2"), None] {
        let server = start_llm(100, 10, 1);
        let dir = temp_dir(&format!("profile-prefill-{}", prefill.unwrap_or("off")));
        let mut args = vec![
            "--streaming",
            "--concurrency",
            "8",
            "--max-workers",
            "4",
            "--request-count",
            "16",
            "--output-tokens-mean",
            "8",
            "--synthetic-input-tokens-mean",
            "16",
        ];
        if let Some(n) = prefill {
            args.extend(["--prefill-concurrency", n]);
        }
        let (outcomes, _) = profile(&server, &dir, &args).unwrap();
        let o = &outcomes[0];
        assert_eq!(o.requests.len(), 16);
        assert!(o.requests.iter().all(|r| r.ok()), "{:?}", o.requests);
        let config = &summary(&o.dir)["input_config"];
        let want = prefill.map_or(Value::Null, |n| n.parse::<u64>().unwrap().into());
        assert_eq!(config["prefill_concurrency"], want, "{config}");
        let (seen, in_prefill, in_flight) = peaks(&server);
        assert_eq!(seen, 16, "the server saw every request");
        seen_peaks.push((in_prefill, in_flight));
        server.stop();
    }
    eprintln!("peak requests (in prefill, in flight), cap 2 then none: {seen_peaks:?}");
    let [(capped, capped_flight), (free, _)] = seen_peaks[..] else {
        unreachable!()
    };
    assert_eq!(capped, 2, "the cap holds and is reached");
    assert!(
        capped_flight > 2,
        "a request leaves prefill at its first token, not at its end: {capped_flight}"
    );
    assert!(free > 2, "without the cap more wait at once: {free}");
}

/// Runs `profile` on another thread; `None` when it has not returned within a minute (a
/// prefill slot that was never given back stalls the run).
fn profile_or_stall(
    server: &inferperf::server::ServerHandle,
    dir: &Path,
    args: &[&str],
) -> Option<inferperf::error::Result<Vec<inferperf::llm::PointOutcome>>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (server_addr, dir) = (server.addr.to_string(), dir.to_path_buf());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    std::thread::spawn(move || {
        let mut argv: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into()];
        argv.extend([
            crate::run_profile::MODEL.into(),
            "-u".into(),
            server_addr.into(),
        ]);
        argv.extend(["--artifact-dir".into(), dir.into_os_string()]);
        argv.extend(["--quiet".into(), "--tokenizer".into(), "cl100k_base".into()]);
        argv.extend(args.into_iter().map(Into::into));
        let cfg = inferperf::llm::cli::parse(argv).unwrap().expect("a run");
        let _ = tx.send(inferperf::llm::run(&cfg, &mut Vec::new()));
    });
    rx.recv_timeout(std::time::Duration::from_secs(60)).ok()
}

#[test]
fn prefill_slots_come_back_from_cancelled_and_timed_out_requests() {
    // One slot: a request that leaves without a first token and keeps its slot would stall
    // every later send. One worker sends the 12 prompts in order; 6 are marked.
    let server = start_llm(100, 2, 1);
    let dir = temp_dir("profile-prefill-cancel");
    let args = [
        "--streaming",
        "--concurrency",
        "4",
        "--max-workers",
        "1",
        "--prefill-concurrency",
        "1",
        "--num-prompts",
        "12",
        "--request-count",
        "12",
        "--output-tokens-mean",
        "4",
        "--request-cancellation-rate",
        "50",
        "--request-cancellation-delay",
        "0.01",
    ];
    let outcomes = profile_or_stall(&server, &dir, &args)
        .expect("the run stalled")
        .unwrap();
    let o = &outcomes[0];
    assert_eq!(o.requests.len(), 12);
    assert_eq!(o.cancelled, 6, "cancelled in prefill, slots given back");
    assert_eq!(o.metrics.request_count, 6);
    assert_eq!(
        server.token_times().len(),
        12,
        "the server saw every request"
    );
    server.stop();

    // Every request times out before its first token: each failure gives its slot back,
    // so all are sent and the run ends with the failures counted.
    let server = start_llm(300, 2, 1);
    let dir = temp_dir("profile-prefill-timeout");
    let args = [
        "--streaming",
        "--concurrency",
        "3",
        "--prefill-concurrency",
        "1",
        "--request-count",
        "4",
        "--request-timeout",
        "50",
    ];
    let err = profile_or_stall(&server, &dir, &args)
        .expect("the run stalled")
        .expect_err("every request timed out");
    assert!(
        err.to_string().contains("all 4 requests failed: timed out"),
        "{err}"
    );
    assert_eq!(
        server.token_times().len(),
        4,
        "the server saw every request"
    );
    server.stop();
}
