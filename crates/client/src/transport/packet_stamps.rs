//! Per-segment receive times from a packet socket (`AF_PACKET`), for reads that take several
//! chunks at once.
//!
//! A TCP socket's receive stamp (see [`super::rx_stamp`]) is the one of the last segment a
//! read consumed, so chunks that waited in the socket while the worker was descheduled all
//! get one time. A packet socket is handed every segment as the network stack takes it, each
//! with its own kernel stamp, whether or not anyone is reading. [`PacketStamps`] opens one
//! for the run (it needs root or `CAP_NET_RAW`), bound to the loopback device for a loopback
//! server (else to every device), with a classic BPF filter that passes only arriving TCP
//! segments from the server's address and port (loopback shows each packet twice: once
//! leaving, once arriving), cut to their headers. Every datagram comes with its own
//! `SCM_TIMESTAMPNS` stamp, the same stamp the TCP socket gives for that segment.
//!
//! Per connection (its local port) a [`Table`] keeps which range of the server's byte stream
//! each segment carried and its stamp. A sequence number becomes a stream offset by the
//! server's initial sequence number, taken from its SYN-ACK: the socket is open before any
//! connection of the run, and SYN-ACKs are kept by port even before the connection registers.
//!
//! A worker whose read returned bytes `[from, to)` of a connection's stream asks
//! [`PacketStamps::segments`] for the ends of the segments that carried them; an SSE event
//! then takes the stamp of the segment holding its last byte. The table is drained (one
//! `recvmmsg` per 32 datagrams) only when it does not already cover the read. Segments the
//! reader has consumed are dropped at its next question, and a connection keeps at most
//! [`MAX_SEGMENTS`], so a reader that stops reading cannot grow it. Datagrams the kernel
//! dropped (the packet socket's buffer full) are counted; a read whose bytes are not all in
//! recorded segments keeps its own time, and is counted too.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of each datagram the filter keeps: the largest IPv4 and TCP headers (60 + 60).
const SNAP: usize = 128;
/// Datagrams one `recvmmsg` takes.
const BATCH: usize = 32;
/// The packet socket's receive buffer (bytes; forced past `rmem_max` where allowed). The
/// kernel charges each datagram its whole buffer, cut to the headers or not.
const RCVBUF: libc::c_int = 64 << 20;
/// Segments kept per connection; the oldest go first.
pub const MAX_SEGMENTS: usize = 4096;
/// Room for one `SCM_TIMESTAMPNS` control message, u64-aligned.
const CONTROL_WORDS: usize = 8;

/// One TCP segment's header fields that matter here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub src: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    /// SYN and ACK both set: the server's answer to a connect.
    pub syn_ack: bool,
    /// Payload bytes (from the IP length fields, the datagram itself being cut to headers).
    pub payload: u32,
}

/// Reads an IPv4 or IPv6 packet (from its IP header on) as a TCP segment; `None` for
/// anything else, a fragment, or headers that do not hold together.
pub fn parse(pkt: &[u8]) -> Option<Segment> {
    let version = pkt.first()? >> 4;
    let (src, tcp_at, ip_payload) = match version {
        4 => {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            if ihl < 20 || pkt.len() < ihl || pkt[9] != libc::IPPROTO_TCP as u8 {
                return None;
            }
            // More fragments, or a fragment offset: not a whole segment.
            if u16::from_be_bytes([pkt[6], pkt[7]]) & 0x3fff != 0 {
                return None;
            }
            let total = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
            let src = Ipv4Addr::new(pkt[12], pkt[13], pkt[14], pkt[15]);
            (IpAddr::V4(src), ihl, total.checked_sub(ihl)?)
        }
        6 => {
            if pkt.len() < 40 || pkt[6] != libc::IPPROTO_TCP as u8 {
                return None;
            }
            let payload = usize::from(u16::from_be_bytes([pkt[4], pkt[5]]));
            let octets: [u8; 16] = pkt[8..24].try_into().ok()?;
            (IpAddr::V6(Ipv6Addr::from(octets)), 40, payload)
        }
        _ => return None,
    };
    let tcp = pkt.get(tcp_at..tcp_at + 14)?;
    let doff = usize::from(tcp[12] >> 4) * 4;
    if doff < 20 {
        return None;
    }
    let payload = ip_payload.checked_sub(doff)?;
    Some(Segment {
        src,
        src_port: u16::from_be_bytes([tcp[0], tcp[1]]),
        dst_port: u16::from_be_bytes([tcp[2], tcp[3]]),
        seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
        syn_ack: tcp[13] & 0x12 == 0x12,
        payload: u32::try_from(payload).ok()?,
    })
}

/// The stream range one segment carried and its stamp (realtime ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: u64,
    end: u64,
    stamp: u64,
}

/// One registered connection's segments, in arrival order.
#[derive(Debug, Default)]
struct Flow {
    /// Sequence number of the server's first data byte (SYN-ACK's + 1); `None` until seen.
    first_seq: Option<u32>,
    /// The highest stream offset seen: 32-bit sequence numbers are unwrapped near it.
    high: u64,
    spans: VecDeque<Span>,
}

/// Segments by connection, fed from the packet socket (or from bytes, in tests and fuzzing).
#[derive(Debug, Default)]
pub struct Table {
    flows: HashMap<u16, Flow>,
    /// First data sequence number by local port, from every SYN-ACK seen, so a connection
    /// that registers after its SYN-ACK was read still gets it.
    first_seq: HashMap<u16, u32>,
    /// The spans of one question (kept for its capacity: no allocation per read).
    scratch: Vec<Span>,
}

/// The 64-bit stream offset whose low 32 bits are `rel`, nearest `near`; `None` below 0.
fn unwrap(rel: u32, near: u64) -> Option<u64> {
    let diff = i64::from(rel.wrapping_sub(near as u32) as i32);
    u64::try_from((near as i64).checked_add(diff)?).ok()
}

impl Table {
    /// Starts keeping the segments of the connection on local port `port`.
    pub fn register(&mut self, port: u16) {
        let flow = Flow {
            first_seq: self.first_seq.get(&port).copied(),
            ..Flow::default()
        };
        self.flows.insert(port, flow);
    }

    /// Forgets the connection on `port` (closed or replaced).
    pub fn unregister(&mut self, port: u16) {
        self.flows.remove(&port);
        self.first_seq.remove(&port);
    }

    /// Takes one segment from the server, stamped `stamp` (0: the kernel gave no stamp; its
    /// bytes then have no time of their own).
    pub fn on_segment(&mut self, s: &Segment, stamp: u64) {
        let port = s.dst_port;
        if s.syn_ack {
            let first = s.seq.wrapping_add(1);
            self.first_seq.insert(port, first);
            if let Some(flow) = self.flows.get_mut(&port) {
                if flow.first_seq != Some(first) {
                    *flow = Flow {
                        first_seq: Some(first),
                        ..Flow::default()
                    };
                }
            }
            return;
        }
        if s.payload == 0 {
            return;
        }
        let Some(flow) = self.flows.get_mut(&port) else {
            return;
        };
        let Some(first) = flow.first_seq else {
            return;
        };
        let Some(start) = unwrap(s.seq.wrapping_sub(first), flow.high) else {
            return;
        };
        let end = start + u64::from(s.payload);
        flow.high = flow.high.max(end);
        if flow.spans.len() == MAX_SEGMENTS {
            flow.spans.pop_front();
        }
        flow.spans.push_back(Span { start, end, stamp });
    }

    /// The ends of the segments that carried bytes `[from, to)` of `port`'s stream, each with
    /// its stamp, in stream order, into `out` (an end past `to` is cut to it, so the last one
    /// is `to`; stamps never go back along the stream): true when every byte of the range is
    /// in a recorded segment, else `out` is left empty. Segments ending at or before `from`
    /// were consumed by earlier reads and are dropped.
    pub fn segments(&mut self, port: u16, from: u64, to: u64, out: &mut Vec<(u64, u64)>) -> bool {
        out.clear();
        let Some(flow) = self.flows.get_mut(&port) else {
            return false;
        };
        while flow.spans.front().is_some_and(|s| s.end <= from) {
            flow.spans.pop_front();
        }
        if from >= to {
            return true;
        }
        let spans = &mut self.scratch;
        spans.clear();
        let overlapping = flow.spans.iter().filter(|s| s.end > from && s.start < to);
        spans.extend(overlapping.copied());
        spans.sort_by_key(|s| (s.start, s.end));
        let mut covered = from;
        for s in spans.iter() {
            if s.start > covered || s.stamp == 0 {
                return false;
            }
            covered = covered.max(s.end);
        }
        if covered < to {
            return false;
        }
        out.extend(spans.iter().map(|s| (s.end.min(to), s.stamp)));
        out.sort_by_key(|e| e.0);
        // Stamps never go back along the stream (a byte carried twice, a retransmission,
        // is there once the later copy came), and one end keeps its latest stamp.
        let mut latest = 0;
        for e in out.iter_mut() {
            latest = latest.max(e.1);
            e.1 = latest;
        }
        out.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 = later.1;
            }
            same
        });
        true
    }

    /// Whether the table covers bytes `[from, to)` of `port`'s stream (no drain needed).
    fn covers(&self, port: u16, from: u64, to: u64) -> bool {
        let Some(flow) = self.flows.get(&port) else {
            return false;
        };
        // Spans arrive in stream order but for retransmissions: the common case is the
        // last span reaching `to` and the spans before it leaving no hole.
        let mut need = to;
        for s in flow.spans.iter().rev() {
            if s.end >= need && s.start < need {
                need = s.start;
                if need <= from {
                    return true;
                }
            }
        }
        from >= to
    }
}

/// What the packet socket did over a span of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Reads of an event stream that held several segments, their events timed per segment.
    pub split_reads: u64,
    /// Reads whose bytes were not all in recorded segments: they kept their own time.
    pub missed_reads: u64,
    /// Datagrams the kernel dropped (the packet socket's buffer was full).
    pub dropped: u64,
}

/// A connection's place in the run's packet socket table: its local port and how far the
/// server's byte stream has been read on it. Registered while it lives (or until the socket
/// is replaced: [`Link::attach`] again).
pub struct Link {
    stamps: Arc<PacketStamps>,
    /// The socket's local port (0: unknown, nothing is asked).
    port: u16,
    /// Bytes read from the socket since it connected: the stream offset of the next read.
    offset: u64,
    /// Segment ends (stream offsets) and stamps of the last read asked about.
    ends: Vec<(u64, u64)>,
}

impl Link {
    /// A link to `stream`'s socket, registered at once.
    pub fn new(stamps: Arc<PacketStamps>, stream: &super::Transport) -> Link {
        let mut link = Link {
            stamps,
            port: 0,
            offset: 0,
            ends: Vec::new(),
        };
        link.attach(stream);
        link
    }

    /// Registers `stream`'s local port (a new socket); its stream starts at offset 0.
    pub fn attach(&mut self, stream: &super::Transport) {
        self.detach();
        self.offset = 0;
        if let Ok(local) = stream.socket_ref().local_addr() {
            self.port = local.port();
            self.stamps.register(self.port);
        }
    }

    fn detach(&mut self) {
        if self.port != 0 {
            self.stamps.unregister(self.port);
            self.port = 0;
        }
    }

    /// A read returned `n` more bytes: returns the stream offset they start at.
    pub fn advance(&mut self, n: usize) -> u64 {
        let from = self.offset;
        self.offset += n as u64;
        from
    }

    /// Finds the segments that carried the stream from `from` to the last read's end, into
    /// [`Link::ends`]: false (and counted) when they were not all seen, or nothing is
    /// registered. A read that took several segments is counted as split.
    pub fn ask(&mut self, from: u64) -> bool {
        if self.port == 0 {
            return false;
        }
        if !self
            .stamps
            .segments(self.port, from, self.offset, &mut self.ends)
        {
            self.stamps.count_missed();
            return false;
        }
        if self.ends.len() > 1 {
            self.stamps.count_split();
        }
        true
    }

    /// The segments [`Link::ask`] found: each one's end (stream offset) and stamp, in order.
    pub fn ends(&self) -> &[(u64, u64)] {
        &self.ends
    }

    /// Takes the found segments out (to walk them while the link is borrowed elsewhere);
    /// [`Link::give_back`] returns the buffer.
    pub fn take_ends(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.ends)
    }

    pub fn give_back(&mut self, ends: Vec<(u64, u64)>) {
        self.ends = ends;
    }

    /// The stamp of the segment holding the byte just before stream offset `end` (an
    /// event's last byte), among those [`Link::ask`] found.
    pub fn stamp_before(&self, end: u64) -> Option<u64> {
        stamp_before(&self.ends, end)
    }
}

/// In segment ends and stamps (in stream order), the stamp of the segment that holds the
/// byte at `end - 1`: the first whose end is at or past `end`.
pub fn stamp_before(ends: &[(u64, u64)], end: u64) -> Option<u64> {
    let i = ends.partition_point(|&(e, _)| e < end);
    ends.get(i).map(|&(_, stamp)| stamp)
}

impl Drop for Link {
    fn drop(&mut self) {
        self.detach();
    }
}

/// The run's packet socket and its table (shared by every worker).
pub struct PacketStamps {
    fd: OwnedFd,
    server: SocketAddr,
    inner: Mutex<Inner>,
    split_reads: AtomicU64,
    missed_reads: AtomicU64,
    dropped: AtomicU64,
}

/// The table and the buffers `recvmmsg` fills.
struct Inner {
    table: Table,
    data: Box<[[u8; SNAP]; BATCH]>,
    control: Box<[[u64; CONTROL_WORDS]; BATCH]>,
}

impl std::fmt::Debug for PacketStamps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketStamps")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS: u16 = 0x20;
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_H_IND: u16 = 0x48;
const LDX_B_MSH: u16 = 0xb1;
const AND_K: u16 = 0x54;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
/// `SKF_AD_OFF + SKF_AD_PKTTYPE`: the ancillary load of the packet's type.
const AD_PKTTYPE: u32 = (libc::SKF_AD_OFF + 4) as u32;
/// `PACKET_OUTGOING`: a copy of a packet this host sends.
const OUTGOING: u32 = 4;

/// One step of the filter before its jumps are resolved.
enum Op {
    /// A load or ALU instruction.
    Do(u16, u32),
    /// Continue when the accumulator equals k, else drop.
    Need(u32),
    /// Drop when the accumulator equals k.
    Refuse(u32),
    /// Drop when any bit of k is set in the accumulator.
    RefuseBits(u32),
}

/// The filter: arriving IPv4/IPv6 TCP segments from `server`, cut to [`SNAP`] bytes.
fn filter(server: SocketAddr) -> Vec<libc::sock_filter> {
    let mut ops = vec![
        Op::Do(LD_W_ABS, AD_PKTTYPE),
        Op::Refuse(OUTGOING),
        Op::Do(LD_B_ABS, 0),
        Op::Do(AND_K, 0xf0),
    ];
    match server.ip() {
        IpAddr::V4(ip) => {
            ops.push(Op::Need(0x40));
            ops.push(Op::Do(LD_B_ABS, 9));
            ops.push(Op::Need(libc::IPPROTO_TCP as u32));
            ops.push(Op::Do(LD_H_ABS, 6));
            ops.push(Op::RefuseBits(0x3fff));
            ops.push(Op::Do(LD_W_ABS, 12));
            ops.push(Op::Need(u32::from(ip)));
            ops.push(Op::Do(LDX_B_MSH, 0));
            ops.push(Op::Do(LD_H_IND, 0));
        }
        IpAddr::V6(ip) => {
            ops.push(Op::Need(0x60));
            ops.push(Op::Do(LD_B_ABS, 6));
            ops.push(Op::Need(libc::IPPROTO_TCP as u32));
            for (i, word) in ip.octets().chunks(4).enumerate() {
                ops.push(Op::Do(LD_W_ABS, 8 + 4 * i as u32));
                ops.push(Op::Need(u32::from_be_bytes(word.try_into().unwrap())));
            }
            ops.push(Op::Do(LD_H_ABS, 40));
        }
    }
    ops.push(Op::Need(u32::from(server.port())));
    // Then: keep SNAP bytes; the last instruction drops.
    let drop_at = ops.len() + 1;
    let mut prog: Vec<libc::sock_filter> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let to_drop = (drop_at - i - 1) as u8;
            let (code, jt, jf, k) = match *op {
                Op::Do(code, k) => (code, 0, 0, k),
                Op::Need(k) => (JEQ_K, 0, to_drop, k),
                Op::Refuse(k) => (JEQ_K, to_drop, 0, k),
                Op::RefuseBits(k) => (JSET_K, to_drop, 0, k),
            };
            libc::sock_filter { code, jt, jf, k }
        })
        .collect();
    for k in [SNAP as u32, 0] {
        prog.push(libc::sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k,
        });
    }
    prog
}

/// `setsockopt` of a plain value.
fn set_opt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: a valid fd and a live value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The kernel turns receive stamping on for the whole system from a work item once a socket
/// asks, so packets right after [`PacketStamps::open`] may come unstamped: waits (50 ms at
/// most) until a datagram sent to itself over loopback comes back stamped.
fn wait_for_stamping() {
    let Ok(udp) = std::net::UdpSocket::bind("127.0.0.1:0") else {
        return;
    };
    let on: libc::c_int = 1;
    let fd = udp.as_raw_fd();
    // SAFETY: a valid socket fd and a c_int option value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let Ok(me) = udp.local_addr() else {
        return;
    };
    if rc != 0 {
        return;
    }
    let mut buf = [0u8; 8];
    for _ in 0..50 {
        if udp.send_to(b".", me).is_err() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        while let Ok((_, stamp)) = super::rx_stamp::recv_fd(fd, &mut buf) {
            if stamp.is_some() {
                return;
            }
        }
    }
}

impl PacketStamps {
    /// Opens the packet socket for connections to `server`. Fails without root or
    /// `CAP_NET_RAW` (`PermissionDenied`), or where the platform has no `AF_PACKET`.
    pub fn open(server: SocketAddr) -> io::Result<PacketStamps> {
        // Protocol 0: the socket receives nothing until it is bound, after its filter is set.
        // SAFETY: plain socket(2) call.
        let raw =
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut prog = filter(server);
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_mut_ptr(),
        };
        set_opt(&fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)?;
        set_opt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &(1 as libc::c_int),
        )?;
        if set_opt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &RCVBUF).is_err() {
            set_opt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &RCVBUF)?;
        }
        let ifindex = if server.ip().is_loopback() {
            // SAFETY: a NUL-terminated name.
            unsafe { libc::if_nametoindex(c"lo".as_ptr()) as libc::c_int }
        } else {
            0
        };
        // SAFETY: sockaddr_ll is plain data.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        addr.sll_ifindex = ifindex;
        // SAFETY: a valid fd and a sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        wait_for_stamping();
        Ok(PacketStamps {
            fd,
            server,
            inner: Mutex::new(Inner {
                table: Table::default(),
                data: Box::new([[0; SNAP]; BATCH]),
                control: Box::new([[0; CONTROL_WORDS]; BATCH]),
            }),
            split_reads: AtomicU64::new(0),
            missed_reads: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// The server whose segments are stamped.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts keeping the segments of our connection on local port `port` (call right after
    /// the connect is issued).
    pub fn register(&self, port: u16) {
        self.lock().table.register(port);
    }

    /// Forgets the connection on `port`.
    pub fn unregister(&self, port: u16) {
        self.lock().table.unregister(port);
    }

    /// [`Table::segments`] for a read that has just returned bytes `[from, to)` of `port`'s
    /// stream, after taking the datagrams waiting in the packet socket when the table does
    /// not cover them yet (the kernel hands a segment to packet sockets before TCP).
    pub fn segments(&self, port: u16, from: u64, to: u64, out: &mut Vec<(u64, u64)>) -> bool {
        let mut inner = self.lock();
        if !inner.table.covers(port, from, to) {
            self.drain(&mut inner);
        }
        inner.table.segments(port, from, to, out)
    }

    /// Counts a read timed per segment.
    pub fn count_split(&self) {
        self.split_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a read that kept its own time, its segments not all seen.
    pub fn count_missed(&self) {
        self.missed_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts since the last call (drops as the kernel counted them).
    pub fn take_stats(&self) -> PacketStats {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: a valid fd and a live tpacket_stats of the size passed; reading the
        // statistics resets the kernel's counters.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if rc == 0 {
            self.dropped
                .fetch_add(u64::from(st.tp_drops), Ordering::Relaxed);
        }
        PacketStats {
            split_reads: self.split_reads.swap(0, Ordering::Relaxed),
            missed_reads: self.missed_reads.swap(0, Ordering::Relaxed),
            dropped: self.dropped.swap(0, Ordering::Relaxed),
        }
    }

    /// Moves every datagram waiting in the packet socket into the table.
    fn drain(&self, inner: &mut Inner) {
        let Inner {
            table,
            data,
            control,
        } = inner;
        loop {
            // SAFETY: iovec and mmsghdr are plain data.
            let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
            let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            let slots = iovs.iter_mut().zip(hdrs.iter_mut());
            for ((iov, hdr), (buf, ctl)) in slots.zip(data.iter_mut().zip(control.iter_mut())) {
                *iov = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: SNAP,
                };
                let h = &mut hdr.msg_hdr;
                h.msg_iov = iov;
                h.msg_iovlen = 1;
                h.msg_control = ctl.as_mut_ptr().cast();
                h.msg_controllen = std::mem::size_of_val(&*ctl) as _;
            }
            // SAFETY: a valid fd; every header points into `iovs`, `data` and `control`,
            // which outlive the call.
            let n = unsafe {
                libc::recvmmsg(
                    self.fd.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    BATCH as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if n <= 0 {
                return;
            }
            let n = n as usize;
            for (hdr, buf) in hdrs.iter().zip(data.iter()).take(n) {
                let len = (hdr.msg_len as usize).min(SNAP);
                // 0: no stamp; a SYN-ACK still counts, a data segment is a hole.
                let stamp = super::rx_stamp::stamp_of(&hdr.msg_hdr).unwrap_or(0);
                let Some(seg) = parse(&buf[..len]) else {
                    continue;
                };
                if seg.src == self.server.ip() && seg.src_port == self.server.port() {
                    table.on_segment(&seg, stamp);
                }
            }
            if n < BATCH {
                return;
            }
        }
    }
}

/// Fuzz entry: `data` as packets (a length byte, then that many bytes, repeated), each given
/// to [`parse`] and the table, with range questions between them; nothing may panic and every
/// answer must be ordered and end at the range's end.
#[doc(hidden)]
pub fn fuzz_packets(data: &[u8]) {
    let mut table = Table::default();
    table.register(40000);
    let mut out = Vec::new();
    let mut rest = data;
    let mut at = 0u64;
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n).min(tail.len());
        let (pkt, tail) = tail.split_at(n);
        rest = tail;
        if let Some(mut seg) = parse(pkt) {
            seg.dst_port = 40000;
            table.on_segment(&seg, at + 1);
        }
        let (from, to) = (
            at % 3000,
            at % 3000 + u64::from(pkt.first().copied().unwrap_or(0)),
        );
        if table.segments(40000, from, to, &mut out) && from < to {
            assert_eq!(out.last().map(|e| e.0), Some(to));
            assert!(out.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        }
        at += 1;
    }
}

#[cfg(test)]
#[path = "packet_stamps_tests.rs"]
mod tests;
