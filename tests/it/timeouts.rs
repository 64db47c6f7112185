//! Request time limits against small scripted servers that stall (before the response head,
//! in the middle of a body, before a gRPC response) or never finish (a reply that drips, a
//! stream that never ends). Each such request must end as a counted `Timeout` failure with a
//! message that names the limit (idle or total), its flag and what it waited for; a
//! perf_analyzer-mode run ends with a non-zero exit code, a `profile` run goes on and counts
//! them. Limits are short (300 ms to 1 s) and the assertions are on counts and messages; the
//! only times checked are generous bounds on how long a run may take to end.

use std::ffi::OsString;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use inferperf::clock::Clock;
use inferperf::config::Config;
use inferperf::engine::{Engine, EngineSpec, RequestLimits};
use inferperf::llm;
use inferperf::measure::{FailKind, WindowRecords};
use inferperf::protocol::grpc::frame::write_settings;
use inferperf::server::fault::{self, FaultConfig, FaultHandle, FaultMode};

use crate::common::scripted::{
    count_config, discovery_reply, engine_spec, grpc_request, grpc_wire, read_request, serve_each,
    INFER,
};

const CHAT: &str = r#"{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#;
const LIMIT_MS: &str = "300";

/// What the scripted server does with the infer request number `n` (1-based, over all
/// connections).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Act {
    Answer,
    /// Reads the request and says nothing until the client closes.
    StallBeforeHead,
    /// Sends the head and half the body, then nothing.
    StallMidBody,
    /// An event stream whose events never end (one every 100 ms until the client leaves).
    EndlessStream,
    /// A short event stream: two events and `[DONE]`.
    ShortStream,
}

/// An HTTP/1.1 server answering health, metadata and config, and infer (any POST)
/// requests as `plan` says; counts the infer requests it saw.
fn http_server(plan: fn(u64) -> Act, body: &'static str) -> (SocketAddr, Arc<AtomicU64>) {
    serve_each(move |s, infers| serve_conn(s, infers, plan, body))
}

fn serve_conn(stream: TcpStream, infers: &AtomicU64, plan: fn(u64) -> Act, infer: &str) {
    // A stalled connection ends when the client closes it, or after 20 s at most.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    while let Some(req) = read_request(&mut reader) {
        let (reply, act) = match discovery_reply(&req.path) {
            Some(reply) => (reply, Act::Answer),
            None if req.method == "POST" => {
                (infer, plan(infers.fetch_add(1, Ordering::SeqCst) + 1))
            }
            None => ("", Act::Answer),
        };
        let msg = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{reply}",
            reply.len()
        );
        match act {
            Act::Answer => {
                if out.write_all(msg.as_bytes()).is_err() {
                    return;
                }
            }
            Act::StallBeforeHead => return drain(&mut reader),
            Act::StallMidBody => {
                let _ = out.write_all(&msg.as_bytes()[..msg.len() - reply.len() / 2]);
                return drain(&mut reader);
            }
            Act::EndlessStream => return endless_stream(&mut out),
            Act::ShortStream => {
                if !stream_events(&mut out, 2) {
                    return;
                }
            }
        }
    }
}

const CHUNK: &str = r#"data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#;

/// A chunked event stream's head, then `events` events one chunk each, then `[DONE]` and the
/// last chunk; false when the client has gone.
fn stream_events(out: &mut TcpStream, events: usize) -> bool {
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut all = head.to_string();
    for _ in 0..events {
        all.push_str(&chunk(CHUNK));
    }
    all.push_str(&chunk("data: [DONE]"));
    all.push_str("0\r\n\r\n");
    out.write_all(all.as_bytes()).is_ok()
}

/// One SSE event as one HTTP chunk.
fn chunk(event: &str) -> String {
    format!("{:x}\r\n{event}\n\n\r\n", event.len() + 2)
}

/// A chunked event stream with an event every 100 ms, until the client goes (or 20 s).
fn endless_stream(out: &mut TcpStream) {
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if out.write_all(chunk(CHUNK).as_bytes()).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Holds the connection open, reading, until the client closes it (or the read times out).
fn drain(reader: &mut impl Read) {
    let mut buf = [0u8; 1024];
    while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
}

/// A perf_analyzer-mode `--request-count` run at concurrency 1 with a 300 ms idle limit;
/// its error message (the run must end by itself within 60 s).
fn pa_run(addr: SocketAddr, count: u64) -> Option<String> {
    let cfg = Config {
        request_idle_timeout: Some(Duration::from_millis(300)),
        ..count_config(addr, 1, count)
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false)));
        let _ = tx.send(res.map(|r| r.error.map(|e| e.msg)));
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the run ends by itself")
        .expect("the run reports")
}

#[test]
fn a_stall_before_the_head_times_out_and_ends_the_run() {
    let (addr, infers) = http_server(
        |n| {
            if n >= 3 {
                Act::StallBeforeHead
            } else {
                Act::Answer
            }
        },
        INFER,
    );
    let error = pa_run(addr, 20).expect("the stalled request is an error");
    let idle = "timed out after 0.3 s idle (--request-idle-timeout) waiting for the response head";
    assert!(
        error.contains(&format!("Thread [0] had error: {idle}")),
        "{error}"
    );
    // The summary line names the kind: 1 of the 3 requests that ended failed.
    let summary = error.lines().nth(1).expect("a summary line");
    assert_eq!(summary, format!("1 of 3 requests failed: {idle}"));
    assert_eq!(
        infers.load(Ordering::SeqCst),
        3,
        "nothing is sent after the failure"
    );
}

#[test]
fn a_stall_in_the_middle_of_the_body_times_out() {
    let (addr, _) = http_server(|_| Act::StallMidBody, INFER);
    let error = pa_run(addr, 5).expect("the stalled request is an error");
    assert!(
        error.contains(
            "timed out after 0.3 s idle (--request-idle-timeout) waiting for the rest of the \
             response body"
        ),
        "{error}"
    );
    assert!(error.contains("all 1 requests failed"), "{error}");
}

#[test]
fn the_binary_exits_non_zero_when_a_request_count_run_stalls() {
    let (addr, _) = http_server(
        |n| {
            if n >= 2 {
                Act::StallBeforeHead
            } else {
                Act::Answer
            }
        },
        INFER,
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["-m", "m", "-u", &addr.to_string(), "--request-count", "10"])
        .args(["--request-timeout", LIMIT_MS, "--no-pin"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the run did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("timed out after 0.3 s in total (--request-timeout)"),
        "{stderr}"
    );
}

/// Runs `profile` (non-streaming chat, concurrency 1, `count` requests) against `addr`.
fn profile(
    addr: SocketAddr,
    count: &str,
    extra: &[&str],
) -> inferperf::error::Result<Vec<llm::PointOutcome>> {
    let dir = std::env::temp_dir().join(format!(
        "inferperf-timeouts-{}-{}",
        std::process::id(),
        Clock::new().now_ns()
    ));
    let mut argv: Vec<OsString> = ["profile", "-m", "m", "-u", &addr.to_string()]
        .iter()
        .map(OsString::from)
        .collect();
    argv.extend(["--artifact-dir".into(), dir.as_os_str().to_owned()]);
    let rest = [
        "--quiet",
        "--tokenizer",
        "cl100k_base",
        "--concurrency",
        "1",
    ];
    argv.extend(rest.iter().map(OsString::from));
    argv.extend(
        [
            "--request-count",
            count,
            "--synthetic-input-tokens-mean",
            "8",
        ]
        .map(OsString::from),
    );
    argv.extend(extra.iter().map(OsString::from));
    let cfg = llm::cli::parse(argv)?.expect("a run, not help");
    let mut out = Vec::new();
    let res = llm::run(&cfg, &mut out);
    let _ = std::fs::remove_dir_all(&dir);
    res
}

#[test]
fn profile_goes_on_past_stalled_requests_and_counts_them() {
    let (addr, infers) = http_server(
        |n| {
            if n % 2 == 0 {
                Act::StallBeforeHead
            } else {
                Act::Answer
            }
        },
        CHAT,
    );
    let outcomes = profile(addr, "6", &["--request-timeout", LIMIT_MS]).expect("the run completes");
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), 6, "every request is recorded");
    let ok = reqs.iter().filter(|r| r.ok()).count();
    assert_eq!(ok, 3, "every other request was answered");
    let kinds: Vec<&str> = reqs
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| e.kind.as_str()))
        .collect();
    assert_eq!(
        kinds, ["timeout"; 3],
        "the failures are counted as timeouts"
    );
    assert_eq!(
        infers.load(Ordering::SeqCst),
        6,
        "the stalls did not stop the run"
    );
}

#[test]
fn profile_names_the_cause_when_every_request_fails() {
    let (addr, _) = http_server(|_| Act::StallBeforeHead, CHAT);
    let Err(err) = profile(addr, "3", &["--request-timeout-seconds", "0.3"]) else {
        panic!("nothing succeeded, yet the run passed");
    };
    assert_eq!(
        err.msg,
        "all 3 requests failed: timed out after 0.3 s in total (--request-timeout-seconds) \
         waiting for the response head, 0 bytes received"
    );
    assert_eq!(err.exit_code(), 99);
    // The idle limit, when given, fires on its own and names its flag.
    let Err(err) = profile(addr, "2", &["--request-idle-timeout", LIMIT_MS]) else {
        panic!("nothing succeeded, yet the run passed");
    };
    assert_eq!(
        err.msg,
        "all 2 requests failed: timed out after 0.3 s idle (--request-idle-timeout) waiting \
         for the response head"
    );
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

#[test]
fn profile_against_a_closed_port_ends_naming_the_refusal() {
    for extra in [&[][..], &["--service-kind", "triton"][..]] {
        let Err(err) = profile(closed_port(), "3", extra) else {
            panic!("{extra:?}: a run against a closed port passed");
        };
        assert!(
            err.msg.starts_with("no request completed: ") && err.msg.contains("refused"),
            "{extra:?}: {}",
            err.msg
        );
        assert_eq!(err.exit_code(), 99);
    }
}

/// A gRPC server that sends its SETTINGS, then (with `ping`) a PING every 20 ms and never
/// answers; returns the error code of the first RST_STREAM the client sends, if any.
fn grpc_staller(ping: bool) -> (SocketAddr, JoinHandle<Option<u32>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let join = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().ok()?;
        let mut out = Vec::new();
        write_settings(&mut out, &[]);
        s.write_all(&out).ok()?;
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            match s.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(_) if ping => {
                    let frame = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
                    s.write_all(&frame).ok()?;
                }
                Err(_) => {}
            }
            if let Some(code) = rst_stream_code(&seen) {
                return Some(code);
            }
        }
        None
    });
    (addr, join)
}

/// The error code of the first RST_STREAM frame after the client preface.
fn rst_stream_code(seen: &[u8]) -> Option<u32> {
    let mut pos = 24;
    while seen.len() >= pos + 9 {
        let len = u32::from_be_bytes([0, seen[pos], seen[pos + 1], seen[pos + 2]]) as usize;
        if seen[pos + 3] == 3 && seen.len() >= pos + 13 {
            let p = &seen[pos + 9..pos + 13];
            return Some(u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
        }
        pos += 9 + len;
    }
    None
}

/// One unary gRPC request with a 300 ms timeout; the first error, the records and the
/// failures counted as timeouts.
fn grpc_run(addr: SocketAddr) -> (String, WindowRecords, u64) {
    let spec = EngineSpec {
        request_limits: RequestLimits {
            idle: Some(Duration::from_millis(300)),
            ..RequestLimits::default()
        },
        ..engine_spec(addr, grpc_wire(addr), grpc_request())
    };
    let mut engine = Engine::start(&spec, 1, Some(1)).expect("engine starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(engine.all_finished() && engine.first_error().is_some()) {
        assert!(Instant::now() < deadline, "the engine hung");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut window = WindowRecords::default();
    engine.collect(u64::MAX, &mut window).unwrap();
    let (_, msg) = engine.first_error().unwrap();
    let timeouts = engine.fail_tally().0.count(FailKind::Timeout);
    engine.stop(Duration::from_millis(100));
    (msg, window, timeouts)
}

#[test]
fn a_grpc_stream_with_no_response_is_reset_and_fails_as_timed_out() {
    // The connection stays alive (PINGs), so only the stream is given up: RST_STREAM CANCEL.
    let (addr, server) = grpc_staller(true);
    let (msg, window, timeouts) = grpc_run(addr);
    assert_eq!(
        msg,
        "timed out after 0.3 s idle (--request-idle-timeout) waiting for the first response"
    );
    assert_eq!(window.records.len(), 1);
    assert!(!window.records[0].ok);
    assert_eq!(window.records[0].fail, FailKind::Timeout);
    assert_eq!(timeouts, 1);
    assert_eq!(
        server.join().unwrap(),
        Some(8),
        "RST_STREAM with CANCEL (8)"
    );
}

#[test]
fn a_silent_grpc_connection_is_replaced_and_its_request_times_out() {
    let (addr, server) = grpc_staller(false);
    let (msg, window, timeouts) = grpc_run(addr);
    assert_eq!(
        msg,
        "timed out after 0.3 s idle (--request-idle-timeout) waiting for the first response"
    );
    assert_eq!(window.records.len(), 1);
    assert_eq!(window.records[0].fail, FailKind::Timeout);
    assert_eq!(timeouts, 1);
    // The client closed the silent connection instead of resetting the stream on it.
    assert_eq!(server.join().unwrap(), None);
}

#[test]
fn an_idle_streaming_grpc_stream_between_requests_is_not_a_timeout() {
    // Two sends a second apart on one long-lived stream, with a 300 ms limit: the stream
    // waits for nothing between them, so nothing times out.
    let server = crate::common::start_grpc_server(vec![]);
    let grpc = server.grpc_addr.expect("gRPC endpoint").to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["-m", "simple", "-i", "grpc", "--streaming", "-u", &grpc])
        .args(["--request-rate-range", "1", "--request-count", "2"])
        .args(["--request-timeout", LIMIT_MS, "--no-pin"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("timed out"), "{stderr}");
    server.stop();
}

/// A fault server in `mode` on loopback ports (HTTP and gRPC) that stops by itself after two
/// minutes.
fn fault_server(mode: FaultMode) -> FaultHandle {
    let local = "127.0.0.1:0".parse().unwrap();
    fault::start(&FaultConfig {
        mode,
        http: local,
        grpc: Some(local),
        ttl: Duration::from_secs(120),
    })
    .expect("the fault server starts")
}

/// Waits for `child` for at most `limit` (then kills it and fails); its exit status and
/// how long it took.
fn wait_exit(child: &mut Child, limit: Duration) -> (ExitStatus, Duration) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs the binary with `args` (at most a minute): its exit code and stderr.
fn run_bin(args: &[&str]) -> (Option<i32>, String, Duration) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(args)
        .arg("--no-pin")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (status, took) = wait_exit(&mut child, Duration::from_secs(60));
    (status.code(), reader.join().unwrap(), took)
}

#[test]
fn a_dripping_server_ends_a_request_count_run_on_the_total_limit() {
    // A byte every 100 ms: never idle for the 500 ms idle limit, never done within 1 s.
    let server = fault_server(FaultMode::Drip);
    let url = server.addr.to_string();
    let (code, stderr, took) = run_bin(&[
        "-m",
        "identity",
        "-u",
        &url,
        "--request-count",
        "30",
        "--request-timeout",
        "1000",
        "--request-idle-timeout",
        "500",
    ]);
    assert_eq!(code, Some(99), "{stderr}");
    let why = "timed out after 1 s in total (--request-timeout) waiting for the response head, ";
    let line = stderr
        .lines()
        .find(|l| l.contains(why))
        .unwrap_or_else(|| panic!("{stderr}"));
    let received: u64 = line
        .split(why)
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" bytes received"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(received > 0, "bytes were dripping: {line}");
    assert!(!stderr.contains("idle"), "{stderr}");
    assert_eq!(server.infers(), 1, "the first failure ends the run");
    assert!(took < Duration::from_secs(30), "{took:?}");
}

#[test]
fn profile_ends_a_stream_that_never_ends_on_the_total_limit() {
    let (addr, infers) = http_server(|_| Act::EndlessStream, CHAT);
    let started = Instant::now();
    let extra = ["--streaming", "--request-timeout-seconds", "1"];
    let Err(err) = profile(addr, "2", &extra) else {
        panic!("endless streams passed");
    };
    let why = "all 2 requests failed: timed out after 1 s in total (--request-timeout-seconds) \
               waiting for the rest of the response body, ";
    assert!(
        err.msg.starts_with(why) && err.msg.ends_with(" bytes received"),
        "{}",
        err.msg
    );
    assert_eq!(infers.load(Ordering::SeqCst), 2);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

/// Sends SIGINT to `child` once `ready` holds (checked for at most 30 s).
fn interrupt_when(child: &Child, ready: impl Fn() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(30), "never ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the requests in flight drip a little.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: a signal to the child this test spawned.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
}

/// How long the first Ctrl-C may take to end a run (it takes a few ms; this is generous).
const CTRL_C_BOUND: Duration = Duration::from_secs(4);

#[test]
fn the_first_ctrl_c_ends_a_dripping_run_at_once_with_its_reports() {
    let server = fault_server(FaultMode::Drip);
    let dir = crate::common::temp_dir("ctrl-c-drip");
    let (csv, json) = (dir.join("r.csv"), dir.join("r.json"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["-m", "identity", "-u", &server.addr.to_string(), "--no-pin"])
        .args(["--request-count", "30", "--concurrency-range", "4"])
        .args(["-f", csv.to_str().unwrap()])
        .args(["--profile-export-file", json.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    interrupt_when(&child, || server.infers() >= 4);
    let (status, took) = wait_exit(&mut child, Duration::from_secs(60));
    assert!(took < CTRL_C_BOUND, "the run took {took:?} to end");
    // No reply finished dripping, so nothing was measured: perf_analyzer's exit code for a
    // window without a valid request, no CSV row, and the export with no experiment.
    assert_eq!(status.code(), Some(3));
    assert!(
        !csv.exists() && json.exists(),
        "{:?}",
        std::fs::read_dir(&dir)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn the_first_ctrl_c_ends_a_profile_of_endless_streams_at_once_with_its_reports() {
    // The first request is answered; every later one streams forever.
    let (addr, infers) = http_server(
        |n| {
            if n == 1 {
                Act::ShortStream
            } else {
                Act::EndlessStream
            }
        },
        CHAT,
    );
    let dir = crate::common::temp_dir("ctrl-c-profile");
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", "m", "-u", &addr.to_string(), "--streaming"])
        .args(["--concurrency", "2", "--request-count", "50"])
        .args([
            "--tokenizer",
            "cl100k_base",
            "--synthetic-input-tokens-mean",
            "8",
        ])
        .arg("--artifact-dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    interrupt_when(&child, || infers.load(Ordering::SeqCst) >= 3);
    let (_, took) = wait_exit(&mut child, Duration::from_secs(60));
    assert!(took < CTRL_C_BOUND, "the run took {took:?} to end");
    let files = files_under(&dir);
    let named = |suffix: &str| files.iter().any(|f| f.to_string_lossy().ends_with(suffix));
    assert!(named("inputs.json") && named(".csv"), "{files:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

const NO_VALID: &str =
    "No valid requests recorded within time interval. Please use a larger time window.";
const BOUNDED_BY: &str = "--request-timeout (default max(10 min, 10x the slowest request)) and \
                          --request-idle-timeout (default max(30 s, 10x the slowest request)) \
                          bound how long a request may wait";

#[test]
fn time_windows_with_no_answer_name_the_stall() {
    // Silent, a Content-Length longer than what comes, a reply at a byte per 100 ms.
    let cases = [
        (FaultMode::StallHead, false),
        (FaultMode::StallBody, false),
        (FaultMode::Drip, false),
        (FaultMode::StallHead, true),
    ];
    // The cases wait on their own servers, so they run side by side.
    let runs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .into_iter()
            .map(|(mode, grpc)| {
                s.spawn(move || {
                    let server = fault_server(mode);
                    let url = if grpc {
                        server.grpc_addr.unwrap()
                    } else {
                        server.addr
                    }
                    .to_string();
                    let protocol = if grpc { "grpc" } else { "http" };
                    let args = [
                        "-m", "identity", "-u", &url, "-i", protocol, "-p", "500", "-r", "3",
                    ];
                    let (code, stderr, _) = run_bin(&args);
                    (format!("{mode:?} over {protocol}"), code, stderr)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (case, code, stderr) in runs {
        assert_eq!(code, Some(3), "{case}: {stderr}");
        // perf_analyzer's sentence first (tools read it), then the stall.
        let stall = format!("{NO_VALID}\n1 request sent, none answered; the oldest has waited ");
        let rest = stderr
            .split(&stall)
            .nth(1)
            .unwrap_or_else(|| panic!("{case}: {stderr}"));
        let waited: f64 = rest.split(" s; ").next().unwrap().parse().unwrap();
        assert!(waited >= 1.4, "{case}: three 0.5 s windows, yet {waited} s");
        assert!(rest.contains(BOUNDED_BY), "{case}: {stderr}");
    }
}

#[test]
fn a_limit_that_fires_in_a_time_window_is_the_error() {
    let server = fault_server(FaultMode::StallHead);
    let url = server.addr.to_string();
    let args = ["-m", "identity", "-u", &url, "-p", "500", "-r", "3"];
    let (code, stderr, _) = run_bin(&[&args[..], &["--request-idle-timeout", "200"]].concat());
    assert_eq!(code, Some(99), "{stderr}");
    assert!(
        stderr.contains("timed out after 0.2 s idle (--request-idle-timeout)"),
        "{stderr}"
    );
    assert!(!stderr.contains(NO_VALID), "{stderr}");
}

#[test]
fn a_streaming_grpc_request_past_the_total_limit_fails_naming_it() {
    // Each answer takes 3 s; the total limit is 300 ms, the idle limit the default 30 s.
    let delay = inferperf::server::Delay::Fixed(Duration::from_secs(3));
    let server = crate::common::start_grpc_server(vec![("simple".into(), delay)]);
    let grpc = server.grpc_addr.expect("gRPC endpoint").to_string();
    let args = ["-m", "simple", "-i", "grpc", "--streaming", "-u", &grpc];
    let limits = ["--request-count", "3", "--request-timeout", LIMIT_MS];
    let (code, stderr, _) = run_bin(&[&args[..], &limits].concat());
    assert_eq!(code, Some(99), "{stderr}");
    assert!(
        stderr.contains(
            "timed out after 0.3 s in total (--request-timeout) waiting for the first response, \
             0 responses received"
        ),
        "{stderr}"
    );
    server.stop();
}
