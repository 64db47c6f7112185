//! The least client CPU this machine allows for the two loads whose targets are ratios:
//! a bare client that does nothing but the socket calls every client must make.
//!
//! `cargo bench --bench kernel_floor [-- grpc [REQUESTS]] [-- sse [STREAMS...]]`
//!
//! - `grpc`: one bidirectional `ModelStreamInfer` stream at concurrency 1 (perf_analyzer's
//!   `-i grpc --streaming --async --concurrency-range 1`) to the reference server's `simple`
//!   model: per request one `send` of a pre-built DATA frame, one `epoll_wait`, one `recv`,
//!   and a 9-byte frame-header scan; no statistics, no timestamps.
//! - `sse`: STREAMS concurrent OpenAI chat streams (TTFT 50 ms, ITL 5 ms, 64 tokens, one token
//!   per chunk, 8 requests per stream) read the moment each chunk arrives: per ready stream
//!   one `recv` and one clock read; only the end of each response is looked for, no SSE or
//!   JSON parsing. Once reading at every wake-up, once napping 1 ms after each pass.
//!
//! The reference server runs in this process, pinned to the last core; the client is this
//! thread, pinned to core 0, and its CPU is this thread's alone (`RUSAGE_THREAD`). Prints one
//! line per load: client CPU (user + system) per request or per token, and the rate.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use inferperf::protocol::grpc::hpack::Encoder;
use inferperf::protocol::grpc::pb::inference as pb;
use inferperf::server::{self, OpenAiConfig, ServeConfig};
use prost::Message;

const WARMUP: usize = 1000;
const OSL: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let numbers = |from: usize| -> Vec<usize> {
        args.iter()
            .skip(from)
            .filter_map(|a| a.parse().ok())
            .collect()
    };
    let cores = inferperf::engine::available_cores();
    let server_core = cores.last().map(|c| vec![c.id]).unwrap_or_default();
    // Each load runs on its own thread: the client pins that thread, and the next load's
    // server must start from an unpinned one.
    let (run_grpc, run_sse) = match args.first().map(String::as_str) {
        Some("grpc") => (numbers(1).first().copied().or(Some(30_000)), None),
        Some("sse") => (None, Some(numbers(1))),
        _ => (Some(30_000), Some(Vec::new())),
    };
    if let Some(requests) = run_grpc {
        let core = server_core.clone();
        std::thread::spawn(move || grpc(core, requests))
            .join()
            .unwrap();
    }
    if let Some(levels) = run_sse {
        std::thread::spawn(move || sse_levels(server_core, levels))
            .join()
            .unwrap();
    }
}

/// Pins this thread (the client) to the first core; the server's threads keep their own.
fn pin_client() {
    if let Some(first) = core_affinity::get_core_ids().and_then(|c| c.first().copied()) {
        core_affinity::set_for_current(first);
    }
}

/// CPU seconds (user + system) used so far by the calling thread.
fn thread_cpu() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the call to fill.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// An epoll instance watching `fds` for input, each tagged with its index.
fn epoll_for(fds: &[i32]) -> i32 {
    // SAFETY: plain system calls on descriptors this process owns.
    let ep = unsafe { libc::epoll_create1(0) };
    assert!(ep >= 0, "epoll_create1");
    for (i, fd) in fds.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: `ev` lives across the call; `ep` and `fd` are open.
        let rc = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, *fd, &mut ev) };
        assert_eq!(rc, 0, "epoll_ctl");
    }
    ep
}

fn send_all(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice; `fd` is an open socket.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
        assert!(n > 0, "send: {}", std::io::Error::last_os_error());
        bytes = &bytes[n as usize..];
    }
}

/// One non-blocking `recv` into `buf`: bytes read, 0 when nothing is ready.
fn recv_some(fd: i32, buf: &mut [u8]) -> usize {
    // SAFETY: `buf` is a live, writable slice; `fd` is an open socket.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        let err = std::io::Error::last_os_error();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "recv: {err}");
        return 0;
    }
    assert!(n > 0, "the server closed the connection");
    n as usize
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Preface, SETTINGS (1 GiB windows, as inferperf asks), the stream's HEADERS, and the DATA
/// frame of one `simple` request (two INT32 [1,16] inputs in `raw_input_contents`).
fn grpc_bytes(addr: SocketAddr) -> (Vec<u8>, Vec<u8>) {
    let mut open = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let window: u32 = 1 << 30;
    let mut settings = vec![0, 2, 0, 0, 0, 0, 0, 4];
    settings.extend_from_slice(&window.to_be_bytes());
    open.extend(frame(4, 0, 0, &settings));
    open.extend(frame(8, 0, 0, &(window - 65_535).to_be_bytes()));
    let mut block = Vec::new();
    let hpack = Encoder::new();
    let authority = addr.to_string();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/inference.GRPCInferenceService/ModelStreamInfer"),
        (":authority", authority.as_str()),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        hpack.encode_literal_without_indexing(&mut block, name.as_bytes(), value.as_bytes());
    }
    open.extend(frame(1, 4, 1, &block));
    let input = |name: &str| pb::model_infer_request::InferInputTensor {
        name: name.into(),
        datatype: "INT32".into(),
        shape: vec![1, 16],
        ..Default::default()
    };
    let request = pb::ModelInferRequest {
        model_name: "simple".into(),
        inputs: vec![input("INPUT0"), input("INPUT1")],
        raw_input_contents: vec![vec![1; 64], vec![2; 64]],
        ..Default::default()
    };
    let body = request.encode_to_vec();
    let mut message = vec![0];
    message.extend_from_slice(&(body.len() as u32).to_be_bytes());
    message.extend_from_slice(&body);
    (open, frame(0, 0, 1, &message))
}

/// Scans whole frames in `buf[..*have]`: answers SETTINGS and PING, counts non-empty DATA
/// frames (responses), keeps a partial frame for the next read.
fn scan_frames(fd: i32, buf: &mut [u8], have: &mut usize) -> usize {
    let (mut off, mut responses) = (0, 0);
    while *have - off >= 9 {
        let h = &buf[off..off + 9];
        let len = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
        if *have - off < 9 + len {
            break;
        }
        match (h[3], h[4] & 1) {
            (0, _) if len > 0 => responses += 1,
            (4, 0) => send_all(fd, &frame(4, 1, 0, &[])),
            (6, 0) => send_all(fd, &frame(6, 1, 0, &buf[off + 9..off + 17])),
            (3 | 7, _) => panic!("the server reset the stream or the connection"),
            _ => {}
        }
        off += 9 + len;
    }
    buf.copy_within(off..*have, 0);
    *have -= off;
    responses
}

fn grpc(server_core: Vec<usize>, requests: usize) {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        grpc_addr: Some("127.0.0.1:0".parse().unwrap()),
        pin_cores: server_core,
        ..ServeConfig::default()
    };
    let server = server::start(cfg).expect("reference server starts");
    pin_client();
    let addr = server.grpc_addr.expect("gRPC is on");
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).unwrap();
    let fd = stream.as_raw_fd();
    let ep = epoll_for(&[fd]);
    let (open, data) = grpc_bytes(addr);
    send_all(fd, &open);
    let mut buf = vec![0u8; 1 << 20];
    let (mut have, mut cpu0, mut t0) = (0, 0.0, Instant::now());
    for i in 0..WARMUP + requests {
        if i == WARMUP {
            (cpu0, t0) = (thread_cpu(), Instant::now());
        }
        send_all(fd, &data);
        let mut got = 0;
        while got == 0 {
            let mut ev = libc::epoll_event { events: 0, u64: 0 };
            // SAFETY: one writable event slot; `ep` is open.
            unsafe { libc::epoll_wait(ep, &mut ev, 1, -1) };
            have += recv_some(fd, &mut buf[have..]);
            got = scan_frames(fd, &mut buf, &mut have);
        }
    }
    let (cpu, wall) = (thread_cpu() - cpu0, t0.elapsed().as_secs_f64());
    println!(
        "grpc-stream c1: requests={requests} cpu_us_per_req={:.2} req_per_s={:.0}",
        cpu * 1e6 / requests as f64,
        requests as f64 / wall
    );
    drop(stream);
    server.stop();
}

fn sse_levels(server_core: Vec<usize>, levels: Vec<usize>) {
    let levels = if levels.is_empty() {
        vec![16, 64, 256]
    } else {
        levels
    };
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        pin_cores: server_core,
        openai: OpenAiConfig::paced(Duration::from_millis(50), Duration::from_millis(5)),
        ..ServeConfig::default()
    };
    let server = server::start(cfg).expect("reference server starts");
    pin_client();
    for streams in levels {
        for nap in [None, Some(Duration::from_millis(1))] {
            sse(server.addr, streams, 8, nap);
        }
    }
    server.stop();
}

fn chat_request(addr: SocketAddr) -> Vec<u8> {
    let prompt = "hello ".repeat(64);
    let body = format!(
        r#"{{"model":"inferperf-llm","stream":true,"max_tokens":{OSL},"messages":[{{"role":"user","content":"{prompt}"}}]}}"#
    );
    let mut req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body.as_bytes());
    req
}

/// `streams` connections, `per_stream` requests each, one after the other on each; with
/// `nap`, the client sleeps that long after each pass over the ready streams (as
/// `--read-batch-us` does), so one wake-up finds more of them.
fn sse(addr: SocketAddr, streams: usize, per_stream: usize, nap: Option<Duration>) {
    let request = chat_request(addr);
    let conns: Vec<TcpStream> = (0..streams)
        .map(|_| {
            let s = TcpStream::connect(addr).expect("connect");
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    let fds: Vec<i32> = conns.iter().map(|s| s.as_raw_fd()).collect();
    let ep = epoll_for(&fds);
    let (cpu0, t0) = (thread_cpu(), Instant::now());
    let mut left = vec![per_stream; streams];
    let mut tail = vec![[0u8; 5]; streams];
    for (mut s, _) in conns.iter().zip(0..) {
        s.write_all(&request).unwrap();
    }
    let (mut open, mut reads, mut last_read) = (streams, 0u64, t0);
    let mut buf = vec![0u8; 64 * 1024];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    while open > 0 {
        // SAFETY: `events` has room for its length; `ep` is open.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        for ev in &events[..n.max(0) as usize] {
            let i = ev.u64 as usize;
            let got = recv_some(fds[i], &mut buf);
            if got == 0 {
                continue;
            }
            reads += 1;
            last_read = Instant::now();
            // A response ends with the last chunk "0\r\n\r\n" (which a read may split).
            let last = &buf[got.saturating_sub(5)..got];
            tail[i].copy_within(last.len().., 0);
            tail[i][5 - last.len()..].copy_from_slice(last);
            if &tail[i] == b"0\r\n\r\n" {
                left[i] -= 1;
                tail[i] = [0; 5];
                if left[i] == 0 {
                    open -= 1;
                } else {
                    send_all(fds[i], &request);
                }
            }
        }
        if let Some(nap) = nap {
            std::thread::sleep(nap);
        }
    }
    let cpu = thread_cpu() - cpu0;
    let tokens = (streams * per_stream * OSL) as f64;
    println!(
        "sse streams={streams} nap_us={}: tokens={tokens} reads={reads} cpu_us_per_token={:.2} wall_s={:.2}",
        nap.map_or(0, |d| d.as_micros()),
        cpu * 1e6 / tokens,
        (last_read - t0).as_secs_f64()
    );
}
