//! Does io_uring lower a client's CPU per request below epoll's? Two bare HTTP/1.1 keep-alive
//! clients, each doing only what any client must, run the same load one after the other.
//!
//! `cargo bench --bench uring_floor [-- [REQUESTS [C...]] [MODE...]]`
//!
//! - `epoll`: C connections, one request in flight on each: `epoll_wait`, then per ready
//!   connection one `recv` and, when its response is complete, one `send` of the next request.
//! - `uring`: the same C connections driven by one io_uring (`SINGLE_ISSUER | DEFER_TASKRUN`,
//!   registered ring fd, the sockets as fixed files): one multishot receive per connection
//!   reading into a ring of provided buffers, and per loop turn one `io_uring_enter` that
//!   submits every pending send (which posts no completion when it succeeds) and waits for at
//!   least one completion.
//! - `uring-oneshot`: as `uring`, but one plain receive per response into the
//!   connection's own buffer, submitted together with the send, instead of the multishot one.
//!
//! Both find the end of each response by its Content-Length and check its status line; no
//! other parsing, no timestamps, only counts. The load is POST /v2/models/identity/infer with
//! the body of `benches/peers/wrk-post.lua` to nginx on 127.0.0.1:18090 when it answers there
//! (`bash benches/peers/nginx.sh`), else to the in-process reference server pinned to
//! the last core. The client is this thread, pinned to core 0; its CPU is this thread's alone
//! (`RUSAGE_THREAD`), and against nginx the process's too (any io_uring worker thread would
//! show there). For each C (default 1 4 16 64; REQUESTS default 100,000, a quarter of it at
//! C = 1) the MODEs (default `epoll uring`) run in turn, twice (A B A B), and a summary line
//! gives each one's mean CPU per request over the first one's.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use inferperf::server::{self, ServeConfig, ServerHandle};
use io_uring::types::{BufRingEntry, Fixed};
use io_uring::{cqueue, opcode, squeue, IoUring};

const WARMUP: usize = 2000;
const NGINX: &str = "127.0.0.1:18090";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}"#;
/// The reference server's FP32 identity model has a batch dimension.
const BODY_REFERENCE: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}"#;
/// Receive buffer per connection (epoll, uring-oneshot) and per provided buffer (uring).
const BUF: usize = 4096;
/// `user_data` bit that marks a send's completion (posted only when the send fails).
const SEND: u64 = 1 << 32;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Epoll,
    Uring,
    UringOneshot,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Epoll => "epoll",
            Mode::Uring => "uring",
            Mode::UringOneshot => "uring-oneshot",
        }
    }
}

/// Where the load goes and the bytes of one request.
struct Target {
    addr: SocketAddr,
    request: Vec<u8>,
    /// nginx (true) or the in-process reference server, whose CPU the process figure includes.
    external: bool,
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let numbers: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let requests = numbers.first().copied().unwrap_or(100_000);
    let levels = match &numbers[..] {
        [_, levels @ ..] if !levels.is_empty() => levels.to_vec(),
        _ => vec![1, 4, 16, 64],
    };
    let all = [Mode::Epoll, Mode::Uring, Mode::UringOneshot];
    let mut modes: Vec<Mode> = args
        .iter()
        .filter_map(|a| all.iter().copied().find(|m| m.name() == a))
        .collect();
    if modes.is_empty() {
        modes = vec![Mode::Epoll, Mode::Uring];
    }
    let (target, server) = target();
    println!(
        "server: {} ({}); uring features: single_issuer defer_taskrun registered_ring_fd \
         fixed_files send_skip_success; uring: multishot_recv provided_buf_ring; \
         uring-oneshot: recv into own buffer",
        target.addr,
        if target.external {
            "nginx"
        } else {
            "in-process reference server"
        },
    );
    pin_client();
    for c in levels {
        let n = if c == 1 { requests / 4 } else { requests };
        let mut cpu = vec![Vec::new(); modes.len()];
        for _round in 0..2 {
            for (k, &mode) in modes.iter().enumerate() {
                let f = run(&target, mode, c, n);
                f.print(mode, c, n, target.external);
                cpu[k].push(f.cpu_us_per_req(n));
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let line: Vec<String> = modes
            .iter()
            .zip(&cpu)
            .skip(1)
            .map(|(m, v)| {
                let ratio = mean(v) / mean(&cpu[0]);
                format!("{}/{}={ratio:.3}", m.name(), modes[0].name())
            })
            .collect();
        println!("summary c={c}: {}", line.join(" "));
    }
    if let Some(server) = server {
        server.stop();
    }
}

/// nginx when it answers on its port, else the reference server on the last core.
fn target() -> (Target, Option<ServerHandle>) {
    let request = |addr: SocketAddr, model: &str, body: &str| {
        format!(
            "POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {addr}\r\nContent-Type: \
             application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    let nginx: SocketAddr = NGINX.parse().unwrap();
    if TcpStream::connect_timeout(&nginx, Duration::from_millis(200)).is_ok() {
        let t = Target {
            addr: nginx,
            request: request(nginx, "identity", BODY),
            external: true,
        };
        return (t, None);
    }
    let cores = inferperf::engine::available_cores();
    // The server's threads start from this (still unpinned) thread and pin themselves.
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        pin_cores: cores.last().map(|c| vec![c.id]).unwrap_or_default(),
        ..ServeConfig::default()
    };
    let server = server::start(cfg).expect("reference server starts");
    let t = Target {
        addr: server.addr,
        request: request(server.addr, "identity_fp32", BODY_REFERENCE),
        external: false,
    };
    (t, Some(server))
}

fn pin_client() {
    if let Some(first) = core_affinity::get_core_ids().and_then(|c| c.first().copied()) {
        core_affinity::set_for_current(first);
    }
}

/// CPU seconds (user, system) used so far by this thread or by the whole process.
fn cpu(who: i32) -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the call to fill.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Length of the whole response at the start of `b` (head plus Content-Length body); None
/// while it is incomplete. Panics on a status other than 200.
fn response_len(b: &[u8]) -> Option<usize> {
    let head = b.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    assert!(b.starts_with(b"HTTP/1.1 200 "), "not a 200 response");
    let body: usize = b[..head]
        .split(|&c| c == b'\n')
        .find_map(|line| {
            let (name, value) = line.split_at(line.iter().position(|&c| c == b':')?);
            if !name.eq_ignore_ascii_case(b"content-length") {
                return None;
            }
            std::str::from_utf8(&value[1..]).ok()?.trim().parse().ok()
        })
        .expect("a Content-Length header");
    (head + body <= b.len()).then_some(head + body)
}

/// One connection's socket and its bytes of a response not yet complete.
struct Conn {
    stream: TcpStream,
    buf: Box<[u8; BUF]>,
    have: usize,
}

impl Conn {
    /// Appends `data`; true when it completes the response (exactly: one request in flight).
    fn take(&mut self, data: &[u8]) -> bool {
        self.buf[self.have..self.have + data.len()].copy_from_slice(data);
        self.have += data.len();
        self.check()
    }

    /// True, and the buffer emptied, when the bytes held are one whole response.
    fn check(&mut self) -> bool {
        let Some(len) = response_len(&self.buf[..self.have]) else {
            return false;
        };
        assert_eq!(len, self.have, "bytes past the one response in flight");
        self.have = 0;
        true
    }
}

fn connect(t: &Target, c: usize) -> Vec<Conn> {
    (0..c)
        .map(|_| {
            let stream = TcpStream::connect(t.addr).expect("connect");
            stream.set_nodelay(true).unwrap();
            stream.set_nonblocking(true).unwrap();
            let buf = Box::new([0; BUF]);
            Conn {
                stream,
                buf,
                have: 0,
            }
        })
        .collect()
}

/// The thread's and the process's CPU (user, system) and the clock at the end of the warm-up.
type Start = ((f64, f64), (f64, f64), Instant);

/// The requests of one run: which may still be sent, which are done, and the CPU, clock and
/// call counts from the end of the warm-up on.
struct Count {
    total: usize,
    issued: usize,
    done: usize,
    start: Option<Start>,
    /// Completion-waiting calls (`epoll_wait` / `io_uring_enter`), receives, sends, CQEs.
    waits: u64,
    recvs: u64,
    sends: u64,
    cqes: u64,
}

impl Count {
    fn new(requests: usize) -> Count {
        Count {
            total: WARMUP + requests,
            issued: 0,
            done: 0,
            start: None,
            waits: 0,
            recvs: 0,
            sends: 0,
            cqes: 0,
        }
    }

    fn may_issue(&mut self) -> bool {
        let ok = self.issued < self.total;
        self.issued += ok as usize;
        self.sends += ok as u64;
        ok
    }

    fn complete(&mut self) {
        self.done += 1;
        if self.done == WARMUP {
            let now = (cpu(libc::RUSAGE_THREAD), cpu(libc::RUSAGE_SELF));
            self.start = Some((now.0, now.1, Instant::now()));
            (self.waits, self.recvs, self.sends, self.cqes) = (0, 0, 0, 0);
        }
    }

    fn finish(&self) -> Figures {
        let (thread0, proc0, t0) = self.start.expect("the warm-up ended");
        let (thread, process) = (cpu(libc::RUSAGE_THREAD), cpu(libc::RUSAGE_SELF));
        Figures {
            user: thread.0 - thread0.0,
            sys: thread.1 - thread0.1,
            process: process.0 + process.1 - proc0.0 - proc0.1,
            wall: t0.elapsed().as_secs_f64(),
            calls: [self.waits, self.recvs, self.sends, self.cqes],
        }
    }
}

struct Figures {
    user: f64,
    sys: f64,
    process: f64,
    wall: f64,
    calls: [u64; 4],
}

impl Figures {
    fn cpu_us_per_req(&self, n: usize) -> f64 {
        (self.user + self.sys) * 1e6 / n as f64
    }

    fn print(&self, mode: Mode, c: usize, n: usize, external: bool) {
        let per = |x: f64| x * 1e6 / n as f64;
        let calls = |k: usize| self.calls[k] as f64 / n as f64;
        let process = if external {
            format!(" process_us={:.2}", per(self.process))
        } else {
            String::new()
        };
        println!(
            "c={c} {:<13} requests={n} cpu_us_per_req={:.2} (user {:.2} sys {:.2}){process} \
             req_per_s={:.0} per_req: waits={:.3} recvs={:.3} sends={:.3} cqes={:.3}",
            mode.name(),
            self.cpu_us_per_req(n),
            per(self.user),
            per(self.sys),
            n as f64 / self.wall,
            calls(0),
            calls(1),
            calls(2),
            calls(3),
        );
    }
}

fn run(t: &Target, mode: Mode, c: usize, requests: usize) -> Figures {
    match mode {
        Mode::Epoll => run_epoll(t, c, requests),
        Mode::Uring | Mode::UringOneshot => run_uring(t, c, requests, mode == Mode::Uring),
    }
}

fn send_all(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice; `fd` is an open socket.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
        assert!(n > 0, "send: {}", std::io::Error::last_os_error());
        bytes = &bytes[n as usize..];
    }
}

fn run_epoll(t: &Target, c: usize, requests: usize) -> Figures {
    let mut conns = connect(t, c);
    // SAFETY: plain system calls on descriptors this process owns.
    let ep = unsafe { libc::epoll_create1(0) };
    assert!(ep >= 0, "epoll_create1");
    for (i, conn) in conns.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: `ev` lives across the call; `ep` and the socket are open.
        let rc =
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, conn.stream.as_raw_fd(), &mut ev) };
        assert_eq!(rc, 0, "epoll_ctl");
    }
    let mut count = Count::new(requests);
    for conn in &conns {
        if count.may_issue() {
            send_all(conn.stream.as_raw_fd(), &t.request);
        }
    }
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; c];
    while count.done < count.total {
        // SAFETY: `events` has room for `c` entries; `ep` is open.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), c as i32, -1) };
        count.waits += 1;
        for ev in &events[..n.max(0) as usize] {
            let conn = &mut conns[ev.u64 as usize];
            let fd = conn.stream.as_raw_fd();
            let room = &mut conn.buf[conn.have..];
            // SAFETY: `room` is live and writable; `fd` is an open socket.
            let got = unsafe { libc::recv(fd, room.as_mut_ptr().cast(), room.len(), 0) };
            count.recvs += 1;
            if got < 0 {
                let err = std::io::Error::last_os_error();
                assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "recv: {err}");
                continue;
            }
            assert!(got > 0, "the server closed the connection");
            conn.have += got as usize;
            if conn.check() {
                count.complete();
                if count.may_issue() {
                    send_all(fd, &t.request);
                }
            }
        }
    }
    let figures = count.finish();
    // SAFETY: `ep` is open and no longer used.
    unsafe { libc::close(ep) };
    figures
}

/// A ring of provided receive buffers (kernel >= 5.19): the kernel picks one per receive
/// completion; the client hands it back after reading it.
struct BufRing {
    ring: *mut BufRingEntry,
    entries: u16,
    bufs: *mut u8,
    /// The next tail to publish: buffers handed back since the last publish are before it.
    tail: u16,
}

impl BufRing {
    fn new(entries: u16) -> BufRing {
        let bytes = entries as usize * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping (page aligned, as the kernel requires).
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ring, libc::MAP_FAILED, "mmap");
        let bufs = Box::leak(vec![0u8; entries as usize * BUF].into_boxed_slice()).as_mut_ptr();
        let mut r = BufRing {
            ring: ring.cast(),
            entries,
            bufs,
            tail: 0,
        };
        (0..entries).for_each(|bid| r.give_back(bid));
        r.publish();
        r
    }

    fn give_back(&mut self, bid: u16) {
        let slot = (self.tail & (self.entries - 1)) as usize;
        // SAFETY: `slot` < `entries`, inside the mapping; the kernel reads only published slots.
        let e = unsafe { &mut *self.ring.add(slot) };
        e.set_addr(self.bufs as u64 + bid as u64 * BUF as u64);
        e.set_len(BUF as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field lies in the first entry of the live mapping; the kernel reads
        // it concurrently, hence the atomic release store.
        unsafe {
            let tail = BufRingEntry::tail(self.ring).cast::<std::sync::atomic::AtomicU16>();
            (*tail).store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }

    /// The first `len` bytes of buffer `bid`, which the kernel has just filled.
    fn data(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < self.entries && len <= BUF);
        // SAFETY: inside the leaked buffer area; the kernel does not write a buffer between
        // its completion and its hand-back.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid as usize * BUF), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        let bytes = self.entries as usize * std::mem::size_of::<BufRingEntry>();
        // SAFETY: the mapping and the buffer area came from `new`; the ring that used them is
        // gone (it is created after this and dropped before it).
        unsafe {
            libc::munmap(self.ring.cast(), bytes);
            let all = std::ptr::slice_from_raw_parts_mut(self.bufs, self.entries as usize * BUF);
            drop(Box::from_raw(all));
        }
    }
}

fn push(sq: &mut squeue::SubmissionQueue<'_>, e: squeue::Entry) {
    // SAFETY: what the entry points at (the request bytes, a connection's buffer) lives until
    // its completion.
    unsafe { sq.push(&e) }.expect("the submission queue has room for 2 entries a connection")
}

fn run_uring(t: &Target, c: usize, requests: usize, multishot: bool) -> Figures {
    let mut conns = connect(t, c);
    let entries = (4 * c).max(64).next_power_of_two() as u32;
    let mut bufs = BufRing::new(entries as u16);
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(2 * entries)
        .build(entries)
        .expect("io_uring with SINGLE_ISSUER and DEFER_TASKRUN (Linux >= 6.1)");
    let (mut sub, mut sq, mut cq) = ring.split();
    sub.register_ring_fd().expect("registered ring fd");
    let fds: Vec<i32> = conns.iter().map(|c| c.stream.as_raw_fd()).collect();
    sub.register_files(&fds).expect("fixed files");
    // SAFETY: the mapping outlives the ring (see `BufRing::drop`).
    unsafe { sub.register_buf_ring_with_flags(bufs.ring as u64, bufs.entries, 0, 0) }
        .expect("provided buffer ring (Linux >= 5.19)");
    let send = |i: usize| {
        opcode::Send::new(Fixed(i as u32), t.request.as_ptr(), t.request.len() as u32)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(SEND | i as u64)
    };
    let recv = |i: usize, conns: &mut [Conn]| match multishot {
        true => opcode::RecvMulti::new(Fixed(i as u32), 0)
            .build()
            .user_data(i as u64),
        false => {
            let room = &mut conns[i].buf[conns[i].have..];
            opcode::Recv::new(Fixed(i as u32), room.as_mut_ptr(), room.len() as u32)
                .build()
                .user_data(i as u64)
        }
    };
    let mut count = Count::new(requests);
    for i in 0..c {
        push(&mut sq, recv(i, &mut conns));
        if count.may_issue() {
            push(&mut sq, send(i));
        }
    }
    while count.done < count.total {
        sq.sync();
        // Publishes the head: the kernel counts CQEs not yet consumed as already there.
        cq.sync();
        sub.submit_and_wait(1).expect("io_uring_enter");
        count.waits += 1;
        cq.sync();
        for cqe in &mut cq {
            count.cqes += 1;
            let (ud, res, flags) = (cqe.user_data(), cqe.result(), cqe.flags());
            let i = (ud & !SEND) as usize;
            assert!(
                ud & SEND == 0,
                "send: {}",
                std::io::Error::from_raw_os_error(-res)
            );
            let rearm = !multishot || !cqueue::more(flags);
            if res == -libc::ENOBUFS {
                push(&mut sq, recv(i, &mut conns));
                continue;
            }
            assert!(
                res >= 0,
                "recv: {}",
                std::io::Error::from_raw_os_error(-res)
            );
            assert!(res > 0, "the server closed the connection");
            count.recvs += 1;
            let conn = &mut conns[i];
            let done = if multishot {
                let bid = cqueue::buffer_select(flags).expect("a provided buffer");
                let data = bufs.data(bid, res as usize);
                let done = match conn.have {
                    0 if response_len(data) == Some(data.len()) => true,
                    _ => conn.take(data),
                };
                bufs.give_back(bid);
                done
            } else {
                conn.have += res as usize;
                conn.check()
            };
            if rearm {
                push(&mut sq, recv(i, &mut conns));
            }
            if done {
                count.complete();
                if count.may_issue() {
                    push(&mut sq, send(i));
                }
            }
        }
        bufs.publish();
    }
    let figures = count.finish();
    drop((sq, cq, sub));
    drop(ring);
    drop(bufs);
    figures
}
