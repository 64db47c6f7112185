//! Open loop: how well the client kept its send schedule, and latency measured from the
//! intended send time (what perf_analyzer's "delayed" warning only hints at; spec §8.2).

use super::stats::{mean_ns, per_second, percentile_ns, ScheduleStats, WindowStats, LATE_NS};

/// Pools the windows' lags and corrected latencies; `None` in closed loop (no lags).
pub fn schedule_stats(windows: &[WindowStats]) -> Option<ScheduleStats> {
    let mut lags: Vec<u64> = windows
        .iter()
        .flat_map(|w| w.lags_ns.iter().copied())
        .collect();
    if lags.is_empty() {
        return None;
    }
    let mut corrected: Vec<u64> = windows
        .iter()
        .flat_map(|w| w.corrected_ns.iter().copied())
        .collect();
    lags.sort_unstable();
    corrected.sort_unstable();
    let late = lags.len() - lags.partition_point(|&l| l <= LATE_NS);
    let rates: f64 = windows
        .iter()
        .map(|w| per_second(w.sent, w.duration_ns))
        .sum();
    Some(ScheduleStats {
        send_rate: rates / windows.len() as f64,
        lag_p50_ns: percentile_ns(&lags, 50),
        lag_p90_ns: percentile_ns(&lags, 90),
        lag_p99_ns: percentile_ns(&lags, 99),
        lag_max_ns: lags.last().copied().unwrap_or(0),
        late_count: late as u64,
        late_pct: late as f64 * 100.0 / lags.len() as f64,
        corrected_avg_ns: mean_ns(&corrected),
        corrected_p50_ns: percentile_ns(&corrected, 50),
        corrected_p90_ns: percentile_ns(&corrected, 90),
        corrected_p99_ns: percentile_ns(&corrected, 99),
        corrected_max_ns: corrected.last().copied().unwrap_or(0),
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
