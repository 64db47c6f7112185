//! Request timeouts against small scripted servers that stall: before the response head, in
//! the middle of a body, before a gRPC response. Each stalled request must end as a counted
//! `Timeout` failure with a message that says what it waited for; a perf_analyzer-mode run
//! ends with a non-zero exit code, a `profile` run goes on and counts them. Limits are short
//! (300 ms) and the assertions are on counts and messages, not on times.

use std::ffi::OsString;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use inferperf::clock::Clock;
use inferperf::config::Config;
use inferperf::engine::{Engine, EngineSpec};
use inferperf::llm;
use inferperf::measure::{FailKind, WindowRecords};
use inferperf::protocol::grpc::frame::write_settings;

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
        }
    }
}

/// Holds the connection open, reading, until the client closes it (or the read times out).
fn drain(reader: &mut impl Read) {
    let mut buf = [0u8; 1024];
    while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
}

/// A perf_analyzer-mode `--request-count` run at concurrency 1 with a 300 ms request
/// timeout; its error message (the run must end by itself within 60 s).
fn pa_run(addr: SocketAddr, count: u64) -> Option<String> {
    let cfg = Config {
        request_timeout: Some(Duration::from_millis(300)),
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
    assert!(
        error.contains("Thread [0] had error: timed out after 0.3 s waiting for the response head"),
        "{error}"
    );
    // The summary line names the kind: 1 of the 3 requests that ended failed.
    let summary = error.lines().nth(1).expect("a summary line");
    assert_eq!(
        summary,
        "1 of 3 requests failed: timed out after 0.3 s waiting for the response head"
    );
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
        error.contains("timed out after 0.3 s waiting for the rest of the response body"),
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
    assert!(stderr.contains("timed out after 0.3 s"), "{stderr}");
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
        "all 3 requests failed: timed out after 0.3 s waiting for the response head"
    );
    assert_eq!(err.exit_code(), 99);
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
        request_timeout: Some(Duration::from_millis(300)),
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
    assert_eq!(msg, "timed out after 0.3 s waiting for the first response");
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
    assert_eq!(msg, "timed out after 0.3 s waiting for the first response");
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
