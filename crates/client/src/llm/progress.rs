//! The live progress line of a `profile` point on stderr: done/total (or elapsed/duration),
//! the estimated time left, and while requests complete, the recent request and output-token throughput and the running TTFT and ITL
//! medians. Written only when stderr is a terminal and `--quiet` is off; the reports go to
//! stdout and files, so a redirected run never carries it.
//!
//! The live figures come from the records gathered every tick (completed requests only),
//! read on the gathering thread: the load workers do no extra work for them. They are a
//! preview; the report's numbers come from the full parse afterwards.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use crate::measure::llm::stats::LiveAcc;
use crate::measure::record::framed_responses;
use crate::measure::WindowRecords;
use crate::run::kinds::reply::parse_events;

/// Throughput is shown over roughly this much of the most recent time.
const RATE_SPAN: Duration = Duration::from_secs(2);

/// The progress line on stderr (only on a terminal, and not with `--quiet`).
pub struct Progress {
    label: String,
    total: Option<u64>,
    /// `--benchmark-duration`: the point ends this long after its start.
    duration: Option<Duration>,
    on: bool,
    shown: bool,
    /// Characters of the line last written (a shorter one is padded to cover it).
    last_len: usize,
    live: Live,
}

impl Progress {
    pub fn new(
        label: &str,
        total: Option<u64>,
        duration: Option<Duration>,
        quiet: bool,
    ) -> Progress {
        let mut p = Progress::with_output(label, total, !quiet && std::io::stderr().is_terminal());
        p.duration = duration;
        p
    }

    /// A progress line that is written (`on`) or only kept.
    pub fn with_output(label: &str, total: Option<u64>, on: bool) -> Progress {
        Progress {
            label: label.to_string(),
            total,
            duration: None,
            on,
            shown: false,
            last_len: 0,
            live: Live::default(),
        }
    }

    /// Whether the line is written at all.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Takes in the records gathered this tick and redraws the line: `done` requests so
    /// far, `elapsed` since the point started.
    pub fn show(&mut self, window: &WindowRecords, done: u64, elapsed: Duration) {
        if !self.on {
            return;
        }
        self.live.add(window, elapsed);
        let mut line = progress_line(&self.label, done, self.total, self.duration, elapsed);
        line.push_str(&self.live.summary());
        let pad = self.last_len.saturating_sub(line.chars().count());
        self.last_len = line.chars().count();
        let _ = write!(std::io::stderr(), "\r{line}{}", " ".repeat(pad));
        self.shown = true;
    }

    pub fn finish(&mut self) {
        if self.shown {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// `label [#####.....] 50/100 requests 1.2 s, ETA 1.2 s` for a count run, `label
/// [#####.....] 40 requests 30.0/60 s, ETA 30 s` for a duration run (the bar is the time),
/// `label 40 requests 1.2 s` when neither bounds the run.
pub fn progress_line(
    label: &str,
    done: u64,
    total: Option<u64>,
    duration: Option<Duration>,
    elapsed: Duration,
) -> String {
    const WIDTH: u64 = 30;
    let bar = |fraction: f64| {
        let filled = ((fraction.clamp(0.0, 1.0) * WIDTH as f64) as usize).min(WIDTH as usize);
        format!(
            "[{}{}]",
            "#".repeat(filled),
            ".".repeat(WIDTH as usize - filled)
        )
    };
    let secs = elapsed.as_secs_f64();
    let mut line = match (total, duration) {
        (Some(t), _) if t > 0 => format!(
            "{label} {} {done}/{t} requests {secs:.1} s",
            bar(done as f64 / t as f64)
        ),
        (_, Some(d)) if !d.is_zero() => format!(
            "{label} {} {done} requests {secs:.1}/{} s",
            bar(secs / d.as_secs_f64()),
            crate::report::fmt::fmt_g(d.as_secs_f64())
        ),
        _ => format!("{label} {done} requests {secs:.1} s"),
    };
    if let Some(left) = eta(done, total, duration, elapsed) {
        line.push_str(", ETA ");
        line.push_str(&fmt_eta(left));
    }
    line
}

/// The time left: for a count run, the requests still to do at the completion rate so far
/// (unknown until one completed); for a duration run, the time to its end; with both, the
/// sooner. Past the end (in-flight requests finishing), zero.
pub fn eta(
    done: u64,
    total: Option<u64>,
    duration: Option<Duration>,
    elapsed: Duration,
) -> Option<Duration> {
    let by_count = total.filter(|&t| t > 0).and_then(|t| {
        (done > 0).then(|| elapsed.mul_f64(t.saturating_sub(done) as f64 / done as f64))
    });
    let by_time = duration.map(|d| d.saturating_sub(elapsed));
    match (by_count, by_time) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `42 s` under a minute, `3:05` under an hour, `1:02:05` beyond (whole seconds, rounded
/// up so that the last second reads `1 s` until it is over).
pub fn fmt_eta(left: Duration) -> String {
    let s = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{}:{:02}", s / 60, s % 60),
        _ => format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60),
    }
}

/// Running figures of the completed requests.
#[derive(Default)]
pub struct Live {
    /// (elapsed, successful requests so far, output tokens so far), one per tick.
    samples: VecDeque<(Duration, u64, u64)>,
    ok: u64,
    tokens: u64,
    /// Some token count was a chunk count (no `usage` in the response).
    estimated: bool,
    /// TTFT and per-request mean chunk gap (ns).
    ttft: LiveAcc,
    itl: LiveAcc,
}

impl Live {
    /// Adds the successful streamed requests among `window.records`.
    pub fn add(&mut self, window: &WindowRecords, elapsed: Duration) {
        for r in window.records.iter().filter(|r| r.ok) {
            let at = r.body_off as usize;
            let body = window
                .bodies
                .get(at..at + r.body_len as usize)
                .unwrap_or(&[]);
            let parsed = r.sse.then(|| parse_events(framed_responses(body)));
            // A stream that carried an error failed and counts no token (see `convert`).
            if parsed.as_ref().is_some_and(|p| p.error.is_some()) {
                continue;
            }
            self.ok += 1;
            let Some(parsed) = parsed else {
                continue;
            };
            let (Some(first), Some(last)) = (parsed.chunks.first(), parsed.chunks.last()) else {
                continue;
            };
            self.ttft.record(first.0.saturating_sub(r.start_ns) as f64);
            let n = parsed.chunks.len() as u64;
            if n > 1 {
                self.itl
                    .record(last.0.saturating_sub(first.0) as f64 / (n - 1) as f64);
            }
            match parsed.usage {
                Some(u) => self.tokens += u.completion_tokens,
                None => {
                    self.tokens += n;
                    self.estimated = true;
                }
            }
        }
        self.samples.push_back((elapsed, self.ok, self.tokens));
        // Keep one sample older than the span, to measure the span from.
        while self.samples.len() > 2 && elapsed.saturating_sub(self.samples[1].0) >= RATE_SPAN {
            self.samples.pop_front();
        }
    }

    /// ` | 12.5 req/s, 400 out tok/s, TTFT p50 20.1 ms, ITL p50 2.0 ms`; empty before any
    /// request completed.
    pub fn summary(&self) -> String {
        let (Some(first), Some(last)) = (self.samples.front(), self.samples.back()) else {
            return String::new();
        };
        if self.ok == 0 {
            return String::new();
        }
        let mut parts = Vec::new();
        let span = last.0.saturating_sub(first.0).as_secs_f64();
        if span > 0.0 {
            let unit = if self.estimated {
                "out chunks/s"
            } else {
                "out tok/s"
            };
            parts.push(format!("{:.1} req/s", (last.1 - first.1) as f64 / span));
            parts.push(format!("{:.0} {unit}", (last.2 - first.2) as f64 / span));
        }
        let p50 = |acc: &LiveAcc| acc.p50().map(|ns| ns / 1e6);
        if let Some(ms) = p50(&self.ttft) {
            parts.push(format!("TTFT p50 {ms:.1} ms"));
        }
        if let Some(ms) = p50(&self.itl) {
            parts.push(format!("ITL p50 {ms:.2} ms"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" | {}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::push_framed_response;
    use crate::measure::RequestRecord;

    const MS: u64 = 1_000_000;

    #[test]
    fn progress_line_shapes() {
        let d = Duration::from_millis(1500);
        assert_eq!(
            progress_line("c4", 50, Some(100), None, d),
            format!(
                "c4 [{}{}] 50/100 requests 1.5 s, ETA 2 s",
                "#".repeat(15),
                ".".repeat(15)
            )
        );
        assert!(progress_line("c4", 500, Some(100), None, d).contains(&"#".repeat(30)));
        assert_eq!(progress_line("r2", 7, None, None, d), "r2 7 requests 1.5 s");
        // A duration run: the bar is the time, the ETA what is left of it.
        let line = progress_line("c4", 7, None, Some(Duration::from_secs(6)), d);
        assert_eq!(
            line,
            format!(
                "c4 [{}{}] 7 requests 1.5/6 s, ETA 5 s",
                "#".repeat(7),
                ".".repeat(23)
            )
        );
        // Nothing done yet in a count run: no estimate.
        assert_eq!(
            progress_line("c4", 0, Some(10), None, d),
            format!("c4 [{}] 0/10 requests 1.5 s", ".".repeat(30))
        );
    }

    #[test]
    fn the_eta_follows_the_rate_or_the_clock() {
        let secs = Duration::from_secs;
        // 25 of 100 in 10 s: 75 more at 2.5/s.
        assert_eq!(eta(25, Some(100), None, secs(10)), Some(secs(30)));
        assert_eq!(eta(0, Some(100), None, secs(10)), None);
        assert_eq!(eta(100, Some(100), None, secs(10)), Some(secs(0)));
        assert_eq!(eta(5, None, Some(secs(60)), secs(45)), Some(secs(15)));
        // Draining after the duration: nothing left.
        assert_eq!(eta(5, None, Some(secs(60)), secs(61)), Some(secs(0)));
        // Both bounds: the sooner one.
        assert_eq!(
            eta(10, Some(1000), Some(secs(60)), secs(10)),
            Some(secs(50))
        );
        assert_eq!(eta(50, Some(100), Some(secs(60)), secs(10)), Some(secs(10)));
        assert_eq!(eta(3, None, None, secs(1)), None);
        assert_eq!(fmt_eta(Duration::ZERO), "0 s");
        assert_eq!(fmt_eta(Duration::from_millis(200)), "1 s");
        assert_eq!(fmt_eta(secs(59)), "59 s");
        assert_eq!(fmt_eta(secs(185)), "3:05");
        assert_eq!(fmt_eta(secs(3725)), "1:02:05");
    }

    /// A window with `n` streamed requests started at `start_ms`: TTFT `ttft_ms`, then
    /// `chunks - 1` more chunks 2 ms apart, with usage when `usage`.
    fn window(n: u64, start_ms: u64, ttft_ms: u64, chunks: u64, usage: bool) -> WindowRecords {
        let mut w = WindowRecords::default();
        for _ in 0..n {
            let off = w.bodies.len();
            let first = (start_ms + ttft_ms) * MS;
            for k in 0..chunks {
                let text = br#"{"choices":[{"delta":{"content":" x"}}]}"#;
                push_framed_response(&mut w.bodies, first + k * 2 * MS, text);
            }
            if usage {
                let u = br#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":8}}"#;
                push_framed_response(&mut w.bodies, first + chunks * 2 * MS, u);
            }
            push_framed_response(&mut w.bodies, first + chunks * 2 * MS, b"");
            w.records.push(RequestRecord {
                start_ns: start_ms * MS,
                ok: true,
                sse: true,
                body_off: off as u32,
                body_len: (w.bodies.len() - off) as u32,
                ..RequestRecord::default()
            });
        }
        w
    }

    #[test]
    fn live_figures_follow_the_completed_requests() {
        let mut live = Live::default();
        assert_eq!(live.summary(), "");
        live.add(&WindowRecords::default(), Duration::from_millis(100));
        assert_eq!(live.summary(), "", "nothing completed yet");
        live.add(&window(4, 0, 20, 5, true), Duration::from_secs(1));
        let s = live.summary();
        assert_eq!(
            s,
            " | 4.4 req/s, 36 out tok/s, TTFT p50 20.0 ms, ITL p50 2.00 ms"
        );
        live.add(&window(10, 1000, 40, 5, true), Duration::from_secs(2));
        let s = live.summary();
        assert!(
            s.starts_with(" | 7.4 req/s, 59 out tok/s, TTFT p50 40.0 ms"),
            "{s}"
        );
        // Without usage the chunks are counted, and said to be.
        live.add(&window(1, 2000, 40, 3, false), Duration::from_millis(2500));
        assert!(
            live.summary().contains("out chunks/s"),
            "{}",
            live.summary()
        );
        // Old samples leave the rate's span.
        live.add(&WindowRecords::default(), Duration::from_secs(8));
        live.add(&window(2, 9000, 40, 5, true), Duration::from_secs(9));
        live.add(&window(2, 10000, 40, 5, true), Duration::from_secs(10));
        let s = live.summary();
        assert!(s.starts_with(" | 2.0 req/s, 16 out chunks/s"), "{s}");
    }

    #[test]
    fn streams_that_carried_an_error_are_not_counted() {
        let mut live = Live::default();
        let mut w = window(2, 0, 20, 5, true);
        let last = w.records[1];
        push_framed_response(&mut w.bodies, 50 * MS, br#"{"error":{"message":"x"}}"#);
        w.records[1].body_len = (w.bodies.len() - last.body_off as usize) as u32;
        live.add(&w, Duration::from_secs(1));
        assert_eq!((live.ok, live.tokens), (1, 8));
    }

    #[test]
    fn quiet_keeps_the_line_off() {
        let mut p = Progress::new("c1", Some(2), None, true);
        assert!(!p.is_on());
        p.show(&window(1, 0, 1, 2, true), 1, Duration::from_secs(1));
        assert!(p.live.samples.is_empty(), "nothing is gathered when off");
        assert!(Progress::with_output("c1", None, true).is_on());
    }
}
