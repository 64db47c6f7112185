//! Waiting for a model delay without blocking the runtime, at the HTTP side's resolution.
//!
//! tokio's timer wheel works in whole milliseconds, so `tokio::time::sleep(500µs)` lasts about
//! 1-2 ms; the HTTP loops wait on a timerfd instead, and the gRPC side must not be slower for
//! the same `--delay`. Each wait arms its own timerfd and awaits its readiness through tokio's
//! reactor; if that cannot be set up, tokio's sleep is the fallback.

use std::time::Instant;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Returns at `deadline` (or at once if it has passed).
pub async fn sleep_until(deadline: Instant) {
    let wait = deadline.saturating_duration_since(Instant::now());
    if wait.is_zero() {
        return;
    }
    let timer = inferperf_wire::timerfd::one_shot(wait).and_then(|fd| {
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
    use std::time::Duration;

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
