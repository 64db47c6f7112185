//! Waiting for a model delay without blocking the runtime, at the HTTP side's resolution.
//!
//! tokio's timer wheel works in whole milliseconds, so `tokio::time::sleep(500µs)` lasts about
//! 1-2 ms; the HTTP loops wait on a timerfd instead, and the gRPC side must not be slower for
//! the same `--delay`. Each wait arms its own timerfd and awaits its readiness through tokio's
//! reactor; if that cannot be set up, tokio's sleep is the fallback.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A one-shot CLOCK_MONOTONIC timerfd, armed to fire `after` from now.
fn armed_timerfd(after: Duration) -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant flags; the result is checked before use.
    let raw = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // A zero it_value would disarm the timer: wait at least 1 ns.
    let after = after.max(Duration::from_nanos(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: the fd is ours and open; `spec` is a valid itimerspec; no old value wanted.
    let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Returns at `deadline` (or at once if it has passed).
pub async fn sleep_until(deadline: Instant) {
    let wait = deadline.saturating_duration_since(Instant::now());
    if wait.is_zero() {
        return;
    }
    let timer = armed_timerfd(wait).and_then(|fd| {
        // SAFETY: the AsyncFd owns the OwnedFd, which stays open and returns the same fd
        // until the AsyncFd drops.
        unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(Into::into)
    });
    match timer {
        // The fd turns readable once, at expiry; it is closed when `timer` drops.
        Ok(timer) => {
            if timer.readable().await.is_ok() {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await
        }
        Err(_) => tokio::time::sleep_until(deadline.into()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_millisecond_waits_are_honoured() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for wait_us in [300u64, 1500] {
                let started = Instant::now();
                sleep_until(started + Duration::from_micros(wait_us)).await;
                let took = started.elapsed();
                assert!(took >= Duration::from_micros(wait_us), "{took:?}");
                assert!(took < Duration::from_millis(500), "{took:?}");
            }
            let started = Instant::now();
            sleep_until(started).await;
            assert!(started.elapsed() < Duration::from_millis(50));
        });
    }
}
