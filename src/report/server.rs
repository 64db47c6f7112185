//! Server-side averages shared by the console "Server:" block and the CSV server columns.

use crate::measure::server_stats::ServerStats;
use crate::report::fmt::us;
use std::fmt::Write as _;

/// Mean durations (ns) derived from a server-stats delta; each is 0 when its count is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ServerAverages {
    /// Whole request as the server saw it (success time / success count).
    pub request_ns: u64,
    pub queue_ns: u64,
    pub compute_input_ns: u64,
    pub compute_infer_ns: u64,
    pub compute_output_ns: u64,
    /// Input + infer + output time over the compute-input count.
    pub compute_ns: u64,
    pub cache_hit_ns: u64,
    pub cache_miss_ns: u64,
    /// (cache hit + cache miss + compute time) over (compute count + cache hit count).
    pub cache_compute_ns: u64,
}

impl ServerAverages {
    /// perf_analyzer fails when the three compute counts differ; we divide by the
    /// compute-input count (the same number whenever the server is consistent).
    pub(crate) fn of(s: &ServerStats) -> ServerAverages {
        let m = &s.model;
        let compute_total = m
            .compute_input
            .ns
            .saturating_add(m.compute_infer.ns)
            .saturating_add(m.compute_output.ns);
        let compute_count = m.compute_input.count;
        let cache_total = compute_total
            .saturating_add(m.cache_hit.ns)
            .saturating_add(m.cache_miss.ns);
        ServerAverages {
            request_ns: m.success.avg_ns(),
            queue_ns: m.queue.avg_ns(),
            compute_input_ns: m.compute_input.avg_ns(),
            compute_infer_ns: m.compute_infer.avg_ns(),
            compute_output_ns: m.compute_output.avg_ns(),
            compute_ns: compute_total.checked_div(compute_count).unwrap_or(0),
            cache_hit_ns: m.cache_hit.avg_ns(),
            cache_miss_ns: m.cache_miss.avg_ns(),
            cache_compute_ns: cache_total
                .checked_div(compute_count.saturating_add(m.cache_hit.count))
                .unwrap_or(0),
        }
    }
}

/// The console "  Server: " block (spec §3.1), ending with perf_analyzer's blank line.
/// Averages are truncated to µs before the overhead subtraction, as perf_analyzer does.
pub(crate) fn server_block(s: &ServerStats) -> String {
    let m = &s.model;
    let mut out = String::from("  Server: \n");
    if m.success.count == 0 {
        out.push_str("    Request count: 0\n");
        return out;
    }
    let a = ServerAverages::of(s);
    let (request, queue) = (us(a.request_ns), us(a.queue_ns));
    let _ = writeln!(out, "    Inference count: {}", m.inference_count);
    let _ = writeln!(out, "    Execution count: {}", m.execution_count);
    if s.cache_enabled {
        let _ = writeln!(out, "    Cache hit count: {}", m.cache_hit.count);
        let _ = writeln!(out, "    Cache miss count: {}", m.cache_miss.count);
    }
    let _ = writeln!(out, "    Successful request count: {}", m.success.count);
    let _ = write!(out, "    Avg request latency: {request} usec");
    let (cin, cinf, cout) = (
        us(a.compute_input_ns),
        us(a.compute_infer_ns),
        us(a.compute_output_ns),
    );
    if s.cache_enabled {
        let cache_compute = us(a.cache_compute_ns);
        let overhead = request.saturating_sub(queue).saturating_sub(cache_compute);
        let (hit, miss) = (us(a.cache_hit_ns), us(a.cache_miss_ns));
        let _ = writeln!(
            out,
            " (overhead {overhead} usec + queue {queue} usec + cache hit/miss {cache_compute} usec)"
        );
        let _ = writeln!(out, "      Average Cache Hit Latency: {hit} usec");
        let _ = writeln!(
            out,
            "      Average Cache Miss Latency: {} usec (cache lookup/insertion {miss} usec + \
             compute input {cin} usec + compute infer {cinf} usec + compute output {cout} usec)",
            miss + us(a.compute_ns)
        );
    } else {
        let overhead = request
            .saturating_sub(queue)
            .saturating_sub(us(a.compute_ns));
        let _ = writeln!(
            out,
            " (overhead {overhead} usec + queue {queue} usec + compute input {cin} usec + \
             compute infer {cinf} usec + compute output {cout} usec)"
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::server_stats::{ModelStats, StatDuration};

    fn d(count: u64, ns: u64) -> StatDuration {
        StatDuration { count, ns }
    }

    /// The spec §3.1 example: 5850 requests, 4500 us each (30 + 1200 + 50 + 3200 + 20).
    pub(crate) fn spec_example(cache_enabled: bool) -> ServerStats {
        ServerStats {
            model: ModelStats {
                name: "m".into(),
                version: "1".into(),
                inference_count: 5850,
                execution_count: 1470,
                success: d(5850, 5850 * 4_500_000),
                queue: d(5850, 5850 * 1_200_000),
                compute_input: d(1470, 1470 * 50_000),
                compute_infer: d(1470, 1470 * 3_200_000),
                compute_output: d(1470, 1470 * 20_000),
                ..ModelStats::default()
            },
            cache_enabled,
        }
    }

    #[test]
    fn block_matches_spec_example() {
        let want = "  Server: \n    Inference count: 5850\n    Execution count: 1470\n    \
            Successful request count: 5850\n    Avg request latency: 4500 usec (overhead 30 usec \
            + queue 1200 usec + compute input 50 usec + compute infer 3200 usec + compute output \
            20 usec)\n\n";
        assert_eq!(server_block(&spec_example(false)), want);
    }

    #[test]
    fn block_with_cache() {
        let mut s = spec_example(true);
        s.model.cache_hit = d(150, 150 * 10_000);
        s.model.cache_miss = d(1470, 1470 * 5_000);
        // cache/compute = (3270 us x 1470 + 10 us x 150 + 5 us x 1470) / (1470 + 150)
        let combined = (1470 * 3_270_000u64 + 150 * 10_000 + 1470 * 5_000) / 1620 / 1000;
        let text = server_block(&s);
        let want = format!(
            "    Cache hit count: 150\n    Cache miss count: 1470\n    Successful request count: \
             5850\n    Avg request latency: 4500 usec (overhead {} usec + queue 1200 usec + \
             cache hit/miss {combined} usec)\n      Average Cache Hit Latency: 10 usec\n      \
             Average Cache Miss Latency: 3275 usec (cache lookup/insertion 5 usec + compute \
             input 50 usec + compute infer 3200 usec + compute output 20 usec)\n\n",
            4500 - 1200 - combined
        );
        assert!(text.ends_with(&want), "{text}");
    }

    #[test]
    fn zero_counts_and_negative_overhead() {
        let empty = ServerStats::default();
        assert_eq!(server_block(&empty), "  Server: \n    Request count: 0\n");
        assert_eq!(ServerAverages::of(&empty), ServerAverages::default());
        // Server parts larger than the request time: overhead is clamped to 0.
        let mut s = spec_example(false);
        s.model.queue = d(5850, 5850 * 9_000_000);
        assert!(server_block(&s).contains("(overhead 0 usec + queue 9000 usec"));
    }
}
