//! Open loop: how well the client kept its send schedule, and latency measured from the
//! intended send time (what perf_analyzer's "delayed" warning only hints at).

use super::dist::Dist;
use super::stats::{per_second, ScheduleStats, WindowStats};

/// Pools the windows' lag and corrected-latency summaries; `None` in closed loop (no lags).
pub fn schedule_stats(windows: &[WindowStats]) -> Option<ScheduleStats> {
    let (mut lags, mut corrected, mut late) = (Dist::default(), Dist::default(), 0u64);
    for w in windows {
        lags.merge(&w.lag);
        corrected.merge(&w.corrected);
        late += w.late_count;
    }
    if lags.is_empty() {
        return None;
    }
    let rates: f64 = windows
        .iter()
        .map(|w| per_second(w.sent, w.duration_ns))
        .sum();
    Some(ScheduleStats {
        send_rate: rates / windows.len() as f64,
        lag_p50_ns: lags.percentile_ns(50),
        lag_p90_ns: lags.percentile_ns(90),
        lag_p99_ns: lags.percentile_ns(99),
        lag_max_ns: lags.max_ns(),
        late_count: late,
        late_pct: late as f64 * 100.0 / lags.count() as f64,
        corrected_avg_ns: corrected.mean_ns(),
        corrected_p50_ns: corrected.percentile_ns(50),
        corrected_p90_ns: corrected.percentile_ns(90),
        corrected_p99_ns: corrected.percentile_ns(99),
        corrected_max_ns: corrected.max_ns(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::{RequestRecord, WindowRecords};
    use crate::measure::stats::window_stats;

    /// A record meant for `intended`, sent `lag` later, taking `service` ns.
    fn rec(intended: u64, lag: u64, service: u64) -> RequestRecord {
        RequestRecord {
            intended_ns: intended,
            start_ns: intended + lag,
            send_end_ns: intended + lag,
            recv_start_ns: intended + lag + service,
            end_ns: intended + lag + service,
            ok: true,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn lags_and_corrected_latency() {
        // 100 sends: 98 on time (10 us late), 2 over 1 ms late; service time 50 us each.
        let mut records: Vec<RequestRecord> =
            (0..98).map(|i| rec(1_000 + i, 10_000, 50_000)).collect();
        records.push(rec(5_000, 2_000_000, 50_000));
        records.push(rec(6_000, 3_000_000, 50_000));
        let w = window_stats(&WindowRecords {
            start_ns: 0,
            end_ns: 1_000_000_000,
            records,
            sent: 100,
            ..WindowRecords::default()
        });
        let s = schedule_stats(&[w]).expect("open loop");
        assert_eq!(s.late_count, 2);
        assert!((s.late_pct - 2.0).abs() < 1e-9);
        assert!(!s.kept());
        assert_eq!(s.lag_p50_ns, 10_000);
        assert_eq!(s.lag_max_ns, 3_000_000);
        assert_eq!(s.corrected_p50_ns, 60_000);
        assert_eq!(s.corrected_max_ns, 3_050_000);
        assert!((s.send_rate - 100.0).abs() < 1e-9);
    }

    #[test]
    fn closed_loop_has_no_schedule_and_on_time_is_kept() {
        let closed = RequestRecord {
            start_ns: 5,
            end_ns: 10,
            ok: true,
            ..RequestRecord::default()
        };
        let w = window_stats(&WindowRecords {
            start_ns: 0,
            end_ns: 100,
            records: vec![closed],
            ..WindowRecords::default()
        });
        assert_eq!(schedule_stats(&[w]), None);
        let on_time = window_stats(&WindowRecords {
            start_ns: 0,
            end_ns: 1_000_000,
            records: vec![rec(10, 5_000, 1_000)],
            ..WindowRecords::default()
        });
        assert!(schedule_stats(&[on_time]).unwrap().kept());
    }
}
