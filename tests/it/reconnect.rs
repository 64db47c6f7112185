//! A server that closes keep-alive connections (`Connection: close` every third response, as
//! servers with a per-connection request limit do): the engine must reconnect and carry on,
//! and every request must still be counted exactly once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use inferperf::config::{ConcurrencyRange, Config, MeasurementMode};

const METADATA: &str = r#"{"name":"m","versions":["1"],"platform":"x","inputs":[{"name":"IN","datatype":"FP32","shape":[4]}],"outputs":[{"name":"OUT","datatype":"FP32","shape":[4]}]}"#;
const CONFIG: &str = r#"{"name":"m","max_batch_size":0,"input":[{"name":"IN","data_type":"TYPE_FP32","dims":[4]}],"output":[{"name":"OUT","data_type":"TYPE_FP32","dims":[4]}]}"#;
const INFER: &str = r#"{"model_name":"m","outputs":[{"name":"OUT","datatype":"FP32","shape":[4],"data":[1.0,2.0,3.0,4.0]}]}"#;

/// Serves one connection; returns when the client or this server closes it.
fn serve_conn(stream: TcpStream, infers: &AtomicU64) {
    serve_conn_with(stream, infers, false)
}

/// Serves one connection; with `cut`, every infer reply stops halfway through its body and
/// the connection closes, so the FIN arrives with the data.
fn serve_conn_with(stream: TcpStream, infers: &AtomicU64, cut: bool) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    let mut answered = 0u32;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let reply = match path.as_str() {
            "/v2/health/ready" => "",
            "/v2" => r#"{"name":"t","version":"1","extensions":[]}"#,
            "/v2/models/m" => METADATA,
            "/v2/models/m/config" => CONFIG,
            _ => {
                infers.fetch_add(1, Ordering::SeqCst);
                INFER
            }
        };
        answered += 1;
        let close = path.ends_with("/infer") && answered % 3 == 0;
        let conn = if close { "Connection: close\r\n" } else { "" };
        let msg = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{conn}\r\n{reply}",
            reply.len()
        );
        if cut && path.ends_with("/infer") {
            let _ = out.write_all(&msg.as_bytes()[..msg.len() - reply.len() / 2]);
            return;
        }
        if out.write_all(msg.as_bytes()).is_err() || close {
            return;
        }
    }
}

#[test]
fn closed_connections_are_replaced_and_counts_stay_exact() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let infers = Arc::new(AtomicU64::new(0));
    let counter = infers.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let c = counter.clone();
            std::thread::spawn(move || serve_conn(s, &c));
        }
    });
    let cfg = Config {
        model_name: "m".into(),
        url: addr.to_string(),
        measurement_mode: MeasurementMode::CountWindows,
        request_count: 300,
        concurrency: ConcurrencyRange {
            start: 2,
            end: 2,
            step: 1,
        },
        pin_threads: false,
        ready_timeout_s: 2,
        ..Config::default()
    };
    let mut out = Vec::new();
    let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false))).unwrap();
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 300);
    assert_eq!(infers.load(Ordering::SeqCst), 300);
}

#[test]
fn a_reply_cut_short_by_a_close_ends_the_run_with_its_cause() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let infers = Arc::new(AtomicU64::new(0));
    let counter = infers.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let c = counter.clone();
            std::thread::spawn(move || serve_conn_with(s, &c, true));
        }
    });
    let cfg = Config {
        model_name: "m".into(),
        url: addr.to_string(),
        measurement_mode: MeasurementMode::CountWindows,
        request_count: 20,
        concurrency: ConcurrencyRange {
            start: 1,
            end: 1,
            step: 1,
        },
        pin_threads: false,
        ready_timeout_s: 2,
        ..Config::default()
    };
    // The run must end by itself; a connection waiting forever on the cut reply would not.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false)));
        let _ = tx.send(res.map(|r| r.error.map(|e| e.msg)));
    });
    let res = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the run ends");
    let error = res.unwrap().expect("the cut reply is an error");
    assert!(error.contains("closed the connection"), "{error}");
    assert!(infers.load(Ordering::SeqCst) >= 1);
}
