//! Replies that are not what the service kind answers fail the run: the binary runs against
//! a proxy in front of the reference server that relays the setup connection untouched and
//! spoils every reply on the load connections (HTTP: `200` with a body that is not JSON;
//! gRPC: each message's bytes replaced, grpc-status still 0). The run must end with exit
//! code 99 and name the cause. The same run through the untouched server passes.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output};
use std::thread;
use std::time::Duration;

use crate::common;

/// What the proxy does to the load connections (every connection after the first).
#[derive(Clone, Copy)]
enum Spoil {
    /// Answers each HTTP request with `200 OK` and the body `not json`.
    HttpNotJson,
    /// Answers each HTTP request with `simple`'s reply as JSON, the first INT32 of OUTPUT0
    /// 5000 digits long.
    HttpHugeInt32,
    /// Relays HTTP/2 but overwrites the bytes of every gRPC message the server sends.
    GrpcNotProtobuf,
}

/// Listens on an ephemeral port; the first connection is relayed to `upstream` as is (the
/// run's setup calls), later ones are spoiled as `spoil` says.
fn proxy(upstream: SocketAddr, spoil: Spoil) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for (n, client) in listener.incoming().enumerate() {
            let Ok(client) = client else { return };
            let _ = client.set_read_timeout(Some(Duration::from_secs(20)));
            thread::spawn(move || match (n, spoil) {
                (0, _) => relay(client, upstream, false),
                (_, Spoil::HttpNotJson) => answer_with(client, b"not json".to_vec()),
                (_, Spoil::HttpHugeInt32) => answer_with(client, huge_int32_reply()),
                (_, Spoil::GrpcNotProtobuf) => relay(client, upstream, true),
            });
        }
    });
    addr
}

/// Copies bytes both ways; with `spoil`, the server's gRPC messages are overwritten.
fn relay(client: TcpStream, upstream: SocketAddr, spoil: bool) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    thread::spawn(move || {
        let _ = std::io::copy(&mut c_in, &mut s_out);
        let _ = s_out.shutdown(Shutdown::Write);
    });
    let (mut s_in, mut c_out) = (server, client);
    if !spoil {
        let _ = std::io::copy(&mut s_in, &mut c_out);
        return;
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        let n = match s_in.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let done = spoil_frames(&mut buf);
        if c_out.write_all(&buf[..done]).is_err() {
            return;
        }
        buf.drain(..done);
    }
}

/// Overwrites the message bytes of every whole DATA frame in `buf` (after the server's
/// connection preface of frames); returns how many bytes hold whole frames.
fn spoil_frames(buf: &mut [u8]) -> usize {
    let mut pos = 0;
    while buf.len() >= pos + 9 {
        let len = u32::from_be_bytes([0, buf[pos], buf[pos + 1], buf[pos + 2]]) as usize;
        if buf.len() < pos + 9 + len {
            break;
        }
        // A DATA frame whose payload starts a gRPC message: keep its 5-byte prefix.
        if buf[pos + 3] == 0 && len > 5 {
            buf[pos + 9 + 5..pos + 9 + len].fill(0xff);
        }
        pos += 9 + len;
    }
    pos
}

/// `simple`'s reply with JSON outputs, OUTPUT0's first value 5000 digits long.
fn huge_int32_reply() -> Vec<u8> {
    let zeros = vec!["0"; 15].join(",");
    let output = |name: &str, first: &str| {
        format!(r#"{{"name":"{name}","datatype":"INT32","shape":[1,16],"data":[{first},{zeros}]}}"#)
    };
    let huge = format!("1{}", "0".repeat(4999));
    format!(
        r#"{{"model_name":"simple","model_version":"1","outputs":[{},{}]}}"#,
        output("OUTPUT0", &huge),
        output("OUTPUT1", "0")
    )
    .into_bytes()
}

/// Answers every request on the connection with `200 OK` and `body`.
fn answer_with(mut client: TcpStream, body: Vec<u8>) {
    let mut reply =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    reply.extend_from_slice(&body);
    let mut seen = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        while let Some(end) = request_end(&seen) {
            seen.drain(..end);
            if client.write_all(&reply).is_err() {
                return;
            }
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The length of the first whole request in `buf` (head and Content-Length body).
fn request_end(buf: &[u8]) -> Option<usize> {
    let head = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let text = String::from_utf8_lossy(&buf[..head]).to_ascii_lowercase();
    let body: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap_or(0));
    (buf.len() >= head + body).then_some(head + body)
}

fn run_binary(url: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "-m",
        "simple",
        "-u",
        url,
        "--request-count",
        "20",
        "--concurrency-range",
        "2",
        "--no-pin",
    ];
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(&args)
        .output()
        .expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn http_200_with_a_body_that_is_not_json_fails_the_run() {
    let server = common::start_server();
    let good = run_binary(&server.addr.to_string(), &[]);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    let addr = proxy(server.addr, Spoil::HttpNotJson);
    let o = run_binary(&addr.to_string(), &[]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(99), "{e}");
    assert!(
        e.contains("reply is not JSON (expected a JSON object at byte 0)"),
        "{e}"
    );
}

#[test]
fn http_json_value_out_of_its_datatype_fails_the_run() {
    let server = common::start_server();
    let addr = proxy(server.addr, Spoil::HttpHugeInt32);
    let o = run_binary(&addr.to_string(), &[]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(99), "{e}");
    assert!(e.contains("output OUTPUT0 has 1000"), "{e}");
    assert!(
        e.contains("as element 0 of its INT32 data, which INT32 cannot hold"),
        "{e}"
    );
}

#[test]
fn grpc_reply_that_is_not_a_model_infer_response_fails_the_run() {
    let server = common::start_grpc_server(Vec::new());
    let upstream = server.grpc_addr.expect("gRPC endpoint");
    let good = run_binary(&upstream.to_string(), &["-i", "grpc"]);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    let addr = proxy(upstream, Spoil::GrpcNotProtobuf);
    let o = run_binary(&addr.to_string(), &["-i", "grpc"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(99), "{e}");
    assert!(
        e.contains("reply is not a ModelInferResponse protobuf (field "),
        "{e}"
    );
}

#[test]
fn grpc_stream_reply_that_is_not_protobuf_fails_the_run() {
    let server = common::start_grpc_server(Vec::new());
    let upstream = server.grpc_addr.expect("gRPC endpoint");
    let stream = ["-i", "grpc", "--streaming", "--async"];
    let addr = proxy(upstream, Spoil::GrpcNotProtobuf);
    let o = run_binary(&addr.to_string(), &stream);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(99), "{e}");
    assert!(
        e.contains("reply is not a ModelStreamInferResponse protobuf (field "),
        "{e}"
    );
}
