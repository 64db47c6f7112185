//! Blocking socket calls bounded by the server's stop flag and lifetime: every wait wakes at
//! least every [`TICK`](super::TICK) to look.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use super::{Shared, TICK};

/// Waits up to `timeout` for `fd` to become readable (or to have an error or hang-up).
pub(super) fn wait_readable(fd: RawFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd, its count is 1; poll only writes `revents`.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    n > 0
}

/// Sets the per-call timeouts the loops below rely on.
pub(super) fn prepare(s: &TcpStream) {
    let _ = s.set_read_timeout(Some(TICK));
    let _ = s.set_write_timeout(Some(TICK));
}

fn is_tick(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Reads what is there into `buf` (appending up to `max` more bytes). `None` when the peer
/// closed, the read failed, or the server is stopping.
pub(super) fn read_more(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    max: usize,
    sh: &Shared,
) -> Option<usize> {
    let mut chunk = [0u8; 16 * 1024];
    let want = max.min(chunk.len()).max(1);
    loop {
        if sh.done() {
            return None;
        }
        match s.read(&mut chunk[..want]) {
            Ok(0) => return None,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Some(n);
            }
            Err(e) if is_tick(&e) => continue,
            Err(_) => return None,
        }
    }
}

/// Writes all of `bytes`, waiting while the peer does not read. `false` when the peer is gone
/// or the server is stopping.
pub(super) fn write_all(s: &mut TcpStream, mut bytes: &[u8], sh: &Shared) -> bool {
    while !bytes.is_empty() {
        if sh.done() {
            return false;
        }
        match s.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(e) if is_tick(&e) => continue,
            Err(_) => return false,
        }
    }
    true
}

/// Writes `bytes` one at a time, [`DRIP_EVERY`](super::DRIP_EVERY) apart. `false` when the
/// peer is gone or the server is stopping.
pub(super) fn drip(s: &mut TcpStream, bytes: &[u8], sh: &Shared) -> bool {
    for (i, byte) in bytes.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(super::DRIP_EVERY);
        }
        if !write_all(s, std::slice::from_ref(byte), sh) {
            return false;
        }
    }
    true
}

/// Keeps the connection open, reading and dropping whatever arrives, until the peer closes
/// it or the server stops.
pub(super) fn hold(s: &mut TcpStream, sh: &Shared) {
    let mut sink = [0u8; 16 * 1024];
    while !sh.done() {
        match s.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_tick(&e) => {}
            Err(_) => return,
        }
    }
}

/// Keeps the connection open without reading a byte until the peer hangs up or the server
/// stops (what reaches the socket stays unread, as with a server that is wedged).
pub(super) fn hold_silent(s: &TcpStream, sh: &Shared) {
    let mut probe = [0u8; 1];
    while !sh.done() {
        // A peek sees a hang-up (0) without consuming request bytes; pending data makes it
        // return at once, so the wait is a plain sleep then.
        match s.peek(&mut probe) {
            Ok(0) => return,
            Ok(_) => std::thread::sleep(TICK),
            Err(e) if is_tick(&e) => {}
            Err(_) => return,
        }
    }
}

/// Sends a FIN and waits (reading) for the peer to close too, so the close is clean rather
/// than a reset caused by unread bytes.
pub(super) fn close_clean(mut s: TcpStream, sh: &Shared) {
    let _ = s.flush();
    let _ = s.shutdown(Shutdown::Write);
    hold(&mut s, sh);
}

/// Closes with a TCP reset (SO_LINGER on with a zero timeout).
pub(super) fn close_reset(s: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a linger struct of the size passed.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(s);
}

/// Writes `unit` again and again until the peer stops reading and goes away or the server
/// stops (floods).
pub(super) fn flood(s: &mut TcpStream, unit: &[u8], sh: &Shared) {
    let mut batch = Vec::with_capacity(64 * 1024);
    while batch.len() + unit.len() <= 64 * 1024 {
        batch.extend_from_slice(unit);
    }
    if batch.is_empty() {
        batch.extend_from_slice(unit);
    }
    while write_all(s, &batch, sh) {}
}
