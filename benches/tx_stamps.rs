//! Send-side kernel timestamps (`SO_TIMESTAMPING` with `SOF_TIMESTAMPING_TX_SOFTWARE`, the
//! default start of a request over plain TCP) against the clock read just before the `write`
//! of its first byte (`--no-kernel-tx-stamps`): what the stamp changes and what it costs.
//!
//! `cargo bench --bench tx_stamps [-- REQUESTS [ROUNDS]]` (defaults 20000 and 5)
//!
//! One HTTP/1.1 connection to the reference server's `simple` model at concurrency 1, the
//! server pinned to the last core, the client (this thread) to core 0. Per request the client
//! reads the run clock, writes the pre-encoded request, then (stamps on) reads the send stamp
//! from the socket's error queue (`recvmsg(MSG_ERRQUEUE)`, `transport::tx_stamp` as the
//! client does), waits in `epoll_wait` and reads the response until it is complete. The
//! rounds alternate stamps off and on. Printed: client
//! CPU per request (user + system, `RUSAGE_THREAD`) of each mode, mean and min-max over the
//! rounds; for the stamped rounds the send stamp minus the clock read before the `write`, and
//! the `write` call's own length (clock after it returns minus before), p50 / p99 / max; and how
//! often the stamp was not in the error queue when the `write` returned.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

use inferperf::clock::Clock;
use inferperf::config::TensorFormat;
use inferperf::protocol::http1::{Progress, ResponseReader};
use inferperf::server::{self, ServeConfig};
use inferperf::service::triton_http::{encode_infer_request, infer_path};
use inferperf::tensor::{DataType, InputTensor};
use inferperf::transport::tx_stamp;

const WARMUP: usize = 2000;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let requests = args.first().copied().unwrap_or(20_000);
    let rounds = args.get(1).copied().unwrap_or(5);
    let cores = inferperf::engine::available_cores();
    let server_core = cores.last().map(|c| vec![c.id]).unwrap_or_default();
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        pin_cores: server_core,
        ..ServeConfig::default()
    };
    let server = server::start(cfg).expect("reference server starts");
    let addr = server.addr;
    std::thread::spawn(move || {
        if let Some(first) = core_affinity::get_core_ids().and_then(|c| c.first().copied()) {
            core_affinity::set_for_current(first);
        }
        let request = simple_request(&addr.to_string());
        let clock = Clock::new();
        let (mut off, mut on) = (Vec::new(), Vec::new());
        let mut spans = Spans::default();
        for round in 0..rounds {
            off.push(run(addr, &request, &clock, requests, None));
            on.push(run(addr, &request, &clock, requests, Some(&mut spans)));
            eprintln!(
                "round {}: off {:.2} us, on {:.2} us",
                round + 1,
                off[round],
                on[round]
            );
        }
        let line = |name: &str, v: &[f64]| {
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let min = v.iter().copied().fold(f64::INFINITY, f64::min);
            let max = v.iter().copied().fold(0.0, f64::max);
            println!("{name}: cpu_us_per_req mean {mean:.2} (min {min:.2}, max {max:.2})");
            mean
        };
        let (a, b) = (line("tx stamps off", &off), line("tx stamps on", &on));
        println!(
            "cost: {:+.2} us per request ({:+.1} %)",
            b - a,
            (b / a - 1.0) * 100.0
        );
        spans.print();
    })
    .join()
    .unwrap();
    server.stop();
}

/// The pre-encoded HTTP/1.1 request of `simple` (two INT32 [1,16] inputs, binary).
fn simple_request(host: &str) -> Vec<u8> {
    let tensor = |name: &str, offset: i32| InputTensor {
        name: name.into(),
        datatype: DataType::I32,
        shape: vec![1, 16],
        data: (0..16)
            .flat_map(|v: i32| (v + offset).to_le_bytes())
            .collect(),
    };
    let inputs = vec![tensor("INPUT0", 0), tensor("INPUT1", 100)];
    let outputs = vec!["OUTPUT0".to_string(), "OUTPUT1".to_string()];
    let path = infer_path("simple", "");
    let binary = TensorFormat::Binary;
    encode_infer_request(host, &path, &inputs, &outputs, binary, binary, &[]).unwrap()
}

/// What the stamped rounds saw, in ns.
#[derive(Default)]
struct Spans {
    /// Send stamp minus the clock read before the write.
    stamp_after_read: Vec<i64>,
    /// The write call: clock after it returned minus before.
    write_call: Vec<i64>,
    /// Requests whose stamp was not queued when the write returned.
    late: u64,
    /// Requests that got no stamp at all.
    missing: u64,
}

impl Spans {
    fn print(&mut self) {
        for (name, v) in [
            ("tx stamp - clock before write", &mut self.stamp_after_read),
            ("write call", &mut self.write_call),
        ] {
            v.sort_unstable();
            if v.is_empty() {
                continue;
            }
            let p = |q: usize| v[(v.len() - 1) * q / 100];
            println!(
                "{name}: p50 {} ns, p99 {} ns, max {} ns (n={})",
                p(50),
                p(99),
                v[v.len() - 1],
                v.len()
            );
        }
        println!(
            "stamps not yet queued when the write returned: {}; never came: {}",
            self.late, self.missing
        );
    }
}

/// `requests` requests on a new connection (after a warm-up); with `spans`, send stamps on
/// and recorded there. Returns the client CPU per request (µs).
fn run(
    addr: std::net::SocketAddr,
    request: &[u8],
    clock: &Clock,
    requests: usize,
    mut spans: Option<&mut Spans>,
) -> f64 {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).unwrap();
    stream.set_nonblocking(true).unwrap();
    let fd = stream.as_raw_fd();
    if spans.is_some() {
        tx_stamp::enable(fd).expect("SO_TIMESTAMPING");
    }
    // SAFETY: plain system calls on descriptors this process owns.
    let ep = unsafe { libc::epoll_create1(0) };
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: `ev` lives across the call; `ep` and `fd` are open.
    assert_eq!(
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) },
        0
    );
    let mut buf = vec![0u8; 64 * 1024];
    let mut reader = ResponseReader::new();
    let mut cpu0 = 0.0;
    for i in 0..WARMUP + requests {
        if i == WARMUP {
            cpu0 = thread_cpu();
        }
        let before = clock.now_ns();
        send_all(fd, request);
        let returned = clock.now_ns();
        if let Some(s) = spans.as_deref_mut() {
            match tx_stamp::take(fd) {
                Some(stamp) => {
                    s.stamp_after_read
                        .push(to_clock(stamp, clock) - before as i64);
                    s.write_call.push((returned - before) as i64);
                }
                None => s.late += 1,
            }
        }
        let mut have = 0;
        reader.reset();
        loop {
            // SAFETY: one writable event slot; `ep` is open.
            unsafe { libc::epoll_wait(ep, &mut ev, 1, -1) };
            if let Some(s) = spans.as_deref_mut() {
                if ev.events & libc::EPOLLERR as u32 != 0 && tx_stamp::take(fd).is_none() {
                    s.missing += 1;
                }
            }
            loop {
                if have == buf.len() {
                    buf.resize(buf.len() * 2, 0);
                }
                // SAFETY: the slice is live and writable; `fd` is an open socket.
                let n = unsafe {
                    libc::recv(
                        fd,
                        buf[have..].as_mut_ptr().cast(),
                        buf.len() - have,
                        libc::MSG_DONTWAIT,
                    )
                };
                if n <= 0 {
                    break;
                }
                have += n as usize;
            }
            match reader.advance(&buf[..have]) {
                Ok(Progress::Done(_)) => break,
                Ok(Progress::NeedMore) => {}
                Err(e) => panic!("bad response: {e}"),
            }
        }
    }
    let cpu = thread_cpu() - cpu0;
    // SAFETY: `ep` is open and no longer used.
    unsafe { libc::close(ep) };
    cpu * 1e6 / requests as f64
}

fn send_all(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice; `fd` is an open socket.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
        assert!(n > 0, "send: {}", std::io::Error::last_os_error());
        bytes = &bytes[n as usize..];
    }
}

/// A realtime stamp on the run clock (by the offset between the two read back to back).
fn to_clock(stamp: u64, clock: &Clock) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let now = clock.now_ns() as i64;
    // SAFETY: a valid clock id and a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let real = ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
    stamp as i64 - (real - now)
}

/// CPU seconds (user + system) used so far by the calling thread.
fn thread_cpu() -> f64 {
    // SAFETY: `ru` is a valid, writable rusage for the call to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
