//! Per-window statistics and the merge of a point's last windows.
//!
//! Latencies stay in ns; they become integer µs (truncated) only when printed. A window keeps
//! fixed-size summaries ([`Dist`]: exact count, sums, min and max, a histogram with a bucket
//! per µs up to 65.5 ms), so its memory does not follow its request count. Percentiles use
//! perf_analyzer's nearest-rank rule so results are comparable.

use super::dist::Dist;
use super::record::{RxTime, WindowRecords};
use super::server_stats::ServerStats;

/// Percentiles every report shows; `--percentile` adds one more.
pub const REPORTED_PERCENTILES: [u32; 4] = [50, 90, 95, 99];

const NS_PER_S: f64 = 1e9;

/// The numbers of one measurement window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WindowStats {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Wall time of the window (ns); shortened by `clamp_to_requests` for `--request-count`.
    pub duration_ns: u64,
    /// Requests that completed successfully in the window.
    pub request_count: u64,
    /// Requests that failed (transport error or non-2xx) in the window.
    pub error_count: u64,
    /// Requests whose first byte was sent during the window.
    pub sent: u64,
    /// Latencies (ns) of the successful requests.
    pub latency: Dist,
    /// Sums over the successful requests (ns): writing the request, reading the response,
    /// and the whole request.
    pub send_ns_sum: u64,
    pub recv_ns_sum: u64,
    pub request_ns_sum: u64,
    /// Over the successful requests: responses with outputs, and the sum of the times from
    /// request start to the first response (ns); for decoupled models.
    pub response_count: u64,
    pub first_response_ns_sum: u64,
    /// Sum over requests with 2+ responses of (last - first response) / (responses - 1), ns.
    pub response_gap_ns_sum: u64,
    /// Requests with 2+ responses.
    pub multi_response_count: u64,
    /// Sequence models: successful requests that carried `sequence_end`.
    pub sequence_count: u64,
    /// Open loop, over the successful requests: send lags (how late each send was, ns),
    /// latencies from the intended send time (ns), and sends over `LATE_NS` late; empty in
    /// closed loop.
    pub lag: Dist,
    pub corrected: Dist,
    pub late_count: u64,
    /// Over the successful requests: the client's own receive delays (kernel stamp to the
    /// worker's read, ns) of those timed by a kernel stamp, and how many were timed by the
    /// kernel and by the clock although stamps were asked for (see `RxTime`).
    pub rx_delay: Dist,
    pub rx_kernel: u64,
    pub rx_clock: u64,
    /// Worker CPU time during the window (ns, summed over workers) and the worker count.
    pub client_cpu_ns: u64,
    pub workers: u32,
    /// Server-side delta for the window; the engine fills it in.
    pub server: Option<ServerStats>,
}

/// Summarises one window's records.
pub fn window_stats(w: &WindowRecords) -> WindowStats {
    let mut s = WindowStats {
        start_ns: w.start_ns,
        end_ns: w.end_ns,
        duration_ns: w.end_ns.saturating_sub(w.start_ns),
        workers: w.workers,
        ..WindowStats::default()
    };
    add_records(&mut s, w);
    s
}

/// Folds a batch of records (part of a window) into `s`: counts, sums, latency summaries,
/// requests sent and worker CPU.
pub fn add_records(s: &mut WindowStats, w: &WindowRecords) {
    s.sent += w.sent;
    s.client_cpu_ns += w.client_cpu_ns;
    s.workers = s.workers.max(w.workers);
    for r in &w.records {
        if !r.ok {
            s.error_count += 1;
            continue;
        }
        s.request_count += 1;
        s.latency.add(r.latency_ns());
        s.send_ns_sum = s.send_ns_sum.saturating_add(r.send_ns());
        s.recv_ns_sum = s.recv_ns_sum.saturating_add(r.recv_ns());
        s.request_ns_sum = s.request_ns_sum.saturating_add(r.latency_ns());
        if r.intended_ns != 0 {
            let lag = r.lag_ns();
            s.lag.add(lag);
            s.late_count += u64::from(lag > LATE_NS);
            s.corrected.add(r.corrected_latency_ns());
        }
        match r.rx {
            RxTime::Kernel => {
                s.rx_kernel += 1;
                s.rx_delay.add(u64::from(r.rx_delay_us) * 1000);
            }
            RxTime::Clock => s.rx_clock += 1,
            RxTime::NotStamped => {}
        }
        s.response_count += u64::from(r.responses);
        s.sequence_count += u64::from(r.seq_end);
        let first = r.recv_start_ns.saturating_sub(r.start_ns);
        s.first_response_ns_sum = s.first_response_ns_sum.saturating_add(first);
        if r.responses >= 2 {
            let gap = r.end_ns.saturating_sub(r.recv_start_ns) / u64::from(r.responses - 1);
            s.response_gap_ns_sum = s.response_gap_ns_sum.saturating_add(gap);
            s.multi_response_count += 1;
        }
    }
}

/// `--request-count`: shortens the window to first request start .. last response end, so
/// throughput is requests over the time they actually took (perf_analyzer computes this
/// clamp and then discards it). A span that is empty or reversed leaves the window as is.
pub fn clamp_to_requests(w: &mut WindowStats, first_start_ns: u64, last_end_ns: u64) {
    if last_end_ns > first_start_ns {
        w.start_ns = first_start_ns;
        w.end_ns = last_end_ns;
        w.duration_ns = last_end_ns - first_start_ns;
    }
}

/// The (earliest start, latest end) over a window's records, for `clamp_to_requests`.
pub fn request_span(w: &WindowRecords) -> Option<(u64, u64)> {
    let first = w.records.iter().map(|r| r.start_ns).min()?;
    let last = w.records.iter().map(|r| r.end_ns).max()?;
    Some((first, last))
}

impl WindowStats {
    /// Inferences per second: `request_count * batch / duration`; 0 for an empty duration.
    pub fn throughput(&self, batch: u64) -> f64 {
        per_second(self.request_count.saturating_mul(batch), self.duration_ns)
    }

    /// The latency the stability rule watches (ns): the p-th percentile with `--percentile`,
    /// else the mean. A window without successful requests gives `u64::MAX`, like the
    /// failed-window entry perf_analyzer records, so it can never look stable or fast.
    pub fn stabilizing_latency_ns(&self, percentile: Option<u32>) -> u64 {
        if self.latency.is_empty() {
            return u64::MAX;
        }
        match percentile {
            Some(p) => self.latency.percentile_ns(p),
            None => self.latency.mean_ns(),
        }
    }

    /// Mean latency (ns); 0 without samples.
    pub fn avg_latency_ns(&self) -> u64 {
        self.latency.mean_ns()
    }

    /// Sample standard deviation of the latencies, truncated to µs.
    pub fn std_latency_us(&self) -> u64 {
        self.latency.std_dev_us()
    }

    /// The p-th percentile latency (ns; exact to the printed µs below 65.5 ms); 0 without
    /// samples.
    pub fn percentile_latency_ns(&self, p: u32) -> u64 {
        self.latency.percentile_ns(p)
    }

    /// Heap bytes the window's summaries hold (bounded, whatever the request count).
    pub fn heap_bytes(&self) -> usize {
        self.latency.heap_bytes()
            + self.lag.heap_bytes()
            + self.corrected.heap_bytes()
            + self.rx_delay.heap_bytes()
    }
}

/// A point's result: the merge of its last (up to 3) windows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientStats {
    pub request_count: u64,
    pub error_count: u64,
    pub sent: u64,
    pub duration_ns: u64,
    /// Inferences per second over the summed duration.
    pub throughput: f64,
    /// Requests sent per second: mean of the windows' rates.
    pub send_rate: f64,
    pub avg_latency_ns: u64,
    /// Sample standard deviation (n-1), truncated to µs; 0 with fewer than 2 samples
    /// (perf_analyzer prints UINT64_MAX there).
    pub std_latency_us: u64,
    pub min_latency_ns: u64,
    pub max_latency_ns: u64,
    /// (percentile, latency ns): 50, 90, 95, 99 and `--percentile`, ascending, no duplicates.
    pub percentiles_ns: Vec<(u32, u64)>,
    /// Per-request means (ns) over the successful requests: whole request, send, receive.
    pub avg_request_ns: u64,
    pub avg_send_ns: u64,
    pub avg_recv_ns: u64,
    /// Client CPU use as % of `duration * workers`, mean over the windows.
    pub overhead_pct: f64,
    pub stabilizing_latency_ns: u64,
    /// Decoupled models only: what the many responses per request add up to.
    pub responses: Option<ResponseStats>,
    /// Open loop only: how well the schedule was kept, and latency from the intended time.
    pub schedule: Option<ScheduleStats>,
    /// Sequence models: sequences completed (requests with `sequence_end`) and their rate.
    pub sequences: Option<(u64, f64)>,
    /// How responses were timed, and the client's own receive delay; `None` when no
    /// response was meant to be stamped (the C API).
    pub rx: Option<RxStats>,
}

/// A client receive delay p99 over this (ns) warns that the client, not the network or the
/// server, held responses back (the same 1 ms as a late send).
pub const RX_DELAY_WARN_NS: u64 = LATE_NS;

/// How a point's responses were timed: latency runs to each response's kernel receive stamp
/// where there was one; the client's own delay (stamp to the worker reading the data) is
/// reported beside it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RxStats {
    /// Successful responses timed by the kernel's receive stamp.
    pub kernel: u64,
    /// Successful responses timed by the clock though stamps were asked for (no stamp came
    /// with the read).
    pub clock: u64,
    /// The client's receive delay over the kernel-timed responses (ns).
    pub delay_p50_ns: u64,
    pub delay_p99_ns: u64,
    pub delay_max_ns: u64,
}

impl RxStats {
    /// Share of the responses (%) timed by the clock for want of a stamp.
    pub fn clock_pct(&self) -> f64 {
        let all = self.kernel + self.clock;
        if all == 0 {
            return 0.0;
        }
        self.clock as f64 * 100.0 / all as f64
    }

    /// The client's delay p99 is over [`RX_DELAY_WARN_NS`].
    pub fn late(&self) -> bool {
        self.delay_p99_ns > RX_DELAY_WARN_NS
    }
}

/// A send this late (ns) counts as late, as perf_analyzer's "delayed" flag does (1 ms).
pub const LATE_NS: u64 = 1_000_000;
/// The schedule counts as kept when at most this share of sends (%) was late.
pub const LATE_PCT_LIMIT: f64 = 1.0;

/// How well an open-loop point kept its send schedule (`schedule::schedule_stats`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScheduleStats {
    /// Requests sent per second (mean of the windows' rates, as perf_analyzer).
    pub send_rate: f64,
    /// Send lag (actual minus intended send time) percentiles and maximum, ns.
    pub lag_p50_ns: u64,
    pub lag_p90_ns: u64,
    pub lag_p99_ns: u64,
    pub lag_max_ns: u64,
    /// Sends more than `LATE_NS` late, and their share (%).
    pub late_count: u64,
    pub late_pct: f64,
    /// Latency from the intended send time (corrected for coordinated omission), ns.
    pub corrected_avg_ns: u64,
    pub corrected_p50_ns: u64,
    pub corrected_p90_ns: u64,
    pub corrected_p99_ns: u64,
    pub corrected_max_ns: u64,
}

impl ScheduleStats {
    /// The client sent on time: at most 1 % of sends over 1 ms late.
    pub fn kept(&self) -> bool {
        self.late_pct <= LATE_PCT_LIMIT
    }
}

/// The responses of a decoupled model's requests (latency runs to the last one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResponseStats {
    /// Responses that carried outputs.
    pub count: u64,
    /// Responses per second.
    pub throughput: f64,
    /// Mean time from request start to its first response (ns).
    pub avg_first_response_ns: u64,
    /// Mean time between consecutive responses of a request (ns), over requests with 2+.
    pub avg_response_gap_ns: u64,
}

impl ClientStats {
    /// The latency for percentile `p` (ns), if it was computed.
    pub fn percentile(&self, p: u32) -> Option<u64> {
        self.percentiles_ns
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, ns)| *ns)
    }
}

/// The reported percentiles: 50, 90, 95, 99 plus `extra`, ascending, without duplicates.
pub fn percentile_set(extra: Option<u32>) -> Vec<u32> {
    let mut set = REPORTED_PERCENTILES.to_vec();
    if let Some(p) = extra {
        if !set.contains(&p) {
            set.push(p);
            set.sort_unstable();
        }
    }
    set
}

/// Merges windows into a point's result: counts and durations summed, latency summaries
/// pooled, client-library times weighted by request count, overhead and send rate
/// averaged per window (as perf_analyzer does).
pub fn merge(windows: &[WindowStats], batch: u64, percentile: Option<u32>) -> ClientStats {
    let mut c = ClientStats::default();
    let (mut send_sum, mut recv_sum, mut request_sum) = (0u64, 0u64, 0u64);
    let (mut rate_sum, mut overhead_sum) = (0.0f64, 0.0f64);
    let mut latency = Dist::default();
    let mut rx_delay = Dist::default();
    let (mut rx_kernel, mut rx_clock) = (0u64, 0u64);
    let sequences: u64 = windows.iter().map(|w| w.sequence_count).sum();
    for w in windows {
        c.request_count += w.request_count;
        c.error_count += w.error_count;
        c.sent += w.sent;
        c.duration_ns = c.duration_ns.saturating_add(w.duration_ns);
        send_sum = send_sum.saturating_add(w.send_ns_sum);
        recv_sum = recv_sum.saturating_add(w.recv_ns_sum);
        request_sum = request_sum.saturating_add(w.request_ns_sum);
        rate_sum += per_second(w.sent, w.duration_ns);
        overhead_sum += overhead_pct(w);
        latency.merge(&w.latency);
        rx_delay.merge(&w.rx_delay);
        rx_kernel += w.rx_kernel;
        rx_clock += w.rx_clock;
    }
    if rx_kernel + rx_clock > 0 {
        c.rx = Some(RxStats {
            kernel: rx_kernel,
            clock: rx_clock,
            delay_p50_ns: rx_delay.percentile_ns(50),
            delay_p99_ns: rx_delay.percentile_ns(99),
            delay_max_ns: rx_delay.max_ns(),
        });
    }
    if !windows.is_empty() {
        let n = windows.len() as f64;
        c.send_rate = rate_sum / n;
        c.overhead_pct = overhead_sum / n;
    }
    c.throughput = per_second(c.request_count.saturating_mul(batch), c.duration_ns);
    if sequences > 0 {
        c.sequences = Some((sequences, per_second(sequences, c.duration_ns)));
    }
    c.avg_latency_ns = latency.mean_ns();
    c.std_latency_us = latency.std_dev_us();
    c.min_latency_ns = latency.min_ns();
    c.max_latency_ns = latency.max_ns();
    c.percentiles_ns = percentile_set(percentile)
        .into_iter()
        .map(|p| (p, latency.percentile_ns(p)))
        .collect();
    let completed = latency.count();
    c.avg_request_ns = request_sum.checked_div(completed).unwrap_or(0);
    c.avg_send_ns = send_sum.checked_div(completed).unwrap_or(0);
    c.avg_recv_ns = recv_sum.checked_div(completed).unwrap_or(0);
    c.stabilizing_latency_ns = match percentile {
        Some(p) => c.percentile(p).unwrap_or(0),
        None => c.avg_latency_ns,
    };
    c
}

/// Responses of a decoupled model over a point's windows: count, rate, and the two
/// latencies perf_analyzer leaves to offline tools (time to first response, time between
/// responses).
pub fn response_stats(windows: &[WindowStats]) -> ResponseStats {
    let (mut count, mut duration, mut requests) = (0u64, 0u64, 0u64);
    let (mut first_sum, mut gap_sum, mut multi) = (0u64, 0u64, 0u64);
    for w in windows {
        count += w.response_count;
        duration = duration.saturating_add(w.duration_ns);
        requests += w.request_count;
        first_sum = first_sum.saturating_add(w.first_response_ns_sum);
        gap_sum = gap_sum.saturating_add(w.response_gap_ns_sum);
        multi += w.multi_response_count;
    }
    ResponseStats {
        count,
        throughput: per_second(count, duration),
        avg_first_response_ns: first_sum.checked_div(requests).unwrap_or(0),
        avg_response_gap_ns: gap_sum.checked_div(multi).unwrap_or(0),
    }
}

/// Sums the windows' server deltas; `None` unless every window has one.
pub fn merge_server(windows: &[WindowStats]) -> Option<ServerStats> {
    let mut merged: Option<ServerStats> = None;
    for w in windows {
        let s = w.server.as_ref()?;
        match merged.as_mut() {
            None => merged = Some(s.clone()),
            Some(m) => {
                m.model.add(&s.model);
                super::server_stats::merge_composing(&mut m.composing, &s.composing);
            }
        }
    }
    merged
}

/// Client CPU time over the worker-time available in the window, in %, capped at 100.
fn overhead_pct(w: &WindowStats) -> f64 {
    let capacity_ns = w.duration_ns as f64 * f64::from(w.workers);
    if capacity_ns <= 0.0 {
        return 0.0;
    }
    (w.client_cpu_ns as f64 / capacity_ns * 100.0).min(100.0)
}

pub(crate) fn per_second(count: u64, duration_ns: u64) -> f64 {
    if duration_ns == 0 {
        return 0.0;
    }
    count as f64 / (duration_ns as f64 / NS_PER_S)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::RequestRecord;
    use crate::measure::server_stats::ModelStats;

    /// An ok record starting at `start` (ns) with send 10% of the latency, receive 20%.
    fn rec(start: u64, latency: u64, ok: bool) -> RequestRecord {
        RequestRecord {
            start_ns: start,
            send_end_ns: start + latency / 10,
            recv_start_ns: start + latency - latency / 5,
            end_ns: start + latency,
            ok,
            ..RequestRecord::default()
        }
    }

    fn window(start: u64, dur: u64, latencies: &[u64], failed: usize) -> WindowRecords {
        let mut records: Vec<RequestRecord> = latencies
            .iter()
            .rev()
            .map(|&l| rec(start + 1, l, true))
            .collect();
        records.extend((0..failed).map(|_| rec(start + 1, 5, false)));
        WindowRecords {
            start_ns: start,
            end_ns: start + dur,
            records,
            sent: latencies.len() as u64 + failed as u64 + 1,
            client_cpu_ns: dur / 2,
            workers: 2,
            ..WindowRecords::default()
        }
    }

    #[test]
    fn window_stats_counts_and_sorts() {
        let w = window_stats(&window(1_000, 1_000_000_000, &[3_000, 1_000, 2_000], 2));
        assert_eq!((w.request_count, w.error_count, w.sent), (3, 2, 6));
        assert_eq!(w.latency, Dist::of([1_000, 2_000, 3_000]));
        assert_eq!(w.duration_ns, 1_000_000_000);
        assert_eq!(
            (w.send_ns_sum, w.recv_ns_sum, w.request_ns_sum),
            (600, 1_200, 6_000)
        );
        assert_eq!(w.throughput(1), 3.0);
        assert_eq!(w.throughput(4), 12.0);
        assert_eq!(w.stabilizing_latency_ns(None), 2_000);
        assert_eq!(w.stabilizing_latency_ns(Some(99)), 3_000);
        assert_eq!(w.std_latency_us(), 1);
        let empty = window_stats(&window(0, 0, &[], 1));
        assert_eq!(empty.throughput(1), 0.0);
        assert_eq!(empty.stabilizing_latency_ns(None), u64::MAX);
    }

    #[test]
    fn percentile_set_sorted_unique() {
        assert_eq!(percentile_set(None), vec![50, 90, 95, 99]);
        assert_eq!(percentile_set(Some(95)), vec![50, 90, 95, 99]);
        assert_eq!(percentile_set(Some(75)), vec![50, 75, 90, 95, 99]);
        assert_eq!(percentile_set(Some(1)), vec![1, 50, 90, 95, 99]);
    }

    #[test]
    fn merge_pools_windows() {
        let a = window_stats(&window(0, 1_000_000_000, &[1_000, 3_000], 1));
        let b = window_stats(&window(0, 3_000_000_000, &[2_000, 10_000], 0));
        let c = merge(&[a, b], 2, Some(75));
        assert_eq!((c.request_count, c.error_count, c.sent), (4, 1, 7));
        assert_eq!(c.duration_ns, 4_000_000_000);
        assert_eq!(c.throughput, 2.0); // 4 requests x batch 2 / 4 s
        assert_eq!(c.send_rate, (4.0 + 1.0) / 2.0); // mean of 4/s and 3/3s
        assert_eq!(c.avg_latency_ns, 4_000);
        assert_eq!((c.min_latency_ns, c.max_latency_ns), (1_000, 10_000));
        assert_eq!(
            c.percentiles_ns,
            vec![
                (50, 3_000),
                (75, 3_000),
                (90, 10_000),
                (95, 10_000),
                (99, 10_000)
            ]
        );
        assert_eq!(c.stabilizing_latency_ns, 3_000);
        assert_eq!(
            (c.avg_request_ns, c.avg_send_ns, c.avg_recv_ns),
            (4_000, 400, 800)
        );
        assert_eq!(c.overhead_pct, 25.0); // cpu = dur/2 over 2 workers
        assert_eq!(
            merge(&[], 1, None),
            ClientStats {
                percentiles_ns: vec![(50, 0), (90, 0), (95, 0), (99, 0)],
                ..ClientStats::default()
            }
        );
    }

    #[test]
    fn merge_stabilizes_on_mean_without_percentile() {
        let a = window_stats(&window(0, 1_000_000_000, &[1_000, 2_000, 6_000], 0));
        let c = merge(std::slice::from_ref(&a), 1, None);
        assert_eq!(c.stabilizing_latency_ns, 3_000);
        assert_eq!(c.std_latency_us, 2);
    }

    #[test]
    fn overhead_capped_and_safe() {
        let mut w = WindowStats {
            duration_ns: 100,
            workers: 1,
            client_cpu_ns: 500,
            ..Default::default()
        };
        assert_eq!(overhead_pct(&w), 100.0);
        w.workers = 0;
        assert_eq!(overhead_pct(&w), 0.0);
    }

    #[test]
    fn clamp_uses_request_span() {
        let recs = window(1_000, 2_000_000_000, &[500, 900], 0);
        let mut w = window_stats(&recs);
        let (first, last) = request_span(&recs).unwrap();
        assert_eq!((first, last), (1_001, 1_901));
        clamp_to_requests(&mut w, first, last);
        assert_eq!((w.start_ns, w.end_ns, w.duration_ns), (1_001, 1_901, 900));
        assert!((w.throughput(1) - 2.0 / 900e-9).abs() < 1.0);
        clamp_to_requests(&mut w, 5, 5);
        assert_eq!(w.duration_ns, 900);
        assert_eq!(request_span(&WindowRecords::default()), None);
    }

    #[test]
    fn merge_server_needs_every_window() {
        let stats = |n: u64| ServerStats {
            model: ModelStats {
                name: "m".into(),
                inference_count: n,
                ..Default::default()
            },
            cache_enabled: false,
            composing: Vec::new(),
        };
        let mut a = WindowStats {
            server: Some(stats(2)),
            ..Default::default()
        };
        let b = WindowStats {
            server: Some(stats(3)),
            ..Default::default()
        };
        let merged = merge_server(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(merged.model.inference_count, 5);
        a.server = None;
        assert_eq!(merge_server(&[a, b]), None);
        assert_eq!(merge_server(&[]), None);
    }
}
