//! Responses timed by the kernel's receive stamps in perf_analyzer mode: HTTP/1.1, TLS and
//! gRPC (unary and streaming) against the reference server with a server-side delay. The
//! report and the export must agree, every response must carry a stamp on Linux loopback, and
//! a client that is late on purpose (stopped with SIGSTOP while its responses arrive) must
//! show its lateness in the client receive delay, not in the latency.

use crate::common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::pki::Pki;
use common::*;
use inferperf::config::{ConcurrencyRange, Config, Protocol, TlsConfig};
use inferperf::measure::stats::RxStats;
use inferperf::server::{Delay, TlsFiles};
use inferperf::transport::packet_stamps::PacketStamps;

/// The server's time per request.
const SERVER_DELAY: Duration = Duration::from_millis(3);

/// A socket with receive stamping on, kept for the test's life: the kernel switches stamping
/// on for the whole system from a work item when the first socket asks, so segments that
/// arrive before that come unstamped. Holding one stamped socket open (and seeing one stamp
/// come) makes every later read of the run stampable.
pub(crate) struct StampingOn {
    _server: TcpStream,
    _client: TcpStream,
}

pub(crate) fn stamping_on() -> StampingOn {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let on: libc::c_int = 1;
    // SAFETY: a valid socket fd and a c_int option value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            client.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_TIMESTAMPNS refused");
    client.set_nonblocking(true).unwrap();
    for _ in 0..400 {
        server.write_all(b".").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        if read_is_stamped(&client) {
            return StampingOn {
                _server: server,
                _client: client,
            };
        }
    }
    panic!("the kernel never stamped a segment");
}

/// One non-blocking `recvmsg`: whether it brought an `SCM_TIMESTAMPNS` control message.
fn read_is_stamped(sock: &TcpStream) -> bool {
    let mut buf = [0u8; 64];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: fd is a socket; msg describes `buf` and `control`, both live and writable.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n <= 0 {
        return false;
    }
    // SAFETY: the CMSG_* walk stays inside the control buffer as the kernel filled it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                return true;
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    false
}

fn delayed() -> Vec<(String, Delay)> {
    vec![("simple".into(), Delay::Fixed(SERVER_DELAY))]
}

fn concurrency(c: u64) -> ConcurrencyRange {
    ConcurrencyRange {
        start: c,
        end: c,
        step: 1,
    }
}

/// The CSV's first row as (column, cell) pairs.
fn csv_row(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().expect("CSV header");
    let row = lines.next().expect("CSV row");
    header
        .split(',')
        .map(String::from)
        .zip(row.split(',').map(String::from))
        .collect()
}

fn cell(row: &[(String, String)], col: &str) -> f64 {
    let (_, v) = row
        .iter()
        .find(|(c, _)| c == col)
        .unwrap_or_else(|| panic!("no column {col} in {row:?}"));
    v.parse()
        .unwrap_or_else(|_| panic!("column {col}: not a number: {v}"))
}

/// Runs `cfg` with a CSV (extra columns) and an export, and checks what every stamped run
/// must show: all responses timed by a kernel stamp (none by the clock), latency at least the
/// server's delay, the export's latencies giving the report's percentiles, and the delay
/// columns present, non-negative and ordered. The point's receive timing is returned.
fn check_stamped_run(mut cfg: Config, tag: &str) -> RxStats {
    let dir = temp_dir(tag);
    cfg.csv_file = Some(dir.join("out.csv"));
    cfg.csv_extra_columns = true;
    cfg.profile_export_file = Some(dir.join("out.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let c = &res.points[0].client;
    let rx = c.rx.clone().expect("responses were meant to be stamped");
    assert_eq!(rx.clock, 0, "no response timed by the clock: {rx:?}");
    assert_eq!(rx.kernel, c.request_count, "every response stamped");
    assert!(rx.delay_p50_ns <= rx.delay_p99_ns && rx.delay_p99_ns <= rx.delay_max_ns);
    assert!(
        c.min_latency_ns >= SERVER_DELAY.as_nanos() as u64,
        "latency runs past the server's delay: {c:?}"
    );
    assert!(
        text.contains("    Client receive delay (kernel receive stamp"),
        "{text}"
    );
    assert!(!text.contains("Responses timed by the clock"), "{text}");

    // The export holds every request of the run, the measured ones among them: its
    // latencies, stamped as the report's are, bracket the report's percentiles.
    let lat = export_latencies(&dir.join("out.json"));
    assert!(lat.len() as u64 >= c.request_count);
    for p in [50usize, 99] {
        let reported = c.percentile(p as u32).unwrap() / 1000;
        let (lo, hi) = (lat[0] / 1000, lat[lat.len() - 1] / 1000);
        assert!(
            (lo..=hi).contains(&reported),
            "p{p} {reported} us outside the export's {lo}..={hi} us"
        );
    }

    let row = csv_row(&dir.join("out.csv"));
    let (p50, p99) = (
        cell(&row, "Client Recv Delay p50"),
        cell(&row, "Client Recv Delay p99"),
    );
    assert!(0.0 <= p50 && p50 <= p99, "{row:?}");
    assert_eq!(p50 as u64, rx.delay_p50_ns / 1000);
    assert_eq!(p99 as u64, rx.delay_p99_ns / 1000);
    assert_eq!(cell(&row, "Clock-timed responses %"), 0.0);
    assert_eq!(
        cell(&row, "p50 latency") as u64,
        c.percentile(50).unwrap() / 1000
    );
    rx
}

#[test]
fn http_responses_are_timed_by_kernel_stamps() {
    let _on = stamping_on();
    let server = start_server_with(delayed());
    let mut cfg = quick_config(&server, "simple", 40);
    cfg.request_count = 120;
    cfg.concurrency = concurrency(2);
    check_stamped_run(cfg, "rx-http");
}

#[test]
fn grpc_unary_and_streaming_responses_are_timed_by_kernel_stamps() {
    let _on = stamping_on();
    let server = start_grpc_server(delayed());
    for streaming in [false, true] {
        let mut cfg = quick_config(&server, "simple", 40);
        cfg.protocol = Protocol::Grpc;
        cfg.url = server.grpc_addr.expect("gRPC endpoint").to_string();
        cfg.request_count = 120;
        cfg.concurrency = concurrency(2);
        cfg.streaming = streaming;
        cfg.async_mode = streaming;
        check_stamped_run(cfg, if streaming { "rx-grpc-s" } else { "rx-grpc" });
    }
}

#[test]
fn tls_responses_are_timed_by_kernel_stamps() {
    let _on = stamping_on();
    let pki = Pki::new("rx-tls");
    let files = TlsFiles {
        cert_chain: pki.server_cert.clone(),
        key: pki.server_key.clone(),
        client_ca: None,
    };
    let server = start_grpc_server_with(delayed(), Some(files));
    for grpc in [false, true] {
        let mut cfg = quick_config(&server, "simple", 40);
        cfg.request_count = 120;
        cfg.tls = Some(TlsConfig {
            ca_file: Some(pki.ca.clone()),
            client_cert: None,
            client_key: None,
            verify_peer: true,
            verify_host: true,
            flag_prefix: if grpc { "--ssl-grpc" } else { "--ssl-https" },
        });
        if grpc {
            cfg.protocol = Protocol::Grpc;
            cfg.url = server.grpc_addr.unwrap().to_string();
        }
        check_stamped_run(cfg, if grpc { "rx-tls-grpc" } else { "rx-tls-http" });
    }
}

/// Runs the binary at concurrency 1 (60 requests) against a server that takes
/// `server_delay`, stopping it (SIGSTOP) for 25 ms in every 27 while its responses arrive;
/// `extra`: more flags. Returns the CSV row (extra columns) and the console text.
fn run_stopped(
    tag: &str,
    server_delay: Duration,
    extra: &[&str],
) -> (Vec<(String, String)>, String) {
    let server = start_server_with(vec![("simple".into(), Delay::Fixed(server_delay))]);
    let load = ["--concurrency-range", "1", "--request-count", "60"];
    let args: Vec<&str> = load.iter().chain(extra).copied().collect();
    let (row, text, _) = run_stopped_against(tag, &server.addr.to_string(), &args);
    (row, text)
}

/// Runs the binary with `args` against `url`'s model `simple`, stopping it (SIGSTOP) for
/// 25 ms in every 27 while its responses arrive, in a fresh folder `tag` (also its working
/// folder; `-f` goes to `out.csv` there). Returns the CSV row (extra columns), the console
/// text and the folder.
fn run_stopped_against(
    tag: &str,
    url: &str,
    args: &[&str],
) -> (Vec<(String, String)>, String, std::path::PathBuf) {
    const STOP: Duration = Duration::from_millis(25);
    const RUN: Duration = Duration::from_millis(2);
    let _on = stamping_on();
    let dir = temp_dir(tag);
    let csv = dir.join("out.csv");
    let console = std::fs::File::create(dir.join("console.txt")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["-m", "simple", "-u", url])
        .args(args)
        .args(["--csv-extra-columns", "-f"])
        .arg(&csv)
        .current_dir(&dir)
        .stdout(Stdio::from(console))
        .spawn()
        .expect("inferperf starts");
    let status = wait_stopping(&mut child, RUN, STOP, || true);
    let text = std::fs::read_to_string(dir.join("console.txt")).unwrap();
    assert!(status.success(), "{status}: {text}");
    (csv_row(&csv), text, dir)
}

/// gRPC at concurrency 8, one HTTP/2 connection, the client stopped while responses
/// arrive: with the packet socket (root or CAP_NET_RAW), responses that one read takes
/// together keep the times of their own TCP segments; with `--no-packet-stamps` they share
/// the read's stamp. Counted in the export: responses whose time equals another's. The
/// server's delays (5-45 ms) keep its replies apart, so that a server starved of CPU rarely
/// writes two in one segment (with 1-9 ms delays at concurrency 16, two busy processes on a
/// 2-core machine made 266-324 of 800 replies share segments).
#[test]
fn grpc_responses_read_together_keep_their_own_segments_time() {
    if let Err(e) = PacketStamps::open("127.0.0.1:1".parse().unwrap()) {
        println!("packet stamps: skipped (packet socket: {e}; needs root or CAP_NET_RAW)");
        return;
    }
    let server = start_grpc_server(vec![(
        "simple".into(),
        Delay::Uniform(Duration::from_millis(5), Duration::from_millis(45)),
    )]);
    let url = server.grpc_addr.expect("gRPC endpoint").to_string();
    let mut shared = Vec::new();
    for (tag, flag) in [
        ("rx-pkt-grpc", None),
        ("rx-pkt-grpc-off", Some("--no-packet-stamps")),
    ] {
        let mut args = vec![
            "-i",
            "grpc",
            "--concurrency-range",
            "8",
            "--request-count",
            "400",
            "--profile-export-file",
            "export.json",
        ];
        args.extend(flag);
        let (_, text, dir) = run_stopped_against(tag, &url, &args);
        let export = dir.join("export.json");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
        let mut times: Vec<u64> = doc["experiments"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|e| e["requests"].as_array().unwrap().iter())
            .map(|r| r["response_timestamps"][0].as_u64().unwrap())
            .collect();
        let total = times.len();
        times.sort_unstable();
        let twins = times
            .iter()
            .enumerate()
            .filter(|&(i, t)| (i > 0 && times[i - 1] == *t) || times.get(i + 1) == Some(t))
            .count();
        let line = "Responses timed per TCP segment (packet socket): ";
        match flag {
            None => {
                let held: u64 = text
                    .split(line)
                    .nth(1)
                    .and_then(|rest| rest.split(' ').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no packet line: {text}"));
                assert!(held > 0, "no read held several segments: {text}");
            }
            Some(_) => assert!(!text.contains(line), "{text}"),
        }
        shared.push((twins, total));
    }
    let [(with, n_with), (without, n_without)] = shared[..] else {
        unreachable!()
    };
    println!(
        "packet stamps: {with} of {n_with} responses share a time, {without} of {n_without} \
         with --no-packet-stamps"
    );
    // Stopped for 25 ms of every 27, the client finds several responses waiting at most
    // wake-ups: without the packet socket they share one time; with it only responses the
    // server's writes put in one segment do.
    assert!(
        without * 100 >= n_without * 20,
        "responses read together: {without} of {n_without} share a time"
    );
    assert!(
        with * 4 <= without,
        "per segment: {with} of {n_with} share a time, against {without} of {n_without} without"
    );
}

/// The client is stopped (SIGSTOP) for most of each cycle while its responses arrive: the
/// kernel still stamps them, so the latency stays near the server's time and the wait shows
/// as the client's receive delay. Without stamps each latency would be the server's time
/// plus the rest of the stop.
#[test]
fn a_stopped_client_shows_in_the_delay_not_in_the_latency() {
    let server_delay = Duration::from_millis(10);
    let (row, text) = run_stopped("rx-stopped", server_delay, &[]);
    let delay_p50_us = cell(&row, "Client Recv Delay p50");
    let latency_p50_us = cell(&row, "p50 latency");
    let server_us = server_delay.as_micros() as f64;
    assert_eq!(cell(&row, "Clock-timed responses %"), 0.0, "{row:?}");
    // Most responses land in a stop (a stop is 25 ms, the client then runs for 2 ms and the
    // server answers 10 ms after the send): the median one waits over 1 ms for the client.
    assert!(
        delay_p50_us >= 1000.0,
        "the client's wait is its delay: {row:?}"
    );
    // Had the delay leaked into the latency, the median latency would be the server's time
    // plus the median delay; it stays below the server's time plus half of it.
    assert!(
        latency_p50_us < server_us + delay_p50_us / 2.0,
        "latency leaves the client's wait out: {row:?}"
    );
    assert!(
        text.contains("[WARNING] The client was slow to read responses: client receive delay p99 "),
        "{text}"
    );
    assert!(
        text.contains(" usec is over 1000 usec. Latency runs to"),
        "{text}"
    );
    assert!(
        text.contains("to the client's read, not in the latency): p50 "),
        "{text}"
    );
}

/// `--no-kernel-rx-stamps`: the same stopped client, its responses timed by the clock read
/// after each read (as the C API's are), so the wait is in the latency and the receive-delay
/// line and columns are left out.
#[test]
fn without_kernel_stamps_the_stopped_clients_wait_is_in_the_latency() {
    let server_delay = Duration::from_millis(10);
    let (row, text) = run_stopped("rx-stopped-clock", server_delay, &["--no-kernel-rx-stamps"]);
    for col in [
        "Client Recv Delay p50",
        "Client Recv Delay p99",
        "Clock-timed responses %",
    ] {
        assert!(row.iter().all(|(c, _)| c != col), "{col} in {row:?}");
    }
    // Most responses land in a 25 ms stop: the median latency is the server's time plus
    // over a millisecond of the client's wait.
    let server_us = server_delay.as_micros() as f64;
    assert!(
        cell(&row, "p50 latency") >= server_us + 1000.0,
        "the wait is in the latency: {row:?}"
    );
    assert!(!text.contains("Client receive delay (kernel"), "{text}");
    assert!(
        !text.contains("The client was slow to read responses"),
        "{text}"
    );
}
