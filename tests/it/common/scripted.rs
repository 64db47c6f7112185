//! Small scripted servers for the tests that make a peer misbehave: HTTP/1.1 request
//! reading and the model-discovery replies of a one-model server named `m`, a one-connection
//! server that runs a script, the HTTP/2 steps a gRPC script starts with, and the engine
//! spec those tests run.

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use inferperf::clock::Clock;
use inferperf::config::{ConcurrencyRange, Config, MeasurementMode};
use inferperf::engine::wire::{GrpcWire, Wire};
use inferperf::engine::EngineSpec;
use inferperf::protocol::grpc::frame::write_settings;
use inferperf::protocol::grpc::hpack::Encoder;
use inferperf::protocol::grpc::request::call_headers;
use inferperf::protocol::http1::DEFAULT_MAX_RESPONSE_BYTES;

pub const METADATA: &str = r#"{"name":"m","versions":["1"],"platform":"x","inputs":[{"name":"IN","datatype":"FP32","shape":[4]}],"outputs":[{"name":"OUT","datatype":"FP32","shape":[4]}]}"#;
pub const CONFIG: &str = r#"{"name":"m","max_batch_size":0,"input":[{"name":"IN","data_type":"TYPE_FP32","dims":[4]}],"output":[{"name":"OUT","data_type":"TYPE_FP32","dims":[4]}]}"#;
pub const INFER: &str = r#"{"model_name":"m","outputs":[{"name":"OUT","datatype":"FP32","shape":[4],"data":[1.0,2.0,3.0,4.0]}]}"#;

/// One HTTP/1.1 request as a scripted server read it.
pub struct Request {
    pub method: String,
    pub path: String,
}

/// Reads one HTTP/1.1 request (line, headers, Content-Length body); `None` once the client
/// has closed or the body cannot be read.
pub fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return None;
        }
        if h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(Request { method, path })
}

/// The reply to the server and model-discovery paths of model `m`; `None` for any other
/// path.
pub fn discovery_reply(path: &str) -> Option<&'static str> {
    match path {
        "/v2/health/ready" => Some(""),
        "/v2" => Some(r#"{"name":"t","version":"1","extensions":[]}"#),
        "/v2/models/m" => Some(METADATA),
        "/v2/models/m/config" => Some(CONFIG),
        _ => None,
    }
}

/// A perf_analyzer-mode config for model `m` at `addr`: `count` requests per window at a
/// fixed `concurrency`, no thread pinning, a 2 s ready timeout.
pub fn count_config(addr: SocketAddr, concurrency: u64, count: u64) -> Config {
    Config {
        model_name: "m".into(),
        url: addr.to_string(),
        measurement_mode: MeasurementMode::CountWindows,
        request_count: count,
        concurrency: ConcurrencyRange {
            start: concurrency,
            end: concurrency,
            step: 1,
        },
        pin_threads: false,
        ready_timeout_s: 2,
        ..Config::default()
    }
}

/// Listens on a loopback port and serves every connection on its own thread with `serve`,
/// which counts the infer requests in the returned counter.
pub fn serve_each<F>(serve: F) -> (SocketAddr, Arc<AtomicU64>)
where
    F: Fn(TcpStream, &AtomicU64) + Send + Copy + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let infers = Arc::new(AtomicU64::new(0));
    let counter = infers.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let c = counter.clone();
            std::thread::spawn(move || serve(s, &c));
        }
    });
    (addr, infers)
}

/// Accepts one connection (5 s read and write timeouts), runs `script` on it, then closes
/// it. Scripts that speak HTTP/2 start with `send_settings` (the client opens no stream
/// before the server's SETTINGS).
pub fn scripted_server(script: fn(&mut TcpStream)) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let join = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
            script(&mut s);
        }
    });
    (addr, join)
}

/// Reads until the client's first request HEADERS (frame type 1) has arrived (or the
/// client is gone).
pub fn await_request(s: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let preface = 24;
    loop {
        let mut pos = preface;
        while seen.len() >= pos + 9 {
            let len = u32::from_be_bytes([0, seen[pos], seen[pos + 1], seen[pos + 2]]) as usize;
            if seen[pos + 3] == 1 {
                return;
            }
            pos += 9 + len;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// Sends the server's (empty) SETTINGS frame.
pub fn send_settings(s: &mut TcpStream) {
    let mut out = Vec::new();
    write_settings(&mut out, &[]);
    let _ = s.write_all(&out);
}

/// The header block of a successful gRPC response head.
pub fn response_headers() -> Vec<u8> {
    let mut block = Vec::new();
    let enc = Encoder::new();
    enc.encode_literal_without_indexing(&mut block, b":status", b"200");
    enc.encode_literal_without_indexing(&mut block, b"content-type", b"application/grpc");
    block
}

/// A gRPC ModelInfer request message with an empty model name (length-prefixed).
pub fn grpc_request() -> Vec<u8> {
    vec![0, 0, 0, 0, 2, 0x0a, 0x00]
}

/// The unary gRPC wire of a ModelInfer call to `addr`.
pub fn grpc_wire(addr: SocketAddr) -> Wire {
    Wire::Grpc(GrpcWire {
        headers: call_headers(&addr.to_string(), "ModelInfer", &[], false, None),
        streaming: false,
        decoupled: false,
    })
}

/// An engine spec sending `request` over `wire` to `addr` with one worker thread, no TLS,
/// no request timeout and the default response size limit; tests adjust it with struct
/// update syntax.
pub fn engine_spec(addr: SocketAddr, wire: Wire, request: Vec<u8>) -> EngineSpec {
    EngineSpec {
        addr,
        requests: Arc::new(vec![request]),
        keep_bodies: false,
        keep_going: false,
        http_trace: false,
        rx_stamps: true,
        tx_stamps: Some(Default::default()),
        packet_stamps: None,
        fresh_connections: false,
        pin: false,
        max_workers: 1,
        clock: Clock::new(),
        tls: None,
        wire,
        sequences: None,
        slots: None,
        read_batch: None,
        request_limits: Default::default(),
        reply_check: Default::default(),
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        cancel: None,
        prefill: None,
    }
}
