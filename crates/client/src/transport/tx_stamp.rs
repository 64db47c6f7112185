//! Kernel send timestamps on plain TCP sockets (`SO_TIMESTAMPING` with
//! `SOF_TIMESTAMPING_TX_SOFTWARE`).
//!
//! The kernel stamps a `write`'s data when the device takes it (for loopback: in the
//! loopback driver's transmit, right after a packet capture on `lo` sees the segment) and
//! queues the stamp on the socket's error queue; [`take`] reads it back with
//! `recvmsg(MSG_ERRQUEUE)`. Everything between the worker's clock read before the `write` and
//! the segment leaving (the system call, TCP's own work, an interrupt or the hypervisor
//! taking the CPU on the way) is then outside the request's latency, as the receive stamps
//! keep the wait before a read outside it. The stamp is of the segment holding the last byte
//! the `write` took: for a request that fits one segment (every request under the loopback
//! MTU of 64 KiB, or a TSO segment of a real NIC), the time its first byte left.
//!
//! The cost is one more system call per request (a `recvmmsg` of the error queue);
//! `--no-kernel-tx-stamps` turns it off, and the send time is then the clock read just
//! before the `write`.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{rx_stamp, Transport};
use crate::clock::Clock;

/// Asks the kernel to stamp each write's data as it leaves, reported on the error queue
/// without the data (`OPT_TSONLY`).
pub fn enable(fd: RawFd) -> io::Result<()> {
    let flags = libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    rx_stamp::set_socket_option(fd, libc::SO_TIMESTAMPING, flags as libc::c_int)
}

/// Room for the control messages of one error-queue entry (`SCM_TIMESTAMPING`, three
/// timespecs, and the `IP_RECVERR` extended error), u64-aligned.
const CONTROL_WORDS: usize = 24;

/// Error-queue entries read by one system call: one per write since the last call, normally
/// one, so the read that finds the stamp also finds the queue empty.
const BATCH: usize = 4;

/// Empties the socket's error queue and returns the newest send stamp in it (realtime ns
/// since the epoch): the stamp of the last write, when the kernel sent its data before the
/// write returned. Stamps of earlier writes still queued are dropped with it. One
/// `recvmmsg` call unless more than [`BATCH`] entries wait.
pub fn take(fd: RawFd) -> Option<u64> {
    let mut newest = None;
    loop {
        let mut control = [[0u64; CONTROL_WORDS]; BATCH];
        // SAFETY: mmsghdr is plain data; every pointer set below outlives the call.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (m, c) in msgs.iter_mut().zip(control.iter_mut()) {
            m.msg_hdr.msg_control = c.as_mut_ptr().cast();
            m.msg_hdr.msg_controllen = std::mem::size_of_val(c) as _;
        }
        // SAFETY: fd is a socket; each message has no data buffer and a live, writable
        // control one; no timeout. An empty queue fails with EAGAIN.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                msgs.as_mut_ptr(),
                BATCH as _,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let n = if n > 0 { n as usize } else { 0 };
        // ts[0] of `SCM_TIMESTAMPING` is the software stamp (ts[1], ts[2]: hardware).
        for m in &msgs[..n] {
            if let Some(ns) = rx_stamp::timespec_of(&m.msg_hdr, libc::SCM_TIMESTAMPING) {
                newest = Some(ns);
            }
        }
        if n < BATCH {
            return newest;
        }
    }
}

/// Requests of a run that asked for send stamps but started at the clock read (the socket
/// refused the option, or a write's stamp was missing or outside its span), shared by the
/// run's pools; counted only then, so a stamped request touches no atomic.
#[derive(Debug, Default)]
pub struct Misses(AtomicU64);

impl Misses {
    /// `n` requests started by the clock.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The count so far, reset to 0.
    pub fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }

    /// The report's line for the requests started by the clock so far (`None` for none),
    /// the count reset to 0.
    pub fn take_line(&self) -> Option<String> {
        let n = self.take();
        (n > 0).then(|| {
            format!(
                "Requests started by the clock (no kernel send stamp for the write of their \
                 first byte): {n}"
            )
        })
    }
}

/// The send time of a write whose clock read before the call was `before_ns`: the kernel's
/// stamp on the run's `clock` when it lies in `[before_ns, now]` (one outside means a stamp
/// of another write or a clock step), else `before_ns`.
pub fn send_time(stamp: Option<u64>, before_ns: u64, clock: &Clock) -> (u64, bool) {
    // No stamp: no clock read either.
    match stamp.map(|s| rx_stamp::arrival(Some(s), before_ns, clock)) {
        Some(a) if a.stamped => (a.at_ns, true),
        _ => (before_ns, false),
    }
}

/// A plain-TCP connection's send stamps: whether its socket gives them, and the run's count
/// of requests started by the clock instead. One per connection of a run that asked for
/// them; none over TLS.
pub struct SendStamps {
    on: bool,
    misses: Arc<Misses>,
}

impl SendStamps {
    /// Asks `transport`'s socket for send stamps; `None` over TLS, whose writes are timed by
    /// the clock read before the push of the encrypted records.
    pub fn new(misses: Arc<Misses>, transport: &mut Transport) -> Option<SendStamps> {
        if transport.is_tls() {
            return None;
        }
        let on = transport.enable_tx_stamps();
        Some(SendStamps { on, misses })
    }

    /// Asks the socket of a reconnected `transport`.
    pub fn attach(&mut self, transport: &mut Transport) {
        self.on = transport.enable_tx_stamps();
    }

    /// The start of the `requests` requests whose first bytes the write that has just
    /// returned on `transport` carried, its clock read before the call being `before_ns`:
    /// the write's send stamp (see [`send_time`]), or `before_ns`, counted as `requests`
    /// started by the clock.
    pub fn start(
        &self,
        transport: &Transport,
        before_ns: u64,
        requests: u64,
        clock: &Clock,
    ) -> u64 {
        let stamp = if self.on {
            transport.take_tx_stamp()
        } else {
            None
        };
        let (at, stamped) = send_time(stamp, before_ns, clock);
        if !stamped {
            self.misses.add(requests);
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    /// A write on a stamped loopback connection leaves a stamp between the clock read before
    /// it and the moment it is taken; without `enable` there is none.
    #[test]
    fn a_write_is_stamped_when_it_leaves() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let clock = Clock::new();
        let fd = client.as_raw_fd();

        let before = clock.now_ns();
        client.write_all(b"no stamps asked").unwrap();
        assert_eq!(take(fd), None);

        enable(fd).unwrap();
        for i in 0..3 {
            let before_ns = clock.now_ns();
            client.write_all(b"ping").unwrap();
            let (at, stamped) = send_time(take(fd), before_ns, &clock);
            assert!(stamped, "write {i}: no stamp");
            assert!(at >= before_ns && at <= clock.now_ns(), "write {i}");
            assert!(at >= before);
        }
        // More writes than one read of the queue takes, then one take: the newest stamp,
        // and the queue is empty after.
        for _ in 0..BATCH + 1 {
            client.write_all(b"a").unwrap();
        }
        let between = clock.now_ns();
        client.write_all(b"b").unwrap();
        let (at, stamped) = send_time(take(fd), between, &clock);
        assert!(stamped && at >= between);
        assert_eq!(take(fd), None);

        let want = [
            &b"no stamps askedpingpingping"[..],
            &[b'a'; BATCH + 1],
            b"b",
        ]
        .concat();
        let mut got = vec![0u8; want.len()];
        server.read_exact(&mut got).unwrap();
        assert_eq!(got, want);
    }

    /// Requests started by the clock are counted per run and reported only when there are
    /// some.
    #[test]
    fn clock_starts_are_counted_and_reported() {
        let misses = Misses::default();
        assert_eq!(misses.take_line(), None);
        misses.add(1);
        misses.add(3);
        let line = misses.take_line().unwrap();
        assert!(line.ends_with("byte): 4"), "{line}");
        assert_eq!(misses.take(), 0);
    }

    /// A stamp outside the window is not used: the clock read stands.
    #[test]
    fn a_stamp_outside_the_window_falls_back_to_the_clock() {
        let clock = Clock::new();
        let before = clock.now_ns() + 1_000_000_000;
        assert_eq!(send_time(Some(1), before, &clock), (before, false));
        assert_eq!(send_time(None, before, &clock), (before, false));
    }
}
