//! A server that closes keep-alive connections (`Connection: close` every third response, as
//! servers with a per-connection request limit do): the engine must reconnect and carry on,
//! and every request must still be counted exactly once.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::common::scripted::{
    count_config, discovery_reply, read_request, serve_each, Request, INFER,
};

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
    while let Some(Request { path, .. }) = read_request(&mut reader) {
        let reply = discovery_reply(&path).unwrap_or_else(|| {
            infers.fetch_add(1, Ordering::SeqCst);
            INFER
        });
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
    let (addr, infers) = serve_each(serve_conn);
    let cfg = count_config(addr, 2, 300);
    let mut out = Vec::new();
    let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false))).unwrap();
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 300);
    assert_eq!(infers.load(Ordering::SeqCst), 300);
}

#[test]
fn a_reply_cut_short_by_a_close_ends_the_run_with_its_cause() {
    let (addr, infers) = serve_each(|s, c| serve_conn_with(s, c, true));
    let cfg = count_config(addr, 1, 20);
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
