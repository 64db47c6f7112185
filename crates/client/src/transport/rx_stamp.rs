//! Kernel receive timestamps on plain TCP sockets (`SO_TIMESTAMPNS`).
//!
//! The kernel stamps each incoming segment when the network stack takes it (for loopback:
//! when the server's write passes through the loopback device). A `recvmsg` returns the
//! stamp of the last segment it consumed, so the stamp is never earlier than the arrival of
//! any byte the read returned and never later than the read itself. With it, a worker may
//! let several streams' data accumulate between polls without moving any arrival time.
//!
//! The stamp is CLOCK_REALTIME; [`arrival`] maps it onto the run's [`Clock`] by the
//! offset between the two clocks read at the same moment, so NTP slewing during a long run
//! does not accumulate.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use mio::net::TcpStream;

use crate::clock::Clock;
use crate::measure::RxTime;

/// Asks the kernel to stamp segments arriving on `sock`.
pub fn enable(sock: &TcpStream) -> io::Result<()> {
    set_socket_option(sock.as_raw_fd(), libc::SO_TIMESTAMPNS, 1)
}

/// `setsockopt(fd, SOL_SOCKET, name, value)` for an int-sized option.
pub(crate) fn set_socket_option(
    fd: RawFd,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a valid socket fd and a c_int option value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Room for an `SCM_TIMESTAMPNS` control message (a timespec) and, on a socket that also has
/// send stamps on (`tx_stamp`), the `SCM_TIMESTAMPING` one the kernel then adds to every read
/// (three timespecs), u64-aligned.
const CONTROL_WORDS: usize = 16;

/// One non-blocking read into `buf`: the bytes read (0 at EOF) and the realtime stamp (ns
/// since the epoch) of the last segment consumed, when the kernel supplied one.
pub fn recv(sock: &TcpStream, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    recv_fd(sock.as_raw_fd(), buf)
}

/// [`recv`] on any socket descriptor.
pub(crate) fn recv_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: fd is a socket; msg describes `buf` and `control`, both live and writable.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((n as usize, stamp_of(&msg)))
}

/// The `SCM_TIMESTAMPNS` stamp in a received message's control data.
pub(crate) fn stamp_of(msg: &libc::msghdr) -> Option<u64> {
    timespec_of(msg, libc::SCM_TIMESTAMPNS)
}

/// The first timespec (ns since the epoch, non-zero) of the `SOL_SOCKET` control message of
/// type `kind` in a received message; `None` without one or when the kernel truncated the
/// control data.
pub(crate) fn timespec_of(msg: &libc::msghdr, kind: libc::c_int) -> Option<u64> {
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return None;
    }
    // SAFETY: the CMSG_* walk stays inside msg_control/msg_controllen as the kernel filled it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let c = &*cmsg;
            if c.cmsg_level == libc::SOL_SOCKET && c.cmsg_type == kind {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                let ns = (ts.tv_sec as u64)
                    .checked_mul(1_000_000_000)?
                    .checked_add(ts.tv_nsec as u64)?;
                return (ns != 0).then_some(ns);
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// CLOCK_REALTIME now, in ns since the epoch.
fn realtime_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// A read's arrival time and the time the worker made the read, both on the run's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// When the data arrived: the kernel stamp, or `read_ns` without a usable one.
    pub at_ns: u64,
    /// When the read returned.
    pub read_ns: u64,
    /// `at_ns` is the kernel's stamp (else the clock at the read).
    pub stamped: bool,
}

impl Arrival {
    /// How the read was timed, for a record.
    pub fn rx_time(&self) -> RxTime {
        if self.stamped {
            RxTime::Kernel
        } else {
            RxTime::Clock
        }
    }

    /// The client's own delay before it read the data (ns): 0 without a stamp.
    pub fn delay_ns(&self) -> u64 {
        self.read_ns - self.at_ns
    }
}

/// When the data of a read that has just returned arrived, on the run's `clock` (with the
/// read time and whether the stamp was used): the kernel stamp mapped by the offset between
/// the two clocks read back to back now, kept within `[floor_ns, now]` (a stamp outside it
/// means a clock step, and the read time is then the honest answer). Without a stamp, now.
pub fn arrival(stamp: Option<u64>, floor_ns: u64, clock: &Clock) -> Arrival {
    let now_ns = clock.now_ns();
    let by_clock = Arrival {
        at_ns: now_ns,
        read_ns: now_ns,
        stamped: false,
    };
    let Some(stamp) = stamp else {
        return by_clock;
    };
    let offset = realtime_ns() - now_ns as i128;
    let at = stamp as i128 - offset;
    if at > now_ns as i128 || at < floor_ns as i128 {
        return by_clock;
    }
    Arrival {
        at_ns: at as u64,
        read_ns: now_ns,
        stamped: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    fn pair() -> (std::net::TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        client.set_nonblocking(true).unwrap();
        (server, TcpStream::from_std(client))
    }

    #[test]
    fn arrival_keeps_a_stamp_within_the_request_and_falls_back_to_the_clock() {
        let clock = Clock::new();
        let none = arrival(None, 0, &clock);
        assert!(!none.stamped);
        assert_eq!((none.at_ns, none.delay_ns()), (none.read_ns, 0));
        assert_eq!(none.rx_time(), RxTime::Clock);

        // A stamp 2 ms ago, on the realtime clock, inside a request that started 5 ms ago.
        let start = clock.now_ns() - 5_000_000;
        let stamp = (realtime_ns() - 2_000_000) as u64;
        let a = arrival(Some(stamp), start, &clock);
        assert!(a.stamped);
        assert_eq!(a.rx_time(), RxTime::Kernel);
        assert!(a.at_ns >= start && a.at_ns <= a.read_ns);
        assert!(a.delay_ns() >= 2_000_000, "{a:?}");

        // Before the request started, or in the future: a clock step; the read time is used.
        let early = arrival(Some(stamp), clock.now_ns(), &clock);
        assert!(!early.stamped && early.delay_ns() == 0);
        let future = arrival(Some((realtime_ns() + 1_000_000_000) as u64), 0, &clock);
        assert!(!future.stamped && future.delay_ns() == 0);
    }

    #[test]
    fn stamps_lie_between_the_write_and_the_read() {
        let clock = Clock::new();
        let (mut server, client) = pair();
        enable(&client).unwrap();
        let mut buf = [0u8; 64];
        // The kernel switches stamping on from a work item when the first socket asks, so
        // the first segments may come unstamped: exchange bytes until one is stamped.
        let stamped = (0..200).any(|_| {
            server.write_all(b".").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
            recv(&client, &mut buf).is_ok_and(|(_, s)| s.is_some())
        });
        assert!(stamped, "the kernel never stamped a segment");
        assert_eq!(
            recv(&client, &mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let before = clock.now_ns();
        server.write_all(b"first").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (n, stamp) = recv(&client, &mut buf).unwrap();
        let at = arrival(stamp, before, &clock).at_ns;
        let now = clock.now_ns();
        assert_eq!(&buf[..n], b"first");
        assert!(stamp.is_some(), "the kernel gave no stamp");
        // Written at `before`, read 20 ms later: the stamp is the write, not the read.
        assert!(at >= before && at + 15_000_000 < now, "{before} {at} {now}");
    }

    #[test]
    fn without_the_option_there_is_no_stamp_and_eof_reads_zero() {
        let (mut server, client) = pair();
        server.write_all(b"x").unwrap();
        drop(server);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mut buf = [0u8; 8];
        assert_eq!(recv(&client, &mut buf).unwrap(), (1, None));
        assert_eq!(recv(&client, &mut buf).unwrap(), (0, None));
    }

    #[test]
    fn out_of_range_stamps_fall_back_to_the_read_time() {
        let clock = Clock::new();
        let before = clock.now_ns();
        let read = |at: u64| at >= before && at <= clock.now_ns();
        assert!(read(arrival(None, 0, &clock).at_ns));
        // A stamp an hour ahead of the read (a clock step) is not believed.
        let ahead = (realtime_ns() + 3_600_000_000_000) as u64;
        assert!(read(arrival(Some(ahead), 0, &clock).at_ns));
        // Nor one before the request was sent.
        let early = (realtime_ns() - 1_000_000_000) as u64;
        assert!(read(arrival(Some(early), before, &clock).at_ns));
        // One a second ago, after the floor, is taken as it is.
        let second_ago = arrival(Some(early), 0, &clock).at_ns;
        assert!(second_ago + 900_000_000 < before, "{second_ago} {before}");
    }
}
