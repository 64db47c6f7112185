//! What a server says is untrusted: absurd shapes in its model metadata, escape sequences in
//! its error text, path-like model names. Each test runs the `inferperf` binary against a
//! small scripted HTTP/1.1 server (std::net, one thread per connection) and checks the exit
//! code, the message, that nothing absurd was sent or allocated, that no raw control byte
//! reached the terminal and that no file landed outside the output directory.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::temp_dir;

/// `(request head, path, body)` to `(status, JSON body)`.
type Route = Arc<dyn Fn(&str, &str, &[u8]) -> (u16, String) + Send + Sync>;

/// A scripted server: its `host:port` and how many infer requests reached it.
struct Scripted {
    addr: String,
    infers: Arc<AtomicUsize>,
}

fn scripted(route: Route) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let infers = Arc::new(AtomicUsize::new(0));
    let counter = infers.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (route, counter) = (route.clone(), counter.clone());
            std::thread::spawn(move || answer(stream, &route, &counter));
        }
    });
    Scripted { addr, infers }
}

/// Answers keep-alive requests on one connection until the client closes it.
fn answer(mut s: TcpStream, route: &Route, infers: &AtomicUsize) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    while let Some((head, body)) = read_message(&mut s, &mut buf) {
        let path = head.split_whitespace().nth(1).unwrap_or("");
        if path.ends_with("/infer") {
            infers.fetch_add(1, Ordering::Relaxed);
        }
        let (status, body) = route(&head, path, &body);
        let reply = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if s.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// Model `m` with one FP32 input of `dims` (`max_batch_size` 0) and a 16-float output;
/// infer answers 16 zeros.
fn model_route(dims: &'static str) -> Route {
    Arc::new(move |_, path, _| model_answer(dims, path))
}

fn model_answer(dims: &str, path: &str) -> (u16, String) {
    let path = path.split('?').next().unwrap_or(path);
    match path {
            "/v2/health/ready" | "/v2/models/m/ready" => (200, String::new()),
            "/v2" => (200, r#"{"name":"scripted","version":"1","extensions":[]}"#.into()),
            "/v2/models/m" => (
                200,
                format!(
                    r#"{{"name":"m","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{{"name":"INPUT0","datatype":"FP32","shape":{dims}}}],"outputs":[{{"name":"OUTPUT0","datatype":"FP32","shape":[16]}}]}}"#
                ),
            ),
            "/v2/models/m/config" => (
                200,
                format!(
                    r#"{{"name":"m","platform":"onnxruntime_onnx","max_batch_size":0,"input":[{{"name":"INPUT0","data_type":"TYPE_FP32","dims":{dims}}}],"output":[{{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[16]}}]}}"#
                ),
            ),
            "/v2/models/m/infer" => (
                200,
                r#"{"model_name":"m","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[16],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]}"#.into(),
            ),
            _ => (404, r#"{"error":"not found"}"#.into()),
    }
}

fn inferperf(addr: &str, extra: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .current_dir(cwd)
        .args(["-m", "m", "-u", addr, "--ready-timeout", "2"])
        .args([
            "--measurement-mode",
            "count_windows",
            "--measurement-request-count",
            "5",
            // The machine is shared: any window counts as stable.
            "-s",
            "100",
        ])
        .args(extra)
        .output()
        .expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// No raw ESC, BEL, CR or other control byte but '\n' in `bytes`.
fn assert_no_raw_control(bytes: &[u8], what: &str) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<char> = text
        .chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect();
    assert!(
        bad.is_empty(),
        "{what} holds raw control characters {bad:?}: {text}"
    );
}

#[test]
fn a_wrapping_shape_from_the_server_is_an_error_naming_the_input() {
    let srv = scripted(model_route("[4294967296,4294967296,4294967296]"));
    let dir = temp_dir("untrusted-wrap");
    let o = inferperf(&srv.addr, &[], &dir);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(99), "{err}");
    assert!(
        err.contains(
            "input INPUT0: shape [4294967296,4294967296,4294967296] of FP32 is too many bytes \
             to count, over the 268435456-byte limit for generated data (raise it with \
             --max-input-bytes)"
        ),
        "{err}"
    );
    assert_eq!(srv.infers.load(Ordering::Relaxed), 0, "no request was sent");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn a_huge_shape_from_the_server_is_capped_and_the_cap_can_be_raised() {
    let srv = scripted(model_route("[65536,65536]"));
    let dir = temp_dir("untrusted-huge");
    let o = inferperf(&srv.addr, &[], &dir);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(99), "{err}");
    assert!(
        err.contains(
            "input INPUT0: shape [65536,65536] of FP32 is 17179869184 bytes, over the \
             268435456-byte limit for generated data (raise it with --max-input-bytes)"
        ),
        "{err}"
    );
    assert_eq!(srv.infers.load(Ordering::Relaxed), 0);
    // The limit applies to what the shape asks for, whatever the flag says.
    let o = inferperf(&srv.addr, &["--max-input-bytes", "1024"], &dir);
    assert_eq!(o.status.code(), Some(99));
    assert!(
        stderr(&o).contains("over the 1024-byte limit"),
        "{}",
        stderr(&o)
    );
    // A bad value for the flag is a usage error before any connection.
    let o = inferperf(&srv.addr, &["--max-input-bytes", "0"], &dir);
    assert_eq!(o.status.code(), Some(99));
    assert!(stderr(&o).contains("--max-input-bytes"), "{}", stderr(&o));
}

#[test]
fn a_negative_dim_other_than_minus_one_is_an_error() {
    let srv = scripted(model_route("[-2,4]"));
    let dir = temp_dir("untrusted-negative");
    let o = inferperf(&srv.addr, &[], &dir);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(99), "{err}");
    assert!(
        err.contains("input INPUT0: shape [-2,4] has the dimension -2; only -1"),
        "{err}"
    );
    assert_eq!(srv.infers.load(Ordering::Relaxed), 0);
}

#[test]
fn escape_sequences_in_a_servers_error_text_reach_the_terminal_escaped() {
    let route: Route = Arc::new(|_, path, _| match path {
        "/v2/health/ready" => (200, String::new()),
        _ => (
            400,
            r#"{"error":"\u001b[31mmodel is gone\u001b[0m\u0007\r\u001b]0;pwned\u0007"}"#.into(),
        ),
    });
    let srv = scripted(route);
    let dir = temp_dir("untrusted-escape");
    let o = inferperf(&srv.addr, &[], &dir);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(99), "{err}");
    assert!(
        err.contains("\\x1b[31mmodel is gone\\x1b[0m\\x07\\x0d"),
        "{err}"
    );
    assert_no_raw_control(&o.stderr, "stderr");
    assert_no_raw_control(&o.stdout, "stdout");
}

#[test]
fn verbose_request_dumps_redact_credentials() {
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let route: Route = Arc::new(move |head, path, _| {
        if head.contains("\r\nAuthorization: Bearer sk-secret-1\r\n")
            && head.contains("\r\nx-api-key: k-secret-2\r\n")
        {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        model_answer("[16]", path)
    });
    let srv = scripted(route);
    let dir = temp_dir("untrusted-verbose");
    let o = inferperf(
        &srv.addr,
        &[
            "-v",
            "-v",
            "--input-tensor-format",
            "json",
            "-H",
            "Authorization: Bearer sk-secret-1",
            "-H",
            "x-api-key: k-secret-2",
        ],
        &dir,
    );
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("Request sent by every worker:"), "{err}");
    assert!(err.contains("\nAuthorization: <redacted>\n"), "{err}");
    assert!(err.contains("\nx-api-key: <redacted>\n"), "{err}");
    assert!(
        !err.contains("secret") && !out.contains("secret"),
        "{err}{out}"
    );
    assert_no_raw_control(&o.stderr, "stderr");
    // The server still got the real headers on every request.
    let infers = srv.infers.load(Ordering::Relaxed);
    assert!(infers >= 5, "{infers} infer requests");
    assert!(seen.load(Ordering::Relaxed) >= infers, "headers were sent");
}

/// A proxy in front of `upstream` that renames the server's models: in every answer but
/// infer, `"identity_int32"` becomes `"../../x"` and `"simple"` becomes `"/abs/x"`; request
/// paths (percent-encoded or not) are mapped back.
fn renaming_proxy(upstream: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(client) = stream else { return };
            let up = upstream.clone();
            std::thread::spawn(move || {
                let Ok(server) = TcpStream::connect(&up) else {
                    return;
                };
                relay(client, server);
            });
        }
    });
    addr
}

/// Reads one HTTP/1.1 message (head and Content-Length body) from `s` into `buf`; returns
/// the head and the body.
fn read_message(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut chunk = [0u8; 16384];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let body = buf[end + 4..end + 4 + len].to_vec();
                buf.drain(..end + 4 + len);
                return Some((head, body));
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn relay(mut client: TcpStream, mut server: TcpStream) {
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (mut from_client, mut from_server) = (Vec::new(), Vec::new());
    while let Some((head, body)) = read_message(&mut client, &mut from_client) {
        let head = head
            .replace("..%2F..%2Fx", "identity_int32")
            .replace("%2Fabs%2Fx", "simple")
            .replace("../../x", "identity_int32")
            .replace("/abs/x", "simple");
        let infer = head
            .split_whitespace()
            .nth(1)
            .is_some_and(|p| p.ends_with("/infer"));
        let mut request = format!("{head}\r\n\r\n").into_bytes();
        request.extend_from_slice(&body);
        if server.write_all(&request).is_err() {
            return;
        }
        let Some((head, mut body)) = read_message(&mut server, &mut from_server) else {
            return;
        };
        if !infer {
            let text = String::from_utf8_lossy(&body)
                .replace("\"identity_int32\"", "\"../../x\"")
                .replace("\"simple\"", "\"/abs/x\"");
            body = text.into_bytes();
        }
        let head: Vec<String> = head
            .lines()
            .map(|l| match l.split_once(':') {
                Some((k, _)) if k.eq_ignore_ascii_case("content-length") => {
                    format!("{k}: {}", body.len())
                }
                _ => l.to_string(),
            })
            .collect();
        let mut reply = format!("{}\r\n\r\n", head.join("\r\n")).into_bytes();
        reply.extend_from_slice(&body);
        if client.write_all(&reply).is_err() {
            return;
        }
    }
}

#[test]
fn composing_models_with_path_like_names_write_their_csvs_inside_the_output_directory() {
    let server = crate::common::start_server();
    let proxy = renaming_proxy(server.addr.to_string());
    let dir = temp_dir("untrusted-names");
    let out = dir.join("a").join("b");
    std::fs::create_dir_all(&out).unwrap();
    let csv = out.join("out.csv");
    let o = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args([
            "-m",
            "ensemble_simple",
            "-u",
            &proxy,
            "--ready-timeout",
            "2",
        ])
        .args([
            "--measurement-mode",
            "count_windows",
            "--measurement-request-count",
            "20",
            "-s",
            "100",
        ])
        .args(["-f", csv.to_str().unwrap()])
        .output()
        .expect("binary runs");
    let (text, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(text.contains("  ../../x, version: 1\n"), "{text}");
    assert!(text.contains("  /abs/x, version: 1\n"), "{text}");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["___.._x_v1.out.csv", "_abs_x_v1.out.csv", "out.csv"]
    );
    for name in &names {
        let body = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(
            body.starts_with("Concurrency,Inferences/Second,"),
            "{name}: {body}"
        );
    }
    // Nothing beside the output directory: `a` holds only `b`, the test dir only `a`.
    assert_eq!(std::fs::read_dir(dir.join("a")).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    assert!(!Path::new("/abs/x_v1.out.csv").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
