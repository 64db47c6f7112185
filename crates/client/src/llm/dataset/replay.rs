//! Trace replay on the entries' timestamps (`--fixed-schedule`, AIPerf's fixed-schedule
//! mode): which entries are sent (`--fixed-schedule-start-offset` / `-end-offset`, both
//! inclusive, in trace milliseconds), when (offset from the schedule's zero, divided by
//! `--fixed-schedule-speedup`), and how late the client sent them (AIPerf's
//! `replay_sched_lag_p50/p90/p99`).
//!
//! The schedule's zero is the first kept timestamp with `--fixed-schedule-auto-offset`,
//! else `--fixed-schedule-start-offset`, else 0 (the trace's timestamps are offsets from
//! the start of the run), as AIPerf defines them. The zero itself is [`LEAD_NS`] after the
//! engine starts, so that the first sends do not wait for the workers' threads and
//! connections.

use crate::measure::RequestRecord;

/// How long after the engine starts the schedule's zero comes (ns).
pub const LEAD_NS: u64 = 100_000_000;

/// How a trace is replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayOptions {
    pub auto_offset: bool,
    pub start_ms: Option<u64>,
    pub end_ms: Option<u64>,
    pub speedup: f64,
}

/// The entries to send (indices into the records, in send order) and each one's send
/// offset (ns from the start of the run).
pub fn schedule(timestamps_ms: &[f64], opts: &ReplayOptions) -> (Vec<usize>, Vec<u64>) {
    let keep = |t: f64| {
        opts.start_ms.map_or(true, |s| t >= s as f64) && opts.end_ms.map_or(true, |e| t <= e as f64)
    };
    let mut order: Vec<usize> = (0..timestamps_ms.len())
        .filter(|&i| keep(timestamps_ms[i]))
        .collect();
    // Stable: entries with one timestamp go in file order.
    order.sort_by(|&a, &b| timestamps_ms[a].total_cmp(&timestamps_ms[b]));
    let zero = if opts.auto_offset {
        order.first().map_or(0.0, |&i| timestamps_ms[i])
    } else {
        opts.start_ms.unwrap_or(0) as f64
    };
    let speedup = if opts.speedup > 0.0 {
        opts.speedup
    } else {
        1.0
    };
    let offsets = order
        .iter()
        .map(|&i| ((timestamps_ms[i] - zero).max(0.0) / speedup * 1e6).round() as u64)
        .collect();
    (order, offsets)
}

/// Send lag percentiles of a replay (ms): how long after its intended time each request
/// was sent. Absolute, since the engine knows the schedule's zero (AIPerf anchors its
/// lags to the least-late request because it does not).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lag {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub count: usize,
}

/// AIPerf flags a replay whose p99 lag is above this as degraded (ms).
pub const DEGRADED_MS: f64 = 500.0;

/// The lags of the scheduled records (`intended_ns` set); `None` when there are none.
pub fn lag(records: &[RequestRecord]) -> Option<Lag> {
    let mut lags: Vec<u64> = records
        .iter()
        .filter(|r| r.intended_ns > 0)
        .map(|r| r.start_ns.saturating_sub(r.intended_ns))
        .collect();
    if lags.is_empty() {
        return None;
    }
    lags.sort_unstable();
    let pct = |p: usize| {
        let rank = (p * lags.len()).div_ceil(100).max(1) - 1;
        lags[rank.min(lags.len() - 1)] as f64 / 1e6
    };
    Some(Lag {
        p50_ms: pct(50),
        p90_ms: pct(90),
        p99_ms: pct(99),
        max_ms: *lags.last().unwrap_or(&0) as f64 / 1e6,
        count: lags.len(),
    })
}

impl Lag {
    /// The console line.
    pub fn line(&self) -> String {
        let mut s = format!(
            "Replay schedule lag (sent after the intended time, {} requests): \
             replay_sched_lag_p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms\n",
            self.count, self.p50_ms, self.p90_ms, self.p99_ms, self.max_ms
        );
        if self.p99_ms > DEGRADED_MS {
            s.push_str(&format!(
                "Warning: the replay fell behind its schedule (p99 lag above {DEGRADED_MS} ms); \
                 the load was not the trace's\n"
            ));
        }
        s
    }

    /// The summary JSON with the lag metrics put first, as AIPerf names them.
    pub fn add_to_json(&self, json: &str) -> String {
        let Some(rest) = json.strip_prefix('{') else {
            return json.to_string();
        };
        let node = |v: f64| format!("{{\"unit\": \"ms\", \"avg\": {}}}", num(v));
        let degraded = u8::from(self.p99_ms > DEGRADED_MS);
        format!(
            "{{\n  \"replay_sched_lag_p50\": {},\n  \"replay_sched_lag_p90\": {},\n  \
             \"replay_sched_lag_p99\": {},\n  \"replay_sched_degraded\": {{\"unit\": \"\", \
             \"avg\": {degraded}}},{rest}",
            node(self.p50_ms),
            node(self.p90_ms),
            node(self.p99_ms),
        )
    }
}

fn num(v: f64) -> String {
    if v.is_finite() {
        serde_json::Value::from(v).to_string()
    } else {
        "null".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ReplayOptions {
        ReplayOptions {
            auto_offset: false,
            start_ms: None,
            end_ms: None,
            speedup: 1.0,
        }
    }

    #[test]
    fn offsets_windows_and_speedup() {
        let ts = [300.0, 100.0, 200.0, 200.0, 500.0];
        let (order, offs) = schedule(&ts, &opts());
        assert_eq!(order, vec![1, 2, 3, 0, 4]);
        assert_eq!(
            offs,
            vec![
                100_000_000,
                200_000_000,
                200_000_000,
                300_000_000,
                500_000_000
            ]
        );
        let auto = ReplayOptions {
            auto_offset: true,
            speedup: 2.0,
            ..opts()
        };
        assert_eq!(schedule(&ts, &auto).1[..2], [0, 50_000_000]);
        let window = ReplayOptions {
            start_ms: Some(200),
            end_ms: Some(300),
            ..opts()
        };
        let (order, offs) = schedule(&ts, &window);
        assert_eq!(order, vec![2, 3, 0], "both ends are inclusive");
        assert_eq!(
            offs,
            vec![0, 0, 100_000_000],
            "the start offset is the zero"
        );
    }

    #[test]
    fn lag_percentiles_and_json() {
        let rec = |intended: u64, lag: u64| RequestRecord {
            intended_ns: intended,
            start_ns: intended + lag,
            ..RequestRecord::default()
        };
        let mut records: Vec<RequestRecord> =
            (1..=100).map(|i| rec(i * 10, i * 1_000_000)).collect();
        records.push(RequestRecord::default());
        let l = lag(&records).unwrap();
        assert_eq!(
            (l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms),
            (50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(l.count, 100);
        assert!(l.line().contains("replay_sched_lag_p50 50.000 ms"));
        assert!(!l.line().contains("Warning"));
        let json = l.add_to_json("{\n  \"request_count\": {\"unit\": \"\", \"avg\": 3}\n}\n");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["replay_sched_lag_p99"]["avg"], 99.0);
        assert_eq!(v["replay_sched_lag_p90"]["unit"], "ms");
        assert_eq!(v["replay_sched_degraded"]["avg"], 0);
        assert_eq!(v["request_count"]["avg"], 3);
        assert!(lag(&[RequestRecord::default()]).is_none());
    }
}
